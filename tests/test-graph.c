/* Graph IR: collective nodes along dims, local nodes, lowering vs the reference,
 * async deferral, kernels and cost statistics, against hand-derived expectations. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

/* groups of size P over a world of W: contiguous ([0..P-1], ...) or strided ({0, W/P, ...}) */
static int32_t *make_groups(int32_t W, int32_t P, gboolean strided)
{
  int32_t *r = g_new(int32_t, W);
  int32_t G = W / P;
  for (int32_t gi = 0; gi < G; gi++)
    for (int32_t i = 0; i < P; i++)
      r[gi * P + i] = strided ? gi + i * G : gi * P + i;
  return r;
}

static uint32_t tensor(sp_graph *g, const char *name, sp_dtype dt, int nd, const int64_t *shape,
                       sp_tensor_init init)
{
  GError *err = NULL;
  uint32_t t = sp_graph_tensor_new(g, name, dt, nd, shape, SP_TENSOR_ACTIVATION, init, &err);
  g_assert_no_error(err);
  return t;
}

/* Run reference on @p ref and loopback on @p run (both start as copies of @p ref). */
static void run_both(sp_graph *g, sp_graph_data *ref, sp_graph_data *run)
{
  GError *err = NULL;
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_no_error(err);
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
}

/* Ulysses all-to-all on [b, S/P, H, d] (or [S/P, b, H, d]): rank i of a group ends with
 * the full-sequence shard of heads [i H/P, (i+1) H/P) of the global tensor whose value at
 * (b, s, h, c) is a closed form; then the swapped all-to-all restores the input. */
static float gval(int64_t b, int64_t s, int64_t h, int64_t c) { return (float)(b * 100000 + s * 1000 + h * 10 + c); }

static void check_a2a(int32_t W, int32_t P, gboolean strided, gboolean seq_first)
{
  const int64_t B = 2, S = 2 * P, H = 12, D = 3, Sl = S / P;
  int32_t *ranks = make_groups(W, P, strided);
  sp_groups gs = { .ranks = ranks, .n_groups = W / P, .group_size = P };
  sp_graph *g = sp_graph_new(W);
  const int sd = seq_first ? 0 : 1;
  int64_t shp[4] = { B, Sl, H, D };
  if (seq_first) {
    shp[0] = Sl;
    shp[1] = B;
  }
  uint32_t x = tensor(g, "x", SP_F32, 4, shp, SP_INIT_INPUT);
  GError *err = NULL;
  uint32_t y = sp_op_seq_all_to_all(g, &gs, x, 2, sd, FALSE, &err);
  g_assert_no_error(err);
  uint32_t z = sp_op_seq_all_to_all(g, &gs, y, sd, 2, FALSE, &err);
  g_assert_no_error(err);
  const sp_tensor *ty = sp_graph_tensor(g, y);
  g_assert_cmpint(ty->shape[sd], ==, S);
  g_assert_cmpint(ty->shape[2], ==, H / P);

  sp_graph_data *ref = sp_graph_data_new(g), *run = sp_graph_data_new(g);
  for (int32_t k = 0; k < W; k++) {
    int32_t r = ranks[k], i = k % P;
    float *p = sp_graph_data_get(ref, x, r);
    for (int64_t b = 0; b < B; b++)
      for (int64_t s = 0; s < Sl; s++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t c = 0; c < D; c++)
            p[sp_attn_index(seq_first, B, Sl, H, D, b, s, h, c)] = gval(b, i * Sl + s, h, c) + (float)(k / P) * 0.5f;
  }
  run_both(g, ref, run);
  for (int32_t k = 0; k < W; k++) {
    int32_t r = ranks[k], i = k % P;
    sp_graph_data *ds[2] = { ref, run };
    for (int m = 0; m < 2; m++) {
      const float *p = sp_graph_data_get(ds[m], y, r);
      for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
          for (int64_t h = 0; h < H / P; h++)
            for (int64_t c = 0; c < D; c++)
              g_assert_cmpfloat(p[sp_attn_index(seq_first, B, S, H / P, D, b, s, h, c)], ==,
                                gval(b, s, i * (H / P) + h, c) + (float)(k / P) * 0.5f);
    }
  }
  /* round trip restores the input bitwise (reference and loopback) */
  for (int32_t r = 0; r < W; r++) {
    g_assert_cmpmem(sp_graph_data_get(ref, z, r), 4 * B * Sl * H * D, sp_graph_data_get(ref, x, r), 4 * B * Sl * H * D);
    g_assert_cmpmem(sp_graph_data_get(run, z, r), 4 * B * Sl * H * D, sp_graph_data_get(run, x, r), 4 * B * Sl * H * D);
  }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
  g_free(ranks);
}

