/* Fuzz harness: measured GEMM tables (sp_gemm_table_parse on arbitrary text, JSON or
 * CSV, as --gemm-table reads them), then lookups: a row's own shape gives a positive,
 * finite rate, and any shape either gives one or a set error. */
#include "config.h"

#include <math.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/kernel_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size > (1u << 20))
    return 0;
  GError *err = NULL;
  sp_gemm_table *t = sp_gemm_table_parse((const char *)data, (gssize)size, "fuzz", &err);
  if (t == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  FUZZ_ASSERT(err == NULL, "error set on success");
  FUZZ_ASSERT(sp_gemm_table_len(t) > 0, "a table without rows");
  FUZZ_ASSERT(sp_gemm_table_has(t, TRUE) || sp_gemm_table_has(t, FALSE), "rows of neither precision");
  static const int64_t shapes[][3] = { { 1, 1, 1 }, { 4096, 4096, 4096 }, { 8192, 28672, 8192 }, { 999999999, 1, 999999999 } };
  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++)
    for (int fp8 = 0; fp8 < 2; fp8++) {
      double f = 0;
      if (sp_gemm_table_lookup(t, fp8, shapes[i][0], shapes[i][1], shapes[i][2], &f, &err)) {
        FUZZ_ASSERT(isfinite(f) && f > 0, "shape %zu: %g FLOP/s", i, f);
      } else {
        FUZZ_EXPECT_ERROR(err);
        g_clear_error(&err);
      }
    }
  sp_gemm_table_free(t);
  return 0;
}
