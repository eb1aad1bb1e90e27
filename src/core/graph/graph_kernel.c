/* Kernel nodes of the graph IR (matmul, attention, ring attention): their builders,
 * their execution on the host with the deterministic f32 kernels (spsim/kernels.h)
 * and their FLOPs. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/graph.h"
#include "spsim/kernels.h"
#include "graph_build.h"
#include "graph_private.h"

#define BAD UINT32_MAX

static gboolean need_f32(const sp_tensor *t, const char *what, GError **err)
{
  if (t->dtype != SP_F32) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "%s: data kernels run in f32; '%s' is %s", what,
                t->name, sp_dtype_name(t->dtype));
    return FALSE;
  }
  return TRUE;
}

/* 2-D view of a tensor: [numel / last, last]. */
static void view2(const sp_tensor *t, gboolean trans, int64_t *rows, int64_t *cols)
{
  int64_t last = t->shape[t->ndim - 1];
  int64_t r = (int64_t)sp_tensor_numel(t) / last;
  *rows = trans ? last : r;
  *cols = trans ? r : last;
}

uint32_t sp_graph_matmul(sp_graph *g, uint32_t a, gboolean trans_a, uint32_t b, gboolean trans_b,
                         uint32_t out, GError **err)
{
  const sp_tensor *x = sp_g_tensor(g, a, err), *y = x ? sp_g_tensor(g, b, err) : NULL;
  const sp_tensor *o = y ? sp_g_tensor(g, out, err) : NULL;
  if (!o || !need_f32(x, "matmul", err) || !need_f32(y, "matmul", err) || !need_f32(o, "matmul", err))
    return BAD;
  int64_t M, K, K2, N;
  view2(x, trans_a, &M, &K);
  view2(y, trans_b, &K2, &N);
  if (K != K2 || (int64_t)sp_tensor_numel(o) != M * N || o->shape[o->ndim - 1] != N) {
    sp_g_shape_err(err, "matmul", x, y, "inner dims must agree and the output be [M, N]");
    return BAD;
  }
  uint32_t ins[2] = { a, b };
  if (!sp_g_local_holders(g, ins, 2, out, "matmul", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_MATMUL, ins, 2, out);
  n->trans_a = trans_a;
  n->trans_b = trans_b;
  n->flops = 2.0 * (double)M * (double)N * (double)K;
  return sp_g_node_push(g, n);
}

/* Attention shape check: B, S, Hq, Hkv, D. */
static gboolean attn_dims(const sp_tensor *q, const sp_tensor *k, const sp_tensor *v,
                          sp_attn_layout layout, int64_t *dims, GError **err)
{
  if (!need_f32(q, "attention", err) || !need_f32(k, "attention", err) || !need_f32(v, "attention", err))
    return FALSE;
  if (q->ndim != 4 || k->ndim != 4 || !sp_g_same_shape_except(k, v, -1)) {
    sp_g_shape_err(err, "attention", q, k, "q, k, v must be 4-D and k, v equal");
    return FALSE;
  }
  int bi = layout == SP_LAYOUT_SBHD ? 1 : 0, si = 1 - bi;
  if (q->shape[bi] != k->shape[bi] || q->shape[si] != k->shape[si] || q->shape[3] != k->shape[3] ||
      q->shape[2] % k->shape[2] != 0) {
    sp_g_shape_err(err, "attention", q, k,
                   "batch, seq and head dim must agree and q heads be a multiple of kv heads");
    return FALSE;
  }
  dims[0] = q->shape[bi];
  dims[1] = q->shape[si];
  dims[2] = q->shape[2];
  dims[3] = k->shape[2];
  dims[4] = q->shape[3];
  return TRUE;
}

uint32_t sp_graph_attention(sp_graph *g, sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                            uint32_t out, GError **err)
{
  const sp_tensor *tq = sp_g_tensor(g, q, err), *tk = tq ? sp_g_tensor(g, k, err) : NULL;
  const sp_tensor *tv = tk ? sp_g_tensor(g, v, err) : NULL, *to = tv ? sp_g_tensor(g, out, err) : NULL;
  int64_t d[5];
  if (!to || !attn_dims(tq, tk, tv, layout, d, err))
    return BAD;
  if (!sp_g_same_shape_except(tq, to, -1) || to->dtype != SP_F32) {
    sp_g_shape_err(err, "attention", tq, to, "the output has q's shape");
    return BAD;
  }
  uint32_t ins[3] = { q, k, v };
  if (!sp_g_local_holders(g, ins, 3, out, "attention", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_ATTENTION, ins, 3, out);
  n->layout = layout;
  n->flops = (double)d[0] * d[2] * d[4] * 2.0 * (double)d[1] * (double)(d[1] + 1);
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_attention_bwd(sp_graph *g, sp_attn_layout layout, uint32_t q, uint32_t k,
                                uint32_t v, uint32_t dout, uint32_t dq, uint32_t dk, uint32_t dv,
                                GError **err)
{
  const sp_tensor *tq = sp_g_tensor(g, q, err), *tk = tq ? sp_g_tensor(g, k, err) : NULL;
  const sp_tensor *tv = tk ? sp_g_tensor(g, v, err) : NULL, *tdo = tv ? sp_g_tensor(g, dout, err) : NULL;
  const sp_tensor *tdq = tdo ? sp_g_tensor(g, dq, err) : NULL, *tdk = tdq ? sp_g_tensor(g, dk, err) : NULL;
  const sp_tensor *tdv = tdk ? sp_g_tensor(g, dv, err) : NULL;
  int64_t d[5];
  if (!tdv || !attn_dims(tq, tk, tv, layout, d, err))
    return BAD;
  if (!sp_g_same_shape_except(tq, tdo, -1) || !sp_g_same_shape_except(tq, tdq, -1) ||
      !sp_g_same_shape_except(tk, tdk, -1) || !sp_g_same_shape_except(tv, tdv, -1) ||
      tdo->dtype != SP_F32 || tdq->dtype != SP_F32 || tdk->dtype != SP_F32 || tdv->dtype != SP_F32) {
    sp_g_shape_err(err, "attention-bwd", tq, tdq, "gradients have the shapes of q, k, v, out");
    return BAD;
  }
  uint32_t ins[4] = { q, k, v, dout };
  if (!sp_g_local_holders(g, ins, 4, dq, "attention-bwd", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_ATTENTION_BWD, ins, 4, dq);
  n->out[1] = dk;
  n->out[2] = dv;
  n->nout = 3;
  n->layout = layout;
  n->flops = (double)d[0] * d[2] * d[4] * 5.0 * (double)d[1] * (double)(d[1] + 1);
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_ring_attn(sp_graph *g, const sp_groups *gs, sp_attn_layout layout, uint32_t q,
                            uint32_t k, uint32_t v, uint32_t state_in, uint32_t state_out, int32_t step,
                            GError **err)
{
  const sp_tensor *tq = sp_g_tensor(g, q, err), *tk = tq ? sp_g_tensor(g, k, err) : NULL;
  const sp_tensor *tv = tk ? sp_g_tensor(g, v, err) : NULL, *si = tv ? sp_g_tensor(g, state_in, err) : NULL;
  const sp_tensor *so = si ? sp_g_tensor(g, state_out, err) : NULL;
  int64_t d[5];
  if (!so || !attn_dims(tq, tk, tv, layout, d, err))
    return BAD;
  if (!sp_g_same_shape_except(si, so, -1) || si->ndim != 4 || si->dtype != SP_F32 ||
      so->dtype != SP_F32 || si->shape[3] != d[4] + 2 || si->shape[2] != d[2] ||
      sp_tensor_numel(si) != (uint64_t)(d[0] * d[1] * d[2] * (d[4] + 2)) || si->storage == so->storage) {
    sp_g_shape_err(err, "ring-attn", tq, si, "the states are distinct [.., Hq, d + 2] f32 tensors");
    return BAD;
  }
  uint32_t ts[5] = { q, k, v, state_in, state_out };
  if (!sp_g_check_groups(g, gs, ts, 5, "ring-attn", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_RING_ATTN, ts, 4, state_out);
  n->layout = layout;
  n->start = step;
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  n->flops = (double)d[0] * d[2] * d[4] * 4.0 * (double)d[1] * (double)d[1];
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_ring_final(sp_graph *g, sp_attn_layout layout, uint32_t state, uint32_t out, GError **err)
{
  const sp_tensor *a = sp_g_tensor(g, state, err), *b = a ? sp_g_tensor(g, out, err) : NULL;
  if (!b)
    return BAD;
  if (a->ndim != 4 || b->ndim != 4 || a->dtype != SP_F32 || b->dtype != SP_F32 ||
      !sp_g_same_shape_except(a, b, 3) || a->shape[3] != b->shape[3] + 2) {
    sp_g_shape_err(err, "ring-final", a, b, "state [.., d + 2] -> out [.., d]");
    return BAD;
  }
  if (!sp_g_local_holders(g, &state, 1, out, "ring-final", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_RING_FINAL, &state, 1, out);
  n->layout = layout;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_ring_attn_bwd(sp_graph *g, const sp_groups *gs, sp_attn_layout layout, uint32_t q,
                                uint32_t k, uint32_t v, uint32_t dout, uint32_t state, uint32_t dq_in,
                                uint32_t dk_in, uint32_t dv_in, uint32_t dq_out, uint32_t dk_out,
                                uint32_t dv_out, int32_t step, GError **err)
{
  uint32_t ts[11] = { q, k, v, dout, state, dq_in, dk_in, dv_in, dq_out, dk_out, dv_out };
  const sp_tensor *t[11];
  for (int i = 0; i < 11; i++)
    if (!(t[i] = sp_g_tensor(g, ts[i], err)))
      return BAD;
  int64_t d[5];
  if (!attn_dims(t[0], t[1], t[2], layout, d, err))
    return BAD;
  gboolean ok = t[4]->ndim == 4 && t[4]->dtype == SP_F32 && t[4]->shape[3] == d[4] + 2 &&
                sp_g_same_shape_except(t[0], t[4], 3);
  for (int i = 3; ok && i < 11; i++)
    if (i != 4)
      ok = t[i]->dtype == SP_F32 && sp_g_same_shape_except(i == 3 || i == 5 || i == 8 ? t[0] : t[1], t[i], -1);
  for (int i = 5; ok && i < 8; i++)
    ok = t[i]->storage != t[i + 3]->storage;
  if (!ok) {
    sp_g_shape_err(err, "ring-attn-bwd", t[0], t[4],
                   "dout and dq have q's shape, dk and dv k's, the state is [.., Hq, d + 2] f32, outs use other storage than ins");
    return BAD;
  }
  if (!sp_g_check_groups(g, gs, ts, 11, "ring-attn-bwd", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_RING_ATTN_BWD, ts, 8, dq_out);
  n->out[1] = dk_out;
  n->out[2] = dv_out;
  n->nout = 3;
  n->layout = layout;
  n->start = step;
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  n->flops = (double)d[0] * d[2] * d[4] * 10.0 * (double)d[1] * (double)d[1];
  return sp_g_node_push(g, n);
}

static int ring_mode(const sp_node *n, int32_t rank);

/* A ring-attention step's dimensions (from q, k, v) and @p mode (ring_mode; < 0:
 * nothing to do on this rank). */
static gboolean ring_step(const sp_graph *g, const sp_node *n, int32_t rank, int64_t d[5], int *mode,
                          GError **err)
{
  if (!attn_dims(sp_graph_tensor(g, n->in[0]), sp_graph_tensor(g, n->in[1]),
                 sp_graph_tensor(g, n->in[2]), n->layout, d, err))
    return FALSE;
  *mode = ring_mode(n, rank);
  return TRUE;
}

gboolean sp_graph_kernel_host(const sp_graph *g, uint32_t ni, int32_t rank, void *const *bufs,
                              GError **err)
{
  const sp_node *n = sp_graph_node(g, ni);
  if (!n) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no node %u", ni);
    return FALSE;
  }
  if (n->nout < 1 || !sp_graph_tensor_on(g, n->out[0], rank))
    return TRUE;
#define B(t) (bufs[sp_graph_tensor(g, (t))->storage])
  switch (n->kind) {
  case SP_NODE_MATMUL: {
    int64_t M, K, K2, N;
    view2(sp_graph_tensor(g, n->in[0]), n->trans_a, &M, &K);
    view2(sp_graph_tensor(g, n->in[1]), n->trans_b, &K2, &N);
    /* a separate output buffer so that out may alias nothing it reads */
    float *c = g_new(float, (gsize)(M * N));
    sp_kernel_matmul_f32(B(n->in[0]), n->trans_a, B(n->in[1]), n->trans_b, c, M, N, K);
    memcpy(B(n->out[0]), c, sizeof(float) * (size_t)(M * N));
    g_free(c);
    return TRUE;
  }
  case SP_NODE_ATTENTION:
  case SP_NODE_ATTENTION_BWD: {
    int64_t d[5];
    if (!attn_dims(sp_graph_tensor(g, n->in[0]), sp_graph_tensor(g, n->in[1]),
                   sp_graph_tensor(g, n->in[2]), n->layout, d, err))
      return FALSE;
    gboolean sf = n->layout == SP_LAYOUT_SBHD;
    if (n->kind == SP_NODE_ATTENTION)
      sp_kernel_attention_f32(sf, d[0], d[1], d[2], d[3], d[4], B(n->in[0]), B(n->in[1]), B(n->in[2]),
                              B(n->out[0]));
    else
      sp_kernel_attention_bwd_f32(sf, d[0], d[1], d[2], d[3], d[4], B(n->in[0]), B(n->in[1]),
                                  B(n->in[2]), B(n->in[3]), B(n->out[0]), B(n->out[1]), B(n->out[2]));
    return TRUE;
  }
  case SP_NODE_RING_ATTN: {
    int64_t d[5];
    int m;
    if (!ring_step(g, n, rank, d, &m, err))
      return FALSE;
    if (m < 0)
      return TRUE;
    sp_kernel_ring_attn_step_f32(n->layout == SP_LAYOUT_SBHD, d[0], d[1], d[2], d[3], d[4], B(n->in[0]),
                                 B(n->in[1]), B(n->in[2]), B(n->in[3]), B(n->out[0]), m);
    return TRUE;
  }
  case SP_NODE_RING_ATTN_BWD: {
    int64_t d[5];
    int m;
    if (!ring_step(g, n, rank, d, &m, err))
      return FALSE;
    if (m < 0)
      return TRUE;
    sp_kernel_ring_attn_bwd_step_f32(n->layout == SP_LAYOUT_SBHD, d[0], d[1], d[2], d[3], d[4], B(n->in[0]),
                                     B(n->in[1]), B(n->in[2]), B(n->in[3]), B(n->in[4]), B(n->in[5]),
                                     B(n->in[6]), B(n->in[7]), B(n->out[0]), B(n->out[1]), B(n->out[2]), m);
    return TRUE;
  }
  case SP_NODE_RING_FINAL: {
    const sp_tensor *o = sp_graph_tensor(g, n->out[0]);
    sp_kernel_ring_attn_final_f32(sp_tensor_numel(o) / (uint64_t)o->shape[3], o->shape[3], B(n->in[0]),
                                  B(n->out[0]));
    return TRUE;
  }
  case SP_NODE_MOE:
    return sp_g_moe_host(g, n, bufs, err);
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "node %u (%s) is not a data kernel", ni,
                sp_node_kind_name(n->kind));
    return FALSE;
  }
#undef B
}

gboolean sp_node_is_kernel(const sp_node *n)
{
  return n->kind == SP_NODE_MATMUL || n->kind == SP_NODE_ATTENTION || n->kind == SP_NODE_ATTENTION_BWD ||
         n->kind == SP_NODE_RING_ATTN || n->kind == SP_NODE_RING_FINAL || n->kind == SP_NODE_RING_ATTN_BWD ||
         n->kind == SP_NODE_MOE;
}

/* Ring step mode of @p rank: 0 skipped, 1 diagonal (causal), 2 full; -1 not a member. */
static int ring_mode(const sp_node *n, int32_t rank)
{
  int32_t i = sp_node_group_index(n, rank, NULL);
  if (i < 0)
    return -1;
  int32_t P = n->gsize, j = (int32_t)(((i - n->start) % P + P) % P);
  return j > i ? 0 : j == i ? 1 : 2;
}

double sp_graph_node_flops(const sp_graph *g, uint32_t ni, int32_t rank)
{
  const sp_node *n = sp_graph_node(g, ni);
  if (!n)
    return 0;
  if (n->kind == SP_NODE_COMPUTE)
    return (n->nout == 0 || sp_graph_tensor_on(g, n->out[0], rank)) ? n->flops : 0;
  if (!sp_node_is_kernel(n) || !sp_graph_tensor_on(g, n->out[0], rank))
    return 0;
  if (n->kind == SP_NODE_RING_ATTN || n->kind == SP_NODE_RING_ATTN_BWD) {
    int m = ring_mode(n, rank);
    /* n->flops holds a full block: 4 d (backward: 10 d) per (query, key) pair */
    const sp_tensor *q = sp_graph_tensor(g, n->in[0]);
    int64_t S = n->layout == SP_LAYOUT_SBHD ? q->shape[0] : q->shape[1];
    return m == 2 ? n->flops : m == 1 ? n->flops * (double)(S + 1) / (2.0 * (double)S) : 0.0;
  }
  return n->flops;
}
