/* Model configs: parsing, validation, parameter and FLOP counts vs hand-computed closed forms. */
#include "config.h"
#include <glib.h>
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/model.h"

static char *models_dir(void)
{
  const char *src = g_getenv("SPSIM_SRCDIR");
  return g_build_filename(src ? src : ".", "models", NULL);
}

static sp_model *builtin(const char *name)
{
  g_autofree char *dir = models_dir();
  const char *dirs[] = { dir, NULL };
  GError *err = NULL;
  sp_model *m = sp_model_find(name, dirs, &err);
  g_assert_no_error(err);
  g_assert_nonnull(m);
  return m;
}

static void test_llama2_7b_params(void)
{
  sp_model *m = builtin("llama2-7b");
  /* layer: 4 h^2 (MHA) + 3 h ffn + 2 h = 67108864 + 135266304 + 8192 */
  g_assert_cmpfloat(sp_model_layer_params(m), ==, 202383360.0);
  /* 32 layers + 2 x 32000 x 4096 embeddings + final norm = 6,738,415,616 (published "6.7B") */
  g_assert_cmpfloat(sp_model_params(m), ==, 6738415616.0);
  sp_model_free(m);
}

static void test_llama3_70b_gqa(void)
{
  sp_model *m = builtin("llama3-70b");
  /* attention with 8 KV heads of 128: 8192 x (8192 + 2 x 1024) + 8192^2 = 150994944 */
  g_assert_cmpfloat(sp_model_layer_matmul_params(m), ==, 150994944.0 + 3.0 * 8192 * 28672);
  g_assert_cmpfloat(sp_model_params(m), ==, 70553706496.0); /* Meta: 70.6B */
  sp_model_free(m);
}

static void test_gpt3_flops(void)
{
  sp_model *m = builtin("gpt3-175b");
  double l = 96, h = 12288, V = 51200, s = 2048;
  /* Narayanan et al. 2021 without recomputation: per token 72 l h^2 (1 + s/(6h)) + 6 h V */
  double expect = 72.0 * l * h * h * (1.0 + s / (6.0 * h)) + 6.0 * h * V;
  g_assert_cmpfloat_with_epsilon(sp_model_train_flops_per_token(m, s), expect, expect * 1e-12);
  /* forward attention of 2048 tokens at seq 2048: 4 t s h, causal half */
  g_assert_cmpfloat(sp_model_layer_fwd_attn_flops(m, 2048, 2048, FALSE), ==, 4.0 * 2048 * 2048 * 12288);
  g_assert_cmpfloat(sp_model_layer_fwd_attn_flops(m, 2048, 2048, TRUE), ==, 2.0 * 2048 * 2048 * 12288);
  /* 175B: 12 l h^2 + embeddings, within 1% of 175e9 */
  g_assert_cmpfloat(fabs(sp_model_params(m) - 175e9) / 175e9, <, 0.01);
  sp_model_free(m);
}

static void expect_parse_error(const char *json, const char *needle)
{
  GError *err = NULL;
  sp_model *m = sp_model_parse(json, -1, "test.json", &err);
  g_assert_null(m);
  g_assert_nonnull(err);
  if (strstr(err->message, needle) == NULL) g_error("message '%s' lacks '%s'", err->message, needle);
  g_error_free(err);
}

/* Mixture-of-experts parameter counts, derived by hand from the published shapes
 * (the model files cite them) and checked against the published totals. */
