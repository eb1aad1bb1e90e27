/* The fake device's CUDA runtime (see fakegpu.h): tracked host allocations
 * standing in for device memory, deferred FIFO streams, and spsim's kernel
 * entry points (src/nccl/kernels.h) running the shared element code of
 * src/nccl/kernel_ops.h on the host. */
#include "config.h"

#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakegpu.h"
#ifdef SP_HAVE_CBLAS
#include <cblas.h>
#endif
#include "kernel_ops.h"
#include "kernels.h"

/* ------------------------------------------------------------ device memory */

typedef struct {
  uintptr_t base;
  size_t size;
} alloc_range;

static GArray *allocs; /* alloc_range, sorted by base */

/* Index of the allocation containing p, or -1. */
static int find_alloc(uintptr_t p)
{
  if (allocs == NULL)
    return -1;
  int lo = 0, hi = (int)allocs->len - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    const alloc_range *a = &g_array_index(allocs, alloc_range, mid);
    if (p < a->base)
      hi = mid - 1;
    else if (p >= a->base + (a->size ? a->size : 1))
      lo = mid + 1;
    else
      return mid;
  }
  return -1;
}

int fake_is_device(const void *p, size_t bytes)
{
  int i = find_alloc((uintptr_t)p);
  if (i < 0)
    return 0;
  const alloc_range *a = &g_array_index(allocs, alloc_range, i);
  return (uintptr_t)p - a->base + bytes <= a->size;
}

static cudaError_t last_error = cudaSuccess;
static cudaError_t sticky = cudaSuccess; /* a device fault poisons every later call */

int fake_inject(const char *what)
{
  static GHashTable *calls;
  const char *spec = g_getenv("SPSIM_FAKEGPU_FAIL"), *on = g_getenv("SPSIM_FAKEGPU_FAIL_RANK");
  const char *me = g_getenv("OMPI_COMM_WORLD_RANK");
  size_t len = strlen(what);
  if (spec == NULL || strncmp(spec, what, len) != 0 || spec[len] != ':')
    return 0;
  if (on && *on && g_strcmp0(on, me ? me : "0") != 0)
    return 0;
  if (calls == NULL)
    calls = g_hash_table_new(g_str_hash, g_str_equal);
  guint k = GPOINTER_TO_UINT(g_hash_table_lookup(calls, what)) + 1;
  g_hash_table_insert(calls, (gpointer)what, GUINT_TO_POINTER(k));
  return k == (guint)atoi(spec + len + 1);
}

/* A misuse the real runtime would reject (or crash on): say what, return it. */
static cudaError_t misuse(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static cudaError_t misuse(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "fakegpu: %s\n", msg);
  last_error = cudaErrorInvalidValue;
  return cudaErrorInvalidValue;
}

static int device_count(void)
{
  const char *s = g_getenv("SPSIM_FAKEGPU_DEVICES");
  return s ? atoi(s) : 1;
}

static int current_device;

cudaError_t cudaGetDeviceCount(int *count)
{
  *count = device_count();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device)
{
  if (device < 0 || device >= device_count())
    return cudaErrorInvalidDevice;
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
  if (device < 0 || device >= device_count())
    return cudaErrorInvalidDevice;
  memset(prop, 0, sizeof *prop);
  /* SPSIM_FAKEGPU_NAME: the name a real GPU would give (for the paths that read it) */
  const char *as = g_getenv("SPSIM_FAKEGPU_NAME");
  if (as != NULL) g_snprintf(prop->name, sizeof prop->name, "%s (fakegpu %d)", as, device);
  else g_snprintf(prop->name, sizeof prop->name, "fakegpu %d (host memory, no GPU)", device);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
  if (ptr == NULL)
    return misuse("cudaMalloc: NULL result pointer");
  if (fake_inject("malloc"))
    return last_error = cudaErrorMemoryAllocation;
  void *p = malloc(size ? size : 1);
  if (p == NULL)
    return cudaErrorMemoryAllocation;
  memset(p, 0xcd, size); /* uninitialised device memory is garbage, not zeros */
  if (allocs == NULL)
    allocs = g_array_new(FALSE, FALSE, sizeof(alloc_range));
  alloc_range a = { (uintptr_t)p, size };
  guint at = 0;
  while (at < allocs->len && g_array_index(allocs, alloc_range, at).base < a.base)
    at++;
  g_array_insert_val(allocs, at, a);
  *ptr = p;
  return cudaSuccess;
}

