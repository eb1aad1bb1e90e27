/* spsim-run: the real backend's launcher program.
 *
 *   mpirun -np N spsim-run --op all-reduce [--dtype f32] [--count C | --size BYTES]
 *          [--algo A] [--redop sum] [--transport mpi|nccl|cuda-mpi] [--checksum]
 *          [--time [--iters K] [--warmup W] [--sizes MIN:MAX]] [--native] [--timeout SEC]
 *   mpirun -np N spsim-run --op GRAPH-OP [--checksum] [--timeout SEC]
 *
 * GRAPH-OP is an operation of `spsim verify --op` (sp_ops_verify_table(): ulysses-
 * attention, tp-mlp, pipeline-1f1b, ...): every process builds the same whole case
 * (world = MPI size, groups as `spsim verify`), runs its rank's program over the MPI
 * host transport with the data kernels on COMPUTE steps and checks its own outputs.
 *
 * Every process builds only its own program (the same lowering as `spsim
 * verify`), fills its input with the shared pattern, runs the program over the
 * chosen transport, checks its output against the reference, and rank 0 prints
 * the canonical checksum lines (gathered in rank order) and PASS/FAIL. With
 * --time it prints measured times in the table shape of `spsim bench`.
 *
 * Faults: flags are compared across ranks before anything runs; every MPI wait
 * is bounded by --timeout; a rank that fails prints "spsim-run: rank R: ..." and
 * aborts the job. Exit codes: 0 pass, 1 wrong result, 2 bad flags, 3 rank died
 * on purpose (--debug-die-rank), 4 transport failure or timeout. */
#include "config.h"

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
static const char *const transport_names[TR_COUNT] = { "mpi", "nccl", "cuda-mpi" };

/* ------------------------------------------------------------ configuration */

typedef struct run_op run_op;

typedef struct {
  const run_op *op;                /* a collective, or NULL for a graph operation */
  const sp_op_verify_entry *graph; /* a graph operation of `spsim verify --op` (spsim/ops.h) */
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
  int iters, warmup;
  uint64_t lo, hi; /* --sizes */
  double timeout;
  /* hidden fault injection for the tests */
  int debug_die_rank, debug_corrupt_rank, debug_hang_rank;
  gboolean debug_flag_mismatch, debug_deadlock;
} run_config;

/* One operation spsim-run can run: how to build this rank's case for a count.
 * Collectives share build_coll; sequence-parallel operations add entries here. */
struct run_op {
  const char *name;
  sp_coll coll;        /* the collective (native runs and bench sizes) */
  sp_case *(*build)(const run_config *cfg, uint64_t count, int32_t world, int32_t rank,
                    GError **err);
};

/* The group of a collective on @p world ranks: every rank, in order; send-recv
 * goes from rank 0 to the last rank (as `spsim bench` and `spsim verify`). */
static int32_t *group_of(sp_coll coll, int32_t world, int32_t *n)
{
  if (coll == SP_COLL_SEND_RECV) {
    int32_t *g = g_new(int32_t, 2);
    g[0] = 0;
    g[1] = world - 1;
    *n = 2;
    return g;
  }
  *n = world;
  return sp_group_range(0, 1, world);
}

static void fill_spec(const run_config *cfg, sp_coll coll, uint64_t count, const int32_t *ranks,
                      int32_t n, sp_coll_spec *spec)
{
  memset(spec, 0, sizeof *spec);
  spec->coll = coll;
  spec->algo = cfg->algo;
  spec->dtype = cfg->dtype;
  spec->redop = cfg->redop;
  spec->ranks = ranks;
  spec->n = n;
  spec->count = count;
  spec->root = cfg->root;
  spec->chunk_bytes = cfg->chunk;
}

static sp_case *build_coll(const run_config *cfg, uint64_t count, int32_t world, int32_t rank,
                           GError **err)
{
  if (cfg->op->coll == SP_COLL_SEND_RECV && world < 2) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "send-recv goes from rank 0 to the last rank: launch 2 or more (mpirun -np 2)");
    return NULL;
  }
  int32_t n;
  g_autofree int32_t *ranks = group_of(cfg->op->coll, world, &n);
  sp_coll_spec spec;
  fill_spec(cfg, cfg->op->coll, count, ranks, n, &spec);
  return sp_case_new_coll_rank(&spec, world, rank, TRUE, err);
}

static const run_op run_ops[] = {
  { "all-reduce", SP_COLL_ALL_REDUCE, build_coll },
  { "all-gather", SP_COLL_ALL_GATHER, build_coll },
  { "reduce-scatter", SP_COLL_REDUCE_SCATTER, build_coll },
  { "all-to-all", SP_COLL_ALL_TO_ALL, build_coll },
  { "broadcast", SP_COLL_BROADCAST, build_coll },
  { "reduce", SP_COLL_REDUCE, build_coll },
  { "send-recv", SP_COLL_SEND_RECV, build_coll },
};

static const run_op *find_op(const char *s, GError **err)
{
  for (size_t i = 0; i < G_N_ELEMENTS(run_ops); i++)
    if (g_ascii_strcasecmp(s, run_ops[i].name) == 0)
      return &run_ops[i];
  /* accept the collective parser's aliases too */
  sp_coll c;
  if (sp_coll_parse(s, &c, NULL))
    for (size_t i = 0; i < G_N_ELEMENTS(run_ops); i++)
      if (run_ops[i].coll == c)
        return &run_ops[i];
  GString *names = g_string_new(NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(run_ops); i++)
    g_string_append_printf(names, "%s%s", i ? ", " : "", run_ops[i].name);
  for (const sp_op_verify_entry *e = sp_ops_verify_table(); e->name; e++)
    g_string_append_printf(names, ", %s", e->name);
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown --op '%s': use one of %s", s, names->str);
  g_string_free(names, TRUE);
  return NULL;
}

/* `--op list`: every operation with one line on what it checks. */
static void list_ops(void)
{
  for (size_t i = 0; i < G_N_ELEMENTS(run_ops); i++)
    printf("%-22s %s\n", run_ops[i].name, sp_coll_semantics(run_ops[i].coll));
  for (const sp_op_verify_entry *e = sp_ops_verify_table(); e->name; e++)
    printf("%-22s %s\n", e->name, e->help);
}

