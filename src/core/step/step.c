/* Training-step cost model: compute, communication list, overlap, bubbles, memory. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/step.h"

static const char *const kind_names[SP_COMM_KIND_COUNT] = { "tp", "sp", "isp", "ring", "pp", "dp" };

const char *sp_comm_kind_name(sp_comm_kind k)
{
  return (unsigned)k < SP_COMM_KIND_COUNT ? kind_names[k] : "?";
}

void sp_step_hw_init(sp_step_hw *hw)
{
  sp_kernel_gpu_h100(&hw->gpu);
  hw->attn = SP_ATTN_FLASH;
  hw->fp8 = SP_FP8_NONE;
  hw->mem_bytes = 80.0 * 1024 * 1024 * 1024; /* 80 GiB HBM3 */
  hw->mem_usable = 0.92;
  hw->dp_bucket_params = 40e6;               /* Megatron DDP default bucket */
  hw->comm_slowdown = 0.0;                   /* the what-if sets the simulation's */
}

void sp_analytic_net_init(sp_analytic_net *n)
{
  n->gpus_per_node = 8;
  n->intra_busbw = 360e9;
  n->nic_bw = 46e9;
  n->alpha_intra = 3.4e-6;
  n->alpha_inter = 14e-6;
}

double sp_step_local_tokens(const sp_layout *l, int64_t seq)
{
  return (double)l->mb * (double)seq / ((double)l->sp * (double)l->cp);
}

double sp_step_bubble_fraction(int32_t pp, int64_t microbatches)
{
  if (microbatches <= 0) return 0.0;
  return (double)(pp - 1) / (double)microbatches;
}

double sp_step_stage_params(const sp_model *m, const sp_layout *l, int32_t stage)
{
  double layers = (double)sp_layout_layers_of_stage(l, m, stage);
  double emb = (double)m->vocab * (double)m->hidden;
  double p = sp_model_is_moe(m) ? sp_step_moe_stage_dense_params(m, l, stage) : layers * sp_model_layer_params(m);
  if (l->pp == 1) p += sp_model_embedding_params(m) + (double)m->hidden;
  else if (stage == 0) p += emb;                           /* input embedding */
  else if (stage == l->pp - 1) p += emb + (double)m->hidden; /* final norm and output layer */
  return p / l->tp;
}

/* Parameters of the fullest stage held by one TP rank (before ISP/ZeRO sharding). */
static double stage_params_local(const sp_model *m, const sp_layout *l)
{
  if (sp_model_is_moe(m)) return sp_step_moe_max_stage_dense_params(m, l);
  double ls = (double)sp_layout_stage_layers(l, m);
  double emb = (double)m->vocab * (double)m->hidden;
  double stage = ls * sp_model_layer_params(m) + (l->pp == 1 ? sp_model_embedding_params(m) : emb) + (double)m->hidden;
  return stage / l->tp;
}

void sp_step_memory(const sp_step_ctx *c, const sp_layout *l, sp_step_mem *o)
{
  const sp_model *m = c->model;
  double e = sp_model_dtype_bytes(m);
  double p = stage_params_local(m, l) / l->wp;
  double g = (double)sp_layout_replicas(l) / l->wp; /* ZeRO group */
  memset(o, 0, sizeof *o);
  /* Mixed-precision Adam (ZeRO paper): 2 + 2 + 12 bytes per parameter. */
  o->weights = e * p / (l->zero >= 3 ? g : 1.0);
  if (c->hw.fp8 != SP_FP8_NONE) {
    /* the FP8 copy of the layers' linear weights, 1 byte per parameter, that
     * Transformer Engine keeps between micro-batches (te.Linear's cached FP8 weight,
     * Megatron-Core's is_first_microbatch); MoE models: the attention linears here, the
     * experts in sp_step_moe_memory */
    double lin = sp_model_is_moe(m) ? sp_model_attn_matmul_params(m) : sp_model_layer_matmul_params(m);
    o->weights += (double)sp_layout_stage_layers(l, m) * lin / l->tp / l->wp / (l->zero >= 3 ? g : 1.0);
  }
  o->grads = e * p / (l->zero >= 2 ? g : 1.0);
  o->optim = 12.0 * p / (l->zero >= 1 ? g : 1.0);
  int64_t mbs = c->global_batch / ((int64_t)l->dp * l->mb);
  int32_t v = sp_layout_vpp(l);
  gboolean ov = l->a2a_overlap && sp_model_is_moe(m);
  double lin = sp_step_act_lin_bytes(c); /* linears' saved inputs: FP8 copies with FP8 */
  double per_layer = sp_step_act_layer_bytes_lin(m, l, c->seq, c->hw.attn, lin);
  double moe_extra = sp_step_moe_act_layer_extra(c, l);
  double rework = 0.0;
  if (l->ckpt == SP_CKPT_FULL) {
    sp_layout nl = *l;
    nl.ckpt = SP_CKPT_NONE;
    rework = sp_step_act_layer_bytes_lin(m, &nl, c->seq, c->hw.attn, lin); /* recompute working set */
  }
  /* Logits on the last stage: bf16 logits + fp32 copy for the loss, vocab split by tp. */
  double logits = 6.0 * sp_step_local_tokens(l, c->seq) * (double)m->vocab / l->tp;
  /* The fullest stage: the first holds the most passes, the second (the first of the
   * middle stages, all alike) may hold more layers (ppfirst), the last the logits. A
   * stage's passes are counted at its mean layers per chunk. */
  int32_t cand[3] = { 0, MIN(1, l->pp - 1), l->pp - 1 };
  o->act = 0.0;
  for (int i = 0; i < 3; i++) {
    int32_t s = cand[i];
    double live = (double)sp_step_live_passes(l->pp, v, mbs, sp_layout_vpp_group(l), s, ov) / (l->pp > 1 ? v : 1);
    double layers = (double)sp_layout_layers_of_stage(l, m, s);
    double moe_layers = sp_model_is_moe(m) ? (double)sp_step_moe_stage_layers(m, l, s) : 0.0;
    double a = (layers * per_layer + moe_layers * moe_extra) * live + rework;
    if (s == l->pp - 1) a += logits;
    o->act = MAX(o->act, a);
  }
  double mm = sp_model_layer_matmul_params(m) / l->tp * e;
  if (l->wp > 1 || l->zero >= 3) o->buffers = 3.0 * mm; /* two gather buffers + one gradient buffer */
  o->total = o->weights + o->grads + o->optim + o->act + o->buffers;
  if (sp_model_is_moe(m)) sp_step_moe_memory(c, l, o);
}

void sp_step_comm_sizes(const sp_step_ctx *c, const sp_layout *l, sp_step_sizes *o)
{
  const sp_model *m = c->model;
  double e = sp_model_dtype_bytes(m), h = (double)m->hidden, d = (double)sp_model_head_dim(m);
  double sl = sp_step_local_tokens(l, c->seq);
  double kvl = sp_step_kv_per_tp(m, l);
  o->act = sl * h * e;
  o->q = sl * ((double)m->heads * d / l->tp) * e; /* Q or the attention output: heads x d wide */
  o->kv = sl * MAX(kvl, (double)l->sp) * d * e; /* KV heads replicated up to sp when fewer */
  double kvr = MAX(1.0, MAX(kvl, (double)l->sp) / l->sp);
  o->ring_blk = 2.0 * ((double)l->mb * (double)c->seq / l->cp) * kvr * d * e;
  o->layer_weights = sp_model_layer_matmul_params(m) / l->tp * e;
  o->pp_msg = o->act / (l->tp_sp ? l->tp : 1);
}

