/* CUDA transports of the real backend:
 *  - "nccl": device buffers, ncclSend/ncclRecv inside one ncclGroupStart/End per
 *    WAIT (strided regions packed/unpacked by kernels), CUDA kernels for local
 *    steps, a non-blocking communicator so every wait is bounded;
 *  - "cuda-mpi": device buffers and kernels, messages staged through host memory
 *    over the MPI host transport (several ranks sharing one GPU, where NCCL
 *    refuses two ranks of a communicator on one device).
 * Every CUDA and NCCL call is checked; a failure becomes a GError naming it. */
#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "kernels.h"
#include "real.h"
#include "spsim/dtype.h"
#include "spsim/error.h"

G_STATIC_ASSERT(SP_F32 == 0 && SP_F16 == 1 && SP_BF16 == 2 && SP_I32 == 3 && SP_I64 == 4 && SP_U8 == 5);
G_STATIC_ASSERT(SP_RED_SUM == 0 && SP_RED_AVG == 1 && SP_RED_MAX == 2 && SP_RED_MIN == 3);

typedef struct {
  gboolean recv;
  int32_t peer, tag;
  guint seq;         /* posting order */
  void *ptr;         /* device memory NCCL moves (a packed temporary when strided) */
  uint64_t bytes;
  void *host;        /* cuda-mpi: host staging area */
  void *dst;         /* strided or staged recv: final destination */
  uint64_t rows, row_bytes, stride;
} dev_pending;

struct sp_cuda_ctx {
  int rank, world, device;
  double timeout;
  gboolean yield;
  cudaStream_t stream;
  gboolean have_stream;
  ncclComm_t nccl;
  sp_mpi_transport *mpi; /* cuda-mpi */
  GArray *ops;           /* dev_pending */
  GPtrArray *dev_tmp;    /* device temporaries freed after the wait */
  char desc[300];
};

/* ------------------------------------------------------------ error checks */

static gboolean cu_ok(cudaError_t e, const char *call, int rank, GError **err)
{
  if (e == cudaSuccess)
    return TRUE;
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: %s failed: %s (%s)", rank, call,
              cudaGetErrorName(e), cudaGetErrorString(e));
  return FALSE;
}
#define CU(name, args) cu_ok(name args, #name, c->rank, err)

/* Wait until a call on the non-blocking communicator leaves ncclInProgress,
 * bounded by the timeout; on timeout or error the communicator is aborted. */
static gboolean nccl_settle(sp_cuda_ctx *c, ncclResult_t r, const char *call, GError **err)
{
  double deadline = MPI_Wtime() + c->timeout;
  while (r == ncclInProgress && c->nccl != NULL) {
    if (MPI_Wtime() > deadline) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                  "rank %d: timed out after %g s waiting for %s (a peer is gone or the schedule "
                  "deadlocks)",
                  c->rank, c->timeout, call);
      ncclCommAbort(c->nccl);
      c->nccl = NULL;
      return FALSE;
    }
    if (c->yield)
      sched_yield();
    ncclResult_t st = ncclInProgress;
    ncclResult_t q = ncclCommGetAsyncError(c->nccl, &st);
    r = q != ncclSuccess ? q : st;
  }
  if (r == ncclSuccess)
    return TRUE;
  const char *last = c->nccl ? ncclGetLastError(c->nccl) : NULL;
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: %s failed: %s%s%s", c->rank, call,
              ncclGetErrorString(r), last && *last ? ": " : "", last && *last ? last : "");
  if (c->nccl) {
    ncclCommAbort(c->nccl);
    c->nccl = NULL;
  }
  return FALSE;
}

