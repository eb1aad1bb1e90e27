/* The fake device's NCCL (see fakegpu.h): communicators over a duplicate of
 * MPI_COMM_WORLD, point-to-point groups queued on the fake streams, and the
 * native collectives by their NCCL definitions (reductions in rank order with
 * the kernels' element code, so they agree with spsim within --native's
 * tolerance, not bitwise, exactly as real NCCL). */
#include "config.h"

#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fakegpu.h"
#include "kernel_ops.h"

struct ncclComm {
  MPI_Comm comm;
  int rank, size;
  int refs;
  int alive;        /* cleared by abort or failure */
  int initializing; /* non-blocking init: the first state query says in progress */
  ncclResult_t async;
  char last[512];
};

MPI_Comm fake_comm_mpi(ncclComm_t c) { return c->comm; }
int fake_comm_alive(ncclComm_t c) { return c->alive; }
void fake_comm_ref(ncclComm_t c) { c->refs++; }

void fake_comm_unref(ncclComm_t c)
{
  if (--c->refs == 0)
    g_free(c);
}

void fake_comm_fail(ncclComm_t c, ncclResult_t why, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_vsnprintf(c->last, sizeof c->last, fmt, ap);
  va_end(ap);
  c->async = why;
  c->alive = 0;
}

static ncclResult_t usage(ncclComm_t c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static ncclResult_t usage(ncclComm_t c, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  g_vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "fakegpu: %s\n", msg);
  if (c)
    g_strlcpy(c->last, msg, sizeof c->last);
  return ncclInvalidArgument;
}

