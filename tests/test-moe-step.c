/* Mixture-of-experts layouts and step model: ep/etp checks, the sweep's ep degrees,
 * routing imbalance, expert memory and the MoE collectives, against hand-derived values. */
#include "config.h"
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/step.h"
#include "spsim/stepgraph.h"
#include "step-fixture.h"

static sp_model *builtin(const char *name)
{
  const char *src = g_getenv("SPSIM_SRCDIR");
  g_autofree char *dir = g_build_filename(src ? src : ".", "models", NULL);
  const char *dirs[] = { dir, NULL };
  GError *err = NULL;
  sp_model *m = sp_model_find(name, dirs, &err);
  g_assert_no_error(err);
  return m;
}

static gboolean price_1ms(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)c; (void)err;
  *s = 1e-3;
  return TRUE;
}

/* check @p spec for @p m on @p world GPUs (8 per node, seq 4096, batch 64); the error's message */
static sp_skip check(const sp_model *m, int32_t world, const char *spec, char **msg)
{
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse(spec, &l, &err));
  sp_layout_ctx lc = { .model = m, .world = world, .gpus_per_node = 8, .seq = 4096, .global_batch = 64, .mb = 1 };
  sp_skip r = sp_layout_check(&l, &lc, &err);
  *msg = err ? g_strdup(err->message) : NULL;
  g_clear_error(&err);
  return r;
}

static void expect_refused(const sp_model *m, int32_t world, const char *spec, const char *needle)
{
  g_autofree char *msg = NULL;
  g_assert_cmpint(check(m, world, spec, &msg), !=, SP_SKIP_NONE);
  if (msg == NULL || strstr(msg, needle) == NULL) g_error("'%s': message '%s' lacks '%s'", spec, msg, needle);
}

static void test_layout_ep(void)
{
  g_autoptr(GError) err = NULL;
  sp_layout l;
  g_assert_true(sp_layout_parse("tp=2,ep=4,etp=1", &l, &err));
  g_assert_cmpint(l.ep, ==, 4);
  g_assert_cmpint(l.etp, ==, 1);
  g_autofree char *str = sp_layout_to_string(&l);
  g_assert_nonnull(g_strrstr(str, ",ep=4,etp=1"));
  sp_model *mix = builtin("mixtral-8x7b"), *dense = builtin("llama3-8b");
  g_autofree char *msg = NULL;
  g_assert_cmpint(check(mix, 64, "tp=1,ep=8,dp=64", &msg), ==, SP_SKIP_NONE);
  expect_refused(mix, 64, "tp=1,ep=16,dp=64", "ep=16 does not divide the 8 experts");
  /* 16 GPUs as tp 8 x dp 2: ep=4 cannot fold inside the 2 replicas */
  expect_refused(mix, 16, "tp=8,ep=4,dp=2", "ep=4 does not divide sp x cp x dp = 1 x 1 x 2 = 2");
  expect_refused(mix, 16, "tp=2,tpsp=0,ep=2", "needs Megatron sequence parallelism (tpsp=1)");
  expect_refused(mix, 64, "tp=1,ep=8,zero=3", "ZeRO-3 is not modelled for MoE models");
  expect_refused(mix, 64, "tp=2,ep=8,etp=4", "etp=4");
  expect_refused(dense, 64, "tp=1,ep=2", "need an MoE model");
  /* etp=1 folds ep over a stage's tp x dp ranks (MoE parallel folding): tp 2 x dp 4 = 8 GPUs
   * hold ep 8 with etp 1, one expert replica; with etp = tp the ep groups stay inside dp */
  g_clear_pointer(&msg, g_free);
  g_assert_cmpint(check(mix, 8, "tp=2,ep=8,etp=1,dp=4", &msg), ==, SP_SKIP_NONE);
  expect_refused(mix, 8, "tp=2,ep=8,dp=4", "ep=8 does not divide sp x cp x dp = 1 x 1 x 4 = 4");
  expect_refused(mix, 4, "tp=2,ep=8,etp=1,dp=2", "ep=8 does not divide tp x sp x cp x dp = 4");
  {
    sp_layout f;
    g_assert_true(sp_layout_parse("tp=2,ep=8,etp=1,dp=4", &f, NULL));
    g_assert_cmpint(sp_layout_expert_replicas(&f), ==, 1);
  }
  /* cp counts: tp 8 x cp 2 x dp 4 on 64 GPUs folds ep=8 into cp x dp */
  g_clear_pointer(&msg, g_free);
  g_assert_cmpint(check(mix, 64, "tp=8,cp=2,ep=8,dp=4", &msg), ==, SP_SKIP_NONE);
  /* expert replicas (the expert-dp group): tp x sp x cp x dp / (etp x ep) = 8 x 8 / (8 x 8) */
  sp_layout x;
  g_assert_true(sp_layout_parse("tp=8,cp=2,ep=8,dp=4", &x, NULL));
  g_assert_cmpint(sp_layout_expert_replicas(&x), ==, 1);
  g_assert_true(sp_layout_parse("tp=8,ep=2,etp=1,dp=8", &x, NULL));
  g_assert_cmpint(sp_layout_expert_replicas(&x), ==, 32);
  sp_model_free(mix);
  sp_model_free(dense);
}

