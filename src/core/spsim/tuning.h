/**
 * @file tuning.h
 * @brief NCCL's tuning model: which algorithm and protocol a collective runs with,
 *        and what the protocol costs, from the platform's facts.
 *
 * NCCL picks, for every call, the (algorithm, protocol) pair of least predicted
 * time t = latency + bytes / bandwidth, from a table its tuning code fills once
 * per communicator from the topology (NVIDIA/nccl v2.30.7-1,
 * src/graph/tuning.cc: ncclTunerConstantsDefaults, ncclTopoTuneModel,
 * ncclTopoGetAlgoTime; src/enqueue.cc: updateCollCostTable, topoGetAlgoInfo;
 * the same constants since v2.23). This module is that table and that choice,
 * for the algorithms spsim lowers, with every constant of NCCL's source in one
 * table (tuning.c). Inputs are the platform's facts (#sp_tune_topo: ranks,
 * nodes, the GPU generation, per-GPU NVLink and NIC bandwidths, NVLink SHARP);
 * the engine fills them (sp_sim_coll_resolve, src/sim/sim.h).
 *
 * ## The model (bandwidths in GB/s = 1e9 B/s, latencies in us)
 * NCCL's graphs are summarised by their bus bandwidth nChannels x bw: spsim takes
 * the platform's per-GPU NVLink bandwidth B_nvl on one node, and min(B_nvl, ppn x
 * B_nic) across nodes (ppn GPUs per node, each with its NIC B_nic; the ring then
 * leaves every node through all its NICs), with nChannels = #SP_TUNE_CHANNELS.
 * For each algorithm a and protocol p (NCCL's ncclTopoTuneModel, line by line):
 * - busBw = nChannels x bw; ring LL: min(llMaxBw, busBw / 2); ring LL128:
 *   min(0.92 busBw, nChannels x perChMaxRingLL128Bw), where across nodes nChannels is
 *   the ring graph's, one channel per NIC of a node (NCCL's graph search: "nChannels 4"
 *   on nodes of 4 NICs, nvidia/nccl issue #601), so one per GPU of spsim's nodes, as
 *   spsim's ring runs them (8 x 36.7 = 293.6 GB/s on 8 x H100 nodes); tree all-reduce: min(0.92
 *   busBw, nChannels x perChMaxTreeBw), then LL: min(busBw / 3.8, llMaxBw), LL128:
 *   min(busBw x (7/9 on one node, else 120/128), nChannels x perChMaxTreeLL128Bw);
 *   NVLS: per channel min(bw x nvlsEfficiency x (nChannels-1)/nChannels x (2 for
 *   all-reduce, else (ppn-1)/ppn), bw).
 * - algorithm bandwidth = busBw x nranks / nsteps (ring, NVLS all-reduce) or x 0.5
 *   (tree), nsteps = 2(n-1) all-reduce, n-1 all-gather / reduce-scatter, n others;
 *   NVLS all-gather / reduce-scatter keep busBw.
 * - latency = baseLat[a][p] plus, ring all-reduce / all-gather / reduce-scatter:
 *   (nsteps - nInter) x max(hwLat[intra][ring][p], netOverhead) + nInter x
 *   hwLat[NET][ring][p] (nInter = 2(nodes-1) all-reduce, nodes-1 otherwise;
 *   netOverhead = 1 us (2 on AMD hosts), x3 for Simple, on several nodes); ring
 *   broadcast / reduce: one hwLat (NCCL's sameChannels rings of NVSwitch nodes);
 *   tree all-reduce: 2((ppn-1) hwLat[intra][tree][p] + log2(nodes) x
 *   hwLat[NET][tree][p]); NVLS: hwLat[NVLink][NVLS][Simple] (+ the network's on
 *   several nodes). With one GPU per node the network latency is the tree's.
 * - time = latency (x1.4 for ring Simple all-reduce across nodes when bytes /
 *   (nChannels x nranks) >= 64: NCCL's "plateau") + bytes / (1000 x bandwidth) us,
 *   the tree all-reduce's bandwidth times NCCL's treeCorrectionFactor[protocol]
 *   [log2(bytes / 64)] below 2^23 x 64 B (ncclTopoGetAlgoTime).
 * Availability: broadcast and reduce have RING only; all-gather and
 * reduce-scatter RING and NVLS; NVLS runs Simple only, needs the platform's
 * NVLink SHARP on one node (NCCL disables it across nodes without CollNet), and
 * for reductions sum, max or min on f32, f16, bf16 or i32 (ncclNvlsSupported).
 * all-to-all and send-recv are NCCL's point-to-point calls: DIRECT, LL when a
 * peer's message is at most #SP_TUNE_P2P_LL_BYTES (NCCL_P2P_LL_THRESHOLD), else
 * Simple.
 *
 * ## Where spsim differs from NCCL (stated, not hidden)
 * spsim's TREE all-reduce is NCCL's double binary tree (spsim/dbtree.h,
 * lower/lower_dbtree.c), so its row is NCCL's: bus bandwidth as above, algorithm
 * bandwidth half of it, close to the closed form of spsim's schedule on many nodes
 * (a node inner in one tree and a leaf in the other sends and receives 2 S over its
 * NICs, a GPU up to 2 S over NVLink: algorithm bandwidth about min(B_nvl, ppn x
 * B_nic) / 2; on 2 nodes the network carries half of that). AUTO therefore
 * picks TREE where NCCL's model does (small and medium all-reduces across nodes,
 * large ones on many nodes). PAT is modelled (all-gather and reduce-scatter, one GPU
 * per node, Simple), and so are NVLS-tree and CollNet for all-reduce across nodes
 * (Simple): NVLS-tree per channel min(bwIntra x nvlsEfficiency x (nc-1)/nc x 2, bwInter x
 * (2 on two nodes), perChMaxNVLSTreeBw), algorithm bandwidth x n / nsteps, latency
 * hwLat[NVLink][NVLS-tree] + 2 log2(nodes) hwLat[NET][NVLS-tree], where bwIntra = B_nvl /
 * nc and bwInter = ppn x B_nic / nc, with the platform's NVLink SHARP and two GPUs of the
 * group per node; CollNet (the platform's `sharp`) bus bandwidth min(B_nvl, ppn x B_nic)
 * (x sharp_bw / B_nic where the switches reduce slower, x 0.85 for Direct from Hopper on;
 * NCCL's GPU/NIC factor is 1 with one NIC per GPU), algorithm bandwidth half of it,
 * latency Direct 2 (min(1, ppn-1) hwLat[NVLink] + 0.4 (ppn-1)) + hwLat[NET], Chain
 * 2 (ppn-1) hwLat[NVLink] + hwLat[NET]. Their programs are lower/lower_hier.c's.
 *
 * ## Protocols as cost (sp_tune_cost_of)
 * The platform's constants are Simple's: `coll_latency` is NCCL's Simple base
 * latency (8.4 us) and link latencies the hop latencies of spsim's Simple steps.
 * Protocol p of algorithm a scales them by NCCL's own ratios: coll_latency by
 * baseLat[a][p] / baseLat[a][Simple], latencies of links inside a node by
 * hwLat[NVLink][a][p] / hwLat[NVLink][a][Simple], of links between nodes by
 * hwLat[NET][a][p] / hwLat[NET][a][Simple]; and every message moves bytes / f on
 * the wire, f = bandwidth(a, p) / bandwidth(a, Simple) of the table (ring LL on
 * one H100 node: min(141, B/2) / B). A message of S bytes over a route of
 * latency L and bandwidth B then takes L x ratio + S / (B x f). NVLS (Simple):
 * each GPU sends its data to the switch once and receives the result once at
 * sp_tune_nvls_efficiency() of its NVLink bandwidth, so all-reduce time = latency + S /
 * (B x e), all-gather / reduce-scatter (n-1)/n S / (B x e); its latency is
 * NCCL's NVLS latency (hwLat 25 us) in place of the collective's base latency.
 * Point-to-point (all-to-all, send-recv) on one node moves at NCCL's effective
 * NVLink bandwidth, links x NCCL's per-link figure (H100: 18 x 20.6 = 370.8 GB/s,
 * A100 12 x 20, B200 18 x 40.1; src/graph/topo.h), where the platform's is higher:
 * wire x B_nvl / that (8 x H100 at 450 GB/s: x 1.2136). NVLS-tree: messages inside a
 * node move bytes x ppn / (2(ppn-1) e) (NVLink SHARP, as NVLS all-reduce), those between
 * nodes their bytes; CollNet: messages between nodes move bytes x N / (2(N-1)) (the
 * switches take a chunk once and return it once, where lower_hier.c's exchange among N
 * nodes moves 2(N-1)/N of it), x B_nic / sharp_bw where the switches reduce slower; the
 * latency of the switches' operation (NCCL's hwLat: NVLS-tree on NVLink 25 us, CollNet
 * Direct 31 and Chain 30 us on the network) in place of the base latency.
 */
