/* Process topologies: named row-major axes, ranks and coordinates, groups along axes,
 * rank labels, and ordered factorisations of a world size. All arithmetic: no
 * rank -> coordinate table is stored, so a topology of any int32 world is cheap.
 * The pipeline grid and the model/pipeline/data initialiser, views over a topology,
 * are in topology_grid.c. */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "spsim/topology.h"
#include "topo_private.h"

/* ------------------------------------------------------------------ groups */

void sp_groups_free(sp_groups *groups)
{
  if (groups == NULL) return;
  g_free(groups->ranks);
  g_free(groups);
}

const int32_t *sp_groups_row(const sp_groups *groups, int32_t g)
{
  g_return_val_if_fail(groups != NULL && g >= 0 && g < groups->n_groups, NULL);
  return groups->ranks + (gsize)g * (gsize)groups->group_size;
}

gboolean sp_groups_find(const sp_groups *groups, int32_t rank, int32_t *group_out, int32_t *pos_out)
{
  g_return_val_if_fail(groups != NULL, FALSE);
  for (int32_t g = 0; g < groups->n_groups; g++) {
    const int32_t *row = groups->ranks + (gsize)g * (gsize)groups->group_size;
    for (int32_t i = 0; i < groups->group_size; i++) {
      if (row[i] == rank) {
        if (group_out) *group_out = g;
        if (pos_out) *pos_out = i;
        return TRUE;
      }
    }
  }
  return FALSE;
}

/* Allocate an n_groups x group_size list, refusing more than SP_TOPO_MAX_LIST entries. */
sp_groups *sp_t_groups_alloc(int64_t n_groups, int64_t group_size, GError **error)
{
  if (n_groups < 0 || group_size < 0 || n_groups * group_size > SP_TOPO_MAX_LIST) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "a list of %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                " ranks is too large to build (at most %d entries): use a smaller world",
                n_groups, group_size, SP_TOPO_MAX_LIST);
    return NULL;
  }
  sp_groups *gr = g_new0(sp_groups, 1);
  gr->n_groups = (int32_t)n_groups;
  gr->group_size = (int32_t)group_size;
  gr->ranks = g_new0(int32_t, MAX(1, n_groups * group_size));
  return gr;
}

/* ---------------------------------------------------------------- topology */

gboolean sp_t_check_world_listable(const sp_topo *t, GError **error)
{
  if (t->world > SP_TOPO_MAX_LIST) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "the world has %d ranks: listing groups is limited to %d ranks", t->world,
                SP_TOPO_MAX_LIST);
    return FALSE;
  }
  return TRUE;
}

sp_topo *sp_topo_new(guint n_axes, const char *const *names, const int32_t *sizes, GError **error)
{
  if (n_axes == 0) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "a topology needs at least one axis (e.g. data=8)");
    return NULL;
  }
  if (n_axes > SP_TOPO_MAX_AXES) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%u axes given: at most %d are supported", n_axes, SP_TOPO_MAX_AXES);
    return NULL;
  }
  g_return_val_if_fail(names != NULL && sizes != NULL, NULL);
  int64_t world = 1;
  for (guint i = 0; i < n_axes; i++) {
    const char *nm = names[i];
    if (nm == NULL || nm[0] == '\0') {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "axis %u has an empty name: every axis needs a name (e.g. tensor=2)", i);
      return NULL;
    }
    if (strlen(nm) > SP_TOPO_MAX_NAME) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "axis name '%.20s...' is longer than %d bytes", nm, SP_TOPO_MAX_NAME);
      return NULL;
    }
    for (guint j = 0; j < i; j++) {
      if (strcmp(names[j], nm) == 0) {
        g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                    "axis '%s' is given twice: axis names must be unique", nm);
        return NULL;
      }
    }
    if (sizes[i] < 1) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "axis '%s' has size %d: every axis needs a size >= 1", nm, sizes[i]);
      return NULL;
    }
    world *= sizes[i];
    if (world > G_MAXINT32) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "the world size (product of the axis sizes) exceeds %d ranks: use smaller axes",
                  G_MAXINT32);
      return NULL;
    }
  }
  sp_topo *t = g_new0(sp_topo, 1);
  t->n = n_axes;
  t->world = (int32_t)world;
  int32_t stride = 1;
  for (guint k = n_axes; k-- > 0;) {
    t->names[k] = g_strdup(names[k]);
    t->sizes[k] = sizes[k];
    t->strides[k] = stride;
    stride = (int32_t)((int64_t)stride * sizes[k]); /* <= world, checked above */
  }
  return t;
}

