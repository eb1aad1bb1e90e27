/* What-if analysis (spsim/whatif.h): options, the request resolved against the
 * platform, evaluation of the candidates, the step graph of those that may win, and
 * the ranking. The engine comes in through sp_whatif_engine. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/whatif.h"
#include "whatif_private.h"

/* Longest sequence the what-if accepts (16 Mi tokens; beyond, the cost model's
 * quadratic attention terms leave the range it was checked on). */
#define MAX_SEQ (1 << 24)
/* Most tokens in one step (2^40: far beyond any published batch, and step
 * token counts stay exact in int64 and double). */
#define MAX_STEP_TOKENS ((int64_t)1 << 40)
/* The margin above the best closed form within which layouts are simulated (in
 * closed-form order). */
#define SIMULATE_MARGIN 0.10

void sp_whatif_opts_init(sp_whatif_opts *o)
{
  *o = (sp_whatif_opts){ .seq = 8192, .micro_batch = SP_WHATIF_UNSET_INT, .top = 10, .eff_matmul = -1, .eff_attn = -1,
                         .mem_usable = -1, .corrupt_rank = -1, .simulate = SP_WHATIF_SIMULATE_DEFAULT,
                         .comm_slowdown = SP_WHATIF_UNSET_DBL, .gpus = SP_WHATIF_UNSET_INT,
                         .gpus_per_node = SP_WHATIF_UNSET_INT, .peak_tflops = SP_WHATIF_UNSET_DBL,
                         .gpu_mem_gib = SP_WHATIF_UNSET_DBL };
}

gboolean sp_whatif_opts_check(const sp_whatif_opts *o, GError **err)
{
  if (o->seq <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--seq must be a positive number of tokens (got %" G_GINT64_FORMAT ")", o->seq);
    return FALSE;
  }
  if (o->seq > MAX_SEQ) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--seq %" G_GINT64_FORMAT " is out of range: at most %d tokens (16 Mi) per sequence",
                o->seq, MAX_SEQ);
    return FALSE;
  }
  if (o->micro_batch != SP_WHATIF_UNSET_INT && o->micro_batch <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--micro-batch must be positive (got %d)", o->micro_batch);
    return FALSE;
  }
  if (o->top <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--top must be positive (got %d)", o->top);
    return FALSE;
  }
  if (o->simulate < 0 || o->simulate > 100000) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--simulate must be between 0 and 100000 layouts (got %d)", o->simulate);
    return FALSE;
  }
  if (o->comm_slowdown != SP_WHATIF_UNSET_DBL && !(o->comm_slowdown >= 0 && o->comm_slowdown <= 10)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--comm-slowdown must be a fraction between 0 and 10 (got %g)", o->comm_slowdown);
    return FALSE;
  }
  /* written so that NaN fails too */
  if ((o->eff_matmul != -1 && !(o->eff_matmul > 0 && o->eff_matmul <= 1)) ||
      (o->eff_attn != -1 && !(o->eff_attn > 0 && o->eff_attn <= 1)) ||
      (o->mem_usable != -1 && !(o->mem_usable > 0 && o->mem_usable <= 1))) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--eff-matmul, --eff-attn and --mem-usable are fractions in (0, 1]");
    return FALSE;
  }
  if (o->peak_tflops != SP_WHATIF_UNSET_DBL && !(o->peak_tflops > 0 && o->peak_tflops < 1e6)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--peak-tflops must be a positive TFLOP/s figure below 10^6 (got %g)",
                o->peak_tflops);
    return FALSE;
  }
  if (o->gpu_mem_gib != SP_WHATIF_UNSET_DBL && !(o->gpu_mem_gib > 0 && o->gpu_mem_gib < 1e6)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--gpu-mem must be a positive number of GiB below 10^6 (got %g)",
                o->gpu_mem_gib);
    return FALSE;
  }
  sp_attn_impl attn;
  if (o->attention && !sp_attn_impl_parse(o->attention, &attn, err)) {
    g_prefix_error(err, "--attention: ");
    return FALSE;
  }
  sp_fp8_recipe fp8;
  if (o->fp8 && !sp_fp8_recipe_parse(o->fp8, &fp8, err)) {
    g_prefix_error(err, "--fp8: ");
    return FALSE;
  }
  const char *fid = o->fidelity ? o->fidelity : "flow";
  if (strcmp(fid, "flow") != 0 && strcmp(fid, "step") != 0 && strcmp(fid, "analytic") != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--fidelity must be flow, step or analytic (got '%s')", fid);
    return FALSE;
  }
  return TRUE;
}

