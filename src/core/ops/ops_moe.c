/* Mixture-of-experts layers as graph builders: the router, the token permutation
 * into per-expert capacity slots, the dispatch and combine all-to-alls over the
 * expert-parallel group (the kept counts exchanged first, as Megatron-Core's
 * MoEAlltoAllTokenDispatcher does), expert tensor and data parallelism, the
 * backward, and the single-device reference of the whole layer.
 *
 * Capacity, as Megatron-Core (megatron/core/transformer/moe/moe_utils.py:
 * get_capacity, topk_softmax_with_capacity; moe_expert_capacity_factor,
 * moe_pad_expert_input_to_capacity, moe_token_drop_policy) and DeepSpeed
 * (deepspeed/moe/sharded_moe.py: _capacity, top1gating/top2gating, capacity_factor,
 * drop_tokens) define it: C = ceil(T K / E x capacity_factor) slots per expert
 * for the T tokens of one rank, each expert keeping its C preferred tokens. The
 * slots are padded to C (moe_pad_expert_input_to_capacity; DeepSpeed's dispatch
 * einsum), so every dispatch message has the same size and the graph's shapes do
 * not depend on the data. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/kernels.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

gboolean sp_moe_cfg_check(const sp_moe_cfg *c, int32_t P, GError **err)
{
  const char *msg = NULL;
  char *m = NULL;
  if (c->experts < 1 || c->ep < 1 || c->etp < 1 || c->tokens < 1 || c->hidden < 1 || c->ffn < 1)
    msg = "moe: experts, ep, etp, tokens, hidden and ffn must be positive";
  else if (c->topk < 1 || c->topk > c->experts)
    m = g_strdup_printf("moe: top-k (%d) must be between 1 and the number of experts (%d)", c->topk, c->experts);
  else if (c->experts % c->ep != 0)
    m = g_strdup_printf("moe: ep (%d) must divide the number of experts (%d)", c->ep, c->experts);
  else if (P < 1 || P % (c->ep * c->etp) != 0)
    m = g_strdup_printf("moe: the ranks (%d) must be divisible by ep x etp (%d x %d)", P, c->ep, c->etp);
  else if (c->ffn % c->etp != 0)
    m = g_strdup_printf("moe: etp (%d) must divide the expert FFN size (%" G_GINT64_FORMAT ")", c->etp, c->ffn);
  else if (!(c->capacity_factor > 0) || !isfinite(c->capacity_factor))
    m = g_strdup_printf("moe: the capacity factor (%g) must be > 0", c->capacity_factor);
  else if (c->drop != SP_MOE_DROP_PROBS && c->drop != SP_MOE_DROP_POSITION)
    msg = "moe: the drop policy must be probs or position";
  else if (c->dropless != 0 && c->dropless != 1)
    msg = "moe: dropless must be 0 or 1";
  if (!msg && !m)
    return TRUE;
  g_set_error_literal(err, SP_ERROR, SP_ERROR_INVALID, m ? m : msg);
  g_free(m);
  return FALSE;
}

/* Largest sizes sp_moe_cfg_parse accepts: data mode carries every byte on one host
 * and the router's capacity selection compares the pairs of one expert with each
 * other, so verification cases stay small (4096 tokens x 4096 hidden f32 is 64 MiB
 * per rank buffer). */
#define MOE_MAX_DIM 4096
#define MOE_MAX_EXPERTS 1024

