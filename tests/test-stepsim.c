/* The step graph on SimGrid: kernels slowed by an overlapping collective, two
 * collectives of one rank sharing its links, pipeline sends over the platform, and
 * equality with the contention-free run when nothing contends. */
#include "config.h"
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/stepgraph.h"
#include "sim.h"
#include "stepsim.h"
#include "step-fixture.h"

/* 8 hosts of 1 Gflop/s, each with a private 1 GB/s, 1 us link per direction to a
 * crossbar: a route between two hosts has 2 us of latency and 1 GB/s. */
static const char *STAR =
  "<?xml version='1.0'?>\n"
  "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
  "<platform version=\"4.1\">\n"
  "  <cluster id=\"star\" prefix=\"h\" suffix=\"\" radical=\"0-7\" speed=\"1Gf\" bw=\"1GBps\"\n"
  "           lat=\"1us\" sharing_policy=\"SPLITDUPLEX\"/>\n"
  "</platform>\n";
#define ROUTE_LAT 2e-6
#define ROUTE_BW 1e9

static char *tmpdir;

static void assert_close(double got, double want, double tol)
{
  if (fabs(got - want) > tol) g_error("got %.12g, want %.12g (tolerance %g)", got, want, tol);
}

/* Two simulated steps agree: step, compute, bubble and each kind's exposed and busy time
 * within @p tol seconds. */
static void assert_same_step(const sp_step_result *got, const sp_step_result *want, double tol)
{
  assert_close(got->step_time, want->step_time, tol);
  assert_close(got->compute, want->compute, tol);
  assert_close(got->bubble, want->bubble, tol);
  for (int j = 0; j < SP_COMM_KIND_COUNT; j++) {
    assert_close(got->exposed[j], want->exposed[j], tol);
    assert_close(got->comm[j], want->comm[j], tol);
  }
}

/* A one-stage graph of hand-made tasks. */
static sp_stepgraph *graph1(void)
{
  sp_stepgraph *g = g_new0(sp_stepgraph, 1);
  g->stages = 1;
  g->ranks_per_stage = 1;
  g->microbatches = 1;
  g->tasks = g_array_new(FALSE, TRUE, sizeof(sp_task));
  g->comms = g_array_new(FALSE, TRUE, sizeof(sp_comm));
  sp_comm c = { .kind = SP_COMM_DP, .coll = SP_COLL_ALL_REDUCE, .n = 2, .stride = 1, .bytes = 1 << 20, .times = 1,
                .what = "test all-reduce" };
  g_array_append_val(g->comms, c);
  return g;
}

static uint32_t add(sp_stepgraph *g, sp_task_kind kind, sp_stream st, double seconds)
{
  sp_task t = { .kind = (uint8_t)kind, .stream = (uint8_t)st, .mb = -1, .chunk = -1, .layer = -1,
                .comm = kind == SP_TASK_COMPUTE ? -1 : 0, .peer = -1, .what = "t", .seconds = seconds };
  g_array_append_val(g->tasks, t);
  return g->tasks->len - 1;
}

/* Task @p t waits for task @p dep. */
static void need(sp_stepgraph *g, uint32_t t, uint32_t dep)
{
  sp_task *x = &g_array_index(g->tasks, sp_task, t);
  g_assert_cmpuint(x->ndeps, <, SP_TASK_MAX_DEPS);
  x->deps[x->ndeps++] = dep;
}

static void run(const sp_stepgraph *g, double slowdown, double *end, double *span)
{
  GError *err = NULL;
  g_assert_true(sp_stepsim_run(g, slowdown, NULL, end, span, &err));
  g_assert_no_error(err);
}

/* Kernels run at 1 / (1 + s) of their speed while a collective of their GPU runs:
 * 1 s of compute beside a 0.5 s collective ends at 1 + 0.5 s / (1 + s). */
static void test_slowdown(void)
{
  g_autoptr(sp_stepgraph) g = graph1();
  uint32_t k = add(g, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 1.0);
  uint32_t c = add(g, SP_TASK_COLL, SP_STREAM_DP, 0.5);
  double end[2], span;
  run(g, 0.25, end, &span);
  assert_close(end[c], 0.5, 1e-9);
  assert_close(end[k], 1.0 + 0.5 * 0.25 / 1.25, 1e-9);
  assert_close(span, end[k], 0);
  /* no slowdown: nothing changes */
  run(g, 0.0, end, &span);
  assert_close(end[k], 1.0, 1e-9);
}

