/* The what-if's report as text (spsim/whatif.h): opening lines, the ranked table,
 * why the winner wins, its dominant term, and a faster layout over memory. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/whatif.h"
#include "whatif_private.h"

#define GIB SP_WHATIF_GIB

static const char *const kind_title[SP_COMM_KIND_COUNT] = { "TP", "SP a2a", "ISP", "ring", "PP", "DP" };

/* The explanation's words for each kind (kind_title: the comparison's short titles). */
static const char *const kind_words[SP_COMM_KIND_COUNT] = { "TP", "Ulysses all-to-all", "ISP", "ring attention",
                                                            "pipeline send", "DP" };

/* Kind @p k named after what @p l runs (@p full: the explanation's words, else the short
 * title): the all-to-all kind carries Ulysses' head exchanges and the experts' dispatch
 * and combine. */
static const char *kind_label(int k, const sp_layout *l, gboolean full)
{
  if (k == SP_COMM_SP && l->ep > 1) {
    if (l->sp > 1) return full ? "Ulysses and expert all-to-alls" : "SP+EP a2a";
    return full ? "expert all-to-all" : "EP a2a";
  }
  return full ? kind_words[k] : kind_title[k];
}

char *sp_whatif_header_text(const sp_whatif_result *r, gboolean explain)
{
  const sp_step_ctx *c = &r->ctx;
  const sp_step_hw *hw = &c->hw;
  GString *s = g_string_new("");
  char mbtext[96];
  if (r->micro_batch != SP_WHATIF_UNSET_INT) g_snprintf(mbtext, sizeof mbtext, "%d", r->micro_batch);
  else if (r->one_layout && r->rows->len > 0) g_snprintf(mbtext, sizeof mbtext, "%d", sp_whatif_winner(r)->r.layout.mb);
  else if (r->mb_swept > 4)
    g_snprintf(mbtext, sizeof mbtext, "1, 2, 4 ... %d (powers of two, swept while they fit; --micro-batch fixes it)", r->mb_swept);
  else g_strlcpy(mbtext, "1, 2 or 4 (swept; --micro-batch fixes it)", sizeof mbtext);
  g_string_append_printf(s, "spsim what-if: %s (%.2f B parameters) on %d GPUs (%d per node), seq %" G_GINT64_FORMAT
                         ", global batch %" G_GINT64_FORMAT " sequences (%.2f M tokens), micro-batch %s\n",
                         r->model->name, sp_model_params(r->model) / 1e9, c->world, c->gpus_per_node, c->seq,
                         c->global_batch, (double)c->global_batch * c->seq / 1e6, mbtext);
  double afwd, abwd;
  sp_kernel_attn_eff(&hw->gpu, hw->attn, &afwd, &abwd);
  g_string_append_printf(s, "GPU: %.1f TFLOP/s bf16 (%s), %.1f GiB (%s, %.0f%% usable); kernels: GEMM %.2f of peak with tile and "
                         "wave quantisation, %s attention %.2f/%.2f%s, HBM %.2f TB/s streamed (%.2f of %.2f); collectives: %s\n",
                         hw->gpu.peak_flops / 1e12, r->peak_src, hw->mem_bytes / GIB, r->mem_src, 100 * hw->mem_usable,
                         hw->gpu.gemm_eff, sp_attn_impl_name(hw->attn),
                         afwd, abwd,
                         hw->gpu.table ? " (measured GEMM table)" : "",
                         sp_kernel_hbm_rate(&hw->gpu) / 1e12,
                         hw->gpu.hbm_bw > 0 ? sp_kernel_hbm_rate(&hw->gpu) / hw->gpu.hbm_bw : 0.0, hw->gpu.hbm_bw / 1e12,
                         strcmp(r->fidelity, "analytic") == 0 ? "analytic alpha-beta model" : r->fidelity);
  if (hw->fp8 != SP_FP8_NONE) {
    /* the tile's fixed cost, in steps of K, when the model has one */
    g_autofree char *k0 = hw->gpu.fp8_tile_k0 > 0 ? g_strdup_printf(" over K + %.0f", hw->gpu.fp8_tile_k0) : g_strdup("");
    g_string_append_printf(s, "FP8 (%s recipe): layers' linear GEMMs at %.1f TFLOP/s x %.3g%s plus FP8 casts of %.4g bytes per "
                              "element; embedding, LM head, attention, router and norms in %s\n",
                           sp_fp8_recipe_name(hw->fp8), hw->gpu.peak_flops * hw->gpu.fp8_peak_ratio / 1e12,
                           hw->gpu.fp8_gemm_eff, k0, sp_fp8_cast_bytes_per_elem(hw->fp8), sp_dtype_name(r->model->dtype));
  }
  if (r->mixed) g_string_append_printf(s, "%s\n", r->mixed);
  g_string_append_printf(s, "step graph: %u layout%s simulated (%s, compute %.1f%% slower while collectives run)%s", r->nsim,
                         r->nsim == 1 ? "" : "s", r->engine ? "SimGrid, with contention" : "without contention",
                         100.0 * (r->slowdown >= 0 ? r->slowdown : r->eng.comm_slowdown), r->ndisagree ? "; " : "\n");
  if (r->ndisagree) g_string_append_printf(s, "%u differ from the closed form by more than 10%%\n", r->ndisagree);
  if (r->tpsp_default && r->rows->len > 0)
    g_string_append_printf(s, "layout: Megatron sequence parallelism is on (tp=%d > 1 turns it on; tpsp=0 turns it off)\n",
                           sp_whatif_winner(r)->r.layout.tp);
  if (r->swept)
    g_string_append_printf(s, "%u layouts evaluated (%" G_GUINT64_FORMAT " candidates, %" G_GUINT64_FORMAT " skipped as invalid%s), %u fit in memory\n",
                           r->rows->len, r->considered, r->considered - r->rows->len, explain ? "" : ": --explain lists why", r->nfit);
  if (explain && r->swept) {
    g_string_append(s, "skipped layouts by reason:\n");
    for (int k = 1; k < SP_SKIP_COUNT; k++)
      if (r->skipped[k] > 0) g_string_append_printf(s, "  %8" G_GUINT64_FORMAT "  %s\n", r->skipped[k], sp_skip_reason((sp_skip)k));
    g_string_append_printf(s, "  %8u  evaluated but exceed %.1f GiB per GPU\n", r->rows->len - r->nfit, r->mem_cap / GIB);
  }
  return g_string_free(s, FALSE);
}