/* The sweep tries every ep dividing both the experts and sp x cp x dp (MoE only). */
static void test_sweep_ep(void)
{
  sp_model *mix = builtin("mixtral-8x7b"), *dense = builtin("llama3-8b");
  sp_layout_ctx lc = { .model = mix, .world = 16, .gpus_per_node = 8, .seq = 4096, .global_batch = 64, .mb = 1 };
  sp_sweep_opts so;
  sp_sweep_opts_init(&so, &lc);
  sp_sweep *s = sp_sweep_run(&lc, &so);
  gboolean seen[17] = { FALSE };
  guint lean = 0, plain_sel = 0;
  for (guint i = 0; i < s->layouts->len; i++) {
    const sp_layout *l = &g_array_index(s->layouts, sp_layout, i);
    int32_t ep = sp_layout_ep(l);
    /* a fourth recomputation mode: selective by layernorm and moe_act (no latent attention here) */
    if (l->rmods != 0) {
      g_assert_cmpint(l->ckpt, ==, SP_CKPT_SELECTIVE);
      g_assert_cmpuint(l->rmods, ==, SP_RMOD_LAYERNORM | SP_RMOD_MOE_ACT);
      lean++;
    } else if (l->ckpt == SP_CKPT_SELECTIVE) {
      plain_sel++;
    }
    g_assert_cmpint(8 % ep, ==, 0);
    g_assert_cmpint(sp_layout_replicas(l) % ep, ==, 0);
    g_assert_cmpint(l->zero, <=, 2);
    g_assert_cmpint(l->wp, ==, 1);
    if (l->tp > 1) g_assert_true(l->tp_sp);
    seen[ep] = TRUE;
  }
  /* tp=1, dp=16 allows ep = 1, 2, 4, 8; 16 does not divide the 8 experts */
  g_assert_true(seen[1] && seen[2] && seen[4] && seen[8]);
  g_assert_false(seen[16]);
  /* every candidate is tried in each mode, and the modes' validity does not differ */
  g_assert_cmpuint(lean, >, 0);
  g_assert_cmpuint(lean, ==, plain_sel);
  sp_sweep_free(s);
  lc.model = dense;
  s = sp_sweep_run(&lc, &so);
  for (guint i = 0; i < s->layouts->len; i++) {
    g_assert_cmpint(sp_layout_ep(&g_array_index(s->layouts, sp_layout, i)), ==, 1);
    g_assert_cmpuint(g_array_index(s->layouts, sp_layout, i).rmods, ==, 0); /* dense: three modes only */
  }
  sp_sweep_free(s);
  sp_model_free(mix);
  sp_model_free(dense);
}