gboolean sp_topo_parse_assignments(const char *spec, char ***names_out, int32_t **values_out,
                                   guint *n_out, GError **error)
{
  g_return_val_if_fail(names_out != NULL && values_out != NULL && n_out != NULL, FALSE);
  *names_out = NULL;
  *values_out = NULL;
  *n_out = 0;
  g_autofree char *blank = spec ? g_strstrip(g_strdup(spec)) : NULL;
  if (blank == NULL || blank[0] == '\0') {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "empty list: write name=value[,name=value...] (e.g. pipe=2,data=2)");
    return FALSE;
  }
  g_auto(GStrv) items = g_strsplit(spec, ",", -1);
  guint n = g_strv_length(items);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  g_autofree int32_t *values = g_new0(int32_t, MAX(n, 1u));
  for (guint i = 0; i < n; i++) {
    char *item = g_strstrip(items[i]);
    if (item[0] == '\0') {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "empty item %u in '%s': write name=value[,name=value...]", i + 1, spec);
      return FALSE;
    }
    char *eq = strchr(item, '=');
    if (eq == NULL) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "'%s' has no value: write %s=N", item, item);
      return FALSE;
    }
    *eq = '\0';
    char *name = g_strstrip(item);
    char *val = g_strstrip(eq + 1);
    if (name[0] == '\0') {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "'=%s' has no name: write name=%s", val, val);
      return FALSE;
    }
    gint64 v = 0;
    g_autoptr(GError) perr = NULL;
    if (val[0] == '\0' || !g_ascii_string_to_signed(val, 10, G_MININT32, G_MAXINT32, &v, &perr)) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "'%s=%s': the value must be an integer between %d and %d (e.g. %s=2)", name,
                  val, G_MININT32, G_MAXINT32, name);
      return FALSE;
    }
    g_ptr_array_add(names, g_strdup(name));
    values[i] = (int32_t)v;
  }
  g_ptr_array_add(names, NULL);
  *names_out = (char **)g_ptr_array_free(g_steal_pointer(&names), FALSE);
  *values_out = g_steal_pointer(&values);
  *n_out = n;
  return TRUE;
}

sp_topo *sp_topo_new_from_spec(const char *spec, GError **error)
{
  g_auto(GStrv) names = NULL;
  g_autofree int32_t *sizes = NULL;
  guint n = 0;
  if (!sp_topo_parse_assignments(spec, &names, &sizes, &n, error)) return NULL;
  return sp_topo_new(n, (const char *const *)names, sizes, error);
}

/* Split a Megatron order string into tokens (fastest first); NULL on an empty token. */
static char **split_order(const char *order, guint *n_out, GError **error)
{
  if (order == NULL || order[0] == '\0') {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "empty order string: write axes fastest first, e.g. tp-cp-ep-dp-pp");
    return NULL;
  }
  char **toks = g_strsplit(order, "-", -1);
  guint n = g_strv_length(toks);
  for (guint i = 0; i < n; i++) {
    g_strstrip(toks[i]);
    if (toks[i][0] == '\0') {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "order '%s' has an empty axis name at position %u: write e.g. tp-dp-pp", order,
                  i + 1);
      g_strfreev(toks);
      return NULL;
    }
  }
  *n_out = n;
  return toks;
}

sp_topo *sp_topo_new_from_order(const char *order, const int32_t *sizes, guint n_sizes, GError **error)
{
  guint n = 0;
  g_auto(GStrv) toks = split_order(order, &n, error);
  if (toks == NULL) return NULL;
  if (n != n_sizes) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "order '%s' names %u axes but %u sizes were given", order, n, n_sizes);
    return NULL;
  }
  if (n > SP_TOPO_MAX_AXES) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%u axes given: at most %d are supported", n, SP_TOPO_MAX_AXES);
    return NULL;
  }
  /* Order strings are fastest first; topologies are stored slowest first. */
  const char *names[SP_TOPO_MAX_AXES];
  int32_t rsizes[SP_TOPO_MAX_AXES];
  for (guint i = 0; i < n; i++) {
    names[n - 1 - i] = toks[i];
    rsizes[n - 1 - i] = sizes[i];
  }
  return sp_topo_new(n, names, rsizes, error);
}

