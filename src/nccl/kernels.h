/* CUDA kernels of the real backend's local steps, callable from C. They
 * reproduce the host kernels of src/core (dtype.c, program.c) bit for bit:
 * half types widened to f32, combined with IEEE round-to-nearest-even
 * (__fadd_rn / __fmul_rn / __fdiv_rn, built with -fmad=false), rounded back to
 * nearest-even with the same bit code, canonical NaNs, -0 < +0 in MAX/MIN,
 * wrapping integers. Every function enqueues on @p stream and returns the
 * launch status. dtype and op take the values of sp_dtype and sp_redop. */
#ifndef SPSIM_NCCL_KERNELS_H
#define SPSIM_NCCL_KERNELS_H

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/** rows x row_bytes from src (row stride src_stride) to dst (row stride dst_stride). */
cudaError_t sp_cuda_copy2d(void *dst, uint64_t dst_stride, const void *src, uint64_t src_stride,
                           uint64_t rows, uint64_t row_bytes, cudaStream_t stream);
/** dst[i] = dst[i] op src[i], i in [0, count) (AVG reduces as SUM). */
cudaError_t sp_cuda_reduce(void *dst, const void *src, uint64_t count, int dtype, int op,
                           cudaStream_t stream);
/**
 * x[i] = x[i] / k or x[i] * k. Floats use @p fk (the factor as f32); integers
 * use @p ik (the factor truncated toward zero and clamped to int64, as the host).
 */
cudaError_t sp_cuda_scale(void *x, uint64_t count, int dtype, float fk, int64_t ik, int divide,
                          cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
