/* spsim bench PLATFORM [nccl-tests flags: -b -e -i -f -g -t -c -o -d -r (-n -w -m -a -z)]
 *                      [--coll C] [--ranks N] [--algo A] [--proto P] [--sizes MIN:MAX]
 *                      [--fidelity flow|step] [--channels N] [--per-node K]
 *                      [--format table|nccl-tests|json] [--json]
 * Predicted collective performance as nccl-tests measures it: for each size of
 * the sweep the simulated time of one collective on ranks 0..N-1 of the
 * platform, out of place and in place, algbw = bytes / time and busbw = algbw x
 * the nccl-tests factor (GB/s = 1e9 bytes/s). Sizes, counts and the table follow
 * nccl-tests (spsim/nccltests.h); --format nccl-tests prints its exact layout.
 * Ring all-reduce, all-gather and reduce-scatter across nodes run one ring
 * channel per member of a node (the engine's choice, sp_sim_ring_channels)
 * unless --channels says otherwise. The algorithm and protocol of each size are
 * NCCL's tuning model's choice on the platform (sp_sim_coll_resolve) unless
 * --algo / --proto force them; each row names them. */
#include "config.h"
#include "calibrate.h"
#include "cli.h"
#include "platform.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/nccltests.h"
#include "spsim/units.h"
#include "spsim/verify.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest size (the row's bytes) that --check runs with real bytes: every member
 * then holds its input, output and scratch, in this process (a choice of spsim:
 * 8 ranks x 64 MiB x ~4 buffers stays near 2 GiB). */
#define CHECK_MAX_BYTES ((uint64_t)64 << 20)
/* ... about this many buffers of the size per member (input, output, scratch, the
 * in-place run's snapshot): what --jobs asks of available memory per process */
#define CHECK_BUFFERS 4
/* --jobs shares the sizes by expected cost: bytes, plus this for the fixed part of a
 * simulation (a guess, which only moves which process runs a size, never a result) */
#define SIZE_FIXED_COST (1024.0 * 1024.0)
/* Most sizes of one sweep (nccl-tests' -i 1M from 8 B to 8 GiB would be 8,192). */
#define MAX_SIZES 10000u

typedef struct {
  uint64_t bytes, count;
  sp_algo algo;
  sp_proto proto;
  int32_t channels;
  double time_us[2], algbw[2], busbw[2]; /* [0] out of place, [1] in place */
  int64_t wrong[2];                      /* SP_NT_WRONG_NA when not checked */
} row;

static int fail(GError *err)
{
  return sp_cli_fail(err);
}

/* Elements of @p a and @p b (count of them, each @p es bytes) that differ. */
static int64_t count_wrong(const void *a, const void *b, uint64_t count, size_t es)
{
  int64_t w = 0;
  const uint8_t *x = a, *y = b;
  for (uint64_t i = 0; i < count; i++)
    if (memcmp(x + i * es, y + i * es, es) != 0) w++;
  return w;
}

/* Free a program table and its buffers (data mode, in place). */
static void free_tables(sp_program **progs, void ***bufs, int32_t world)
{
  for (int32_t r = 0; r < world; r++) {
    if (bufs && bufs[r]) {
      for (guint b = 0; progs[r] && b < progs[r]->bufs->len; b++) g_free(bufs[r][b]);
      g_free(bufs[r]);
    }
    sp_program_free(progs[r]);
  }
  g_free(progs);
  g_free(bufs);
}

/* Run @p spec with real bytes on the loaded platform, out of place (@p wrong[0])
 * and, when @p in_place, in place (@p wrong[1]): the elements of the members'
 * results that differ from the reference semantics (sp_case). In place, a
 * member's one buffer starts as its input; members whose output the collective
 * leaves alone (reduce: all but the root; send-recv: the sender) are not counted. */
static gboolean check_coll(const sp_coll_spec *spec, int32_t world, gboolean in_place, int64_t wrong[2],
                           GError **err)
{
  sp_case *c = sp_case_new_coll(spec, world, TRUE, err);
  if (c == NULL) return FALSE;
  size_t es = sp_dtype_size(spec->dtype);
  uint64_t outc = sp_coll_out_count(spec);
  double t = 0;
  gboolean ok = sp_sim_run(sp_case_programs(c), world, sp_case_all_bufs(c), SP_FIDELITY_STEP, NULL, &t, err);
  wrong[0] = 0;
  for (int32_t r = 0; ok && r < world; r++) {
    const void *want = sp_case_expected(c, r);
    if (want != NULL) wrong[0] += count_wrong(sp_case_bufs(c, r)[1], want, outc, es);
  }
  if (ok && in_place) {
    sp_program **progs = g_new0(sp_program *, world);
    void ***bufs = g_new0(void **, world);
    uint64_t bytes = MAX(sp_coll_in_count(spec), outc) * es;
    for (int32_t r = 0; ok && r < world; r++) {
      progs[r] = sp_program_new(r);
      if (sp_coll_index_of(spec, r) >= 0) {
        uint32_t b = sp_program_add_buffer(progs[r], bytes, "inout");
        ok = sp_lower_coll(progs[r], spec, b, b, err);
      }
      bufs[r] = g_new0(void *, progs[r]->bufs->len + 1);
      for (guint b = 0; b < progs[r]->bufs->len; b++)
        bufs[r][b] = g_malloc0(MAX(g_array_index(progs[r]->bufs, sp_buffer, b).bytes, 1));
      if (ok && sp_coll_index_of(spec, r) >= 0)
        memcpy(bufs[r][0], sp_case_bufs(c, r)[0], sp_coll_in_count(spec) * es);
    }
    ok = ok && sp_sim_run(progs, world, bufs, SP_FIDELITY_STEP, NULL, &t, err);
    wrong[1] = 0;
    for (int32_t r = 0; ok && r < world; r++) {
      int32_t i = sp_coll_index_of(spec, r);
      if (i < 0 || (spec->coll == SP_COLL_REDUCE && i != spec->root) || (spec->coll == SP_COLL_SEND_RECV && i == 0))
        continue;
      wrong[1] += count_wrong(bufs[r][0], sp_case_expected(c, r), outc, es);
    }
    free_tables(progs, bufs, world);
  }
  sp_case_free(c);
  return ok;
}