static cudaError_t drain_all(const char *why);

cudaError_t cudaFree(void *p)
{
  if (p == NULL)
    return cudaSuccess;
  int i = find_alloc((uintptr_t)p);
  if (i < 0 || g_array_index(allocs, alloc_range, i).base != (uintptr_t)p)
    return misuse("cudaFree(%p): not the start of a device allocation", p);
  /* cudaFree synchronises the device: queued work may still use the memory */
  cudaError_t e = drain_all("cudaFree");
  memset(p, 0xdd, g_array_index(allocs, alloc_range, i).size);
  g_array_remove_index(allocs, (guint)i);
  free(p);
  return e;
}

/* ------------------------------------------------------------ streams */

typedef enum { Q_COPY, Q_SET, Q_COPY2D, Q_REDUCE, Q_SCALE, Q_GROUP, Q_EVENT, Q_GEMM } qkind;

struct CUevent_st {
  gint64 us;
  int recorded;
};

typedef struct {
  qkind kind;
  void *dst;
  const void *src;
  size_t bytes;
  int fill;
  uint64_t rows, row_bytes, dst_stride, src_stride, count;
  int dtype, op, divide;
  float fk;
  int64_t ik;
  ncclComm_t comm;
  fake_p2p *p2p;
  int n, posted;
  MPI_Request *reqs;
  cudaEvent_t event;
  int faults; /* injected: the kernel faults when run */
  fake_gemm gemm;
  void *owned; /* a staging copy of the source, freed with the operation */
} qop;

struct CUstream_st {
  GQueue q; /* qop* */
};

static struct CUstream_st legacy; /* stream 0 */
static GList *streams;           /* every created stream, for cudaFree's device sync */

static struct CUstream_st *st_of(cudaStream_t s)
{
  return s ? s : &legacy;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
  (void)flags; /* non-blocking: cudaMemcpy never waits for it, as here */
  struct CUstream_st *n = g_new0(struct CUstream_st, 1);
  g_queue_init(&n->q);
  streams = g_list_prepend(streams, n);
  *s = n;
  return cudaSuccess;
}

static void qop_free(qop *o)
{
  g_free(o->owned);
  if (o->kind == Q_GROUP) {
    fake_comm_unref(o->comm);
    g_free(o->p2p);
    g_free(o->reqs);
  }
  g_free(o);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
  if (s == NULL)
    return cudaErrorInvalidResourceHandle;
  /* work still queued (after a failure) is dropped, never run */
  qop *o;
  while ((o = g_queue_pop_head(&s->q)) != NULL)
    qop_free(o);
  streams = g_list_remove(streams, s);
  g_free(s);
  return cudaSuccess;
}

/* A single-precision GEMM, column-major as cuBLAS. */
static void sgemm(const fake_gemm *g, const float *a, const float *b, float *c)
{
#ifdef SP_HAVE_CBLAS
  cblas_sgemm(CblasColMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k,
              g->alpha, a, g->lda, b, g->ldb, g->beta, c, g->ldc);
#else
  for (int j = 0; j < g->n; j++)
    for (int i = 0; i < g->m; i++) {
      float acc = 0;
      for (int l = 0; l < g->k; l++)
        acc += (g->ta ? a[l + (size_t)i * g->lda] : a[i + (size_t)l * g->lda]) *
               (g->tb ? b[j + (size_t)l * g->ldb] : b[l + (size_t)j * g->ldb]);
      c[i + (size_t)j * g->ldc] = g->alpha * acc + (g->beta != 0 ? g->beta * c[i + (size_t)j * g->ldc] : 0);
    }
#endif
}

