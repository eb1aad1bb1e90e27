/**
 * @file platform_gen.h
 * @brief Generator of spsim's calibrated SimGrid platforms (DGX-style GPU nodes
 *        in a fat tree). It only writes text (SimGrid platform XML, version 4.1)
 *        and needs no SimGrid call, so the CLI and the tests can use it anywhere.
 *
 * Layout of a generated platform (see docs/calibration.md for every constant).
 * Routing is computed by SimGrid from a few links per GPU (no table of routes
 * between all pairs), and every link is declared in the top zone, before the
 * zone that uses it (SimGrid 3.32 looks link names up from the top zone down):
 * - top zone "cluster" (routing DijkstraCache): a star of SUs around the zone
 *   "spine" (router "spine-gw"); FATPIPE link "spine" (spine hop latency). SU K
 *   -> spine: "suK-up" UP, "spine"; spine -> SU J: "suJ-up" DOWN, "suJ-leaf".
 * - zone "suK" (routing Floyd), one per #SP_PLATFORM_NODES_PER_SU nodes: a star
 *   of node zones around the zone "suK-leaf" (router "suK-gw", the SU's
 *   gateway). Node -> leaf: "nodeN-rails", "suK-leaf" (FATPIPE, leaf hop);
 *   leaf -> node: "nodeN-rails". SPLITDUPLEX "suK-up" (capacity = the SU's NICs'
 *   sum: full bisection).
 * - zone "nodeN" (routing Floyd): hosts "nodeN-gpuG", routers "nodeN-nvswitch",
 *   "nodeN-tx" (the node's exit) and "nodeN-rx" (its entry). Per GPU: SPLITDUPLEX
 *   "nodeN-nvlG" (its NVLink ports, GPU <-> NVSwitch) and "nodeN-nicG" (its own
 *   NIC, GPU -> tx UP, rx -> GPU DOWN); per node FATPIPE "nodeN-rails" (its NICs'
 *   sum, no latency: never a bottleneck, it exists because every zone route
 *   needs a link). Resulting routes: GPU a -> GPU b in a node: nvl a UP, nvl b
 *   DOWN. Across nodes of an SU: nic a UP, rails, leaf, rails, nic b DOWN.
 *   Across SUs: nic a UP, rails, leaf K, up K UP, spine, up J DOWN, leaf J,
 *   rails, nic b DOWN.
 * SU zones (sp_platform_opts.zones, automatic above #SP_PLATFORM_NODE_ZONES_MAX nodes):
 *   no node zones; zone "suK" (routing DijkstraCache) holds its nodes' hosts and
 *   routers and the router "suK-gw", with routes between neighbours only (GPU <->
 *   nvswitch: nvl; GPU -> tx: nic UP; rx -> GPU: nic DOWN; tx -> suK-gw: rails, leaf;
 *   suK-gw -> rx: rails). The route of fewest links is unique and is the node zones'
 *   route above, link for link.
 * NVLink domains (sp_platform_opts.nvlink_domain > gpus_per_node, GB200 NVL72): the
 * zone "nodeN" is a whole domain (its nodes' GPUs, one NVSwitch; property "node" = the
 * domain, "local_rank" = the GPU's index in it, top-zone "gpus_per_node" = the domain
 * size), so the engine and the what-if take the domain as the NVLink group. Shared
 * NICs (nics_per_node < gpus_per_node): GPU g of a zone routes through "nodeN-nic<g /
 * (gpus_per_node / nics_per_node)>"; rails, leaf and uplinks are the NICs' sums.
 * Three tiers (pod_sus > 0): pods "podP" of pod_sus SUs, each a DijkstraCache star of
 * its SUs around zone "podP-spine" (link podP-spine), and the top a star of pods
 * around zone "core" (link core); pod -> core: "podP-up" UP, "core"; core -> pod:
 * "podP-up" DOWN, "podP-spine".
 * Node indices are zero-padded to at least 3 digits so that the hosts' names sort
 * in rank order (node-major, then GPU; declaration order is the same). Every
 * host carries the properties "gpu" (model name), "gpu_mem" (bytes), "hbm_bw"
 * (bytes/s of HBM, informational), "node" (node index), "local_rank" (GPU
 * index in the node) and "coll_latency" (seconds charged once per collective
 * and rank by the engine: NCCL's base latency, see sim.h); with charge_local
 * also "mem_bw" (= hbm_bw), which makes
 * the engine charge local steps. The top zone carries "gpus_per_node", and "nvls"
 * = 1 for presets whose NVSwitches reduce (H100). Mixed clusters (sp_platform_opts.mix_count
 * > 0): each node's hosts, NVLink ports and NICs are its own preset's; uplinks carry the sum
 * of their nodes' NICs, FATPIPE levels the fastest NIC, switch latencies the slowest preset's;
 * nvls only when every preset has it. The network model is set in the file's <config>: CM02 with
 * unit factors and no TCP window bound, so an uncontended message of S bytes
 * takes exactly (sum of route latencies) + S / (bottleneck bandwidth).
 */
