/* Ring attention (context parallelism) and the Ulysses x ring hybrid, forward and backward,
 * against single-device causal attention and its backward (tolerance: blocks are merged
 * with an online softmax), per-rank FLOPs with causal skipping against the closed form,
 * ring bytes, and compute/communication overlap in the programs. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

#define TOL 2e-5
/*
 * Backward, against single-device attention backward: |x - ref| <= BWD_TOL max(1, |ref|).
 * The ring sums dq block by block (blocks i, i - 1, .., 0) and takes the softmax
 * normaliser l from the forward's online merge, so the rounding differs from the
 * single-device kernel. Inputs lie in [-8, 8] with d = 8: dout . v reaches 512 and
 * ds = p (dout . v - delta) cancels terms of that size, so a rounding of 6e-8 of 512
 * (3e-5) per term, summed over the keys, is expected; measured worst 8.4e-5 over
 * P = 1..7, both layouts, MHA and GQA (test_ring_bwd_kernels prints it).
 */
#define BWD_TOL 2e-4

/* rows [s0, s0 + n) of the sequence of a global [B, S, H, D] (or [S, B, H, D]) tensor */
static void seq_block(gboolean sf, int64_t B, int64_t S, int64_t H, int64_t D, const float *src, int64_t s0,
                      int64_t n, float *dst)
{
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < n; s++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t c = 0; c < D; c++)
          dst[sp_attn_index(sf, B, n, H, D, b, s, h, c)] = src[sp_attn_index(sf, B, S, H, D, b, s0 + s, h, c)];
}

/* world = U * R ranks; rank of (ring index r, Ulysses index u) per placement; block r U + u */
static void check_cp(int32_t U, int32_t R, gboolean ring_inner, gboolean sf)
{
  const int32_t P = U * R;
  const int64_t B = 2, S = 12, H = 6, KV = U == 1 ? 2 : 6, D = 4, Sl = S / P;
  int32_t *rank_of = g_new(int32_t, P); /* [r * U + u] */
  for (int32_t r = 0; r < R; r++)
    for (int32_t u = 0; u < U; u++)
      rank_of[r * U + u] = ring_inner ? u * R + r : r * U + u;
  sp_groups uly = { R, U, g_new(int32_t, P) }, ring = { U, R, g_new(int32_t, P) };
  for (int32_t r = 0; r < R; r++)
    for (int32_t u = 0; u < U; u++) {
      uly.ranks[r * U + u] = rank_of[r * U + u];
      ring.ranks[u * R + r] = rank_of[r * U + u];
    }
  sp_graph *g = sp_graph_new(P);
  GError *err = NULL;
  int64_t sq[4] = { sf ? Sl : B, sf ? B : Sl, H, D }, skv[4] = { sq[0], sq[1], KV, D };
  uint32_t q = sp_graph_tensor_new(g, "q", SP_F32, 4, sq, 0, SP_INIT_INPUT, &err);
  uint32_t k = sp_graph_tensor_new(g, "k", SP_F32, 4, skv, 0, SP_INIT_INPUT, &err);
  uint32_t v = sp_graph_tensor_new(g, "v", SP_F32, 4, skv, 0, SP_INIT_INPUT, &err);
  const sp_attn_layout lay = sf ? SP_LAYOUT_SBHD : SP_LAYOUT_BSHD;
  uint32_t out = U == 1 ? sp_op_ring_attention(g, &ring, lay, q, k, v, &err)
                        : sp_op_ulysses_ring_attention(g, &uly, &ring, lay, q, k, v, &err);
  g_assert_no_error(err);
  float *gq = g_new(float, B * S * H * D), *gk = g_new(float, B * S * KV * D), *gv = g_new(float, B * S * KV * D);
  float *go = g_new(float, B * S * H * D), *want = g_new(float, B * Sl * H * D);
  sp_fill_pattern(gq, B * S * H * D, SP_F32, 31, 0);
  sp_fill_pattern(gk, B * S * KV * D, SP_F32, 32, 0);
  sp_fill_pattern(gv, B * S * KV * D, SP_F32, 33, 0);
  sp_kernel_attention_f32(sf, B, S, H, KV, D, gq, gk, gv, go);
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t blk = 0; blk < P; blk++) {
    int32_t r = rank_of[blk];
    seq_block(sf, B, S, H, D, gq, blk * Sl, Sl, sp_graph_data_get(ref, q, r));
    seq_block(sf, B, S, KV, D, gk, blk * Sl, Sl, sp_graph_data_get(ref, k, r));
    seq_block(sf, B, S, KV, D, gv, blk * Sl, Sl, sp_graph_data_get(ref, v, r));
  }
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
  g_assert_true(sp_graph_data_compare(g, run, ref, out, 0.0, &err)); /* same kernels, same order */
  g_assert_no_error(err);
  for (int32_t blk = 0; blk < P; blk++) {
    seq_block(sf, B, S, H, D, go, blk * Sl, Sl, want);
    const float *got = sp_graph_data_get(run, out, rank_of[blk]);
    for (int64_t i = 0; i < B * Sl * H * D; i++)
      g_assert_cmpfloat(fabs(got[i] - want[i]), <=, TOL * fmax(1.0, fabs(want[i])));
  }
  if (U == 1) {
    /* FLOPs of ring index i: i full blocks and the causal diagonal; later blocks skipped */
    for (int32_t i = 0; i < P; i++) {
      sp_graph_stats st;
      g_assert_true(sp_graph_rank_stats(g, rank_of[i], P, 0, UINT32_MAX, &st, &err));
      double want_fl = 4.0 * D * B * H * ((double)i * Sl * Sl + Sl * (Sl + 1) / 2.0);
      g_assert_cmpfloat(fabs(st.flops - want_fl), <=, 1e-9 * want_fl);
      /* k and v blocks go round P - 1 times */
      g_assert_cmpuint(st.bytes_sent, ==, (uint64_t)(2 * (P - 1) * B * Sl * KV * D * 4));
    }
  }
  g_free(gq); g_free(gk); g_free(gv); g_free(go); g_free(want);
  g_free(uly.ranks); g_free(ring.ranks); g_free(rank_of);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

