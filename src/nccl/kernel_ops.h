/* Element code of the CUDA kernels (kernels.cu), written once for device and
 * host: nvcc compiles it into the kernels, and the fake device of
 * tests/fakegpu compiles it as C, so CPU-only machines run the very element
 * code the GPU runs and compare it bitwise with the host kernels of src/core.
 * Float operations are IEEE binary32 with round-to-nearest-even: the _rn
 * intrinsics on the device, plain operators on the host (built with
 * -ffp-contract=off, SSE arithmetic), so neither side can contract or
 * reassociate. Values of dtype and op are those of sp_dtype and sp_redop. */
#ifndef SPSIM_NCCL_KERNEL_OPS_H
#define SPSIM_NCCL_KERNEL_OPS_H

#include <stdint.h>
#ifndef __CUDA_ARCH__
#include <string.h>
#endif

#include "halfbits.h"

#ifdef __CUDACC__
#define SPK_FN static __host__ __device__ __forceinline__
#else
#define SPK_FN static inline
#endif

enum { SPK_F32 = 0, SPK_F16, SPK_BF16, SPK_I32, SPK_I64, SPK_U8 };
enum { SPK_SUM = 0, SPK_AVG, SPK_MAX, SPK_MIN };

#define SPK_F32_QNAN 0x7fc00000u
#define SPK_F16_QNAN ((uint16_t)0x7e00u)
#define SPK_BF16_QNAN ((uint16_t)0x7fc0u)

SPK_FN uint32_t spk_bits(float f)
{
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SPK_FN float spk_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

SPK_FN float spk_add(float a, float b)
{
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

SPK_FN float spk_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

SPK_FN float spk_div(float a, float b)
{
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

SPK_FN int spk_is_nan(float f) { return (spk_bits(f) & 0x7fffffffu) > 0x7f800000u; }
SPK_FN int spk_sign(float f) { return (spk_bits(f) >> 31) != 0; }

SPK_FN float spk_half_to_f32(uint16_t h, int bf)
{
  return spk_float(bf ? sp_hb_bf16_to_f32(h) : sp_hb_f16_to_f32(h));
}

SPK_FN uint16_t spk_f32_to_half(float f, int bf)
{
  if (spk_is_nan(f))
    return bf ? SPK_BF16_QNAN : SPK_F16_QNAN;
  return bf ? sp_hb_f32_to_bf16(spk_bits(f)) : sp_hb_f32_to_f16(spk_bits(f));
}

/** a op b in f32: canonical NaN, -0 < +0 for MAX/MIN, AVG sums. */
SPK_FN float spk_f32_op(float a, float b, int op)
{
  float r;
  if (spk_is_nan(a) || spk_is_nan(b))
    return spk_float(SPK_F32_QNAN);
  switch (op) {
  case SPK_MAX: r = a == b ? (spk_sign(a) ? b : a) : (a > b ? a : b); break;
  case SPK_MIN: r = a == b ? (spk_sign(a) ? a : b) : (a < b ? a : b); break;
  default: r = spk_add(a, b); break;
  }
  return spk_is_nan(r) ? spk_float(SPK_F32_QNAN) : r;
}

/** d[i] = d[i] op s[i] for f32. */
SPK_FN void spk_reduce_f32(float *d, const float *s, uint64_t i, int op)
{
  d[i] = spk_f32_op(d[i], s[i], op);
}

/** d[i] = d[i] op s[i] for f16 (bf 0) or bf16 (bf 1): widened, combined in f32, rounded back. */
SPK_FN void spk_reduce_half(uint16_t *d, const uint16_t *s, uint64_t i, int op, int bf)
{
  d[i] = spk_f32_to_half(spk_f32_op(spk_half_to_f32(d[i], bf), spk_half_to_f32(s[i], bf), op), bf);
}

/* Integers: MAX/MIN as is, SUM and AVG wrap (the sum runs in the unsigned type). */
#define SPK_REDUCE_INT(name, T, UT)                                           \
  SPK_FN void name(T *d, const T *s, uint64_t i, int op)                      \
  {                                                                           \
    T a = d[i], b = s[i];                                                     \
    d[i] = op == SPK_MAX ? (a > b ? a : b)                                    \
         : op == SPK_MIN ? (a < b ? a : b)                                    \
                         : (T)(UT)((UT)a + (UT)b);                            \
  }
SPK_REDUCE_INT(spk_reduce_i32, int32_t, uint32_t)
SPK_REDUCE_INT(spk_reduce_i64, int64_t, uint64_t)
SPK_REDUCE_INT(spk_reduce_u8, uint8_t, uint8_t)
#undef SPK_REDUCE_INT

/** x[i] = x[i] / k (divide) or x[i] * k for f32, f16 and bf16. */
SPK_FN void spk_scale_float(void *x, uint64_t i, int dtype, float k, int divide)
{
  uint16_t *h = (uint16_t *)x;
  float *f = (float *)x;
  float a = dtype == SPK_F32 ? f[i] : spk_half_to_f32(h[i], dtype == SPK_BF16);
  float r = divide ? spk_div(a, k) : spk_mul(a, k);
  if (dtype == SPK_F32)
    f[i] = spk_is_nan(r) ? spk_float(SPK_F32_QNAN) : r;
  else
    h[i] = spk_f32_to_half(r, dtype == SPK_BF16);
}

/** a / k or a * k as the host: wrapping, division by 0 leaves a, by -1 negates. */
SPK_FN int64_t spk_int_scale_one(int64_t a, int64_t k, int divide)
{
  if (divide) {
    if (k == 0)
      return a;
    if (k == -1)
      return (int64_t)(0ull - (uint64_t)a);
    return a / k;
  }
  return (int64_t)((uint64_t)a * (uint64_t)k);
}

/** x[i] = x[i] / k or x[i] * k for i32, i64 and u8 (results wrap to the type). */
SPK_FN void spk_scale_int(void *x, uint64_t i, int dtype, int64_t k, int divide)
{
  if (dtype == SPK_I32) {
    int32_t *p = (int32_t *)x;
    p[i] = (int32_t)(uint32_t)(uint64_t)spk_int_scale_one(p[i], k, divide);
  } else if (dtype == SPK_I64) {
    int64_t *p = (int64_t *)x;
    p[i] = spk_int_scale_one(p[i], k, divide);
  } else {
    uint8_t *p = (uint8_t *)x;
    p[i] = (uint8_t)(uint64_t)spk_int_scale_one(p[i], k, divide);
  }
}

/**
 * The unit (16, 4 or 1 bytes) a strided copy moves per thread: the largest
 * that divides both bases, the row size and (with several rows) both strides.
 */
SPK_FN unsigned spk_copy_unit(uint64_t dst, uint64_t src, uint64_t rows, uint64_t row_bytes,
                              uint64_t dst_stride, uint64_t src_stride)
{
  uint64_t all = dst | src | row_bytes | (rows > 1 ? dst_stride | src_stride : 0);
  return all % 16 == 0 ? 16u : all % 4 == 0 ? 4u : 1u;
}

#endif