/* One size: "8", "64K", "1M", "8G" (sp_size_parse). */
static gboolean parse_size(const char *flag, const char *s, uint64_t *out, GError **err)
{
  if (!sp_size_parse(s, out, NULL)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s '%s': expected a non-negative integer with an optional K, M or G suffix "
                "(e.g. 4096 or 64M)",
                flag, s);
    return FALSE;
  }
  return TRUE;
}

/* Elements per rank for a message size S in bytes, as `spsim bench` (nccl-tests):
 * all-gather, reduce-scatter and all-to-all take S as the whole gathered buffer. */
static uint64_t count_for(sp_coll c, uint64_t bytes, int32_t n, size_t es)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return bytes / es / (uint64_t)n;
  default: return bytes / es;
  }
}

static uint64_t bytes_for(sp_coll c, uint64_t count, int32_t n, size_t es)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return count * es * (uint64_t)n;
  default: return count * es;
  }
}

/* Defaults shared with `spsim verify`. */
#define DEFAULT_COUNT 1024
#define DEFAULT_TIMEOUT 60.0

static gboolean parse_args(int argc, char **argv, run_config *cfg, GError **err)
{
  g_autofree char *op_s = NULL, *coll_s = NULL, *dtype_s = NULL, *algo_s = NULL, *redop_s = NULL,
                  *transport_s = NULL, *size_s = NULL, *sizes_s = NULL, *chunk_s = NULL;
  gint64 count = G_MININT64; /* not given */
  gint ranks = 0, root = 0, iters = 20, warmup = 5, die = -1, corrupt = -1, hang = -1;
  double timeout = DEFAULT_TIMEOUT;
  gboolean checksum = FALSE, time_ = FALSE, native = FALSE, mismatch = FALSE, deadlock = FALSE;
  GOptionEntry entries[] = {
    { "op", 'o', 0, G_OPTION_ARG_STRING, &op_s,
      "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, send-recv, or a "
      "graph operation of `spsim verify --op` (ulysses-attention, tp-mlp, ring-attention, ...); "
      "`list` lists them", "OP" },
    { "coll", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &coll_s, "alias of --op", "OP" },
    { "dtype", 'd', 0, G_OPTION_ARG_STRING, &dtype_s, "f32 (default), f16, bf16, i32, i64, u8", "T" },
    { "count", 'c', 0, G_OPTION_ARG_INT64, &count, "elements per rank (default 1024; all-gather, reduce-scatter, all-to-all: 1024 / ranks)", "C" },
    { "size", 0, 0, G_OPTION_ARG_STRING, &size_s,
      "elements per rank given in bytes (K, M, G suffixes) instead of --count", "BYTES" },
    { "ranks", 'n', 0, G_OPTION_ARG_INT, &ranks, "expected world size (default: mpirun -np)", "N" },
    { "algo", 'a', 0, G_OPTION_ARG_STRING, &algo_s, "auto (default), ring, tree, direct", "A" },
    { "redop", 'r', 0, G_OPTION_ARG_STRING, &redop_s, "sum (default), avg, max, min", "OP" },
    { "root", 0, 0, G_OPTION_ARG_INT, &root, "group index of the root (broadcast, reduce)", "I" },
    { "chunk", 0, 0, G_OPTION_ARG_STRING, &chunk_s, "ring pipelining chunk in bytes (default 4 MiB)", "BYTES" },
    { "transport", 't', 0, G_OPTION_ARG_STRING, &transport_s,
      "mpi (default: host memory), nccl (NCCL + CUDA), cuda-mpi (CUDA buffers, MPI messages)", "T" },
    { "checksum", 0, 0, G_OPTION_ARG_NONE, &checksum, "print the per-rank checksums", NULL },
    { "time", 0, 0, G_OPTION_ARG_NONE, &time_, "measure time per size (spsim bench table)", NULL },
    { "iters", 0, 0, G_OPTION_ARG_INT, &iters, "timed iterations per size (default 20)", "K" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed iterations per size (default 5)", "W" },
    { "sizes", 's', 0, G_OPTION_ARG_STRING, &sizes_s, "MIN:MAX bytes for --time (default 8:64M)", "RANGE" },
    { "native", 0, 0, G_OPTION_ARG_NONE, &native,
      "run the library's own collective (MPI_Allreduce, ncclAllReduce, ...) instead of the lowered "
      "schedule; compared with a tolerance", NULL },
    { "timeout", 0, 0, G_OPTION_ARG_DOUBLE, &timeout, "seconds any wait may take (default 60)", "SEC" },
    { "debug-die-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &die, "", "R" },
    { "debug-hang-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &hang, "", "R" },
    { "debug-corrupt-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &corrupt, "", "R" },
    { "debug-flag-mismatch", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &mismatch, "", NULL },
    { "debug-deadlock", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &deadlock, "", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- run spsim's lowered programs under mpirun");
  g_option_context_set_summary(ctx,
      "Launch with mpirun; every rank runs its own program and checks it against the reference.\n"
      "Example: mpirun -np 4 spsim-run --op all-reduce --dtype bf16 --count 4096 --checksum");
  g_option_context_add_main_entries(ctx, entries, NULL);
  if (!g_option_context_parse(ctx, &argc, &argv, err))
    return FALSE;
  if (argc > 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unexpected argument '%s'", argv[1]);
    return FALSE;
  }
  if (op_s == NULL && coll_s == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--op is required (e.g. --op all-reduce)");
    return FALSE;
  }
  if (g_strcmp0(op_s ? op_s : coll_s, "list") == 0) {
    cfg->list = TRUE;
    return TRUE;
  }
  cfg->graph = sp_ops_verify_lookup(op_s ? op_s : coll_s);
  if (!cfg->graph && !(cfg->op = find_op(op_s ? op_s : coll_s, err)))
    return FALSE;
  cfg->dtype = SP_F32;
  if (dtype_s && !sp_dtype_parse(dtype_s, &cfg->dtype, err))
    return FALSE;
  cfg->algo = SP_ALGO_AUTO;
  if (algo_s && !sp_algo_parse(algo_s, &cfg->algo, err))
    return FALSE;
  cfg->redop = SP_RED_SUM;
  if (redop_s && !sp_redop_parse(redop_s, &cfg->redop, err))
    return FALSE;
  cfg->transport = TR_MPI;
  if (transport_s) {
    int k = -1;
    for (int i = 0; i < TR_COUNT; i++)
      if (g_ascii_strcasecmp(transport_s, transport_names[i]) == 0)
        k = i;
    if (k < 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "unknown --transport '%s': use mpi, nccl or cuda-mpi", transport_s);
      return FALSE;
    }
    cfg->transport = (transport_kind)k;
  }
  if (count != G_MININT64 && size_s) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "give --count or --size, not both");
    return FALSE;
  }
  if (count != G_MININT64 && count < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--count must be at least 1 (got %" G_GINT64_FORMAT ")",
                count);
    return FALSE;
  }
  cfg->count = count != G_MININT64 ? (uint64_t)count : 0; /* 0: the default (default_count) */
  if (size_s && !parse_size("--size", size_s, &cfg->size_bytes, err))
    return FALSE;
  if (size_s && cfg->size_bytes % sp_dtype_size(cfg->dtype) != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--size %" G_GUINT64_FORMAT " is not a multiple of the %s element size (%zu bytes)",
                cfg->size_bytes, sp_dtype_name(cfg->dtype), sp_dtype_size(cfg->dtype));
    return FALSE;
  }
  if (chunk_s && !parse_size("--chunk", chunk_s, &cfg->chunk, err))
    return FALSE;
  if (ranks < 0 || root < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--%s must be >= 0", ranks < 0 ? "ranks" : "root");
    return FALSE;
  }
  if (cfg->graph) {
    /* graph operations: the sizes and groups of `spsim verify --op` (fixed small
     * shapes), host memory; reject what would be silently ignored */
    const char *bad = count != G_MININT64 ? "--count" : size_s ? "--size" : dtype_s ? "--dtype" : algo_s ? "--algo"
                      : redop_s ? "--redop" : chunk_s ? "--chunk" : root ? "--root" : time_ ? "--time"
                      : native ? "--native" : NULL;
    if (bad) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s does not apply to the graph operation '%s' (its sizes, types and groups are "
                  "fixed, as in `spsim verify --op %s`)", bad, cfg->graph->name, cfg->graph->name);
      return FALSE;
    }
  }
  cfg->ranks = ranks;
  cfg->root = root;
  cfg->checksum = checksum;
  cfg->time = time_;
  cfg->native = native;
  if (iters < 1 || warmup < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--iters must be >= 1 and --warmup >= 0");
    return FALSE;
  }
  cfg->iters = iters;
  cfg->warmup = warmup;
  cfg->lo = 8;
  cfg->hi = (uint64_t)64 << 20;
  if (sizes_s) {
    if (!sp_size_range_parse(sizes_s, &cfg->lo, &cfg->hi, err)) {
      g_prefix_error(err, "--sizes: ");
      return FALSE;
    }
    if (cfg->lo == 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--sizes '%s': need 1 <= MIN <= MAX", sizes_s);
      return FALSE;
    }
  }
  if (!(timeout > 0) || timeout > 1e6) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--timeout must be in (0, 1e6] seconds");
    return FALSE;
  }
  cfg->timeout = timeout;
  cfg->debug_die_rank = die;
  cfg->debug_hang_rank = hang;
  cfg->debug_corrupt_rank = corrupt;
  cfg->debug_flag_mismatch = mismatch;
  cfg->debug_deadlock = deadlock;
  return TRUE;
}

