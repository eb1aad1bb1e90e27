/* The fake device: a host-memory stand-in for the parts of the CUDA runtime
 * and of NCCL that spsim-run uses, so the CUDA transports (src/nccl/
 * transport_nccl.c) and the kernels' element code (src/nccl/kernel_ops.h) run
 * on CPU-only machines. It is a test double, not an emulator of a GPU's speed:
 *  - "device" memory is host memory the fake tracks; every copy, kernel and
 *    NCCL call checks that its pointers are device (or host) memory as the
 *    call requires, and fails with cudaErrorInvalidValue naming the pointer
 *    otherwise; fresh allocations are filled with garbage (0xcd) and freed
 *    ones poisoned, as uninitialised device memory is;
 *  - streams are FIFO queues that run only when the host queries or
 *    synchronises them (or a synchronous copy drains the legacy stream 0), so
 *    a missing wait reads stale bytes instead of passing by luck;
 *  - NCCL point-to-point runs over MPI on a duplicate of MPI_COMM_WORLD, one
 *    tag, so the k-th send to a peer meets the k-th receive from it as in
 *    NCCL; a group is enqueued at ncclGroupEnd and progresses when its stream
 *    is polled; a size mismatch becomes the communicator's asynchronous error.
 *  - cuBLAS: handles bound to a stream and cublasSgemm (fakegpu/cublas.c), queued on
 *    the stream and run with the host's BLAS when the stream runs; every operand
 *    must be device memory over the extent its leading dimension gives.
 * Environment: SPSIM_FAKEGPU_DEVICES (default 1) sets cudaGetDeviceCount;
 * SPSIM_FAKEGPU_FAIL=WHAT:K injects a failure at the K-th (from 1) call of
 * WHAT on the ranks of SPSIM_FAKEGPU_FAIL_RANK (default every rank):
 *   malloc  cudaMalloc returns cudaErrorMemoryAllocation;
 *   kernel  the kernel faults when the stream runs it (cudaErrorIllegalAddress
 *           from then on, as a sticky device error);
 *   nccl    the point-to-point group fails asynchronously (ncclRemoteError). */
#ifndef SPSIM_FAKEGPU_H
#define SPSIM_FAKEGPU_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

/** One NCCL point-to-point of a group. */
typedef struct {
  int recv;
  void *buf;
  size_t bytes;
  int peer;
} fake_p2p;

/** TRUE when this call of @p what ("malloc", "kernel", "nccl") is the injected failure. */
int fake_inject(const char *what);

/** The kernels' element code over a whole region, on the host (sp_cuda_reduce, sp_cuda_scale). */
void fake_reduce(void *d, const void *s, uint64_t count, int dtype, int op);
void fake_scale(void *x, uint64_t count, int dtype, float fk, int64_t ik, int divide);

/** TRUE when [p, p + bytes) lies inside one live device allocation. */
int fake_is_device(const void *p, size_t bytes);

/**
 * Enqueue a group of point-to-points of @p comm on @p stream; the stream posts
 * them when it reaches the group and moves on once all completed.
 * Takes @p ops (g_malloc'd).
 */
void fake_stream_push_group(cudaStream_t stream, ncclComm_t comm, fake_p2p *ops, int n);

/** A GEMM of cuBLAS (column-major, fakegpu/cublas.c), run when its stream reaches it:
 * single precision, or (bf16) BF16 operands and result with single-precision
 * accumulation, as cublasGemmEx with CUDA_R_16BF and CUBLAS_COMPUTE_32F. */
typedef struct {
  int ta, tb, m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const void *a, *b;
  void *c;
  int bf16;
} fake_gemm;
void fake_stream_push_gemm(cudaStream_t stream, const fake_gemm *g);

/* The communicator side the stream needs (fakegpu/nccl.c). */
MPI_Comm fake_comm_mpi(ncclComm_t comm);
int fake_comm_alive(ncclComm_t comm);
void fake_comm_fail(ncclComm_t comm, ncclResult_t why, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
void fake_comm_ref(ncclComm_t comm);
void fake_comm_unref(ncclComm_t comm);

#endif