static void test_routing(void)
{
  sp_model *mix = builtin("mixtral-8x7b");
  sp_step_ctx c = fixture_ctx(mix, 64, 4096, 64, price_1ms);
  sp_layout l = fixture_layout("tp=1,ep=2,dp=64", &c);
  g_assert_cmpfloat(sp_step_moe_imbalance(&c, &l), ==, 1.0); /* uniform */
  GError *err = NULL;
  double *sh = NULL;
  g_assert_true(sp_moe_routing_parse("zipf:1", 8, &sh, &err));
  c.expert_share = sh;
  c.n_expert_share = 8;
  /* shares 1/i, i = 1..8: H8 = 761/280; rank 0 of ep=2 holds experts 1..4: 25/12;
   * imbalance 2 x (25/12) / (761/280) = 1.53307... */
  g_assert_cmpfloat(fabs(sp_step_moe_imbalance(&c, &l) - 2.0 * (25.0 / 12.0) / (761.0 / 280.0)), <, 1e-12);
  sp_layout l8 = fixture_layout("tp=1,ep=8,dp=64", &c);
  g_assert_cmpfloat(fabs(sp_step_moe_imbalance(&c, &l8) - 8.0 / (761.0 / 280.0)), <, 1e-12);
  /* a capacity factor drops what exceeds it */
  mix->capacity_factor = 1.25;
  g_assert_cmpfloat(sp_step_moe_imbalance(&c, &l8), ==, 1.25);
  mix->capacity_factor = 0;
  g_free(sh);
  /* a file of shares */
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "spsim-test-routing.json", NULL);
  g_assert_true(g_file_set_contents(path, "[4, 0, 0, 0, 1, 1, 1, 1]", -1, NULL));
  g_assert_true(sp_moe_routing_parse(path, 8, &sh, &err));
  c.expert_share = sh;
  g_assert_cmpfloat(fabs(sp_step_moe_imbalance(&c, &l) - 2.0 * 4.0 / 8.0), <, 1e-12); /* both halves hold 4 of 8 */
  g_assert_cmpfloat(fabs(sp_step_moe_imbalance(&c, &l8) - 8.0 * 4.0 / 8.0), <, 1e-12);
  g_free(sh);
  /* shares of any scale, up to the largest double: read as the same proportions (their
   * sum overflowed to infinity, which left every share 0), and given back summing to 1 */
  g_assert_true(g_file_set_contents(path, "[1.6e308, 0, 0, 0, 0.4e308, 0.4e308, 0.4e308, 0.4e308]", -1, NULL));
  g_assert_true(sp_moe_routing_parse(path, 8, &sh, &err));
  c.expert_share = sh;
  g_assert_cmpfloat(fabs(sp_step_moe_imbalance(&c, &l8) - 8.0 * 0.5), <, 1e-12);
  g_assert_cmpfloat(fabs(sh[0] - 0.5), <, 1e-15);
  g_assert_cmpfloat(fabs(sh[4] - 0.125), <, 1e-15);
  g_free(sh);
  c.expert_share = NULL;
  /* refused */
  g_assert_false(sp_moe_routing_parse(path, 4, &sh, &err));
  g_assert_nonnull(strstr(err->message, "JSON list of 4 token shares"));
  g_clear_error(&err);
  g_assert_true(g_file_set_contents(path, "[0, 0]", -1, NULL));
  g_assert_false(sp_moe_routing_parse(path, 2, &sh, &err));
  g_assert_nonnull(strstr(err->message, "every share is 0"));
  g_clear_error(&err);
  g_assert_false(sp_moe_routing_parse("zipf:x", 8, &sh, &err));
  g_assert_nonnull(strstr(err->message, "zipf:S"));
  g_clear_error(&err);
  g_assert_false(sp_moe_routing_parse("zipf:1", 0, &sh, &err));
  g_assert_nonnull(strstr(err->message, "needs an MoE model"));
  g_clear_error(&err);
  g_assert_true(sp_moe_routing_parse("uniform", 8, &sh, &err));
  g_assert_null(sh);
  /* a routing file's text, as the file is read: the shares scaled to sum 1 */
  g_assert_true(sp_moe_routing_shares_parse("[3, 1]", -1, "inline", 2, &sh, &err));
  g_assert_cmpfloat(sh[0], ==, 0.75);
  g_assert_cmpfloat(sh[1], ==, 0.25);
  g_free(sh);
  g_assert_false(sp_moe_routing_shares_parse("[3, 1", -1, "inline", 2, &sh, &err));
  g_assert_nonnull(strstr(err->message, "--routing inline: not JSON"));
  g_clear_error(&err);
  g_unlink(path);
  sp_model_free(mix);
}

