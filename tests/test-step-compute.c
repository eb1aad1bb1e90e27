/* The CPU kernels of spsim-run --step (src/nccl/step_compute.c): for every layout the
 * sweep finds for two models on 1, 2, 4 and 8 GPUs, the kernels planned for each
 * stage, times the ranks of the stage, add up to the step's work counted from the
 * model alone (the plan follows the graph's merged compute tasks; a kernel lost or
 * run twice shows here):
 *   GEMMs: 6 x tokens x P, P = layers x (h (q + 2 kv) + h q + h u + f h) + vocab h the
 *   matmul parameters (q = heads d, kv = kv_heads d, u = f or 2 f with SwiGLU; with
 *   tp above kv_heads each TP rank holds one kv head: kv = tp d), forward 2 tokens P
 *   and the data and weight gradients the same again each (Narayanan et al. 2021,
 *   Section 5.1); full recomputation adds the layers' forward again, ckpt=op the K,
 *   output and third MLP projections' forward (sp_step_layer_kernels);
 *   attention: per sequence and layer 2 a s^2 d forward (causal, as the kernel model
 *   counts it), 2.5 times that backward, and the forward again with full or selective
 *   recomputation. */
#include "config.h"
#include <glib.h>
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/stepgraph.h"
#include "step_compute.h"

#define SEQ 256
#define GBATCH 8

typedef struct {
  sp_model m;
  int32_t world;
} case_t;

/* tiny (models/tiny.json) and a GQA model whose 2 kv heads are replicated at tp 4 */
static sp_model model_tiny(void)
{
  sp_model m = { .name = (char *)"tiny", .layers = 4, .hidden = 256, .heads = 4, .kv_heads = 4, .ffn = 1024,
                 .vocab = 1024, .dtype = SP_BF16, .mlp = SP_MLP_SWIGLU };
  return m;
}

static sp_model model_gqa(void)
{
  sp_model m = { .name = (char *)"gqa", .layers = 4, .hidden = 256, .heads = 8, .kv_heads = 2, .ffn = 512,
                 .vocab = 512, .dtype = SP_BF16, .mlp = SP_MLP_GELU };
  return m;
}

/* The step's GEMM and attention FLOPs over all GPUs, from the model and the layout. */
static void expected(const sp_model *m, const sp_layout *l, double *gemm, double *attn)
{
  double h = (double)m->hidden, d = (double)m->hidden / m->heads, f = (double)m->ffn;
  double q = m->heads * d, kvh = m->kv_heads % l->tp == 0 ? m->kv_heads : l->tp, kv = kvh * d;
  double u = m->mlp == SP_MLP_SWIGLU ? 2 * f : f;
  double layer = h * (q + 2 * kv) + h * q + h * u + f * h;
  double P = m->layers * layer + (double)m->vocab * h;
  double tokens = (double)GBATCH * SEQ;
  *gemm = 6.0 * tokens * P;
  if (l->ckpt == SP_CKPT_FULL) *gemm += 2.0 * tokens * m->layers * layer;
  if (l->ckpt == SP_CKPT_OP) *gemm += 2.0 * tokens * m->layers * (h * kv + h * q + (m->mlp == SP_MLP_SWIGLU ? f * h : f * h));
  double a1 = 2.0 * m->heads * (double)SEQ * SEQ * d * GBATCH * m->layers;
  *attn = a1 * (1.0 + 2.5 + (l->ckpt == SP_CKPT_FULL || l->ckpt == SP_CKPT_SELECTIVE ? 1.0 : 0.0));
}

