/* NCCL's tuning model (spsim/tuning.h). Every expected value is recomputed here by
 * hand from NCCL's constants (NVIDIA/nccl v2.30.7-1 src/graph/tuning.cc), never
 * taken from spsim's output:
 *   baseLat  Tree {6.8, 14, 8.4}  Ring {6.6, 14, 8.4}         (LL, LL128, Simple)
 *   hwLat NVLink Tree {.6, 1.25, 4}  Ring {.6, 1.9, 3.4}  NVLS Simple 25
 *   hwLat NET    Tree {5, 8.5, 14}   Ring {2.7, 4, 14}
 *   llMaxBw Hopper 1 node 141, Intel 3+ nodes 20.4; Ampere 1 node 87.7
 *   perChMaxRingLL128Bw Hopper 36.7, Ampere 20; perChMaxTreeBw Hopper 3+ nodes 36
 *   nvlsEfficiency Hopper 0.85; 16 channels. */
#include "config.h"
#include <glib.h>
#include <math.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/tuning.h"

#define MIB ((uint64_t)1 << 20)

static void assert_rel(double got, double want, double tol)
{
  if (!(fabs(got - want) <= tol * fabs(want)))
    g_error("got %.9g, want %.9g (rel. tolerance %g)", got, want, tol);
}

/* 8 x H100 on one NVSwitch node: NVLink 450 GB/s per GPU, NVLink SHARP */
static sp_tune_topo h100x8(void)
{
  return (sp_tune_topo){ .nranks = 8, .nnodes = 1, .arch = SP_TUNE_HOPPER, .bw_nvl = 450,
                         .nvls = TRUE };
}

static void test_table_one_node(void)
{
  sp_tune_topo t = h100x8();
  sp_tune_table tab;
  sp_tune_model(&t, SP_COLL_ALL_REDUCE, &tab);
  /* ring: busBw LL = min(141, 450/2) = 141, LL128 = min(0.92 x 450, 16 x 36.7) = 414,
   * Simple 450; algbw = busBw x 8 / 14; latency = baseLat + 14 x hwLat(NVLink ring) */
  assert_rel(tab.bw[SP_ALGO_RING][SP_PROTO_LL], 141.0 * 8 / 14, 1e-12);
  assert_rel(tab.bw[SP_ALGO_RING][SP_PROTO_LL128], 414.0 * 8 / 14, 1e-12);
  assert_rel(tab.bw[SP_ALGO_RING][SP_PROTO_SIMPLE], 450.0 * 8 / 14, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_RING][SP_PROTO_LL], 6.6 + 14 * 0.6, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_RING][SP_PROTO_LL128], 14 + 14 * 1.9, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_RING][SP_PROTO_SIMPLE], 8.4 + 14 * 3.4, 1e-12);
  /* NVLS: per channel bw = 450 / 16; min(bw x 0.85 x 15/16 x 2, bw) = bw, so busBw
   * = 450 and algbw 450 x 8/14; latency = hwLat NVLS = 25 us; Simple only */
  assert_rel(tab.bw[SP_ALGO_NVLS][SP_PROTO_SIMPLE], 450.0 * 8 / 14, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_NVLS][SP_PROTO_SIMPLE], 25.0, 1e-12);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS][SP_PROTO_LL], ==, 0.0);
  /* tree latency: baseLat + 2 x (ppn - 1) x hwLat(NVLink tree) */
  assert_rel(tab.lat_us[SP_ALGO_TREE][SP_PROTO_LL], 6.8 + 2 * 7 * 0.6, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_TREE][SP_PROTO_SIMPLE], 8.4 + 2 * 7 * 4.0, 1e-12);
  /* NCCL's tree (the double binary tree, a chain on one node): busBw Simple = min(0.92
   * x 450, 16 x 38.7) = 414, LL128 min(414 x 7/9, 16 x 36.7) = 322, LL min(414 / 3.8,
   * 141); algorithm bandwidth half of it */
  assert_rel(tab.bw[SP_ALGO_TREE][SP_PROTO_SIMPLE], 0.5 * 414.0, 1e-12);
  assert_rel(tab.bw[SP_ALGO_TREE][SP_PROTO_LL128], 0.5 * 414.0 * 7 / 9, 1e-12);
  assert_rel(tab.bw[SP_ALGO_TREE][SP_PROTO_LL], 0.5 * 414.0 / 3.8, 1e-12);
  /* no direct row */
  g_assert_cmpfloat(tab.bw[SP_ALGO_DIRECT][SP_PROTO_SIMPLE], ==, 0.0);

  /* broadcast: ring only, algbw = busBw x n / n, one hop of latency (NCCL's
   * sameChannels rings) */
  sp_tune_model(&t, SP_COLL_BROADCAST, &tab);
  assert_rel(tab.bw[SP_ALGO_RING][SP_PROTO_SIMPLE], 450.0, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_RING][SP_PROTO_SIMPLE], 8.4 + 3.4, 1e-12);
  assert_rel(tab.bw[SP_ALGO_RING][SP_PROTO_LL], 141.0, 1e-12);
  g_assert_cmpfloat(tab.bw[SP_ALGO_TREE][SP_PROTO_SIMPLE], ==, 0.0);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS][SP_PROTO_SIMPLE], ==, 0.0);

  /* all-gather: ring algbw = busBw x 8/7, latency over 7 steps; NVLS keeps its busBw
   * = 16 x min(450/16 x 0.85 x 15/16 x 7/8, 450/16) = 450 x 0.85 x 15/16 x 7/8 */
  sp_tune_model(&t, SP_COLL_ALL_GATHER, &tab);
  assert_rel(tab.bw[SP_ALGO_RING][SP_PROTO_SIMPLE], 450.0 * 8 / 7, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_RING][SP_PROTO_LL], 6.6 + 7 * 0.6, 1e-12);
  assert_rel(tab.bw[SP_ALGO_NVLS][SP_PROTO_SIMPLE], 450.0 * 0.85 * 15 / 16 * 7 / 8, 1e-9);
}

/* 8 x H100: NCCL picks ring LL up to 1 MiB and NVLS from 2 MiB (as measured with
 * NCCL_DEBUG_SUBSYS=TUNING on 8 x H100, NVIDIA/nccl-tests issue #309). By hand:
 * ring LL t = 15 + S / 80571.4; NVLS t = 25 + S / 257142.9 (us): at 1 MiB 28.01 <
 * 29.08, at 2 MiB 41.03 > 33.16; ring LL128 and Simple are slower at both. */
