/* Step graph: pipeline makespans against the textbook formulas, the collectives a
 * layer issues against Megatron-LM's, uneven stages, buckets, and the breakdown. */
#include "config.h"
#include <glib.h>
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/stepgraph.h"
#include "step-fixture.h"

/* 8 layers, h 64, 4 heads, ffn 256 (GELU), vocab 1000 */
static sp_model model8(void)
{
  sp_model m = { .name = (char *)"tiny8", .layers = 8, .hidden = 64, .heads = 4, .kv_heads = 4, .ffn = 256,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_GELU };
  return m;
}

static gboolean price_zero(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)c; (void)err;
  *s = 0.0;
  return TRUE;
}

static gboolean price_1ms(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)c; (void)err;
  *s = 1e-3;
  return TRUE;
}

static sp_step_ctx ctx_for(const sp_model *m, int32_t world, int64_t seq, int64_t gb, sp_comm_price_fn price)
{
  return fixture_ctx(m, world, seq, gb, price);
}

static sp_layout lay(const char *spec, const sp_step_ctx *c) { return fixture_layout(spec, c); }

static sp_stepgraph *build(const sp_step_ctx *c, const sp_layout *l, sp_sched s)
{
  GError *err = NULL;
  sp_stepgraph *g = sp_stepgraph_build(c, l, s, &err);
  g_assert_no_error(err);
  g_assert_nonnull(g);
  g_assert_true(sp_stepgraph_price(g, c, &err));
  g_assert_no_error(err);
  return g;
}

static double run(const sp_stepgraph *g)
{
  GError *err = NULL;
  double span = -1;
  g_assert_true(sp_stepgraph_schedule(g, NULL, NULL, &span, &err));
  g_assert_no_error(err);
  return span;
}

/* The LM head and loss run on the last stage only; without them every stage is the
 * same and the textbook pipeline formulas hold exactly. */
static void drop_head(sp_stepgraph *g)
{
  for (guint i = 0; i < g->tasks->len; i++) {
    sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->kind == SP_TASK_COMPUTE && t->layer < 0) t->seconds = 0;
  }
}

/* Forward and backward of one layer for one micro-batch, from the kernel model. */
static void layer_times(const sp_step_ctx *c, const sp_layout *l, double *f, double *b)
{
  sp_layer_kernels k;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(c, l, &k, &err));
  *f = k.qkv[0] + k.attn_fwd + k.proj[0] + k.up[0] + k.down[0];
  *b = k.qkv[1] + k.qkv[2] + k.attn_bwd + k.proj[1] + k.proj[2] + k.up[1] + k.up[2] + k.down[1] + k.down[2];
}

static void assert_close(double got, double want)
{
  if (fabs(got - want) > 1e-12 + 1e-9 * fabs(want)) g_error("got %.12g, want %.12g", got, want);
}

/* 1F1B and GPipe with p equal stages and free sends: (m + p - 1)(f + b)
 * (Narayanan et al. 2021, sec. 2.2: the bubble is (p - 1) forward-backward slots). */
static void test_pipeline_makespan(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 4, 128, 8, price_zero);
  sp_layout l = lay("pp=4", &c);
  double f, b;
  layer_times(&c, &l, &f, &b);
  double F = 2 * f, B = 2 * b; /* two layers a stage */
  for (int s = 0; s < 2; s++) {
    g_autoptr(sp_stepgraph) g = build(&c, &l, s == 0 ? SP_SCHED_1F1B : SP_SCHED_GPIPE);
    drop_head(g);
    assert_close(run(g), (8 + 4 - 1) * (F + B));
  }
  /* one stage: everything in a row */
  sp_step_ctx c1 = ctx_for(&m, 1, 128, 8, price_zero);
  sp_layout l1 = lay("pp=1", &c1);
  g_autoptr(sp_stepgraph) g1 = build(&c1, &l1, SP_SCHED_1F1B);
  drop_head(g1);
  assert_close(run(g1), 8 * 8 * (f + b));
}

/* Interleaved 1F1B with v chunks: m (f + b) + (p - 1)(f + b) / v (Narayanan et al.
 * 2021, sec. 2.2.1), f and b of a whole stage. */
