/* RING algorithms: chunked, pipelined rings and chains (see coll.h for the
 * schedules and their reduction orders). */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

static int32_t mod(int32_t a, int32_t n)
{
  return ((a % n) + n) % n;
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

/* Block geometry: block j starts at offs[j] (elements) with lens[j] elements, in
 * the "in" layout; for all-reduce the same offsets hold in "out". */
typedef struct {
  const uint64_t *offs, *lens;
} blocks;

/*
 * Ring reduce-scatter of chunk round r. Member i at step k sends block i-k-1
 * and receives block i-k-2, which it reduces with its own input; after n-1
 * steps it holds block i complete, written to (fin_buf, fin_off(i) elements).
 * S[2] are ping-pong scratch buffers of one chunk.
 */
static void ring_rs_round(sp_lctx *c, const blocks *b, uint64_t ce, uint64_t r, uint32_t phase0,
                          const uint32_t S[2], uint32_t fin_buf, uint64_t fin_off)
{
  int32_t n = c->n, i = c->me;
  size_t es = c->es;
  int32_t next = mod(i + 1, n), prev = mod(i - 1, n);
  for (int32_t k = 0; k < n - 1; k++) {
    uint32_t ph = phase0 + (uint32_t)k;
    int32_t sblk = mod(i - k - 1, n), rblk = mod(i - k - 2, n);
    uint64_t soff, slen, roff, rlen;
    chunk_of(b->offs[sblk], b->lens[sblk], ce, r, &soff, &slen);
    chunk_of(b->offs[rblk], b->lens[rblk], ce, r, &roff, &rlen);
    /* send: the raw input at step 0, else the partial received at step k-1 */
    if (k == 0)
      sp_l_send(c, next, ph, c->in, soff * es, slen * es);
    else
      sp_l_send(c, next, ph, S[(k - 1) % 2], 0, slen * es);
    gboolean last = k == n - 2;
    uint32_t rbuf = last ? fin_buf : S[k % 2];
    uint64_t rbyte = last ? (fin_off + (roff - b->offs[rblk])) * es : 0;
    sp_l_recv(c, prev, ph, rbuf, rbyte, rlen * es);
    sp_l_wait(c, ph);
    /* partial (received) ⊕ own input */
    sp_l_reduce(c, ph, rbuf, rbyte, c->in, roff * es, rlen);
  }
}

/* Ring all-gather of chunk round r over blocks of (out_buf) laid out by b:
 * member i at step k sends block i-k and receives block i-k-1. */
static void ring_ag_round(sp_lctx *c, const blocks *b, uint64_t ce, uint64_t r, uint32_t phase0)
{
  int32_t n = c->n, i = c->me;
  size_t es = c->es;
  int32_t next = mod(i + 1, n), prev = mod(i - 1, n);
  for (int32_t k = 0; k < n - 1; k++) {
    uint32_t ph = phase0 + (uint32_t)k;
    int32_t sblk = mod(i - k, n), rblk = mod(i - k - 1, n);
    uint64_t soff, slen, roff, rlen;
    chunk_of(b->offs[sblk], b->lens[sblk], ce, r, &soff, &slen);
    chunk_of(b->offs[rblk], b->lens[rblk], ce, r, &roff, &rlen);
    sp_l_send(c, next, ph, c->out, soff * es, slen * es);
    sp_l_recv(c, prev, ph, c->out, roff * es, rlen * es);
    sp_l_wait(c, ph);
  }
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
    gboolean ar = sp->coll == SP_COLL_ALL_REDUCE;
    uint64_t *offs = g_new(uint64_t, n), *lens = g_new(uint64_t, n);
    uint64_t maxlen = 0;
    for (int32_t j = 0; j < n; j++) {
      offs[j] = ar ? sp_seg_off(cnt, n, j) : (uint64_t)j * cnt;
      lens[j] = ar ? sp_seg_len(cnt, n, j) : cnt;
      if (lens[j] > maxlen)
        maxlen = lens[j];
    }
    blocks b = { offs, lens };
    uint64_t C = rounds_of(maxlen, ce);
    uint32_t S[2] = { 0, 0 };
    if (sp->coll != SP_COLL_ALL_GATHER && C > 0 && n > 2) {
      uint64_t sb = (ce < maxlen ? ce : maxlen) * es;
      S[0] = sp_l_scratch(c, sb, "ring0");
      S[1] = sp_l_scratch(c, sb, "ring1");
    }
    if (sp->coll == SP_COLL_ALL_GATHER)
      sp_l_copy(c, 0, c->out, offs[me] * es, c->in, 0, cnt * es);
    uint32_t per_round = sp->coll == SP_COLL_ALL_REDUCE ? 2u * (uint32_t)(n - 1) : (uint32_t)(n - 1);
    for (uint64_t r = 0; r < C; r++) {
      uint32_t ph0 = phase_at(r, per_round, 0);
      if (sp->coll == SP_COLL_ALL_GATHER) {
        ring_ag_round(c, &b, ce, r, ph0);
        continue;
      }
      /* all-reduce: my segment lands in out at its own offset; RS: at 0 */
      uint64_t fin_off = ar ? offs[me] : 0;
      ring_rs_round(c, &b, ce, r, ph0, S, c->out, fin_off);
      uint64_t o, l;
      chunk_of(fin_off, lens[me], ce, r, &o, &l);
      sp_l_avg(c, ph0 + (uint32_t)(n - 2), c->out, o * es, l);
      if (ar)
        ring_ag_round(c, &b, ce, r, ph0 + (uint32_t)(n - 1));
    }
    g_free(offs);
    g_free(lens);
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
