/* Reference semantics of the collectives, computed globally without any
 * communication and without running a schedule: each output element is folded
 * by a closed-form loop that follows the order coll.h states for the algorithm
 * the spec resolves to. Bitwise equality with an engine's run is the check. */
#include "config.h"

#include <string.h>

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/dbtree.h"
#include "spsim/error.h"

typedef enum {
  PLAN_CHAIN,    /* acc = x[P[s]]; acc ⊕= x[P[s+1]]; ...; acc ⊕= x[P[s+n-1]] (indices mod n,
                    P the ring order of a channel, identity without one) */
  PLAN_HALVING,  /* folded leaves, then d = p/2, .., 1: v[j] ⊕= v[j+d] for j < d */
  PLAN_BINOMIAL, /* a[u] = x[root+u]; t = L-1 .. 0: a[u] ⊕= a[u+2^t] for u < 2^t */
} plan_kind;

typedef struct {
  const sp_coll_spec *spec;
  sp_ref_input_fn get;
  void *user;
  size_t es;
  int32_t n;
  const int32_t *perm; /* PLAN_CHAIN: position -> member; NULL = identity */
} refctx;

/* Fold w elements of every member's input starting at element @first into @out. */
static void fold(const refctx *rc, plan_kind plan, int32_t s, uint64_t first, uint64_t w, void *out)
{
  int32_t n = rc->n;
  size_t es = rc->es;
  sp_dtype t = rc->spec->dtype;
  sp_redop op = rc->spec->redop;
  unsigned char *o = out;

  if (plan == PLAN_CHAIN) {
    unsigned char *tmp = g_malloc(w * es);
    const int32_t *P = rc->perm;
    rc->get(rc->user, P ? P[s % n] : s % n, first, w, o);
    for (int32_t k = 1; k < n; k++) {
      int32_t q = (s + k) % n;
      rc->get(rc->user, P ? P[q] : q, first, w, tmp);
      sp_reduce_host(o, tmp, w, t, op);
    }
    g_free(tmp);
    return;
  }

  unsigned char *v = g_malloc((size_t)n * w * es);
#define V(j) (v + (size_t)(j) * w * es)
  if (plan == PLAN_BINOMIAL) {
    int32_t L = sp_ceil_log2(n);
    for (int32_t u = 0; u < n; u++)
      rc->get(rc->user, (u + s) % n, first, w, V(u));
    for (int32_t lev = L - 1; lev >= 0; lev--) {
      int32_t h = 1 << lev;
      for (int32_t u = 0; u < h && u + h < n; u++)
        sp_reduce_host(V(u), V(u + h), w, t, op);
    }
  } else {
    int32_t p = sp_pow2_floor(n), r = n - p;
    /* leaves: pairs (2j, 2j+1) for j < r fold first; then members j + r */
    for (int32_t j = 0; j < p; j++) {
      if (j < r) {
        rc->get(rc->user, 2 * j, first, w, V(j));
        rc->get(rc->user, 2 * j + 1, first, w, V(p)); /* V(p) is free scratch (n > p) */
        sp_reduce_host(V(j), V(p), w, t, op);
      } else {
        rc->get(rc->user, j + r, first, w, V(j));
      }
    }
    for (int32_t d = p / 2; d >= 1; d /= 2)
      for (int32_t j = 0; j < d; j++)
        sp_reduce_host(V(j), V(j + d), w, t, op);
  }
  memcpy(o, V(0), w * es);
#undef V
  g_free(v);
}

/* TREE all-reduce (spsim/dbtree.h, lower/lower_dbtree.c): the sum of member m's
 * subtree in instance k = m's input, then the sums of its children in the order
 * chain child, child node 0, child node 1; w elements from @first into @o. */
static void dbtree_fold(const refctx *rc, int32_t B, int32_t k, int32_t m, uint64_t first,
                        uint64_t w, void *o)
{
  sp_dbtree_place pl;
  sp_dbtree_place_of(rc->n, B, k, m, &pl);
  rc->get(rc->user, m, first, w, o);
  void *tmp = NULL;
  for (int j = 0; j < 3; j++) {
    if (pl.child[j] < 0)
      continue;
    if (tmp == NULL)
      tmp = g_malloc(w * rc->es);
    dbtree_fold(rc, B, k, pl.child[j], first, w, tmp);
    sp_reduce_host(o, tmp, w, rc->spec->dtype, rc->spec->redop);
  }
  g_free(tmp);
}

/* NVLS-tree and CollNet (lower/lower_hier.c): "member" v of the fold over nodes is
 * node v's partial: its B members' inputs in index order (from local 0, direct) or
 * in chain order (from local s0 + 1 where s0 is the segment's local index). */
typedef struct {
  const refctx *rc; /* the whole group's */
  int32_t B, start; /* members per node; the node fold's first local index */
} node_user;