static void test_interleaved_makespan(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 4, 128, 8, price_zero);
  sp_layout l = lay("pp=4,vpp=2", &c);
  double f, b;
  layer_times(&c, &l, &f, &b);
  double F = 2 * f, B = 2 * b;
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  drop_head(g);
  assert_close(run(g), 8 * (F + B) + 3 * (F + B) / 2);
  /* sends: each micro-batch crosses p v - 1 boundaries each way */
  guint sends = 0;
  for (guint i = 0; i < g->tasks->len; i++) sends += g_array_index(g->tasks, sp_task, i).kind == SP_TASK_SEND;
  g_assert_cmpuint(sends, ==, 2 * 8 * (4 * 2 - 1));
}

/* The (micro-batch, chunk) of stage @p st's passes of @p phase, in the stage's order. */
static guint pass_order(const sp_stepgraph *g, int32_t st, int phase, int32_t *mb, int32_t *chunk, guint cap)
{
  guint n = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->stage != st || t->phase != phase || t->kind != SP_TASK_COMPUTE || t->mb < 0) continue;
    if (n > 0 && mb[n - 1] == t->mb && chunk[n - 1] == t->chunk) continue;
    g_assert_cmpuint(n, <, cap);
    mb[n] = t->mb;
    chunk[n] = t->chunk;
    n++;
  }
  return n;
}

/* Megatron-Core's micro-batch groups of the interleaved schedule (vppgroup=N): the table
 * that schedules.py's get_schedule_table documents for PP 2, N 3, M 5, VP 2 (micro-batches
 * 0 1 2 0 1 2 3 4 3 4, chunks 0 0 0 1 1 1 0 0 1 1), the backward on the same table with
 * the chunks reversed, and a step that still ends: 5 micro-batches, not divisible by pp. */
static void test_interleaved_groups(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 2, 128, 5, price_zero);
  sp_layout l = lay("pp=2,vpp=2,vppgroup=3", &c);
  g_assert_cmpint(l.vpp_group, ==, 3);
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  static const int32_t want_mb[] = { 0, 1, 2, 0, 1, 2, 3, 4, 3, 4 }, want_ch[] = { 0, 0, 0, 1, 1, 1, 0, 0, 1, 1 };
  int32_t mb[16], ch[16];
  for (int32_t st = 0; st < 2; st++) {
    g_assert_cmpuint(pass_order(g, st, SP_PHASE_FWD, mb, ch, 16), ==, 10);
    for (int i = 0; i < 10; i++) {
      g_assert_cmpint(mb[i], ==, want_mb[i]);
      g_assert_cmpint(ch[i], ==, want_ch[i]);
    }
    g_assert_cmpuint(pass_order(g, st, SP_PHASE_BWD, mb, ch, 16), ==, 10);
    for (int i = 0; i < 10; i++) {
      g_assert_cmpint(mb[i], ==, want_mb[i]);
      g_assert_cmpint(ch[i], ==, 1 - want_ch[i]);
    }
  }
  g_assert_cmpfloat(run(g), >, 0.0);
  /* N = pp is the plain interleaved schedule: the same graph as without the key */
  sp_step_ctx c8 = ctx_for(&m, 2, 128, 8, price_zero);
  sp_layout a = lay("pp=2,vpp=2", &c8), bl = lay("pp=2,vpp=2,vppgroup=2", &c8);
  g_assert_cmpint(bl.vpp_group, ==, 0);
  g_autoptr(sp_stepgraph) ga = build(&c8, &a, SP_SCHED_1F1B);
  g_autoptr(sp_stepgraph) gb = build(&c8, &bl, SP_SCHED_1F1B);
  assert_close(run(gb), run(ga));
}

/* Megatron-LM's layer with tensor and sequence parallelism: forward 2 all-gathers and
 * 2 reduce-scatters; backward 2 all-gathers of output gradients, 2 re-gathers of
 * inputs for the weight gradients, 2 reduce-scatters; full recomputation repeats the
 * forward's 4. Without sequence parallelism: 2 all-reduces each way. Per micro-batch
 * outside the layers (megatron/core/tensor_parallel/layers.py): with SP the
 * embedding's reduce-scatter and its backward all-gather, the output layer's
 * all-gather, its backward re-gather and reduce-scatter (5); without SP the
 * embedding's all-reduce and the output layer's input-gradient all-reduce (2). */
