/* RING algorithms: chunked, pipelined rings and chains (see coll.h for the
 * schedules and their reduction orders). */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

/* a mod n for a in [-2n, 2n) (ring indices: no division in the step loops) */
static inline int32_t mod(int32_t a, int32_t n)
{
  if (a < 0)
    a += n;
  if (a < 0)
    a += n;
  if (a >= n)
    a -= n;
  return a;
}

/* Element range [off, off + len) of chunk r of a block of blen elements that
 * starts at element boff. */
static void chunk_of(uint64_t boff, uint64_t blen, uint64_t ce, uint64_t r, uint64_t *off,
                     uint64_t *len)
{
  uint64_t lo = r * ce;
  if (lo >= blen) {
    *off = boff + blen;
    *len = 0;
    return;
  }
  uint64_t hi = lo + ce < blen ? lo + ce : blen;
  *off = boff + lo;
  *len = hi - lo;
}

/* One ring (a channel): ring position q is member perm[q]; the block handled
 * at position q starts at offs[q] (elements) with lens[q] elements, in the "in"
 * layout (all-gather: the "out" layout); for all-reduce the same offsets hold
 * in "out". S[2] are ping-pong scratch buffers of one chunk; the final block of
 * a reduce-scatter lands at (out, fin_off + chunk offset) elements. */
typedef struct {
  int32_t *perm;
  int32_t pos;          /* my position */
  int32_t next, prev;   /* group indices of my ring neighbours */
  uint64_t *offs, *lens;
  uint64_t maxlen;
  uint32_t S[2];
  uint64_t fin_off;
} ring_ch;

/*
 * Step k of the ring reduce-scatter of chunk round r, posts only: position i
 * sends block i-k-1 and receives block i-k-2. Blocks received at the last step
 * land in out at fin_off; the others in scratch.
 */
static void rs_post(sp_lctx *c, const ring_ch *h, uint64_t ce, uint64_t r, int32_t k, uint32_t ph)
{
  int32_t n = c->n, i = h->pos;
  size_t es = c->es;
  int32_t sblk = mod(i - k - 1, n), rblk = mod(i - k - 2, n);
  uint64_t soff, slen, roff, rlen;
  chunk_of(h->offs[sblk], h->lens[sblk], ce, r, &soff, &slen);
  chunk_of(h->offs[rblk], h->lens[rblk], ce, r, &roff, &rlen);
  /* send: the raw input at step 0, else the partial received at step k-1 */
  if (k == 0)
    sp_l_send(c, h->next, ph, c->in, soff * es, slen * es);
  else
    sp_l_send(c, h->next, ph, h->S[(k - 1) % 2], 0, slen * es);
  gboolean last = k == n - 2;
  uint32_t rbuf = last ? c->out : h->S[k % 2];
  uint64_t rbyte = last ? (h->fin_off + (roff - h->offs[rblk])) * es : 0;
  sp_l_recv(c, h->prev, ph, rbuf, rbyte, rlen * es);
}

/* After the WAIT of step k: partial (received) ⊕ own input. */
static void rs_reduce(sp_lctx *c, const ring_ch *h, uint64_t ce, uint64_t r, int32_t k, uint32_t ph)
{
  int32_t n = c->n;
  size_t es = c->es;
  int32_t rblk = mod(h->pos - k - 2, n);
  uint64_t roff, rlen;
  chunk_of(h->offs[rblk], h->lens[rblk], ce, r, &roff, &rlen);
  gboolean last = k == n - 2;
  uint32_t rbuf = last ? c->out : h->S[k % 2];
  uint64_t rbyte = last ? (h->fin_off + (roff - h->offs[rblk])) * es : 0;
  sp_l_reduce(c, ph, rbuf, rbyte, c->in, roff * es, rlen);
}

/* Step k of the ring all-gather of chunk round r over out: position i sends
 * block i-k and receives block i-k-1. */
static void ag_post(sp_lctx *c, const ring_ch *h, uint64_t ce, uint64_t r, int32_t k, uint32_t ph)
{
  int32_t n = c->n, i = h->pos;
  size_t es = c->es;
  int32_t sblk = mod(i - k, n), rblk = mod(i - k - 1, n);
  uint64_t soff, slen, roff, rlen;
  chunk_of(h->offs[sblk], h->lens[sblk], ce, r, &soff, &slen);
  chunk_of(h->offs[rblk], h->lens[rblk], ce, r, &roff, &rlen);
  sp_l_send(c, h->next, ph, c->out, soff * es, slen * es);
  sp_l_recv(c, h->prev, ph, c->out, roff * es, rlen * es);
}

static uint64_t rounds_of(uint64_t maxlen, uint64_t ce)
{
  return (maxlen + ce - 1) / ce;
}