#ifndef SPSIM_PLATFORM_GEN_H
#define SPSIM_PLATFORM_GEN_H

#include <glib.h>
#include <stdint.h>
#include "spsim/tuner_plugin.h"

G_BEGIN_DECLS

/** Nodes per scalable unit (one leaf switch per rail per SU), as in DGX SuperPODs. */
#define SP_PLATFORM_NODES_PER_SU 32
/** Largest leaf-to-spine oversubscription the generator accepts. */
#define SP_PLATFORM_MAX_OVERSUBSCRIPTION 64.0
/** Largest node count the generator accepts. */
#define SP_PLATFORM_MAX_NODES 65536
/** Largest GPU count per node the generator accepts. */
#define SP_PLATFORM_MAX_GPUS_PER_NODE 64
/** Largest NVLink domain the generator accepts (NVLink Switch System: up to 576 GPUs,
 *  "NVIDIA Blackwell Architecture Technical Brief", NVLink section). */
#define SP_PLATFORM_MAX_NVLINK_DOMAIN 576

/** GPU presets (each brings its node's NVLink and NIC numbers). */
typedef enum {
  SP_GPU_H100 = 0, /**< DGX H100: H100 SXM5 80 GB, NVLink4, 8 x 400 Gb/s NDR NICs */
  SP_GPU_A100,     /**< DGX A100: A100 SXM4 80 GB, NVLink3, 8 x 200 Gb/s HDR NICs */
  SP_GPU_TOY,      /**< round numbers for tests (platforms/small.xml) */
  SP_GPU_H100_HBM2E, /**< Grand Teton H100: 96 GB HBM2e at 2.4 TB/s, NVLink4, 400 Gb/s per GPU */
  SP_GPU_B200,     /**< DGX B200: B200 180 GB HBM3e, NVLink5, 8 x 400 Gb/s NDR NICs */
  SP_GPU_GB200,    /**< DGX GB200 NVL72: compute trays of 4 GB200 GPUs, 72 in one NVLink domain */
  SP_GPU_H200,     /**< DGX H200: H200 SXM 141 GB HBM3e at 4.8 TB/s, NVLink4, 8 x 400 Gb/s NDR NICs */
  SP_GPU_COUNT
} sp_gpu_kind;

/** Calibrated constants of one preset (SI units: bytes/s, seconds, flop/s, bytes). */
typedef struct {
  const char *key;      /**< "h100", "a100", "toy" */
  const char *model;    /**< value of the "gpu" host property */
  double flops;         /**< host speed: dense BF16 peak */
  double gpu_mem;       /**< HBM capacity */
  double mem_bw;        /**< HBM bandwidth */
  double nvl_bw;        /**< effective NVLink bandwidth per GPU and direction */
  double nvl_lat;       /**< latency of one NVLink port traversal (a GPU pair crosses two) */
  double nic_bw;        /**< effective NIC bandwidth per direction */
  double nic_lat;       /**< latency of one NIC traversal (a node pair crosses two) */
  double leaf_lat;      /**< leaf switch hop */
  double spine_lat;     /**< spine switch hop */
  double su_up_lat;     /**< leaf <-> spine cable, each way */
  double coll_lat;      /**< fixed latency per collective and rank (host property coll_latency) */
  gboolean nvls;        /**< the NVSwitches reduce (NVLink SHARP, H100 and later): top-zone
                             property nvls = 1 */
  int32_t node_gpus;    /**< GPUs per node of the preset's system (the CLI's default
                             --gpus-per-node): 8 on DGX, 4 in a GB200 compute tray */
  int32_t nvl_domain;   /**< GPUs sharing one NVSwitch fabric (0: one node's); GB200 NVL72: 72 */
  int32_t su_nodes;     /**< nodes per scalable unit (0: #SP_PLATFORM_NODES_PER_SU) */
} sp_gpu_spec;

/** How the GPUs group into SimGrid zones. Both give every GPU pair the same links,
 *  bandwidths and latencies; they differ in SimGrid's loading cost. */
