/* Activation memory of one layer (Korthikanti et al. 2022, written with the model's
 * shapes), shared by the step's memory model and the MoE layer's, and the number of
 * passes whose activations the pipeline schedule holds at once. */
#include "config.h"

#include "spsim/step.h"

/* KV heads each TP rank holds (replicated when tp > kv_heads). */
double sp_step_kv_per_tp(const sp_model *m, const sp_layout *l)
{
  return m->kv_heads % l->tp == 0 ? (double)(m->kv_heads / l->tp) : 1.0;
}

double sp_step_act_lin_bytes(const sp_step_ctx *c)
{
  if (c->hw.fp8 == SP_FP8_NONE) return sp_model_dtype_bytes(c->model);
  return c->hw.fp8 == SP_FP8_BLOCKWISE ? 1.0 + 4.0 / 128.0 : 1.0;
}

/* Bytes of the MLP block one token keeps on one rank (its share of TP): the block's
 * input (e bytes per value; split by t with sequence parallelism), the dropout mask (one
 * byte per value) and the tensors the MLP's backward reads. GeLU: the activation's input
 * and output (Megatron's fused bias-gelu saves its input; fc2 saves its own), 2 ffn.
 * SwiGLU: the gate-and-up output and the product (Megatron-Core's fused bias_swiglu saves
 * its input, fc2 its input), 3 ffn; eager kernels also keep the SiLU output for the
 * product's backward, 4 ffn. GeLU with ffn = 4h gives Korthikanti et al. 2022 (sec.
 * 4.1)'s 19 s b h: 2 + 1 + 16. */
double sp_step_act_mlp_token_bytes(const sp_model *m, const sp_layout *l, double lin)
{
  double t = l->tp, e = sp_model_dtype_bytes(m), h = (double)m->hidden, f = (double)m->ffn;
  double mult = m->mlp != SP_MLP_SWIGLU ? 2.0 : m->elementwise == SP_ELEM_EAGER ? 4.0 : 3.0;
  uint32_t rm = sp_layout_rmods(l);
  /* the block's input is the first GEMM's (saved by it, at lin bytes); recompute=layernorm
   * drops it after use; =mlp keeps it alone, as the checkpoint's input in the dtype */
  double in = rm & SP_RMOD_MLP ? e : rm & SP_RMOD_LAYERNORM ? 0.0 : lin;
  /* of the mult ffn columns, the last is the second GEMM's input (lin bytes) */
  return (in + 1.0) * h / (l->tp_sp ? t : 1.0) + (rm & SP_RMOD_MLP ? 0.0 : (e * (mult - 1.0) + lin) * f / t);
}

double sp_step_act_layer_bytes(const sp_model *m, const sp_layout *l, int64_t seq, sp_attn_impl attn)
{
  return sp_step_act_layer_bytes_lin(m, l, seq, attn, sp_model_dtype_bytes(m));
}

