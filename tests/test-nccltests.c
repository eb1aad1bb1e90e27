/* nccl-tests' conventions and logs (spsim/nccltests.h). Expected values are
 * computed by hand from nccl-tests' source (src/common.cu setupArgs and TimeTest,
 * the *GetCollByteCount of all_gather.cu / alltoall.cu / reduce_scatter.cu,
 * src/util.cu's printf formats), never from spsim's output. */
#include "config.h"
#include <glib.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/nccltests.h"

static void test_counts(void)
{
  /* all-reduce: count = bytes / 4 */
  g_assert_cmpuint(sp_nt_count(SP_COLL_ALL_REDUCE, 1000, 8, 4), ==, 250);
  g_assert_cmpuint(sp_nt_bytes(SP_COLL_ALL_REDUCE, 250, 8, 4), ==, 1000);
  /* all-gather on 8 ranks, 1000 B of float: 250 / 8 = 31 elements, rounded down to
   * a multiple of 16 / 4 = 4: 28 per rank; size 28 x 4 x 8 = 896 B */
  g_assert_cmpuint(sp_nt_count(SP_COLL_ALL_GATHER, 1000, 8, 4), ==, 28);
  g_assert_cmpuint(sp_nt_bytes(SP_COLL_ALL_GATHER, 28, 8, 4), ==, 896);
  /* all-to-all, 8 B on 8 ranks: 2 / 8 = 0 elements */
  g_assert_cmpuint(sp_nt_count(SP_COLL_ALL_TO_ALL, 8, 8, 4), ==, 0);
  /* reduce-scatter of uint8 on 3 ranks, 100 B: 33 -> multiple of 16: 32 */
  g_assert_cmpuint(sp_nt_count(SP_COLL_REDUCE_SCATTER, 100, 3, 1), ==, 32);
  /* int64 (8 B): multiples of 2 elements; 1000 B / 8 = 125 / 4 ranks = 31 -> 30 */
  g_assert_cmpuint(sp_nt_count(SP_COLL_ALL_GATHER, 1000, 4, 8), ==, 30);
}

