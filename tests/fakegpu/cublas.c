/* The fake device's cuBLAS (see fakegpu.h): the handle, its stream and cublasSgemm,
 * which spsim-run --step --device cuda calls (src/nccl/step_compute_cuda.c). */
#include "config.h"

#include <glib.h>
#include <stdio.h>

#include <cublas_v2.h>

#include "fakegpu.h"

struct cublasContext {
  cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
  if (handle == NULL) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = g_new0(struct cublasContext, 1);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
  if (handle == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  g_free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
  if (handle == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

/* An operand of rows x cols (column-major, leading dimension ld) in device memory. */
static int operand_ok(const char *name, const float *p, int rows, int cols, int ld)
{
  if (ld < MAX(1, rows)) {
    fprintf(stderr, "fakegpu: cublasSgemm: leading dimension of %s %d below its %d rows\n", name, ld, rows);
    return 0;
  }
  size_t bytes = ((size_t)ld * (size_t)(cols - 1) + (size_t)rows) * sizeof(float);
  if (!fake_is_device(p, bytes)) {
    fprintf(stderr, "fakegpu: cublasSgemm: %s %p (%zu bytes) is not device memory\n", name, (const void *)p, bytes);
    return 0;
  }
  return 1;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
  if (handle == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || alpha == NULL || beta == NULL ||
      (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || k == 0) return CUBLAS_STATUS_SUCCESS;
  int ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (!operand_ok("A", A, ta ? k : m, ta ? m : k, lda) || !operand_ok("B", B, tb ? n : k, tb ? k : n, ldb) ||
      !operand_ok("C", C, m, n, ldc))
    return CUBLAS_STATUS_INVALID_VALUE;
  fake_gemm g = { .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = *alpha,
                  .beta = *beta, .a = A, .b = B, .c = C };
  fake_stream_push_gemm(handle->stream, &g);
  return CUBLAS_STATUS_SUCCESS;
}