/* @p n elements of a column-major operand (leading dimension ld, @p rows rows) widened
 * from BF16, or (back) rounded to it. */
static void bf16_span(float *f, uint16_t *h, int rows, int cols, int ld, int back)
{
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++) {
      size_t x = i + (size_t)j * ld;
      if (back) h[x] = spk_f32_to_half(f[x], 1);
      else f[x] = spk_half_to_f32(h[x], 1);
    }
}

/* A queued GEMM: BF16 ones widened to single precision, multiplied, rounded back
 * (accumulation in single precision, as CUBLAS_COMPUTE_32F). */
static void run_gemm(const fake_gemm *g)
{
  if (!g->bf16) {
    sgemm(g, g->a, g->b, g->c);
    return;
  }
  int ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k, br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
  float *a = g_new0(float, (size_t)g->lda * ac), *b = g_new0(float, (size_t)g->ldb * bc),
        *c = g_new0(float, (size_t)g->ldc * g->n);
  bf16_span(a, (uint16_t *)g->a, ar, ac, g->lda, 0);
  bf16_span(b, (uint16_t *)g->b, br, bc, g->ldb, 0);
  bf16_span(c, (uint16_t *)g->c, g->m, g->n, g->ldc, 0);
  sgemm(g, a, b, c);
  bf16_span(c, (uint16_t *)g->c, g->m, g->n, g->ldc, 1);
  g_free(a);
  g_free(b);
  g_free(c);
}

static void run_copy2d(const qop *o)
{
  unsigned unit = spk_copy_unit((uintptr_t)o->dst, (uintptr_t)o->src, o->rows, o->row_bytes,
                                o->dst_stride, o->src_stride);
  uint64_t upr = o->row_bytes / unit;
  /* the kernel's addressing: thread i moves unit c of row r */
  for (uint64_t i = 0; i < o->rows * upr; i++) {
    uint64_t r = i / upr, c = i - r * upr;
    memcpy((char *)o->dst + r * o->dst_stride + c * unit,
           (const char *)o->src + r * o->src_stride + c * unit, unit);
  }
}

void fake_reduce(void *d, const void *s, uint64_t count, int dtype, int op)
{
  for (uint64_t i = 0; i < count; i++)
    switch (dtype) {
    case SPK_F32: spk_reduce_f32(d, s, i, op); break;
    case SPK_F16:
    case SPK_BF16: spk_reduce_half(d, s, i, op, dtype == SPK_BF16); break;
    case SPK_I32: spk_reduce_i32(d, s, i, op); break;
    case SPK_I64: spk_reduce_i64(d, s, i, op); break;
    default: spk_reduce_u8(d, s, i, op); break;
    }
}

void fake_scale(void *x, uint64_t count, int dtype, float fk, int64_t ik, int divide)
{
  for (uint64_t i = 0; i < count; i++)
    if (dtype == SPK_F32 || dtype == SPK_F16 || dtype == SPK_BF16)
      spk_scale_float(x, i, dtype, fk, divide);
    else
      spk_scale_int(x, i, dtype, ik, divide);
}