static void test_sweep(gconstpointer data)
{
  const case_t *tc = data;
  sp_layout_ctx lctx = { .model = &tc->m, .world = tc->world, .gpus_per_node = tc->world, .seq = SEQ,
                         .global_batch = GBATCH };
  sp_sweep_opts so;
  sp_sweep_opts_init(&so, &lctx);
  sp_sweep *sw = sp_sweep_run(&lctx, &so);
  g_assert_nonnull(sw);
  guint checked = 0;
  for (guint i = 0; i < sw->layouts->len; i++) {
    const sp_layout *l = &g_array_index(sw->layouts, sp_layout, i);
    sp_step_ctx c = { .model = &tc->m, .seq = SEQ, .global_batch = GBATCH, .world = tc->world,
                      .gpus_per_node = tc->world };
    sp_step_hw_init(&c.hw);
    GError *err = NULL;
    sp_stepgraph *g = sp_stepgraph_build(&c, l, SP_SCHED_1F1B, &err);
    g_assert_no_error(err);
    double gemm = 0, attn = 0;
    for (int32_t s = 0; s < g->stages; s++) {
      GArray *ks = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
      uint32_t *off = NULL;
      g_autofree char *lt = sp_layout_to_string(l);
      if (!sk_plan(g, &c, l, s, ks, &off, &err))
        g_error("%s on %d GPUs, stage %d: %s", lt, tc->world, s, err->message);
      for (guint k = 0; k < ks->len; k++) {
        const sk_kernel *kk = &g_array_index(ks, sk_kernel, k);
        double fl = sk_flops(kk) * g->ranks_per_stage;
        if (kk->kind == SK_GEMM) gemm += fl;
        else if (kk->kind == SK_ATTN) attn += fl;
      }
      g_free(off);
      g_array_free(ks, TRUE);
    }
    double eg, ea;
    expected(&tc->m, l, &eg, &ea);
    g_autofree char *lt = sp_layout_to_string(l);
    if (fabs(gemm - eg) > 1e-9 * eg || fabs(attn - ea) > 1e-9 * ea)
      g_error("%s on %d GPUs: GEMM %.0f (want %.0f), attention %.0f (want %.0f)", lt, tc->world, gemm, eg, attn, ea);
    sp_stepgraph_free(g);
    checked++;
  }
  g_assert_cmpuint(checked, >, 0);
  g_test_message("%u layouts of %s on %d GPUs", checked, tc->m.name, tc->world);
  sp_sweep_free(sw);
}

/* A task whose label the plan does not know is refused with a message, not run empty. */
static void test_unknown_label(void)
{
  sp_model m = model_tiny();
  sp_step_ctx c = { .model = &m, .seq = SEQ, .global_batch = GBATCH, .world = 1, .gpus_per_node = 1 };
  sp_step_hw_init(&c.hw);
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse("dp=1", &l, &err));
  sp_layout_ctx lctx = { .model = &m, .world = 1, .gpus_per_node = 1, .seq = SEQ, .global_batch = GBATCH };
  g_assert_cmpint(sp_layout_check(&l, &lctx, &err), ==, SP_SKIP_NONE);
  sp_stepgraph *g = sp_stepgraph_build(&c, &l, SP_SCHED_1F1B, &err);
  g_assert_no_error(err);
  for (guint i = 0; i < g->tasks->len; i++) {
    sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->kind == SP_TASK_COMPUTE && strcmp(t->what, "optimizer step") == 0) t->what = "no such kernel";
  }
  GArray *ks = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
  uint32_t *off = NULL;
  g_assert_false(sk_plan(g, &c, &l, 0, ks, &off, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(err->message, "'no such kernel'"));
  g_assert_null(off);
  g_error_free(err);
  g_array_free(ks, TRUE);
  sp_stepgraph_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  static case_t cases[8];
  const int32_t worlds[] = { 1, 2, 4, 8 };
  for (int i = 0; i < 8; i++) {
    cases[i].m = i < 4 ? model_tiny() : model_gqa();
    cases[i].world = worlds[i % 4];
    g_autofree char *name = g_strdup_printf("/step-compute/sweep/%s/%d", cases[i].m.name, cases[i].world);
    g_test_add_data_func(name, &cases[i], test_sweep);
  }
  g_test_add_func("/step-compute/unknown-label", test_unknown_label);
  return g_test_run();
}