static void test_choice_h100(void)
{
  sp_tune_topo t = h100x8();
  sp_algo a;
  sp_proto p;
  double us;
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_LL);
  assert_rel(us, 15.0 + 1048576.0 / (141.0 * 8 / 14 * 1000), 1e-9);
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 2 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_NVLS);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  assert_rel(us, 25.0 + 2097152.0 / (450.0 * 8 / 14 * 1000), 1e-9);
  /* 8 B: ring LL (15.0 us) beats tree LL (15.2 us) */
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 8, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_LL);
  /* the reduction cannot run on the switch (f32 max): ring Simple at 1 GiB
   * (56 + S/257.1e3 < LL128's 40.6 + S/236.6e3) */
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 1024 * MIB, FALSE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  /* forced Simple at 1 KiB: NVLS (25 us) beats ring Simple (56) and tree Simple (64.4) */
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 1024, TRUE, SP_ALGO_AUTO, SP_PROTO_SIMPLE, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_NVLS);
  /* forced ring: its best protocol; at 4 MiB LL128 (40.6 + 17.73 = 58.33 us) beats
   * LL (15 + 52.06 = 67.06) and Simple (56 + 16.31 = 72.31) */
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 4 * MIB, TRUE, SP_ALGO_RING, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_LL128);
  assert_rel(us, 40.6 + 4194304.0 / (414.0 * 8 / 14 * 1000), 1e-9);
  /* broadcast: ring LL (7.2 + S/141e3) up to (11.8 - 7.2) / (1/141 - 1/450) ms = 944 KB,
   * then ring Simple */
  g_assert_true(sp_tune_choose(&t, SP_COLL_BROADCAST, 512 * 1024, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_LL);
  g_assert_true(sp_tune_choose(&t, SP_COLL_BROADCAST, 2 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
}

/* 8 x A100 (Ampere, 270 GB/s, no NVLink SHARP): LL algbw 87.7 x 8/14 = 50.11, LL128
 * 248.4 x 8/14 = 141.94, Simple 270 x 8/14 = 154.29. 1 MiB: LL 35.92 < LL128 47.99;
 * 4 MiB: LL128 70.15 < Simple 83.18 < LL 98.70; 64 MiB: Simple 490.9 < LL128 513.4 */
static void test_choice_a100(void)
{
  sp_tune_topo t = { .nranks = 8, .nnodes = 1, .arch = SP_TUNE_AMPERE, .bw_nvl = 270 };
  const struct {
    uint64_t bytes;
    sp_proto want;
  } cases[] = { { MIB, SP_PROTO_LL }, { 4 * MIB, SP_PROTO_LL128 }, { 64 * MIB, SP_PROTO_SIMPLE } };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    sp_algo a;
    sp_proto p;
    g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, cases[i].bytes, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
    g_assert_cmpint(a, ==, SP_ALGO_RING);
    g_assert_cmpint(p, ==, cases[i].want);
  }
  GError *err = NULL;
  sp_algo a;
  sp_proto p;
  g_assert_false(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_NVLS, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(err->message, "nvls=1"));
  g_clear_error(&err);
}

/* 1,024 H100 (128 nodes of 8, NIC 48 GB/s): graph busBw = min(450, 8 x 48) = 384.
 * Tree (NCCL's model): Simple busBw min(0.92 x 384, 16 x 36.0) = 353.28, LL128
 * min(353.28 x 120/128, 16 x 29.0) = 331.2, algbw half; latency LL128 14 + 2(7 x 1.25
 * + 7 x 8.5) = 150.5 us, Simple 8.4 + 2(7 x 4 + 7 x 14) = 260.4 us. 8 MiB (log2(S/64)
 * = 17, NCCL's treeCorrectionFactor LL128 0.9, Simple 0.8): tree LL128 = 150.5 + S /
 * (165.6 x 0.9 x 1e3) = 206.8 us, tree Simple 260.4 + S / (176.64 x 0.8 x 1e3) = 319.8,
 * ring LL128 = 14 + 1792 x 1.9 + 254 x 4 = 4434.8 + S / (min(0.92 x 384, 16 x 36.7) x
 * 1024/2046 x 1e3) = 4482.2, ring Simple (8.4 + 1792 x 3.4 + 254 x 14) x 1.4 = 13520 +
 * 43.6: TREE LL128. 1 GiB (no correction above 2^22 x 64 B): tree Simple 260.4 + S /
 * 176.64e3 = 6339.1 us beats tree LL128 (6634.5) and ring LL128 (4434.8 + 6072.8 =
 * 10507.6): TREE Simple without NVLink SHARP. With it, NVLS-tree (perChMaxNVLSTreeBw
 * Hopper 3+ nodes 45.5; NVLS-tree hwLat NVLink 25, NET 20.9): per channel min(450/16 x
 * 0.85 x 15/16 x 2 = 44.82, NICs 8 x 48 / 16 = 24, 45.5) = 24, busBw 384, algbw 384 x
 * 1024 / 2046, latency 25 + 2 log2(128) x 20.9 = 317.6 us: at 1 GiB 317.6 + 5586.9 =
 * 5904.5 us beats tree Simple; at 8 MiB (361.2 us) it does not. */
static void test_choice_1024(void)
{
  sp_tune_topo t = { .nranks = 1024, .nnodes = 128, .arch = SP_TUNE_HOPPER, .bw_nvl = 450,
                     .bw_nic = 48, .nvls = TRUE };
  sp_algo a;
  sp_proto p;
  double us;
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 8 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_TREE);
  g_assert_cmpint(p, ==, SP_PROTO_LL128);
  assert_rel(us, 150.5 + 8388608.0 / (0.5 * 331.2 * 0.9 * 1e3), 1e-9);
  sp_tune_table tab;
  sp_tune_model(&t, SP_COLL_ALL_REDUCE, &tab);
  assert_rel(sp_tune_time_us(&t, &tab, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_SIMPLE, 8 * MIB),
             (8.4 + 1792 * 3.4 + 254 * 14) * 1.4 + 8388608.0 / (384.0 * 1024 / 2046 * 1e3), 1e-9);
  /* ring LL128 across nodes: min(0.92 x 384, 8 x 36.7) = 293.6, the per-channel cap on the
   * ring graph's 8 channels, one per NIC of a node (as NCCL's graph search finds them:
   * nvidia/nccl issue #601, "nChannels 4" on nodes of 4 NICs) */
  assert_rel(sp_tune_time_us(&t, &tab, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL128, 8 * MIB),
             14 + 1792 * 1.9 + 254 * 4.0 + 8388608.0 / (8 * 36.7 * 1024 / 2046 * 1e3), 1e-9);
  /* NVLS is not available across nodes (NCCL: only with CollNet) */
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS][SP_PROTO_SIMPLE], ==, 0.0);
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 1024 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_NVLS_TREE);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  assert_rel(us, 317.6 + 1073741824.0 / (384.0 * 1024 / 2046 * 1e3), 1e-9);
  sp_tune_topo nn = t;
  nn.nvls = FALSE;
  g_assert_true(sp_tune_choose(&nn, SP_COLL_ALL_REDUCE, 1024 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_TREE);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  assert_rel(us, 260.4 + 1073741824.0 / (0.5 * 0.92 * 384 * 1e3), 1e-9);
  /* the what-if's pricing (no_hier): NVLS-tree left out, the same tree as without NVLS */
  sp_tune_topo nh = t;
  nh.no_hier = TRUE;
  g_assert_true(sp_tune_choose(&nh, SP_COLL_ALL_REDUCE, 1024 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_TREE);
  assert_rel(us, 260.4 + 1073741824.0 / (0.5 * 0.92 * 384 * 1e3), 1e-9);
  assert_rel(sp_tune_time_us(&t, &tab, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL128, 1024 * MIB),
             14 + 1792 * 1.9 + 254 * 4.0 + 1073741824.0 / (8 * 36.7 * 1024 / 2046 * 1e3), 1e-9);
}

/* Point-to-point: LL up to 16 KiB per peer (NCCL_P2P_LL_THRESHOLD), then Simple. */
static void test_p2p(void)
{
  sp_tune_topo t = h100x8();
  sp_algo a;
  sp_proto p;
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_TO_ALL, 16384, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_DIRECT);
  g_assert_cmpint(p, ==, SP_PROTO_LL);
  g_assert_true(sp_tune_choose(&t, SP_COLL_SEND_RECV, 16385, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_DIRECT);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
}

static void test_errors(void)
{
  sp_tune_topo t = h100x8();
  sp_algo a;
  sp_proto p;
  GError *err = NULL;
  g_assert_false(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_NVLS, SP_PROTO_LL, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(err->message, "Simple"));
  g_clear_error(&err);
  g_assert_false(sp_tune_choose(&t, SP_COLL_BROADCAST, MIB, TRUE, SP_ALGO_NVLS, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  g_assert_false(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, MIB, FALSE, SP_ALGO_NVLS, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  /* NCCL's ncclNvlsSupported */
  g_assert_true(sp_tune_nvls_supported(SP_COLL_ALL_REDUCE, SP_RED_SUM, SP_F32));
  g_assert_false(sp_tune_nvls_supported(SP_COLL_ALL_REDUCE, SP_RED_MAX, SP_F32));
  g_assert_true(sp_tune_nvls_supported(SP_COLL_ALL_REDUCE, SP_RED_MAX, SP_BF16));
  g_assert_false(sp_tune_nvls_supported(SP_COLL_ALL_REDUCE, SP_RED_AVG, SP_BF16));
  g_assert_false(sp_tune_nvls_supported(SP_COLL_REDUCE_SCATTER, SP_RED_SUM, SP_U8));
  g_assert_true(sp_tune_nvls_supported(SP_COLL_ALL_GATHER, SP_RED_SUM, SP_U8));
  g_assert_cmpint(sp_tune_arch_of_model("H100-SXM5-80GB"), ==, SP_TUNE_HOPPER);
  g_assert_cmpint(sp_tune_arch_of_model("A100-SXM4-80GB"), ==, SP_TUNE_AMPERE);
  g_assert_cmpint(sp_tune_arch_of_model("B200"), ==, SP_TUNE_BLACKWELL);
  g_assert_cmpint(sp_tune_arch_of_model("toy-gpu"), ==, SP_TUNE_HOPPER);
}

/* NVLS's fill and drain on one node, by hand from NCCL's calcCollChunking
 * (src/enqueue.cc) and nvls.cc: on 8 x H100, 16 channels x 8 heads = 128 chunks per
 * loop, 128 KiB from 1 GiB on, 64 KiB from 64 MiB (< 64 x 128 x 128 KiB), 32 KiB from
 * 8 MiB (< 8 x 128 x 64 KiB), 16 KiB below (< 2 x 128 x 32 KiB); all-reduce: two loops
 * at the NVLS rate 275 GB/s of input (450 x 275/450). */
static void test_nvls_fill(void)
{
  sp_tune_topo t = h100x8();
  const double r = 275e9;
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, (uint64_t)1 << 33), 2 * 128 * 131072 / r, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, (uint64_t)1 << 30), 2 * 128 * 131072 / r, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, ((uint64_t)1 << 30) - 1024), 2 * 128 * 65536 / r, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, (uint64_t)1 << 26), 2 * 128 * 65536 / r, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, (uint64_t)1 << 25), 2 * 128 * 32768 / r, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, (uint64_t)1 << 23), 2 * 128 * 32768 / r, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, (uint64_t)1 << 22), 2 * 128 * 16384 / r, 1e-12);
  /* a message under one loop: the loop is the message */
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_REDUCE, 1 << 20), 2.0 * (1 << 20) / r, 1e-12);
  /* all-gather and reduce-scatter: two stages, one loop, (n-1)/n of the bytes per GPU */
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_ALL_GATHER, (uint64_t)1 << 30), 128 * 131072 / r * 7 / 8, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&t, SP_COLL_REDUCE_SCATTER, (uint64_t)1 << 30), 128 * 131072 / r * 7 / 8, 1e-12);
  /* Blackwell in one NVLink domain of 72: 24 channels x 32 heads (NCCL_MAX_NVLS_ARITY) */
  sp_tune_topo b = { .nranks = 72, .nnodes = 1, .arch = SP_TUNE_BLACKWELL, .bw_nvl = 900, .nvls = TRUE };
  assert_rel(sp_tune_nvls_fill_s(&b, SP_COLL_ALL_REDUCE, (uint64_t)1 << 30), 2 * 768 * 65536 / 435e9, 1e-12);
  assert_rel(sp_tune_nvls_fill_s(&b, SP_COLL_ALL_REDUCE, (uint64_t)1 << 33), 2 * 768 * 131072 / 435e9, 1e-12);
  /* none across nodes, for a broadcast, or without an NVLink bandwidth */
  sp_tune_topo two = t;
  two.nnodes = 2;
  g_assert_cmpfloat(sp_tune_nvls_fill_s(&two, SP_COLL_ALL_REDUCE, (uint64_t)1 << 30), ==, 0.0);
  g_assert_cmpfloat(sp_tune_nvls_fill_s(&t, SP_COLL_BROADCAST, (uint64_t)1 << 30), ==, 0.0);
  sp_tune_topo none = t;
  none.bw_nvl = 0;
  g_assert_cmpfloat(sp_tune_nvls_fill_s(&none, SP_COLL_ALL_REDUCE, (uint64_t)1 << 30), ==, 0.0);
}

