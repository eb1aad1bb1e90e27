/* Tests of the SimGrid engine (src/sim): closed-form timings on a small star
 * platform, data-mode verification of every collective, STEP vs FLOW, repeated
 * runs, the FLOW transform on its own, and errors.
 *
 * Platform: 8 hosts h0..h7, each with a private SPLITDUPLEX link of B = 1 GB/s
 * (1e9 bytes/s) and L = 1 us to a crossbar (SimGrid <cluster> without backbone),
 * so a route h_i -> h_j crosses two links: latency 2L, bandwidth B. Under the
 * engine's CM02 model (no TCP window, no cross-traffic) a lone message of S
 * bytes takes exactly 2L + S/B, and flows on distinct links do not interact.
 */
#include "config.h"

#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "flow.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/verify.h"

#define B 1e9
#define L 1e-6
#define NH 8

static char *tmpdir;
static char *platform;

static char *write_file(const char *name, const char *text)
{
  char *p = g_build_filename(tmpdir, name, NULL);
  g_assert_true(g_file_set_contents(p, text, -1, NULL));
  return p;
}

static const char *STAR =
  "<?xml version='1.0'?>\n"
  "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
  "<platform version=\"4.1\">\n"
  "  <!-- 8 hosts, private 1 GB/s 1 us full-duplex links to a crossbar -->\n"
  "  <cluster id=\"star\" prefix=\"h\" suffix=\"\" radical=\"0-7\" speed=\"1Gf\" bw=\"1GBps\"\n"
  "           lat=\"1us\" sharing_policy=\"SPLITDUPLEX\"/>\n"
  "</platform>\n";

static void ensure_init(void)
{
  GError *err = NULL;
  g_assert_true(sp_sim_init(platform, &err));
  g_assert_no_error(err);
}

/* A program sending @p bytes from @p from to @p to (both sides), world of 8. */
static sp_program **send_programs(int32_t world, int32_t from, int32_t to, uint64_t bytes)
{
  sp_program **p = g_new0(sp_program *, world);
  for (int32_t r = 0; r < world; r++) {
    p[r] = sp_program_new(r);
    uint32_t b = sp_program_add_buffer(p[r], bytes ? bytes : 1, "buf");
    if (r == from || r == to) {
      sp_step s = { .kind = r == from ? SP_STEP_SEND : SP_STEP_RECV, .peer = r == from ? to : from,
                    .tag = 7, .bytes = bytes, .rows = 1, .row_bytes = bytes };
      s.src = (sp_ref){ b, 0 };
      s.dst = (sp_ref){ b, 0 };
      sp_program_append(p[r], &s);
      sp_step w = { .kind = SP_STEP_WAIT };
      sp_program_append(p[r], &w);
    }
  }
  return p;
}

static void free_programs(sp_program **p, int32_t world)
{
  for (int32_t r = 0; r < world; r++)
    sp_program_free(p[r]);
  g_free(p);
}

/* ---- platform errors (before the good platform is loaded) ---------------- */

