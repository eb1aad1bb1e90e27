/* NCCL's tuning model (see spsim/tuning.h): one table of NCCL's constants, the
 * per-communicator table of latencies and bandwidths, the choice of algorithm and
 * protocol, and what a protocol costs the engine. Every constant below is NCCL's,
 * from NVIDIA/nccl v2.30.7-1 src/graph/tuning.cc (ncclTunerConstantsDefaults,
 * nvlsEfficiency, ncclTopoTuneModel, ncclTopoGetAlgoTime) and src/enqueue.cc
 * (NCCL_P2P_LL_THRESHOLD), unless its comment says otherwise. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/tuning.h"

/* NCCL's seven algorithms (in spsim's order of ties: tree, ring, NVLS, PAT, NVLS-tree,
 * CollNet Direct, CollNet Chain), protocols LL, LL128, Simple; hardware NVLink, PCI,
 * network. */
enum { NA_TREE = 0, NA_RING, NA_NVLS, NA_PAT, NA_NVLS_TREE, NA_COLLNET_DIRECT, NA_COLLNET_CHAIN,
       NA_COUNT };
enum { NP_LL = 0, NP_LL128, NP_SIMPLE, NP_COUNT };
enum { HW_NVLINK = 0, HW_PCI, HW_NET, HW_COUNT };

static const struct {
  double base_lat[NA_COUNT][NP_COUNT];              /* baseLatencies, us */
  double hw_lat[HW_COUNT][NA_COUNT][NP_COUNT];      /* hwLatencies, us per hop */
  double ll_max_bw[SP_TUNE_ARCH_COUNT][3];          /* llMaxBws [arch or CPU][nodes 1, 2, >2] */
  double ring_ll128_bw[SP_TUNE_ARCH_COUNT][3];      /* perChMaxRingLL128Bws */
  double tree_ll128_bw[SP_TUNE_ARCH_COUNT][3];      /* perChMaxTreeLL128Bws */
  double tree_bw[SP_TUNE_ARCH_COUNT][3];            /* perChMaxTreeBws */
  double nvls_eff[SP_TUNE_ARCH_COUNT];              /* nvlsEfficiency */
  double nvls_tree_bw[SP_TUNE_ARCH_COUNT][3];       /* perChMaxNVLSTreeBws */
} nccl = {
  .base_lat = { [NA_TREE] = { 6.8, 14.0, 8.4 }, [NA_RING] = { 6.6, 14.0, 8.4 },
                [NA_NVLS] = { 0, 0, 0 }, [NA_PAT] = { 8.0, 8.0, 8.0 },
                [NA_NVLS_TREE] = { 0, 0, 0 }, [NA_COLLNET_DIRECT] = { 0, 0, 0 },
                [NA_COLLNET_CHAIN] = { 0, 0, 0 } },
  .hw_lat = {
    [HW_NVLINK] = { [NA_TREE] = { 0.6, 1.25, 4.0 }, [NA_RING] = { 0.6, 1.9, 3.4 },
                    [NA_NVLS] = { 0, 0, 25 }, [NA_PAT] = { 0, 0, 4.0 },
                    [NA_NVLS_TREE] = { 0, 0, 25 }, [NA_COLLNET_DIRECT] = { 0, 0, 3.7 },
                    [NA_COLLNET_CHAIN] = { 0, 0, 2.8 } },
    [HW_PCI] = { [NA_TREE] = { 1.0, 1.9, 4.0 }, [NA_RING] = { 1.0, 2.5, 5.7 },
                 [NA_NVLS] = { 0, 0, 0 }, [NA_PAT] = { 0, 0, 4.0 },
                 [NA_NVLS_TREE] = { 0, 0, 0 }, [NA_COLLNET_DIRECT] = { 0, 0, 3.7 },
                 [NA_COLLNET_CHAIN] = { 0, 0, 2.8 } },
    [HW_NET] = { [NA_TREE] = { 5.0, 8.5, 14 }, [NA_RING] = { 2.7, 4.0, 14.0 },
                 [NA_NVLS] = { 0, 0, 18 }, [NA_PAT] = { 0, 0, 14 },
                 [NA_NVLS_TREE] = { 0, 0, 20.9 }, [NA_COLLNET_DIRECT] = { 0, 0, 31 },
                 [NA_COLLNET_CHAIN] = { 0, 0, 30 } },
  },
  /* one node: by GPU generation; several: by CPU (row 0 Intel, row 1 AMD) */
  .ll_max_bw = { { 39.0, 39.0, 20.4 }, { 87.7, 22.5, 19.0 }, { 141.0, 45.0, 35.0 },
                 { 2 * 141.0, 2 * 45.0, 2 * 35.0 } },
  .ring_ll128_bw = { { 20.0, 20.0, 20.0 }, { 20.0, 20.0, 20.0 }, { 36.7, 36.7, 36.7 },
                     { 40.0, 40.0, 40.0 } },
  .tree_ll128_bw = { { 20.0, 20.0, 20.0 }, { 20.0, 20.0, 20.0 }, { 36.7, 36.7, 29.0 },
                     { 55.6, 31.67, 20.0 } },
  .tree_bw = { { 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 38.7, 41.4, 36.0 },
               { 70.0, 42.8, 24.0 } },
  .nvls_eff = { 0.0, 0.0, 0.85, 0.74 },
  .nvls_tree_bw = { { 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 0.0, 57.7, 45.5 },
                    { 0.0, 96.0, 80.0 } },
};

/* NCCL's CollNet Direct all-reduce on Hopper and later ("if (minCompCap >= 90) busBw *=
 * .85", ncclTopoTuneModel) and its arity serialisation latency per local rank ("Add 0.4 us
 * arity serialization latency"). */
