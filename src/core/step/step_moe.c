/* Mixture-of-experts parts of the training-step model: routing imbalance, the kernels
 * of an MoE layer, its collectives (dispatch and combine all-to-alls on the
 * expert-parallel group, expert-tensor-parallel gathers, the expert-dp gradient
 * reduction) and the memory of the experts. Dense models never reach this file.
 *
 * Token flow of one MoE layer (Megatron-Core's MoEAlltoAllTokenDispatcher,
 * megatron/core/transformer/moe/token_dispatcher.py): each rank routes its own
 * sequence shard (sequence parallelism splits it over tp), permutes the tokens by
 * expert, sends each of its tokens' topk copies to the rank holding that expert
 * (all-to-all over ep), all-gathers them over the expert tensor-parallel group when
 * etp > 1, runs its experts as one grouped GEMM, and reverses the path (reduce-scatter
 * over etp, all-to-all back, unpermute). The backward runs the same collectives in
 * reverse order: four all-to-alls per MoE layer and micro-batch.
 *
 * With dispatcher=flex (DeepEP, HybridEP; DeepSeek-V3 arXiv:2412.19437 sec. 3.2.2) a token
 * crosses the network once per destination node, to the GPU of its own local rank there,
 * which forwards it over NVLink to the experts' GPUs, the two stages overlapped: an
 * all-to-all between the nodes (one rank per node, its rail) beside an all-to-all inside
 * each node carrying every routed copy. */
#include "config.h"

#include <math.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "spsim/error.h"
#include "spsim/step.h"

const char sp_moe_what_dispatch[] = "MoE dispatch/combine all-to-all (ep group)";
const char sp_moe_what_dispatch_node[] = "MoE dispatch/combine between nodes (flex: one copy per node)";
const char sp_moe_what_etp_ag[] = "MoE expert-TP all-gather of routed tokens";
const char sp_moe_what_etp_rs[] = "MoE expert-TP reduce-scatter of expert outputs";
const char sp_moe_what_edp_grad[] = "expert gradient reduction (expert-dp group)";
const char sp_moe_what_edp_gather[] = "ZeRO expert parameter all-gather (expert-dp group)";

/* Scale @p n non-negative shares, the largest positive, to sum 1: by the largest first,
 * so that shares near DBL_MAX do not sum to infinity. */
static void normalise(double *a, int64_t n)
{
  double most = 0, sum = 0;
  for (int64_t i = 0; i < n; i++) most = MAX(most, a[i]);
  for (int64_t i = 0; i < n; i++) sum += a[i] /= most;
  for (int64_t i = 0; i < n; i++) a[i] /= sum;
}

/* A routing @p name needs a model with experts. */
static gboolean has_experts(const char *name, int64_t experts, GError **err)
{
  if (experts >= 1) return TRUE;
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s needs an MoE model (the model has no experts)", name);
  return FALSE;
}

/* The shares of a routing file's JSON @p root, named @p name in messages: a list of
 * @p experts non-negative numbers, not all zero, scaled to sum 1. */
static gboolean shares_of(JsonNode *root, const char *name, int64_t experts, double **shares, GError **err)
{
  if (root == NULL || !JSON_NODE_HOLDS_ARRAY(root) || (int64_t)json_array_get_length(json_node_get_array(root)) != experts) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s: the file must hold a JSON list of %" G_GINT64_FORMAT
                " token shares, one per expert", name, experts);
    return FALSE;
  }
  JsonArray *arr = json_node_get_array(root);
  double *a = g_new(double, experts), most = 0;
  for (int64_t i = 0; i < experts; i++) {
    JsonNode *e = json_array_get_element(arr, (guint)i);
    GType t = JSON_NODE_HOLDS_VALUE(e) ? json_node_get_value_type(e) : G_TYPE_INVALID;
    a[i] = t == G_TYPE_DOUBLE || t == G_TYPE_INT64 ? json_node_get_double(e) : -1;
    if (!(a[i] >= 0) || !isfinite(a[i])) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s: share %" G_GINT64_FORMAT " is not a non-negative number",
                  name, i);
      g_free(a);
      return FALSE;
    }
    most = MAX(most, a[i]);
  }
  if (!(most > 0)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s: every share is 0", name);
    g_free(a);
    return FALSE;
  }
  normalise(a, experts);
  *shares = a;
  return TRUE;
}

