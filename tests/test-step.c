/* Step model: memory formulas, ZeRO stages, bubbles and step times against hand-computed values. */
#include "config.h"
#include <glib.h>
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/step.h"
#include "step-fixture.h"

/* 2 layers, h 64, 4 heads, ffn 256 (GELU), vocab 1000, untied:
 * layer = 4 x 64^2 + 2 x 64 x 256 + 2 x 64 = 49280; total = 2 x 49280 + 2 x 64000 + 64 = 226624 */
static sp_model tiny(void)
{
  sp_model m = { .name = (char *)"tiny", .layers = 2, .hidden = 64, .heads = 4, .kv_heads = 4, .ffn = 256,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_GELU };
  return m;
}

static gboolean price_1ms(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)c; (void)err;
  *s = 1e-3;
  return TRUE;
}

static sp_step_ctx ctx_for(const sp_model *m, int32_t world, int64_t seq, int64_t gb)
{
  return fixture_ctx(m, world, seq, gb, price_1ms);
}

static sp_layout lay(const char *spec, const sp_step_ctx *c) { return fixture_layout(spec, c); }

static void test_zero_memory(void)
{
  sp_model m = tiny();
  sp_step_ctx c = ctx_for(&m, 4, 128, 4);
  const double P = 226624;
  const double expect[4][3] = {
    /* weights, grads, optimizer bytes per GPU over 4 replicas (ZeRO paper: 2 + 2 + 12 per param) */
    { 2 * P, 2 * P, 12 * P },
    { 2 * P, 2 * P, 12 * P / 4 },
    { 2 * P, 2 * P / 4, 12 * P / 4 },
    { 2 * P / 4, 2 * P / 4, 12 * P / 4 },
  };
  for (int z = 0; z < 4; z++) {
    g_autofree char *spec = g_strdup_printf("dp=4,zero=%d", z);
    sp_layout l = lay(spec, &c);
    sp_step_mem mem;
    sp_step_memory(&c, &l, &mem);
    g_assert_cmpfloat_with_epsilon(mem.weights, expect[z][0], 1e-6);
    g_assert_cmpfloat_with_epsilon(mem.grads, expect[z][1], 1e-6);
    g_assert_cmpfloat_with_epsilon(mem.optim, expect[z][2], 1e-6);
  }
}

static void test_activation_bytes(void)
{
  sp_model m = tiny();
  sp_layout l;
  sp_layout_init(&l);
  l.mb = 1;
  l.dp = 1;
  /* Korthikanti: s b h (34 + 5 a s / h) with s 2048, b 1, h 64, a 4 = 131072 x 674 */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_UNFUSED), ==, 131072.0 * 674);
  /* a fused kernel keeps no scores, one fp32 log-sum-exp per query row and head:
   * 34 s b h + 4 x 2048 x 4 */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_FLASH), ==, 131072.0 * 34 + 4.0 * 2048 * 4);
  l.tp = 2;
  l.tp_sp = TRUE; /* sbh (34/t + 5as/(ht)) */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_UNFUSED), ==, 131072.0 * (17 + 320));
  l.tp_sp = FALSE; /* sbh (10 + 24/t + 5as/(ht)) */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_UNFUSED), ==, 131072.0 * (22 + 320));
  l.tp_sp = TRUE;
  l.ckpt = SP_CKPT_SELECTIVE;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_UNFUSED), ==, 131072.0 * 17);
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_FLASH), ==, 131072.0 * 17);
  l.ckpt = SP_CKPT_FULL; /* only the layer input, split by t with SP: 2 s b h / t */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 2048, SP_ATTN_UNFUSED), ==, 131072.0);
}

/* A Llama-style layer: h 64, 4 heads of 16, 2 KV heads, SwiGLU ffn 128. */
static sp_model tiny_llama(void)
{
  sp_model m = { .name = (char *)"tiny-llama", .layers = 2, .hidden = 64, .heads = 4, .kv_heads = 2, .ffn = 128,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_SWIGLU };
  return m;
}

/* One sequence per micro-batch on one replica, recomputation @p ck. */
static sp_layout one_replica(sp_ckpt ck)
{
  sp_layout l;
  sp_layout_init(&l);
  l.mb = 1;
  l.dp = 1;
  l.ckpt = ck;
  return l;
}

/* Shapes beyond Korthikanti's MHA GeLU layer: h 64, 4 heads of 16, 2 KV heads, SwiGLU
 * ffn 128, bf16, 128 tokens, no recomputation, flash attention, tp 1. Per token, in
 * bytes: LN1 input, QKV input, LN2 input 3 x 2 x 64; two dropout masks 2 x 64; Q and the
 * attention output 2 x 2 x 64; K and V 2 x 2 x 32; MLP input 2 x 64; fused SwiGLU keeps
 * the gate-and-up output and the product 3 x 2 x 128 = 384 + 128 + 256 + 128 + 128 +
 * 768 = 1792; the log-sum-exp 4 x 4 heads = 16. Eager kernels keep the SiLU output too:
 * + 2 x 128. */