static void test_sizes(void)
{
  GError *err = NULL;
  GArray *a = sp_nt_sizes(8, 100, 0, 2, 100, &err);
  g_assert_no_error(err);
  g_assert_cmpuint(a->len, ==, 4); /* 8 16 32 64 */
  g_assert_cmpuint(g_array_index(a, uint64_t, 3), ==, 64);
  g_array_unref(a);
  a = sp_nt_sizes(1024, 4096, 1024, 0, 100, &err); /* -i 1K: 1K 2K 3K 4K */
  g_assert_no_error(err);
  g_assert_cmpuint(a->len, ==, 4);
  g_assert_cmpuint(g_array_index(a, uint64_t, 2), ==, 3072);
  g_array_unref(a);
  g_assert_null(sp_nt_sizes(8, (uint64_t)8 << 30, 1 << 20, 0, 1000, &err)); /* 8192 sizes */
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  g_assert_null(sp_nt_sizes(0, 8, 0, 2, 10, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  g_assert_null(sp_nt_sizes(16, 8, 0, 2, 10, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
}

static void test_format(void)
{
  char b[8];
  sp_nt_format_float(b, 7, 16.2);
  g_assert_cmpstr(b, ==, "  16.20");
  sp_nt_format_float(b, 7, 12345.678); /* "12345.68" is 8 wide: one decimal */
  g_assert_cmpstr(b, ==, "12345.7");
  sp_nt_format_float(b, 7, 107395.18); /* no decimal fits */
  g_assert_cmpstr(b, ==, " 107395");
  sp_nt_format_float(b, 7, 12345678.0); /* 8 digits: exponent */
  g_assert_cmpstr(b, ==, "1.2e+07");
  char c[7];
  sp_nt_format_float(c, 6, 351.3);
  g_assert_cmpstr(c, ==, "351.30");
}

/* One row written as util.cu would: "%12li  %12li  %8s  %6s  %6s" then
 * "  %7s  %6s  %6s  %6g" and "  %7s  %6s  %6s    N/A". */
static void test_row_layout(void)
{
  sp_nt_row r = { .size = 1048576, .count = 262144, .root = -1, .time_us = { 48.88, 49.1 },
                  .algbw = { 21.45, 21.36 }, .busbw = { 37.54, 37.38 }, .wrong = { 0, SP_NT_WRONG_NA } };
  strcpy(r.type, "float");
  strcpy(r.redop, "sum");
  g_autoptr(GString) s = g_string_new(NULL);
  sp_nt_append_row(s, &r);
  g_assert_cmpstr(s->str, ==,
                  "     1048576        262144     float     sum      -1"
                  "    48.88   21.45   37.54       0    49.10   21.36   37.38    N/A\n");
  g_string_truncate(s, 0);
  sp_nt_append_footer(s, 0, 63.5264, "all_reduce_perf");
  g_assert_cmpstr(s->str, ==,
                  "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 63.5264 \n#\n"
                  "# Collective test concluded: all_reduce_perf\n");
}

/* A two-node log as nccl-tests 2.13 prints it under mpirun, with NCCL INFO lines. */
static const char log_2node[] =
  "$ mpirun -np 4 -N 2 ./build/all_gather_perf -b 8 -e 128M -f 2 -g 1\n"
  "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n"
  "#\n"
  "# Using devices\n"
  "#  Rank  0 Group  0 Pid  41235 on    gpu-a01 device  0 [0x07] NVIDIA H100 80GB HBM3\n"
  "#  Rank  1 Group  0 Pid  41236 on    gpu-a01 device  1 [0x0f] NVIDIA H100 80GB HBM3\n"
  "#  Rank  2 Group  0 Pid  18804 on    gpu-a02 device  0 [0x07] NVIDIA H100 80GB HBM3\n"
  "#  Rank  3 Group  0 Pid  18805 on    gpu-a02 device  1 [0x0f] NVIDIA H100 80GB HBM3\n"
  "gpu-a01:41235:41235 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
  "#\n"
  "#                                                              out-of-place                       in-place          \n"
  "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n"
  "           0             0     float    none      -1     0.20    0.00    0.00      0     0.19    0.00    0.00      0\n"
  "          64             4     float    none      -1    31.06    0.00    0.00      0    30.74    0.00    0.00      0\n"
  "   134217728       8388608     float    none      -1   2995.2   44.81   33.61      0   2987.5   44.93   33.70      0\n"
  "# Out of bounds values : 0 OK\n"
  "# Avg bus bandwidth    : 11.2185 \n";

static void test_parse_log(void)
{
  GError *err = NULL;
  g_autoptr(sp_nt_log) log = sp_nt_log_parse(log_2node, -1, "x.log", &err);
  g_assert_no_error(err);
  g_assert_true(log->has_coll);
  g_assert_cmpint(log->coll, ==, SP_COLL_ALL_GATHER); /* from the command line */
  g_assert_cmpint(log->nranks, ==, 4);
  g_assert_cmpint(log->nthreads, ==, 1);
  g_assert_cmpint(log->ngpus, ==, 1);
  g_assert_cmpuint(log->rows->len, ==, 3);
  const sp_nt_row *r = &g_array_index(log->rows, sp_nt_row, 2);
  g_assert_cmpuint(r->size, ==, 134217728);
  g_assert_cmpuint(r->count, ==, 8388608);
  g_assert_cmpstr(r->type, ==, "float");
  g_assert_cmpstr(r->redop, ==, "none");
  g_assert_cmpint(r->root, ==, -1);
  g_assert_cmpfloat_with_epsilon(r->time_us[0], 2995.2, 1e-9);
  g_assert_cmpfloat_with_epsilon(r->busbw[1], 33.70, 1e-9);
  g_assert_cmpint(r->wrong[0], ==, 0);
  int32_t nodes = 0, *node_of = NULL, *local_of = NULL;
  g_assert_true(sp_nt_log_nodes(log, &nodes, &node_of, &local_of));
  g_assert_cmpint(nodes, ==, 2);
  g_assert_cmpint(node_of[2], ==, 1);
  g_assert_cmpint(local_of[3], ==, 1);
  g_free(node_of);
  g_free(local_of);
}

static void test_parse_variants(void)
{
  GError *err = NULL;
  /* the "Collective test starting" line of nccl-tests >= 2.14, N/A in #wrong */
  const char *v = "# Collective test starting: sendrecv_perf\n"
                  "        1024           256     float     sum      -1    11.10    0.09    0.09    N/A    10.90    0.09    0.09    N/A\n";
  g_autoptr(sp_nt_log) a = sp_nt_log_parse(v, -1, "all_reduce_perf.log", &err);
  g_assert_no_error(err);
  g_assert_cmpint(a->coll, ==, SP_COLL_SEND_RECV); /* the header wins over the file name */
  g_assert_cmpint(g_array_index(a->rows, sp_nt_row, 0).wrong[0], ==, SP_NT_WRONG_NA);
  g_assert_cmpint(a->nranks, ==, 0);
  /* no header: the file name; 12 fields (before the root column) */
  const char *old = "        1024           256     float     sum    11.10    0.09    0.17  0e+00    10.90    0.09    0.18  0e+00\n";
  g_autoptr(sp_nt_log) b = sp_nt_log_parse(old, -1, "/runs/reduce_scatter_perf-2n.txt", &err);
  g_assert_no_error(err);
  g_assert_true(b->has_coll);
  g_assert_cmpint(b->coll, ==, SP_COLL_REDUCE_SCATTER);
  g_assert_cmpint(g_array_index(b->rows, sp_nt_row, 0).root, ==, -1);
  g_assert_cmpfloat_with_epsilon(g_array_index(b->rows, sp_nt_row, 0).busbw[1], 0.18, 1e-12);
  /* nothing names the collective */
  g_autoptr(sp_nt_log) c = sp_nt_log_parse(old, -1, "run7.txt", &err);
  g_assert_no_error(err);
  g_assert_false(c->has_coll);
  /* "reduce_perf" inside "all_reduce_perf" is not reduce */
  g_autoptr(sp_nt_log) d = sp_nt_log_parse(old, -1, "all_reduce_perf.out", &err);
  g_assert_no_error(err);
  g_assert_cmpint(d->coll, ==, SP_COLL_ALL_REDUCE);
  g_assert_null(d->tuner_plugin);
  /* NCCL_DEBUG=INFO lines: the tuner plugin NCCL loaded (src/plugin/tuner/tuner_v3.cc:
   * "TUNER/Plugin: Using %s (v3)"), the first one */
  const char *info = "p5-1:4012:4100 [0] NCCL INFO TUNER/Plugin: Using nccl_ofi_tuner (v3)\n"
                     "p5-1:4012:4101 [1] NCCL INFO TUNER/Plugin: Using other (v2)\n"
                     "        1024           256     float     sum      -1    11.10    0.09    0.17      0    10.90    0.09    0.18      0\n";
  g_autoptr(sp_nt_log) t = sp_nt_log_parse(info, -1, "all_reduce_perf.log", &err);
  g_assert_no_error(err);
  g_assert_cmpstr(t->tuner_plugin, ==, "nccl_ofi_tuner");
  g_assert_cmpuint(t->rows->len, ==, 1);
  g_assert_cmpuint(t->skipped_rows, ==, 0);
  /* figures nccl-tests never prints (inf, nan, a sign): those rows are left out and
   * counted, with the line of the first; a timestamped job line is no row */
  const char *odd = "2024-05-06 12:00:00 a b c d e f g h i j k l m n\n"
                    "        1024           256     float     sum      -1      inf    0.09    0.17      0    10.90    0.09    0.18      0\n"
                    "        2048           512     float     sum      -1    11.10    0.18    0.34      0    10.90    0.19    0.35      0\n"
                    "        4096          1024     float     sum      -1    11.10     nan    0.68      0    10.90    0.38    0.69      0\n"
                    "        8192          2048     float     sum      -1    11.10    0.74   -1.36      0    10.90    0.75    1.38      0\n";
  g_autoptr(sp_nt_log) o = sp_nt_log_parse(odd, -1, "all_reduce_perf.log", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(o->rows->len, ==, 1);
  g_assert_cmpuint(g_array_index(o->rows, sp_nt_row, 0).size, ==, 2048);
  g_assert_cmpuint(o->skipped_rows, ==, 3);
  g_assert_cmpuint(o->first_skipped_line, ==, 2);
  /* a header that names the in-place time but not its algbw and busbw (cut short): the
   * rows are read out-of-place only (the in-place bandwidths were read at field -1) */
  const char *cut = "#  size count type redop root time algbw busbw #wrong time\n"
                    " 1024 256 float sum -1 11.10 0.09 0.17 0 10.90\n";
  g_autoptr(sp_nt_log) h = sp_nt_log_parse(cut, -1, "all_reduce_perf.log", &err);
  g_assert_no_error(err);
  g_assert_cmpuint(h->rows->len, ==, 1);
  g_assert_cmpfloat(g_array_index(h->rows, sp_nt_row, 0).time_us[0], ==, 11.10);
  g_assert_cmpfloat(g_array_index(h->rows, sp_nt_row, 0).time_us[1], ==, 0);
  g_assert_cmpfloat(g_array_index(h->rows, sp_nt_row, 0).busbw[0], ==, 0.17);
}

static void test_parse_errors(void)
{
  GError *err = NULL;
  g_assert_null(sp_nt_log_parse("hello\nworld 1 2\n", -1, "notes.txt", &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_assert_nonnull(strstr(err->message, "notes.txt: not nccl-tests output"));
  g_clear_error(&err);
  const char *two = "# Collective test starting: all_reduce_perf\n"
                    "        1024           256     float     sum      -1    11.10    0.09    0.17      0    10.90    0.09    0.18      0\n"
                    "# Collective test starting: all_gather_perf\n";
  g_assert_null(sp_nt_log_parse(two, -1, "two.log", &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_clear_error(&err);
  const char *gap = "#  Rank  0 Group  0 Pid 1 on a device  0 [0x07] X\n#  Rank  2 Group  0 Pid 1 on a device  2 [0x07] X\n"
                    "        1024           256     float     sum      -1    11.10    0.09    0.17      0    10.90    0.09    0.18      0\n";
  g_assert_null(sp_nt_log_parse(gap, -1, "gap.log", &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_assert_nonnull(strstr(err->message, "skip rank 1"));
  g_clear_error(&err);
}

static void test_names(void)
{
  sp_coll c;
  g_assert_true(sp_nt_coll_parse("alltoall_perf", &c));
  g_assert_cmpint(c, ==, SP_COLL_ALL_TO_ALL);
  g_assert_true(sp_nt_coll_parse("all-reduce", &c));
  g_assert_cmpint(c, ==, SP_COLL_ALL_REDUCE);
  g_assert_true(sp_nt_coll_parse("sendrecv", &c));
  g_assert_cmpint(c, ==, SP_COLL_SEND_RECV);
  g_assert_false(sp_nt_coll_parse("gather_perf", &c));
  g_assert_cmpstr(sp_nt_program(SP_COLL_REDUCE_SCATTER), ==, "reduce_scatter_perf");
  sp_dtype t;
  GError *err = NULL;
  g_assert_true(sp_nt_type_parse("bfloat16", &t, &err));
  g_assert_cmpint(t, ==, SP_BF16);
  g_assert_true(sp_nt_type_parse("f32", &t, &err));
  g_assert_cmpint(t, ==, SP_F32);
  g_assert_false(sp_nt_type_parse("double", &t, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  g_assert_cmpstr(sp_nt_type_name(SP_F16), ==, "half");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/nccltests/counts", test_counts);
  g_test_add_func("/nccltests/sizes", test_sizes);
  g_test_add_func("/nccltests/format", test_format);
  g_test_add_func("/nccltests/row-layout", test_row_layout);
  g_test_add_func("/nccltests/parse-log", test_parse_log);
  g_test_add_func("/nccltests/parse-variants", test_parse_variants);
  g_test_add_func("/nccltests/parse-errors", test_parse_errors);
  g_test_add_func("/nccltests/names", test_names);
  return g_test_run();
}