static void node_partial(void *user, int32_t node, uint64_t first, uint64_t count, void *dst)
{
  const node_user *u = user;
  const refctx *rc = u->rc;
  if (count == 0)
    return;
  unsigned char *tmp = u->B > 1 ? g_malloc(count * rc->es) : NULL;
  rc->get(rc->user, node * u->B + u->start % u->B, first, count, dst);
  for (int32_t i = 1; i < u->B; i++) {
    rc->get(rc->user, node * u->B + (u->start + i) % u->B, first, count, tmp);
    sp_reduce_host(dst, tmp, count, rc->spec->dtype, rc->spec->redop);
  }
  g_free(tmp);
}

static void hier_all_reduce(const refctx *rc, sp_algo algo, unsigned char *o)
{
  const sp_coll_spec *spec = rc->spec;
  int32_t B = sp_dbtree_block(rc->n, spec->channel_block), N = rc->n / B;
  uint64_t c = spec->count;
  size_t es = rc->es;
  gboolean tree = algo == SP_ALGO_NVLS_TREE && N > 1;
  int32_t K = tree ? sp_dbtree_instances(N, 1) : 1;
  uint64_t win = ((uint64_t)8 << 20) / ((uint64_t)(N + 1) * es);
  win = win ? win : 1;
  for (int32_t l = 0; l < B; l++) {
    uint64_t so = sp_seg_off(c, B, l), sl = sp_seg_len(c, B, l);
    node_user nu = { rc, B, algo == SP_ALGO_COLLNET_CHAIN ? l + 1 : 0 };
    refctx nrc = { spec, node_partial, &nu, es, N, NULL };
    for (int32_t k = 0; k < K; k++) {
      uint64_t ko = so + sp_seg_off(sl, K, k), kl = sp_seg_len(sl, K, k);
      int32_t root = tree ? sp_dbtree_root_member(N, 1, k) : 0;
      for (uint64_t e = 0; e < kl; e += win) {
        uint64_t w = kl - e < win ? kl - e : win;
        if (tree)
          dbtree_fold(&nrc, 1, k, root, ko + e, w, o + (ko + e) * es);
        else
          fold(&nrc, PLAN_CHAIN, 0, ko + e, w, o + (ko + e) * es);
      }
    }
  }
  if (spec->redop == SP_RED_AVG)
    sp_scale_host(o, c, spec->dtype, (double)rc->n, TRUE);
}

/* Reduce the n contributions of elements [first, first + len) into out,
 * window by window to bound memory, then AVG. */
static void reduce_range(const refctx *rc, plan_kind plan, int32_t s, uint64_t first, uint64_t len,
                         void *out)
{
  uint64_t budget = ((uint64_t)8 << 20) / ((uint64_t)rc->n * rc->es);
  uint64_t win = budget ? budget : 1;
  unsigned char *o = out;
  for (uint64_t e = 0; e < len; e += win) {
    uint64_t w = len - e < win ? len - e : win;
    fold(rc, plan, s, first + e, w, o + e * rc->es);
  }
  if (rc->spec->redop == SP_RED_AVG && rc->n > 1)
    sp_scale_host(out, len, rc->spec->dtype, (double)rc->n, TRUE);
}