gboolean sp_moe_cfg_parse(const char *spec, sp_moe_cfg *c, GError **err)
{
  static const char *const keys[] = { "experts", "topk", "ep", "etp", "tokens", "hidden", "ffn", "capacity",
                                      "drop", "dropless" };
  gchar **items = g_strsplit(spec ? spec : "", ",", -1);
  gboolean ok = TRUE, capacity_set = FALSE;
  for (gchar **it = items; ok && *it; it++) {
    if (**it == '\0')
      continue;
    const char *eq = strchr(*it, '=');
    gsize klen = eq ? (gsize)(eq - *it) : strlen(*it);
    int k = -1;
    for (int i = 0; i < (int)G_N_ELEMENTS(keys); i++)
      if (strlen(keys[i]) == klen && strncmp(*it, keys[i], klen) == 0)
        k = i;
    if (k < 0 || !eq) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "moe options: '%s' is not KEY=VALUE with KEY experts, topk, ep, etp, tokens, hidden, ffn, "
                  "capacity, drop or dropless", *it);
      ok = FALSE;
      break;
    }
    const char *v = eq + 1;
    char *end = NULL;
    if (k == 8) {
      if (strcmp(v, "probs") == 0)
        c->drop = SP_MOE_DROP_PROBS;
      else if (strcmp(v, "position") == 0)
        c->drop = SP_MOE_DROP_POSITION;
      else {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "moe options: drop '%s' must be probs or position", v);
        ok = FALSE;
      }
      continue;
    }
    if (k == 9) {
      if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
        c->dropless = *v == '1';
      else {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "moe options: dropless '%s' must be 0 or 1", v);
        ok = FALSE;
      }
      continue;
    }
    if (k == 7) {
      capacity_set = TRUE;
      double f = g_ascii_strtod(v, &end);
      if (*v == '\0' || *end != '\0' || !isfinite(f)) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "moe options: capacity '%s' is not a number", v);
        ok = FALSE;
      }
      c->capacity_factor = f;
      continue;
    }
    gint64 n = g_ascii_strtoll(v, &end, 10);
    const gint64 max = k == 0 ? MOE_MAX_EXPERTS : MOE_MAX_DIM;
    if (*v == '\0' || *end != '\0' || n < 1 || n > max) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "moe options: %s '%s' must be an integer from 1 to %" G_GINT64_FORMAT,
                  keys[k], v, max);
      ok = FALSE;
      break;
    }
    switch (k) {
    case 0: c->experts = (int32_t)n; break;
    case 1: c->topk = (int32_t)n; break;
    case 2: c->ep = (int32_t)n; break;
    case 3: c->etp = (int32_t)n; break;
    case 4: c->tokens = n; break;
    case 5: c->hidden = n; break;
    default: c->ffn = n; break;
    }
  }
  g_strfreev(items);
  if (ok && capacity_set && c->dropless) {
    g_set_error_literal(err, SP_ERROR, SP_ERROR_INVALID,
                        "moe options: dropless=1 keeps every routed token and has no capacity: leave out "
                        "capacity= (or use dropless=0 for the drop-and-pad dispatch)");
    ok = FALSE;
  }
  return ok;
}

int64_t sp_moe_capacity(const sp_moe_cfg *c)
{
  /* Megatron-Core get_capacity(num_tokens = T K, E, factor) = ceil(T K / E x factor);
   * DeepSpeed _capacity with top-k's factor x k gives the same. No expert receives
   * more than the T tokens of a rank, so at most T. */
  double v = ceil((double)c->tokens * (double)c->topk / (double)c->experts * c->capacity_factor);
  int64_t C = v < 1.0 ? 1 : (int64_t)v;
  return C > c->tokens ? c->tokens : C;
}

gboolean sp_moe_groups(const sp_moe_cfg *c, const sp_groups *gs, sp_groups *ep, sp_groups *etp, sp_groups *edp,
                       GError **err)
{
  if (!gs || gs->n_groups < 1 || !sp_moe_cfg_check(c, gs->group_size, err))
    return FALSE;
  const int32_t P = gs->group_size, E = c->ep, T = c->etp, D = P / (E * T), W = gs->n_groups * P;
  *ep = (sp_groups){ gs->n_groups * D * T, E, g_new(int32_t, W) };
  *etp = (sp_groups){ gs->n_groups * D * E, T, g_new(int32_t, W) };
  *edp = (sp_groups){ gs->n_groups * E * T, D, g_new(int32_t, W) };
  for (int32_t gi = 0; gi < gs->n_groups; gi++)
    for (int32_t d = 0; d < D; d++)
      for (int32_t e = 0; e < E; e++)
        for (int32_t t = 0; t < T; t++) {
          int32_t rank = gs->ranks[gi * P + (d * E + e) * T + t];
          ep->ranks[((gi * D + d) * T + t) * E + e] = rank;
          etp->ranks[((gi * D + d) * E + e) * T + t] = rank;
          edp->ranks[((gi * E + e) * T + t) * D + d] = rank;
        }
  return TRUE;
}