#define COLLNET_DIRECT_HOPPER_FACTOR 0.85
/* An all-to-all's messages between nodes move at this fraction of the NIC rate a ring
 * reaches (the platforms' NIC bandwidth). NCCL runs point-to-point over the network on
 * fewer channels per peer and smaller chunks than its rings (NCCL_NCHANNELS_PER_NET_PEER,
 * NCCL_P2P_NET_CHUNKSIZE). Fitted: the mean of measured / predicted busbw without it
 * over the three published nccl-tests alltoall_perf runs at 2 GiB on 2, 8 and 32 AWS p5
 * nodes (79.25, 49.63, 40.78 GB/s; crazyguitar/aws-gpu-communication-benchmark,
 * data/nccl_alltoall.csv) against spsim's 89.90, 53.96 and 49.33 GB/s on the same
 * platforms: 0.882, 0.920, 0.827. */
#define A2A_NET_EFFICIENCY 0.876
#define COLLNET_ARITY_LAT 0.4

/* LL's latency per ring step over NVLink (rings and chains; point-to-point keeps
 * NCCL's ratio), measured, as a fraction of the shipped platforms' Simple step (2 x
 * 1.3 us of NVLink traversal, docs/calibration.md); NCCL's own ratio (hwLat 0.6 / 3.4)
 * puts a step at 0.46 us, 3-4x under what nccl-tests measures. Ampere: 1.98 us, the
 * least-squares slope of a DGX A100's ring all-reduce of 8-128 B on one channel over
 * its 2(n-1) steps, n = 2..8 GPUs: 10.0, 13.76, 16.88, 20.8, 25.2, 29.5, 33.7 us
 * (NVIDIA/nccl-tests issue #123, NCCL_ALGO=Ring NCCL_MAX_NCHANNELS=1). Hopper: 1.454
 * us, from 8 x H100's all-reduce of 8 KiB in 27.05 us (Azure AI-benchmarking-guide, ND
 * H100 v5 all_reduce_perf, busbw 0.53) less LL's base 6.6 us and 0.1 us of bandwidth,
 * over 14 steps. Blackwell: Hopper's (no published figure). Volta (0): NCCL's ratio. */
static const double ll_ring_step_ratio[SP_TUNE_ARCH_COUNT] = { 0, 1.98 / 2.6, 1.454 / 2.6, 1.454 / 2.6 };

/* NCCL's bandwidth of one NVLink per direction (src/graph/topo.h: SM70/SM80_NVLINK_BW
 * 20.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 GB/s) times the links of the SXM
 * parts (V100 6, A100 12, H100 18, B200 18; NVIDIA datasheets): NCCL's effective
 * NVLink bandwidth of a GPU, against line rates of 150, 300, 450 and 900 GB/s. */
static const double nccl_nvlink_gpu_bw[SP_TUNE_ARCH_COUNT] = { 6 * 20.0, 12 * 20.0, 18 * 20.6,
                                                                18 * 40.1 };

/* NCCL's PAT refinement (ncclTopoTuneModel: "if (a == NCCL_ALGO_PAT) busBw *= .75")
 * and the linear part of its latency ("nRanks * 2.8; Still a linear part"), and the
 * divisor of its log latency ("log2i(nNodes) * (interLat / 3.5)"). */
#define PAT_BW_FACTOR 0.75
#define PAT_LAT_PER_RANK 2.8
#define PAT_LOG_LAT_DIV 3.5

/* NCCL_MAX_NVLS_ARITY (src/include/device.h): NVLS all-gather / reduce-scatter
 * need at most this many GPUs of a node. */
#define NVLS_MAX_ARITY 32

/* NCCL's NVLS pipeline on one node (NVIDIA/nccl master of June 2026;
 * src/transport/nvls.cc: NVLS_NCHANNELS_SM90 16,
 * NVLS_NCHANNELS_SM100_NVL 24, NCCL_NVLS_CHUNKSIZE 128 KiB; src/enqueue.cc,
 * calcCollChunking: the Simple step of 4 MiB / NCCL_STEPS = 512 KiB caps the chunk
 * first), and the warp groups its kernels pipeline (src/device/all_reduce.h: scatter,
 * reduce and multicast, gather; all_gather.h and reduce_scatter.h: two). */
static const int nvls_channels[SP_TUNE_ARCH_COUNT] = { 16, 16, 16, 24 };
#define NVLS_CHUNK_BYTES (128u << 10)
#define NVLS_STEP_BYTES (512u << 10)

static const char *const arch_names[SP_TUNE_ARCH_COUNT] = { "volta", "ampere", "hopper",
                                                            "blackwell" };

const char *sp_tune_arch_name(sp_tune_arch a)
{
  return (unsigned)a < SP_TUNE_ARCH_COUNT ? arch_names[a] : "invalid";
}

sp_tune_arch sp_tune_arch_of_model(const char *model)
{
  static const struct {
    const char *prefix;
    sp_tune_arch arch;
  } known[] = {
    { "V100", SP_TUNE_VOLTA },   { "A100", SP_TUNE_AMPERE },   { "A800", SP_TUNE_AMPERE },
    { "A10", SP_TUNE_AMPERE },   { "A30", SP_TUNE_AMPERE },    { "A40", SP_TUNE_AMPERE },
    { "H100", SP_TUNE_HOPPER },  { "H800", SP_TUNE_HOPPER },   { "H200", SP_TUNE_HOPPER },
    { "H20", SP_TUNE_HOPPER },   { "GH200", SP_TUNE_HOPPER },  { "B100", SP_TUNE_BLACKWELL },
    { "B200", SP_TUNE_BLACKWELL }, { "GB200", SP_TUNE_BLACKWELL }, { "B300", SP_TUNE_BLACKWELL },
  };
  if (model != NULL)
    for (gsize i = 0; i < G_N_ELEMENTS(known); i++)
      if (g_ascii_strncasecmp(model, known[i].prefix, strlen(known[i].prefix)) == 0)
        return known[i].arch;
  return SP_TUNE_HOPPER;
}