static gboolean parse_global_batch(const char *s, int64_t seq, int64_t *seqs, GError **err)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || v <= 0 || !isfinite(v)) goto bad;
  double mul = 0;
  if (*end == '\0') { *seqs = (int64_t)v; if ((double)*seqs != v) goto bad; return TRUE; }
  if (strcmp(end, "K") == 0 || strcmp(end, "k") == 0) mul = 1024.0;
  else if (strcmp(end, "M") == 0) mul = 1024.0 * 1024;
  else if (strcmp(end, "G") == 0) mul = SP_WHATIF_GIB;
  else if (strcmp(end, "tok") == 0) mul = 1;
  else goto bad;
  double tokens = v * mul;
  if (fmod(tokens, (double)seq) != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--global-batch %s = %.0f tokens is not a multiple of --seq %" G_GINT64_FORMAT,
                s, tokens, seq);
    return FALSE;
  }
  *seqs = (int64_t)(tokens / (double)seq);
  return TRUE;
bad:
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--global-batch '%s': give sequences (1024) or tokens with a suffix (4M = 4 x 2^20 tokens, 8192tok)", s);
  return FALSE;
}

void sp_whatif_report(const sp_whatif_result *r, sp_whatif_msg kind, const char *fmt, ...)
{
  if (r->report == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *text = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  r->report(r->user, kind, text);
}

/* ---------- ranking ---------- */

static int cmp_rows(const void *a, const void *b)
{
  const sp_whatif_row *x = a, *y = b;
  if (x->r.fits != y->r.fits) return x->r.fits ? -1 : 1;
  if (x->r.simulated != y->r.simulated) return x->r.simulated ? -1 : 1;
  /* times equal to 5 significant digits are a tie (below any prediction's accuracy):
   * the layout needing less memory first. Keys, not a tolerance, keep the order total. */
  double tx = sp_whatif_time_key(x->r.step_time), ty = sp_whatif_time_key(y->r.step_time);
  if (tx != ty) return tx < ty ? -1 : 1;
  if (x->r.mem.total != y->r.mem.total) return x->r.mem.total < y->r.mem.total ? -1 : 1;
  g_autofree char *sx = sp_layout_to_string(&x->r.layout);
  g_autofree char *sy = sp_layout_to_string(&y->r.layout);
  return strcmp(sx, sy);
}

/* cmp_rows on keys computed once per row (the layout's string only on a tie, once):
 * sorting hundreds of thousands of rows otherwise formats two strings per tied
 * comparison. The order is cmp_rows': rows are permuted by their sorted keys. */
typedef struct {
  gboolean fits, simulated;
  double key, mem;
  const sp_layout *layout;
  char *str; /* sp_layout_to_string, made on the first tie */
  guint idx;
} row_key;

static const char *row_key_str(row_key *k)
{
  if (k->str == NULL) k->str = sp_layout_to_string(k->layout);
  return k->str;
}

static int cmp_keys(const void *a, const void *b)
{
  row_key *x = (row_key *)a, *y = (row_key *)b;
  if (x->fits != y->fits) return x->fits ? -1 : 1;
  if (x->simulated != y->simulated) return x->simulated ? -1 : 1;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->mem != y->mem) return x->mem < y->mem ? -1 : 1;
  return strcmp(row_key_str(x), row_key_str(y));
}

static void sort_rows(GArray *rows)
{
  guint n = rows->len;
  if (n < 2) return;
  sp_whatif_row *R = (sp_whatif_row *)(void *)rows->data;
  row_key *k = g_new(row_key, n);
  for (guint i = 0; i < n; i++)
    k[i] = (row_key){ .fits = R[i].r.fits, .simulated = R[i].r.simulated, .key = sp_whatif_time_key(R[i].r.step_time),
                      .mem = R[i].r.mem.total, .layout = &R[i].r.layout, .idx = i };
  qsort(k, n, sizeof *k, cmp_keys);
  /* row i takes row k[i].idx: permute in place, cycle by cycle (k[i].idx = n: done) */
  for (guint i = 0; i < n; i++) {
    g_free(k[i].str);
    if (k[i].idx == n || k[i].idx == i) continue;
    sp_whatif_row tmp = R[i];
    guint j = i;
    for (;;) {
      guint from = k[j].idx;
      k[j].idx = n;
      if (from == i) {
        R[j] = tmp;
        break;
      }
      R[j] = R[from];
      j = from;
    }
  }
  g_free(k);
}

