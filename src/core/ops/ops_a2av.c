/* All-to-all with uneven per-destination counts (all-to-all-v) as grouped
 * point-to-point sends: every (sender, receiver) pair with rows to move is one
 * send-recv of exactly those rows, all posted before one wait (as NCCL's grouped
 * ncclSend/ncclRecv and MPI_Alltoallv move them); nothing is sent for a zero count.
 * The received rows land in the receiver's block through pooled storage. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

/* A tensor of [rows, H] f32 held by @p n ranks. */
static uint32_t piece(sp_graph *g, const char *nm, int64_t rows, int64_t H, const int32_t *ranks, int32_t n,
                      sp_tensor_init init, GError **err)
{
  int64_t s[2] = { rows, H };
  uint32_t t = sp_graph_tensor_new(g, nm, SP_F32, 2, s, SP_TENSOR_COMM, init, err);
  if (t != BAD && ranks && !sp_graph_tensor_place(g, t, ranks, n, err))
    return BAD;
  return t;
}

uint32_t sp_op_all_to_all_v(sp_graph *g, const sp_groups *gs, uint32_t in, const int64_t *counts, int64_t cap,
                            GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, in);
  if (!gs || gs->n_groups < 1 || gs->group_size < 1 || !counts) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "all-to-all-v: empty group set or no counts");
    return BAD;
  }
  const int32_t P = gs->group_size;
  if (!x || x->ndim != 2 || x->dtype != SP_F32 || cap < 1 || x->shape[0] != (int64_t)P * cap) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "all-to-all-v: the input must be an f32 [P x cap, H] tensor (P = %d blocks of cap = %" G_GINT64_FORMAT
                " rows)", P, cap);
    return BAD;
  }
  for (int64_t k = 0; k < (int64_t)P * P; k++)
    if (counts[k] < 0 || counts[k] > cap) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "all-to-all-v: count %" G_GINT64_FORMAT " from member %" G_GINT64_FORMAT " to member %" G_GINT64_FORMAT
                  " is outside [0, %" G_GINT64_FORMAT "] (the block size)", counts[k], k / P, k % P, cap);
      return BAD;
    }
  const int64_t H = x->shape[1];
  /* Member j's block from member i is its own tensor recv(i, j) [cap, H] (zeros),
   * sharing storage with the piece received into it (pool A, one slot per pair);
   * member j's blocks are concatenated into out(j), which shares storage with the
   * result every member holds (pool B): a rank's bytes are its own blocks only. */
  const int32_t pool_a = 0x41560000 + (int32_t)sp_graph_n_tensors(g), pool_b = pool_a + 1;
  uint32_t out = sp_ops_like(g, in, "a2av", 2, x->shape, SP_TENSOR_ACTIVATION, err);
  if (out == BAD)
    return BAD;
  sp_graph_tensor_pool(g, out, pool_b, 0);
  uint32_t *recv = g_new(uint32_t, P);
  gboolean ok = TRUE;
  /* the self blocks first, then every pair's send-recv (posted, not waited), then
   * each member's concatenation, which waits for its pieces */
  for (int pass = 0; ok && pass < 2; pass++)
    for (int32_t gi = 0; ok && gi < gs->n_groups; gi++)
      for (int32_t i = 0; ok && i < P; i++)
        for (int32_t j = 0; ok && j < P; j++) {
          const int64_t c = counts[(int64_t)i * P + j];
          const int32_t ri = gs->ranks[gi * P + i], rj = gs->ranks[gi * P + j], pair[2] = { ri, rj };
          if (c == 0 || (pass == 0) != (i == j))
            continue;
          char *nm = g_strdup_printf("%s.a2av%d_%d_%d", x->name, gi, i, j);
          char *rn = g_strdup_printf("%s.recv", nm);
          uint32_t send = i == j ? BAD : piece(g, nm, c, H, pair, 2, SP_INIT_NONE, err);
          uint32_t got = (i != j && send == BAD) ? BAD : piece(g, rn, c, H, pair, i == j ? 1 : 2, SP_INIT_NONE, err);
          g_free(nm);
          g_free(rn);
          if (got == BAD) {
            ok = FALSE;
            break;
          }
          sp_graph_tensor_pool(g, got, pool_a, (gi * P + i) * P + j);
          if (i == j) {
            ok = sp_graph_slice(g, in, got, 0, (int64_t)j * cap, c, err) != BAD;
            continue;
          }
          sp_groups one = sp_groups_one(pair, 2);
          uint32_t n = BAD;
          ok = sp_graph_slice(g, in, send, 0, (int64_t)j * cap, c, err) != BAD &&
               (n = sp_graph_send_recv(g, &one, send, got, err)) != BAD;
          if (ok)
            sp_graph_node_set_async(g, n, TRUE); /* every pair posted before one wait */
        }
  for (int32_t gi = 0; ok && gi < gs->n_groups; gi++)
    for (int32_t j = 0; ok && j < P; j++) {
      const int32_t rj = gs->ranks[gi * P + j];
      for (int32_t i = 0; ok && i < P; i++) {
        char *nm = g_strdup_printf("%s.a2av%d_%d_%d.block", x->name, gi, i, j);
        recv[i] = piece(g, nm, cap, H, &rj, 1, SP_INIT_ZERO, err);
        g_free(nm);
        ok = recv[i] != BAD;
        if (ok)
          sp_graph_tensor_pool(g, recv[i], pool_a, (gi * P + i) * P + j);
      }
      char *nm = g_strdup_printf("%s.a2av%d_to%d", x->name, gi, j);
      uint32_t oj = ok ? piece(g, nm, (int64_t)P * cap, H, &rj, 1, SP_INIT_NONE, err) : BAD;
      g_free(nm);
      if (oj != BAD)
        sp_graph_tensor_pool(g, oj, pool_b, 0);
      ok = oj != BAD && sp_ops_concat_parts(g, recv, P, oj, err);
    }
  if (!ok)
    out = BAD;
  g_free(recv);
  return out;
}
