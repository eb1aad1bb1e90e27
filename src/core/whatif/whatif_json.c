/* The what-if's result as JSON (spsim/whatif.h): a json-glib document, written one
 * member group per line (sp_json_to_lines) so that line tools read it as before. */
#include "config.h"

#include <math.h>

#include "json_out.h"
#include "spsim/whatif.h"

static void key(JsonBuilder *b, const char *k)
{
  json_builder_set_member_name(b, k);
}

static void num(JsonBuilder *b, const char *k, double v)
{
  key(b, k);
  json_builder_add_double_value(b, v);
}

/* A count or a byte size: an exact integer when it is one. */
static void count(JsonBuilder *b, const char *k, double v)
{
  key(b, k);
  if (v == floor(v) && fabs(v) <= 9007199254740992.0) json_builder_add_int_value(b, (gint64)v);
  else json_builder_add_double_value(b, v);
}

static void str(JsonBuilder *b, const char *k, const char *v)
{
  key(b, k);
  json_builder_add_string_value(b, v);
}

static void integer(JsonBuilder *b, const char *k, gint64 v)
{
  key(b, k);
  json_builder_add_int_value(b, v);
}

static void boolean(JsonBuilder *b, const char *k, gboolean v)
{
  key(b, k);
  json_builder_add_boolean_value(b, v);
}

static void add_model(JsonBuilder *b, const sp_model *m)
{
  key(b, "model");
  json_builder_begin_object(b);
  str(b, "name", m->name);
  integer(b, "layers", m->layers);
  integer(b, "hidden", m->hidden);
  integer(b, "heads", m->heads);
  integer(b, "kv_heads", m->kv_heads);
  integer(b, "head_dim", sp_model_head_dim(m));
  if (m->window > 0) integer(b, "sliding_window", m->window);
  integer(b, "ffn", m->ffn);
  integer(b, "vocab", m->vocab);
  count(b, "params", sp_model_params(m));
  json_builder_end_object(b);
}

static void add_hw(JsonBuilder *b, const sp_step_ctx *c)
{
  integer(b, "gpus", c->world);
  integer(b, "gpus_per_node", c->gpus_per_node);
  integer(b, "seq", c->seq);
  integer(b, "global_batch", c->global_batch);
  num(b, "peak_flops", c->hw.gpu.peak_flops);
  num(b, "hbm_bw", c->hw.gpu.hbm_bw);
  num(b, "hbm_streamed_bw", sp_kernel_hbm_rate(&c->hw.gpu)); /* what memory-bound kernels reach */
  count(b, "sms", c->hw.gpu.sms);
  count(b, "gpu_mem_bytes", c->hw.mem_bytes);
  num(b, "mem_usable", c->hw.mem_usable);
  num(b, "gemm_eff", c->hw.gpu.gemm_eff);
  double afwd, abwd;
  sp_kernel_attn_eff(&c->hw.gpu, c->hw.attn, &afwd, &abwd);
  num(b, "attn_fwd_eff", afwd);
  num(b, "attn_bwd_eff", abwd);
  str(b, "attention", sp_attn_impl_name(c->hw.attn));
  /* the precision of the layers' linear GEMMs: the model's dtype, or fp8 with its recipe */
  str(b, "precision", c->hw.fp8 != SP_FP8_NONE ? "fp8" : sp_dtype_name(c->model->dtype));
  str(b, "fp8_recipe", sp_fp8_recipe_name(c->hw.fp8));
  if (c->hw.fp8 != SP_FP8_NONE) {
    num(b, "fp8_peak_flops", c->hw.gpu.peak_flops * c->hw.gpu.fp8_peak_ratio);
    num(b, "fp8_gemm_eff", c->hw.gpu.fp8_gemm_eff);
    num(b, "fp8_tile_k0", c->hw.gpu.fp8_tile_k0);
  }
  boolean(b, "gemm_table", c->hw.gpu.table != NULL);
}