static int cmp_mem(const void *a, const void *b)
{
  const sp_whatif_row *x = a, *y = b;
  if (x->r.mem.total != y->r.mem.total) return x->r.mem.total < y->r.mem.total ? -1 : 1;
  return cmp_rows(a, b);
}

/* ---------- the request resolved ---------- */

/* The step model's pricer: the engine's once it is open, else the analytic model. */
static gboolean price(void *user, const sp_comm *c, double *seconds, GError **err)
{
  sp_whatif_result *r = user;
  if (r->engine) return r->eng.price(r->eng.user, c, seconds, err);
  return sp_price_analytic(&r->net, c, seconds, err);
}

/* GPUs, GPUs per node and the model; FALSE with @p err. */
static gboolean resolve_job(sp_whatif_result *r, const sp_whatif_opts *o, const sp_whatif_platform *p, GError **err)
{
  int32_t world = p->hosts;
  if (o->gpus != SP_WHATIF_UNSET_INT) {
    if (o->gpus < 1 || o->gpus > p->hosts) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--gpus must be between 1 and the platform's %d hosts (got %d)",
                  p->hosts, o->gpus);
      return FALSE;
    }
    world = o->gpus;
  }
  if (o->gpus_per_node != SP_WHATIF_UNSET_INT && o->gpus_per_node < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--gpus-per-node must be at least 1 (got %d)", o->gpus_per_node);
    return FALSE;
  }
  if (o->gpus_per_node != SP_WHATIF_UNSET_INT && p->node_gpus > 0 && o->gpus_per_node != p->node_gpus) {
    /* the flag would price TP groups as NVLink while the platform routes them over the network */
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--gpus-per-node %d disagrees with platform '%s', whose nodes hold %d GPUs: "
                "its links decide which GPUs share NVLink; drop the flag, or describe %d-GPU nodes in the platform "
                "(spsim platform dgx --gpus-per-node %d)", o->gpus_per_node, r->platform, p->node_gpus, o->gpus_per_node,
                o->gpus_per_node);
    return FALSE;
  }
  int32_t gpn = o->gpus_per_node != SP_WHATIF_UNSET_INT ? o->gpus_per_node : p->gpus_per_node;
  if (gpn < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "platform '%s': GPUs per node unknown: give --gpus-per-node", r->platform);
    return FALSE;
  }
  if (gpn > world) gpn = world;
  sp_analytic_net_init(&r->net);
  r->net.gpus_per_node = gpn;
  if (o->corrupt_rank < -1 || o->corrupt_rank >= world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--debug-corrupt-rank %d is not a rank of the %d GPUs", o->corrupt_rank, world);
    return FALSE;
  }
  const char *mname = o->model ? o->model : world >= 128 ? "llama3-70b" : "llama3-8b";
  r->model = sp_model_find_flags(mname, o->model_dirs, o->lenient ? SP_MODEL_LENIENT : SP_MODEL_STRICT, err);
  if (r->model == NULL) return FALSE;
  if (r->model->ignored != NULL)
    sp_whatif_report(r, SP_WHATIF_WARNING, "%s: ignoring unknown keys (--lenient): %s", mname, r->model->ignored);
  int64_t gb = 1024;
  if (o->global_batch && !parse_global_batch(o->global_batch, o->seq, &gb, err)) return FALSE;
  if (gb > MAX_STEP_TOKENS / o->seq) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--global-batch %s is out of range: at most %" G_GINT64_FORMAT
                " sequences of %" G_GINT64_FORMAT " tokens (2^40 tokens per step)", o->global_batch,
                MAX_STEP_TOKENS / o->seq, o->seq);
    return FALSE;
  }
  r->ctx = (sp_step_ctx){ .model = r->model, .seq = o->seq, .global_batch = gb, .world = world, .gpus_per_node = gpn,
                          .price = price, .price_user = r };
  if (o->routing != NULL) {
    if (!sp_moe_routing_parse(o->routing, r->model->experts, &r->expert_share, err)) return FALSE;
    r->ctx.expert_share = r->expert_share;
    r->ctx.n_expert_share = r->expert_share ? r->model->experts : 0;
  }
  return TRUE;
}

