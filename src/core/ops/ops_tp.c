/* Megatron tensor parallelism: column- and row-parallel linears with f / g conjugates
 * and the sequence-parallel variant, as graph builders. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

static const sp_tensor *need2(sp_graph *g, uint32_t t, const char *what, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  if (!x || x->ndim != 2 || x->dtype != SP_F32) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "tensor-parallel MLP: %s must be a 2-D f32 tensor", what);
    return NULL;
  }
  return x;
}

/* out = op(a) x op(b) into a new [rows, cols] tensor placed like @p a */
static uint32_t mm(sp_graph *g, uint32_t a, gboolean ta, uint32_t b, gboolean tb, const char *nm,
                   sp_tensor_kind kind, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, a), *y = sp_graph_tensor(g, b);
  int64_t M = ta ? x->shape[1] : x->shape[0], N = tb ? y->shape[0] : y->shape[1];
  int64_t shp[2] = { M, N };
  uint32_t o = sp_ops_like(g, a, nm, 2, shp, kind, err);
  if (o == BAD || sp_graph_matmul(g, a, ta, b, tb, o, err) == BAD)
    return BAD;
  return o;
}

gboolean sp_op_tp_mlp(sp_graph *g, const sp_groups *gs, uint32_t x, uint32_t w1, uint32_t w2,
                      gboolean seq_parallel, sp_algo algo, sp_tp_mlp *st, GError **err)
{
  memset(st, 0, sizeof *st);
  st->seq_parallel = seq_parallel;
  st->algo = algo;
  const sp_tensor *tx = need2(g, x, "x", err), *t1 = tx ? need2(g, w1, "w1", err) : NULL;
  const sp_tensor *t2 = t1 ? need2(g, w2, "w2", err) : NULL;
  if (!t2)
    return FALSE;
  if (!gs || gs->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "tensor-parallel MLP: empty group set");
    return FALSE;
  }
  const int64_t h = tx->shape[1];
  if (t1->shape[0] != h || t2->shape[1] != h || t1->shape[1] != t2->shape[0]) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "tensor-parallel MLP: shards must be w1 [h, f/P] and w2 [f/P, h] with h = %" G_GINT64_FORMAT, h);
    return FALSE;
  }
  st->x = x;
  st->w1 = w1;
  st->w2 = w2;
  st->xg = x;
  if (seq_parallel) {
    /* sequence parallel: all-gather the tokens before the column linear */
    st->xg = sp_ops_like_dim(g, x, "sp_gather", 0, tx->shape[0] * gs->group_size, err);
    if (st->xg == BAD || sp_graph_all_gather(g, gs, x, st->xg, 0, algo, err) == BAD)
      return FALSE;
  } /* else f: identity */
  if ((st->y = mm(g, st->xg, FALSE, w1, FALSE, "col", SP_TENSOR_ACTIVATION, err)) == BAD ||
      (st->zp = mm(g, st->y, FALSE, w2, FALSE, "row", SP_TENSOR_ACTIVATION, err)) == BAD)
    return FALSE;
  const sp_tensor *tz = sp_graph_tensor(g, st->zp);
  if (seq_parallel) {
    if (tz->shape[0] % gs->group_size != 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "tensor-parallel MLP: tokens do not divide by %d", gs->group_size);
      return FALSE;
    }
    st->z = sp_ops_like_dim(g, st->zp, "sp_scatter", 0, tz->shape[0] / gs->group_size, err);
    if (st->z == BAD || sp_graph_reduce_scatter(g, gs, st->zp, st->z, 0, SP_RED_SUM, algo, err) == BAD)
      return FALSE;
  } else {
    /* g: all-reduce forward */
    st->z = sp_ops_like_dim(g, st->zp, "g", -1, 0, err);
    if (st->z == BAD || sp_graph_all_reduce(g, gs, st->zp, st->z, SP_RED_SUM, algo, err) == BAD)
      return FALSE;
  }
  return TRUE;
}

gboolean sp_op_tp_mlp_bwd(sp_graph *g, const sp_groups *gs, const sp_tp_mlp *st, uint32_t dz,
                          uint32_t *dx, uint32_t *dw1, uint32_t *dw2, GError **err)
{
  const sp_tensor *tdz = need2(g, dz, "dz", err);
  if (!tdz)
    return FALSE;
  uint32_t dzg = dz;
  if (st->seq_parallel) {
    /* conjugate of the reduce-scatter: all-gather the gradient */
    dzg = sp_ops_like_dim(g, dz, "sp_gather", 0, tdz->shape[0] * gs->group_size, err);
    if (dzg == BAD || sp_graph_all_gather(g, gs, dz, dzg, 0, st->algo, err) == BAD)
      return FALSE;
  } /* else g backward: identity */
  uint32_t dy = mm(g, dzg, FALSE, st->w2, TRUE, "dy", SP_TENSOR_ACTIVATION, err);
  if (dy == BAD || (*dw2 = mm(g, st->y, TRUE, dzg, FALSE, "dw2", SP_TENSOR_GRAD, err)) == BAD)
    return FALSE;
  uint32_t dxp = mm(g, dy, FALSE, st->w1, TRUE, "dxp", SP_TENSOR_ACTIVATION, err);
  if (dxp == BAD || (*dw1 = mm(g, st->xg, TRUE, dy, FALSE, "dw1", SP_TENSOR_GRAD, err)) == BAD)
    return FALSE;
  const sp_tensor *tp = sp_graph_tensor(g, dxp);
  if (st->seq_parallel) {
    *dx = sp_ops_like_dim(g, dxp, "sp_scatter", 0, tp->shape[0] / gs->group_size, err);
    return *dx != BAD && sp_graph_reduce_scatter(g, gs, dxp, *dx, 0, SP_RED_SUM, st->algo, err) != BAD;
  }
  /* f backward: all-reduce */
  *dx = sp_ops_like_dim(g, dxp, "f", -1, 0, err);
  return *dx != BAD && sp_graph_all_reduce(g, gs, dxp, *dx, SP_RED_SUM, st->algo, err) != BAD;
}