static void test_moe_params(void)
{
  sp_model *m = builtin("mixtral-8x7b");
  /* layer: attention 4096 (4096 + 2 x 1024) + 4096^2 = 41943040; expert 3 x 4096 x 14336 =
   * 176160768; router 4096 x 8; norms 2 x 4096 */
  g_assert_true(sp_model_is_moe(m));
  g_assert_cmpint(sp_model_moe_layers(m), ==, 32);
  g_assert_cmpfloat(sp_model_attn_matmul_params(m), ==, 41943040.0);
  g_assert_cmpfloat(sp_model_routed_expert_params(m), ==, 8.0 * 176160768.0);
  g_assert_cmpfloat(sp_model_router_params(m), ==, 32768.0);
  /* 32 x (41943040 + 8 x 176160768 + 32768 + 8192) + 2 x 32000 x 4096 + 4096 */
  g_assert_cmpfloat(sp_model_params(m), ==, 46702792704.0);
  g_assert_cmpfloat(sp_model_active_params(m), ==, 12879925248.0);
  /* Mixtral paper sec. 2.1: 47B total (46.7B on the model card), 13B active (12.9B) */
  g_assert_cmpfloat(fabs(sp_model_params(m) - 46.7e9) / 46.7e9, <, 0.001);
  g_assert_cmpfloat(fabs(sp_model_active_params(m) - 12.9e9) / 12.9e9, <, 0.002);
  /* model FLOPs per token count the active weights: 6 (L x active matmuls + V h) + 12 L h s */
  double act_mm = 41943040.0 + 2.0 * 176160768.0 + 32768.0;
  g_assert_cmpfloat(fabs(sp_model_train_flops_per_token(m, 4096) -
                         (6.0 * (32 * act_mm + 32000.0 * 4096) + 12.0 * 32 * 4096 * 4096)), <, 1.0);
  sp_model_free(m);

  m = builtin("mixtral-8x22b"); /* announcement: 141B total, 39B active */
  g_assert_cmpfloat(sp_model_params(m), ==, 140630071296.0);
  g_assert_cmpfloat(sp_model_active_params(m), ==, 39161468928.0);
  sp_model_free(m);

  m = builtin("qwen2-57b-a14b"); /* Qwen2 report: 57B total, 14B activated */
  g_assert_cmpfloat(sp_model_params(m), ==, 57408429568.0);
  g_assert_cmpfloat(sp_model_active_params(m), ==, 14249041408.0);
  sp_model_free(m);
}

static void test_deepseek_v3_params(void)
{
  sp_model *m = builtin("deepseek-v3");
  g_assert_true(sp_model_is_mla(m));
  g_assert_cmpint(sp_model_moe_layers(m), ==, 58); /* 61 layers, the first 3 dense */
  g_assert_false(sp_model_layer_is_moe(m, 2));
  g_assert_true(sp_model_layer_is_moe(m, 3));
  g_assert_true(sp_model_layer_is_moe(m, 60));
  g_assert_cmpint(sp_model_qk_head_dim(m), ==, 192);
  g_assert_cmpint(sp_model_v_head_dim(m), ==, 128);
  /* MLA: q 7168 x 1536 + 1536 x 128 x 192; kv 7168 x (512 + 64) + 512 x 128 x (128 + 128);
   * o 128 x 128 x 7168 */
  g_assert_cmpfloat(sp_model_attn_matmul_params(m), ==, 11010048.0 + 37748736.0 + 4128768.0 + 16777216.0 + 117440512.0);
  g_assert_cmpfloat(sp_model_attn_norm_params(m), ==, 2048.0);
  /* 61 x (187105280 + 2048 + 2 x 7168) + 3 x 3 x 7168 x 18432 + 58 x (257 x 3 x 7168 x 2048
   * + 7168 x 256) + 2 x 129280 x 7168 + 7168 */
  g_assert_cmpfloat(sp_model_params(m), ==, 671026404352.0);
  /* active: 8 routed + 1 shared expert and the router in the MoE layers */
  g_assert_cmpfloat(sp_model_active_params(m), ==, 37552282624.0);
  /* report sec. 1: 671B total, 37B activated */
  g_assert_cmpfloat(fabs(sp_model_params(m) - 671e9) / 671e9, <, 0.001);
  g_assert_cmpfloat(fabs(sp_model_active_params(m) - 37e9) / 37e9, <, 0.02);
  /* attention FLOPs: 2 tokens seq heads (qk + v) = 2 x 1 x 4096 x 128 x 320 */
  g_assert_cmpfloat(sp_model_layer_fwd_attn_flops(m, 1, 4096, FALSE), ==, 2.0 * 4096 * 128 * 320);
  sp_model_free(m);
}

#define DENSE "\"layers\": 4, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10"