/* Wait for the stream, bounded; NCCL errors surface while polling. */
static gboolean stream_wait(sp_cuda_ctx *c, const char *what, GError **err)
{
  double deadline = MPI_Wtime() + c->timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(c->stream);
    if (e == cudaSuccess)
      return TRUE;
    if (e != cudaErrorNotReady)
      return cu_ok(e, "cudaStreamQuery", c->rank, err);
    if (c->nccl) {
      ncclResult_t st = ncclSuccess;
      if (ncclCommGetAsyncError(c->nccl, &st) == ncclSuccess && st != ncclSuccess &&
          st != ncclInProgress)
        return nccl_settle(c, st, what, err);
    }
    if (MPI_Wtime() > deadline) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                  "rank %d: timed out after %g s waiting for %s on the GPU (a peer is gone or the "
                  "schedule deadlocks)",
                  c->rank, c->timeout, what);
      if (c->nccl) {
        ncclCommAbort(c->nccl);
        c->nccl = NULL;
      }
      return FALSE;
    }
    if (c->yield)
      sched_yield();
  }
}

/* ------------------------------------------------------------ context */

/* Every rank tells whether its GPU is set up; FALSE when any is not. */
static gboolean agree(sp_cuda_ctx *c, MPI_Comm comm, gboolean mine, GError **err)
{
  int in = mine ? 0 : 1, out = 0;
  MPI_Request req;
  if (!sp_mpi_check(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_MAX, comm, &req), "MPI_Iallreduce",
                    c->rank, err) ||
      !sp_mpi_wait_bounded(1, &req, c->timeout, c->yield, c->rank, "the other ranks' GPU setup",
                           NULL, NULL, err))
    return FALSE;
  if (out && mine)
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                "rank %d: another rank failed to set up its GPU (see its message)", c->rank);
  return !out;
}

/* Pick this rank's GPU and create its stream. */
static gboolean setup_device(sp_cuda_ctx *c, gboolean with_nccl, GError **err)
{
  const char *lr = g_getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char *ls = g_getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int local_rank = lr ? atoi(lr) : c->rank, local_size = ls ? atoi(ls) : c->world;
  int ngpu = 0;
  if (!CU(cudaGetDeviceCount, (&ngpu)))
    return FALSE;
  if (ngpu < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: no CUDA device found", c->rank);
    return FALSE;
  }
  if (with_nccl && local_size > ngpu) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                "rank %d: NCCL needs one GPU per rank of a communicator, but this node runs %d "
                "ranks on %d GPU%s; launch at most %d ranks per node, or use --transport cuda-mpi "
                "(CUDA buffers and kernels, messages over MPI)",
                c->rank, local_size, ngpu, ngpu > 1 ? "s" : "", ngpu);
    return FALSE;
  }
  c->device = local_rank % ngpu;
  struct cudaDeviceProp prop;
  if (!CU(cudaSetDevice, (c->device)) || !CU(cudaGetDeviceProperties, (&prop, c->device)) ||
      !CU(cudaStreamCreateWithFlags, (&c->stream, cudaStreamNonBlocking)))
    return FALSE;
  c->have_stream = TRUE;
  g_snprintf(c->desc, sizeof c->desc, "GPU %d: %s", c->device, prop.name);
  return TRUE;
}

sp_cuda_ctx *sp_cuda_ctx_new(MPI_Comm comm, gboolean with_nccl, double timeout, gboolean yield,
                             GError **err)
{
  sp_cuda_ctx *c = g_new0(sp_cuda_ctx, 1);
  MPI_Comm_rank(comm, &c->rank);
  MPI_Comm_size(comm, &c->world);
  c->timeout = timeout;
  c->yield = yield;
  c->ops = g_array_new(FALSE, TRUE, sizeof(dev_pending));
  c->dev_tmp = g_ptr_array_new();

  GError *mine = NULL;
  gboolean ok = setup_device(c, with_nccl, &mine);
  if (!agree(c, comm, ok, ok ? err : NULL) || !ok) {
    if (mine)
      g_propagate_error(err, mine);
    sp_cuda_ctx_free(c);
    return NULL;
  }
  if (with_nccl) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = c->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    int bad = r != ncclSuccess;
    /* rank 0's id (or its failure) reaches every rank */
    MPI_Request req[2];
    if (!sp_mpi_check(MPI_Ibcast(&bad, 1, MPI_INT, 0, comm, &req[0]), "MPI_Ibcast", c->rank, err) ||
        !sp_mpi_check(MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, comm, &req[1]), "MPI_Ibcast",
                      c->rank, err) ||
        !sp_mpi_wait_bounded(2, req, timeout, yield, c->rank, "the NCCL unique id from rank 0",
                             NULL, NULL, err)) {
      sp_cuda_ctx_free(c);
      return NULL;
    }
    if (bad) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: ncclGetUniqueId failed on rank 0%s%s",
                  c->rank, c->rank == 0 ? ": " : "", c->rank == 0 ? ncclGetErrorString(r) : "");
      sp_cuda_ctx_free(c);
      return NULL;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* every call returns at once; nccl_settle bounds the wait */
    r = ncclCommInitRankConfig(&c->nccl, c->world, id, c->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: ncclCommInitRankConfig failed: %s",
                  c->rank, ncclGetErrorString(r));
      c->nccl = NULL;
      sp_cuda_ctx_free(c);
      return NULL;
    }
    if (!nccl_settle(c, r, "ncclCommInitRankConfig", err)) {
      sp_cuda_ctx_free(c);
      return NULL;
    }
  }
  return c;
}