gboolean sp_moe_routing_parse(const char *spec, int64_t experts, double **shares, GError **err)
{
  *shares = NULL;
  if (spec == NULL || strcmp(spec, "uniform") == 0) return TRUE;
  if (!has_experts(spec, experts, err)) return FALSE;
  if (g_str_has_prefix(spec, "zipf:")) {
    char *end = NULL;
    double sexp = g_ascii_strtod(spec + 5, &end);
    if (end == spec + 5 || *end != '\0' || !(sexp >= 0) || sexp > 16) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s: write zipf:S with an exponent S in [0, 16] (e.g. zipf:1.2)", spec);
      return FALSE;
    }
    double *a = g_new(double, experts);
    for (int64_t i = 0; i < experts; i++) a[i] = pow((double)(i + 1), -sexp);
    normalise(a, experts);
    *shares = a;
    return TRUE;
  }
  g_autoptr(JsonParser) p = json_parser_new();
  GError *jerr = NULL;
  if (!json_parser_load_from_file(p, spec, &jerr)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s: neither uniform, zipf:S nor a readable JSON file (%s)", spec,
                jerr->message);
    g_error_free(jerr);
    return FALSE;
  }
  return shares_of(json_parser_get_root(p), spec, experts, shares, err);
}

gboolean sp_moe_routing_shares_parse(const char *json, gssize len, const char *name, int64_t experts, double **shares,
                                     GError **err)
{
  *shares = NULL;
  if (!has_experts(name, experts, err)) return FALSE;
  g_autoptr(JsonParser) p = json_parser_new();
  GError *jerr = NULL;
  if (!json_parser_load_from_data(p, json, len, &jerr)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--routing %s: not JSON (%s)", name, jerr->message);
    g_error_free(jerr);
    return FALSE;
  }
  return shares_of(json_parser_get_root(p), name, experts, shares, err);
}

double sp_step_moe_imbalance(const sp_step_ctx *c, const sp_layout *l)
{
  const sp_model *m = c->model;
  if (!sp_model_is_moe(m)) return 1.0;
  int32_t ep = sp_layout_ep(l);
  double f = 1.0;
  if (c->expert_share != NULL && c->n_expert_share == m->experts) {
    int64_t per = m->experts / ep;
    double total = 0, most = 0;
    for (int64_t i = 0; i < m->experts; i++) total += c->expert_share[i];
    for (int32_t r = 0; r < ep; r++) {
      double s = 0;
      for (int64_t i = r * per; i < (r + 1) * per; i++) s += c->expert_share[i];
      most = MAX(most, s);
    }
    if (total > 0) f = (double)ep * most / total;
  }
  /* an expert takes at most capacity_factor x its mean share (Fedus et al. 2021, Switch
   * Transformers sec. 2.2: expert capacity = tokens per expert x capacity factor) */
  if (m->capacity_factor > 0) f = MIN(f, m->capacity_factor);
  return f;
}

/* Tokens of a rank's sequence shard per micro-batch, mb x seq / (sp x cp) (as step.c's
 * sp_step_local_tokens, which this file does not call: step.c calls this file). */
static double shard_tokens(const sp_layout *l, int64_t seq)
{
  return (double)l->mb * (double)seq / ((double)l->sp * (double)l->cp);
}

/* C(a - b, k) / C(a, k): the chance that k draws without replacement from a miss b given ones */
static double miss_all(int64_t a, int64_t b, int64_t k)
{
  double p = 1.0;
  for (int64_t i = 0; i < k; i++) {
    if (a - b - i <= 0) return 0.0;
    p *= (double)(a - b - i) / (double)(a - i);
  }
  return p;
}

double sp_step_moe_node_share(const sp_model *m, int32_t nodes)
{
  if (nodes < 2 || m->experts < nodes) return 1.0;
  if (m->expert_groups > 0 && m->expert_groups % nodes == 0)
    return 1.0 - miss_all(m->expert_groups, m->expert_groups / nodes, m->groups_per_token);
  return 1.0 - miss_all(m->experts, m->experts / nodes, m->topk);
}