gboolean sp_coll_reference_member(const sp_coll_spec *spec, sp_ref_input_fn get, void *user,
                                  int32_t member, void *out, gboolean *written, GError **err)
{
  *written = FALSE;
  if (!sp_coll_spec_validate(spec, err))
    return FALSE;
  sp_algo algo = sp_algo_choose(spec);
  if (!sp_coll_algo_supported(spec, algo, err))
    return FALSE;
  if (member < 0 || member >= spec->n) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s reference: member %d is not a group index in [0, %d)",
                sp_coll_name(spec->coll), member, spec->n);
    return FALSE;
  }
  refctx rc = { spec, get, user, sp_dtype_size(spec->dtype), spec->n, NULL };
  int32_t n = spec->n, i = member;
  uint64_t c = spec->count;
  size_t es = rc.es;
  unsigned char *o = out;

  switch (spec->coll) {
  case SP_COLL_ALL_GATHER:
    for (int32_t j = 0; j < n; j++)
      get(user, j, 0, c, o + (size_t)j * c * es);
    break;
  case SP_COLL_ALL_TO_ALL:
    for (int32_t j = 0; j < n; j++)
      get(user, j, (uint64_t)i * c, c, o + (size_t)j * c * es);
    break;
  case SP_COLL_BROADCAST: get(user, spec->root, 0, c, o); break;
  case SP_COLL_SEND_RECV:
    if (i != 1)
      return TRUE; /* member 0's out is untouched */
    get(user, 0, 0, c, o);
    break;
  case SP_COLL_ALL_REDUCE:
    if (n == 1) {
      get(user, 0, 0, c, o);
      break;
    }
    if (algo == SP_ALGO_RING) {
      /* channel h: part h of count, its n segments on the ring order P_h */
      int32_t nch = sp_ring_channels(spec);
      int32_t *perm = g_new(int32_t, n);
      rc.perm = perm;
      for (int32_t h = 0; h < nch; h++) {
        uint64_t po = sp_seg_off(c, nch, h), pl = sp_seg_len(c, nch, h);
        sp_ring_perm(n, spec->channel_block, h, perm);
        for (int32_t s = 0; s < n; s++) {
          uint64_t so = po + sp_seg_off(pl, n, s), sl = sp_seg_len(pl, n, s);
          reduce_range(&rc, PLAN_CHAIN, (s + 1) % n, so, sl, o + so * es);
        }
      }
      rc.perm = NULL;
      g_free(perm);
      break;
    }
    if (algo == SP_ALGO_NVLS_TREE || algo == SP_ALGO_COLLNET_DIRECT ||
        algo == SP_ALGO_COLLNET_CHAIN) {
      hier_all_reduce(&rc, algo, o);
      break;
    }
    if (algo == SP_ALGO_TREE) {
      int32_t B = sp_dbtree_block(n, spec->channel_block), K = sp_dbtree_instances(n, B);
      for (int32_t k = 0; k < K; k++) {
        uint64_t ko = sp_seg_off(c, K, k), kl = sp_seg_len(c, K, k);
        int32_t root = sp_dbtree_root_member(n, B, k);
        uint64_t win = ((uint64_t)8 << 20) / es;
        for (uint64_t e = 0; e < kl; e += win) {
          uint64_t w = kl - e < win ? kl - e : win;
          dbtree_fold(&rc, B, k, root, ko + e, w, o + (ko + e) * es);
        }
        if (spec->redop == SP_RED_AVG && kl > 0)
          sp_scale_host(o + ko * es, kl, spec->dtype, (double)n, TRUE);
      }
      break;
    }
    for (int32_t s = 0; s < n; s++) {
      uint64_t so = sp_seg_off(c, n, s), sl = sp_seg_len(c, n, s);
      reduce_range(&rc, PLAN_CHAIN, 0, so, sl, o + so * es);
    }
    break;
  case SP_COLL_REDUCE_SCATTER:
    if (n == 1) {
      get(user, 0, 0, c, o);
      break;
    }
    switch (algo) {
    case SP_ALGO_RING: {
      /* channel h: part h of my block, finished at my position q in P_h */
      int32_t nch = sp_ring_channels(spec);
      int32_t *perm = g_new(int32_t, n);
      rc.perm = perm;
      for (int32_t h = 0; h < nch; h++) {
        uint64_t po = sp_seg_off(c, nch, h), pl = sp_seg_len(c, nch, h);
        sp_ring_perm(n, spec->channel_block, h, perm);
        int32_t q = 0;
        while (perm[q] != i)
          q++;
        reduce_range(&rc, PLAN_CHAIN, (q + 1) % n, (uint64_t)i * c + po, pl, o + po * es);
      }
      rc.perm = NULL;
      g_free(perm);
      break;
    }
    case SP_ALGO_TREE:
    case SP_ALGO_PAT: reduce_range(&rc, PLAN_HALVING, 0, (uint64_t)i * c, c, o); break;
    default: reduce_range(&rc, PLAN_CHAIN, 0, (uint64_t)i * c, c, o); break;
    }
    break;
  case SP_COLL_REDUCE:
    if (i != spec->root)
      return TRUE; /* only the root's out is written */
    if (n == 1) {
      get(user, 0, 0, c, o);
      break;
    }
    switch (algo) {
    case SP_ALGO_RING: reduce_range(&rc, PLAN_CHAIN, (spec->root + 1) % n, 0, c, o); break;
    case SP_ALGO_TREE: reduce_range(&rc, PLAN_BINOMIAL, spec->root, 0, c, o); break;
    default: reduce_range(&rc, PLAN_CHAIN, 0, 0, c, o); break;
    }
    break;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "invalid collective %d", (int)spec->coll);
    return FALSE;
  }
  *written = TRUE;
  return TRUE;
}

typedef struct {
  const void *const *ins;
  size_t es;
} ins_user;

static void get_from_ins(void *user, int32_t member, uint64_t first, uint64_t count, void *dst)
{
  const ins_user *u = user;
  if (count == 0)
    return;
  memcpy(dst, (const unsigned char *)u->ins[member] + first * u->es, count * u->es);
}

gboolean sp_coll_reference(const sp_coll_spec *spec, const void *const *ins, void *const *outs,
                           GError **err)
{
  if (!sp_coll_spec_validate(spec, err))
    return FALSE;
  if (ins == NULL || outs == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s reference: pass the %d members' input and output buffers (got NULL)",
                sp_coll_name(spec->coll), spec->n);
    return FALSE;
  }
  ins_user u = { ins, sp_dtype_size(spec->dtype) };
  for (int32_t i = 0; i < spec->n; i++) {
    gboolean written;
    if (!sp_coll_reference_member(spec, get_from_ins, &u, i, outs[i], &written, err))
      return FALSE;
  }
  return TRUE;
}
