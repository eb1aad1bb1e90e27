/* spsim verify PLATFORM --op OP --ranks N ...: run an operation in data mode on
 * the SimGrid engine and compare every rank's output bitwise with the reference.
 *
 * Adding an operation (e.g. the sequence-parallel ops): write a builder
 *   static gboolean build_x(const verify_opts *o, verify_case *vc, GError **err)
 * that fills @c vc with the per-rank programs and buffers of ranks 0..world-1
 * (vc->progs, vc->bufs), a @c check callback (first differing rank and offset),
 * optional checksum callbacks, the payload size for the report, and @c free; then
 * add a row { "name", build_x } to verify_ops[] below. Collectives are
 * built through sp_case (spsim/verify.h); any other object works the same way.
 * Graph operations whose COMPUTE steps carry data kernels register the kernel
 * runner with sp_sim_set_compute_hook() before the run.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-glib/json-glib.h>

#include "cli.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/ops.h"
#include "spsim/units.h"
#include "spsim/verify.h"

/* Parsed options. */
typedef struct {
  const char *op_name;
  int32_t ranks;
  sp_dtype dtype;
  sp_algo algo;
  sp_redop redop;
  int32_t root;
  uint64_t count;      /* 0: default */
  uint64_t size;       /* bytes, 0: unset */
  uint64_t chunk;      /* chunk bytes, 0: default */
  int32_t channels;    /* ring channels (0, 1: one ring) */
  int32_t channel_block; /* members per rotation block (0: all members in one block) */
  const char *moe;     /* --moe: options of moe-layer / moe-layer-bwd (NULL: the defaults) */
} verify_opts;

/* A built verification case: what the engine runs and how to judge it. */
typedef struct {
  int32_t world;
  sp_program *const *progs;
  void **const *bufs;
  const char *algo;    /* algorithm actually used, for the report */
  uint64_t bytes;      /* payload size reported (nccl-tests convention) */
  void *obj;
  gboolean (*check)(void *obj, int32_t *bad_rank, uint64_t *bad_off, GError **err);
  void (*print_checksums)(void *obj, FILE *out);
  uint64_t (*checksum_all)(void *obj);
  void (*free)(void *obj);
} verify_case;

typedef struct {
  const char *name;
  gboolean (*build)(const verify_opts *o, verify_case *vc, GError **err);
} verify_op;

/* ---- collectives through sp_case ------------------------------------------------------ */

static gboolean case_check(void *obj, int32_t *r, uint64_t *off, GError **err)
{
  return sp_case_check(obj, r, off, err);
}
static void case_print(void *obj, FILE *out) { sp_case_print_checksums(obj, out); }
static uint64_t case_all(void *obj) { return sp_case_checksum_all(obj); }
static void case_free(void *obj) { sp_case_free(obj); }

typedef struct {
  sp_case *c;
  int32_t *ranks;
} coll_obj;

static gboolean coll_check(void *o, int32_t *r, uint64_t *off, GError **err)
{
  return case_check(((coll_obj *)o)->c, r, off, err);
}
static void coll_print(void *o, FILE *out) { case_print(((coll_obj *)o)->c, out); }
static uint64_t coll_all(void *o) { return case_all(((coll_obj *)o)->c); }
static void coll_free(void *o)
{
  coll_obj *co = o;
  case_free(co->c);
  g_free(co->ranks);
  g_free(co);
}

/* Default element count: buffers of about 1,024 elements per rank. */
static uint64_t default_count(sp_coll c, int32_t n)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return MAX(1, 1024 / (uint64_t)n);
  default: return 1024;
  }
}