static void drop_pending(sp_cuda_ctx *c)
{
  for (guint i = 0; i < c->ops->len; i++)
    g_free(g_array_index(c->ops, dev_pending, i).host);
  g_array_set_size(c->ops, 0);
  for (guint i = 0; i < c->dev_tmp->len; i++)
    cudaFree(g_ptr_array_index(c->dev_tmp, i));
  g_ptr_array_set_size(c->dev_tmp, 0);
}

void sp_cuda_ctx_free(sp_cuda_ctx *c)
{
  if (c == NULL)
    return;
  drop_pending(c);
  if (c->nccl) {
    ncclResult_t r = ncclCommFinalize(c->nccl);
    if (r == ncclSuccess || r == ncclInProgress) {
      GError *e = NULL;
      if (nccl_settle(c, r, "ncclCommFinalize", &e) && c->nccl)
        ncclCommDestroy(c->nccl);
      g_clear_error(&e);
    } else {
      ncclCommAbort(c->nccl);
    }
  }
  if (c->have_stream)
    cudaStreamDestroy(c->stream);
  g_array_free(c->ops, TRUE);
  g_ptr_array_free(c->dev_tmp, TRUE);
  g_free(c);
}

const char *sp_cuda_ctx_device(const sp_cuda_ctx *c)
{
  return c->desc;
}

gboolean sp_cuda_bufs_new(sp_cuda_ctx *c, guint nb, const uint64_t *bytes, void *const *host,
                          void ***dev_out, GError **err)
{
  void **dev = g_new0(void *, nb + 1);
  for (guint i = 0; i < nb; i++) {
    if (!CU(cudaMalloc, (&dev[i], bytes[i] ? bytes[i] : 1)) ||
        (host && bytes[i] &&
         !CU(cudaMemcpyAsync, (dev[i], host[i], bytes[i], cudaMemcpyHostToDevice, c->stream)))) {
      sp_cuda_bufs_free(c, nb, dev);
      return FALSE;
    }
  }
  /* The uploads are on the rank's stream, so its kernels and copies come after
   * them. A plain cudaMemcpy would not do: from pageable memory it returns once
   * the bytes are staged, before they land, and the rank's non-blocking stream
   * does not wait for the legacy stream that carries it (CUDA Runtime API,
   * "API synchronization behavior"). */
  if (!stream_wait(c, "the upload of the inputs", err)) {
    sp_cuda_bufs_free(c, nb, dev);
    return FALSE;
  }
  *dev_out = dev;
  return TRUE;
}

gboolean sp_cuda_download(sp_cuda_ctx *c, void *host, const void *dev, uint64_t bytes, GError **err)
{
  if (bytes > 0 && !CU(cudaMemcpyAsync, (host, dev, bytes, cudaMemcpyDeviceToHost, c->stream)))
    return FALSE;
  return stream_wait(c, "a device-to-host copy", err);
}