/* dispatcher=flex across nodes: the nodes the ep group spans and the network stage's
 * all-to-all buffer per rank for @p tokens routed tokens at imbalance @p f; 0 and 0 when
 * the layout does not dispatch that way or the group stays in one node. */
static int32_t flex_stage(const sp_step_ctx *c, const sp_layout *l, double tokens, double f, double *bytes)
{
  const sp_model *m = c->model;
  int64_t span = (int64_t)sp_layout_ep(l) * sp_layout_etp(l);
  *bytes = 0;
  if (!l->ep_flex || c->gpus_per_node <= 0 || span <= c->gpus_per_node || span % c->gpus_per_node != 0) return 0;
  int32_t nodes = (int32_t)(span / c->gpus_per_node);
  *bytes = tokens * (double)m->hidden * sp_model_dtype_bytes(m) * f * (double)nodes * sp_step_moe_node_share(m, nodes);
  return nodes;
}

/* Forward GEMM M x N x K and its backward: data gradient M x K x N and weight gradient K x N x M. */
static gboolean gemm3(const sp_kernel_gpu *g, int64_t m, int64_t n, int64_t k, double e, double t[3], GError **err)
{
  if (m < 1 || n < 1 || k < 1) { t[0] = t[1] = t[2] = 0; return TRUE; }
  return sp_kernel_gemm_time(g, 1, m, n, k, e, &t[0], err) && sp_kernel_gemm_time(g, 1, m, k, n, e, &t[1], err) &&
         sp_kernel_gemm_time(g, 1, k, n, m, e, &t[2], err);
}

/* gemm3 of a layer's linear: FP8 GEMMs and casts under the run's recipe (sp_kernel_linear3) */
static gboolean lin3(const sp_step_ctx *c, int64_t m, int64_t n, int64_t k, double e, double t[3], GError **err)
{
  if (m < 1 || n < 1 || k < 1) { t[0] = t[1] = t[2] = 0; return TRUE; }
  return sp_kernel_linear3(&c->hw.gpu, c->hw.fp8, m, n, k, e, t, err);
}