/* Phases must fit in uint32 for the trace; rounds are bounded by the count. */
static uint32_t phase_at(uint64_t r, uint32_t per_round, uint32_t k)
{
  return (uint32_t)(r * per_round) + k;
}

/* Pipelined chain over the members in ring order starting at @first:
 * positions 0..n-1 = first, first+1, ... Broadcast: position 0 is the root. */
static void chain_bcast(sp_lctx *c, uint64_t ce)
{
  int32_t n = c->n, i = c->me;
  size_t es = c->es;
  uint64_t cnt = c->spec->count;
  int32_t d = mod(i - c->spec->root, n); /* distance from the root */
  int32_t next = mod(i + 1, n), prev = mod(i - 1, n);
  uint64_t C = rounds_of(cnt, ce);
  if (d == 0)
    sp_l_copy(c, 0, c->out, 0, c->in, 0, cnt * es);
  uint32_t src = d == 0 ? c->in : c->out;
  /* at step t, position d receives chunk t-d+1 and forwards chunk t-d */
  for (uint64_t t = 0; t + 2 < C + (uint64_t)n; t++) {
    int64_t rc = (int64_t)t - d + 1, sc = (int64_t)t - d;
    uint64_t off, len;
    if (d >= 1 && rc >= 0 && (uint64_t)rc < C) {
      chunk_of(0, cnt, ce, (uint64_t)rc, &off, &len);
      sp_l_recv(c, prev, (uint32_t)t, c->out, off * es, len * es);
    }
    if (d <= n - 2 && sc >= 0 && (uint64_t)sc < C) {
      chunk_of(0, cnt, ce, (uint64_t)sc, &off, &len);
      sp_l_send(c, next, (uint32_t)t, src, off * es, len * es);
    }
    sp_l_wait(c, (uint32_t)t);
  }
}

/* Pipelined reduce chain root+1 -> root+2 -> ... -> root. Position q in 1..n
 * (the root is q = n). Position q >= 2 receives chunk ch at step ch+q-2 and
 * forwards it (reduced) at step ch+q-1. */
static void chain_reduce(sp_lctx *c, uint64_t ce)
{
  int32_t n = c->n, i = c->me;
  size_t es = c->es;
  uint64_t cnt = c->spec->count;
  int32_t q = mod(i - c->spec->root - 1, n) + 1;
  int32_t next = mod(i + 1, n), prev = mod(i - 1, n);
  uint64_t C = rounds_of(cnt, ce);
  if (C == 0)
    return;
  uint32_t S[2] = { 0, 0 };
  if (q >= 2 && q < n) {
    uint64_t sb = (ce < cnt ? ce : cnt) * es;
    S[0] = sp_l_scratch(c, sb, "chain0");
    S[1] = C > 1 ? sp_l_scratch(c, sb, "chain1") : S[0];
  }
  for (uint64_t t = 0; t + 2 < C + (uint64_t)n; t++) {
    int64_t rc = (int64_t)t - q + 2, sc = (int64_t)t - q + 1;
    uint32_t ph = (uint32_t)t;
    uint64_t off = 0, len = 0;
    gboolean got = FALSE;
    if (q >= 2 && rc >= 0 && (uint64_t)rc < C) {
      chunk_of(0, cnt, ce, (uint64_t)rc, &off, &len);
      if (q == n)
        sp_l_recv(c, prev, ph, c->out, off * es, len * es);
      else
        sp_l_recv(c, prev, ph, S[rc % 2], 0, len * es);
      got = TRUE;
    }
    if (q <= n - 1 && sc >= 0 && (uint64_t)sc < C) {
      uint64_t so, sl;
      chunk_of(0, cnt, ce, (uint64_t)sc, &so, &sl);
      if (q == 1)
        sp_l_send(c, next, ph, c->in, so * es, sl * es);
      else
        sp_l_send(c, next, ph, S[sc % 2], 0, sl * es);
    }
    sp_l_wait(c, ph);
    if (got) {
      if (q == n) {
        sp_l_reduce(c, ph, c->out, off * es, c->in, off * es, len);
        sp_l_avg(c, ph, c->out, off * es, len);
      } else {
        sp_l_reduce(c, ph, S[rc % 2], 0, c->in, off * es, len);
      }
    }
  }
}