/* What the engine charges: NCCL's ratios of the protocol to Simple. */
static void test_cost(void)
{
  sp_tune_topo t = h100x8();
  sp_tune_cost c;
  /* ring LL on one H100 node: wire = 450 / min(141, 225), base latency 6.6/8.4; the
   * network ratio is the ring's 2.7/14; a step over NVLink as measured: 8 x H100, 8 KiB
   * in 27.05 us = 6.6 + 0.1 us of bandwidth + 14 steps of 1.454 us, against the
   * platforms' 2 x 1.3 us of Simple (Azure ND H100 v5) */
  sp_tune_cost_of(&t, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL, &c);
  assert_rel(c.wire, 450.0 / 141.0, 1e-12);
  assert_rel(c.lat_intra, (27.05 - 6.6 - 0.1) / 14 / 2.6, 1e-3);
  /* A100: 1.98 us per step, the slope of nccl-tests issue #123's 10.0 .. 33.7 us over 2
   * .. 14 steps ((33.7 - 10.0) / 12 = 1.975); V100: NCCL's own ratio 0.6 / 3.4 */
  sp_tune_topo am = t, vo = t;
  am.arch = SP_TUNE_AMPERE;
  vo.arch = SP_TUNE_VOLTA;
  sp_tune_cost_of(&am, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL, &c);
  assert_rel(c.lat_intra, (33.7 - 10.0) / 12 / 2.6, 5e-3);
  sp_tune_cost_of(&vo, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL, &c);
  assert_rel(c.lat_intra, 0.6 / 3.4, 1e-12);
  sp_tune_cost_of(&t, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL, &c);
  assert_rel(c.lat_inter, 2.7 / 14, 1e-12);
  assert_rel(c.coll_lat, 6.6 / 8.4, 1e-12);
  g_assert_cmpint(c.fill_steps, ==, 14); /* a ring on one node: 2(n-1) steps' latency once */
  /* LL128 on one node: 0.92 of NCCL's effective NVLink bandwidth 18 x 20.6 = 370.8 GB/s
   * (under the per-channel cap 16 x 36.7), against the platform's 450 */
  sp_tune_cost_of(&t, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL128, &c);
  assert_rel(c.wire, 450.0 / (0.92 * 370.8), 1e-12);
  assert_rel(c.lat_intra, 1.9 / 3.4, 1e-12);
  assert_rel(c.coll_lat, 14.0 / 8.4, 1e-12);
  /* Simple on one node: the effective bandwidth, the steps' latency paid once */
  sp_tune_cost_of(&t, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 450.0 / 370.8, 1e-12);
  g_assert_cmpfloat(c.lat_intra, ==, 1.0);
  g_assert_cmpfloat(c.coll_lat, ==, 1.0);
  g_assert_cmpint(c.fill_steps, ==, 14);
  sp_tune_cost_of(&t, SP_COLL_ALL_GATHER, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  g_assert_cmpint(c.fill_steps, ==, 7);
  sp_tune_cost_of(&t, SP_COLL_REDUCE_SCATTER, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  g_assert_cmpint(c.fill_steps, ==, 7);
  assert_rel(c.wire, 450.0 / 370.8, 1e-12);
  /* B200, 4 GPUs of a tray: 18 x 40.1 = 721.8 GB/s of NVLink 5's 900 */
  sp_tune_topo b4 = { .nranks = 4, .nnodes = 1, .arch = SP_TUNE_BLACKWELL, .bw_nvl = 900 };
  sp_tune_cost_of(&b4, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 900.0 / 721.8, 1e-12);
  g_assert_cmpint(c.fill_steps, ==, 6);
  /* across nodes the ring keeps its rounds and the line rate (neutral) */
  sp_tune_topo x2 = { .nranks = 16, .nnodes = 2, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48 };
  sp_tune_cost_of(&x2, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  g_assert_cmpfloat(c.wire, ==, 1.0);
  g_assert_cmpint(c.fill_steps, ==, 0);
  /* broadcast is a chain, not a ring round: untouched */
  sp_tune_cost_of(&t, SP_COLL_BROADCAST, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  g_assert_cmpfloat(c.wire, ==, 1.0);
  g_assert_cmpint(c.fill_steps, ==, 0);
  /* tree LL128 on one node: 7/9 of Simple's bandwidth, tree latency ratios */
  sp_tune_cost_of(&t, SP_COLL_ALL_REDUCE, SP_ALGO_TREE, SP_PROTO_LL128, &c);
  assert_rel(c.wire, 9.0 / 7.0, 1e-12);
  assert_rel(c.lat_intra, 1.25 / 4.0, 1e-12);
  assert_rel(c.coll_lat, 14.0 / 8.4, 1e-12);
  /* point-to-point on one node: at NCCL's NVLink bandwidth 18 x 20.6 = 370.8 GB/s
   * (SM90_NVLINK_BW) instead of the platform's 450; LL halves it again (16-byte
   * lines of 8 data bytes) */
  sp_tune_cost_of(&t, SP_COLL_SEND_RECV, SP_ALGO_DIRECT, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 450.0 / 370.8, 1e-12);
  sp_tune_cost_of(&t, SP_COLL_ALL_TO_ALL, SP_ALGO_DIRECT, SP_PROTO_LL, &c);
  assert_rel(c.wire, 2.0 * 450.0 / 370.8, 1e-12);
  assert_rel(c.lat_intra, 0.6 / 3.4, 1e-12); /* point-to-point: NCCL's ratio, not the ring's step */
  /* A100 at 270 GB/s: NCCL's 12 x 20.0 = 240; a platform below NCCL's figure (100
   * GB/s) and point-to-point across nodes are left as they are */
  sp_tune_topo a100 = { .nranks = 8, .nnodes = 1, .arch = SP_TUNE_AMPERE, .bw_nvl = 270 };
  sp_tune_cost_of(&a100, SP_COLL_ALL_TO_ALL, SP_ALGO_DIRECT, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 270.0 / 240.0, 1e-12);
  sp_tune_cost_of(&a100, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 270.0 / 240.0, 1e-12);
  sp_tune_topo slow = { .nranks = 2, .nnodes = 1, .arch = SP_TUNE_HOPPER, .bw_nvl = 100 };
  sp_tune_cost_of(&slow, SP_COLL_SEND_RECV, SP_ALGO_DIRECT, SP_PROTO_SIMPLE, &c);
  g_assert_cmpfloat(c.wire, ==, 1.0);
  sp_tune_cost_of(&slow, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_SIMPLE, &c);
  g_assert_cmpfloat(c.wire, ==, 1.0);
  g_assert_cmpint(c.fill_steps, ==, 2); /* the rounds still pipelined */
  sp_tune_topo two = { .nranks = 2, .nnodes = 2, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48 };
  sp_tune_cost_of(&two, SP_COLL_SEND_RECV, SP_ALGO_DIRECT, SP_PROTO_SIMPLE, &c);
  g_assert_cmpfloat(c.wire, ==, 1.0);
  /* NVLS all-reduce on 8 GPUs: lowered as DIRECT (7/8 S each way, twice), priced as
   * S once each way at 275/450 of the port: wire = 8 / (14 x 275/450) */
  sp_tune_cost_of(&t, SP_COLL_ALL_REDUCE, SP_ALGO_NVLS, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 8.0 / (14.0 * 275.0 / 450.0), 1e-12);
  assert_rel(c.coll_lat, 25.0 / 8.4, 1e-12);
  g_assert_cmpfloat(c.lat_intra, ==, 1.0);
  sp_tune_cost_of(&t, SP_COLL_ALL_GATHER, SP_ALGO_NVLS, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 450.0 / 275.0, 1e-12);
  /* Blackwell: 435/900 of NVLink 5 (a GB200 NVL72 rack's all_reduce_perf at 4 and 8 GiB,
   * 10,094 and 20,299 us, less the NVLS latency and two loops of fill: 436.8 and 433.7
   * GB/s), on 72 GPUs: wire = 72 / (142 x 435/900) */
  sp_tune_topo bw = { .nranks = 72, .nnodes = 1, .arch = SP_TUNE_BLACKWELL, .bw_nvl = 900 };
  sp_tune_cost_of(&bw, SP_COLL_ALL_REDUCE, SP_ALGO_NVLS, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 72.0 / (142.0 * 435.0 / 900.0), 1e-12);
  sp_tune_cost_of(&bw, SP_COLL_REDUCE_SCATTER, SP_ALGO_NVLS, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire, 900.0 / 435.0, 1e-12);
  /* one GPU per node: the network latency ratio is the tree's (NCCL) */
  sp_tune_topo u = { .nranks = 4, .nnodes = 4, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48 };
  sp_tune_cost_of(&u, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL, &c);
  assert_rel(c.lat_inter, 5.0 / 14, 1e-12);
}

/* NVLS-tree and CollNet (NCCL v2.30.7-1 src/graph/tuning.cc, ncclTopoTuneModel), on 2 and
 * 4 DGX H100 nodes (NVLink 450 GB/s, NIC 48 GB/s per GPU, 16 channels), by hand:
 * NVLS-tree per channel = min(NVLink SHARP 450/16 x 0.85 x 15/16 x 2 = 44.82421875, NICs
 * 8 x 48/16 = 24 (x2 on 2 nodes = 48), perChMaxNVLSTreeBw Hopper 57.7 (2 nodes) / 45.5);
 * busBw x 16, algbw x n / (2(n-1)); latency hwLat NVLink 25 + 2 log2(nodes) x NET 20.9.
 * CollNet: busBw = the node's min(450, 8 x 48) = 384, Direct x 0.85 on Hopper, algbw half;
 * latency Direct 2(min(1, 7) x 3.7 + 7 x 0.4) + 31 = 44, Chain 2 x 7 x 2.8 + 30 = 69.2. */
static void test_hier(void)
{
  sp_tune_topo t2 = { .nranks = 16, .nnodes = 2, .arch = SP_TUNE_HOPPER, .bw_nvl = 450,
                      .bw_nic = 48, .nvls = TRUE, .sharp = TRUE };
  sp_tune_table tab;
  sp_tune_model(&t2, SP_COLL_ALL_REDUCE, &tab);
  assert_rel(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], 16 * 44.82421875 * 16 / 30, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], 25 + 2 * 20.9, 1e-12);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_LL128], ==, 0.0);
  assert_rel(tab.bw[SP_ALGO_COLLNET_DIRECT][SP_PROTO_SIMPLE], 384 * 0.85 * 0.5, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_COLLNET_DIRECT][SP_PROTO_SIMPLE], 44.0, 1e-12);
  assert_rel(tab.bw[SP_ALGO_COLLNET_CHAIN][SP_PROTO_SIMPLE], 384 * 0.5, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_COLLNET_CHAIN][SP_PROTO_SIMPLE], 69.2, 1e-12);
  g_assert_cmpfloat(tab.bw[SP_ALGO_COLLNET_DIRECT][SP_PROTO_LL], ==, 0.0);
  /* 4 nodes: the NICs bound NVLS-tree (24 per channel), two tree levels */
  sp_tune_topo t4 = t2;
  t4.nranks = 32;
  t4.nnodes = 4;
  sp_tune_model(&t4, SP_COLL_ALL_REDUCE, &tab);
  assert_rel(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], 384.0 * 32 / 62, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], 25 + 4 * 20.9, 1e-12);
  /* switches reducing at half the NIC's rate halve CollNet's bandwidth */
  t4.bw_sharp = 24;
  sp_tune_model(&t4, SP_COLL_ALL_REDUCE, &tab);
  assert_rel(tab.bw[SP_ALGO_COLLNET_CHAIN][SP_PROTO_SIMPLE], 384 * 0.5 * 0.5, 1e-12);

  /* AUTO on 2 nodes with NVLink SHARP and SHARP, 1 GiB: NVLS-tree 66.8 + S / 382.5e3 =
   * 2874 us beats CollNet Chain 69.2 + S / 192e3 = 5661, tree Simple (busBw min(0.92 x
   * 384, 16 x 41.4) = 353.28, half: 8.4 + 2(7 x 4 + 14) + S / 176.64e3 = 6171) and ring
   * Simple (busBw 384); 1 MiB: CollNet Direct 44 + S / 163.2e3 = 50.43 us beats NVLS-tree
   * (66.8 + 2.74) and CollNet Chain (69.2 + 5.46) */
  sp_algo a;
  sp_proto p;
  double us;
  g_assert_true(sp_tune_choose(&t2, SP_COLL_ALL_REDUCE, 1024 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_NVLS_TREE);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  assert_rel(us, 66.8 + 1073741824.0 / (16 * 44.82421875 * 16 / 30 * 1e3), 1e-9);
  g_assert_true(sp_tune_choose(&t2, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_COLLNET_DIRECT);
  assert_rel(us, 44.0 + 1048576.0 / (384 * 0.85 * 0.5 * 1e3), 1e-9);
  /* the switch cannot reduce f32 max: neither runs; ring Simple (8.4 + 28 x 3.4 + 2 x
   * 14) x 1.4 + S / (384 x 16/30 x 1e3) = 5427.1 us beats tree Simple (6171) */
  g_assert_true(sp_tune_choose(&t2, SP_COLL_ALL_REDUCE, 1024 * MIB, FALSE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  assert_rel(us, (8.4 + 28 * 3.4 + 2 * 14) * 1.4 + 1073741824.0 / (384.0 * 16 / 30 * 1e3), 1e-9);

  /* not available: one node, one GPU per node (NVLS needs two of a node), no nvls, no
   * sharp, collectives other than all-reduce */
  sp_tune_topo one = h100x8();
  one.sharp = TRUE;
  sp_tune_model(&one, SP_COLL_ALL_REDUCE, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], ==, 0.0);
  g_assert_cmpfloat(tab.bw[SP_ALGO_COLLNET_DIRECT][SP_PROTO_SIMPLE], ==, 0.0);
  sp_tune_topo u = { .nranks = 4, .nnodes = 4, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48,
                     .nvls = TRUE };
  sp_tune_model(&u, SP_COLL_ALL_REDUCE, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], ==, 0.0);
  g_assert_cmpfloat(tab.bw[SP_ALGO_COLLNET_CHAIN][SP_PROTO_SIMPLE], ==, 0.0);
  sp_tune_topo plain = t2;
  plain.nvls = FALSE;
  plain.sharp = FALSE;
  sp_tune_model(&plain, SP_COLL_ALL_REDUCE, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], ==, 0.0);
  g_assert_cmpfloat(tab.bw[SP_ALGO_COLLNET_DIRECT][SP_PROTO_SIMPLE], ==, 0.0);
  sp_tune_model(&t2, SP_COLL_ALL_GATHER, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_NVLS_TREE][SP_PROTO_SIMPLE], ==, 0.0);
  g_assert_cmpfloat(tab.bw[SP_ALGO_COLLNET_DIRECT][SP_PROTO_SIMPLE], ==, 0.0);

  /* forced where it cannot run: one line saying what is missing */
  GError *err = NULL;
  g_assert_false(sp_tune_choose(&plain, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_COLLNET_DIRECT, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(err->message, "sharp=1"));
  g_assert_null(strchr(err->message, '\n'));
  g_clear_error(&err);
  g_assert_false(sp_tune_choose(&plain, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_NVLS_TREE, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_nonnull(strstr(err->message, "nvls=1"));
  g_clear_error(&err);
  g_assert_false(sp_tune_choose(&t2, SP_COLL_ALL_REDUCE, MIB, TRUE, SP_ALGO_COLLNET_CHAIN, SP_PROTO_LL128, &a, &p, NULL, &err));
  g_assert_nonnull(strstr(err->message, "Simple"));
  g_clear_error(&err);
  g_assert_false(sp_tune_choose(&t2, SP_COLL_BROADCAST, MIB, TRUE, SP_ALGO_NVLS_TREE, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);
  g_assert_false(sp_tune_choose(&t2, SP_COLL_ALL_REDUCE, MIB, FALSE, SP_ALGO_COLLNET_DIRECT, SP_PROTO_AUTO, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_clear_error(&err);

  /* what the engine charges (lower_hier.c): NVLS-tree's exchanges inside a node move
   * 2 x 7/8 of the data where the switch moves it once each way at 275/450 of the port:
   * wire_intra = 8 / (14 x 275/450); CollNet's exchange across N nodes moves 2(N-1)/N
   * where the switch takes it once: wire_inter = N / (2(N-1)), x 48/24 when the switch
   * reduces at 24 GB/s; latency of the switch operation in place of ring Simple's 8.4 */
  sp_tune_cost c;
  sp_tune_cost_of(&t2, SP_COLL_ALL_REDUCE, SP_ALGO_NVLS_TREE, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire_intra, 8.0 / (14.0 * 275.0 / 450.0), 1e-12);
  g_assert_cmpfloat(c.wire_inter, ==, 1.0);
  g_assert_cmpfloat(c.wire, ==, 1.0);
  assert_rel(c.coll_lat, 25.0 / 8.4, 1e-12);
  sp_tune_cost_of(&t4, SP_COLL_ALL_REDUCE, SP_ALGO_COLLNET_DIRECT, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire_inter, 4.0 / 6.0 * 2.0, 1e-12);
  g_assert_cmpfloat(c.wire_intra, ==, 1.0);
  assert_rel(c.coll_lat, 31.0 / 8.4, 1e-12);
  sp_tune_cost_of(&t2, SP_COLL_ALL_REDUCE, SP_ALGO_COLLNET_CHAIN, SP_PROTO_SIMPLE, &c);
  assert_rel(c.wire_inter, 1.0, 1e-12);
  assert_rel(c.coll_lat, 30.0 / 8.4, 1e-12);
}

/* PAT (NCCL 2.23+), one GPU per node (ncclPatEnable), Simple only, all-gather and
 * reduce-scatter only: busBw = graph bw x 0.75, no bus -> algorithm conversion;
 * latency = baseLat 8.0 + log2i(nNodes) x (interLat / 3.5) + nRanks x 2.8, interLat =
 * the tree's network Simple latency 14 at one GPU per node. 48 GB/s NIC per node. */
static void test_pat(void)
{
  sp_tune_topo t4 = { .nranks = 4, .nnodes = 4, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48,
                      .pat_nodes = TRUE };
  sp_tune_table tab;
  sp_tune_model(&t4, SP_COLL_ALL_GATHER, &tab);
  assert_rel(tab.bw[SP_ALGO_PAT][SP_PROTO_SIMPLE], 48 * 0.75, 1e-12);
  assert_rel(tab.lat_us[SP_ALGO_PAT][SP_PROTO_SIMPLE], 8.0 + 2 * 14 / 3.5 + 4 * 2.8, 1e-12);
  g_assert_cmpfloat(tab.bw[SP_ALGO_PAT][SP_PROTO_LL], ==, 0.0);
  g_assert_cmpfloat(tab.bw[SP_ALGO_PAT][SP_PROTO_LL128], ==, 0.0);
  sp_tune_model(&t4, SP_COLL_ALL_REDUCE, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_PAT][SP_PROTO_SIMPLE], ==, 0.0);
  /* 16 ranks on 2 nodes: NCCL disables PAT */
  sp_tune_topo t2 = { .nranks = 16, .nnodes = 2, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48,
                      .pat_nodes = TRUE };
  sp_tune_model(&t2, SP_COLL_ALL_GATHER, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_PAT][SP_PROTO_SIMPLE], ==, 0.0);

  /* 4 nodes, 1 MiB: PAT 27.2 + 1048576/36000 = 56.33 us against ring LL (6.6 + 3 x 5)
   * + 1048576/(20.4 x 4/3 x 1000) = 60.15, LL128 (14 + 3 x 8.5) + 1048576/(44.16 x 4/3 x
   * 1000) = 57.31, Simple (8.4 + 3 x 14) + 1048576/64000 = 66.78 */
  sp_algo a;
  sp_proto p;
  double us;
  g_assert_true(sp_tune_choose(&t4, SP_COLL_ALL_GATHER, MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_PAT);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  assert_rel(us, 27.2 + 1048576.0 / 36000, 1e-9);
  /* 8 bytes: ring LL's 21.6 us beats PAT's 27.2 */
  g_assert_true(sp_tune_choose(&t4, SP_COLL_REDUCE_SCATTER, 8, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_LL);
  /* 16 nodes, 8 bytes: PAT 8 + 4 x 4 + 16 x 2.8 = 68.8 against ring LL 6.6 + 15 x 5 = 81.6 */
  sp_tune_topo t16 = { .nranks = 16, .nnodes = 16, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48,
                       .pat_nodes = TRUE };
  g_assert_true(sp_tune_choose(&t16, SP_COLL_REDUCE_SCATTER, 8, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, &us, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_PAT);
  assert_rel(us, 68.8 + 8 / 36000.0, 1e-9);
  /* 1 GiB: ring Simple's 51.2 GB/s beats PAT's 36 */
  g_assert_true(sp_tune_choose(&t16, SP_COLL_ALL_GATHER, 1024 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, ==, SP_ALGO_RING);
  g_assert_cmpint(p, ==, SP_PROTO_SIMPLE);
  /* one GPU per node of the group on a platform of multi-GPU nodes: spsim keeps PAT off */
  sp_tune_topo t16m = t16;
  t16m.pat_nodes = FALSE;
  sp_tune_model(&t16m, SP_COLL_ALL_GATHER, &tab);
  g_assert_cmpfloat(tab.bw[SP_ALGO_PAT][SP_PROTO_SIMPLE], ==, 0.0);
  /* 8 GPUs per node: never PAT */
  g_assert_true(sp_tune_choose(&t2, SP_COLL_ALL_GATHER, MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO, &a, &p, NULL, NULL));
  g_assert_cmpint(a, !=, SP_ALGO_PAT);
  /* forced PAT with another protocol */
  GError *err = NULL;
  g_assert_false(sp_tune_choose(&t4, SP_COLL_ALL_GATHER, MIB, TRUE, SP_ALGO_PAT, SP_PROTO_LL, &a, &p, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(err->message, "Simple protocol only"));
  g_clear_error(&err);
}

/* NCCL's channels per collective (topoGetAlgoInfo): from 16, one less while nBytes <
 * nc x threads x threshold. Ring LL: 512 threads x 8 B x nRanks per channel; ring
 * and tree Simple 512 x 64 B = 32 KiB; LL128 640 x 8 B = 5 KiB. */
static void test_channels(void)
{
  sp_tune_topo t = { .nranks = 256, .nnodes = 32, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48 };
  /* ring LL on 256 ranks: 1 MiB per channel (512 x 8 x 256) */
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_LL, 1 * MIB), ==, 1);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_LL, 5 * MIB), ==, 5);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_LL, 5 * MIB - 1), ==, 4);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_LL, 64 * MIB), ==, 16);
  /* tree LL: no x nRanks, 4 KiB per channel */
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_TREE, SP_PROTO_LL, 12 * 4096), ==, 12);
  /* Simple: 32 KiB per channel; LL128: 5 KiB */
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_SIMPLE, 3 * 32768 + 1), ==, 3);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_SIMPLE, 1 * MIB), ==, 16);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_LL128, 7 * 5120), ==, 7);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_SIMPLE, 0), ==, 1);
  /* other algorithms and an unresolved protocol: the communicator's channels */
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_NVLS_TREE, SP_PROTO_SIMPLE, 4096), ==, 16);
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_AUTO, 4096), ==, 16);
  t.channels = 24;
  g_assert_cmpint(sp_tune_channels(&t, SP_ALGO_RING, SP_PROTO_SIMPLE, 1 * MIB), ==, 24);
}

