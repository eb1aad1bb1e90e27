/* spsim-run: the real backend's launcher program.
 *
 *   mpirun -np N spsim-run --op all-reduce [--dtype f32] [--count C | --size BYTES]
 *          [--algo A] [--redop sum] [--transport mpi|nccl|cuda-mpi] [--checksum]
 *          [--time [--iters K] [--warmup W] [--sizes MIN:MAX]] [--native] [--timeout SEC]
 *   mpirun -np N spsim-run --op GRAPH-OP [--checksum] [--timeout SEC]
 *   mpirun -np N spsim-run --step --model M --layout L [--seq S] [--global-batch B]
 *          [--micro-batch MB] [--gpus-per-node G] [--world W] [--checksum] [--timeout SEC]
 *
 * --step runs the communication of a training step (run_step.c): the step graph the
 * what-if builds for layout L on N GPUs, reduced as its --verify reduces it, every
 * collective and pipeline send with real bytes; compute is not executed.
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

#include "run_priv.h"

const char *const transport_names[TR_COUNT] = { "mpi", "nccl", "cuda-mpi" };

/* ------------------------------------------------------------ configuration */

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
uint64_t count_for(sp_coll c, uint64_t bytes, int32_t n, size_t es)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return bytes / es / (uint64_t)n;
  default: return bytes / es;
  }
}

uint64_t bytes_for(sp_coll c, uint64_t count, int32_t n, size_t es)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return count * es * (uint64_t)n;
  default: return count * es;
  }
}