static void push(GArray *a, sp_comm_kind k, sp_comm_when w, sp_coll coll, int32_t n, int32_t stride,
                 double bytes, double times, const char *what)
{
  if (n < 2 || times <= 0) return;
  sp_comm cm = { .kind = k, .when = w, .coll = coll, .n = n, .stride = stride,
                 .bytes = (uint64_t)llround(bytes), .times = times, .what = what };
  g_array_append_val(a, cm);
}

void sp_step_comms(const sp_step_ctx *c, const sp_layout *l, GArray *out)
{
  const sp_model *m = c->model;
  double e = sp_model_dtype_bytes(m);
  sp_step_sizes z;
  sp_step_comm_sizes(c, l, &z);
  double act = z.act;
  gboolean full = l->ckpt == SP_CKPT_FULL;
  double rec = full ? 1.0 : 0.0; /* full recomputation repeats the forward collectives */
  if (l->tp > 1) {
    if (l->tp_sp) {
      push(out, SP_COMM_TP, SP_PER_LAYER_FWD, SP_COLL_ALL_GATHER, l->tp, 1, act, 2, "TP+SP all-gather before attention and MLP");
      push(out, SP_COMM_TP, SP_PER_LAYER_FWD, SP_COLL_REDUCE_SCATTER, l->tp, 1, act, 2, "TP+SP reduce-scatter after attention and MLP");
      push(out, SP_COMM_TP, SP_PER_LAYER_BWD, SP_COLL_ALL_GATHER, l->tp, 1, act, 2 + 2 * rec, "TP+SP backward all-gathers (+ recompute)");
      push(out, SP_COMM_TP, SP_PER_LAYER_BWD, SP_COLL_REDUCE_SCATTER, l->tp, 1, act, 2 + 2 * rec, "TP+SP backward reduce-scatters (+ recompute)");
    } else {
      push(out, SP_COMM_TP, SP_PER_LAYER_FWD, SP_COLL_ALL_REDUCE, l->tp, 1, act, 2, "TP all-reduce after attention and MLP");
      push(out, SP_COMM_TP, SP_PER_LAYER_BWD, SP_COLL_ALL_REDUCE, l->tp, 1, act, 2 + 2 * rec, "TP backward all-reduces (+ recompute)");
    }
  }
  if (l->sp > 1) {
    double q = z.q, kv = z.kv;
    push(out, SP_COMM_SP, SP_PER_LAYER_FWD, SP_COLL_ALL_TO_ALL, l->sp, l->tp, q, 2, "Ulysses all-to-all of Q and of the attention output");
    push(out, SP_COMM_SP, SP_PER_LAYER_FWD, SP_COLL_ALL_TO_ALL, l->sp, l->tp, kv, 2, "Ulysses all-to-all of K and V");
    push(out, SP_COMM_SP, SP_PER_LAYER_BWD, SP_COLL_ALL_TO_ALL, l->sp, l->tp, q, 2 + 2 * rec, "Ulysses backward all-to-all of dQ and dOut (+ recompute)");
    push(out, SP_COMM_SP, SP_PER_LAYER_BWD, SP_COLL_ALL_TO_ALL, l->sp, l->tp, kv, 2 + 2 * rec, "Ulysses backward all-to-all of dK and dV (+ recompute)");
  }
  if (l->cp > 1) {
    double blk = z.ring_blk;
    push(out, SP_COMM_RING, SP_PER_LAYER_FWD, SP_COLL_SEND_RECV, 2, l->tp * l->sp, blk, l->cp - 1, "ring attention K,V block to the next rank");
    push(out, SP_COMM_RING, SP_PER_LAYER_BWD, SP_COLL_SEND_RECV, 2, l->tp * l->sp, 2.0 * blk, l->cp - 1, "ring attention K,V and dK,dV blocks");
    push(out, SP_COMM_RING, SP_PER_LAYER_BWD, SP_COLL_SEND_RECV, 2, l->tp * l->sp, blk, (l->cp - 1) * rec, "ring attention recompute");
  }
  double mmw = z.layer_weights;
  if (l->wp > 1) {
    push(out, SP_COMM_ISP, SP_PER_LAYER_FWD, SP_COLL_ALL_GATHER, l->wp, l->tp, mmw, 1, "ISP weight all-gather (forward)");
    push(out, SP_COMM_ISP, SP_PER_LAYER_BWD, SP_COLL_ALL_GATHER, l->wp, l->tp, mmw, 1, "ISP weight all-gather (backward)");
    push(out, SP_COMM_ISP, SP_PER_LAYER_BWD, SP_COLL_REDUCE_SCATTER, l->wp, l->tp, mmw, 1, "ISP gradient reduce-scatter");
  }
  int32_t g = sp_layout_replicas(l) / l->wp;
  double ge = sp_step_grad_bytes(m, l);
  if (l->zero >= 3) {
    push(out, SP_COMM_DP, SP_PER_LAYER_FWD, SP_COLL_ALL_GATHER, g, l->tp * l->wp, mmw, 1, "ZeRO-3 parameter all-gather (forward)");
    push(out, SP_COMM_DP, SP_PER_LAYER_BWD, SP_COLL_ALL_GATHER, g, l->tp * l->wp, mmw, 1, "ZeRO-3 parameter all-gather (backward)");
    push(out, SP_COMM_DP, SP_PER_LAYER_BWD, SP_COLL_REDUCE_SCATTER, g, l->tp * l->wp, mmw * ge / e, 1, "ZeRO-3 gradient reduce-scatter");
  }
  if (l->pp > 1) {
    push(out, SP_COMM_PP, SP_PER_MB, SP_COLL_SEND_RECV, 2, l->tp * l->sp * l->cp * l->dp, z.pp_msg, 2,
         "pipeline send of activations (forward) and their gradients (backward)");
  }
  double params = stage_params_local(m, l) / l->wp;
  if (l->zero == 0)
    push(out, SP_COMM_DP, SP_PER_STEP, SP_COLL_ALL_REDUCE, g, l->tp * l->wp, params * ge, 1, "gradient all-reduce");
  else if (l->zero <= 2) {
    push(out, SP_COMM_DP, SP_PER_STEP, SP_COLL_REDUCE_SCATTER, g, l->tp * l->wp, params * ge, 1, "ZeRO gradient reduce-scatter");
    push(out, SP_COMM_DP, SP_PER_STEP, SP_COLL_ALL_GATHER, g, l->tp * l->wp, params * e, 1, "ZeRO parameter all-gather after the optimizer");
  }
  sp_step_edge_comms(c, l, out);
  if (sp_model_is_moe(m)) sp_step_moe_comms(c, l, out);
}

