/* Parallel layouts: parsing, validation with reasons, and the sweep. */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/layout.h"

static const char *const ckpt_names[SP_CKPT_COUNT] = { "none", "selective", "full", "op" };

const char *sp_ckpt_name(sp_ckpt c)
{
  return (unsigned)c < SP_CKPT_COUNT ? ckpt_names[c] : "?";
}

gboolean sp_ckpt_parse(const char *s, sp_ckpt *out, GError **err)
{
  for (int i = 0; i < SP_CKPT_COUNT; i++)
    if (g_strcmp0(s, ckpt_names[i]) == 0) { *out = (sp_ckpt)i; return TRUE; }
  if (g_strcmp0(s, "sel") == 0) { *out = SP_CKPT_SELECTIVE; return TRUE; }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown checkpointing mode '%s' (none, selective, full, op)", s ? s : "");
  return FALSE;
}

static const char *const rmod_names[] = { "core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act" };
#define RMOD_COUNT ((int)G_N_ELEMENTS(rmod_names))
#define RMOD_KNOWN "modules, joined by '+': core_attn, layernorm, mla_up_proj, mlp, moe_act"

gboolean sp_rmods_parse(const char *s, uint32_t *out, GError **err)
{
  *out = 0;
  g_auto(GStrv) names = g_strsplit(s ? s : "", "+", -1);
  if (names[0] == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: recompute= names no module (" RMOD_KNOWN
                "; ckpt=none recomputes nothing)");
    return FALSE;
  }
  for (int i = 0; names[i] != NULL; i++) {
    int k = 0;
    while (k < RMOD_COUNT && strcmp(names[i], rmod_names[k]) != 0) k++;
    if (k == RMOD_COUNT || (*out & (1u << k))) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: recompute=%s: %s '%s' (" RMOD_KNOWN ")", s,
                  k == RMOD_COUNT ? "unknown module" : "repeated module", names[i]);
      return FALSE;
    }
    *out |= 1u << k;
  }
  return TRUE;
}

char *sp_rmods_format(uint32_t set)
{
  GString *g = g_string_new("");
  for (int k = 0; k < RMOD_COUNT; k++)
    if (set & (1u << k)) g_string_append_printf(g, "%s%s", g->len ? "+" : "", rmod_names[k]);
  return g_string_free(g, FALSE);
}

uint32_t sp_rmods_swept(const sp_model *m)
{
  if (m == NULL || (!sp_model_is_moe(m) && !sp_model_is_mla(m))) return 0;
  return SP_RMOD_LAYERNORM | (sp_model_is_moe(m) ? SP_RMOD_MOE_ACT : 0u) | (sp_model_is_mla(m) ? SP_RMOD_MLA_UP_PROJ : 0u);
}

uint32_t sp_layout_rmods(const sp_layout *l)
{
  if (l->ckpt != SP_CKPT_SELECTIVE) return 0;
  return l->rmods != 0 ? l->rmods : SP_RMOD_CORE_ATTN;
}

static const char *const skip_names[SP_SKIP_COUNT] = {
  "valid",
  "degrees do not multiply to the GPU count",
  "tp larger than the GPUs of a node",
  "heads not divisible by tp x sp",
  "KV heads cannot be split or replicated over tp x sp",
  "sequence not divisible by the sequence split",
  "global batch not divisible by dp x micro-batch",
  "more pipeline stages than layers allow",
  "ISP degree does not divide the replica group (or used with tp > 1)",
  "ZeRO stage not applicable (no replicas to shard over, or > 1 with ISP)",
};

const char *sp_skip_reason(sp_skip r)
{
  return (unsigned)r < SP_SKIP_COUNT ? skip_names[r] : "?";
}

void sp_layout_init(sp_layout *l)
{
  memset(l, 0, sizeof *l);
  l->tp = l->sp = l->cp = l->wp = l->pp = l->vpp = 1;
  l->dp = 0;
  l->zero = 0;
  l->ckpt = SP_CKPT_NONE;
  l->mb = 0;
}

static gboolean parse_deg(const char *key, const char *v, int32_t lo, int32_t hi, int32_t *out, GError **err)
{
  char *end = NULL;
  long long x = g_ascii_strtoll(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: %s=%s is not an integer in [%d, %d]", key, v, lo, hi);
    return FALSE;
  }
  *out = (int32_t)x;
  return TRUE;
}