/* ------------------------------------------------------------ agreement across ranks */

typedef struct {
  const char *flag;
  char *value;
} field;

#define N_FIELDS 17

/* The configuration as (flag, canonical value) pairs; every rank must agree. */
static void config_fields(const run_config *c, field *f)
{
  int i = 0;
#define F(name, ...) (f[i].flag = name, f[i].value = g_strdup_printf(__VA_ARGS__), i++)
  F("--op", "%s", c->graph ? c->graph->name : c->op ? c->op->name : "");
  F("--dtype", "%s", sp_dtype_name(c->dtype));
  F("--algo", "%s", sp_algo_name(c->algo));
  F("--redop", "%s", sp_redop_name(c->redop));
  F("--transport", "%s", transport_names[c->transport]);
  F("--count", "%" G_GUINT64_FORMAT, c->count);
  F("--size", "%" G_GUINT64_FORMAT, c->size_bytes);
  F("--ranks", "%d", c->ranks);
  F("--root", "%d", c->root);
  F("--chunk", "%" G_GUINT64_FORMAT, c->chunk);
  F("--checksum", "%d", c->checksum);
  F("--time", "%d", c->time);
  F("--native", "%d", c->native);
  F("--iters", "%d/%d", c->iters, c->warmup);
  F("--sizes", "%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT, c->lo, c->hi);
  F("--timeout", "%.17g", c->timeout);
  F("--debug-deadlock", "%d", c->debug_deadlock);
#undef F
  g_assert(i == N_FIELDS);
}

typedef struct {
  int rank, world;
  gboolean yield;     /* oversubscribed: yield the processor while polling a GPU */
  gboolean mpi_yield; /* ... and in MPI waits, unless MPI's own progress yields */
  double timeout; /* bound of every wait (the default until flags are agreed) */
} world_info;

/* Allreduce(MAX) of @p n values, bounded by the timeout; a failure aborts the job. */
static void allreduce_max(world_info *w, uint64_t *vals, int n, const char *what)
{
  g_autofree uint64_t *out = g_new(uint64_t, n);
  MPI_Request req;
  GError *err = NULL;
  if (!sp_mpi_check(MPI_Iallreduce(vals, out, n, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &req),
                    "MPI_Iallreduce", w->rank, &err) ||
      !sp_mpi_wait_bounded(1, &req, w->timeout, w->mpi_yield, w->rank, what, NULL, NULL, &err)) {
    fprintf(stderr, "spsim-run: %s\n", err->message);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, EXIT_TRANSPORT);
  }
  memcpy(vals, out, sizeof(uint64_t) * (size_t)n);
}

/* Every rank says whether it is fine; returns TRUE when all are. A failing rank
 * prints its own message, prefixed by its rank. */
static gboolean agree_ok(world_info *w, GError *local_err, const char *stage)
{
  uint64_t failed = local_err != NULL;
  if (local_err && g_str_has_prefix(local_err->message, "rank ")) {
    fprintf(stderr, "spsim-run: %s\n", local_err->message);
    fflush(stderr);
  } else if (local_err) {
    fprintf(stderr, "spsim-run: rank %d: %s\n", w->rank, local_err->message);
    fflush(stderr);
  }
  allreduce_max(w, &failed, 1, stage);
  return failed == 0;
}