/* Mixtral 8x7B, tp=1, ep=8, dp=64, ZeRO-1: each rank holds 1 of the 8 experts of every layer. */
static void test_memory_and_comms(void)
{
  sp_model *mix = builtin("mixtral-8x7b");
  sp_step_ctx c = fixture_ctx(mix, 64, 4096, 64, price_1ms);
  sp_layout l = fixture_layout("tp=1,ep=8,dp=64,zero=1,ckpt=full", &c);
  sp_step_mem mem;
  sp_step_memory(&c, &l, &mem);
  /* non-expert: 32 x (41943040 attention + 32768 router + 8192 norms) + 2 x 32000 x 4096 + 4096 =
   * 1605636096; experts: 32 x 176160768 = 5637144576; bf16 weights and gradients */
  double dense = 1605636096.0, expert = 5637144576.0;
  g_assert_cmpfloat(fabs(mem.weights - 2.0 * (dense + expert)), <, 1.0);
  g_assert_cmpfloat(fabs(mem.grads - 2.0 * (dense + expert)), <, 1.0);
  /* ZeRO-1: 12 bytes, dense over the 64 replicas, experts over the 64 / 8 = 8 expert replicas */
  g_assert_cmpfloat(fabs(mem.optim - 12.0 * (dense / 64.0 + expert / 8.0)), <, 1.0);
  /* dispatch/combine buffers: 2 x 4096 tokens x top-2 x 4096 x 2 bytes */
  g_assert_cmpfloat(fabs(mem.buffers - 2.0 * 4096 * 2 * 4096 * 2), <, 1.0);

  g_autoptr(GArray) comms = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  sp_step_comms(&c, &l, comms);
  int a2a = 0, edp = 0;
  for (guint i = 0; i < comms->len; i++) {
    const sp_comm *cm = &g_array_index(comms, sp_comm, i);
    if (cm->what == sp_moe_what_dispatch) {
      /* 4096 tokens x 2 copies x 4096 x 2 bytes on the 8 consecutive ranks; dispatch and combine
       * forward, and again backward with full recomputation's forward: 2 + 4 per layer */
      g_assert_cmpint(cm->coll, ==, SP_COLL_ALL_TO_ALL);
      g_assert_cmpint(cm->n, ==, 8);
      g_assert_cmpint(cm->stride, ==, 1);
      g_assert_cmpuint(cm->bytes, ==, 4096ull * 2 * 4096 * 2);
      g_assert_cmpfloat(cm->times, ==, cm->when == SP_PER_LAYER_FWD ? 2.0 : 4.0);
      a2a++;
    }
    if (cm->what == sp_moe_what_edp_grad) {
      /* expert gradients: reduce-scatter over the 8 expert replicas, stride etp x ep = 8 */
      g_assert_cmpint(cm->coll, ==, SP_COLL_REDUCE_SCATTER);
      g_assert_cmpint(cm->n, ==, 8);
      g_assert_cmpint(cm->stride, ==, 8);
      g_assert_cmpuint(cm->bytes, ==, (guint64)(2.0 * expert));
      edp++;
    }
  }
  g_assert_cmpint(a2a, ==, 2);
  g_assert_cmpint(edp, ==, 1);

  /* ep spanning nodes: ep=8 with etp=tp=2 has stride 2, 16 ranks: leaves the 8-GPU node */
  sp_layout l2 = fixture_layout("tp=2,ep=8,dp=32,zero=1", &c);
  g_array_set_size(comms, 0);
  sp_step_comms(&c, &l2, comms);
  gboolean found = FALSE;
  for (guint i = 0; i < comms->len; i++) {
    const sp_comm *cm = &g_array_index(comms, sp_comm, i);
    if (cm->what == sp_moe_what_dispatch) {
      g_assert_cmpint(cm->stride, ==, 2);
      g_assert_cmpuint(cm->bytes, ==, 2048ull * 2 * 4096 * 2); /* each TP rank routes half the tokens */
      found = TRUE;
    }
  }
  g_assert_true(found);
  sp_model_free(mix);
}

/* A skewed routing slows the step: the busiest rank computes more expert tokens. */
static void test_step_imbalance(void)
{
  sp_model *mix = builtin("mixtral-8x7b");
  sp_step_ctx c = fixture_ctx(mix, 64, 4096, 64, price_1ms);
  sp_layout l = fixture_layout("tp=1,ep=8,dp=64,zero=1,ckpt=full", &c);
  sp_moe_kernels k1, k2;
  g_assert_true(sp_step_moe_kernels(&c, &l, &k1, NULL));
  double sh[8] = { 8, 1, 1, 1, 1, 1, 1, 2 };
  c.expert_share = sh;
  c.n_expert_share = 8;
  g_assert_true(sp_step_moe_kernels(&c, &l, &k2, NULL));
  /* the busiest rank gets 8 / 16 of the copies, 4 x the mean */
  g_assert_cmpfloat(k1.assigned, ==, 4096.0 * 2);
  g_assert_cmpfloat(k2.assigned, ==, 4.0 * 4096.0 * 2);
  g_assert_cmpfloat(k2.experts[0], >, 3.0 * k1.experts[0]);
  sp_step_result r1, r2;
  c.expert_share = NULL;
  g_assert_true(sp_step_eval(&c, &l, &r1, NULL));
  c.expert_share = sh;
  g_assert_true(sp_step_eval(&c, &l, &r2, NULL));
  g_assert_cmpfloat(r2.step_time, >, r1.step_time);
  sp_model_free(mix);
}

