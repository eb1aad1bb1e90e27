/* Layouts: parsing, validation reasons, and sweep counts computed by hand. */
#include "config.h"
#include <glib.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/layout.h"

static sp_model mk(int64_t layers, int64_t heads, int64_t kv)
{
  sp_model m = { .name = (char *)"t", .layers = layers, .hidden = heads * 16, .heads = heads, .kv_heads = kv,
                 .ffn = heads * 64, .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_SWIGLU };
  return m;
}

/* Interleaved 1F1B: vpp needs pp > 1, layers divisible by pp x vpp, micro-batches by pp. */
static void test_interleaved(void)
{
  sp_model m = mk(8, 4, 4);
  sp_layout_ctx c = { .model = &m, .world = 4, .gpus_per_node = 8, .seq = 64, .global_batch = 8, .mb = 1 };
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse("pp=2,vpp=4,dp=2", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_NONE);
  g_assert_no_error(err);
  g_autofree char *s = sp_layout_to_string(&l);
  g_assert_cmpstr(s, ==, "tp=1,tpsp=0,sp=1,cp=1,wp=1,pp=2,vpp=4,dp=2,zero=0,ckpt=none,mb=1");
  g_autofree char *lab = sp_layout_label(&l);
  g_assert_nonnull(strstr(lab, "pp2v4 "));
  /* 8 layers do not split into 2 x 8 chunks */
  g_assert_true(sp_layout_parse("pp=2,vpp=8,dp=2", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_LAYERS);
  g_assert_nonnull(strstr(err->message, "pp x vpp"));
  g_clear_error(&err);
  /* no pipeline: nothing to interleave */
  g_assert_true(sp_layout_parse("vpp=2,dp=4", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_LAYERS);
  g_clear_error(&err);
  /* 8 sequences over dp=1 x pp=4 -> 8 micro-batches: fine; global batch 6 over dp 1 -> 6, not a multiple of 4 */
  c.global_batch = 6;
  g_assert_true(sp_layout_parse("pp=4,vpp=2,dp=1", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_BATCH);
  g_clear_error(&err);
}

/* Where pp does not divide the layers the sweep also splits them with fewer layers on the
 * first and last stage and interleaves the middle stages' chunks: Llama 3 405B's 126
 * layers on 16 stages as 7, 8 x 14, 7 (Llama 3 report sec. 3.3.2) with 1, 2, 4 and 8
 * chunks (with 8, the outer stages' 7 layers leave one chunk to the embedding or the
 * output layer alone, as in that report); 14 layers on 4 stages as 3, 4, 4, 3 with 1, 2
 * or 4 chunks, never 8 (more than one empty chunk). */
static void test_sweep_outer_split(void)
{
  sp_model m = mk(126, 4, 4);
  sp_layout_ctx c = { .model = &m, .world = 16, .gpus_per_node = 8, .seq = 64, .global_batch = 16, .mb = 1 };
  sp_sweep_opts o;
  sp_sweep_opts_init(&o, &c);
  o.with_isp = FALSE;
  sp_sweep *s = sp_sweep_run(&c, &o);
  guint seen[9] = { 0 };
  for (guint i = 0; i < s->layouts->len; i++) {
    const sp_layout *l = &g_array_index(s->layouts, sp_layout, i);
    if (l->pp != 16) continue;
    if (l->pp_first == 0) {
      g_assert_cmpint(l->pp_last, ==, 0);
      g_assert_cmpint(l->vpp, ==, 1); /* 16 does not divide 126: no even interleaving */
      continue;
    }
    g_assert_cmpint(l->pp_first, ==, 7);
    g_assert_cmpint(l->pp_last, ==, 7);
    g_assert_cmpint(sp_layout_layers_of_stage(l, &m, 1), ==, 8);
    g_assert_true(l->vpp == 1 || l->vpp == 2 || l->vpp == 4 || l->vpp == 8);
    seen[l->vpp]++;
  }
  g_assert_cmpuint(seen[1], >, 0);
  g_assert_cmpuint(seen[2], >, 0);
  g_assert_cmpuint(seen[4], >, 0);
  g_assert_cmpuint(seen[8], >, 0);
  sp_sweep_free(s);
  sp_model m14 = mk(14, 4, 4);
  c.model = &m14;
  c.world = 4;
  c.global_batch = 8;
  s = sp_sweep_run(&c, &o);
  guint v14[5] = { 0 };
  for (guint i = 0; i < s->layouts->len; i++) {
    const sp_layout *l = &g_array_index(s->layouts, sp_layout, i);
    if (l->pp != 4 || l->pp_first == 0) continue;
    g_assert_cmpint(l->pp_first, ==, 3);
    g_assert_cmpint(l->pp_last, ==, 3);
    g_assert_true(l->vpp == 1 || l->vpp == 2 || l->vpp == 4);
    v14[l->vpp]++;
  }
  g_assert_cmpuint(v14[1], >, 0);
  g_assert_cmpuint(v14[2], >, 0);
  g_assert_cmpuint(v14[4], >, 0);
  sp_sweep_free(s);
}

/* Megatron-Core's micro-batch groups (vppgroup=N, --microbatch-group-size-per-virtual-
 * pipeline-stage): N in [pp, M], and M mod N zero or at least pp (schedules.py). */
static void test_vpp_group(void)
{
  sp_model m = mk(8, 4, 4);
  sp_layout_ctx c = { .model = &m, .world = 2, .gpus_per_node = 8, .seq = 64, .global_batch = 5, .mb = 1 };
  sp_layout l;
  GError *err = NULL;
  /* 5 micro-batches on pp 2: refused in groups of pp, run in groups of 3 (remainder 2 = pp) */
  g_assert_true(sp_layout_parse("pp=2,vpp=2", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_BATCH);
  g_assert_nonnull(strstr(err->message, "vppgroup"));
  g_clear_error(&err);
  g_assert_true(sp_layout_parse("pp=2,vpp=2,vppgroup=3", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_NONE);
  g_assert_no_error(err);
  g_autofree char *s = sp_layout_to_string(&l);
  g_assert_cmpstr(s, ==, "tp=1,tpsp=0,sp=1,cp=1,wp=1,pp=2,vpp=2,vppgroup=3,dp=1,zero=0,ckpt=none,mb=1");
  g_autofree char *lab = sp_layout_label(&l);
  g_assert_nonnull(strstr(lab, "pp2v2g3 "));
  /* groups of 4 leave 1 < pp; groups of 1 are smaller than pp; 6 are more than M */
  const char *bad[] = { "pp=2,vpp=2,vppgroup=4", "pp=2,vpp=2,vppgroup=1", "pp=2,vpp=2,vppgroup=6" };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_true(sp_layout_parse(bad[i], &l, &err));
    g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_BATCH);
    g_assert_nonnull(strstr(err->message, "vppgroup"));
    g_clear_error(&err);
  }
  /* a group of 5, all of M: one group */
  g_assert_true(sp_layout_parse("pp=2,vpp=2,vppgroup=5", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_NONE);
  /* without interleaving there is nothing to group */
  c.global_batch = 4;
  g_assert_true(sp_layout_parse("pp=2,vppgroup=2", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_LAYERS);
  g_assert_nonnull(strstr(err->message, "vpp > 1"));
  g_clear_error(&err);
  /* N = pp is the default, spelt one way */
  g_assert_true(sp_layout_parse("pp=2,vpp=2,vppgroup=2", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_NONE);
  g_assert_cmpint(l.vpp_group, ==, 0);
  g_assert_cmpint(sp_layout_vpp_group(&l), ==, 2);
  /* the rule itself */
  g_assert_true(sp_layout_vpp_batches_ok(2, 3, 5));
  g_assert_true(sp_layout_vpp_batches_ok(4, 0, 8));
  g_assert_false(sp_layout_vpp_batches_ok(4, 0, 6));
  g_assert_false(sp_layout_vpp_batches_ok(4, 6, 9));
  g_assert_true(sp_layout_vpp_batches_ok(4, 6, 10));
  g_assert_true(sp_layout_vpp_batches_ok(4, 6, 12));
  /* the sweep runs interleaved layouts whose micro-batches pp does not divide in the
   * smallest group Megatron-Core accepts: 5 micro-batches on pp 2 (dp 1) in groups of 3
   * (vpp 2 and 4 split the stage's 4 layers): tp 1, pp 2, dp 1 x vpp 2, 4 x ZeRO 0 (no
   * replicas for more) x 3 ckpt = 6 layouts */
  c.global_batch = 5;
  sp_sweep_opts o;
  sp_sweep_opts_init(&o, &c);
  o.with_isp = FALSE;
  sp_sweep *sw = sp_sweep_run(&c, &o);
  guint grouped = 0;
  for (guint i = 0; i < sw->layouts->len; i++) {
    const sp_layout *x = &g_array_index(sw->layouts, sp_layout, i);
    if (x->pp == 2 && x->vpp > 1) {
      g_assert_cmpint(x->vpp_group, ==, 3);
      grouped++;
    } else {
      g_assert_cmpint(x->vpp_group, ==, 0);
    }
  }
  g_assert_cmpuint(grouped, ==, 6);
  sp_sweep_free(sw);
}

static void test_parse(void)
{
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse("tp=8,sp=4,pp=8,dp=4,zero=1,ckpt=full,mb=2", &l, &err));
  g_assert_cmpint(l.tp, ==, 8);
  g_assert_true(l.tp_sp); /* default with tp > 1 */
  g_assert_cmpint(l.sp, ==, 4);
  g_assert_cmpint(l.pp, ==, 8);
  g_assert_cmpint(l.dp, ==, 4);
  g_assert_cmpint(l.zero, ==, 1);
  g_assert_cmpint(l.ckpt, ==, SP_CKPT_FULL);
  g_assert_cmpint(l.mb, ==, 2);
  g_assert_cmpint(l.cp, ==, 1);
  g_assert_true(sp_layout_parse("tp=2,tpsp=0", &l, &err));
  g_assert_false(l.tp_sp);
  const char *bad[] = { "tp=0", "zero=4", "foo=1", "tp", "tp=1,tpsp=1", "ckpt=some", "", "pp=x" };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_false(sp_layout_parse(bad[i], &l, &err));
    g_assert_nonnull(err);
    g_clear_error(&err);
  }
  /* round trip of the canonical text */
  g_assert_true(sp_layout_parse("tp=4,cp=2,pp=2,dp=8,zero=2,ckpt=selective", &l, &err));
  g_autofree char *s = sp_layout_to_string(&l);
  g_assert_cmpstr(s, ==, "tp=4,tpsp=1,sp=1,cp=2,wp=1,pp=2,dp=8,zero=2,ckpt=selective,mb=0");
  /* torchtitan's op checkpointing and a gradient all-reduce after the backward */
  g_assert_true(sp_layout_parse("dp=8,dpsync=1,ckpt=op", &l, &err));
  g_assert_true(l.dp_sync);
  g_assert_cmpint(l.ckpt, ==, SP_CKPT_OP);
  g_autofree char *s2 = sp_layout_to_string(&l);
  g_assert_cmpstr(s2, ==, "tp=1,tpsp=0,sp=1,cp=1,wp=1,pp=1,dp=8,dpsync=1,zero=0,ckpt=op,mb=0");
  g_assert_false(sp_layout_parse("dp=8,dpsync=2", &l, &err));
  g_clear_error(&err);
}

static sp_skip check(const char *spec, const sp_model *m, int32_t world, int64_t seq, int64_t gb)
{
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse(spec, &l, &err));
  sp_layout_ctx c = { .model = m, .world = world, .gpus_per_node = 8, .seq = seq, .global_batch = gb, .mb = 1 };
  sp_skip r = sp_layout_check(&l, &c, &err);
  if (r == SP_SKIP_NONE) g_assert_no_error(err);
  else {
    g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
    g_clear_error(&err);
  }
  return r;
}

static void test_check(void)
{
  sp_model m = mk(32, 32, 8);
  g_assert_cmpint(check("tp=8,pp=4,dp=2", &m, 64, 4096, 64), ==, SP_SKIP_NONE);
  g_assert_cmpint(check("tp=8,pp=4,dp=3", &m, 64, 4096, 64), ==, SP_SKIP_WORLD);  /* 96 != 64 */
  g_assert_cmpint(check("tp=8,pp=3", &m, 64, 4096, 64), ==, SP_SKIP_WORLD);       /* 24 does not divide 64 */
  /* the largest degrees the parser takes: 2^80 ranks (the product used to overflow
   * int64, a UBSan report; seed tests/fuzz/corpus/layout/overflow-max-degrees) and 2^80 x 2^24 */
  g_assert_cmpint(check("tp=1048576,sp=1048576,cp=1048576,pp=1048576", &m, 64, 4096, 64), ==, SP_SKIP_WORLD);
  g_assert_cmpint(check("tp=1048576,sp=1048576,cp=1048576,pp=1048576,dp=16777216", &m, 64, 4096, 64), ==,
                  SP_SKIP_WORLD);
  g_assert_cmpint(check("sp=1048576,cp=1048576,dp=16777216", &m, 64, 4096, 64), ==, SP_SKIP_WORLD);
  g_assert_cmpint(check("tp=16", &m, 64, 4096, 64), ==, SP_SKIP_TP_NODE);
  g_assert_cmpint(check("tp=8,sp=8", &m, 64, 4096, 64), ==, SP_SKIP_HEADS);       /* 32 % 64 */
  /* 8 KV heads, tp 8 -> 1 per rank, Ulysses sp 4 replicates it: allowed */
  g_assert_cmpint(check("tp=8,sp=4", &m, 64, 4096, 64), ==, SP_SKIP_NONE);
  sp_model m12 = mk(32, 12, 3);
  g_assert_cmpint(check("tp=2", &m12, 64, 4096, 64), ==, SP_SKIP_KV_HEADS);       /* 3 KV heads over 2 */
  g_assert_cmpint(check("tp=4,sp=2", &m, 64, 4098, 64), ==, SP_SKIP_SEQ);
  g_assert_cmpint(check("cp=4", &m, 64, 4100, 64), ==, SP_SKIP_SEQ);              /* needs 2 x cp */
  g_assert_cmpint(check("tp=8,dp=8", &m, 64, 4096, 12), ==, SP_SKIP_BATCH);
  g_assert_cmpint(check("pp=64", &m, 64, 4096, 64), ==, SP_SKIP_LAYERS);          /* 64 stages, 32 layers */
  sp_model m30 = mk(30, 32, 8);
  g_assert_cmpint(check("pp=16,dp=4", &m30, 64, 4096, 64), ==, SP_SKIP_LAYERS);   /* ceil(30/16)=2: 15 stages hold all */
  g_assert_cmpint(check("pp=8,dp=8", &m30, 64, 4096, 64), ==, SP_SKIP_NONE);      /* 4,4,...,2 */
  g_assert_cmpint(check("tp=2,wp=4", &m, 64, 4096, 64), ==, SP_SKIP_WP);
  g_assert_cmpint(check("wp=3", &m, 64, 4096, 64), ==, SP_SKIP_WP);
  g_assert_cmpint(check("tp=8,pp=8,zero=1", &m, 64, 4096, 64), ==, SP_SKIP_ZERO); /* no replicas */
  g_assert_cmpint(check("wp=8,zero=2", &m, 64, 4096, 64), ==, SP_SKIP_ZERO);
  g_assert_cmpint(check("wp=8,zero=1", &m, 64, 4096, 64), ==, SP_SKIP_NONE);
}

static void test_sweep_counts(void)
{
  /* world 4, 4 heads, 4 layers: tp variants (1), (2, +sp), (4, +sp); (sp, cp, pp, dp) ordered
   * factorisations of 4/tp: 10, 4, 1 -> 10 + 2x4 + 2x1 = 20 tuples. vpp runs over the divisors of
   * a stage's layers: pp 2 (2 layers) gives vpp 1, 2; pp 4 (1 layer) vpp 1 only. The pp 2
   * tuples (tp 1: 3 splits of the other 2; tp 2: 2 variants) get one more each: 20 + 5 = 25
   * tuples; x 4 ZeRO x 3 ckpt = 300. No layer split fails (every vpp divides).
   * Invalid, ZeRO > 0 without replicas (sp = cp = dp = 1, i.e. tp x pp = 4): (tp 1, pp 4),
   * (tp 2, pp 2) x 2 variants x vpp 1, 2, (tp 4) x 2: 7 tuples x 3 ZeRO x 3 ckpt = 63. */
  sp_model m = mk(4, 4, 4);
  sp_layout_ctx c = { .model = &m, .world = 4, .gpus_per_node = 4, .seq = 64, .global_batch = 8, .mb = 1 };
  sp_sweep_opts o;
  sp_sweep_opts_init(&o, &c);
  o.with_isp = FALSE;
  sp_sweep *s = sp_sweep_run(&c, &o);
  g_assert_cmpuint(s->considered, ==, 300);
  g_assert_cmpuint(s->skipped[SP_SKIP_ZERO], ==, 63);
  g_assert_cmpuint(s->layouts->len, ==, 300 - 63);
  for (int k = 1; k < SP_SKIP_COUNT; k++)
    if (k != SP_SKIP_ZERO) g_assert_cmpuint(s->skipped[k], ==, 0);
  sp_sweep_free(s);
  /* global batch 2 sequences: dp = 4 now fails (2 % 4): tuples with dp = 4 are those with
   * tp = sp = cp = pp = 1: 1 tuple x 12; and (pp 2, dp 2, vpp 2) has 1 micro-batch, not a
   * multiple of pp: 1 tuple x 12 */
  c.global_batch = 2;
  s = sp_sweep_run(&c, &o);
  g_assert_cmpuint(s->skipped[SP_SKIP_BATCH], ==, 24);
  sp_sweep_free(s);
  /* micro-batch left to the sweep (ctx mb 0): 1, 2, 4 triple the candidates (900) and the
   * ZeRO skips (189). Global batch 8: dp 4 with mb 4 needs 16 sequences (the dp = 4 tuple,
   * 12 candidates), and (pp 2, dp 2, vpp 2) with mb 4 leaves 1 micro-batch for 2 stages
   * (12 more); every layout keeps the mb it was given. */
  c.global_batch = 8;
  c.mb = 0;
  s = sp_sweep_run(&c, &o);
  g_assert_cmpuint(s->considered, ==, 900);
  g_assert_cmpuint(s->skipped[SP_SKIP_ZERO], ==, 189);
  g_assert_cmpuint(s->skipped[SP_SKIP_BATCH], ==, 24);
  g_assert_cmpuint(s->layouts->len, ==, 900 - 189 - 24);
  guint per_mb[5] = { 0 };
  for (guint i = 0; i < s->layouts->len; i++) {
    int32_t mb = g_array_index(s->layouts, sp_layout, i).mb;
    g_assert_true(mb == 1 || mb == 2 || mb == 4);
    per_mb[mb]++;
  }
  g_assert_cmpuint(per_mb[1], ==, per_mb[2]);
  g_assert_cmpuint(per_mb[4], ==, per_mb[1] - 24);
  sp_sweep_free(s);
}

/* Selective recomputation's modules (Megatron-Core's --recompute-modules): the set parses
 * from '+'-joined names, the default (core_attn alone) has one spelling, the set needs
 * ckpt=selective and a model that has the module, and it round-trips through the string. */
static void test_recompute_modules(void)
{
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse("dp=4,ckpt=selective,recompute=mlp+layernorm,mb=1", &l, &err));
  g_assert_cmpuint(l.rmods, ==, SP_RMOD_MLP | SP_RMOD_LAYERNORM);
  g_assert_cmpuint(sp_layout_rmods(&l), ==, SP_RMOD_MLP | SP_RMOD_LAYERNORM); /* no core_attn unless named */
  g_autofree char *s = sp_layout_to_string(&l);
  g_assert_cmpstr(s, ==, "tp=1,tpsp=0,sp=1,cp=1,wp=1,pp=1,dp=4,zero=0,ckpt=selective,recompute=layernorm+mlp,mb=1");
  sp_layout back;
  g_assert_true(sp_layout_parse(s, &back, &err));
  g_assert_cmpuint(back.rmods, ==, l.rmods);
  g_autofree char *lab = sp_layout_label(&l);
  g_assert_nonnull(strstr(lab, "sel(layernorm+mlp)"));
  /* the default: selective alone and recompute=core_attn are one layout */
  g_assert_true(sp_layout_parse("dp=4,ckpt=selective,recompute=core_attn", &l, &err));
  g_assert_cmpuint(l.rmods, ==, 0);
  g_assert_cmpuint(sp_layout_rmods(&l), ==, SP_RMOD_CORE_ATTN);
  g_autofree char *d = sp_layout_to_string(&l);
  g_assert_null(strstr(d, "recompute"));
  /* other modes recompute by their own rules */
  g_assert_true(sp_layout_parse("dp=4,ckpt=full", &l, &err));
  g_assert_cmpuint(sp_layout_rmods(&l), ==, 0);
  /* refused: without ckpt=selective, empty, unknown, repeated */
  const char *bad[] = { "dp=4,recompute=mlp", "dp=4,ckpt=full,recompute=mlp", "dp=4,ckpt=selective,recompute=",
                        "dp=4,ckpt=selective,recompute=attn", "dp=4,ckpt=selective,recompute=mlp+mlp" };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_false(sp_layout_parse(bad[i], &l, &err));
    g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
    g_assert_nonnull(strstr(err->message, "recompute"));
    g_clear_error(&err);
  }
  /* a module the model does not have: mla_up_proj without latent attention, moe_act without experts */
  sp_model m = mk(8, 4, 4);
  sp_layout_ctx c = { .model = &m, .world = 4, .gpus_per_node = 8, .seq = 64, .global_batch = 8, .mb = 1 };
  g_assert_true(sp_layout_parse("dp=4,ckpt=selective,recompute=mla_up_proj", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), !=, SP_SKIP_NONE);
  g_assert_nonnull(strstr(err->message, "latent attention"));
  g_clear_error(&err);
  g_assert_true(sp_layout_parse("dp=4,ckpt=selective,recompute=moe_act", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), !=, SP_SKIP_NONE);
  g_assert_nonnull(strstr(err->message, "no experts"));
  g_clear_error(&err);
  g_assert_true(sp_layout_parse("dp=4,ckpt=selective,recompute=layernorm+mlp", &l, &err));
  g_assert_cmpint(sp_layout_check(&l, &c, &err), ==, SP_SKIP_NONE);
  g_assert_no_error(err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/layout/parse", test_parse);
  g_test_add_func("/layout/interleaved", test_interleaved);
  g_test_add_func("/layout/vpp-group", test_vpp_group);
  g_test_add_func("/layout/sweep-outer-split", test_sweep_outer_split);
  g_test_add_func("/layout/check", test_check);
  g_test_add_func("/layout/sweep-counts", test_sweep_counts);
  g_test_add_func("/layout/recompute-modules", test_recompute_modules);
  return g_test_run();
}