void sp_moe_layer_clear(sp_moe_layer *st)
{
  g_clear_pointer(&st->ep.ranks, g_free);
  g_clear_pointer(&st->etp.ranks, g_free);
  g_clear_pointer(&st->edp.ranks, g_free);
  g_clear_pointer(&st->all.ranks, g_free);
  g_clear_pointer(&st->xl, g_free);
  g_clear_pointer(&st->pre, g_free);
  g_clear_pointer(&st->act, g_free);
  g_clear_pointer(&st->w1l, g_free);
  g_clear_pointer(&st->w2l, g_free);
  g_clear_pointer(&st->counts_tab, g_free);
  g_clear_pointer(&st->dl_x, g_free);
  g_clear_pointer(&st->dl_pre, g_free);
  g_clear_pointer(&st->dl_act, g_free);
}


/* A new f32 tensor of @p nd dims placed like @p ref. */
static uint32_t like(sp_graph *g, uint32_t ref, const char *nm, int nd, int64_t a, int64_t b, int64_t c,
                     sp_tensor_kind kind, GError **err)
{
  int64_t s[3] = { a, b, c };
  return sp_ops_like(g, ref, nm, nd, s, kind, err);
}

static gboolean need(sp_graph *g, uint32_t t, int nd, int64_t a, int64_t b, int64_t c, const char *what,
                     GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  int64_t s[3] = { a, b, c };
  gboolean ok = x && x->ndim == nd && x->dtype == SP_F32;
  for (int i = 0; ok && i < nd; i++)
    ok = x->shape[i] == s[i];
  if (!ok) {
    char *want = nd == 2 ? g_strdup_printf("[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", a, b)
                         : g_strdup_printf("[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                                           a, b, c);
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "moe: %s must be an f32 tensor of shape %s", what, want);
    g_free(want);
  }
  return ok;
}

static uint32_t moe(sp_graph *g, sp_moe_kernel w, const uint32_t *in, int nin, const uint32_t *out, int nout,
                    const sp_moe_layer *st, GError **err)
{
  return sp_graph_moe(g, w, in, nin, out, nout, st->cfg.topk, st->capacity, st->cfg.drop, err);
}

/* out = op(a) x op(b) into a new [rows, cols] tensor placed like @p a */
static uint32_t mm(sp_graph *g, uint32_t a, gboolean ta, uint32_t b, gboolean tb, const char *nm,
                   sp_tensor_kind kind, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, a), *y = sp_graph_tensor(g, b);
  int64_t xr = (int64_t)sp_tensor_numel(x) / x->shape[x->ndim - 1], xc = x->shape[x->ndim - 1];
  int64_t yr = (int64_t)sp_tensor_numel(y) / y->shape[y->ndim - 1], yc = y->shape[y->ndim - 1];
  uint32_t o = like(g, a, nm, 2, ta ? xc : xr, tb ? yr : yc, 0, kind, err);
  if (o == BAD || sp_graph_matmul(g, a, ta, b, tb, o, err) == BAD)
    return BAD;
  return o;
}