gboolean sp_layout_parse(const char *s, sp_layout *out, GError **err)
{
  sp_layout l;
  sp_layout_init(&l);
  int tpsp = -1;
  uint32_t rmods = 0;
  gboolean rmods_given = FALSE;
  if (s == NULL || *s == '\0') {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "empty layout (expected e.g. tp=8,pp=4,dp=32,zero=1,ckpt=selective)");
    return FALSE;
  }
  g_auto(GStrv) parts = g_strsplit(s, ",", -1);
  for (int i = 0; parts[i] != NULL; i++) {
    char *p = g_strstrip(parts[i]);
    if (*p == '\0') continue;
    char *eq = strchr(p, '=');
    if (eq == NULL) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: '%s' is not KEY=VALUE (keys: tp, tpsp, tpoverlap, sp, cp, wp, pp, vpp, vppgroup, ppfirst, pplast, dp, dpsync, dpfp32, zero, ckpt, recompute, mb, ep, etp, a2aoverlap, dispatcher)", p);
      return FALSE;
    }
    *eq = '\0';
    const char *k = p, *v = eq + 1;
    gboolean ok;
    if (strcmp(k, "tp") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.tp, err);
    else if (strcmp(k, "sp") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.sp, err);
    else if (strcmp(k, "cp") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.cp, err);
    else if (strcmp(k, "wp") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.wp, err);
    else if (strcmp(k, "pp") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.pp, err);
    else if (strcmp(k, "vpp") == 0) ok = parse_deg(k, v, 1, 1 << 10, &l.vpp, err);
    else if (strcmp(k, "vppgroup") == 0) ok = parse_deg(k, v, 1, 1 << 24, &l.vpp_group, err);
    else if (strcmp(k, "dp") == 0) ok = parse_deg(k, v, 1, 1 << 24, &l.dp, err);
    else if (strcmp(k, "zero") == 0) ok = parse_deg(k, v, 0, 3, &l.zero, err);
    else if (strcmp(k, "mb") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.mb, err);
    else if (strcmp(k, "ep") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.ep, err);
    else if (strcmp(k, "etp") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.etp, err);
    else if (strcmp(k, "ppfirst") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.pp_first, err);
    else if (strcmp(k, "pplast") == 0) ok = parse_deg(k, v, 1, 1 << 20, &l.pp_last, err);
    else if (strcmp(k, "tpsp") == 0) {
      int32_t b = 0;
      ok = parse_deg(k, v, 0, 1, &b, err);
      tpsp = b;
    } else if (strcmp(k, "tpoverlap") == 0) {
      int32_t b = 0;
      ok = parse_deg(k, v, 0, 1, &b, err);
      l.tp_overlap = b == 1;
    } else if (strcmp(k, "dpsync") == 0) {
      int32_t b = 0;
      ok = parse_deg(k, v, 0, 1, &b, err);
      l.dp_sync = b == 1;
    } else if (strcmp(k, "dpfp32") == 0) {
      int32_t b = 0;
      ok = parse_deg(k, v, 0, 1, &b, err);
      l.dp_fp32 = b == 1;
    } else if (strcmp(k, "a2aoverlap") == 0) {
      int32_t b = 0;
      ok = parse_deg(k, v, 0, 1, &b, err);
      l.a2a_overlap = b == 1;
    } else if (strcmp(k, "dispatcher") == 0) {
      ok = strcmp(v, "alltoall") == 0 || strcmp(v, "flex") == 0;
      if (!ok)
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: dispatcher must be alltoall or flex (got '%s')", v);
      l.ep_flex = strcmp(v, "flex") == 0;
    } else if (strcmp(k, "ckpt") == 0) ok = sp_ckpt_parse(v, &l.ckpt, err);
    else if (strcmp(k, "recompute") == 0) {
      ok = sp_rmods_parse(v, &rmods, err);
      rmods_given = TRUE;
    }
    else {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: unknown key '%s' (keys: tp, tpsp, tpoverlap, sp, cp, wp, pp, vpp, vppgroup, ppfirst, pplast, dp, dpsync, dpfp32, zero, ckpt, recompute, mb, ep, etp, a2aoverlap, dispatcher)", k);
      return FALSE;
    }
    if (!ok) return FALSE;
  }
  if (tpsp == 1 && l.tp == 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: tpsp=1 (Megatron sequence parallelism) needs tp > 1");
    return FALSE;
  }
  l.tp_sp = tpsp < 0 ? l.tp > 1 : tpsp == 1;
  if (rmods_given && l.ckpt != SP_CKPT_SELECTIVE) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: recompute=... names the modules of selective recomputation; "
                "add ckpt=selective (the layout has ckpt=%s)", sp_ckpt_name(l.ckpt));
    return FALSE;
  }
  l.rmods = rmods == SP_RMOD_CORE_ATTN ? 0 : rmods; /* the default, one spelling */
  if (l.tp_overlap && (l.tp < 2 || !l.tp_sp)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "layout: tpoverlap=1 (Megatron's --tp-comm-overlap) needs tp > 1 and "
                "tpsp=1, as Megatron-LM requires sequence parallelism for it; set tp and leave tpsp at 1, or drop tpoverlap");
    return FALSE;
  }
  *out = l;
  return TRUE;
}

int32_t sp_layout_replicas(const sp_layout *l) { return l->sp * l->cp * l->dp; }

int32_t sp_layout_vpp(const sp_layout *l) { return l->vpp > 1 ? l->vpp : 1; }

int32_t sp_layout_vpp_group(const sp_layout *l) { return l->vpp_group > 0 ? l->vpp_group : l->pp; }

gboolean sp_layout_vpp_batches_ok(int32_t pp, int64_t group, int64_t m)
{
  if (group <= 0) group = pp;
  if (pp < 1 || group < pp || group > m) return FALSE;
  int64_t rest = m % group;
  return rest == 0 || rest >= pp;
}

int32_t sp_layout_ep(const sp_layout *l) { return l->ep > 1 ? l->ep : 1; }