/* The experts' activation runs over their rows, not the dense MLP's width. On a GPU of
 * 1 TB/s streamed HBM, one micro-batch of 4096 tokens (tp 1): Mixtral 8x7B routes each
 * token to 2 experts of 14336 columns where its dense width is 14336, so the fused SwiGLU
 * (3 bf16 values per column, written and read back) moves 2 x 2 x 3 x 4096 x 14336 bytes
 * more per layer forward, 0.704643 ms; with the busiest rank taking 4 x the mean of the
 * copies, 4 x 2 - 1 = 7 dense widths more. Qwen3-30B-A3B's dense width is its 8 x 768
 * routed columns: nothing more. The backward moves twice the forward's. */
static void test_expert_activation(void)
{
  sp_model *mix = builtin("mixtral-8x7b"), *qwen = builtin("qwen3-30b-a3b");
  sp_step_ctx c = fixture_ctx(mix, 64, 4096, 64, price_1ms);
  c.hw.gpu.hbm_bw = 1e12;
  sp_layout l = fixture_layout("tp=1,ep=8,dp=64,zero=1,ckpt=none", &c);
  sp_moe_kernels k;
  g_assert_true(sp_step_moe_kernels(&c, &l, &k, NULL));
  g_assert_cmpfloat(fabs(k.act - 2.0 * 2 * 3 * 4096 * 14336 / 1e12), <, 1e-12);
  double f = sp_moe_kernels_fwd(&k), b = sp_moe_kernels_bwd(&k);
  k.act = 0;
  g_assert_cmpfloat(fabs(f - sp_moe_kernels_fwd(&k) - 2.0 * 2 * 3 * 4096 * 14336 / 1e12), <, 1e-12);
  g_assert_cmpfloat(fabs(b - sp_moe_kernels_bwd(&k) - 2.0 * 2.0 * 2 * 3 * 4096 * 14336 / 1e12), <, 1e-12);
  double sh[8] = { 8, 1, 1, 1, 1, 1, 1, 2 };
  c.expert_share = sh;
  c.n_expert_share = 8;
  g_assert_true(sp_step_moe_kernels(&c, &l, &k, NULL));
  g_assert_cmpfloat(fabs(k.act - 7.0 * 2 * 2 * 3 * 4096 * 14336 / 1e12), <, 1e-12);
  sp_step_ctx q = fixture_ctx(qwen, 64, 4096, 64, price_1ms);
  q.hw.gpu.hbm_bw = 1e12;
  sp_layout lq = fixture_layout("tp=1,ep=8,dp=64,zero=1,ckpt=none", &q);
  g_assert_true(sp_step_moe_kernels(&q, &lq, &k, NULL));
  g_assert_cmpfloat(k.act, ==, 0.0);
  sp_model_free(mix);
  sp_model_free(qwen);
}

/* What an MoE layer keeps beyond a dense one, per micro-batch (Mixtral 8x7B, tp 1, ep 8,
 * 4,096 tokens, top 2: 8,192 expert copies, h 4,096, expert ffn 14,336, SwiGLU): FP8
 * linears keep each copy's input and activation output at 1 byte instead of 2, and the
 * dense MLP it replaces likewise (its input h and its second GEMM's input ffn), so the
 * excess falls by 8,192 (h + ffn) - 4,096 (h + ffn); recompute=moe_act drops the copies'
 * activation outputs, 8,192 x 2 x 14,336 bytes. */
static void test_expert_memory(void)
{
  sp_model *mix = builtin("mixtral-8x7b");
  sp_step_ctx c = fixture_ctx(mix, 64, 4096, 64, price_1ms);
  sp_layout l = fixture_layout("tp=1,ep=8,dp=64,zero=1,ckpt=none", &c);
  double bf = sp_step_moe_act_layer_extra(&c, &l);
  c.hw.fp8 = SP_FP8_TENSORWISE;
  g_assert_cmpfloat(bf - sp_step_moe_act_layer_extra(&c, &l), ==, (8192.0 - 4096.0) * (4096 + 14336));
  c.hw.fp8 = SP_FP8_NONE;
  sp_layout a = fixture_layout("tp=1,ep=8,dp=64,zero=1,ckpt=selective,recompute=moe_act", &c);
  g_assert_cmpfloat(bf - sp_step_moe_act_layer_extra(&c, &a), ==, 8192.0 * 2 * 14336);
  sp_model_free(mix);
}

