/* The what-if's collective pricer above its simulated grid (sp_whatif_pricer): sizes
 * past 64 MiB are extrapolated from two simulated points, and those points must run
 * the algorithm and protocol NCCL's tuning model picks for the size asked. On 2,048
 * H100 GPUs (256 DGX nodes) the tuning model picks ring/LL for a 32 MiB all-gather and
 * ring/LL128 for 64 MiB, and the second is the faster: a line through the two fell,
 * and a 6 GiB ISP weight gather was priced at -16,000 s. The expectation here is the
 * engine's direct simulation of the same call at its full size (another run of SimGrid,
 * not the grid), and that a larger call never costs less above the grid. */
#include "config.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <unistd.h>

#include "platform-file.h"
#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/step.h"
#include "whatif_sim.h"

#define MiB ((uint64_t)1 << 20)

/* One pricer for every test: SimGrid holds one platform per process. 256 DGX H100
 * nodes (2,048 GPUs). */
static sp_whatif_pricer *shared;

static sp_whatif_pricer *pricer(void)
{
  if (shared != NULL) return shared;
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 256;
  o.gpu = SP_GPU_H100;
  GError *err = NULL;
  char *path = platform_file(&o);
  shared = sp_whatif_pricer_new(path, 8, FALSE, &err);
  g_unlink(path);
  g_free(path);
  g_assert_no_error(err);
  return shared;
}

static void test_extrapolation(void)
{
  GError *err = NULL;
  sp_whatif_pricer *p = pricer();

  for (int k = 0; k < 2; k++) {
    sp_comm c = { .coll = k == 0 ? SP_COLL_ALL_GATHER : SP_COLL_REDUCE_SCATTER, .n = 2048, .stride = 1 };
    /* the case: the two grid points' own choices differ */
    sp_algo a32, a64;
    sp_proto p32, p64;
    g_assert_true(sp_whatif_engine_choose(&c, 8, 32 * MiB, &a32, &p32, &err));
    g_assert_true(sp_whatif_engine_choose(&c, 8, 64 * MiB, &a64, &p64, &err));
    g_assert_no_error(err);
    g_assert_true(a32 != a64 || p32 != p64);

    /* from 64 MiB on (below, each grid point has its own choice, and NCCL's may be the
     * slower: 32 MiB on LL costs more than 64 MiB on LL128 here, as on a real cluster) */
    const uint64_t sizes[] = { 64 * MiB, 96 * MiB, 256 * MiB, 1024 * MiB, 6144 * MiB };
    double prev = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
      c.bytes = sizes[i];
      double t = 0;
      g_assert_true(sp_whatif_pricer_price(p, &c, &t, &err));
      g_assert_no_error(err);
      g_test_message("%s of %" G_GUINT64_FORMAT " MiB on 2048 GPUs: %.6g s", sp_coll_name(c.coll), sizes[i] / MiB, t);
      g_assert_cmpfloat(t, >, 0);
      g_assert_cmpfloat(t, >=, prev); /* more bytes never cost less */
      prev = t;
    }
    /* the extrapolated 6 GiB against its direct simulation */
    double direct = 0;
    g_assert_true(sp_whatif_engine_simulate(&c, 8, FALSE, c.bytes, &direct, &err));
    g_assert_no_error(err);
    g_test_message("direct simulation of 6 GiB: %.6g s; extrapolated %.6g s", direct, prev);
    g_assert_cmpfloat(fabs(prev - direct), <=, 0.02 * direct);
  }
}

/* Large trees and rings are priced on the line through three smaller groups' times
 * against the tree's depth or the ring's length (whatif_sim.c, by_line). The expectation
 * is the engine's direct simulation of the full group with the same algorithm and
 * protocol: within 0.5 % where the line is used, and the line is used only where the
 * smaller groups' slopes agree (where they do not, that price is the simulation itself). */