char *sp_whatif_table_text(const sp_whatif_result *res, guint n)
{
  GString *s = g_string_new("");
  int32_t world = res->ctx.world;
  n = MIN(n, sp_whatif_shown(res));
  gboolean grouped = !res->all && res->outcome == SP_WHATIF_OK;
  int lw = grouped ? 30 : 26; /* a family's label spells what varies; wider when a label needs it */
  for (guint i = 0; i < n; i++) {
    const sp_whatif_row *row = &g_array_index(res->rows, sp_whatif_row, g_array_index(res->shown, guint, i));
    const char *label = grouped ? g_array_index(res->families, sp_whatif_family, row->family).label : row->label;
    lw = MAX(lw, (int)strlen(label));
  }
  g_string_append_printf(s, "%3s  %-*s %8s %6s %9s %6s %7s | %6s %6s %6s %6s %6s %6s %7s | %7s %4s%s\n", "#", lw, "layout", "step s", "cf",
                         "tok/s/GPU", "MFU", "TFLOP/s", "TP", "SPa2a", "ISP", "ring", "PP", "DP", "bubble", "mem GiB", "fits",
                         grouped ? "  variants" : "");
  guint nvar = 0;
  for (guint i = 0; i < n; i++) {
    const sp_whatif_row *row = &g_array_index(res->rows, sp_whatif_row, g_array_index(res->shown, guint, i));
    const sp_step_result *r = &row->r;
    const sp_whatif_family *f = &g_array_index(res->families, sp_whatif_family, row->family);
    char cf[16] = "     -";
    if (r->simulated) g_snprintf(cf, sizeof cf, "%+5.0f%%", 100.0 * (r->closed_form / r->step_time - 1.0));
    g_string_append_printf(s, "%3u  %-*s %8.3f%s %6s %9.1f %5.1f%% %7.1f |", i + 1, lw, grouped ? f->label : row->label, r->step_time,
                           r->simulated ? " " : "*", cf, r->tokens_per_s / world, 100.0 * r->mfu, r->tflops);
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) g_string_append_printf(s, " %6.3f", r->exposed[k]);
    g_string_append_printf(s, " %7.3f | %7.1f %4s", r->bubble, r->mem.total / GIB, r->fits ? "yes" : "NO");
    if (grouped && f->n > 1) {
      g_string_append_printf(s, "  %u variants, %.3f-%.3f s", f->n, r->step_time, f->t_max);
      nvar++;
    }
    g_string_append_c(s, '\n');
  }
  g_string_append(s, "     (step: the simulated step graph; * the closed form only. cf: the closed form's difference from\n"
                     "      the simulation. Exposed communication and bubble (idle compute) in seconds per step;\n"
                     "      SPa2a: Ulysses' and the experts' all-to-alls)\n"
                     "     (layout: tpN tensor parallel, tpNs with Megatron sequence parallelism (tpsp), tpNso with its\n"
                     "      communication overlapped with the GEMMs (tpoverlap); spN Ulysses sequence parallel (all-to-all);\n"
                     "      cpN ring attention; wpN ISP weight parallel; ppN[vV] pipeline [V chunks];\n"
                     "      dpN data parallel, zN ZeRO stage; sel/full/op recomputation; mbN micro-batch;\n"
                     "      epN expert parallel, etpN its tensor parallel, a2aov/flex its all-to-all overlap/dispatcher)\n");
  if (nvar > 0)
    g_string_append_printf(s, "     (a row with variants is a family: layouts differing only in ISP wp or the ZeRO stage (X, or the\n"
                              "      values a/b when an earlier row has the same layout otherwise) within %.0f%% of its best, whose\n"
                              "      figures it shows; --all lists every layout)\n", 100 * SP_WHATIF_FAMILY_TOL);
  return g_string_free(s, FALSE);
}