#ifndef SPSIM_TUNING_H
#define SPSIM_TUNING_H

#include <glib.h>
#include <stdint.h>
#include "spsim/coll.h"
#include "spsim/tuner_plugin.h"

G_BEGIN_DECLS

/** GPU generations of NCCL's tables (compute capability 7.x, 8.x, 9.x, 10.x). */
typedef enum {
  SP_TUNE_VOLTA = 0,
  SP_TUNE_AMPERE,
  SP_TUNE_HOPPER,
  SP_TUNE_BLACKWELL,
  SP_TUNE_ARCH_COUNT
} sp_tune_arch;

/** NCCL's channels of a ring or tree on DGX-class nodes (its logs show 16 to 32). */
#define SP_TUNE_CHANNELS 16
/** NCCL_P2P_LL_THRESHOLD default (src/enqueue.cc): LL for point-to-point messages up to this. */
#define SP_TUNE_P2P_LL_BYTES 16384u
/**
 * NVLink SHARP all-reduce: algorithm bandwidth per GPU as a fraction of its NVLink
 * line rate. Hopper (and earlier, which has no NVLS): NCCL's maintainer: "On 8 GPUs, you
 * should reach a peak busBw of ~480GB/s (algbw ~275GB/s)" on H100, whose NVLink line
 * rate is 450 GB/s per direction (NVIDIA/nccl-tests issue #212); 275 / 450.
 */
