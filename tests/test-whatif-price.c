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

static void test_extrapolation(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 256;
  o.gpu = SP_GPU_H100;
  GError *err = NULL;
  char *path = platform_file(&o);
  sp_whatif_pricer *p = sp_whatif_pricer_new(path, 8, FALSE, &err);
  g_unlink(path);
  g_free(path);
  g_assert_no_error(err);

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
  sp_whatif_pricer_free(p);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/whatif-price/extrapolation", test_extrapolation);
  return g_test_run();
}
