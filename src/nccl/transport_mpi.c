/* The MPI host transport: per-rank programs on CPU memory with MPI_Isend /
 * MPI_Irecv. Strided regions are packed into (or received into and unpacked
 * from) temporary buffers; every wait is bounded by a deadline so a dead peer
 * or a deadlocking schedule fails naming the peer instead of hanging. */
#include "config.h"

#include <sched.h>
#include <string.h>

#include "real.h"
#include "spsim/error.h"

/* ------------------------------------------------------------ helpers */

gboolean sp_mpi_check(int rc, const char *call, int rank, GError **err)
{
  if (rc == MPI_SUCCESS)
    return TRUE;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    g_strlcpy(msg, "unknown MPI error", sizeof msg);
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: %s failed: %s", rank, call, msg);
  return FALSE;
}

gboolean sp_mpi_wait_bounded(int n, MPI_Request *reqs, double timeout, gboolean yield, int rank,
                             const char *what, char *(*describe)(void *user, int index),
                             void *user, GError **err)
{
  if (n == 0)
    return TRUE;
  double deadline = MPI_Wtime() + timeout;
  for (;;) {
    int flag = 0;
    int rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      return sp_mpi_check(rc, "MPI_Testall", rank, err);
    if (flag)
      return TRUE;
    if (MPI_Wtime() > deadline)
      break;
    if (yield)
      sched_yield();
  }
  /* name the first request still pending (Request_get_status frees nothing) */
  int first = 0;
  for (int i = 0; i < n; i++) {
    int done = 0;
    if (reqs[i] == MPI_REQUEST_NULL)
      continue;
    if (MPI_Request_get_status(reqs[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
      first = i;
      break;
    }
  }
  char *desc = describe ? describe(user, first) : g_strdup(what);
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: timed out after %g s waiting for %s",
              rank, timeout, desc);
  g_free(desc);
  return FALSE;
}

/* Read a scalar control variable of the MPI library (1, 4 or 8 bytes, unsigned)
 * through the MPI tool interface (MPI 3.1); FALSE when the library has no such
 * variable. */
static gboolean cvar_read(const char *name, uint64_t *out)
{
#if MPI_VERSION < 3 || (MPI_VERSION == 3 && MPI_SUBVERSION < 1)
  (void)name;
  (void)out;
  return FALSE;
#else
  int provided = 0, idx = 0, count = 0, size = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
    return FALSE;
  gboolean ok = FALSE;
  char cname[128], desc[8];
  int name_len = sizeof cname, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype dt;
  MPI_T_enum enumtype;
  MPI_T_cvar_handle h;
  if (MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(idx, cname, &name_len, &verbosity, &dt, &enumtype, desc, &desc_len,
                          &bind, &scope) == MPI_SUCCESS &&
      MPI_Type_size(dt, &size) == MPI_SUCCESS && (size == 1 || size == 4 || size == 8) &&
      MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
    union {
      uint8_t u8;
      uint32_t u32;
      uint64_t u64;
    } v = { .u64 = 0 };
    if (count == 1 && MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
      *out = size == 1 ? v.u8 : size == 4 ? v.u32 : v.u64;
      ok = TRUE;
    }
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return ok;
#endif
}

gboolean sp_mpi_progress_yields(void)
{
  uint64_t v = 0;
  return cvar_read("mpi_yield_when_idle", &v) && v != 0;
}

/* ------------------------------------------------------------ transport */

/* Largest piece one MPI message carries (MPI counts are int). */
#define MAX_PIECE ((uint64_t)1 << 30)

/* Small messages as eager pieces. A message just over the MPI library's eager
 * limit goes by rendezvous: in Open MPI's shared memory a handshake and a
 * process_vm_readv, 2.7 us against 0.7 us for an exchange of 4 KiB on a 2-core
 * VM, which made the ring's 4 KiB steps (8 KiB all-reduce at 2 ranks) 1.3x MPI.
 * A message of at most EAGER_PIECES pieces under the limit is sent as such
 * pieces; above that, the single copy of the rendezvous wins. EAGER_HEADER
 * allows for the library's headers inside the limit (56 bytes in Open MPI 4.1). */
#define EAGER_PIECES 4
#define EAGER_HEADER 64

typedef struct {
  gboolean recv;
  int32_t peer, tag;
  void *tmp;             /* packed copy (send) or landing area (recv) of a strided region */
  void *dst;             /* recv: strided destination */
  uint64_t rows, row_bytes, stride;
} pending;

struct sp_mpi_transport {
  MPI_Comm comm;
  int rank, size;
  int tag_ub;
  uint64_t eager_piece; /* small messages go as pieces of this size (0: whole) */
  double timeout;
  gboolean yield;
  GArray *reqs;  /* MPI_Request, one per message piece */
  GArray *owner; /* guint: index in ops of each request */
  GArray *ops;   /* pending */
};

sp_mpi_transport *sp_mpi_transport_new(MPI_Comm comm, double timeout, gboolean yield, GError **err)
{
  sp_mpi_transport *t = g_new0(sp_mpi_transport, 1);
  t->comm = comm;
  if (!sp_mpi_check(MPI_Comm_rank(comm, &t->rank), "MPI_Comm_rank", -1, err) ||
      !sp_mpi_check(MPI_Comm_size(comm, &t->size), "MPI_Comm_size", -1, err)) {
    g_free(t);
    return NULL;
  }
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  t->tag_ub = flag && ub ? *ub : 32767; /* the standard guarantees at least 32767 */
  t->timeout = timeout;
  t->yield = yield;
  /* the eager limit of the shared-memory transport (Open MPI 4: vader, 5: sm); every
   * rank must cut messages alike, so the ranks agree on the smallest piece */
  uint64_t limit = 0, piece = 0;
  if ((cvar_read("btl_vader_eager_limit", &limit) || cvar_read("btl_sm_eager_limit", &limit)) &&
      limit >= 2 * EAGER_HEADER && limit <= MAX_PIECE)
    piece = limit - EAGER_HEADER;
  MPI_Request req;
  if (!sp_mpi_check(MPI_Iallreduce(&piece, &t->eager_piece, 1, MPI_UINT64_T, MPI_MIN, comm, &req),
                    "MPI_Iallreduce", t->rank, err) ||
      !sp_mpi_wait_bounded(1, &req, timeout, yield, t->rank, "the other ranks' transport setup",
                           NULL, NULL, err)) {
    g_free(t);
    return NULL;
  }
  t->reqs = g_array_new(FALSE, FALSE, sizeof(MPI_Request));
  t->owner = g_array_new(FALSE, FALSE, sizeof(guint));
  t->ops = g_array_new(FALSE, TRUE, sizeof(pending));
  return t;
}

static void drop_pending(sp_mpi_transport *t)
{
  for (guint i = 0; i < t->ops->len; i++)
    g_free(g_array_index(t->ops, pending, i).tmp);
  g_array_set_size(t->ops, 0);
  g_array_set_size(t->reqs, 0);
  g_array_set_size(t->owner, 0);
}

void sp_mpi_transport_free(sp_mpi_transport *t)
{
  if (t == NULL)
    return;
  /* requests still pending after a failure are left to MPI_Abort / MPI_Finalize */
  drop_pending(t);
  g_array_free(t->reqs, TRUE);
  g_array_free(t->owner, TRUE);
  g_array_free(t->ops, TRUE);
  g_free(t);
}

static gboolean check_peer(sp_mpi_transport *t, int32_t peer, int32_t tag, const char *what,
                           GError **err)
{
  if (peer < 0 || peer >= t->size || peer == t->rank) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d: %s peer %d is not another rank of the %d launched by mpirun; launch "
                "as many ranks as the program's world (mpirun -np N)",
                t->rank, what, peer, t->size);
    return FALSE;
  }
  if (tag < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d: %s tag %d is negative", t->rank, what,
                tag);
    return FALSE;
  }
  return TRUE;
}