/* Post or test a group; TRUE once every message completed. */
static gboolean run_group(qop *o)
{
  if (!fake_comm_alive(o->comm))
    return FALSE; /* aborted or failed: the group never completes */
  if (o->n < 0) {
    fake_comm_fail(o->comm, ncclRemoteError, "injected failure of a send/recv group");
    return FALSE;
  }
  MPI_Comm comm = fake_comm_mpi(o->comm);
  if (!o->posted) {
    o->reqs = g_new(MPI_Request, o->n ? o->n : 1);
    for (int i = 0; i < o->n; i++) {
      const fake_p2p *p = &o->p2p[i];
      int rc = p->recv ? MPI_Irecv(p->buf, (int)p->bytes, MPI_BYTE, p->peer, 0, comm, &o->reqs[i])
                       : MPI_Isend(p->buf, (int)p->bytes, MPI_BYTE, p->peer, 0, comm, &o->reqs[i]);
      if (rc != MPI_SUCCESS) {
        fake_comm_fail(o->comm, ncclSystemError, "MPI_%s to/from rank %d failed",
                       p->recv ? "Irecv" : "Isend", p->peer);
        for (int j = i; j < o->n; j++)
          o->reqs[j] = MPI_REQUEST_NULL;
        o->posted = 1;
        return FALSE;
      }
    }
    o->posted = 1;
  }
  int done = 0;
  MPI_Status *st = g_new(MPI_Status, o->n ? o->n : 1);
  int rc = MPI_Testall(o->n, o->reqs, &done, st);
  if (rc == MPI_SUCCESS && done)
    for (int i = 0; i < o->n; i++) {
      int got = 0;
      if (o->p2p[i].recv && MPI_Get_count(&st[i], MPI_BYTE, &got) == MPI_SUCCESS &&
          (size_t)got != o->p2p[i].bytes) {
        fake_comm_fail(o->comm, ncclInvalidUsage,
                       "ncclRecv from rank %d expected %zu bytes but the matching ncclSend sent %d",
                       o->p2p[i].peer, o->p2p[i].bytes, got);
        done = 0;
      }
    }
  else if (rc != MPI_SUCCESS) {
    fake_comm_fail(o->comm, ncclInvalidUsage,
                   "a point-to-point of the group failed (a receive smaller than its send?)");
    done = 0;
  }
  g_free(st);
  return done;
}

/* Run the stream's queue as far as it goes; TRUE when empty. */
static gboolean progress(struct CUstream_st *s)
{
  qop *o;
  while (sticky == cudaSuccess && (o = g_queue_peek_head(&s->q)) != NULL) {
    if (o->faults) {
      fprintf(stderr, "fakegpu: injected fault in a kernel\n");
      sticky = cudaErrorIllegalAddress;
      return FALSE;
    }
    switch (o->kind) {
    case Q_COPY: memcpy(o->dst, o->src, o->bytes); break;
    case Q_SET: memset(o->dst, o->fill, o->bytes); break;
    case Q_COPY2D: run_copy2d(o); break;
    case Q_REDUCE: fake_reduce(o->dst, o->src, o->count, o->dtype, o->op); break;
    case Q_SCALE: fake_scale(o->dst, o->count, o->dtype, o->fk, o->ik, o->divide); break;
    case Q_GEMM: run_gemm(&o->gemm); break;
    case Q_EVENT:
      o->event->us = g_get_monotonic_time();
      o->event->recorded = 1;
      break;
    case Q_GROUP:
      if (!run_group(o))
        return FALSE;
      break;
    }
    g_queue_pop_head(&s->q);
    qop_free(o);
  }
  return TRUE;
}

/* Bounded synchronisation: a stream stuck on a group that never completes
 * (a peer gone) must not spin forever. A last resort only, far beyond the test
 * scripts' own `timeout 120` guard, so that a slow, loaded machine never trips it:
 * no test depends on it firing. */
#define DRAIN_LIMIT_S 600

static cudaError_t drain(struct CUstream_st *s, const char *why)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)DRAIN_LIMIT_S * G_USEC_PER_SEC;
  while (!progress(s)) {
    if (sticky != cudaSuccess)
      return sticky;
    if (g_get_monotonic_time() > deadline) {
      fprintf(stderr, "fakegpu: %s: stream work still pending after %d s\n", why, DRAIN_LIMIT_S);
      return cudaErrorLaunchTimeout;
    }
    g_thread_yield();
  }
  return cudaSuccess;
}

static cudaError_t drain_all(const char *why)
{
  cudaError_t e = drain(&legacy, why);
  for (GList *l = streams; l && e == cudaSuccess; l = l->next)
    e = drain(l->data, why);
  return e;
}

static void push(cudaStream_t s, qop *o)
{
  g_queue_push_tail(&st_of(s)->q, o);
}