int32_t sp_layout_etp(const sp_layout *l) { return l->etp > 0 ? l->etp : l->tp; }

int32_t sp_layout_expert_replicas(const sp_layout *l)
{
  return (int32_t)((int64_t)l->tp * sp_layout_replicas(l) / ((int64_t)sp_layout_etp(l) * sp_layout_ep(l)));
}

/* Expert parallelism (Megatron-Core's rule, megatron/core/parallel_state.py at NVIDIA/Megatron-LM
 * 00caa53: the expert RankGenerator has dp = world / (etp x ep x pp), the ep groups fold inside the
 * data-parallel x context-parallel groups). A dense model takes no ep. */
static sp_skip check_ep(sp_layout *l, const sp_layout_ctx *c, GError **err);
static sp_skip check_rmods(const sp_layout *l, const sp_model *m, GError **err);

int64_t sp_layout_microbatches(const sp_layout *l, const sp_layout_ctx *ctx)
{
  return ctx->global_batch / ((int64_t)l->dp * l->mb);
}

int64_t sp_layout_layers_of_stage(const sp_layout *l, const sp_model *m, int32_t stage)
{
  int64_t L = m->layers;
  int32_t pp = l->pp > 0 ? l->pp : 1;
  if (pp == 1) return L;
  if (stage == 0 && l->pp_first > 0) return l->pp_first;
  if (stage == pp - 1 && l->pp_last > 0) return l->pp_last;
  int64_t rest = L - (l->pp_first > 0 ? l->pp_first : 0) - (l->pp_last > 0 ? l->pp_last : 0);
  int32_t n = pp - (l->pp_first > 0) - (l->pp_last > 0);
  int32_t i = stage - (l->pp_first > 0);
  if (n <= 0 || rest <= 0) return 0;
  return rest / n + (i < rest % n ? 1 : 0);
}

int64_t sp_layout_stage_layers(const sp_layout *l, const sp_model *m)
{
  int64_t most = 0;
  if (l->pp_first <= 0 && l->pp_last <= 0) return (m->layers + l->pp - 1) / l->pp;
  for (int32_t s = 0; s < l->pp; s++) most = MAX(most, sp_layout_layers_of_stage(l, m, s));
  return most;
}

int64_t sp_layout_chunk_layers(const sp_layout *l, const sp_model *m, int32_t stage, int32_t chunk)
{
  int64_t n = sp_layout_layers_of_stage(l, m, stage);
  int32_t v = sp_layout_vpp(l);
  int64_t base = n / v, rem = n % v;
  if (rem == 0) return base;
  if (stage == 0 && l->pp > 1) return base + (chunk >= v - rem ? 1 : 0); /* first chunks short */
  return base + (chunk < rem ? 1 : 0);                                      /* last chunks short */
}

static sp_skip fail(GError **err, sp_skip r, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static sp_skip fail(GError **err, sp_skip r, const char *fmt, ...)
{
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT, "%s", msg);
    g_free(msg);
  }
  return r;
}

