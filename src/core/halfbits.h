/* Bit-level conversions between f32 and the half types (f16, bf16), shared by the
 * host kernels (src/core/base/dtype.c, C11) and the CUDA kernels (src/nccl/kernels.cu,
 * nvcc) so both round identically: one source, bitwise-equal results on CPU and GPU.
 * Integer arithmetic only (no floating-point operation), so compiler flags cannot
 * change a bit. Round to nearest even; NaNs are made quiet with their top payload
 * bits kept; overflow goes to infinity. Internal header, not installed. */
#ifndef SPSIM_HALFBITS_H
#define SPSIM_HALFBITS_H

#include <stdint.h>

#ifdef __CUDACC__
#define SP_HB_FN __host__ __device__ __forceinline__
#else
#define SP_HB_FN static inline
#endif

/** f16 bits -> f32 bits (exact). */
SP_HB_FN uint32_t sp_hb_f16_to_f32(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) /* inf or NaN (NaN made quiet, payload kept) */
    return sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0);
  if (exp == 0) {
    if (mant == 0)
      return sign;
    /* subnormal: normalise; value = mant * 2^-24 */
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      e--;
    }
    return sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return sign | ((exp + 112) << 23) | (mant << 13);
}

/** f32 bits -> f16 bits, round to nearest even. */
SP_HB_FN uint16_t sp_hb_f32_to_f16(uint32_t x)
{
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) /* >= 65520 rounds (ties-to-even) to inf; also inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* below the smallest normal 2^-14 */
    if (a <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 is a tie to even 0) */
      return sign;
    uint32_t e = a >> 23;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* value / 2^-24 = mant * 2^(e - 126) */
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
      q++; /* may carry into the smallest normal 0x0400: correct encoding */
    return (uint16_t)(sign | q);
  }
  uint32_t h = (a >> 13) - (112u << 10);
  uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    h++; /* a carry into the exponent is the correct result */
  return (uint16_t)(sign | h);
}

/** bf16 bits -> f32 bits (exact; NaN made quiet). */
SP_HB_FN uint32_t sp_hb_bf16_to_f32(uint16_t h)
{
  uint32_t x = (uint32_t)h << 16;
  if ((x & 0x7fffffffu) > 0x7f800000u)
    x |= 0x00400000u;
  return x;
}

/** f32 bits -> bf16 bits, round to nearest even (overflow carries into inf). */
SP_HB_FN uint16_t sp_hb_f32_to_bf16(uint32_t x)
{
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x0040u);
  uint32_t bias = 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)((x + bias) >> 16);
}

#endif