typedef enum {
  SP_PLATFORM_ZONES_AUTO = 0, /**< per node up to #SP_PLATFORM_NODE_ZONES_MAX zones, else per SU */
  SP_PLATFORM_ZONES_NODE,     /**< a Floyd zone per node (NVLink domain) inside a Floyd zone per SU */
  SP_PLATFORM_ZONES_SU,       /**< one DijkstraCache zone per SU holding its nodes' GPUs and routers */
} sp_platform_zones;

/** Node zones (NVLink domains) above which #SP_PLATFORM_ZONES_AUTO folds the nodes into
 *  their SU's zone. SimGrid 3.32 does work proportional to zones x hosts when it loads a
 *  platform (NetZoneImpl::seal lists every host once per zone; creating a host looks its
 *  name up in every zone): with a zone per node that is quadratic in the node count
 *  (bench/RESULTS.md, "Platform loading at scale": 2,048 nodes load in 13.9 s with node
 *  zones and 4.5 s with SU zones on a loaded 2-core VM, 16,384 nodes in over 11 minutes
 *  and 162 s). Up to this count the generated files stay as they were. Both structures
 *  give the same predictions (bench/zones.sh: across SUs a route lists the same links in
 *  another order, which the engine's max-min solution does not depend on, sim_load.c).
 *  spsim itself builds a file it generated without SimGrid's parser (platform_routed.h),
 *  with the route order of the file's zones; the choice keeps the file loadable by
 *  SimGrid and its tools. */
#define SP_PLATFORM_NODE_ZONES_MAX 2048

/** Options of sp_platform_dgx_xml. */
typedef struct {
  int32_t nodes;          /**< >= 1 */
  int32_t gpus_per_node;  /**< >= 1 (8 on DGX) */
  sp_gpu_kind gpu;
  gboolean charge_local;  /**< add "mem_bw" (= HBM bandwidth) so the engine charges local steps */
  double nvl_bw;          /**< NVLink bandwidth per GPU and direction in bytes/s (0: the preset's) */
  double nic_bw;          /**< NIC bandwidth per GPU and direction in bytes/s (0: the preset's) */
  int32_t su_nodes;       /**< nodes per scalable unit (0: #SP_PLATFORM_NODES_PER_SU) */
  double oversubscription; /**< leaf-to-spine oversubscription: an SU's uplink carries its
                                NICs' sum divided by this (1: full bisection; >= 1) */
  int32_t nvlink_domain;  /**< GPUs in one NVLink domain, a multiple of gpus_per_node whose
                               nodes divide nodes and su_nodes (0: the preset's, else one node) */
  int32_t nics_per_node;  /**< NICs per node, dividing gpus_per_node: gpus_per_node / this GPUs
                               share one NIC (0: one NIC per GPU) */
  int32_t pod_sus;        /**< SUs per pod: a third tier, pods of this many SUs under their own
                               spines, joined by a core (0: none, all SUs under one spine) */
  double core_oversubscription; /**< spine-to-core oversubscription of a pod's uplink (>= 1; > 1
                                     needs pod_sus): it carries the pod's NICs' sum divided by
                                     oversubscription x this */
  sp_platform_zones zones; /**< one zone per node or per SU (#SP_PLATFORM_ZONES_AUTO: per SU
                                above #SP_PLATFORM_NODE_ZONES_MAX node zones) */
  int32_t mix_count;      /**< presets of a mixed cluster (0: every node is @c gpu's) */
  gboolean sharp;         /**< the network's switches reduce (SHARP): top-zone property sharp = 1 */
  double sharp_bw;        /**< with sharp: their reduction bandwidth per port in bytes/s, top-zone
                               property sharp_bw (0: none written, the NIC's line rate) */
  sp_tuner tuner;         /**< the cluster's NCCL tuner plugin: top-zone property nccl_tuner
                               (SP_TUNER_NONE: none written) */
  sp_gpu_kind mix_gpu[SP_GPU_COUNT]; /**< mixed cluster: the presets, in node order */
  int32_t mix_nodes[SP_GPU_COUNT];   /**< mixed cluster: nodes of each preset (their sum = nodes) */
} sp_platform_opts;

/** Defaults: 1 node of 8 H100. */
void sp_platform_opts_init(sp_platform_opts *opts);

/** Parse a preset name ("h100", "a100", "h100-hbm2e", "h200", "b200", "gb200", "toy", case-insensitive). */
gboolean sp_gpu_parse(const char *s, sp_gpu_kind *out, GError **err);

/**
 * Parse a mixed cluster "KIND:N[,KIND:N...]" (e.g. "h100:2,a100:2": nodes of each preset,
 * in order) into @p opts (mix_count, mix_gpu, mix_nodes; gpu = the first preset). Fails
 * with SP_ERROR_INVALID on an empty list, an unknown or repeated preset, or a count that
 * is not a number >= 1.
 */