static void test_tp_collectives(void)
{
  sp_model m = model8();
  const struct { const char *spec; guint per_layer; guint head; } cases[] = {
    { "tp=4", 4 + 6, 2 + 3 },
    { "tp=4,ckpt=full", 4 + 6 + 4, 2 + 3 },
    { "tp=4,tpsp=0", 2 + 2, 1 + 1 },
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    sp_step_ctx c = ctx_for(&m, 4, 128, 4, price_1ms);
    sp_layout l = lay(cases[k].spec, &c);
    g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
    guint tp = 0;
    for (guint i = 0; i < g->tasks->len; i++) tp += g_array_index(g->tasks, sp_task, i).stream == SP_STREAM_TP;
    g_assert_cmpuint(tp, ==, 4 * (8 * cases[k].per_layer + cases[k].head));
  }
}

/* tpoverlap=1 on 4 ranks, tp=4, 8 layers of h 64, ffn 256, one micro-batch of 128 tokens,
 * on the fixture's 1 TFLOP/s GPU. Only the overlapped chunks cost anything: a ring-exchange
 * step sends one rank's shard (128 x 64 x 2 / 4 = 4096 bytes) in 4096 / BW, a pipelined
 * reduce-scatter chunk (16384 / 4 bytes over 4 ranks) moves 3/4 of its 4096 bytes in
 * 3072 / BW. The GEMMs (2 x tokens x in x out flops): QKV 2 x 128 x 64 x 48, output
 * projection 2 x 128 x 16 x 64, MLP up and down 2 x 128 x 64 x 64 each, the backward's data
 * gradients as their forward. Transformer Engine's overlaps wait, per layer:
 *  - behind a ring exchange of n = 4 ranks (QKV, MLP up; output projection and MLP down
 *    data gradients): (n - 1) max(0, shard - gemm / n);
 *  - before a reduce-scatter pipelined in 4 chunks (output projection, MLP down): the last
 *    chunk, plus 3 max(0, chunk - gemm / 4). */
static double tpo_bw;

static gboolean price_tpo(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)err;
  *s = 0.0;
  if (c->what == sp_tpo_what_shard) *s = 4096.0 / tpo_bw;
  else if (c->what == sp_tpo_what_rs) *s = 3072.0 / tpo_bw;
  return TRUE;
}

static double tpo_expected_exposure(double bw)
{
  double s = 4096.0 / bw, r = 3072.0 / bw, F = 1e12;
  double qkv = 2.0 * 128 * 64 * 48 / F, proj = 2.0 * 128 * 16 * 64 / F, mlp = 2.0 * 128 * 64 * 64 / F;
  double ag = 0, rs = 0;
  const double ag_gemms[] = { qkv, mlp, proj, mlp }, rs_gemms[] = { proj, mlp };
  for (int i = 0; i < 4; i++) ag += 3.0 * MAX(0.0, s - ag_gemms[i] / 4);
  for (int i = 0; i < 2; i++) rs += r + 3.0 * MAX(0.0, r - rs_gemms[i] / 4);
  return 8.0 * (ag + rs);
}