gboolean sp_step_moe_kernels(const sp_step_ctx *c, const sp_layout *l, sp_moe_kernels *o, GError **err)
{
  const sp_model *m = c->model;
  const sp_kernel_gpu *g = &c->hw.gpu;
  memset(o, 0, sizeof *o);
  if (!sp_model_is_moe(m)) return TRUE;
  double e = sp_model_dtype_bytes(m), h = (double)m->hidden;
  int32_t etp = sp_layout_etp(l);
  double f = sp_step_moe_imbalance(c, l);
  o->tokens = shard_tokens(l, c->seq) / l->tp;
  o->assigned = o->tokens * (double)m->topk * etp * f;
  o->a2a_bytes = o->tokens * (double)m->topk * h * e * f;
  o->nodes = flex_stage(c, l, o->tokens, f, &o->node_bytes);
  int64_t T = (int64_t)llround(o->tokens), A = (int64_t)llround(o->assigned);
  int64_t up = (m->mlp == SP_MLP_SWIGLU ? 2 : 1) * m->expert_ffn / etp, down = m->expert_ffn / etp;
  double t_up[3], t_down[3];
  if (!gemm3(g, T, m->experts, m->hidden, (double)sp_dtype_size(m->router_dtype), o->router, err) ||
      !lin3(c, A, up, m->hidden, e, t_up, err) ||
      !lin3(c, A, m->hidden, down, e, t_down, err))
    return FALSE;
  for (int i = 0; i < 3; i++) o->experts[i] = t_up[i] + t_down[i];
  if (m->shared_experts > 0) {
    /* shared experts: a dense MLP of shared x shared_ffn columns, split by tp, over the
     * rank's tokens gathered over tp (sequence parallelism) */
    int64_t Ts = T * l->tp, cols = m->shared_experts * m->shared_ffn / l->tp;
    int64_t sup = (m->mlp == SP_MLP_SWIGLU ? 2 : 1) * cols;
    double s_up[3], s_down[3];
    if (!lin3(c, Ts, sup, m->hidden, e, s_up, err) ||
        !lin3(c, Ts, m->hidden, cols, e, s_down, err))
      return FALSE;
    for (int i = 0; i < 3; i++) o->shared[i] = s_up[i] + s_down[i];
  }
  /* permute before dispatch and unpermute after combine: each reads and writes the
   * tokens' topk copies once */
  o->permute = 2.0 * sp_kernel_elementwise_time(g, 2.0 * o->tokens * (double)m->topk * h * e * f);
  /* the activation (SwiGLU: gate and up read, product written) runs over the experts'
   * rows, tokens x topk x expert_ffn (x imbalance), and the shared experts', while the
   * layer's element-wise term counts the dense MLP's tokens x ffn (sp_step_act_mlp_token_bytes:
   * the same multiple per element, written and read back); per rank, tp's share */
  double mult = m->mlp != SP_MLP_SWIGLU ? 2.0 : m->elementwise == SP_ELEM_EAGER ? 4.0 : 3.0;
  double moe_cols = (double)m->topk * (double)m->expert_ffn * f + (double)m->shared_experts * (double)m->shared_ffn;
  double elems = shard_tokens(l, c->seq) / l->tp * (moe_cols - (double)m->ffn);
  if (g->hbm_bw > 0) o->act = 2.0 * e * mult * elems / sp_kernel_hbm_rate(g);
  /* the dense MLP of sp_step_layer_kernels this layer does not run */
  int64_t Td = (int64_t)llround(shard_tokens(l, c->seq));
  int64_t dup = (m->mlp == SP_MLP_SWIGLU ? 2 : 1) * m->ffn / l->tp;
  double d_up[3], d_down[3];
  if (!lin3(c, Td, dup, m->hidden, e, d_up, err) ||
      !lin3(c, Td, m->hidden, m->ffn / l->tp, e, d_down, err))
    return FALSE;
  o->dense_fwd = d_up[0] + d_down[0];
  o->dense_bwd = d_up[1] + d_up[2] + d_down[1] + d_down[2];
  return TRUE;
}

double sp_moe_kernels_fwd(const sp_moe_kernels *k)
{
  return k->router[0] + k->permute + k->experts[0] + k->act + k->shared[0];
}

double sp_moe_kernels_bwd(const sp_moe_kernels *k)
{
  return k->router[1] + k->router[2] + k->permute + k->experts[1] + k->experts[2] + 2.0 * k->act + k->shared[1] +
         k->shared[2];
}

gboolean sp_step_moe_a2a_hidden(const sp_step_ctx *c, const sp_layout *l, const sp_layer_kernels *lk, double a2a,
                                double *hidden, GError **err)
{
  const sp_model *m = c->model;
  *hidden = 0;
  if (!l->a2a_overlap || !sp_model_is_moe(m) || a2a <= 0) return TRUE;
  sp_moe_kernels k;
  if (!sp_step_moe_kernels(c, l, &k, err)) return FALSE;
  double attn_f = lk->qkv[0] + lk->proj[0] + lk->attn_fwd + lk->elem_fwd / 2;
  double attn_b = lk->qkv[1] + lk->qkv[2] + lk->proj[1] + lk->proj[2] + lk->attn_bwd + 2.0 * lk->elem_fwd +
                  (sp_layout_rmods(l) & SP_RMOD_CORE_ATTN ? lk->attn_fwd : 0.0) + lk->rmod_attn;
  double ract = sp_layout_rmods(l) & SP_RMOD_MOE_ACT ? k.act : 0.0; /* recompute=moe_act */
  double win[4] = { attn_f + k.router[0] + k.permute / 2, k.experts[1] + k.experts[2] + 2.0 * k.act + ract, k.experts[0] + k.act,
                    k.router[1] + k.router[2] + k.permute / 2 + attn_b };
  double h = 0;
  for (int i = 0; i < 4; i++) h += MIN(a2a, win[i]);
  /* paired passes: schedules.py's warm-up plus one (stage 0, the longest), or all but F0 and the last B */
  int64_t mbs = c->global_batch / ((int64_t)l->dp * l->mb);
  int64_t v = sp_layout_vpp(l), total = mbs * v;
  int64_t warm = sp_step_warmup(l->pp, (int32_t)v, mbs, sp_layout_vpp_group(l), 0, TRUE);
  double paired = total > 0 ? (double)(total - warm) / (double)total : 0.0;
  double ls = (double)sp_layout_stage_layers(l, m);
  double frac = ls > 0 ? (double)sp_step_moe_max_stage_layers(m, l) / ls : 0.0;
  /* a pair is one forward and one backward: per micro-batch, the pair's hidden time */
  *hidden = paired * frac * h;
  return TRUE;
}