/* Collectives back to back on one stream (a ring's steps) keep the kernels beside them
 * slowed for both and no longer: 2 s of compute beside 0.3 s then 0.2 s of collectives
 * ends at 0.5 + (2 - 0.5 / (1 + s)); a third collective that waits for that kernel
 * slows nothing after it. */
static void test_back_to_back(void)
{
  g_autoptr(sp_stepgraph) g = graph1();
  uint32_t k = add(g, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 2.0);
  uint32_t a = add(g, SP_TASK_COLL, SP_STREAM_DP, 0.3);
  uint32_t b = add(g, SP_TASK_COLL, SP_STREAM_DP, 0.2);
  uint32_t k2 = add(g, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 1.0);
  uint32_t c = add(g, SP_TASK_COLL, SP_STREAM_DP, 0.1);
  need(g, c, k);
  double end[5], span;
  const double s = 0.25;
  run(g, s, end, &span);
  assert_close(end[a], 0.3, 1e-9);
  assert_close(end[b], 0.5, 1e-9);
  double ek = 0.5 + (2.0 - 0.5 / (1 + s));
  assert_close(end[k], ek, 1e-9);
  assert_close(end[c], ek + 0.1, 1e-9);
  /* k2 starts with c: 0.1 s of it slowed, the rest at full speed */
  assert_close(end[k2], ek + 0.1 + (1.0 - 0.1 / (1 + s)), 1e-9);
  assert_close(span, end[k2], 0);
}

/* Two collectives of one rank on the same route share its bandwidth: each alone takes
 * T = lat + B / bw; together both end at lat + 2 B / bw. A third on another stream
 * after them runs alone again. */
static void test_shared_links(void)
{
  g_autoptr(sp_stepgraph) g = graph1();
  uint32_t a = add(g, SP_TASK_COLL, SP_STREAM_TP, 0.5);
  uint32_t b = add(g, SP_TASK_COLL, SP_STREAM_DP, 0.5);
  uint32_t c = add(g, SP_TASK_COLL, SP_STREAM_ISP, 0.25);
  need(g, c, a);
  need(g, c, b);
  double end[3], span;
  run(g, 0.0, end, &span);
  double both = ROUTE_LAT + 2 * (0.5 - ROUTE_LAT);
  assert_close(end[a], both, 1e-9);
  assert_close(end[b], both, 1e-9);
  assert_close(end[c], both + 0.25, 1e-9);
}

static sp_model model8(void)
{
  sp_model m = { .name = (char *)"tiny8", .layers = 8, .hidden = 64, .heads = 4, .kv_heads = 4, .ffn = 256,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_GELU };
  return m;
}

/* Collectives 1 ms each; pipeline sends as the STAR route carries them alone. */
static gboolean price(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)err;
  *s = c->kind == SP_COMM_PP ? ROUTE_LAT + (double)c->bytes / ROUTE_BW : 1e-3;
  return TRUE;
}

static sp_step_ctx ctx_for(const sp_model *m, int32_t world)
{
  return fixture_ctx(m, world, 128, 8, price);
}

/* Where nothing contends (one collective at a time per rank, sends in separate link
 * directions) and kernels are not slowed, SimGrid's run of a built graph is the
 * contention-free schedule. (With tp=2 and pp=2 together a stage's pipeline send and
 * its next TP all-reduce share its link, and the simulation is rightly slower.) */
static void test_same_as_schedule(void)
{
  sp_model m = model8();
  const char *specs[] = { "tp=2,tpsp=0", "pp=2", "pp=2,vpp=2" };
  const int32_t world[] = { 2, 2, 2 };
  for (gsize k = 0; k < G_N_ELEMENTS(specs); k++) {
    sp_step_ctx c = ctx_for(&m, world[k]);
    sp_layout l;
    GError *err = NULL;
    g_assert_true(sp_layout_parse(specs[k], &l, &err));
    sp_layout_ctx lc = { .model = &m, .world = world[k], .gpus_per_node = 8, .seq = 128, .global_batch = 8, .mb = 1 };
    g_assert_cmpint(sp_layout_check(&l, &lc, &err), ==, SP_SKIP_NONE);
    g_autoptr(sp_stepgraph) g = sp_stepgraph_build(&c, &l, SP_SCHED_1F1B, &err);
    g_assert_no_error(err);
    g_assert_true(sp_stepgraph_price(g, &c, &err));
    double want, got;
    g_assert_true(sp_stepgraph_schedule(g, NULL, NULL, &want, &err));
    g_assert_true(sp_stepsim_run(g, 0.0, NULL, NULL, &got, &err));
    g_assert_no_error(err);
    assert_close(got, want, 1e-9 * want);
  }
}

