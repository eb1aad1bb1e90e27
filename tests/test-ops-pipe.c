/* Pipeline schedules (GPipe, 1F1B, interleaved 1F1B) and data parallelism (bucketed
 * all-reduce, ZeRO): hand-written schedules, exact data results, closed-form FLOPs,
 * sends and bubble, the layer trap. */
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
  cfg.layers = 16; /* interleaved with 2 micro-batches on 4 stages: 2 % 4 != 0 */
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_assert_nonnull(strstr(err->message, "micro-batches (2)"));
  g_clear_error(&err);
  cfg.micro_batches = 6;
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_clear_error(&err);
  cfg.micro_batches = 8; /* now it builds */
  g_assert_true(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_no_error(err);
  sp_pipeline_clear(&pl);
  cfg.micro_batches = 2;
  cfg.virtual_stages = 1;
  cfg.stages = 3;
  g_assert_false(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_graph_free(g);
}

/* ---- interleaved 1F1B (virtual stages) ---- */

/* compute steps of a rank's program: forward?, micro-batch, local chunk, stage (from the node names) */
typedef struct {
  gboolean fwd;
  int32_t m, c, s;
} pipe_act;

static GArray *acts_of(sp_graph *g, int32_t rank, int32_t V)
{
  GError *err = NULL;
  sp_program *p = sp_graph_lower(g, rank, &err);
  g_assert_no_error(err);
  GArray *a = g_array_new(FALSE, FALSE, sizeof(pipe_act));
  for (guint i = 0; i < sp_program_len(p); i++) {
    const sp_step *st = sp_program_step(p, i);
    if (st->kind != SP_STEP_COMPUTE)
      continue;
    const char *nm = sp_graph_node(g, st->op)->name;
    pipe_act x = { nm[0] == 'F', 0, 0, 0 };
    g_assert_true(nm[0] == 'F' || nm[0] == 'B');
    if (V == 1)
      g_assert_cmpint(sscanf(nm + 1, "%d.s%d", &x.m, &x.s), ==, 2);
    else
      g_assert_cmpint(sscanf(nm + 1, "%d.c%d.s%d", &x.m, &x.c, &x.s), ==, 3);
    g_array_append_val(a, x);
  }
  sp_program_free(p);
  return a;
}

/*
 * Time the programs' compute order on a schedule simulation: a forward chunk takes
 * @p tf, a backward @p tb, transfers are free; a rank runs its compute steps in
 * program order, each as soon as the rank is free and its input exists (forward of
 * global chunk g after the forward of g - 1; backward of g after the backward of g + 1,
 * the last chunk's after its own forward). @return the idle fraction
 * (makespan - busy) / busy of the ranks (all equal), or -1 on a deadlock.
 */
static double bubble_of(sp_graph *g, const int32_t *ranks, int32_t S, int32_t V, int32_t M, double tf, double tb)
{
  const int32_t C = S * V;
  GArray **a = g_new(GArray *, S);
  for (int32_t s = 0; s < S; s++)
    a[s] = acts_of(g, ranks[s], V);
  double *fend = g_new(double, C * M), *bend = g_new(double, C * M), *free_at = g_new0(double, S);
  for (int32_t i = 0; i < C * M; i++)
    fend[i] = bend[i] = -1;
  guint *pos = g_new0(guint, S);
  gboolean progress = TRUE;
  while (progress) {
    progress = FALSE;
    for (int32_t s = 0; s < S; s++)
      while (pos[s] < a[s]->len) {
        const pipe_act *x = &g_array_index(a[s], pipe_act, pos[s]);
        g_assert_cmpint(x->s, ==, s);
        const int32_t gc = x->c * S + s;
        double ready;
        if (x->fwd)
          ready = gc == 0 ? 0 : fend[(gc - 1) * M + x->m];
        else
          ready = gc == C - 1 ? fend[gc * M + x->m] : bend[(gc + 1) * M + x->m];
        if (ready < 0)
          break;
        double st = MAX(ready, free_at[s]);
        free_at[s] = st + (x->fwd ? tf : tb);
        (x->fwd ? fend : bend)[gc * M + x->m] = free_at[s];
        pos[s]++;
        progress = TRUE;
      }
  }
  double T = 0, busy = M * V * (tf + tb);
  gboolean done = TRUE;
  for (int32_t s = 0; s < S; s++) {
    g_assert_cmpuint(a[s]->len, ==, (guint)(2 * V * M)); /* every chunk forward and backward once */
    done = done && pos[s] == a[s]->len;
    T = MAX(T, free_at[s]);
    g_array_free(a[s], TRUE);
  }
  g_free(a); g_free(fend); g_free(bend); g_free(free_at); g_free(pos);
  return done ? (T - busy) / busy : -1;
}

static void check_interleaved(int32_t S, int32_t V, int32_t M, sp_pipe_schedule sch)
{
  /* two pipes: stage s of pipe k is rank s * 2 + k */
  const int32_t W = 2 * S;
  int32_t *ranks = g_new(int32_t, W);
  for (int32_t k = 0; k < 2; k++)
    for (int32_t s = 0; s < S; s++)
      ranks[k * S + s] = s * 2 + k;
  sp_groups pipe = { 2, S, ranks };
  sp_graph *g = sp_graph_new(W);
  sp_pipe_cfg cfg = pcfg(S, M, sch);
  cfg.virtual_stages = V;
  cfg.layers = 2 * S * V;
  sp_pipeline pl;
  GError *err = NULL;
  g_assert_true(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  g_assert_no_error(err);
  sp_graph_data *ref = sp_graph_data_new(g);
  sp_graph_data_fill_inputs(ref, 7);
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err)); /* completes: no deadlock */
  g_assert_no_error(err);
  /* every chunk scales by 2: y = x 2^(S V), gx = x 2^(2 S V) (exact in f32) */
  const float fy = ldexpf(1.0f, S * V), fg = ldexpf(1.0f, 2 * S * V);
  for (int32_t m = 0; m < M; m++)
    for (int32_t k = 0; k < 2; k++) {
      const int32_t first = ranks[k * S], last = ranks[k * S + S - 1];
      const float *x = sp_graph_data_get(run, pl.x[m], first);
      for (int d = 0; d < 2; d++) {
        sp_graph_data *dd = d ? run : ref;
        const float *y = sp_graph_data_get(dd, pl.y[m], last), *gx = sp_graph_data_get(dd, pl.gx[m], first);
        g_assert_nonnull(y);
        g_assert_nonnull(gx);
        for (int i = 0; i < 32; i++) {
          g_assert_cmpfloat(y[i], ==, x[i] * fy);
          g_assert_cmpfloat(gx[i], ==, x[i] * fg);
        }
      }
    }
  /* the same schedule without interleaving, for the sends and the bubble */
  sp_graph *g1 = sp_graph_new(W);
  sp_pipe_cfg c1 = pcfg(S, M, sch);
  sp_pipeline p1;
  g_assert_true(sp_op_pipeline(g1, &pipe, &c1, &p1, &err));
  for (int32_t s = 0; s < S; s++) {
    sp_graph_stats st, st1;
    g_assert_true(sp_graph_rank_stats(g, ranks[s], 2, 0, UINT32_MAX, &st, &err));
    g_assert_true(sp_graph_rank_stats(g1, ranks[s], 2, 0, UINT32_MAX, &st1, &err));
    /* the same layers per rank: M (layers / S) (fwd + bwd) FLOPs */
    g_assert_cmpfloat(st.flops, ==, M * (2.0 * V) * (100.0 + 200.0));
    /* each of the V chunks sends M activations on (the last stage wraps round to stage 0,
     * except from the last chunk) and M gradients back (stage 0 wraps round to the last
     * stage, except from chunk 0): M (2 V - [s = S - 1] - [s = 0]) sends of 128 bytes */
    uint64_t sends = S == 1 ? 0 : (uint64_t)M * (2 * V - (s == S - 1) - (s == 0));
    uint64_t sends1 = S == 1 ? 0 : (uint64_t)M * (2 - (s == S - 1) - (s == 0));
    g_assert_cmpuint(st.msgs, ==, sends);
    g_assert_cmpuint(st.bytes_sent, ==, sends * 128);
    g_assert_cmpuint(st1.msgs, ==, sends1);
    if (s > 0 && s < S - 1) /* inner stages: exactly V times plain 1F1B */
      g_assert_cmpuint(st.msgs, ==, (uint64_t)V * st1.msgs);
  }
  /* bubble on unit-time chunks: (S - 1) / (V M), against (S - 1) / M without interleaving */
  for (int tb = 1; tb <= 2; tb++) {
    double b = bubble_of(g, ranks, S, V, M, 1.0, tb), b1 = bubble_of(g1, ranks, S, 1, M, 1.0, tb);
    g_assert_cmpfloat(fabs(b - (double)(S - 1) / (V * M)), <=, 1e-12);
    g_assert_cmpfloat(fabs(b1 - (double)(S - 1) / M), <=, 1e-12);
    g_assert_true(b1 >= b);
  }
  sp_pipeline_clear(&p1);
  sp_graph_free(g1);
  sp_pipeline_clear(&pl);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
  g_free(ranks);
}