double sp_tune_nvls_efficiency(sp_tune_arch arch)
{
  return arch == SP_TUNE_BLACKWELL ? SP_NVLS_EFFICIENCY_BLACKWELL : SP_NVLS_EFFICIENCY;
}

static int32_t log2i(int32_t n) /* NCCL's log2i: floor(log2 n), 0 for n <= 1 */
{
  int32_t l = 0;
  while (n > 1) {
    n >>= 1;
    l++;
  }
  return l;
}

static sp_algo algo_of(int na)
{
  static const sp_algo of[NA_COUNT] = {
    [NA_TREE] = SP_ALGO_TREE, [NA_RING] = SP_ALGO_RING, [NA_NVLS] = SP_ALGO_NVLS,
    [NA_PAT] = SP_ALGO_PAT, [NA_NVLS_TREE] = SP_ALGO_NVLS_TREE,
    [NA_COLLNET_DIRECT] = SP_ALGO_COLLNET_DIRECT, [NA_COLLNET_CHAIN] = SP_ALGO_COLLNET_CHAIN,
  };
  return of[na];
}

static sp_proto proto_of(int np)
{
  return (sp_proto)(np + 1);
}

static int np_of(sp_proto p)
{
  return p == SP_PROTO_LL ? NP_LL : p == SP_PROTO_LL128 ? NP_LL128 : NP_SIMPLE;
}

static int32_t channels_of(const sp_tune_topo *t)
{
  return t->channels > 0 ? t->channels : SP_TUNE_CHANNELS;
}

/* NCCL's graph bus bandwidth (nChannels x bw, GB/s) of the ring and tree: NVLink on
 * one node; across nodes the ring leaves every node through all its NICs. */
static double graph_bw(const sp_tune_topo *t)
{
  if (t->nnodes <= 1 || t->bw_nic <= 0)
    return t->bw_nvl;
  double ppn = (double)t->nranks / (double)t->nnodes;
  double net = ppn * t->bw_nic;
  return t->bw_nvl > 0 && t->bw_nvl < net ? t->bw_nvl : net;
}

static int32_t nsteps_of(sp_coll c, int32_t n)
{
  return c == SP_COLL_ALL_REDUCE ? 2 * (n - 1)
         : c == SP_COLL_ALL_GATHER || c == SP_COLL_REDUCE_SCATTER ? n - 1 : n;
}

/* The channels of a ring: across nodes spsim's ring runs one per GPU of a node, each
 * leaving through that GPU's NIC (sp_sim_ring_channels), so NCCL's per-channel caps apply
 * to that many; inside a node the communicator's. */
static int32_t ring_channels(const sp_tune_topo *t)
{
  int32_t nc = channels_of(t), ppn = t->nnodes > 1 ? t->nranks / t->nnodes : 0;
  return ppn >= 2 ? MIN(nc, ppn) : nc;
}

/* NCCL's tree bus bandwidth of protocol @np for an all-reduce (before the 0.5 of
 * algorithm bandwidth): the refinements of ncclTopoTuneModel. */
