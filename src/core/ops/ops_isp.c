/* Intern-style sequence parallelism (ISP): weight-parallel linears with prefetch,
 * alternating gather buffers, checkpoint recompute, head and embedding communicators. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

/* Pools of storage shared by tensors (sp_graph_tensor_pool). */
enum { POOL_FWD_GATHER = 1, POOL_RS = 2, POOL_BWD_GATHER = 3 };

void sp_isp_stack_clear(sp_isp_stack *st)
{
  g_clear_pointer(&st->w, g_free);
  g_clear_pointer(&st->wfull, g_free);
  g_clear_pointer(&st->acts, g_free);
  g_clear_pointer(&st->dw, g_free);
  g_clear_pointer(&st->prefetch_node, g_free);
  g_clear_pointer(&st->out_proj_node, g_free);
}

/* All-gather shard @p w on dim 0 into a new full weight; pool/slot < 0: own storage. */
static uint32_t gather_weight(sp_graph *g, const sp_groups *gs, uint32_t w, const char *nm, int32_t pool,
                              int32_t slot, gboolean async, sp_algo algo, uint32_t *node, GError **err)
{
  const sp_tensor *t = sp_graph_tensor(g, w);
  int64_t shp[SP_MAX_DIMS];
  memcpy(shp, t->shape, sizeof shp);
  shp[0] *= gs->group_size;
  uint32_t f = sp_ops_like(g, w, nm, t->ndim, shp, SP_TENSOR_GATHERED, err);
  if (f == BAD)
    return BAD;
  if (pool >= 0)
    sp_graph_tensor_pool(g, f, pool, slot);
  uint32_t n = sp_graph_all_gather(g, gs, w, f, 0, async ? SP_ALGO_DIRECT : algo, err);
  if (n == BAD)
    return BAD;
  sp_graph_node_set_async(g, n, async);
  if (node)
    *node = n;
  return f;
}

static uint32_t matmul_new(sp_graph *g, uint32_t a, gboolean ta, uint32_t b, gboolean tb, const char *nm,
                           sp_tensor_kind kind, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, a), *y = sp_graph_tensor(g, b);
  int64_t shp[2] = { ta ? x->shape[1] : x->shape[0], tb ? y->shape[0] : y->shape[1] };
  uint32_t o = sp_ops_like(g, a, nm, 2, shp, kind, err);
  if (o == BAD || sp_graph_matmul(g, a, ta, b, tb, o, err) == BAD)
    return BAD;
  return o;
}

gboolean sp_op_isp_stack(sp_graph *g, const sp_groups *gs, const sp_isp_cfg *cfg, uint32_t x,
                         sp_isp_stack *st, GError **err)
{
  memset(st, 0, sizeof *st);
  if (!gs || gs->group_size < 1 || !cfg || cfg->blocks < 1 || cfg->modules < 1 || cfg->out_proj < 0 ||
      cfg->out_proj >= cfg->modules || cfg->ckpt_blocks < 0 || cfg->ckpt_blocks > cfg->blocks) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "ISP: need blocks >= 1, modules >= 1, 0 <= out_proj < modules and 0 <= ckpt_blocks <= blocks");
    return FALSE;
  }
  const sp_tensor *tx = sp_graph_tensor(g, x);
  if (!tx || tx->ndim != 2 || tx->dtype != SP_F32 || tx->shape[1] != cfg->hidden) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "ISP: the input must be f32 [tokens, hidden=%" G_GINT64_FORMAT "]",
                cfg->hidden);
    return FALSE;
  }
  const int32_t P = gs->group_size;
  if (cfg->hidden % P != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "ISP: weights are sharded on dim 0 (%" G_GINT64_FORMAT " rows), not divisible by the group size %d",
                cfg->hidden, P);
    return FALSE;
  }
  st->cfg = *cfg;
  const int32_t nb = cfg->blocks, nm = cfg->modules, nw = nb * nm;
  st->w = g_new(uint32_t, nw);
  st->wfull = g_new(uint32_t, nw);
  st->acts = g_new(uint32_t, nw + 1);
  st->dw = g_new(uint32_t, nw);
  st->prefetch_node = g_new(uint32_t, nb);
  st->out_proj_node = g_new(uint32_t, nb);
  st->x = x;
  st->acts[0] = x;
  for (int32_t i = 0; i < nw; i++) {
    char *name = g_strdup_printf("w%d.%d", i / nm, i % nm);
    int64_t shp[2] = { cfg->hidden / P, cfg->hidden };
    st->w[i] = sp_ops_like(g, x, name, 2, shp, SP_TENSOR_WEIGHT, err);
    g_free(name);
    if (st->w[i] == BAD)
      return FALSE;
    sp_graph_tensor_set_init(g, st->w[i], SP_INIT_INPUT);
    sp_graph_tensor_persist(g, st->w[i]);
  }
  /* post every gather of block b (async, alternating pool slots by block parity) */