/* The expert all-to-alls priced at *user seconds, every other collective at 0. */
static gboolean price_a2a(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)err;
  *s = c->what == sp_moe_what_dispatch ? *(const double *)user : 0.0;
  return TRUE;
}

/* Step time of @p spec on the step graph run without contention, and the closed form's. */
static void a2a_step(sp_step_ctx *c, const char *spec, double *graph, double *closed)
{
  sp_layout l = fixture_layout(spec, c);
  GError *err = NULL;
  sp_stepgraph *g = sp_stepgraph_build(c, &l, SP_SCHED_1F1B, &err);
  g_assert_no_error(err);
  g_assert_true(sp_stepgraph_price(g, c, &err));
  g_assert_true(sp_stepgraph_schedule(g, NULL, NULL, graph, &err));
  g_assert_no_error(err);
  sp_stepgraph_free(g);
  sp_step_result r;
  g_assert_true(sp_step_eval(c, &l, &r, &err));
  g_assert_no_error(err);
  *closed = r.step_time;
}

/* a2aoverlap=1 (Megatron-Core's combined 1F1B without pipelining): micro-batch i + 1's
 * forward runs paired with micro-batch i's backward, layer by layer, and each of a layer
 * pair's four all-to-alls (a seconds) beside one block of the other pass's kernels:
 * the backward combine beside the forward attention and router (C1), the forward dispatch
 * beside the experts' backward (C2), the backward dispatch beside the experts' forward
 * (C3), the forward combine beside the router and attention backward (C4). On the ideal
 * GPU (element-wise kernels and permutations take no time; Mixtral has no shared experts)
 * the layer's kernels are C1 + C2 + C3 + C4 exactly. Of m micro-batches, m - 1 pairs:
 *  - a below every block: each pair hides 4 a per layer, so the step drops by
 *    (m - 1) L 4 a;
 *  - a above every block: a pair's layer takes 4 a (the all-to-alls back to back, the
 *    kernels beside them) instead of 4 a + C1 + C2 + C3 + C4, so the step drops by
 *    (m - 1) L (C1 + C2 + C3 + C4).
 * The closed form hides min(a, C_i) per all-to-all and paired micro-batch: the same. */
static void test_a2a_overlap(void)
{
  sp_model *mix = builtin("mixtral-8x7b");
  double a = 0;
  sp_step_ctx c = fixture_ctx(mix, 8, 512, 32, price_a2a);
  c.price_user = &a;
  c.hw.comm_slowdown = 0;
  sp_layout l = fixture_layout("tp=1,ep=8,dp=8,zero=1,ckpt=none", &c);
  sp_layer_kernels k;
  sp_moe_kernels mk;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, NULL));
  g_assert_true(sp_step_moe_kernels(&c, &l, &mk, NULL));
  double C1 = k.qkv[0] + k.proj[0] + k.attn_fwd + mk.router[0], C2 = mk.experts[1] + mk.experts[2], C3 = mk.experts[0];
  double C4 = k.qkv[1] + k.qkv[2] + k.proj[1] + k.proj[2] + k.attn_bwd + mk.router[1] + mk.router[2];
  double cmin = MIN(MIN(C1, C2), MIN(C3, C4)), cmax = MAX(MAX(C1, C2), MAX(C3, C4));
  g_assert_cmpfloat(cmin, >, 1e-3);
  double m = 32 / 8, L = 32;
  struct { double a, drop; } cases[2] = { { cmin / 4, (m - 1) * L * 4 * cmin / 4 }, { 2 * cmax, (m - 1) * L * (C1 + C2 + C3 + C4) } };
  for (int i = 0; i < 2; i++) {
    a = cases[i].a;
    double g0, g1, c0, c1;
    a2a_step(&c, "tp=1,ep=8,dp=8,zero=1,ckpt=none", &g0, &c0);
    a2a_step(&c, "tp=1,ep=8,dp=8,zero=1,ckpt=none,a2aoverlap=1", &g1, &c1);
    if (fabs((g0 - g1) - cases[i].drop) > 1e-9 * g0 || fabs((c0 - c1) - cases[i].drop) > 1e-9 * c0)
      g_error("a = %g: graph %g -> %g, closed form %g -> %g; expected a drop of %g", a, g0, g1, c0, c1, cases[i].drop);
  }
  /* Megatron-Core's conditions: ep > 1, no full recompute, vpp with pp > 1; MoE only */
  expect_refused(mix, 64, "tp=1,ep=1,dp=64,a2aoverlap=1", "needs ep > 1");
  expect_refused(mix, 64, "tp=1,ep=8,dp=64,ckpt=full,a2aoverlap=1", "full recompute");
  expect_refused(mix, 64, "tp=1,ep=8,pp=2,dp=32,a2aoverlap=1", "vpp > 1");
  sp_model_free(mix);
}