sp_topo *sp_topo_new_from_order_spec(const char *order, const char *spec, GError **error)
{
  guint n = 0;
  g_auto(GStrv) toks = split_order(order, &n, error);
  if (toks == NULL) return NULL;
  g_auto(GStrv) names = NULL;
  g_autofree int32_t *vals = NULL;
  guint m = 0;
  if (!sp_topo_parse_assignments(spec, &names, &vals, &m, error)) return NULL;
  for (guint j = 0; j < m; j++) {
    if (!g_strv_contains((const char *const *)toks, names[j])) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "axis '%s' has a size but is not in the order '%s'", names[j], order);
      return NULL;
    }
    for (guint k = 0; k < j; k++) {
      if (strcmp(names[k], names[j]) == 0) {
        g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                    "axis '%s' is given twice: axis names must be unique", names[j]);
        return NULL;
      }
    }
  }
  g_autofree int32_t *sizes = g_new0(int32_t, MAX(n, 1u));
  for (guint i = 0; i < n; i++) {
    gboolean found = FALSE;
    for (guint j = 0; j < m; j++) {
      if (strcmp(names[j], toks[i]) == 0) {
        sizes[i] = vals[j];
        found = TRUE;
      }
    }
    if (!found) sizes[i] = 1; /* an axis without a size is not split, as Megatron-LM's RankGenerator takes it */
  }
  return sp_topo_new_from_order(order, sizes, n, error);
}

void sp_topo_free(sp_topo *topo)
{
  if (topo == NULL) return;
  for (guint i = 0; i < topo->n; i++) g_free(topo->names[i]);
  g_free(topo);
}

sp_topo *sp_topo_copy(const sp_topo *topo)
{
  g_return_val_if_fail(topo != NULL, NULL);
  sp_topo *t = g_new0(sp_topo, 1);
  *t = *topo;
  for (guint i = 0; i < t->n; i++) t->names[i] = g_strdup(topo->names[i]);
  return t;
}

int32_t sp_topo_world(const sp_topo *topo)
{
  g_return_val_if_fail(topo != NULL, 0);
  return topo->world;
}

guint sp_topo_n_axes(const sp_topo *topo)
{
  g_return_val_if_fail(topo != NULL, 0);
  return topo->n;
}

const char *sp_topo_axis_name(const sp_topo *topo, guint i)
{
  g_return_val_if_fail(topo != NULL, NULL);
  return i < topo->n ? topo->names[i] : NULL;
}

int32_t sp_topo_axis_size(const sp_topo *topo, guint i)
{
  g_return_val_if_fail(topo != NULL, 0);
  return i < topo->n ? topo->sizes[i] : 0;
}

int sp_topo_axis_index(const sp_topo *topo, const char *name)
{
  g_return_val_if_fail(topo != NULL, -1);
  if (name == NULL) return -1;
  for (guint i = 0; i < topo->n; i++)
    if (strcmp(topo->names[i], name) == 0) return (int)i;
  return -1;
}

int32_t sp_topo_get_dim(const sp_topo *topo, const char *name)
{
  int i = sp_topo_axis_index(topo, name);
  return i < 0 ? 0 : topo->sizes[i];
}

/* "pipe, data, tensor" for error messages. */
static char *axes_list(const sp_topo *t)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < t->n; i++) g_string_append_printf(s, "%s%s", i ? ", " : "", t->names[i]);
  return g_string_free(s, FALSE);
}

static int axis_index_strict(const sp_topo *t, const char *name, GError **error)
{
  int i = sp_topo_axis_index(t, name);
  if (i < 0) {
    g_autofree char *known = axes_list(t);
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "unknown axis '%s' (the axes are: %s)",
                name ? name : "(null)", known);
  }
  return i;
}