/* Post one message as pieces of at most MAX_PIECE bytes, or of eager_piece bytes
 * when it is small (both sides cut alike). */
static gboolean post_pieces(sp_mpi_transport *t, gboolean recv, void *data, uint64_t bytes,
                            int32_t peer, int32_t tag, GError **err)
{
  int mtag = (int)((uint32_t)tag % ((uint32_t)t->tag_ub + 1u));
  guint op = t->ops->len - 1;
  uint64_t cut = bytes <= EAGER_PIECES * t->eager_piece ? t->eager_piece : MAX_PIECE;
  uint64_t off = 0;
  do {
    uint64_t piece = MIN(bytes - off, cut);
    MPI_Request r;
    int rc = recv ? MPI_Irecv((char *)data + off, (int)piece, MPI_BYTE, peer, mtag, t->comm, &r)
                  : MPI_Isend((char *)data + off, (int)piece, MPI_BYTE, peer, mtag, t->comm, &r);
    if (!sp_mpi_check(rc, recv ? "MPI_Irecv" : "MPI_Isend", t->rank, err))
      return FALSE;
    g_array_append_val(t->reqs, r);
    g_array_append_val(t->owner, op);
    off += piece;
  } while (off < bytes);
  return TRUE;
}

static gboolean mpi_post_send(void *ctx, int32_t peer, int32_t tag, const void *data,
                              uint64_t rows, uint64_t row_bytes, uint64_t stride, GError **err)
{
  sp_mpi_transport *t = ctx;
  if (!check_peer(t, peer, tag, "send to", err))
    return FALSE;
  if (data == NULL && rows * row_bytes > 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d: the MPI transport moves real bytes; run the program with buffers", t->rank);
    return FALSE;
  }
  pending p = { .recv = FALSE, .peer = peer, .tag = tag };
  const void *src = data;
  uint64_t bytes = rows * row_bytes;
  if (rows > 1 && stride != row_bytes && bytes > 0) {
    p.tmp = g_malloc(bytes);
    sp_pack_host(p.tmp, data, rows, row_bytes, stride);
    src = p.tmp;
  }
  g_array_append_val(t->ops, p);
  return post_pieces(t, FALSE, (void *)src, bytes, peer, tag, err);
}