static void test_activation_bytes_shapes(void)
{
  sp_model m = tiny_llama();
  sp_layout l = one_replica(SP_CKPT_NONE);
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (1792 + 16));
  m.elementwise = SP_ELEM_EAGER;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (1792 + 256 + 16));
  m.elementwise = SP_ELEM_FUSED;
  /* FP8 linears keep their inputs as 1-byte copies: the QKV and MLP inputs 64 -> 64 + 1 x
   * 64 less, the product 2 x 128 -> 128, and the output projection's copy of the
   * attention output beside the kernel's own, + 64: 1792 - 64 - 64 - 128 + 64 = 1600 */
  g_assert_cmpfloat(sp_step_act_layer_bytes_lin(&m, &l, 128, SP_ATTN_FLASH, 1.0), ==, 128.0 * (1600 + 16));
  sp_step_ctx c = ctx_for(&m, 1, 128, 1);
  g_assert_cmpfloat(sp_step_act_lin_bytes(&c), ==, 2.0);
  c.hw.fp8 = SP_FP8_TENSORWISE;
  g_assert_cmpfloat(sp_step_act_lin_bytes(&c), ==, 1.0);
  c.hw.fp8 = SP_FP8_BLOCKWISE; /* a 4-byte scale per 1 x 128 block */
  g_assert_cmpfloat(sp_step_act_lin_bytes(&c), ==, 1.03125);
  /* tp 2 with SP: every term halves (one KV head per rank), lse of 2 heads */
  l.tp = 2;
  l.tp_sp = TRUE;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (896 + 8));
}

/* Selective recomputation by modules (Megatron-Core's --recompute-modules), on the layer
 * of test_activation_bytes_shapes (1792 bytes per token kept without recomputation, 16 of
 * log-sum-exp): layernorm drops the two norms' outputs, the QKV and MLP inputs (2 x 64
 * each); mlp keeps the MLP's input (128) and mask (64) and drops its 768 bytes of SwiGLU
 * tensors; without core_attn the log-sum-exp stays. */
static void test_activation_bytes_modules(void)
{
  sp_model m = tiny_llama();
  sp_layout l = one_replica(SP_CKPT_SELECTIVE);
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * 1792);
  l.rmods = SP_RMOD_LAYERNORM;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (1792 - 256 + 16));
  l.rmods = SP_RMOD_MLP;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (1792 - 768 + 16));
  l.rmods = SP_RMOD_LAYERNORM | SP_RMOD_MLP; /* the MLP checkpoint keeps its input, the norm's output */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (1792 - 128 - 768 + 16));
  l.rmods |= SP_RMOD_CORE_ATTN;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (1792 - 128 - 768));
  /* multi-head latent attention: h 64, 4 heads, q_lora 32, kv_lora 16, nope 8 + rope 8,
   * v 16, SwiGLU ffn 128. Per token: norms' inputs and QKV input 3 x 2 x 64 + the output
   * mask 64 = 448; Q, K, V and the attention output 2 x 4 x (16 + 16 + 16 + 16) = 512;
   * latents: the down-projections' outputs 2 x (32 + 16 + 8) = 112 and the normed latents
   * 2 x (32 + 16) = 96; MLP 2 x 64 + 64 + 3 x 2 x 128 = 960: 2128, and 16 of log-sum-exp.
   * mla_up_proj drops Q, K, V (384) and the normed latents (96). */
  sp_model a = { .name = (char *)"tiny-mla", .layers = 2, .hidden = 64, .heads = 4, .kv_heads = 4, .ffn = 128,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_SWIGLU, .q_lora_rank = 32, .kv_lora_rank = 16,
                 .qk_nope_head_dim = 8, .qk_rope_head_dim = 8, .v_head_dim = 16 };
  l.ckpt = SP_CKPT_NONE;
  l.rmods = 0;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&a, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (2128 + 16));
  l.ckpt = SP_CKPT_SELECTIVE;
  l.rmods = SP_RMOD_MLA_UP_PROJ;
  g_assert_cmpfloat(sp_step_act_layer_bytes(&a, &l, 128, SP_ATTN_FLASH), ==, 128.0 * (2128 - 384 - 96 + 16));
}

/* What the modules recompute costs: each adds kernels to the backward, never memory to
 * the step; the modules that keep the least cost the most. */
static void test_recompute_modules_step(void)
{
  sp_model m = { .name = (char *)"tiny-llama", .layers = 4, .hidden = 1024, .heads = 8, .kv_heads = 8, .ffn = 4096,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_SWIGLU };
  sp_step_ctx c = ctx_for(&m, 2, 2048, 8);
  c.hw.gpu.hbm_bw = 1e12; /* element-wise kernels priced: 1 TB/s, 5 us a launch */
  c.hw.gpu.launch = 5e-6;
  const char *spec[] = { "dp=2,ckpt=none,mb=1", "dp=2,ckpt=selective,recompute=layernorm,mb=1",
                         "dp=2,ckpt=selective,recompute=layernorm+mlp,mb=1", "dp=2,ckpt=full,mb=1" };
  double t[4], act[4];
  for (int i = 0; i < 4; i++) {
    sp_layout l = lay(spec[i], &c);
    sp_step_result r;
    GError *err = NULL;
    g_assert_true(sp_step_eval(&c, &l, &r, &err));
    g_assert_no_error(err);
    t[i] = r.step_time;
    act[i] = r.mem.act;
  }
  for (int i = 1; i < 4; i++) {
    g_assert_cmpfloat(t[i], >, t[i - 1]);
    g_assert_cmpfloat(act[i], <, act[i - 1]);
  }
  /* the norms' recompute: 2 norms x (read + write of 2-byte values, h per token) at the
   * streamed HBM rate, and a launch each */
  sp_layout l = lay(spec[1], &c);
  sp_layer_kernels k;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  double rate = c.hw.gpu.hbm_bw * (c.hw.gpu.hbm_eff > 0 ? c.hw.gpu.hbm_eff : 1.0);
  double want = 2.0 * (2.0 * 2.0 * 2048.0 * 1024.0 / rate + c.hw.gpu.launch);
  g_assert_cmpfloat(fabs(k.rmod_attn - want), <=, 1e-12 * want);
  g_assert_cmpfloat(k.rmod_mlp, ==, 0.0);
}