int32_t sp_topo_get_dim_strict(const sp_topo *topo, const char *name, GError **error)
{
  g_return_val_if_fail(topo != NULL, -1);
  int i = axis_index_strict(topo, name, error);
  return i < 0 ? -1 : topo->sizes[i];
}

static gboolean check_value(const sp_topo *t, guint axis, int32_t v, GError **error)
{
  if (v < 0 || v >= t->sizes[axis]) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%s=%d is out of range: axis '%s' has indices 0..%d", t->names[axis], v,
                t->names[axis], t->sizes[axis] - 1);
    return FALSE;
  }
  return TRUE;
}

gboolean sp_t_check_rank(const sp_topo *t, int32_t rank, GError **error)
{
  if (rank < 0 || rank >= t->world) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "rank %d is out of range: the world has ranks 0..%d", rank, t->world - 1);
    return FALSE;
  }
  return TRUE;
}

int32_t sp_topo_rank(const sp_topo *topo, const int32_t *coord, GError **error)
{
  g_return_val_if_fail(topo != NULL && coord != NULL, -1);
  int32_t r = 0;
  for (guint i = 0; i < topo->n; i++) {
    if (!check_value(topo, i, coord[i], error)) return -1;
    r += coord[i] * topo->strides[i];
  }
  return r;
}

/* Map (names, values) onto axis indices; rejects unknown/repeated axes and bad values. */
gboolean sp_t_resolve_partial(const sp_topo *t, guint n, const char *const *names,
                              const int32_t *values, int *idx_out, GError **error)
{
  for (guint j = 0; j < n; j++) {
    int i = axis_index_strict(t, names[j], error);
    if (i < 0) return FALSE;
    for (guint k = 0; k < j; k++) {
      if (idx_out[k] == i) {
        g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "axis '%s' is given twice", names[j]);
        return FALSE;
      }
    }
    if (values != NULL && !check_value(t, (guint)i, values[j], error)) return FALSE;
    idx_out[j] = i;
  }
  return TRUE;
}

int32_t sp_topo_rank_named(const sp_topo *topo, guint n, const char *const *names,
                           const int32_t *values, GError **error)
{
  g_return_val_if_fail(topo != NULL, -1);
  if (n > topo->n) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%u coordinates given for a topology of %u axes", n, topo->n);
    return -1;
  }
  int idx[SP_TOPO_MAX_AXES];
  if (!sp_t_resolve_partial(topo, n, names, values, idx, error)) return -1;
  if (n != topo->n) {
    for (guint i = 0; i < topo->n; i++) {
      gboolean have = FALSE;
      for (guint j = 0; j < n; j++) have = have || idx[j] == (int)i;
      if (!have) {
        g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                    "axis '%s' has no value: a rank needs every axis (use a filter for a partial "
                    "coordinate)", topo->names[i]);
        return -1;
      }
    }
  }
  int32_t r = 0;
  for (guint j = 0; j < n; j++) r += values[j] * topo->strides[idx[j]];
  return r;
}

gboolean sp_topo_coord(const sp_topo *topo, int32_t rank, int32_t *coord_out, GError **error)
{
  g_return_val_if_fail(topo != NULL && coord_out != NULL, FALSE);
  if (!sp_t_check_rank(topo, rank, error)) return FALSE;
  for (guint i = 0; i < topo->n; i++) coord_out[i] = sp_t_coord_of(topo, rank, i);
  return TRUE;
}

/* Groups along the axes in @mask: ranks equal on every other axis form a group.
 * Group index: row-major over the other axes; position: row-major over the masked axes. */
sp_groups *sp_t_groups_mask(const sp_topo *t, guint32 mask, GError **error)
{
  if (!sp_t_check_world_listable(t, error)) return NULL;
  int64_t gsz = 1;
  for (guint i = 0; i < t->n; i++)
    if (mask & (1u << i)) gsz *= t->sizes[i];
  sp_groups *gr = sp_t_groups_alloc(t->world / gsz, gsz, error);
  if (gr == NULL) return NULL;
  for (int32_t r = 0; r < t->world; r++) {
    int64_t outer = 0, inner = 0;
    for (guint i = 0; i < t->n; i++) {
      int32_t c = sp_t_coord_of(t, r, i);
      if (mask & (1u << i)) inner = inner * t->sizes[i] + c;
      else outer = outer * t->sizes[i] + c;
    }
    gr->ranks[outer * gsz + inner] = r;
  }
  return gr;
}