static void test_errors_platform(void)
{
  GError *err = NULL;
  char *missing = g_build_filename(tmpdir, "nope.xml", NULL);
  g_assert_false(sp_sim_init(missing, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_IO);
  g_assert_nonnull(strstr(err->message, "nope.xml"));
  g_clear_error(&err);

  char *bad = write_file("bad.xml", "<platform version=\"4.1\"><host id=\"a\" speed=\"1Gf\">\n");
  g_assert_false(sp_sim_init(bad, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_clear_error(&err);

  char *nohost = write_file("nohost.xml", "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"/></platform>");
  g_assert_false(sp_sim_init(nohost, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_assert_nonnull(strstr(err->message, "no host"));
  g_clear_error(&err);

  char *notplat = write_file("notplat.xml", "<html><host id=\"a\"/></html>");
  g_assert_false(sp_sim_init(notplat, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_clear_error(&err);

  /* well-formed, but SimGrid rejects the bandwidth: must not abort this process */
  char *rej = write_file("rejected.xml",
                         "<?xml version='1.0'?><platform version=\"4.1\"><cluster id=\"c\" prefix=\"h\" "
                         "suffix=\"\" radical=\"0-3\" speed=\"1Gf\" bw=\"fast\" lat=\"1us\"/></platform>");
  g_assert_false(sp_sim_init(rej, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
  g_assert_nonnull(strstr(err->message, "SimGrid"));
  g_clear_error(&err);
  g_assert_false(sp_sim_ready());
  g_assert_cmpint(sp_sim_num_hosts(), ==, 0);

  g_free(missing); g_free(bad); g_free(nohost); g_free(notplat); g_free(rej);
}

static void test_init_hosts(void)
{
  ensure_init();
  GError *err = NULL;
  g_assert_true(sp_sim_init(platform, &err)); /* again: no-op */
  char *other = write_file("other.xml", STAR);
  g_assert_false(sp_sim_init(other, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  g_free(other);
  g_assert_cmpint(sp_sim_num_hosts(), ==, NH);
  for (int i = 0; i < NH; i++) {
    char want[8];
    g_snprintf(want, sizeof want, "h%d", i);
    g_assert_cmpstr(sp_sim_host_name(i), ==, want);
  }
  g_assert_null(sp_sim_host_name(NH));
}

/* ---- closed-form timings --------------------------------------------------- */

static double run_cost(sp_program **p, int32_t world, sp_fidelity fid)
{
  GError *err = NULL;
  double t = -1;
  g_assert_true(sp_sim_run(p, world, NULL, fid, NULL, &t, &err));
  g_assert_no_error(err);
  return t;
}

static void test_single_send(void)
{
  ensure_init();
  const uint64_t sizes[] = { 0, 1, 1000, 1 << 20, 123456789 };
  for (gsize i = 0; i < G_N_ELEMENTS(sizes); i++) {
    sp_program **p = send_programs(NH, 2, 5, sizes[i]);
    double t = run_cost(p, NH, SP_FIDELITY_STEP);
    double want = 2 * L + (double)sizes[i] / B;
    g_assert_cmpfloat(fabs(t - want), <=, 1e-9 * want);
    free_programs(p, NH);
  }
}

static void test_repeated_runs(void)
{
  ensure_init();
  sp_program **p = send_programs(NH, 0, 1, 1 << 20);
  double t0 = run_cost(p, NH, SP_FIDELITY_STEP);
  /* SimGrid's clock keeps running between runs: times are end - start, equal up to rounding */
  for (int k = 0; k < 5; k++)
    g_assert_cmpfloat(fabs(run_cost(p, NH, SP_FIDELITY_STEP) - t0), <=, 1e-12 * t0);
  g_assert_cmpfloat(fabs(t0 - (2 * L + (1 << 20) / B)), <=, 1e-12 * t0);
  free_programs(p, NH);
}

static int32_t *group(int32_t n) { return sp_group_range(0, 1, n); }

static void test_ring_allreduce_closed_form(void)
{
  ensure_init();
  for (int32_t n = 2; n <= NH; n += 3) {
    /* S/n per ring step stays below the 4 MiB chunk: one chunk round */
    uint64_t count = (uint64_t)n * 256 * 1024; /* f32: S = n MiB, 1 MiB per step */
    int32_t *ranks = group(n);
    sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                          .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = count };
    double t = -1;
    GError *err = NULL;
    g_assert_true(sp_sim_coll_time(&spec, n, SP_FIDELITY_STEP, &t, &err));
    g_assert_no_error(err);
    double S = (double)count * 4;
    /* Thakur et al.: 2(p-1) alpha + 2(p-1)/p S/B, alpha = the route latency 2L */
    double want = 2.0 * (n - 1) * (2 * L) + 2.0 * (n - 1) / n * S / B;
    g_assert_cmpfloat(fabs(t - want), <=, 1e-6 * want);
    g_free(ranks);
  }
}

/* ---- STEP vs FLOW ---------------------------------------------------------------- */

static void test_step_vs_flow(void)
{
  ensure_init();
  const sp_coll colls[] = { SP_COLL_ALL_REDUCE, SP_COLL_ALL_GATHER, SP_COLL_REDUCE_SCATTER,
                            SP_COLL_ALL_TO_ALL, SP_COLL_BROADCAST };
  const sp_algo algos[] = { SP_ALGO_AUTO, SP_ALGO_RING, SP_ALGO_TREE, SP_ALGO_DIRECT };
  int checked = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(colls); i++)
    for (gsize a = 0; a < G_N_ELEMENTS(algos); a++) {
      int32_t n = NH;
      int32_t *ranks = group(n);
      /* large: 64 MiB in total per rank's in buffer */
      uint64_t count = colls[i] == SP_COLL_ALL_TO_ALL || colls[i] == SP_COLL_REDUCE_SCATTER
                         ? (16u << 20) / (uint64_t)n : 16u << 20;
      sp_coll_spec spec = { .coll = colls[i], .algo = algos[a], .dtype = SP_F32,
                            .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = count };
      double ts = -1, tf = -1;
      GError *err = NULL;
      if (!sp_sim_coll_time(&spec, n, SP_FIDELITY_STEP, &ts, &err)) {
        /* this algorithm does not exist for this collective */
        g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
        g_clear_error(&err);
        g_free(ranks);
        continue;
      }
      g_assert_true(sp_sim_coll_time(&spec, n, SP_FIDELITY_FLOW, &tf, &err));
      g_assert_no_error(err);
      if (g_test_verbose())
        g_printerr("%s/%s step %.6f flow %.6f (%.2f%%)\n", sp_coll_name(colls[i]),
                   sp_algo_name(algos[a]), ts, tf, 100 * (tf - ts) / ts);
      g_assert_cmpfloat(ts, >, 0);
      g_assert_cmpfloat(fabs(tf - ts), <=, 0.03 * ts);
      checked++;
      g_free(ranks);
    }
  g_assert_cmpint(checked, >=, 5);
}

/* Every rank's collective program, materialised by sp_lower_coll (ud: the spec). */
static sp_program *lowered_get(void *ud, int32_t rank, GError **err)
{
  const sp_coll_spec *spec = ud;
  sp_program *p = sp_program_new(rank);
  if (sp_coll_index_of(spec, rank) < 0)
    return p;
  size_t es = sp_dtype_size(spec->dtype);
  uint32_t in = sp_program_add_buffer(p, sp_coll_in_count(spec) * es, "in");
  uint32_t out = sp_program_add_buffer(p, sp_coll_out_count(spec) * es, "out");
  if (!sp_lower_coll(p, spec, in, out, err)) {
    sp_program_free(p);
    return NULL;
  }
  return p;
}

static void lowered_release(void *ud, sp_program *p)
{
  (void)ud;
  sp_program_free(p);
}

/* sp_sim_coll_time streams FLOW lowerings into their summaries (omitting the local
 * steps this platform charges nothing for): the time of the FLOW run of the
 * materialised programs. */
static void test_flow_streamed(void)
{
  ensure_init();
  const sp_coll colls[] = { SP_COLL_ALL_REDUCE, SP_COLL_ALL_GATHER, SP_COLL_REDUCE_SCATTER,
                            SP_COLL_ALL_TO_ALL, SP_COLL_BROADCAST, SP_COLL_REDUCE };
  const sp_algo algos[] = { SP_ALGO_RING, SP_ALGO_TREE, SP_ALGO_DIRECT };
  const int32_t channels[] = { 1, 3 };
  const uint64_t counts[] = { 1000, 1u << 20 };
  int checked = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(colls); i++)
    for (gsize a = 0; a < G_N_ELEMENTS(algos); a++)
      for (gsize h = 0; h < G_N_ELEMENTS(channels); h++)
        for (gsize k = 0; k < G_N_ELEMENTS(counts); k++) {
          int32_t n = k == 0 ? NH - 1 : NH;
          int32_t *ranks = group(n);
          sp_coll_spec spec = { .coll = colls[i], .algo = algos[a], .dtype = SP_F32,
                                .redop = k == 0 ? SP_RED_AVG : SP_RED_SUM, .ranks = ranks,
                                .n = n, .count = counts[k], .chunk_bytes = 64 << 10,
                                .channels = channels[h], .channel_block = 2,
                                .proto = SP_PROTO_SIMPLE };
          double ts = -1, tm = -2;
          GError *err = NULL;
          if (!sp_sim_coll_time(&spec, NH, SP_FIDELITY_FLOW, &ts, &err)) {
            /* this algorithm does not exist for this collective */
            g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
            g_clear_error(&err);
            g_free(ranks);
            continue;
          }
          /* the materialised run under the cost the streamed one resolved (a ring on
           * one node pipelines its rounds at NCCL's NVLink rate, sp_tune_cost_of) */
          sp_coll_spec resolved;
          sp_tune_cost cost;
          g_assert_true(sp_sim_coll_resolve(&spec, &resolved, &cost, NULL, &err));
          sp_sim_set_cost(&cost);
          gboolean ran = sp_sim_run_source(lowered_get, lowered_release, &spec, NH, SP_FIDELITY_FLOW, NULL,
                                           &tm, &err);
          sp_sim_set_cost(NULL);
          g_assert_no_error(err);
          g_assert_true(ran);
          if (g_test_verbose())
            g_printerr("%s/%s channels %d count %" G_GUINT64_FORMAT ": %.17g vs %.17g\n",
                       sp_coll_name(colls[i]), sp_algo_name(algos[a]), channels[h], counts[k],
                       ts, tm);
          g_assert_cmpfloat(ts, >, 0);
          /* equal but for the rounding of the run's start on SimGrid's clock, which
           * keeps running from run to run (a missing step would cost >= 1e-6 s) */
          g_assert_cmpfloat(fabs(ts - tm), <=, 1e-12 * ts);
          checked++;
          g_free(ranks);
        }
  g_assert_cmpint(checked, >=, 20);
}

/* ---- data mode ---------------------------------------------------------------------- */

static void verify_one(sp_coll c, sp_algo a, sp_dtype dt, int32_t n, uint64_t count,
                       uint64_t chunk, int *passed)
{
  int32_t *ranks = group(n);
  sp_coll_spec spec = { .coll = c, .algo = a, .dtype = dt, .redop = SP_RED_SUM, .ranks = ranks,
                        .n = n, .count = count, .root = n > 1 ? 1 : 0, .chunk_bytes = chunk };
  if (c == SP_COLL_SEND_RECV)
    spec.root = 0;
  GError *err = NULL;
  sp_case *k = sp_case_new_coll(&spec, n, TRUE, &err);
  if (k == NULL) {
    g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
    g_clear_error(&err);
    g_free(ranks);
    return;
  }
  double t = -1;
  g_assert_true(sp_sim_run(sp_case_programs(k), n, sp_case_all_bufs(k), SP_FIDELITY_STEP, NULL,
                           &t, &err));
  g_assert_no_error(err);
  int32_t bad_rank = -1;
  uint64_t bad_off = 0;
  if (!sp_case_check(k, &bad_rank, &bad_off, &err))
    g_error("%s/%s/%s n=%d count=%" G_GUINT64_FORMAT ": %s", sp_coll_name(c), sp_algo_name(a),
            sp_dtype_name(dt), n, count, err->message);
  g_assert_cmpfloat(t, >, 0);
  (*passed)++;
  sp_case_free(k);
  g_free(ranks);
}

static void test_data_mode_all(void)
{
  ensure_init();
  int passed = 0;
  for (int c = 0; c < SP_COLL_COUNT; c++)
    for (int a = 0; a < SP_ALGO_COUNT; a++) {
      int32_t n = c == SP_COLL_SEND_RECV ? 2 : NH;
      verify_one((sp_coll)c, (sp_algo)a, SP_F32, n, 37, 0, &passed);
      /* several chunk rounds: small chunks */
      verify_one((sp_coll)c, (sp_algo)a, SP_BF16, c == SP_COLL_SEND_RECV ? 2 : 5, 300, 64, &passed);
    }
  g_assert_cmpint(passed, >=, 2 * SP_COLL_COUNT);
}

/* Ring channels through SimGrid in data mode: several messages of one block go to
 * the same peer with the same tag (channels sharing a neighbour) and must match in
 * posting order; the results equal the reference bit for bit. */
static void test_data_mode_channels(void)
{
  ensure_init();
  const sp_coll cs[] = { SP_COLL_ALL_REDUCE, SP_COLL_ALL_GATHER, SP_COLL_REDUCE_SCATTER };
  int32_t *ranks = group(NH);
  int passed = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(cs); i++)
    for (int32_t ch = 2; ch <= 4; ch += 2) {
      sp_coll_spec spec = { .coll = cs[i], .algo = SP_ALGO_RING, .dtype = SP_BF16,
                            .redop = SP_RED_SUM, .ranks = ranks, .n = NH, .count = 301,
                            .chunk_bytes = 32, .channels = ch, .channel_block = 4 };
      GError *err = NULL;
      sp_case *k = sp_case_new_coll(&spec, NH, TRUE, &err);
      g_assert_no_error(err);
      double t = -1;
      g_assert_true(sp_sim_run(sp_case_programs(k), NH, sp_case_all_bufs(k), SP_FIDELITY_STEP,
                               NULL, &t, &err));
      g_assert_no_error(err);
      int32_t bad_rank = -1;
      uint64_t bad_off = 0;
      if (!sp_case_check(k, &bad_rank, &bad_off, &err))
        g_error("%s channels %d: %s", sp_coll_name(cs[i]), ch, err->message);
      g_assert_cmpfloat(t, >, 0);
      passed++;
      sp_case_free(k);
    }
  g_assert_cmpint(passed, ==, 6);
  g_free(ranks);
}

/* A message from a later block arrives first and must wait aside (stash path). */
static void test_early_message_matching(void)
{
  ensure_init();
  const int32_t world = 3;
  sp_program *p[3];
  for (int r = 0; r < world; r++)
    p[r] = sp_program_new(r);
  uint32_t b0 = sp_program_add_buffer(p[0], 16, "buf");
  uint32_t b1 = sp_program_add_buffer(p[1], 8, "buf");
  uint32_t b2 = sp_program_add_buffer(p[2], 8, "buf");
  /* rank 0: block 1 recv 8 bytes from rank 1 -> [0,8); block 2 recv from rank 2 -> [8,16) */
  sp_step r1 = { .kind = SP_STEP_RECV, .peer = 1, .tag = 1, .bytes = 8, .dst = { b0, 0 } };
  sp_step r2 = { .kind = SP_STEP_RECV, .peer = 2, .tag = 2, .bytes = 8, .dst = { b0, 8 } };
  sp_step w = { .kind = SP_STEP_WAIT };
  sp_program_append(p[0], &r1);
  sp_program_append(p[0], &w);
  sp_program_append(p[0], &r2);
  sp_program_append(p[0], &w);
  /* rank 1 computes 1 ms first; rank 2 sends at once */
  sp_step comp = { .kind = SP_STEP_COMPUTE, .flops = 1e6 };
  sp_step s1 = { .kind = SP_STEP_SEND, .peer = 0, .tag = 1, .bytes = 8, .src = { b1, 0 } };
  sp_program_append(p[1], &comp);
  sp_program_append(p[1], &s1);
  sp_program_append(p[1], &w);
  sp_step s2 = { .kind = SP_STEP_SEND, .peer = 0, .tag = 2, .bytes = 8, .src = { b2, 0 } };
  sp_program_append(p[2], &s2);
  sp_program_append(p[2], &w);

  uint8_t m0[16] = { 0 }, m1[8], m2[8];
  memset(m1, 0x11, 8);
  memset(m2, 0x22, 8);
  void *t0[] = { m0 }, *t1[] = { m1 }, *t2[] = { m2 };
  void **bufs[] = { t0, t1, t2 };
  GError *err = NULL;
  double t = -1;
  g_assert_true(sp_sim_run(p, world, bufs, SP_FIDELITY_STEP, NULL, &t, &err));
  g_assert_no_error(err);
  for (int i = 0; i < 8; i++) {
    g_assert_cmpint(m0[i], ==, 0x11);
    g_assert_cmpint(m0[8 + i], ==, 0x22);
  }
  /* 1 ms of compute at 1 Gflop/s, then one 8-byte message: 1e-3 + 2L + 8/B */
  g_assert_cmpfloat(fabs(t - (1e-3 + 2 * L + 8 / B)), <=, 1e-12);
  for (int r = 0; r < world; r++)
    sp_program_free(p[r]);
}

/* ---- traces ----------------------------------------------------------------------------- */

static void test_trace_and_summary(void)
{
  ensure_init();
  int32_t n = 4;
  int32_t *ranks = group(n);
  sp_coll_spec spec = { .coll = SP_COLL_ALL_GATHER, .algo = SP_ALGO_RING, .dtype = SP_F32,
                        .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = 1024, .op_id = 3 };
  GError *err = NULL;
  sp_case *k = sp_case_new_coll(&spec, n, FALSE, &err);
  g_assert_no_error(err);
  sp_trace *tr = sp_trace_new();
  double t = -1;
  g_assert_true(sp_sim_run(sp_case_programs(k), n, NULL, SP_FIDELITY_STEP, tr, &t, &err));
  g_assert_no_error(err);
  /* ring all-gather: n-1 communication blocks per rank, each sending 4 KiB */
  guint comm = 0;
  for (guint i = 0; i < sp_trace_len(tr); i++) {
    const sp_trace_event *ev = sp_trace_get(tr, i);
    g_assert_cmpfloat(ev->start, >=, 0);
    g_assert_cmpfloat(ev->end, <=, t + 1e-15);
    if (ev->kind == SP_STEP_WAIT) {
      comm++;
      g_assert_cmpuint(ev->bytes, ==, 4096);
    }
  }
  g_assert_cmpuint(comm, ==, (guint)(n * (n - 1)));
  GArray *sum = sp_trace_op_summary(tr);
  g_assert_cmpuint(sum->len, ==, 1);
  const sp_op_summary *s = &g_array_index(sum, sp_op_summary, 0);
  g_assert_cmpuint(s->op, ==, 3);
  g_assert_cmpuint(s->bytes, ==, (uint64_t)n * (n - 1) * 4096);
  g_assert_cmpfloat(s->first_start, ==, 0);
  g_assert_cmpfloat(fabs(s->last_end - t), <=, 1e-15);
  /* (n-1) steps of 2L + 4096/B */
  g_assert_cmpfloat(fabs(t - (n - 1) * (2 * L + 4096 / B)), <=, 1e-12);
  g_array_unref(sum);
  char *path = g_build_filename(tmpdir, "trace.json", NULL);
  g_assert_true(sp_trace_write_chrome(tr, path, &err));
  g_assert_no_error(err);
  g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
  g_free(path);
  sp_trace_free(tr);
  sp_case_free(k);
  g_free(ranks);
}

/* ---- engine errors ------------------------------------------------------------------------- */

static void test_errors_run(void)
{
  ensure_init();
  GError *err = NULL;
  sp_program **p = send_programs(NH, 0, 1, 64);
  /* more ranks than hosts */
  int32_t *ranks = group(NH + 1);
  sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                        .ranks = ranks, .n = NH + 1, .count = 64 };
  double t;
  g_assert_false(sp_sim_coll_time(&spec, NH + 1, SP_FIDELITY_STEP, &t, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_PLATFORM);
  g_assert_cmpstr(err->message, ==, "platform has 8 hosts, --ranks asks for 9");
  g_clear_error(&err);
  g_free(ranks);
  /* flow + data */
  uint8_t buf[64];
  void *tb[] = { buf };
  void **bufs[NH];
  for (int r = 0; r < NH; r++)
    bufs[r] = tb;
  g_assert_false(sp_sim_run(p, NH, bufs, SP_FIDELITY_FLOW, NULL, &t, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  free_programs(p, NH);

  /* deadlock: ranks 0 and 1 both only receive from each other */
  p = send_programs(2, 0, 1, 8);
  sp_step *s0 = &g_array_index(p[0]->steps, sp_step, 0);
  s0->kind = SP_STEP_RECV;
  s0->dst = s0->src;
  g_assert_false(sp_sim_run(p, 2, NULL, SP_FIDELITY_STEP, NULL, &t, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_assert_nonnull(strstr(err->message, "deadlock"));
  g_clear_error(&err);
  free_programs(p, 2);

  /* mismatched sizes */
  p = send_programs(2, 0, 1, 8);
  g_array_index(p[1]->steps, sp_step, 0).bytes = 4;
  g_array_index(p[1]->steps, sp_step, 0).row_bytes = 4;
  g_assert_false(sp_sim_run(p, 2, NULL, SP_FIDELITY_STEP, NULL, &t, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_clear_error(&err);
  free_programs(p, 2);

  /* the engine still works after failed runs */
  p = send_programs(NH, 3, 4, 1000);
  g_assert_cmpfloat(fabs(run_cost(p, NH, SP_FIDELITY_STEP) - (2 * L + 1000 / B)), <=, 1e-15);
  free_programs(p, NH);

  /* host map */
  int32_t dup[] = { 0, 0 };
  g_assert_false(sp_sim_set_host_map(dup, 2, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  int32_t rev[] = { 7, 6, 5, 4, 3, 2, 1, 0 };
  g_assert_true(sp_sim_set_host_map(rev, 8, &err));
  g_assert_cmpint(sp_sim_host_of(0), ==, 7);
  p = send_programs(NH, 0, 1, 1000);
  g_assert_cmpfloat(fabs(run_cost(p, NH, SP_FIDELITY_STEP) - (2 * L + 1000 / B)), <=, 1e-15);
  free_programs(p, NH);
  g_assert_true(sp_sim_set_host_map(NULL, 0, &err));
  g_assert_cmpint(sp_sim_host_of(0), ==, 0);
}

/* ---- the FLOW transform alone (no SimGrid) ---------------------------------------------------- */

static void test_flow_transform_ring(void)
{
  int32_t n = 6;
  int32_t *ranks = group(n);
  sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                        .ranks = ranks, .n = n, .count = 6000, .chunk_bytes = 1000 * 4 };
  GError *err = NULL;
  sp_case *k = sp_case_new_coll(&spec, n, FALSE, &err);
  g_assert_no_error(err);
  sp_program **out = NULL;
  g_assert_true(sp_flow_transform(sp_case_programs(k), n, NULL, NULL, &out, &err));
  g_assert_no_error(err);
  for (int32_t r = 0; r < n; r++) {
    /* one merged block: send 2(n-1)/n of the data to r+1, receive as much from r-1 */
    guint sends = 0;
    for (guint i = 0; i < sp_program_len(out[r]); i++) {
      const sp_step *s = sp_program_step(out[r], i);
      if (s->kind == SP_STEP_SEND) {
        sends++;
        g_assert_cmpint(s->peer, ==, (r + 1) % n);
        g_assert_cmpuint(s->bytes, ==, 2 * (uint64_t)(n - 1) * 1000 * 4);
      }
      if (s->kind == SP_STEP_COMPUTE && s->tag == SP_SIM_FLOW_TAG)
        g_assert_cmpuint(s->count, ==, 2 * (uint64_t)(n - 1) - 1);
    }
    g_assert_cmpuint(sends, ==, 1);
  }
  /* merged programs are a consistent schedule: they run on the loopback */
  g_assert_true(sp_loopback_run(out, n, NULL, &err));
  g_assert_no_error(err);
  for (int32_t r = 0; r < n; r++)
    sp_program_free(out[r]);
  g_free(out);
  sp_case_free(k);
  g_free(ranks);
}

/* Pipelined chains start and end with partial blocks: reconciliation splits groups
 * until both ends cut each pair's messages alike. */
static void test_flow_transform_chain(void)
{
  const sp_coll cs[] = { SP_COLL_BROADCAST, SP_COLL_REDUCE };
  for (gsize i = 0; i < G_N_ELEMENTS(cs); i++) {
    int32_t n = 7;
    int32_t *ranks = group(n);
    sp_coll_spec spec = { .coll = cs[i], .algo = SP_ALGO_RING, .dtype = SP_F32, .ranks = ranks,
                          .n = n, .count = 40000, .root = 2, .chunk_bytes = 1000 * 4 };
    GError *err = NULL;
    sp_case *k = sp_case_new_coll(&spec, n, FALSE, &err);
    g_assert_no_error(err);
    sp_program **out = NULL;
    g_assert_true(sp_flow_transform(sp_case_programs(k), n, NULL, NULL, &out, &err));
    g_assert_no_error(err);
    uint64_t sent_in = 0, sent_out = 0;
    for (int32_t r = 0; r < n; r++) {
      const sp_program *in = sp_case_program(k, r);
      for (guint j = 0; j < sp_program_len(in); j++)
        if (sp_program_step(in, j)->kind == SP_STEP_SEND)
          sent_in += sp_program_step(in, j)->bytes;
      guint blocks = 0;
      for (guint j = 0; j < sp_program_len(out[r]); j++) {
        if (sp_program_step(out[r], j)->kind == SP_STEP_SEND)
          sent_out += sp_program_step(out[r], j)->bytes;
        blocks += sp_program_step(out[r], j)->kind == SP_STEP_WAIT;
      }
      g_assert_cmpuint(blocks, <, 40); /* 40 chunks + fill, merged to a few groups */
    }
    g_assert_cmpuint(sent_out, ==, sent_in);
    g_assert_true(sp_loopback_run(out, n, NULL, &err));
    g_assert_no_error(err);
    for (int32_t r = 0; r < n; r++)
      sp_program_free(out[r]);
    g_free(out);
    sp_case_free(k);
    g_free(ranks);
  }
}

/* A channelled ring (2 nodes of 4, 4 channels): a block posts one send per channel,
 * three of them to the same neighbour inside the node. FLOW coalesces them: one
 * merged block per rank with one send to the node neighbour (3/4 of the volume)
 * and one across (1/4), the whole volume 2(n-1)/n S kept. */
static void test_flow_transform_channels(void)
{
  int32_t n = 8;
  int32_t *ranks = group(n);
  uint64_t count = 8 * 4 * 1000;
  sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                        .ranks = ranks, .n = n, .count = count, .channels = 4, .channel_block = 4 };
  GError *err = NULL;
  sp_case *k = sp_case_new_coll(&spec, n, FALSE, &err);
  g_assert_no_error(err);
  sp_program **out = NULL;
  g_assert_true(sp_flow_transform(sp_case_programs(k), n, NULL, NULL, &out, &err));
  g_assert_no_error(err);
  uint64_t S = count * 4, per_rank = 2 * (uint64_t)(n - 1) * S / (uint64_t)n;
  for (int32_t r = 0; r < n; r++) {
    guint sends = 0, waits = 0;
    for (guint i = 0; i < sp_program_len(out[r]); i++) {
      const sp_step *s = sp_program_step(out[r], i);
      if (s->kind == SP_STEP_WAIT)
        waits++;
      if (s->kind != SP_STEP_SEND)
        continue;
      sends++;
      gboolean cross = s->peer / 4 != r / 4;
      /* channel c leaves the node from local GPU c - 1 to local GPU c of the other */
      if (cross)
        g_assert_cmpint(s->peer, ==, (r / 4 == 0 ? 4 : 0) + (r % 4 + 1) % 4);
      else
        g_assert_cmpint(s->peer, ==, (r / 4) * 4 + (r % 4 + 1) % 4);
      g_assert_cmpuint(s->bytes, ==, cross ? per_rank / 4 : 3 * per_rank / 4);
    }
    g_assert_cmpuint(sends, ==, 2);
    g_assert_cmpuint(waits, ==, 1);
  }
  g_assert_true(sp_loopback_run(out, n, NULL, &err));
  g_assert_no_error(err);
  for (int32_t r = 0; r < n; r++)
    sp_program_free(out[r]);
  g_free(out);
  sp_case_free(k);
  g_free(ranks);
}

/* NVLS-tree on 2 nodes of 8 (B = 8, N = 2: K = 2 tree instances of depth 1), 8 chunks
 * of 256 floats per part: a lock-step pipeline of X = 8 chunks through 4 stages (the
 * reduce-scatter in the node, up and down the tree, the all-gather in the node), X + 3
 * = 11 blocks. FLOW keeps ONE group per rank (the union of the blocks' links): each
 * (peer, dir) once with all its bytes, then one marker for the 10 merged steps'
 * latencies and the 3 fill and drain hops of one 1,024-byte chunk over the link across
 * nodes (the pacing hop). */
static void test_flow_transform_pipeline(void)
{
  int32_t n = 16;
  int32_t *ranks = group(n);
  uint64_t count = 16 * 8 * 256;
  sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_NVLS_TREE, .dtype = SP_F32,
                        .ranks = ranks, .n = n, .count = count, .channel_block = 8,
                        .chunk_bytes = 1024 };
  GError *err = NULL;
  sp_case *k = sp_case_new_coll(&spec, n, FALSE, &err);
  g_assert_no_error(err);
  sp_program *const *in = sp_case_programs(k);
  sp_program **out = NULL;
  g_assert_true(sp_flow_transform(in, n, NULL, NULL, &out, &err));
  g_assert_no_error(err);
  for (int32_t r = 0; r < n; r++) {
    /* the original's bytes per (dir, peer), and its blocks */
    uint64_t want[2][16] = { { 0 } }, got[2][16] = { { 0 } };
    guint blocks = 0, posts[2][16] = { { 0 } };
    for (guint i = 0; i < sp_program_len(in[r]); i++) {
      const sp_step *s = sp_program_step(in[r], i);
      if (s->kind == SP_STEP_WAIT)
        blocks++;
      if (s->kind == SP_STEP_SEND || s->kind == SP_STEP_RECV) {
        g_assert_true(s->flags & SP_STEP_PIPELINED);
        g_assert_cmpuint(s->count, ==, 8);
        /* the pacing posts are the tree's, to the other node's GPU of my index */
        g_assert_true(!(s->flags & SP_STEP_PIPE_PACE) == (s->peer / 8 == r / 8));
        want[s->kind == SP_STEP_RECV][s->peer] += s->bytes;
      }
    }
    g_assert_cmpuint(blocks, ==, 11);
    guint waits = 0, markers = 0;
    for (guint i = 0; i < sp_program_len(out[r]); i++) {
      const sp_step *s = sp_program_step(out[r], i);
      if (s->kind == SP_STEP_WAIT)
        waits++;
      if (s->kind == SP_STEP_SEND || s->kind == SP_STEP_RECV) {
        int d = s->kind == SP_STEP_RECV;
        posts[d][s->peer]++;
        got[d][s->peer] += s->bytes;
      }
      if (s->kind == SP_STEP_COMPUTE && s->tag == SP_SIM_FLOW_TAG) {
        markers++;
        g_assert_cmpuint(s->count, ==, 10);
        g_assert_cmpuint(s->rows, ==, 3);
        g_assert_cmpuint(s->row_bytes, ==, 1024);
        g_assert_cmpint(s->peer, ==, (r + 8) % 16);
      }
    }
    g_assert_cmpuint(waits, ==, 1);
    g_assert_cmpuint(markers, ==, 1);
    for (int d = 0; d < 2; d++)
      for (int32_t q = 0; q < n; q++) {
        g_assert_cmpuint(got[d][q], ==, want[d][q]);
        g_assert_cmpuint(posts[d][q], ==, want[d][q] > 0 ? 1 : 0);
      }
  }
  for (int32_t r = 0; r < n; r++)
    sp_program_free(out[r]);
  g_free(out);
  sp_case_free(k);
  g_free(ranks);
}

/* Rank 0 posts two messages to rank 1 in one block, rank 1 receives them in two
 * blocks of two ops: coalescing rank 0's pair cannot match rank 1's cut, so the
 * transform falls back to merging without coalescing, and the result still runs. */
static void test_flow_transform_split_pair(void)
{
  sp_program *p[2] = { sp_program_new(0), sp_program_new(1) };
  sp_program_add_buffer(p[0], 16, "b");
  sp_program_add_buffer(p[1], 16, "b");
  sp_step s1 = { .kind = SP_STEP_SEND, .peer = 1, .tag = 1, .bytes = 8, .rows = 1, .row_bytes = 8 };
  sp_step s2 = { .kind = SP_STEP_SEND, .peer = 1, .tag = 2, .bytes = 4, .rows = 1, .row_bytes = 4 };
  sp_step r1 = { .kind = SP_STEP_RECV, .peer = 0, .tag = 1, .bytes = 8, .rows = 1, .row_bytes = 8 };
  /* op 1: a group never spans two ops, so rank 1 cuts between the two messages */
  sp_step r2 = { .kind = SP_STEP_RECV, .op = 1, .peer = 0, .tag = 2, .bytes = 4, .rows = 1,
                 .row_bytes = 4 };
  sp_step w = { .kind = SP_STEP_WAIT }, w1 = { .kind = SP_STEP_WAIT, .op = 1 };
  sp_program_append(p[0], &s1);
  sp_program_append(p[0], &s2);
  sp_program_append(p[0], &w);
  sp_program_append(p[1], &r1);
  sp_program_append(p[1], &w);
  sp_program_append(p[1], &r2);
  sp_program_append(p[1], &w1);
  sp_program **out = NULL;
  GError *err = NULL;
  g_assert_true(sp_flow_transform(p, 2, NULL, NULL, &out, &err));
  g_assert_no_error(err);
  guint sends = 0;
  for (guint i = 0; i < sp_program_len(out[0]); i++)
    sends += sp_program_step(out[0], i)->kind == SP_STEP_SEND;
  g_assert_cmpuint(sends, ==, 2);
  g_assert_true(sp_loopback_run(out, 2, NULL, &err));
  g_assert_no_error(err);
  for (int r = 0; r < 2; r++) {
    sp_program_free(out[r]);
    sp_program_free(p[r]);
  }
  g_free(out);
}

static void test_flow_transform_mismatch(void)
{
  /* rank 0 sends two messages to 1, rank 1 receives one */
  sp_program *p[2] = { sp_program_new(0), sp_program_new(1) };
  sp_program_add_buffer(p[0], 8, "b");
  sp_program_add_buffer(p[1], 8, "b");
  sp_step s = { .kind = SP_STEP_SEND, .peer = 1, .bytes = 8 };
  sp_step r = { .kind = SP_STEP_RECV, .peer = 0, .bytes = 8 };
  sp_step w = { .kind = SP_STEP_WAIT };
  sp_program_append(p[0], &s);
  sp_program_append(p[0], &s);
  sp_program_append(p[0], &w);
  sp_program_append(p[1], &r);
  sp_program_append(p[1], &w);
  sp_program **out = NULL;
  GError *err = NULL;
  g_assert_false(sp_flow_transform(p, 2, NULL, NULL, &out, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_TRANSPORT);
  g_assert_nonnull(strstr(err->message, "sends 2 messages to rank 1"));
  g_clear_error(&err);
  sp_program_free(p[0]);
  sp_program_free(p[1]);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp("spsim-test-sim-XXXXXX", NULL);
  g_assert_nonnull(tmpdir);
  platform = write_file("star.xml", STAR);
  /* errors first: they must leave the engine unloaded */
  g_test_add_func("/sim/0-errors-platform", test_errors_platform);
  g_test_add_func("/sim/init-hosts", test_init_hosts);
  g_test_add_func("/sim/single-send-closed-form", test_single_send);
  g_test_add_func("/sim/repeated-runs", test_repeated_runs);
  g_test_add_func("/sim/ring-allreduce-closed-form", test_ring_allreduce_closed_form);
  g_test_add_func("/sim/step-vs-flow", test_step_vs_flow);
  g_test_add_func("/sim/flow-streamed", test_flow_streamed);
  g_test_add_func("/sim/data-mode-all", test_data_mode_all);
  g_test_add_func("/sim/early-message-matching", test_early_message_matching);
  g_test_add_func("/sim/trace-summary", test_trace_and_summary);
  g_test_add_func("/sim/errors-run", test_errors_run);
  g_test_add_func("/sim/flow-ring", test_flow_transform_ring);
  g_test_add_func("/sim/flow-chain", test_flow_transform_chain);
  g_test_add_func("/sim/data-mode-channels", test_data_mode_channels);
  g_test_add_func("/sim/flow-channels", test_flow_transform_channels);
  g_test_add_func("/sim/flow-pipeline", test_flow_transform_pipeline);
  g_test_add_func("/sim/flow-split-pair", test_flow_transform_split_pair);
  g_test_add_func("/sim/flow-mismatch", test_flow_transform_mismatch);
  int rc = g_test_run();
  /* remove the temp files */
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  const char *f;
  while (d && (f = g_dir_read_name(d))) {
    char *p = g_build_filename(tmpdir, f, NULL);
    g_unlink(p);
    g_free(p);
  }
  if (d)
    g_dir_close(d);
  g_rmdir(tmpdir);
  g_free(platform);
  g_free(tmpdir);
  return rc;
}
