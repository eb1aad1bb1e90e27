// CUDA kernels for the local steps of per-rank programs (copy, reduce, scale),
// bitwise equal to the host kernels of src/core/dtype.c and program.c. The
// element code is kernel_ops.h, shared with the fake device of tests/fakegpu;
// built with -fmad=false, every float operation is a round-to-nearest-even
// intrinsic, so no contraction or reassociation can change a bit.
#include "kernels.h"
#include "kernel_ops.h"

#include <stdint.h>

namespace {

// grid-stride loop over 64-bit indices
#define FOR_EACH(i, n) \
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (uint64_t)gridDim.x * blockDim.x)

__global__ void reduce_f32(float *d, const float *s, uint64_t n, int op)
{
  FOR_EACH(i, n) spk_reduce_f32(d, s, i, op);
}

__global__ void reduce_half(uint16_t *d, const uint16_t *s, uint64_t n, int op, int bf)
{
  FOR_EACH(i, n) spk_reduce_half(d, s, i, op, bf);
}

__global__ void reduce_i32(int32_t *d, const int32_t *s, uint64_t n, int op)
{
  FOR_EACH(i, n) spk_reduce_i32(d, s, i, op);
}

__global__ void reduce_i64(int64_t *d, const int64_t *s, uint64_t n, int op)
{
  FOR_EACH(i, n) spk_reduce_i64(d, s, i, op);
}

__global__ void reduce_u8(uint8_t *d, const uint8_t *s, uint64_t n, int op)
{
  FOR_EACH(i, n) spk_reduce_u8(d, s, i, op);
}

__global__ void scale_float(void *x, uint64_t n, int dtype, float k, int divide)
{
  FOR_EACH(i, n) spk_scale_float(x, i, dtype, k, divide);
}

__global__ void scale_int(void *x, uint64_t n, int dtype, int64_t k, int divide)
{
  FOR_EACH(i, n) spk_scale_int(x, i, dtype, k, divide);
}

// The same element code over 16-byte vectors: one 16-byte load of each operand
// and one store per thread instead of 16 / sizeof(T) narrow ones, which a
// 2-byte type needs to come near the memory bandwidth. nv vectors; both
// pointers 16-byte aligned (reduce_launch checks).
#define REDUCE_VEC(name, T, CALL)                                             \
  __global__ void name(T *d, const T *s, uint64_t nv, int op, int bf)          \
  {                                                                            \
    (void)bf;                                                                  \
    FOR_EACH(v, nv)                                                            \
    {                                                                          \
      union {                                                                  \
        uint4 u;                                                               \
        T e[16 / sizeof(T)];                                                   \
      } a, b;                                                                  \
      a.u = ((const uint4 *)d)[v];                                             \
      b.u = ((const uint4 *)s)[v];                                             \
      for (unsigned j = 0; j < 16 / sizeof(T); j++)                            \
        CALL;                                                                  \
      ((uint4 *)d)[v] = a.u;                                                   \
    }                                                                          \
  }
REDUCE_VEC(reduce_f32_v, float, spk_reduce_f32(a.e, b.e, j, op))
REDUCE_VEC(reduce_half_v, uint16_t, spk_reduce_half(a.e, b.e, j, op, bf))
REDUCE_VEC(reduce_i32_v, int32_t, spk_reduce_i32(a.e, b.e, j, op))
REDUCE_VEC(reduce_i64_v, int64_t, spk_reduce_i64(a.e, b.e, j, op))
REDUCE_VEC(reduce_u8_v, uint8_t, spk_reduce_u8(a.e, b.e, j, op))
#undef REDUCE_VEC

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

} // namespace

extern "C" cudaError_t sp_cuda_copy2d(void *dst, uint64_t dst_stride, const void *src,
                                      uint64_t src_stride, uint64_t rows, uint64_t row_bytes,
                                      cudaStream_t stream)
{
  if (rows == 0 || row_bytes == 0)
    return cudaSuccess;
  unsigned unit = spk_copy_unit((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, rows,
                                row_bytes, dst_stride, src_stride);
  char *d = (char *)dst;
  const char *s = (const char *)src;
  if (unit == 16) {
    uint64_t upr = row_bytes / 16;
    copy2d<uint4><<<blocks_for(rows * upr), 256, 0, stream>>>(d, dst_stride, s, src_stride, rows, upr);
  } else if (unit == 4) {
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
  unsigned esize;
  switch (dtype) {
  case SPK_F32: case SPK_I32: esize = 4; break;
  case SPK_F16: case SPK_BF16: esize = 2; break;
  case SPK_I64: esize = 8; break;
  case SPK_U8: esize = 1; break;
  default: return cudaErrorInvalidValue;
  }
  // aligned operands: the vector kernel over the whole vectors, the scalar one
  // over the tail; otherwise the scalar kernel over everything
  uint64_t per = 16 / esize, nv = 0;
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0)
    nv = count / per;
  int bf = dtype == SPK_BF16;
  if (nv > 0) {
    unsigned b = blocks_for(nv);
    switch (dtype) {
    case SPK_F32: reduce_f32_v<<<b, 256, 0, stream>>>((float *)dst, (const float *)src, nv, op, 0); break;
    case SPK_F16:
    case SPK_BF16: reduce_half_v<<<b, 256, 0, stream>>>((uint16_t *)dst, (const uint16_t *)src, nv, op, bf); break;
    case SPK_I32: reduce_i32_v<<<b, 256, 0, stream>>>((int32_t *)dst, (const int32_t *)src, nv, op, 0); break;
    case SPK_I64: reduce_i64_v<<<b, 256, 0, stream>>>((int64_t *)dst, (const int64_t *)src, nv, op, 0); break;
    default: reduce_u8_v<<<b, 256, 0, stream>>>((uint8_t *)dst, (const uint8_t *)src, nv, op, 0); break;
    }
  }
  uint64_t done = nv * per, rest = count - done;
  if (rest > 0) {
    char *d = (char *)dst + done * esize;
    const char *s = (const char *)src + done * esize;
    unsigned b = blocks_for(rest);
    switch (dtype) {
    case SPK_F32: reduce_f32<<<b, 256, 0, stream>>>((float *)d, (const float *)s, rest, op); break;
    case SPK_F16:
    case SPK_BF16: reduce_half<<<b, 256, 0, stream>>>((uint16_t *)d, (const uint16_t *)s, rest, op, bf); break;
    case SPK_I32: reduce_i32<<<b, 256, 0, stream>>>((int32_t *)d, (const int32_t *)s, rest, op); break;
    case SPK_I64: reduce_i64<<<b, 256, 0, stream>>>((int64_t *)d, (const int64_t *)s, rest, op); break;
    default: reduce_u8<<<b, 256, 0, stream>>>((uint8_t *)d, (const uint8_t *)s, rest, op); break;
    }
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
  case SPK_F32:
  case SPK_F16:
  case SPK_BF16: scale_float<<<b, 256, 0, stream>>>(x, count, dtype, fk, divide != 0); break;
  case SPK_I32:
  case SPK_I64:
  case SPK_U8: scale_int<<<b, 256, 0, stream>>>(x, count, dtype, ik, divide != 0); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