sp_groups *sp_topo_groups_along(const sp_topo *topo, guint n, const char *const *axes, GError **error)
{
  g_return_val_if_fail(topo != NULL, NULL);
  if (n > topo->n) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%u axes given for a topology of %u axes", n, topo->n);
    return NULL;
  }
  int idx[SP_TOPO_MAX_AXES];
  if (!sp_t_resolve_partial(topo, n, axes, NULL, idx, error)) return NULL;
  guint32 mask = 0;
  for (guint j = 0; j < n; j++) mask |= 1u << idx[j];
  return sp_t_groups_mask(topo, mask, error);
}

sp_groups *sp_topo_axis_groups(const sp_topo *topo, const char *axis, GError **error)
{
  const char *axes[1] = { axis };
  return sp_topo_groups_along(topo, 1, axes, error);
}

int32_t *sp_topo_filter(const sp_topo *topo, guint n, const char *const *names,
                        const int32_t *values, int32_t *n_out, GError **error)
{
  g_return_val_if_fail(topo != NULL && n_out != NULL, NULL);
  *n_out = 0;
  if (n > topo->n) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%u coordinates given for a topology of %u axes", n, topo->n);
    return NULL;
  }
  int idx[SP_TOPO_MAX_AXES];
  if (!sp_t_resolve_partial(topo, n, names, values, idx, error)) return NULL;
  int64_t count = topo->world;
  for (guint j = 0; j < n; j++) count /= topo->sizes[idx[j]];
  if (count > SP_TOPO_MAX_LIST) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "the filter matches %" G_GINT64_FORMAT " ranks: lists are limited to %d ranks",
                count, SP_TOPO_MAX_LIST);
    return NULL;
  }
  int32_t *out = g_new0(int32_t, MAX(count, 1));
  int32_t k = 0;
  for (int32_t r = 0; r < topo->world && k < count; r++) {
    gboolean match = TRUE;
    for (guint j = 0; j < n && match; j++) match = sp_t_coord_of(topo, r, (guint)idx[j]) == values[j];
    if (match) out[k++] = r;
  }
  *n_out = k;
  return out;
}

int32_t *sp_topo_axis_list(const sp_topo *topo, const char *axis, int32_t idx, int32_t *n_out,
                           GError **error)
{
  const char *names[1] = { axis };
  int32_t values[1] = { idx };
  return sp_topo_filter(topo, 1, names, values, n_out, error);
}

char *sp_topo_rank_label(const sp_topo *topo, int32_t rank, const char *const *omit,
                         const char *inner, const char *outer, GError **error)
{
  static const char *const default_omit[] = { "data", "pipe", NULL };
  g_return_val_if_fail(topo != NULL, NULL);
  if (!sp_t_check_rank(topo, rank, error)) return NULL;
  if (omit == NULL) omit = default_omit;
  if (inner == NULL) inner = "_";
  if (outer == NULL) outer = "-";
  /* Width: decimal digits of the world size, as the reference topology's len(str(world)). */
  int width = 1;
  for (int32_t w = topo->world; w >= 10; w /= 10) width++;
  GString *s = g_string_new(NULL);
  gboolean first = TRUE;
  for (guint i = 0; i < topo->n; i++) {
    if (g_strv_contains(omit, topo->names[i])) continue;
    g_string_append_printf(s, "%s%s%s%0*d", first ? "" : outer, topo->names[i], inner, width,
                           sp_t_coord_of(topo, rank, i));
    first = FALSE;
  }
  return g_string_free(s, FALSE);
}

/* ----------------------------------------------------------- factorisations */