/* A head width other than hidden / heads (Qwen3, gpt-oss): tiny_llama with 4 heads of
 * 32 (Q 128 wide against h 64) and 2 KV heads. At 1 TFLOP/s, 128 tokens: the QKV GEMM
 * 2 x 128 x (4 + 2 x 2) x 32 x 64 FLOPs, the output projection 2 x 128 x 64 x 128, and
 * causal attention 4 x 4 heads x 128^2 / 2 pairs x 32. A sliding window of 16 keys
 * keeps 16^2 / 2 + 112 x 16 = 1920 of the 8192 causal pairs; over one windowed layer
 * of two, (8192 + 1920) / (2 x 8192). The unfused kernels score every pair and mask. */
static void test_head_dim_window(void)
{
  sp_model m = tiny_llama();
  m.head_dim = 32;
  sp_step_ctx c = ctx_for(&m, 1, 128, 4);
  sp_layout l = lay("dp=1", &c);
  sp_layer_kernels k, kw;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat_with_epsilon(k.qkv[0], 2.0 * 128 * 256 * 64 / 1e12, 1e-18);
  g_assert_cmpfloat_with_epsilon(k.proj[0], 2.0 * 128 * 64 * 128 / 1e12, 1e-18);
  g_assert_cmpfloat_with_epsilon(k.attn_fwd, 4.0 * 4 * 8192 * 32 / 1e12, 1e-18);
  g_assert_cmpfloat(sp_model_attn_matmul_params(&m), ==, 64.0 * (128 + 2 * 64) + 128.0 * 64);
  guint8 all[2] = { 1, 1 }, one[2] = { 0, 1 };
  m.window = 16;
  m.window_mask = all;
  g_assert_cmpfloat(sp_model_attn_causal_fraction(&m, 128), ==, 1920.0 / 8192.0);
  g_assert_cmpfloat(sp_model_attn_causal_fraction(&m, 16), ==, 1.0);
  g_assert_true(sp_step_layer_kernels(&c, &l, &kw, &err));
  g_assert_cmpfloat_with_epsilon(kw.attn_fwd, k.attn_fwd * 1920.0 / 8192.0, 1e-18);
  g_assert_cmpfloat_with_epsilon(kw.attn_bwd, k.attn_bwd * 1920.0 / 8192.0, 1e-18);
  g_assert_cmpfloat(kw.qkv[0], ==, k.qkv[0]);
  m.window_mask = one;
  g_assert_cmpfloat(sp_model_attn_causal_fraction(&m, 128), ==, (8192.0 + 1920.0) / (2 * 8192.0));
  g_assert_true(sp_step_layer_kernels(&c, &l, &kw, &err));
  g_assert_cmpfloat_with_epsilon(kw.attn_fwd, k.attn_fwd * (8192.0 + 1920.0) / (2 * 8192.0), 1e-18);
  c.hw.attn = SP_ATTN_UNFUSED;
  g_assert_true(sp_step_layer_kernels(&c, &l, &kw, &err));
  m.window = 0;
  m.window_mask = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat(kw.attn_fwd, ==, k.attn_fwd);
  g_assert_no_error(err);
}

/* torchtitan's op policy saves the outputs of the 1st, 3rd, 5th and 7th matmuls of
 * the block (Q, V, w1, w2) and of attention, keeps the layer input, and recomputes K,
 * the output projection and w3 (plus every element-wise op) in the backward. */
static void test_op_checkpoint(void)
{
  sp_model m = tiny_llama();
  sp_step_ctx c = ctx_for(&m, 1, 128, 4);
  sp_layout l = lay("dp=1,ckpt=op", &c);
  /* per token: input 64 + Q 64 + V 32 + attention output 64 + w1 128 + w2 64 = 416
   * values of 2 bytes, 128 tokens */
  g_assert_cmpfloat(sp_step_act_layer_bytes(&m, &l, 128, SP_ATTN_FLASH), ==, 128.0 * 416 * 2);
  sp_layer_kernels k;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  /* at 1 TFLOP/s, no memory term: K 2 x 128 x 32 x 64 + O 2 x 128 x 64 x 64 + w3
   * 2 x 128 x 128 x 64 = 524288 + 1048576 + 2097152 FLOPs */
  g_assert_cmpfloat_with_epsilon(k.op_recompute, 3670016e-12, 1e-18);
  /* the step: 4 micro-batches x 2 layers of that recomputation more than ckpt=none */
  sp_layout ln = lay("dp=1,ckpt=none", &c);
  sp_step_result ro, rn;
  g_assert_true(sp_step_eval(&c, &l, &ro, &err));
  g_assert_true(sp_step_eval(&c, &ln, &rn, &err));
  g_assert_cmpfloat_with_epsilon(ro.step_time - rn.step_time, 8 * 3670016e-12, 1e-15);
  /* hardware FLOPs: the recomputed K, O and w3 over 4 x 128 tokens and 2 layers,
   * 2 x 64 x (32 + 64 + 128) each */
  double tokens = 4 * 128;
  g_assert_cmpfloat_with_epsilon((ro.hfu - ro.mfu) * ro.step_time * c.hw.gpu.peak_flops,
                                 tokens * 2 * 2 * 64 * (32 + 64 + 128), 1e-3);
  /* the sweep never proposes it; a layout names it */
  g_assert_cmpstr(sp_ckpt_name(SP_CKPT_OP), ==, "op");
}

/* torchtitan's eager element-wise ops of the block, bytes per token for tiny_llama
 * (h 64, Q 64 and K 32 columns, ffn 128): RMSNorm 2 x 36 x 64 = 4608, residual adds
 * 2 x 6 x 64 = 768, rotary 20 x (64 + 32) = 1920, repeat_kv of K and V 2 x (2 x 32 +
 * 2 x 64) = 384, SwiGLU 10 x 128 = 1280: 8960 bytes, in 28 kernels. */
