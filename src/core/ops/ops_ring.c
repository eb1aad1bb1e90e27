/* Ring attention (context parallelism) and the Ulysses x ring hybrid, forward and backward. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

static uint32_t ring_fwd(sp_graph *g, const sp_groups *ring, sp_attn_layout layout, uint32_t q, uint32_t k,
                         uint32_t v, sp_ring_attn *saved, GError **err)
{
  const sp_tensor *tq = sp_graph_tensor(g, q);
  if (!ring || ring->group_size < 1 || !tq || tq->ndim != 4) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "ring attention: a ring group set and 4-D q, k, v are needed");
    return BAD;
  }
  const int32_t P = ring->group_size;
  int64_t ss[4] = { tq->shape[0], tq->shape[1], tq->shape[2], tq->shape[3] + 2 };
  uint32_t state = sp_ops_like(g, q, "ring0", 4, ss, SP_TENSOR_ACTIVATION, err);
  if (state == BAD)
    return BAD;
  sp_graph_tensor_set_init(g, state, SP_INIT_ZERO);
  uint32_t kc = k, vc = v;
  for (int32_t t = 0; t < P; t++) {
    uint32_t kn = BAD, vn = BAD;
    if (t + 1 < P) {
      /* pass k, v on before computing with them: the transfer overlaps the step */
      char *nk = g_strdup_printf("ring%d", t + 1);
      kn = sp_ops_like_dim(g, k, nk, -1, 0, err);
      vn = kn == BAD ? BAD : sp_ops_like_dim(g, v, nk, -1, 0, err);
      g_free(nk);
      uint32_t a = vn == BAD ? BAD : sp_graph_shift(g, ring, kc, kn, err);
      uint32_t b = a == BAD ? BAD : sp_graph_shift(g, ring, vc, vn, err);
      if (b == BAD)
        return BAD;
      sp_graph_node_set_async(g, a, TRUE);
      sp_graph_node_set_async(g, b, TRUE);
    }
    char *nm = g_strdup_printf("ring%d", t + 1);
    uint32_t next = sp_ops_like(g, q, nm, 4, ss, SP_TENSOR_ACTIVATION, err);
    g_free(nm);
    if (next == BAD || sp_graph_ring_attn(g, ring, layout, q, kc, vc, state, next, t, err) == BAD)
      return BAD;
    state = next;
    kc = kn;
    vc = vn;
  }
  uint32_t out = sp_ops_like(g, q, "ring_out", 4, tq->shape, SP_TENSOR_ACTIVATION, err);
  if (out == BAD || sp_graph_ring_final(g, layout, state, out, err) == BAD)
    return BAD;
  if (saved) /* the backward reads the inputs and the final state (live until then) */
    *saved = (sp_ring_attn){ layout, q, k, v, state, out };
  return out;
}

uint32_t sp_op_ring_attention(sp_graph *g, const sp_groups *ring, sp_attn_layout layout, uint32_t q,
                              uint32_t k, uint32_t v, GError **err)
{
  return ring_fwd(g, ring, layout, q, k, v, NULL, err);
}

uint32_t sp_op_ring_attention_fwd(sp_graph *g, const sp_groups *ring, sp_attn_layout layout, uint32_t q,
                                  uint32_t k, uint32_t v, sp_ring_attn *saved, GError **err)
{
  if (!saved) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "ring attention: no place to save the forward's tensors");
    return BAD;
  }
  memset(saved, 0xff, sizeof *saved);
  return ring_fwd(g, ring, layout, q, k, v, saved, err);
}

/* zero-initialised accumulator shaped like @p like */
static uint32_t zero_like(sp_graph *g, uint32_t like, const char *nm, GError **err)
{
  uint32_t t = sp_ops_like_dim(g, like, nm, -1, 0, err);
  if (t != BAD)
    sp_graph_tensor_set_init(g, t, SP_INIT_ZERO);
  return t;
}

