/* TREE algorithms: recursive halving / doubling with the non-power-of-two fold
 * (reduce-scatter, all-gather), binomial broadcast and reduce (see coll.h for the
 * schedules and orders); all-reduce is NCCL's double binary tree (lower_dbtree.c). */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

/* Group index of virtual member v: the odd member of a folded pair or m = v + r. */
static int32_t vmember(int32_t v, int32_t r)
{
  return v < r ? 2 * v + 1 : v + r;
}

/* My virtual index, or -1 for the even member of a folded pair. */
static int32_t vindex(int32_t me, int32_t r)
{
  if (me < 2 * r)
    return (me % 2) ? me / 2 : -1;
  return me - r;
}

static int32_t log2i(int32_t p)
{
  int32_t l = 0;
  while ((1 << l) < p)
    l++;
  return l;
}

void sp_lower_tree_reduce_scatter(sp_lctx *c)
{
  int32_t n = c->n, me = c->me;
  int32_t p = sp_pow2_floor(n), r = n - p, L = log2i(p);
  size_t es = c->es;
  uint64_t cnt = c->spec->count, cb = cnt * es, all = (uint64_t)n * cb;
  if (cnt == 0)
    return;
  int32_t v = vindex(me, r);
  uint32_t ph_post = (uint32_t)L + 1u;
  if (v < 0) { /* even member of a pair: give everything, get my block back */
    sp_l_send(c, me + 1, 0, c->in, 0, all);
    sp_l_wait(c, 0);
    sp_l_recv(c, me + 1, ph_post, c->out, 0, cb);
    sp_l_wait(c, ph_post);
    sp_l_avg(c, ph_post, c->out, 0, cnt);
    return;
  }
  uint32_t A = sp_l_scratch(c, all, "acc"), R = sp_l_scratch(c, all, "tree");
  sp_l_copy(c, 0, A, 0, c->in, 0, all);
  if (me < 2 * r) {
    sp_l_recv(c, me - 1, 0, R, 0, all);
    sp_l_wait(c, 0);
    sp_l_reduce(c, 0, A, 0, R, 0, (uint64_t)n * cnt);
  }
  int32_t lo = 0, hi = p; /* my current virtual range */
  for (int32_t k = 0; k < L; k++) {
    uint32_t ph = 1u + (uint32_t)k;
    int32_t d = p >> (k + 1), mid = lo + d;
    int32_t klo, khi, glo, ghi;
    if (v < mid) {
      klo = lo, khi = mid, glo = mid, ghi = hi;
    } else {
      klo = mid, khi = hi, glo = lo, ghi = mid;
    }
    int32_t pm = vmember(v ^ d, r);
    uint64_t go = (uint64_t)sp_vstart(glo, r) * cb;
    uint64_t gl = (uint64_t)(sp_vstart(ghi, r) - sp_vstart(glo, r)) * cb;
    uint64_t ko = (uint64_t)sp_vstart(klo, r) * cb;
    uint64_t kn = (uint64_t)(sp_vstart(khi, r) - sp_vstart(klo, r)) * cnt;
    sp_l_send(c, pm, ph, A, go, gl);
    sp_l_recv(c, pm, ph, R, ko, kn * es);
    sp_l_wait(c, ph);
    sp_l_reduce(c, ph, A, ko, R, ko, kn);
    lo = klo;
    hi = khi;
  }
  if (me < 2 * r)
    sp_l_send(c, me - 1, ph_post, A, (uint64_t)(me - 1) * cb, cb);
  sp_l_wait(c, ph_post);
  sp_l_copy(c, ph_post, c->out, 0, A, (uint64_t)me * cb, cb);
  sp_l_avg(c, ph_post, c->out, 0, cnt);
}