/* Slice @p l of dim 0 of @p t into a new tensor of shape [rows, cols]. */
static uint32_t take(sp_graph *g, uint32_t t, int64_t l, int64_t rows, int64_t cols, const char *nm,
                     sp_tensor_kind kind, GError **err)
{
  char *n = g_strdup_printf("%s%" G_GINT64_FORMAT, nm, l);
  uint32_t o = like(g, t, n, 2, rows, cols, 0, kind, err);
  g_free(n);
  if (o == BAD || sp_graph_slice(g, t, o, 0, l, 1, err) == BAD)
    return BAD;
  return o;
}

/* The dropless experts' forward: each rank's local expert on exactly its tokens
 * (compacted from the padded blocks), the outputs expanded back into padded blocks. */
static uint32_t dropless_ffn(sp_graph *g, sp_moe_layer *st, GError **err)
{
  const int64_t El = st->cfg.experts / st->cfg.ep, Fl = st->cfg.ffn / st->cfg.etp;
  const int64_t n = (int64_t)st->all.n_groups * st->all.group_size * El;
  st->dl_x = g_new(uint32_t, n);
  st->dl_pre = g_new(uint32_t, n);
  st->dl_act = g_new(uint32_t, n);
  uint32_t *outs = g_new(uint32_t, n);
  gboolean ok = sp_ops_moe_compact(g, st, st->xl, "x.tok", st->dl_x, err);
  for (int64_t k = 0; k < n; k++)
    st->dl_pre[k] = st->dl_act[k] = outs[k] = BAD;
  for (int64_t k = 0; ok && k < n; k++) {
    if (st->dl_x[k] == BAD)
      continue;
    const int64_t l = k % El, N = sp_graph_tensor(g, st->dl_x[k])->shape[0];
    ok = (st->dl_pre[k] = mm(g, st->dl_x[k], FALSE, st->w1l[l], FALSE, "pre", SP_TENSOR_ACTIVATION, err)) != BAD &&
         (st->dl_act[k] = like(g, st->dl_pre[k], "relu", 2, N, Fl, 0, SP_TENSOR_ACTIVATION, err)) != BAD &&
         moe(g, SP_MOE_RELU, &st->dl_pre[k], 1, &st->dl_act[k], 1, st, err) != BAD &&
         (outs[k] = mm(g, st->dl_act[k], FALSE, st->w2l[l], FALSE, "out", SP_TENSOR_ACTIVATION, err)) != BAD;
  }
  uint32_t part = ok ? sp_ops_moe_expand(g, st, outs, "expert_out", err) : BAD;
  g_free(outs);
  return part;
}

/* Its backward from the padded output gradient slabs @p dol: dxin (padded), dW1, dW2. */
static gboolean dropless_ffn_bwd(sp_graph *g, sp_moe_layer *st, const uint32_t *dol, uint32_t *dxin, uint32_t *dw1,
                                 uint32_t *dw2, GError **err)
{
  const int64_t El = st->cfg.experts / st->cfg.ep, Fl = st->cfg.ffn / st->cfg.etp, H = st->cfg.hidden;
  const int64_t n = (int64_t)st->all.n_groups * st->all.group_size * El;
  uint32_t *de = g_new(uint32_t, n), *dx = g_new(uint32_t, n), *g1 = g_new(uint32_t, n), *g2 = g_new(uint32_t, n);
  gboolean ok = sp_ops_moe_compact(g, st, dol, "x.dtok", de, err);
  for (int64_t k = 0; k < n; k++)
    dx[k] = g1[k] = g2[k] = BAD;
  for (int64_t k = 0; ok && k < n; k++) {
    if (de[k] == BAD)
      continue;
    const int64_t l = k % El, N = sp_graph_tensor(g, de[k])->shape[0];
    uint32_t dact, dpre;
    ok = (dact = mm(g, de[k], FALSE, st->w2l[l], TRUE, "dact", SP_TENSOR_ACTIVATION, err)) != BAD &&
         (g2[k] = mm(g, st->dl_act[k], TRUE, de[k], FALSE, "dw2", SP_TENSOR_GRAD, err)) != BAD &&
         (dpre = like(g, dact, "drelu", 2, N, Fl, 0, SP_TENSOR_ACTIVATION, err)) != BAD;
    if (ok) {
      uint32_t rin[2] = { st->dl_pre[k], dact };
      ok = moe(g, SP_MOE_RELU_BWD, rin, 2, &dpre, 1, st, err) != BAD &&
           (g1[k] = mm(g, st->dl_x[k], TRUE, dpre, FALSE, "dw1", SP_TENSOR_GRAD, err)) != BAD &&
           (dx[k] = mm(g, dpre, FALSE, st->w1l[l], TRUE, "dx", SP_TENSOR_ACTIVATION, err)) != BAD;
    }
  }
  ok = ok && (*dxin = sp_ops_moe_expand(g, st, dx, "d_etp_gather_in", err)) != BAD &&
       (*dw1 = sp_ops_moe_stack(g, st, g1, st->w1, H, Fl, "grad", err)) != BAD &&
       (*dw2 = sp_ops_moe_stack(g, st, g2, st->w2, Fl, H, "grad", err)) != BAD;
  g_free(de);
  g_free(dx);
  g_free(g1);
  g_free(g2);
  return ok;
}