gboolean sp_platform_mix_parse(const char *s, sp_platform_opts *opts, GError **err);

/** The constants of @p kind (static storage), NULL when out of range. */
const sp_gpu_spec *sp_gpu_spec_get(sp_gpu_kind kind);

/**
 * The platform XML for @p opts (newly allocated, deterministic: same options,
 * same bytes). Fails with SP_ERROR_INVALID on out-of-range options.
 */
char *sp_platform_dgx_xml(const sp_platform_opts *opts, GError **err);

/**
 * sp_platform_dgx_xml with the constants of @p custom instead of the preset's
 * (NULL: the preset's), e.g. calibrated ones; the preset still names the
 * generator options in the header comment. @p origin (may be NULL) is written
 * in a comment before it (where the constants come from). Bandwidths and
 * latencies must be positive (the caller's duty).
 */
char *sp_platform_dgx_xml_spec(const sp_platform_opts *opts, const sp_gpu_spec *custom,
                               const char *origin, GError **err);

/** The kinds of link of a generated platform (sp_platform_sink.link): what the index and
 *  the sub-index of a link name. */
typedef enum {
  SP_PLINK_NVL,       /**< nodeN-nvlG: GPU G's NVLink ports (index: zone N, sub: G); SPLITDUPLEX */
  SP_PLINK_NIC,       /**< nodeN-nicJ: NIC J of zone N (sub: J); SPLITDUPLEX */
  SP_PLINK_RAILS,     /**< nodeN-rails: zone N's NICs' sum towards the leaf; FATPIPE */
  SP_PLINK_LEAF,      /**< suK-leaf: SU K's leaf hop (index: K); FATPIPE */
  SP_PLINK_SU_UP,     /**< suK-up: SU K's uplink to its spine; SPLITDUPLEX */
  SP_PLINK_SPINE,     /**< spine: the spine hop of a two-tier fabric; FATPIPE */
  SP_PLINK_POD_SPINE, /**< podP-spine: pod P's spine hop (index: P); FATPIPE */
  SP_PLINK_POD_UP,    /**< podP-up: pod P's uplink to the core; SPLITDUPLEX */
  SP_PLINK_CORE,      /**< core: the core hop of a three-tier fabric; FATPIPE */
} sp_plink_kind;

/** The structure of a generated platform, for a builder that routes it by arithmetic:
 *  GPU G of zone N is host N * zone_gpus + G, uses NIC G / gpus_per_nic of its zone;
 *  zone N is in SU N / zones_per_su, SU K in pod K / pod_sus (when pod_sus > 0). */
typedef struct {
  int32_t zones;        /**< node zones (NVLink domains) */
  int32_t zone_gpus;    /**< GPUs per zone */
  int32_t gpus_per_nic; /**< GPUs sharing one NIC */
  int32_t zones_per_su; /**< zones per scalable unit */
  int32_t sus;          /**< scalable units */
  int32_t pod_sus;      /**< SUs per pod (0: two tiers, no pods) */
  gboolean folded;      /**< one zone per SU holding its nodes (SU zones), not one per node */
} sp_platform_shape;

/** Where sp_platform_dgx_emit sends a platform's elements as it writes them, in the
 *  text's order and with the text's strings (bandwidths "450GBps", latencies "1.3us",
 *  speeds "989.4Tf", as SimGrid parses them): a builder that creates them directly gets
 *  what SimGrid would create from the file. */
typedef struct {
  void *ctx;
  /** once, before any element */
  void (*shape)(void *ctx, const sp_platform_shape *shape);
  /** a property of the top zone */
  void (*zone_prop)(void *ctx, const char *key, const char *value);
  /** GPU @p gpu of zone @p zone; @p props: key, value, ..., NULL */
  void (*host)(void *ctx, int32_t zone, int32_t gpu, const char *id, const char *speed, const char *const *props);
  /** a link; @p policy "SPLITDUPLEX" or "FATPIPE" */
  void (*link)(void *ctx, sp_plink_kind kind, int32_t index, int32_t sub, const char *id, const char *bandwidth,
               const char *latency, const char *policy);
} sp_platform_sink;

/**
 * sp_platform_dgx_xml_spec that also sends every element to @p sink (NULL: none).
 */
char *sp_platform_dgx_emit(const sp_platform_opts *o, const sp_gpu_spec *custom, const char *origin,
                           const sp_platform_sink *sink, GError **err);

/** Host name of GPU @p gpu of node @p node in a platform of @p nodes nodes. */
char *sp_platform_host_name(int32_t nodes, int32_t node, int32_t gpu);

G_END_DECLS

#endif