/* First global layer of pipeline stage @p stage. */
static int64_t stage_first(const sp_model *m, const sp_layout *l, int32_t stage)
{
  int64_t first = 0;
  for (int32_t s = 0; s < stage; s++) first += sp_layout_layers_of_stage(l, m, s);
  return first;
}

static int64_t moe_in(const sp_model *m, int64_t first, int64_t n)
{
  int64_t k = 0;
  for (int64_t i = first; i < first + n; i++) k += sp_model_layer_is_moe(m, i);
  return k;
}

int64_t sp_step_moe_stage_layers(const sp_model *m, const sp_layout *l, int32_t stage)
{
  return moe_in(m, stage_first(m, l, stage), sp_layout_layers_of_stage(l, m, stage));
}

int64_t sp_step_moe_max_stage_layers(const sp_model *m, const sp_layout *l)
{
  int64_t most = 0, first = 0;
  for (int32_t s = 0; s < l->pp; s++) {
    int64_t n = sp_layout_layers_of_stage(l, m, s);
    most = MAX(most, moe_in(m, first, n));
    first += n;
  }
  return most;
}

double sp_step_moe_stage_dense_params(const sp_model *m, const sp_layout *l, int32_t stage)
{
  int64_t first = stage_first(m, l, stage), n = sp_layout_layers_of_stage(l, m, stage);
  int64_t k = moe_in(m, first, n);
  double common = sp_model_attn_matmul_params(m) + sp_model_attn_norm_params(m) + 2.0 * (double)m->hidden;
  double moe = sp_model_router_params(m) + sp_model_shared_expert_params(m);
  return (double)n * common + (double)k * moe + (double)(n - k) * sp_model_dense_mlp_params(m);
}

double sp_step_moe_max_stage_dense_params(const sp_model *m, const sp_layout *l)
{
  double most = 0, emb = (double)m->vocab * (double)m->hidden;
  int64_t first = 0;
  double common = sp_model_attn_matmul_params(m) + sp_model_attn_norm_params(m) + 2.0 * (double)m->hidden;
  double moe = sp_model_router_params(m) + sp_model_shared_expert_params(m);
  for (int32_t s = 0; s < l->pp; s++) {
    int64_t n = sp_layout_layers_of_stage(l, m, s), k = moe_in(m, first, n);
    double p = (double)n * common + (double)k * moe + (double)(n - k) * sp_model_dense_mlp_params(m);
    if (l->pp == 1) p += sp_model_embedding_params(m) + (double)m->hidden;
    else if (s == 0) p += emb;
    else if (s == l->pp - 1) p += emb + (double)m->hidden;
    most = MAX(most, p);
    first += n;
  }
  return most / l->tp;
}

double sp_step_moe_layer_dense_params(const sp_model *m, const sp_layout *l, int64_t i)
{
  double p = sp_model_attn_matmul_params(m) + sp_model_attn_norm_params(m) + 2.0 * (double)m->hidden;
  if (sp_model_layer_is_moe(m, i)) p += sp_model_router_params(m) + sp_model_shared_expert_params(m);
  else p += sp_model_dense_mlp_params(m);
  return p / l->tp;
}

double sp_step_moe_layer_expert_params(const sp_model *m, const sp_layout *l)
{
  return sp_model_routed_expert_params(m) / ((double)sp_layout_ep(l) * sp_layout_etp(l));
}

/* Adam reads and writes 30 bytes per parameter it updates (step.c, ADAM_BYTES_PER_PARAM). */
#define MOE_ADAM_BYTES_PER_PARAM 30.0