static void test_tp_overlap(void)
{
  sp_model m = model8();
  sp_step_ctx c0 = ctx_for(&m, 4, 128, 1, price_zero);
  sp_layout l = lay("tp=4,tpoverlap=1", &c0);
  g_assert_true(l.tp_overlap && l.tp_sp);
  g_autoptr(sp_stepgraph) g0 = build(&c0, &l, SP_SCHED_1F1B);
  double compute_only = run(g0);
  /* 1 TB/s: every chunk's transfer is shorter than its GEMM chunk (the shortest, the
   * output projection's quarter, 65.5 ns against 4.1 ns), so only the last reduce-scatter
   * chunk of each pipelined GEMM waits: 8 layers x 2 x 3.072 ns */
  /* 1 GB/s: the transfers dominate */
  const double bws[] = { 1e12, 1e9 };
  for (gsize k = 0; k < G_N_ELEMENTS(bws); k++) {
    tpo_bw = bws[k];
    sp_step_ctx c = ctx_for(&m, 4, 128, 1, price_tpo);
    g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
    double span = run(g), want = tpo_expected_exposure(bws[k]);
    if (k == 0) g_assert_cmpfloat(fabs(want - 8 * 2 * 3072.0 / 1e12), <, 1e-18);
    if (fabs((span - compute_only) - want) > 1e-12 * span)
      g_error("tpoverlap exposure at %g B/s: got %.12g, want %.12g", bws[k], span - compute_only, want);
    /* the closed form prices the same waits */
    sp_step_result r;
    GError *err = NULL;
    g_assert_true(sp_step_eval(&c, &l, &r, &err));
    g_assert_no_error(err);
    if (fabs(r.step_time - span) > 0.01 * span) g_error("closed form %.9g vs step graph %.9g", r.step_time, span);
  }
  /* the chunks: 3 ring-exchange steps per gathered GEMM, 4 reduce-scatter chunks per
   * pipelined one; the column-parallel backward's bulk gathers and reduce-scatters stay */
  guint shard = 0, rsc = 0;
  for (guint i = 0; i < g0->tasks->len; i++) {
    const sp_task *t = &g_array_index(g0->tasks, sp_task, i);
    if (t->comm < 0) continue;
    const char *w = g_array_index(g0->comms, sp_comm, t->comm).what;
    shard += w == sp_tpo_what_shard;
    rsc += w == sp_tpo_what_rs;
  }
  g_assert_cmpuint(shard, ==, 8 * 4 * 3);
  g_assert_cmpuint(rsc, ==, 8 * 2 * 4);
}

/* Data-parallel gradients reduce in buckets during the last micro-batch's backward:
 * 8 layers of 49,280 parameters with 100,000-parameter buckets are 4 buckets of two
 * layers (the embedding and output layer fall into the first and last). */
static void test_dp_buckets(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 2, 128, 4, price_1ms);
  c.hw.dp_bucket_params = 100000;
  sp_layout l = lay("dp=2", &c);
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  guint dp = 0;
  double last_bwd_start = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->stream == SP_STREAM_DP) {
      dp++;
      g_assert_cmpint(g_array_index(g->comms, sp_comm, t->comm).coll, ==, SP_COLL_ALL_REDUCE);
    }
  }
  g_assert_cmpuint(dp, ==, 4);
  /* with 1 ms per bucket, the reduction hides under the backward except the last bucket */
  g_autofree double *s = g_new(double, g->tasks->len), *e = g_new(double, g->tasks->len);
  double span;
  g_assert_true(sp_stepgraph_schedule(g, s, e, &span, NULL));
  double compute_end = 0, dp_end = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->stream == SP_STREAM_DP) dp_end = MAX(dp_end, e[i]);
    if (t->stream == SP_STREAM_COMPUTE && t->phase == SP_PHASE_BWD) {
      compute_end = MAX(compute_end, e[i]);
      if (t->mb == 3) last_bwd_start = last_bwd_start == 0 ? s[i] : MIN(last_bwd_start, s[i]);
    }
  }
  g_assert_cmpfloat(dp_end, >=, compute_end + 1e-3 - 1e-12);
  assert_close(span, dp_end); /* the optimizer takes no time on the ideal GPU */
}

/* dpsync=1 (Megatron-LM's --DDP-impl local: train_step all-reduces the gradient buffer
 * after forward_backward_func): one all-reduce of every gradient, after the last
 * backward, so the step is the contention-free one plus that collective (1 ms). */