static void test_a2a(void)
{
  static const int32_t cases[][3] = { { 1, 1, 0 }, { 2, 2, 0 }, { 3, 3, 0 }, { 4, 4, 0 }, { 6, 6, 0 },
                                      { 6, 3, 1 }, { 6, 2, 1 }, { 8, 4, 1 } };
  for (gsize c = 0; c < G_N_ELEMENTS(cases); c++)
    for (int sf = 0; sf < 2; sf++)
      check_a2a(cases[c][0], cases[c][1], cases[c][2], sf);
}

/* all-gather along dim 1 and reduce-scatter along dim 1 of small integer tensors */
static void test_gather_scatter(void)
{
  for (int32_t P = 1; P <= 6; P++) {
    int32_t *ranks = make_groups(P, P, FALSE);
    sp_groups gs = { .ranks = ranks, .n_groups = 1, .group_size = P };
    sp_graph *g = sp_graph_new(P);
    int64_t s_in[3] = { 2, 3, 2 }, s_g[3] = { 2, 3 * P, 2 }, s_rs[3] = { 2, 3, 2 };
    uint32_t x = tensor(g, "x", SP_I32, 3, s_in, SP_INIT_INPUT);
    uint32_t ag = tensor(g, "ag", SP_I32, 3, s_g, SP_INIT_NONE);
    uint32_t rs = tensor(g, "rs", SP_I32, 3, s_rs, SP_INIT_NONE);
    GError *err = NULL;
    g_assert_cmpuint(sp_graph_all_gather(g, &gs, x, ag, 1, SP_ALGO_AUTO, &err), !=, UINT32_MAX);
    g_assert_no_error(err);
    s_in[1] = 3 * P;
    uint32_t x2 = tensor(g, "x2", SP_I32, 3, s_in, SP_INIT_INPUT);
    g_assert_cmpuint(sp_graph_reduce_scatter(g, &gs, x2, rs, 1, SP_RED_SUM, SP_ALGO_AUTO, &err), !=, UINT32_MAX);
    g_assert_no_error(err);
    sp_graph_data *ref = sp_graph_data_new(g), *run = sp_graph_data_new(g);
    for (int32_t r = 0; r < P; r++) {
      int32_t *p = sp_graph_data_get(ref, x, r);
      for (int i = 0; i < 12; i++)
        p[i] = r * 100 + i; /* (a, b, c) -> i = a*6 + b*2 + c */
      int32_t *q = sp_graph_data_get(ref, x2, r);
      for (int i = 0; i < 12 * P; i++)
        q[i] = (r + 1) * i;
    }
    run_both(g, ref, run);
    for (int32_t r = 0; r < P; r++)
      for (int m = 0; m < 2; m++) {
        sp_graph_data *d = m ? run : ref;
        const int32_t *o = sp_graph_data_get(d, ag, r);
        for (int a = 0; a < 2; a++)
          for (int b = 0; b < 3 * P; b++)
            for (int c = 0; c < 2; c++)
              g_assert_cmpint(o[(a * 3 * P + b) * 2 + c], ==, (b / 3) * 100 + a * 6 + (b % 3) * 2 + c);
        /* reduce-scatter: sum over ranks (r+1) = P(P+1)/2 times the global index of block r */
        const int32_t *o2 = sp_graph_data_get(d, rs, r);
        for (int a = 0; a < 2; a++)
          for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++)
              g_assert_cmpint(o2[(a * 3 + b) * 2 + c], ==,
                              P * (P + 1) / 2 * ((a * 3 * P + r * 3 + b) * 2 + c));
      }
    sp_graph_data_free(ref);
    sp_graph_data_free(run);
    sp_graph_free(g);
    g_free(ranks);
  }
}

