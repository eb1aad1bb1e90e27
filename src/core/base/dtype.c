/* Element types and the deterministic host arithmetic every engine must match.
 *
 * Semantics (the contract other engines reproduce bitwise):
 *  - f16/bf16 are widened to f32 exactly, combined in f32, rounded back to
 *    nearest-even. Built with -ffp-contract=off (src/core/local.mk) and the
 *    pragma below (clang), so no FMA contraction happens.
 *  - Any float result that is NaN is stored as the canonical quiet NaN
 *    (f32 0x7fc00000, f16 0x7e00, bf16 0x7fc0), so NaN bits do not depend on
 *    operand order or on the hardware's payload propagation rules.
 *  - MAX/MIN: NaN propagates (either operand NaN -> NaN); -0 < +0, so the
 *    result does not depend on which operand is dst.
 *  - Integers wrap around modulo 2^bits (two's complement) on SUM and on SCALE
 *    multiply; computed in unsigned arithmetic, never UB.
 *  - Integer SCALE: factor truncated toward zero to an integer (clamped to the
 *    int64 range, NaN -> 0); divide truncates toward zero, divide by 0 leaves x
 *    unchanged, INT_MIN / -1 wraps to INT_MIN.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/dtype.h"
#include "spsim/error.h"
#include "halfbits.h"

/* GCC ignores the standard pragma; -ffp-contract=off (local.mk) covers it there. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static const struct {
  const char *name;
  size_t size;
} dtype_info[SP_DTYPE_COUNT] = {
  [SP_F32] = { "f32", 4 },  [SP_F16] = { "f16", 2 }, [SP_BF16] = { "bf16", 2 },
  [SP_I32] = { "i32", 4 },  [SP_I64] = { "i64", 8 }, [SP_U8] = { "u8", 1 },
};

static const struct {
  const char *alias;
  sp_dtype t;
} dtype_aliases[] = {
  { "float32", SP_F32 }, { "float", SP_F32 },   { "float16", SP_F16 }, { "half", SP_F16 },
  { "bfloat16", SP_BF16 }, { "int32", SP_I32 }, { "int64", SP_I64 },   { "uint8", SP_U8 },
};

static const char *const redop_names[SP_REDOP_COUNT] = {
  [SP_RED_SUM] = "sum", [SP_RED_AVG] = "avg", [SP_RED_MAX] = "max", [SP_RED_MIN] = "min",
};

size_t sp_dtype_size(sp_dtype t)
{
  return (unsigned)t < SP_DTYPE_COUNT ? dtype_info[t].size : 0;
}

const char *sp_dtype_name(sp_dtype t)
{
  return (unsigned)t < SP_DTYPE_COUNT ? dtype_info[t].name : "invalid";
}

gboolean sp_dtype_parse(const char *s, sp_dtype *out, GError **err)
{
  if (s != NULL) {
    for (int i = 0; i < SP_DTYPE_COUNT; i++)
      if (g_ascii_strcasecmp(s, dtype_info[i].name) == 0) {
        *out = (sp_dtype)i;
        return TRUE;
      }
    for (size_t i = 0; i < G_N_ELEMENTS(dtype_aliases); i++)
      if (g_ascii_strcasecmp(s, dtype_aliases[i].alias) == 0) {
        *out = dtype_aliases[i].t;
        return TRUE;
      }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "unknown dtype '%s': use one of f32, f16, bf16, i32, i64, u8 "
              "(or float32, float16, bfloat16, int32, int64, uint8)",
              s ? s : "(null)");
  return FALSE;
}

const char *sp_redop_name(sp_redop op)
{
  return (unsigned)op < SP_REDOP_COUNT ? redop_names[op] : "invalid";
}

gboolean sp_redop_parse(const char *s, sp_redop *out, GError **err)
{
  if (s != NULL) {
    for (int i = 0; i < SP_REDOP_COUNT; i++)
      if (g_ascii_strcasecmp(s, redop_names[i]) == 0) {
        *out = (sp_redop)i;
        return TRUE;
      }
    if (g_ascii_strcasecmp(s, "mean") == 0) {
      *out = SP_RED_AVG;
      return TRUE;
    }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "unknown reduction operator '%s': use one of sum, avg, max, min", s ? s : "(null)");
  return FALSE;
}

/* ------------------------------------------------------------ bit casts */

