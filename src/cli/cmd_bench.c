/* spsim bench PLATFORM --coll C --ranks N [--algo A] [--sizes MIN:MAX] [--dtype T]
 *                      [--fidelity flow|step] [--channels N] [--json]
 * Predicted collective performance in the style of nccl-tests: for each size
 * (doubling from MIN to MAX) the simulated time of one collective on ranks
 * 0..N-1 of the platform, algbw = bytes / time and busbw = algbw x the
 * nccl-tests factor (GB/s = 1e9 bytes/s). Ring all-reduce, all-gather and
 * reduce-scatter across nodes run one ring channel per member of a node (the
 * engine's choice, sp_sim_ring_channels) unless --channels says otherwise. */
#include "config.h"
#include "cli.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/units.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "MIN:MAX" or one size (sp_size_range_parse; sizes must be >= 1 byte). */
static gboolean parse_sizes(const char *s, uint64_t *lo, uint64_t *hi, GError **err)
{
  if (!sp_size_range_parse(s, lo, hi, err)) {
    g_prefix_error(err, "bench: --sizes: ");
    return FALSE;
  }
  if (*lo == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "bench: --sizes '%s': a size is 0 (sizes must be >= 1 byte)", s);
    return FALSE;
  }
  return TRUE;
}

/* Elements per rank for a nccl-tests size S (bytes): all-gather, reduce-scatter
 * and all-to-all take S as the whole (gathered) buffer, the others as the message. */
static uint64_t count_for(sp_coll c, uint64_t bytes, int32_t n, size_t esize)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL:
    return bytes / esize / (uint64_t)n;
  default:
    return bytes / esize;
  }
}

/* Bytes nccl-tests reports for @p count elements per rank. */
static uint64_t bytes_for(sp_coll c, uint64_t count, int32_t n, size_t esize)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL:
    return count * esize * (uint64_t)n;
  default:
    return count * esize;
  }
}

typedef struct {
  uint64_t bytes, count;
  sp_algo algo;
  int32_t channels;
  double time_us, algbw, busbw;
} row;

static int fail(GError *err)
{
  return sp_cli_fail(err);
}