/* local nodes: slice, pad, concat, repeat, repeat-sum, add, scale on hand-made data */
static void test_local(void)
{
  sp_graph *g = sp_graph_new(1);
  int64_t s23[2] = { 2, 3 }, s22[2] = { 2, 2 }, s25[2] = { 2, 5 }, s26[2] = { 2, 6 }, s21[2] = { 2, 1 };
  uint32_t x = tensor(g, "x", SP_F32, 2, s23, SP_INIT_INPUT);
  uint32_t sl = tensor(g, "sl", SP_F32, 2, s22, SP_INIT_NONE);
  uint32_t pd = tensor(g, "pd", SP_F32, 2, s25, SP_INIT_NONE);
  uint32_t cc = tensor(g, "cc", SP_F32, 2, s25, SP_INIT_NONE);
  uint32_t rp = tensor(g, "rp", SP_F32, 2, s26, SP_INIT_NONE);
  uint32_t rsum = tensor(g, "rsum", SP_F32, 2, s23, SP_INIT_NONE);
  uint32_t one = tensor(g, "one", SP_F32, 2, s21, SP_INIT_NONE);
  uint32_t ad = tensor(g, "ad", SP_F32, 2, s23, SP_INIT_NONE);
  GError *err = NULL;
  g_assert_cmpuint(sp_graph_slice(g, x, sl, 1, 1, 2, &err), !=, UINT32_MAX);
  g_assert_cmpuint(sp_graph_pad(g, x, pd, 1, &err), !=, UINT32_MAX);
  uint32_t cat[2] = { sl, x };
  g_assert_cmpuint(sp_graph_concat(g, cat, 2, cc, 1, &err), !=, UINT32_MAX);
  g_assert_cmpuint(sp_graph_repeat(g, x, rp, 1, 2, &err), !=, UINT32_MAX);
  g_assert_cmpuint(sp_graph_repeat_sum(g, rp, rsum, 1, 2, &err), !=, UINT32_MAX);
  g_assert_cmpuint(sp_graph_slice(g, x, one, 1, 2, 1, &err), !=, UINT32_MAX);
  g_assert_cmpuint(sp_graph_add(g, x, rsum, ad, SP_RED_SUM, &err), !=, UINT32_MAX);
  g_assert_cmpuint(sp_graph_scale(g, ad, ad, 3.0, TRUE, &err), !=, UINT32_MAX);
  g_assert_no_error(err);
  /* errors */
  g_assert_cmpuint(sp_graph_slice(g, x, sl, 1, 2, 2, &err), ==, UINT32_MAX);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  g_assert_cmpuint(sp_graph_repeat(g, x, rp, 1, 3, &err), ==, UINT32_MAX);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);

  sp_graph_data *ref = sp_graph_data_new(g), *run = sp_graph_data_new(g);
  float *px = sp_graph_data_get(ref, x, 0);
  for (int i = 0; i < 6; i++)
    px[i] = (float)(i + 1); /* [[1 2 3] [4 5 6]] */
  run_both(g, ref, run);
  static const float e_sl[] = { 2, 3, 5, 6 }, e_pd[] = { 1, 2, 3, 0, 0, 4, 5, 6, 0, 0 };
  static const float e_cc[] = { 2, 3, 1, 2, 3, 5, 6, 4, 5, 6 }, e_rp[] = { 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6 };
  static const float e_rs[] = { 2, 4, 6, 8, 10, 12 }, e_one[] = { 3, 6 }, e_ad[] = { 1, 2, 3, 4, 5, 6 };
  struct { uint32_t t; const float *e; int n; } chk[] = {
    { sl, e_sl, 4 }, { pd, e_pd, 10 }, { cc, e_cc, 10 }, { rp, e_rp, 12 }, { rsum, e_rs, 6 },
    { one, e_one, 2 }, { ad, e_ad, 6 },
  };
  for (gsize c = 0; c < G_N_ELEMENTS(chk); c++)
    for (int m = 0; m < 2; m++) {
      const float *p = sp_graph_data_get(m ? run : ref, chk[c].t, 0);
      for (int i = 0; i < chk[c].n; i++)
        g_assert_cmpfloat(p[i], ==, chk[c].e[i]);
    }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