double sp_step_moe_optimizer_time(const sp_step_ctx *c, const sp_layout *l, int32_t stage)
{
  const sp_model *m = c->model;
  if (!sp_model_is_moe(m)) return 0.0;
  int64_t n = stage < 0 ? sp_step_moe_max_stage_layers(m, l) : sp_step_moe_stage_layers(m, l, stage);
  double p = (double)n * sp_step_moe_layer_expert_params(m, l);
  if (l->zero >= 1) p /= sp_layout_expert_replicas(l);
  return sp_kernel_elementwise_time(&c->hw.gpu, MOE_ADAM_BYTES_PER_PARAM * p);
}

void sp_step_moe_memory(const sp_step_ctx *c, const sp_layout *l, sp_step_mem *o)
{
  const sp_model *m = c->model;
  if (!sp_model_is_moe(m)) return;
  double e = sp_model_dtype_bytes(m), h = (double)m->hidden;
  double nm = (double)sp_step_moe_max_stage_layers(m, l);
  double pe = nm * sp_step_moe_layer_expert_params(m, l);
  double ge = sp_layout_expert_replicas(l);
  /* mixed-precision Adam, 2 + 2 + 12 bytes per parameter, ZeRO over the expert-dp group */
  o->weights += e * pe / (l->zero >= 3 ? ge : 1.0);
  if (c->hw.fp8 != SP_FP8_NONE) o->weights += pe / (l->zero >= 3 ? ge : 1.0); /* FP8 copy (sp_step_memory) */
  o->grads += e * pe / (l->zero >= 2 ? ge : 1.0);
  o->optim += 12.0 * pe / (l->zero >= 1 ? ge : 1.0);
  double f = sp_step_moe_imbalance(c, l), etp = sp_layout_etp(l);
  double tokens = shard_tokens(l, c->seq) / l->tp;
  double assigned = tokens * (double)m->topk * etp * f;
  /* dispatch and combine buffers of the layer in flight: the received and gathered token copies */
  o->buffers += 2.0 * assigned * h * e;
  o->total = o->weights + o->grads + o->optim + o->act + o->buffers;
}

double sp_step_moe_act_layer_extra(const sp_step_ctx *c, const sp_layout *l)
{
  const sp_model *m = c->model;
  if (!sp_model_is_moe(m) || (l->ckpt != SP_CKPT_NONE && l->ckpt != SP_CKPT_SELECTIVE)) return 0.0;
  double e = sp_model_dtype_bytes(m), h = (double)m->hidden;
  double f = sp_step_moe_imbalance(c, l), etp = sp_layout_etp(l);
  double tokens = shard_tokens(l, c->seq) / l->tp;
  double assigned = tokens * (double)m->topk * etp * f;
  /* an MoE layer keeps, per routed copy, the expert's input and its up (and gate) and
   * activation outputs, and the shared experts' likewise, in place of the dense MLP
   * block's (sp_step_act_mlp_token_bytes) */
  double cols = (double)m->expert_ffn / etp, mult = m->mlp == SP_MLP_SWIGLU ? 3.0 : 2.0;
  /* the first GEMM's input and the second's (the activation's output) at lin bytes, the
   * first GEMM's output at e (sp_step_act_lin_bytes); recompute=moe_act drops the
   * activation's output after use (its input stays) */
  double lin = sp_step_act_lin_bytes(c);
  double act_out = sp_layout_rmods(l) & SP_RMOD_MOE_ACT ? 0.0 : lin;
  double expert = assigned * (lin * h + (e * (mult - 1.0) + act_out) * cols);
  double sf = (double)(m->shared_experts * m->shared_ffn) / l->tp;
  double shared = m->shared_experts > 0 ? tokens * l->tp * (lin * h / l->tp + (e * (mult - 1.0) + lin) * sf) : 0.0;
  double dense = shard_tokens(l, c->seq) * sp_step_act_mlp_token_bytes(m, l, lin);
  return expert + shared - dense;
}

static void push(GArray *a, sp_comm_kind k, sp_comm_when w, sp_coll coll, int32_t n, int32_t stride, double bytes,
                 double times, const char *what)
{
  if (n < 2 || times <= 0 || bytes <= 0) return;
  sp_comm cm = { .kind = k, .when = w, .coll = coll, .n = n, .stride = stride, .bytes = (uint64_t)llround(bytes),
                 .times = times, .what = what };
  g_array_append_val(a, cm);
}