sp_skip sp_layout_check(sp_layout *l, const sp_layout_ctx *c, GError **err)
{
  const sp_model *m = c->model;
  if (l->mb == 0) l->mb = c->mb > 0 ? c->mb : 1;
  /* the product stops growing past INT32_MAX (no world is that large), so that
   * degrees of up to 2^20 each cannot overflow it */
  const int32_t deg[] = { l->tp, l->sp, l->cp, l->pp, l->dp };
  int64_t inner = 1;
  for (size_t i = 0; i < G_N_ELEMENTS(deg); i++)
    if (deg[i] < (i < 4 ? 1 : 0))
      return fail(err, SP_SKIP_WORLD, "layout: degrees must be >= 1 (tp=%d sp=%d cp=%d pp=%d dp=%d)",
                  l->tp, l->sp, l->cp, l->pp, l->dp);
  for (size_t i = 0; i < 4 && inner <= G_MAXINT32; i++)
    inner *= deg[i];
  if (inner > G_MAXINT32)
    return fail(err, SP_SKIP_WORLD, "layout: tp x sp x cp x pp = %d x %d x %d x %d is more than the %d GPUs",
                l->tp, l->sp, l->cp, l->pp, c->world);
  if (l->dp == 0) {
    if (c->world % inner != 0)
      return fail(err, SP_SKIP_WORLD, "layout: tp x sp x cp x pp = %" G_GINT64_FORMAT " does not divide the %d GPUs", inner, c->world);
    l->dp = (int32_t)(c->world / inner);
  }
  if (inner * l->dp != c->world)
    return fail(err, SP_SKIP_WORLD, "layout: tp x sp x cp x pp x dp = %d x %d x %d x %d x %d = %" G_GINT64_FORMAT " but there are %d GPUs (leave dp out to derive it)",
                l->tp, l->sp, l->cp, l->pp, l->dp, inner * l->dp, c->world);
  if (l->tp_overlap && (l->tp < 2 || !l->tp_sp))
    return fail(err, SP_SKIP_WORLD, "layout: tpoverlap=1 (Megatron's --tp-comm-overlap) needs tp > 1 and tpsp=1, as "
                "Megatron-LM requires sequence parallelism for it (tp=%d, tpsp=%d)", l->tp, l->tp_sp ? 1 : 0);
  if (c->gpus_per_node > 0 && l->tp > c->gpus_per_node)
    return fail(err, SP_SKIP_TP_NODE, "layout: tp=%d is larger than a node (%d GPUs); tensor parallelism stays on NVLink", l->tp, c->gpus_per_node);
  if (m->heads % ((int64_t)l->tp * l->sp) != 0)
    return fail(err, SP_SKIP_HEADS, "layout: %" G_GINT64_FORMAT " heads are not divisible by tp x sp = %d", m->heads, l->tp * l->sp);
  int64_t kvl;
  if (m->kv_heads % l->tp == 0) kvl = m->kv_heads / l->tp;
  else if (l->tp % m->kv_heads == 0) kvl = 1;
  else
    return fail(err, SP_SKIP_KV_HEADS, "layout: %" G_GINT64_FORMAT " KV heads can be neither split nor replicated over tp=%d", m->kv_heads, l->tp);
  if (kvl % l->sp != 0 && l->sp % kvl != 0)
    return fail(err, SP_SKIP_KV_HEADS, "layout: %" G_GINT64_FORMAT " KV heads per TP rank can be neither split nor replicated over sp=%d", kvl, l->sp);
  int64_t split = (int64_t)l->sp * l->cp * (l->cp > 1 ? 2 : 1);
  if (c->seq % split != 0 || (l->tp_sp && (c->seq / ((int64_t)l->sp * l->cp)) % l->tp != 0))
    return fail(err, SP_SKIP_SEQ, "layout: sequence %" G_GINT64_FORMAT " is not divisible by sp x %scp%s%s = %" G_GINT64_FORMAT,
                c->seq, l->cp > 1 ? "2 x " : "", l->cp > 1 ? " (load-balanced ring)" : "", l->tp_sp ? " x tp" : "",
                split * (l->tp_sp ? l->tp : 1));
  if ((l->pp_first > 0 || l->pp_last > 0) && l->pp < 2)
    return fail(err, SP_SKIP_LAYERS, "layout: ppfirst/pplast set the layers of the first and last pipeline stage and need pp >= 2");
  if (l->pp_first > 0 || l->pp_last > 0) {
    int64_t fixed = (int64_t)l->pp_first + l->pp_last;
    int32_t n = l->pp - (l->pp_first > 0) - (l->pp_last > 0);
    int64_t rest = m->layers - fixed;
    if (rest < 0 || (n == 0 && rest != 0) || (n > 0 && (rest < n || rest % n != 0)))
      return fail(err, SP_SKIP_LAYERS, "layout: %" G_GINT64_FORMAT " layers minus ppfirst=%d and pplast=%d leave %" G_GINT64_FORMAT
                  " for the %d middle stage(s): it must be a positive multiple of %d", m->layers, l->pp_first, l->pp_last,
                  rest, n, MAX(n, 1));
  } else if (l->pp > m->layers || (l->pp > 1 && sp_layout_stage_layers(l, m) * (l->pp - 1) >= m->layers))
    return fail(err, SP_SKIP_LAYERS, "layout: %" G_GINT64_FORMAT " layers cannot fill pp=%d stages", m->layers, l->pp);
  if (c->global_batch % ((int64_t)l->dp * l->mb) != 0)
    return fail(err, SP_SKIP_BATCH, "layout: global batch %" G_GINT64_FORMAT " sequences is not divisible by dp x mb = %d x %d",
                c->global_batch, l->dp, l->mb);
  if (l->vpp < 1) l->vpp = 1;
  if (l->vpp > 1) {
    if (l->pp == 1)
      return fail(err, SP_SKIP_LAYERS, "layout: vpp=%d (interleaved virtual stages) needs pp > 1", l->vpp);
    if (l->pp_first <= 0 && l->pp_last <= 0 && m->layers % ((int64_t)l->pp * l->vpp) != 0)
      return fail(err, SP_SKIP_LAYERS, "layout: %" G_GINT64_FORMAT " layers are not divisible by pp x vpp = %d x %d (interleaved stages hold equal chunks)",
                  m->layers, l->pp, l->vpp);
    for (int32_t s = 0; s < l->pp; s++) {
      int64_t n = sp_layout_layers_of_stage(l, m, s);
      gboolean outer = (s == 0 && l->pp_first > 0) || (s == l->pp - 1 && l->pp_last > 0);
      if (n % l->vpp != 0 && !outer) /* an uneven outer stage spreads its layers (sp_layout_chunk_layers) */
        return fail(err, SP_SKIP_LAYERS, "layout: stage %d holds %" G_GINT64_FORMAT " layers, not divisible by vpp=%d "
                    "(only a first or last stage set by ppfirst/pplast may have chunks one layer short)", s, n, l->vpp);
    }
    int64_t mbs = c->global_batch / ((int64_t)l->dp * l->mb);
    if (l->vpp_group <= 0 && mbs % l->pp != 0)
      return fail(err, SP_SKIP_BATCH, "layout: the interleaved schedule needs micro-batches (%" G_GINT64_FORMAT ") divisible by "
                  "pp=%d (or vppgroup=N: micro-batches in groups of N >= pp, the last group 0 or at least pp)", mbs, l->pp);
    if (l->vpp_group > 0 && !sp_layout_vpp_batches_ok(l->pp, l->vpp_group, mbs))
      return fail(err, SP_SKIP_BATCH, "layout: vppgroup=%d runs the interleaved schedule's %" G_GINT64_FORMAT " micro-batches in "
                  "groups of %d: it must lie in [pp, micro-batches] = [%d, %" G_GINT64_FORMAT "] and leave a last group of 0 or "
                  "at least pp (%" G_GINT64_FORMAT " left), as Megatron-Core requires", l->vpp_group, mbs, l->vpp_group,
                  l->pp, mbs, mbs % l->vpp_group);
  }
  if (l->vpp_group > 0 && l->vpp <= 1)
    return fail(err, SP_SKIP_LAYERS, "layout: vppgroup=%d groups the micro-batches of the interleaved schedule and needs "
                "vpp > 1 (and pp > 1)", l->vpp_group);
  if (l->vpp_group == l->pp) l->vpp_group = 0; /* the default, one spelling */
  int32_t rep = sp_layout_replicas(l);
  if (l->wp > 1 && (rep % l->wp != 0 || l->tp > 1))
    return fail(err, SP_SKIP_WP, "layout: ISP wp=%d must divide sp x cp x dp = %d and needs tp=1", l->wp, rep);
  if (l->zero > 0 && rep / l->wp <= 1)
    return fail(err, SP_SKIP_ZERO, "layout: ZeRO-%d needs replicas to shard over (sp x cp x dp / wp = %d)", l->zero, rep / l->wp);
  if (l->zero > 1 && l->wp > 1)
    return fail(err, SP_SKIP_ZERO, "layout: ISP (wp=%d) already shards weights and gradients; use zero=0 or 1", l->wp);
  sp_skip r = check_rmods(l, c->model, err);
  return r != SP_SKIP_NONE ? r : check_ep(l, c, err);
}