double sp_step_grad_bytes(const sp_model *m, const sp_layout *l)
{
  return l->dp_fp32 ? 4.0 : sp_model_dtype_bytes(m);
}

/* Megatron-LM (NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py and
 * mappings.py, models/common/embeddings/language_model_embedding.py,
 * distributed/finalize_model_grads.py):
 *  - VocabParallelEmbedding: each TP rank looks up its slice of the vocabulary and the
 *    partial embeddings are summed: all-reduce (reduce_from_tensor_model_parallel_region,
 *    backward the identity) without sequence parallelism; with it a reduce-scatter
 *    (reduce_scatter_to_sequence_parallel_region, backward an all-gather) when the model
 *    has no learned position embedding (reduce_scatter_embeddings; spsim's models use
 *    rotary or no position table; with a learned one Megatron all-reduces and then
 *    scatters, whose backward is the same all-gather);
 *  - the output layer (ColumnParallelLinear): without sequence parallelism its input
 *    passes copy_to_tensor_model_parallel_region, the identity forward and an
 *    all-reduce of the input gradient backward; with it the input is all-gathered
 *    forward, re-gathered for the weight gradient and the input gradient
 *    reduce-scattered backward (LinearWithGradAccumulationAndAsyncCommunication);
 *  - tied embeddings on pp > 1 stages: the first stage (input table) and the last
 *    (output layer) hold a copy each, and _allreduce_word_embedding_grads all-reduces
 *    its gradient (V h / tp, in the gradient dtype) between them after the
 *    data-parallel reduction. The group is the same TP/DP rank on stage 0 and pp - 1. */
void sp_step_edge_comms(const sp_step_ctx *c, const sp_layout *l, GArray *out)
{
  const sp_model *m = c->model;
  sp_step_sizes z;
  sp_step_comm_sizes(c, l, &z);
  double act = z.act;
  if (l->tp > 1) {
    if (l->tp_sp) {
      push(out, SP_COMM_TP, SP_PER_MB_EMBED, SP_COLL_REDUCE_SCATTER, l->tp, 1, act, 1, "embedding reduce-scatter (TP+SP)");
      push(out, SP_COMM_TP, SP_PER_MB_EMBED, SP_COLL_ALL_GATHER, l->tp, 1, act, 1, "embedding backward all-gather (TP+SP)");
      push(out, SP_COMM_TP, SP_PER_MB_HEAD, SP_COLL_ALL_GATHER, l->tp, 1, act, 2, "output layer all-gathers (TP+SP: forward, weight gradient)");
      push(out, SP_COMM_TP, SP_PER_MB_HEAD, SP_COLL_REDUCE_SCATTER, l->tp, 1, act, 1, "output layer backward reduce-scatter (TP+SP)");
    } else {
      push(out, SP_COMM_TP, SP_PER_MB_EMBED, SP_COLL_ALL_REDUCE, l->tp, 1, act, 1, "embedding all-reduce (TP)");
      push(out, SP_COMM_TP, SP_PER_MB_HEAD, SP_COLL_ALL_REDUCE, l->tp, 1, act, 1, "output layer backward all-reduce (TP)");
    }
  }
  if (m->tied_embeddings && l->pp > 1) {
    int32_t stage_ranks = l->tp * l->sp * l->cp * l->dp;
    double table = (double)m->vocab * (double)m->hidden / l->tp / l->wp;
    push(out, SP_COMM_PP, SP_PER_STEP, SP_COLL_ALL_REDUCE, 2, (l->pp - 1) * stage_ranks, table * sp_step_grad_bytes(m, l), 1,
         "tied word-embedding gradient all-reduce (first and last stage)");
  }
}

/* Forward GEMM M x N x K and its backward: data gradient M x K x N and weight
 * gradient K x N x M. */
static gboolean gemm3(const sp_kernel_gpu *g, int64_t m, int64_t n, int64_t k, double e, double t[3], GError **err)
{
  return sp_kernel_gemm_time(g, 1, m, n, k, e, &t[0], err) && sp_kernel_gemm_time(g, 1, m, k, n, e, &t[1], err) &&
         sp_kernel_gemm_time(g, 1, k, n, m, e, &t[2], err);
}

/* Element-wise kernels per layer, forward (Megatron's GPT layer: two norms, rotary or
 * bias, activation, two dropouts, two residual adds). */
#define ELEMWISE_KERNELS_PER_LAYER 8

/* Eager PyTorch element-wise ops of torchtitan's Llama block (pytorch/torchtitan at
 * 9dec370: torchtitan/models/norms.py RMSNorm, torchtitan/models/llama/model.py
 * apply_rotary_emb, repeat_kv, Attention.forward, FeedForward.forward,
 * TransformerBlock.forward), each a separate kernel that reads its inputs from HBM and
 * writes its output; bytes per token with bf16 activations (2 bytes) and fp32
 * intermediates (4 bytes), hidden h:
 *  - RMSNorm, twice: x.float() 2h + 4h, pow(2) 4h + 4h, mean 4h, x * rsqrt 4h + 4h,
 *    type_as 4h + 2h, * weight 2h + 2h: 36h (8 kernels with the eps add and rsqrt of
 *    one value per token);
 *  - residual adds, twice: 2h + 2h read, 2h written: 6h;
 *  - rotary on Q (q = heads x d columns) and K (kv = kv_heads x d): float() 2 + 4,
 *    complex product 4 + 4, type_as 4 + 2: 20 bytes per column (3 kernels each);
 *  - repeat_kv of K and V when kv_heads < heads (expand + reshape copies): 2 kv read,
 *    2 q written, each (2 kernels);
 *  - SwiGLU: silu(w1 x) 2f + 2f, the gate product 4f + 2f: 10f (2 kernels);
 *  - the attention output's transpose(1, 2).contiguous() is not counted: PyTorch's
 *    flash backend returns its output already in (batch, seq, heads, d) order.
 * TP shares: q, kv and ffn columns divided by tp; norms and residual adds act on h / tp
 * per token with sequence parallelism, on the whole h without it. */
#define EAGER_KERNELS_PER_LAYER (2 * 8 + 2 + 2 * 3 + 2)

double sp_step_eager_elem_bytes_per_token(const sp_model *m, const sp_layout *l)
{
  double t = l->tp, d = (double)sp_model_head_dim(m);
  double hs = (double)m->hidden / (l->tp_sp ? t : 1.0);
  double q = (double)m->heads / t * d, kv = sp_step_kv_per_tp(m, l) * d, f = (double)m->ffn / t;
  double rep = m->heads > m->kv_heads ? 2.0 * (2.0 * kv + 2.0 * q) : 0.0;
  return 2.0 * 36.0 * hs + 2.0 * 6.0 * hs + 20.0 * (q + kv) + rep + 10.0 * f;
}

/* Fused attention kernels skip the (query, key) blocks outside a sliding window
 * (FlashAttention-2's window_size, Dao-AILab/flash-attention README "Sliding window local
 * attention"), so a windowed model's attention costs the fraction of causal pairs it
 * keeps, averaged over the layers; the unfused path materialises every score and masks
 * them, so it saves nothing. */
