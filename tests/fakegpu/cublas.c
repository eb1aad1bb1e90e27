/* The fake device's cuBLAS (see fakegpu.h): the handle, its stream, cublasSgemm and
 * cublasGemmEx on BF16, which spsim-run --step --device cuda calls
 * (src/nccl/step_compute_cuda.c). */
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

/* An operand of rows x cols (column-major, leading dimension ld, elements of @p es
 * bytes) in device memory. */
static int operand_ok(const char *call, const char *name, const void *p, int rows, int cols, int ld, size_t es)
{
  if (ld < MAX(1, rows)) {
    fprintf(stderr, "fakegpu: %s: leading dimension of %s %d below its %d rows\n", call, name, ld, rows);
    return 0;
  }
  size_t bytes = ((size_t)ld * (size_t)(cols - 1) + (size_t)rows) * es;
  if (!fake_is_device(p, bytes)) {
    fprintf(stderr, "fakegpu: %s: %s %p (%zu bytes) is not device memory\n", call, name, p, bytes);
    return 0;
  }
  return 1;
}

/* The checks both GEMMs make, then the GEMM queued on the handle's stream. */
static cublasStatus_t gemm(const char *call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                           int m, int n, int k, const float *alpha, const void *A, int lda, const void *B, int ldb,
                           const float *beta, void *C, int ldc, int bf16)
{
  if (handle == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || alpha == NULL || beta == NULL ||
      (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || k == 0) return CUBLAS_STATUS_SUCCESS;
  int ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  size_t es = bf16 ? 2 : sizeof(float);
  if (!operand_ok(call, "A", A, ta ? k : m, ta ? m : k, lda, es) ||
      !operand_ok(call, "B", B, tb ? n : k, tb ? k : n, ldb, es) || !operand_ok(call, "C", C, m, n, ldc, es))
    return CUBLAS_STATUS_INVALID_VALUE;
  fake_gemm g = { .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = *alpha,
                  .beta = *beta, .a = A, .b = B, .c = C, .bf16 = bf16 };
  fake_stream_push_gemm(handle->stream, &g);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
  return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

/* Only what spsim uses: BF16 A, B and C, single-precision accumulation and scalars. */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
  (void)algo;
  if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_16BF || computeType != CUBLAS_COMPUTE_32F) {
    fprintf(stderr, "fakegpu: cublasGemmEx: only BF16 operands with CUBLAS_COMPUTE_32F are emulated\n");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, 1);
}
