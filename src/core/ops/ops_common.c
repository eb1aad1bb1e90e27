/* What the operation builders share (ops_private.h): tensors shaped like another
 * tensor and held by the same ranks, and gradient scaling by the group size with
 * the parsing of its mode. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

gboolean sp_grad_scale_parse(const char *s, sp_grad_scale *out, GError **err)
{
  static const char *const names[] = { "none", "up", "down" };
  for (int i = 0; i < 3; i++)
    if (g_strcmp0(s, names[i]) == 0) {
      *out = (sp_grad_scale)i;
      return TRUE;
    }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown gradient scaling '%s'; use none, up or down",
              s ? s : "");
  return FALSE;
}

uint32_t sp_ops_like(sp_graph *g, uint32_t ref, const char *suffix, int ndim, const int64_t *shape,
                     sp_tensor_kind kind, GError **err)
{
  const sp_tensor *r = sp_graph_tensor(g, ref);
  if (!r) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no tensor with id %u", ref);
    return BAD;
  }
  char *name = g_strdup_printf("%s.%s", r->name, suffix);
  sp_dtype dt = r->dtype;
  guint8 *on = r->on ? g_memdup2(r->on, (gsize)sp_graph_world(g)) : NULL;
  uint32_t t = sp_graph_tensor_new(g, name, dt, ndim, shape, kind, SP_INIT_NONE, err);
  g_free(name);
  if (t != BAD && on) {
    GArray *ranks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t i = 0; i < sp_graph_world(g); i++)
      if (on[i])
        g_array_append_val(ranks, i);
    sp_graph_tensor_place(g, t, (const int32_t *)ranks->data, (int32_t)ranks->len, NULL);
    g_array_unref(ranks);
  }
  g_free(on);
  return t;
}

uint32_t sp_ops_like_dim(sp_graph *g, uint32_t ref, const char *suffix, int dim, int64_t size,
                         GError **err)
{
  const sp_tensor *r = sp_graph_tensor(g, ref);
  if (!r) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no tensor with id %u", ref);
    return BAD;
  }
  int64_t shape[SP_MAX_DIMS];
  memcpy(shape, r->shape, sizeof shape);
  if (dim >= 0 && dim < r->ndim)
    shape[dim] = size;
  return sp_ops_like(g, ref, suffix, r->ndim, shape, r->kind, err);
}

uint32_t sp_ops_grad_scale(sp_graph *g, uint32_t t, int32_t P, sp_grad_scale s, GError **err)
{
  if (s == SP_GRAD_SCALE_NONE || P == 1)
    return t;
  if (sp_graph_scale(g, t, t, (double)P, s == SP_GRAD_SCALE_DOWN, err) == BAD)
    return BAD;
  return t;
}

gboolean sp_ops_concat_parts(sp_graph *g, const uint32_t *ins, int64_t n, uint32_t out, GError **err)
{
  if (n <= SP_NODE_MAX_IO)
    return sp_graph_concat(g, ins, (int)n, out, 0, err) != BAD;
  const sp_tensor *o = sp_graph_tensor(g, out);
  int64_t inner = 1; /* elements per unit of dim 0 */
  for (int d = 1; d < o->ndim; d++)
    inner *= o->shape[d];
  const int64_t per = (n + SP_NODE_MAX_IO - 1) / SP_NODE_MAX_IO, np = (n + per - 1) / per;
  uint32_t parts[SP_NODE_MAX_IO];
  for (int64_t p = 0; p < np; p++) {
    const int64_t a = p * per, cnt = MIN(per, n - a);
    int64_t rows = 0;
    for (int64_t i = a; i < a + cnt; i++)
      rows += (int64_t)sp_tensor_numel(sp_graph_tensor(g, ins[i])) / inner;
    char *nm = g_strdup_printf("part%" G_GINT64_FORMAT, p);
    parts[p] = sp_ops_like_dim(g, out, nm, 0, rows, err);
    g_free(nm);
    if (parts[p] == BAD || !sp_ops_concat_parts(g, ins + a, cnt, parts[p], err))
      return FALSE;
  }
  return sp_graph_concat(g, parts, (int)np, out, 0, err) != BAD;
}