gboolean sp_cuda_upload(sp_cuda_ctx *c, void *dev, const void *host, uint64_t bytes, GError **err)
{
  /* on the rank's stream, after its work and before the next, and landed when
   * this returns (see sp_cuda_bufs_new) */
  if (bytes > 0 && !CU(cudaMemcpyAsync, (dev, host, bytes, cudaMemcpyHostToDevice, c->stream)))
    return FALSE;
  return stream_wait(c, "a host-to-device copy", err);
}

void sp_cuda_bufs_free(sp_cuda_ctx *c, guint nb, void **dev)
{
  (void)c;
  if (dev == NULL)
    return;
  for (guint i = 0; i < nb; i++)
    if (dev[i])
      cudaFree(dev[i]);
  g_free(dev);
}

double sp_cuda_clock(sp_cuda_ctx *c)
{
  cudaStreamSynchronize(c->stream);
  return MPI_Wtime();
}

/* ------------------------------------------------------------ local steps */

static void *dev_alloc(sp_cuda_ctx *c, uint64_t bytes, GError **err)
{
  void *p = NULL;
  if (!CU(cudaMalloc, (&p, bytes ? bytes : 1)))
    return NULL;
  g_ptr_array_add(c->dev_tmp, p);
  return p;
}

/* The integer factor of an integer SCALE, as the host: truncated, clamped, NaN -> 0. */
static int64_t int_factor(double f)
{
  if (f != f)
    return 0;
  if (f >= 9223372036854775807.0)
    return INT64_MAX;
  if (f <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)f;
}

static gboolean cuda_local(void *ctx, const sp_step *s, void *const *bufs, GError **err)
{
  sp_cuda_ctx *c = ctx;
  if (s->kind == SP_STEP_COMPUTE)
    return TRUE;
  if (bufs == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s step: the CUDA transports need buffers",
                sp_step_kind_name(s->kind));
    return FALSE;
  }
  char *dst = (char *)bufs[s->dst.buf] + s->dst.off;
  switch (s->kind) {
  case SP_STEP_COPY: {
    if (s->bytes == 0)
      return TRUE;
    const char *src = (const char *)bufs[s->src.buf] + s->src.off;
    uint64_t rows = s->rows <= 1 ? 1 : s->rows;
    uint64_t rb = rows == 1 ? s->bytes : s->row_bytes;
    uint64_t ss = s->src_stride ? s->src_stride : rb, ds = s->dst_stride ? s->dst_stride : rb;
    uint64_t s_end = s->src.off + (rows - 1) * ss + rb, d_end = s->dst.off + (rows - 1) * ds + rb;
    gboolean overlap = s->src.buf == s->dst.buf && s->src.off < d_end && s->dst.off < s_end;
    if (overlap) { /* memmove semantics: through a temporary */
      char *tmp = dev_alloc(c, rows * rb, err);
      return tmp && sp_cuda_copy2d(tmp, rb, src, ss, rows, rb, c->stream) == cudaSuccess &&
             CU(sp_cuda_copy2d, (dst, ds, tmp, rb, rows, rb, c->stream));
    }
    if (rows == 1)
      return CU(cudaMemcpyAsync, (dst, src, rb, cudaMemcpyDeviceToDevice, c->stream));
    return CU(sp_cuda_copy2d, (dst, ds, src, ss, rows, rb, c->stream));
  }
  case SP_STEP_REDUCE:
    if ((unsigned)s->dtype >= SP_DTYPE_COUNT || (unsigned)s->redop >= SP_REDOP_COUNT) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "reduce step: invalid dtype or operator");
      return FALSE;
    }
    return CU(sp_cuda_reduce, (dst, (const char *)bufs[s->src.buf] + s->src.off, s->count,
                               (int)s->dtype, (int)s->redop, c->stream));
  case SP_STEP_SCALE:
    if ((unsigned)s->dtype >= SP_DTYPE_COUNT) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "scale step: invalid dtype %d", (int)s->dtype);
      return FALSE;
    }
    return CU(sp_cuda_scale, (dst, s->count, (int)s->dtype, (float)s->scale, int_factor(s->scale),
                              s->divide, c->stream));
  case SP_STEP_FILL:
    return s->bytes == 0 || CU(cudaMemsetAsync, (dst, s->fill_byte, s->bytes, c->stream));
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s is not a local step",
                sp_step_kind_name(s->kind));
    return FALSE;
  }
}