#define SP_NVLS_EFFICIENCY (275.0 / 450.0)
/**
 * Blackwell: all_reduce_perf on a full GB200 NVL72 rack (72 GPUs in one NVLink domain,
 * NVLink 5 at 900 GB/s per direction) takes 10,094 us at 4 GiB and 20,299 us at 8 GiB
 * (out of place; busbw 839 and 835 GB/s, above any ring on that NVLink; coreweave/
 * nccl-tests pull request #43, "Add a GB200 NVL72 example", February 2025). Less the
 * NVLS latency (30.2 us) and the pipeline's fill and drain (sp_tune_nvls_fill_s: two
 * loops of 48 and 96 MiB), the steady state moves 436.8 and 433.7 GB/s of input; 435 /
 * 900. NCCL's own tuning model also rates Blackwell's NVLS lower than Hopper's
 * (nvlsEfficiency 0.74 against 0.85).
 */
#define SP_NVLS_EFFICIENCY_BLACKWELL (435.0 / 900.0)

/** #SP_NVLS_EFFICIENCY or #SP_NVLS_EFFICIENCY_BLACKWELL, by GPU generation. */
double sp_tune_nvls_efficiency(sp_tune_arch arch);

/** What the tuning model knows of the platform and the group. */
typedef struct {
  int32_t nranks;      /**< group size, >= 1 */
  int32_t nnodes;      /**< distinct nodes of the group, 1 .. nranks */
  sp_tune_arch arch;   /**< GPU generation (NCCL's per-generation constants) */
  gboolean cpu_amd;    /**< AMD hosts (DGX A100): NCCL's multi-node LL cap and network overhead */
  double bw_nvl;       /**< GB/s: a GPU's NVLink bandwidth per direction (its node's fabric) */
  double bw_nic;       /**< GB/s: a GPU's network bandwidth per direction (0: one node) */
  int32_t channels;    /**< NCCL's channels (0: #SP_TUNE_CHANNELS) */
  gboolean nvls;       /**< the NVSwitch can reduce (platform property nvls = 1) */
  gboolean pat_nodes;  /**< every node of the platform holds one GPU: spsim's condition for
                            PAT, stricter than NCCL's (one GPU per node of the communicator,
                            which a data-parallel group across 8-GPU nodes also meets) */
  gboolean sharp;      /**< the network switches reduce (SHARP; platform property sharp = 1):
                            NCCL's CollNet */
  double bw_sharp;     /**< GB/s: the switches' reduction bandwidth per port and direction
                            (platform property sharp_bw; 0: the NIC's line rate) */
  gboolean no_hier;    /**< leave NVLS-tree and CollNet out of the choice (the engine
                            copies sp_coll_spec.no_hier) */
  sp_tuner tuner;      /**< the cluster's NCCL tuner plugin (platform property nccl_tuner;
                            SP_TUNER_NONE: NCCL's model alone) */
} sp_tune_topo;