static double windowed(const sp_step_ctx *c, double t)
{
  double frac = sp_model_attn_causal_fraction(c->model, c->seq);
  if (c->hw.attn == SP_ATTN_UNFUSED || frac >= 1.0 || t <= c->hw.gpu.launch) return t;
  return (t - c->hw.gpu.launch) * frac + c->hw.gpu.launch;
}

/* Multi-head latent attention (DeepSeek-V2 sec. 2.1): the Q and KV down- and up-
 * projections priced as one GEMM of their weights' columns split by tp, the output
 * projection from heads x v columns, and attention at the mean of the query/key and value
 * head widths (the same FLOPs as qk for the scores and v for the weighted sum). */
static gboolean mla_kernels(const sp_step_ctx *c, const sp_layout *l, int64_t T, sp_layer_kernels *o, GError **err)
{
  const sp_model *m = c->model;
  const sp_kernel_gpu *g = &c->hw.gpu;
  double e = sp_model_dtype_bytes(m);
  int64_t h = m->hidden, tp = l->tp, heads = m->heads / tp;
  double o_params = (double)m->heads * (double)m->v_head_dim * (double)h;
  int64_t cols = (int64_t)llround((sp_model_attn_matmul_params(m) - o_params) / (double)h / (double)tp);
  sp_fp8_recipe f8 = c->hw.fp8;
  if (!sp_kernel_linear3(g, f8, T, MAX(cols, 1), h, e, o->qkv, err) ||
      !sp_kernel_linear3(g, f8, T, h, heads * m->v_head_dim, e, o->proj, err))
    return FALSE;
  int64_t d = (sp_model_qk_head_dim(m) + sp_model_v_head_dim(m)) / 2;
  if (!sp_attn_impl_check(c->hw.attn, sp_model_qk_head_dim(m), m->dtype, err)) return FALSE;
  double hh = (double)m->heads / ((double)tp * l->sp);
  int64_t sq = c->seq / l->cp;
  o->attn_fwd = sp_kernel_attn_time(g, c->hw.attn, FALSE, l->mb, hh, sq, c->seq, d, e);
  o->attn_bwd = sp_kernel_attn_time(g, c->hw.attn, TRUE, l->mb, hh, sq, c->seq, d, e);
  return TRUE;
}

/* What ckpt=selective's modules (sp_layout_rmods) recompute before a layer's backward,
 * forward kernels run again (Megatron-Core's transformer_layer.py and
 * multi_latent_attention.py run each module's forward again ahead of its backward):
 * - layernorm: the input and pre-MLP norms, each reading its input and writing its
 *   output (2 e bytes per value, h per token, split by t with SP);
 * - mla_up_proj: the latent norms (2 e bytes per value of q_lora_rank + kv_lora_rank) and
 *   the up-projections, q_lora_rank -> heads/t x (nope + rope) and kv_lora_rank -> heads/t
 *   x (nope + v) (DeepSeek-V2 eqs. 9-14, as sp_model_attn_matmul_params counts them);
 * - mlp: a dense layer's up and down projections and its activation, which reads the up
 *   projection's output and writes its product (e bytes per value each). */
static gboolean rmod_kernels(const sp_step_ctx *c, const sp_layout *l, int64_t T, sp_layer_kernels *o, GError **err)
{
  const sp_model *m = c->model;
  const sp_kernel_gpu *g = &c->hw.gpu;
  uint32_t rm = sp_layout_rmods(l);
  double e = sp_model_dtype_bytes(m), rate = g->hbm_bw > 0 ? sp_kernel_hbm_rate(g) : 0.0;
  o->rmod_attn = o->rmod_mlp = 0.0;
  if (rate <= 0) return TRUE;
  double hs = (double)m->hidden / (l->tp_sp ? l->tp : 1);
  if (rm & SP_RMOD_LAYERNORM) o->rmod_attn += 2.0 * (2.0 * e * (double)T * hs / rate + g->launch);
  if ((rm & SP_RMOD_MLA_UP_PROJ) && sp_model_is_mla(m)) {
    sp_fp8_recipe f8 = c->hw.fp8;
    int64_t heads = m->heads / l->tp;
    double q[3] = { 0 }, kv[3];
    if (m->q_lora_rank > 0 &&
        !sp_kernel_linear3(g, f8, T, heads * sp_model_qk_head_dim(m), m->q_lora_rank, e, q, err))
      return FALSE;
    if (!sp_kernel_linear3(g, f8, T, heads * (m->qk_nope_head_dim + m->v_head_dim), m->kv_lora_rank, e, kv, err))
      return FALSE;
    double lat = (double)(m->q_lora_rank + m->kv_lora_rank);
    o->rmod_attn += q[0] + kv[0] + 2.0 * e * (double)T * lat / rate + 2.0 * g->launch;
  }
  if (rm & SP_RMOD_MLP) {
    double up = (double)(m->mlp == SP_MLP_SWIGLU ? 2 : 1) * (double)m->ffn / l->tp, f = (double)m->ffn / l->tp;
    o->rmod_mlp = o->up[0] + o->down[0] + e * (double)T * (up + f) / rate + g->launch;
  }
  return TRUE;
}

