/* ISP weight-parallel linears: forward/backward against single-device matmuls with the
 * whole weights, prefetch order, alternating gather buffers and pooled reduce-scatter
 * memory, bytes against closed forms; and the `verify --op` self-check table. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

static void check_isp(int32_t P, gboolean overlap, int32_t ckpt)
{
  const int32_t NB = 3, NM = 3;
  const int64_t TK = 4, H = 6, NW = NB * NM;
  int32_t *ranks = g_new(int32_t, P);
  for (int32_t i = 0; i < P; i++)
    ranks[i] = i;
  sp_groups gs = sp_groups_one(ranks, P);
  sp_graph *g = sp_graph_new(P);
  GError *err = NULL;
  int64_t s[2] = { TK, H };
  uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, s, 0, SP_INIT_INPUT, &err);
  uint32_t dy = sp_graph_tensor_new(g, "dy", SP_F32, 2, s, 0, SP_INIT_INPUT, &err);
  sp_isp_cfg cfg = { .blocks = NB, .modules = NM, .out_proj = 1, .tokens = TK, .hidden = H,
                     .overlap = overlap, .ckpt_blocks = ckpt, .algo = SP_ALGO_RING };
  sp_isp_stack st;
  g_assert_true(sp_op_isp_stack(g, &gs, &cfg, x, &st, &err));
  g_assert_true(sp_op_isp_stack_bwd(g, &gs, &st, dy, &err));
  g_assert_no_error(err);

  /* global weights; rank r holds rows [r H/P, (r+1) H/P) */
  float **W = g_new(float *, NW);
  for (int k = 0; k < NW; k++) {
    W[k] = g_new(float, H * H);
    sp_fill_pattern(W[k], H * H, SP_F32, 100 + k, 0);
  }
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < P; r++) {
    sp_fill_pattern(sp_graph_data_get(ref, x, r), TK * H, SP_F32, 7 + r, 0);
    sp_fill_pattern(sp_graph_data_get(ref, dy, r), TK * H, SP_F32, 70 + r, 0);
    for (int k = 0; k < NW; k++)
      memcpy(sp_graph_data_get(ref, st.w[k], r), W[k] + r * (H / P) * H, sizeof(float) * (size_t)(H / P * H));
  }
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);

  /* expected: y = x W0^T W1^T ...; dX = dY W; dW = AVG over ranks of dY^T X, sharded on rows */
  float *dwsum = g_new0(float, NW * H * H);
  float **act = g_new(float *, NW + 1);
  for (int k = 0; k <= NW; k++)
    act[k] = g_new(float, TK * H);
  float *cur = g_new(float, TK * H), *nxt = g_new(float, TK * H), *dwr = g_new(float, H * H);
  for (int32_t r = 0; r < P; r++) {
    memcpy(act[0], sp_graph_data_get(ref, x, r), sizeof(float) * TK * H);
    for (int k = 0; k < NW; k++)
      sp_kernel_matmul_f32(act[k], FALSE, W[k], TRUE, act[k + 1], TK, H, H);
    memcpy(cur, sp_graph_data_get(ref, dy, r), sizeof(float) * TK * H);
    for (int k = NW - 1; k >= 0; k--) {
      sp_kernel_matmul_f32(cur, FALSE, W[k], FALSE, nxt, TK, H, H);
      sp_kernel_matmul_f32(cur, TRUE, act[k], FALSE, dwr, H, H, TK);
      for (int i = 0; i < H * H; i++)
        dwsum[k * H * H + i] += dwr[i];
      memcpy(cur, nxt, sizeof(float) * TK * H);
    }
    for (int m = 0; m < 2; m++) {
      sp_graph_data *d = m ? run : ref;
      g_assert_cmpmem(sp_graph_data_get(d, st.y, r), TK * H * 4, act[NW], TK * H * 4);
      g_assert_cmpmem(sp_graph_data_get(d, st.dx, r), TK * H * 4, cur, TK * H * 4);
    }
  }
  for (int32_t r = 0; r < P; r++)
    for (int m = 0; m < 2; m++)
      for (int k = 0; k < NW; k++) {
        const float *got = sp_graph_data_get(m ? run : ref, st.dw[k], r);
        for (int i = 0; i < H / P * H; i++) {
          double want = dwsum[k * H * H + r * (H / P) * H + i] / P;
          g_assert_cmpfloat(fabs(got[i] - want), <=, 1e-5 * fmax(1.0, fabs(want)));
        }
      }

  /* bytes: each module gathers its weight twice (forward, backward or recompute) and
   * reduce-scatters its gradient once: 3 NW (P-1)/P H^2 4 bytes per rank */
  sp_graph_stats sst;
  g_assert_true(sp_graph_rank_stats(g, 0, P, 0, UINT32_MAX, &sst, &err));
  g_assert_cmpuint(sst.bytes_sent, ==, (uint64_t)(3 * NW * (P - 1) * H * H * 4 / P));
  /* gathered-weight storage: two alternating block buffers (2 x modules) + two backward
   * buffers with overlap; one buffer per gather without */
  uint64_t hh = (uint64_t)(H * H * 4);
  if (overlap) {
    g_assert_cmpuint(sst.mem_kind[SP_TENSOR_GATHERED], ==, (2 * NM + (ckpt < NB ? 2 : 0)) * hh);
    g_assert_cmpuint(sst.mem_kind[SP_TENSOR_COMM], ==, 2 * hh); /* pooled reduce-scatter inputs */
  } else {
    g_assert_cmpuint(sst.mem_kind[SP_TENSOR_GATHERED], ==, 2 * NW * hh);
    g_assert_cmpuint(sst.mem_kind[SP_TENSOR_COMM], ==, NW * hh);
  }
  g_assert_cmpuint(sst.mem_kind[SP_TENSOR_WEIGHT], ==, NW * hh / P);
  /* FLOPs: 3 matmuls of 2 TK H H per module, plus the recomputed forward of ckpt blocks */
  g_assert_cmpfloat(sst.flops, ==, 2.0 * TK * H * H * (3 * NW + ckpt * (NM - 1)));

  if (overlap && P > 1) {
    /* block 1's gathers are posted before block 0's out_proj matmul and waited after it */
    sp_program *p = sp_graph_lower(g, 0, &err);
    g_assert_no_error(err);
    int send1 = -1, op0 = -1, wait_after = -1, mod0 = -1;
    for (guint i = 0; i < sp_program_len(p); i++) {
      const sp_step *q = sp_program_step(p, i);
      if (q->kind == SP_STEP_SEND && q->op == st.prefetch_node[1] && send1 < 0)
        send1 = (int)i;
      if (q->kind == SP_STEP_COMPUTE && q->op == st.out_proj_node[0])
        op0 = (int)i;
      if (q->kind == SP_STEP_COMPUTE && q->op == st.prefetch_node[1] - 1 && mod0 < 0)
        mod0 = (int)i;
      if (q->kind == SP_STEP_WAIT && send1 >= 0 && wait_after < 0)
        wait_after = (int)i; /* the first WAIT once block 1's gathers are out */
    }
    g_assert_cmpint(mod0, >=, 0);
    g_assert_cmpint(send1, >, mod0);
    g_assert_cmpint(send1, <, op0);
    g_assert_cmpint(wait_after, >, op0);
    sp_program_free(p);
  }
  sp_graph_stats s0;
  g_assert_true(sp_graph_rank_stats(g, 0, P, 0, UINT32_MAX, &s0, &err));
  g_assert_cmpuint(s0.mem_peak, >=, s0.mem_kind[SP_TENSOR_WEIGHT]);

  for (int k = 0; k <= NW; k++)
    g_free(act[k]);
  for (int k = 0; k < NW; k++)
    g_free(W[k]);
  g_free(act); g_free(W); g_free(cur); g_free(nxt); g_free(dwr); g_free(dwsum);
  sp_isp_stack_clear(&st);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
  g_free(ranks);
}