static gboolean build_coll(sp_coll coll, const verify_opts *o, verify_case *vc, GError **err)
{
  coll_obj *co = g_new0(coll_obj, 1);
  int32_t n = o->ranks;
  if (coll == SP_COLL_SEND_RECV) {
    if (o->ranks < 2) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "send-recv needs --ranks 2 or more");
      g_free(co);
      return FALSE;
    }
    /* the pair is ranks 0 and N-1 (the farthest apart in declaration order) */
    co->ranks = g_new(int32_t, 2);
    co->ranks[0] = 0;
    co->ranks[1] = o->ranks - 1;
    n = 2;
  } else {
    co->ranks = sp_group_range(0, 1, n);
  }
  size_t es = sp_dtype_size(o->dtype);
  sp_coll_spec spec = { .coll = coll, .algo = o->algo, .dtype = o->dtype, .redop = o->redop,
                        .ranks = co->ranks, .n = n, .root = o->root, .chunk_bytes = o->chunk,
                        .channels = o->channels, .channel_block = o->channel_block };
  if (o->size) {
    if (o->size % es) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "--size %" G_GUINT64_FORMAT " is not a multiple of the %s element size (%zu bytes)",
                  o->size, sp_dtype_name(o->dtype), es);
      g_free(co->ranks);
      g_free(co);
      return FALSE;
    }
    spec.count = o->size / es;
  } else {
    spec.count = o->count ? o->count : default_count(coll, n);
  }
  if (o->root < 0 || o->root >= n) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--root %d is outside the group of %d ranks",
                o->root, n);
    g_free(co->ranks);
    g_free(co);
    return FALSE;
  }
  co->c = sp_case_new_coll(&spec, o->ranks, TRUE, err);
  if (co->c == NULL) {
    g_free(co->ranks);
    g_free(co);
    return FALSE;
  }
  vc->world = o->ranks;
  vc->progs = sp_case_programs(co->c);
  vc->bufs = sp_case_all_bufs(co->c);
  vc->algo = sp_algo_name(sp_algo_choose(&spec));
  uint64_t in = sp_coll_in_count(&spec), out = sp_coll_out_count(&spec);
  vc->bytes = MAX(in, out) * es;
  vc->obj = co;
  vc->check = coll_check;
  vc->print_checksums = coll_print;
  vc->checksum_all = coll_all;
  vc->free = coll_free;
  return TRUE;
}

#define COLL_BUILDER(fn, kind) \
  static gboolean fn(const verify_opts *o, verify_case *vc, GError **err) \
  { return build_coll(kind, o, vc, err); }
COLL_BUILDER(build_all_reduce, SP_COLL_ALL_REDUCE)
COLL_BUILDER(build_all_gather, SP_COLL_ALL_GATHER)
COLL_BUILDER(build_reduce_scatter, SP_COLL_REDUCE_SCATTER)
COLL_BUILDER(build_all_to_all, SP_COLL_ALL_TO_ALL)
COLL_BUILDER(build_broadcast, SP_COLL_BROADCAST)
COLL_BUILDER(build_reduce, SP_COLL_REDUCE)
COLL_BUILDER(build_send_recv, SP_COLL_SEND_RECV)

/* ---- graph operations of the operation library (spsim/ops.h; owner: ops) ---------------- */

/* Builds the op's forward + backward graph on --ranks ranks in groups of the largest
 * divisor of --ranks not above 64 (e.g. 64-way SP groups inside 1,024 ranks); the data
 * kernels run through the compute hook; outputs are compared with the global reference. */
static gboolean graph_case_check(void *obj, int32_t *r, uint64_t *off, GError **err)
{
  return sp_graph_case_check(obj, r, off, err);
}
/* per-rank checksums of the compared outputs, in the collectives' canonical lines
 * (the ranks holding outputs, in order; spsim-run --checksum prints the same) */
static size_t graph_case_sums(const sp_graph_case *c, int32_t *ranks, uint64_t *sums)
{
  size_t k = 0;
  for (int32_t r = 0; r < sp_graph_case_world(c); r++)
    if (sp_graph_case_has_outputs(c, r)) {
      ranks[k] = r;
      sums[k++] = sp_graph_case_checksum(c, r);
    }
  return k;
}
static void graph_case_print(void *obj, FILE *out)
{
  const int32_t w = sp_graph_case_world(obj);
  g_autofree int32_t *ranks = g_new(int32_t, w);
  g_autofree uint64_t *sums = g_new(uint64_t, w);
  sp_checksum_print_lines(out, ranks, sums, graph_case_sums(obj, ranks, sums));
}
static uint64_t graph_case_all(void *obj)
{
  const int32_t w = sp_graph_case_world(obj);
  g_autofree int32_t *ranks = g_new(int32_t, w);
  g_autofree uint64_t *sums = g_new(uint64_t, w);
  return sp_checksum_combine(sums, graph_case_sums(obj, ranks, sums));
}
static void graph_case_free(void *obj)
{
  sp_sim_set_compute_hook(NULL, NULL);
  sp_graph_case_free(obj);
}
static gboolean build_graph_op(const verify_opts *o, verify_case *vc, GError **err)
{
  int32_t group = 1;
  for (int32_t d = 1; d <= 64 && d <= o->ranks; d++)
    if (o->ranks % d == 0)
      group = d;
  sp_graph_case *c = sp_ops_verify_case_new_opts(o->op_name, o->ranks, group, o->moe, err);
  if (c == NULL)
    return FALSE;
  vc->world = sp_graph_case_world(c);
  vc->progs = sp_graph_case_progs(c);
  vc->bufs = sp_graph_case_bufs(c);
  vc->algo = "graph";
  vc->bytes = sp_graph_case_bytes(c);
  vc->obj = c;
  vc->check = graph_case_check;
  vc->print_checksums = graph_case_print;
  vc->checksum_all = graph_case_all;
  vc->free = graph_case_free;
  sp_sim_set_compute_hook(sp_graph_case_compute, c);
  return TRUE;
}