static gboolean mpi_post_recv(void *ctx, int32_t peer, int32_t tag, void *data, uint64_t rows,
                              uint64_t row_bytes, uint64_t stride, GError **err)
{
  sp_mpi_transport *t = ctx;
  if (!check_peer(t, peer, tag, "receive from", err))
    return FALSE;
  if (data == NULL && rows * row_bytes > 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d: the MPI transport moves real bytes; run the program with buffers", t->rank);
    return FALSE;
  }
  pending p = { .recv = TRUE, .peer = peer, .tag = tag };
  void *land = data;
  uint64_t bytes = rows * row_bytes;
  if (rows > 1 && stride != row_bytes && bytes > 0) {
    p.tmp = g_malloc(bytes);
    p.dst = data;
    p.rows = rows;
    p.row_bytes = row_bytes;
    p.stride = stride;
    land = p.tmp;
  }
  g_array_append_val(t->ops, p);
  return post_pieces(t, TRUE, land, bytes, peer, tag, err);
}

static char *describe_req(void *user, int index)
{
  sp_mpi_transport *t = user;
  guint op = g_array_index(t->owner, guint, index);
  const pending *p = &g_array_index(t->ops, pending, op);
  /* a pending recv says more than a send stuck behind it: prefer the first recv */
  for (guint i = 0; i < t->reqs->len && !p->recv; i++) {
    MPI_Request r = g_array_index(t->reqs, MPI_Request, i);
    const pending *q = &g_array_index(t->ops, pending, g_array_index(t->owner, guint, i));
    int done = 0;
    if (q->recv && r != MPI_REQUEST_NULL &&
        MPI_Request_get_status(r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
      p = q;
  }
  return g_strdup_printf("%s rank %d (tag %d)", p->recv ? "recv from" : "send to", p->peer, p->tag);
}

static sp_wait_status mpi_wait_all(void *ctx, GError **err)
{
  sp_mpi_transport *t = ctx;
  if (!sp_mpi_wait_bounded((int)t->reqs->len, (MPI_Request *)(void *)t->reqs->data, t->timeout,
                           t->yield, t->rank, NULL, describe_req, t, err))
    return SP_WAIT_ERROR;
  for (guint i = 0; i < t->ops->len; i++) {
    const pending *p = &g_array_index(t->ops, pending, i);
    if (p->recv && p->dst != NULL)
      sp_unpack_host(p->dst, p->tmp, p->rows, p->row_bytes, p->stride);
  }
  drop_pending(t);
  return SP_WAIT_DONE;
}

static double mpi_clock(void *ctx)
{
  (void)ctx;
  return MPI_Wtime();
}

static const sp_transport_ops mpi_ops = {
  .name = "mpi",
  .post_send = mpi_post_send,
  .post_recv = mpi_post_recv,
  .wait_all = mpi_wait_all,
  .local = NULL, /* sp_step_run_host: the reference CPU kernels */
  .clock = mpi_clock,
};

sp_transport sp_mpi_transport_get(sp_mpi_transport *t)
{
  sp_transport tr = { &mpi_ops, t };
  return tr;
}