/* Hardware: peak from the platform's host speed, memory from its properties, then the flags. */
static gboolean resolve_hw(sp_whatif_result *r, const sp_whatif_opts *o, const sp_whatif_platform *p, GError **err)
{
  sp_step_hw *hw = &r->ctx.hw;
  sp_step_hw_init(hw);
  /* a platform of this machine (spsim platform local) brings its measured GEMM table and
   * rates; the options win */
  const char *table = o->gemm_table ? o->gemm_table : p->measured_gemm_table;
  if (table && (r->gemm_table = sp_gemm_table_load(table, err)) == NULL) return FALSE;
  g_autofree char *gpu_lc = p->gpu_model ? g_ascii_strdown(p->gpu_model, -1) : NULL;
  r->peak_src = "default H100 SXM";
  if (gpu_lc && strstr(gpu_lc, "a100") != NULL) {
    /* DGX A100: kernel model constants (kernel_model.c), NVLink3 ~232 GB/s busbw, 8 x 200 Gb/s HDR NICs */
    sp_kernel_gpu_a100(&hw->gpu);
    r->net.intra_busbw = 232e9;
    r->net.nic_bw = 23e9;
    r->peak_src = "A100 default";
  } else if (gpu_lc && strstr(gpu_lc, "b200") != NULL) {
    /* DGX B200 and GB200: kernel model constants (kernel_model.c); NVLink5 busbw and
     * NIC as the H100 defaults scaled by the line rates (900 / 450 GB/s; same
     * 400 Gb/s NICs), derived, not measured */
    sp_kernel_gpu_b200(&hw->gpu);
    r->net.intra_busbw = 2.0 * r->net.intra_busbw;
    r->peak_src = "B200 default";
  }
  if (p->speed >= 1e12) { hw->gpu.peak_flops = p->speed; r->peak_src = "platform host speed"; }
  if (p->measured_gemm_flops > 0) {
    /* a CPU measured by spsim platform local: its GEMMs run at the measured rate (or the
     * table's), attention at its own measured rate, not a GPU's tiles and waves */
    hw->gpu.peak_flops = p->measured_gemm_flops;
    hw->gpu.gemm_eff = 1.0;
    hw->gpu.tile_k0 = 0.0; /* the measured rate is a whole GEMM's */
    hw->gpu.hbm_eff = 1.0; /* its hbm_bw is the measured streaming rate */
    hw->gpu.fp8_peak_ratio = 0.0; /* no FP8 rate measured */
    if (p->measured_attn_flops > 0) {
      /* as --eff-attn takes it: the forward at the rate, the backward in the same ratio */
      double a = MIN(1.0, p->measured_attn_flops / p->measured_gemm_flops);
      hw->gpu.attn_bwd_eff *= a / hw->gpu.attn_fwd_eff;
      hw->gpu.attn_fwd_eff = a;
      /* the backward at its own measured rate when the platform has one */
      if (p->measured_attn_bwd_flops > 0)
        hw->gpu.attn_bwd_eff = MIN(1.0, p->measured_attn_bwd_flops / p->measured_gemm_flops);
      hw->gpu.attn2_bwd_eff = hw->gpu.attn_bwd_eff;
      hw->gpu.attn2_fwd_eff = hw->gpu.attn_fwd_eff;
      hw->gpu.attn_d0_fwd = hw->gpu.attn_d0_bwd = 0.0; /* measured at the model's own head dim */
    }
    r->peak_src = "measured by spsim platform local";
  }
  if (o->peak_tflops != SP_WHATIF_UNSET_DBL) { hw->gpu.peak_flops = o->peak_tflops * 1e12; r->peak_src = "--peak-tflops"; }
  /* HBM bandwidth of the element-wise kernels, the optimizer and the GEMM roofline */
  if (p->hbm_bw > 0) hw->gpu.hbm_bw = p->hbm_bw;
  r->mem_src = "default 80 GiB";
  if (p->gpu_mem > 0) { hw->mem_bytes = p->gpu_mem; r->mem_src = "platform property"; }
  if (o->gpu_mem_gib != SP_WHATIF_UNSET_DBL) { hw->mem_bytes = o->gpu_mem_gib * SP_WHATIF_GIB; r->mem_src = "--gpu-mem"; }
  if (o->eff_matmul > 0) hw->gpu.gemm_eff = o->eff_matmul;
  if (o->eff_attn > 0) {
    hw->gpu.attn_bwd_eff *= o->eff_attn / hw->gpu.attn_fwd_eff;
    hw->gpu.attn_fwd_eff = o->eff_attn;
    hw->gpu.attn2_bwd_eff = hw->gpu.attn_bwd_eff; /* the given rate, whichever kernel */
    hw->gpu.attn2_fwd_eff = hw->gpu.attn_fwd_eff;
    hw->gpu.attn_d0_fwd = hw->gpu.attn_d0_bwd = 0.0; /* the given rate at every head dim */
  }
  hw->gpu.table = r->gemm_table;
  hw->attn = SP_ATTN_FLASH;
  if (o->attention && !sp_attn_impl_parse(o->attention, &hw->attn, err)) {
    g_prefix_error(err, "--attention: ");
    return FALSE;
  }
  if (o->mem_usable > 0) hw->mem_usable = o->mem_usable;
  hw->fp8 = SP_FP8_NONE;
  if (o->fp8 && !sp_fp8_recipe_parse(o->fp8, &hw->fp8, err)) {
    g_prefix_error(err, "--fp8: ");
    return FALSE;
  }
  sp_kernel_gpu g8;
  if (hw->fp8 != SP_FP8_NONE && !sp_kernel_gpu_fp8(&hw->gpu, &g8, err)) {
    g_prefix_error(err, "--fp8 %s on %s: ", sp_fp8_recipe_name(hw->fp8), p->gpu_model ? p->gpu_model : r->peak_src);
    return FALSE;
  }
  return TRUE;
}