static void test_ring(void)
{
  for (int32_t P = 1; P <= 4; P++)
    for (int sf = 0; sf < 2; sf++)
      check_cp(1, P, FALSE, sf);
  check_cp(1, 6, FALSE, FALSE);
}

static void test_hybrid(void)
{
  for (int pl = 0; pl < 2; pl++)
    for (int sf = 0; sf < 2; sf++) {
      check_cp(2, 3, pl, sf);
      check_cp(3, 2, pl, sf);
    }
}

/* k/v of step t+1 are posted before step t's compute and waited after it */
/* ---- backward ---- */

/*
 * Ring attention backward at the kernel level, the ring played by hand: P members each
 * hold one sequence block of q, k, v and dout; the forward runs P online-softmax steps
 * (member i meets block (i - t) mod P at step t), then the backward P steps in the same
 * order, block j's dk/dv accumulator visiting members j, j + 1, .. (causal: j > i
 * skipped). Compared with single-device attention backward on the whole sequence.
 * Returns the largest error relative to max(1, |reference|).
 */
static double ring_bwd_kernels(int32_t P, gboolean sf, int64_t B, int64_t Sl, int64_t H, int64_t KV, int64_t D,
                               uint64_t seed, gboolean bad_diagonal)
{
  const int64_t S = Sl * P, nq = B * Sl * H * D, nkv = B * Sl * KV * D, W = D + 2;
  float *gq = g_new(float, B * S * H * D), *gk = g_new(float, B * S * KV * D), *gv = g_new(float, B * S * KV * D);
  float *gdo = g_new(float, B * S * H * D);
  float *wq = g_new(float, B * S * H * D), *wk = g_new(float, B * S * KV * D), *wv = g_new(float, B * S * KV * D);
  sp_fill_pattern(gq, B * S * H * D, SP_F32, seed + 1, 0);
  sp_fill_pattern(gk, B * S * KV * D, SP_F32, seed + 2, 0);
  sp_fill_pattern(gv, B * S * KV * D, SP_F32, seed + 3, 0);
  sp_fill_pattern(gdo, B * S * H * D, SP_F32, seed + 4, 0);
  sp_kernel_attention_bwd_f32(sf, B, S, H, KV, D, gq, gk, gv, gdo, wq, wk, wv);
  float **q = g_new(float *, P), **k = g_new(float *, P), **v = g_new(float *, P), **dout = g_new(float *, P);
  float **st = g_new(float *, P), **dq = g_new(float *, P), **dk = g_new(float *, P), **dv = g_new(float *, P);
  float *tmp = g_new(float, B * Sl * H * W);
  for (int32_t i = 0; i < P; i++) {
    q[i] = g_new(float, nq);
    dout[i] = g_new(float, nq);
    k[i] = g_new(float, nkv);
    v[i] = g_new(float, nkv);
    seq_block(sf, B, S, H, D, gq, i * Sl, Sl, q[i]);
    seq_block(sf, B, S, H, D, gdo, i * Sl, Sl, dout[i]);
    seq_block(sf, B, S, KV, D, gk, i * Sl, Sl, k[i]);
    seq_block(sf, B, S, KV, D, gv, i * Sl, Sl, v[i]);
    st[i] = g_new0(float, B * Sl * H * W);
    dq[i] = g_new0(float, nq);
    dk[i] = g_new0(float, nkv);
    dv[i] = g_new0(float, nkv);
  }
  for (int32_t t = 0; t < P; t++)
    for (int32_t i = 0; i < P; i++) {
      int32_t j = ((i - t) % P + P) % P;
      sp_kernel_ring_attn_step_f32(sf, B, Sl, H, KV, D, q[i], k[j], v[j], st[i], tmp, j > i ? 0 : j == i ? 1 : 2);
      memcpy(st[i], tmp, sizeof(float) * (size_t)(B * Sl * H * W));
    }
  for (int32_t t = 0; t < P; t++)
    for (int32_t i = 0; i < P; i++) {
      int32_t j = ((i - t) % P + P) % P; /* dk[j], dv[j] travel with block j */
      sp_kernel_ring_attn_bwd_step_f32(sf, B, Sl, H, KV, D, q[i], k[j], v[j], dout[i], st[i], dq[i], dk[j], dv[j],
                                       dq[i], dk[j], dv[j], j > i ? 0 : j == i && !bad_diagonal ? 1 : 2);
    }
  double worst = 0;
  float *want = g_new(float, nq);
  for (int32_t i = 0; i < P; i++) {
    const float *got[3] = { dq[i], dk[i], dv[i] }, *ref[3] = { wq, wk, wv };
    const int64_t hh[3] = { H, KV, KV };
    for (int x = 0; x < 3; x++) {
      seq_block(sf, B, S, hh[x], D, ref[x], i * Sl, Sl, want);
      for (int64_t e = 0; e < B * Sl * hh[x] * D; e++) {
        g_assert_true(isfinite(got[x][e]));
        worst = fmax(worst, fabs(got[x][e] - want[e]) / fmax(1.0, fabs(want[e])));
      }
    }
    g_free(q[i]); g_free(k[i]); g_free(v[i]); g_free(dout[i]);
    g_free(st[i]); g_free(dq[i]); g_free(dk[i]); g_free(dv[i]);
  }
  g_free(q); g_free(k); g_free(v); g_free(dout); g_free(st); g_free(dq); g_free(dk); g_free(dv);
  g_free(tmp); g_free(want);
  g_free(gq); g_free(gk); g_free(gv); g_free(gdo); g_free(wq); g_free(wk); g_free(wv);
  return worst;
}