static uint32_t shift_async(sp_graph *g, const sp_groups *ring, uint32_t in, uint32_t like, const char *nm,
                            GError **err)
{
  uint32_t out = sp_ops_like_dim(g, like, nm, -1, 0, err);
  uint32_t n = out == BAD ? BAD : sp_graph_shift(g, ring, in, out, err);
  if (n == BAD)
    return BAD;
  sp_graph_node_set_async(g, n, TRUE);
  return out;
}

gboolean sp_op_ring_attention_bwd(sp_graph *g, const sp_groups *ring, const sp_ring_attn *saved, uint32_t dout,
                                  uint32_t *dq, uint32_t *dk, uint32_t *dv, GError **err)
{
  const sp_tensor *tq = saved ? sp_graph_tensor(g, saved->q) : NULL, *td = sp_graph_tensor(g, dout);
  if (!ring || ring->group_size < 1 || !tq || !td || !sp_graph_tensor(g, saved->state) || !dq || !dk || !dv) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "ring attention backward: a ring group set, the forward's saved tensors and dout are needed");
    return FALSE;
  }
  if (td->ndim != tq->ndim || memcmp(td->shape, tq->shape, sizeof(int64_t) * (size_t)tq->ndim) != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "ring attention backward: dout '%s' must have the output's shape",
                td->name);
    return FALSE;
  }
  const int32_t P = ring->group_size;
  const uint32_t q = saved->q, k = saved->k, v = saved->v;
  uint32_t kc = k, vc = v;
  uint32_t dqc = zero_like(g, q, "dq0", err);
  uint32_t dkc = dqc == BAD ? BAD : zero_like(g, k, "dk0", err);
  uint32_t dvc = dkc == BAD ? BAD : zero_like(g, v, "dv0", err);
  if (dvc == BAD)
    return FALSE;
  for (int32_t t = 0; t < P; t++) {
    uint32_t kn = BAD, vn = BAD;
    char *nm = g_strdup_printf("rbwd%d", t + 1);
    if (t + 1 < P) {
      /* as in the forward: k, v move on while this step computes */
      kn = shift_async(g, ring, kc, k, nm, err);
      vn = kn == BAD ? BAD : shift_async(g, ring, vc, v, nm, err);
      if (vn == BAD) {
        g_free(nm);
        return FALSE;
      }
    }
    char *dn = g_strdup_printf("d%s", nm);
    uint32_t dqn = sp_ops_like_dim(g, q, dn, -1, 0, err);
    uint32_t dkn = dqn == BAD ? BAD : sp_ops_like_dim(g, k, dn, -1, 0, err);
    uint32_t dvn = dkn == BAD ? BAD : sp_ops_like_dim(g, v, dn, -1, 0, err);
    gboolean ok = dvn != BAD && sp_graph_ring_attn_bwd(g, ring, saved->layout, q, kc, vc, dout, saved->state, dqc,
                                                       dkc, dvc, dqn, dkn, dvn, t, err) != BAD;
    /* the block's dk, dv travel with it; after P shifts they are back with their owner */
    char *hn = g_strdup_printf("%s.sent", dn);
    if (ok && P > 1) {
      dkn = shift_async(g, ring, dkn, k, hn, err);
      dvn = dkn == BAD ? BAD : shift_async(g, ring, dvn, v, hn, err);
      ok = dvn != BAD;
    }
    g_free(hn);
    g_free(dn);
    g_free(nm);
    if (!ok)
      return FALSE;
    dqc = dqn;
    dkc = dkn;
    dvc = dvn;
    kc = kn;
    vc = vn;
  }
  *dq = dqc;
  *dk = dkc;
  *dv = dvc;
  return TRUE;
}