/** The model's table for one collective: NCCL's comm->latencies / bandwidths. */
typedef struct {
  double lat_us[SP_ALGO_COUNT][SP_PROTO_COUNT]; /**< [algo][proto], us */
  double bw[SP_ALGO_COUNT][SP_PROTO_COUNT];     /**< GB/s; 0: not available */
} sp_tune_table;

/** What a protocol (and NVLS) costs the engine's pricing (see the file comment). */
typedef struct {
  double wire;       /**< simulated bytes per payload byte (1 / bandwidth fraction) */
  double lat_intra;  /**< factor on the latency of links inside a node */
  double lat_inter;  /**< factor on the latency of links between nodes */
  double coll_lat;   /**< factor on the platform's coll_latency */
  double wire_intra; /**< further factor on the wire bytes of messages inside a node */
  double wire_inter; /**< further factor on the wire bytes of messages between nodes */
  double fill_s;     /**< seconds of the pipeline's fill and drain that its steady state
                          does not cover, charged once per collective beside coll_latency
                          (NVLS on one node: sp_tune_nvls_fill_s) */
  int32_t fill_steps; /**< ring steps whose hop latency (times lat_intra) is paid once, as
                           the fill of NCCL's pipelined ring, instead of once per chunk
                           round (a ring on one NVLink domain: sp_tune_cost_of); the engine
                           moves it into fill_s and sets lat_intra to 0. 0: per round */
} sp_tune_cost;

/** The neutral cost (Simple on RING, TREE, DIRECT across nodes). */
#define SP_TUNE_COST_NEUTRAL ((sp_tune_cost){ 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0 })

/** @return "volta", "ampere", "hopper", "blackwell". */
const char *sp_tune_arch_name(sp_tune_arch a);
/** The generation of a GPU model name ("H100-SXM5-80GB" -> Hopper; unknown: Hopper). */
sp_tune_arch sp_tune_arch_of_model(const char *model);

/** Fill @p out for @p coll on @p t (sp_tune_topo as described). */
void sp_tune_model(const sp_tune_topo *t, sp_coll coll, sp_tune_table *out);

/**
 * NCCL's ncclTopoGetAlgoTime: predicted microseconds of @p coll with (@p a, @p p)
 * for @p bytes (NCCL's nBytes: count x element size; all-gather and
 * reduce-scatter: the whole gathered buffer), or -1 when the pair is not
 * available.
 */
double sp_tune_time_us(const sp_tune_topo *t, const sp_tune_table *tab, sp_coll coll, sp_algo a,
                       sp_proto p, uint64_t bytes);

