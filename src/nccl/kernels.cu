// CUDA kernels for the local steps of per-rank programs (copy, reduce, scale),
// bitwise equal to the host kernels of src/core/dtype.c and program.c. Built
// with -fmad=false; every float operation is an explicit round-to-nearest-even
// intrinsic, so no contraction or reassociation can change a bit.
#include "kernels.h"
#include "halfbits.h"

#include <stdint.h>

namespace {

// sp_dtype / sp_redop values (src/core/spsim/dtype.h)
enum { F32 = 0, F16, BF16, I32, I64, U8 };
enum { SUM = 0, AVG, MAX, MIN };

constexpr uint32_t F32_QNAN = 0x7fc00000u;
constexpr uint16_t F16_QNAN = 0x7e00u;
constexpr uint16_t BF16_QNAN = 0x7fc0u;

__device__ __forceinline__ uint32_t f32_bits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float bits_f32(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ bool is_nan(float f) { return (f32_bits(f) & 0x7fffffffu) > 0x7f800000u; }
__device__ __forceinline__ bool sign_bit(float f) { return (f32_bits(f) >> 31) != 0; }

// --- f16/bf16 <-> f32: the bit code of src/core/halfbits.h, shared with the host kernels
__device__ __forceinline__ float f16_to_f32(uint16_t h) { return bits_f32(sp_hb_f16_to_f32(h)); }
__device__ __forceinline__ uint16_t f32_to_f16(float f) { return sp_hb_f32_to_f16(f32_bits(f)); }
__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return bits_f32(sp_hb_bf16_to_f32(h)); }
__device__ __forceinline__ uint16_t f32_to_bf16(float f) { return sp_hb_f32_to_bf16(f32_bits(f)); }

// --- the shared f32 operator (canonical NaN, -0 < +0)
__device__ __forceinline__ float f32_op(float a, float b, int op)
{
  float r;
  if (is_nan(a) || is_nan(b))
    return bits_f32(F32_QNAN);
  switch (op) {
  case MAX:
    if (a == b)
      r = sign_bit(a) ? b : a;
    else
      r = a > b ? a : b;
    break;
  case MIN:
    if (a == b)
      r = sign_bit(a) ? a : b;
    else
      r = a < b ? a : b;
    break;
  default: r = __fadd_rn(a, b); break;
  }
  if (is_nan(r))
    return bits_f32(F32_QNAN);
  return r;
}

// grid-stride loop over 64-bit indices
#define FOR_EACH(i, n) \
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (uint64_t)gridDim.x * blockDim.x)

__global__ void reduce_f32(float *d, const float *s, uint64_t n, int op)
{
  FOR_EACH(i, n) d[i] = f32_op(d[i], s[i], op);
}

__global__ void reduce_half(uint16_t *d, const uint16_t *s, uint64_t n, int op, bool bf)
{
  FOR_EACH(i, n)
  {
    float a = bf ? bf16_to_f32(d[i]) : f16_to_f32(d[i]);
    float b = bf ? bf16_to_f32(s[i]) : f16_to_f32(s[i]);
    float r = f32_op(a, b, op);
    d[i] = is_nan(r) ? (bf ? BF16_QNAN : F16_QNAN) : (bf ? f32_to_bf16(r) : f32_to_f16(r));
  }
}

template <typename T, typename UT>
__global__ void reduce_int(T *d, const T *s, uint64_t n, int op)
{
  FOR_EACH(i, n)
  {
    T a = d[i], b = s[i], r;
    switch (op) {
    case MAX: r = a > b ? a : b; break;
    case MIN: r = a < b ? a : b; break;
    default: r = (T)(UT)((UT)a + (UT)b); break;
    }
    d[i] = r;
  }
}

__global__ void scale_float(void *x, uint64_t n, int dtype, float k, bool divide)
{
  FOR_EACH(i, n)
  {
    float a;
    uint16_t *h = (uint16_t *)x;
    float *f = (float *)x;
    if (dtype == F32)
      a = f[i];
    else
      a = dtype == F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
    float r = divide ? __fdiv_rn(a, k) : __fmul_rn(a, k);
    if (dtype == F32)
      f[i] = is_nan(r) ? bits_f32(F32_QNAN) : r;
    else if (dtype == F16)
      h[i] = is_nan(r) ? F16_QNAN : f32_to_f16(r);
    else
      h[i] = is_nan(r) ? BF16_QNAN : f32_to_bf16(r);
  }
}