static guint64 gcd_u64(guint64 a, guint64 b)
{
  while (b != 0) {
    guint64 r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* C(a + k - 1, a), saturating at G_MAXUINT64. */
static guint64 multiset_count(guint64 a, guint64 k)
{
  guint64 c = 1;
  for (guint64 i = 1; i <= a; i++) {
    /* c = C(k-1+i-1, i-1); next = c * (k-1+i) / i, exact: reduce by gcd first. */
    guint64 g = gcd_u64(c, i);
    guint64 num = (k - 1 + i) / (i / g);
    guint64 cc = c / g;
    if (cc != 0 && num > G_MAXUINT64 / cc) return G_MAXUINT64;
    c = cc * num;
  }
  return c;
}

guint64 sp_factorization_count(int32_t n, int32_t k)
{
  if (n < 1 || k < 1) return 0;
  guint64 total = 1;
  int32_t rem = n;
  for (int32_t p = 2; (int64_t)p * p <= rem; p++) {
    guint64 a = 0;
    while (rem % p == 0) {
      rem /= p;
      a++;
    }
    if (a > 0) {
      guint64 c = multiset_count(a, (guint64)k);
      if (c != 0 && total > G_MAXUINT64 / c) return G_MAXUINT64;
      total *= c;
    }
  }
  if (rem > 1) {
    guint64 c = (guint64)k; /* C(k, 1) */
    if (total > G_MAXUINT64 / c) return G_MAXUINT64;
    total *= c;
  }
  return total;
}

typedef struct {
  const int32_t *divs; /* divisors of n, ascending */
  guint n_divs;
  int32_t k;
  int32_t *prefix;
  sp_groups *out;
  int32_t row;
} factor_walk;

/* Emit every ordered factorisation of rem into the remaining k - depth factors. */
static void factor_rec(factor_walk *w, int32_t rem, int32_t depth)
{
  if (depth == w->k - 1) {
    w->prefix[depth] = rem;
    memcpy(w->out->ranks + (gsize)w->row * (gsize)w->k, w->prefix, (gsize)w->k * sizeof(int32_t));
    w->row++;
    return;
  }
  for (guint i = 0; i < w->n_divs && w->divs[i] <= rem; i++) {
    if (rem % w->divs[i] != 0) continue;
    w->prefix[depth] = w->divs[i];
    factor_rec(w, rem / w->divs[i], depth + 1);
  }
}

sp_groups *sp_factorizations(int32_t n, int32_t k, GError **error)
{
  if (n < 1) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "cannot factorise %d: the number must be >= 1", n);
    return NULL;
  }
  if (k < 1 || k > SP_FACTOR_MAX_K) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%d factors requested: the number of factors k must be in 1..%d", k,
                SP_FACTOR_MAX_K);
    return NULL;
  }
  guint64 count = sp_factorization_count(n, k);
  if (count > SP_FACTOR_MAX_COUNT || count * (guint64)k > SP_TOPO_MAX_LIST) {
    g_autofree char *how_many = count == G_MAXUINT64
                                    ? g_strdup("more than 2^64")
                                    : g_strdup_printf("%" G_GUINT64_FORMAT, count);
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%d has %s ordered factorisations into %d factors: more than the %d spsim "
                "lists; use a smaller k", n, how_many, k, SP_FACTOR_MAX_COUNT);
    return NULL;
  }
  /* Divisors of n in ascending order: small ones up to sqrt(n), then their cofactors. */
  g_autoptr(GArray) small = g_array_new(FALSE, FALSE, sizeof(int32_t));
  g_autoptr(GArray) large = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int32_t d = 1; (int64_t)d * d <= n; d++) {
    if (n % d != 0) continue;
    g_array_append_val(small, d);
    int32_t e = n / d;
    if (e != d) g_array_append_val(large, e);
  }
  for (guint i = large->len; i-- > 0;) g_array_append_val(small, g_array_index(large, int32_t, i));
  sp_groups *out = sp_t_groups_alloc((int64_t)count, k, error);
  if (out == NULL) return NULL;
  g_autofree int32_t *prefix = g_new0(int32_t, k);
  factor_walk w = { (const int32_t *)(void *)small->data, small->len, k, prefix, out, 0 };
  factor_rec(&w, n, 0);
  if (w.row != out->n_groups) { /* the closed form and the walk must agree */
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "internal error: %d factorisations enumerated, %d expected", w.row, out->n_groups);
    sp_groups_free(out);
    return NULL;
  }
  return out;
}