gboolean sp_step_layer_kernels(const sp_step_ctx *c, const sp_layout *l, sp_layer_kernels *o, GError **err)
{
  const sp_model *m = c->model;
  const sp_kernel_gpu *g = &c->hw.gpu;
  double e = sp_model_dtype_bytes(m);
  memset(o, 0, sizeof *o);
  /* tokens of the rank's sequence shard; TP splits the weights */
  int64_t T = (int64_t)l->mb * c->seq / ((int64_t)l->sp * l->cp);
  int64_t d = sp_model_head_dim(m), h = m->hidden, tp = l->tp;
  int64_t q_heads = m->heads / tp;
  int64_t kv = (int64_t)sp_step_kv_per_tp(m, l);
  int64_t up = (m->mlp == SP_MLP_SWIGLU ? 2 : 1) * m->ffn / tp;
  if (!sp_attn_impl_check(c->hw.attn, d, m->dtype, err)) return FALSE;
  /* the linears: 16-bit GEMMs, or FP8 GEMMs and casts (sp_kernel_linear3) */
  sp_fp8_recipe f8 = c->hw.fp8;
  if (!sp_kernel_linear3(g, f8, T, (q_heads + 2 * kv) * d, h, e, o->qkv, err) ||
      !sp_kernel_linear3(g, f8, T, h, q_heads * d, e, o->proj, err) || !sp_kernel_linear3(g, f8, T, up, h, e, o->up, err) ||
      !sp_kernel_linear3(g, f8, T, h, m->ffn / tp, e, o->down, err))
    return FALSE;
  /* attention: Ulysses gives each rank heads / (tp sp) over the whole (cp shard of
   * the) sequence; ring attention's queries see every key of the sequence */
  double heads = (double)m->heads / ((double)tp * l->sp);
  int64_t sq = c->seq / l->cp;
  o->attn_fwd = windowed(c, sp_kernel_attn_time(g, c->hw.attn, FALSE, l->mb, heads, sq, c->seq, d, e));
  o->attn_bwd = windowed(c, sp_kernel_attn_time(g, c->hw.attn, TRUE, l->mb, heads, sq, c->seq, d, e));
  /* element-wise kernels write the layer's stored activations and read them back */
  sp_layout nl = *l;
  nl.ckpt = SP_CKPT_SELECTIVE;
  nl.rmods = 0; /* every activation the layer writes, whatever is kept */
  double bytes = 2.0 * sp_step_act_layer_bytes(m, &nl, c->seq, c->hw.attn);
  double kernels = ELEMWISE_KERNELS_PER_LAYER;
  if (m->elementwise == SP_ELEM_EAGER) {
    bytes = (double)T * sp_step_eager_elem_bytes_per_token(m, l);
    kernels = m->heads / m->kv_heads > 1 ? EAGER_KERNELS_PER_LAYER + 2 : EAGER_KERNELS_PER_LAYER;
  }
  if (g->hbm_bw > 0)
    o->elem_fwd = bytes / sp_kernel_hbm_rate(g) + kernels * g->launch;
  /* ckpt=op (see sp_step_act_layer_bytes) recomputes, before the layer's backward, every
   * op it did not save: the element-wise forward and the 2nd, 4th and 6th matmuls (K,
   * output projection, and w3 for SwiGLU, whose MLP runs w1, w3, w2 in
   * torchtitan/models/llama/model.py FeedForward.forward; the down projection for a GeLU
   * MLP); the attention output is saved, so attention is not recomputed */
  double tk = 0;
  sp_kernel_gpu g8;
  const sp_kernel_gpu *gk = g;
  if (f8 != SP_FP8_NONE) {
    if (!sp_kernel_gpu_fp8(g, &g8, err)) return FALSE;
    gk = &g8; /* the K projection recomputed in FP8 from the saved FP8 input */
  }
  if (!sp_kernel_gemm_time(gk, 1, T, kv * d, h, f8 != SP_FP8_NONE ? 1.0 : e, &tk, err))
    return FALSE;
  o->op_recompute = o->elem_fwd + tk + o->proj[0] + (m->mlp == SP_MLP_SWIGLU ? o->up[0] / 2.0 : o->down[0]);
  if (sp_model_is_mla(m) && !mla_kernels(c, l, T, o, err)) return FALSE;
  if (!rmod_kernels(c, l, T, o, err)) return FALSE;
  /* LM head, then the loss over the logits (sp_step_loss_bytes_per_logit) */
  if (!gemm3(g, T, m->vocab / tp, h, e, o->head, err))
    return FALSE;
  double logits = (double)T * ((double)m->vocab / tp);
  o->loss = sp_step_loss_time(g, m->loss, e, logits);
  return TRUE;
}

/* The loss over the logits as unfused PyTorch kernels, each a pass over the logits in
 * HBM; bytes per logit with e-byte logits (the LM head's output) and fp32 arithmetic.
 * Megatron-LM's vocab-parallel cross entropy
 * (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy and
 * _VocabParallelCrossEntropy, the unfused path that is the default):
 *  - forward: .float() e + 4, max over the vocabulary 4, in-place subtraction of the
 *    maximum 4 + 4, in-place exp 4 + 4, sum 4, in-place division by the sum 4 + 4
 *    (the softmax is saved for the backward): e + 36;
 *  - backward: grad_input.mul_(grad_output) 4 + 4 (the subtraction at the target is one
 *    element per row), then the backward of .float(), a cast to e bytes: 4 + e;
 *  in all 40 + 2 (e + 4) = 52 bytes for bf16/fp16 in 6 + 3 kernels; with fp32 logits
 *  both casts are no-ops (Tensor.float() returns the tensor itself): 40 bytes, 7 kernels.
 * torchtitan's loss (train.py at 9dec370, loss_fn: F.cross_entropy(pred.flatten(0, 1).float(), ...)) moves
 * about as much, 48 bytes, in another split: .float() 6, log_softmax's three passes over its
 * input and one write 16 (aten cunn_SoftMaxForward), nll_loss's backward zero-fill 4,
 * log_softmax's backward 4 + 8 + 4 (cunn_SoftMaxBackward) and the cast back 6.
 * Fused (model key "loss": "fused"): flash-attn's cross entropy, llm-foundry's default
 * loss_fn "fused_crossentropy" (llmfoundry/models/mpt/modeling_mpt.py,
 * ComposerMPTCausalLM, at 5e85bd6), one kernel forward that reads the e-byte logits
 * (and writes one log-sum-exp per row) and one backward that reads them again and writes
 * their gradient (flash_attn/losses/cross_entropy.py): 3 e bytes, 2 kernels.
 * The step sees the sum (forward and backward of the last stage are consecutive for a
 * micro-batch), so each direction is priced at half the bytes and half the kernels. */
double sp_step_loss_bytes_per_logit(sp_loss_impl impl, double elem)
{
  if (impl == SP_LOSS_FUSED) return 3.0 * elem;
  return 40.0 + (elem < 4.0 ? 2.0 * (elem + 4.0) : 0.0);
}

double sp_step_loss_time(const sp_kernel_gpu *g, sp_loss_impl impl, double elem, double logits)
{
  if (!(logits > 0) || !(g->hbm_bw > 0)) return 0.0;
  double kernels = impl == SP_LOSS_FUSED ? 2.0 : elem < 4.0 ? 9.0 : 7.0;
  return 0.5 * (sp_step_loss_bytes_per_logit(impl, elem) * logits / sp_kernel_hbm_rate(g) + kernels * g->launch);
}

double sp_layer_kernels_mm_fwd(const sp_layer_kernels *k)
{
  return 0.0 + k->qkv[0] + k->proj[0] + k->up[0] + k->down[0];
}

double sp_layer_kernels_mm_bwd(const sp_layer_kernels *k)
{
  return 0.0 + (k->qkv[1] + k->qkv[2]) + (k->proj[1] + k->proj[2]) + (k->up[1] + k->up[2]) + (k->down[1] + k->down[2]);
}

/* Megatron-LM's optimizer step (megatron/core/optimizer/optimizer.py,
 * MixedPrecisionOptimizer.step), per parameter the rank updates (sharded by ZeRO-1+
 * and ISP), in HBM bytes:
 *  - the gradient norm for clipping reads the FP32 main gradient (get_grad_norm_fp32 in
 *    megatron/core/optimizer/clip_grads.py, multi_tensor_l2norm): 4;
 *  - fused Adam reads the FP32 master weight, both moments and the main gradient and
 *    writes the first three: 4 x 4 + 3 x 4 = 28;
 *  - _copy_main_params_to_model_params reads the FP32 weight and writes the 16-bit
 *    one: 4 + 2 = 6.
 * 38 bytes. fp16 training adds the loss scaler's pass: before the norm, the FP32 main
 * gradients are unscaled and checked for inf/NaN in one read and one write
 * (_unscale_main_grads_and_check_for_nan, torch._amp_foreach_non_finite_check_and_unscale_,
 * as PyTorch's GradScaler.unscale_ does too): 8 more, 46. bf16 runs without a loss scaler.
 * (The clipping multiply, applied only when the norm exceeds the limit, is not counted.) */