/* The "verify" member: the winner's checks. */
static void add_verify(JsonBuilder *b, const GArray *checks, const sp_layout *l)
{
  gboolean pass = TRUE;
  for (guint i = 0; i < checks->len; i++) pass &= g_array_index(checks, sp_whatif_check, i).pass;
  g_autofree char *ls = sp_layout_to_string(l);
  key(b, "verify");
  json_builder_begin_object(b);
  str(b, "layout", ls);
  str(b, "result", pass ? "PASS" : "FAIL");
  key(b, "checks");
  json_builder_begin_array(b);
  for (guint i = 0; i < checks->len; i++) {
    const sp_whatif_check *v = &g_array_index(checks, sp_whatif_check, i);
    json_builder_begin_object(b);
    str(b, "name", v->name);
    str(b, "dim", v->dim);
    integer(b, "degree", v->degree);
    key(b, "ranks");
    json_builder_begin_array(b);
    for (int32_t j = 0; j < v->degree; j++) json_builder_add_int_value(b, v->group[j]);
    json_builder_end_array(b);
    integer(b, "ranks_simulated", v->nranks);
    str(b, "result", v->pass ? "PASS" : "FAIL");
    if (!v->pass) {
      integer(b, "first_bad_rank", v->bad_rank);
      integer(b, "first_bad_offset", (gint64)v->bad_off);
    }
    num(b, "simulated_s", v->sim_s);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
}

static void add_row(JsonBuilder *b, guint rank, const sp_whatif_row *row)
{
  const sp_step_result *r = &row->r;
  g_autofree char *ls = sp_layout_to_string(&r->layout);
  json_builder_begin_object(b);
  integer(b, "rank", rank);
  str(b, "layout", ls);
  str(b, "label", row->label);
  integer(b, "family", row->family + 1);
  integer(b, "microbatches", r->microbatches);
  num(b, "step_s", r->step_time);
  num(b, "tokens_per_s", r->tokens_per_s);
  num(b, "mfu", r->mfu);
  num(b, "mfu_palm", r->mfu_palm);
  num(b, "hfu", r->hfu);
  num(b, "optimizer_s", r->optimizer);
  num(b, "tflops_per_gpu", r->tflops);
  num(b, "compute_s", r->compute);
  num(b, "bubble_s", r->bubble);
  key(b, "exposed_s");
  json_builder_begin_object(b);
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) num(b, sp_comm_kind_name((sp_comm_kind)k), r->exposed[k]);
  json_builder_end_object(b);
  key(b, "comm_s");
  json_builder_begin_object(b);
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) num(b, sp_comm_kind_name((sp_comm_kind)k), r->comm[k]);
  json_builder_end_object(b);
  key(b, "mem_bytes");
  json_builder_begin_object(b);
  count(b, "weights", r->mem.weights);
  count(b, "grads", r->mem.grads);
  count(b, "optim", r->mem.optim);
  count(b, "act", r->mem.act);
  count(b, "buffers", r->mem.buffers);
  count(b, "total", r->mem.total);
  json_builder_end_object(b);
  boolean(b, "fits", r->fits);
  boolean(b, "simulated", r->simulated);
  json_builder_end_object(b);
}

char *sp_whatif_to_json(const sp_whatif_result *r, gsize *len)
{
  return sp_whatif_to_json_ex(r, FALSE, len);
}

char *sp_whatif_to_json_ex(const sp_whatif_result *r, gboolean summary, gsize *len)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  str(b, "platform", r->platform);
  str(b, "fidelity", r->fidelity);
  add_model(b, r->model);
  add_hw(b, &r->ctx);
  if (r->swept) {
    integer(b, "considered", (gint64)r->considered);
    key(b, "skipped");
    json_builder_begin_object(b);
    for (int k = 1; k < SP_SKIP_COUNT; k++) integer(b, sp_skip_reason((sp_skip)k), (gint64)r->skipped[k]);
    json_builder_end_object(b);
  }
  const sp_whatif_row *w = sp_whatif_winner(r);
  if (r->checks != NULL && w != NULL) add_verify(b, r->checks, &w->r.layout);
  integer(b, "layouts_total", (gint64)r->rows->len);
  key(b, "layouts");
  json_builder_begin_array(b);
  if (summary) {
    /* the rows of the table (the best of each family shown), with their global rank */
    for (guint i = 0; i < sp_whatif_shown(r); i++) {
      guint k = g_array_index(r->shown, guint, i);
      add_row(b, k + 1, &g_array_index(r->rows, sp_whatif_row, k));
    }
  } else {
    for (guint i = 0; i < r->rows->len; i++) add_row(b, i + 1, &g_array_index(r->rows, sp_whatif_row, i));
  }
  json_builder_end_array(b);
  json_builder_end_object(b);

  static const char *const lines[] = { "fidelity", "model", "gpus", "peak_flops", "considered", "verify", "layouts_total", "layouts", NULL };
  static const char *const blocks[] = { "checks", "layouts", NULL };
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  return sp_json_to_lines(root, lines, blocks, len);
}