static void test_by_line(void)
{
  GError *err = NULL;
  sp_whatif_pricer *p = pricer();
  const struct {
    sp_coll coll;
    int32_t n, stride, line_max;
    uint64_t bytes;
    sp_algo algo;
    gboolean line;
  } cases[] = {
    { SP_COLL_ALL_REDUCE, 256, 8, 256, 32 * MiB, SP_ALGO_TREE, TRUE },   /* one GPU per node, 8 siblings: from 8, 16, 32 */
    { SP_COLL_ALL_REDUCE, 192, 8, 256, 32 * MiB, SP_ALGO_TREE, TRUE },   /* not a power of two: from 6, 12 and 24 */
    { SP_COLL_ALL_REDUCE, 2048, 1, 256, 32 * MiB, SP_ALGO_TREE, TRUE },  /* 8 per node (a chain each): from 64, 128, 256 */
    { SP_COLL_ALL_REDUCE, 256, 8, 512, 64 * MiB, SP_ALGO_TREE, FALSE },  /* slopes of 285 and 206 us per level: simulated */
    { SP_COLL_ALL_GATHER, 2048, 1, 1024, 4 * MiB, SP_ALGO_RING, TRUE }, /* 8 rings across nodes: from 256, 512, 1024 */
    /* one ring over one GPU per node: 3.94 and 3.19 us per member (the bytes per step
     * still count): simulated */
    { SP_COLL_REDUCE_SCATTER, 256, 8, 1024, 32 * MiB, SP_ALGO_RING, FALSE },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    sp_comm c = { .coll = cases[i].coll, .n = cases[i].n, .stride = cases[i].stride, .bytes = cases[i].bytes };
    sp_algo a;
    sp_proto pr;
    g_assert_true(sp_whatif_engine_choose(&c, 8, c.bytes, &a, &pr, &err));
    g_assert_no_error(err);
    g_assert_cmpint(a, ==, cases[i].algo); /* NCCL's model picks it at this size */
    sp_whatif_pricer_set_line_max(p, cases[i].line_max);
    guint before = sp_whatif_pricer_by_line(p);
    double t = 0, direct = 0;
    g_assert_true(sp_whatif_pricer_price(p, &c, &t, &err));
    g_assert_no_error(err);
    g_assert_true(sp_whatif_engine_simulate_as(&c, 8, FALSE, c.bytes, a, pr, &direct, &err));
    g_assert_no_error(err);
    g_test_message("%s/%s of %d members, stride %d, %" G_GUINT64_FORMAT " MiB: priced %.6g s, simulated %.6g s",
                   sp_coll_name(c.coll), sp_algo_name(a), c.n, c.stride, c.bytes / MiB, t, direct);
    if (cases[i].line) {
      g_assert_cmpuint(sp_whatif_pricer_by_line(p), ==, before + 1);
      g_assert_cmpfloat(fabs(t - direct), <=, 0.005 * direct);
    } else {
      g_assert_cmpfloat(t, ==, direct); /* a grid point, simulated */
    }
  }
  sp_whatif_pricer_set_line_max(p, 0);
}

/* A mixed cluster (32 H100 nodes, then 32 A100 nodes): a group spanning both kinds is
 * never priced from smaller groups, which on the first hosts see only H100s. Its own
 * process: SimGrid holds one platform per process. */
static void test_by_line_mixed(void)
{
  if (g_test_subprocess()) {
    sp_platform_opts o;
    sp_platform_opts_init(&o);
    GError *err = NULL;
    g_assert_true(sp_platform_mix_parse("h100:32,a100:32", &o, &err));
    o.nodes = 64;
    g_assert_no_error(err);
    char *path = platform_file(&o);
    sp_whatif_pricer *p = sp_whatif_pricer_new(path, 8, FALSE, &err);
    g_unlink(path);
    g_free(path);
    g_assert_no_error(err);
    sp_whatif_pricer_set_line_max(p, 256); /* 64 members x 8 siblings: from 8, 16 and 32 (H100s only) */
    sp_comm c = { .coll = SP_COLL_ALL_REDUCE, .n = 64, .stride = 8, .bytes = 32 * MiB };
    sp_algo a;
    sp_proto pr;
    double t = 0, direct = 0;
    g_assert_true(sp_whatif_engine_choose(&c, 8, c.bytes, &a, &pr, &err));
    g_assert_true(sp_whatif_pricer_price(p, &c, &t, &err));
    g_assert_true(sp_whatif_engine_simulate_as(&c, 8, FALSE, c.bytes, a, pr, &direct, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(sp_whatif_pricer_by_line(p), ==, 0);
    g_assert_cmpfloat(t, ==, direct);
    sp_whatif_pricer_free(p);
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/whatif-price/extrapolation", test_extrapolation);
  g_test_add_func("/whatif-price/by-line", test_by_line);
  g_test_add_func("/whatif-price/by-line-mixed", test_by_line_mixed);
  int rc = g_test_run();
  sp_whatif_pricer_free(shared);
  return rc;
}