static void test_interleaved(void)
{
  static const int32_t cases[][3] = { /* stages, virtual stages, micro-batches */
    { 2, 2, 2 }, { 2, 2, 4 }, { 2, 3, 6 }, { 3, 2, 3 }, { 3, 2, 6 }, { 3, 3, 9 },
    { 4, 2, 4 }, { 4, 2, 8 }, { 4, 3, 8 }, { 5, 2, 10 }, { 1, 3, 2 },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
    check_interleaved(cases[i][0], cases[i][1], cases[i][2], SP_PIPE_1F1B);
  /* GPipe with virtual stages: every forward first, in the interleaved order */
  check_interleaved(2, 2, 4, SP_PIPE_GPIPE);
  check_interleaved(3, 3, 6, SP_PIPE_GPIPE);
}

/* Megatron's interleaved order, written out by hand for 2 stages, 2 chunks, 4 micro-batches:
 * stage 0 warms up with (2 - 0 - 1) 2 + (2 - 1) 2 = 4 forwards, stage 1 with 2 */
static void test_interleaved_order(void)
{
  int32_t ranks[2] = { 0, 1 };
  sp_groups pipe = sp_groups_one(ranks, 2);
  sp_graph *g = sp_graph_new(2);
  sp_pipe_cfg cfg = pcfg(2, 4, SP_PIPE_1F1B);
  cfg.virtual_stages = 2;
  cfg.layers = 4;
  sp_pipeline pl;
  GError *err = NULL;
  g_assert_true(sp_op_pipeline(g, &pipe, &cfg, &pl, &err));
  static const char *const want[2] = {
    "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1 B2c0 B3c0",
    "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 B2c0 B3c0",
  };
  for (int32_t r = 0; r < 2; r++) {
    GArray *a = acts_of(g, r, 2);
    GString *s = g_string_new("");
    for (guint i = 0; i < a->len; i++) {
      const pipe_act *x = &g_array_index(a, pipe_act, i);
      g_string_append_printf(s, "%s%c%dc%d", i ? " " : "", x->fwd ? 'F' : 'B', x->m, x->c);
    }
    g_assert_cmpstr(s->str, ==, want[r]);
    g_string_free(s, TRUE);
    g_array_free(a, TRUE);
  }
  sp_pipeline_clear(&pl);
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
  g_test_add_func("/ops/pipe/interleaved", test_interleaved);
  g_test_add_func("/ops/pipe/interleaved-order", test_interleaved_order);
  g_test_add_func("/ops/dp/buckets", test_dp_buckets);
  g_test_add_func("/ops/dp/zero", test_zero);
  return g_test_run();
}