/* aws-ofi-nccl v1.16.3's region tuner for p5 (src/tuner/nccl_ofi_regions.cpp), its
 * polygons in the (message bytes, ranks) plane worked by hand at the points below. */
static void test_aws_p5(void)
{
  sp_algo a[8];
  sp_proto p[8];
  sp_tuner tu = SP_TUNER_NONE;
  g_assert_true(sp_tuner_parse("AWS-P5", &tu));
  g_assert_cmpint(tu, ==, SP_TUNER_AWS_P5);
  g_assert_cmpstr(sp_tuner_name(tu), ==, "aws-p5");
  g_assert_false(sp_tuner_parse("aws", &tu));
  g_assert_false(sp_tuner_parse(NULL, &tu));
  /* 4 nodes of 8 (y = 32): Tree LL128 left of its edge (31457280, 16)-(37748736, 32), so up
   * to 36 MiB; Ring LL128 from there to its edge (1073741824, 17)-(2147483648, 64), at y = 32
   * x = 2^30 (1 + 15/47) = 1416425384.9; Ring Simple from its vertex (1610612736, 32) */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 16 * MIB, 32, 4, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_TREE && p[0] == SP_PROTO_LL128);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 36 * MIB, 32, 4, a, p, 8), >=, 1);
  g_assert_true(a[0] == SP_ALGO_TREE && p[0] == SP_PROTO_LL128); /* on the shared edge: Tree first */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 36 * MIB + 1, 32, 4, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_RING && p[0] == SP_PROTO_LL128); /* one byte past it */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 1024 * MIB, 32, 4, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_RING && p[0] == SP_PROTO_LL128);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 1416425384, 32, 4, a, p, 8), ==, 1);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 1416425385, 32, 4, a, p, 8), ==, 0);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 1536 * MIB, 32, 4, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_RING && p[0] == SP_PROTO_SIMPLE);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 8192 * MIB, 32, 4, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_RING && p[0] == SP_PROTO_SIMPLE);
  /* 8 nodes, 2 GiB: the Ring LL128 vertex (2147483648, 64) */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 2048 * MIB, 64, 8, a, p, 8), >=, 1);
  g_assert_true(a[0] == SP_ALGO_RING && p[0] == SP_PROTO_LL128);
  /* 128 nodes (y = 1024), 1 GiB: right of Tree LL128's vertex (536870912, 1024), in NVLS-tree */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 1024 * MIB, 1024, 128, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_NVLS_TREE && p[0] == SP_PROTO_SIMPLE);
  /* 2 nodes or fewer, and a collective without regions: NCCL's model */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, 64 * MIB, 16, 2, a, p, 8), ==, 0);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_GATHER, 64 * MIB, 32, 4, a, p, 8), ==, 0);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_NONE, SP_COLL_ALL_REDUCE, 64 * MIB, 32, 4, a, p, 8), ==, 0);
  /* one GPU per node, 8 nodes, all-gather: Ring Simple right of (4194304, 2)-(8589934592,
   * 2048), at y = 8 x = 4194304 + 6/2046 (8589934592 - 4194304) = 29372428.01 */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_GATHER, 29372428, 8, 8, a, p, 8), ==, 0);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_GATHER, 29372429, 8, 8, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_RING && p[0] == SP_PROTO_SIMPLE);
  /* two GPUs per node, 4 nodes (y = 8), 1 MiB: Tree LL128 left of (1314816, 4)-(1051648, 8) */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5, SP_COLL_ALL_REDUCE, MIB, 8, 4, a, p, 8), ==, 1);
  g_assert_true(a[0] == SP_ALGO_TREE && p[0] == SP_PROTO_LL128);

  /* sp_tune_choose takes the plugin's pair with both AUTO, NCCL's model otherwise */
  sp_tune_topo t = { .nranks = 32, .nnodes = 4, .arch = SP_TUNE_HOPPER, .bw_nvl = 450, .bw_nic = 48,
                     .nvls = TRUE, .tuner = SP_TUNER_AWS_P5 };
  sp_algo ca;
  sp_proto cp;
  double us;
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 64 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO,
                               &ca, &cp, &us, NULL));
  g_assert_true(ca == SP_ALGO_RING && cp == SP_PROTO_LL128);
  sp_tune_table tab;
  sp_tune_model(&t, SP_COLL_ALL_REDUCE, &tab);
  assert_rel(us, sp_tune_time_us(&t, &tab, SP_COLL_ALL_REDUCE, SP_ALGO_RING, SP_PROTO_LL128, 64 * MIB), 1e-12);
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 64 * MIB, TRUE, SP_ALGO_TREE, SP_PROTO_AUTO,
                               &ca, &cp, NULL, NULL));
  g_assert_true(ca == SP_ALGO_TREE); /* a forced algorithm: the plugin stays out */
  sp_tune_topo plain = t;
  plain.tuner = SP_TUNER_NONE;
  g_assert_true(sp_tune_choose(&plain, SP_COLL_ALL_REDUCE, 64 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO,
                               &ca, &cp, NULL, NULL));
  g_assert_false(ca == SP_ALGO_RING && cp == SP_PROTO_LL128);
  /* 128 nodes, 1 GiB: NVLS-tree, unless the switch cannot reduce the type (nvls_ok FALSE),
   * where NCCL's model chooses among the rest */
  t.nranks = 1024;
  t.nnodes = 128;
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 1024 * MIB, TRUE, SP_ALGO_AUTO, SP_PROTO_AUTO,
                               &ca, &cp, NULL, NULL));
  g_assert_true(ca == SP_ALGO_NVLS_TREE && cp == SP_PROTO_SIMPLE);
  g_assert_true(sp_tune_choose(&t, SP_COLL_ALL_REDUCE, 1024 * MIB, FALSE, SP_ALGO_AUTO, SP_PROTO_AUTO,
                               &ca, &cp, NULL, NULL));
  g_assert_true(ca != SP_ALGO_NVLS_TREE);
}

