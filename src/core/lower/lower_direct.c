/* DIRECT algorithms: one message per pair of members, no chunking (see coll.h for
 * the schedules and their reduction orders). */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

/* slot of member j in a scratch holding the n-1 other members' blocks */
static uint64_t slot_of(int32_t j, int32_t me)
{
  return (uint64_t)(j < me ? j : j - 1);
}

/* Direct reduce-scatter of the (offset, length) block of every member j inside
 * "in" at in_off(j); result into out at out_off. Blocks are described in
 * elements by offs[]/lens[] (size n). Index order 0..n-1. */
static void direct_rs(sp_lctx *c, uint32_t phase, const uint64_t *offs, const uint64_t *lens,
                      uint32_t out_buf, uint64_t out_off)
{
  int32_t n = c->n, me = c->me;
  size_t es = c->es;
  uint64_t mylen = lens[me];
  uint32_t R = 0;
  if (mylen > 0)
    R = sp_l_scratch(c, (uint64_t)(n - 1) * mylen * es, "rs");
  for (int32_t k = 1; k < n; k++) {
    int32_t to = (me + k) % n, from = (me - k + n) % n;
    sp_l_send(c, to, phase, c->in, offs[to] * es, lens[to] * es);
    sp_l_recv(c, from, phase, R, slot_of(from, me) * mylen * es, mylen * es);
  }
  sp_l_wait(c, phase);
  if (mylen == 0)
    return;
  uint64_t dst = out_off * es;
  if (me == 0)
    sp_l_copy(c, phase, out_buf, dst, c->in, offs[me] * es, mylen * es);
  else
    sp_l_copy(c, phase, out_buf, dst, R, 0, mylen * es);
  for (int32_t j = 1; j < n; j++) {
    if (j == me)
      sp_l_reduce(c, phase, out_buf, dst, c->in, offs[me] * es, mylen);
    else
      sp_l_reduce(c, phase, out_buf, dst, R, slot_of(j, me) * mylen * es, mylen);
  }
  sp_l_avg(c, phase, out_buf, dst, mylen);
}

/* The all-to-all's cost without one message per pair (cost only: no bytes land where
 * they belong). The n members come as N nodes of B consecutive members; member (u, l)
 * sends its B - 1 blocks for its own node as one message to (u, l + 1 mod B) and, for
 * every other node v, that node's B blocks as one message to (v, l), the member on its
 * own rail. Every NVLink port and NIC then carries, each way, the bytes the pairwise
 * messages put on it, and every route of a class (same node, same leaf, across the
 * spine) the same bytes from the same number of senders, in N messages per member
 * instead of n - 1. */
static void a2a_by_rail(sp_lctx *c, int32_t B, uint64_t cb)
{
  int32_t N = c->n / B, u = c->me / B, l = c->me % B;
  uint64_t nb = (uint64_t)B * cb;
  if (B > 1) {
    sp_l_send(c, u * B + (l + 1) % B, 0, c->in, (uint64_t)u * nb, (uint64_t)(B - 1) * cb);
    sp_l_recv(c, u * B + (l + B - 1) % B, 0, c->out, (uint64_t)u * nb, (uint64_t)(B - 1) * cb);
  }
  for (int32_t k = 1; k < N; k++) {
    int32_t to = (u + k) % N, from = (u - k + N) % N;
    sp_l_send(c, to * B + l, 0, c->in, (uint64_t)to * nb, nb);
    sp_l_recv(c, from * B + l, 0, c->out, (uint64_t)from * nb, nb);
  }
  sp_l_wait(c, 0);
}

