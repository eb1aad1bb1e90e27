/* spsim-run --step --device cuda: the compute tasks' kernels (step_compute.h) on this
 * rank's GPU. GEMMs and the attention's products run as cublasGemmEx in BF16 with
 * single-precision accumulation (CUBLAS_COMPUTE_32F: the tensor-core GEMMs of BF16
 * training, which the kernel model prices), row-major products as the column-major
 * transposes: C^T = op(B)^T op(A)^T; the softmax and element-wise passes as
 * device-to-device copies moving the kernel's bytes (a copy of n bytes reads n and
 * writes n). The operands hold small pseudo-random values (a GPU's GEMM on zeros runs
 * faster than on data). Every kernel is enqueued on the rank's stream, then the rank
 * polls its communication until the stream is idle. The GPU is the rank's local rank
 * modulo the devices (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK). */
#include "config.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "spsim/error.h"
#include "step_compute.h"

typedef uint16_t bf16; /* the bits of a BF16 value */

struct sk_gpu {
  cudaStream_t stream;
  cublasHandle_t blas;
  bf16 *a, *b, *c, *q, *kk, *v, *o, *s, *p;
  float *x, *y; /* the element-wise passes' bytes */
  char name[256];
};

gboolean sk_gpu_available(void)
{
  return TRUE;
}

static gboolean cuda_ok(cudaError_t e, const char *call, GError **err)
{
  if (e == cudaSuccess) return TRUE;
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "--device cuda: %s failed: %s", call, cudaGetErrorString(e));
  return FALSE;
}

static gboolean blas_ok(cublasStatus_t e, const char *call, GError **err)
{
  if (e == CUBLAS_STATUS_SUCCESS) return TRUE;
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "--device cuda: %s failed (cuBLAS status %d)", call, (int)e);
  return FALSE;
}

void sk_gpu_free(sk_gpu *g)
{
  if (g == NULL) return;
  if (g->stream) cudaStreamSynchronize(g->stream);
  void *all[] = { g->a, g->b, g->c, g->q, g->kk, g->v, g->o, g->s, g->p, g->x, g->y };
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    if (all[i]) cudaFree(all[i]);
  if (g->blas) cublasDestroy(g->blas);
  if (g->stream) cudaStreamDestroy(g->stream);
  g_free(g);
}

/* @p n elements of @p es bytes, filled from @p fill (n x es bytes at least) on @p
 * stream, which is waited for before the buffer is used (sk_gpu_new). */