/* The first pair tuner plugin T names for (bytes, ranks, nodes) is (al, pr). */
#define PICK(T, coll, bytes, ranks, nodes, al, pr)                                        \
  do {                                                                                    \
    g_assert_cmpint(sp_tuner_pairs(T, coll, bytes, ranks, nodes, a, p, 8), >=, 1);        \
    g_assert_cmpint(a[0], ==, SP_ALGO_##al);                                              \
    g_assert_cmpint(p[0], ==, SP_PROTO_##pr);                                             \
  } while (0)

/* The same plugin's regions for p5en (region_init_internal_p5en), worked by hand. */
static void test_aws_p5en(void)
{
  sp_algo a[8];
  sp_proto p[8];
  sp_tuner tu = SP_TUNER_NONE;
  g_assert_true(sp_tuner_parse("aws-p5en", &tu));
  g_assert_cmpint(tu, ==, SP_TUNER_AWS_P5EN);
  g_assert_nonnull(strstr(sp_tuner_list(), "aws-p5en"));
  const sp_tuner T = SP_TUNER_AWS_P5EN;
  /* 4 nodes of 8 (y = 32), all-reduce: Tree LL inside the triangle (0, 16), (262144, 16),
   * (262144, 2^20 ranks); Tree LL128 up to its edge (14680064, 16)-(150994944, 128), at
   * y = 32 x = 14680064 + 16/112 x 136314880 = 34153618.3; Ring LL128 from there to its
   * vertex (536870912, 32); Ring Simple beyond */
  PICK(T, SP_COLL_ALL_REDUCE, 65536, 32, 4, TREE, LL);
  PICK(T, SP_COLL_ALL_REDUCE, 16 * MIB, 32, 4, TREE, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 34153618, 32, 4, TREE, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 34153619, 32, 4, RING, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 512 * MIB, 32, 4, RING, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 1024 * MIB, 32, 4, RING, SIMPLE);
  /* 8 nodes (y = 64): NVLS-tree between x = 536870912 and its edge (536870912, 32)-
   * (6442450944, 256), at y = 64 x = 536870912 + 32/224 x 5905580032 = 1380525202.3 */
  PICK(T, SP_COLL_ALL_REDUCE, 1024 * MIB, 64, 8, NVLS_TREE, SIMPLE);
  PICK(T, SP_COLL_ALL_REDUCE, 1380525203, 64, 8, RING, SIMPLE);
  /* all-gather, y = 32: Ring LL up to (262144, 32); Ring LL128 to its edge (268435456, 16)-
   * (2147483648, 128), at y = 32 x = 536870912; Ring Simple beyond */
  PICK(T, SP_COLL_ALL_GATHER, 131072, 32, 4, RING, LL);
  PICK(T, SP_COLL_ALL_GATHER, MIB, 32, 4, RING, LL128);
  PICK(T, SP_COLL_REDUCE_SCATTER, 512 * MIB, 32, 4, RING, LL128);
  PICK(T, SP_COLL_REDUCE_SCATTER, 1024 * MIB, 32, 4, RING, SIMPLE);
  /* one GPU per node, 8 nodes (y = 8): all-reduce Tree LL128 from 65536 to its vertex
   * (524288, 8); all-gather PAT up to its edge (1048576, 2)-(16777216, 32), at y = 8 x =
   * 4194304; Ring LL128 from there to (4194304, 2)-(50331648, 16), at y = 8 x = 23967451.4 */
  PICK(T, SP_COLL_ALL_REDUCE, 131072, 8, 8, TREE, LL128);
  PICK(T, SP_COLL_ALL_GATHER, 4 * MIB, 8, 8, PAT, SIMPLE);
  PICK(T, SP_COLL_ALL_GATHER, 8 * MIB, 8, 8, RING, LL128);
  PICK(T, SP_COLL_ALL_GATHER, 64 * MIB, 8, 8, RING, SIMPLE);
  /* no region for 2 GPUs per node on p5en, nor on 2 nodes */
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5EN, SP_COLL_ALL_REDUCE, 64 * MIB, 8, 4, a, p, 8), ==, 0);
  g_assert_cmpint(sp_tuner_pairs(SP_TUNER_AWS_P5EN, SP_COLL_ALL_REDUCE, 64 * MIB, 16, 2, a, p, 8), ==, 0);
}