/* Only the overlapped TP chunks cost anything: 0.1 ms each. */
static gboolean price_tpo(void *user, const sp_comm *c, double *s, GError **err)
{
  (void)user; (void)err;
  *s = c->what == sp_tpo_what_shard || c->what == sp_tpo_what_rs ? 1e-4 : 0.0;
  return TRUE;
}

/* tpoverlap=1 (tp=4 on 4 hosts): the ring-exchange steps and pipelined reduce-scatter
 * chunks run one at a time per rank, so SimGrid's run is the contention-free schedule;
 * with kernels 18.9 % slower beside them, the closed form (its slowdown term) stays within
 * 2 % of the simulation. */
static void test_tp_overlap(void)
{
  sp_model m = model8();
  sp_step_ctx c = fixture_ctx(&m, 4, 128, 8, price_tpo);
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse("tp=4,tpoverlap=1", &l, &err));
  sp_layout_ctx lc = { .model = &m, .world = 4, .gpus_per_node = 8, .seq = 128, .global_batch = 8, .mb = 1 };
  g_assert_cmpint(sp_layout_check(&l, &lc, &err), ==, SP_SKIP_NONE);
  g_autoptr(sp_stepgraph) g = sp_stepgraph_build(&c, &l, SP_SCHED_1F1B, &err);
  g_assert_no_error(err);
  g_assert_true(sp_stepgraph_price(g, &c, &err));
  double want, got;
  g_assert_true(sp_stepgraph_schedule(g, NULL, NULL, &want, &err));
  g_assert_true(sp_stepsim_run(g, 0.0, NULL, NULL, &got, &err));
  g_assert_no_error(err);
  assert_close(got, want, 1e-9 * want);
  c.hw.comm_slowdown = 0.189;
  sp_step_result r;
  g_assert_true(sp_step_eval(&c, &l, &r, &err));
  double cf = r.step_time;
  sp_stepsim_timeline t = { 0 };
  g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &r, &t, &err));
  g_assert_no_error(err);
  g_assert_true(r.simulated);
  assert_close(cf, r.step_time, 0.02 * r.step_time);
  sp_stepsim_timeline_clear(&t);
}

/* The what-if entry point fills the result from the simulation. */
static void test_eval(void)
{
  sp_model m = model8();
  sp_step_ctx c = ctx_for(&m, 4);
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse("tp=2,pp=2", &l, &err));
  sp_layout_ctx lc = { .model = &m, .world = 4, .gpus_per_node = 8, .seq = 128, .global_batch = 8, .mb = 1 };
  g_assert_cmpint(sp_layout_check(&l, &lc, &err), ==, SP_SKIP_NONE);
  sp_step_result r;
  g_assert_true(sp_step_eval(&c, &l, &r, &err));
  double cf = r.step_time;
  sp_stepsim_timeline t = { 0 };
  g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &r, &t, &err));
  g_assert_no_error(err);
  g_assert_true(r.simulated);
  assert_close(r.closed_form, cf, 0);
  assert_close(r.step_time, t.bd.step_time, 0);
  double sum = r.compute + r.bubble;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) sum += r.exposed[k];
  assert_close(sum, r.step_time, 1e-9 * r.step_time);
  /* the trace's last event ends at the step time */
  g_autofree char *path = g_build_filename(tmpdir, "trace.json", NULL);
  g_assert_true(sp_stepgraph_write_chrome(t.g, t.start, t.end, path, &err));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, "\"traceEvents\""));
  double last = 0;
  for (guint i = 0; i < t.g->tasks->len; i++) last = MAX(last, t.end[i]);
  assert_close(last, r.step_time, 0);
  sp_stepsim_timeline_clear(&t);
}

/* A step of 48 micro-batches per pipeline, run whole and as steps of 2 pp and 3 pp (of 2
 * and 3 groups with vppgroup) extrapolated (sp_stepsim_set_periodic): the same step time and breakdown within 1e-6
 * of the step, with TP, pipeline and data-parallel traffic sharing the stages' links and
 * kernels slowed beside them. */
