/**
 * @file dtype.h
 * @brief Element types and the deterministic scalar arithmetic every engine
 *        shares: half types (f16, bf16) are widened to f32, combined in f32 and
 *        rounded back to nearest-even, with no FMA contraction.
 */
#ifndef SPSIM_DTYPE_H
#define SPSIM_DTYPE_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/** Element types of tensors. */
typedef enum {
  SP_F32 = 0,
  SP_F16,
  SP_BF16,
  SP_I32,
  SP_I64,
  SP_U8,
  SP_DTYPE_COUNT
} sp_dtype;

/** Reduction operators. AVG is SUM followed by a division by the group size. */
typedef enum {
  SP_RED_SUM = 0,
  SP_RED_AVG,
  SP_RED_MAX,
  SP_RED_MIN,
  SP_REDOP_COUNT
} sp_redop;

/** @return the size in bytes of one element of @p t. */
size_t sp_dtype_size(sp_dtype t);
/** @return the canonical lower-case name ("f32", "bf16", ...). */
const char *sp_dtype_name(sp_dtype t);
/** Parse a dtype name (also accepts "float32", "float16", "bfloat16", "int32", "int64", "uint8"). */
gboolean sp_dtype_parse(const char *s, sp_dtype *out, GError **err);
/** @return the name of a reduction operator ("sum", "avg", "max", "min"). */
const char *sp_redop_name(sp_redop op);
/** Parse a reduction operator name. */
gboolean sp_redop_parse(const char *s, sp_redop *out, GError **err);

/** IEEE binary16 bits -> f32 (exact). */
float sp_f16_to_f32(uint16_t h);
/** f32 -> IEEE binary16 bits, round to nearest-even, overflow to inf, NaN kept quiet. */
uint16_t sp_f32_to_f16(float f);
/** bfloat16 bits -> f32 (exact). */
float sp_bf16_to_f32(uint16_t h);
/** f32 -> bfloat16 bits, round to nearest-even, NaN kept quiet. */
uint16_t sp_f32_to_bf16(float f);

/**
 * dst[i] = dst[i] op src[i] for @p count elements of @p t, in index order.
 * AVG reduces as SUM here (the division is a separate scale step).
 */
void sp_reduce_host(void *dst, const void *src, size_t count, sp_dtype t, sp_redop op);

/**
 * x[i] = x[i] / divisor when @p divide, else x[i] = x[i] * factor, for @p count
 * elements (integers: truncating division / exact multiply by the integer factor).
 */
void sp_scale_host(void *x, size_t count, sp_dtype t, double factor, gboolean divide);

/**
 * Fill @p count elements with a deterministic pseudo-random pattern that depends
 * only on (seed, element index), finite and exactly representable in @p t.
 */
void sp_fill_pattern(void *x, size_t count, sp_dtype t, uint64_t seed, uint64_t first_index);

/** FNV-1a 64-bit checksum of a byte range, chained from @p h (start with 0). */
uint64_t sp_checksum(uint64_t h, const void *data, size_t bytes);

G_END_DECLS

#endif
