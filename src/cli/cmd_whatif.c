/* spsim PLATFORM.xml: what-if analysis. Ranks the parallel layouts of a model on a
 * cluster by predicted step time, with memory per GPU and exposed communication. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/ops.h"
#include "spsim/step.h"
#include "spsim/step_replay.h"
#include "spsim/stepgraph.h"
#include "platform.h"
#include "sim.h"
#include "stepsim.h"
#include "whatif_sim.h"

/* Longest sequence the what-if accepts (16 Mi tokens; beyond, the cost model's
 * quadratic attention terms leave the range it was checked on). */
#define MAX_SEQ (1 << 24)
/* Most tokens in one step (2^40: far beyond any published batch, and step
 * token counts stay exact in int64 and double). */
#define MAX_STEP_TOKENS ((int64_t)1 << 40)

#define GIB (1024.0 * 1024.0 * 1024.0)
/* Most layouts whose step graph is simulated by default, and the margin above the
 * best closed form within which layouts are simulated (in closed-form order). */
#define SIMULATE_DEFAULT 64
#define SIMULATE_MARGIN 0.10
/* A numeric flag not given on the command line. */
#define UNSET_INT G_MININT
#define UNSET_DBL (-G_MAXDOUBLE)

/* ---------- collective pricing with a cache ---------- */

typedef struct {
  gboolean engine;         /* SimGrid engine, else analytic */
  gboolean step_fidelity;
  sp_analytic_net net;
  GHashTable *cache;       /* "coll/n/stride/bytes" -> double* */
  guint64 engine_calls;
} pricer;

/* One simulation per (collective, group, size grid point), cached. */
static gboolean engine_point(pricer *pr, const sp_comm *c, uint64_t bytes, double *t, GError **err)
{
  char key[96];
  g_snprintf(key, sizeof key, "%d/%d/%d/%" G_GUINT64_FORMAT, (int)c->coll, c->n, c->stride, bytes);
  double *hit = g_hash_table_lookup(pr->cache, key);
  if (hit != NULL) { *t = *hit; return TRUE; }
  gint64 t0 = g_get_monotonic_time();
  if (!sp_whatif_engine_simulate(c, pr->net.gpus_per_node, pr->step_fidelity, bytes, t, err)) return FALSE;
  pr->engine_calls++;
  if (g_getenv("SPSIM_DEBUG_PRICE"))
    fprintf(stderr, "price %s n=%d stride=%d bytes=%" G_GUINT64_FORMAT " -> %.6g s (%.3f s wall)\n", sp_coll_name(c->coll),
            c->n, c->stride, bytes, *t, (double)(g_get_monotonic_time() - t0) / 1e6);
  double *v = g_new(double, 1);
  *v = *t;
  g_hash_table_insert(pr->cache, g_strdup(key), v);
  return TRUE;
}

/* SimGrid prices sizes on a grid of powers of two and interpolates linearly between
 * them: a collective's cost is affine in its size between grid points (latency terms
 * plus bytes over bandwidth; ring chunk rounds add latency in proportion to size).
 * Above ENGINE_MAX_BYTES it extrapolates the line through the last two points, so
 * a gradient all-reduce of 100 GiB on 1,024 ranks costs two simulations of 32 and
 * 64 MiB, not one of hours. A sweep of thousands of layouts then needs a few
 * hundred simulations. */
#define ENGINE_MAX_BYTES ((uint64_t)64 << 20)

static gboolean price_cached(void *user, const sp_comm *c, double *seconds, GError **err)
{
  pricer *pr = user;
  if (!pr->engine) return sp_price_analytic(&pr->net, c, seconds, err);
  if (c->n < 2 || c->bytes == 0) { *seconds = 0.0; return TRUE; }
  uint64_t lo = 1;
  while (lo <= c->bytes / 2) lo <<= 1;
  if (lo > ENGINE_MAX_BYTES / 2) lo = ENGINE_MAX_BYTES / 2;
  if (lo == c->bytes || lo < 4096) return engine_point(pr, c, c->bytes, seconds, err);
  double tl, th;
  if (!engine_point(pr, c, lo, &tl, err) || !engine_point(pr, c, 2 * lo, &th, err)) return FALSE;
  *seconds = tl + (th - tl) * ((double)c->bytes - (double)lo) / (double)lo;
  return TRUE;
}

/* ---------- outputs: a file, or standard output for "-" ---------- */

/* Where the text report goes: standard error when an artefact is written to
 * standard output, so that `--json - | jq` reads JSON only. */
static FILE *text_out;

static gboolean write_out(const char *path, const char *flag, const GString *s, GError **err)
{
  if (strcmp(path, "-") == 0) {
    if (fwrite(s->str, 1, s->len, stdout) != s->len || fflush(stdout) != 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot write %s to standard output", flag);
      return FALSE;
    }
    return TRUE;
  }
  GError *ferr = NULL;
  if (!g_file_set_contents(path, s->str, (gssize)s->len, &ferr)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot write %s file: %s", flag, ferr->message);
    g_error_free(ferr);
    return FALSE;
  }
  return TRUE;
}

/* ---------- options ---------- */

typedef struct {
  char *model, *layout, *global_batch, *json, *trace, *svg, *fidelity, *attention, *gemm_table;
  gint64 seq;
  int mb, gpus, top, gpn;
  gboolean explain, verify, all, lenient;
  double eff_mm, eff_attn, peak_tflops, gpu_mem_gib, mem_usable;
  int corrupt_rank;  /* --debug-corrupt-rank (testing aid), -1: off */
  int simulate;      /* layouts whose step graph is simulated */
  double comm_slowdown;
} opts;

static gboolean parse_global_batch(const char *s, int64_t seq, int64_t *seqs, GError **err)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || v <= 0 || !isfinite(v)) goto bad;
  double mul = 0;
  if (*end == '\0') { *seqs = (int64_t)v; if ((double)*seqs != v) goto bad; return TRUE; }
  if (strcmp(end, "K") == 0 || strcmp(end, "k") == 0) mul = 1024.0;
  else if (strcmp(end, "M") == 0) mul = 1024.0 * 1024;
  else if (strcmp(end, "G") == 0) mul = GIB;
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

/* ---------- evaluation ---------- */

typedef struct {
  sp_step_result r;
  char *label;
} row;

/* @p t rounded to 5 significant digits. */
static double time_key(double t)
{
  if (!(t > 0) || !isfinite(t)) return t;
  double e = pow(10.0, floor(log10(t)) - 4.0);
  return (double)llround(t / e) * e;
}

static int cmp_rows(const void *a, const void *b)
{
  const row *x = a, *y = b;
  if (x->r.fits != y->r.fits) return x->r.fits ? -1 : 1;
  if (x->r.simulated != y->r.simulated) return x->r.simulated ? -1 : 1;
  /* times equal to 5 significant digits are a tie (below any prediction's accuracy):
   * the layout needing less memory first. Keys, not a tolerance, keep the order total. */
  double tx = time_key(x->r.step_time), ty = time_key(y->r.step_time);
  if (tx != ty) return tx < ty ? -1 : 1;
  if (x->r.mem.total != y->r.mem.total) return x->r.mem.total < y->r.mem.total ? -1 : 1;
  g_autofree char *sx = sp_layout_to_string(&x->r.layout);
  g_autofree char *sy = sp_layout_to_string(&y->r.layout);
  return strcmp(sx, sy);
}

static int cmp_mem(const void *a, const void *b)
{
  const row *x = a, *y = b;
  if (x->r.mem.total != y->r.mem.total) return x->r.mem.total < y->r.mem.total ? -1 : 1;
  return cmp_rows(a, b);
}

/* ---------- output ---------- */

static const char *const kind_title[SP_COMM_KIND_COUNT] = { "TP", "SP a2a", "ISP", "ring", "PP", "DP" };

static void print_table(FILE *f, const row *rows, guint n, int32_t world)
{
  fprintf(f, "%3s  %-26s %8s %6s %9s %6s %7s | %6s %6s %6s %6s %6s %6s %7s | %7s %4s\n", "#", "layout", "step s", "cf",
          "tok/s/GPU", "MFU", "TFLOP/s", "TP", "SPa2a", "ISP", "ring", "PP", "DP", "bubble", "mem GiB", "fits");
  for (guint i = 0; i < n; i++) {
    const sp_step_result *r = &rows[i].r;
    char cf[16] = "     -";
    if (r->simulated) g_snprintf(cf, sizeof cf, "%+5.0f%%", 100.0 * (r->closed_form / r->step_time - 1.0));
    fprintf(f, "%3u  %-26s %8.3f%s %6s %9.1f %5.1f%% %7.1f |", i + 1, rows[i].label, r->step_time, r->simulated ? " " : "*",
            cf, r->tokens_per_s / world, 100.0 * r->mfu, r->tflops);
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) fprintf(f, " %6.3f", r->exposed[k]);
    fprintf(f, " %7.3f | %7.1f %4s\n", r->bubble, r->mem.total / GIB, r->fits ? "yes" : "NO");
  }
  fprintf(f, "     (step: the simulated step graph; * the closed form only. cf: the closed form's difference from\n"
             "      the simulation. Exposed communication and bubble (idle compute) in seconds per step)\n");
}

