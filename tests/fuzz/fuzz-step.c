/* Fuzz harness: the step model on arbitrary layouts. The first four bytes pick a model
 * (a dense GQA model, an MoE model, a sliding-window model), the world (8 to 64 GPUs,
 * 8 per node), the sequence and the global batch; the rest is a layout. A layout that
 * sp_layout_check accepts must price (the closed form, sp_step_eval) and build, price
 * and run as a step graph (sp_stepgraph_*, no contention) to finite, non-negative
 * times, or fail with a set error; a schedule that cannot run is a finding. */
#include "config.h"

#include <math.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/step.h"
#include "spsim/stepgraph.h"

/* Small models of the built-in shapes, few layers so that graphs stay small. */
static const char *const model_json[] = {
  "{\"name\":\"fuzz-dense\",\"layers\":8,\"hidden\":1024,\"heads\":16,\"kv_heads\":4,"
  "\"ffn\":3584,\"vocab\":32000,\"dtype\":\"bf16\",\"mlp\":\"swiglu\"}",
  "{\"name\":\"fuzz-moe\",\"layers\":8,\"hidden\":1024,\"heads\":16,\"kv_heads\":8,\"ffn\":3584,"
  "\"vocab\":32000,\"dtype\":\"bf16\",\"mlp\":\"swiglu\",\"experts\":8,\"experts_per_token\":2,\"expert_ffn\":1024}",
  "{\"name\":\"fuzz-window\",\"layers\":8,\"hidden\":1024,\"heads\":8,\"kv_heads\":8,\"ffn\":4096,"
  "\"vocab\":32000,\"dtype\":\"bf16\",\"mlp\":\"gelu\",\"sliding_window\":256}",
};

/* Collectives cost 5 us plus their bytes at 100 GB/s. */
static gboolean price(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user;
  (void)err;
  *s = 5e-6 + (double)c->bytes / 1e11;
  return TRUE;
}

static gboolean finite_nonneg(double v)
{
  return isfinite(v) && v >= 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  static sp_model *models[G_N_ELEMENTS(model_json)];
  if (models[0] == NULL)
    for (gsize i = 0; i < G_N_ELEMENTS(model_json); i++) {
      GError *e = NULL;
      models[i] = sp_model_parse(model_json[i], -1, "fuzz", &e);
      FUZZ_ASSERT(models[i] != NULL, "built-in model %zu: %s", i, e ? e->message : "?");
    }
  if (size < 4 || size > 260)
    return 0;
  static const int32_t worlds[] = { 8, 16, 32, 64 };
  static const int64_t seqs[] = { 512, 2048, 8192, 4096 };
  static const int64_t batches[] = { 8, 32, 64, 256 };
  sp_step_ctx c = { .model = models[data[0] % G_N_ELEMENTS(models)], .world = worlds[data[1] % 4],
                    .gpus_per_node = 8, .seq = seqs[data[2] % 4], .global_batch = batches[data[3] % 4],
                    .price = price };
  sp_step_hw_init(&c.hw);
  char *text = g_strndup((const char *)data + 4, size - 4);
  sp_layout l;
  GError *err = NULL;
  gboolean parsed = sp_layout_parse(text, &l, &err);
  g_free(text);
  if (!parsed) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  sp_layout_ctx lc = { .model = c.model, .world = c.world, .gpus_per_node = 8, .seq = c.seq,
                       .global_batch = c.global_batch, .mb = 1 };
  if (sp_layout_check(&l, &lc, &err) != SP_SKIP_NONE) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  sp_step_result r;
  if (!sp_step_eval(&c, &l, &r, &err)) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  FUZZ_ASSERT(isfinite(r.step_time) && r.step_time > 0, "step time %g", r.step_time);
  FUZZ_ASSERT(finite_nonneg(r.compute) && finite_nonneg(r.bubble) && finite_nonneg(r.dp_tail) &&
                finite_nonneg(r.optimizer),
              "compute %g bubble %g dp tail %g optimizer %g", r.compute, r.bubble, r.dp_tail, r.optimizer);
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++)
    FUZZ_ASSERT(finite_nonneg(r.exposed[k]) && finite_nonneg(r.comm[k]), "comm kind %d: %g exposed of %g", k,
                r.exposed[k], r.comm[k]);
  FUZZ_ASSERT(r.microbatches >= 1, "%" G_GINT64_FORMAT " micro-batches", r.microbatches);
  FUZZ_ASSERT(isfinite(r.mfu) && r.mfu > 0 && isfinite(r.tokens_per_s) && r.tokens_per_s > 0, "mfu %g, %g tokens/s",
              r.mfu, r.tokens_per_s);
  const double mem[] = { r.mem.weights, r.mem.grads, r.mem.optim, r.mem.act, r.mem.buffers, r.mem.total };
  for (gsize i = 0; i < G_N_ELEMENTS(mem); i++)
    FUZZ_ASSERT(finite_nonneg(mem[i]), "memory part %zu is %g", i, mem[i]);
  sp_stepgraph *g = sp_stepgraph_build(&c, &l, SP_SCHED_1F1B, &err);
  if (g == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  FUZZ_ASSERT(sp_stepgraph_price(g, &c, &err), "pricing a built graph: %s", err->message);
  double *start = g_new(double, g->tasks->len), *end = g_new(double, g->tasks->len), span = 0;
  FUZZ_ASSERT(sp_stepgraph_schedule(g, start, end, &span, &err), "the graph of a valid layout does not run: %s",
              err->message);
  FUZZ_ASSERT(isfinite(span) && span > 0, "makespan %g", span);
  for (guint i = 0; i < g->tasks->len; i++)
    FUZZ_ASSERT(isfinite(start[i]) && start[i] >= 0 && end[i] >= start[i] && end[i] <= span, "task %u: %g to %g of %g",
                i, start[i], end[i], span);
  sp_stepgraph_breakdown b;
  sp_stepgraph_breakdown_of(g, start, end, &b);
  FUZZ_ASSERT(finite_nonneg(b.compute) && finite_nonneg(b.idle) && b.compute <= span * (1 + 1e-9),
              "breakdown: compute %g idle %g of %g", b.compute, b.idle, span);
  g_free(start);
  g_free(end);
  sp_stepgraph_free(g);
  return 0;
}