const char *ncclGetErrorString(ncclResult_t r)
{
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t c)
{
  return c ? c->last : "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
  memset(id, 0, sizeof *id);
  g_strlcpy(id->internal, "spsim fakegpu", sizeof id->internal);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
  int world = 0, me = 0, up = 0;
  MPI_Initialized(&up);
  if (!up)
    return usage(NULL, "ncclCommInitRankConfig: the fake NCCL runs over MPI; call MPI_Init first");
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (nranks != world || rank != me)
    return usage(NULL, "ncclCommInitRankConfig: rank %d of %d, but the fake NCCL only builds "
                 "MPI_COMM_WORLD (rank %d of %d)", rank, nranks, me, world);
  if (strcmp(id.internal, "spsim fakegpu") != 0)
    return usage(NULL, "ncclCommInitRankConfig: the unique id did not come from ncclGetUniqueId "
                 "(was it broadcast from rank 0?)");
  struct ncclComm *c = g_new0(struct ncclComm, 1);
  MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  c->rank = rank;
  c->size = nranks;
  c->refs = 1;
  c->alive = 1;
  c->async = ncclSuccess;
  c->initializing = config && config->blocking == 0;
  *out = c;
  return c->initializing ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
  if (c == NULL)
    return ncclInvalidArgument;
  if (c->initializing) {
    c->initializing = 0;
    *state = ncclInProgress;
  } else {
    *state = c->async;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
  return c ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
  if (c == NULL)
    return ncclInvalidArgument;
  MPI_Comm_free(&c->comm);
  c->alive = 0;
  fake_comm_unref(c);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
  if (c == NULL)
    return ncclSuccess;
  /* the MPI communicator stays: its peers may be gone, so no collective free */
  c->alive = 0;
  fake_comm_unref(c);
  return ncclSuccess;
}

/* ------------------------------------------------------------ point-to-point */

static size_t type_size(ncclDataType_t t)
{
  switch (t) {
  case ncclInt8:
  case ncclUint8: return 1;
  case ncclFloat16:
  case ncclBfloat16: return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32: return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64: return 8;
  default: return 0;
  }
}

/* nccl.h declares these without prototypes */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

static int group_depth;
static GArray *group_ops; /* fake_p2p of the open group */
static ncclComm_t group_comm;
static cudaStream_t group_stream;

ncclResult_t ncclGroupStart(void)
{
  group_depth++;
  return ncclSuccess;
}

static void flush_group(void)
{
  if (group_ops == NULL || group_ops->len == 0)
    return;
  int n = (int)group_ops->len;
  if (fake_inject("nccl"))
    n = -1; /* the group fails when its stream reaches it */
  fake_stream_push_group(group_stream, group_comm, (fake_p2p *)(void *)g_array_free(group_ops, FALSE), n);
  group_ops = NULL;
}

ncclResult_t ncclGroupEnd(void)
{
  if (group_depth == 0)
    return usage(NULL, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth == 0)
    flush_group();
  return ncclSuccess;
}

static ncclResult_t p2p(int recv, void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                        cudaStream_t s)
{
  const char *call = recv ? "ncclRecv" : "ncclSend";
  size_t es = type_size(t), bytes = count * es;
  if (c == NULL || !c->alive)
    return usage(c, "%s: no live communicator", call);
  if (es == 0)
    return usage(c, "%s: data type %d is not emulated", call, (int)t);
  if (peer < 0 || peer >= c->size)
    return usage(c, "%s: peer %d is not a rank of the %d-rank communicator", call, peer, c->size);
  if (bytes > (size_t)G_MAXINT)
    return usage(c, "%s: %zu bytes is more than the fake NCCL carries in one message", call, bytes);
  if (bytes > 0 && !fake_is_device(buf, bytes))
    return usage(c, "%s: buffer %p (%zu bytes) is not device memory", call, buf, bytes);
  if (group_ops && group_ops->len && (group_comm != c || group_stream != s))
    flush_group(); /* one queued group per communicator and stream */
  if (group_ops == NULL)
    group_ops = g_array_new(FALSE, FALSE, sizeof(fake_p2p));
  group_comm = c;
  group_stream = s;
  fake_p2p op = { recv, buf, bytes, peer };
  g_array_append_val(group_ops, op);
  if (group_depth == 0)
    flush_group();
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s)
{
  return p2p(0, (void *)buf, count, t, peer, c, s);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s)
{
  return p2p(1, buf, count, t, peer, c, s);
}

/* ------------------------------------------------------------ native collectives */

/* spsim dtype of an NCCL type with reductions, or -1. */
static int spk_type(ncclDataType_t t)
{
  switch (t) {
  case ncclFloat32: return SPK_F32;
  case ncclFloat16: return SPK_F16;
  case ncclBfloat16: return SPK_BF16;
  case ncclInt32: return SPK_I32;
  case ncclInt64: return SPK_I64;
  case ncclUint8: return SPK_U8;
  default: return -1;
  }
}

/* Collectives run at the call, after the stream's earlier work (it is drained
 * first), with every rank's input gathered over MPI. */
typedef enum { C_ALL_REDUCE, C_ALL_GATHER, C_REDUCE_SCATTER, C_ALL_TO_ALL, C_BROADCAST, C_REDUCE } ckind;

static ncclResult_t collective(ckind k, const char *call, const void *in, void *out, size_t count,
                               ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                               cudaStream_t s)
{
  size_t es = type_size(t);
  int n = c ? c->size : 0;
  if (c == NULL || !c->alive)
    return usage(c, "%s: no live communicator", call);
  if (es == 0)
    return usage(c, "%s: data type %d is not emulated", call, (int)t);
  int dt = spk_type(t);
  int reduces = k == C_ALL_REDUCE || k == C_REDUCE_SCATTER || k == C_REDUCE;
  if (reduces && (dt < 0 || (int)op < 0 || (int)op > (int)ncclMin))
    return usage(c, "%s: type %d / operator %d are not emulated", call, (int)t, (int)op);
  if ((k == C_BROADCAST || k == C_REDUCE) && (root < 0 || root >= n))
    return usage(c, "%s: root %d is not a rank of %d", call, root, n);
  /* input and output sizes by NCCL's definitions (count is per rank for AG, RS, A2A) */
  size_t in_n = k == C_REDUCE_SCATTER || k == C_ALL_TO_ALL ? count * n : count;
  size_t out_n = k == C_ALL_GATHER || k == C_ALL_TO_ALL ? count * n : count;
  size_t in_b = in_n * es, out_b = out_n * es;
  int needs_in = !(k == C_BROADCAST && c->rank != root);
  int writes_out = !(k == C_REDUCE && c->rank != root);
  if (in_b > (size_t)G_MAXINT / (size_t)n)
    return usage(c, "%s: %zu bytes per rank is more than the fake NCCL gathers", call, in_b);
  if (needs_in && in_b && !fake_is_device(in, in_b))
    return usage(c, "%s: send buffer %p (%zu bytes) is not device memory", call, in, in_b);
  if (writes_out && out_b && !fake_is_device(out, out_b))
    return usage(c, "%s: receive buffer %p (%zu bytes) is not device memory", call, out, out_b);
  if (cudaStreamSynchronize(s) != cudaSuccess)
    return ncclUnhandledCudaError;

  /* every rank's input, in rank order (the broadcast's root only) */
  char *all = g_malloc0(in_b * n + 1);
  char *mine = g_malloc0(in_b + 1);
  if (needs_in)
    memcpy(mine, in, in_b);
  if (MPI_Allgather(mine, (int)in_b, MPI_BYTE, all, (int)in_b, MPI_BYTE, c->comm) != MPI_SUCCESS) {
    g_free(all);
    g_free(mine);
    fake_comm_fail(c, ncclSystemError, "%s: MPI_Allgather failed", call);
    return ncclSystemError;
  }
  char *res = g_malloc0(out_b + 1);
  size_t seg = count * es; /* one rank's share */
  switch (k) {
  case C_ALL_GATHER: memcpy(res, all, out_b); break;
  case C_BROADCAST: memcpy(res, all + (size_t)root * in_b, out_b); break;
  case C_ALL_TO_ALL:
    for (int r = 0; r < n; r++)
      memcpy(res + (size_t)r * seg, all + (size_t)r * in_b + (size_t)c->rank * seg, seg);
    break;
  default: { /* reductions, rank 0 first */
    size_t at = k == C_REDUCE_SCATTER ? (size_t)c->rank * seg : 0;
    int sop = op == ncclMax ? SPK_MAX : op == ncclMin ? SPK_MIN : SPK_SUM;
    memcpy(res, all + at, out_b);
    for (int r = 1; r < n; r++)
      fake_reduce(res, all + (size_t)r * in_b + at, out_n, dt, sop);
    if (op == ncclAvg)
      fake_scale(res, out_n, dt, (float)n, n, 1);
  }
  }
  if (writes_out)
    memcpy(out, res, out_b);
  g_free(all);
  g_free(mine);
  g_free(res);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *in, void *out, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
  return collective(C_ALL_REDUCE, "ncclAllReduce", in, out, count, t, op, 0, c, s);
}

ncclResult_t ncclAllGather(const void *in, void *out, size_t count, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s)
{
  return collective(C_ALL_GATHER, "ncclAllGather", in, out, count, t, ncclSum, 0, c, s);
}

ncclResult_t ncclReduceScatter(const void *in, void *out, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
  return collective(C_REDUCE_SCATTER, "ncclReduceScatter", in, out, count, t, op, 0, c, s);
}

ncclResult_t ncclAlltoAll(const void *in, void *out, size_t count, ncclDataType_t t, ncclComm_t c,
                          cudaStream_t s)
{
  return collective(C_ALL_TO_ALL, "ncclAlltoAll", in, out, count, t, ncclSum, 0, c, s);
}

ncclResult_t ncclBroadcast(const void *in, void *out, size_t count, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t s)
{
  return collective(C_BROADCAST, "ncclBroadcast", in, out, count, t, ncclSum, root, c, s);
}

ncclResult_t ncclReduce(const void *in, void *out, size_t count, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t c, cudaStream_t s)
{
  return collective(C_REDUCE, "ncclReduce", in, out, count, t, op, root, c, s);
}