/* recompute=: modules the model has. */
static sp_skip check_rmods(const sp_layout *l, const sp_model *m, GError **err)
{
  if ((l->rmods & SP_RMOD_MLA_UP_PROJ) && !sp_model_is_mla(m))
    return fail(err, SP_SKIP_WORLD, "layout: recompute=mla_up_proj recomputes multi-head latent attention's "
                "up-projections; '%s' has no latent attention (drop mla_up_proj)", m->name ? m->name : "?");
  if ((l->rmods & SP_RMOD_MOE_ACT) && !sp_model_is_moe(m))
    return fail(err, SP_SKIP_WORLD, "layout: recompute=moe_act recomputes the experts' activation; '%s' has no "
                "experts (drop moe_act, or use mlp for a dense MLP)", m->name ? m->name : "?");
  return SP_SKIP_NONE;
}

static sp_skip check_ep(sp_layout *l, const sp_layout_ctx *c, GError **err)
{
  const sp_model *m = c->model;
  int32_t ep = sp_layout_ep(l), etp = sp_layout_etp(l);
  if (!sp_model_is_moe(m)) {
    if (ep > 1 || l->etp > 0 || l->a2a_overlap || l->ep_flex)
      return fail(err, SP_SKIP_WORLD, "layout: ep/etp/a2aoverlap/dispatcher (expert parallelism) need an MoE model; '%s' "
                  "has no experts (leave ep, etp, a2aoverlap and dispatcher out)", m->name ? m->name : "?");
    return SP_SKIP_NONE;
  }
  /* Megatron-Core's conditions for --overlap-moe-expert-parallel-comm
   * (megatron/core/transformer/transformer_config.py, __post_init__) */
  if (l->a2a_overlap && ep < 2)
    return fail(err, SP_SKIP_WORLD, "layout: a2aoverlap=1 overlaps the expert-parallel all-to-alls and needs ep > 1");
  if (l->a2a_overlap && l->ckpt == SP_CKPT_FULL)
    return fail(err, SP_SKIP_WORLD, "layout: a2aoverlap=1 cannot run with full recompute (ckpt=full), as in "
                "Megatron-Core; use ckpt=selective or none");
  /* without virtual stages a stage's paired forward is sent on only at the end of the
   * pair, while the pair waits for the next stage's backward: the stages take turns
   * (measured: Mixtral 8x7B, pp=2, 4 micro-batches on the ideal GPU, 102 s -> 139 s) */
  if (l->a2a_overlap && l->pp > 1 && sp_layout_vpp(l) < 2)
    return fail(err, SP_SKIP_LAYERS, "layout: a2aoverlap=1 with pp=%d needs the interleaved schedule (vpp > 1), as "
                "Megatron-Core's combined 1F1B does", l->pp);
  int32_t rep = sp_layout_replicas(l);
  if (m->experts % ep != 0)
    return fail(err, SP_SKIP_WORLD, "layout: ep=%d does not divide the %" G_GINT64_FORMAT " experts (each rank holds "
                "experts / ep of them): choose an ep that divides both %" G_GINT64_FORMAT " and sp x cp x dp = %d",
                ep, m->experts, m->experts, rep);
  /* with etp = 1 < tp, MoE parallel folding (Liu et al. 2025, arXiv:2504.14960; Megatron-Core's expert
   * RankGenerator, tp = etp) lays the ep groups over a stage's tp x sp x cp x dp ranks */
  int64_t stage_ranks = (int64_t)l->tp * rep;
  if (etp == 1 && l->tp > 1 && stage_ranks % ep != 0)
    return fail(err, SP_SKIP_WORLD, "layout: ep=%d does not divide tp x sp x cp x dp = %" G_GINT64_FORMAT ": with etp=1 "
                "Megatron-Core folds the expert-parallel groups over the tensor- and data-parallel ranks of a stage; "
                "choose an ep that divides both %" G_GINT64_FORMAT " and the %" G_GINT64_FORMAT " experts", ep,
                stage_ranks, stage_ranks, m->experts);
  if (!(etp == 1 && l->tp > 1) && rep % ep != 0)
    return fail(err, SP_SKIP_WORLD, "layout: ep=%d does not divide sp x cp x dp = %d x %d x %d = %d: Megatron-Core folds "
                "the expert-parallel groups inside the data-parallel (x context-parallel) groups; choose an ep that "
                "divides both %d and the %" G_GINT64_FORMAT " experts, or raise dp", ep, l->sp, l->cp, l->dp, rep, rep,
                m->experts);
  if (l->wp > 1)
    return fail(err, SP_SKIP_WP, "layout: ISP weight parallelism (wp=%d) is not modelled for MoE models; use ep and "
                "ZeRO instead", l->wp);
  if (l->zero >= 3)
    return fail(err, SP_SKIP_ZERO, "layout: ZeRO-3 is not modelled for MoE models (its per-layer gathers would move "
                "every expert); use zero=1 or 2, as Megatron-Core's distributed optimizer shards the optimizer state");
  if (etp != l->tp && etp != 1)
    return fail(err, SP_SKIP_WORLD, "layout: etp=%d: the expert tensor parallel degree is tp (%d, the default) or 1",
                etp, l->tp);
  if (l->tp > 1 && !l->tp_sp)
    return fail(err, SP_SKIP_WORLD, "layout: an MoE model with tp=%d needs Megatron sequence parallelism (tpsp=1): "
                "each TP rank routes its own sequence shard to the experts, as Megatron-Core requires", l->tp);
  if (l->ep_flex && ep < 2)
    return fail(err, SP_SKIP_WORLD, "layout: dispatcher=flex sends tokens between the expert-parallel ranks and needs ep > 1");
  int64_t span = (int64_t)ep * etp;
  if (l->ep_flex && c->gpus_per_node > 0 && span > c->gpus_per_node && span % c->gpus_per_node != 0)
    return fail(err, SP_SKIP_WORLD, "layout: dispatcher=flex forwards each token inside the nodes of its expert-parallel "
                "group, which spans ep x etp = %" G_GINT64_FORMAT " GPUs: that must fit in one node or fill whole "
                "nodes of %d", span, c->gpus_per_node);
  if (l->etp == l->tp) l->etp = 0; /* the default, one spelling */
  return SP_SKIP_NONE;
}