static double nccl_tree_busbw(const sp_tune_topo *t, int np)
{
  int32_t nc = channels_of(t), i2 = t->nnodes <= 2 ? t->nnodes - 1 : 2;
  int32_t i1 = t->nnodes == 1 ? (int32_t)t->arch : (t->cpu_amd ? 1 : 0);
  double ll_max = nccl.ll_max_bw[i1][i2];
  double bus = graph_bw(t);
  bus = MIN(bus * 0.92, nc * nccl.tree_bw[t->arch][i2]);
  if (np == NP_LL)
    bus = MIN(bus / 3.8, ll_max);
  else if (np == NP_LL128)
    bus = MIN(bus * (t->nnodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nc * nccl.tree_ll128_bw[t->arch][i2]);
  return bus;
}

/* NCCL's treeCorrectionFactor (src/graph/tuning.cc, v2.19 to v2.2x; the same rows in
 * v2.30's src/tuning/cost_model.cc with one more column): the tree's bandwidth at
 * all-reduce sizes 64 B x 2^i (i = log2(bytes / 64), 0 .. 22), per protocol LL,
 * LL128, Simple. NCCL: "Trees are not perfectly sticking to the model for medium
 * sizes. Applying a static correction factor is not ideal but works quite well." */
static const double tree_correction[NP_COUNT][23] = {
  { 1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
    1.0 },
  { 1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
    1.0 },
  { .9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9 },
};

void sp_tune_model(const sp_tune_topo *t, sp_coll coll, sp_tune_table *out)
{
  memset(out, 0, sizeof *out);
  int32_t n = t->nranks, nodes = t->nnodes < 1 ? 1 : t->nnodes;
  if (n <= 1)
    return;
  int32_t nc = channels_of(t), nsteps = nsteps_of(coll, n);
  int32_t i2 = nodes <= 2 ? nodes - 1 : 2;
  int32_t i1 = nodes == 1 ? (int32_t)t->arch : (t->cpu_amd ? 1 : 0);
  double ll_max = nccl.ll_max_bw[i1][i2], ppn = (double)n / nodes;
  gboolean agrs = coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER;
  gboolean rooted = coll == SP_COLL_BROADCAST || coll == SP_COLL_REDUCE;
  if (coll == SP_COLL_ALL_TO_ALL || coll == SP_COLL_SEND_RECV)
    return; /* point-to-point: no tuning table (sp_tune_choose) */
  /* NVLink inside a node (spsim's platforms are NVLink nodes); the network across */
  int hw = nodes == 1 ? HW_NVLINK : HW_NET;
  for (int a = 0; a < NA_COUNT; a++) {
    if (rooted && a != NA_RING)
      continue;
    if (agrs && a == NA_TREE)
      continue;
    if (a == NA_PAT && !agrs)
      continue;
    /* ncclPatEnable (tuning.cc): "PAT only supports 1 GPU per node"; spsim also asks
     * the platform's nodes to hold one GPU (pat_nodes), so groups of one GPU per node on
     * multi-GPU nodes keep the ring as before */
    if (a == NA_PAT && (nodes != n || !t->pat_nodes))
      continue;
    gboolean hier = a == NA_NVLS_TREE || a == NA_COLLNET_DIRECT || a == NA_COLLNET_CHAIN;
    /* all-reduce across nodes only (NCCL disables NVLS-tree on one node and CollNet
     * without a network that reduces); NVLS-tree also needs the NVSwitch's reduction and
     * two GPUs of a node (ncclNvlsInit: "gpuCount < 2"), CollNet the switches' (sharp) */
    if (hier && (coll != SP_COLL_ALL_REDUCE || nodes < 2 || t->no_hier))
      continue;
    if (a == NA_NVLS_TREE && (!t->nvls || ppn < 2 || nc < 2))
      continue;
    if ((a == NA_COLLNET_DIRECT || a == NA_COLLNET_CHAIN) && !t->sharp)
      continue;
    for (int p = 0; p < NP_COUNT; p++) {
      if ((a == NA_NVLS || a == NA_PAT || hier) && p != NP_SIMPLE)
        continue;
      double bus;
      if (a == NA_NVLS_TREE) {
        /* per channel: NVLink SHARP inside (bwIntra x nvlsEfficiency x (nc-1)/nc, x2 as
         * the all-reduce pipelines two operations), the network across (bwInter, x2 on
         * two nodes), capped by perChMaxNVLSTreeBws; bwIntra = B_nvl / nc, bwInter = the
         * node's NICs ppn x B_nic / nc (spsim's graph: every GPU's NIC carries channels) */
        double intra = t->bw_nvl / nc * nccl.nvls_eff[t->arch] * (nc - 1) / nc * 2.0;
        double inter = ppn * t->bw_nic / nc * (nodes <= 2 ? 2.0 : 1.0);
        bus = nc * MIN(MIN(intra, inter), nccl.nvls_tree_bw[t->arch][i2]);
      } else if (a == NA_COLLNET_DIRECT || a == NA_COLLNET_CHAIN) {
        /* nChannels x bwIntra of the CollNet graph: spsim's node bandwidth (one NIC per
         * GPU, so NCCL's GPU/NIC factor is 1); Direct x 0.85 from Hopper on; the switch
         * reduces at sharp_bw per port where that is below the NIC */
        bus = graph_bw(t);
        if (t->bw_sharp > 0 && t->bw_nic > t->bw_sharp)
          bus *= t->bw_sharp / t->bw_nic;
        if (a == NA_COLLNET_DIRECT && t->arch >= SP_TUNE_HOPPER)
          bus *= COLLNET_DIRECT_HOPPER_FACTOR;
      } else if (a == NA_NVLS) {
        /* one node: NCCL's NVLS graph has bwInter = bwIntra = bw per channel */
        if (nc < 2 || !t->nvls || nodes > 1 || (agrs && ppn > NVLS_MAX_ARITY))
          continue;
        double bw = t->bw_nvl / nc;
        double intra = bw * nccl.nvls_eff[t->arch] * (nc - 1) / nc;
        intra *= coll == SP_COLL_ALL_REDUCE ? 2.0 : (ppn - 1) / ppn;
        bus = nc * MIN(intra, bw);
      } else if (a == NA_TREE) {
        /* NCCL's double binary tree (lower_dbtree.c), NCCL's model as it is */
        bus = nccl_tree_busbw(t, p);
      } else if (a == NA_PAT) {
        bus = graph_bw(t) * PAT_BW_FACTOR; /* no bus -> algorithm conversion (AG/RS) */
      } else {
        bus = graph_bw(t);
        if (p == NP_LL)
          bus = MIN(ll_max, bus * 0.5);
        else if (p == NP_LL128)
          bus = MIN(bus * 0.92, ring_channels(t) * nccl.ring_ll128_bw[t->arch][i2]);
      }
      if (bus <= 0)
        continue;
      /* bus -> algorithm bandwidth (NCCL: ring, NVLS and NVLS-tree n / nsteps, the
       * others 0.5) */
      if (!(a != NA_RING && agrs))
        bus *= a == NA_RING || a == NA_NVLS || a == NA_NVLS_TREE ? (double)n / nsteps : 0.5;
      out->bw[algo_of(a)][proto_of(p)] = bus;

      double lat = nccl.base_lat[a][p];
      double intra_lat = nccl.hw_lat[HW_NVLINK][a][p];
      double inter_lat = ppn == 1 ? nccl.hw_lat[HW_NET][NA_TREE][p] : nccl.hw_lat[HW_NET][a][p];
      if (a == NA_RING) {
        if (rooted) {
          lat += nccl.hw_lat[hw][a][p]; /* sameChannels rings */
        } else {
          double overhead = 0;
          if (nodes > 1)
            overhead = (t->cpu_amd ? 2.0 : 1.0) * (p == NP_SIMPLE ? 3 : 1);
          intra_lat = MAX(intra_lat, overhead);
          int32_t ninter = nodes == 1 ? 0 : coll == SP_COLL_ALL_REDUCE ? 2 * (nodes - 1) : nodes - 1;
          lat += (nsteps - ninter) * intra_lat + ninter * inter_lat;
        }
      } else if (a == NA_TREE) {
        lat += 2 * ((n / nodes - 1) * intra_lat + log2i(nodes) * inter_lat);
      } else if (a == NA_PAT) {
        lat += log2i(nodes) * (inter_lat / PAT_LOG_LAT_DIV) + n * PAT_LAT_PER_RANK;
      } else if (a == NA_NVLS_TREE) {
        lat += intra_lat + 2 * log2i(nodes) * inter_lat;
      } else if (a == NA_COLLNET_DIRECT) {
        int32_t local = n / nodes - 1;
        lat += 2 * (MIN(1, local) * intra_lat + local * COLLNET_ARITY_LAT) + inter_lat;
      } else if (a == NA_COLLNET_CHAIN) {
        lat += 2 * (n / nodes - 1) * intra_lat + inter_lat;
      } else { /* NVLS */
        lat = intra_lat;
        if (nodes > 1)
          lat += inter_lat;
      }
      out->lat_us[algo_of(a)][proto_of(p)] = lat;
    }
  }
}

double sp_tune_time_us(const sp_tune_topo *t, const sp_tune_table *tab, sp_coll coll, sp_algo a,
                       sp_proto p, uint64_t bytes)
{
  if ((unsigned)a >= SP_ALGO_COUNT || (unsigned)p >= SP_PROTO_COUNT)
    return -1;
  double bw = tab->bw[a][p], lat = tab->lat_us[a][p];
  if (bw <= 0)
    return -1;
  int32_t n = t->nranks;
  int32_t lg = log2i((int32_t)MIN(bytes >> 6, (uint64_t)G_MAXINT32));
  if (a == SP_ALGO_TREE && coll == SP_COLL_ALL_REDUCE && bytes >= 64 && lg < 23)
    bw *= tree_correction[np_of(p)][lg];
  if (a == SP_ALGO_RING && p == SP_PROTO_SIMPLE && t->nnodes > 1 && coll == SP_COLL_ALL_REDUCE &&
      bytes / ((uint64_t)channels_of(t) * (uint64_t)n) >= 64)
    lat *= t->arch < SP_TUNE_AMPERE ? 1.9 : 1.4; /* NCCL: "Plateau effect of ring" */
  return lat + (double)bytes / (1000.0 * bw);
}

/* Threads per channel and bytes per thread before another channel pays off: NCCL's
 * maxThreads (ncclTopoTuneModel: NCCL_LL_MAX_NTHREADS and NCCL_SIMPLE_MAX_NTHREADS
 * 512, NCCL_LL128_MAX_NTHREADS 640; src/include/device.h; Simple's 512 where the
 * ring is faster than PCI, as on NVLink nodes) and threadThresholds
 * (NCCL_LL_THREAD_THRESHOLD 8, NCCL_LL128_THREAD_THRESHOLD 8,
 * NCCL_SIMPLE_THREAD_THRESHOLD 64, src/include/comm.h; ring LL x nRanks). */
static const int32_t chan_threads[NP_COUNT] = { 512, 640, 512 };
static const int32_t chan_threshold[NP_COUNT] = { 8, 8, 64 };

int32_t sp_tune_channels(const sp_tune_topo *t, sp_algo a, sp_proto p, uint64_t bytes)
{
  int32_t nc = channels_of(t);
  if ((a != SP_ALGO_RING && a != SP_ALGO_TREE) || p == SP_PROTO_AUTO || (unsigned)p >= SP_PROTO_COUNT)
    return nc;
  int np = np_of(p);
  uint64_t per = (uint64_t)chan_threads[np] * (uint64_t)chan_threshold[np];
  if (a == SP_ALGO_RING && np == NP_LL)
    per *= (uint64_t)MAX(t->nranks, 1);
  while (nc >= 2 && bytes < (uint64_t)nc * per)
    nc--;
  return nc;
}

double sp_tune_nvls_fill_s(const sp_tune_topo *t, sp_coll coll, uint64_t bytes)
{
  int32_t n = t->nranks;
  if (n < 2 || t->nnodes > 1 || t->bw_nvl <= 0 || (unsigned)t->arch >= SP_TUNE_ARCH_COUNT)
    return 0.0;
  int stages = 0;
  if (coll == SP_COLL_ALL_REDUCE)
    stages = 3;
  else if (coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER)
    stages = 2;
  else
    return 0.0;
  /* calcCollChunking for NVLS: each threshold is tested with the chunk as the one before
   * left it */
  uint64_t ops = (uint64_t)nvls_channels[t->arch] * (uint64_t)MIN(n, NVLS_MAX_ARITY);
  uint64_t chunk = MIN(NVLS_CHUNK_BYTES, NVLS_STEP_BYTES);
  if (bytes < 64 * ops * chunk && chunk > 65536)
    chunk = 65536;
  if (bytes < 8 * ops * chunk && chunk > 32768)
    chunk = 32768;
  if (bytes < 2 * ops * chunk && chunk > 16384)
    chunk = 16384;
  uint64_t loop = MIN(bytes, ops * chunk);
  /* the NVLS rate per byte of NCCL's nBytes: all-reduce S / (e B) (see sp_tune_cost_of);
   * all-gather and reduce-scatter move (n-1)/n of it */
  double per_byte = 1.0 / (sp_tune_nvls_efficiency(t->arch) * t->bw_nvl * 1e9);
  if (coll != SP_COLL_ALL_REDUCE)
    per_byte *= (double)(n - 1) / n;
  return (stages - 1) * (double)loop * per_byte;
}

gboolean sp_tune_nvls_supported(sp_coll coll, sp_redop op, sp_dtype dtype)
{
  if (coll == SP_COLL_ALL_GATHER)
    return TRUE;
  switch (dtype) {
  case SP_I32:
  case SP_I64:
  case SP_F16:
  case SP_BF16: return op == SP_RED_SUM || op == SP_RED_MAX || op == SP_RED_MIN;
  case SP_F32: return op == SP_RED_SUM;
  default: return FALSE;
  }
}

static gboolean p2p(sp_coll c)
{
  return c == SP_COLL_ALL_TO_ALL || c == SP_COLL_SEND_RECV;
}

/* The algorithms whose reduction a switch does (NVLink SHARP, SHARP): they need an
 * operator and type the switch reduces (nvls_ok). */
static gboolean switch_reduces(sp_algo a)
{
  return a == SP_ALGO_NVLS || a == SP_ALGO_NVLS_TREE || a == SP_ALGO_COLLNET_DIRECT ||
         a == SP_ALGO_COLLNET_CHAIN;
}

gboolean sp_tune_choose(const sp_tune_topo *t, sp_coll coll, uint64_t bytes, gboolean nvls_ok,
                        sp_algo algo, sp_proto proto, sp_algo *algo_out, sp_proto *proto_out,
                        double *time_us, GError **err)
{
  const char *cn = sp_coll_name(coll);
  if (time_us)
    *time_us = -1;
  if (algo == SP_ALGO_PAT && proto != SP_PROTO_AUTO && proto != SP_PROTO_SIMPLE) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s: pat runs the Simple protocol only (NCCL), not %s: use --proto simple or auto",
                cn, sp_proto_name(proto));
    return FALSE;
  }
  if (algo == SP_ALGO_NVLS && proto != SP_PROTO_AUTO && proto != SP_PROTO_SIMPLE) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s: nvls runs the Simple protocol only (NCCL), not %s: use --proto simple or auto",
                cn, sp_proto_name(proto));
    return FALSE;
  }
  gboolean hier = algo == SP_ALGO_NVLS_TREE || algo == SP_ALGO_COLLNET_DIRECT ||
                  algo == SP_ALGO_COLLNET_CHAIN;
  if (hier && proto != SP_PROTO_AUTO && proto != SP_PROTO_SIMPLE) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s: %s runs the Simple protocol only (NCCL), not %s: use --proto simple or auto",
                cn, sp_algo_name(algo), sp_proto_name(proto));
    return FALSE;
  }
  if (hier && coll != SP_COLL_ALL_REDUCE) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no %s algorithm (spsim runs it for all-reduce only): use ring, tree, "
                "direct, nvls, pat or auto", cn, sp_algo_name(algo));
    return FALSE;
  }
  if (algo == SP_ALGO_NVLS && coll != SP_COLL_ALL_REDUCE && coll != SP_COLL_ALL_GATHER &&
      coll != SP_COLL_REDUCE_SCATTER) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no nvls algorithm (NVLink SHARP runs all-reduce, all-gather and "
                "reduce-scatter): use ring, tree, direct or auto", cn);
    return FALSE;
  }
  if (p2p(coll) || t->nranks <= 1) {
    *algo_out = algo == SP_ALGO_AUTO ? (p2p(coll) ? SP_ALGO_DIRECT : SP_ALGO_RING) : algo;
    *proto_out = proto != SP_PROTO_AUTO ? proto
                 : p2p(coll) && bytes <= SP_TUNE_P2P_LL_BYTES ? SP_PROTO_LL : SP_PROTO_SIMPLE;
    return TRUE;
  }
  sp_tune_table tab;
  sp_tune_model(t, coll, &tab);
  if (algo == SP_ALGO_NVLS) {
    if (tab.bw[SP_ALGO_NVLS][SP_PROTO_SIMPLE] <= 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "%s: nvls needs NVLink SHARP (the platform property nvls=1) and a group on one "
                  "node (NCCL runs NVLS across nodes only with CollNet); this group of %d ranks "
                  "spans %d node%s%s",
                  cn, t->nranks, t->nnodes, t->nnodes == 1 ? "" : "s",
                  t->nvls ? "" : " of a platform without nvls");
      return FALSE;
    }
    if (!nvls_ok) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "%s: the NVSwitch reduces sum, max and min of f16, bf16, i32 and i64, and sum "
                  "of f32 only (NCCL's ncclNvlsSupported): use another algorithm", cn);
      return FALSE;
    }
  }
  if (hier && tab.bw[algo][SP_PROTO_SIMPLE] <= 0) {
    int32_t ppn = t->nranks / MAX(t->nnodes, 1);
    if (algo == SP_ALGO_NVLS_TREE)
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "%s: nvls-tree needs NVLink SHARP (the platform property nvls=1) and a group "
                  "of at least 2 GPUs on each of 2 or more nodes; this group of %d ranks has %d "
                  "per node on %d node%s%s: use nvls on one node, or ring, tree or auto",
                  cn, t->nranks, ppn, t->nnodes, t->nnodes == 1 ? "" : "s",
                  t->nvls ? "" : " of a platform without nvls");
    else
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "%s: %s needs switches that reduce (SHARP: the platform property sharp=1, "
                  "written by 'spsim platform dgx --sharp') and a group across 2 or more nodes; "
                  "this group of %d ranks spans %d node%s%s: use ring, tree or auto",
                  cn, sp_algo_name(algo), t->nranks, t->nnodes, t->nnodes == 1 ? "" : "s",
                  t->sharp ? "" : " of a platform without sharp");
    return FALSE;
  }
  if (hier && !nvls_ok) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s: the switches reduce sum, max and min of f16, bf16, i32 and i64, and sum of "
                "f32 only (NCCL's ncclNvlsSupported): use ring, tree or auto", cn);
    return FALSE;
  }
  if (algo == SP_ALGO_AUTO && proto == SP_PROTO_AUTO && t->tuner != SP_TUNER_NONE) {
    /* the plugin marks its pair in NCCL's cost table; NCCL skips the pairs it does not
     * offer (region_get_coll_info_internal_v3), so the first offered one runs */
    sp_algo pa[8];
    sp_proto pp[8];
    int32_t k = sp_tuner_pairs(t->tuner, coll, bytes, t->nranks, t->nnodes, pa, pp, 8);
    for (int32_t i = 0; i < k; i++) {
      if (switch_reduces(pa[i]) && !nvls_ok)
        continue;
      double tt = sp_tune_time_us(t, &tab, coll, pa[i], pp[i], bytes);
      if (tt < 0)
        continue;
      *algo_out = pa[i];
      *proto_out = pp[i];
      if (time_us)
        *time_us = tt;
      return TRUE;
    }
  }
  double best = -1;
  sp_algo ba = SP_ALGO_AUTO;
  sp_proto bp = SP_PROTO_AUTO;
  for (int na = 0; na < NA_COUNT; na++) {
    sp_algo a = algo_of(na);
    if (algo != SP_ALGO_AUTO && algo != a)
      continue;
    if (switch_reduces(a) && !nvls_ok)
      continue;
    for (int np = 0; np < NP_COUNT; np++) {
      sp_proto p = proto_of(np);
      if (proto != SP_PROTO_AUTO && proto != p)
        continue;
      double tt = sp_tune_time_us(t, &tab, coll, a, p, bytes);
      if (tt >= 0 && (best < 0 || tt < best)) {
        best = tt;
        ba = a;
        bp = p;
      }
    }
  }
  if (best < 0) {
    /* no row: an algorithm the model does not have for this collective (DIRECT;
     * TREE for all but all-reduce), run as forced with Simple unless told */
    *algo_out = algo == SP_ALGO_AUTO ? SP_ALGO_RING : algo;
    *proto_out = proto == SP_PROTO_AUTO ? SP_PROTO_SIMPLE : proto;
    return TRUE;
  }
  *algo_out = ba;
  *proto_out = bp;
  if (time_us)
    *time_us = best;
  return TRUE;
}