/* Compare the parsed flags of every rank; FALSE (and rank 0 explains) when they differ. */
static gboolean agree_flags(world_info *w, const run_config *cfg, GError *parse_err)
{
  field f[N_FIELDS];
  config_fields(cfg, f);
  uint64_t vals[2 * N_FIELDS + 2];
  for (int i = 0; i < N_FIELDS; i++) {
    uint64_t h = sp_checksum(0, f[i].value, strlen(f[i].value));
    vals[i] = h;
    vals[N_FIELDS + i] = ~h; /* max of ~h = ~(min of h) */
  }
  vals[2 * N_FIELDS] = parse_err != NULL;                        /* someone failed to parse */
  vals[2 * N_FIELDS + 1] = parse_err != NULL && w->rank == 0;    /* rank 0 did */
  allreduce_max(w, vals, 2 * N_FIELDS + 2, "the other ranks' flags");
  gboolean ok = TRUE;
  if (vals[2 * N_FIELDS]) {
    /* flags are normally the same everywhere: rank 0 speaks for all; a rank
     * failing alone speaks for itself */
    if (parse_err && w->rank == 0)
      fprintf(stderr, "spsim-run: %s\n", parse_err->message);
    else if (parse_err && !vals[2 * N_FIELDS + 1])
      fprintf(stderr, "spsim-run: rank %d: %s\n", w->rank, parse_err->message);
    ok = FALSE;
  } else {
    GString *diff = g_string_new(NULL);
    int first = -1;
    for (int i = 0; i < N_FIELDS; i++)
      if (vals[i] != ~vals[N_FIELDS + i]) {
        g_string_append_printf(diff, "%s%s", diff->len ? ", " : "", f[i].flag);
        if (first < 0)
          first = i;
      }
    if (first >= 0) {
      if (w->rank == 0)
        fprintf(stderr,
                "spsim-run: ranks disagree on flags (%s differ%s between ranks; rank 0 has %s %s); "
                "launch every rank with the same arguments\n",
                diff->str, strchr(diff->str, ',') ? "" : "s", f[first].flag, f[first].value);
      ok = FALSE;
    }
    g_string_free(diff, TRUE);
  }
  for (int i = 0; i < N_FIELDS; i++)
    g_free(f[i].value);
  fflush(stderr);
  return ok;
}

/* ------------------------------------------------------------ running one case */

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

/* Device copies of a case's buffers (CUDA transports) or the host ones. */
typedef struct {
  void *const *host;
  void **dev;
  guint nb;
} run_bufs;

static gboolean bufs_prepare(runner *r, const sp_case *c, run_bufs *b, GError **err)
{
  sp_program *p = sp_case_program(c, r->w->rank);
  b->host = sp_case_bufs(c, r->w->rank);
  b->dev = NULL;
  b->nb = p ? p->bufs->len : 0;
  if (r->cfg->transport == TR_MPI)
    return TRUE;
#ifdef SP_HAVE_CUDA
  g_autofree uint64_t *bytes = g_new0(uint64_t, b->nb + 1);
  for (guint i = 0; i < b->nb; i++)
    bytes[i] = g_array_index(p->bufs, sp_buffer, i).bytes;
  return sp_cuda_bufs_new(r->cuda, b->nb, bytes, b->host, &b->dev, err);
#else
  (void)err;
  return FALSE;
#endif
}

static void bufs_release(runner *r, run_bufs *b)
{
#ifdef SP_HAVE_CUDA
  if (b->dev)
    sp_cuda_bufs_free(r->cuda, b->nb, b->dev);
#else
  (void)r;
#endif
  b->dev = NULL;
}

/* Copy the out buffer back to host memory (CUDA transports). */
static gboolean bufs_fetch_out(runner *r, const sp_case *c, run_bufs *b, GError **err)
{
  if (b->dev == NULL || b->nb < 2 || sp_case_member(c, r->w->rank) < 0)
    return TRUE;
#ifdef SP_HAVE_CUDA
  return sp_cuda_download(r->cuda, b->host[1], b->dev[1], sp_case_out_bytes(c), err);
#else
  (void)err;
  return TRUE;
#endif
}

static double run_clock(runner *r)
{
#ifdef SP_HAVE_CUDA
  if (r->cuda)
    return sp_cuda_clock(r->cuda);
#else
  (void)r;
#endif
  return MPI_Wtime();
}

/* One execution of this rank's part of @p c (lowered program or native call). */
static gboolean run_once(runner *r, const sp_case *c, run_bufs *b, GError **err)
{
  int32_t rank = r->w->rank;
  void *const *bufs = b->dev ? (void *const *)b->dev : b->host;
  if (r->cfg->native) {
    if (sp_case_member(c, rank) < 0) /* no buffers; MPI/NCCL calls involve members only */
      return TRUE;
    const sp_coll_spec *spec = sp_case_spec(c);
    if (r->cfg->transport == TR_NCCL) {
#ifdef SP_HAVE_CUDA
      return sp_nccl_native_coll(r->cuda, spec, bufs ? bufs[0] : NULL, bufs ? bufs[1] : NULL, err);
#endif
    }
    if (r->cfg->transport != TR_MPI) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "--native runs MPI's collectives on --transport mpi or NCCL's on --transport nccl");
      return FALSE;
    }
    static char dummy[8];
    return sp_mpi_native_coll(spec, MPI_COMM_WORLD, bufs ? bufs[0] : dummy, bufs ? bufs[1] : dummy,
                              r->cfg->timeout, r->w->mpi_yield, err);
  }
  const sp_program *p = sp_case_program(c, rank);
  return sp_exec_run(p, &r->tr, bufs, NULL, err);
}

/* A transport failure ends the job: print, then MPI_Abort (the peers may be
 * blocked waiting for this rank). */
G_NORETURN static void die_transport(world_info *w, GError *err)
{
  if (g_str_has_prefix(err->message, "rank "))
    fprintf(stderr, "spsim-run: %s; aborting the job\n", err->message);
  else
    fprintf(stderr, "spsim-run: rank %d: %s; aborting the job\n", w->rank, err->message);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, EXIT_TRANSPORT);
  exit(EXIT_TRANSPORT);
}