static void test_eager_elementwise(void)
{
  sp_model m = tiny_llama();
  m.elementwise = SP_ELEM_EAGER;
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  c.hw.gpu.hbm_bw = 1e12;
  c.hw.gpu.launch = 1e-6;
  sp_layout l = lay("dp=2", &c);
  g_assert_cmpfloat(sp_step_eager_elem_bytes_per_token(&m, &l), ==, 8960.0);
  sp_layer_kernels k;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat_with_epsilon(k.elem_fwd, 128 * 8960 / 1e12 + 28e-6, 1e-15);
  /* TP 2 with sequence parallelism halves every term: norms and residuals act on h / 2
   * per token, Q, K (one KV head) and ffn columns are split */
  sp_layout lt = lay("tp=2,tpsp=1", &c);
  g_assert_cmpfloat(sp_step_eager_elem_bytes_per_token(&m, &lt), ==, 4480.0);
  /* fused (the default): twice the layer's stored activations with selective
   * recomputation, 1792 bytes per token for this layer (test_activation_bytes_shapes) */
  m.elementwise = SP_ELEM_FUSED;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat_with_epsilon(k.elem_fwd, 2 * 128 * 1792.0 / 1e12 + 8e-6, 1e-15);
}

/* The loss over the logits as Megatron-LM's vocab-parallel cross entropy runs it
 * (megatron/core/tensor_parallel/cross_entropy.py), pass by pass with bf16 logits:
 * forward .float() 2 + 4, max 4, subtract 4 + 4, exp 4 + 4, sum 4, divide 4 + 4;
 * backward mul_ 4 + 4, cast back 4 + 2: 52 bytes per logit in 9 kernels, half of it in
 * each direction. tiny at seq 128, mb 1, tp 2: 128 tokens x 500 logits. */
static void test_loss_bytes(void)
{
  sp_model m = tiny();
  sp_step_ctx c = ctx_for(&m, 4, 128, 4);
  c.hw.gpu.hbm_bw = 1e12;
  c.hw.gpu.launch = 1e-6;
  double passes = (2 + 4) + 4 + (4 + 4) + (4 + 4) + 4 + (4 + 4) + (4 + 4) + (4 + 2);
  g_assert_cmpfloat(passes, ==, 52.0);
  g_assert_cmpfloat(sp_step_loss_bytes_per_logit(SP_LOSS_UNFUSED, 2), ==, passes);
  /* fp32 logits: .float() and the cast back are no-ops, 2 + 4 and 4 + 2 fewer */
  g_assert_cmpfloat(sp_step_loss_bytes_per_logit(SP_LOSS_UNFUSED, 4), ==, passes - 6 - 6);
  sp_layout l = lay("tp=2,tpsp=0,dp=2", &c);
  sp_layer_kernels k;
  GError *err = NULL;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat_with_epsilon(k.loss, (128.0 * 500 * 52 / 1e12 + 9e-6) / 2, 1e-15);
  /* fused (flash-attn's kernel): the bf16 logits read forward, read and their gradient
   * written backward, 3 x 2 bytes, in 2 kernels */
  m.loss = SP_LOSS_FUSED;
  g_assert_cmpfloat(sp_step_loss_bytes_per_logit(SP_LOSS_FUSED, 2), ==, 6.0);
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat_with_epsilon(k.loss, (128.0 * 500 * 6 / 1e12 + 2e-6) / 2, 1e-15);
  /* no bandwidth (the ideal GPU of the other tests): no time */
  c.hw.gpu.hbm_bw = 0;
  g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_cmpfloat(k.loss, ==, 0.0);
}

/* Megatron-LM's optimizer step over the parameters a rank updates, bytes per parameter:
 * the gradient norm reads the fp32 gradient (4), Adam reads weight, two moments and
 * gradient in fp32 and writes the first three (4 x 4 + 3 x 4), the fp32 weight is copied
 * to the 16-bit one (4 + 2): 38; fp16 adds the loss scaler's unscale-and-check pass over
 * the fp32 gradients (4 + 4): 46. 1e6 parameters at 1 TB/s, 1 us per launch. */
static void test_optimizer_bytes(void)
{
  sp_model m = tiny();
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  c.hw.gpu.hbm_bw = 1e12;
  c.hw.gpu.launch = 1e-6;
  double adam = 4 + (4 * 4 + 3 * 4) + (4 + 2);
  g_assert_cmpfloat(sp_step_optimizer_bytes_per_param(&m), ==, adam);
  sp_layout l0 = lay("dp=2,zero=0", &c), l1 = lay("dp=2,zero=1", &c);
  g_assert_cmpfloat_with_epsilon(sp_step_optimizer_time(&c, &l0, 1e6), adam * 1e6 / 1e12 + 1e-6, 1e-15);
  /* ZeRO-1 over 2 replicas: each updates half */
  g_assert_cmpfloat_with_epsilon(sp_step_optimizer_time(&c, &l1, 1e6), adam * 0.5e6 / 1e12 + 1e-6, 1e-15);
  m.dtype = SP_F16;
  g_assert_cmpfloat(sp_step_optimizer_bytes_per_param(&m), ==, adam + 4 + 4);
  g_assert_cmpfloat_with_epsilon(sp_step_optimizer_time(&c, &l0, 1e6), (adam + 8) * 1e6 / 1e12 + 1e-6, 1e-15);
}

static void test_bubble(void)
{
  g_assert_cmpfloat(sp_step_bubble_fraction(4, 12), ==, 0.25);
  g_assert_cmpfloat(sp_step_bubble_fraction(1, 7), ==, 0.0);
  g_assert_cmpfloat(sp_step_bubble_fraction(8, 7), ==, 1.0);
}

