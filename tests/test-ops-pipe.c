/* Pipeline schedules (GPipe, 1F1B) and data parallelism (bucketed all-reduce, ZeRO):
 * hand-written schedules, exact data results, closed-form FLOPs, the layer trap. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

static sp_pipe_cfg pcfg(int32_t S, int32_t M, sp_pipe_schedule sch)
{
  sp_pipe_cfg c = { .stages = S, .micro_batches = M, .layers = 2 * S, .virtual_stages = 1, .schedule = sch,
                    .ndim = 2, .shape = { 4, 8 }, .flops_fwd_layer = 100, .flops_bwd_layer = 200 };
  return c;
}

static void test_pipeline_data(void)
{
  /* world 6, two pipes of 3 stages: [0 2 4] and [1 3 5] */
  int32_t ranks[6] = { 0, 2, 4, 1, 3, 5 };
  sp_groups pipe = { 2, 3, ranks };
  for (int sch = 0; sch < 2; sch++) {
    sp_graph *g = sp_graph_new(6);
    sp_pipe_cfg cfg = pcfg(3, 4, sch);
    sp_pipeline pl;
    GError *err = NULL;
    g_assert_true(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
    g_assert_no_error(err);
    sp_graph_data *ref = sp_graph_data_new(g);
    sp_graph_data_fill_inputs(ref, 5);
    sp_graph_data *run = sp_graph_data_new(g);
    sp_graph_data_copy(run, ref);
    g_assert_true(sp_graph_reference(g, ref, &err));
    g_assert_true(sp_graph_run_loopback(g, run, &err));
    g_assert_no_error(err);
    for (int32_t m = 0; m < 4; m++)
      for (int k = 0; k < 2; k++) {
        int32_t first = k ? 1 : 0, last = k ? 5 : 4;
        const float *x = sp_graph_data_get(run, pl.x[m], first);
        for (int d = 0; d < 2; d++) {
          sp_graph_data *dd = d ? run : ref;
          const float *y = sp_graph_data_get(dd, pl.y[m], last), *gx = sp_graph_data_get(dd, pl.gx[m], first);
          g_assert_null(sp_graph_data_get(dd, pl.y[m], first));
          for (int i = 0; i < 32; i++) {
            g_assert_cmpfloat(y[i], ==, x[i] * 8.0f);
            g_assert_cmpfloat(gx[i], ==, x[i] * 64.0f);
          }
        }
      }
    /* every rank computes M micro-batches of layers/S layers forward and backward */
    sp_graph_stats st;
    g_assert_true(sp_graph_rank_stats(g, 3, 2, 0, UINT32_MAX, &st, &err));
    g_assert_cmpfloat(st.flops, ==, 4 * 2 * (100.0 + 200.0));
    /* stage 1 sends M activations forward and M gradients back: 2 M 128 bytes */
    g_assert_cmpuint(st.bytes_sent, ==, 2 * 4 * 128);
    sp_pipeline_clear(&pl);
    sp_graph_data_free(ref);
    sp_graph_data_free(run);
    sp_graph_free(g);
  }
}

/* order of the F/B compute steps in a rank's program */
static char *order_of(sp_graph *g, int32_t rank)
{
  GError *err = NULL;
  sp_program *p = sp_graph_lower(g, rank, &err);
  g_assert_no_error(err);
  GString *s = g_string_new("");
  for (guint i = 0; i < sp_program_len(p); i++) {
    const sp_step *st = sp_program_step(p, i);
    if (st->kind == SP_STEP_COMPUTE) {
      const char *nm = sp_graph_node(g, st->op)->name;
      g_string_append_printf(s, "%s%.2s", s->len ? " " : "", nm);
    }
  }
  sp_program_free(p);
  return g_string_free(s, FALSE);
}