static void test_periodic(void)
{
  sp_model m = model8();
  /* with micro-batch groups (vppgroup): 16 groups of 3; 9 groups of 5 and a last one of 3,
   * extrapolated from 2 and 3 groups followed by that last group */
  const char *specs[] = { "tp=2,pp=2,dp=2", "pp=4,dp=2", "pp=2,vpp=2,dp=4", "tp=2,pp=4", "pp=8", "dp=8",
                          "pp=2,vpp=2,vppgroup=3,dp=4", "pp=2,vpp=2,vppgroup=5,dp=4" };
  for (gsize k = 0; k < G_N_ELEMENTS(specs); k++) {
    sp_layout l;
    GError *err = NULL;
    g_assert_true(sp_layout_parse(specs[k], &l, &err));
    int64_t dp = l.dp > 0 ? l.dp : 8 / ((int64_t)MAX(l.tp, 1) * MAX(l.pp, 1));
    sp_step_ctx c = fixture_ctx(&m, 8, 128, 48 * dp, price);
    l = fixture_layout(specs[k], &c);
    sp_step_result whole, ext;
    g_assert_true(sp_step_eval(&c, &l, &whole, &err));
    ext = whole;
    sp_stepsim_set_periodic(-1);
    g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &whole, NULL, &err));
    guint before = sp_stepsim_periodic_runs();
    sp_stepsim_set_periodic(0);
    g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &ext, NULL, &err));
    sp_stepsim_set_periodic(SP_STEPSIM_PERIODIC_TASKS);
    g_assert_no_error(err);
    g_assert_cmpuint(sp_stepsim_periodic_runs(), ==, before + 1); /* it was extrapolated */
    double tol = 1e-6 * whole.step_time;
    g_test_message("%s: %.12g s whole, %.12g s extrapolated", specs[k], whole.step_time, ext.step_time);
    assert_same_step(&ext, &whole, tol);
  }
}

/* A graph simulated before is not run again: the same layout evaluated twice gives the
 * same result bit for bit from the memo, and so does a fresh run after the memo is
 * cleared; another slowdown is another graph, run anew. */
static void test_memo(void)
{
  sp_model m = model8();
  sp_step_ctx c = fixture_ctx(&m, 8, 128, 16, price);
  sp_layout l = fixture_layout("tp=2,pp=2,dp=2", &c);
  GError *err = NULL;
  sp_step_result first, again, fresh, other;
  g_assert_true(sp_step_eval(&c, &l, &first, &err));
  again = fresh = other = first;
  sp_stepsim_memo_clear();
  guint hits = sp_stepsim_memo_hits();
  g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &first, NULL, &err));
  g_assert_cmpuint(sp_stepsim_memo_hits(), ==, hits);
  g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &again, NULL, &err));
  g_assert_cmpuint(sp_stepsim_memo_hits(), ==, hits + 1);
  sp_stepsim_memo_clear();
  g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &fresh, NULL, &err));
  g_assert_cmpuint(sp_stepsim_memo_hits(), ==, hits + 1);
  g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.5, &other, NULL, &err));
  g_assert_cmpuint(sp_stepsim_memo_hits(), ==, hits + 1);
  g_assert_no_error(err);
  const sp_step_result *same[] = { &again, &fresh };
  for (gsize k = 0; k < G_N_ELEMENTS(same); k++) {
    g_assert_true(same[k]->simulated);
    assert_same_step(same[k], &first, 0);
  }
  g_assert_true(other.simulated);
}

/* Kernels run as one execution only where nothing else waits inside the chain: k1 (1 s)
 * starts collective c (0.5 s), so it ends alone at 1; k2 and k3 (1 s each, waited for by
 * nothing) run as one, slowed while c runs: they end at 1.5 + (2 - 0.5 / (1 + s)), k3
 * starting and ending there. Task by task, k2 ends 1 s of work after 1. */