/* Per layer forward flops per rank of tiny at seq 128 split over tp=2: (2 x 128 x 49152 +
 * causal 2 x 128^2 x 64) / 2 = 7340032, of which attention 1048576; LM head
 * 2 x 128 x 1000 x 64 / 2 = 8192000. Backward: GEMMs twice the forward (data and
 * weight gradients), flash attention 2.5 times (five products against two). */
static void test_step_tp(void)
{
  sp_model m = tiny();
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  sp_layout l = lay("tp=2,tpsp=0", &c);
  sp_step_result r;
  GError *err = NULL;
  g_assert_true(sp_step_eval(&c, &l, &r, &err));
  double lf = 7340032e-12, at = 1048576e-12, hf = 8192000e-12;
  /* per micro-batch: 2 layers x (fwd + bwd + 4 all-reduces of 1 ms) + head fwd + bwd,
   * and the all-reduces of the embedding (VocabParallelEmbedding) and of the output
   * layer's input gradient (copy_to_tensor_model_parallel_region's backward); the backward
   * all-reduces of the column-parallel GEMMs' input gradients run under their weight
   * gradients (Megatron-LM's async TP all-reduce): the MLP up projection's 2 x 64 x 128
   * x 128 = 2097152 flops, QKV's 2 x 64 x 96 x 128 = 1572864, the output layer's
   * 2 x 64 x 500 x 128 = 8192000, each shorter than the 1 ms all-reduce it hides */
  double hid = 2 * (2097152e-12 + 1572864e-12) + 8192000e-12;
  double tmb = 2 * (3 * lf + 0.5 * at + 4e-3) + 3 * hf + 2e-3 - hid;
  g_assert_cmpint(r.microbatches, ==, 4);
  g_assert_cmpfloat_with_epsilon(r.step_time, 4 * tmb, 1e-12);
  g_assert_cmpfloat_with_epsilon(r.exposed[SP_COMM_TP], 4 * (2 * 4e-3 + 2e-3 - hid), 1e-12);
  g_assert_cmpfloat(r.bubble, ==, 0.0);
  /* kernels 25 % slower beside a collective lose 0.25 / 1.25 = 0.2 s of work per second
   * of overlap: 0.2 x hid per micro-batch, counted as compute */
  sp_step_ctx cs = c;
  cs.hw.comm_slowdown = 0.25;
  sp_step_result rs;
  g_assert_true(sp_step_eval(&cs, &l, &rs, &err));
  g_assert_cmpfloat_with_epsilon(rs.step_time, 4 * (tmb + 0.2 * hid), 1e-12);
  g_assert_cmpfloat_with_epsilon(rs.compute - r.compute, 4 * 0.2 * hid, 1e-12);
  /* all TP collectives: all-reduce of b s h x 2 bytes (the layers', the embedding's,
   * the output layer's) */
  g_autoptr(GArray) comms = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  sp_step_comms(&c, &l, comms);
  g_assert_cmpuint(comms->len, ==, 4);
  for (guint i = 0; i < comms->len; i++) {
    sp_comm *cm = &g_array_index(comms, sp_comm, i);
    g_assert_cmpint(cm->coll, ==, SP_COLL_ALL_REDUCE);
    g_assert_cmpuint(cm->bytes, ==, 128 * 64 * 2);
    g_assert_cmpint(cm->n, ==, 2);
  }
}

static void test_step_pp(void)
{
  sp_model m = tiny();
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  sp_layout l = lay("pp=2", &c);
  sp_step_result r;
  GError *err = NULL;
  g_assert_true(sp_step_eval(&c, &l, &r, &err));
  double lf = 2 * 7340032e-12, at = 2 * 1048576e-12, hf = 2 * 8192000e-12; /* no tp split */
  /* one layer per stage; forward and backward sends of 1 ms each per micro-batch */
  double tmb = 3 * lf + 0.5 * at + 3 * hf + 2e-3;
  g_assert_cmpfloat_with_epsilon(r.step_time, (4 + 2 - 1) * tmb, 1e-12);
  g_assert_cmpfloat_with_epsilon(r.bubble, tmb, 1e-12);
  g_assert_cmpfloat_with_epsilon(r.bubble / (r.step_time - r.bubble), sp_step_bubble_fraction(2, 4), 1e-12);
}

/* Tied embeddings: on pp=2 the first and last stage all-reduce the table's gradient
 * (1000 x 64 values in bf16) after the step's backward (Megatron-LM
 * _allreduce_word_embedding_grads), exposed whole: the pp=2 step above plus 1 ms. On
 * one stage the table is held once, and dpfp32=1 reduces the gradients in 4 bytes:
 * 4 x (2 x 49280 + 64000 + 64) = 650496 bytes. */
static void test_step_tied(void)
{
  sp_model m = tiny();
  m.tied_embeddings = TRUE;
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  sp_layout l = lay("pp=2", &c);
  sp_step_result r;
  GError *err = NULL;
  g_assert_true(sp_step_eval(&c, &l, &r, &err));
  double lf = 2 * 7340032e-12, at = 2 * 1048576e-12, hf = 2 * 8192000e-12;
  double tmb = 3 * lf + 0.5 * at + 3 * hf + 2e-3;
  g_assert_cmpfloat_with_epsilon(r.step_time, (4 + 2 - 1) * tmb + 1e-3, 1e-12);
  g_autoptr(GArray) comms = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  sp_step_comms(&c, &l, comms);
  guint ties = 0;
  for (guint i = 0; i < comms->len; i++) {
    const sp_comm *cm = &g_array_index(comms, sp_comm, i);
    if (cm->when != SP_PER_STEP) continue;
    ties++;
    g_assert_cmpint(cm->kind, ==, SP_COMM_PP);
    g_assert_cmpint(cm->coll, ==, SP_COLL_ALL_REDUCE);
    g_assert_cmpint(cm->n, ==, 2);
    g_assert_cmpint(cm->stride, ==, 1);
    g_assert_cmpuint(cm->bytes, ==, 2 * 64000);
  }
  g_assert_cmpuint(ties, ==, 1);
  sp_layout l2 = lay("dp=2,dpfp32=1", &c);
  g_array_set_size(comms, 0);
  sp_step_comms(&c, &l2, comms);
  g_assert_cmpuint(comms->len, ==, 1);
  const sp_comm *g = &g_array_index(comms, sp_comm, 0);
  g_assert_cmpint(g->coll, ==, SP_COLL_ALL_REDUCE);
  g_assert_cmpuint(g->bytes, ==, 650496);
}