/* Whether one of @p cands with micro-batch @p mb that keeps each sequence on one rank
 * (sp = cp = 1) fits in a GPU's usable memory. */
static gboolean fits_with_mb(const sp_step_ctx *c, const GArray *cands, int32_t mb)
{
  double cap = c->hw.mem_bytes * c->hw.mem_usable;
  for (guint i = 0; i < cands->len; i++) {
    const sp_layout *l = &g_array_index(cands, sp_layout, i);
    if (l->mb != mb || l->sp > 1 || l->cp > 1) continue;
    sp_step_mem mem;
    sp_step_memory(c, l, &mem);
    if (mem.total <= cap) return TRUE;
  }
  return FALSE;
}

/* The layout asked for, checked, or the sweep's valid layouts. */
static GArray *candidates(sp_whatif_result *r, const sp_whatif_opts *o, GError **err)
{
  const sp_step_ctx *c = &r->ctx;
  sp_layout_ctx lctx = { .model = r->model, .world = c->world, .gpus_per_node = c->gpus_per_node, .seq = c->seq,
                         .global_batch = c->global_batch, .mb = o->micro_batch != SP_WHATIF_UNSET_INT ? o->micro_batch : 0 };
  gboolean fp32 = FALSE;
  if (o->grad_reduce != NULL) {
    if (strcmp(o->grad_reduce, "fp32") != 0 && strcmp(o->grad_reduce, "model") != 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--grad-reduce: '%s' is not fp32 or model (the gradients reduced "
                  "in fp32 for every layout, or in the model's dtype unless a layout sets dpfp32=1)", o->grad_reduce);
      return NULL;
    }
    fp32 = strcmp(o->grad_reduce, "fp32") == 0;
  }
  if (o->layout) {
    sp_layout l;
    if (!sp_layout_parse(o->layout, &l, err)) return NULL;
    if (sp_layout_check(&l, &lctx, err) != SP_SKIP_NONE) return NULL;
    g_auto(GStrv) kv = g_strsplit(o->layout, ",", -1);
    gboolean tpsp_given = FALSE;
    for (guint i = 0; kv[i] != NULL; i++) tpsp_given |= g_str_has_prefix(g_strstrip(kv[i]), "tpsp=");
    r->tpsp_default = l.tp > 1 && !tpsp_given;
    if (fp32) l.dp_fp32 = TRUE;
    GArray *cands = g_array_new(FALSE, FALSE, sizeof(sp_layout));
    g_array_append_val(cands, l);
    return cands;
  }
  sp_sweep_opts so;
  sp_sweep_opts_init(&so, &lctx);
  sp_sweep *sw = sp_sweep_run(&lctx, &so);
  GArray *cands = sw->layouts;
  r->swept = TRUE;
  r->considered = sw->considered;
  memcpy(r->skipped, sw->skipped, sizeof r->skipped);
  g_free(sw); /* its layouts are the candidates */
  /* micro-batches larger than the sweep's 1, 2, 4, doubling while a layout of the largest
   * so far fits in memory (a larger micro-batch runs larger GEMMs and fewer passes, and
   * holds more activations), for layouts that keep each sequence on one rank: with
   * Ulysses or ring attention a larger micro-batch is the work of a smaller one on more
   * ranks, which the sweep already has */
  r->mb_swept = lctx.mb > 0 ? lctx.mb : so.max_mb;
  sp_sweep_opts whole = so;
  whole.max_sp = whole.max_cp = 1;
  for (int32_t top = so.max_mb; lctx.mb == 0 && top <= G_MAXINT32 / 2 && fits_with_mb(c, cands, top); top *= 2) {
    sp_layout_ctx more = lctx;
    more.mb = top * 2;
    sp_sweep *mw = sp_sweep_run(&more, &whole);
    gboolean any = mw->layouts->len > 0;
    g_array_append_vals(cands, mw->layouts->data, mw->layouts->len);
    r->considered += mw->considered;
    for (int k = 0; k < SP_SKIP_COUNT; k++) r->skipped[k] += mw->skipped[k];
    sp_sweep_free(mw);
    if (!any) break;
    r->mb_swept = more.mb;
  }
  for (guint i = 0; fp32 && i < cands->len; i++) g_array_index(cands, sp_layout, i).dp_fp32 = TRUE;
  return cands;
}

