/* The MPI library's own collectives (MPI_Allreduce, MPI_Alltoall, ...) on the
 * same buffers as a lowered case: the baseline of bench/real-mpi.sh and a
 * tolerance check of the lowered schedules (`spsim-run --transport mpi --native`).
 * f16/bf16 have no MPI type: they travel as 16-bit words reduced by a user
 * MPI_Op running spsim's host arithmetic. AVG is SUM then one division. */
#include "config.h"

#include <string.h>

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

gboolean sp_mpi_native_coll(const sp_coll_spec *spec, MPI_Comm comm, const void *in, void *out,
                            double timeout, gboolean yield, GError **err)
{
  (void)timeout;
  (void)yield;
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