static void test_ring_bwd_kernels(void)
{
  static const int32_t Ps[] = { 1, 2, 3, 4, 5, 6, 7 };
  double worst = 0;
  for (guint a = 0; a < G_N_ELEMENTS(Ps); a++)
    for (int sf = 0; sf < 2; sf++)
      for (int gqa = 0; gqa < 2; gqa++) {
        double e = ring_bwd_kernels(Ps[a], sf, 2, 3, 4, gqa ? 2 : 4, 8, 100 + a, FALSE);
        g_test_message("P %d %s %s: max rel error %.3g", Ps[a], sf ? "sbhd" : "bshd", gqa ? "gqa" : "mha", e);
        g_assert_cmpfloat(e, <=, BWD_TOL);
        worst = fmax(worst, e);
      }
  g_test_message("worst %.3g", worst);
  /* the check can fail: the causal diagonal counted as a full block */
  g_assert_cmpfloat(ring_bwd_kernels(3, FALSE, 2, 3, 4, 4, 8, 100, TRUE), >, 100 * BWD_TOL);
}

/*
 * Forward + backward through the graph: world = U * R ranks, placements as check_cp.
 * dq, dk, dv: the loopback run equals the graph reference bitwise (same kernels, same
 * order) and single-device attention backward on the whole tensors within BWD_TOL.
 * FLOPs and bytes of the backward's nodes against the closed form.
 */