/* NCCL's collectives inside one NVLink domain move at its effective NVLink bandwidth, its
 * per-link figure times the links, not at a platform's line rate (NCCL's maintainer:
 * "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an effective
 * NVLink bandwidth of 370GB/s", nvidia/nccl-tests issue #212): the factor on their wire
 * bytes, 1 where the platform is already below that figure or spans nodes. */
static double nvlink_wire(const sp_tune_topo *t)
{
  return t->nnodes <= 1 && t->bw_nvl > 0 ? MAX(1.0, t->bw_nvl / nccl_nvlink_gpu_bw[t->arch]) : 1.0;
}

/* A ring all-reduce, all-gather or reduce-scatter inside one NVLink domain runs as NCCL
 * runs it there: at the rate NCCL's model gives its protocol on the effective NVLink
 * bandwidth (nvlink_wire), and with its chunks pipelined: each channel keeps NCCL_STEPS
 * = 8 slots in flight (src/include/device.h), so a step's hop latency overlaps the
 * transfers of the slots before it and the ring pays its steps' latency once, as NCCL's
 * model charges it (ncclTopoTuneModel: nsteps x hwLat per collective, 2(n-1) steps for
 * all-reduce, n-1 for the others), where spsim's lock-step chunk rounds would pay it once
 * per round. Across nodes the calibrated rings keep their rounds (docs/calibration.md). */