/* dispatcher=flex's two stages priced at user[0] (NVLink, inside the nodes) and user[1]
 * (between the nodes); the plain all-to-all at user[2]; every other collective at 0. */
static gboolean price_flex(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)err;
  const double *u = user;
  *s = c->what == sp_moe_what_dispatch_node ? u[1] : c->what == sp_moe_what_dispatch ? (c->n == 8 ? u[2] : u[0]) : 0.0;
  return TRUE;
}

/* dispatcher=flex (DeepEP, HybridEP): a token crosses the network once per node holding
 * one of its experts. The chance that a node of n holds one, experts spread evenly: for
 * Mixtral (8 experts, top-2) over 2 nodes 1 - C(4, 2) / C(8, 2) = 22 / 28; for
 * DeepSeek-V3's node-limited routing (8 groups, at most 4 per token) over 8 nodes
 * 1 - C(7, 4) / C(8, 4) = 1 / 2 and over 4 nodes 1 - C(6, 4) / C(8, 4) = 55 / 70; over 16
 * nodes the groups do not fill whole nodes and the experts count: 1 - C(240, 8) / C(256, 8).
 * The network stage and the NVLink stage overlap, so with the first priced b and the
 * second a, the step equals the plain all-to-all's priced max(a, b), in the graph and in
 * the closed form. */