static inline uint32_t f32_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float bits_f32(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#define F32_QNAN 0x7fc00000u
#define F16_QNAN 0x7e00u
#define BF16_QNAN 0x7fc0u

/* ------------------------------------------------------------ f16, bf16 */
/* The bit code lives in halfbits.h, shared with the CUDA kernels. */

float sp_f16_to_f32(uint16_t h) { return bits_f32(sp_hb_f16_to_f32(h)); }
uint16_t sp_f32_to_f16(float f) { return sp_hb_f32_to_f16(f32_bits(f)); }
float sp_bf16_to_f32(uint16_t h) { return bits_f32(sp_hb_bf16_to_f32(h)); }
uint16_t sp_f32_to_bf16(float f) { return sp_hb_f32_to_bf16(f32_bits(f)); }

/* ------------------------------------------------------------ reductions */

/* Binary operator on f32 with the shared semantics (canonical NaN, -0 < +0). */
static inline float f32_op(float a, float b, sp_redop op)
{
  float r;
  if (isnan(a) || isnan(b))
    return bits_f32(F32_QNAN);
  switch (op) {
  case SP_RED_MAX:
    if (a == b) /* equal incl. +0/-0: +0 wins */
      r = signbit(a) ? b : a;
    else
      r = a > b ? a : b;
    break;
  case SP_RED_MIN:
    if (a == b) /* -0 wins */
      r = signbit(a) ? a : b;
    else
      r = a < b ? a : b;
    break;
  case SP_RED_SUM:
  case SP_RED_AVG:
  default:
    r = a + b;
    break;
  }
  if (isnan(r)) /* inf + -inf */
    return bits_f32(F32_QNAN);
  return r;
}

static inline uint16_t f16_canon(float r)
{
  return isnan(r) ? (uint16_t)F16_QNAN : sp_f32_to_f16(r);
}

static inline uint16_t bf16_canon(float r)
{
  return isnan(r) ? (uint16_t)BF16_QNAN : sp_f32_to_bf16(r);
}

#define INT_REDUCE(T, UT)                                                                    \
  do {                                                                                       \
    T *d = dst;                                                                              \
    const T *s = src;                                                                        \
    for (size_t i = 0; i < count; i++) {                                                     \
      T a, b;                                                                                \
      memcpy(&a, d + i, sizeof a);                                                           \
      memcpy(&b, s + i, sizeof b);                                                           \
      T r;                                                                                   \
      switch (op) {                                                                          \
      case SP_RED_MAX: r = a > b ? a : b; break;                                             \
      case SP_RED_MIN: r = a < b ? a : b; break;                                             \
      default: {                                                                             \
        UT u = (UT)((UT)a + (UT)b);                                                          \
        memcpy(&r, &u, sizeof r);                                                            \
      } break;                                                                               \
      }                                                                                      \
      memcpy(d + i, &r, sizeof r);                                                           \
    }                                                                                        \
  } while (0)

/* f32 sum of two disjoint regions, the bits of the loop in sp_reduce_host. That
 * loop stays scalar at -O2 (its regions may overlap); restrict and fixed-length
 * blocks let -O2 vectorise this one, about 4x faster (the reductions were a third
 * of a 1 MiB ring all-reduce on the MPI host transport). */
#define SUM_BLOCK 16
static inline void sum_f32_at(unsigned char *d, const unsigned char *s, size_t i, float qnan)
{
  float a, b;
  memcpy(&a, d + 4 * i, 4);
  memcpy(&b, s + 4 * i, 4);
  float r = a + b;
  r = r != r ? qnan : r;
  memcpy(d + 4 * i, &r, 4);
}

static void sum_f32_disjoint(unsigned char *restrict d, const unsigned char *restrict s, size_t count)
{
  const float qnan = bits_f32(F32_QNAN);
  size_t body = count - count % SUM_BLOCK;
  for (size_t i = 0; i < body; i += SUM_BLOCK)
    for (size_t j = 0; j < SUM_BLOCK; j++)
      sum_f32_at(d, s, i + j, qnan);
  for (size_t i = body; i < count; i++)
    sum_f32_at(d, s, i, qnan);
}

void sp_reduce_host(void *dst, const void *src, size_t count, sp_dtype t, sp_redop op)
{
  if (count == 0)
    return;
  switch (t) {
  case SP_F32: {
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (op == SP_RED_SUM || op == SP_RED_AVG) {
      /* Fast path, same bits as f32_op: a NaN input makes a + b NaN, and every NaN
       * result (including inf + -inf) becomes the canonical quiet NaN. */
      uintptr_t da = (uintptr_t)d, sa = (uintptr_t)s, nb = (uintptr_t)count * 4;
      if (count <= UINTPTR_MAX / 8 && (sa + nb <= da || da + nb <= sa)) {
        sum_f32_disjoint(d, s, count);
        break;
      }
      const float q = bits_f32(F32_QNAN);
      for (size_t i = 0; i < count; i++)
        sum_f32_at(d, s, i, q);
      break;
    }
    for (size_t i = 0; i < count; i++) {
      float a, b;
      memcpy(&a, d + 4 * i, 4);
      memcpy(&b, s + 4 * i, 4);
      float r = f32_op(a, b, op);
      memcpy(d + 4 * i, &r, 4);
    }
    break;
  }
  case SP_F16:
  case SP_BF16: {
    unsigned char *d = dst;
    const unsigned char *s = src;
    gboolean bf = t == SP_BF16;
    for (size_t i = 0; i < count; i++) {
      uint16_t ha, hb;
      memcpy(&ha, d + 2 * i, 2);
      memcpy(&hb, s + 2 * i, 2);
      float a = bf ? sp_bf16_to_f32(ha) : sp_f16_to_f32(ha);
      float b = bf ? sp_bf16_to_f32(hb) : sp_f16_to_f32(hb);
      float r = f32_op(a, b, op);
      uint16_t hr = bf ? bf16_canon(r) : f16_canon(r);
      memcpy(d + 2 * i, &hr, 2);
    }
    break;
  }
  case SP_I32: INT_REDUCE(int32_t, uint32_t); break;
  case SP_I64: INT_REDUCE(int64_t, uint64_t); break;
  case SP_U8: INT_REDUCE(uint8_t, uint8_t); break;
  default: break;
  }
}

/* ------------------------------------------------------------ scale */

/* The integer factor of an integer SCALE: truncated toward zero, clamped. */
static int64_t int_factor(double factor)
{
  if (isnan(factor))
    return 0;
  if (factor >= 9223372036854775807.0)
    return INT64_MAX;
  if (factor <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)factor;
}

/* a * b or a / b on int64 with wrap-around; the result is later truncated
 * to the element width (modulo 2^bits). */
static inline int64_t int_scale_one(int64_t a, int64_t k, gboolean divide)
{
  if (divide) {
    if (k == 0)
      return a;
    if (k == -1) /* avoids INT64_MIN / -1 */
      return (int64_t)(0u - (uint64_t)a);
    return a / k;
  }
  return (int64_t)((uint64_t)a * (uint64_t)k);
}

void sp_scale_host(void *x, size_t count, sp_dtype t, double factor, gboolean divide)
{
  unsigned char *p = x;
  switch (t) {
  case SP_F32:
  case SP_F16:
  case SP_BF16: {
    float k = (float)factor;
    size_t es = sp_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
      float a;
      uint16_t h = 0;
      if (t == SP_F32)
        memcpy(&a, p + es * i, 4);
      else {
        memcpy(&h, p + es * i, 2);
        a = t == SP_F16 ? sp_f16_to_f32(h) : sp_bf16_to_f32(h);
      }
      float r = divide ? a / k : a * k;
      if (t == SP_F32) {
        if (isnan(r))
          r = bits_f32(F32_QNAN);
        memcpy(p + es * i, &r, 4);
      } else {
        h = t == SP_F16 ? f16_canon(r) : bf16_canon(r);
        memcpy(p + es * i, &h, 2);
      }
    }
    break;
  }
  case SP_I32: {
    int64_t k = int_factor(factor);
    for (size_t i = 0; i < count; i++) {
      int32_t a;
      memcpy(&a, p + 4 * i, 4);
      uint32_t u = (uint32_t)(uint64_t)int_scale_one(a, k, divide);
      memcpy(p + 4 * i, &u, 4);
    }
    break;
  }
  case SP_I64: {
    int64_t k = int_factor(factor);
    for (size_t i = 0; i < count; i++) {
      int64_t a;
      memcpy(&a, p + 8 * i, 8);
      int64_t r = int_scale_one(a, k, divide);
      memcpy(p + 8 * i, &r, 8);
    }
    break;
  }
  case SP_U8: {
    int64_t k = int_factor(factor);
    for (size_t i = 0; i < count; i++)
      p[i] = (uint8_t)(uint64_t)int_scale_one(p[i], k, divide);
    break;
  }
  default: break;
  }
}