gboolean sp_op_moe_layer(sp_graph *g, const sp_groups *gs, const sp_moe_cfg *cfg, uint32_t x, uint32_t wr,
                         uint32_t w1, uint32_t w2, sp_moe_layer *st, GError **err)
{
  memset(st, 0, sizeof *st);
  st->cfg = *cfg;
  if (!sp_moe_groups(cfg, gs, &st->ep, &st->etp, &st->edp, err))
    return FALSE;
  st->all = *gs;
  st->all.ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  const int64_t T = cfg->tokens, H = cfg->hidden, E = cfg->experts, K = cfg->topk;
  /* dropless: every block holds the largest per-(rank, expert) count, and nothing
   * is dropped as no count exceeds it */
  const int64_t C = cfg->dropless ? sp_ops_moe_dropless_setup(st, gs, err) : sp_moe_capacity(cfg);
  if (C < 1)
    return FALSE;
  const int64_t El = E / cfg->ep, Fl = cfg->ffn / cfg->etp;
  const int64_t M = (int64_t)cfg->etp * cfg->ep * C; /* tokens slots of one local expert */
  st->capacity = C;
  if (!need(g, x, 2, T, H, 0, "x ([tokens, hidden])", err) || !need(g, wr, 2, H, E, 0, "wr ([hidden, experts])", err) ||
      !need(g, w1, 3, El, H, Fl, "w1 ([experts / ep, hidden, ffn / etp])", err) ||
      !need(g, w2, 3, El, Fl, H, "w2 ([experts / ep, ffn / etp, hidden])", err))
    return FALSE;
  st->x = x;
  st->wr = wr;
  st->w1 = w1;
  st->w2 = w2;
  /* router */
  if ((st->logits = mm(g, x, FALSE, wr, FALSE, "logits", SP_TENSOR_ACTIVATION, err)) == BAD)
    return FALSE;
  st->route = like(g, x, "route", 3, T, K, 3, SP_TENSOR_ACTIVATION, err);
  st->scores = st->route == BAD ? BAD : like(g, x, "scores", 2, T, E, 0, SP_TENSOR_ACTIVATION, err);
  st->counts = st->scores == BAD ? BAD : like(g, x, "counts", 2, cfg->ep, El, 0, SP_TENSOR_ACTIVATION, err);
  if (st->counts == BAD)
    return FALSE;
  uint32_t rin[1] = { st->logits }, rout[3] = { st->route, st->scores, st->counts };
  if (moe(g, SP_MOE_ROUTE, rin, 1, rout, 3, st, err) == BAD)
    return FALSE;
  /* the kept counts first: member j's block of my experts' counts (dispatch layout) */
  st->recv_counts = like(g, x, "recv_counts", 2, cfg->ep, El, 0, SP_TENSOR_ACTIVATION, err);
  if (st->recv_counts == BAD ||
      sp_graph_all_to_all(g, &st->ep, st->counts, st->recv_counts, 0, 0, cfg->algo, err) == BAD)
    return FALSE;
  /* permute into capacity slots and dispatch: [E, C, H] -> [E/ep, ep C, H] */
  st->disp = like(g, x, "dispatch", 3, E, C, H, SP_TENSOR_ACTIVATION, err);
  uint32_t pin[2] = { x, st->route };
  if (st->disp == BAD || moe(g, SP_MOE_PERMUTE, pin, 2, &st->disp, 1, st, err) == BAD)
    return FALSE;
  uint32_t recv = sp_ops_moe_exchange(g, st, st->disp, FALSE, "recv", err);
  if (recv == BAD)
    return FALSE;
  st->xin = recv;
  if (cfg->etp > 1) {
    st->xin = like(g, x, "etp_gather", 3, El, M, H, SP_TENSOR_ACTIVATION, err);
    if (st->xin == BAD || sp_graph_all_gather(g, &st->etp, recv, st->xin, 1, cfg->algo, err) == BAD)
      return FALSE;
  }
  /* each local expert's FFN on its M slots (padded slots are zeros and stay zeros) */
  st->xl = g_new0(uint32_t, El);
  st->pre = g_new0(uint32_t, El);
  st->act = g_new0(uint32_t, El);
  st->w1l = g_new0(uint32_t, El);
  st->w2l = g_new0(uint32_t, El);
  uint32_t *outs = g_new0(uint32_t, El);
  gboolean ok = TRUE;
  for (int64_t l = 0; ok && l < El; l++) {
    ok = (st->xl[l] = take(g, st->xin, l, M, H, "tok", SP_TENSOR_ACTIVATION, err)) != BAD &&
         (st->w1l[l] = take(g, w1, l, H, Fl, "e", SP_TENSOR_WEIGHT, err)) != BAD &&
         (st->w2l[l] = take(g, w2, l, Fl, H, "e", SP_TENSOR_WEIGHT, err)) != BAD &&
         (cfg->dropless || /* dropless: every rank's experts on their exact tokens, below */
          ((st->pre[l] = mm(g, st->xl[l], FALSE, st->w1l[l], FALSE, "pre", SP_TENSOR_ACTIVATION, err)) != BAD &&
         (st->act[l] = like(g, st->pre[l], "relu", 2, M, Fl, 0, SP_TENSOR_ACTIVATION, err)) != BAD &&
         moe(g, SP_MOE_RELU, &st->pre[l], 1, &st->act[l], 1, st, err) != BAD &&
         (outs[l] = mm(g, st->act[l], FALSE, st->w2l[l], FALSE, "out", SP_TENSOR_ACTIVATION, err)) != BAD));
  }
  uint32_t part = BAD;
  if (ok && cfg->dropless)
    ok = (part = dropless_ffn(g, st, err)) != BAD;
  else if (ok) {
    part = like(g, x, "expert_out", 3, El, M, H, SP_TENSOR_ACTIVATION, err);
    ok = part != BAD && sp_ops_concat_parts(g, outs, El, part, err);
  }
  g_free(outs);
  if (!ok)
    return FALSE;
  st->eout = part;
  if (cfg->etp > 1) {
    st->eout = like(g, x, "etp_scatter", 3, El, cfg->ep * C, H, SP_TENSOR_ACTIVATION, err);
    if (st->eout == BAD ||
        sp_graph_reduce_scatter(g, &st->etp, part, st->eout, 1, SP_RED_SUM, cfg->algo, err) == BAD)
      return FALSE;
  }
  /* combine back: [E/ep, ep C, H] -> [E, C, H], then the weighted sum */
  if ((st->comb = sp_ops_moe_exchange(g, st, st->eout, TRUE, "combine", err)) == BAD)
    return FALSE;
  st->y = like(g, x, "y", 2, T, H, 0, SP_TENSOR_ACTIVATION, err);
  uint32_t uin[2] = { st->comb, st->route };
  return st->y != BAD && moe(g, SP_MOE_UNPERMUTE, uin, 2, &st->y, 1, st, err) != BAD;
}