/* The same plugin's regions for p6-b200 (region_init_internal_p6), worked by hand. */
static void test_aws_p6(void)
{
  sp_algo a[8];
  sp_proto p[8];
  sp_tuner tu = SP_TUNER_NONE;
  g_assert_true(sp_tuner_parse("aws-p6", &tu));
  g_assert_cmpint(tu, ==, SP_TUNER_AWS_P6);
  const sp_tuner T = SP_TUNER_AWS_P6;
  /* 4 nodes of 8 (y = 32), all-reduce: Tree LL up to 256 KiB, Tree LL128 up to its vertex
   * (67108864, 32), Ring LL128 to its vertex (562036736, 32), Ring Simple beyond */
  PICK(T, SP_COLL_ALL_REDUCE, 65536, 32, 4, TREE, LL);
  PICK(T, SP_COLL_ALL_REDUCE, 16 * MIB, 32, 4, TREE, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 64 * MIB, 32, 4, TREE, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 256 * MIB, 32, 4, RING, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 1024 * MIB, 32, 4, RING, SIMPLE);
  /* 128 nodes (y = 1024): NVLS-tree between (2684354560, 1024) and (3758096384, 1024), Ring
   * LL128 from there to (17179869184, 1024) */
  PICK(T, SP_COLL_ALL_REDUCE, 3072 * MIB, 1024, 128, NVLS_TREE, SIMPLE);
  PICK(T, SP_COLL_ALL_REDUCE, 8192 * MIB, 1024, 128, RING, LL128);
  /* all-gather and reduce-scatter, y = 32: Ring LL left of (1048576, 16)-(106954752, 1024),
   * at y = 32 x = 2729626.4; Ring LL128 left of (268435456, 16)-(21474836480, 1024), at
   * y = 32 x = 605044996.1; Ring Simple beyond */
  PICK(T, SP_COLL_ALL_GATHER, 2 * MIB, 32, 4, RING, LL);
  PICK(T, SP_COLL_REDUCE_SCATTER, 4 * MIB, 32, 4, RING, LL128);
  PICK(T, SP_COLL_ALL_GATHER, 1024 * MIB, 32, 4, RING, SIMPLE);
  /* one GPU per node, 8 nodes (y = 8): all-reduce Tree LL128 from 32 KiB to (131072, 2)-
   * (8388608, 128), at y = 8 x = 524288; Ring LL128 from there to (3145728, 2)-(297795584,
   * 128), at y = 8 x = 17176673.5; all-gather PAT up to (1048576, 4)-(12582912, 48), at
   * y = 8 x = 2097152, reduce-scatter up to (1048576, 4)-(67108864, 48), x = 7054056.7 */
  PICK(T, SP_COLL_ALL_REDUCE, 256 * 1024, 8, 8, TREE, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, MIB, 8, 8, RING, LL128);
  PICK(T, SP_COLL_ALL_REDUCE, 64 * MIB, 8, 8, RING, SIMPLE);
  PICK(T, SP_COLL_ALL_GATHER, MIB, 8, 8, PAT, SIMPLE);
  PICK(T, SP_COLL_ALL_GATHER, 4 * MIB, 8, 8, RING, LL128);
  PICK(T, SP_COLL_REDUCE_SCATTER, 4 * MIB, 8, 8, PAT, SIMPLE);
  PICK(T, SP_COLL_ALL_GATHER, 64 * MIB, 8, 8, RING, SIMPLE);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/tuning/table-one-node", test_table_one_node);
  g_test_add_func("/tuning/choice-h100", test_choice_h100);
  g_test_add_func("/tuning/choice-a100", test_choice_a100);
  g_test_add_func("/tuning/choice-1024", test_choice_1024);
  g_test_add_func("/tuning/p2p", test_p2p);
  g_test_add_func("/tuning/errors", test_errors);
  g_test_add_func("/tuning/cost", test_cost);
  g_test_add_func("/tuning/nvls-fill", test_nvls_fill);
  g_test_add_func("/tuning/pat", test_pat);
  g_test_add_func("/tuning/hier", test_hier);
  g_test_add_func("/tuning/channels", test_channels);
  g_test_add_func("/tuning/aws-p5", test_aws_p5);
  g_test_add_func("/tuning/aws-p5en", test_aws_p5en);
  g_test_add_func("/tuning/aws-p6", test_aws_p6);
  return g_test_run();
}