#define GATHER_BLOCK(b)                                                                                   \
  do {                                                                                                    \
    for (int32_t m_ = 0; m_ < nm; m_++) {                                                                 \
      char *n_ = g_strdup_printf("full%d", (b) % 2);                                                      \
      uint32_t node_ = BAD;                                                                               \
      st->wfull[(b) * nm + m_] = gather_weight(g, gs, st->w[(b) * nm + m_], n_, POOL_FWD_GATHER,           \
                                               ((b) % 2) * nm + m_, TRUE, cfg->algo, &node_, err);        \
      g_free(n_);                                                                                         \
      if (st->wfull[(b) * nm + m_] == BAD)                                                                \
        return FALSE;                                                                                     \
      if (m_ == 0)                                                                                        \
        st->prefetch_node[b] = node_;                                                                     \
    }                                                                                                     \
  } while (0)
  if (cfg->overlap)
    GATHER_BLOCK(0);
  for (int32_t b = 0; b < nb; b++)
    for (int32_t m = 0; m < nm; m++) {
      int32_t k = b * nm + m;
      /* the next block's gathers go out after this block's all-to-all, i.e. before out_proj */
      if (cfg->overlap && m == cfg->out_proj && b + 1 < nb)
        GATHER_BLOCK(b + 1);
      if (!cfg->overlap) {
        st->wfull[k] = gather_weight(g, gs, st->w[k], "full", -1, 0, FALSE, cfg->algo, NULL, err);
        if (st->wfull[k] == BAD)
          return FALSE;
        if (m == 0)
          st->prefetch_node[b] = sp_graph_n_nodes(g) - 1;
      }
      char *name = g_strdup_printf("act%d", k + 1);
      st->acts[k + 1] = matmul_new(g, st->acts[k], FALSE, st->wfull[k], TRUE, name, SP_TENSOR_ACTIVATION, err);
      g_free(name);
      if (st->acts[k + 1] == BAD)
        return FALSE;
      if (m == cfg->out_proj)
        st->out_proj_node[b] = sp_graph_n_nodes(g) - 1;
    }
#undef GATHER_BLOCK
  st->y = st->acts[nw];
  return TRUE;
}