/* Open the engine unless pricing is analytic; an engine that cannot price this
 * platform leaves the analytic model, with a note. */
static gboolean open_engine(sp_whatif_result *r, const char *fid, GError **err)
{
  r->fidelity = "analytic";
  if (strcmp(fid, "analytic") == 0 || r->eng.open == NULL || r->eng.price == NULL) return TRUE;
  GError *eerr = NULL;
  if (r->eng.open(r->eng.user, &r->ctx, &eerr)) {
    r->engine = TRUE;
    r->fidelity = strcmp(fid, "step") == 0 ? "step" : "flow";
    return TRUE;
  }
  if (eerr->domain == SP_ERROR && eerr->code == SP_ERROR_UNSUPPORTED) {
    sp_whatif_report(r, SP_WHATIF_NOTE, "%s; pricing collectives with the analytic model", eerr->message);
    g_error_free(eerr);
    return TRUE;
  }
  g_propagate_error(err, eerr);
  return FALSE;
}

/* The step graph of the layouts that may win: those whose closed form is within
 * SIMULATE_MARGIN of the best, in closed-form order; they rank above the others.
 * Spread over processes, the runs go in rounds: the rows that would run next if each
 * ran, then the same choice again from where the round stopped, so that a layout the
 * engine refuses (SP_ERROR_UNSUPPORTED) leaves its place to the next as on one process. */
static gboolean simulate(sp_whatif_result *r, int32_t cap, sp_whatif_spread *s, GError **err)
{
  GArray *rows = r->rows;
  if (r->eng.simulate == NULL) return s == NULL || sp_whatif_spread_simulate(s, &r->eng, &r->ctx, r->engine, r->slowdown, NULL, 0, NULL, err);
  double best = rows->len > 0 ? g_array_index(rows, sp_whatif_row, 0).r.closed_form : 0.0;
  gboolean ok = TRUE;
  for (guint i = 0; ok;) {
    guint first = i, n = 0, nsim = r->nsim;
    for (; i < rows->len && nsim < (guint)cap && (s != NULL || n == 0); i++, n++, nsim++) {
      const sp_whatif_row *rw = &g_array_index(rows, sp_whatif_row, i);
      if (!rw->r.fits && !r->all && nsim > 0) break;
      if (nsim > 0 && rw->r.closed_form > best * (1.0 + SIMULATE_MARGIN)) break;
    }
    if (n == 0) break;
    GError **serr = g_new0(GError *, n);
    if (s == NULL) {
      sp_whatif_row *rw = &g_array_index(rows, sp_whatif_row, first);
      r->eng.simulate(r->eng.user, &r->ctx, &rw->r.layout, r->engine, r->slowdown, &rw->r, &serr[0]);
    } else {
      sp_step_result *res = g_new(sp_step_result, n);
      for (guint j = 0; j < n; j++) res[j] = g_array_index(rows, sp_whatif_row, first + j).r;
      ok = sp_whatif_spread_simulate(s, &r->eng, &r->ctx, r->engine, r->slowdown, res, n, serr, err);
      for (guint j = 0; j < n && ok; j++)
        if (serr[j] == NULL) g_array_index(rows, sp_whatif_row, first + j).r = res[j];
      g_free(res);
    }
    for (guint j = 0; j < n; j++) {
      sp_whatif_row *rw = &g_array_index(rows, sp_whatif_row, first + j);
      if (!ok || serr[j] == NULL) {
        if (ok && fabs(rw->r.closed_form - rw->r.step_time) > 0.10 * rw->r.step_time) r->ndisagree++;
        r->nsim += ok;
      } else if (!g_error_matches(serr[j], SP_ERROR, SP_ERROR_UNSUPPORTED)) {
        g_propagate_error(err, g_steal_pointer(&serr[j]));
        ok = FALSE;
      } else {
        sp_whatif_report(r, SP_WHATIF_NOTE, "%s: %s", rw->label, serr[j]->message); /* too large: closed form */
      }
      g_clear_error(&serr[j]);
    }
    g_free(serr);
  }
  /* the other processes wait for the next round: none */
  if (s != NULL && !sp_whatif_spread_simulate(s, &r->eng, &r->ctx, r->engine, r->slowdown, NULL, 0, NULL, ok ? err : NULL))
    ok = FALSE;
  return ok;
}