void sp_lower_tree_all_gather(sp_lctx *c)
{
  int32_t n = c->n, me = c->me;
  int32_t p = sp_pow2_floor(n), r = n - p, L = log2i(p);
  uint64_t cb = c->spec->count * c->es, all = (uint64_t)n * cb;
  if (cb == 0)
    return;
  int32_t v = vindex(me, r);
  sp_l_copy(c, 0, c->out, (uint64_t)me * cb, c->in, 0, cb);
  if (me < 2 * r) {
    if (v < 0)
      sp_l_send(c, me + 1, 0, c->out, (uint64_t)me * cb, cb);
    else
      sp_l_recv(c, me - 1, 0, c->out, (uint64_t)(me - 1) * cb, cb);
    sp_l_wait(c, 0);
  }
  if (v >= 0) {
    for (int32_t k = 0; k < L; k++) {
      uint32_t ph = 1u + (uint32_t)k;
      int32_t d = 1 << k, vp = v ^ d;
      int32_t mlo = v & ~(d - 1), plo = vp & ~(d - 1);
      int32_t pm = vmember(vp, r);
      uint64_t mo = (uint64_t)sp_vstart(mlo, r) * cb;
      uint64_t ml = (uint64_t)(sp_vstart(mlo + d, r) - sp_vstart(mlo, r)) * cb;
      uint64_t po = (uint64_t)sp_vstart(plo, r) * cb;
      uint64_t pl = (uint64_t)(sp_vstart(plo + d, r) - sp_vstart(plo, r)) * cb;
      sp_l_send(c, pm, ph, c->out, mo, ml);
      sp_l_recv(c, pm, ph, c->out, po, pl);
      sp_l_wait(c, ph);
    }
  }
  if (me < 2 * r) {
    uint32_t ph = (uint32_t)L + 1u;
    if (v < 0)
      sp_l_recv(c, me + 1, ph, c->out, 0, all);
    else
      sp_l_send(c, me - 1, ph, c->out, 0, all);
    sp_l_wait(c, ph);
  }
}

static void tree_bcast(sp_lctx *c)
{
  int32_t n = c->n, root = c->spec->root;
  int32_t u = (c->me - root + n) % n, L = sp_ceil_log2(n);
  uint64_t bytes = c->spec->count * c->es;
  if (bytes == 0)
    return;
  if (u == 0)
    sp_l_copy(c, 0, c->out, 0, c->in, 0, bytes);
  uint32_t src = u == 0 ? c->in : c->out;
  for (int32_t t = 0; t < L; t++) {
    int32_t h = 1 << t;
    if (u < h && u + h < n)
      sp_l_send(c, (u + h + root) % n, (uint32_t)t, src, 0, bytes);
    else if (u >= h && u < 2 * h)
      sp_l_recv(c, (u - h + root) % n, (uint32_t)t, c->out, 0, bytes);
    sp_l_wait(c, (uint32_t)t);
  }
}

static void tree_reduce(sp_lctx *c)
{
  int32_t n = c->n, root = c->spec->root;
  int32_t u = (c->me - root + n) % n, L = sp_ceil_log2(n);
  uint64_t cnt = c->spec->count, bytes = cnt * c->es;
  if (bytes == 0)
    return;
  gboolean kids = FALSE;
  for (int32_t t = 0; t < L; t++)
    if (u < (1 << t) && u + (1 << t) < n)
      kids = TRUE;
  uint32_t acc = c->in, R = 0;
  if (u == 0) {
    acc = c->out;
    sp_l_copy(c, 0, acc, 0, c->in, 0, bytes);
  } else if (kids) {
    acc = sp_l_scratch(c, bytes, "acc");
    sp_l_copy(c, 0, acc, 0, c->in, 0, bytes);
  }
  if (kids)
    R = sp_l_scratch(c, bytes, "tree");
  for (int32_t idx = 0; idx < L; idx++) {
    int32_t t = L - 1 - idx, h = 1 << t;
    uint32_t ph = (uint32_t)idx;
    if (u < h && u + h < n) {
      sp_l_recv(c, (u + h + root) % n, ph, R, 0, bytes);
      sp_l_wait(c, ph);
      sp_l_reduce(c, ph, acc, 0, R, 0, cnt);
    } else if (u >= h && u < 2 * h) {
      sp_l_send(c, (u - h + root) % n, ph, acc, 0, bytes);
      sp_l_wait(c, ph);
    }
  }
  if (u == 0)
    sp_l_avg(c, (uint32_t)(L > 0 ? L - 1 : 0), c->out, 0, cnt);
}

gboolean sp_lower_tree(sp_lctx *c, GError **err)
{
  switch (c->spec->coll) {
  case SP_COLL_ALL_REDUCE: sp_lower_dbtree_allreduce(c); return TRUE;
  case SP_COLL_REDUCE_SCATTER: sp_lower_tree_reduce_scatter(c); return TRUE;
  case SP_COLL_ALL_GATHER: sp_lower_tree_all_gather(c); return TRUE;
  case SP_COLL_BROADCAST: tree_bcast(c); return TRUE;
  case SP_COLL_REDUCE: tree_reduce(c); return TRUE;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "%s has no tree algorithm: use direct",
                sp_coll_name(c->spec->coll));
    return FALSE;
  }
}