/* A new queued operation; kernels may be the injected fault. */
static qop *new_op(qkind kind)
{
  qop *o = g_new0(qop, 1);
  o->kind = kind;
  o->faults = (kind == Q_COPY2D || kind == Q_REDUCE || kind == Q_SCALE || kind == Q_GEMM) && fake_inject("kernel");
  return o;
}

void fake_stream_push_group(cudaStream_t s, ncclComm_t comm, fake_p2p *ops, int n)
{
  qop *o = new_op(Q_GROUP);
  o->comm = comm;
  fake_comm_ref(comm);
  o->p2p = ops;
  o->n = n;
  push(s, o);
}

void fake_stream_push_gemm(cudaStream_t s, const fake_gemm *g)
{
  qop *o = new_op(Q_GEMM);
  o->gemm = *g;
  push(s, o);
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
  gboolean empty = progress(st_of(s));
  return sticky != cudaSuccess ? sticky : empty ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
  return drain(st_of(s), "cudaStreamSynchronize");
}

/* ------------------------------------------------------------ copies */

static const char *kind_name(enum cudaMemcpyKind k)
{
  switch (k) {
  case cudaMemcpyHostToDevice: return "HostToDevice";
  case cudaMemcpyDeviceToHost: return "DeviceToHost";
  case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
  case cudaMemcpyHostToHost: return "HostToHost";
  default: return "Default";
  }
}

/* The pointers of a copy must be on the sides its kind names. */
static cudaError_t check_copy(const char *call, void *dst, const void *src, size_t n,
                              enum cudaMemcpyKind k)
{
  int want_dst = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
  int want_src = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
  if (k == cudaMemcpyDefault || k == cudaMemcpyHostToHost)
    return misuse("%s: kind %s is not used by spsim and not emulated", call, kind_name(k));
  if (fake_is_device(dst, n) != want_dst)
    return misuse("%s %s: destination %p (%zu bytes) is %s", call, kind_name(k), dst, n,
                  want_dst ? "not device memory" : "device memory");
  if (fake_is_device(src, n) != want_src)
    return misuse("%s %s: source %p (%zu bytes) is %s", call, kind_name(k), src, n,
                  want_src ? "not device memory" : "device memory");
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
  if (n == 0)
    return cudaSuccess;
  if (sticky != cudaSuccess)
    return sticky;
  cudaError_t e = check_copy("cudaMemcpy", dst, src, n, k);
  if (e != cudaSuccess)
    return e;
  /* synchronous, on the legacy stream: waits for stream 0, not for non-blocking streams */
  if ((e = drain(&legacy, "cudaMemcpy")) != cudaSuccess)
    return e;
  if (k == cudaMemcpyHostToDevice) {
    /* From pageable memory the call returns once the source is staged; the bytes
     * land later, in the legacy stream's order, so a non-blocking stream's work
     * may still read what was there before (CUDA Runtime API, "API
     * synchronization behavior"). Here they land when stream 0 next runs. */
    qop *o = new_op(Q_COPY);
    o->owned = g_memdup2(src, n);
    o->dst = dst;
    o->src = o->owned;
    o->bytes = n;
    push(NULL, o);
    return cudaSuccess;
  }
  memcpy(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, n, k);
  if (e != cudaSuccess)
    return e;
  qop *o = new_op(Q_COPY);
  o->dst = dst;
  o->src = src;
  o->bytes = n;
  push(s, o);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  if (!fake_is_device(p, n))
    return misuse("cudaMemsetAsync: %p (%zu bytes) is not device memory", p, n);
  qop *o = new_op(Q_SET);
  o->dst = p;
  o->fill = value;
  o->bytes = n;
  push(s, o);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
  cudaError_t e = cudaMemsetAsync(p, value, n, 0);
  return e == cudaSuccess ? drain(&legacy, "cudaMemset") : e;
}

/* ------------------------------------------------------------ events (test-real-cuda --bench) */

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
  *e = g_new0(struct CUevent_st, 1);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
  qop *o = new_op(Q_EVENT);
  o->event = e;
  push(s, o);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
  return e->recorded ? cudaSuccess : drain_all("cudaEventSynchronize");
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
  if (!a->recorded || !b->recorded)
    return cudaErrorNotReady;
  *ms = (float)(b->us - a->us) / 1000.0f;
  return cudaSuccess;
}