static void test_dp_sync(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 2, 128, 4, price_1ms);
  c.hw.dp_bucket_params = 100000;
  sp_layout l = lay("dp=2,dpsync=1", &c);
  g_assert_true(l.dp_sync);
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  g_autofree double *s = g_new(double, g->tasks->len), *e = g_new(double, g->tasks->len);
  double span;
  g_assert_true(sp_stepgraph_schedule(g, s, e, &span, NULL));
  guint dp = 0;
  double compute_end = 0, dp_start = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->stream == SP_STREAM_DP) {
      dp++;
      dp_start = s[i];
      /* the whole model's gradients in bf16: 8 layers of 4 x 64^2 + 2 x 64 x 256 + 2 x 64 =
       * 49280 and the input and output tables of 1000 x 64 (the final norm's 64 weights
       * are not bucketed) */
      g_assert_cmpuint(g_array_index(g->comms, sp_comm, t->comm).bytes, ==, 2 * (8 * 49280 + 2 * 64000));
    }
    if (t->stream == SP_STREAM_COMPUTE && t->phase == SP_PHASE_BWD) compute_end = MAX(compute_end, e[i]);
  }
  g_assert_cmpuint(dp, ==, 1);
  g_assert_cmpfloat(dp_start, >=, compute_end - 1e-12);
  assert_close(span, compute_end + 1e-3);
  /* the closed form agrees: the whole reduction is exposed */
  sp_step_result r;
  GError *err = NULL;
  g_assert_true(sp_step_eval(&c, &l, &r, &err));
  assert_close(r.dp_tail, 1e-3);
}

/* Tied embeddings on pp=2, dp=2 (4 GPUs, ranks 0-1 on stage 0, 2-3 on stage 1):
 * Megatron-LM's _allreduce_word_embedding_grads all-reduces the table's gradient,
 * 1000 x 64 values, between rank r and r + 2 once each stage's data-parallel reduction
 * is over; with dpfp32=1 in 4 bytes (256,000 bytes), as the stages' gradients: stage 0
 * 4 x 49,280 + 64,000 parameters, stage 1 the same (its copy of the table). The
 * optimizer of both stages waits for it: with 1 ms per collective and free compute the
 * step ends at 1 ms (the stage's gradient all-reduce) + 1 ms. One stage (pp=1) holds
 * one table: no such all-reduce, and the gradients of 8 layers and one table. */
static void test_tied_embeddings(void)
{
  sp_model m = model8();
  m.tied_embeddings = TRUE;
  sp_step_ctx c = ctx_for(&m, 4, 128, 4, price_1ms);
  sp_layout l = lay("pp=2,dp=2,dpsync=1,dpfp32=1", &c);
  g_assert_true(l.dp_fp32);
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  for (guint i = 0; i < g->tasks->len; i++) {
    sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->kind == SP_TASK_COMPUTE) t->seconds = 0; /* free compute */
  }
  g_autofree double *s = g_new(double, g->tasks->len), *e = g_new(double, g->tasks->len);
  double span;
  g_assert_true(sp_stepgraph_schedule(g, s, e, &span, NULL));
  guint ties = 0, grads = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->kind != SP_TASK_COLL) continue;
    const sp_comm *cm = &g_array_index(g->comms, sp_comm, t->comm);
    if (cm->kind == SP_COMM_PP) {
      ties++;
      g_assert_cmpint(cm->coll, ==, SP_COLL_ALL_REDUCE);
      g_assert_cmpint(cm->n, ==, 2);
      g_assert_cmpint(cm->stride, ==, 2);
      g_assert_cmpuint(cm->bytes, ==, 4 * 64000);
    } else if (cm->kind == SP_COMM_DP) {
      grads++;
      g_assert_cmpuint(cm->bytes, ==, 4 * (4 * 49280 + 64000));
    }
  }
  g_assert_cmpuint(ties, ==, 2);
  g_assert_cmpuint(grads, ==, 2);
  /* the sends (1 ms each) order the stages; the last task is an optimizer that waited
   * for the stage's gradient all-reduce and then the tie all-reduce */
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->phase == SP_PHASE_STEP && t->kind == SP_TASK_COMPUTE) {
      double bwd_end = 0;
      for (guint j = 0; j < g->tasks->len; j++) {
        const sp_task *u = &g_array_index(g->tasks, sp_task, j);
        if (u->stage == t->stage && u->phase == SP_PHASE_BWD && u->kind == SP_TASK_COMPUTE) bwd_end = MAX(bwd_end, e[j]);
      }
      assert_close(s[i], bwd_end + 2e-3);
    }
  }
  /* one stage: one table, no tie all-reduce */
  sp_step_ctx c1 = ctx_for(&m, 2, 128, 4, price_1ms);
  sp_layout l1 = lay("dp=2,dpsync=1", &c1);
  g_autoptr(sp_stepgraph) g1 = build(&c1, &l1, SP_SCHED_1F1B);
  guint n1 = 0;
  for (guint i = 0; i < g1->tasks->len; i++) {
    const sp_task *t = &g_array_index(g1->tasks, sp_task, i);
    if (t->kind != SP_TASK_COLL) continue;
    const sp_comm *cm = &g_array_index(g1->comms, sp_comm, t->comm);
    g_assert_cmpint(cm->kind, ==, SP_COMM_DP);
    g_assert_cmpuint(cm->bytes, ==, 2 * (8 * 49280 + 64000));
    n1++;
  }
  g_assert_cmpuint(n1, ==, 1);
}

