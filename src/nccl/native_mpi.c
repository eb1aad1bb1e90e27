/* The MPI library's own collectives (MPI_Allreduce, MPI_Alltoall, ...) on the
 * same buffers as a lowered case: the baseline of bench/real-mpi.sh and a
 * tolerance check of the lowered schedules (`spsim-run --transport mpi --native`).
 * f16/bf16 have no MPI type: they travel as 16-bit words reduced by a user
 * MPI_Op running spsim's host arithmetic. AVG is SUM then one division.
 * The calls are the blocking ones (the library's tuned algorithms, the fair
 * baseline); an alarm bounds each by --timeout. */
#define _POSIX_C_SOURCE 200809L /* sigaction, alarm */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "real.h"
#include "spsim/dtype.h"
#include "spsim/error.h"

/* MPI user functions get no user pointer: the element type and operator of the
 * (single-threaded) call in flight. */
static sp_dtype user_dtype;
static sp_redop user_redop;

static void user_reduce(void *in, void *inout, int *len, MPI_Datatype *dt)
{
  (void)dt;
  sp_reduce_host(inout, in, (size_t)*len, user_dtype, user_redop);
}

static gboolean int_count(uint64_t c, int *out, const sp_coll_spec *spec, GError **err)
{
  if (c > (uint64_t)G_MAXINT) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s: %" G_GUINT64_FORMAT " elements exceed what one MPI call takes (%d); use a "
                "smaller --count for --native",
                sp_coll_name(spec->coll), c, G_MAXINT);
    return FALSE;
  }
  *out = (int)c;
  return TRUE;
}

/* The watchdog of the blocking calls: SIGALRM, re-armed at most every
 * timeout/2 (an alarm syscall per call would cost a microsecond, as much as a
 * small collective), set to 1.5 x timeout: a call stuck for the timeout ends
 * the process within another half. The message is written before arming, as
 * a signal handler may only write(2) and _exit(2). */
static char alarm_msg[256];
static size_t alarm_len;
static gboolean armed;
static gint64 armed_at;

static void on_alarm(int sig)
{
  (void)sig;
  ssize_t w = write(STDERR_FILENO, alarm_msg, alarm_len);
  (void)w;
  _exit(4); /* a transport failure (spsim-run's exit status 4); mpirun ends the job */
}

static void arm(const char *call, int rank, double timeout)
{
  gint64 now = g_get_monotonic_time();
  if (armed && (double)(now - armed_at) < timeout * G_USEC_PER_SEC / 2)
    return;
  int n = snprintf(alarm_msg, sizeof alarm_msg,
                   "spsim-run: rank %d: no progress for %g s in %s (--native): a peer is gone "
                   "or stopped\n", rank, timeout, call);
  alarm_len = n > 0 ? MIN((size_t)n, sizeof alarm_msg - 1) : 0;
  static gboolean installed;
  if (!installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    installed = TRUE;
  }
  alarm((unsigned)MIN(ceil(1.5 * timeout), 1e6));
  armed = TRUE;
  armed_at = now;
}

void sp_mpi_native_disarm(void)
{
  if (armed)
    alarm(0);
  armed = FALSE;
}