static void test_isp(void)
{
  for (int32_t P = 1; P <= 3; P++)
    for (int ov = 0; ov < 2; ov++)
      for (int ck = 0; ck <= 1; ck++)
        check_isp(P, ov, ck);
}

/* peak memory: overlap holds two blocks of gathered weights, no overlap one module */
static void test_isp_memory_peak(void)
{
  uint64_t peak[2];
  for (int ov = 0; ov < 2; ov++) {
    int32_t ranks[2] = { 0, 1 };
    sp_groups gs = sp_groups_one(ranks, 2);
    sp_graph *g = sp_graph_new(2);
    int64_t s[2] = { 2, 64 };
    uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, s, 0, SP_INIT_INPUT, NULL);
    sp_isp_cfg cfg = { .blocks = 4, .modules = 2, .out_proj = 1, .tokens = 2, .hidden = 64, .overlap = ov };
    sp_isp_stack st;
    GError *err = NULL;
    g_assert_true(sp_op_isp_stack(g, &gs, &cfg, x, &st, &err));
    sp_graph_stats ss;
    g_assert_true(sp_graph_rank_stats(g, 0, 2, 0, UINT32_MAX, &ss, &err));
    g_assert_no_error(err);
    peak[ov] = ss.mem_peak;
    sp_isp_stack_clear(&st);
    sp_graph_free(g);
  }
  /* gathered weight 64 x 64 x 4 = 16 KiB: at most 2 live without overlap (the one in use
   * and the next being gathered) vs 2 blocks x 2 modules with */
  const uint64_t w = 64 * 64 * 4;
  g_assert_cmpuint(peak[1] - peak[0], >=, 2 * w);
  g_assert_cmpuint(peak[0], <=, 8 * w / 2 + 2 * w + 4096); /* 8 weight shards + 2 gathered */
}