static gboolean ring_in_domain(const sp_tune_topo *t, sp_coll coll, sp_algo a)
{
  return a == SP_ALGO_RING && t->nnodes <= 1 && t->bw_nvl > 0 && t->nranks >= 2 &&
         (coll == SP_COLL_ALL_REDUCE || coll == SP_COLL_ALL_GATHER || coll == SP_COLL_REDUCE_SCATTER);
}

static void ring_on_nvlink(const sp_tune_topo *t, sp_coll coll, sp_algo a, sp_tune_cost *out)
{
  if (!ring_in_domain(t, coll, a))
    return;
  out->wire *= nvlink_wire(t);
  out->fill_steps = nsteps_of(coll, t->nranks);
}

void sp_tune_cost_of(const sp_tune_topo *t, sp_coll coll, sp_algo a, sp_proto p, sp_tune_cost *out)
{
  *out = SP_TUNE_COST_NEUTRAL;
  int32_t n = t->nranks;
  if (n <= 1)
    return;
  double ppn = (double)n / (t->nnodes < 1 ? 1 : t->nnodes);
  if (a == SP_ALGO_NVLS_TREE || a == SP_ALGO_COLLNET_DIRECT || a == SP_ALGO_COLLNET_CHAIN) {
    int na = a == SP_ALGO_NVLS_TREE ? NA_NVLS_TREE : a == SP_ALGO_COLLNET_DIRECT ? NA_COLLNET_DIRECT
                                                                               : NA_COLLNET_CHAIN;
    double N = t->nnodes < 1 ? 1 : t->nnodes;
    /* lower_hier.c: NVLS-tree's exchanges inside a node move 2(B-1)/B of the segment
     * data per GPU where NVLink SHARP moves it once each way at sp_tune_nvls_efficiency */
    if (a == SP_ALGO_NVLS_TREE && ppn > 1)
      out->wire_intra = ppn / (2.0 * (ppn - 1) * sp_tune_nvls_efficiency(t->arch));
    /* CollNet's exchange across nodes moves 2(N-1)/N of a chunk each way where the switch
     * takes it once and returns it once, at the reduction's rate where below the NIC's */
    if (a != SP_ALGO_NVLS_TREE && N > 1) {
      out->wire_inter = N / (2.0 * (N - 1));
      if (t->bw_sharp > 0 && t->bw_nic > t->bw_sharp)
        out->wire_inter *= t->bw_nic / t->bw_sharp;
    }
    /* NCCL's latency of the operation through the switches (hwLat of NVLS-tree on
     * NVLink, of CollNet on the network) in place of the base latency */
    int hw = a == SP_ALGO_NVLS_TREE ? HW_NVLINK : HW_NET;
    out->coll_lat = nccl.hw_lat[hw][na][NP_SIMPLE] / nccl.base_lat[NA_RING][NP_SIMPLE];
    return;
  }
  if (a == SP_ALGO_NVLS) {
    double e = sp_tune_nvls_efficiency(t->arch);
    /* lowered as DIRECT: all-reduce moves 2(n-1)/n S per GPU and direction in two
     * steps, the switch S; all-gather and reduce-scatter (n-1)/n S either way */
    out->wire = coll == SP_COLL_ALL_REDUCE ? (double)n / (2.0 * (n - 1) * e) : 1.0 / e;
    /* NCCL's NVLS latency (hwLat, one hop through the switch) in place of the base
     * latency that coll_latency stands for (ring Simple) */
    out->coll_lat = nccl.hw_lat[HW_NVLINK][NA_NVLS][NP_SIMPLE] / nccl.base_lat[NA_RING][NP_SIMPLE];
    return;
  }
  if (p == SP_PROTO_SIMPLE || p == SP_PROTO_AUTO) {
    if ((coll == SP_COLL_ALL_TO_ALL || coll == SP_COLL_SEND_RECV) && t->nnodes <= 1 && t->bw_nvl > 0)
      out->wire = nvlink_wire(t);
    if (coll == SP_COLL_ALL_TO_ALL && t->nnodes > 1)
      out->wire_inter = 1.0 / A2A_NET_EFFICIENCY;
    ring_on_nvlink(t, coll, a, out);
    return;
  }
  int np = np_of(p);
  /* NCCL's tree constants for spsim's TREE all-reduce, its ring's for the rest
   * (rings, chains, point-to-point) */
  int na = a == SP_ALGO_TREE && coll == SP_COLL_ALL_REDUCE ? NA_TREE : NA_RING;
  int net_a = ppn == 1 ? NA_TREE : na; /* NCCL: one GPU per node exposes the tree's */
  out->coll_lat = nccl.base_lat[na][np] / nccl.base_lat[na][NP_SIMPLE];
  out->lat_intra = nccl.hw_lat[HW_NVLINK][na][np] / nccl.hw_lat[HW_NVLINK][na][NP_SIMPLE];
  if (a == SP_ALGO_RING && np == NP_LL && ll_ring_step_ratio[t->arch] > 0) /* ring steps */
    out->lat_intra = ll_ring_step_ratio[t->arch];
  out->lat_inter = nccl.hw_lat[HW_NET][net_a][np] / nccl.hw_lat[HW_NET][net_a][NP_SIMPLE];
  /* bandwidth fraction: the model's protocol bandwidth over Simple's */
  double f;
  if (na == NA_TREE) {
    f = nccl_tree_busbw(t, np) / nccl_tree_busbw(t, NP_SIMPLE);
  } else if (coll == SP_COLL_ALL_TO_ALL || coll == SP_COLL_SEND_RECV || a == SP_ALGO_DIRECT ||
             a == SP_ALGO_TREE) {
    f = np == NP_LL ? 0.5 : 0.92; /* the protocols' own fractions, without ring caps */
  } else {
    /* a ring in one NVLink domain: the fraction NCCL's model gives the protocol on the
     * effective NVLink bandwidth (LL's cap is absolute), on top of nvlink_wire */
    sp_tune_topo tm = *t;
    if (ring_in_domain(t, coll, a))
      tm.bw_nvl = MIN(t->bw_nvl, nccl_nvlink_gpu_bw[t->arch]);
    sp_tune_table tab;
    sp_tune_model(&tm, coll, &tab);
    double s = tab.bw[SP_ALGO_RING][SP_PROTO_SIMPLE];
    f = s > 0 ? tab.bw[SP_ALGO_RING][p] / s : (np == NP_LL ? 0.5 : 0.92);
  }
  if (f > 0)
    out->wire = 1.0 / f;
  ring_on_nvlink(t, coll, a, out);
  /* point-to-point on one node: at NCCL's effective NVLink bandwidth too */
  if (coll == SP_COLL_ALL_TO_ALL || coll == SP_COLL_SEND_RECV)
    out->wire *= nvlink_wire(t);
}