char *sp_layout_to_string(const sp_layout *l)
{
  char v[96] = "";
  if (l->vpp > 1) g_snprintf(v, sizeof v, ",vpp=%d", l->vpp);
  if (l->vpp_group > 0) g_snprintf(v + strlen(v), sizeof v - strlen(v), ",vppgroup=%d", l->vpp_group);
  if (l->pp_first > 0) g_snprintf(v + strlen(v), sizeof v - strlen(v), ",ppfirst=%d", l->pp_first);
  if (l->pp_last > 0) g_snprintf(v + strlen(v), sizeof v - strlen(v), ",pplast=%d", l->pp_last);
  char e[80] = "";
  if (l->ep > 1) g_snprintf(e, sizeof e, ",ep=%d", l->ep);
  if (l->etp > 0) g_snprintf(e + strlen(e), sizeof e - strlen(e), ",etp=%d", l->etp);
  if (l->a2a_overlap) g_snprintf(e + strlen(e), sizeof e - strlen(e), ",a2aoverlap=1");
  if (l->ep_flex) g_snprintf(e + strlen(e), sizeof e - strlen(e), ",dispatcher=flex");
  g_autofree char *rm = l->ckpt == SP_CKPT_SELECTIVE && l->rmods != 0 ? sp_rmods_format(l->rmods) : NULL;
  return g_strdup_printf("tp=%d,tpsp=%d%s,sp=%d,cp=%d,wp=%d,pp=%d%s,dp=%d%s%s,zero=%d,ckpt=%s%s%s,mb=%d%s",
                         l->tp, l->tp_sp ? 1 : 0, l->tp_overlap ? ",tpoverlap=1" : "", l->sp, l->cp, l->wp, l->pp, v, l->dp, l->dp_sync ? ",dpsync=1" : "",
                         l->dp_fp32 ? ",dpfp32=1" : "", l->zero, sp_ckpt_name(l->ckpt), rm ? ",recompute=" : "",
                         rm ? rm : "", l->mb, e);
}