/* Native collectives reduce in their own order: compare with a tolerance. */
static gboolean check_tolerance(const sp_case *c, int32_t rank, const void *got, GError **err)
{
  const void *exp = sp_case_expected(c, rank);
  if (exp == NULL)
    return TRUE;
  const sp_coll_spec *spec = sp_case_spec(c);
  size_t es = sp_dtype_size(spec->dtype);
  uint64_t n = sp_case_out_bytes(c) / es;
  double rtol = spec->dtype == SP_F32 ? 1e-5 : 1e-2;
  for (uint64_t i = 0; i < n; i++) {
    const unsigned char *g = (const unsigned char *)got + i * es;
    const unsigned char *e = (const unsigned char *)exp + i * es;
    gboolean same;
    double a = 0, x = 0;
    if (spec->dtype == SP_F32 || spec->dtype == SP_F16 || spec->dtype == SP_BF16) {
      if (spec->dtype == SP_F32) {
        float fa, fx;
        memcpy(&fa, g, 4);
        memcpy(&fx, e, 4);
        a = fa;
        x = fx;
      } else {
        uint16_t ha, hx;
        memcpy(&ha, g, 2);
        memcpy(&hx, e, 2);
        a = spec->dtype == SP_F16 ? sp_f16_to_f32(ha) : sp_bf16_to_f32(ha);
        x = spec->dtype == SP_F16 ? sp_f16_to_f32(hx) : sp_bf16_to_f32(hx);
      }
      same = (isnan(a) && isnan(x)) || a == x || fabs(a - x) <= rtol * fmax(fabs(a), fabs(x)) + 1e-6;
    } else {
      same = memcmp(g, e, es) == 0;
    }
    if (!same) {
      g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                  "%s (native, %s): rank %d out element %" G_GUINT64_FORMAT " is %g, expected %g "
                  "(relative tolerance %g)",
                  sp_coll_name(spec->coll), sp_dtype_name(spec->dtype), rank, i, a, x, rtol);
      return FALSE;
    }
  }
  return TRUE;
}

/* Gather every rank's (member, ok, checksum) to rank 0, which prints the canonical
 * checksum lines of the members (with --checksum) and lists the failing members in
 * @p bad (rank 0 only; *nbad of them). Returns TRUE when no rank failed (the same
 * on every rank). */
static gboolean gather_verdicts(runner *r, gboolean member, gboolean ok, uint64_t sum, GString *bad,
                                int *nbad)
{
  world_info *w = r->w;
  int32_t rank = w->rank;
  GError *err = NULL;
  uint64_t mine[3] = { (uint64_t)member, (uint64_t)ok, sum };
  g_autofree uint64_t *all = rank == 0 ? g_new0(uint64_t, 3 * (size_t)w->world) : NULL;
  MPI_Request req;
  if (!sp_mpi_check(MPI_Igather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req),
                    "MPI_Igather", rank, &err) ||
      !sp_mpi_wait_bounded(1, &req, r->cfg->timeout, w->mpi_yield, rank, "the checksums of the other ranks",
                           NULL, NULL, &err))
    die_transport(w, err);
  uint64_t failed = !ok;
  allreduce_max(w, &failed, 1, "the other ranks' verdicts");
  *nbad = 0;
  if (rank == 0) {
    if (r->cfg->checksum) {
      g_autofree int32_t *ranks = g_new(int32_t, w->world);
      g_autofree uint64_t *sums = g_new(uint64_t, w->world);
      size_t k = 0;
      for (int i = 0; i < w->world; i++)
        if (all[3 * i]) {
          ranks[k] = i;
          sums[k++] = all[3 * i + 2];
        }
      sp_checksum_print_lines(stdout, ranks, sums, k);
    }
    for (int i = 0; i < w->world; i++)
      if (all[3 * i] && !all[3 * i + 1]) {
        g_string_append_printf(bad, "%s%d", *nbad ? ", " : "", i);
        (*nbad)++;
      }
  }
  return failed == 0;
}

/* Check this rank's result, gather checksums to rank 0, print lines and verdict.
 * Returns the exit code (the same on every rank). */
static int report_case(runner *r, const sp_case *c, const run_bufs *b)
{
  world_info *w = r->w;
  int32_t rank = w->rank;
  GError *err = NULL;
  gboolean member = sp_case_member(c, rank) >= 0;
  gboolean ok = TRUE;
  if (member) {
    if (r->cfg->native)
      ok = check_tolerance(c, rank, b->host[1], &err);
    else
      ok = sp_case_check(c, NULL, NULL, &err);
  }
  if (!ok) {
    fprintf(stderr, "spsim-run: rank %d: FAIL: %s\n", rank, err->message);
    fflush(stderr);
    g_clear_error(&err);
  }
  GString *bad = g_string_new(NULL);
  int nbad = 0;
  gboolean failed = !gather_verdicts(r, member, ok, sp_case_checksum(c, rank), bad, &nbad);
  if (rank == 0) {
    const sp_coll_spec *spec = sp_case_spec(c);
    const char *algo = r->cfg->native ? "native" : sp_algo_name(sp_algo_choose(spec));
    if (nbad == 0)
      printf("PASS %s %s %s %s count=%" G_GUINT64_FORMAT " ranks=%d transport=%s\n",
             r->cfg->op->name, algo, sp_dtype_name(spec->dtype), sp_redop_name(spec->redop),
             spec->count, w->world, transport_names[r->cfg->transport]);
    else
      printf("FAIL %s %s %s %s count=%" G_GUINT64_FORMAT " ranks=%d transport=%s: rank%s %s "
             "differ%s from the reference\n",
             r->cfg->op->name, algo, sp_dtype_name(spec->dtype), sp_redop_name(spec->redop),
             spec->count, w->world, transport_names[r->cfg->transport], nbad > 1 ? "s" : "",
             bad->str, nbad > 1 ? "" : "s");
    fflush(stdout);
  }
  g_string_free(bad, TRUE);
  return failed ? EXIT_MISMATCH : 0;
}

/* The per-rank count of a single run, as `spsim verify`: --size / element size,
 * --count, or 1024 (all-gather, reduce-scatter, all-to-all: 1024 / n, at least 1). */
static uint64_t single_count(const run_config *cfg, int32_t world)
{
  if (cfg->size_bytes)
    return cfg->size_bytes / sp_dtype_size(cfg->dtype);
  if (cfg->count)
    return cfg->count;
  int32_t n = cfg->op->coll == SP_COLL_SEND_RECV ? 2 : world;
  switch (cfg->op->coll) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return MAX(1, DEFAULT_COUNT / (uint64_t)n);
  default: return DEFAULT_COUNT;
  }
}