#define ADAM_BYTES_PER_PARAM (4.0 + 28.0 + 6.0)
#define FP16_UNSCALE_BYTES_PER_PARAM (4.0 + 4.0)

double sp_step_optimizer_bytes_per_param(const sp_model *m)
{
  return ADAM_BYTES_PER_PARAM + (m->dtype == SP_F16 ? FP16_UNSCALE_BYTES_PER_PARAM : 0.0);
}

double sp_step_optimizer_time(const sp_step_ctx *c, const sp_layout *l, double params)
{
  double p = params / l->wp;
  if (l->zero >= 1) p /= (double)sp_layout_replicas(l) / l->wp;
  return sp_kernel_elementwise_time(&c->hw.gpu, sp_step_optimizer_bytes_per_param(c->model) * p);
}

static double optimizer_time(const sp_step_ctx *c, const sp_layout *l)
{
  return sp_step_optimizer_time(c, l, stage_params_local(c->model, l));
}

void sp_step_set_time(const sp_step_ctx *c, const sp_layout *l, sp_step_result *r, double step_time)
{
  const sp_model *m = c->model;
  const sp_step_hw *hw = &c->hw;
  r->step_time = step_time;
  /* Model FLOPs: 6 N per token for the weights (LM head included) and causal
   * attention, 6 L h s (half of PaLM's 12 L h s, which counts every score). */
  double tokens = (double)c->global_batch * (double)c->seq;
  double palm = tokens * sp_model_train_flops_per_token(m, (double)c->seq);
  /* attention width: heads x d (h when d = h / heads), or heads (qk + v) / 2 with
   * multi-head latent attention; sliding windows drop the pairs outside the window */
  double aw = sp_model_attn_width(m), frac = sp_model_attn_causal_fraction(m, c->seq);
  double attn_half = tokens * 6.0 * (double)m->layers * aw * (double)c->seq;
  double model_flops = palm - attn_half - attn_half * (1.0 - frac);
  double extra = 0;
  double attn_tok = 2.0 * (double)m->layers * aw * (double)c->seq * frac; /* causal forward */
  if (l->ckpt == SP_CKPT_FULL) extra = tokens * (2.0 * (double)m->layers * sp_model_layer_matmul_params(m) + attn_tok);
  else if (l->ckpt == SP_CKPT_SELECTIVE) { /* the modules' FLOPs (rmod_kernels) */
    uint32_t rm = sp_layout_rmods(l);
    double dense_layers = (double)(m->layers - (sp_model_is_moe(m) ? sp_model_moe_layers(m) : 0));
    if (rm & SP_RMOD_CORE_ATTN) extra += tokens * attn_tok;
    if ((rm & SP_RMOD_MLA_UP_PROJ) && sp_model_is_mla(m))
      extra += tokens * 2.0 * (double)m->layers * (double)m->heads *
               ((double)m->q_lora_rank * (double)sp_model_qk_head_dim(m) +
                (double)m->kv_lora_rank * (double)(m->qk_nope_head_dim + m->v_head_dim));
    if (rm & SP_RMOD_MLP) extra += tokens * 2.0 * dense_layers * sp_model_mlp_params(m, m->ffn);
  }
  else if (l->ckpt == SP_CKPT_OP) /* K, output projection and one MLP matrix of h x ffn */
    extra = tokens * 2.0 * (double)m->layers * (double)m->hidden *
            ((double)m->kv_heads * (double)sp_model_head_dim(m) + (double)m->heads * (double)sp_model_head_dim(m) + (double)m->ffn);
  double peak = hw->gpu.peak_flops;
  r->tokens_per_s = tokens / r->step_time;
  r->mfu = model_flops / (r->step_time * c->world * peak);
  r->mfu_palm = palm / (r->step_time * c->world * peak);
  r->hfu = (model_flops + extra) / (r->step_time * c->world * peak);
  r->tflops = model_flops / r->step_time / c->world / 1e12;
}

/* What the backward of a column-parallel GEMM (times @p t: forward, data gradient,
 * weight gradient) hides of its TP collectives, as the step graph runs it (column_bwd
 * in stepgraph.c, Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication): with
 * sequence parallelism the input's re-gather under the data gradient and the data
 * gradient's reduce-scatter under the weight gradient; without, the data gradient's
 * all-reduce under the weight gradient. @p tp1: one collective's time by type. */
static double column_bwd_hidden(const sp_layout *l, const double tp1[SP_COLL_COUNT], const double t[3])
{
  if (l->tp < 2) return 0.0;
  if (l->tp_sp) return MIN(tp1[SP_COLL_ALL_GATHER], t[1]) + MIN(tp1[SP_COLL_REDUCE_SCATTER], t[2]);
  return MIN(tp1[SP_COLL_ALL_REDUCE], t[2]);
}

/* Extra kernel time per second of a collective running beside them: kernels get
 * 1 / (1 + s) of the GPU while a collective runs (s = hw->comm_slowdown, the step
 * simulation's SP_STEPSIM_COMM_SLOWDOWN, Hossain et al. 2025), so each second of overlap
 * leaves s / (1 + s) s of their work for later. */
static double overlap_slowdown(const sp_step_hw *hw)
{
  return hw->comm_slowdown > 0 ? hw->comm_slowdown / (1.0 + hw->comm_slowdown) : 0.0;
}

/* An MoE layer runs the router, the permutations, its experts and the shared experts
 * instead of the dense MLP; per layer of the fullest stage, weighted by its share of
 * MoE layers (the all-to-alls are in the communication list, sp_step_moe_comms). */
static gboolean moe_layer_times(const sp_step_ctx *c, const sp_layout *l, double *lf, double *lb, GError **err)
{
  sp_moe_kernels mk;
  if (!sp_step_moe_kernels(c, l, &mk, err)) return FALSE;
  double ls = (double)sp_layout_stage_layers(l, c->model);
  double frac = ls > 0 ? (double)sp_step_moe_max_stage_layers(c->model, l) / ls : 0.0;
  double df = sp_moe_kernels_fwd(&mk) - mk.dense_fwd, db = sp_moe_kernels_bwd(&mk) - mk.dense_bwd;
  *lf += frac * df;
  *lb += frac * db;
  if (l->ckpt == SP_CKPT_FULL) *lb += frac * df;
  if (sp_layout_rmods(l) & SP_RMOD_MOE_ACT) *lb += frac * mk.act; /* the experts' activation again */
  return TRUE;
}

/* The share of the fullest stage's @p ls layers that are dense (not MoE). */
static double dense_share(const sp_model *m, const sp_layout *l, double ls)
{
  return sp_model_is_moe(m) && ls > 0 ? 1.0 - (double)sp_step_moe_max_stage_layers(m, l) / ls : 1.0;
}

/* tpoverlap=1 (Megatron-LM's --tp-comm-overlap, step_tpoverlap.c): the blocking TP
 * all-gathers and reduce-scatters beside the GEMMs become chunks under them, per layer;
 * full recomputation repeats the forward's in the backward. MoE layers keep their MLP's. */