static const verify_op verify_ops[] = {
  { "all-reduce", build_all_reduce },
  { "all-gather", build_all_gather },
  { "reduce-scatter", build_reduce_scatter },
  { "all-to-all", build_all_to_all },
  { "broadcast", build_broadcast },
  { "reduce", build_reduce },
  { "send-recv", build_send_recv },
  /* operation library (spsim/ops.h): see sp_ops_verify_table() */
  { "ulysses-all-to-all", build_graph_op },
  { "gather-split", build_graph_op },
  { "slice-and-pad", build_graph_op },
  { "ulysses-attention", build_graph_op },
  { "tp-mlp", build_graph_op },
  { "tp-mlp-sp", build_graph_op },
  { "isp-linear", build_graph_op },
  { "ring-attention", build_graph_op },
  { "ulysses-ring", build_graph_op },
  { "pipeline-1f1b", build_graph_op },
  { "ring-attention-bwd", build_graph_op },
  { "ulysses-ring-bwd", build_graph_op },
  { "pipeline-interleaved", build_graph_op },
  { "all-to-all-v", build_graph_op },
  { "moe-layer", build_graph_op },
  { "moe-layer-bwd", build_graph_op },
};

/* `--op list`: every operation with one line on what it checks. */
static void list_ops(void)
{
  for (gsize i = 0; i < G_N_ELEMENTS(verify_ops); i++) {
    sp_coll c;
    const sp_op_verify_entry *e = sp_ops_verify_lookup(verify_ops[i].name);
    const char *what = e ? e->help : sp_coll_parse(verify_ops[i].name, &c, NULL) ? sp_coll_semantics(c) : "";
    printf("%-22s %s\n", verify_ops[i].name, what);
  }
}

static const verify_op *find_op(const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS(verify_ops); i++)
    if (strcmp(verify_ops[i].name, name) == 0)
      return &verify_ops[i];
  return NULL;
}

/* ---- option parsing ---------------------------------------------------------------------- */

/* "4096", "64K", "1M", "2GiB" ... -> bytes (sp_size_parse), which must be positive. */
static gboolean parse_size(const char *flag, const char *s, uint64_t *out, GError **err)
{
  uint64_t v = 0;
  if (!sp_size_parse(s, &v, NULL)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s '%s' is not a size (a positive number, optionally with K, M or G)", flag,
                s ? s : "");
    return FALSE;
  }
  if (v == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s must be positive (got '%s')", flag, s);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

static gboolean parse_ranks(const char *s, int32_t *out, GError **err)
{
  char *end = NULL;
  errno = 0;
  gint64 v = s && *s ? g_ascii_strtoll(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < 1 || v > G_MAXINT32) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--ranks '%s' must be a positive number of ranks", s ? s : "");
    return FALSE;
  }
  *out = (int32_t)v;
  return TRUE;
}

static void json_report(const verify_opts *o, const verify_case *vc, gboolean pass, double t,
                        gboolean checksum, int32_t bad_rank, uint64_t bad_off)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "op");
  json_builder_add_string_value(b, o->op_name);
  json_builder_set_member_name(b, "ranks");
  json_builder_add_int_value(b, o->ranks);
  json_builder_set_member_name(b, "dtype");
  json_builder_add_string_value(b, sp_dtype_name(o->dtype));
  json_builder_set_member_name(b, "algo");
  json_builder_add_string_value(b, vc->algo);
  json_builder_set_member_name(b, "bytes");
  json_builder_add_int_value(b, (gint64)vc->bytes);
  json_builder_set_member_name(b, "pass");
  json_builder_add_boolean_value(b, pass);
  if (!pass) {
    json_builder_set_member_name(b, "first_bad_rank");
    json_builder_add_int_value(b, bad_rank);
    json_builder_set_member_name(b, "first_bad_offset");
    json_builder_add_int_value(b, (gint64)bad_off);
  }
  json_builder_set_member_name(b, "simulated_time_us");
  json_builder_add_double_value(b, t * 1e6);
  if (checksum && vc->checksum_all) {
    char hex[32];
    g_snprintf(hex, sizeof hex, "0x%016" G_GINT64_MODIFIER "x", (guint64)vc->checksum_all(vc->obj));
    json_builder_set_member_name(b, "checksum");
    json_builder_add_string_value(b, hex);
  }
  json_builder_end_object(b);
  sp_cli_print_json(b);
}