static void pct(GString *s, double part, double whole)
{
  g_string_append_printf(s, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
}

/* --explain: the term that dominates the winner's step, with the overlap the
 * simulation found and without it (every collective on the critical path). */
static char *explain_terms(const row *w)
{
  const sp_step_result *r = &w->r;
  static const char *const names[SP_COMM_KIND_COUNT] = { "TP", "Ulysses all-to-all", "ISP", "ring attention", "pipeline send", "DP" };
  const char *what = "compute";
  double most = r->compute;
  if (r->bubble > most) { what = "pipeline bubble"; most = r->bubble; }
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++)
    if (r->exposed[k] > most) { what = names[k]; most = r->exposed[k]; }
  double serial = r->compute + r->bubble, hidden = 0;
  const char *swhat = "compute";
  double smost = r->compute;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    serial += r->comm[k];
    hidden += r->comm[k] - r->exposed[k];
    if (r->comm[k] > smost) { swhat = names[k]; smost = r->comm[k]; }
  }
  GString *s = g_string_new("");
  g_string_append_printf(s, "Dominant term of %s: %s, %.3f s of its %.3f s step (%.1f%%)%s. ", w->label, what, most,
                         r->step_time, 100.0 * most / r->step_time, r->simulated ? ", from the simulated step graph" : "");
  g_string_append_printf(s, "Without overlap (every collective on the critical path) the step would take %.3f s, "
                         "dominated by %s (%.3f s); overlap hides %.3f s of communication.", serial, swhat, smost, hidden);
  return g_string_free(s, FALSE);
}

/* One paragraph on why the winner wins, generated from the numbers. */
static char *explain_winner(const row *rows, guint nrows, const sp_model *m, double mem_cap, int32_t gpn, int64_t seq)
{
  const row *w = &rows[0];
  const sp_step_result *r = &w->r;
  const sp_layout *l = &r->layout;
  GString *s = g_string_new("");
  g_string_append_printf(s, "Why %s wins: compute is ", w->label);
  pct(s, r->compute, r->step_time);
  g_string_append_printf(s, " of its %.3f s step (MFU %.1f%%).", r->step_time, 100 * r->mfu);
  if (l->tp > 1) {
    g_string_append_printf(s, " tp=%d keeps the tensor-parallel %s %s (%.3f s exposed, ", l->tp,
                           l->tp_sp ? "all-gathers/reduce-scatters" : "all-reduces",
                           gpn > 0 && l->tp <= gpn ? "inside one node on NVLink" : "on the network",
                           r->exposed[SP_COMM_TP]);
    pct(s, r->exposed[SP_COMM_TP], r->step_time);
    g_string_append_printf(s, ")%s and divides the weights %d ways.", l->tp_sp ? ", with sequence parallelism splitting the activations" : "", l->tp);
  } else {
    g_string_append(s, " It uses no tensor parallelism, so no per-layer all-reduces sit on the critical path.");
  }
  if (l->sp > 1) {
    g_string_append_printf(s, " Ulysses sp=%d splits the %" G_GINT64_FORMAT "-token sequence for %.3f s of all-to-alls (", l->sp,
                           seq, r->exposed[SP_COMM_SP]);
    pct(s, r->exposed[SP_COMM_SP], r->step_time);
    g_string_append(s, ").");
  }
  if (l->cp > 1) {
    g_string_append_printf(s, " Ring attention over cp=%d hides its K/V exchange behind the attention blocks except %.3f s.", l->cp,
                           r->exposed[SP_COMM_RING]);
  }
  if (l->wp > 1) {
    g_string_append_printf(s, " ISP wp=%d shards the weights and prefetches them under compute (%.3f s exposed).", l->wp,
                           r->exposed[SP_COMM_ISP]);
  }
  if (l->pp > 1) {
    g_string_append_printf(s, " pp=%d with %" G_GINT64_FORMAT " micro-batches costs a %.1f%% bubble (%.3f s) and %.3f s of stage-to-stage sends.",
                           l->pp, r->microbatches,
                           r->simulated ? 100.0 * r->bubble / r->step_time : 100.0 * sp_step_bubble_fraction(l->pp, r->microbatches),
                           r->bubble, r->exposed[SP_COMM_PP]);
  } else {
    g_string_append(s, " Without pipeline parallelism there is no bubble.");
  }
  int32_t g = sp_layout_replicas(l) / l->wp;
  if (g > 1)
    g_string_append_printf(s, " The data-parallel %s over %d replicas overlaps the backward pass except %.3f s.",
                           l->zero >= 3 ? "parameter gathers and gradient reduce-scatters (ZeRO-3)"
                           : l->zero >= 1 ? "gradient reduce-scatter and parameter all-gather" : "gradient all-reduce",
                           g, r->exposed[SP_COMM_DP]);
  g_string_append_printf(s, " It needs %.1f GiB per GPU (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f%s) of %.1f GiB usable",
                         r->mem.total / GIB, r->mem.weights / GIB, r->mem.grads / GIB, r->mem.optim / GIB, r->mem.act / GIB,
                         l->ckpt == SP_CKPT_NONE ? "" : l->ckpt == SP_CKPT_SELECTIVE ? " with selective recomputation" : " with full recomputation",
                         mem_cap / GIB);
  g_string_append(s, r->fits ? "." : ", so it does NOT fit.");
  if (nrows > 1 && time_key(rows[1].r.step_time) == time_key(r->step_time)) {
    const sp_step_result *q = &rows[1].r;
    g_string_append_printf(s, " The runner-up, %s, ties with it (equal to 5 significant digits) and needs %.1f GiB %s per GPU.",
                           rows[1].label, fabs(q->mem.total - r->mem.total) / GIB,
                           q->mem.total >= r->mem.total ? "more" : "less");
  } else if (nrows > 1) {
    const sp_step_result *q = &rows[1].r;
    /* Name the component where the runner-up loses most. */
    double dc = q->compute - r->compute, db = q->bubble - r->bubble;
    double best = dc;
    const char *what = "compute (recomputation or less efficient splits)";
    if (db > best) { best = db; what = "pipeline bubble"; }
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
      double d = q->exposed[k] - r->exposed[k];
      if (d > best) { best = d; what = kind_title[k]; }
    }
    g_string_append_printf(s, " The runner-up, %s, is %.1f%% slower, mostly in %s (+%.3f s).", rows[1].label,
                           100.0 * (q->step_time / r->step_time - 1.0), what, best);
  }
  (void)m;
  return g_string_free(s, FALSE);
}

static void json_num(GString *s, const char *key, double v, gboolean comma)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd(buf, sizeof buf, "%.9g", v);
  g_string_append_printf(s, "\"%s\": %s%s", key, buf, comma ? ", " : "");
}

static void json_verify(GString *s, const GArray *checks, const char *layout);