static void check_cp_bwd(int32_t U, int32_t R, gboolean ring_inner, gboolean sf, int64_t KV)
{
  const int32_t P = U * R;
  const int64_t B = 2, Sl = 2, S = Sl * P, H = 6, D = 4;
  int32_t *rank_of = g_new(int32_t, P); /* [r * U + u] */
  for (int32_t r = 0; r < R; r++)
    for (int32_t u = 0; u < U; u++)
      rank_of[r * U + u] = ring_inner ? u * R + r : r * U + u;
  sp_groups uly = { R, U, g_new(int32_t, P) }, ring = { U, R, g_new(int32_t, P) };
  for (int32_t r = 0; r < R; r++)
    for (int32_t u = 0; u < U; u++) {
      uly.ranks[r * U + u] = rank_of[r * U + u];
      ring.ranks[u * R + r] = rank_of[r * U + u];
    }
  sp_graph *g = sp_graph_new(P);
  GError *err = NULL;
  int64_t sq[4] = { sf ? Sl : B, sf ? B : Sl, H, D }, skv[4] = { sq[0], sq[1], KV, D };
  uint32_t q = sp_graph_tensor_new(g, "q", SP_F32, 4, sq, 0, SP_INIT_INPUT, &err);
  uint32_t k = sp_graph_tensor_new(g, "k", SP_F32, 4, skv, 0, SP_INIT_INPUT, &err);
  uint32_t v = sp_graph_tensor_new(g, "v", SP_F32, 4, skv, 0, SP_INIT_INPUT, &err);
  uint32_t dout = sp_graph_tensor_new(g, "dout", SP_F32, 4, sq, 0, SP_INIT_INPUT, &err);
  const sp_attn_layout lay = sf ? SP_LAYOUT_SBHD : SP_LAYOUT_BSHD;
  sp_ring_attn saved;
  uint32_t out = U == 1 ? sp_op_ring_attention_fwd(g, &ring, lay, q, k, v, &saved, &err)
                        : sp_op_ulysses_ring_attention_fwd(g, &uly, &ring, lay, q, k, v, &saved, &err);
  g_assert_no_error(err);
  g_assert_cmpuint(out, ==, saved.out);
  const uint32_t first_bwd = sp_graph_n_nodes(g);
  uint32_t dq, dk, dv;
  g_assert_true(U == 1 ? sp_op_ring_attention_bwd(g, &ring, &saved, dout, &dq, &dk, &dv, &err)
                       : sp_op_ulysses_ring_attention_bwd(g, &uly, &ring, &saved, dout, &dq, &dk, &dv, &err));
  g_assert_no_error(err);
  const int64_t nq = B * S * H * D, nkv = B * S * KV * D;
  float *gq = g_new(float, nq), *gk = g_new(float, nkv), *gv = g_new(float, nkv), *gdo = g_new(float, nq);
  float *wq = g_new(float, nq), *wk = g_new(float, nkv), *wv = g_new(float, nkv), *want = g_new(float, nq);
  sp_fill_pattern(gq, nq, SP_F32, 41, 0);
  sp_fill_pattern(gk, nkv, SP_F32, 42, 0);
  sp_fill_pattern(gv, nkv, SP_F32, 43, 0);
  sp_fill_pattern(gdo, nq, SP_F32, 44, 0);
  sp_kernel_attention_bwd_f32(sf, B, S, H, KV, D, gq, gk, gv, gdo, wq, wk, wv);
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t blk = 0; blk < P; blk++) {
    int32_t r = rank_of[blk];
    seq_block(sf, B, S, H, D, gq, blk * Sl, Sl, sp_graph_data_get(ref, q, r));
    seq_block(sf, B, S, KV, D, gk, blk * Sl, Sl, sp_graph_data_get(ref, k, r));
    seq_block(sf, B, S, KV, D, gv, blk * Sl, Sl, sp_graph_data_get(ref, v, r));
    seq_block(sf, B, S, H, D, gdo, blk * Sl, Sl, sp_graph_data_get(ref, dout, r));
  }
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
  const uint32_t grads[3] = { dq, dk, dv };
  const float *wants[3] = { wq, wk, wv };
  const int64_t heads[3] = { H, KV, KV };
  double worst = 0;
  for (int x = 0; x < 3; x++) {
    g_assert_true(sp_graph_data_compare(g, run, ref, grads[x], 0.0, &err)); /* same kernels, same order */
    g_assert_no_error(err);
    for (int32_t blk = 0; blk < P; blk++) {
      seq_block(sf, B, S, heads[x], D, wants[x], blk * Sl, Sl, want);
      const float *got = sp_graph_data_get(run, grads[x], rank_of[blk]);
      for (int64_t i = 0; i < B * Sl * heads[x] * D; i++) {
        g_assert_cmpfloat(fabs(got[i] - want[i]), <=, BWD_TOL * fmax(1.0, fabs(want[i])));
        worst = fmax(worst, fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i])));
      }
    }
  }
  g_test_message("U %d R %d %s %s KV %" G_GINT64_FORMAT ": max rel error %.3g", U, R, ring_inner ? "ring inner" : "Ulysses inner",
                 sf ? "sbhd" : "bshd", KV, worst);
  /* backward FLOPs: 10 d per (query, key) pair the ring index computes (i earlier blocks
   * in full, the causal diagonal; later blocks skipped); over the ring: single-device's */
  const int64_t L = U * Sl, Hr = H / U, KVr = KV / U; /* the ring's block and heads */
  double total = 0;
  for (int32_t r = 0; r < R; r++)
    for (int32_t u = 0; u < U; u++) {
      sp_graph_stats st;
      g_assert_true(sp_graph_rank_stats(g, rank_of[r * U + u], P, first_bwd, UINT32_MAX, &st, &err));
      double want_fl = 10.0 * D * B * Hr * ((double)r * L * L + L * (L + 1) / 2.0);
      g_assert_cmpfloat(fabs(st.flops - want_fl), <=, 1e-9 * want_fl);
      total += st.flops;
      /* k and v go round R - 1 times, their gradients R times (home again); the
       * hybrid adds the all-to-alls of dout (H) and of dq, dk, dv (H, KV, KV) */
      uint64_t ring_bytes = R == 1 ? 0 : (uint64_t)(2 * (R - 1) + 2 * R) * B * L * KVr * D * 4;
      uint64_t a2a_bytes = (uint64_t)(U - 1) * B * Sl * (2 * H + 2 * KV) / U * D * 4;
      g_assert_cmpuint(st.bytes_sent, ==, ring_bytes + a2a_bytes);
    }
  g_assert_cmpfloat(fabs(total - 5.0 * B * H * D * S * (S + 1)), <=, 1e-9 * total);
  g_free(gq); g_free(gk); g_free(gv); g_free(gdo); g_free(wq); g_free(wk); g_free(wv); g_free(want);
  g_free(uly.ranks); g_free(ring.ranks); g_free(rank_of);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