gboolean sp_lower_ring(sp_lctx *c, GError **err)
{
  const sp_coll_spec *sp = c->spec;
  int32_t n = c->n, me = c->me;
  size_t es = c->es;
  uint64_t cnt = sp->count;
  uint64_t ce = sp_l_chunk_elems(sp);

  switch (sp->coll) {
  case SP_COLL_ALL_REDUCE:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_GATHER: {
    gboolean ar = sp->coll == SP_COLL_ALL_REDUCE, ag = sp->coll == SP_COLL_ALL_GATHER;
    int32_t nch = sp_ring_channels(sp);
    ring_ch *ch = g_new0(ring_ch, nch);
    uint64_t C = 0;
    for (int32_t h = 0; h < nch; h++) {
      ring_ch *R = &ch[h];
      /* part h of the data: of count (all-reduce) or of every member's block */
      uint64_t po = sp_seg_off(cnt, nch, h), pl = sp_seg_len(cnt, nch, h);
      R->perm = g_new(int32_t, n);
      sp_ring_perm(n, sp->channel_block, h, R->perm);
      R->pos = 0;
      for (int32_t q = 0; q < n; q++)
        if (R->perm[q] == me)
          R->pos = q;
      R->next = R->perm[mod(R->pos + 1, n)];
      R->prev = R->perm[mod(R->pos - 1, n)];
      R->offs = g_new(uint64_t, n);
      R->lens = g_new(uint64_t, n);
      /* all-reduce segments of the part: sp_seg_off/len without a division each */
      uint64_t sq = pl / (uint64_t)n, sr = pl % (uint64_t)n;
      for (int32_t q = 0; q < n; q++) {
        uint64_t uq = (uint64_t)q;
        R->offs[q] = ar ? po + uq * sq + (uq < sr ? uq : sr) : (uint64_t)R->perm[q] * cnt + po;
        R->lens[q] = ar ? sq + (uq < sr ? 1u : 0u) : pl;
      }
      R->maxlen = ar ? sq + (sr > 0 ? 1u : 0u) : pl;
      /* all-reduce: my segment lands in out at its own offset; RS: at the part's */
      R->fin_off = ar ? R->offs[R->pos] : po;
      uint64_t Ch = rounds_of(R->maxlen, ce);
      if (Ch > C)
        C = Ch;
      if (!ag && Ch > 0 && n > 2) {
        uint64_t sb = (ce < R->maxlen ? ce : R->maxlen) * es;
        char n0[32], n1[32];
        if (nch == 1) {
          g_snprintf(n0, sizeof n0, "ring0");
          g_snprintf(n1, sizeof n1, "ring1");
        } else {
          g_snprintf(n0, sizeof n0, "ring%d.0", h);
          g_snprintf(n1, sizeof n1, "ring%d.1", h);
        }
        R->S[0] = sp_l_scratch(c, sb, n0);
        R->S[1] = sp_l_scratch(c, sb, n1);
      }
    }
    if (ag)
      sp_l_copy(c, 0, c->out, (uint64_t)me * cnt * es, c->in, 0, cnt * es);
    uint32_t per_round = ar ? 2u * (uint32_t)(n - 1) : (uint32_t)(n - 1);
    for (uint64_t r = 0; r < C; r++) {
      uint32_t ph0 = phase_at(r, per_round, 0);
      if (!ag) {
        for (int32_t k = 0; k < n - 1; k++) {
          uint32_t ph = ph0 + (uint32_t)k;
          for (int32_t h = 0; h < nch; h++)
            rs_post(c, &ch[h], ce, r, k, ph);
          sp_l_wait(c, ph);
          for (int32_t h = 0; h < nch && sp_l_local(c); h++)
            rs_reduce(c, &ch[h], ce, r, k, ph);
        }
        for (int32_t h = 0; h < nch && sp_l_local(c); h++) {
          uint64_t o, l;
          chunk_of(ch[h].fin_off, ch[h].lens[ch[h].pos], ce, r, &o, &l);
          sp_l_avg(c, ph0 + (uint32_t)(n - 2), c->out, o * es, l);
        }
      }
      if (ag || ar) {
        uint32_t pa = ar ? ph0 + (uint32_t)(n - 1) : ph0;
        for (int32_t k = 0; k < n - 1; k++) {
          for (int32_t h = 0; h < nch; h++)
            ag_post(c, &ch[h], ce, r, k, pa + (uint32_t)k);
          sp_l_wait(c, pa + (uint32_t)k);
        }
      }
    }
    for (int32_t h = 0; h < nch; h++) {
      g_free(ch[h].perm);
      g_free(ch[h].offs);
      g_free(ch[h].lens);
    }
    g_free(ch);
    return TRUE;
  }
  case SP_COLL_BROADCAST: chain_bcast(c, ce); return TRUE;
  case SP_COLL_REDUCE: chain_reduce(c, ce); return TRUE;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no ring algorithm: use direct", sp_coll_name(sp->coll));
    return FALSE;
  }
}

/* sp_ring_perm one entry at a time: the member at ring position q of channel ch
 * (ring_at), and the position of member m (ring_pos). */
static int32_t ring_at(int32_t n, int32_t block, int32_t ch, int32_t q)
{
  int32_t B = block < 1 ? 1 : (block > n ? n : block);
  int32_t b = q / B * B, L = n - b < B ? n - b : B, r = ch % L, t = q - b;
  return b + (t + r < L ? t + r : t + r - L);
}

