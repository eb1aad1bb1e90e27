/**
 * @file platform.h
 * @brief The one reader of SimGrid platform files on spsim's side: host names in
 *        declaration order, their zones, `<config>` properties and the GPU facts
 *        the what-if reads (speed, memory, model, GPUs per node). Text only
 *        (GMarkup): SimGrid itself loads the file in sim.c.
 *
 * ## Host properties spsim reads (in `<host>` or `<cluster>`)
 * `gpu` (model name), `gpu_mem` (bytes, or with a suffix such as 80GiB),
 * `hbm_bw`, `mem_bw` (bytes/s), `node` (node index), `local_rank`,
 * `coll_latency` and `local_latency` (seconds, with a suffix s, ms, us, ns).
 * At zone or `<cluster>` level: `gpus_per_node` (a whole number >= 1; anything
 * else is refused), `nvls` (1, true or yes: the nodes' NVSwitches reduce,
 * NVLink SHARP; on the top zone or the first host), `sharp` (1, true or yes: the
 * network's switches reduce, SHARP) and `sharp_bw` (their reduction bandwidth per
 * port, bytes/s or with a suffix such as 50GBps) and `nccl_tuner` (the NCCL tuner plugin the
 * cluster runs: aws-p5, aws-p5en, aws-p6 or none, spsim/tuner_plugin.h; another name is refused). See sim.h for
 * what the engine does with them.
 */
#ifndef SPSIM_SIM_PLATFORM_H
#define SPSIM_SIM_PLATFORM_H

#include <glib.h>
#include <stdint.h>
#include "spsim/tuner_plugin.h"

/** A `<link>` as written: its bandwidth and latency attributes (NULL when absent). */
typedef struct {
  char *bandwidth;
  char *latency;
} sp_plat_link;

/** One host's GPU facts: its own (`speed` of its `<host>` or `<cluster>`, their
 *  `gpu`, `gpu_mem`, `hbm_bw` properties), else the file's (sp_plat_desc). */
typedef struct {
  double speed;    /**< flop/s (0: unknown) */
  double gpu_mem;  /**< bytes (0: unknown) */
  double hbm_bw;   /**< bytes/s (0: unknown) */
  char *gpu;       /**< model name, or NULL */
} sp_plat_host;

/** What spsim reads from a platform file. */
typedef struct {
  char *path;
  GPtrArray *names;        /**< host ids in declaration order (`<cluster>` expanded) */
  GArray *group;           /**< int32_t per host: index of its innermost zone or cluster, -1 outside any */
  int32_t ngroups;         /**< zones and clusters seen */
  GPtrArray *cfg;          /**< "--cfg=id:value" for each `<config><prop>` */
  gboolean has_doctype;    /**< the file has a `<!DOCTYPE ...>` line */
  double speed;            /**< first host's speed in flop/s (0: unknown) */
  double gpu_mem;          /**< GPU memory in bytes from the first host or the top zone (0: unknown) */
  double hbm_bw;           /**< GPU memory bandwidth in bytes/s, property hbm_bw (0: unknown) */
  char *gpu_model;         /**< `gpu` property of the first host or the top zone, or NULL */
  gboolean nvls;           /**< `nvls` property (top zone or first host): NVLink SHARP */
  gboolean sharp;          /**< `sharp` property (top zone or first host): the network switches
                                reduce (SHARP, NCCL's CollNet) */
  double sharp_bw;         /**< `sharp_bw`: their reduction bandwidth per port, bytes/s (0: the
                                NIC's line rate) */
  sp_tuner tuner;          /**< `nccl_tuner` (top zone or first host): the cluster's NCCL tuner
                                plugin (SP_TUNER_NONE: none) */
  int32_t gpus_per_node;   /**< `gpus_per_node` property, else the most common number of hosts per
                                innermost zone (0: unknown) */
  GPtrArray *unknown;      /**< "'id' (first in <host> 'name')" for each host property name spsim does not know */
  GHashTable *links;       /**< link id -> sp_plat_link, for every `<link>` with an id */
  double coll_latency;     /**< first host's `coll_latency` in seconds (0: none) */
  gboolean mem_bw;         /**< the first host has a `mem_bw` property */
  int32_t nodes;           /**< distinct values of the hosts' `node` property (0: none) */
  int32_t host_elems;      /**< `<host>` elements (hosts not from `<cluster>` or `<peer>`) */
  GArray *host;            /**< sp_plat_host per host, in declaration order */
  double local_gemm_flops; /**< top-zone `local_gemm_flops`: a CPU's measured GEMM rate (spsim platform local; 0: none) */
  double local_attn_flops; /**< top-zone `local_attn_flops`: its measured attention rate (0: none) */
  double local_attn_bwd_flops; /**< top-zone `local_attn_bwd_flops`: its measured attention backward rate (0: none) */
  char *local_gemm_table;  /**< top-zone `local_gemm_table`: its measured GEMM table, as written (NULL: none) */
} sp_plat_desc;

/** The host property names spsim knows, NULL-terminated (see the file comment). */
extern const char *const sp_plat_known_props[];

/**
 * Read @p path: well-formed XML with a `<platform>` root and at least one host.
 * @return a new description (free with sp_plat_desc_free), or NULL with
 * SP_ERROR_IO (unreadable) or SP_ERROR_PARSE (what is wrong, with the line).
 */
sp_plat_desc *sp_plat_read(const char *path, GError **err);

/**
 * GPUs per node: @p flag when > 0 (a command-line value), else the platform's
 * (`gpus_per_node` property of a zone or `<cluster>`, or the size of its node
 * zones). Never a guess: a platform that does not say (a flat `<cluster>`
 * without the property) gives 0 and SP_ERROR_INVALID naming the property and
 * the --gpus-per-node flag.
 */
int32_t sp_plat_gpus_per_node(const sp_plat_desc *d, int32_t flag, GError **err);

/** Free @p d (NULL is fine). */
void sp_plat_desc_free(sp_plat_desc *d);

/**
 * Parse a bandwidth ("12.5GBps", bytes/s) or, when @p time, a duration ("3us",
 * seconds). @return the value, or 0 when @p s is NULL, negative, malformed or too
 * large for a double ("1e300TBps").
 */
double sp_plat_parse_unit(const char *s, gboolean time);

#endif
