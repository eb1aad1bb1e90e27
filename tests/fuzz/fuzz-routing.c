/* Fuzz harness: MoE routing files (sp_moe_routing_shares_parse on arbitrary JSON text,
 * as --routing FILE reads them, for 1 to 256 experts picked by the first byte): the
 * shares are finite, not negative, and sum to 1. */
#include "config.h"

#include <math.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/step.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size < 1 || size > (1u << 20))
    return 0;
  int64_t experts = (int64_t)data[0] + 1;
  GError *err = NULL;
  double *sh = NULL;
  if (!sp_moe_routing_shares_parse((const char *)data + 1, (gssize)(size - 1), "fuzz", experts, &sh, &err)) {
    FUZZ_EXPECT_ERROR(err);
    FUZZ_ASSERT(sh == NULL, "shares set on failure");
    g_error_free(err);
    return 0;
  }
  FUZZ_ASSERT(err == NULL && sh != NULL, "no shares on success");
  double sum = 0;
  for (int64_t i = 0; i < experts; i++) {
    FUZZ_ASSERT(isfinite(sh[i]) && sh[i] >= 0, "share %" G_GINT64_FORMAT " is %g", i, sh[i]);
    sum += sh[i];
  }
  FUZZ_ASSERT(fabs(sum - 1) < 1e-9, "shares sum to %.17g", sum);
  g_free(sh);
  return 0;
}
