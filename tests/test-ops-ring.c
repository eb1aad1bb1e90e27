/* Ring attention (context parallelism) and the Ulysses x ring hybrid against single-device
 * causal attention (tolerance: blocks are merged with an online softmax), per-rank FLOPs
 * with causal skipping, ring bytes, and compute/communication overlap in the programs. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

#define TOL 2e-5

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
  sp_graph_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ops/ring/attention", test_ring);
  g_test_add_func("/ops/ring/ulysses-hybrid", test_hybrid);
  g_test_add_func("/ops/ring/overlap", test_overlap);
  g_test_add_func("/ops/ring/errors", test_errors);
  return g_test_run();
}