static void test_flex_dispatch(void)
{
  sp_model *mix = builtin("mixtral-8x7b"), *ds = builtin("deepseek-v3");
  g_assert_cmpfloat(fabs(sp_step_moe_node_share(mix, 2) - 22.0 / 28.0), <, 1e-15);
  g_assert_cmpfloat(sp_step_moe_node_share(ds, 8), ==, 0.5);
  g_assert_cmpfloat(fabs(sp_step_moe_node_share(ds, 4) - 55.0 / 70.0), <, 1e-15);
  double miss = 1.0;
  for (int i = 0; i < 8; i++) miss *= (240.0 - i) / (256.0 - i);
  g_assert_cmpfloat(fabs(sp_step_moe_node_share(ds, 16) - (1.0 - miss)), <, 1e-15);
  g_assert_cmpfloat(sp_step_moe_node_share(ds, 1), ==, 1.0);

  /* tp=2, ep=8: the expert-parallel group is 16 GPUs (stride etp = 2), 2 nodes */
  double u[3] = { 0, 0, 0 };
  sp_step_ctx c = fixture_ctx(mix, 16, 512, 32, price_flex);
  c.price_user = u;
  c.hw.comm_slowdown = 0;
  sp_layout l = fixture_layout("tp=2,ep=8,dp=8,zero=1,dispatcher=flex", &c);
  g_assert_true(l.ep_flex);
  g_autofree char *str = sp_layout_to_string(&l);
  g_assert_nonnull(g_strrstr(str, ",dispatcher=flex"));
  g_autoptr(GArray) comms = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  sp_step_comms(&c, &l, comms);
  int seen = 0;
  for (guint i = 0; i < comms->len; i++) {
    const sp_comm *cm = &g_array_index(comms, sp_comm, i);
    if (cm->what == sp_moe_what_dispatch) { /* inside a node: its 4 expert ranks, 2 apart, every routed copy */
      g_assert_cmpint(cm->n, ==, 4);
      g_assert_cmpint(cm->stride, ==, 2);
      g_assert_cmpuint(cm->bytes, ==, 256ull * 2 * 4096 * 2);
      seen |= 1;
    }
    if (cm->what == sp_moe_what_dispatch_node) { /* between the 2 nodes, one rank each: 256 tokens x 2 x 22/28 */
      g_assert_cmpint(cm->n, ==, 2);
      g_assert_cmpint(cm->stride, ==, 8);
      g_assert_cmpuint(cm->bytes, ==, (guint64)llround(256.0 * 4096 * 2 * 2 * 22.0 / 28.0));
      seen |= 2;
    }
  }
  g_assert_cmpint(seen, ==, 3);
  struct { double a, b; } cases[] = { { 1e-3, 3e-3 }, { 4e-3, 1e-3 } };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    double gf, cf, ga, ca;
    u[0] = cases[i].a;
    u[1] = cases[i].b;
    u[2] = MAX(cases[i].a, cases[i].b);
    a2a_step(&c, "tp=2,ep=8,dp=8,zero=1,dispatcher=flex", &gf, &cf);
    a2a_step(&c, "tp=2,ep=8,dp=8,zero=1", &ga, &ca);
    if (fabs(gf - ga) > 1e-9 * ga || fabs(cf - ca) > 1e-9 * ca)
      g_error("a %g, b %g: flex graph %.9g closed %.9g; all-to-all at max(a, b): graph %.9g closed %.9g", cases[i].a,
              cases[i].b, gf, cf, ga, ca);
  }
  /* inside one node flex has no network stage: the same comms as the plain all-to-all */
  sp_layout one = fixture_layout("tp=1,ep=8,dp=16,zero=1,dispatcher=flex", &c);
  g_array_set_size(comms, 0);
  sp_step_comms(&c, &one, comms);
  for (guint i = 0; i < comms->len; i++) g_assert_true(g_array_index(comms, sp_comm, i).what != sp_moe_what_dispatch_node);
  /* refusals */
  GError *err = NULL;
  g_assert_false(sp_layout_parse("ep=8,dispatcher=deepep", &l, &err));
  g_assert_nonnull(strstr(err->message, "dispatcher must be alltoall or flex"));
  g_clear_error(&err);
  expect_refused(mix, 16, "tp=1,ep=1,dp=16,dispatcher=flex", "needs ep > 1");
  /* tp = etp = 3 and ep 4: a group of 12 GPUs on nodes of 8 */
  sp_model *twelve = sp_model_parse("{\"layers\": 2, \"hidden\": 96, \"heads\": 6, \"kv_heads\": 6, \"ffn\": 192, "
                                    "\"vocab\": 96, \"experts\": 12, \"experts_per_token\": 2}", -1, "m.json", &err);
  g_assert_no_error(err);
  sp_layout_ctx tc = { .model = twelve, .world = 48, .gpus_per_node = 8, .seq = 3072, .global_batch = 64, .mb = 1 };
  g_assert_true(sp_layout_parse("tp=3,ep=4,dp=16", &l, NULL));
  g_assert_cmpint(sp_layout_check(&l, &tc, NULL), ==, SP_SKIP_NONE);
  g_assert_true(sp_layout_parse("tp=3,ep=4,dp=16,dispatcher=flex", &l, NULL));
  g_assert_cmpint(sp_layout_check(&l, &tc, &err), !=, SP_SKIP_NONE);
  g_assert_nonnull(strstr(err->message, "ep x etp = 12 GPUs"));
  g_clear_error(&err);
  /* the sweep tries flex where the group leaves a node: ep 16 of tp 1 on 16 GPUs, not ep 4 */
  sp_layout_ctx lc = { .model = ds, .world = 16, .gpus_per_node = 8, .seq = 4096, .global_batch = 64, .mb = 1 };
  sp_sweep_opts o;
  sp_sweep_opts_init(&o, &lc);
  sp_sweep *sw = sp_sweep_run(&lc, &o);
  int flex16 = 0, flex4 = 0;
  for (guint i = 0; i < sw->layouts->len; i++) {
    const sp_layout *x = &g_array_index(sw->layouts, sp_layout, i);
    if (x->ep_flex && x->tp == 1 && x->ep == 16) flex16++;
    if (x->ep_flex && x->tp == 1 && x->ep == 4) flex4++;
  }
  g_assert_cmpint(flex16, >, 0);
  g_assert_cmpint(flex4, ==, 0);
  sp_sweep_free(sw);
  sp_model_free(twelve);
  sp_model_free(ds);
  sp_model_free(mix);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/moe/layout-ep", test_layout_ep);
  g_test_add_func("/moe/sweep-ep", test_sweep_ep);
  g_test_add_func("/moe/routing", test_routing);
  g_test_add_func("/moe/memory-and-comms", test_memory_and_comms);
  g_test_add_func("/moe/step-imbalance", test_step_imbalance);
  g_test_add_func("/moe/expert-activation", test_expert_activation);
  g_test_add_func("/moe/expert-memory", test_expert_memory);
  g_test_add_func("/moe/a2a-overlap", test_a2a_overlap);
  g_test_add_func("/moe/flex-dispatch", test_flex_dispatch);
  return g_test_run();
}