int sp_cmd_bench(int argc, char **argv)
{
  g_autofree char *coll_s = NULL, *algo_s = NULL, *sizes_s = NULL, *dtype_s = NULL, *fid_s = NULL,
                  *op_s = NULL;
  gint ranks = 0, channels = 0;
  gint64 chunk = 0;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "coll", 'c', 0, G_OPTION_ARG_STRING, &coll_s,
      "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, send-recv", "C" },
    { "ranks", 'n', 0, G_OPTION_ARG_INT, &ranks, "ranks 0..N-1 of the platform (send-recv: rank 0 sends to N-1)", "N" },
    { "algo", 'a', 0, G_OPTION_ARG_STRING, &algo_s, "ring, tree, direct or auto (default)", "A" },
    { "sizes", 's', 0, G_OPTION_ARG_STRING, &sizes_s, "MIN:MAX bytes, doubling (K/M/G binary; default 8:8G)", "RANGE" },
    { "dtype", 'd', 0, G_OPTION_ARG_STRING, &dtype_s, "element type (default f32)", "T" },
    { "op", 0, 0, G_OPTION_ARG_STRING, &op_s, "reduction: sum (default), avg, max, min", "OP" },
    { "fidelity", 'f', 0, G_OPTION_ARG_STRING, &fid_s, "flow (default, fast) or step", "F" },
    { "chunk", 0, 0, G_OPTION_ARG_INT64, &chunk, "ring pipelining chunk in bytes (default 4 MiB)", "BYTES" },
    { "channels", 0, 0, G_OPTION_ARG_INT, &channels,
      "concurrent rings of a ring all-reduce/all-gather/reduce-scatter (default 0: one per "
      "member of a node when the group spans nodes, else 1)", "N" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json, "JSON output", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("PLATFORM.xml - predicted collective performance");
  g_option_context_set_summary(ctx,
      "Simulates one collective per size on the platform and prints an nccl-tests-style table.\n"
      "Example: spsim bench platforms/dgx.xml --coll all-reduce --ranks 8 --sizes 1K:1G");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
    g_prefix_error(&err, "bench: ");
    return fail(err);
  }
  if (argc < 2)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: missing platform (usage: spsim bench PLATFORM.xml --coll C --ranks N)"));
  if (argc > 2)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: unexpected argument '%s'", argv[2]));
  const char *platform = argv[1];
  if (coll_s == NULL)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --coll is required (e.g. --coll all-reduce)"));
  sp_coll coll;
  if (!sp_coll_parse(coll_s, &coll, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_algo algo = SP_ALGO_AUTO;
  if (algo_s != NULL && !sp_algo_parse(algo_s, &algo, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_dtype dtype = SP_F32;
  if (dtype_s != NULL && !sp_dtype_parse(dtype_s, &dtype, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_redop redop = SP_RED_SUM;
  if (op_s != NULL && !sp_redop_parse(op_s, &redop, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  sp_fidelity fid = SP_FIDELITY_FLOW;
  if (fid_s != NULL && !sp_fidelity_parse(fid_s, &fid, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  if (ranks == 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --ranks N is required (ranks 0..N-1 of the platform take part)"));
  if (ranks < 1 || (coll == SP_COLL_SEND_RECV && ranks < 2))
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --ranks must be >= %d (got %d)",
                            coll == SP_COLL_SEND_RECV ? 2 : 1, ranks));
  if (chunk < 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "bench: --chunk must be >= 0"));
  if (channels < 0 || channels > SP_MAX_CHANNELS)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: --channels must be between 0 (automatic) and %d (got %d)",
                            SP_MAX_CHANNELS, channels));
  uint64_t lo = 8, hi = (uint64_t)8 << 30;
  if (sizes_s != NULL && !parse_sizes(sizes_s, &lo, &hi, &err)) return fail(err);

  if (!g_file_test(platform, G_FILE_TEST_EXISTS))
    return fail(g_error_new(SP_ERROR, SP_ERROR_IO, "bench: platform file '%s' not found", platform));
  if (!sp_sim_init(platform, &err)) { g_prefix_error(&err, "bench: "); return fail(err); }
  int32_t hosts = sp_sim_num_hosts();
  if (hosts < ranks)
    return fail(g_error_new(SP_ERROR, SP_ERROR_PLATFORM,
                            "bench: platform '%s' has %d hosts, fewer than --ranks %d", platform, hosts, ranks));

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
  double factor = sp_coll_busbw_factor(coll, n);

  g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(row));
  uint64_t skipped_below = 0;
  for (uint64_t s = lo; s <= hi; s *= 2) {
    uint64_t count = count_for(coll, s, n, esize);
    if (count == 0) {
      skipped_below = s;
    } else {
      sp_coll_spec spec = {
        .coll = coll, .algo = algo, .dtype = dtype, .redop = redop, .ranks = members, .n = n,
        .count = count, .root = 0, .chunk_bytes = (uint64_t)chunk, .op_id = 0, .tag = 0,
        .channels = channels,
      };
      /* the channel count the engine will use (reported per row) */
      int32_t used = channels, blk = 0;
      if (used == 0)
        sp_sim_ring_channels(&spec, &used, &blk);
      if (spec.coll != SP_COLL_ALL_REDUCE && spec.coll != SP_COLL_ALL_GATHER &&
          spec.coll != SP_COLL_REDUCE_SCATTER)
        used = 1;
      if (sp_algo_choose(&spec) != SP_ALGO_RING || n == 1)
        used = 1;
      double secs = 0;
      if (!sp_coll_spec_validate(&spec, &err) || !sp_sim_coll_time(&spec, ranks, fid, &secs, &err)) {
        g_prefix_error(&err, "bench: ");
        return fail(err);
      }
      row r = { .bytes = bytes_for(coll, count, n, esize), .count = count, .algo = sp_algo_choose(&spec),
                .channels = used < 1 ? 1 : used };
      r.time_us = secs * 1e6;
      r.algbw = secs > 0 ? (double)r.bytes / secs / 1e9 : 0;
      r.busbw = r.algbw * factor;
      g_array_append_val(rows, r);
    }
    if (s > G_MAXUINT64 / 2) break;
  }
  if (rows->len == 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "bench: every size is below one %s element per rank (%" G_GUINT64_FORMAT " bytes for %d ranks)",
                            sp_dtype_name(dtype), (guint64)bytes_for(coll, 1, n, esize), n));

  if (json) {
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
    json_builder_set_member_name(b, "dtype");
    json_builder_add_string_value(b, sp_dtype_name(dtype));
    json_builder_set_member_name(b, "fidelity");
    json_builder_add_string_value(b, sp_fidelity_name(fid));
    json_builder_set_member_name(b, "busbw_factor");
    json_builder_add_double_value(b, factor);
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
      json_builder_set_member_name(b, "channels");
      json_builder_add_int_value(b, r->channels);
      json_builder_set_member_name(b, "time_us");
      json_builder_add_double_value(b, r->time_us);
      json_builder_set_member_name(b, "algbw");
      json_builder_add_double_value(b, r->algbw);
      json_builder_set_member_name(b, "busbw");
      json_builder_add_double_value(b, r->busbw);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    sp_cli_print_json(b);
  } else {
    printf("# spsim bench (predicted): %s, %d ranks of %s (%d hosts), algo %s, dtype %s, fidelity %s\n",
           sp_coll_name(coll), ranks, platform, hosts, sp_algo_name(algo), sp_dtype_name(dtype),
           sp_fidelity_name(fid));
    if (coll == SP_COLL_SEND_RECV) printf("# send-recv: rank 0 sends to rank %d\n", ranks - 1);
    if (skipped_below > 0)
      printf("# sizes up to %" G_GUINT64_FORMAT " B skipped: less than one element per rank\n", (guint64)skipped_below);
    int32_t maxch = 1;
    for (guint i = 0; i < rows->len; i++)
      maxch = MAX(maxch, g_array_index(rows, row, i).channels);
    if (maxch > 1)
      printf("# ring rows: %d channels (concurrent rings, each through other GPUs' NICs%s)\n", maxch,
             channels == 0 ? "; chosen per node, --channels N overrides" : "");
    printf("#\n# %12s %12s %6s %6s %12s %8s %8s\n", "size", "count", "type", "algo", "time", "algbw", "busbw");
    printf("# %12s %12s %6s %6s %12s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)");
    for (guint i = 0; i < rows->len; i++) {
      const row *r = &g_array_index(rows, row, i);
      printf("  %12" G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT " %6s %6s %12.2f %8.2f %8.2f\n", (guint64)r->bytes,
             (guint64)r->count, sp_dtype_name(dtype), sp_algo_name(r->algo), r->time_us, r->algbw, r->busbw);
    }
  }
  if (fflush(stdout) != 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_IO, "bench: cannot write to stdout"));
  return 0;
}