static gboolean parse_args(int argc, char **argv, run_config *cfg, GError **err)
{
  g_autofree char *op_s = NULL, *coll_s = NULL, *dtype_s = NULL, *algo_s = NULL, *redop_s = NULL,
                  *transport_s = NULL, *size_s = NULL, *sizes_s = NULL, *chunk_s = NULL, *model_s = NULL,
                  *layout_s = NULL, *moe_s = NULL;
  gboolean step = FALSE;
  /* the sizes of --step: G_MININT64 / G_MININT when not given (0 is an error, not a default) */
  gint64 seq = G_MININT64, gbatch = G_MININT64;
  gint mbatch = G_MININT, gpn = G_MININT, gworld = G_MININT;
  gint64 count = G_MININT64; /* not given */
  gint ranks = 0, root = 0, iters = 20, warmup = 5, die = -1, corrupt = -1, hang = -1;
  double timeout = DEFAULT_TIMEOUT;
  gboolean checksum = FALSE, time_ = FALSE, native = FALSE, mismatch = FALSE, deadlock = FALSE;
  /* --step with compute, --probe */
  g_autofree char *trace_s = NULL, *platform_s = NULL, *device_s = NULL;
  gboolean dry = FALSE, compare = FALSE, probe = FALSE;
  gint die_mid = -1;
  gint64 mem_avail = 0;
  GOptionEntry entries[] = {
    { "version", 0, 0, G_OPTION_ARG_NONE, &cfg->version, "print the version and exit", NULL },
    { "op", 'o', 0, G_OPTION_ARG_STRING, &op_s,
      "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, send-recv, or a "
      "graph operation of `spsim verify --op` (ulysses-attention, tp-mlp, ring-attention, ...); "
      "`list` lists them", "OP" },
    { "coll", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &coll_s, "alias of --op", "OP" },
    { "moe", 0, 0, G_OPTION_ARG_STRING, &moe_s,
      "moe-layer, moe-layer-bwd: KEY=VALUE,... over the defaults (experts, topk, ep, etp, tokens, hidden, "
      "ffn, capacity = the capacity factor, drop = probs or position, dropless = 1 for exact per-expert "
      "counts), as `spsim verify --moe`", "OPTS" },
    { "dtype", 'd', 0, G_OPTION_ARG_STRING, &dtype_s, "f32 (default), f16, bf16, i32, i64, u8", "T" },
    { "count", 'c', 0, G_OPTION_ARG_INT64, &count, "elements per rank (default 1024; all-gather, reduce-scatter, all-to-all: 1024 / ranks)", "C" },
    { "size", 0, 0, G_OPTION_ARG_STRING, &size_s,
      "elements per rank given in bytes (K, M, G suffixes) instead of --count", "BYTES" },
    { "ranks", 'n', 0, G_OPTION_ARG_INT, &ranks, "expected world size (default: mpirun -np)", "N" },
    { "algo", 'a', 0, G_OPTION_ARG_STRING, &algo_s,
      "auto (default), ring, tree, direct, nvls, pat, nvls-tree, collnet-direct or collnet-chain, as "
      "`spsim bench --algo` (NCCL_ALGO's spellings too): every transport runs the algorithm's lowered "
      "schedule (nvls as direct messages, nvls-tree and collnet-* as their phases' messages)", "A" },
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
    { "step", 0, 0, G_OPTION_ARG_NONE, &step,
      "run the communication of a training step instead of --op: the step graph the what-if "
      "builds for --layout on W GPUs (--world; default: the launched ranks), reduced as `--verify` reduces it (one layer per "
      "model chunk, pp micro-batches), every collective and pipeline send with real bytes, each "
      "rank checking its outputs; then, unless --dry-compute, the whole step at the model's real sizes: "
      "compute as CPU kernels (OpenBLAS GEMMs, attention, element-wise passes) on the main thread and "
      "every collective and pipeline send as a nonblocking MPI call on its stream, with the graph's "
      "dependencies; prints the measured step time and the busy and exposed time per kind. mpirun -np "
      "must be the layout's GPUs (or, with --dry-compute, the replay's rank count)", NULL },
    { "dry-compute", 0, 0, G_OPTION_ARG_NONE, &dry,
      "--step: the reduced replay of the communication only; compute not executed", NULL },
    { "device", 0, 0, G_OPTION_ARG_STRING, &device_s,
      "--step: where compute runs: cpu (default: OpenBLAS, one thread per rank) or cuda (cuBLAS on the rank's "
      "GPU, local rank modulo the devices; built with CUDA and cuBLAS); communication stays MPI on host memory", "D" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &trace_s,
      "--step: write the measured step as a Chrome trace (Perfetto), as spsim's --trace writes the predicted one", "FILE" },
    { "compare", 0, 0, G_OPTION_ARG_NONE, &compare,
      "--step: print the measured step beside spsim's prediction of the same step on --platform (runs "
      "`spsim PLATFORM ... --json -`; spsim found beside spsim-run or on PATH)", NULL },
    { "platform", 0, 0, G_OPTION_ARG_FILENAME, &platform_s,
      "--compare: the platform of this machine (spsim platform local -np N -o FILE); default: measured in "
      "this job by the same probe (2 ranks or more, the CPU path)", "FILE" },
    { "probe", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &probe, "", NULL },
    { "debug-die-mid-rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &die_mid, "", "R" },
    { "debug-mem-avail", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT64, &mem_avail, "", "BYTES" },
    { "model", 0, 0, G_OPTION_ARG_STRING, &model_s, "--step: a built-in model (tiny, llama3-8b, ...) or a model JSON file", "M" },
    { "layout", 0, 0, G_OPTION_ARG_STRING, &layout_s, "--step: the layout, as the what-if's --layout (tp=2,pp=2,dp=2,zero=1,...)", "L" },
    { "seq", 0, 0, G_OPTION_ARG_INT64, &seq, "--step: sequence length in tokens (default 256, with --global-batch's 8 a "
      "step of seconds on a CPU; the what-if's defaults, 8192 and 1024, are a real step's)", "S" },
    { "global-batch", 0, 0, G_OPTION_ARG_INT64, &gbatch, "--step: sequences per step (default 8)", "B" },
    { "micro-batch", 0, 0, G_OPTION_ARG_INT, &mbatch, "--step: micro-batch size in sequences (default: the layout's mb=, else 1)", "MB" },
    { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &gpn,
      "--step: GPUs per node of the layout (default: its GPUs W if W <= 8, else 8)", "G" },
    { "world", 0, 0, G_OPTION_ARG_INT, &gworld,
      "--step: GPUs W of the layout (default: the launched ranks); the replay runs the stages' "
      "representatives and their groups, so mpirun -np may be smaller (the message says how many)", "W" },
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
      "Example: mpirun -np 4 spsim-run --op all-reduce --dtype bf16 --count 4096 --checksum\n"
      "         mpirun -np 4 spsim-run --step --model tiny --layout tp=2,pp=2 --seq 256 --global-batch 8\n"
      "         (--step: the reduced communication checked, then the step with compute, timed)\n"
      "         mpirun -np 4 spsim-run --step --model tiny --layout tp=2,pp=2 --seq 256 --global-batch 8 --compare");
  g_option_context_add_main_entries(ctx, entries, NULL);
  if (!g_option_context_parse(ctx, &argc, &argv, err))
    return FALSE;
  if (argc > 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unexpected argument '%s'", argv[1]);
    return FALSE;
  }
  if (cfg->version)
    return TRUE;
  cfg->debug_die_mid_rank = die_mid;
  cfg->debug_mem_avail = (double)mem_avail;
  if (probe) {
    if (step || op_s || coll_s) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--probe does not combine with --step or --op");
      return FALSE;
    }
    cfg->probe = TRUE;
    cfg->timeout = timeout;
    return TRUE;
  }
  if (!step && (dry || trace_s || compare || platform_s || device_s)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s applies to --step only (e.g. --step --model tiny --layout tp=2)",
                dry ? "--dry-compute" : trace_s ? "--trace" : compare ? "--compare" : platform_s ? "--platform"
                : "--device");
    return FALSE;
  }
  if (device_s && strcmp(device_s, "cpu") != 0 && strcmp(device_s, "cuda") != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--device must be cpu or cuda (got '%s')", device_s);
    return FALSE;
  }
  if (device_s && dry) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--device places the compute of the step: it does not combine with "
                "--dry-compute");
    return FALSE;
  }
  if (step && dry && (trace_s || compare)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s measures the step with compute: it does not combine with "
                "--dry-compute", trace_s ? "--trace" : "--compare");
    return FALSE;
  }
  if (platform_s && !compare) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--platform applies to --compare (the platform of the prediction)");
    return FALSE;
  }
  if (!step) {
    const char *stray = model_s ? "--model" : layout_s ? "--layout" : seq != G_MININT64 ? "--seq"
                        : gbatch != G_MININT64 ? "--global-batch" : mbatch != G_MININT ? "--micro-batch"
                        : gpn != G_MININT ? "--gpus-per-node" : gworld != G_MININT ? "--world" : NULL;
    if (stray) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s applies to --step only (e.g. --step --model tiny --layout tp=2)",
                  stray);
      return FALSE;
    }
  }
  if (step) {
    /* the step's calls have their own sizes, types and algorithms (those the what-if prices) */
    const char *bad = op_s || coll_s ? "--op" : count != G_MININT64 ? "--count" : size_s ? "--size" : dtype_s ? "--dtype"
                      : algo_s ? "--algo" : redop_s ? "--redop" : chunk_s ? "--chunk" : root ? "--root"
                      : time_ ? "--time" : native ? "--native" : sizes_s ? "--sizes" : ranks ? "--ranks"
                      : transport_s && g_ascii_strcasecmp(transport_s, "mpi") != 0 ? "--transport" : NULL;
    if (bad) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s does not apply to --step (its calls, sizes and algorithms are those of the step graph; it "
                  "runs on --transport mpi)", bad);
      return FALSE;
    }
    if (model_s == NULL || layout_s == NULL) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--step needs --model and --layout (e.g. --step --model tiny "
                  "--layout tp=2,pp=2)");
      return FALSE;
    }
    /* given sizes are at least 1; those not given take the defaults below */
    const char *small = seq != G_MININT64 && seq < 1 ? "seq" : gbatch != G_MININT64 && gbatch < 1 ? "global-batch"
                        : mbatch != G_MININT && mbatch < 1 ? "micro-batch"
                        : gpn != G_MININT && gpn < 1 ? "gpus-per-node" : gworld != G_MININT && gworld < 1 ? "world"
                        : NULL;
    if (small) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--%s must be at least 1", small);
      return FALSE;
    }
    cfg->step = TRUE;
    cfg->model = g_intern_string(model_s);
    cfg->layout = g_intern_string(layout_s);
    /* small by default: the step runs for real, on a CPU too (the tiny model's step at
     * 8192 x 1024 is 1.8e14 FLOP a rank, about an hour of one core) */
    cfg->seq = seq != G_MININT64 ? seq : 256;
    cfg->global_batch = gbatch != G_MININT64 ? gbatch : 8;
    cfg->micro_batch = mbatch != G_MININT ? mbatch : 0;
    cfg->gpus_per_node = gpn != G_MININT ? gpn : 0;
    cfg->world = gworld != G_MININT ? gworld : 0;
    cfg->dry_compute = dry;
    cfg->device_cuda = g_strcmp0(device_s, "cuda") == 0;
    cfg->trace = trace_s ? g_intern_string(trace_s) : NULL;
    cfg->compare = compare;
    cfg->platform = platform_s ? g_intern_string(platform_s) : NULL;
  } else if (op_s == NULL && coll_s == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--op is required (e.g. --op all-reduce, or --step)");
    return FALSE;
  }
  if (!step && g_strcmp0(op_s ? op_s : coll_s, "list") == 0) {
    cfg->list = TRUE;
    return TRUE;
  }
  if (!step) {
    cfg->graph = sp_ops_verify_lookup(op_s ? op_s : coll_s);
    if (!cfg->graph && !(cfg->op = find_op(op_s ? op_s : coll_s, err)))
      return FALSE;
  }
  cfg->dtype = SP_F32;
  if (dtype_s && !sp_dtype_parse(dtype_s, &cfg->dtype, err))
    return FALSE;
  cfg->algo = SP_ALGO_AUTO;
  if (algo_s && !sp_algo_parse(algo_s, &cfg->algo, err))
    return FALSE;
  if (native && cfg->algo != SP_ALGO_AUTO) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--algo %s does not apply to --native (the library's own collective picks its algorithm): "
                "drop --native to run the %s schedule, or drop --algo", sp_algo_name(cfg->algo),
                sp_algo_name(cfg->algo));
    return FALSE;
  }
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
  if (moe_s && !cfg->graph) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--moe applies to the operations moe-layer and moe-layer-bwd");
    return FALSE;
  }
  cfg->op_opts = moe_s ? g_intern_string(moe_s) : NULL;
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
  if (parsed && cfg.version) {
    if (w.rank == 0) printf("spsim-run %s\n", PACKAGE_VERSION);
    return finish(EXIT_SUCCESS);
  }
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
  else if (cfg.probe)
    rc = run_probe(&r);
  else if (cfg.step)
    rc = run_step(&r);
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
