/* --verify (spsim/whatif.h): the winner's parallel dimensions and its priced step graph
 * run in data mode at reduced size, through the engine's sp_whatif_verify_engine, each
 * checked bitwise against the reference. */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "spsim/stepgraph.h"
#include "spsim/whatif.h"
#include "whatif_private.h"

/* "PASS", or "FAIL (first differing rank R, offset O)" */
static char *result_text(const sp_whatif_check *v)
{
  if (v->pass) return g_strdup("PASS");
  return g_strdup_printf("FAIL (first differing rank %d, offset %" G_GUINT64_FORMAT ")", v->bad_rank, v->bad_off);
}

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

/* What the checks of one verification share: the result (reports), the engine, the
 * testing aid's rank, and the checks so far. */
typedef struct {
  const sp_whatif_result *res;
  const sp_whatif_verify_engine *eng;
  int corrupt_rank;
  GArray *checks;
} vrun;

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
static gboolean verify_one(vrun *vr, sp_check_cfg *cfg, const char *name, const vbox *box, const char *dim,
                           int32_t degree, int group_axis, GError **err)
{
  const int32_t w = vbox_world(box);
  int32_t *map = g_new(int32_t, w);
  for (int32_t i = 0; i < w; i++) map[i] = vbox_global(box, i);
  cfg->world = w;
  sp_whatif_check v = { .name = g_strdup(sp_check_kind_name(cfg->kind, cfg->seq_parallel)), .dim = g_strdup(dim), .degree = degree,
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
  gboolean ok = c != NULL && vr->eng->run_case(vr->eng->user, c, map, w, &v.sim_s, err);
  if (ok && vr->corrupt_rank >= 0)
    for (int32_t i = 0; i < w; i++)
      if (map[i] == vr->corrupt_rank) sp_graph_case_corrupt(c, i);
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
  sp_graph_case_free(c);
  g_free(map);
  if (!ok) {
    g_prefix_error(err, "--verify: %s %s: ", v.name, dim);
    sp_whatif_check_clear(&v);
    return FALSE;
  }
  g_array_append_val(vr->checks, v);
  g_autofree char *rt = ranks_text(v.group, v.degree);
  g_autofree char *sib = v.siblings > 0 ? g_strdup_printf(" and %d sibling group%s (%d ranks)", v.siblings, v.siblings > 1 ? "s" : "", w)
                                        : g_strdup("");
  g_autofree char *res = result_text(&v);
  sp_whatif_report(vr->res, SP_WHATIF_VERIFY, "verify: %s %s on ranks %s%s: %s", v.name, v.dim, rt, sib, res);
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

/* Run every check of layout @p l; vr->checks receives one per check. FALSE only on
 * errors (a FAIL is a result). */
static gboolean verify_layout(vrun *vr, const sp_layout *l, const sp_model *m, int32_t gpn, GError **err)
{
  char dim[64];
  if (l->tp > 1) {
    vbox b = sibling_box(l->tp, 1, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_TP_MLP, .groups = gs, .seq_parallel = l->tp_sp };
    g_snprintf(dim, sizeof dim, "tp=%d", l->tp);
    gboolean ok = verify_one(vr, &cfg, NULL, &b, dim, l->tp, b.naxes - 1, err);
    g_free(gs.ranks);
    if (!ok) return FALSE;
  }
  if (l->sp > 1) {
    vbox b = sibling_box(l->sp, l->tp, gpn);
    sp_groups gs = vbox_groups(&b, b.naxes - 1);
    sp_check_cfg cfg = { .kind = SP_CHECK_ULYSSES, .groups = gs };
    verify_heads(m, l, l->sp, &cfg.heads, &cfg.kv_heads);
    g_snprintf(dim, sizeof dim, "sp=%d (%" G_GINT64_FORMAT " heads, %" G_GINT64_FORMAT " KV)", l->sp, cfg.heads, cfg.kv_heads);
    gboolean ok = verify_one(vr, &cfg, NULL, &b, dim, l->sp, b.naxes - 1, err);
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
    gboolean ok = verify_one(vr, &cfg, NULL, &b, dim, l->cp, b.naxes - 1, err);
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
    gboolean ok = verify_one(vr, &cfg, NULL, &b, dim, l->sp * l->cp, ua, err);
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
    gboolean ok = verify_one(vr, &cfg, name, &b, dim, l->wp, b.naxes - 1, err);
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
    gboolean ok = verify_one(vr, &cfg, v > 1 ? "pipeline-interleaved" : NULL, &b, dim, l->pp, b.naxes - 1, err);
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
    gboolean ok = verify_one(vr, &cfg, NULL, &b, dim, g, b.naxes - 1, err);
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
static gboolean verify_step(vrun *vr, const sp_step_ctx *ctx, const sp_layout *l, int32_t gpn, GError **err)
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
  sp_whatif_check v = { .name = g_strdup("step-graph"), .degree = g->stages, .nranks = sp_step_replay_nranks(r), .pass = TRUE,
               .bad_rank = -1 };
  v.dim = g_strdup_printf("%" G_GINT64_FORMAT " layer%s, %" G_GINT64_FORMAT " micro-batches: %u collectives and %u pipeline sends",
                          rm.layers, rm.layers == 1 ? "" : "s", g->microbatches, colls, sends);
  v.group = g_new(int32_t, g->stages);
  for (int32_t s = 0; s < g->stages; s++) v.group[s] = s * g->ranks_per_stage;
  gboolean ok = vr->eng->run_replay(vr->eng->user, r, &v.sim_s, err);
  if (ok && vr->corrupt_rank >= 0) sp_step_replay_corrupt(r, vr->corrupt_rank);
  if (ok) {
    guint call;
    GError *cerr = NULL;
    v.pass = sp_step_replay_check(r, &v.bad_rank, &call, &v.bad_off, &cerr);
    g_clear_error(&cerr);
  }
  if (!ok) {
    g_prefix_error(err, "--verify: the step graph: ");
    sp_whatif_check_clear(&v);
    return FALSE;
  }
  g_autofree char *rt = ranks_text(v.group, v.degree);
  g_autofree char *res = result_text(&v);
  sp_whatif_report(vr->res, SP_WHATIF_VERIFY, "verify: %s (%s) of the stages' ranks %s with the members of their groups (%d ranks): %s",
                   v.name, v.dim, rt, v.nranks, res);
  g_array_append_val(vr->checks, v);
  return TRUE;
}

gboolean sp_whatif_verify(sp_whatif_result *r, const sp_whatif_verify_engine *eng, GError **err)
{
  const sp_whatif_row *w0 = sp_whatif_winner(r);
  if (w0 == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--verify: no layout to verify (the what-if found none)");
    return FALSE;
  }
  if (eng == NULL || eng->run_case == NULL || eng->run_replay == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "--verify needs an engine that runs programs in data mode");
    return FALSE;
  }
  if (eng->prepare != NULL && !eng->prepare(eng->user, err)) return FALSE;
  if (r->checks != NULL) g_array_free(r->checks, TRUE);
  r->checks = sp_whatif_checks_new();
  vrun vr = { .res = r, .eng = eng, .corrupt_rank = r->corrupt_rank, .checks = r->checks };
  int32_t gpn = r->ctx.gpus_per_node;
  sp_whatif_report(r, SP_WHATIF_VERIFY, "\nverify: %s in data mode on %s, reduced size (2 tokens per rank, head dim 4, hidden 8, "
                   "2 layers), same degrees", w0->label, r->platform);
  if (!verify_layout(&vr, &w0->r.layout, r->model, gpn, err)) return FALSE;
  if (!verify_step(&vr, &r->ctx, &w0->r.layout, gpn, err)) return FALSE;
  if (r->checks->len == 0) sp_whatif_report(r, SP_WHATIF_VERIFY, "verify: no parallel dimension to check (one rank)");
  const sp_whatif_check *bad = NULL;
  for (guint i = 0; i < r->checks->len && bad == NULL; i++)
    if (!g_array_index(r->checks, sp_whatif_check, i).pass) bad = &g_array_index(r->checks, sp_whatif_check, i);
  r->verified = bad == NULL;
  if (bad == NULL) sp_whatif_report(r, SP_WHATIF_VERIFY, "verify: PASS");
  else sp_whatif_report(r, SP_WHATIF_VERIFY, "verify: FAIL (first differing rank %d, offset %" G_GUINT64_FORMAT ")", bad->bad_rank,
                        bad->bad_off);
  return TRUE;
}