gboolean sp_op_moe_layer_bwd(sp_graph *g, sp_moe_layer *st, uint32_t dy, uint32_t *dx, uint32_t *dwr,
                             uint32_t *dw1, uint32_t *dw2, GError **err)
{
  const sp_moe_cfg *cfg = &st->cfg;
  const int64_t T = cfg->tokens, H = cfg->hidden, E = cfg->experts, K = cfg->topk, C = st->capacity;
  const int64_t El = E / cfg->ep, Fl = cfg->ffn / cfg->etp, M = (int64_t)cfg->etp * cfg->ep * C;
  const uint32_t x = st->x;
  if (!need(g, dy, 2, T, H, 0, "dy ([tokens, hidden])", err))
    return FALSE;
  /* the weighted sum and the combine all-to-all, backward */
  uint32_t deo = like(g, x, "d_combine", 3, E, C, H, SP_TENSOR_ACTIVATION, err);
  uint32_t dprob = deo == BAD ? BAD : like(g, x, "d_prob", 2, T, K, 0, SP_TENSOR_ACTIVATION, err);
  uint32_t ubin[3] = { dy, st->comb, st->route }, ubout[2] = { deo, dprob };
  if (dprob == BAD || moe(g, SP_MOE_UNPERMUTE_BWD, ubin, 3, ubout, 2, st, err) == BAD)
    return FALSE;
  uint32_t dout = sp_ops_moe_exchange(g, st, deo, FALSE, "d_expert_out", err);
  if (dout == BAD)
    return FALSE;
  uint32_t doutg = dout;
  if (cfg->etp > 1) { /* conjugate of the reduce-scatter */
    doutg = like(g, x, "d_etp_gather", 3, El, M, H, SP_TENSOR_ACTIVATION, err);
    if (doutg == BAD || sp_graph_all_gather(g, &st->etp, dout, doutg, 1, cfg->algo, err) == BAD)
      return FALSE;
  }
  /* each local expert's FFN, backward */
  uint32_t *dxl = g_new0(uint32_t, El), *g1 = g_new0(uint32_t, El), *g2 = g_new0(uint32_t, El);
  uint32_t dxin = BAD;
  gboolean ok = TRUE;
  for (int64_t l = 0; ok && l < El; l++) {
    uint32_t dol = take(g, doutg, l, M, H, "dtok", SP_TENSOR_ACTIVATION, err), dact, dpre;
    if (cfg->dropless) { /* every rank's experts on their exact tokens, below */
      ok = (dxl[l] = dol) != BAD;
      continue;
    }
    ok = dol != BAD && (dact = mm(g, dol, FALSE, st->w2l[l], TRUE, "dact", SP_TENSOR_ACTIVATION, err)) != BAD &&
         (g2[l] = mm(g, st->act[l], TRUE, dol, FALSE, "dw2", SP_TENSOR_GRAD, err)) != BAD &&
         (dpre = like(g, dact, "drelu", 2, M, Fl, 0, SP_TENSOR_ACTIVATION, err)) != BAD;
    if (ok) {
      uint32_t rin[2] = { st->pre[l], dact };
      ok = moe(g, SP_MOE_RELU_BWD, rin, 2, &dpre, 1, st, err) != BAD &&
           (g1[l] = mm(g, st->xl[l], TRUE, dpre, FALSE, "dw1", SP_TENSOR_GRAD, err)) != BAD &&
           (dxl[l] = mm(g, dpre, FALSE, st->w1l[l], TRUE, "dx", SP_TENSOR_ACTIVATION, err)) != BAD;
    }
  }
  if (ok && cfg->dropless)
    ok = dropless_ffn_bwd(g, st, dxl, &dxin, dw1, dw2, err);
  else if (ok) {
    dxin = like(g, x, "d_etp_gather_in", 3, El, M, H, SP_TENSOR_ACTIVATION, err);
    *dw1 = dxin == BAD ? BAD : like(g, st->w1, "grad", 3, El, H, Fl, SP_TENSOR_GRAD, err);
    *dw2 = *dw1 == BAD ? BAD : like(g, st->w2, "grad", 3, El, Fl, H, SP_TENSOR_GRAD, err);
    ok = *dw2 != BAD && sp_ops_concat_parts(g, dxl, El, dxin, err) && sp_ops_concat_parts(g, g1, El, *dw1, err) &&
         sp_ops_concat_parts(g, g2, El, *dw2, err);
  }
  g_free(dxl);
  g_free(g1);
  g_free(g2);
  if (!ok)
    return FALSE;
  uint32_t drecv = dxin;
  if (cfg->etp > 1) { /* conjugate of the all-gather */
    drecv = like(g, x, "d_recv", 3, El, cfg->ep * C, H, SP_TENSOR_ACTIVATION, err);
    if (drecv == BAD || sp_graph_reduce_scatter(g, &st->etp, dxin, drecv, 1, SP_RED_SUM, cfg->algo, err) == BAD)
      return FALSE;
  }
  /* the dispatch all-to-all and the permutation, backward */
  uint32_t ddisp = sp_ops_moe_exchange(g, st, drecv, TRUE, "d_dispatch", err);
  if (ddisp == BAD)
    return FALSE;
  uint32_t dxt = like(g, x, "d_tokens", 2, T, H, 0, SP_TENSOR_ACTIVATION, err);
  uint32_t pbin[2] = { ddisp, st->route };
  if (dxt == BAD || moe(g, SP_MOE_PERMUTE_BWD, pbin, 2, &dxt, 1, st, err) == BAD)
    return FALSE;
  /* the router, backward: softmax, then the logits' matmul */
  uint32_t dlog = like(g, x, "d_logits", 2, T, E, 0, SP_TENSOR_ACTIVATION, err);
  uint32_t rbin[3] = { st->scores, st->route, dprob };
  if (dlog == BAD || moe(g, SP_MOE_ROUTE_BWD, rbin, 3, &dlog, 1, st, err) == BAD)
    return FALSE;
  uint32_t dxr = mm(g, dlog, FALSE, st->wr, TRUE, "dx_router", SP_TENSOR_ACTIVATION, err);
  *dx = dxr == BAD ? BAD : like(g, x, "dx", 2, T, H, 0, SP_TENSOR_ACTIVATION, err);
  if (*dx == BAD || sp_graph_add(g, dxt, dxr, *dx, SP_RED_SUM, err) == BAD)
    return FALSE;
  uint32_t dwrl = mm(g, x, TRUE, dlog, FALSE, "dwr_local", SP_TENSOR_GRAD, err);
  *dwr = dwrl == BAD ? BAD : like(g, st->wr, "grad", 2, H, E, 0, SP_TENSOR_GRAD, err);
  if (*dwr == BAD || sp_graph_all_reduce(g, &st->all, dwrl, *dwr, SP_RED_SUM, cfg->algo, err) == BAD)
    return FALSE;
  /* expert data parallelism: the expert gradients summed over the expert-data group */
  for (int i = 0; i < 2 && st->edp.group_size > 1; i++) {
    uint32_t *w = i == 0 ? dw1 : dw2, r = like(g, *w, "edp", 3, El, i == 0 ? H : Fl, i == 0 ? Fl : H,
                                                 SP_TENSOR_GRAD, err);
    if (r == BAD || sp_graph_all_reduce(g, &st->edp, *w, r, SP_RED_SUM, cfg->algo, err) == BAD)
      return FALSE;
    *w = r;
  }
  return TRUE;
}