static void test_moe_layers(void)
{
  GError *err = NULL;
  sp_model *m = sp_model_parse("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"moe_layer_freq\": 2}", -1, "t.json", &err);
  g_assert_no_error(err);
  /* layers 0 and 2 are MoE; expert_ffn defaults to ffn */
  g_assert_cmpint(sp_model_moe_layers(m), ==, 2);
  g_assert_true(sp_model_layer_is_moe(m, 0) && !sp_model_layer_is_moe(m, 1) && sp_model_layer_is_moe(m, 2));
  g_assert_cmpint(m->expert_ffn, ==, 256);
  g_assert_cmpfloat(m->capacity_factor, ==, 0.0);
  g_assert_cmpint(m->router_dtype, ==, SP_F32);
  /* 2 dense layers of 4 x 64^2 + 3 x 64 x 256 + 128, 2 MoE layers with 4 experts and a 64 x 4 router */
  double dense = 16384.0 + 49152.0 + 128.0, moe = 16384.0 + 4 * 49152.0 + 256.0 + 128.0;
  g_assert_cmpfloat(sp_model_params(m), ==, 2 * dense + 2 * moe + 2 * 640.0 + 64.0);
  sp_model_free(m);
  m = sp_model_parse("{" DENSE ", \"experts\": 4, \"experts_per_token\": 2, \"moe_layers\": [3, 1], \"capacity_factor\": 1.25,"
                     " \"shared_experts\": 2, \"expert_ffn\": 32, \"router_dtype\": \"bf16\"}", -1, "t.json", &err);
  g_assert_no_error(err);
  g_assert_true(!sp_model_layer_is_moe(m, 0) && sp_model_layer_is_moe(m, 1) && sp_model_layer_is_moe(m, 3));
  g_assert_cmpint(m->shared_ffn, ==, 32);
  g_assert_cmpfloat(m->capacity_factor, ==, 1.25);
  g_assert_cmpint(m->router_dtype, ==, SP_BF16);
  sp_model_free(m);
  m = sp_model_parse("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"first_dense_layers\": 1}", -1, "t.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(sp_model_moe_layers(m), ==, 3);
  g_assert_false(sp_model_layer_is_moe(m, 0));
  sp_model_free(m);
}

static void test_moe_bad(void)
{
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 5}", "experts_per_token must be between 1 and experts = 4");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 0}", "'experts_per_token' must be >= 1");
  expect_parse_error("{" DENSE ", \"experts\": 4}", "needs experts_per_token");
  expect_parse_error("{" DENSE ", \"experts_per_token\": 2}", "need \"experts\"");
  expect_parse_error("{" DENSE ", \"moe_layer_freq\": 2}", "need \"experts\"");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"moe_layers\": [0, 4]}",
                     "moe_layers[1] = 4 is out of range: the model has layers 0..3");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"moe_layers\": [-1]}", "out of range");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"moe_layers\": []}", "no layer is an MoE layer");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"moe_layers\": [1], \"moe_layer_freq\": 2}",
                     "not both");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"first_dense_layers\": 4}", "leaves no MoE layer");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"capacity_factor\": 0}", "capacity_factor must be > 0");
  expect_parse_error("{" DENSE ", \"experts\": 4, \"experts_per_token\": 1, \"router_dtype\": \"int7\"}", "int7");
  expect_parse_error("{" DENSE ", \"n_routed_experts\": 4}", "for 'n_routed_experts' write 'experts'");
  expect_parse_error("{" DENSE ", \"experts\": 99999999999, \"experts_per_token\": 1}", "at most 1048576 experts");
  expect_parse_error("{\"layers\": 99999999999, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"experts\": 4, \"experts_per_token\": 1}", "at most 1048576 layers");
  expect_parse_error("{" DENSE ", \"kv_lora_rank\": 16}", "needs qk_nope_head_dim");
  expect_parse_error("{" DENSE ", \"q_lora_rank\": 16}", "need kv_lora_rank");
  expect_parse_error("{\"layers\": 4, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 10, \"kv_lora_rank\": 16,"
                     " \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8}", "set kv_heads = heads");
}

/* Hugging Face config.json files (key names of transformers' MixtralConfig,
 * Qwen2MoeConfig and DeepseekV3Config, values of the published configs) price as the
 * built-in models: the same hand-derived totals. */