/* "--check" without a number means --check 1 (nccl-tests' -c takes one). */
static void check_flag_default(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return;
    if (strcmp(argv[i], "--check") == 0) {
      const char *nx = i + 1 < argc ? argv[i + 1] : NULL;
      if (nx == NULL || !g_ascii_isdigit(nx[0])) argv[i] = (char *)"--check=1";
    }
  }
}

static gboolean parse_size_opt(const char *flag, const char *s, uint64_t *out, GError **err)
{
  if (!sp_size_parse(s, out, err)) {
    g_prefix_error(err, "bench: %s: ", flag);
    return FALSE;
  }
  return TRUE;
}

/* What every size of one sweep shares. */
typedef struct {
  sp_coll coll;
  sp_algo algo;
  sp_proto proto;
  sp_dtype dtype;
  sp_redop redop;
  int32_t *members, n, ranks, root, channels;
  uint64_t chunk;
  sp_fidelity fid;
  gboolean inplace_ok; /* in place runs apart (in and out the same size) */
  int check;
  double bfactor; /* nccl-tests' busbw factor */
  size_t esize;
  const uint64_t *sizes; /* the sizes to run (sp_cli_jobs_map's items) */
} sweep;

/* The row of size @p s (at least one element per rank): NCCL's tuning model's
 * algorithm and protocol unless forced, the simulated times, --check's #wrong. */
static gboolean bench_size(const sweep *w, uint64_t s, row *r, GError **err)
{
  uint64_t count = sp_nt_count(w->coll, s, w->n, w->esize);
  sp_coll_spec req = {
    .coll = w->coll, .algo = w->algo, .dtype = w->dtype, .redop = w->redop, .ranks = w->members, .n = w->n,
    .count = count, .root = w->coll == SP_COLL_SEND_RECV ? 0 : w->root, .chunk_bytes = w->chunk,
    .op_id = 0, .tag = 0, .channels = w->channels, .proto = w->proto,
  };
  sp_coll_spec spec;
  sp_tune_cost cost;
  if (!sp_sim_coll_resolve(&req, &spec, &cost, NULL, err)) {
    g_prefix_error(err, "bench: %" G_GUINT64_FORMAT " bytes: ", (guint64)sp_nt_bytes(w->coll, count, w->n, w->esize));
    return FALSE;
  }
  /* the channel count the engine will use (reported per row) */
  int32_t used = w->channels, blk = 0;
  if (used == 0)
    sp_sim_ring_channels(&spec, &used, &blk);
  if (spec.coll != SP_COLL_ALL_REDUCE && spec.coll != SP_COLL_ALL_GATHER && spec.coll != SP_COLL_REDUCE_SCATTER)
    used = 1;
  if (spec.algo != SP_ALGO_RING || w->n == 1)
    used = 1;
  *r = (row){ .bytes = sp_nt_bytes(w->coll, count, w->n, w->esize), .count = count, .algo = spec.algo, .proto = spec.proto,
              .channels = used < 1 ? 1 : used, .wrong = { SP_NT_WRONG_NA, SP_NT_WRONG_NA } };
  for (int k = 0; k < 2; k++) {
    double secs = 0;
    /* in place: its own run only where local steps cost time (the input's snapshot) */
    if (k == 1 && (!w->inplace_ok || sp_sim_coll_local_free(&spec))) {
      secs = r->time_us[0] / 1e6;
    } else if (!sp_coll_spec_validate(&spec, err) || !sp_sim_coll_time_ex(&spec, w->ranks, w->fid, k == 1, &secs, err)) {
      g_prefix_error(err, "bench: ");
      return FALSE;
    }
    r->time_us[k] = secs * 1e6;
    r->algbw[k] = secs > 0 ? (double)r->bytes / secs / 1e9 : 0;
    r->busbw[k] = r->algbw[k] * w->bfactor;
  }
  if (w->check > 0 && r->bytes <= CHECK_MAX_BYTES) {
    sp_coll_spec cs = spec;
    if (cs.channels == 0) sp_sim_ring_channels(&spec, &cs.channels, &cs.channel_block);
    if (!check_coll(&cs, w->ranks, w->inplace_ok, r->wrong, err)) {
      g_prefix_error(err, "bench: --check, %" G_GUINT64_FORMAT " bytes: ", (guint64)r->bytes);
      return FALSE;
    }
    if (!w->inplace_ok) r->wrong[1] = r->wrong[0];
  }
  return TRUE;
}