static void test_errors(void)
{
  sp_graph *g = sp_graph_new(4);
  int32_t r4[4] = { 0, 1, 2, 3 }, dup[2] = { 1, 1 };
  sp_groups gs = sp_groups_one(r4, 3), gd = sp_groups_one(dup, 2);
  int64_t s[2] = { 4, 5 }, s0[2] = { 0, 5 }, s9[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
  GError *err = NULL;
  g_assert_cmpuint(sp_graph_tensor_new(g, "bad", SP_F32, 2, s0, 0, 0, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  g_assert_cmpuint(sp_graph_tensor_new(g, "bad", SP_F32, 9, s9, 0, 0, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  uint32_t x = tensor(g, "x", SP_F32, 2, s, SP_INIT_INPUT);
  /* 5 along dim 1 does not divide by 3 */
  g_assert_cmpuint(sp_op_seq_all_to_all(g, &gs, x, 1, 0, FALSE, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_assert_nonnull(strstr(err->message, "divide"));
  g_clear_error(&err);
  g_assert_cmpuint(sp_op_split_fwd(g, &gs, x, 1, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_assert_nonnull(strstr(err->message, "not a multiple"));
  g_clear_error(&err);
  g_assert_cmpuint(sp_op_gather_fwd(g, &gd, x, 0, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  g_assert_cmpuint(sp_op_gather_fwd(g, &gs, x, 2, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  /* a rank outside the world */
  int32_t far[2] = { 0, 9 };
  sp_groups gf = { .ranks = far, .n_groups = 1, .group_size = 2 };
  g_assert_cmpuint(sp_op_gather_fwd(g, &gf, x, 0, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_graph_free(g);
}

/* Async all-to-alls: tensor 1's sends are posted before the first WAIT (multi-tensor overlap). */
static void test_async_order(void)
{
  const int32_t P = 3;
  int32_t ranks[3] = { 0, 1, 2 };
  sp_groups gs = { .ranks = ranks, .n_groups = 1, .group_size = P };
  sp_graph *g = sp_graph_new(P);
  int64_t s[4] = { 2, 2, 6, 2 }; /* batch 2: the gather needs an unpack */
  uint32_t a = tensor(g, "a", SP_F32, 4, s, SP_INIT_INPUT), b = tensor(g, "b", SP_F32, 4, s, SP_INIT_INPUT);
  uint32_t c = tensor(g, "c", SP_F32, 4, s, SP_INIT_INPUT);
  uint32_t ins[3] = { a, b, c }, outs[3];
  int sc[3] = { 2, 2, 2 }, ga[3] = { 1, 1, 1 };
  GError *err = NULL;
  g_assert_true(sp_op_multi_all_to_all(g, &gs, 3, ins, sc, ga, outs, &err));
  g_assert_no_error(err);
  sp_program *p = sp_graph_lower(g, 1, &err);
  g_assert_no_error(err);
  /* node ids: a2a(a)=0, a2a(b)=1, sync(a)=2, a2a(c)=3, ... */
  int first_wait = -1, last_send_b = -1, first_send_c = -1, second_wait = -1, unpack_a = -1;
  for (guint i = 0; i < sp_program_len(p); i++) {
    const sp_step *st = sp_program_step(p, i);
    if (st->kind == SP_STEP_WAIT) {
      if (first_wait < 0)
        first_wait = (int)i;
      else if (second_wait < 0)
        second_wait = (int)i;
    }
    if (st->kind == SP_STEP_SEND && st->op == 1)
      last_send_b = (int)i;
    if (st->kind == SP_STEP_SEND && st->op == 3 && first_send_c < 0)
      first_send_c = (int)i;
    if (st->kind == SP_STEP_COPY && st->op == 0 && st->dst.buf == sp_graph_tensor_storage(g, outs[0]))
      unpack_a = (int)i;
  }
  g_assert_cmpint(last_send_b, >=, 0);
  g_assert_cmpint(first_wait, >, last_send_b);   /* b posted before a is waited on */
  g_assert_cmpint(unpack_a, >, first_wait);      /* a unpacked after the wait */
  g_assert_cmpint(first_send_c, >, first_wait);  /* c posted after a completes */
  g_assert_cmpint(first_send_c, <, second_wait);
  sp_program_free(p);
  /* and the data is still right */
  sp_graph_data *ref = sp_graph_data_new(g), *run = sp_graph_data_new(g);
  sp_graph_data_fill_inputs(ref, 7);
  run_both(g, ref, run);
  for (int i = 0; i < 3; i++) {
    g_assert_true(sp_graph_data_compare(g, run, ref, outs[i], 0.0, &err));
    g_assert_no_error(err);
  }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

/* kernels on hand-checked values */
static void test_kernels(void)
{
  const float a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 1, 0, 0, 1, 1, 1 }; /* a [2,3], b [3,2] */
  float c[4], ct[4];
  sp_kernel_matmul_f32(a, FALSE, b, FALSE, c, 2, 2, 3);
  g_assert_cmpfloat(c[0], ==, 4);
  g_assert_cmpfloat(c[1], ==, 5);
  g_assert_cmpfloat(c[2], ==, 10);
  g_assert_cmpfloat(c[3], ==, 11);
  /* a^T stored as [3,2]: at = [[1 4] [2 5] [3 6]]; b^T stored as [2,3] */
  const float at[6] = { 1, 4, 2, 5, 3, 6 }, bt[6] = { 1, 0, 1, 0, 1, 1 };
  sp_kernel_matmul_f32(at, TRUE, bt, TRUE, ct, 2, 2, 3);
  g_assert_cmpmem(c, sizeof c, ct, sizeof ct);
  /* attention, B=1, S=2, H=1, D=1: token 0 sees only itself; token 1 mixes v0, v1
   * with weights softmax(q1 k0, q1 k1) */
  const float q[2] = { 1, 2 }, k[2] = { 0, 1 }, v[2] = { 10, 20 };
  float o[2];
  sp_kernel_attention_f32(FALSE, 1, 2, 1, 1, 1, q, k, v, o);
  g_assert_cmpfloat(o[0], ==, 10);
  double w1 = exp(2.0) / (1.0 + exp(2.0));
  g_assert_cmpfloat_with_epsilon(o[1], 10 * (1 - w1) + 20 * w1, 1e-5);
  /* backward: dv_j = sum_i p_ij dout_i; with dout = (1, 1): dv0 = 1 + (1 - w1), dv1 = w1 */
  const float dout[2] = { 1, 1 };
  float dq[2], dk[2], dv[2];
  sp_kernel_attention_bwd_f32(FALSE, 1, 2, 1, 1, 1, q, k, v, dout, dq, dk, dv);
  g_assert_cmpfloat_with_epsilon(dv[0], 1 + (1 - w1), 1e-6);
  g_assert_cmpfloat_with_epsilon(dv[1], w1, 1e-6);
  g_assert_cmpfloat(dq[0], ==, 0); /* one key: softmax is constant */
  /* dq1 = sum_j dS_j k_j, dS_j = p_j (dP_j - sum p dP), dP_j = v_j: dS_1 = w1 (20 - o1) */
  g_assert_cmpfloat_with_epsilon(dq[1], w1 * (20 - o[1]) * 1.0, 1e-4);
}

/* Bytes sent per link class: direct all-to-all sends (P-1)/P of the tensor; an all-gather
 * (any algorithm) sends at least (P-1)/P of the gathered array. */
static void test_stats(void)
{
  const int32_t P = 4;
  int32_t ranks[4] = { 0, 1, 2, 3 };
  sp_groups gs = { .ranks = ranks, .n_groups = 1, .group_size = P };
  sp_graph *g = sp_graph_new(P);
  int64_t s[4] = { 2, 4, 8, 16 };
  uint32_t x = tensor(g, "x", SP_F32, 4, s, SP_INIT_INPUT);
  GError *err = NULL;
  uint32_t y = sp_op_seq_all_to_all(g, &gs, x, 2, 1, TRUE, &err); /* async -> direct */
  g_assert_no_error(err);
  (void)y;
  const uint64_t bytes = 2 * 4 * 8 * 16 * 4;
  sp_graph_stats st;
  g_assert_true(sp_graph_rank_stats(g, 1, 2, 0, UINT32_MAX, &st, &err));
  g_assert_no_error(err);
  g_assert_cmpuint(st.bytes_sent, ==, bytes * 3 / 4);
  g_assert_cmpuint(st.bytes_intra, ==, bytes / 4); /* rank 1 shares a node with rank 0 only */
  g_assert_cmpuint(st.bytes_inter, ==, bytes / 2);
  g_assert_cmpuint(st.mem_kind[SP_TENSOR_ACTIVATION], ==, 2 * bytes);
  g_assert_cmpuint(st.mem_peak, >=, 2 * bytes);
  /* attention flops: b Hq d 2 S (S+1) */
  sp_graph *h = sp_graph_new(1);
  int64_t qs[4] = { 2, 5, 3, 4 };
  uint32_t q = tensor(h, "q", SP_F32, 4, qs, SP_INIT_INPUT), k = tensor(h, "k", SP_F32, 4, qs, SP_INIT_INPUT);
  uint32_t v = tensor(h, "v", SP_F32, 4, qs, SP_INIT_INPUT), o = tensor(h, "o", SP_F32, 4, qs, SP_INIT_NONE);
  g_assert_cmpuint(sp_graph_attention(h, SP_LAYOUT_BSHD, q, k, v, o, &err), !=, UINT32_MAX);
  g_assert_true(sp_graph_rank_stats(h, 0, 8, 0, UINT32_MAX, &st, &err));
  g_assert_cmpfloat(st.flops, ==, 2.0 * 3 * 4 * 2 * 5 * 6);
  sp_graph_free(h);
  sp_graph_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/graph/all-to-all", test_a2a);
  g_test_add_func("/graph/gather-scatter", test_gather_scatter);
  g_test_add_func("/graph/local", test_local);
  g_test_add_func("/graph/errors", test_errors);
  g_test_add_func("/graph/async-order", test_async_order);
  g_test_add_func("/graph/kernels", test_kernels);
  g_test_add_func("/graph/stats", test_stats);
  return g_test_run();
}