/* Interleaved 1F1B (Narayanan et al. 2021): the bubble shrinks to (pp - 1) / vpp
 * micro-batch slots, each rank sends vpp times per micro-batch, and the first stage
 * keeps (1 + (pp - 1) / (pp vpp)) times the activations. */
static void test_step_pp_interleaved(void)
{
  sp_model m = tiny();
  m.layers = 4;
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  sp_layout l1 = lay("pp=2", &c), l2 = lay("pp=2,vpp=2", &c);
  sp_step_result r1, r2;
  GError *err = NULL;
  g_assert_true(sp_step_eval(&c, &l1, &r1, &err));
  g_assert_true(sp_step_eval(&c, &l2, &r2, &err));
  double lf = 2 * 7340032e-12, at = 2 * 1048576e-12, hf = 2 * 8192000e-12;
  /* two layers per rank; sends of 1 ms forward and backward, twice with vpp = 2 */
  double t1 = 2 * (3 * lf + 0.5 * at) + 3 * hf + 2e-3, t2 = 2 * (3 * lf + 0.5 * at) + 3 * hf + 4e-3;
  g_assert_cmpfloat_with_epsilon(r1.step_time, (4 + 1) * t1, 1e-12);
  g_assert_cmpfloat_with_epsilon(r2.step_time, (4 + 0.5) * t2, 1e-12);
  g_assert_cmpfloat_with_epsilon(r2.bubble, 0.5 * t2, 1e-12);
  /* activations: tokenwise 128 x 64 x 34 + flash attention's log-sum-exp 4 x 4 x 128
   * per layer, 2 layers; the first stage keeps min(pp, m) = 2 micro-batches in flight,
   * the last one micro-batch plus 6 bytes per logit (128 x 1000): the larger of the two.
   * Interleaved (one layer per chunk, 4 micro-batches): Megatron's warm-up is
   * 2 (pp - s - 1) + (v - 1) pp chunk passes, plus the one before the first backward:
   * 5 on the first stage, 3 on the last one, which also holds the logits */
  double per_layer = 128.0 * 64 * 34 + 4.0 * 4 * 128, logits = 6.0 * 128 * 1000;
  g_assert_cmpfloat_with_epsilon(r1.mem.act, MAX(2 * per_layer * 2, 2 * per_layer + logits), 1e-3);
  g_assert_cmpfloat_with_epsilon(r1.mem.act, 2 * per_layer + logits, 1e-3);
  g_assert_cmpfloat_with_epsilon(r2.mem.act, MAX(5 * per_layer, 3 * per_layer + logits), 1e-3);
  g_assert_cmpfloat_with_epsilon(r2.mem.act, 3 * per_layer + logits, 1e-3);
}

static void test_analytic_pricer(void)
{
  sp_analytic_net net;
  sp_analytic_net_init(&net);
  GError *err = NULL;
  double t = 0;
  /* 8 GPUs of one node, 1 GB all-reduce: tree latency 2 log2 8 = 6 hops of 3.4 us + 1e9 x 2 x 7/8 / 360e9 */
  sp_comm c = { .kind = SP_COMM_TP, .coll = SP_COLL_ALL_REDUCE, .n = 8, .stride = 1, .bytes = 1000000000 };
  g_assert_true(sp_price_analytic(&net, &c, &t, &err));
  g_assert_cmpfloat_with_epsilon(t, 6 * 3.4e-6 + 1e9 * 1.75 / 360e9, 1e-12);
  /* 16 ranks with stride 8: one per node, bound by one NIC (46 GB/s), 15 hops of 14 us */
  sp_comm d = { .kind = SP_COMM_DP, .coll = SP_COLL_ALL_GATHER, .n = 16, .stride = 8, .bytes = 1000000000 };
  g_assert_true(sp_price_analytic(&net, &d, &t, &err));
  g_assert_cmpfloat_with_epsilon(t, 15 * 14e-6 + 1e9 * 15.0 / 16 / 46e9, 1e-12);
}

/* Transformer Engine's overlapped TP GEMMs (step_tpoverlap.c), by hand: an 8 ms GEMM behind
 * a ring exchange over 8 ranks runs in 1 ms chunks; with 0.5 ms steps every shard arrives
 * under the chunk before (8 ms), with 2 ms steps the 7 steps set the pace (1 + 7 x 2 = 15 ms).
 * Before a reduce-scatter pipelined in 4 chunks of 2 ms GEMM: 1 ms chunks leave the last
 * exposed (8 + 1 = 9 ms), 3 ms chunks run back to back after the first GEMM chunk (2 + 4 x 3 =
 * 14 ms). tpoverlap needs tp > 1 with sequence parallelism. */
