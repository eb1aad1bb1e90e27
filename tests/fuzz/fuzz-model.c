/* Fuzz harness: model configurations (sp_model_parse on arbitrary JSON text), then
 * sp_model_validate and the derived numbers, which must be finite and positive. */
#include "config.h"

#include <math.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size > (1u << 20))
    return 0;
  GError *err = NULL;
  sp_model *m = sp_model_parse((const char *)data, (gssize)size, "fuzz", &err);
  if (m == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  FUZZ_ASSERT(err == NULL, "error set on success");
  FUZZ_ASSERT(m->name != NULL && m->sources != NULL, "name or sources missing");
  FUZZ_ASSERT(sp_model_validate(m, &err), "a parsed model fails validation: %s", err->message);
  FUZZ_ASSERT(sp_model_head_dim(m) >= 1, "head dim %" G_GINT64_FORMAT, sp_model_head_dim(m));
  const double v[] = {
    sp_model_params(m),
    sp_model_layer_params(m),
    sp_model_layer_matmul_params(m),
    sp_model_embedding_params(m),
    sp_model_train_flops_per_token(m, 4096),
    sp_model_layer_fwd_matmul_flops(m, 4096),
    sp_model_layer_fwd_attn_flops(m, 4096, 4096, TRUE),
    sp_model_head_fwd_flops(m, 4096),
    sp_model_dtype_bytes(m),
  };
  for (size_t i = 0; i < G_N_ELEMENTS(v); i++)
    FUZZ_ASSERT(isfinite(v[i]) && v[i] > 0, "derived number %zu is %g", i, v[i]);
  FUZZ_ASSERT(v[0] >= v[3], "params %g below embedding params %g", v[0], v[3]);
  sp_model_free(m);
  return 0;
}