/* The memory parts (weights, grads, optim, act, buffers) and their total in tenths of a
 * GiB, the parts rounded so that they add up to the rounded total (largest remainder):
 * a breakdown that does not add up reads as a mistake. */
static void mem_tenths(const sp_step_mem *m, int64_t t[6])
{
  const double p[5] = { m->weights, m->grads, m->optim, m->act, m->buffers };
  double frac[5];
  int64_t sum = 0;
  for (int k = 0; k < 5; k++) {
    double v = p[k] / GIB * 10.0;
    t[k] = (int64_t)floor(v);
    frac[k] = v - (double)t[k];
    sum += t[k];
  }
  t[5] = llround((p[0] + p[1] + p[2] + p[3] + p[4]) / GIB * 10.0);
  for (int64_t left = t[5] - sum; left > 0; left--) {
    int best = 0;
    for (int k = 1; k < 5; k++)
      if (frac[k] > frac[best]) best = k;
    t[best]++;
    frac[best] = -1.0;
  }
}

/* Append @p label and @p v tenths as "label 12.3". */
static void tenths(GString *s, const char *label, int64_t v)
{
  g_string_append_printf(s, "%s%" G_GINT64_FORMAT ".%d", label, v / 10, (int)(v % 10));
}

static void pct(GString *s, double part, double whole)
{
  g_string_append_printf(s, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
}

char *sp_whatif_explain_terms_text(const sp_whatif_result *res)
{
  const sp_whatif_row *w = sp_whatif_winner(res);
  if (w == NULL) return g_strdup("");
  const sp_step_result *r = &w->r;
  const char *what = "compute";
  double most = r->compute;
  if (r->bubble > most) { what = "pipeline bubble"; most = r->bubble; }
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++)
    if (r->exposed[k] > most) { what = kind_label(k, &r->layout, TRUE); most = r->exposed[k]; }
  double serial = r->compute + r->bubble, hidden = 0;
  const char *swhat = "compute";
  double smost = r->compute;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    serial += r->comm[k];
    hidden += r->comm[k] - r->exposed[k];
    if (r->comm[k] > smost) { swhat = kind_label(k, &r->layout, TRUE); smost = r->comm[k]; }
  }
  GString *s = g_string_new("");
  g_string_append_printf(s, "Dominant term of %s: %s, %.3f s of its %.3f s step (%.1f%%)%s. ", w->label, what, most,
                         r->step_time, 100.0 * most / r->step_time, r->simulated ? ", from the simulated step graph" : "");
  g_string_append_printf(s, "Without overlap (every collective on the critical path) the step would take %.3f s, "
                         "dominated by %s (%.3f s); overlap hides %.3f s of communication.", serial, swhat, smost, hidden);
  return g_string_free(s, FALSE);
}

/* The runner-up against the winner: a tie, or the component where it loses most. */
static void runner_up(GString *s, const sp_whatif_row *w, const sp_whatif_row *q)
{
  const sp_step_result *r = &w->r, *qr = &q->r;
  if (sp_whatif_time_key(qr->step_time) == sp_whatif_time_key(r->step_time)) {
    g_string_append_printf(s, " The runner-up, %s, ties with it (equal to 5 significant digits) and needs %.1f GiB %s per GPU.",
                           q->label, fabs(qr->mem.total - r->mem.total) / GIB, qr->mem.total >= r->mem.total ? "more" : "less");
    return;
  }
  double dc = qr->compute - r->compute, db = qr->bubble - r->bubble;
  double best = dc;
  const char *what = "compute (recomputation or less efficient splits)";
  if (db > best) { best = db; what = "pipeline bubble"; }
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    double d = qr->exposed[k] - r->exposed[k];
    if (d > best) { best = d; what = kind_label(k, &qr->layout, FALSE); }
  }
  g_string_append_printf(s, " The runner-up, %s, is %.1f%% slower, mostly in %s (+%.3f s).", q->label,
                         100.0 * (qr->step_time / r->step_time - 1.0), what, best);
}