static gboolean tp_overlap_terms(const sp_step_ctx *c, const sp_layout *l, const sp_layer_kernels *lk, double ls,
                                 double cf[], double ef[], double cb[], double eb[], GError **err)
{
  double dense = dense_share(c->model, l, ls);
  sp_tpo_terms o;
  if (!sp_step_tpo_terms(c, l, lk, dense, &o, err)) return FALSE;
  double rec = l->ckpt == SP_CKPT_FULL ? 1.0 : 0.0;
  cf[SP_COMM_TP] = MAX(0.0, cf[SP_COMM_TP] + o.comm_f - o.plain_f);
  ef[SP_COMM_TP] = MAX(0.0, ef[SP_COMM_TP] + o.exposed_f - o.plain_f);
  cb[SP_COMM_TP] = MAX(0.0, cb[SP_COMM_TP] + o.comm_b - o.plain_b + rec * (o.comm_f - o.plain_f));
  eb[SP_COMM_TP] = MAX(0.0, eb[SP_COMM_TP] + o.exposed_b - o.plain_b + rec * (o.exposed_f - o.plain_f));
  return TRUE;
}

gboolean sp_step_eval(const sp_step_ctx *c, const sp_layout *l, sp_step_result *r, GError **err)
{
  const sp_model *m = c->model;
  const sp_step_hw *hw = &c->hw;
  memset(r, 0, sizeof *r);
  r->layout = *l;
  int64_t mbs = c->global_batch / ((int64_t)l->dp * l->mb);
  r->microbatches = mbs;
  double ls = (double)sp_layout_stage_layers(l, m);

  /* Compute per layer and micro-batch on one rank, kernel by kernel. */
  sp_layer_kernels lk;
  if (!sp_step_layer_kernels(c, l, &lk, err)) return FALSE;
  double mm_f = sp_layer_kernels_mm_fwd(&lk), at_f = lk.attn_fwd, el_f = lk.elem_fwd;
  double lf = mm_f + at_f + el_f;
  double lb = sp_layer_kernels_mm_bwd(&lk) + lk.attn_bwd + 2.0 * el_f;
  if (l->ckpt == SP_CKPT_FULL) lb += lf;
  else if (l->ckpt == SP_CKPT_SELECTIVE) {
    lb += (sp_layout_rmods(l) & SP_RMOD_CORE_ATTN ? at_f : 0.0) + lk.rmod_attn + dense_share(m, l, ls) * lk.rmod_mlp;
  } else if (l->ckpt == SP_CKPT_OP) lb += lk.op_recompute;
  double head_f = lk.head[0] + lk.loss, head_b = (lk.head[1] + lk.head[2]) + lk.loss;
  if (sp_model_is_moe(m) && !moe_layer_times(c, l, &lf, &lb, err)) return FALSE;

  /* Price the collectives. */
  g_autoptr(GArray) comms = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  sp_step_comms(c, l, comms);
  double cf[SP_COMM_KIND_COUNT] = { 0 }, cb[SP_COMM_KIND_COUNT] = { 0 };
  double p2p = 0, grad = 0, pgather = 0, tie = 0, edge[2] = { 0, 0 };
  double tp1[SP_COLL_COUNT] = { 0 }; /* one TP collective of a layer, by type */
  double a2a1 = 0;                   /* one MoE dispatch or combine all-to-all */
  double a2a_node1 = 0, disp[2] = { 0, 0 }, node[2] = { 0, 0 }; /* dispatcher=flex: its two stages */
  for (guint i = 0; i < comms->len; i++) {
    const sp_comm *cm = &g_array_index(comms, sp_comm, i);
    double t = 0;
    if (!c->price(c->price_user, cm, &t, err)) return FALSE;
    double tt = t * cm->times;
    if (cm->kind == SP_COMM_TP && cm->when == SP_PER_LAYER_BWD && (unsigned)cm->coll < SP_COLL_COUNT) tp1[cm->coll] = t;
    if (cm->what == sp_moe_what_dispatch) {
      a2a1 = t;
      disp[cm->when == SP_PER_LAYER_BWD] += tt;
    }
    if (cm->what == sp_moe_what_dispatch_node) { /* overlapped with the NVLink stage: the longer counts */
      a2a_node1 = t;
      node[cm->when == SP_PER_LAYER_BWD] += tt;
      continue;
    }
    switch (cm->when) {
    case SP_PER_LAYER_FWD: cf[cm->kind] += tt; break;
    case SP_PER_LAYER_BWD: cb[cm->kind] += tt; break;
    case SP_PER_MB: p2p += tt; break;
    case SP_PER_STEP:
      if (cm->kind == SP_COMM_PP) tie += tt;
      else if (cm->coll == SP_COLL_ALL_GATHER) pgather += tt;
      else grad += tt;
      break;
    case SP_PER_MB_EMBED: edge[0] += tt; break;
    case SP_PER_MB_HEAD: edge[1] += tt; break;
    }
  }

  a2a1 = MAX(a2a1, a2a_node1);
  cf[SP_COMM_SP] += MAX(0.0, node[0] - disp[0]);
  cb[SP_COMM_SP] += MAX(0.0, node[1] - disp[1]);

  /* Exposure per layer: TP and Ulysses are on the critical path; ring overlaps the
   * attention blocks; ISP / ZeRO-3 gathers are prefetched under the layer's compute. */
  double ef[SP_COMM_KIND_COUNT] = { 0 }, eb[SP_COMM_KIND_COUNT] = { 0 };
  ef[SP_COMM_TP] = cf[SP_COMM_TP];
  eb[SP_COMM_TP] = MAX(0.0, cb[SP_COMM_TP] - column_bwd_hidden(l, tp1, lk.up) - column_bwd_hidden(l, tp1, lk.qkv));
  ef[SP_COMM_SP] = cf[SP_COMM_SP];
  eb[SP_COMM_SP] = cb[SP_COMM_SP];
  if (l->a2a_overlap) { /* MoE all-to-alls beside the paired pass's kernels (sp_step_moe_a2a_hidden) */
    double hid = 0;
    if (!sp_step_moe_a2a_hidden(c, l, &lk, a2a1, &hid, err)) return FALSE;
    ef[SP_COMM_SP] = MAX(0.0, ef[SP_COMM_SP] - hid / 2);
    eb[SP_COMM_SP] = MAX(0.0, eb[SP_COMM_SP] - hid / 2);
  }
  if (l->cp > 1) {
    double share = (double)(l->cp - 1) / l->cp;
    gboolean again = (sp_layout_rmods(l) & SP_RMOD_CORE_ATTN) || l->ckpt == SP_CKPT_FULL;
    double bwin = (again ? 3.0 : 2.0) * at_f;
    ef[SP_COMM_RING] = MAX(0.0, cf[SP_COMM_RING] - share * at_f);
    eb[SP_COMM_RING] = MAX(0.0, cb[SP_COMM_RING] - share * bwin);
  }
  ef[SP_COMM_ISP] = MAX(0.0, cf[SP_COMM_ISP] - lf);
  eb[SP_COMM_ISP] = MAX(0.0, cb[SP_COMM_ISP] - lb);
  ef[SP_COMM_DP] = MAX(0.0, cf[SP_COMM_DP] - lf);
  eb[SP_COMM_DP] = MAX(0.0, cb[SP_COMM_DP] - lb);

  if (l->tp_overlap && !tp_overlap_terms(c, l, &lk, ls, cf, ef, cb, eb, err)) return FALSE;

  double sef = 0, seb = 0, hid_f = 0, hid_b = 0;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    sef += ef[k];
    seb += eb[k];
    hid_f += cf[k] - ef[k];
    hid_b += cb[k] - eb[k];
  }
  /* the embedding's and output layer's TP collectives are on the critical path but for
   * the output layer's backward reduction (under its weight gradient); with pipelining
   * they sit on different stages and the slower one counts */
  double head_hid = MIN(edge[1], column_bwd_hidden(l, tp1, lk.head));
  double tp_edge = l->pp == 1 ? edge[0] + edge[1] - head_hid : MAX(edge[0], edge[1] - head_hid);
  /* kernels run slower while collectives run beside them */
  double slow = overlap_slowdown(hw);
  r->mb_fwd = ls * (lf + sef + slow * hid_f) + head_f;
  r->mb_bwd = ls * (lb + seb + slow * hid_b) + head_b + tp_edge + slow * head_hid;
  /* Interleaved: each micro-batch crosses pp x vpp - 1 stage boundaries, so every
   * rank sends vpp times as often; the bubble shrinks to (pp - 1) / vpp slots. */
  double vpp = (double)sp_layout_vpp(l);
  r->mb_p2p = l->pp > 1 ? vpp * p2p : 0.0;
  double tmb = r->mb_fwd + r->mb_bwd + r->mb_p2p;

  /* Gradient reduction overlaps the last micro-batch's backward except the last bucket;
   * the ZeRO-1/2 parameter all-gather overlaps the first forward likewise. */
  double plocal = stage_params_local(m, l) / l->wp;
  double bucket = plocal > 0 ? MIN(1.0, hw->dp_bucket_params / plocal) : 1.0;
  double tail = 0, dp_hid = 0;
  if (grad > 0) {
    double t = l->dp_sync ? grad : MAX(grad * bucket, grad - ls * lb);
    tail += t;
    dp_hid += grad - t;
  }
  if (pgather > 0) {
    double t = MAX(pgather * bucket, pgather - ls * lf);
    tail += t;
    dp_hid += pgather - t;
  }
  r->dp_tail = tail;
  tail += tie; /* tied embeddings: after the data-parallel reduction, before the update */
  tail += slow * dp_hid; /* the last backward and first forward beside the buckets */

  /* The optimizer step follows the gradient reduction on every rank. */
  r->optimizer = optimizer_time(c, l);
  if (sp_model_is_moe(m)) r->optimizer += sp_step_moe_optimizer_time(c, l, -1); /* the stage with the most experts */

  double md = (double)mbs;
  double slots = (double)(l->pp - 1) / vpp;
  r->step_time = (md + slots) * tmb + tail + r->optimizer;
  r->compute = md * (ls * (lf + lb + slow * (hid_f + hid_b)) + head_f + head_b + slow * head_hid) + slow * dp_hid +
               r->optimizer;
  r->bubble = slots * tmb;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    r->exposed[k] = md * ls * (ef[k] + eb[k]);
    r->comm[k] = md * ls * (cf[k] + cb[k]);
  }
  r->exposed[SP_COMM_TP] += md * tp_edge;
  r->comm[SP_COMM_TP] += md * (tp_edge + head_hid);
  r->exposed[SP_COMM_PP] = md * r->mb_p2p + tie;
  r->comm[SP_COMM_PP] = md * r->mb_p2p + tie;
  r->exposed[SP_COMM_DP] += r->dp_tail;
  r->comm[SP_COMM_DP] += grad + pgather;

  sp_step_set_time(c, l, r, r->step_time);
  r->closed_form = r->step_time;
  sp_step_memory(c, l, &r->mem);
  r->fits = r->mem.total <= hw->mem_bytes * hw->mem_usable;
  return TRUE;
}