static int32_t ring_pos(int32_t n, int32_t block, int32_t ch, int32_t m)
{
  int32_t B = block < 1 ? 1 : (block > n ? n : block);
  int32_t b = m / B * B, L = n - b < B ? n - b : B, r = ch % L, u = m - b;
  return b + (u - r >= 0 ? u - r : u - r + L);
}

/* The posts of every block of a RING all-reduce, reduce-scatter or all-gather of
 * member @p me when all blocks post to the same peers: every chunk of every
 * member's block is non-empty in every round (each segment needs the same number
 * of chunk rounds), so no post is skipped. Mirrors sp_lower_ring step for step:
 * the first block's posts as sp_lower_ring emits them, the number of blocks
 * (WAITs with posts) and, per post, its bytes summed over all blocks (the sum of
 * the chunks of every member's block but one). */
gboolean sp_lower_coll_pattern(const sp_coll_spec *spec, int32_t me, sp_step *posts, guint *nposts,
                               uint64_t *totals, uint64_t *nblocks)
{
  const sp_coll_spec *sp = spec;
  int32_t n = sp->n;
  if (n < 2 || me < 0 || me >= n || sp_algo_choose(sp) != SP_ALGO_RING)
    return FALSE;
  if (sp->coll != SP_COLL_ALL_REDUCE && sp->coll != SP_COLL_REDUCE_SCATTER && sp->coll != SP_COLL_ALL_GATHER)
    return FALSE;
  gboolean ar = sp->coll == SP_COLL_ALL_REDUCE, ag = sp->coll == SP_COLL_ALL_GATHER;
  int32_t nch = sp_ring_channels(sp);
  if (nch > SP_MAX_CHANNELS)
    return FALSE;
  size_t es = sp_dtype_size(sp->dtype);
  uint64_t cnt = sp->count, ce = sp_l_chunk_elems(sp);
  uint64_t C = 0;
  gboolean ok = TRUE;
  guint np = 0;
  for (int32_t h = 0; h < nch && ok; h++) {
    uint64_t pl = sp_seg_len(cnt, nch, h);
    int32_t pos = ring_pos(n, sp->channel_block, h, me);
    uint64_t sq = pl / (uint64_t)n, sr = pl % (uint64_t)n;
    /* block lengths: all-reduce segments of the part (the first sr one longer), else pl */
    uint64_t lmin = ar ? sq : pl, lmax = ar ? sq + (sr > 0 ? 1u : 0u) : pl;
    uint64_t Cmin = rounds_of(lmin, ce), Cmax = rounds_of(lmax, ce);
    if (Cmin == 0 || Cmin != Cmax || (C != 0 && Cmax != C)) {
      ok = FALSE;
      break;
    }
    C = Cmax;
#define LEN_AT(q) (ar ? sq + ((uint64_t)(q) < sr ? 1u : 0u) : pl)
    /* the first block: round 0, step 0 (reduce-scatter's, or all-gather's) */
    int32_t sblk = ag ? pos : mod(pos - 1, n), rblk = ag ? mod(pos - 1, n) : mod(pos - 2, n);
    uint64_t sfirst = MIN(LEN_AT(sblk), ce), rfirst = MIN(LEN_AT(rblk), ce);
    /* totals over the schedule: reduce-scatter sends every block but pos and
     * receives every block but pos-1; all-gather sends every block but pos+1 and
     * receives every block but pos */
    uint64_t all = ar ? pl : pl * (uint64_t)n;
    uint64_t stot = 0, rtot = 0;
    if (!ag) {
      stot += all - LEN_AT(pos);
      rtot += all - LEN_AT(mod(pos - 1, n));
    }
    if (ag || ar) {
      stot += all - LEN_AT(mod(pos + 1, n));
      rtot += all - LEN_AT(pos);
    }
#undef LEN_AT
    posts[np] = (sp_step){ .kind = SP_STEP_SEND, .op = sp->op_id, .phase = 0, .peer = sp->ranks[ring_at(n, sp->channel_block, h, mod(pos + 1, n))],
                           .tag = sp->tag, .bytes = sfirst * es, .rows = 1, .row_bytes = sfirst * es };
    totals[np++] = stot * es;
    posts[np] = (sp_step){ .kind = SP_STEP_RECV, .op = sp->op_id, .phase = 0, .peer = sp->ranks[ring_at(n, sp->channel_block, h, mod(pos - 1, n))],
                           .tag = sp->tag, .bytes = rfirst * es, .rows = 1, .row_bytes = rfirst * es };
    totals[np++] = rtot * es;
  }
  if (!ok)
    return FALSE;
  *nposts = np;
  *nblocks = C * (uint64_t)(ar ? 2 * (n - 1) : n - 1);
  return TRUE;
}