static void test_ring_bwd(void)
{
  for (int32_t P = 1; P <= 5; P++)
    for (int sf = 0; sf < 2; sf++)
      check_cp_bwd(1, P, FALSE, sf, P % 2 ? 6 : 2); /* MHA and GQA */
  check_cp_bwd(1, 6, FALSE, FALSE, 3);
  check_cp_bwd(1, 7, FALSE, TRUE, 6);
}

static void test_hybrid_bwd(void)
{
  for (int pl = 0; pl < 2; pl++)
    for (int sf = 0; sf < 2; sf++) {
      check_cp_bwd(2, 3, pl, sf, 6);
      check_cp_bwd(3, 2, pl, sf, 3);
      check_cp_bwd(2, 2, pl, sf, 2);
    }
  check_cp_bwd(3, 1, FALSE, FALSE, 6); /* Ulysses only: a ring of one */
}

static void test_overlap(void)
{
  int32_t ranks[3] = { 0, 1, 2 };
  sp_groups ring = sp_groups_one(ranks, 3);
  sp_graph *g = sp_graph_new(3);
  int64_t s[4] = { 1, 2, 2, 4 };
  uint32_t q = sp_graph_tensor_new(g, "q", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  uint32_t k = sp_graph_tensor_new(g, "k", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  uint32_t v = sp_graph_tensor_new(g, "v", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  GError *err = NULL;
  g_assert_cmpuint(sp_op_ring_attention(g, &ring, SP_LAYOUT_BSHD, q, k, v, &err), !=, SP_NO_TENSOR);
  sp_program *p = sp_graph_lower(g, 2, &err);
  g_assert_no_error(err);
  /* sequence of kinds: send send ... compute(step 0) wait ... */
  int first_send = -1, first_compute = -1, first_wait = -1;
  for (guint i = 0; i < sp_program_len(p); i++) {
    sp_step_kind kd = sp_program_step(p, i)->kind;
    if (kd == SP_STEP_SEND && first_send < 0)
      first_send = (int)i;
    if (kd == SP_STEP_COMPUTE && first_compute < 0)
      first_compute = (int)i;
    if (kd == SP_STEP_WAIT && first_wait < 0)
      first_wait = (int)i;
  }
  g_assert_cmpint(first_send, >=, 0);
  g_assert_cmpint(first_send, <, first_compute);
  g_assert_cmpint(first_wait, >, first_compute);
  sp_program_free(p);
  sp_graph_free(g);
  /* backward: k/v of step t+1 are posted before step t's compute as well */
  g = sp_graph_new(3);
  q = sp_graph_tensor_new(g, "q", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  k = sp_graph_tensor_new(g, "k", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  v = sp_graph_tensor_new(g, "v", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  uint32_t dout = sp_graph_tensor_new(g, "dout", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL), dq, dk, dv;
  sp_ring_attn saved;
  g_assert_cmpuint(sp_op_ring_attention_fwd(g, &ring, SP_LAYOUT_BSHD, q, k, v, &saved, &err), !=, SP_NO_TENSOR);
  const uint32_t first_bwd = sp_graph_n_nodes(g);
  g_assert_true(sp_op_ring_attention_bwd(g, &ring, &saved, dout, &dq, &dk, &dv, &err));
  p = sp_graph_lower_range(g, 2, first_bwd, sp_graph_n_nodes(g), &err);
  g_assert_no_error(err);
  first_send = first_compute = first_wait = -1;
  for (guint i = 0; i < sp_program_len(p); i++) {
    sp_step_kind kd = sp_program_step(p, i)->kind;
    if (kd == SP_STEP_SEND && first_send < 0)
      first_send = (int)i;
    if (kd == SP_STEP_COMPUTE && first_compute < 0)
      first_compute = (int)i;
    if (kd == SP_STEP_WAIT && first_wait < 0)
      first_wait = (int)i;
  }
  g_assert_cmpint(first_send, >=, 0);
  g_assert_cmpint(first_send, <, first_compute);
  g_assert_cmpint(first_wait, >, first_compute);
  sp_program_free(p);
  sp_graph_free(g);
}

static void test_errors(void)
{
  int32_t ranks[4] = { 0, 1, 2, 3 };
  sp_groups uly = { 2, 2, ranks }, ring = { 2, 2, (int32_t[]){ 0, 2, 1, 3 } };
  sp_graph *g = sp_graph_new(4);
  int64_t s[4] = { 1, 2, 3, 4 };
  uint32_t q = sp_graph_tensor_new(g, "q", SP_F32, 4, s, 0, SP_INIT_INPUT, NULL);
  GError *err = NULL;
  g_assert_cmpuint(sp_op_ulysses_ring_attention(g, &uly, &ring, SP_LAYOUT_BSHD, q, q, q, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_clear_error(&err);
  /* backward: dout must have the output's shape */
  int64_t s2[4] = { 1, 2, 2, 4 }, s3[4] = { 1, 3, 2, 4 };
  uint32_t q2 = sp_graph_tensor_new(g, "q2", SP_F32, 4, s2, 0, SP_INIT_INPUT, NULL);
  uint32_t bad = sp_graph_tensor_new(g, "bad", SP_F32, 4, s3, 0, SP_INIT_INPUT, NULL);
  sp_ring_attn saved;
  uint32_t dq, dk, dv;
  g_assert_cmpuint(sp_op_ring_attention_fwd(g, &ring, SP_LAYOUT_BSHD, q2, q2, q2, &saved, &err), !=, SP_NO_TENSOR);
  g_assert_no_error(err);
  g_assert_false(sp_op_ring_attention_bwd(g, &ring, &saved, bad, &dq, &dk, &dv, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  g_assert_false(sp_op_ring_attention_bwd(g, &ring, NULL, q2, &dq, &dk, &dv, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_graph_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ops/ring/attention", test_ring);
  g_test_add_func("/ops/ring/ulysses-hybrid", test_hybrid);
  g_test_add_func("/ops/ring/overlap", test_overlap);
  g_test_add_func("/ops/ring/backward-kernels", test_ring_bwd_kernels);
  g_test_add_func("/ops/ring/backward", test_ring_bwd);
  g_test_add_func("/ops/ring/ulysses-hybrid-backward", test_hybrid_bwd);
  g_test_add_func("/ops/ring/errors", test_errors);
  return g_test_run();
}