/* ------------------------------------------------------------ errors */

cudaError_t cudaGetLastError(void)
{
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

const char *cudaGetErrorName(cudaError_t e)
{
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  case cudaErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  default: return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t e)
{
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument (fakegpu: see the line above)";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorNotReady: return "device not ready";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected (fakegpu: SPSIM_FAKEGPU_DEVICES=0)";
  case cudaErrorLaunchTimeout: return "the launch timed out";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorIllegalAddress: return "an illegal memory access was encountered (fakegpu: injected)";
  default: return "unknown error";
  }
}

/* ------------------------------------------------------------ spsim's kernels (kernels.h) */

cudaError_t sp_cuda_copy2d(void *dst, uint64_t dst_stride, const void *src, uint64_t src_stride,
                           uint64_t rows, uint64_t row_bytes, cudaStream_t stream)
{
  if (rows == 0 || row_bytes == 0)
    return cudaSuccess;
  if (!fake_is_device(dst, (rows - 1) * dst_stride + row_bytes))
    return misuse("sp_cuda_copy2d: destination %p (%" G_GUINT64_FORMAT " rows of %" G_GUINT64_FORMAT
                  ", stride %" G_GUINT64_FORMAT ") is not device memory",
                  dst, rows, row_bytes, dst_stride);
  if (!fake_is_device(src, (rows - 1) * src_stride + row_bytes))
    return misuse("sp_cuda_copy2d: source %p (%" G_GUINT64_FORMAT " rows of %" G_GUINT64_FORMAT
                  ", stride %" G_GUINT64_FORMAT ") is not device memory",
                  src, rows, row_bytes, src_stride);
  qop *o = new_op(Q_COPY2D);
  o->dst = dst;
  o->src = src;
  o->rows = rows;
  o->row_bytes = row_bytes;
  o->dst_stride = dst_stride;
  o->src_stride = src_stride;
  push(stream, o);
  return cudaSuccess;
}

static size_t dtype_bytes(int dtype)
{
  switch (dtype) {
  case SPK_F32:
  case SPK_I32: return 4;
  case SPK_F16:
  case SPK_BF16: return 2;
  case SPK_I64: return 8;
  default: return 1;
  }
}

cudaError_t sp_cuda_reduce(void *dst, const void *src, uint64_t count, int dtype, int op,
                           cudaStream_t stream)
{
  if (count == 0)
    return cudaSuccess;
  if (dtype < SPK_F32 || dtype > SPK_U8)
    return cudaErrorInvalidValue;
  size_t n = count * dtype_bytes(dtype);
  if (!fake_is_device(dst, n) || !fake_is_device(src, n))
    return misuse("sp_cuda_reduce: %s %p (%zu bytes) is not device memory",
                  fake_is_device(dst, n) ? "source" : "destination",
                  fake_is_device(dst, n) ? src : (const void *)dst, n);
  qop *o = new_op(Q_REDUCE);
  o->dst = dst;
  o->src = src;
  o->count = count;
  o->dtype = dtype;
  o->op = op;
  push(stream, o);
  return cudaSuccess;
}

cudaError_t sp_cuda_scale(void *x, uint64_t count, int dtype, float fk, int64_t ik, int divide,
                          cudaStream_t stream)
{
  if (count == 0)
    return cudaSuccess;
  if (dtype < SPK_F32 || dtype > SPK_U8)
    return cudaErrorInvalidValue;
  if (!fake_is_device(x, count * dtype_bytes(dtype)))
    return misuse("sp_cuda_scale: %p is not device memory", x);
  qop *o = new_op(Q_SCALE);
  o->dst = x;
  o->count = count;
  o->dtype = dtype;
  o->fk = fk;
  o->ik = ik;
  o->divide = divide != 0;
  push(stream, o);
  return cudaSuccess;
}