/* ------------------------------------------------------------ NCCL transport */

static gboolean check_peer(sp_cuda_ctx *c, int32_t peer, GError **err)
{
  if (peer < 0 || peer >= c->world || peer == c->rank) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d: peer %d is not another rank of the %d launched by mpirun", c->rank, peer,
                c->world);
    return FALSE;
  }
  return TRUE;
}

static gboolean nccl_post(sp_cuda_ctx *c, gboolean recv, int32_t peer, int32_t tag, void *data,
                          uint64_t rows, uint64_t row_bytes, uint64_t stride, GError **err)
{
  if (!check_peer(c, peer, err))
    return FALSE;
  dev_pending p = { .recv = recv, .peer = peer, .tag = tag, .seq = c->ops->len, .ptr = data,
                    .bytes = rows * row_bytes };
  if (rows > 1 && stride != row_bytes && p.bytes > 0) {
    if (!(p.ptr = dev_alloc(c, p.bytes, err)))
      return FALSE;
    if (recv) {
      p.dst = data;
      p.rows = rows;
      p.row_bytes = row_bytes;
      p.stride = stride;
    } else if (!CU(sp_cuda_copy2d, (p.ptr, row_bytes, data, stride, rows, row_bytes, c->stream))) {
      return FALSE;
    }
  }
  g_array_append_val(c->ops, p);
  return TRUE;
}

static gboolean nccl_post_send(void *ctx, int32_t peer, int32_t tag, const void *data,
                               uint64_t rows, uint64_t row_bytes, uint64_t stride, GError **err)
{
  return nccl_post(ctx, FALSE, peer, tag, (void *)data, rows, row_bytes, stride, err);
}

static gboolean nccl_post_recv(void *ctx, int32_t peer, int32_t tag, void *data, uint64_t rows,
                               uint64_t row_bytes, uint64_t stride, GError **err)
{
  return nccl_post(ctx, TRUE, peer, tag, data, rows, row_bytes, stride, err);
}

/* NCCL has no tags: the k-th send to a peer meets the k-th receive from it. Both
 * sides order a block's messages by (peer, tag, posting order), so messages
 * of one block pair up by tag as the program says. */