__device__ __forceinline__ int64_t int_scale_one(int64_t a, int64_t k, bool divide)
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

__global__ void scale_int(void *x, uint64_t n, int dtype, int64_t k, bool divide)
{
  FOR_EACH(i, n)
  {
    if (dtype == I32) {
      int32_t *p = (int32_t *)x;
      p[i] = (int32_t)(uint32_t)(uint64_t)int_scale_one(p[i], k, divide);
    } else if (dtype == I64) {
      int64_t *p = (int64_t *)x;
      p[i] = int_scale_one(p[i], k, divide);
    } else {
      uint8_t *p = (uint8_t *)x;
      p[i] = (uint8_t)(uint64_t)int_scale_one(p[i], k, divide);
    }
  }
}

// 2D copy in units of U (1, 4 or 16 bytes): upr units per row
template <typename U>
__global__ void copy2d(char *dst, uint64_t dst_stride, const char *src, uint64_t src_stride,
                       uint64_t rows, uint64_t upr)
{
  FOR_EACH(i, rows * upr)
  {
    uint64_t r = i / upr, c = i - r * upr;
    ((U *)(dst + r * dst_stride))[c] = ((const U *)(src + r * src_stride))[c];
  }
}

unsigned blocks_for(uint64_t n)
{
  uint64_t b = (n + 255) / 256;
  if (b < 1)
    b = 1;
  return b > 65535u * 8u ? 65535u * 8u : (unsigned)b;
}

bool aligned(uint64_t v, uint64_t a) { return v % a == 0; }

} // namespace

extern "C" cudaError_t sp_cuda_copy2d(void *dst, uint64_t dst_stride, const void *src,
                                      uint64_t src_stride, uint64_t rows, uint64_t row_bytes,
                                      cudaStream_t stream)
{
  if (rows == 0 || row_bytes == 0)
    return cudaSuccess;
  uint64_t all = (uint64_t)(uintptr_t)dst | (uint64_t)(uintptr_t)src | row_bytes |
                 (rows > 1 ? dst_stride | src_stride : 0);
  char *d = (char *)dst;
  const char *s = (const char *)src;
  if (aligned(all, 16)) {
    uint64_t upr = row_bytes / 16;
    copy2d<uint4><<<blocks_for(rows * upr), 256, 0, stream>>>(d, dst_stride, s, src_stride, rows, upr);
  } else if (aligned(all, 4)) {
    uint64_t upr = row_bytes / 4;
    copy2d<uint32_t><<<blocks_for(rows * upr), 256, 0, stream>>>(d, dst_stride, s, src_stride, rows, upr);
  } else {
    copy2d<uint8_t><<<blocks_for(rows * row_bytes), 256, 0, stream>>>(d, dst_stride, s, src_stride,
                                                                      rows, row_bytes);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t sp_cuda_reduce(void *dst, const void *src, uint64_t count, int dtype, int op,
                                      cudaStream_t stream)
{
  if (count == 0)
    return cudaSuccess;
  unsigned b = blocks_for(count);
  switch (dtype) {
  case F32: reduce_f32<<<b, 256, 0, stream>>>((float *)dst, (const float *)src, count, op); break;
  case F16:
  case BF16:
    reduce_half<<<b, 256, 0, stream>>>((uint16_t *)dst, (const uint16_t *)src, count, op,
                                       dtype == BF16);
    break;
  case I32:
    reduce_int<int32_t, uint32_t><<<b, 256, 0, stream>>>((int32_t *)dst, (const int32_t *)src, count, op);
    break;
  case I64:
    reduce_int<int64_t, uint64_t><<<b, 256, 0, stream>>>((int64_t *)dst, (const int64_t *)src, count, op);
    break;
  case U8:
    reduce_int<uint8_t, uint8_t><<<b, 256, 0, stream>>>((uint8_t *)dst, (const uint8_t *)src, count, op);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t sp_cuda_scale(void *x, uint64_t count, int dtype, float fk, int64_t ik,
                                     int divide, cudaStream_t stream)
{
  if (count == 0)
    return cudaSuccess;
  unsigned b = blocks_for(count);
  switch (dtype) {
  case F32:
  case F16:
  case BF16: scale_float<<<b, 256, 0, stream>>>(x, count, dtype, fk, divide != 0); break;
  case I32:
  case I64:
  case U8: scale_int<<<b, 256, 0, stream>>>(x, count, dtype, ik, divide != 0); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
