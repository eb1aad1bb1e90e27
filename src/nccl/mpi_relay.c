/* spsim-mpi-relay: MPI for a `spsim PLATFORM.xml` started under mpirun.
 *
 * spsim links SimGrid, whose library exports SMPI's own MPI_* symbols (Debian's
 * libsimgrid 3.32: 387 of them, MPI_Init among them), so it cannot link Open MPI's as
 * well. Each spsim process of `mpirun -np N spsim ...` starts this small program as
 * its child instead: the child inherits the launcher's environment, so MPI_Init makes
 * it that rank of the job, and it moves spsim's bytes over MPI. spsim talks to it
 * through two pipes (file descriptors given as arguments), one request at a time:
 *
 *   relay -> spsim, once:  int32 rank, int32 size
 *   spsim -> relay:        uint32 op, uint64 length, the bytes
 *     GATHER  every rank's bytes to rank 0, which gets size x (uint64 length, bytes)
 *     BCAST   rank 0's bytes (the others send length 0) to the others: uint64 length, bytes
 *     END     MPI_Finalize and exit 0
 *     ABORT   the bytes are a uint32 exit status: MPI_Abort with it (the whole job stops)
 *
 * When spsim goes away without END (its pipe closes), the relay aborts the job, so
 * that no other rank waits for it forever. Plain C and MPI: nothing of SimGrid. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

enum { OP_GATHER = 1, OP_BCAST = 2, OP_END = 3, OP_ABORT = 4 };

/* MPI counts are int: larger messages go in pieces of 1 GiB. */
#define PIECE ((uint64_t)1 << 30)

static int in_fd, out_fd;

/* Wait for a nonblocking collective without spinning: MPI's blocking calls poll at
 * full speed, and the rank waiting for another's share (most of a run's exchanges)
 * would take a core from the spsim processes doing the work. 0.2 ms between tests
 * adds at most that to an exchange. */
static void wait_idle(MPI_Request *req)
{
  int done = 0;
  MPI_Test(req, &done, MPI_STATUS_IGNORE);
  while (!done) {
    struct timespec ts = { 0, 200000 };
    nanosleep(&ts, NULL);
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
  }
}

static void die(const char *what)
{
  fprintf(stderr, "spsim-mpi-relay: %s; stopping the job\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

static void read_full(void *p, uint64_t n)
{
  char *c = p;
  while (n > 0) {
    ssize_t k = read(in_fd, c, n > PIECE ? PIECE : n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) die("spsim stopped before the exchange ended");
    c += k;
    n -= (uint64_t)k;
  }
}

static void write_full(const void *p, uint64_t n)
{
  const char *c = p;
  while (n > 0) {
    ssize_t k = write(out_fd, c, n > PIECE ? PIECE : n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) die("cannot write to spsim");
    c += k;
    n -= (uint64_t)k;
  }
}

static void *alloc(uint64_t n)
{
  void *p = malloc(n > 0 ? n : 1);
  if (p == NULL) die("out of memory");
  return p;
}

static void gather(int rank, int size, char *mine, uint64_t len)
{
  /* the pieces of all ranks together stay below 2^31 bytes (MPI's int displacements) */
  uint64_t piece = (uint64_t)INT32_MAX / (uint64_t)size;
  if (piece > PIECE) piece = PIECE;
  uint64_t *lens = rank == 0 ? alloc(sizeof(uint64_t) * (uint64_t)size) : NULL;
  MPI_Request req;
  MPI_Igather(&len, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req);
  wait_idle(&req);
  char **bufs = NULL;
  uint64_t most = len;
  if (rank == 0) {
    bufs = alloc(sizeof(char *) * (uint64_t)size);
    for (int k = 0; k < size; k++) {
      bufs[k] = alloc(lens[k]);
      if (lens[k] > most) most = lens[k];
    }
  }
  MPI_Ibcast(&most, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req);
  wait_idle(&req);
  /* in pieces: each round moves the next piece of every rank's bytes */
  int *counts = rank == 0 ? alloc(sizeof(int) * (uint64_t)size) : NULL, *displs = rank == 0 ? alloc(sizeof(int) * (uint64_t)size) : NULL;
  char *stage = rank == 0 ? alloc((most < piece ? most : piece) * (uint64_t)size) : NULL;
  for (uint64_t off = 0; off < most; off += piece) {
    uint64_t mine_n = len > off ? (len - off < piece ? len - off : piece) : 0;
    if (rank == 0) {
      int d = 0;
      for (int k = 0; k < size; k++) {
        uint64_t c = lens[k] > off ? (lens[k] - off < piece ? lens[k] - off : piece) : 0;
        counts[k] = (int)c;
        displs[k] = d;
        d += (int)c;
      }
    }
    MPI_Igatherv(mine + (len > off ? off : 0), (int)mine_n, MPI_BYTE, stage, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD,
                 &req);
    wait_idle(&req);
    if (rank == 0)
      for (int k = 0; k < size; k++)
        if (counts[k] > 0) memcpy(bufs[k] + off, stage + displs[k], (size_t)counts[k]);
  }
  if (rank == 0) {
    for (int k = 0; k < size; k++) {
      write_full(&lens[k], sizeof lens[k]);
      write_full(bufs[k], lens[k]);
      free(bufs[k]);
    }
    free(bufs);
  }
  free(stage);
  free(counts);
  free(displs);
  free(lens);
}

static void bcast(int rank, char *buf, uint64_t len)
{
  MPI_Request req;
  MPI_Ibcast(&len, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req);
  wait_idle(&req);
  char *data = rank == 0 ? buf : alloc(len);
  for (uint64_t off = 0; off < len; off += PIECE) {
    MPI_Ibcast(data + off, (int)(len - off < PIECE ? len - off : PIECE), MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_idle(&req);
  }
  if (rank != 0) {
    write_full(&len, sizeof len);
    write_full(data, len);
    free(data);
  }
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "spsim-mpi-relay: spsim starts this program under mpirun (mpirun -np N spsim PLATFORM.xml); "
                    "it is not run by hand\n");
    return 2;
  }
  in_fd = atoi(argv[1]);
  out_fd = atoi(argv[2]);
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int32_t hdr[2] = { rank, size };
  write_full(hdr, sizeof hdr);
  for (;;) {
    uint32_t op;
    uint64_t len;
    read_full(&op, sizeof op);
    read_full(&len, sizeof len);
    char *buf = alloc(len);
    read_full(buf, len);
    switch (op) {
    case OP_GATHER: gather(rank, size, buf, len); break;
    case OP_BCAST: bcast(rank, buf, len); break;
    case OP_END:
      free(buf);
      MPI_Finalize();
      return 0;
    case OP_ABORT: {
      uint32_t code = 1;
      if (len == sizeof code) memcpy(&code, buf, sizeof code);
      free(buf);
      MPI_Abort(MPI_COMM_WORLD, (int)code);
      return (int)code;
    }
    default: free(buf); die("unknown request from spsim");
    }
    free(buf);
  }
}