/* The winner's step time with the GEMM efficiency 10 % lower and higher, the largest
 * uncertainty of a prediction that is mostly compute (the efficiency varies by that
 * much across shapes and libraries): its step scaled by its closed form's change, as
 * --sensitivity does. Nothing with a measured GEMM table. */
static gboolean gemm_range(sp_whatif_result *r, GError **err)
{
  const sp_whatif_row *w = sp_whatif_winner(r);
  if (w == NULL || r->outcome != SP_WHATIF_OK || !w->r.fits || r->ctx.hw.gpu.table != NULL || !(w->r.closed_form > 0))
    return TRUE;
  static const double f[2] = { 0.9, 1.1 };
  for (int k = 0; k < 2; k++) {
    sp_step_ctx c = r->ctx;
    c.hw.gpu.gemm_eff = MIN(1.0, c.hw.gpu.gemm_eff * f[k]);
    sp_step_result res;
    if (!sp_step_eval(&c, &w->r.layout, &res, err)) return FALSE;
    r->gemm_range[k] = w->r.step_time * res.closed_form / w->r.closed_form;
  }
  return TRUE;
}

sp_whatif_result *sp_whatif_evaluate(const sp_whatif_opts *o, const sp_whatif_platform *p, const sp_whatif_engine *eng,
                                     GError **err)
{
  g_autoptr(sp_whatif_result) r = g_new0(sp_whatif_result, 1);
  r->platform = g_strdup(p->name ? p->name : "platform");
  r->mixed = g_strdup(p->mixed);
  r->slowdown = o->comm_slowdown != SP_WHATIF_UNSET_DBL ? o->comm_slowdown : -1;
  r->micro_batch = o->micro_batch;
  r->one_layout = o->layout != NULL;
  r->top = o->top;
  r->all = o->all;
  r->corrupt_rank = o->corrupt_rank;
  r->verified = TRUE;
  r->report = o->report;
  r->user = o->user;
  if (eng != NULL) r->eng = *eng;
  r->rows = g_array_new(FALSE, FALSE, sizeof(sp_whatif_row));
  if (!resolve_job(r, o, p, err) || !resolve_hw(r, o, p, err)) return NULL;
  g_autoptr(GArray) cands = candidates(r, o, err);
  if (cands == NULL) return NULL;
  /* everything above needs only the text of the platform; the engine loads it once
   * the request is known to be valid */
  if (!open_engine(r, o->fidelity ? o->fidelity : "flow", err)) return NULL;
  /* the closed form estimates the kernel slowdown beside collectives that the engine's
   * simulation has (the contention-free run of analytic pricing has none) */
  if (r->engine) r->ctx.hw.comm_slowdown = r->slowdown >= 0 ? r->slowdown : r->eng.comm_slowdown;
  sp_whatif_spread *s = o->spread;
  if (s != NULL) {
    /* each process its share; the others then run step graphs as rank 0 hands them out */
    gboolean ok = sp_whatif_spread_closed_form(s, &r->eng, r->engine, &r->ctx, cands, r->rows, o->progress, o->user, err);
    if (s->rank > 0) return sp_whatif_spread_follow(s, &r->eng, &r->ctx, r->engine, r->slowdown, ok ? err : NULL) && ok
                              ? g_steal_pointer(&r) : NULL;
    if (!ok) {
      sp_whatif_spread_simulate(s, &r->eng, &r->ctx, r->engine, r->slowdown, NULL, 0, NULL, NULL);
      return NULL;
    }
  }
  for (guint i = 0; s == NULL && i < cands->len; i++) {
    sp_whatif_row rw = { 0 };
    if (!sp_step_eval(&r->ctx, &g_array_index(cands, sp_layout, i), &rw.r, err)) return NULL;
    rw.label = sp_layout_label(&rw.r.layout);
    g_array_append_val(r->rows, rw);
    if (o->progress) o->progress(o->user, i + 1, cands->len);
  }
  sort_rows(r->rows);
  if (!simulate(r, o->simulate, s, err)) return NULL;
  sort_rows(r->rows);

  for (guint i = 0; i < r->rows->len; i++) r->nfit += g_array_index(r->rows, sp_whatif_row, i).r.fits;
  r->mem_cap = r->ctx.hw.mem_bytes * r->ctx.hw.mem_usable;
  if (r->rows->len == 0) r->outcome = SP_WHATIF_NONE_VALID;
  else if (r->nfit == 0 && r->one_layout) r->outcome = SP_WHATIF_LAYOUT_NO_FIT;
  else if (r->nfit == 0) {
    r->outcome = SP_WHATIF_NONE_FITS; /* --all too: the exit status says whether anything fits */
    if (!r->all) qsort(r->rows->data, r->rows->len, sizeof(sp_whatif_row), cmp_mem);
  }
  sp_whatif_group(r);
  if (!gemm_range(r, err)) return NULL;
  return g_steal_pointer(&r);
}