static void test_isp_errors(void)
{
  int32_t ranks[4] = { 0, 1, 2, 3 };
  sp_groups gs = sp_groups_one(ranks, 4);
  sp_graph *g = sp_graph_new(4);
  int64_t s[2] = { 2, 6 };
  uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, s, 0, SP_INIT_INPUT, NULL);
  sp_isp_cfg cfg = { .blocks = 1, .modules = 1, .out_proj = 0, .tokens = 2, .hidden = 6 };
  sp_isp_stack st;
  GError *err = NULL;
  g_assert_false(sp_op_isp_stack(g, &gs, &cfg, x, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  sp_isp_stack_clear(&st);
  cfg.out_proj = 3;
  g_assert_false(sp_op_isp_stack(g, &gs, &cfg, x, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_graph_free(g);
}

/* head communicator (all-to-all seq <-> vocab, or gather of seq) and embedding gradients
 * (AVG reduce-scatter on the gather dim, accumulated over micro-steps) by hand */
static void test_head_embedding(void)
{
  const int32_t P = 2;
  int32_t ranks[2] = { 0, 1 };
  sp_groups gs = sp_groups_one(ranks, P);
  sp_graph *g = sp_graph_new(P);
  GError *err = NULL;
  int64_t so[3] = { 1, 2, 4 }, sd[2] = { 4, 3 };
  uint32_t out = sp_graph_tensor_new(g, "logits", SP_F32, 3, so, 0, SP_INIT_INPUT, &err);
  uint32_t sh = sp_op_isp_head(g, &gs, out, TRUE, &err);   /* [1, 4, 2] */
  uint32_t back = sp_op_isp_head_bwd(g, &gs, sh, TRUE, &err);
  uint32_t full = sp_op_isp_head(g, &gs, out, FALSE, &err); /* [1, 4, 4] */
  uint32_t d[2] = { sp_graph_tensor_new(g, "d0", SP_F32, 2, sd, 0, SP_INIT_INPUT, &err),
                    sp_graph_tensor_new(g, "d1", SP_F32, 2, sd, 0, SP_INIT_INPUT, &err) };
  uint32_t acc = sp_op_isp_embedding_grad(g, &gs, d, 2, 0, &err);
  g_assert_no_error(err);
  g_assert_cmpint(sp_graph_tensor(g, sh)->shape[1], ==, 4);
  g_assert_cmpint(sp_graph_tensor(g, sh)->shape[2], ==, 2);
  g_assert_cmpint(sp_graph_tensor(g, acc)->shape[0], ==, 2);
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < P; r++) {
    float *o = sp_graph_data_get(ref, out, r);
    for (int i = 0; i < 8; i++)
      o[i] = (float)(100 * r + i); /* seq s = 2r + i/4, vocab i%4 */
    for (int k = 0; k < 2; k++) {
      float *dd = sp_graph_data_get(ref, d[k], r);
      for (int i = 0; i < 12; i++)
        dd[i] = (float)((r + 1) * (k + 1) * i);
    }
  }
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
  for (int m = 0; m < 2; m++)
    for (int32_t r = 0; r < P; r++) {
      sp_graph_data *dd = m ? run : ref;
      const float *a = sp_graph_data_get(dd, sh, r), *f = sp_graph_data_get(dd, full, r);
      for (int s = 0; s < 4; s++) {
        for (int v = 0; v < 2; v++) /* rank r: vocab [2r, 2r+2) of all 4 positions */
          g_assert_cmpfloat(a[s * 2 + v], ==, (float)(100 * (s / 2) + (s % 2) * 4 + 2 * r + v));
        for (int v = 0; v < 4; v++)
          g_assert_cmpfloat(f[s * 4 + v], ==, (float)(100 * (s / 2) + (s % 2) * 4 + v));
      }
      g_assert_cmpmem(sp_graph_data_get(dd, back, r), 32, sp_graph_data_get(dd, out, r), 32);
      /* sum over steps k of mean over ranks of (r+1)(k+1) i = 1.5 * 3 * i, rows [2r, 2r+2) */
      const float *e = sp_graph_data_get(dd, acc, r);
      for (int i = 0; i < 6; i++)
        g_assert_cmpfloat(e[i], ==, 4.5f * (float)(6 * r + i));
    }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

/* every self-check of the verify table passes on the loopback, on several shapes */
static void test_verify_table(void)
{
  static const int32_t shapes[][2] = { { 1, 1 }, { 4, 2 }, { 6, 3 }, { 8, 4 } };
  int n = 0;
  for (const sp_op_verify_entry *e = sp_ops_verify_table(); e->name; e++, n++) {
    g_assert_true(sp_ops_verify_lookup(e->name) == e);
    for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
      GError *err = NULL;
      if (!e->check(shapes[i][0], shapes[i][1], sp_graph_run_loopback, &err))
        g_error("%s on %d/%d: %s", e->name, shapes[i][0], shapes[i][1], err->message);
    }
  }
  g_assert_cmpint(n, >=, 7);
  g_assert_null(sp_ops_verify_lookup("no-such-op"));
  GError *err = NULL;
  g_assert_false(sp_ops_verify_lookup("ulysses-all-to-all")->check(6, 4, sp_graph_run_loopback, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ops/isp/stack", test_isp);
  g_test_add_func("/ops/isp/memory-peak", test_isp_memory_peak);
  g_test_add_func("/ops/isp/errors", test_isp_errors);
  g_test_add_func("/ops/isp/head-embedding", test_head_embedding);
  g_test_add_func("/ops/verify/table", test_verify_table);
  return g_test_run();
}