static int run_single(runner *r)
{
  world_info *w = r->w;
  GError *err = NULL;
  sp_case *c = r->cfg->op->build(r->cfg, single_count(r->cfg, w->world), w->world, w->rank, &err);
  run_bufs b = { 0 };
  if (c && !bufs_prepare(r, c, &b, &err)) {
    sp_case_free(c);
    c = NULL;
  }
  /* lowering errors are the same on every rank: rank 0 alone explains them */
  if (err && w->rank != 0 && err->domain == SP_ERROR && err->code != SP_ERROR_TRANSPORT)
    g_clear_error(&err), err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "(see rank 0)");
  /* 2: a device or transport failure (exit 4), 1: bad input (exit 2) */
  uint64_t failed = err == NULL ? 0 : err->domain == SP_ERROR && err->code == SP_ERROR_TRANSPORT ? 2 : 1;
  allreduce_max(w, &failed, 1, "the other ranks to build their programs");
  if (failed) {
    if (err && (w->rank == 0 || strcmp(err->message, "(see rank 0)") != 0))
      fprintf(stderr, "spsim-run: %s\n", err->message);
    g_clear_error(&err);
    bufs_release(r, &b);
    sp_case_free(c);
    return failed == 2 ? EXIT_TRANSPORT : EXIT_USAGE;
  }
  if (r->cfg->debug_die_rank == w->rank) {
    fprintf(stderr, "spsim-run: rank %d: exiting with status %d before communicating "
            "(--debug-die-rank)\n", w->rank, EXIT_DIED);
    fflush(stderr);
    exit(EXIT_DIED);
  }
  if (r->cfg->debug_hang_rank == w->rank) { /* alive, never communicating: the others' bounds */
    fprintf(stderr, "spsim-run: rank %d: hanging before communicating (--debug-hang-rank)\n", w->rank);
    fflush(stderr);
    for (;;)
      g_usleep(G_USEC_PER_SEC);
  }
  if (!run_once(r, c, &b, &err) || !bufs_fetch_out(r, c, &b, &err))
    die_transport(w, err);
  sp_mpi_native_disarm();
  if (r->cfg->debug_corrupt_rank == w->rank && sp_case_member(c, w->rank) >= 0 &&
      sp_case_out_bytes(c) > 0)
    ((unsigned char *)b.host[1])[sp_case_out_bytes(c) - 1] ^= 1; /* a wrong result */
  int rc = report_case(r, c, &b);
  bufs_release(r, &b);
  sp_case_free(c);
  return rc;
}

/* The group size `spsim verify --op` uses for a graph operation on @p world ranks:
 * the largest divisor of the world not above 64. */
static int32_t graph_group(int32_t world)
{
  int32_t group = 1;
  for (int32_t d = 1; d <= 64 && d <= world; d++)
    if (world % d == 0)
      group = d;
  return group;
}

#ifdef SP_HAVE_CUDA
/* COMPUTE steps of a graph on a CUDA transport: the model kernels (attention,
 * matmuls) exist on the host only, so the rank's buffers go to the host, the
 * host kernel runs, and they come back. Messages and local steps (copies,
 * reductions, padding) stay on the device. */
typedef struct {
  sp_cuda_ctx *cuda;
  sp_graph_case *c;
  void *const *host;
  const uint64_t *bytes;
  guint nb;
} staged_compute;

static gboolean stage(staged_compute *sc, void *const *dev, gboolean down, GError **err)
{
  for (guint i = 0; i < sc->nb; i++)
    if (sc->host[i] && sc->bytes[i] &&
        !(down ? sp_cuda_download(sc->cuda, sc->host[i], dev[i], sc->bytes[i], err)
               : sp_cuda_upload(sc->cuda, dev[i], sc->host[i], sc->bytes[i], err)))
      return FALSE;
  return TRUE;
}

static gboolean compute_staged(void *ud, int32_t rank, const sp_step *s, void *const *dev,
                               GError **err)
{
  staged_compute *sc = ud;
  return stage(sc, dev, TRUE, err) && sp_graph_case_compute(sc->c, rank, s, sc->host, err) &&
         stage(sc, dev, FALSE, err);
}
#endif

/* Run this rank's program of a graph case; its outputs end in the host buffers. */
static gboolean run_graph_program(runner *r, sp_graph_case *c, const sp_program *p,
                                  void *const *host, GError **err)
{
  if (r->cfg->transport == TR_MPI)
    return sp_exec_run_compute(p, &r->tr, host, NULL, sp_graph_case_compute, c, err);
#ifdef SP_HAVE_CUDA
  guint nb = p->bufs->len;
  g_autofree uint64_t *bytes = g_new0(uint64_t, nb + 1);
  for (guint i = 0; i < nb; i++)
    bytes[i] = host[i] ? g_array_index(p->bufs, sp_buffer, i).bytes : 0;
  void **dev = NULL;
  if (!sp_cuda_bufs_new(r->cuda, nb, bytes, host, &dev, err))
    return FALSE;
  staged_compute sc = { r->cuda, c, host, bytes, nb };
  gboolean ok = sp_exec_run_compute(p, &r->tr, dev, NULL, compute_staged, &sc, err) &&
                stage(&sc, dev, TRUE, err);
  sp_cuda_bufs_free(r->cuda, nb, dev);
  return ok;
#else
  g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "this spsim-run was built without CUDA");
  return FALSE;
#endif
}

/* A graph operation (sp_ops_verify_table): every process builds the whole case
 * deterministically (world = MPI size, the groups of `spsim verify --op`), runs
 * its own rank's lowered program over the chosen transport with the case's data
 * kernels on COMPUTE steps, and judges its own rank against the reference. */