gboolean sp_mpi_native_coll(const sp_coll_spec *spec, MPI_Comm comm, const void *in, void *out,
                            double timeout, gboolean yield, GError **err)
{
  (void)yield; /* the library's blocking calls poll as the library does */
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (spec->coll != SP_COLL_SEND_RECV) {
    gboolean whole = spec->n == size;
    for (int32_t i = 0; whole && i < spec->n; i++)
      whole = spec->ranks[i] == i;
    if (!whole) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "--native runs %s on every launched rank in order; the group differs",
                  sp_coll_name(spec->coll));
      return FALSE;
    }
  }
  int count;
  if (!int_count(spec->count, &count, spec, err))
    return FALSE;

  /* element type and operator */
  MPI_Datatype dt = MPI_BYTE;
  MPI_Op op = MPI_SUM;
  gboolean user = FALSE;
  switch (spec->dtype) {
  case SP_F32: dt = MPI_FLOAT; break;
  case SP_I32: dt = MPI_INT32_T; break;
  case SP_I64: dt = MPI_INT64_T; break;
  case SP_U8: dt = MPI_UINT8_T; break;
  default: dt = MPI_UINT16_T; user = TRUE; break;
  }
  switch (spec->redop) {
  case SP_RED_MAX: op = MPI_MAX; break;
  case SP_RED_MIN: op = MPI_MIN; break;
  default: op = MPI_SUM; break;
  }
  gboolean reducing = spec->coll == SP_COLL_ALL_REDUCE || spec->coll == SP_COLL_REDUCE_SCATTER ||
                      spec->coll == SP_COLL_REDUCE;
  if (user && reducing) {
    user_dtype = spec->dtype;
    user_redop = spec->redop;
    if (!sp_mpi_check(MPI_Op_create(user_reduce, 1, &op), "MPI_Op_create", rank, err))
      return FALSE;
  }

  int rc = MPI_SUCCESS;
  const char *call = "?";
  int root = spec->ranks[spec->root < spec->n ? spec->root : 0];
  size_t es = sp_dtype_size(spec->dtype);
  static const char *const calls[SP_COLL_COUNT] = {
    [SP_COLL_ALL_REDUCE] = "MPI_Allreduce", [SP_COLL_ALL_GATHER] = "MPI_Allgather",
    [SP_COLL_REDUCE_SCATTER] = "MPI_Reduce_scatter_block", [SP_COLL_ALL_TO_ALL] = "MPI_Alltoall",
    [SP_COLL_BROADCAST] = "MPI_Bcast", [SP_COLL_REDUCE] = "MPI_Reduce",
    [SP_COLL_SEND_RECV] = "MPI_Send/MPI_Recv",
  };
  if ((unsigned)spec->coll < SP_COLL_COUNT && calls[spec->coll])
    arm(calls[spec->coll], rank, timeout);
  switch (spec->coll) {
  case SP_COLL_ALL_REDUCE:
    call = "MPI_Allreduce";
    rc = MPI_Allreduce(in, out, count, dt, op, comm);
    break;
  case SP_COLL_ALL_GATHER:
    call = "MPI_Allgather";
    rc = MPI_Allgather(in, count, dt, out, count, dt, comm);
    break;
  case SP_COLL_REDUCE_SCATTER:
    call = "MPI_Reduce_scatter_block";
    rc = MPI_Reduce_scatter_block(in, out, count, dt, op, comm);
    break;
  case SP_COLL_ALL_TO_ALL:
    call = "MPI_Alltoall";
    rc = MPI_Alltoall(in, count, dt, out, count, dt, comm);
    break;
  case SP_COLL_BROADCAST:
    call = "MPI_Bcast";
    if (rank == root)
      memcpy(out, in, spec->count * es);
    rc = MPI_Bcast(out, count, dt, root, comm);
    break;
  case SP_COLL_REDUCE:
    call = "MPI_Reduce";
    rc = MPI_Reduce(in, rank == root ? out : NULL, count, dt, op, root, comm);
    break;
  case SP_COLL_SEND_RECV:
    if (rank == spec->ranks[0]) {
      call = "MPI_Send";
      rc = MPI_Send(in, count, dt, spec->ranks[1], 0, comm);
    } else if (rank == spec->ranks[1]) {
      call = "MPI_Recv";
      rc = MPI_Recv(out, count, dt, spec->ranks[0], 0, comm, MPI_STATUS_IGNORE);
    }
    break;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "--native: no MPI collective for %s",
                sp_coll_name(spec->coll));
    rc = MPI_ERR_OTHER;
    break;
  }
  if (user && reducing)
    MPI_Op_free(&op);
  if (rc != MPI_SUCCESS)
    return err && *err ? FALSE : sp_mpi_check(rc, call, rank, err);

  if (spec->redop == SP_RED_AVG && reducing && (spec->coll != SP_COLL_REDUCE || rank == root)) {
    sp_scale_host(out, spec->count, spec->dtype, (double)spec->n, TRUE);
  }
  return TRUE;
}
