/* The engine's choice of NCCL's hierarchical all-reduces per call: sp_coll_spec.no_hier
 * keeps NVLS-tree and CollNet out of AUTO for that call only (the what-if's pricing),
 * on a generated platform of 2 DGX H100 nodes (`spsim platform dgx --nodes 2 --sharp`).
 * Expectations: NCCL picks NVLS-tree for a 1 GiB all-reduce across H100 nodes with
 * NVLink SHARP (NVIDIA/nccl src/graph/tuning.cc; tests/test-tuning.c derives it by
 * hand), so AUTO does on the 16 GPUs; without the hierarchical algorithms NCCL's table
 * leaves ring and tree; an explicit algorithm ignores the field. */
#include "config.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <unistd.h>

#include "platform-file.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/tuning.h"

static int32_t g_ranks[16];

static sp_coll_spec ar_spec(uint64_t bytes, sp_algo algo, gboolean no_hier)
{
  return (sp_coll_spec){ .coll = SP_COLL_ALL_REDUCE, .algo = algo, .dtype = SP_BF16, .redop = SP_RED_SUM,
                         .ranks = g_ranks, .n = 16, .count = bytes / 2, .channel_block = 8,
                         .no_hier = no_hier };
}

static sp_algo resolved(uint64_t bytes, sp_algo algo, gboolean no_hier)
{
  sp_coll_spec in = ar_spec(bytes, algo, no_hier), out;
  sp_tune_cost cost;
  GError *err = NULL;
  gboolean ok = sp_sim_coll_resolve(&in, &out, &cost, NULL, &err);
  g_assert_no_error(err);
  g_assert_true(ok);
  return out.algo;
}

static void test_no_hier_per_call(void)
{
  const uint64_t GIB = (uint64_t)1 << 30;
  g_assert_cmpint(resolved(GIB, SP_ALGO_AUTO, FALSE), ==, SP_ALGO_NVLS_TREE);
  sp_algo a = resolved(GIB, SP_ALGO_AUTO, TRUE);
  g_assert_true(a == SP_ALGO_RING || a == SP_ALGO_TREE);
  /* the field is the call's: the next call without it gets NVLS-tree again */
  g_assert_cmpint(resolved(GIB, SP_ALGO_AUTO, FALSE), ==, SP_ALGO_NVLS_TREE);
  /* an explicit algorithm is kept (NCCL_ALGO) */
  g_assert_cmpint(resolved(GIB, SP_ALGO_NVLS_TREE, TRUE), ==, SP_ALGO_NVLS_TREE);
  g_assert_cmpint(resolved(GIB, SP_ALGO_COLLNET_DIRECT, TRUE), ==, SP_ALGO_COLLNET_DIRECT);
}

/* Priced: the no_hier call costs what the same call with the algorithm AUTO then
 * picks costs when forced. */
static void test_no_hier_priced(void)
{
  const uint64_t bytes = (uint64_t)64 << 20;
  sp_algo a = resolved(bytes, SP_ALGO_AUTO, TRUE);
  g_assert_true(a != SP_ALGO_NVLS_TREE && a != SP_ALGO_COLLNET_DIRECT && a != SP_ALGO_COLLNET_CHAIN);
  sp_coll_spec nh = ar_spec(bytes, SP_ALGO_AUTO, TRUE), forced = ar_spec(bytes, a, FALSE);
  double t_nh = 0, t_forced = 0;
  GError *err = NULL;
  g_assert_true(sp_sim_coll_time(&nh, 16, SP_FIDELITY_FLOW, &t_nh, &err));
  g_assert_no_error(err);
  g_assert_true(sp_sim_coll_time(&forced, 16, SP_FIDELITY_FLOW, &t_forced, &err));
  g_assert_no_error(err);
  g_assert_cmpfloat(t_nh, >, 0);
  g_assert_cmpfloat(t_nh, ==, t_forced);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (int i = 0; i < 16; i++)
    g_ranks[i] = i;
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 2;
  o.gpu = SP_GPU_H100;
  o.sharp = TRUE;
  GError *err = NULL;
  char *path = platform_file(&o);
  g_assert_true(sp_sim_init(path, &err));
  g_assert_no_error(err);
  g_test_add_func("/sim-hier/no-hier-per-call", test_no_hier_per_call);
  g_test_add_func("/sim-hier/no-hier-priced", test_no_hier_priced);
  int rc = g_test_run();
  g_unlink(path);
  g_free(path);
  return rc;
}