char *sp_layout_label(const sp_layout *l)
{
  GString *s = g_string_new("");
  if (l->tp > 1) g_string_append_printf(s, "tp%d%s%s ", l->tp, l->tp_sp ? "s" : "", l->tp_overlap ? "o" : "");
  if (l->sp > 1) g_string_append_printf(s, "sp%d ", l->sp);
  if (l->cp > 1) g_string_append_printf(s, "cp%d ", l->cp);
  if (l->wp > 1) g_string_append_printf(s, "wp%d ", l->wp);
  if (l->pp > 1 && l->vpp > 1 && l->vpp_group > 0) g_string_append_printf(s, "pp%dv%dg%d ", l->pp, l->vpp, l->vpp_group);
  else if (l->pp > 1 && l->vpp > 1) g_string_append_printf(s, "pp%dv%d ", l->pp, l->vpp);
  else if (l->pp > 1) g_string_append_printf(s, "pp%d ", l->pp);
  if (l->pp_first > 0 || l->pp_last > 0) {
    g_string_truncate(s, s->len - 1);
    g_string_append_c(s, '[');
    if (l->pp_first > 0) g_string_append_printf(s, "f%d%s", l->pp_first, l->pp_last > 0 ? "," : "");
    if (l->pp_last > 0) g_string_append_printf(s, "l%d", l->pp_last);
    g_string_append(s, "] ");
  }
  g_string_append_printf(s, "dp%d", l->dp);
  if (l->ep > 1) g_string_append_printf(s, " ep%d", l->ep);
  if (l->etp > 0) g_string_append_printf(s, " etp%d", l->etp);
  if (l->a2a_overlap) g_string_append(s, " a2aov");
  if (l->ep_flex) g_string_append(s, " flex");
  if (l->zero > 0) g_string_append_printf(s, " z%d", l->zero);
  if (l->dp_sync) g_string_append(s, " dpsync");
  if (l->dp_fp32) g_string_append(s, " dpfp32");
  static const char *const ck[SP_CKPT_COUNT] = { "", " sel", " full", " op" };
  g_string_append(s, ck[l->ckpt]);
  if (l->ckpt == SP_CKPT_SELECTIVE && l->rmods != 0) {
    g_autofree char *rm = sp_rmods_format(l->rmods);
    g_string_append_printf(s, "(%s)", rm);
  }
  if (l->mb > 1) g_string_append_printf(s, " mb%d", l->mb);
  return g_string_free(s, FALSE);
}

void sp_sweep_opts_init(sp_sweep_opts *o, const sp_layout_ctx *ctx)
{
  o->max_tp = ctx->gpus_per_node > 0 ? ctx->gpus_per_node : 8;
  o->max_sp = 64;
  o->max_cp = 32;
  o->with_isp = TRUE;
  o->max_mb = 4;
}

/* Divisors of n in increasing order. */
static GArray *divisors(int64_t n)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int64_t d = 1; d <= n; d++)
    if (n % d == 0) {
      int32_t v = (int32_t)d;
      g_array_append_val(a, v);
    }
  return a;
}

/* Where pp does not divide the L layers: middle stages of ceil(L / pp) layers and the rest
 * on the first and last stage, the first one layer short when the rest is odd (the first
 * stage also runs the embedding, the last the output layer and the loss; Llama 3 405B's
 * 126 layers on 16 stages: 7, 8 x 14, 7, Llama 3 report sec. 3.3.2). @return the middle
 * stages' layers, 0 where no such split exists. */
static int64_t sweep_outer_split(int64_t L, int32_t pp, int32_t *first, int32_t *last)
{
  int64_t mid = (L + pp - 1) / pp, rest = L - (int64_t)(pp - 2) * mid;
  if (pp < 2 || rest < 2 || rest > 2 * mid) return 0;
  *first = (int32_t)(rest / 2);
  *last = (int32_t)(rest - rest / 2);
  return mid;
}

/* The interleaved schedule's group for micro-batches that pp does not divide: the
 * smallest Megatron-Core accepts (the fewest warm-up passes); 0 (pp) where pp divides
 * them or no group fits. */
static int32_t sweep_vpp_group(const sp_layout_ctx *ctx, int32_t pp, int32_t dp, int32_t mb)
{
  int64_t per = (int64_t)dp * mb;
  if (per <= 0 || ctx->global_batch % per != 0) return 0;
  int64_t m = ctx->global_batch / per;
  if (m % pp == 0) return 0;
  for (int64_t g = pp; g <= m && g <= G_MAXINT32; g++)
    if (sp_layout_vpp_batches_ok(pp, g, m)) return (int32_t)g;
  return 0;
}

void sp_sweep_free(sp_sweep *s)
{
  if (s == NULL) return;
  g_array_free(s->layouts, TRUE);
  g_free(s);
}