static void test_merged_chain(void)
{
  g_autoptr(sp_stepgraph) g = graph1();
  uint32_t k1 = add(g, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 1.0);
  uint32_t k2 = add(g, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 1.0);
  uint32_t k3 = add(g, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 1.0);
  uint32_t c = add(g, SP_TASK_COLL, SP_STREAM_DP, 0.5);
  need(g, c, k1);
  const double s = 0.25;
  double start[4], end[4], span, span_exact;
  GError *err = NULL;
  g_assert_true(sp_stepsim_run_merged(g, s, start, end, &span, &err));
  g_assert_no_error(err);
  assert_close(end[k1], 1.0, 1e-9);
  assert_close(end[c], 1.5, 1e-9);
  double chain = 1.5 + (2.0 - 0.5 / (1 + s));
  assert_close(start[k2], 1.0, 1e-9);
  assert_close(end[k2], chain, 1e-9);
  assert_close(start[k3], chain, 1e-9);
  assert_close(end[k3], chain, 1e-9);
  assert_close(span, chain, 1e-9);
  run(g, s, end, &span_exact);
  assert_close(end[k2], 1.5 + (1.0 - 0.5 / (1 + s)), 1e-9);
  assert_close(span_exact, span, 1e-12 * span);
}

/* Kernel chains run as one execution where nothing else waits inside them (the
 * what-if's runs) and task by task for a trace: the same step and breakdown within
 * rounding, with collectives of every kind slowing the kernels beside them. */
static void test_merged_kernels(void)
{
  sp_model m = model8();
  const char *specs[] = { "tp=2,pp=2,dp=2", "pp=2,vpp=2,dp=4", "tp=2,tpoverlap=1,pp=4", "cp=2,dp=4,zero=3" };
  sp_stepsim_set_periodic(-1);
  for (gsize k = 0; k < G_N_ELEMENTS(specs); k++) {
    sp_step_ctx c = fixture_ctx(&m, 8, 128, 16, price);
    sp_layout l = fixture_layout(specs[k], &c);
    GError *err = NULL;
    sp_step_result merged, exact;
    g_assert_true(sp_step_eval(&c, &l, &merged, &err));
    exact = merged;
    sp_stepsim_memo_clear();
    sp_stepsim_timeline t = { 0 };
    g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &exact, &t, &err));
    g_assert_true(sp_stepsim_eval(&c, &l, TRUE, 0.189, &merged, NULL, &err));
    g_assert_no_error(err);
    /* the exact run's tasks: kernels whose only successor is the next kernel exist */
    guint chains = 0;
    g_autofree uint32_t *off = NULL, *succ = NULL;
    sp_stepgraph_successors(t.g, &off, &succ);
    for (guint i = 0; i < t.g->tasks->len; i++)
      chains += g_array_index(t.g->tasks, sp_task, i).kind == SP_TASK_COMPUTE && off[i + 1] == off[i];
    g_assert_cmpuint(chains, >, 0);
    sp_stepsim_timeline_clear(&t);
    double tol = 1e-12 * exact.step_time;
    g_test_message("%s: %.15g s task by task, %.15g s merged", specs[k], exact.step_time, merged.step_time);
    assert_same_step(&merged, &exact, tol);
  }
  sp_stepsim_set_periodic(SP_STEPSIM_PERIODIC_TASKS);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp("spsim-stepsim-XXXXXX", NULL);
  g_autofree char *plat = g_build_filename(tmpdir, "star.xml", NULL);
  g_assert_true(g_file_set_contents(plat, STAR, -1, NULL));
  GError *err = NULL;
  if (!sp_sim_init(plat, &err)) g_error("%s", err->message);
  g_test_add_func("/stepsim/slowdown", test_slowdown);
  g_test_add_func("/stepsim/back-to-back", test_back_to_back);
  g_test_add_func("/stepsim/shared-links", test_shared_links);
  g_test_add_func("/stepsim/same-as-schedule", test_same_as_schedule);
  g_test_add_func("/stepsim/eval", test_eval);
  g_test_add_func("/stepsim/tp-overlap", test_tp_overlap);
  g_test_add_func("/stepsim/periodic", test_periodic);
  g_test_add_func("/stepsim/memo", test_memo);
  g_test_add_func("/stepsim/merged-chain", test_merged_chain);
  g_test_add_func("/stepsim/merged-kernels", test_merged_kernels);
  int rc = g_test_run();
  g_autofree char *tr = g_build_filename(tmpdir, "trace.json", NULL);
  g_unlink(tr);
  g_unlink(plat);
  g_rmdir(tmpdir);
  g_free(tmpdir);
  return rc;
}