static void test_tp_overlap_times(void)
{
  g_assert_cmpfloat(fabs(sp_step_tpo_ag_time(8e-3, 8, 0.5e-3) - 8e-3), <, 1e-15);
  g_assert_cmpfloat(fabs(sp_step_tpo_ag_time(8e-3, 8, 2e-3) - 15e-3), <, 1e-15);
  g_assert_cmpfloat(fabs(sp_step_tpo_rs_time(8e-3, 4, 1e-3) - 9e-3), <, 1e-15);
  g_assert_cmpfloat(fabs(sp_step_tpo_rs_time(8e-3, 4, 3e-3) - 14e-3), <, 1e-15);
  g_assert_cmpint(sp_step_tpo_rs_splits(), ==, 4);
  const char *bad[] = { "tp=1,tpoverlap=1", "tp=4,tpsp=0,tpoverlap=1", "tp=4,tpoverlap=2" };
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    sp_layout l;
    GError *err = NULL;
    g_assert_false(sp_layout_parse(bad[i], &l, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, "tpoverlap"));
    g_clear_error(&err);
  }
  sp_layout l;
  g_assert_true(sp_layout_parse("tp=4,tpoverlap=1", &l, NULL));
  g_autofree char *txt = sp_layout_to_string(&l);
  g_assert_nonnull(strstr(txt, "tpsp=1,tpoverlap=1"));
  g_autofree char *lab = sp_layout_label(&l);
  g_assert_true(g_str_has_prefix(lab, "tp4so "));
}

/* FP8 (--fp8): tiny at seq 128, mb 1, dp 2: 128 tokens through QKV (64 -> 192), the
 * output projection (64 -> 64), up (64 -> 256) and down (256 -> 64). Each linear casts
 * its input (128 x k) forward and its output gradient (128 x n) backward: 128 x (256 +
 * 128 + 320 + 320) = 131072 elements, 4 bytes each with delayed scaling (2 read, FP8
 * and FP8 transpose written): 524288 bytes in 8 kernels; tensorwise 6 bytes, 16 kernels.
 * Memory: the FP8 weight cache adds 1 byte per linear weight, 2 layers x (4 x 64^2 + 2 x
 * 64 x 256) = 98304 bytes. */