static void test_hf_config(void)
{
  GError *err = NULL;
  sp_model *m = sp_model_parse("{\"_name_or_path\": \"mistralai/Mixtral-8x7B-v0.1\", \"architectures\": [\"MixtralForCausalLM\"],"
                               " \"hidden_size\": 4096, \"intermediate_size\": 14336, \"max_position_embeddings\": 32768,"
                               " \"num_attention_heads\": 32, \"num_experts_per_tok\": 2, \"num_hidden_layers\": 32,"
                               " \"num_key_value_heads\": 8, \"num_local_experts\": 8, \"rope_theta\": 1e6,"
                               " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"vocab_size\": 32000,"
                               " \"hidden_act\": \"silu\"}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpstr(m->name, ==, "mistralai/Mixtral-8x7B-v0.1");
  g_assert_cmpfloat(sp_model_params(m), ==, 46702792704.0);
  g_assert_cmpfloat(sp_model_active_params(m), ==, 12879925248.0);
  sp_model_free(m);
  m = sp_model_parse("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 7168, \"intermediate_size\": 18432,"
                     " \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, \"n_shared_experts\": 1,"
                     " \"num_experts_per_tok\": 8, \"first_k_dense_replace\": 3, \"moe_layer_freq\": 1,"
                     " \"num_hidden_layers\": 61, \"num_attention_heads\": 128, \"num_key_value_heads\": 128,"
                     " \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64,"
                     " \"v_head_dim\": 128, \"vocab_size\": 129280, \"tie_word_embeddings\": false}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpstr(m->name, ==, "deepseek_v3");
  g_assert_cmpfloat(sp_model_params(m), ==, 671026404352.0);
  g_assert_cmpfloat(sp_model_active_params(m), ==, 37552282624.0);
  sp_model_free(m);
  /* Qwen2-MoE: one shared MLP of 20480 columns, the same weights as 8 shared experts of 2560 */
  m = sp_model_parse("{\"hidden_size\": 3584, \"intermediate_size\": 18944, \"moe_intermediate_size\": 2560,"
                     " \"shared_expert_intermediate_size\": 20480, \"num_experts\": 64, \"num_experts_per_tok\": 8,"
                     " \"decoder_sparse_step\": 1, \"num_hidden_layers\": 28, \"num_attention_heads\": 28,"
                     " \"num_key_value_heads\": 4, \"vocab_size\": 151936, \"tie_word_embeddings\": false}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(sp_model_params(m), ==, 57408429568.0);
  sp_model_free(m);
  expect_parse_error("{\"hidden_size\": 64, \"intermediate_size\": 256, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                     " \"vocab_size\": 10, \"num_local_experts\": 4, \"num_experts_per_tok\": 5}", "experts_per_token must be between 1 and experts = 4");
}

/* Heads wider than hidden / heads and sliding windows, from Hugging Face configs with
 * the published values. Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json; its model card:
 * 30.5 B parameters, 3.3 B activated): per layer Q 32 x 128 = 4096 and K, V 4 x 128
 * columns, 2048 x (4096 + 1024) + 4096 x 2048 = 18,874,368 attention weights, 128
 * experts of 3 x 2048 x 768, a 2048 x 128 router and two norms: 623,120,384; 48 layers,
 * untied embeddings 2 x 151,936 x 2048 and the final norm: 30,532,110,336. Activated:
 * attention, router, norms and 8 experts per layer, 56,889,344 x 48, plus the embeddings:
 * 3,353,020,416. gpt-oss-120b (openai/gpt-oss-120b config.json; model card: 116.8 B):
 * 64 heads of 64 on h 2880, 8 KV heads, 128 experts of 2880, untied vocabulary 201,088:
 * 36 x 3,211,966,080 + 2 x 201,088 x 2880 + 2880 = 116,789,048,640; its layer_types
 * window every even layer at 128 keys: at 4096 tokens half the layers keep
 * (128^2 / 2 + 3968 x 128) of 4096^2 / 2 causal pairs. */
static void test_hf_head_dim_window(void)
{
  GError *err = NULL;
  sp_model *m = sp_model_parse("{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\","
                               " \"hidden_size\": 2048, \"intermediate_size\": 6144, \"moe_intermediate_size\": 768,"
                               " \"num_experts\": 128, \"num_experts_per_tok\": 8, \"decoder_sparse_step\": 1,"
                               " \"mlp_only_layers\": [], \"norm_topk_prob\": true, \"num_hidden_layers\": 48,"
                               " \"num_attention_heads\": 32, \"num_key_value_heads\": 4, \"head_dim\": 128,"
                               " \"vocab_size\": 151936, \"tie_word_embeddings\": false, \"use_sliding_window\": false,"
                               " \"sliding_window\": 4096, \"hidden_act\": \"silu\"}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(sp_model_head_dim(m), ==, 128);
  g_assert_cmpint(m->window, ==, 0);
  g_assert_cmpfloat(sp_model_params(m), ==, 30532110336.0);
  g_assert_cmpfloat(sp_model_active_params(m), ==, 3353020416.0);
  g_assert_cmpfloat(fabs(sp_model_params(m) / 30.5e9 - 1), <, 0.002);
  g_assert_cmpfloat(fabs(sp_model_active_params(m) / 3.3e9 - 1), <, 0.02);
  /* attention FLOPs follow the heads' width: 4 x tokens x seq x 32 x 128, not x h */
  g_assert_cmpfloat(sp_model_layer_fwd_attn_flops(m, 1, 4096, FALSE), ==, 4.0 * 4096 * 4096);
  sp_model_free(m);
  GString *types = g_string_new(NULL);
  for (int i = 0; i < 36; i++) g_string_append_printf(types, "%s\"%s\"", i ? ", " : "", i % 2 ? "full_attention" : "sliding_attention");
  g_autofree char *oss = g_strdup_printf("{\"model_type\": \"gpt_oss\", \"hidden_size\": 2880, \"intermediate_size\": 2880,"
                                         " \"num_local_experts\": 128, \"num_experts_per_tok\": 4, \"num_hidden_layers\": 36,"
                                         " \"num_attention_heads\": 64, \"num_key_value_heads\": 8, \"head_dim\": 64,"
                                         " \"sliding_window\": 128, \"layer_types\": [%s], \"vocab_size\": 201088,"
                                         " \"tie_word_embeddings\": false}", types->str);
  g_string_free(types, TRUE);
  m = sp_model_parse(oss, -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(sp_model_params(m), ==, 116789048640.0);
  g_assert_cmpfloat(fabs(sp_model_params(m) / 116.8e9 - 1), <, 0.001);
  g_assert_cmpint(m->window, ==, 128);
  g_assert_true(sp_model_layer_is_windowed(m, 0) && !sp_model_layer_is_windowed(m, 1) && sp_model_layer_is_windowed(m, 34));
  double full = 4096.0 * 4096 / 2, win = 128.0 * 128 / 2 + 3968.0 * 128;
  g_assert_cmpfloat_with_epsilon(sp_model_attn_causal_fraction(m, 4096), (full + win) / (2 * full), 1e-15);
  sp_model_free(m);
  /* Mistral 7B v0.1: sliding_window without layer_types windows every layer */
  m = sp_model_parse("{\"hidden_size\": 4096, \"intermediate_size\": 14336, \"num_hidden_layers\": 32,"
                     " \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"sliding_window\": 4096,"
                     " \"vocab_size\": 32000}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_true(sp_model_layer_is_windowed(m, 0) && sp_model_layer_is_windowed(m, 31));
  g_assert_cmpfloat(sp_model_attn_causal_fraction(m, 4096), ==, 1.0);
  g_assert_cmpfloat(sp_model_attn_causal_fraction(m, 8192), <, 1.0);
  sp_model_free(m);
  /* Gemma 2 9B (google/gemma-2-9b config.json, 2024: no layer_types): GeGLU, a gated MLP
   * whatever its GeLU says (GemmaMLP: gate, up, down), heads of 256, windows on the even
   * layers. Per layer 3584 x (4096 + 2 x 2048) + 4096 x 3584 = 44,040,192 attention and
   * 3 x 3584 x 14336 = 154,140,672 MLP weights and two norms: 198,188,032; 42 layers, the
   * tied 256,000 x 3584 table and the final norm: 9,241,404,928 (card: 9.24 B; its two
   * extra norms a layer are not counted). A plain two-matrix MLP would give 7.08 B. */
  m = sp_model_parse("{\"model_type\": \"gemma2\", \"hidden_size\": 3584, \"intermediate_size\": 14336,"
                     " \"num_hidden_layers\": 42, \"num_attention_heads\": 16, \"num_key_value_heads\": 8,"
                     " \"head_dim\": 256, \"hidden_act\": \"gelu_pytorch_tanh\", \"hidden_activation\": \"gelu_pytorch_tanh\","
                     " \"sliding_window\": 4096, \"vocab_size\": 256000, \"tie_word_embeddings\": true}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->mlp, ==, SP_MLP_SWIGLU);
  g_assert_cmpfloat(sp_model_params(m), ==, 9241404928.0);
  g_assert_true(sp_model_layer_is_windowed(m, 0) && !sp_model_layer_is_windowed(m, 1) && sp_model_layer_is_windowed(m, 40));
  sp_model_free(m);
  /* Gemma 3 without layer_types: every 6th layer global */
  m = sp_model_parse("{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                     " \"num_hidden_layers\": 12, \"num_attention_heads\": 4, \"head_dim\": 32, \"sliding_window\": 512,"
                     " \"sliding_window_pattern\": 6, \"hidden_activation\": \"gelu_pytorch_tanh\", \"vocab_size\": 10}",
                     -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_true(sp_model_layer_is_windowed(m, 4) && !sp_model_layer_is_windowed(m, 5) && !sp_model_layer_is_windowed(m, 11));
  sp_model_free(m);
  /* StarCoder2's GeLU MLP is plain (Starcoder2MLP: c_fc, c_proj); an unknown family with a
   * GeLU is not guessed */
  m = sp_model_parse("{\"model_type\": \"starcoder2\", \"hidden_size\": 64, \"intermediate_size\": 256,"
                     " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"hidden_act\": \"gelu_pytorch_tanh\","
                     " \"vocab_size\": 10}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->mlp, ==, SP_MLP_GELU);
  sp_model_free(m);
  expect_parse_error("{\"model_type\": \"newfamily\", \"hidden_size\": 64, \"intermediate_size\": 256,"
                     " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"hidden_act\": \"gelu\", \"vocab_size\": 10}",
                     "cannot tell a gated MLP");
  /* a model file says the same with head_dim, sliding_window and window_layers */
  m = sp_model_parse("{\"layers\": 4, \"hidden\": 2880, \"heads\": 64, \"kv_heads\": 8, \"head_dim\": 64,"
                     " \"ffn\": 2880, \"vocab\": 1000, \"sliding_window\": 128, \"window_layers\": [0, 2]}", -1, "m.json", &err);
  g_assert_no_error(err);
  g_assert_cmpfloat(sp_model_attn_matmul_params(m), ==, 2880.0 * (4096 + 1024) + 4096.0 * 2880);
  g_assert_true(sp_model_layer_is_windowed(m, 2) && !sp_model_layer_is_windowed(m, 3));
  sp_model_free(m);
  /* group-limited routing: DeepSeek-V3's n_group 8 and topk_group 4, and the file keys */
  m = sp_model_parse("{\"hidden_size\": 64, \"intermediate_size\": 256, \"moe_intermediate_size\": 32,"
                     " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"n_routed_experts\": 16,"
                     " \"num_experts_per_tok\": 4, \"n_group\": 8, \"topk_group\": 4}", -1, "config.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->expert_groups, ==, 8);
  g_assert_cmpint(m->groups_per_token, ==, 4);
  sp_model_free(m);
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"experts\": 16, \"experts_per_token\": 4, \"expert_groups\": 8, \"groups_per_token\": 1}",
                     "hold at least experts_per_token = 4");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"experts\": 16, \"experts_per_token\": 4, \"expert_groups\": 8}", "group-limited routing");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"window_layers\": [0]}", "window_layers needs sliding_window");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"sliding_window\": 8, \"window_layers\": [2]}", "window_layers[0] = 2 is out of range");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"head_dim\": 0}", "'head_dim' must be >= 1");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"head_dim\": 4611686018427387904}", "head_dim 4611686018427387904 is out of range");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10,"
                     " \"head_dim\": 16, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 8,"
                     " \"v_head_dim\": 8}", "drop head_dim");
  expect_parse_error("{\"hidden_size\": 64, \"intermediate_size\": 256, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                     " \"vocab_size\": 10, \"sliding_window\": 8, \"layer_types\": [\"full_attention\"]}",
                     "one type per layer (2)");
}

static void test_bad_files(void)
{
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256}", "vocab");
  expect_parse_error("{\"layers\": -2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10}", "positive");
  expect_parse_error("{\"layers\": 2, \"hidden\": 65, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10}", "multiple of heads");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 3, \"ffn\": 256, \"vocab\": 10}", "kv_heads");
  expect_parse_error("{\"layers\": \"two\", \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10}", "integer");
  expect_parse_error("[1, 2]", "object");
  expect_parse_error("{", "JSON");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10, "
                     "\"elementwise\": \"compiled\"}", "elementwise must be");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10, "
                     "\"loss\": \"liger\"}", "loss must be");
  expect_parse_error("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 4, \"ffn\": 256, \"vocab\": 10, "
                     "\"mlp\": \"gelu\", \"elementwise\": \"eager\"}", "needs mlp");
  GError *err = NULL;
  sp_model *m = sp_model_parse("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 10, \"mlp\": \"gelu\"}", -1, "ok.json", &err);
  g_assert_no_error(err);
  g_assert_cmpstr(m->name, ==, "ok.json");
  /* 64 x (64 + 2 x 32) + 64^2 + 2 x 64 x 256 */
  g_assert_cmpfloat(sp_model_layer_matmul_params(m), ==, 64.0 * 128 + 4096 + 32768);
  g_assert_cmpint(m->elementwise, ==, SP_ELEM_FUSED);
  g_assert_cmpint(m->loss, ==, SP_LOSS_UNFUSED);
  sp_model_free(m);
  m = sp_model_parse("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 10, "
                     "\"loss\": \"fused\"}", -1, "fused.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->loss, ==, SP_LOSS_FUSED);
  sp_model_free(m);
  m = sp_model_parse("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 10, "
                     "\"elementwise\": \"eager\"}", -1, "eager.json", &err);
  g_assert_no_error(err);
  g_assert_cmpint(m->elementwise, ==, SP_ELEM_EAGER);
  sp_model_free(m);
}