int sp_cmd_verify(int argc, char **argv)
{
  char *op = NULL, *ranks = NULL, *dtype = NULL, *count = NULL, *size = NULL, *algo = NULL,
       *redop = NULL, *fidelity = NULL, *trace_path = NULL, *chunk = NULL, *moe = NULL;
  gint root = 0, channels = 0, channel_block = 0;
  gboolean checksum = FALSE, json = FALSE;
  GOptionEntry entries[] = {
    { "op", 0, 0, G_OPTION_ARG_STRING, &op, "operation: all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, send-recv, or an operation of the library (ulysses-attention, tp-mlp, isp-linear, ring-attention-bwd, pipeline-interleaved, ...; `list` lists them all with what each checks)", "OP" },
    { "ranks", 0, 0, G_OPTION_ARG_STRING, &ranks, "number of ranks (at most the platform's hosts)", "N" },
    { "dtype", 0, 0, G_OPTION_ARG_STRING, &dtype, "element type: f32 (default), f16, bf16, i32, i64, u8", "T" },
    { "count", 0, 0, G_OPTION_ARG_STRING, &count, "elements per rank (coll.h convention); default about 1024 elements per buffer", "ELEMS" },
    { "size", 0, 0, G_OPTION_ARG_STRING, &size, "the same in bytes (K, M, G suffixes)", "BYTES" },
    { "algo", 0, 0, G_OPTION_ARG_STRING, &algo, "ring, tree, direct, nvls, pat, nvls-tree, collnet-direct, collnet-chain or auto (default)", "ALGO" },
    { "redop", 0, 0, G_OPTION_ARG_STRING, &redop, "sum (default), avg, max, min", "OP" },
    { "root", 0, 0, G_OPTION_ARG_INT, &root, "group index of the root (broadcast, reduce; default 0)", "R" },
    { "chunk", 0, 0, G_OPTION_ARG_STRING, &chunk, "pipelining chunk in bytes (default: the algorithm's)", "BYTES" },
    { "channels", 0, 0, G_OPTION_ARG_INT, &channels, "ring channels (default 1: one ring; coll.h: channel c rotates each block by c)", "N" },
    { "channel-block", 0, 0, G_OPTION_ARG_INT, &channel_block, "members per rotation block with --channels (default: the whole group)", "B" },
    { "fidelity", 0, 0, G_OPTION_ARG_STRING, &fidelity, "step (data mode runs every step)", "F" },
    { "moe", 0, 0, G_OPTION_ARG_STRING, &moe, "moe-layer, moe-layer-bwd: KEY=VALUE,... over the defaults: experts (2 ep), topk (2), ep (ranks / 2 from 4 ranks), etp (moe-layer-bwd: 2 where 4 divides the ranks, else 1), tokens, hidden, ffn (4 each), capacity (the capacity factor, 1), drop (probs or position), dropless (1: every routed token kept and sent with exact per-expert counts; not with capacity)", "OPTS" },
    { "checksum", 0, 0, G_OPTION_ARG_NONE, &checksum, "print the output checksums", NULL },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &trace_path, "write the timeline as Chrome trace JSON", "FILE" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "print one JSON object", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("PLATFORM.xml - run an operation with real bytes on SimGrid and check it");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Every rank's output is compared bitwise with the reference semantics.\n"
    "Prints PASS or FAIL (exit 1) with the first differing rank and offset.\n");
  GError *err = NULL;
  int rc = 1;
  verify_case vc = { 0 };
  sp_trace *tr = NULL;
  verify_opts o = { .dtype = SP_F32, .algo = SP_ALGO_AUTO, .redop = SP_RED_SUM };

  if (!g_option_context_parse(ctx, &argc, &argv, &err))
    goto fail;
  if (op != NULL && strcmp(op, "list") == 0) {
    list_ops();
    rc = 0;
    goto done;
  }
  o.channels = channels;
  o.channel_block = channel_block;
  if (argc < 2) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "verify: missing PLATFORM.xml (spsim verify PLATFORM.xml --op OP --ranks N)");
    goto fail;
  }
  if (argc > 2) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "verify: unexpected argument '%s'", argv[2]);
    goto fail;
  }
  if (op == NULL) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "verify: --op is required");
    goto fail;
  }
  const verify_op *vop = find_op(op);
  if (vop == NULL) {
    GString *names = g_string_new(NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(verify_ops); i++)
      g_string_append_printf(names, "%s%s", i ? ", " : "", verify_ops[i].name);
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "unknown operation '%s' (known: %s)", op, names->str);
    g_string_free(names, TRUE);
    goto fail;
  }
  o.op_name = vop->name;
  if (ranks == NULL) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "verify: --ranks is required");
    goto fail;
  }
  if (!parse_ranks(ranks, &o.ranks, &err))
    goto fail;
  if (dtype && !sp_dtype_parse(dtype, &o.dtype, &err))
    goto fail;
  if (algo && !sp_algo_parse(algo, &o.algo, &err))
    goto fail;
  if (redop && !sp_redop_parse(redop, &o.redop, &err))
    goto fail;
  if (count && size) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "give --count or --size, not both");
    goto fail;
  }
  if (count && !parse_size("--count", count, &o.count, &err))
    goto fail;
  if (size && !parse_size("--size", size, &o.size, &err))
    goto fail;
  if (chunk && !parse_size("--chunk", chunk, &o.chunk, &err))
    goto fail;
  o.root = root;
  o.moe = moe;
  if (moe && vop->build != build_graph_op) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "--moe applies to the operations moe-layer and moe-layer-bwd");
    goto fail;
  }
  if (vop->build == build_graph_op) {
    /* graph operations build fixed small shapes (as spsim-run does): refuse what
     * would be silently ignored */
    const char *bad = count ? "--count" : size ? "--size" : dtype ? "--dtype" : algo ? "--algo"
                      : redop ? "--redop" : chunk ? "--chunk" : root ? "--root" : channels ? "--channels"
                      : channel_block ? "--channel-block" : NULL;
    if (bad) {
      err = g_error_new(SP_ERROR, SP_ERROR_INVALID,
                        "%s does not apply to the graph operation '%s' (its sizes, types and groups are fixed; "
                        "--ranks sets the ranks)", bad, vop->name);
      goto fail;
    }
  }
  if (fidelity) {
    sp_fidelity f;
    if (!sp_fidelity_parse(fidelity, &f, &err))
      goto fail;
    if (f != SP_FIDELITY_STEP) {
      err = g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED,
                        "verify runs real bytes through every step: use --fidelity step");
      goto fail;
    }
  }

  if (!sp_sim_init(argv[1], &err))
    goto fail;
  if (o.ranks > sp_sim_num_hosts()) {
    err = g_error_new(SP_ERROR, SP_ERROR_PLATFORM, "platform has %d hosts, --ranks asks for %d",
                      sp_sim_num_hosts(), o.ranks);
    goto fail;
  }
  if (!vop->build(&o, &vc, &err))
    goto fail;
  if (trace_path) {
    tr = sp_trace_new();
    sp_trace_set_op_name(tr, 0, vop->name);
  }
  double t = 0.0;
  if (!sp_sim_run(vc.progs, vc.world, vc.bufs, SP_FIDELITY_STEP, tr, &t, &err))
    goto fail;
  if (tr && !sp_trace_write_chrome(tr, trace_path, &err))
    goto fail;

  int32_t bad_rank = -1;
  uint64_t bad_off = 0;
  GError *cerr = NULL;
  gboolean pass = vc.check(vc.obj, &bad_rank, &bad_off, &cerr);
  if (!pass && cerr && cerr->code != SP_ERROR_MISMATCH) {
    err = cerr;
    goto fail;
  }
  g_clear_error(&cerr);
  if (json) {
    json_report(&o, &vc, pass, t, checksum, bad_rank, bad_off);
  } else {
    printf("%s op=%s ranks=%d dtype=%s algo=%s bytes=%" G_GUINT64_FORMAT " simulated_time_us=%.3f",
           pass ? "PASS" : "FAIL", o.op_name, o.ranks, sp_dtype_name(o.dtype), vc.algo, vc.bytes,
           t * 1e6);
    if (!pass)
      printf(" first differing rank %d offset %" G_GUINT64_FORMAT, bad_rank, bad_off);
    printf("\n");
    if (checksum && vc.print_checksums)
      vc.print_checksums(vc.obj, stdout);
  }
  fflush(stdout);
  rc = pass ? 0 : SP_CLI_EXIT_MISMATCH;
  goto done;

fail:
  rc = sp_cli_fail(err);
done:
  if (vc.free)
    vc.free(vc.obj);
  sp_trace_free(tr);
  g_free(op); g_free(ranks); g_free(dtype); g_free(count); g_free(size); g_free(algo);
  g_free(redop); g_free(fidelity); g_free(trace_path); g_free(chunk); g_free(moe);
  return rc;
}