static gboolean write_json(const char *path, const row *rows, guint n, const sp_model *m, const sp_step_ctx *c,
                           const sp_sweep *sw, const char *platform, const char *fidelity, const GArray *checks,
                           GError **err)
{
  GString *s = g_string_new("{\n");
  g_string_append_printf(s, "  \"platform\": \"%s\",\n  \"fidelity\": \"%s\",\n", platform, fidelity);
  g_string_append_printf(s, "  \"model\": {\"name\": \"%s\", \"layers\": %" G_GINT64_FORMAT ", \"hidden\": %" G_GINT64_FORMAT
                         ", \"heads\": %" G_GINT64_FORMAT ", \"kv_heads\": %" G_GINT64_FORMAT ", \"ffn\": %" G_GINT64_FORMAT
                         ", \"vocab\": %" G_GINT64_FORMAT ", ", m->name, m->layers, m->hidden, m->heads, m->kv_heads, m->ffn, m->vocab);
  json_num(s, "params", sp_model_params(m), FALSE);
  g_string_append(s, "},\n  ");
  g_string_append_printf(s, "\"gpus\": %d, \"gpus_per_node\": %d, \"seq\": %" G_GINT64_FORMAT ", \"global_batch\": %" G_GINT64_FORMAT ",\n  ",
                         c->world, c->gpus_per_node, c->seq, c->global_batch);
  json_num(s, "peak_flops", c->hw.gpu.peak_flops, TRUE);
  json_num(s, "hbm_bw", c->hw.gpu.hbm_bw, TRUE);
  json_num(s, "sms", c->hw.gpu.sms, TRUE);
  json_num(s, "gpu_mem_bytes", c->hw.mem_bytes, TRUE);
  json_num(s, "mem_usable", c->hw.mem_usable, TRUE);
  json_num(s, "gemm_eff", c->hw.gpu.gemm_eff, TRUE);
  gboolean fa2 = c->hw.attn == SP_ATTN_FLASH2 && c->hw.gpu.attn2_fwd_eff > 0 && c->hw.gpu.attn2_bwd_eff > 0;
  json_num(s, "attn_fwd_eff", fa2 ? c->hw.gpu.attn2_fwd_eff : c->hw.gpu.attn_fwd_eff, TRUE);
  json_num(s, "attn_bwd_eff", fa2 ? c->hw.gpu.attn2_bwd_eff : c->hw.gpu.attn_bwd_eff, TRUE);
  g_string_append_printf(s, "\"attention\": \"%s\", \"gemm_table\": %s", sp_attn_impl_name(c->hw.attn),
                         c->hw.gpu.table ? "true" : "false");
  g_string_append(s, ",\n");
  if (sw != NULL) {
    g_string_append_printf(s, "  \"considered\": %" G_GUINT64_FORMAT ", \"skipped\": {", sw->considered);
    for (int k = 1; k < SP_SKIP_COUNT; k++)
      g_string_append_printf(s, "\"%s\": %" G_GUINT64_FORMAT "%s", sp_skip_reason((sp_skip)k), sw->skipped[k], k + 1 < SP_SKIP_COUNT ? ", " : "");
    g_string_append(s, "},\n");
  }
  if (checks != NULL && n > 0) {
    g_autofree char *ls = sp_layout_to_string(&rows[0].r.layout);
    json_verify(s, checks, ls);
  }
  g_string_append(s, "  \"layouts\": [\n");
  for (guint i = 0; i < n; i++) {
    const sp_step_result *r = &rows[i].r;
    g_autofree char *ls = sp_layout_to_string(&r->layout);
    g_string_append_printf(s, "    {\"rank\": %u, \"layout\": \"%s\", \"label\": \"%s\", \"microbatches\": %" G_GINT64_FORMAT ", ",
                           i + 1, ls, rows[i].label, r->microbatches);
    json_num(s, "step_s", r->step_time, TRUE);
    json_num(s, "tokens_per_s", r->tokens_per_s, TRUE);
    json_num(s, "mfu", r->mfu, TRUE);
    json_num(s, "mfu_palm", r->mfu_palm, TRUE);
    json_num(s, "hfu", r->hfu, TRUE);
    json_num(s, "optimizer_s", r->optimizer, TRUE);
    json_num(s, "tflops_per_gpu", r->tflops, TRUE);
    json_num(s, "compute_s", r->compute, TRUE);
    json_num(s, "bubble_s", r->bubble, TRUE);
    g_string_append(s, "\"exposed_s\": {");
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) json_num(s, sp_comm_kind_name((sp_comm_kind)k), r->exposed[k], k + 1 < SP_COMM_KIND_COUNT);
    g_string_append(s, "}, \"comm_s\": {");
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) json_num(s, sp_comm_kind_name((sp_comm_kind)k), r->comm[k], k + 1 < SP_COMM_KIND_COUNT);
    g_string_append(s, "}, \"mem_bytes\": {");
    json_num(s, "weights", r->mem.weights, TRUE);
    json_num(s, "grads", r->mem.grads, TRUE);
    json_num(s, "optim", r->mem.optim, TRUE);
    json_num(s, "act", r->mem.act, TRUE);
    json_num(s, "buffers", r->mem.buffers, TRUE);
    json_num(s, "total", r->mem.total, FALSE);
    g_string_append_printf(s, "}, \"fits\": %s}%s\n", r->fits ? "true" : "false", i + 1 < n ? "," : "");
  }
  g_string_append(s, "  ]\n}\n");
  gboolean ok = write_out(path, "--json", s, err);
  g_string_free(s, TRUE);
  return ok;
}

/* ---------- --verify: the chosen layout's parallel dimensions in data mode ---------- */

/* The ranks of one check form a box of the layout's rank grid: axis i has size[i]
 * coordinates stride[i] apart (fastest first, so that local ranks 0..world-1 follow the
 * global order); the check's groups run along one axis (two for Ulysses x ring). */
#define VBOX_AXES 3
#define VERIFY_SIBLING_RANKS 64 /* sibling groups are added while the check stays this small */
#define VERIFY_ISP_PREFETCH_MAX 64 /* larger ISP degrees are checked without prefetch */
#define VERIFY_ISP_STACK_MAX 256   /* the ISP stack holds wp x wp weights on each of wp ranks */
#define VERIFY_HYBRID_MAX 256      /* Ulysses x ring: sp^2 cp concurrent all-to-all flows */

typedef struct {
  int naxes;
  int32_t size[VBOX_AXES], stride[VBOX_AXES];
} vbox;

typedef struct {
  char *name;      /* "tp-mlp-sp" */
  char *dim;       /* "tp=8" */
  int32_t degree;  /* ranks of one group (Ulysses x ring: sp x cp) */
  int32_t *group;  /* global ranks of the first group (degree entries) */
  int32_t nranks;  /* ranks simulated (the group and its siblings) */
  int32_t siblings;/* groups besides the first */
  gboolean pass;
  int32_t bad_rank;/* global */
  uint64_t bad_off;
  double sim_s;
} vcheck;

static void vcheck_clear(gpointer p)
{
  vcheck *v = p;
  g_free(v->name);
  g_free(v->dim);
  g_free(v->group);
}

static int32_t vbox_world(const vbox *b)
{
  int32_t w = 1;
  for (int i = 0; i < b->naxes; i++) w *= b->size[i];
  return w;
}

/* global rank of local rank @p l */
static int32_t vbox_global(const vbox *b, int32_t l)
{
  int32_t g = 0;
  for (int i = 0; i < b->naxes; i++) {
    g += (l % b->size[i]) * b->stride[i];
    l /= b->size[i];
  }
  return g;
}

/* groups along axis @p a: every combination of the other axes, local ranks (g_free ranks) */
static sp_groups vbox_groups(const vbox *b, int a)
{
  int32_t w = vbox_world(b), n = b->size[a], inner = 1;
  for (int i = 0; i < a; i++) inner *= b->size[i];
  sp_groups gs = { w / n, n, g_new(int32_t, w) };
  int32_t k = 0;
  for (int32_t hi = 0; hi < w / (inner * n); hi++)
    for (int32_t lo = 0; lo < inner; lo++)
      for (int32_t j = 0; j < n; j++) gs.ranks[k++] = hi * inner * n + j * inner + lo;
  return gs;
}

/* "{0..7}", "{0,8,16,24}", "{0,256,...,3840}" */
static char *ranks_text(const int32_t *r, int32_t n)
{
  GString *s = g_string_new("{");
  gboolean contiguous = TRUE;
  for (int32_t i = 1; i < n; i++) contiguous &= r[i] == r[i - 1] + 1;
  if (n > 2 && contiguous) g_string_append_printf(s, "%d..%d", r[0], r[n - 1]);
  else if (n > 8) g_string_append_printf(s, "%d,%d,...,%d", r[0], r[1], r[n - 1]);
  else
    for (int32_t i = 0; i < n; i++) g_string_append_printf(s, "%s%d", i ? "," : "", r[i]);
  g_string_append_c(s, '}');
  return g_string_free(s, FALSE);
}

static int64_t gcd64(int64_t a, int64_t b)
{
  while (b) { int64_t t = a % b; a = b; b = t; }
  return a;
}

/* Heads of the reduced attention: the KV heads per TP rank the degree sees (split: the
 * degree itself; fewer than the degree: as many, so they are replicated as in the model),
 * and query heads the least multiple of the degree keeping a GQA ratio (2) when the model
 * has one. */
static void verify_heads(const sp_model *m, const sp_layout *l, int32_t degree, int64_t *heads, int64_t *kv)
{
  int64_t hl = m->heads / l->tp, kvl = m->kv_heads % l->tp == 0 ? m->kv_heads / l->tp : 1;
  if (kvl < 1) kvl = 1;
  int64_t k = kvl % degree == 0 ? degree : kvl;
  int64_t r = hl > kvl ? 2 : 1, a = degree, b = k * r;
  *kv = k;
  *heads = a / gcd64(a, b) * b;
}

/* Build, run in data mode on the loaded platform (local rank l on the host of global rank
 * box(l)) and check one case. */
static gboolean verify_one(GArray *out, sp_check_cfg *cfg, const char *name, const vbox *box, const char *dim,
                           int32_t degree, int group_axis, int corrupt_rank, GError **err)
{
  const int32_t w = vbox_world(box);
  int32_t *map = g_new(int32_t, w);
  for (int32_t i = 0; i < w; i++) map[i] = vbox_global(box, i);
  cfg->world = w;
  vcheck v = { .name = g_strdup(sp_check_kind_name(cfg->kind, cfg->seq_parallel)), .dim = g_strdup(dim), .degree = degree,
               .nranks = w, .pass = TRUE, .bad_rank = -1 };
  if (name != NULL) {
    g_free(v.name);
    v.name = g_strdup(name);
  } else if (cfg->kind == SP_CHECK_DP) {
    g_free(v.name);
    v.name = cfg->zero == 0 ? g_strdup("dp-all-reduce") : g_strdup_printf("zero%d-step", cfg->zero);
  }
  /* the first group in global ranks: local ranks j x (product of the faster axes), also for
   * Ulysses x ring where the group axis and the next one make one sp x cp block */
  int32_t inner = 1;
  for (int i = 0; i < group_axis; i++) inner *= box->size[i];
  v.group = g_new(int32_t, degree);
  for (int32_t j = 0; j < degree; j++) v.group[j] = map[j * inner];
  v.siblings = w / degree - 1;
  sp_graph_case *c = sp_check_case_new(cfg, err);
  gboolean ok = c != NULL && sp_sim_set_host_map(map, w, err);
  if (ok) {
    sp_sim_set_compute_hook(sp_graph_case_compute, c);
    ok = sp_sim_run(sp_graph_case_progs(c), w, sp_graph_case_bufs(c), SP_FIDELITY_STEP, NULL, &v.sim_s, err);
    sp_sim_set_compute_hook(NULL, NULL);
  }
  if (ok && corrupt_rank >= 0)
    for (int32_t i = 0; i < w; i++)
      if (map[i] == corrupt_rank) sp_graph_case_corrupt(c, i);
  if (ok) {
    int32_t bad = -1;
    GError *cerr = NULL;
    v.pass = sp_graph_case_check(c, &bad, &v.bad_off, &cerr);
    if (!v.pass && cerr != NULL && !(cerr->domain == SP_ERROR && cerr->code == SP_ERROR_MISMATCH)) {
      g_propagate_error(err, cerr);
      ok = FALSE;
    } else {
      g_clear_error(&cerr);
      v.bad_rank = bad >= 0 && bad < w ? map[bad] : -1;
    }
  }
  sp_sim_set_host_map(NULL, 0, NULL);
  sp_graph_case_free(c);
  g_free(map);
  if (!ok) {
    g_prefix_error(err, "--verify: %s %s: ", v.name, dim);
    vcheck_clear(&v);
    return FALSE;
  }
  g_array_append_val(out, v);
  g_autofree char *rt = ranks_text(v.group, v.degree);
  fprintf(text_out, "verify: %s %s on ranks %s", v.name, v.dim, rt);
  if (v.siblings > 0) fprintf(text_out, " and %d sibling group%s (%d ranks)", v.siblings, v.siblings > 1 ? "s" : "", w);
  if (v.pass) fprintf(text_out, ": PASS\n");
  else fprintf(text_out, ": FAIL (first differing rank %d, offset %" G_GUINT64_FORMAT ")\n", v.bad_rank, v.bad_off);
  fflush(text_out);
  return TRUE;
}