gboolean sp_op_isp_stack_bwd(sp_graph *g, const sp_groups *gs, sp_isp_stack *st, uint32_t dy,
                             GError **err)
{
  const sp_isp_cfg *cfg = &st->cfg;
  const int32_t nm = cfg->modules, nw = cfg->blocks * nm;
  const gboolean ov = cfg->overlap;
  const sp_tensor *td = sp_graph_tensor(g, dy);
  if (!td || !st->w || td->ndim != 2 || td->shape[1] != cfg->hidden) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "ISP backward: dy must be [tokens, hidden] of a built stack");
    return FALSE;
  }
  uint32_t *wb = g_new(uint32_t, nw), *xin = g_new(uint32_t, nw);
  for (int32_t k = 0; k < nw; k++) {
    wb[k] = BAD;
    xin[k] = st->acts[k];
  }
  gboolean ok = TRUE;
  uint32_t cur = dy;
  for (int32_t k = nw - 1; ok && k >= 0; k--) {
    const int32_t b = k / nm, m = k % nm;
    if (b < cfg->ckpt_blocks) {
      if (m == nm - 1) {
        /* recompute the checkpointed block: gather its weights once, keep them for backward */
        for (int32_t j = 0; ok && j < nm; j++) {
          char *n = g_strdup_printf("recompute%d", b % 2);
          wb[b * nm + j] = gather_weight(g, gs, st->w[b * nm + j], n, ov ? POOL_FWD_GATHER : -1,
                                         (b % 2) * nm + j, ov, cfg->algo, NULL, err);
          g_free(n);
          ok = wb[b * nm + j] != BAD;
        }
        for (int32_t j = 0; ok && j < nm; j++) {
          uint32_t in = j == 0 ? st->acts[b * nm] : xin[b * nm + j];
          if (j + 1 < nm) {
            xin[b * nm + j + 1] = matmul_new(g, in, FALSE, wb[b * nm + j], TRUE, "recomputed",
                                             SP_TENSOR_ACTIVATION, err);
            ok = xin[b * nm + j + 1] != BAD;
          }
        }
      }
    } else {
      /* gather again (unless prefetched), then prefetch the previous module */
      if (wb[k] == BAD) {
        wb[k] = gather_weight(g, gs, st->w[k], "bwdfull", ov ? POOL_BWD_GATHER : -1, k % 2, FALSE,
                              cfg->algo, NULL, err);
        ok = wb[k] != BAD;
      }
      if (ok && ov && k - 1 >= 0 && (k - 1) / nm >= cfg->ckpt_blocks) {
        wb[k - 1] = gather_weight(g, gs, st->w[k - 1], "bwdfull", POOL_BWD_GATHER, (k - 1) % 2, TRUE,
                                  cfg->algo, NULL, err);
        ok = wb[k - 1] != BAD;
      }
    }
    if (!ok)
      break;
    uint32_t dx = matmul_new(g, cur, FALSE, wb[k], FALSE, "dx", SP_TENSOR_ACTIVATION, err);
    uint32_t dwf = dx == BAD ? BAD : matmul_new(g, cur, TRUE, xin[k], FALSE, "dwfull", SP_TENSOR_COMM, err);
    if (dwf == BAD) {
      ok = FALSE;
      break;
    }
    if (ov)
      sp_graph_tensor_pool(g, dwf, POOL_RS, k % 2);
    st->dw[k] = sp_ops_like(g, st->w[k], "grad", 2, sp_graph_tensor(g, st->w[k])->shape, SP_TENSOR_GRAD, err);
    uint32_t n = st->dw[k] == BAD ? BAD
                                  : sp_graph_reduce_scatter(g, gs, dwf, st->dw[k], 0, SP_RED_AVG,
                                                            ov ? SP_ALGO_DIRECT : cfg->algo, err);
    if (n == BAD) {
      ok = FALSE;
      break;
    }
    sp_graph_node_set_async(g, n, ov);
    cur = dx;
  }
  st->dx = ok ? cur : BAD;
  g_free(wb);
  g_free(xin);
  return ok;
}

uint32_t sp_op_isp_head(sp_graph *g, const sp_groups *gs, uint32_t out, gboolean retain_sharded,
                        GError **err)
{
  if (retain_sharded)
    return sp_op_seq_all_to_all(g, gs, out, 2, 1, FALSE, err);
  return sp_op_gather_fwd(g, gs, out, 1, err);
}

uint32_t sp_op_isp_head_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad, gboolean retain_sharded,
                            GError **err)
{
  if (retain_sharded)
    return sp_op_seq_all_to_all(g, gs, grad, 1, 2, FALSE, err);
  return sp_op_split_fwd(g, gs, grad, 1, err);
}

uint32_t sp_op_isp_embedding_gather(sp_graph *g, const sp_groups *gs, uint32_t w, int gather_dim,
                                    GError **err)
{
  return sp_op_gather_fwd(g, gs, w, gather_dim, err);
}

uint32_t sp_op_isp_embedding_grad(sp_graph *g, const sp_groups *gs, const uint32_t *dfull,
                                  int micro_steps, int gather_dim, GError **err)
{
  if (micro_steps < 1 || !gs || gs->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "embedding weight parallel: need >= 1 micro step and a group");
    return BAD;
  }
  uint32_t acc = BAD;
  for (int i = 0; i < micro_steps; i++) {
    const sp_tensor *t = sp_graph_tensor(g, dfull[i]);
    if (!t || gather_dim < 0 || gather_dim >= t->ndim || t->shape[gather_dim] % gs->group_size) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                  "embedding weight parallel: gradient dim %d must exist and divide by the group size %d",
                  gather_dim, gs->group_size);
      return BAD;
    }
    uint32_t part = sp_ops_like_dim(g, dfull[i], "rs", gather_dim, t->shape[gather_dim] / gs->group_size, err);
    if (part == BAD ||
        sp_graph_reduce_scatter(g, gs, dfull[i], part, gather_dim, SP_RED_AVG, SP_ALGO_AUTO, err) == BAD)
      return BAD;
    if (acc == BAD) {
      acc = part;
    } else if (sp_graph_add(g, part, acc, part, SP_RED_SUM, err) == BAD) {
      return BAD;
    } else {
      acc = part; /* part now holds the running sum */
    }
  }
  return acc;
}
