/* spsim-run --step: the compute tasks of a step graph as CPU kernels (step_compute.c)
 * and the step run at the model's real sizes (step_exec.c). */
#ifndef SPSIM_NCCL_STEP_COMPUTE_H
#define SPSIM_NCCL_STEP_COMPUTE_H

#include <glib.h>
#include <stdint.h>
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/step.h"
#include "spsim/stepgraph.h"

/* One kernel of a compute task. */
typedef enum { SK_GEMM = 0, SK_ATTN, SK_ELEM } sk_kind;

typedef struct {
  uint8_t kind;    /* sk_kind */
  uint8_t bwd;     /* SK_ATTN: backward (five products against two) */
  int64_t m, n, k; /* SK_GEMM: C[m,n] = A[m,k] B[k,n]; SK_ATTN: queries m, keys n, head dim k */
  double batch;    /* SK_ATTN: sequences x heads */
  double bytes;    /* SK_ELEM: bytes moved through memory */
} sk_kernel;

/* The kernels of every compute task of stage @p stage of @p g: (*off)[i]..(*off)[i+1]
 * in @p kernels for task i (tasks of other stages have none). The graph merges
 * consecutive kernels of a layer into one task; each task's kernels are those of the
 * layer's sequence from its label up to the label of the next task of the same
 * micro-batch, layer and phase. FALSE when a label is not in its sequence. */
gboolean sk_plan(const sp_stepgraph *g, const sp_step_ctx *c, const sp_layout *l, int32_t stage, GArray *kernels,
                 uint32_t **off, GError **err);

/* Queries per attention block: small enough that the causal triangle is cut finely
 * (the work of a block row is its keys up to the diagonal). */
#define SK_ATTN_BLOCK 64
/* Floats of each array of the element-wise pass: 4 MiB, beyond the last-level cache
 * of a laptop core share, so that the pass measures memory. */
#define SK_ELEM_FLOATS ((size_t)1 << 20)

/* Floats of each buffer the kernels of @p kernels need: GEMM A, B, C (C also holds the
 * attention backward's dV and dK, A its dQ), attention Q (and O), K (and V), scores. */
void sk_sizes(const GArray *kernels, size_t *na, size_t *nb, size_t *nc, size_t *nq, size_t *nkv, size_t *ns);

/* FLOPs of a kernel (0 for element-wise ones). */
double sk_flops(const sk_kernel *k);

/* The i-th value the kernels' operands hold: small, so that products and exponentials
 * stay finite (and not zeros, which a GPU multiplies faster than data). */
float sk_fill_value(size_t i);

/* Host buffers of the kernels, sized for the largest of @p kernels. */
typedef struct sk_buffers sk_buffers;
/* The bytes sk_buffers_new would allocate for @p kernels. */
double sk_buffers_bytes(const GArray *kernels);
sk_buffers *sk_buffers_new(const GArray *kernels);
void sk_buffers_free(sk_buffers *b);

/* Run @p k on the CPU, calling @p poll(user) between pieces of about a millisecond
 * (communication progresses while compute runs). */
void sk_run(sk_buffers *b, const sk_kernel *k, void (*poll)(void *user), void *user);

/* Once per process before any kernel: OpenBLAS on one thread. */
void sk_init(void);

/* Whether this build executes kernels (OpenBLAS found by configure). */
gboolean sk_available(void);

/* Measure: single-precision GEMM FLOP/s of an m x n x k product over about @p secs
 * seconds of wall-clock time (of this thread's processor time when @p cpu_time), and
 * the memory bandwidth of the element-wise pass in bytes/s. The rate per second of
 * wall-clock time is returned; @p cpu_rate (may be NULL) gets the rate per second of
 * the thread's processor time, which leaves out the time the OS gave other threads. */
double sk_measure_gemm(int64_t m, int64_t n, int64_t k, double secs, gboolean cpu_time, double *cpu_rate);
double sk_measure_membw(double secs);
/* Measure: FLOP/s of the causal attention of one head of @p seq tokens, head dim @p d,
 * forward or (@p bwd) backward, its FLOPs counted as sk_flops counts them. */
double sk_measure_attn(int64_t seq, int64_t d, gboolean bwd, double secs);

/* The kernels on this rank's GPU (step_compute_cuda.c, built with CUDA and cuBLAS):
 * GEMMs and attention products with cublasGemmEx in BF16 (single-precision
 * accumulation), the softmax and element-wise passes as device-to-device copies of the
 * same bytes, on a stream of their own; the rank polls the communication while the
 * stream runs. Without cuBLAS, sk_gpu_new fails saying so. sk_gpu_name: the device's
 * name as CUDA reports it ("" if unknown). */
typedef struct sk_gpu sk_gpu;
gboolean sk_gpu_available(void);
sk_gpu *sk_gpu_new(const GArray *kernels, GError **err);
void sk_gpu_free(sk_gpu *g);
const char *sk_gpu_name(const sk_gpu *g);
gboolean sk_gpu_run(sk_gpu *g, const sk_kernel *k, void (*poll)(void *user), void *user, GError **err);

#endif
