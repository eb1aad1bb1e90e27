/* spsim-run's private interface: its configuration, the world it runs in and the
 * runner, shared by the launcher (run.c), the agreement of flags across ranks
 * (run_agree.c) and the execution of cases (run_exec.c). */
#ifndef SPSIM_NCCL_RUN_PRIV_H
#define SPSIM_NCCL_RUN_PRIV_H


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "real.h"
#include "spsim/coll.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/ops.h"
#include "spsim/program.h"
#include "spsim/units.h"
#include "spsim/verify.h"

enum { EXIT_MISMATCH = 1, EXIT_USAGE = 2, EXIT_DIED = 3, EXIT_TRANSPORT = 4 };

typedef enum { TR_MPI = 0, TR_NCCL, TR_CUDA_MPI, TR_COUNT } transport_kind;
extern const char *const transport_names[TR_COUNT];

/* Defaults shared with `spsim verify`: elements per rank and --timeout. */
#define DEFAULT_COUNT 1024
#define DEFAULT_TIMEOUT 60.0

typedef struct run_op run_op;

typedef struct {
  const run_op *op;                /* a collective, or NULL for a graph operation */
  const sp_op_verify_entry *graph; /* a graph operation of `spsim verify --op` (spsim/ops.h) */
  const char *op_opts;             /* --moe: the graph operation's options (interned; NULL: none) */
  sp_dtype dtype;
  sp_algo algo;
  sp_redop redop;
  transport_kind transport;
  uint64_t count;      /* elements per rank (0: from size_bytes) */
  uint64_t size_bytes; /* --size */
  int32_t ranks;       /* --ranks (0: the launched world) */
  int32_t root;
  uint64_t chunk;
  gboolean checksum, time, native;
  gboolean list;       /* --op list: print the operations and stop */
  gboolean version;    /* --version: print it and stop */
  int iters, warmup;
  uint64_t lo, hi; /* --sizes */
  double timeout;
  /* hidden fault injection for the tests */
  int debug_die_rank, debug_corrupt_rank, debug_hang_rank;
  gboolean debug_flag_mismatch, debug_deadlock;
  /* --step: the communication of a training step (run_step.c) */
  gboolean step;
  const char *model, *layout; /* --model, --layout (interned) */
  int64_t seq, global_batch;
  int32_t micro_batch;   /* 0: the layout's mb= or 1 */
  int32_t gpus_per_node; /* 0: the world if at most 8, else 8 */
  int32_t world;         /* --world: GPUs of the layout (0: the launched ranks) */
  gboolean dry_compute;  /* --dry-compute: the reduced replay of the communication only */
  gboolean device_cuda;  /* --device cuda: the compute kernels on the GPU with cuBLAS */
  const char *trace;     /* --trace FILE: the measured step as a Chrome trace */
  gboolean compare;      /* --compare: the measured step beside spsim's prediction */
  const char *platform;  /* --platform FILE for --compare (interned; NULL: measure one) */
  int debug_die_mid_rank; /* hidden: this rank exits in the middle of the measured step */
  double debug_mem_avail; /* hidden: bytes of memory available instead of /proc/meminfo's */
  /* --probe: measure this machine for `spsim platform local` (run_probe.c) */
  gboolean probe;
} run_config;

/* One operation spsim-run can run: how to build this rank's case for a count.
 * Collectives share build_coll; sequence-parallel operations add entries here. */
struct run_op {
  const char *name;
  sp_coll coll;        /* the collective (native runs and bench sizes) */
  sp_case *(*build)(const run_config *cfg, uint64_t count, int32_t world, int32_t rank,
                    GError **err);
};


typedef struct {
  int rank, world;
  gboolean yield;     /* oversubscribed: yield the processor while polling a GPU */
  gboolean mpi_yield; /* ... and in MPI waits, unless MPI's own progress yields */
  double timeout; /* bound of every wait (the default until flags are agreed) */
} world_info;

/* The executing side of a rank: transport + device state. */
typedef struct {
  run_config *cfg;
  world_info *w;
  sp_mpi_transport *mpi;
#ifdef SP_HAVE_CUDA
  sp_cuda_ctx *cuda;
#endif
  sp_transport tr;
} runner;


/* run.c: the element count of @p bytes per rank, and back (nccl-tests' conventions). */
uint64_t count_for(sp_coll c, uint64_t bytes, int32_t n, size_t es);
uint64_t bytes_for(sp_coll c, uint64_t count, int32_t n, size_t es);

/* run_agree.c */
void allreduce_max(world_info *w, uint64_t *vals, int n, const char *what);
gboolean agree_ok(world_info *w, GError *local_err, const char *stage);
gboolean agree_flags(world_info *w, const run_config *cfg, GError *parse_err);

/* run_exec.c: the four ways of running; each returns the exit code. */
int run_single(runner *r);
int run_graph(runner *r);
int run_timed(runner *r);
int run_deadlock(runner *r);

/* run_exec.c: shared by run_step.c */
G_NORETURN void die_transport(world_info *w, GError *err);
gboolean gather_verdicts(runner *r, gboolean member, gboolean ok, uint64_t sum, GString *bad, int *nbad);
void barrier(runner *r);

/* run_step.c: --step */
int run_step(runner *r);

/* run_compare.c: --compare, the prediction of the step by spsim on @p platform (--platform,
 * or NULL: the platform of this machine written from @p probe_json, the probe's output
 * measured in this job) */
int step_compare(runner *r, const char *platform, const char *probe_json, const char *model, const char *layout,
                 const double *exposed, const double *busy, double step_s);

/* run_probe.c: --probe; run_probe_json: the same measurements on every rank, the JSON
 * object (rank 0) appended to @p out; FALSE (rank 0 said why) with fewer than 2 ranks
 * or no OpenBLAS */
int run_probe(runner *r);
gboolean run_probe_json(runner *r, GString *out);

#endif