void sp_step_moe_comms(const sp_step_ctx *c, const sp_layout *l, GArray *out)
{
  const sp_model *m = c->model;
  if (!sp_model_is_moe(m)) return;
  double ls = (double)sp_layout_stage_layers(l, m);
  double nm = (double)sp_step_moe_max_stage_layers(m, l);
  double frac = ls > 0 ? nm / ls : 0.0; /* per layer of the fullest stage */
  double rec = l->ckpt == SP_CKPT_FULL ? 1.0 : 0.0;
  int32_t ep = sp_layout_ep(l), etp = sp_layout_etp(l);
  double f = sp_step_moe_imbalance(c, l), e = sp_model_dtype_bytes(m);
  double tokens = shard_tokens(l, c->seq) / l->tp;
  double a2a = tokens * (double)m->topk * (double)m->hidden * e * f;
  /* Expert-parallel groups in Megatron-Core's expert order (tp = etp, ep, dp, pp): stride etp.
   * flex across nodes: the network stage between the nodes' ranks of one local index
   * (stride gpus_per_node) beside the NVLink stage inside each node */
  double node_bytes;
  int32_t nodes = flex_stage(c, l, tokens, f, &node_bytes);
  int32_t epn = nodes > 1 ? ep / nodes : ep;
  push(out, SP_COMM_SP, SP_PER_LAYER_FWD, SP_COLL_ALL_TO_ALL, epn, etp, a2a, 2.0 * frac, sp_moe_what_dispatch);
  push(out, SP_COMM_SP, SP_PER_LAYER_BWD, SP_COLL_ALL_TO_ALL, epn, etp, a2a, (2.0 + 2.0 * rec) * frac, sp_moe_what_dispatch);
  if (nodes > 1) {
    push(out, SP_COMM_SP, SP_PER_LAYER_FWD, SP_COLL_ALL_TO_ALL, nodes, c->gpus_per_node, node_bytes, 2.0 * frac,
         sp_moe_what_dispatch_node);
    push(out, SP_COMM_SP, SP_PER_LAYER_BWD, SP_COLL_ALL_TO_ALL, nodes, c->gpus_per_node, node_bytes,
         (2.0 + 2.0 * rec) * frac, sp_moe_what_dispatch_node);
  }
  double gathered = a2a * etp;
  push(out, SP_COMM_TP, SP_PER_LAYER_FWD, SP_COLL_ALL_GATHER, etp, 1, gathered, frac, sp_moe_what_etp_ag);
  push(out, SP_COMM_TP, SP_PER_LAYER_FWD, SP_COLL_REDUCE_SCATTER, etp, 1, gathered, frac, sp_moe_what_etp_rs);
  push(out, SP_COMM_TP, SP_PER_LAYER_BWD, SP_COLL_ALL_GATHER, etp, 1, gathered, (1.0 + rec) * frac, sp_moe_what_etp_ag);
  push(out, SP_COMM_TP, SP_PER_LAYER_BWD, SP_COLL_REDUCE_SCATTER, etp, 1, gathered, (1.0 + rec) * frac, sp_moe_what_etp_rs);
  /* expert gradients: reduced over the expert-dp group (stride etp x ep) once per step */
  int32_t ge = sp_layout_expert_replicas(l);
  double grads = nm * sp_step_moe_layer_expert_params(m, l) * e;
  if (l->zero == 0)
    push(out, SP_COMM_DP, SP_PER_STEP, SP_COLL_ALL_REDUCE, ge, etp * ep, grads, 1, sp_moe_what_edp_grad);
  else {
    push(out, SP_COMM_DP, SP_PER_STEP, SP_COLL_REDUCE_SCATTER, ge, etp * ep, grads, 1, sp_moe_what_edp_grad);
    push(out, SP_COMM_DP, SP_PER_STEP, SP_COLL_ALL_GATHER, ge, etp * ep, grads, 1, sp_moe_what_edp_gather);
  }
}