/* Keys spsim does not price are refused by name (strict) or listed (lenient). */
static void test_unknown_keys(void)
{
  const char *json = "{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, "
                     "\"vocab\": 10, \"num_experts\": 8, \"top_k\": 2}";
  GError *err = NULL;
  g_assert_null(sp_model_parse(json, -1, "moe.json", &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "moe.json: unknown key 'num_experts'"));
  g_assert_nonnull(strstr(err->message, "layers, hidden, heads, kv_heads, ffn, vocab"));
  g_clear_error(&err);
  sp_model *m = sp_model_parse_flags(json, -1, "moe.json", SP_MODEL_LENIENT, &err);
  g_assert_no_error(err);
  g_assert_cmpstr(m->ignored, ==, "num_experts, top_k");
  g_assert_cmpint(m->layers, ==, 2);
  sp_model_free(m);
  m = sp_model_parse_flags("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 10}",
                           -1, "dense.json", SP_MODEL_LENIENT, &err);
  g_assert_no_error(err);
  g_assert_null(m->ignored);
  sp_model_free(m);
}

static void test_unknown_name(void)
{
  g_autofree char *dir = models_dir();
  const char *dirs[] = { dir, NULL };
  GError *err = NULL;
  g_assert_null(sp_model_find("llama9-1t", dirs, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "llama3-405b"));
  g_assert_nonnull(strstr(err->message, "gpt3-175b"));
  g_error_free(err);
  g_auto(GStrv) names = sp_model_list(dirs);
  g_assert_cmpuint(g_strv_length(names), >=, 6);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/model/llama2-7b-params", test_llama2_7b_params);
  g_test_add_func("/model/llama3-70b-gqa", test_llama3_70b_gqa);
  g_test_add_func("/model/gpt3-flops", test_gpt3_flops);
  g_test_add_func("/model/bad-files", test_bad_files);
  g_test_add_func("/model/unknown-name", test_unknown_name);
  g_test_add_func("/model/unknown-keys", test_unknown_keys);
  g_test_add_func("/model/moe-params", test_moe_params);
  g_test_add_func("/model/deepseek-v3-params", test_deepseek_v3_params);
  g_test_add_func("/model/moe-layers", test_moe_layers);
  g_test_add_func("/model/moe-bad", test_moe_bad);
  g_test_add_func("/model/hf-config", test_hf_config);
  g_test_add_func("/model/hf-head-dim-window", test_hf_head_dim_window);
  return g_test_run();
}