double sp_step_act_layer_bytes_lin(const sp_model *m, const sp_layout *l, int64_t seq, sp_attn_impl attn, double lin)
{
  double t = l->tp, h = (double)m->hidden, a = (double)m->heads, s = (double)seq, b = l->mb;
  double e = sp_model_dtype_bytes(m);
  double sl = b * s / ((double)l->sp * l->cp);  /* token-wise parts */
  if (l->ckpt == SP_CKPT_OP) {
    /* torchtitan's op policy (pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py
     * at 9dec370, _apply_ac_to_transformer_block) saves the outputs of aten.mm except every
     * second one and of the flash attention op; the checkpoint keeps the layer input.
     * Matmuls in order Q, K, V, O, then w1, w3, w2 (SwiGLU) or up, down: saved are Q, V,
     * the first MLP matmul and (SwiGLU) w2; K, O and the second MLP matmul are not. */
    double d = (double)sp_model_head_dim(m);
    double in = h / (l->tp_sp ? t : 1.0);
    double q = (a / t) * d, v = sp_step_kv_per_tp(m, l) * d, f = (double)m->ffn / t;
    double w2 = m->mlp == SP_MLP_SWIGLU ? h / (l->tp_sp ? t : 1.0) : 0.0;
    return e * sl * (in + q + v + q /* attention output */ + f + w2);
  }
  if (l->ckpt == SP_CKPT_FULL) return 2.0 * sl * h / (l->tp_sp ? t : 1.0);
  /* The attention block keeps, per token (Korthikanti et al. 2022, sec. 4.1, written with
   * the model's shapes): the layer-norm input and the QKV GEMM's input (e h each, split
   * by t with SP), Q, K and V (heads and KV heads of this TP rank, GQA and MLA widths),
   * the attention output (the projection's input) and the output dropout's one-byte mask
   * (h, split by t with SP); the MLP block adds its layer-norm input and
   * sp_step_act_mlp_token_bytes. MHA with ffn = 4h gives their s b h (10 + 24/t), or
   * 34/t with SP. The QKV GEMM's input is kept by that GEMM, at lin bytes per value. */
  double dq = (double)sp_model_qk_head_dim(m), dv = (double)sp_model_v_head_dim(m);
  double qh = a / t, kvh = sp_step_kv_per_tp(m, l);
  uint32_t rm = sp_layout_rmods(l);
  /* selective modules (sp_rmod): layernorm drops the QKV GEMM's input (the input norm's
   * output); mla_up_proj drops Q, K and V (the up-projections' outputs, which the attention
   * kernel saved: Megatron-Core frees their storage and refills it before the backward) */
  double replicated = ((rm & SP_RMOD_LAYERNORM ? 0.0 : lin) + 2.0 * e + 1.0) * h / (l->tp_sp ? t : 1.0);
  gboolean up_dropped = (rm & SP_RMOD_MLA_UP_PROJ) && sp_model_is_mla(m);
  /* the attention output: the kernel's own (e) and, with FP8 linears, the projection's copy */
  double out = e + (lin < e ? lin : 0.0);
  double qkvo = e * (up_dropped ? 0.0 : qh * dq + kvh * dq + kvh * dv) + out * qh * dv;
  /* multi-head latent attention also keeps its latents, on every TP rank (the down-
   * projections are not split): the down-projections' outputs, which the latent norms
   * read (q_lora_rank, kv_lora_rank and the shared RoPE key), and the norms' outputs, which
   * the up-projections read, unless mla_up_proj recomputes them (DeepSeek-V2 eqs. 9-14) */
  if (sp_model_is_mla(m)) {
    double lat = (double)(m->q_lora_rank + m->kv_lora_rank);
    qkvo += e * (lat + (double)m->qk_rope_head_dim) + (up_dropped ? 0.0 : lin * lat);
  }
  double tokenwise = sl * (replicated + qkvo + sp_step_act_mlp_token_bytes(m, l, lin));
  if (l->ckpt == SP_CKPT_SELECTIVE && (rm & SP_RMOD_CORE_ATTN)) return tokenwise;
  /* Without recomputation the attention core keeps its own tensors. Unfused (batched
   * GEMMs, softmax, dropout): the softmax output (2 bytes), the dropout mask (1) and the
   * dropout output (2) per score, Korthikanti's 5 a s^2 b, over (s/cp) x s scores of
   * a/(t sp) heads. Fused kernels (FlashAttention and its descendants) recompute the
   * scores in their backward and keep only the softmax's log-sum-exp, one fp32 per
   * query row (Dao et al. 2022, FlashAttention, sec. 3.1; Dao 2023, FlashAttention-2,
   * sec. 3.1.2). */
  double heads = a / (t * l->sp);
  if (attn == SP_ATTN_UNFUSED) return tokenwise + 5.0 * b * heads * (s / l->cp) * s;
  return tokenwise + 4.0 * b * heads * (s / l->cp);
}

/* ---- passes held by the pipeline schedule ---- */

int64_t sp_step_warmup(int32_t pp, int32_t v, int64_t m, int64_t group, int32_t stage, gboolean ov)
{
  int64_t total = m * (v > 1 ? v : 1);
  if (pp <= 1) return MIN(ov ? 1 : 0, total);
  if (v <= 1) return MIN((int64_t)(pp - stage - 1) + (ov ? 1 : 0), m);
  if (m == pp) return total; /* schedules.py: all_warmup_microbatches */
  if (group <= 0) group = pp;
  return MIN((int64_t)(pp - stage - 1) * 2 + (int64_t)(v - 1) * group + (ov ? 1 : 0), total);
}

int64_t sp_step_live_passes(int32_t pp, int32_t v, int64_t m, int64_t group, int32_t stage, gboolean ov)
{
  int64_t total = m * (pp > 1 && v > 1 ? v : 1);
  if (total <= 0) return 0;
  return MIN(sp_step_warmup(pp, pp > 1 ? v : 1, m, group, stage, ov) + 1, total);
}