static void test_fp8_layer(void)
{
  sp_model m = tiny();
  sp_step_ctx c = ctx_for(&m, 2, 128, 4);
  c.hw.gpu.hbm_bw = 1e12;
  c.hw.gpu.hbm_eff = 1.0;
  c.hw.gpu.launch = 1e-6;
  c.hw.gpu.fp8_peak_ratio = 2.0; /* the fixture's GPU, with an FP8 rate of 2 x 0.5 of its peak */
  c.hw.gpu.fp8_gemm_eff = 0.5;
  sp_layout l = lay("dp=2", &c);
  GError *err = NULL;
  sp_kernel_gpu g8;
  g_assert_true(sp_kernel_gpu_fp8(&c.hw.gpu, &g8, &err));
  const int64_t shape[4][2] = { { 192, 64 }, { 64, 64 }, { 256, 64 }, { 64, 256 } }; /* n, k */
  double gemms = 0, head16[3], cast[2] = { 4.0, 6.0 }, launches[2] = { 8e-6, 16e-6 };
  for (int i = 0; i < 4; i++) {
    double f = 0, d = 0;
    g_assert_true(sp_kernel_gemm_time(&g8, 1, 128, shape[i][0], shape[i][1], 1, &f, &err));
    g_assert_true(sp_kernel_gemm_time(&g8, 1, 128, shape[i][1], shape[i][0], 1, &d, &err));
    gemms += f + d;
  }
  g_assert_true(sp_kernel_gemm_time(&c.hw.gpu, 1, 128, 1000, 64, 2, &head16[0], &err));
  for (int r = 0; r < 2; r++) {
    c.hw.fp8 = r == 0 ? SP_FP8_DELAYED : SP_FP8_TENSORWISE;
    sp_layer_kernels k;
    g_assert_true(sp_step_layer_kernels(&c, &l, &k, &err));
    double fwd_dgrad = k.qkv[0] + k.qkv[1] + k.proj[0] + k.proj[1] + k.up[0] + k.up[1] + k.down[0] + k.down[1];
    g_assert_cmpfloat_with_epsilon(fwd_dgrad, gemms + cast[r] * 131072 / 1e12 + launches[r], 1e-15);
    /* the LM head stays 16-bit */
    g_assert_cmpfloat_with_epsilon(k.head[0], head16[0], 1e-18);
  }
  const double P = 226624;
  sp_step_mem mem;
  sp_step_memory(&c, &l, &mem);
  g_assert_cmpfloat_with_epsilon(mem.weights, 2 * P + 98304, 1e-6);
  c.hw.fp8 = SP_FP8_NONE;
  sp_step_memory(&c, &l, &mem);
  g_assert_cmpfloat_with_epsilon(mem.weights, 2 * P, 1e-6);
  /* a GPU without FP8 is refused */
  sp_kernel_gpu_a100(&c.hw.gpu);
  c.hw.fp8 = SP_FP8_BLOCKWISE;
  sp_layer_kernels k;
  g_assert_false(sp_step_layer_kernels(&c, &l, &k, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
}

/* Megatron-LM's 1F1B order (schedules.py): rank s runs pp - s - 1 warm-up forwards
 * (interleaved: 2 (pp - s - 1) + (v - 1) pp, or all m v passes when m = pp), then one
 * forward before each backward, so warm-up + 1 passes are live at its peak. */
static void test_live_passes(void)
{
  /* pp 4, 8 micro-batches: 3 + 1 on the first rank, 0 + 1 on the last */
  g_assert_cmpint(sp_step_live_passes(4, 1, 8, 0, 0, FALSE), ==, 4);
  g_assert_cmpint(sp_step_live_passes(4, 1, 8, 0, 3, FALSE), ==, 1);
  /* fewer micro-batches than stages: all of them */
  g_assert_cmpint(sp_step_live_passes(4, 1, 2, 0, 0, FALSE), ==, 2);
  /* interleaved, v 2, m 8: 2 x 3 + 4 = 10 warm-up passes + 1; last rank 0 + 4 + 1 */
  g_assert_cmpint(sp_step_warmup(4, 2, 8, 0, 0, FALSE), ==, 10);
  g_assert_cmpint(sp_step_live_passes(4, 2, 8, 0, 0, FALSE), ==, 11);
  g_assert_cmpint(sp_step_live_passes(4, 2, 8, 0, 3, FALSE), ==, 5);
  /* m = pp: every forward first on every rank (all_warmup_microbatches) */
  g_assert_cmpint(sp_step_warmup(4, 2, 4, 0, 3, FALSE), ==, 8);
  g_assert_cmpint(sp_step_live_passes(4, 2, 4, 0, 0, FALSE), ==, 8);
  g_assert_cmpint(sp_step_live_passes(4, 2, 4, 0, 3, FALSE), ==, 8);
  /* paired forward and backward (a2aoverlap): one more warm-up forward */
  g_assert_cmpint(sp_step_live_passes(4, 1, 8, 0, 0, TRUE), ==, 5);
  /* no pipelining: one micro-batch at a time, two when paired */
  g_assert_cmpint(sp_step_live_passes(1, 1, 8, 0, 0, FALSE), ==, 1);
  g_assert_cmpint(sp_step_live_passes(1, 1, 8, 0, 0, TRUE), ==, 2);
  /* groups of N micro-batches per chunk (vppgroup): 2 (pp - s - 1) + (v - 1) N; pp 4,
   * v 2, m 12, N 6: 6 + 6 = 12 on the first rank (against 10 with N = pp), 0 + 6 = 6 on
   * the last; N = 0 is pp */
  g_assert_cmpint(sp_step_warmup(4, 2, 12, 6, 0, FALSE), ==, 12);
  g_assert_cmpint(sp_step_warmup(4, 2, 12, 6, 3, FALSE), ==, 6);
  g_assert_cmpint(sp_step_warmup(4, 2, 12, 0, 0, FALSE), ==, 10);
  g_assert_cmpint(sp_step_live_passes(4, 2, 12, 6, 0, FALSE), ==, 13);
  /* v 4, m 8, N 8: 6 + 3 x 8 = 30, capped at the 32 passes of the step (then + 1 live) */
  g_assert_cmpint(sp_step_warmup(4, 4, 8, 8, 0, FALSE), ==, 30);
  g_assert_cmpint(sp_step_live_passes(4, 4, 8, 8, 0, FALSE), ==, 31);
}

/* Activations of the fullest stage: 16 layers on pp 4 (4 per stage, 2 per chunk with v 2). */
static void test_pipeline_activations(void)
{
  sp_model m = tiny();
  m.layers = 16;
  struct { const char *spec; int64_t gb; double layers; gboolean last; } cs[] = {
    /* 1F1B, 8 micro-batches: the first stage's 4 passes of 4 layers */
    { "pp=4,dp=1,mb=1", 8, 16.0, FALSE },
    /* interleaved, 8 micro-batches: the first stage's 11 chunk passes of 2 layers */
    { "pp=4,vpp=2,dp=1,mb=1", 8, 22.0, FALSE },
    /* interleaved, 4 micro-batches = pp: every stage holds all 8 chunk passes (16 layers),
     * the last one with the logits (Korthikanti's factor would give 4 x 11/8 x 4 = 22) */
    { "pp=4,vpp=2,dp=1,mb=1", 4, 16.0, TRUE },
    /* the same 8 micro-batches in one group of 8 (vppgroup): 2 x 3 + 8 = 14 warm-up
     * passes + 1 on the first stage, 15 chunk passes of 2 layers */
    { "pp=4,vpp=2,vppgroup=8,dp=1,mb=1", 8, 30.0, FALSE },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cs); i++) {
    sp_step_ctx c = ctx_for(&m, 4, 128, cs[i].gb);
    sp_layout l = lay(cs[i].spec, &c);
    double per_layer = sp_step_act_layer_bytes(&m, &l, 128, c.hw.attn);
    double logits = 6.0 * 128 * 1000; /* bf16 logits and their fp32 copy */
    sp_step_mem mem;
    sp_step_memory(&c, &l, &mem);
    g_assert_cmpfloat_with_epsilon(mem.act, cs[i].layers * per_layer + (cs[i].last ? logits : 0.0), 1e-3);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/step/zero-memory", test_zero_memory);
  g_test_add_func("/step/activation-bytes", test_activation_bytes);
  g_test_add_func("/step/live-passes", test_live_passes);
  g_test_add_func("/step/pipeline-activations", test_pipeline_activations);
  g_test_add_func("/step/activation-bytes/modules", test_activation_bytes_modules);
  g_test_add_func("/step/recompute-modules", test_recompute_modules_step);
  g_test_add_func("/step/activation-bytes-shapes", test_activation_bytes_shapes);
  g_test_add_func("/step/op-checkpoint", test_op_checkpoint);
  g_test_add_func("/step/eager-elementwise", test_eager_elementwise);
  g_test_add_func("/step/loss-bytes", test_loss_bytes);
  g_test_add_func("/step/optimizer-bytes", test_optimizer_bytes);
  g_test_add_func("/step/bubble", test_bubble);
  g_test_add_func("/step/tp-step", test_step_tp);
  g_test_add_func("/step/tp-overlap-times", test_tp_overlap_times);
  g_test_add_func("/step/pp-step", test_step_pp);
  g_test_add_func("/step/tied-embeddings", test_step_tied);
  g_test_add_func("/step/pp-interleaved", test_step_pp_interleaved);
  g_test_add_func("/step/analytic-pricer", test_analytic_pricer);
  g_test_add_func("/step/fp8-layer", test_fp8_layer);
  g_test_add_func("/step/head-dim-window", test_head_dim_window);
  return g_test_run();
}
