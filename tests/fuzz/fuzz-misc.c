/* Fuzz harness: the small parsers of option values. The first byte picks the
 * parser (modulo their count), the rest is the text: collectives, algorithms,
 * dtypes, reduction operators, checkpointing modes, gradient scaling, graph
 * verification operations (sp_ops_verify_lookup), GPU presets, fidelities, and
 * the bandwidths and durations of platform host properties (sp_plat_parse_unit).
 * A name that parses must print back to a name that parses to the same value; a
 * property value is a finite number >= 0. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "platform.h"
#include "platform_gen.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/layout.h"
#include "spsim/ops.h"

/* Parse @p s with @p parse; on success @p name of the value must parse back to it. */
#define ROUND_TRIP(type, parse, name, s)                                                   \
  do {                                                                                     \
    type v_, w_;                                                                           \
    GError *e_ = NULL;                                                                     \
    if (parse(s, &v_, &e_)) {                                                              \
      const char *n_ = name(v_);                                                           \
      FUZZ_ASSERT(n_ != NULL && parse(n_, &w_, NULL) && w_ == v_, "%s: '%s' -> '%s'", #parse, \
                  s, n_ ? n_ : "(null)");                                                  \
    } else {                                                                               \
      FUZZ_EXPECT_ERROR(e_);                                                               \
      g_error_free(e_);                                                                    \
    }                                                                                      \
  } while (0)

static const char *gpu_key(sp_gpu_kind k)
{
  const sp_gpu_spec *spec = sp_gpu_spec_get(k);
  return spec ? spec->key : NULL;
}

static const char *grad_scale_name(sp_grad_scale g)
{
  static const char *const names[] = { "none", "up", "down" };
  return (unsigned)g < G_N_ELEMENTS(names) ? names[g] : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size < 1 || size > 1024)
    return 0;
  char *s = g_strndup((const char *)data + 1, size - 1);
  switch (data[0] % 11) {
  case 0: ROUND_TRIP(sp_coll, sp_coll_parse, sp_coll_name, s); break;
  case 1: ROUND_TRIP(sp_algo, sp_algo_parse, sp_algo_name, s); break;
  case 2: ROUND_TRIP(sp_dtype, sp_dtype_parse, sp_dtype_name, s); break;
  case 3: ROUND_TRIP(sp_redop, sp_redop_parse, sp_redop_name, s); break;
  case 4: ROUND_TRIP(sp_ckpt, sp_ckpt_parse, sp_ckpt_name, s); break;
  case 5: ROUND_TRIP(sp_grad_scale, sp_grad_scale_parse, grad_scale_name, s); break;
  case 6: ROUND_TRIP(sp_gpu_kind, sp_gpu_parse, gpu_key, s); break;
  case 7: ROUND_TRIP(sp_fidelity, sp_fidelity_parse, sp_fidelity_name, s); break;
  case 9:
  case 10: {
    double v = sp_plat_parse_unit(s, data[0] % 11 == 10);
    FUZZ_ASSERT(isfinite(v) && v >= 0, "sp_plat_parse_unit('%s', %d) = %g", s, data[0] % 11 == 10, v);
    break;
  }
  default: {
    const sp_op_verify_entry *e = sp_ops_verify_lookup(s);
    if (e != NULL)
      FUZZ_ASSERT(e->name != NULL && sp_ops_verify_lookup(e->name) == e, "verify op '%s'", s);
    break;
  }
  }
  g_free(s);
  return 0;
}
