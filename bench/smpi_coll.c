/* Peer benchmark for SimGrid's SMPI (bench/smpi.sh): one MPI_Allreduce or
 * MPI_Alltoall of S bytes (nccl-tests convention: all-to-all S = whole buffer per
 * rank) on every rank, timed in simulated seconds. Buffers come from
 * SMPI_SHARED_MALLOC (no real copies) and the reduction is a no-op user op, so
 * SMPI, like spsim's cost mode, prices communication only.
 * Usage: smpi_coll allreduce|alltoall BYTES; rank 0 prints "time_s=<t>". */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void noop(void *in, void *inout, int *len, MPI_Datatype *dt)
{
  (void)in; (void)inout; (void)len; (void)dt;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: smpi_coll allreduce|alltoall BYTES\n");
    MPI_Finalize();
    return 2;
  }
  long long bytes = atoll(argv[2]);
  int a2a = strcmp(argv[1], "alltoall") == 0;
  long long count = bytes / 4; /* floats */
  if (a2a) count = count / n * n;
  float *in = SMPI_SHARED_MALLOC((size_t)count * 4);
  float *out = SMPI_SHARED_MALLOC((size_t)count * 4);
  MPI_Op op;
  MPI_Op_create(noop, 1, &op);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  if (a2a) MPI_Alltoall(in, (int)(count / n), MPI_FLOAT, out, (int)(count / n), MPI_FLOAT, MPI_COMM_WORLD);
  else MPI_Allreduce(in, out, (int)count, MPI_FLOAT, op, MPI_COMM_WORLD);
  double t = MPI_Wtime() - t0, tmax = 0;
  MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("time_s=%.9f\n", tmax);
  MPI_Op_free(&op);
  SMPI_SHARED_FREE(in);
  SMPI_SHARED_FREE(out);
  MPI_Finalize();
  return 0;
}