static gboolean hybrid_check(sp_graph *g, const sp_groups *uly, const sp_groups *ring, uint32_t q, uint32_t k,
                             GError **err)
{
  const sp_tensor *tq = sp_graph_tensor(g, q), *tk = sp_graph_tensor(g, k);
  if (!uly || !ring || uly->group_size < 1 || !tq || !tk || tq->ndim != 4 || tk->ndim != 4) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "Ulysses x ring: two group sets and 4-D q, k, v are needed");
    return FALSE;
  }
  const int32_t U = uly->group_size;
  if (tq->shape[2] % U != 0 || tk->shape[2] % U != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                "Ulysses x ring: %" G_GINT64_FORMAT " heads / %" G_GINT64_FORMAT
                " KV heads do not divide by the Ulysses degree %d; lower it and raise the ring degree",
                tq->shape[2], tk->shape[2], U);
    return FALSE;
  }
  return TRUE;
}

static uint32_t hybrid_fwd(sp_graph *g, const sp_groups *uly, const sp_groups *ring, sp_attn_layout layout,
                           uint32_t q, uint32_t k, uint32_t v, sp_ring_attn *saved, GError **err)
{
  if (!hybrid_check(g, uly, ring, q, k, err))
    return BAD;
  const int sd = layout == SP_LAYOUT_SBHD ? 0 : 1;
  uint32_t ins[3] = { q, k, v }, outs[3];
  int sc[3] = { 2, 2, 2 }, ga[3] = { sd, sd, sd };
  if (!sp_op_multi_all_to_all(g, uly, 3, ins, sc, ga, outs, err))
    return BAD;
  uint32_t o = ring_fwd(g, ring, layout, outs[0], outs[1], outs[2], saved, err);
  if (o == BAD)
    return BAD;
  o = sp_op_seq_all_to_all(g, uly, o, sd, 2, FALSE, err);
  if (saved && o != BAD)
    saved->out = o;
  return o;
}

uint32_t sp_op_ulysses_ring_attention(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                      sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                      GError **err)
{
  return hybrid_fwd(g, uly, ring, layout, q, k, v, NULL, err);
}

uint32_t sp_op_ulysses_ring_attention_fwd(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                          sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                          sp_ring_attn *saved, GError **err)
{
  if (!saved) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "Ulysses x ring: no place to save the forward's tensors");
    return BAD;
  }
  memset(saved, 0xff, sizeof *saved);
  return hybrid_fwd(g, uly, ring, layout, q, k, v, saved, err);
}

gboolean sp_op_ulysses_ring_attention_bwd(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                          const sp_ring_attn *saved, uint32_t dout, uint32_t *dq, uint32_t *dk,
                                          uint32_t *dv, GError **err)
{
  if (!saved || !sp_graph_tensor(g, saved->out) || !sp_graph_tensor(g, dout) || !uly || uly->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "Ulysses x ring backward: the Ulysses groups, the forward's saved tensors and dout are needed");
    return FALSE;
  }
  const sp_tensor *to = sp_graph_tensor(g, saved->out), *td = sp_graph_tensor(g, dout);
  if (td->ndim != to->ndim || memcmp(td->shape, to->shape, sizeof(int64_t) * (size_t)to->ndim) != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "Ulysses x ring backward: dout '%s' must have the output's shape",
                td->name);
    return FALSE;
  }
  const int sd = saved->layout == SP_LAYOUT_SBHD ? 0 : 1;
  /* the output all-to-all backward: scatter heads, gather the sequence */
  uint32_t dr = sp_op_seq_all_to_all(g, uly, dout, 2, sd, FALSE, err);
  uint32_t g3[3];
  if (dr == BAD || !sp_op_ring_attention_bwd(g, ring, saved, dr, &g3[0], &g3[1], &g3[2], err))
    return FALSE;
  /* the input all-to-alls backward: scatter the sequence, gather heads */
  uint32_t outs[3];
  int sc[3] = { sd, sd, sd }, ga[3] = { 2, 2, 2 };
  if (!sp_op_multi_all_to_all(g, uly, 3, g3, sc, ga, outs, err))
    return FALSE;
  *dq = outs[0];
  *dk = outs[1];
  *dv = outs[2];
  return TRUE;
}