gboolean sp_lower_direct(sp_lctx *c, GError **err)
{
  const sp_coll_spec *sp = c->spec;
  int32_t n = c->n, me = c->me, root = sp->root;
  size_t es = c->es;
  uint64_t cnt = sp->count, cb = cnt * es;

  switch (sp->coll) {
  case SP_COLL_ALL_TO_ALL:
    sp_l_copy(c, 0, c->out, (uint64_t)me * cb, c->in, (uint64_t)me * cb, cb);
    if (!sp_l_local(c) && sp->channel_block >= 1 && n % sp->channel_block == 0) {
      a2a_by_rail(c, sp->channel_block, cb);
      return TRUE;
    }
    /* every peer in flight, one wait: NCCL's grouped point-to-point (nccl-tests'
     * alltoall posts ncclSend and ncclRecv to each peer between ncclGroupStart/End) */
    for (int32_t k = 1; k < n; k++) {
      int32_t to = (me + k) % n, from = (me - k + n) % n;
      sp_l_send(c, to, 0, c->in, (uint64_t)to * cb, cb);
      sp_l_recv(c, from, 0, c->out, (uint64_t)from * cb, cb);
    }
    sp_l_wait(c, 0);
    return TRUE;
  case SP_COLL_ALL_GATHER:
    sp_l_copy(c, 0, c->out, (uint64_t)me * cb, c->in, 0, cb);
    for (int32_t k = 1; k < n; k++) {
      int32_t to = (me + k) % n, from = (me - k + n) % n;
      sp_l_send(c, to, 0, c->in, 0, cb);
      sp_l_recv(c, from, 0, c->out, (uint64_t)from * cb, cb);
    }
    sp_l_wait(c, 0);
    return TRUE;
  case SP_COLL_REDUCE_SCATTER: {
    uint64_t *offs = g_new(uint64_t, n), *lens = g_new(uint64_t, n);
    for (int32_t j = 0; j < n; j++) {
      offs[j] = (uint64_t)j * cnt;
      lens[j] = cnt;
    }
    direct_rs(c, 0, offs, lens, c->out, 0);
    g_free(offs);
    g_free(lens);
    return TRUE;
  }
  case SP_COLL_ALL_REDUCE: {
    uint64_t *offs = g_new(uint64_t, n), *lens = g_new(uint64_t, n);
    for (int32_t j = 0; j < n; j++) {
      offs[j] = sp_seg_off(cnt, n, j);
      lens[j] = sp_seg_len(cnt, n, j);
    }
    direct_rs(c, 0, offs, lens, c->out, offs[me]);
    for (int32_t k = 1; k < n; k++) {
      int32_t to = (me + k) % n, from = (me - k + n) % n;
      sp_l_send(c, to, 1, c->out, offs[me] * es, lens[me] * es);
      sp_l_recv(c, from, 1, c->out, offs[from] * es, lens[from] * es);
    }
    sp_l_wait(c, 1);
    g_free(offs);
    g_free(lens);
    return TRUE;
  }
  case SP_COLL_BROADCAST:
    if (me == root) {
      sp_l_copy(c, 0, c->out, 0, c->in, 0, cb);
      for (int32_t k = 1; k < n; k++)
        sp_l_send(c, (root + k) % n, 0, c->in, 0, cb);
    } else {
      sp_l_recv(c, root, 0, c->out, 0, cb);
    }
    sp_l_wait(c, 0);
    return TRUE;
  case SP_COLL_REDUCE: {
    if (me != root) {
      sp_l_send(c, root, 0, c->in, 0, cb);
      sp_l_wait(c, 0);
      return TRUE;
    }
    if (cb == 0)
      return TRUE;
    uint32_t R = sp_l_scratch(c, (uint64_t)(n - 1) * cb, "reduce");
    for (int32_t k = 1; k < n; k++) {
      int32_t from = (root + k) % n;
      sp_l_recv(c, from, 0, R, slot_of(from, me) * cb, cb);
    }
    sp_l_wait(c, 0);
    if (me == 0)
      sp_l_copy(c, 0, c->out, 0, c->in, 0, cb);
    else
      sp_l_copy(c, 0, c->out, 0, R, 0, cb);
    for (int32_t j = 1; j < n; j++) {
      if (j == me)
        sp_l_reduce(c, 0, c->out, 0, c->in, 0, cnt);
      else
        sp_l_reduce(c, 0, c->out, 0, R, slot_of(j, me) * cb, cnt);
    }
    sp_l_avg(c, 0, c->out, 0, cnt);
    return TRUE;
  }
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "%s has no direct algorithm",
                sp_coll_name(sp->coll));
    return FALSE;
  }
}