sp_sweep *sp_sweep_run(const sp_layout_ctx *ctx, const sp_sweep_opts *opts)
{
  sp_sweep *s = g_new0(sp_sweep, 1);
  s->layouts = g_array_new(FALSE, FALSE, sizeof(sp_layout));
  if (ctx->world <= 0) return s;
  GArray *dw = divisors(ctx->world);
  gboolean moe = ctx->model != NULL && sp_model_is_moe(ctx->model);
  uint32_t lean = sp_rmods_swept(ctx->model);
  const int64_t gpn = ctx->gpus_per_node > 0 ? ctx->gpus_per_node : 8;
  for (guint a = 0; a < dw->len; a++) {
    int32_t tp = g_array_index(dw, int32_t, a);
    if (tp > opts->max_tp) break;
    for (int tpsp = moe && tp > 1 ? 1 : 0; tpsp <= (tp > 1 ? 1 : 0); tpsp++)
      for (guint b = 0; b < dw->len; b++) {
        int32_t sp = g_array_index(dw, int32_t, b);
        if (sp > opts->max_sp || ctx->world % ((int64_t)tp * sp) != 0) continue;
        if (moe && sp > 1) continue; /* MoE: Megatron-Core's parallelisms (no Ulysses); a --layout may still name sp */
        for (guint c = 0; c < dw->len; c++) {
          int32_t cp = g_array_index(dw, int32_t, c);
          if (cp > opts->max_cp || ctx->world % ((int64_t)tp * sp * cp) != 0) continue;
          for (guint d = 0; d < dw->len; d++) {
            int32_t pp = g_array_index(dw, int32_t, d);
            if (ctx->world % ((int64_t)tp * sp * cp * pp) != 0) continue;
            int32_t dp = (int32_t)(ctx->world / ((int64_t)tp * sp * cp * pp));
            GArray *wps = NULL;
            if (tp == 1 && opts->with_isp && !moe) wps = divisors((int64_t)sp * cp * dp);
            guint nwp = wps ? wps->len : 1;
            for (guint w = 0; w < nwp; w++) {
              int32_t wp = wps ? g_array_index(wps, int32_t, w) : 1;
              /* interleaving: every chunk count that splits a stage's layers evenly; where pp
               * does not divide the layers, also the split with fewer layers on the first and
               * last stage (sweep_outer_split) and every chunk count of its middle stages */
              GArray *vpps = NULL;
              int32_t outer_first = 0, outer_last = 0;
              guint nplain = 1;
              if (pp > 1 && ctx->model != NULL && ctx->model->layers % pp == 0) {
                vpps = divisors(ctx->model->layers / pp);
                nplain = vpps->len;
              } else if (pp > 1 && ctx->model != NULL) {
                int64_t mid = sweep_outer_split(ctx->model->layers, pp, &outer_first, &outer_last);
                if (mid > 0) {
                  vpps = divisors(mid);
                  int32_t one = 1; /* the plain uneven split first */
                  g_array_prepend_val(vpps, one);
                }
              }
              guint nvpp = vpps ? vpps->len : 1;
              for (guint v = 0; v < nvpp; v++) {
                int32_t vpp = vpps ? g_array_index(vpps, int32_t, v) : 1;
                gboolean outer = v >= nplain; /* the first/last split, at chunk count vpp */
                /* at most one chunk of an outer stage empty: the embedding or the output
                 * layer alone, as Llama 3's split gives them (report sec. 3.3.2) */
                if (outer && MIN(outer_first, outer_last) + 1 < vpp) continue;
                /* expert parallelism: every ep dividing the experts and sp x cp x dp (MoE models) */
                int64_t rep = (int64_t)sp * cp * dp;
                for (int32_t ep = 1; ep <= (moe ? rep : 1); ep++) {
                  if (moe && (rep % ep != 0 || ctx->model->experts % ep != 0)) continue;
                for (int32_t mb = ctx->mb > 0 ? ctx->mb : 1; mb <= (ctx->mb > 0 ? ctx->mb : opts->max_mb); mb *= 2) {
                  int32_t group = vpp > 1 ? sweep_vpp_group(ctx, pp, dp, mb) : 0; /* the same for the variants below */
                  for (int zero = 0; zero <= 3; zero++)
                    for (int ck = 0; ck < SP_CKPT_SWEPT + (lean ? 1 : 0); ck++) /* + selective by modules */
                    for (int ov = 0; ov <= (moe && ep > 1 ? 1 : 0); ov++) /* MoE: a2aoverlap off and on */
                    for (int fx = 0; fx <= (moe && ep > 1 && (int64_t)ep * tp > gpn ? 1 : 0); fx++) { /* flex across nodes */
                      sp_layout l = { .tp = tp, .tp_sp = tpsp == 1, .tp_overlap = tpsp == 1, .sp = sp, .cp = cp, .wp = wp, .pp = pp,
                                      .vpp = vpp, .vpp_group = group,
                                      .pp_first = outer ? outer_first : 0, .pp_last = outer ? outer_last : 0, .dp = dp, .zero = zero,
                                      .ckpt = ck < SP_CKPT_SWEPT ? (sp_ckpt)ck : SP_CKPT_SELECTIVE,
                                      .rmods = ck < SP_CKPT_SWEPT ? 0u : lean, .mb = mb,
                                      .ep = moe ? ep : 0, .a2a_overlap = ov == 1, .ep_flex = fx == 1 };
                      s->considered++;
                      sp_skip r = sp_layout_check(&l, ctx, NULL);
                      if (r == SP_SKIP_NONE) g_array_append_val(s->layouts, l);
                      else s->skipped[r]++;
                    }
                }
                }
              }
              if (vpps) g_array_free(vpps, TRUE);
            }
            if (wps) g_array_free(wps, TRUE);
          }
        }
      }
  }
  g_array_free(dw, TRUE);
  return s;
}