static gint by_peer_tag(gconstpointer a, gconstpointer b)
{
  const dev_pending *x = a, *y = b;
  if (x->peer != y->peer)
    return x->peer < y->peer ? -1 : 1;
  if (x->tag != y->tag)
    return x->tag < y->tag ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static sp_wait_status nccl_wait_all(void *ctx, GError **err)
{
  sp_cuda_ctx *c = ctx;
  if (c->nccl == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: the NCCL communicator is gone", c->rank);
    return SP_WAIT_ERROR;
  }
  g_array_sort(c->ops, by_peer_tag);
  ncclResult_t r = ncclGroupStart();
  for (guint i = 0; r == ncclSuccess && i < c->ops->len; i++) {
    const dev_pending *p = &g_array_index(c->ops, dev_pending, i);
    if (p->bytes == 0)
      continue;
    r = p->recv ? ncclRecv(p->ptr, p->bytes, ncclUint8, p->peer, c->nccl, c->stream)
                : ncclSend(p->ptr, p->bytes, ncclUint8, p->peer, c->nccl, c->stream);
  }
  ncclResult_t r2 = ncclGroupEnd();
  if (r == ncclSuccess)
    r = r2;
  if (!nccl_settle(c, r, "ncclGroupEnd (ncclSend/ncclRecv)", err))
    return SP_WAIT_ERROR;
  for (guint i = 0; i < c->ops->len; i++) {
    const dev_pending *p = &g_array_index(c->ops, dev_pending, i);
    if (p->recv && p->dst &&
        !CU(sp_cuda_copy2d, (p->dst, p->stride, p->ptr, p->row_bytes, p->rows, p->row_bytes, c->stream)))
      return SP_WAIT_ERROR;
  }
  /* name the first peer we receive from: the likeliest culprit of a timeout */
  const char *what = "ncclSend/ncclRecv";
  g_autofree char *desc = NULL;
  for (guint i = 0; i < c->ops->len; i++) {
    const dev_pending *p = &g_array_index(c->ops, dev_pending, i);
    if (p->recv) {
      desc = g_strdup_printf("recv from rank %d (tag %d)", p->peer, p->tag);
      what = desc;
      break;
    }
  }
  if (!stream_wait(c, what, err))
    return SP_WAIT_ERROR;
  drop_pending(c);
  return SP_WAIT_DONE;
}

static double cuda_clock(void *ctx)
{
  return sp_cuda_clock(ctx);
}

static const sp_transport_ops nccl_ops = {
  .name = "nccl",
  .post_send = nccl_post_send,
  .post_recv = nccl_post_recv,
  .wait_all = nccl_wait_all,
  .local = cuda_local,
  .clock = cuda_clock,
};

sp_transport sp_nccl_transport_get(sp_cuda_ctx *c)
{
  sp_transport t = { &nccl_ops, c };
  return t;
}

/* ------------------------------------------------------------ CUDA + MPI staging */

static gboolean cm_post_send(void *ctx, int32_t peer, int32_t tag, const void *data, uint64_t rows,
                             uint64_t row_bytes, uint64_t stride, GError **err)
{
  sp_cuda_ctx *c = ctx;
  uint64_t bytes = rows * row_bytes;
  dev_pending p = { .recv = FALSE, .peer = peer, .tag = tag, .host = g_malloc(bytes ? bytes : 1) };
  g_array_append_val(c->ops, p);
  const void *src = data;
  if (rows > 1 && stride != row_bytes && bytes > 0) {
    void *tmp = dev_alloc(c, bytes, err);
    if (!tmp || !CU(sp_cuda_copy2d, (tmp, row_bytes, data, stride, rows, row_bytes, c->stream)))
      return FALSE;
    src = tmp;
  }
  if (bytes > 0 &&
      (!CU(cudaMemcpyAsync, (p.host, src, bytes, cudaMemcpyDeviceToHost, c->stream)) ||
       !stream_wait(c, "a device-to-host copy", err)))
    return FALSE;
  sp_transport m = sp_mpi_transport_get(c->mpi);
  return m.ops->post_send(m.ctx, peer, tag, p.host, 1, bytes, bytes, err);
}

static gboolean cm_post_recv(void *ctx, int32_t peer, int32_t tag, void *data, uint64_t rows,
                             uint64_t row_bytes, uint64_t stride, GError **err)
{
  sp_cuda_ctx *c = ctx;
  uint64_t bytes = rows * row_bytes;
  dev_pending p = { .recv = TRUE, .peer = peer, .tag = tag, .host = g_malloc(bytes ? bytes : 1),
                    .dst = data, .bytes = bytes, .rows = rows, .row_bytes = row_bytes,
                    .stride = stride };
  g_array_append_val(c->ops, p);
  sp_transport m = sp_mpi_transport_get(c->mpi);
  return m.ops->post_recv(m.ctx, peer, tag, p.host, 1, bytes, bytes, err);
}

static sp_wait_status cm_wait_all(void *ctx, GError **err)
{
  sp_cuda_ctx *c = ctx;
  sp_transport m = sp_mpi_transport_get(c->mpi);
  sp_wait_status st = m.ops->wait_all(m.ctx, err);
  if (st != SP_WAIT_DONE)
    return st;
  for (guint i = 0; i < c->ops->len; i++) {
    const dev_pending *p = &g_array_index(c->ops, dev_pending, i);
    if (!p->recv || p->bytes == 0)
      continue;
    if (p->rows <= 1 || p->stride == p->row_bytes) {
      if (!CU(cudaMemcpyAsync, (p->dst, p->host, p->bytes, cudaMemcpyHostToDevice, c->stream)))
        return SP_WAIT_ERROR;
    } else {
      void *tmp = dev_alloc(c, p->bytes, err);
      if (!tmp ||
          !CU(cudaMemcpyAsync, (tmp, p->host, p->bytes, cudaMemcpyHostToDevice, c->stream)) ||
          !CU(sp_cuda_copy2d, (p->dst, p->stride, tmp, p->row_bytes, p->rows, p->row_bytes, c->stream)))
        return SP_WAIT_ERROR;
    }
  }
  if (!stream_wait(c, "host-to-device copies", err))
    return SP_WAIT_ERROR;
  drop_pending(c);
  return SP_WAIT_DONE;
}

static const sp_transport_ops cuda_mpi_ops = {
  .name = "cuda-mpi",
  .post_send = cm_post_send,
  .post_recv = cm_post_recv,
  .wait_all = cm_wait_all,
  .local = cuda_local,
  .clock = cuda_clock,
};

sp_transport sp_cuda_mpi_transport_get(sp_cuda_ctx *c, sp_mpi_transport *mpi)
{
  c->mpi = mpi;
  sp_transport t = { &cuda_mpi_ops, c };
  return t;
}

/* ------------------------------------------------------------ NCCL native collectives */

gboolean sp_nccl_native_coll(sp_cuda_ctx *c, const sp_coll_spec *spec, const void *in, void *out,
                             GError **err)
{
  static const ncclDataType_t types[SP_DTYPE_COUNT] = {
    [SP_F32] = ncclFloat32, [SP_F16] = ncclFloat16, [SP_BF16] = ncclBfloat16,
    [SP_I32] = ncclInt32,   [SP_I64] = ncclInt64,   [SP_U8] = ncclUint8,
  };
  static const ncclRedOp_t ops[SP_REDOP_COUNT] = {
    [SP_RED_SUM] = ncclSum, [SP_RED_AVG] = ncclAvg, [SP_RED_MAX] = ncclMax, [SP_RED_MIN] = ncclMin,
  };
  if (c->nccl == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: no NCCL communicator", c->rank);
    return FALSE;
  }
  ncclDataType_t t = types[spec->dtype];
  ncclRedOp_t op = ops[spec->redop];
  size_t n = spec->count;
  int root = spec->ranks[spec->root < spec->n ? spec->root : 0];
  ncclResult_t r = ncclSuccess;
  const char *call = "?";
  switch (spec->coll) {
  case SP_COLL_ALL_REDUCE: call = "ncclAllReduce"; r = ncclAllReduce(in, out, n, t, op, c->nccl, c->stream); break;
  case SP_COLL_ALL_GATHER: call = "ncclAllGather"; r = ncclAllGather(in, out, n, t, c->nccl, c->stream); break;
  case SP_COLL_REDUCE_SCATTER:
    call = "ncclReduceScatter";
    r = ncclReduceScatter(in, out, n, t, op, c->nccl, c->stream);
    break;
  case SP_COLL_ALL_TO_ALL: call = "ncclAlltoAll"; r = ncclAlltoAll(in, out, n, t, c->nccl, c->stream); break;
  case SP_COLL_BROADCAST: call = "ncclBroadcast"; r = ncclBroadcast(in, out, n, t, root, c->nccl, c->stream); break;
  case SP_COLL_REDUCE: call = "ncclReduce"; r = ncclReduce(in, out, n, t, op, root, c->nccl, c->stream); break;
  case SP_COLL_SEND_RECV:
    if (c->rank == spec->ranks[0]) {
      call = "ncclSend";
      r = ncclSend(in, n, t, spec->ranks[1], c->nccl, c->stream);
    } else if (c->rank == spec->ranks[1]) {
      call = "ncclRecv";
      r = ncclRecv(out, n, t, spec->ranks[0], c->nccl, c->stream);
    }
    break;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "--native: no NCCL collective for %s",
                sp_coll_name(spec->coll));
    return FALSE;
  }
  return nccl_settle(c, r, call, err) && stream_wait(c, call, err);
}