/* ------------------------------------------------------------ patterns */

static inline uint64_t splitmix64(uint64_t z)
{
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Floats: k/8 with integer k in [-64, 64] (exact in f16, bf16, f32, and sums of
 * a few dozen of them stay exact). i32/i64: k in [-64, 64]. u8: [0, 63]. */
void sp_fill_pattern(void *x, size_t count, sp_dtype t, uint64_t seed, uint64_t first_index)
{
  unsigned char *p = x;
  uint64_t s = splitmix64(seed);
  size_t es = sp_dtype_size(t);
  for (size_t i = 0; i < count; i++) {
    uint64_t z = splitmix64(s ^ (first_index + i));
    int32_t k = (int32_t)(z % 129u) - 64;
    unsigned char *e = p + es * i;
    switch (t) {
    case SP_F32: {
      float f = (float)k / 8.0f;
      memcpy(e, &f, 4);
      break;
    }
    case SP_F16: {
      uint16_t h = sp_f32_to_f16((float)k / 8.0f);
      memcpy(e, &h, 2);
      break;
    }
    case SP_BF16: {
      uint16_t h = sp_f32_to_bf16((float)k / 8.0f);
      memcpy(e, &h, 2);
      break;
    }
    case SP_I32: memcpy(e, &k, 4); break;
    case SP_I64: {
      int64_t v = k;
      memcpy(e, &v, 8);
      break;
    }
    case SP_U8: *e = (uint8_t)(z & 63u); break;
    default: break;
    }
  }
}

/* ------------------------------------------------------------ checksum */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* h == 0 starts a new checksum from the FNV offset basis, so chaining
 * sp_checksum(sp_checksum(0, a), b) equals the checksum of a followed by b. */
uint64_t sp_checksum(uint64_t h, const void *data, size_t bytes)
{
  const unsigned char *p = data;
  if (h == 0)
    h = FNV_OFFSET;
  for (size_t i = 0; i < bytes; i++) {
    h ^= p[i];
    h *= FNV_PRIME;
  }
  return h;
}