/**
 * The (algorithm, protocol) of least predicted time, as NCCL's topoGetAlgoInfo
 * picks it (ties: the first of tree, ring, NVLS and of LL, LL128, Simple).
 * @p algo / @p proto other than AUTO are kept (NCCL_ALGO / NCCL_PROTO), the other
 * is chosen for them. With both AUTO and a tuner plugin (sp_tune_topo.tuner), the
 * plugin's pair is taken where it names one that the table offers
 * (spsim/tuner_plugin.h), as NCCL runs the pair a plugin marks. @p nvls_ok: the reduction may run on the switch (operator
 * and type, sp_tune_nvls_supported). all-to-all and send-recv: DIRECT, LL up to
 * #SP_TUNE_P2P_LL_BYTES per peer (@p bytes is one peer's message), else Simple.
 * @p time_us (may be NULL) receives the prediction (-1 for point-to-point and for
 * pairs the model has no row for, whose protocol AUTO resolves to Simple).
 * Fails with SP_ERROR_UNSUPPORTED when the forced pair cannot run (NVLS with LL,
 * NVLS without the switch or across nodes, an algorithm the collective lacks).
 */
gboolean sp_tune_choose(const sp_tune_topo *t, sp_coll coll, uint64_t bytes, gboolean nvls_ok,
                        sp_algo algo, sp_proto proto, sp_algo *algo_out, sp_proto *proto_out,
                        double *time_us, GError **err);

/**
 * NCCL's channels for a ring or tree collective of @p bytes (NCCL's nBytes, as for
 * sp_tune_time_us) with protocol @p p: topoGetAlgoInfo starts from the
 * communicator's channels (sp_tune_topo.channels, else #SP_TUNE_CHANNELS) and drops
 * one while bytes < channels x threads x per-thread threshold (threads: 512 for LL
 * and Simple, 640 for LL128; threshold: 64 B Simple, 8 B LL128, 8 B x nranks for
 * ring LL), down to 1. Other algorithms, or @p p AUTO: the communicator's channels.
 */
int32_t sp_tune_channels(const sp_tune_topo *t, sp_algo a, sp_proto p, uint64_t bytes);

/** NCCL's ncclNvlsSupported: sum, max or min on f32, f16, bf16 or i32 (all-gather: any).
 *  The same test stands for the switches' reduction of CollNet (SHARP reduces sum, max
 *  and min). */
gboolean sp_tune_nvls_supported(sp_coll coll, sp_redop op, sp_dtype dtype);

/**
 * The cost attributes of running @p coll with (@p a, @p p) resolved (not AUTO),
 * for the engine's pricing. Neutral (#SP_TUNE_COST_NEUTRAL) for Simple on TREE and
 * DIRECT, and on RING across nodes. A ring all-reduce, all-gather or reduce-scatter
 * inside one NVLink domain runs as NCCL runs it there: its bytes at NCCL's effective
 * NVLink bandwidth (wire x B_nvl / its per-link figure x links, where the platform is
 * faster) and its chunk rounds pipelined, so that the hop latency of its 2(n-1) or n-1
 * steps is paid once (fill_steps), as in NCCL's own ring latency (nsteps x hwLat).
 */
void sp_tune_cost_of(const sp_tune_topo *t, sp_coll coll, sp_algo a, sp_proto p, sp_tune_cost *out);

/**
 * The fill and drain of NCCL's NVLS collective on one node, in seconds, for @p bytes
 * (NCCL's nBytes). Each channel runs it as a pipeline of warp groups over loops of
 * nHeads chunks: all-reduce scatters its input to the heads' buffers, reduces and
 * multicasts through the switch and gathers the result (three stages); all-gather and
 * reduce-scatter have two. The steady state moves one loop per stage time; the first
 * loop's way in and the last one's way out add (stages - 1) loops beyond it. A loop is
 * nvlsChannels x nHeads x chunk bytes (nvlsChannels 16 on Hopper, 24 on Blackwell
 * inside one NVLink domain; nHeads = min(32, GPUs); the chunk from 128 KiB down to
 * 16 KiB as the message shrinks, NCCL's calcCollChunking), moved at the NVLS rate
 * (sp_tune_nvls_efficiency of t->bw_nvl). 0 where @p t has no NVLink bandwidth or
 * spans nodes.
 */
double sp_tune_nvls_fill_s(const sp_tune_topo *t, sp_coll coll, uint64_t bytes);

G_END_DECLS

#endif