char *sp_whatif_explain_text(const sp_whatif_result *res)
{
  const sp_whatif_row *w = sp_whatif_winner(res);
  if (w == NULL) return g_strdup("");
  const sp_step_result *r = &w->r;
  const sp_layout *l = &r->layout;
  int32_t gpn = res->ctx.gpus_per_node;
  GString *s = g_string_new("");
  if (res->one_layout) g_string_append_printf(s, "Layout %s: compute is ", w->label);
  else g_string_append_printf(s, "Why %s wins: compute is ", w->label);
  pct(s, r->compute, r->step_time);
  g_string_append_printf(s, " of its %.3f s step (MFU %.1f%%).", r->step_time, 100 * r->mfu);
  if (l->tp > 1) {
    g_string_append_printf(s, " tp=%d keeps the tensor-parallel %s %s (%.3f s exposed, ", l->tp,
                           l->tp_sp ? "all-gathers/reduce-scatters" : "all-reduces",
                           gpn > 0 && l->tp <= gpn ? "inside one node on NVLink" : "on the network", r->exposed[SP_COMM_TP]);
    pct(s, r->exposed[SP_COMM_TP], r->step_time);
    g_string_append_printf(s, ")%s%s and divides the weights %d ways.",
                           l->tp_sp ? ", with sequence parallelism splitting the activations," : "",
                           l->tp_overlap ? " the transfers in chunks under the GEMMs (Megatron's --tp-comm-overlap)," : "", l->tp);
  } else {
    g_string_append(s, " It uses no tensor parallelism, so no per-layer all-reduces sit on the critical path.");
  }
  if (l->sp > 1 || l->ep > 1) {
    /* Ulysses' and the experts' all-to-alls are one kind of communication */
    if (l->sp > 1)
      g_string_append_printf(s, " Ulysses sp=%d splits the %" G_GINT64_FORMAT "-token sequence", l->sp, res->ctx.seq);
    if (l->ep > 1)
      g_string_append_printf(s, "%s parallelism ep=%d holds %" G_GINT64_FORMAT " of the %" G_GINT64_FORMAT
                                " experts per GPU, its tokens dispatched and combined %s%s",
                             l->sp > 1 ? " and expert" : " Expert", l->ep, res->model->experts / l->ep, res->model->experts,
                             l->ep_flex ? "once per node over the network (dispatcher=flex)" : "by all-to-all",
                             l->a2a_overlap ? " beside the other micro-batch's compute (a2aoverlap)" : "");
    g_string_append_printf(s, ", for %.3f s of exposed all-to-alls (", r->exposed[SP_COMM_SP]);
    pct(s, r->exposed[SP_COMM_SP], r->step_time);
    g_string_append(s, ").");
  }
  if (l->cp > 1)
    g_string_append_printf(s, " Ring attention over cp=%d hides its K/V exchange behind the attention blocks except %.3f s.", l->cp,
                           r->exposed[SP_COMM_RING]);
  if (l->wp > 1)
    g_string_append_printf(s, " ISP wp=%d shards the weights and prefetches them under compute (%.3f s exposed).", l->wp,
                           r->exposed[SP_COMM_ISP]);
  if (l->pp > 1) {
    /* the schedule's shape: interleaving, its micro-batch groups, an uneven split */
    GString *shape = g_string_new("");
    if (sp_layout_vpp(l) > 1)
      g_string_append_printf(shape, "%d chunks per rank, interleaved", sp_layout_vpp(l));
    if (sp_layout_vpp(l) > 1 && l->vpp_group > 0)
      g_string_append_printf(shape, " in groups of %d micro-batches", l->vpp_group);
    if (l->pp_first > 0 || l->pp_last > 0) {
      g_string_append_printf(shape, "%s%" G_GINT64_FORMAT " layers on the first stage, %" G_GINT64_FORMAT " on the last",
                             shape->len ? "; " : "", sp_layout_layers_of_stage(l, res->model, 0),
                             sp_layout_layers_of_stage(l, res->model, l->pp - 1));
      if (l->pp > 2) g_string_append_printf(shape, ", %" G_GINT64_FORMAT " on the others", sp_layout_layers_of_stage(l, res->model, 1));
    }
    g_string_append_printf(s, " pp=%d%s%s%s with %" G_GINT64_FORMAT " micro-batches costs a %.1f%% bubble (%.3f s) and %.3f s of stage-to-stage sends.",
                           l->pp, shape->len ? " (" : "", shape->str, shape->len ? ")" : "", r->microbatches,
                           r->simulated ? 100.0 * r->bubble / r->step_time : 100.0 * sp_step_bubble_fraction(l->pp, r->microbatches),
                           r->bubble, r->exposed[SP_COMM_PP]);
    g_string_free(shape, TRUE);
  } else {
    g_string_append(s, " Without pipeline parallelism there is no bubble.");
  }
  int32_t g = sp_layout_replicas(l) / l->wp;
  if (g > 1 && l->dp_sync)
    g_string_append_printf(s, " The data-parallel %s over %d replicas runs after the backward pass (dpsync=1): %.3f s exposed.",
                           l->zero >= 3 ? "parameter gathers and gradient reduce-scatters (ZeRO-3)"
                           : l->zero >= 1 ? "gradient reduce-scatter and parameter all-gather" : "gradient all-reduce",
                           g, r->exposed[SP_COMM_DP]);
  else if (g > 1)
    g_string_append_printf(s, " The data-parallel %s over %d replicas overlaps the backward pass except %.3f s.",
                           l->zero >= 3 ? "parameter gathers and gradient reduce-scatters (ZeRO-3)"
                           : l->zero >= 1 ? "gradient reduce-scatter and parameter all-gather" : "gradient all-reduce",
                           g, r->exposed[SP_COMM_DP]);
  int64_t t[6];
  mem_tenths(&r->mem, t);
  tenths(s, " It needs ", t[5]);
  tenths(s, " GiB per GPU (weights ", t[0]);
  tenths(s, ", gradients ", t[1]);
  tenths(s, ", optimizer ", t[2]);
  tenths(s, ", activations ", t[3]);
  g_string_append(s, l->ckpt == SP_CKPT_NONE        ? ""
                    : l->ckpt == SP_CKPT_SELECTIVE ? " with selective recomputation"
                    : l->ckpt == SP_CKPT_OP        ? " with per-op recomputation (every second matmul)"
                                                   : " with full recomputation");
  if (l->ckpt == SP_CKPT_SELECTIVE && l->rmods != 0) {
    g_autofree char *rm = sp_rmods_format(l->rmods);
    g_strdelimit(rm, "+", ' ');
    g_string_append_printf(s, " (%s)", rm);
  }
  if (t[4] > 0) tenths(s, ", gather buffers ", t[4]);
  g_string_append_printf(s, ") of %.1f GiB usable", res->mem_cap / GIB);
  g_string_append(s, r->fits ? "." : ", so it does NOT fit.");
  const sp_whatif_row *q = sp_whatif_runner_up(res);
  if (q != NULL) runner_up(s, w, q);
  if (res->gemm_range[0] > 0 && res->gemm_range[1] > 0 && w == sp_whatif_winner(res))
    g_string_append_printf(s, " With a GEMM efficiency 10%% lower or higher its step would take %.2f-%.2f s "
                              "(--sensitivity: bandwidth and overlap too, and whether the winner changes).",
                           MIN(res->gemm_range[0], res->gemm_range[1]), MAX(res->gemm_range[0], res->gemm_range[1]));
  return g_string_free(s, FALSE);
}

char *sp_whatif_over_memory_text(const sp_whatif_result *res)
{
  const sp_whatif_row *best = sp_whatif_winner(res);
  if (best == NULL) return NULL;
  for (guint i = res->nfit; i < res->rows->len; i++) {
    const sp_whatif_row *q = &g_array_index(res->rows, sp_whatif_row, i);
    if (q->r.step_time < best->r.step_time) {
      /* name the term that overflows, so the fix (recompute, ZeRO, ...) is plain */
      const sp_step_mem *m = &q->r.mem;
      const char *what = "activations";
      double most = m->act;
      if (m->optim > most) { what = "optimizer state"; most = m->optim; }
      if (m->weights > most) { what = "weights"; most = m->weights; }
      if (m->grads > most) { what = "gradients"; most = m->grads; }
      return g_strdup_printf("(Faster but over memory: %s, %.3f s per step, needs %.1f GiB per GPU, %.1f GiB of it %s%s.)",
                             q->label, q->r.step_time, m->total / GIB, most / GIB, what,
                             m->act == most && q->r.layout.ckpt == SP_CKPT_NONE ? " kept without recomputation" : "");
    }
  }
  return NULL;
}