static gboolean alloc(void **p, size_t n, size_t es, const void *fill, cudaStream_t stream, GError **err)
{
  return cuda_ok(cudaMalloc(p, n * es), "cudaMalloc", err) &&
         cuda_ok(cudaMemcpyAsync(*p, fill, n * es, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", err);
}

/* The CPU path's operand values (sk_fill_value), truncated to BF16. */
static bf16 *filled(size_t n)
{
  bf16 *p = g_new(bf16, n);
  for (size_t i = 0; i < n; i++) {
    float f = sk_fill_value(i);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    p[i] = (bf16)(u >> 16);
  }
  return p;
}

sk_gpu *sk_gpu_new(const GArray *kernels, GError **err)
{
  int n = 0;
  if (!cuda_ok(cudaGetDeviceCount(&n), "cudaGetDeviceCount", err)) return NULL;
  if (n < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "--device cuda: no CUDA device; use --device cpu");
    return NULL;
  }
  const char *lr = g_getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  int dev = (lr ? atoi(lr) : 0) % n;
  if (!cuda_ok(cudaSetDevice(dev), "cudaSetDevice", err)) return NULL;
  sk_gpu *g = g_new0(sk_gpu, 1);
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
    g_strlcpy(g->name, prop.name, sizeof g->name);
  size_t na, nb, nc, nq, nkv, ns;
  sk_sizes(kernels, &na, &nb, &nc, &nq, &nkv, &ns);
  size_t most = MAX(MAX(MAX(na, nb), MAX(nc, nq)), MAX(MAX(nkv, ns), SK_ELEM_FLOATS * 2));
  g_autofree bf16 *fill = filled(most);
  gboolean ok =
    cuda_ok(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", err) &&
    blas_ok(cublasCreate(&g->blas), "cublasCreate", err) &&
    blas_ok(cublasSetStream(g->blas, g->stream), "cublasSetStream", err);
  void **bf[] = { (void **)&g->a, (void **)&g->b, (void **)&g->c, (void **)&g->q, (void **)&g->o, (void **)&g->kk,
                  (void **)&g->v, (void **)&g->s, (void **)&g->p };
  const size_t len[] = { na, nb, nc, nq, nq, nkv, nkv, ns, ns };
  for (size_t i = 0; ok && i < G_N_ELEMENTS(bf); i++) ok = alloc(bf[i], len[i], sizeof(bf16), fill, g->stream, err);
  ok = ok && alloc((void **)&g->x, SK_ELEM_FLOATS, sizeof(float), fill, g->stream, err) &&
       alloc((void **)&g->y, SK_ELEM_FLOATS, sizeof(float), fill, g->stream, err) &&
       cuda_ok(cudaStreamSynchronize(g->stream), "cudaStreamSynchronize", err);
  if (!ok) {
    sk_gpu_free(g);
    return NULL;
  }
  return g;
}

const char *sk_gpu_name(const sk_gpu *g)
{
  return g->name;
}

/* Row-major C[m,n] = op(A)[m,k] op(B)[k,n] in BF16, A stored m x k (k x m transposed). */
static gboolean mm(sk_gpu *g, gboolean ta, gboolean tb, int64_t m, int64_t n, int64_t k, const bf16 *a,
                   const bf16 *b, bf16 *c, GError **err)
{
  const float one = 1.0f, zero = 0.0f;
  return blas_ok(cublasGemmEx(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                              (int)k, &one, b, CUDA_R_16BF, (int)(tb ? k : n), a, CUDA_R_16BF, (int)(ta ? m : k),
                              &zero, c, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx", err);
}

static gboolean pass(sk_gpu *g, void *dst, const void *src, size_t bytes, GError **err)
{
  return cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g->stream), "cudaMemcpyAsync", err);
}

/* As the CPU's run_attn (step_compute.c), the softmax a copy of the block's scores. */
static gboolean attn(sk_gpu *g, const sk_kernel *k, GError **err)
{
  const int64_t sq = k->m, skv = k->n, d = k->k;
  const int64_t heads = (int64_t)(k->batch + 0.999999);
  for (int64_t h = 0; h < heads; h++) {
    for (int64_t r = 0; r < sq; r += SK_ATTN_BLOCK) {
      int64_t br = MIN((int64_t)SK_ATTN_BLOCK, sq - r);
      int64_t kend = MAX((int64_t)1, MIN(skv, (r + br) * skv / sq));
      const bf16 *qb = g->q + r * d;
      size_t sb = (size_t)(br * kend) * sizeof(bf16);
      if (!mm(g, FALSE, TRUE, br, kend, d, qb, g->kk, g->s, err) || !pass(g, g->p, g->s, sb, err)) return FALSE;
      if (!k->bwd) {
        if (!mm(g, FALSE, FALSE, br, d, kend, g->p, g->v, g->o + r * d, err)) return FALSE;
      } else {
        const bf16 *dob = g->o + r * d;
        if (!mm(g, FALSE, TRUE, br, kend, d, dob, g->v, g->s, err) || !mm(g, TRUE, FALSE, kend, d, br, g->p, dob, g->c, err) ||
            !pass(g, g->s, g->p, sb, err) || !mm(g, FALSE, FALSE, br, d, kend, g->s, g->kk, g->a, err) ||
            !mm(g, TRUE, FALSE, kend, d, br, g->s, qb, g->c, err))
          return FALSE;
      }
    }
  }
  return TRUE;
}

gboolean sk_gpu_run(sk_gpu *g, const sk_kernel *k, void (*poll)(void *user), void *user, GError **err)
{
  gboolean ok = TRUE;
  switch (k->kind) {
  case SK_GEMM: ok = mm(g, FALSE, FALSE, k->m, k->n, k->k, g->a, g->b, g->c, err); break;
  case SK_ATTN: ok = attn(g, k, err); break;
  default: {
    /* a copy of n bytes moves 2 n */
    double left = k->bytes / 2.0;
    while (ok && left >= 1.0) {
      size_t n = (size_t)MIN(left, (double)(SK_ELEM_FLOATS * sizeof(float)));
      ok = pass(g, g->y, g->x, n, err);
      left -= (double)n;
    }
  }
  }
  if (!ok) return FALSE;
  cudaError_t e;
  while ((e = cudaStreamQuery(g->stream)) == cudaErrorNotReady) {
    if (poll) poll(user);
    sched_yield();
  }
  return cuda_ok(e, "cudaStreamQuery", err);
}
