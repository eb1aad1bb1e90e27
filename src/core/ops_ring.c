/* Ring attention (context parallelism) and the Ulysses x ring hybrid. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

uint32_t sp_op_ring_attention(sp_graph *g, const sp_groups *ring, sp_attn_layout layout, uint32_t q,
                              uint32_t k, uint32_t v, GError **err)
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
  return out;
}

uint32_t sp_op_ulysses_ring_attention(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                      sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                      GError **err)
{
  const sp_tensor *tq = sp_graph_tensor(g, q), *tk = sp_graph_tensor(g, k);
  if (!uly || !ring || uly->group_size < 1 || !tq || !tk || tq->ndim != 4 || tk->ndim != 4) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "Ulysses x ring: two group sets and 4-D q, k, v are needed");
    return BAD;
  }
  const int32_t U = uly->group_size;
  if (tq->shape[2] % U != 0 || tk->shape[2] % U != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                "Ulysses x ring: %" G_GINT64_FORMAT " heads / %" G_GINT64_FORMAT
                " KV heads do not divide by the Ulysses degree %d; lower it and raise the ring degree",
                tq->shape[2], tk->shape[2], U);
    return BAD;
  }
  const int sd = layout == SP_LAYOUT_SBHD ? 0 : 1;
  uint32_t ins[3] = { q, k, v }, outs[3];
  int sc[3] = { 2, 2, 2 }, ga[3] = { sd, sd, sd };
  if (!sp_op_multi_all_to_all(g, uly, 3, ins, sc, ga, outs, err))
    return BAD;
  uint32_t o = sp_op_ring_attention(g, ring, layout, outs[0], outs[1], outs[2], err);
  if (o == BAD)
    return BAD;
  return sp_op_seq_all_to_all(g, uly, o, sd, 2, FALSE, err);
}
