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
                     "\"mlp\": \"gelu\", \"elementwise\": \"eager\"}", "needs mlp");
  GError *err = NULL;
  sp_model *m = sp_model_parse("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 10, \"mlp\": \"gelu\"}", -1, "ok.json", &err);
  g_assert_no_error(err);
  g_assert_cmpstr(m->name, ==, "ok.json");
  /* 64 x (64 + 2 x 32) + 64^2 + 2 x 64 x 256 */
  g_assert_cmpfloat(sp_model_layer_matmul_params(m), ==, 64.0 * 128 + 4096 + 32768);
  g_assert_cmpint(m->elementwise, ==, SP_ELEM_FUSED);
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
  return g_test_run();
}