static int run_graph(runner *r)
{
  world_info *w = r->w;
  const run_config *cfg = r->cfg;
  GError *err = NULL;
  const int32_t group = graph_group(w->world);
  sp_graph_case *c = sp_ops_verify_case_new(cfg->graph->name, w->world, group, &err);
  /* building is deterministic, so errors are the same on every rank: rank 0 explains */
  uint64_t failed = c == NULL;
  allreduce_max(w, &failed, 1, "the other ranks to build their programs");
  if (failed) {
    if (err && w->rank == 0)
      fprintf(stderr, "spsim-run: %s\n", err->message);
    else if (err == NULL && c == NULL)
      fprintf(stderr, "spsim-run: rank %d: could not build '%s'\n", w->rank, cfg->graph->name);
    g_clear_error(&err);
    sp_graph_case_free(c);
    return EXIT_USAGE;
  }
  if (cfg->debug_die_rank == w->rank) {
    fprintf(stderr, "spsim-run: rank %d: exiting with status %d before communicating "
            "(--debug-die-rank)\n", w->rank, EXIT_DIED);
    fflush(stderr);
    exit(EXIT_DIED);
  }
  const sp_program *p = sp_graph_case_progs(c)[w->rank];
  void *const *bufs = sp_graph_case_bufs(c)[w->rank];
  if (!run_graph_program(r, c, p, bufs, &err))
    die_transport(w, err);
  if (cfg->debug_corrupt_rank == w->rank)
    sp_graph_case_corrupt(c, w->rank); /* a wrong result (no-op on a rank without outputs) */
  gboolean member = sp_graph_case_has_outputs(c, w->rank);
  gboolean ok = sp_graph_case_check_rank(c, w->rank, NULL, &err);
  if (!ok) {
    if (err && g_str_has_prefix(err->message, "rank "))
      fprintf(stderr, "spsim-run: FAIL: %s\n", err->message);
    else
      fprintf(stderr, "spsim-run: rank %d: FAIL: %s\n", w->rank, err ? err->message : "?");
    fflush(stderr);
    g_clear_error(&err);
  }
  GString *bad = g_string_new(NULL);
  int nbad = 0;
  gboolean pass = gather_verdicts(r, member, ok, sp_graph_case_checksum(c, w->rank), bad, &nbad);
  if (w->rank == 0) {
    if (pass)
      printf("PASS %s graph bytes=%" G_GUINT64_FORMAT " ranks=%d group=%d transport=%s\n",
             cfg->graph->name, sp_graph_case_bytes(c), w->world, group, transport_names[cfg->transport]);
    else
      printf("FAIL %s graph bytes=%" G_GUINT64_FORMAT " ranks=%d group=%d transport=%s: rank%s %s "
             "differ%s from the reference\n",
             cfg->graph->name, sp_graph_case_bytes(c), w->world, group, transport_names[cfg->transport],
             nbad > 1 ? "s" : "", bad->str, nbad > 1 ? "" : "s");
    fflush(stdout);
  }
  g_string_free(bad, TRUE);
  sp_graph_case_free(c);
  return pass ? 0 : EXIT_MISMATCH;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Barrier bounded by the timeout. */
static void barrier(runner *r)
{
  MPI_Request req;
  GError *err = NULL;
  if (!sp_mpi_check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier", r->w->rank, &err) ||
      !sp_mpi_wait_bounded(1, &req, r->cfg->timeout, r->w->mpi_yield, r->w->rank,
                           "the other ranks at a barrier", NULL, NULL, &err))
    die_transport(r->w, err);
}

static int run_timed(runner *r)
{
  world_info *w = r->w;
  const run_config *cfg = r->cfg;
  sp_coll coll = cfg->op->coll;
  int32_t n = coll == SP_COLL_SEND_RECV ? 2 : w->world;
  size_t es = sp_dtype_size(cfg->dtype);
  double factor = sp_coll_busbw_factor(coll, n);
  int rc = 0;
  if (w->rank == 0) {
    printf("# spsim-run (measured): %s, %d ranks, transport %s%s, algo %s, dtype %s, "
           "%d iterations after %d warm-up (median per rank, max over ranks)\n",
           cfg->op->name, w->world, transport_names[cfg->transport],
           cfg->native ? " (native collective)" : "", cfg->native ? "native" : sp_algo_name(cfg->algo),
           sp_dtype_name(cfg->dtype), cfg->iters, cfg->warmup);
    if (coll == SP_COLL_SEND_RECV)
      printf("# send-recv: rank 0 sends to rank %d\n", w->world - 1);
    printf("#\n# %12s %12s %6s %6s %12s %8s %8s\n", "size", "count", "type", "algo", "time",
           "algbw", "busbw");
    printf("# %12s %12s %6s %6s %12s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
           "(GB/s)");
    fflush(stdout);
  }
  double *t = g_new(double, cfg->iters);
  for (uint64_t s = cfg->lo; s <= cfg->hi && rc == 0; s *= 2) {
    uint64_t count = count_for(coll, s, n, es);
    if (count > 0) {
      GError *err = NULL;
      sp_case *c = cfg->op->build(cfg, count, w->world, w->rank, &err);
      run_bufs b = { 0 };
      if (c && !bufs_prepare(r, c, &b, &err)) {
        sp_case_free(c);
        c = NULL;
      }
      if (!agree_ok(w, err, "the other ranks to build their programs")) {
        g_clear_error(&err);
        sp_case_free(c);
        rc = EXIT_USAGE;
        break;
      }
      /* first run: checked, so a timing never comes from a wrong schedule */
      if (!run_once(r, c, &b, &err) || !bufs_fetch_out(r, c, &b, &err))
        die_transport(w, err);
      sp_mpi_native_disarm();
      GError *chk = NULL;
      if (sp_case_member(c, w->rank) >= 0) {
        if (cfg->native)
          check_tolerance(c, w->rank, b.host[1], &chk);
        else
          sp_case_check(c, NULL, NULL, &chk);
      }
      if (!agree_ok(w, chk, "the other ranks' verdicts")) {
        g_clear_error(&chk);
        bufs_release(r, &b);
        sp_case_free(c);
        rc = EXIT_MISMATCH;
        break;
      }
      for (int i = 0; i < cfg->warmup + cfg->iters; i++) {
        barrier(r);
        double t0 = run_clock(r);
        if (!run_once(r, c, &b, &err))
          die_transport(w, err);
        double t1 = run_clock(r);
        if (i >= cfg->warmup)
          t[i - cfg->warmup] = t1 - t0;
      }
      sp_mpi_native_disarm();
      qsort(t, (size_t)cfg->iters, sizeof(double), cmp_double);
      double med = cfg->iters % 2 ? t[cfg->iters / 2]
                                  : 0.5 * (t[cfg->iters / 2 - 1] + t[cfg->iters / 2]);
      /* max over ranks of the medians (as an integer number of ns, for MAX) */
      uint64_t ns = (uint64_t)llround(med * 1e9);
      allreduce_max(w, &ns, 1, "the other ranks' timings");
      if (w->rank == 0) {
        double secs = (double)ns * 1e-9;
        uint64_t bytes = bytes_for(coll, count, n, es);
        double algbw = secs > 0 ? (double)bytes / secs / 1e9 : 0;
        printf("  %12" G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT " %6s %6s %12.2f %8.2f %8.2f\n",
               bytes, count, sp_dtype_name(cfg->dtype),
               cfg->native ? "native" : sp_algo_name(sp_algo_choose(sp_case_spec(c))), secs * 1e6,
               algbw, algbw * factor);
        fflush(stdout);
      }
      bufs_release(r, &b);
      sp_case_free(c);
    }
    if (s > G_MAXUINT64 / 2)
      break;
  }
  g_free(t);
  return rc;
}

/* --debug-deadlock: every rank waits for a message its neighbour never sends. */
static int run_deadlock(runner *r)
{
  world_info *w = r->w;
  if (w->world < 2) {
    if (w->rank == 0)
      fprintf(stderr, "spsim-run: --debug-deadlock needs at least 2 ranks\n");
    return EXIT_USAGE;
  }
  sp_program *p = sp_program_new(w->rank);
  uint32_t buf = sp_program_add_buffer(p, 8, "in");
  sp_step s = { .kind = SP_STEP_RECV, .peer = (w->rank + 1) % w->world, .tag = 7,
                .dst = { buf, 0 }, .bytes = 8 };
  sp_program_append(p, &s);
  sp_step wt = { .kind = SP_STEP_WAIT };
  sp_program_append(p, &wt);
  char data[8] = { 0 };
  void *host[1] = { data };
  void **bufs = host;
  GError *err = NULL;
#ifdef SP_HAVE_CUDA
  const uint64_t bytes[1] = { sizeof data };
  if (r->cuda && !sp_cuda_bufs_new(r->cuda, 1, bytes, host, &bufs, &err))
    die_transport(w, err);
#endif
  if (!sp_exec_run(p, &r->tr, bufs, NULL, &err))
    die_transport(w, err);
#ifdef SP_HAVE_CUDA
  if (r->cuda)
    sp_cuda_bufs_free(r->cuda, 1, bufs);
#endif
  sp_program_free(p);
  return 0;
}

/* ------------------------------------------------------------ main */

static int finish(int rc)
{
  fflush(stdout);
  fflush(stderr);
  MPI_Finalize();
  return rc;
}

int main(int argc, char **argv)
{
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "spsim-run: MPI_Init failed; launch with mpirun -np N spsim-run ...\n");
    return EXIT_TRANSPORT;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  world_info w = { 0 };
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.world);
  const char *ls = g_getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int local = ls ? atoi(ls) : w.world;
  w.yield = local > (int)g_get_num_processors();
  w.mpi_yield = w.yield && !sp_mpi_progress_yields();
  w.timeout = DEFAULT_TIMEOUT;

  run_config cfg = { 0 };
  GError *err = NULL;
  /* GOptionContext rewrites argv: parse a copy */
  g_auto(GStrv) args = g_new0(char *, (gsize)argc + 1);
  for (int i = 0; i < argc; i++)
    args[i] = g_strdup(argv[i]);
  char **pargs = g_memdup2(args, sizeof(char *) * ((gsize)argc + 1));
  gboolean parsed = parse_args(argc, pargs, &cfg, &err);
  g_free(pargs);
  if (parsed && cfg.list) {
    if (w.rank == 0) list_ops();
    return finish(EXIT_SUCCESS);
  }
  if (parsed && cfg.debug_flag_mismatch && w.rank == w.world - 1 && w.world > 1)
    cfg.count += 1; /* the last rank pretends it was launched with another --count */
  if (parsed)
    w.timeout = cfg.timeout;
  if (!agree_flags(&w, &cfg, err)) {
    g_clear_error(&err);
    return finish(EXIT_USAGE);
  }
  if (cfg.ranks > 0 && cfg.ranks != w.world) {
    if (w.rank == 0)
      fprintf(stderr, "spsim-run: --ranks %d but mpirun launched %d ranks; use mpirun -np %d\n",
              cfg.ranks, w.world, cfg.ranks);
    return finish(EXIT_USAGE);
  }

  /* transports */
  runner r = { .cfg = &cfg, .w = &w };
  r.mpi = sp_mpi_transport_new(MPI_COMM_WORLD, cfg.timeout, w.mpi_yield, &err);
  if (r.mpi)
    r.tr = sp_mpi_transport_get(r.mpi);
  if (!err && cfg.transport != TR_MPI) {
#ifdef SP_HAVE_CUDA
    r.cuda = sp_cuda_ctx_new(MPI_COMM_WORLD, cfg.transport == TR_NCCL, cfg.timeout, w.yield, &err);
    if (r.cuda)
      r.tr = cfg.transport == TR_NCCL ? sp_nccl_transport_get(r.cuda)
                                      : sp_cuda_mpi_transport_get(r.cuda, r.mpi);
#else
    err = g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED,
                      "this spsim-run was built without CUDA/NCCL (configure --with-cuda=DIR); "
                      "--transport %s is not available, use --transport mpi",
                      transport_names[cfg.transport]);
#endif
  }
  if (err && err->code == SP_ERROR_UNSUPPORTED) {
    /* the same on every rank: rank 0 explains */
    if (w.rank == 0)
      fprintf(stderr, "spsim-run: %s\n", err->message);
    g_clear_error(&err);
    sp_mpi_transport_free(r.mpi);
    return finish(EXIT_USAGE);
  }
  if (!agree_ok(&w, err, "the other ranks to set up their transport")) {
    g_clear_error(&err);
#ifdef SP_HAVE_CUDA
    sp_cuda_ctx_free(r.cuda);
#endif
    sp_mpi_transport_free(r.mpi);
    return finish(EXIT_TRANSPORT);
  }

  int rc;
  if (cfg.debug_deadlock)
    rc = run_deadlock(&r);
  else if (cfg.graph)
    rc = run_graph(&r);
  else if (cfg.time)
    rc = run_timed(&r);
  else
    rc = run_single(&r);
#ifdef SP_HAVE_CUDA
  sp_cuda_ctx_free(r.cuda);
#endif
  sp_mpi_transport_free(r.mpi);
  return finish(rc);
}