gboolean sp_price_analytic(void *user, const sp_comm *c, double *seconds, GError **err)
{
  const sp_analytic_net *net = user;
  if (c->n < 1 || c->stride < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "analytic pricer: bad group (n=%d, stride=%d)", c->n, c->stride);
    return FALSE;
  }
  int32_t gpn = net->gpus_per_node > 0 ? net->gpus_per_node : 1;
  int32_t k = c->stride >= gpn ? 1 : MIN(c->n, gpn / c->stride); /* members per node */
  if (k < 1) k = 1;
  gboolean inter = k < c->n;
  double bw = inter ? MIN(net->intra_busbw, k * net->nic_bw) : net->intra_busbw;
  double alpha = inter ? net->alpha_inter : net->alpha_intra;
  double n = c->n, S = (double)c->bytes;
  double tree_steps = 2.0 * ceil(log2(n > 1 ? n : 2));
  double t;
  switch (c->coll) {
  case SP_COLL_ALL_REDUCE:
    t = MIN(2.0 * (n - 1), tree_steps) * alpha + S * 2.0 * (n - 1) / n / bw;
    break;
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
    t = (n - 1) * alpha + S * (n - 1) / n / bw;
    break;
  case SP_COLL_ALL_TO_ALL: {
    double intra_part = S * (k - 1) / n / net->intra_busbw;
    double inter_part = inter ? S * (n - k) / n / net->nic_bw : 0.0;
    t = (n - 1) * alpha + MAX(intra_part, inter_part);
    break;
  }
  case SP_COLL_SEND_RECV:
  default:
    t = alpha + S / (inter ? net->nic_bw : net->intra_busbw);
    break;
  }
  *seconds = t;
  return TRUE;
}

void sp_comm_coll_spec(const sp_comm *c, int32_t gpus_per_node, uint64_t bytes, sp_coll_spec *spec)
{
  int32_t n = c->coll == SP_COLL_SEND_RECV ? 2 : c->n;
  int32_t gpn = MAX(gpus_per_node, 1), stride = MAX(c->stride, 1);
  int32_t k = stride >= gpn ? 1 : MIN(n, gpn / stride);
  gboolean ring = c->coll == SP_COLL_ALL_REDUCE || c->coll == SP_COLL_ALL_GATHER || c->coll == SP_COLL_REDUCE_SCATTER;
  int32_t channels = ring && k > 1 && k < n ? MIN(k, SP_MAX_CHANNELS) : 1;
  uint64_t elems = (bytes + 1) / 2;
  gboolean per_block = c->coll == SP_COLL_ALL_GATHER || c->coll == SP_COLL_REDUCE_SCATTER ||
                       c->coll == SP_COLL_ALL_TO_ALL;
  *spec = (sp_coll_spec){ .coll = c->coll, .algo = SP_ALGO_AUTO, .dtype = SP_BF16, .redop = SP_RED_SUM, .n = n,
                          .count = per_block ? (elems + (uint64_t)n - 1) / (uint64_t)n : elems,
                          .channels = channels, .channel_block = channels > 1 ? k : 0 };
}
