/* Expert-parallel process groups: Megatron-Core's two rank generators (dense and
 * expert) over one order string. */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "spsim/topology.h"

void sp_topo_moe_free(sp_topo_moe *moe)
{
  if (moe == NULL) return;
  sp_topo_free(moe->dense);
  sp_topo_free(moe->expert);
  g_free(moe);
}

/* Megatron's RankGenerator knows these tokens (parallel_state.py, name_to_size). */
static const char *const megatron_tokens[] = { "tp", "cp", "ep", "dp", "pp", NULL };

sp_topo_moe *sp_topo_moe_new(const char *order, const char *spec, GError **error)
{
  if (order == NULL || *order == '\0') {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "empty order string: write axes fastest first, e.g. tp-cp-ep-dp-pp");
    return NULL;
  }
  g_auto(GStrv) toks = g_strsplit(order, "-", -1);
  guint n = g_strv_length(toks);
  if (!g_strv_contains((const char *const *)toks, "ep")) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "order '%s' has no ep token (e.g. tp-cp-ep-dp-pp)", order);
    return NULL;
  }
  for (guint i = 0; i < n; i++) {
    if (!g_strv_contains(megatron_tokens, toks[i])) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "order '%s': with expert parallelism the tokens are Megatron-Core's "
                  "tp, cp, ep, dp and pp (got '%s')", order, toks[i]);
      return NULL;
    }
    for (guint j = 0; j < i; j++)
      if (strcmp(toks[i], toks[j]) == 0) {
        g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "axis '%s' is given twice: axis names must be unique", toks[i]);
        return NULL;
      }
  }
  g_auto(GStrv) names = NULL;
  g_autofree int32_t *vals = NULL;
  guint m = 0;
  if (!sp_topo_parse_assignments(spec, &names, &vals, &m, error)) return NULL;
  int32_t size[5] = { 1, 1, 1, 1, 1 }, etp = 0; /* tp, cp, ep, dp, pp */
  for (guint j = 0; j < m; j++) {
    if (vals[j] < 1) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "axis '%s' has size %d: every axis needs a size >= 1", names[j], vals[j]);
      return NULL;
    }
    for (guint k = 0; k < j; k++)
      if (strcmp(names[k], names[j]) == 0) {
        g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "axis '%s' is given twice: axis names must be unique", names[j]);
        return NULL;
      }
    if (strcmp(names[j], "etp") == 0) { etp = vals[j]; continue; }
    if (!g_strv_contains((const char *const *)toks, names[j])) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "axis '%s' has a size but is not in the order '%s'", names[j], order);
      return NULL;
    }
    for (int t = 0; t < 5; t++)
      if (strcmp(names[j], megatron_tokens[t]) == 0) size[t] = vals[j];
  }
  int32_t tp = size[0], cp = size[1], ep = size[2], dp = size[3], pp = size[4];
  if (etp == 0) etp = tp; /* expert_tensor_parallel_size defaults to tensor_model_parallel_size */
  int64_t world = (int64_t)tp * cp * dp * pp;
  if (world > G_MAXINT32) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "the world size (product of the axis sizes) exceeds %d ranks", G_MAXINT32);
    return NULL;
  }
  if (etp == tp && ((int64_t)dp * cp) % ep != 0) {
    g_autoptr(GString) divs = g_string_new(NULL);
    for (int64_t d = 1; d <= (int64_t)dp * cp && divs->len < 80; d++)
      if (((int64_t)dp * cp) % d == 0) g_string_append_printf(divs, "%s%" G_GINT64_FORMAT, divs->len ? ", " : "", d);
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "ep=%d must divide dp x cp = %d x %d: Megatron-Core folds the expert-"
                "parallel groups inside the data-parallel groups (choose ep among %s)", ep, dp, cp, divs->str);
    return NULL;
  }
  int64_t etmp = (int64_t)etp * ep * pp;
  if (world % etmp != 0) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "etp x ep x pp = %d x %d x %d does not divide the world tp x cp x dp "
                "x pp = %" G_GINT64_FORMAT, etp, ep, pp, world);
    return NULL;
  }
  int32_t edp = (int32_t)(world / etmp);
  if (!g_str_has_suffix(order, "pp") && pp > 1 && edp != dp) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "order '%s' does not end in pp: Megatron-Core then needs the expert "
                "data-parallel size (%d) equal to dp (%d); put pp last", order, edp, dp);
    return NULL;
  }
  int32_t dsz[SP_TOPO_MAX_AXES], esz[SP_TOPO_MAX_AXES];
  const char *enames[SP_TOPO_MAX_AXES];
  guint ne = 0, nd = 0;
  g_autoptr(GString) eorder = g_string_new(NULL), dorder = g_string_new(NULL);
  for (guint i = 0; i < n && i < SP_TOPO_MAX_AXES; i++) {
    const char *t = toks[i];
    if (strcmp(t, "ep") != 0) { /* the dense generator has ep = 1: leave the axis out */
      dsz[nd++] = strcmp(t, "tp") == 0 ? tp : strcmp(t, "cp") == 0 ? cp : strcmp(t, "dp") == 0 ? dp : pp;
      g_string_append_printf(dorder, "%s%s", dorder->len ? "-" : "", t);
    }
    if (strcmp(t, "cp") == 0) continue; /* the expert generator has cp = 1 */
    enames[ne] = strcmp(t, "tp") == 0 ? "etp" : strcmp(t, "dp") == 0 ? "edp" : t;
    esz[ne] = strcmp(t, "tp") == 0 ? etp : strcmp(t, "ep") == 0 ? ep : strcmp(t, "dp") == 0 ? edp : pp;
    g_string_append_printf(eorder, "%s%s", ne ? "-" : "", enames[ne]);
    ne++;
  }
  /* a missing tp, dp or pp token is 1, as RankGenerator appends it */
  static const char *const need[] = { "etp", "edp", "pp" };
  for (int k = 0; k < 3; k++) {
    gboolean have = FALSE;
    for (guint i = 0; i < ne; i++) have |= strcmp(enames[i], need[k]) == 0;
    if (!have) {
      enames[ne] = need[k];
      esz[ne] = k == 0 ? etp : k == 1 ? edp : pp;
      g_string_append_printf(eorder, "-%s", need[k]);
      ne++;
    }
  }
  sp_topo_moe *moe = g_new0(sp_topo_moe, 1);
  *moe = (sp_topo_moe){ .tp = tp, .cp = cp, .dp = dp, .pp = pp, .ep = ep, .etp = etp, .edp = edp };
  if (nd == 0) { /* the order was "ep" alone */
    dsz[nd++] = 1;
    g_string_append(dorder, "dp");
  }
  moe->dense = sp_topo_new_from_order(dorder->str, dsz, nd, error);
  if (moe->dense != NULL) moe->expert = sp_topo_new_from_order(eorder->str, esz, ne, error);
  if (moe->expert == NULL) {
    sp_topo_moe_free(moe);
    return NULL;
  }
  return moe;
}