/* Size @p i of the sweep @p user, for sp_cli_jobs_map. */
static gboolean size_item(void *user, guint i, void *out, GError **err)
{
  const sweep *w = user;
  return bench_size(w, w->sizes[i], out, err);
}

int sp_cmd_bench(int argc, char **argv)
{
  g_autofree char *coll_s = NULL, *algo_s = NULL, *proto_s = NULL, *sizes_s = NULL, *dtype_s = NULL, *fid_s = NULL,
                  *op_s = NULL, *format_s = NULL, *minb_s = NULL, *maxb_s = NULL, *stepb_s = NULL;
  gint ranks = 0, channels = 0, nthreads = 0, ngpus = 0, nprocs = 0, per_node = 0, root = 0, check = 0, jobs = 0;
  gint64 factor = 0;
  /* G_MININT: not given (nccl-tests' defaults are printed); a given value must be >= 0 */
  gint iters = G_MININT, warmup = G_MININT, agg = G_MININT, average = G_MININT, blocking = G_MININT;
  gint64 chunk = 0;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "coll", 0, 0, G_OPTION_ARG_STRING, &coll_s,
      "all-reduce (default), all-gather, reduce-scatter, all-to-all, broadcast, reduce, send-recv "
      "(or nccl-tests' names: all_reduce_perf, alltoall, sendrecv, ...)", "C" },
    { "ranks", 0, 0, G_OPTION_ARG_INT, &ranks,
      "ranks 0..N-1 of the platform (send-recv: rank 0 sends to N-1); default -t x -g x --procs", "N" },
    { "nthreads", 't', 0, G_OPTION_ARG_INT, &nthreads, "nccl-tests: threads per process (default 1)", "T" },
    { "ngpus", 'g', 0, G_OPTION_ARG_INT, &ngpus, "nccl-tests: GPUs per thread (default 1)", "G" },
    { "procs", 0, 0, G_OPTION_ARG_INT, &nprocs, "MPI processes of the nccl-tests run (default 1)", "P" },
    { "per-node", 0, 0, G_OPTION_ARG_INT, &per_node,
      "ranks per node (rank r on GPU r mod K of node r / K; default: hosts 0..N-1)", "K" },
    { "minbytes", 'b', 0, G_OPTION_ARG_STRING, &minb_s, "nccl-tests: smallest size (default 32M)", "BYTES" },
    { "maxbytes", 'e', 0, G_OPTION_ARG_STRING, &maxb_s, "nccl-tests: largest size (default 32M)", "BYTES" },
    { "stepbytes", 'i', 0, G_OPTION_ARG_STRING, &stepb_s, "nccl-tests: size increment (default 1M)", "BYTES" },
    { "stepfactor", 'f', 0, G_OPTION_ARG_INT64, &factor, "nccl-tests: size multiplication factor", "F" },
    { "sizes", 's', 0, G_OPTION_ARG_STRING, &sizes_s,
      "MIN:MAX bytes, doubling (K/M/G binary; default 8:8G when no -b/-e)", "RANGE" },
    { "dtype", 'd', 0, G_OPTION_ARG_STRING, &dtype_s,
      "element type: float (default), half, bfloat16, int32, int64, uint8 (or f32, f16, bf16, ...)", "T" },
    { "datatype", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &dtype_s, "same as --dtype", "T" },
    { "op", 'o', 0, G_OPTION_ARG_STRING, &op_s, "reduction: sum (default), avg, max, min", "OP" },
    { "root", 'r', 0, G_OPTION_ARG_INT, &root, "root rank of broadcast and reduce (default 0)", "R" },
    { "check", 'c', 0, G_OPTION_ARG_INT, &check,
      "1: run every size up to 64 MiB with real bytes and report #wrong (default 0: N/A)", "0|1" },
    { "iters", 'n', 0, G_OPTION_ARG_INT, &iters, "nccl-tests: iterations (no effect on a simulation)", "N" },
    { "warmup_iters", 'w', 0, G_OPTION_ARG_INT, &warmup, "nccl-tests: warm-up iterations (no effect)", "N" },
    { "agg_iters", 'm', 0, G_OPTION_ARG_INT, &agg, "nccl-tests: operations per iteration (no effect)", "N" },
    { "average", 'a', 0, G_OPTION_ARG_INT, &average, "nccl-tests: 0-3, how ranks' times combine (no effect)", "A" },
    { "blocking", 'z', 0, G_OPTION_ARG_INT, &blocking, "nccl-tests: blocking collectives 0-3 (no effect)", "Z" },
    { "algo", 0, 0, G_OPTION_ARG_STRING, &algo_s,
      "ring, tree, direct, nvls, pat, nvls-tree, collnet-direct, collnet-chain or auto (default: NCCL's tuning model per size; collnet-* need a platform with sharp=1)", "A" },
    { "proto", 0, 0, G_OPTION_ARG_STRING, &proto_s,
      "NCCL protocol: ll, ll128, simple or auto (default: NCCL's tuning model per size)", "P" },
    { "fidelity", 0, 0, G_OPTION_ARG_STRING, &fid_s, "flow (default, fast) or step", "F" },
    { "chunk", 0, 0, G_OPTION_ARG_INT64, &chunk, "ring pipelining chunk in bytes (default 4 MiB)", "BYTES" },
    { "channels", 0, 0, G_OPTION_ARG_INT, &channels,
      "concurrent rings of a ring all-reduce/all-gather/reduce-scatter (default 0: one per "
      "member of a node when the group spans nodes, else 1)", "N" },
    { "jobs", 0, 0, G_OPTION_ARG_INT, &jobs,
      "processes of this machine that share the sizes (the same output; default 0: one per processor, at most one "
      "per 2 GiB of available memory; 1: this process alone)", "N" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &format_s, "table (default), nccl-tests (its exact layout) or json", "F" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json, "JSON output (= --format json)", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("PLATFORM.xml - predicted collective performance");
  g_option_context_set_summary(ctx,
      "Simulates one collective per size on the platform and prints nccl-tests' table:\n"
      "size, count, type, redop, root, then time, algbw, busbw and #wrong out of place and in place.\n"
      "nccl-tests' flags work as they do there; ranks = -t x -g x --procs (or --ranks).\n"
      "Examples: spsim bench platforms/dgx.xml -b 8 -e 8G -f 2 -g 8\n"
      "          spsim bench platforms/dgx.xml --coll all-gather --ranks 16 --sizes 1K:1G --format nccl-tests");
  g_option_context_add_main_entries(ctx, entries, NULL);
  check_flag_default(argc, argv);
  GError *err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
    g_prefix_error(&err, "bench: ");
    return fail(err);
  }
  if (argc < 2)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: missing platform (usage: spsim bench PLATFORM.xml -g GPUS [-b MIN -e MAX -f 2])"));
  if (argc > 2)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: unexpected argument '%s'", argv[2]));
  const char *platform = argv[1];
  const struct { const char *flag; gint v; } counts[] = {
    { "-n", iters }, { "-w", warmup }, { "-m", agg }, { "-a", average }, { "-z", blocking } };
  for (gsize i = 0; i < G_N_ELEMENTS(counts); i++)
    if (counts[i].v != G_MININT && counts[i].v < 0)
      return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: %s must be 0 or more (got %d)", counts[i].flag,
                              counts[i].v));

  enum { FMT_TABLE, FMT_NCCL, FMT_JSON } format = json ? FMT_JSON : FMT_TABLE;
  if (format_s != NULL) {
    if (strcmp(format_s, "table") == 0) format = FMT_TABLE;
    else if (strcmp(format_s, "nccl-tests") == 0) format = FMT_NCCL;
    else if (strcmp(format_s, "json") == 0) format = FMT_JSON;
    else
      return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                              "bench: --format '%s' (expected table, nccl-tests or json)", format_s));
    if (json && format != FMT_JSON)
      return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --json and --format %s disagree", format_s));
  }
  sp_coll coll = SP_COLL_ALL_REDUCE;
  if (coll_s != NULL && !sp_nt_coll_parse(coll_s, &coll) && !sp_coll_parse(coll_s, &coll, &err)) {
    g_prefix_error(&err, "bench: ");
    return fail(err);
  }
  sp_algo algo = SP_ALGO_AUTO;
  if (algo_s != NULL && !sp_algo_parse(algo_s, &algo, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_proto proto = SP_PROTO_AUTO;
  if (proto_s != NULL && !sp_proto_parse(proto_s, &proto, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_dtype dtype = SP_F32;
  if (dtype_s != NULL && !sp_nt_type_parse(dtype_s, &dtype, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_redop redop = SP_RED_SUM;
  if (op_s != NULL && !sp_redop_parse(op_s, &redop, &err)) {
    g_prefix_error(&err, "bench: ");
    return fail(err);
  }
  sp_fidelity fid = SP_FIDELITY_FLOW;
  if (fid_s != NULL && !sp_fidelity_parse(fid_s, &fid, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }

  /* ranks: --ranks, or nccl-tests' processes x threads x GPUs per thread */
  if (nthreads < 0 || ngpus < 0 || nprocs < 0 || ranks < 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: -t, -g, --procs and --ranks must be >= 1"));
  gboolean nt_ranks = nthreads > 0 || ngpus > 0 || nprocs > 0;
  int64_t prod = (int64_t)MAX(nthreads, 1) * MAX(ngpus, 1) * MAX(nprocs, 1);
  if (prod > G_MAXINT32)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: -t x -g x --procs is too large"));
  if (nt_ranks && ranks > 0 && ranks != prod)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --ranks %d but -t x -g x --procs = %d x %d x %d = %" G_GINT64_FORMAT, ranks,
                            MAX(nthreads, 1), MAX(ngpus, 1), MAX(nprocs, 1), prod));
  if (ranks == 0 && nt_ranks) ranks = (gint)prod;
  if (ranks == 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --ranks N is required, or nccl-tests' -g GPUS [-t THREADS] "
                            "(ranks 0..N-1 of the platform take part)"));
  if (coll == SP_COLL_SEND_RECV && ranks < 2)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --ranks must be >= 2 (got %d)", ranks));
  if (chunk < 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --chunk must be >= 0"));
  if (channels < 0 || channels > SP_MAX_CHANNELS)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --channels must be between 0 (automatic) and %d (got %d)",
                            SP_MAX_CHANNELS, channels));
  if (check < 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --check must be >= 0 (got %d)", check));
  if (per_node < 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --per-node must be >= 1 (got %d)", per_node));
  if (jobs < 0 || jobs > SP_CLI_JOBS_MAX)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --jobs %d: processes from 1 to %d, or 0 for one per processor", jobs, SP_CLI_JOBS_MAX));
  gboolean rooted = coll == SP_COLL_BROADCAST || coll == SP_COLL_REDUCE;
  if (root < 0 || root >= ranks)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --root %d is not a rank (0 to %d)", root, ranks - 1));

  /* sizes: --sizes (doubling), or nccl-tests' -b/-e with -f or -i */
  gboolean nt_sizes = minb_s || maxb_s || stepb_s || factor != 0;
  if (sizes_s != NULL && nt_sizes)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --sizes and nccl-tests' -b/-e/-i/-f both say which sizes: give one"));
  if (factor < 0 || factor == 1)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: -f must be >= 2 (got %" G_GINT64_FORMAT ")", factor));
  if (factor > 0 && stepb_s != NULL)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: -i (step bytes) and -f (step factor) both given: use one"));
  uint64_t lo = 8, hi = (uint64_t)8 << 30, step = 0;
  uint64_t fac = 2;
  if (sizes_s != NULL) {
    if (!sp_size_range_parse(sizes_s, &lo, &hi, &err)) {
      g_prefix_error(&err, "bench: --sizes: ");
      return fail(err);
    }
    if (lo == 0)
      return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                              "bench: --sizes '%s': a size is 0 (sizes must be >= 1 byte)", sizes_s));
  } else if (nt_sizes) {
    lo = SP_NT_DEFAULT_MINBYTES;
    hi = SP_NT_DEFAULT_MAXBYTES;
    step = SP_NT_DEFAULT_STEPBYTES;
    fac = (uint64_t)factor;
    if (minb_s && !parse_size_opt("-b", minb_s, &lo, &err)) return fail(err);
    if (maxb_s && !parse_size_opt("-e", maxb_s, &hi, &err)) return fail(err);
    if (stepb_s && !parse_size_opt("-i", stepb_s, &step, &err)) return fail(err);
  }
  g_autoptr(GArray) sizes = sp_nt_sizes(lo, hi, step, fac, MAX_SIZES, &err);
  if (sizes == NULL) {
    g_prefix_error(&err, "bench: ");
    return fail(err);
  }

  if (!g_file_test(platform, G_FILE_TEST_EXISTS))
    return fail(g_error_new(SP_ERROR, SP_ERROR_IO, "bench: platform file '%s' not found", platform));
  if (!sp_sim_init(platform, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  int32_t hosts = sp_sim_num_hosts();
  if (hosts < ranks)
    return fail(g_error_new(SP_ERROR, SP_ERROR_PLATFORM,
                            "bench: platform '%s' has %d hosts, fewer than --ranks %d", platform, hosts, ranks));
  if (per_node > 0) {
    g_autofree int32_t *node_of = g_new(int32_t, ranks), *local_of = g_new(int32_t, ranks);
    for (int32_t r = 0; r < ranks; r++) {
      node_of[r] = r / per_node;
      local_of[r] = r % per_node;
    }
    g_autofree int32_t *map = sp_cal_place(ranks, node_of, local_of, &err);
    if (map == NULL || !sp_sim_set_host_map(map, ranks, &err)) {
      g_prefix_error(&err, "bench: --per-node %d: ", per_node);
      return fail(err);
    }
  }

  /* Group: ranks 0..N-1 (send-recv: {0, N-1}). */
  int32_t n = coll == SP_COLL_SEND_RECV ? 2 : ranks;
  g_autofree int32_t *members = g_new(int32_t, n);
  if (coll == SP_COLL_SEND_RECV) {
    members[0] = 0;
    members[1] = ranks - 1;
  } else {
    for (int32_t i = 0; i < n; i++) members[i] = i;
  }
  size_t esize = sp_dtype_size(dtype);
  double bfactor = sp_coll_busbw_factor(coll, n);
  /* sp_lower_coll runs in place where in and out have the same size */
  gboolean inplace_ok = coll != SP_COLL_ALL_GATHER && coll != SP_COLL_REDUCE_SCATTER;
  gboolean reducing = coll == SP_COLL_ALL_REDUCE || coll == SP_COLL_REDUCE_SCATTER || coll == SP_COLL_REDUCE;

  sweep sw = { .coll = coll, .algo = algo, .proto = proto, .dtype = dtype, .redop = redop, .members = members, .n = n,
              .ranks = ranks, .root = root, .channels = channels, .chunk = (uint64_t)chunk, .fid = fid,
              .inplace_ok = inplace_ok, .check = check, .bfactor = bfactor, .esize = esize };
  /* the sizes with at least one element per rank, each a row */
  uint64_t skipped_below = 0, unchecked_above = 0;
  g_autoptr(GArray) todo = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  for (guint si = 0; si < sizes->len; si++) {
    uint64_t s = g_array_index(sizes, uint64_t, si);
    if (sp_nt_count(coll, s, n, esize) == 0) skipped_below = s;
    else g_array_append_val(todo, s);
  }
  g_autoptr(GArray) rows = g_array_new(FALSE, TRUE, sizeof(row));
  g_array_set_size(rows, todo->len);
  /* each size its own simulation from time 0: spread over processes, the same rows */
  sw.sizes = (const uint64_t *)(const void *)todo->data;
  /* by default as many processes as memory allows: --check holds every member's buffers */
  guint64 need = 0;
  for (guint i = 0; check > 0 && i < todo->len; i++) {
    uint64_t s = g_array_index(todo, uint64_t, i);
    if (s <= CHECK_MAX_BYTES) need = MAX(need, (guint64)ranks * s * CHECK_BUFFERS);
  }
  /* a size's expected cost: its bytes, and a fixed part (lowering, SimGrid's start) as
   * if it moved SIZE_FIXED_COST more */
  g_autofree double *weight = g_new(double, MAX(todo->len, 1));
  for (guint i = 0; i < todo->len; i++) weight[i] = (double)g_array_index(todo, uint64_t, i) + SIZE_FIXED_COST;
  if (!sp_cli_jobs_map(jobs == 0 ? sp_cli_jobs_auto(need) : jobs, todo->len, sizeof(row), size_item, &sw, weight, rows->data,
                       &err))
    return fail(err);
  for (guint i = 0; i < rows->len && check > 0 && unchecked_above == 0; i++)
    if (g_array_index(rows, row, i).bytes > CHECK_MAX_BYTES) unchecked_above = g_array_index(rows, row, i).bytes;
  if (rows->len == 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: every size is below one %s element per rank (%" G_GUINT64_FORMAT " bytes for %d ranks)",
                            sp_dtype_name(dtype), (guint64)sp_nt_bytes(coll, 16 / esize, n, esize), n));
  int64_t errors = 0;
  double avg = 0;
  for (guint i = 0; i < rows->len; i++) {
    const row *r = &g_array_index(rows, row, i);
    for (int k = 0; k < 2; k++) {
      if (r->wrong[k] > 0) errors += r->wrong[k];
      avg += r->busbw[k];
    }
  }
  avg /= 2.0 * rows->len;
  const char *redop_name = reducing ? sp_redop_name(redop) : (coll == SP_COLL_SEND_RECV ? "sum" : "none");
  int32_t root_col = rooted ? root : -1;

  /* nccl-tests' flags that a simulation ignores, as given */
  g_autoptr(GString) ignored = g_string_new(NULL);
  if (iters >= 0) g_string_append_printf(ignored, " -n %d", iters);
  if (warmup >= 0) g_string_append_printf(ignored, " -w %d", warmup);
  if (agg >= 0) g_string_append_printf(ignored, " -m %d", agg);
  if (average >= 0) g_string_append_printf(ignored, " -a %d", average);
  if (blocking >= 0) g_string_append_printf(ignored, " -z %d", blocking);

  if (format == FMT_JSON) {
    /* JSON through json-glib (strings escaped, integers exact); the platform path is
     * a file name that need not be UTF-8: JSON text is, so a byte that is not valid
     * UTF-8 becomes U+FFFD (valid paths are written as they are) */
    g_autofree char *platform_utf8 = g_utf8_make_valid(platform, -1);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "platform");
    json_builder_add_string_value(b, platform_utf8);
    json_builder_set_member_name(b, "coll");
    json_builder_add_string_value(b, sp_coll_name(coll));
    json_builder_set_member_name(b, "ranks");
    json_builder_add_int_value(b, ranks);
    json_builder_set_member_name(b, "algo");
    json_builder_add_string_value(b, sp_algo_name(algo));
    json_builder_set_member_name(b, "proto");
    json_builder_add_string_value(b, sp_proto_name(proto));
    json_builder_set_member_name(b, "dtype");
    json_builder_add_string_value(b, sp_dtype_name(dtype));
    json_builder_set_member_name(b, "redop");
    json_builder_add_string_value(b, redop_name);
    json_builder_set_member_name(b, "root");
    json_builder_add_int_value(b, root_col);
    json_builder_set_member_name(b, "fidelity");
    json_builder_add_string_value(b, sp_fidelity_name(fid));
    json_builder_set_member_name(b, "busbw_factor");
    json_builder_add_double_value(b, bfactor);
    json_builder_set_member_name(b, "check");
    json_builder_add_boolean_value(b, check > 0);
    json_builder_set_member_name(b, "rows");
    json_builder_begin_array(b);
    for (guint i = 0; i < rows->len; i++) {
      const row *r = &g_array_index(rows, row, i);
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "bytes");
      json_builder_add_int_value(b, (gint64)r->bytes);
      json_builder_set_member_name(b, "count");
      json_builder_add_int_value(b, (gint64)r->count);
      json_builder_set_member_name(b, "algo");
      json_builder_add_string_value(b, sp_algo_name(r->algo));
      json_builder_set_member_name(b, "proto");
      json_builder_add_string_value(b, sp_proto_name(r->proto));
      json_builder_set_member_name(b, "channels");
      json_builder_add_int_value(b, r->channels);
      json_builder_set_member_name(b, "time_us");
      json_builder_add_double_value(b, r->time_us[0]);
      json_builder_set_member_name(b, "algbw");
      json_builder_add_double_value(b, r->algbw[0]);
      json_builder_set_member_name(b, "busbw");
      json_builder_add_double_value(b, r->busbw[0]);
      json_builder_set_member_name(b, "wrong");
      if (r->wrong[0] == SP_NT_WRONG_NA) json_builder_add_null_value(b);
      else json_builder_add_int_value(b, r->wrong[0]);
      json_builder_set_member_name(b, "in_place");
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "time_us");
      json_builder_add_double_value(b, r->time_us[1]);
      json_builder_set_member_name(b, "algbw");
      json_builder_add_double_value(b, r->algbw[1]);
      json_builder_set_member_name(b, "busbw");
      json_builder_add_double_value(b, r->busbw[1]);
      json_builder_set_member_name(b, "wrong");
      if (r->wrong[1] == SP_NT_WRONG_NA) json_builder_add_null_value(b);
      else json_builder_add_int_value(b, r->wrong[1]);
      json_builder_end_object(b);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    sp_cli_print_json(b);
  } else if (format == FMT_NCCL) {
    /* nccl-tests' layout (util.cu): its header lines, the devices (the hosts of the
     * ranks, one "host" per node), the table and the footer */
    const char *prog = sp_nt_program(coll);
    g_autoptr(GString) s = g_string_new(NULL);
    const char *model = sp_sim_gpu_model() != NULL ? sp_sim_gpu_model() : "simulated-GPU";
    gboolean by_factor = sizes_s != NULL || fac > 1;
    g_string_append_printf(s, "# spsim %s: predicted, not measured (platform %s, fidelity %s, algo %s, proto %s)\n",
                           PACKAGE_VERSION, platform, sp_fidelity_name(fid), sp_algo_name(algo), sp_proto_name(proto));
    g_string_append_printf(s, "# Collective test starting: %s\n", prog);
    g_string_append_printf(s,
        "# nThread %d nGpus %d minBytes %" G_GUINT64_FORMAT " maxBytes %" G_GUINT64_FORMAT
        " step: %" G_GUINT64_FORMAT "(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0 unalign: 0\n",
        MAX(nthreads, 1), nt_ranks ? MAX(ngpus, 1) : ranks, (guint64)lo, (guint64)hi,
        (guint64)(by_factor ? fac : step), by_factor ? "factor" : "bytes", warmup >= 0 ? warmup : SP_NT_DEFAULT_WARMUP,
        iters >= 0 ? iters : SP_NT_DEFAULT_ITERS, agg >= 0 ? agg : 1, check > 0 ? 1 : 0);
    g_string_append(s, "#\n# Using devices\n");
    for (int32_t r = 0; r < ranks; r++) {
      int32_t h = sp_sim_host_of(r), node = sp_sim_host_node(h);
      g_autofree char *host = node >= 0 ? g_strdup_printf("node%03d", node) : g_strdup(sp_sim_host_name(h));
      int32_t dev = 0, pid = 0;
      /* the device index: hosts of the same node declared before this one */
      for (int32_t j = h - 1; node >= 0 && j >= 0 && sp_sim_host_node(j) == node; j--) dev++;
      g_string_append_printf(s, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", r, 0, pid,
                             host, dev, 0, 0, 0, model);
    }
    if (coll == SP_COLL_SEND_RECV)
      g_string_append_printf(s, "# spsim: send-recv from rank 0 to rank %d, the slowest pair of sendrecv_perf's "
                                "ring on a platform without contention\n", ranks - 1);
    if (!inplace_ok)
      g_string_append_printf(s, "# spsim: in-place %s is lowered out of place (same schedule)\n", sp_coll_name(coll));
    if (ignored->len > 0)
      g_string_append_printf(s, "# spsim: no effect on a simulation:%s\n", ignored->str);
    /* the algorithm and protocol of each size (nccl-tests prints none; NCCL's
     * NCCL_DEBUG_SUBSYS=TUNING would), as runs of sizes */
    g_string_append(s, "# spsim: algorithm/protocol by size:");
    for (guint i = 0; i < rows->len; i++) {
      const row *r = &g_array_index(rows, row, i);
      guint j = i;
      while (j + 1 < rows->len && g_array_index(rows, row, j + 1).algo == r->algo &&
             g_array_index(rows, row, j + 1).proto == r->proto)
        j++;
      const row *e = &g_array_index(rows, row, j);
      if (j > i)
        g_string_append_printf(s, "%s %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT " B %s/%s", i ? "," : "",
                               (guint64)r->bytes, (guint64)e->bytes, sp_algo_name(r->algo), sp_proto_name(r->proto));
      else
        g_string_append_printf(s, "%s %" G_GUINT64_FORMAT " B %s/%s", i ? "," : "", (guint64)r->bytes,
                               sp_algo_name(r->algo), sp_proto_name(r->proto));
      i = j;
    }
    g_string_append(s, "\n");
    if (skipped_below > 0)
      g_string_append_printf(s, "# spsim: sizes up to %" G_GUINT64_FORMAT " B skipped: less than one element per rank\n",
                             (guint64)skipped_below);
    if (unchecked_above > 0)
      g_string_append_printf(s, "# spsim: sizes from %" G_GUINT64_FORMAT " B not checked (#wrong N/A): above %" G_GUINT64_FORMAT " B\n",
                             (guint64)unchecked_above, (guint64)CHECK_MAX_BYTES);
    g_string_append(s, "#\n");
    sp_nt_append_columns(s);
    for (guint i = 0; i < rows->len; i++) {
      const row *r = &g_array_index(rows, row, i);
      sp_nt_row nr = { .size = r->bytes, .count = r->count, .root = root_col };
      g_strlcpy(nr.type, sp_nt_type_name(dtype), sizeof nr.type);
      g_strlcpy(nr.redop, redop_name, sizeof nr.redop);
      for (int k = 0; k < 2; k++) {
        nr.time_us[k] = r->time_us[k];
        nr.algbw[k] = r->algbw[k];
        nr.busbw[k] = r->busbw[k];
        nr.wrong[k] = r->wrong[k];
      }
      sp_nt_append_row(s, &nr);
    }
    sp_nt_append_footer(s, errors, avg, prog);
    fputs(s->str, stdout);
  } else {
    printf("# spsim bench (predicted): %s, %d ranks of %s (%d hosts), algo %s, proto %s, dtype %s, fidelity %s\n",
           sp_coll_name(coll), ranks, platform, hosts, sp_algo_name(algo), sp_proto_name(proto), sp_dtype_name(dtype),
           sp_fidelity_name(fid));
    if (algo == SP_ALGO_AUTO || proto == SP_PROTO_AUTO)
      printf("# algo/proto per size: NCCL's tuning model on this platform (docs/nccl-tests.md)\n");
    if (coll == SP_COLL_SEND_RECV) printf("# send-recv: rank 0 sends to rank %d\n", ranks - 1);
    if (per_node > 0) printf("# %d ranks per node\n", per_node);
    if (!inplace_ok) printf("# in-place %s is lowered out of place (same schedule)\n", sp_coll_name(coll));
    if (ignored->len > 0) printf("# no effect on a simulation:%s\n", ignored->str);
    if (skipped_below > 0)
      printf("# sizes up to %" G_GUINT64_FORMAT " B skipped: less than one element per rank\n", (guint64)skipped_below);
    if (check == 0) printf("# #wrong: N/A without --check (a simulation moves no data)\n");
    if (unchecked_above > 0)
      printf("# sizes from %" G_GUINT64_FORMAT " B not checked: above %" G_GUINT64_FORMAT " B\n",
             (guint64)unchecked_above, (guint64)CHECK_MAX_BYTES);
    int32_t maxch = 1, aw = 6; /* the algo column widens for nvls-tree, collnet-direct, ... */
    for (guint i = 0; i < rows->len; i++) {
      maxch = MAX(maxch, g_array_index(rows, row, i).channels);
      aw = MAX(aw, (int)strlen(sp_algo_name(g_array_index(rows, row, i).algo)));
    }
    if (maxch > 1)
      printf("# ring rows: %d channels (concurrent rings, each through other GPUs' NICs%s)\n", maxch,
             channels == 0 ? "; chosen per node, --channels N overrides" : "");
    printf("#\n# %64s  %-34s %-34s\n", "", "---------- out-of-place ----------", "------------ in-place ------------");
    printf("# %12s %12s %6s %6s %6s %*s %6s %3s %10s %8s %8s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop",
           "root", aw, "algo", "proto", "ch", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %12s %12s %6s %6s %6s %*s %6s %3s %10s %8s %8s %6s %10s %8s %8s %6s\n", "(B)", "(elements)", "", "", "",
           aw, "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    for (guint i = 0; i < rows->len; i++) {
      const row *r = &g_array_index(rows, row, i);
      char w[2][24];
      for (int k = 0; k < 2; k++) {
        if (r->wrong[k] == SP_NT_WRONG_NA) g_strlcpy(w[k], "N/A", sizeof w[k]);
        else snprintf(w[k], sizeof w[k], "%" G_GINT64_FORMAT, (gint64)r->wrong[k]);
      }
      printf("  %12" G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT " %6s %6s %6d %*s %6s %3d %10.2f %8.2f %8.2f %6s %10.2f %8.2f %8.2f %6s\n",
             (guint64)r->bytes, (guint64)r->count, sp_dtype_name(dtype), redop_name, root_col, aw, sp_algo_name(r->algo),
             sp_proto_name(r->proto), r->channels, r->time_us[0], r->algbw[0], r->busbw[0], w[0], r->time_us[1], r->algbw[1], r->busbw[1],
             w[1]);
    }
    printf("# Avg bus bandwidth: %.4g GB/s; out of bounds values: %" G_GINT64_FORMAT "%s\n", avg, (gint64)errors,
           check > 0 ? "" : " (not checked)");
  }
  if (fflush(stdout) != 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_IO, "bench: cannot write to stdout"));
  return errors > 0 ? SP_CLI_EXIT_MISMATCH : 0;
}