/* Box of the group {0, stride, ..., (n-1) stride} with the sibling groups sharing its nodes
 * ({b, b + stride, ...}, b < min(stride, gpus per node), as the pricer runs them) when that
 * stays small. */
static vbox sibling_box(int32_t n, int32_t stride, int32_t gpn)
{
  vbox b = { 0 };
  int32_t nb = MIN(stride, MAX(gpn, 1));
  if ((int64_t)nb * n > VERIFY_SIBLING_RANKS) nb = 1;
  if (nb > 1) { b.size[b.naxes] = nb; b.stride[b.naxes++] = 1; }
  b.size[b.naxes] = n;
  b.stride[b.naxes++] = stride;
  return b;
}

/* Run every check of layout @p l; @p checks receives a vcheck per check. FALSE only on
 * errors (a FAIL is a result). */
static gboolean verify_layout(const sp_layout *l, const sp_model *m, int32_t gpn, int corrupt_rank, GArray *checks,
                              GError **err)
{
  char dim[64];
  if (l->tp > 1) {
    vbox b = sibling_box(l->tp, 1, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_TP_MLP, .groups = gs, .seq_parallel = l->tp_sp };
    g_snprintf(dim, sizeof dim, "tp=%d", l->tp);
    gboolean ok = verify_one(checks, &cfg, NULL, &b, dim, l->tp, b.naxes - 1, corrupt_rank, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  }
  if (l->sp > 1) {
    vbox b = sibling_box(l->sp, l->tp, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_ULYSSES, .groups = gs };
    verify_heads(m, l, l->sp, &cfg.heads, &cfg.kv_heads);
    g_snprintf(dim, sizeof dim, "sp=%d (%" G_GINT64_FORMAT " heads, %" G_GINT64_FORMAT " KV)", l->sp, cfg.heads, cfg.kv_heads);
    gboolean ok = verify_one(checks, &cfg, NULL, &b, dim, l->sp, b.naxes - 1, corrupt_rank, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  }
  if (l->cp > 1 && (l->sp == 1 || (int64_t)l->sp * l->cp > VERIFY_HYBRID_MAX)) {
    /* ring alone; a Ulysses x ring block too large for the engine is checked as its ring
     * groups (the Ulysses groups were checked above) */
    vbox b = sibling_box(l->cp, l->tp * l->sp, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_RING, .groups = gs };
    verify_heads(m, l, 1, &cfg.heads, &cfg.kv_heads);
    if (l->sp == 1) g_snprintf(dim, sizeof dim, "cp=%d", l->cp);
    else g_snprintf(dim, sizeof dim, "cp=%d (sp=%d x cp=%d hybrid: more than %d ranks)", l->cp, l->sp, l->cp, VERIFY_HYBRID_MAX);
    gboolean ok = verify_one(checks, &cfg, NULL, &b, dim, l->cp, b.naxes - 1, corrupt_rank, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  } else if (l->cp > 1) {
    /* Ulysses groups (stride tp) x ring groups (stride tp sp), with the TP siblings if small */
    vbox b = { 0 };
    int32_t nb = MIN(l->tp, MAX(gpn, 1));
    if ((int64_t)nb * l->sp * l->cp > VERIFY_SIBLING_RANKS) nb = 1;
    if (nb > 1) { b.size[b.naxes] = nb; b.stride[b.naxes++] = 1; }
    int ua = b.naxes;
    b.size[b.naxes] = l->sp; b.stride[b.naxes++] = l->tp;
    b.size[b.naxes] = l->cp; b.stride[b.naxes++] = l->tp * l->sp;
    sp_groups uly = vbox_groups(&b, ua), ring = vbox_groups(&b, ua + 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_ULYSSES_RING, .groups = uly, .groups2 = ring };
    verify_heads(m, l, l->sp, &cfg.heads, &cfg.kv_heads);
    g_snprintf(dim, sizeof dim, "sp=%d x cp=%d", l->sp, l->cp);
    gboolean ok = verify_one(checks, &cfg, NULL, &b, dim, l->sp * l->cp, ua, corrupt_rank, err);
    g_free(uly.ranks);
    g_free(ring.ranks);
    if (!ok) return FALSE;
  }
  if (l->wp > 1) {
    vbox b = sibling_box(l->wp, l->tp, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    /* prefetch uses direct collectives (wp^2 concurrent flows): the engine's cost grows
     * with the square of that, so large degrees run the same stack with ring collectives */
    sp_check_cfg cfg = { .kind = SP_CHECK_ISP, .groups = gs, .layers = 2, .prefetch = l->wp <= VERIFY_ISP_PREFETCH_MAX };
    const char *name = NULL;
    g_snprintf(dim, sizeof dim, "wp=%d (%s)", l->wp, cfg.prefetch ? "prefetch" : "ring collectives, no prefetch");
    if (l->wp > VERIFY_ISP_STACK_MAX) {
      /* the stack's square weights would need wp^3 floats: check the ISP collectives
       * (gradient reduce-scatter, weight all-gather) on flat tensors instead */
      cfg.kind = SP_CHECK_DP;
      cfg.zero = 2;
      name = "isp-weight-collectives";
      g_snprintf(dim, sizeof dim, "wp=%d (flat weights: the linear stack needs wp^3 floats)", l->wp);
    }
    gboolean ok = verify_one(checks, &cfg, name, &b, dim, l->wp, b.naxes - 1, corrupt_rank, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  }
  if (l->pp > 1) {
    vbox b = sibling_box(l->pp, l->tp * l->sp * l->cp * l->dp, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    /* Interleaved layouts run the interleaved schedule. Every chunk doubles the data
     * (exact powers of two), so pp x vpp chunks must stay below f32's range: beyond
     * 60 chunks the check runs fewer virtual stages and says so. */
    int32_t v = sp_layout_vpp(l);
    while (v > 1 && (int64_t)l->pp * v > 60) v /= 2;
    sp_check_cfg cfg = { .kind = SP_CHECK_PIPELINE, .groups = gs, .virtual_stages = v };
    if (sp_layout_vpp(l) > 1)
      g_snprintf(dim, sizeof dim, "pp=%d vpp=%d%s", l->pp, v, v != sp_layout_vpp(l) ? " (fewer: f32 range)" : "");
    else
      g_snprintf(dim, sizeof dim, "pp=%d", l->pp);
    gboolean ok = verify_one(checks, &cfg, v > 1 ? "pipeline-interleaved" : NULL, &b, dim, l->pp, b.naxes - 1, corrupt_rank, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  }
  int32_t g = sp_layout_replicas(l) / l->wp;
  if (g > 1) {
    vbox b = sibling_box(g, l->tp * l->wp, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_DP, .groups = gs, .zero = l->zero };
    if (g == l->dp && l->sp == 1 && l->cp == 1 && l->wp == 1) g_snprintf(dim, sizeof dim, "dp=%d", g);
    else g_snprintf(dim, sizeof dim, "replicas=%d (sp x cp x dp / wp)", g);
    gboolean ok = verify_one(checks, &cfg, NULL, &b, dim, g, b.naxes - 1, corrupt_rank, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  }
  return TRUE;
}

/* Elements per block of each call in the step graph's data-mode replay. */
#define VERIFY_STEP_ELEMS 16

/* The priced step graph of @p l at reduced size (one layer per chunk, pp micro-batches):
 * every collective and pipeline send of its stage representatives run with real bytes on
 * their groups, as priced (same groups, algorithms and ring channels). */
static gboolean verify_step(const sp_step_ctx *ctx, const sp_layout *l, int32_t gpn, int corrupt_rank, GArray *checks,
                            GError **err)
{
  sp_model rm;
  sp_step_ctx rc;
  sp_layout rl;
  if (!sp_step_replay_reduce(ctx, l, &rm, &rc, &rl, err)) return FALSE;
  g_autoptr(sp_stepgraph) g = sp_stepgraph_build(&rc, &rl, SP_SCHED_1F1B, err);
  if (g == NULL) return FALSE;
  g_autoptr(sp_step_replay) r = sp_step_replay_new(g, ctx->world, gpn, VERIFY_STEP_ELEMS, err);
  if (r == NULL) return FALSE;
  guint colls, sends;
  sp_step_replay_counts(r, &colls, &sends);
  vcheck v = { .name = g_strdup("step-graph"), .degree = g->stages, .nranks = sp_step_replay_nranks(r), .pass = TRUE,
               .bad_rank = -1 };
  v.dim = g_strdup_printf("%" G_GINT64_FORMAT " layer%s, %" G_GINT64_FORMAT " micro-batches: %u collectives and %u pipeline sends",
                          rm.layers, rm.layers == 1 ? "" : "s", g->microbatches, colls, sends);
  v.group = g_new(int32_t, g->stages);
  for (int32_t s = 0; s < g->stages; s++) v.group[s] = s * g->ranks_per_stage;
  gboolean ok = sp_whatif_engine_replay(r, &v.sim_s, err);
  if (ok && corrupt_rank >= 0) sp_step_replay_corrupt(r, corrupt_rank);
  if (ok) {
    guint call;
    GError *cerr = NULL;
    v.pass = sp_step_replay_check(r, &v.bad_rank, &call, &v.bad_off, &cerr);
    g_clear_error(&cerr);
  }
  if (!ok) {
    g_prefix_error(err, "--verify: the step graph: ");
    vcheck_clear(&v);
    return FALSE;
  }
  g_autofree char *rt = ranks_text(v.group, v.degree);
  fprintf(text_out, "verify: %s (%s) of the stages' ranks %s with the members of their groups (%d ranks)", v.name, v.dim,
          rt, v.nranks);
  if (v.pass) fprintf(text_out, ": PASS\n");
  else fprintf(text_out, ": FAIL (first differing rank %d, offset %" G_GUINT64_FORMAT ")\n", v.bad_rank, v.bad_off);
  fflush(text_out);
  g_array_append_val(checks, v);
  return TRUE;
}

/* The "verify" member of --json (NULL: not requested). */
static void json_verify(GString *s, const GArray *checks, const char *layout)
{
  gboolean pass = TRUE;
  for (guint i = 0; i < checks->len; i++) pass &= g_array_index(checks, vcheck, i).pass;
  g_string_append_printf(s, "  \"verify\": {\"layout\": \"%s\", \"result\": \"%s\", \"checks\": [", layout, pass ? "PASS" : "FAIL");
  for (guint i = 0; i < checks->len; i++) {
    const vcheck *v = &g_array_index(checks, vcheck, i);
    g_string_append_printf(s, "%s\n    {\"name\": \"%s\", \"dim\": \"%s\", \"degree\": %d, \"ranks\": [", i ? "," : "", v->name, v->dim, v->degree);
    for (int32_t j = 0; j < v->degree; j++) g_string_append_printf(s, "%s%d", j ? ", " : "", v->group[j]);
    g_string_append_printf(s, "], \"ranks_simulated\": %d, \"result\": \"%s\", ", v->nranks, v->pass ? "PASS" : "FAIL");
    if (!v->pass)
      g_string_append_printf(s, "\"first_bad_rank\": %d, \"first_bad_offset\": %" G_GUINT64_FORMAT ", ", v->bad_rank, v->bad_off);
    json_num(s, "simulated_s", v->sim_s, FALSE);
    g_string_append(s, "}");
  }
  g_string_append_printf(s, "%s]},\n", checks->len ? "\n  " : "");
}

static const char *const seg_color[] = { "#4e79a7", "#bab0ac", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1" };

static gboolean write_svg(const char *path, const row *rows, guint n, const sp_model *m, int32_t world, GError **err)
{
  const double left = 230, width = 620, bar = 22, gap = 10, top = 60;
  double maxt = 0;
  for (guint i = 0; i < n; i++) maxt = MAX(maxt, rows[i].r.step_time);
  if (maxt <= 0) maxt = 1;
  double height = top + n * (bar + gap) + 70;
  GString *s = g_string_new("");
  g_string_append_printf(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
                         left + width + 120, height);
  g_string_append(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  g_string_append_printf(s, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">spsim what-if: %s on %d GPUs, step time breakdown of the top %u layouts</text>\n",
                         m->name, world, n);
  const char *names[] = { "compute", "bubble", "TP", "SP a2a", "ISP", "ring", "PP", "DP" };
  for (int k = 0; k < 8; k++) {
    double x = 10 + k * 100;
    g_string_append_printf(s, "<rect x=\"%.0f\" y=\"34\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" y=\"45\">%s</text>\n",
                           x, seg_color[k], x + 16, names[k]);
  }
  for (guint i = 0; i < n; i++) {
    const sp_step_result *r = &rows[i].r;
    double y = top + i * (bar + gap);
    g_string_append_printf(s, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%u. %s%s</text>\n", left - 8, y + bar * 0.7, i + 1,
                           rows[i].label, r->fits ? "" : " (no fit)");
    double segs[8] = { r->compute, r->bubble };
    for (int k = 0; k < SP_COMM_KIND_COUNT; k++) segs[2 + k] = r->exposed[k];
    double x = left;
    for (int k = 0; k < 8; k++) {
      double w = segs[k] / maxt * width;
      if (w <= 0) continue;
      char val[G_ASCII_DTOSTR_BUF_SIZE];
      g_ascii_formatd(val, sizeof val, "%.3f", segs[k]);
      g_string_append_printf(s, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%s: %s s</title></rect>\n",
                             x, y, w, bar, seg_color[k], names[k], val);
      x += w;
    }
    g_string_append_printf(s, "<text x=\"%.2f\" y=\"%.1f\">%.3f s, MFU %.1f%%</text>\n", x + 6, y + bar * 0.7, r->step_time, 100 * r->mfu);
  }
  double ay = top + n * (bar + gap) + 5;
  g_string_append_printf(s, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", left, ay, left + width, ay);
  for (int t = 0; t <= 4; t++) {
    double x = left + width * t / 4.0;
    g_string_append_printf(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f s</text>\n",
                           x, ay, x, ay + 5, x, ay + 18, maxt * t / 4.0);
  }
  g_string_append_printf(s, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"middle\">seconds per training step (exposed communication only; overlapped transfers are hidden)</text>\n",
                         left + width / 2, ay + 36);
  g_string_append(s, "</svg>\n");
  gboolean ok = write_out(path, "--svg", s, err);
  g_string_free(s, TRUE);
  return ok;
}

/* Chrome trace of the chosen layout: one row per pipeline stage (its first rank), the
 * 1F1B schedule (interleaved when vpp > 1) simulated with the step model's
 * per-micro-batch phases. */
/* The winner's simulated step: its graph, run again with its timeline kept. */
static gboolean write_trace(const char *path, const sp_step_ctx *c, const sp_layout *l, gboolean engine, double slowdown,
                            GError **err)
{
  sp_step_result r = { 0 };
  sp_stepsim_timeline t = { 0 };
  if (!sp_step_eval(c, l, &r, err) || !sp_stepsim_eval(c, l, engine, slowdown, &r, &t, err)) return FALSE;
  gboolean ok = sp_stepgraph_write_chrome(t.g, t.start, t.end, path, err);
  sp_stepsim_timeline_clear(&t);
  return ok;
}

/* ---------- the command ---------- */

static char **model_dirs(void)
{
  GPtrArray *a = g_ptr_array_new();
  const char *env = g_getenv("SPSIM_MODELS_DIR");
  if (env && *env) g_ptr_array_add(a, g_strdup(env));
#ifdef SP_SRC_MODELS_DIR
  g_ptr_array_add(a, g_strdup(SP_SRC_MODELS_DIR));
#endif
#ifdef SP_MODELS_DIR
  g_ptr_array_add(a, g_strdup(SP_MODELS_DIR));
#endif
  const char *src = g_getenv("SPSIM_SRCDIR");
  if (src && *src) g_ptr_array_add(a, g_build_filename(src, "models", NULL));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

static void progress(guint done, guint total, gboolean tty)
{
  if (!tty || total == 0) return;
  if (done != total && done % 2048 != 0) return;
  int w = 40, f = (int)((double)done / total * w);
  fprintf(stderr, "\r[%.*s%*s] %u/%u layouts", f, "########################################", w - f, "", done, total);
  if (done == total) fputs("\r\033[K", stderr);
}

int sp_cmd_whatif(int argc, char **argv)
{
  opts o = { .seq = 8192, .mb = UNSET_INT, .top = 10, .eff_mm = -1, .eff_attn = -1, .mem_usable = -1, .corrupt_rank = -1,
             .simulate = SIMULATE_DEFAULT, .comm_slowdown = UNSET_DBL,
             .gpus = UNSET_INT, .gpn = UNSET_INT, .peak_tflops = UNSET_DBL, .gpu_mem_gib = UNSET_DBL };
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_STRING, &o.model, "built-in model name or FILE.json (default: llama3-70b from 128 GPUs, llama3-8b below)", "NAME" },
    { "seq", 's', 0, G_OPTION_ARG_INT64, &o.seq, "sequence length in tokens (default 8192)", "N" },
    { "global-batch", 'b', 0, G_OPTION_ARG_STRING, &o.global_batch, "sequences per step, or tokens with a suffix: 4M (x 2^20), 8192tok (default 1024 sequences)", "N" },
    { "micro-batch", 0, 0, G_OPTION_ARG_INT, &o.mb, "micro-batch size in sequences (default: the sweep tries 1, 2 and 4; a --layout without mb= takes 1)", "N" },
    { "layout", 'l', 0, G_OPTION_ARG_STRING, &o.layout, "evaluate one layout, e.g. tp=8,pp=4,dp=32,zero=1,ckpt=selective (default: sweep)", "SPEC" },
    { "gpus", 'g', 0, G_OPTION_ARG_INT, &o.gpus, "GPUs to use (default: every host of the platform)", "N" },
    { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &o.gpn, "GPUs per node (default: the platform's gpus_per_node property or its node zones)", "N" },
    { "top", 'k', 0, G_OPTION_ARG_INT, &o.top, "rows of the ranked table (default 10)", "K" },
    { "all", 0, 0, G_OPTION_ARG_NONE, &o.all, "rank layouts that do not fit in memory too", NULL },
    { "json", 0, 0, G_OPTION_ARG_FILENAME, &o.json, "write every evaluated layout with its breakdown", "FILE" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &o.trace, "write the winner's simulated step as a Chrome trace: every task of every stage's streams", "FILE" },
    { "simulate", 0, 0, G_OPTION_ARG_INT, &o.simulate, "simulate the step graph of the layouts within 10%% of the best closed form, at most N (default 64; 0: closed form only)", "N" },
    { "comm-slowdown", 0, 0, G_OPTION_ARG_DOUBLE, &o.comm_slowdown, "compute slowdown while a collective runs on the GPU (default: platform property comm_slowdown, else 0.189)", "F" },
    { "svg", 0, 0, G_OPTION_ARG_FILENAME, &o.svg, "write a stacked-bar chart of the top layouts", "FILE" },
    { "explain", 0, 0, G_OPTION_ARG_NONE, &o.explain, "count skipped layouts per reason, and name the winner's dominant term with and without overlap", NULL },
    { "fidelity", 0, 0, G_OPTION_ARG_STRING, &o.fidelity, "collective pricing: flow (SimGrid, default), step (SimGrid step by step), analytic", "MODE" },
    { "eff-matmul", 0, 0, G_OPTION_ARG_DOUBLE, &o.eff_mm, "fraction of peak of large GEMMs, before tile and wave quantisation (default: H100 0.75, A100 0.80)", "F" },
    { "eff-attn", 0, 0, G_OPTION_ARG_DOUBLE, &o.eff_attn, "fraction of peak of the flash-attention forward; the backward keeps its ratio to it (default: H100 0.60, A100 0.65)", "F" },
    { "attention", 0, 0, G_OPTION_ARG_STRING, &o.attention, "attention kernel: flash (fused, the GPU's best: FlashAttention-3/cuDNN on H100; default), flash2 (a FlashAttention-2-generation kernel: FA2, PyTorch SDPA's flash backend, Triton) or unfused (batched GEMMs over s^2 scores + softmax/dropout traffic)", "IMPL" },
    { "gemm-table", 0, 0, G_OPTION_ARG_FILENAME, &o.gemm_table, "measured GEMM rates replacing the GEMM model: JSON [{m,n,k,tflops}] or CSV with columns m,n,k,tflops", "FILE" },
    { "peak-tflops", 0, 0, G_OPTION_ARG_DOUBLE, &o.peak_tflops, "dense bf16 peak per GPU (default: platform host speed)", "T" },
    { "gpu-mem", 0, 0, G_OPTION_ARG_DOUBLE, &o.gpu_mem_gib, "GPU memory in GiB (default: platform property, else 80)", "GIB" },
    { "mem-usable", 0, 0, G_OPTION_ARG_DOUBLE, &o.mem_usable, "usable fraction of GPU memory (default 0.92)", "F" },
    { "verify", 0, 0, G_OPTION_ARG_NONE, &o.verify, "run the chosen layout's parallel dimensions in data mode at reduced size on the platform and report PASS/FAIL", NULL },
    { "lenient", 0, 0, G_OPTION_ARG_NONE, &o.lenient, "warn about unknown keys in the model file and unknown host properties in the platform instead of refusing them", NULL },
    { "debug-corrupt-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &o.corrupt_rank, "testing aid: corrupt an output of global rank R after each --verify run", "R" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GError *err = NULL;
  int rc = 1;
  GOptionContext *octx = g_option_context_new("PLATFORM.xml - rank the parallel layouts of a model on a cluster");
  g_option_context_add_main_entries(octx, entries, NULL);
  g_option_context_set_help_enabled(octx, TRUE);
  sp_plat_desc *pd = NULL;
  sp_gemm_table *gemm_table = NULL;
  int32_t hosts = 0;
  sp_model *model = NULL;
  sp_sweep *sw = NULL;
  GArray *rows = NULL;
  pricer pr = { 0 };
  char **dirs = model_dirs();
  char *gpu_lc = NULL, *why = NULL; /* freed at out: no g_autofree past a goto */
  GArray *checks = NULL;             /* of vcheck (--verify) */
  if (!g_option_context_parse(octx, &argc, &argv, &err)) goto out;
  if (argc != 2) {
    err = g_error_new(G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "expected exactly one platform file (got %d arguments; see spsim --help)", argc - 1);
    goto out;
  }
  const char *platform = argv[1];
  text_out = stdout;
  {
    int to_stdout = (o.json && strcmp(o.json, "-") == 0) + (o.svg && strcmp(o.svg, "-") == 0) +
                    (o.trace && strcmp(o.trace, "-") == 0);
    if (to_stdout > 1) {
      err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "only one of --json, --svg and --trace can write to standard output (-)");
      goto out;
    }
    if (to_stdout == 1) text_out = stderr; /* the report moves aside: stdout carries the artefact alone */
  }
  if (o.seq <= 0) { err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--seq must be a positive number of tokens (got %" G_GINT64_FORMAT ")", o.seq); goto out; }
  if (o.seq > MAX_SEQ) { err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--seq %" G_GINT64_FORMAT " is out of range: at most %d tokens (16 Mi) per sequence", o.seq, MAX_SEQ); goto out; }
  if (o.mb != UNSET_INT && o.mb <= 0) { err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--micro-batch must be positive (got %d)", o.mb); goto out; }
  if (o.top <= 0) { err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--top must be positive (got %d)", o.top); goto out; }
  double slowdown = -1; /* < 0: each host's comm_slowdown property, else the default */
  if (o.simulate < 0 || o.simulate > 100000) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--simulate must be between 0 and 100000 layouts (got %d)", o.simulate);
    goto out;
  }
  if (o.comm_slowdown != UNSET_DBL && !(o.comm_slowdown >= 0 && o.comm_slowdown <= 10)) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--comm-slowdown must be a fraction between 0 and 10 (got %g)", o.comm_slowdown);
    goto out;
  }
  if (o.comm_slowdown != UNSET_DBL) slowdown = o.comm_slowdown;
  /* written so that NaN fails too */
  if ((o.eff_mm != -1 && !(o.eff_mm > 0 && o.eff_mm <= 1)) || (o.eff_attn != -1 && !(o.eff_attn > 0 && o.eff_attn <= 1)) ||
      (o.mem_usable != -1 && !(o.mem_usable > 0 && o.mem_usable <= 1))) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--eff-matmul, --eff-attn and --mem-usable are fractions in (0, 1]");
    goto out;
  }
  /* positive and finite when given (written so that NaN fails too) */
  if (o.peak_tflops != UNSET_DBL && !(o.peak_tflops > 0 && o.peak_tflops < 1e6)) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--peak-tflops must be a positive TFLOP/s figure below 10^6 (got %g)",
                      o.peak_tflops);
    goto out;
  }
  if (o.gpu_mem_gib != UNSET_DBL && !(o.gpu_mem_gib > 0 && o.gpu_mem_gib < 1e6)) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--gpu-mem must be a positive number of GiB below 10^6 (got %g)",
                      o.gpu_mem_gib);
    goto out;
  }
  sp_attn_impl attn = SP_ATTN_FLASH;
  if (o.attention && !sp_attn_impl_parse(o.attention, &attn, &err)) { g_prefix_error(&err, "--attention: "); goto out; }
  if (o.gemm_table && (gemm_table = sp_gemm_table_load(o.gemm_table, &err)) == NULL) goto out;
  if ((pd = sp_plat_read(platform, &err)) == NULL) goto out;
  hosts = (int32_t)pd->names->len;
  if (pd->unknown->len > 0) {
    g_autofree char *known = g_strjoinv(", ", (char **)sp_plat_known_props);
    g_ptr_array_add(pd->unknown, NULL);
    g_autofree char *list = g_strjoinv(", ", (char **)pd->unknown->pdata);
    g_ptr_array_remove_index(pd->unknown, pd->unknown->len - 1);
    if (!o.lenient) {
      err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform '%s': unknown host property %s (spsim knows %s; "
                        "--lenient ignores unknown keys with a warning)", platform, list, known);
      goto out;
    }
    fprintf(stderr, "spsim: warning: platform '%s': ignoring unknown host properties (--lenient): %s\n", platform, list);
  }

  /* Collective pricing: the SimGrid engine when it can, else the closed form. */
  const char *fid = o.fidelity ? o.fidelity : "flow";
  if (strcmp(fid, "flow") != 0 && strcmp(fid, "step") != 0 && strcmp(fid, "analytic") != 0) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--fidelity must be flow, step or analytic (got '%s')", fid);
    goto out;
  }
  sp_analytic_net_init(&pr.net);
  pr.cache = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  pr.step_fidelity = strcmp(fid, "step") == 0;

  int32_t world = hosts;
  if (o.gpus != UNSET_INT) {
    if (o.gpus < 1 || o.gpus > hosts) {
      err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--gpus must be between 1 and the platform's %d hosts (got %d)",
                        hosts, o.gpus);
      goto out;
    }
    world = o.gpus;
  }
  if (o.gpn != UNSET_INT && o.gpn < 1) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--gpus-per-node must be at least 1 (got %d)", o.gpn);
    goto out;
  }
  int32_t gpn = sp_plat_gpus_per_node(pd, o.gpn != UNSET_INT ? o.gpn : 0, &err);
  if (gpn <= 0) goto out;
  if (gpn > world) gpn = world;
  pr.net.gpus_per_node = gpn;

  if (o.corrupt_rank < -1 || o.corrupt_rank >= world) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--debug-corrupt-rank %d is not a rank of the %d GPUs", o.corrupt_rank, world);
    goto out;
  }
  const char *mname = o.model ? o.model : world >= 128 ? "llama3-70b" : "llama3-8b";
  model = sp_model_find_flags(mname, (const char *const *)dirs, o.lenient ? SP_MODEL_LENIENT : SP_MODEL_STRICT, &err);
  if (model == NULL) goto out;
  if (model->ignored != NULL)
    fprintf(stderr, "spsim: warning: %s: ignoring unknown keys (--lenient): %s\n", mname, model->ignored);
  int64_t gb = 1024;
  if (o.global_batch && !parse_global_batch(o.global_batch, o.seq, &gb, &err)) goto out;
  if (gb > MAX_STEP_TOKENS / o.seq) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--global-batch %s is out of range: at most %" G_GINT64_FORMAT
                      " sequences of %" G_GINT64_FORMAT " tokens (2^40 tokens per step)", o.global_batch,
                      MAX_STEP_TOKENS / o.seq, o.seq);
    goto out;
  }

  /* Hardware: peak from the platform's host speed, memory from its properties. */
  sp_step_ctx ctx = { .model = model, .seq = o.seq, .global_batch = gb, .world = world, .gpus_per_node = gpn,
                      .price = price_cached, .price_user = &pr };
  sp_step_hw_init(&ctx.hw);
  gpu_lc = pd->gpu_model ? g_ascii_strdown(pd->gpu_model, -1) : NULL;
  gboolean a100 = gpu_lc && strstr(gpu_lc, "a100") != NULL;
  const char *peak_src = "default H100 SXM";
  if (a100) {
    /* DGX A100: kernel model constants (kernel_model.c), NVLink3 ~232 GB/s busbw, 8 x 200 Gb/s HDR NICs */
    sp_kernel_gpu_a100(&ctx.hw.gpu);
    pr.net.intra_busbw = 232e9;
    pr.net.nic_bw = 23e9;
    peak_src = "A100 default";
  }
  if (pd->speed >= 1e12) { ctx.hw.gpu.peak_flops = pd->speed; peak_src = "platform host speed"; }
  if (o.peak_tflops != UNSET_DBL) { ctx.hw.gpu.peak_flops = o.peak_tflops * 1e12; peak_src = "--peak-tflops"; }
  /* HBM bandwidth of the element-wise kernels, the optimizer and the GEMM roofline */
  if (pd->hbm_bw > 0) ctx.hw.gpu.hbm_bw = pd->hbm_bw;
  const char *mem_src = "default 80 GiB";
  if (pd->gpu_mem > 0) { ctx.hw.mem_bytes = pd->gpu_mem; mem_src = "platform property"; }
  if (o.gpu_mem_gib != UNSET_DBL) { ctx.hw.mem_bytes = o.gpu_mem_gib * GIB; mem_src = "--gpu-mem"; }
  if (o.eff_mm > 0) ctx.hw.gpu.gemm_eff = o.eff_mm;
  if (o.eff_attn > 0) {
    ctx.hw.gpu.attn_bwd_eff *= o.eff_attn / ctx.hw.gpu.attn_fwd_eff;
    ctx.hw.gpu.attn_fwd_eff = o.eff_attn;
    ctx.hw.gpu.attn2_bwd_eff = ctx.hw.gpu.attn_bwd_eff; /* the given rate, whichever kernel */
    ctx.hw.gpu.attn2_fwd_eff = ctx.hw.gpu.attn_fwd_eff;
  }
  ctx.hw.gpu.table = gemm_table;
  ctx.hw.attn = attn;
  if (o.mem_usable > 0) ctx.hw.mem_usable = o.mem_usable;

  sp_layout_ctx lctx = { .model = model, .world = world, .gpus_per_node = gpn, .seq = o.seq, .global_batch = gb, .mb = o.mb != UNSET_INT ? o.mb : 0 };
  rows = g_array_new(FALSE, FALSE, sizeof(row));
  GArray *cands;
  if (o.layout) {
    sp_layout l;
    if (!sp_layout_parse(o.layout, &l, &err)) goto out;
    if (sp_layout_check(&l, &lctx, &err) != SP_SKIP_NONE) goto out;
    cands = g_array_new(FALSE, FALSE, sizeof(sp_layout));
    g_array_append_val(cands, l);
  } else {
    sp_sweep_opts so;
    sp_sweep_opts_init(&so, &lctx);
    sw = sp_sweep_run(&lctx, &so);
    cands = g_array_ref(sw->layouts);
  }
  /* Everything above needs only the text of the platform; SimGrid loads it (seconds
   * on large platforms) once the request is known to be valid. */
  const char *fid_used = "analytic";
  if (strcmp(fid, "analytic") != 0) {
    GError *eerr = NULL;
    if (sp_whatif_engine_open(platform, &eerr)) {
      pr.engine = TRUE;
      fid_used = fid;
      if (sp_whatif_engine_hosts() != hosts) {
        err = g_error_new(SP_ERROR, SP_ERROR_PLATFORM, "platform '%s': SimGrid loads %d hosts where the file declares %d",
                          platform, sp_whatif_engine_hosts(), hosts);
        g_array_unref(cands);
        goto out;
      }
    } else if (eerr->domain == SP_ERROR && eerr->code == SP_ERROR_UNSUPPORTED) {
      fprintf(stderr, "spsim: note: %s; pricing collectives with the analytic model\n", eerr->message);
      g_error_free(eerr);
    } else {
      err = eerr;
      g_array_unref(cands);
      goto out;
    }
  }
  gboolean tty = isatty(2);
  for (guint i = 0; i < cands->len; i++) {
    row rw = { 0 };
    if (!sp_step_eval(&ctx, &g_array_index(cands, sp_layout, i), &rw.r, &err)) {
      g_array_unref(cands);
      goto out;
    }
    rw.label = sp_layout_label(&rw.r.layout);
    g_array_append_val(rows, rw);
    progress(i + 1, cands->len, tty);
  }
  g_array_unref(cands);
  qsort(rows->data, rows->len, sizeof(row), cmp_rows);

  /* The step graph of the layouts that may win: those whose closed form is within
   * SIMULATE_MARGIN of the best, in closed-form order; they rank above the others. */
  guint nsim = 0, ndisagree = 0;
  {
    double best = rows->len > 0 ? g_array_index(rows, row, 0).r.closed_form : 0.0;
    for (guint i = 0; i < rows->len && nsim < (guint)o.simulate; i++) {
      row *rw = &g_array_index(rows, row, i);
      if (!rw->r.fits && !o.all && nsim > 0) break;
      if (nsim > 0 && rw->r.closed_form > best * (1.0 + SIMULATE_MARGIN)) break;
      if (!sp_stepsim_eval(&ctx, &rw->r.layout, pr.engine, slowdown, &rw->r, NULL, &err)) {
        if (!g_error_matches(err, SP_ERROR, SP_ERROR_UNSUPPORTED)) goto out;
        fprintf(stderr, "spsim: note: %s: %s\n", rw->label, err->message); /* too large: closed form */
        g_clear_error(&err);
        continue;
      }
      if (fabs(rw->r.closed_form - rw->r.step_time) > 0.10 * rw->r.step_time) ndisagree++;
      nsim++;
    }
    qsort(rows->data, rows->len, sizeof(row), cmp_rows);
  }

  guint nfit = 0;
  for (guint i = 0; i < rows->len; i++) nfit += g_array_index(rows, row, i).r.fits;
  double cap = ctx.hw.mem_bytes * ctx.hw.mem_usable;

  char mbtext[48];
  if (o.mb != UNSET_INT) g_snprintf(mbtext, sizeof mbtext, "%d", o.mb);
  else if (o.layout) g_snprintf(mbtext, sizeof mbtext, "%d", g_array_index(rows, row, 0).r.layout.mb);
  else g_strlcpy(mbtext, "1, 2 or 4 (swept; --micro-batch fixes it)", sizeof mbtext);
  fprintf(text_out, "spsim what-if: %s (%.2f B parameters) on %d GPUs (%d per node), seq %" G_GINT64_FORMAT ", global batch %" G_GINT64_FORMAT
         " sequences (%.2f M tokens), micro-batch %s\n",
         model->name, sp_model_params(model) / 1e9, world, gpn, o.seq, gb, (double)gb * o.seq / 1e6, mbtext);
  fprintf(text_out, "GPU: %.1f TFLOP/s bf16 (%s), %.1f GiB (%s, %.0f%% usable); kernels: GEMM %.2f of peak with tile and wave quantisation, %s attention %.2f/%.2f%s; collectives: %s\n",
         ctx.hw.gpu.peak_flops / 1e12, peak_src, ctx.hw.mem_bytes / GIB, mem_src, 100 * ctx.hw.mem_usable, ctx.hw.gpu.gemm_eff,
         sp_attn_impl_name(ctx.hw.attn), ctx.hw.attn == SP_ATTN_FLASH2 ? ctx.hw.gpu.attn2_fwd_eff : ctx.hw.gpu.attn_fwd_eff,
         ctx.hw.attn == SP_ATTN_FLASH2 ? ctx.hw.gpu.attn2_bwd_eff : ctx.hw.gpu.attn_bwd_eff, ctx.hw.gpu.table ? " (measured GEMM table)" : "",
         strcmp(fid_used, "analytic") == 0 ? "analytic alpha-beta model" : fid_used);
  fprintf(text_out, "step graph: %u layout%s simulated (%s, compute %.1f%% slower while collectives run)%s",
          nsim, nsim == 1 ? "" : "s", pr.engine ? "SimGrid, with contention" : "without contention",
          100.0 * (slowdown >= 0 ? slowdown : SP_STEPSIM_COMM_SLOWDOWN), ndisagree ? "; " : "\n");
  if (ndisagree) fprintf(text_out, "%u differ from the closed form by more than 10%%\n", ndisagree);
  if (sw != NULL)
    fprintf(text_out, "%u layouts evaluated (%" G_GUINT64_FORMAT " candidates, %" G_GUINT64_FORMAT " skipped as invalid%s), %u fit in memory\n",
           rows->len, sw->considered, sw->considered - rows->len, o.explain ? "" : ": --explain lists why", nfit);
  if (o.explain && sw != NULL) {
    fprintf(text_out, "skipped layouts by reason:\n");
    for (int k = 1; k < SP_SKIP_COUNT; k++)
      if (sw->skipped[k] > 0) fprintf(text_out, "  %8" G_GUINT64_FORMAT "  %s\n", sw->skipped[k], sp_skip_reason((sp_skip)k));
    fprintf(text_out, "  %8u  evaluated but exceed %.1f GiB per GPU\n", rows->len - nfit, cap / GIB);
  }
  if (rows->len == 0) {
    err = g_error_new(SP_ERROR, SP_ERROR_LAYOUT, "no valid layout of %s on %d GPUs (seq %" G_GINT64_FORMAT ", global batch %" G_GINT64_FORMAT
                      "); run with --explain to see why", model->name, world, o.seq, gb);
    goto out;
  }
  fprintf(text_out, "\n");
  if (nfit == 0 && o.layout != NULL) {
    const row *r0 = &g_array_index(rows, row, 0);
    print_table(text_out, r0, 1, world);
    err = g_error_new(SP_ERROR, SP_ERROR_PLATFORM, "layout %s needs %.1f GiB per GPU, more than the %.1f GiB usable "
                      "(try ckpt=selective or full, zero=1..3, more tp or pp)", r0->label, r0->r.mem.total / GIB, cap / GIB);
    goto out;
  }
  if (nfit == 0 && !o.all) {
    qsort(rows->data, rows->len, sizeof(row), cmp_mem);
    guint k = MIN((guint)o.top, rows->len);
    fprintf(text_out, "%s does not fit in %.1f GiB per GPU with any layout; the closest layouts by memory:\n", model->name, cap / GIB);
    print_table(text_out, (row *)rows->data, k, world);
    err = g_error_new(SP_ERROR, SP_ERROR_PLATFORM, "%s cannot fit on %d GPUs of %.1f GiB: the smallest layout (%s) needs %.1f GiB per GPU; "
                      "add GPUs, shorten --seq, or use a smaller model", model->name, world, ctx.hw.mem_bytes / GIB,
                      g_array_index(rows, row, 0).label, g_array_index(rows, row, 0).r.mem.total / GIB);
    if (o.json) {
      GError *jerr = NULL;
      if (!write_json(o.json, (row *)rows->data, rows->len, model, &ctx, sw, platform, fid_used, NULL, &jerr)) g_error_free(jerr);
    }
    goto out;
  }
  guint shown = MIN((guint)o.top, o.all ? rows->len : nfit);
  print_table(text_out, (row *)rows->data, shown, world);
  why = explain_winner((row *)rows->data, MIN(shown, 2u), model, cap, gpn, o.seq);
  fprintf(text_out, "\n%s\n", why);
  if (o.explain) {
    g_autofree char *terms = explain_terms(&g_array_index(rows, row, 0));
    fprintf(text_out, "%s\n", terms);
  }
  /* A faster layout that does not fit is worth knowing about. */
  if (!o.all) {
    const row *best = &g_array_index(rows, row, 0);
    for (guint i = nfit; i < rows->len; i++) {
      const row *q = &g_array_index(rows, row, i);
      if (q->r.step_time < best->r.step_time) {
        /* name the term that overflows, so the fix (recompute, ZeRO, ...) is plain */
        const sp_step_mem *m = &q->r.mem;
        const char *what = "activations";
        double most = m->act;
        if (m->optim > most) { what = "optimizer state"; most = m->optim; }
        if (m->weights > most) { what = "weights"; most = m->weights; }
        if (m->grads > most) { what = "gradients"; most = m->grads; }
        fprintf(text_out, "(Faster but over memory: %s, %.3f s per step, needs %.1f GiB per GPU, %.1f GiB of it %s%s.)\n",
               q->label, q->r.step_time, m->total / GIB, most / GIB, what,
               m->act == most && q->r.layout.ckpt == SP_CKPT_NONE ? " kept without recomputation" : "");
        break;
      }
    }
  }
  gboolean verified = TRUE;
  if (o.verify) {
    /* the platform is loaded when the engine priced the collectives; else load it now */
    if (!pr.engine && !sp_sim_init(platform, &err)) {
      g_prefix_error(&err, "--verify needs the SimGrid engine: ");
      goto out;
    }
    const row *w0 = &g_array_index(rows, row, 0);
    checks = g_array_new(FALSE, FALSE, sizeof(vcheck));
    g_array_set_clear_func(checks, vcheck_clear);
    fprintf(text_out, "\nverify: %s in data mode on %s, reduced size (2 tokens per rank, head dim 4, hidden 8, 2 layers), same degrees\n",
           w0->label, platform);
    if (!verify_layout(&w0->r.layout, model, gpn, o.corrupt_rank, checks, &err)) goto out;
    if (!verify_step(&ctx, &w0->r.layout, gpn, o.corrupt_rank, checks, &err)) goto out;
    if (checks->len == 0) fprintf(text_out, "verify: no parallel dimension to check (one rank)\n");
    const vcheck *bad = NULL;
    for (guint i = 0; i < checks->len && bad == NULL; i++)
      if (!g_array_index(checks, vcheck, i).pass) bad = &g_array_index(checks, vcheck, i);
    if (bad == NULL) fprintf(text_out, "verify: PASS\n");
    else fprintf(text_out, "verify: FAIL (first differing rank %d, offset %" G_GUINT64_FORMAT ")\n", bad->bad_rank, bad->bad_off);
    fflush(text_out);
    verified = bad == NULL;
  }
  if (o.json && !write_json(o.json, (row *)rows->data, rows->len, model, &ctx, sw, platform, fid_used, checks, &err)) goto out;
  if (o.svg && !write_svg(o.svg, (row *)rows->data, shown, model, world, &err)) goto out;
  if (o.trace && !write_trace(o.trace, &ctx, &g_array_index(rows, row, 0).r.layout, pr.engine, slowdown, &err))
    goto out;
  rc = verified ? 0 : SP_CLI_EXIT_MISMATCH;
out:
  if (err != NULL) rc = sp_cli_fail(err);
  if (rows != NULL) {
    for (guint i = 0; i < rows->len; i++) g_free(g_array_index(rows, row, i).label);
    g_array_free(rows, TRUE);
  }
  if (checks != NULL) g_array_free(checks, TRUE);
  sp_sweep_free(sw);
  sp_model_free(model);
  sp_plat_desc_free(pd);
  sp_gemm_table_free(gemm_table);
  if (pr.cache) g_hash_table_destroy(pr.cache);
  g_strfreev(dirs);
  g_free(gpu_lc);
  g_free(why);
  g_option_context_free(octx);
  g_free(o.model); g_free(o.layout); g_free(o.global_batch); g_free(o.json); g_free(o.trace); g_free(o.svg); g_free(o.fidelity); g_free(o.attention); g_free(o.gemm_table);
  return rc;
}