/* ckpt=op in the graph: each layer's backward starts with the recomputation the kernel
 * model prices, in the recompute phase, and nothing else is recomputed. */
static void test_op_recompute(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 1, 128, 2, price_zero);
  sp_layout l = lay("dp=1,ckpt=op", &c);
  sp_layer_kernels k;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  double rec = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->phase == SP_PHASE_RECOMPUTE) rec += t->seconds;
  }
  /* 2 micro-batches x the model's layers */
  assert_close(rec, 2.0 * (double)m.layers * k.op_recompute);
  g_assert_cmpfloat(k.op_recompute, >, 0);
}

/* Llama 3 405B's split: 126 layers on 16 stages of 8 interleaved chunks, the first and
 * last stage one layer short, so that the first chunk holds the embedding alone and the
 * last chunk the output layer alone (Llama 3 report, sec. 3.3.2). */
static void test_uneven_stages(void)
{
  sp_model m = { .name = (char *)"l126", .layers = 126, .hidden = 64, .heads = 4, .kv_heads = 4, .ffn = 256,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_GELU };
  sp_step_ctx c = ctx_for(&m, 16, 128, 16, price_zero);
  sp_layout l = lay("pp=16,vpp=8,ppfirst=7,pplast=7", &c);
  g_assert_cmpint(sp_layout_layers_of_stage(&l, &m, 0), ==, 7);
  g_assert_cmpint(sp_layout_layers_of_stage(&l, &m, 7), ==, 8);
  g_assert_cmpint(sp_layout_chunk_layers(&l, &m, 0, 0), ==, 0);
  g_assert_cmpint(sp_layout_chunk_layers(&l, &m, 0, 1), ==, 1);
  g_assert_cmpint(sp_layout_chunk_layers(&l, &m, 15, 7), ==, 0);
  g_assert_cmpint(sp_layout_chunk_layers(&l, &m, 15, 6), ==, 1);
  int64_t total = 0;
  for (int32_t s = 0; s < 16; s++)
    for (int32_t k = 0; k < 8; k++) total += sp_layout_chunk_layers(&l, &m, s, k);
  g_assert_cmpint(total, ==, 126);
  g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
  g_assert_cmpfloat(run(g), >, 0);
  /* every layer runs forward once per micro-batch */
  g_autofree int *seen = g_new0(int, 126);
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->kind == SP_TASK_COMPUTE && t->phase == SP_PHASE_FWD && t->layer >= 0 && strcmp(t->what, "norm") == 0)
      seen[t->layer]++;
  }
  for (int i = 0; i < 126; i++) g_assert_cmpint(seen[i], ==, 16);

  /* splits that cannot be formed */
  const char *bad[] = { "pp=16,ppfirst=7,pplast=8", "pp=16,vpp=3,ppfirst=6,pplast=6", "pp=1,ppfirst=3",
                        "pp=2,ppfirst=100,pplast=30" };
  for (gsize k = 0; k < G_N_ELEMENTS(bad); k++) {
    sp_layout x;
    GError *err = NULL;
    g_assert_true(sp_layout_parse(bad[k], &x, &err));
    sp_layout_ctx lc = { .model = &m, .world = 16 / (k == 2 ? 16 : k == 3 ? 8 : 1), .gpus_per_node = 8, .seq = 128,
                         .global_batch = 16, .mb = 1 };
    g_assert_cmpint(sp_layout_check(&x, &lc, &err), ==, SP_SKIP_LAYERS);
    g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
    g_clear_error(&err);
  }
}