static void test_pipeline_order(void)
{
  int32_t ranks[2] = { 0, 1 };
  sp_groups pipe = sp_groups_one(ranks, 2);
  static const char *const want[2][2] = {
    { "F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2" }, /* GPipe */
    { "F0 F1 B0 F2 B1 B2", "F0 B0 F1 B1 F2 B2" }, /* 1F1B: stage 0 warms up with one forward */
  };
  uint64_t peak[2];
  for (int sch = 0; sch < 2; sch++) {
    sp_graph *g = sp_graph_new(2);
    sp_pipe_cfg cfg = pcfg(2, 3, sch);
    sp_pipeline pl;
    GError *err = NULL;
    g_assert_true(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
    for (int32_t r = 0; r < 2; r++) {
      char *o = order_of(g, r);
      g_assert_cmpstr(o, ==, want[sch][r]);
      g_free(o);
    }
    sp_graph_stats st;
    g_assert_true(sp_graph_rank_stats(g, 1, 2, 0, UINT32_MAX, &st, &err));
    peak[sch] = st.mem_peak;
    sp_pipeline_clear(&pl);
    sp_graph_free(g);
  }
  /* the last stage keeps all 3 received activations under GPipe, one under 1F1B */
  g_assert_cmpuint(peak[0], >=, peak[1] + 2 * 128);
}

static void test_pipeline_errors(void)
{
  int32_t ranks[4] = { 0, 1, 2, 3 };
  sp_groups pipe = sp_groups_one(ranks, 4);
  sp_graph *g = sp_graph_new(4);
  sp_pipe_cfg cfg = pcfg(4, 2, SP_PIPE_1F1B);
  sp_pipeline pl;
  GError *err = NULL;
  cfg.layers = 10; /* 10 % 4 != 0: an error, not silently dropped layers */
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_assert_nonnull(strstr(err->message, "do not divide"));
  g_clear_error(&err);
  cfg.layers = 12;
  cfg.virtual_stages = 2; /* 12 % 8 != 0 */
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_clear_error(&err);
  cfg.layers = 16;
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  cfg.virtual_stages = 1;
  cfg.stages = 3;
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_graph_free(g);
}

static void test_dp_buckets(void)
{
  for (int32_t P = 1; P <= 5; P++) {
    int32_t ranks[5] = { 0, 1, 2, 3, 4 };
    sp_groups dp = sp_groups_one(ranks, P);
    sp_graph *g = sp_graph_new(P);
    int64_t s0[2] = { 3, 5 }, s1[1] = { 4 }, s2[2] = { 2, 5 };
    uint32_t gr[3] = { sp_graph_tensor_new(g, "g0", SP_F32, 2, s0, SP_TENSOR_GRAD, SP_INIT_INPUT, NULL),
                       sp_graph_tensor_new(g, "g1", SP_F32, 1, s1, SP_TENSOR_GRAD, SP_INIT_INPUT, NULL),
                       sp_graph_tensor_new(g, "g2", SP_F32, 2, s2, SP_TENSOR_GRAD, SP_INIT_INPUT, NULL) };
    uint32_t out[3];
    GError *err = NULL;
    /* 60 bytes, then 16 + 40 = 56 bytes: two buckets of at most 64 bytes */
    g_assert_cmpint(sp_op_dp_allreduce(g, &dp, gr, 3, 64, out, &err), ==, 2);
    g_assert_no_error(err);
    sp_graph_data *ref = sp_graph_data_new(g);
    const int n[3] = { 15, 4, 10 };
    for (int32_t r = 0; r < P; r++)
      for (int k = 0; k < 3; k++) {
        float *p = sp_graph_data_get(ref, gr[k], r);
        for (int i = 0; i < n[k]; i++)
          p[i] = (float)((r + 1) * (i + 10 * k));
      }
    sp_graph_data *run = sp_graph_data_new(g);
    sp_graph_data_copy(run, ref);
    g_assert_true(sp_graph_reference(g, ref, &err));
    g_assert_true(sp_graph_run_loopback(g, run, &err));
    g_assert_no_error(err);
    for (int d = 0; d < 2; d++)
      for (int32_t r = 0; r < P; r++)
        for (int k = 0; k < 3; k++) {
          const float *p = sp_graph_data_get(d ? run : ref, out[k], r);
          for (int i = 0; i < n[k]; i++) /* mean of (r+1) v over r = v (P+1)/2 */
            g_assert_cmpfloat_with_epsilon(p[i], (i + 10 * k) * (P + 1) / 2.0, 1e-4);
        }
    sp_graph_data_free(ref);
    sp_graph_data_free(run);
    sp_graph_free(g);
  }
}

static void test_zero(void)
{
  const int32_t P = 3;
  int32_t ranks[3] = { 0, 1, 2 };
  sp_groups dp = sp_groups_one(ranks, P);
  for (int stage = 1; stage <= 3; stage++) {
    sp_graph *g = sp_graph_new(P);
    int64_t s0[1] = { 4 }, s1[1] = { 3 }, sp[1] = { 3 }; /* N = 7, padded to 9, shards of 3 */
    uint32_t gr[2] = { sp_graph_tensor_new(g, "g0", SP_F32, 1, s0, SP_TENSOR_GRAD, SP_INIT_INPUT, NULL),
                       sp_graph_tensor_new(g, "g1", SP_F32, 1, s1, SP_TENSOR_GRAD, SP_INIT_INPUT, NULL) };
    uint32_t p = sp_graph_tensor_new(g, "p", SP_F32, 1, sp, SP_TENSOR_WEIGHT, SP_INIT_INPUT, NULL);
    uint32_t gs, full;
    GError *err = NULL;
    g_assert_true(sp_op_zero_step(g, &dp, stage, gr, 2, p, 0.5, &gs, &full, &err));
    g_assert_no_error(err);
    g_assert_true(stage == 3 ? full == SP_NO_TENSOR : full != SP_NO_TENSOR);
    sp_graph_data *ref = sp_graph_data_new(g);
    for (int32_t r = 0; r < P; r++) {
      float *a = sp_graph_data_get(ref, gr[0], r), *b = sp_graph_data_get(ref, gr[1], r);
      float *pp = sp_graph_data_get(ref, p, r);
      for (int i = 0; i < 4; i++)
        a[i] = (float)(2 * (r + 1) * i);
      for (int i = 0; i < 3; i++) {
        b[i] = (float)(2 * (r + 1) * (4 + i));
        pp[i] = (float)(100 + 3 * r + i);
      }
    }
    sp_graph_data *run = sp_graph_data_new(g);
    sp_graph_data_copy(run, ref);
    g_assert_true(sp_graph_reference(g, ref, &err));
    g_assert_true(sp_graph_run_loopback(g, run, &err));
    g_assert_no_error(err);
    for (int d = 0; d < 2; d++)
      for (int32_t r = 0; r < P; r++) {
        /* averaged gradient of element j: 2 j (P+1)/2 = 4 j; pad elements 0 */
        const float *sh = sp_graph_data_get(d ? run : ref, gs, r);
        for (int i = 0; i < 3; i++) {
          int j = 3 * r + i;
          g_assert_cmpfloat(sh[i], ==, j < 7 ? 4.0f * j : 0.0f);
        }
        if (full != SP_NO_TENSOR) {
          const float *f = sp_graph_data_get(d ? run : ref, full, r);
          for (int j = 0; j < 9; j++) /* p_j - 0.5 * 4 j */
            g_assert_cmpfloat(f[j], ==, (float)(100 + j) - (j < 7 ? 2.0f * j : 0.0f));
        }
      }
    sp_graph_data_free(ref);
    sp_graph_data_free(run);
    sp_graph_free(g);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ops/pipe/data", test_pipeline_data);
  g_test_add_func("/ops/pipe/order", test_pipeline_order);
  g_test_add_func("/ops/pipe/errors", test_pipeline_errors);
  g_test_add_func("/ops/dp/buckets", test_dp_buckets);
  g_test_add_func("/ops/dp/zero", test_zero);
  return g_test_run();
}
