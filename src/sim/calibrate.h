/**
 * @file calibrate.h
 * @brief Placing nccl-tests' ranks on a platform's nodes, and fitting the
 *        constants of a generated DGX-style platform (src/sim/platform_gen.h)
 *        to nccl-tests logs.
 *
 * ## The fit
 * Five parameters: the NVLink bandwidth and latency of a GPU's port (links
 * nodeN-nvlG), the NIC bandwidth and latency of a GPU (nodeN-nicG; the rails,
 * leaf, uplink and spine capacities follow the NIC as the generator sets them),
 * and the per-collective latency (host property `coll_latency`). Every point
 * (one row of a log: collective, ranks and their nodes, element type, count,
 * measured out-of-place time) is simulated on a generated platform holding
 * the candidate constants, in a child process per candidate (SimGrid loads one
 * platform per process). The residual of a point is ln(simulated / measured
 * time), and the fit minimises their sum of squares by Levenberg-Marquardt over
 * the logarithms of the parameters (so they stay positive), with a Jacobian by
 * finite differences (a 1 % step). Starting values: the platform's; before
 * the iterations, each bandwidth is scaled by the ratio of measured to
 * simulated busbw of its largest points (large sizes are bound by the
 * bandwidth).
 *
 * A parameter is *determined* when some point's time moves with it (a
 * relative sensitivity above 1e-3): NIC constants need points across nodes;
 * NVLink constants points inside a node. Two latencies whose sensitivities
 * are proportional over all the points (cosine above 0.9999; e.g. the
 * per-collective latency and the NVLink latency when every small point runs the
 * same number of ring steps) cannot be told apart: the link latency is then
 * held. Held and undetermined parameters keep their starting values and are
 * reported.
 */
#ifndef SPSIM_SIM_CALIBRATE_H
#define SPSIM_SIM_CALIBRATE_H

#include <glib.h>
#include <stdint.h>
#include "spsim/coll.h"
#include "platform_gen.h"

G_BEGIN_DECLS

/**
 * Hosts of the loaded platform (sp_sim_init) for ranks placed by node: rank r
 * goes to the local_of[r]-th host (declaration order) of the node_of[r]-th
 * node, nodes taken in the order of their first host (property `node`).
 * @return a new map of @p n hosts (g_free it), or NULL with SP_ERROR_PLATFORM
 * when the platform has too few nodes, too few hosts in a node, or hosts
 * without `node`.
 */
int32_t *sp_cal_place(int32_t n, const int32_t *node_of, const int32_t *local_of, GError **err);

/** The fitted parameters (SI units). */
typedef enum {
  SP_CAL_NVL_BW = 0, /**< NVLink per GPU and direction, bytes/s */
  SP_CAL_NVL_LAT,    /**< NVLink port traversal, s */
  SP_CAL_NIC_BW,     /**< NIC per GPU and direction, bytes/s */
  SP_CAL_NIC_LAT,    /**< NIC traversal, s */
  SP_CAL_COLL_LAT,   /**< per collective and rank, s */
  SP_CAL_NPARAMS
} sp_cal_param;

/** @return "nvlink-bw", "nvlink-lat", "nic-bw", "nic-lat", "coll-lat". */
const char *sp_cal_param_name(sp_cal_param p);

/** One measured point. */
typedef struct {
  sp_coll coll;
  sp_dtype dtype;
  sp_redop redop;
  int32_t root;        /**< group index (broadcast, reduce) */
  int32_t n;           /**< ranks */
  const int32_t *node; /**< node of each rank (n entries; borrowed) */
  const int32_t *local;/**< index of each rank among its node's (borrowed) */
  uint64_t count;      /**< elements, as sp_coll_spec.count */
  uint64_t bytes;      /**< the row's size column */
  double time_s;       /**< measured (out-of-place) time */
  int32_t log;         /**< index of the log it came from (reports) */
} sp_cal_point;

/** What the fit works on. */
typedef struct {
  sp_gpu_spec spec;     /**< constants of the platform (its values are the starting point) */
  int32_t nodes;        /**< nodes of the simulated platform (>= every point's) */
  int32_t gpus_per_node;
  gboolean charge_local;
  sp_tuner tuner;       /**< the cluster's NCCL tuner plugin, which the logs ran under */
  gboolean sharp;       /**< the network's switches reduce (the logs' CollNet) */
  double sharp_bw;      /**< their reduction bandwidth per port, bytes/s (0: the NIC's) */
  const sp_cal_point *points;
  int32_t npoints;
  int32_t max_iters;    /**< Levenberg-Marquardt iterations (0: 30) */
} sp_cal_problem;

/** The result. */
typedef struct {
  sp_gpu_spec spec;                 /**< calibrated constants */
  gboolean determined[SP_CAL_NPARAMS];
  gboolean held[SP_CAL_NPARAMS];    /**< determined but not separable from another */
  double *sim_s;                    /**< simulated time of each point, calibrated (g_free) */
  double *start_s;                  /**< simulated time of each point, before (g_free) */
  double rms;                       /**< RMS of ln(sim / measured), calibrated */
  double rms_start;                 /**< same, before */
  int32_t iters;                    /**< iterations run */
  int32_t evals;                    /**< platforms simulated */
} sp_cal_result;

/**
 * Fit @p pb (see the file comment). Never loads a platform in this process.
 * Errors: a point the simulator refuses (its message), a child that fails
 * (SP_ERROR_TRANSPORT). @p result is filled on success (sp_cal_result_clear).
 */
gboolean sp_cal_fit(const sp_cal_problem *pb, sp_cal_result *result, GError **err);
/** Free the arrays of @p r. */
void sp_cal_result_clear(sp_cal_result *r);

/** Read parameter @p p of @p g / write it. */
double sp_cal_get(const sp_gpu_spec *g, sp_cal_param p);
void sp_cal_set(sp_gpu_spec *g, sp_cal_param p, double v);

/**
 * Simulated times of @p pb's points on the platform of constants @p g (one child
 * process). @p out receives npoints seconds.
 */
gboolean sp_cal_simulate(const sp_cal_problem *pb, const sp_gpu_spec *g, double *out, GError **err);

/**
 * Read the constants of a platform written by spsim's generator
 * (sp_platform_dgx_xml): its GPU preset (from the hosts' `gpu` property), the
 * bandwidth and latency of the links node000-nvl0, node000-nic0, su0-leaf,
 * su0-up and spine, the first host's `coll_latency`, whether hosts carry
 * `mem_bw`, the number of nodes and GPUs per node. A file of another origin is
 * SP_ERROR_PLATFORM naming what is missing.
 */
gboolean sp_cal_platform_spec(const char *path, sp_gpu_spec *g, int32_t *nodes, int32_t *gpus_per_node,
                              gboolean *charge_local, GError **err);

G_END_DECLS

#endif