/* The breakdown adds up: compute + exposed communication + idle = step. */
static void test_breakdown_sums(void)
{
  sp_model m = model8();
  const char *specs[] = { "tp=2,pp=2,dp=2", "tp=2,pp=2,vpp=2,dp=2,ckpt=full", "sp=2,cp=2,dp=2", "wp=4,dp=8,zero=1", "tp=2,dp=4,zero=3,ckpt=full" };
  for (gsize k = 0; k < G_N_ELEMENTS(specs); k++) {
    sp_step_ctx c = ctx_for(&m, 8, 128, 8, price_1ms);
    sp_layout l = lay(specs[k], &c);
    g_autoptr(sp_stepgraph) g = build(&c, &l, SP_SCHED_1F1B);
    g_autofree double *s = g_new(double, g->tasks->len), *e = g_new(double, g->tasks->len);
    double span;
    g_assert_true(sp_stepgraph_schedule(g, s, e, &span, NULL));
    sp_stepgraph_breakdown bd;
    sp_stepgraph_breakdown_of(g, s, e, &bd);
    assert_close(bd.step_time, span);
    double sum = bd.compute + bd.idle;
    for (int i = 0; i < SP_COMM_KIND_COUNT; i++) sum += bd.exposed[i];
    assert_close(sum, span);
  }
}

/* A graph whose stream order contradicts its dependencies never starts: refused. */
static void test_cycle_refused(void)
{
  sp_stepgraph g = { .stages = 1, .ranks_per_stage = 1, .microbatches = 1 };
  g.tasks = g_array_new(FALSE, TRUE, sizeof(sp_task));
  g.comms = g_array_new(FALSE, TRUE, sizeof(sp_comm));
  sp_task a = { .kind = SP_TASK_COMPUTE, .stream = SP_STREAM_COMPUTE, .comm = -1, .what = "a", .seconds = 1 };
  sp_task b = a;
  b.what = "b";
  b.ndeps = 1;
  b.deps[0] = 2; /* waits for c, which comes after it on the same stream */
  sp_task cc = a;
  cc.what = "c";
  g_array_append_val(g.tasks, a);
  g_array_append_val(g.tasks, b);
  g_array_append_val(g.tasks, cc);
  GError *err = NULL;
  g_assert_false(sp_stepgraph_schedule(&g, NULL, NULL, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_clear_error(&err);
  g_array_unref(g.tasks);
  g_array_unref(g.comms);
}

/* A step of 20,000 micro-batches of 8 layers needs about 6.4 M tasks: refused (the
 * what-if falls back on the closed form), not built. */
static void test_too_large(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 1, 128, 20000, price_zero);
  sp_layout l = lay("dp=1", &c);
  GError *err = NULL;
  g_assert_null(sp_stepgraph_build(&c, &l, SP_SCHED_1F1B, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  c.global_batch = 10000; /* 3.2 M: built */
  sp_layout l2 = lay("dp=1", &c);
  g_autoptr(sp_stepgraph) g = sp_stepgraph_build(&c, &l2, SP_SCHED_1F1B, &err);
  g_assert_no_error(err);
  g_assert_nonnull(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/stepgraph/pipeline-makespan", test_pipeline_makespan);
  g_test_add_func("/stepgraph/interleaved-makespan", test_interleaved_makespan);
  g_test_add_func("/stepgraph/interleaved-groups", test_interleaved_groups);
  g_test_add_func("/stepgraph/tp-collectives", test_tp_collectives);
  g_test_add_func("/stepgraph/tp-overlap", test_tp_overlap);
  g_test_add_func("/stepgraph/dp-buckets", test_dp_buckets);
  g_test_add_func("/stepgraph/dp-sync", test_dp_sync);
  g_test_add_func("/stepgraph/tied-embeddings", test_tied_embeddings);
  g_test_add_func("/stepgraph/op-recompute", test_op_recompute);
  g_test_add_func("/stepgraph/uneven-stages", test_uneven_stages);
  g_test_add_func("/stepgraph/breakdown-sums", test_breakdown_sums);
  g_test_add_func("/stepgraph/cycle-refused", test_cycle_refused);
  g_test_add_func("/stepgraph/too-large", test_too_large);
  return g_test_run();
}