static void check_clear(gpointer p)
{
  sp_whatif_check *v = p;
  g_free(v->name);
  g_free(v->dim);
  g_free(v->group);
}

void sp_whatif_check_clear(sp_whatif_check *v)
{
  check_clear(v);
}

GArray *sp_whatif_checks_new(void)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(sp_whatif_check));
  g_array_set_clear_func(a, check_clear);
  return a;
}

void sp_whatif_result_free(sp_whatif_result *r)
{
  if (r == NULL) return;
  if (r->rows != NULL) {
    for (guint i = 0; i < r->rows->len; i++) g_free(g_array_index(r->rows, sp_whatif_row, i).label);
    g_array_free(r->rows, TRUE);
  }
  if (r->checks != NULL) g_array_free(r->checks, TRUE);
  if (r->families != NULL) g_array_free(r->families, TRUE);
  if (r->shown != NULL) g_array_free(r->shown, TRUE);
  if (r->engine_free != NULL) r->engine_free(r->engine_data);
  sp_gemm_table_free(r->gemm_table);
  g_free(r->expert_share);
  sp_model_free(r->model);
  g_free(r->platform);
  g_free(r->mixed);
  g_free(r);
}

gboolean sp_whatif_result_ok(const sp_whatif_result *r, GError **err)
{
  const sp_step_ctx *c = &r->ctx;
  const sp_whatif_row *r0 = sp_whatif_winner(r);
  switch (r->outcome) {
  case SP_WHATIF_OK:
    return TRUE;
  case SP_WHATIF_NONE_VALID:
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT, "no valid layout of %s on %d GPUs (seq %" G_GINT64_FORMAT ", global batch %" G_GINT64_FORMAT
                "); run with --explain to see why", r->model->name, c->world, c->seq, c->global_batch);
    return FALSE;
  case SP_WHATIF_LAYOUT_NO_FIT:
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "layout %s needs %.1f GiB per GPU, more than the %.1f GiB usable "
                "(try ckpt=selective with recompute=%s, ckpt=full, zero=%s, more tp or pp)", r0->label,
                r0->r.mem.total / SP_WHATIF_GIB, r->mem_cap / SP_WHATIF_GIB,
                sp_model_is_mla(r->model) && sp_model_is_moe(r->model) ? "mla_up_proj+layernorm+moe_act"
                : sp_model_is_moe(r->model)                            ? "layernorm+moe_act"
                                                                       : "layernorm+mlp",
                sp_model_is_moe(r->model) ? "1..2 (ZeRO-3 is not modelled for MoE)" : "1..3");
    return FALSE;
  case SP_WHATIF_NONE_FITS:
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "%s cannot fit on %d GPUs of %.1f GiB: the smallest layout (%s) needs %.1f GiB per GPU; "
                "add GPUs, shorten --seq, or use a smaller model", r->model->name, c->world, c->hw.mem_bytes / SP_WHATIF_GIB,
                r0->label, r0->r.mem.total / SP_WHATIF_GIB);
    return FALSE;
  }
  return TRUE;
}

const sp_whatif_row *sp_whatif_winner(const sp_whatif_result *r)
{
  return r->rows != NULL && r->rows->len > 0 ? &g_array_index(r->rows, sp_whatif_row, 0) : NULL;
}

guint sp_whatif_shown(const sp_whatif_result *r)
{
  return r->shown != NULL ? r->shown->len : 0;
}
