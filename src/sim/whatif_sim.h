/* Engine side of the what-if analysis (spsim/whatif.h): a what-if run on a platform
 * file with the SimGrid engine (collectives priced on the platform, step graphs run
 * with contention, --verify in data mode), and the calls it is built on. Only src/sim
 * includes SimGrid. */
#ifndef SPSIM_WHATIF_SIM_H
#define SPSIM_WHATIF_SIM_H

#include <glib.h>
#include <stdint.h>
#include "spsim/step.h"
#include "spsim/step_replay.h"
#include "spsim/whatif.h"

G_BEGIN_DECLS

/**
 * The what-if of @p o on the platform file @p xml: the platform's hosts, GPUs per
 * node, GPU model, speed and memory; unknown host properties refused (warned about
 * with o->lenient); collectives priced with SimGrid (--fidelity flow or step; a
 * platform the engine cannot load falls back to the analytic model with a note) and
 * the step graphs of the layouts that may win run on the platform (sp_stepsim_eval).
 * @return the result (sp_whatif_result_free), or NULL with @p err.
 */
sp_whatif_result *sp_whatif_run(const sp_whatif_opts *o, const char *xml, GError **err);

/**
 * sp_whatif_verify() of @p r on its platform (loaded now when the what-if priced
 * analytically).
 */
gboolean sp_whatif_run_verify(sp_whatif_result *r, GError **err);

/**
 * Chrome trace of the winner's simulated step (every task of every stage's streams)
 * written to @p path ("-": standard output).
 */
gboolean sp_whatif_write_trace(const sp_whatif_result *r, const char *path, GError **err);

/**
 * Load @p xml into the SimGrid engine for pricing (sp_sim_init: a missing or
 * malformed file is an error).
 */
gboolean sp_whatif_engine_open(const char *xml, GError **err);
/** Hosts of the loaded platform (0 when none). */
int32_t sp_whatif_engine_hosts(void);
/**
 * Simulate collective @p c on @p bytes (busbw convention: the whole gathered array
 * for all-gather, reduce-scatter and all-to-all; one buffer otherwise) in cost mode,
 * AUTO algorithm, bf16. The group of rank 0, {0, stride, ..., (n-1) stride}, runs
 * together with its siblings {b, b + stride, ...} for b < min(stride, @p gpus_per_node):
 * the groups that share its nodes' NVSwitch and NICs, so their contention counts.
 * A ring all-reduce, all-gather or reduce-scatter that spans nodes runs k channels
 * (k = members per node, min(@p gpus_per_node / stride, n)), channel c rotating every
 * node's members by c so that each channel crosses between nodes through another
 * GPU's NIC (coll.h, RING with channels). Ranks map to hosts in declaration order.
 * @p step_fidelity selects step-by-step
 * simulation instead of flows. @p seconds receives the makespan.
 */
gboolean sp_whatif_engine_simulate(const sp_comm *c, int32_t gpus_per_node, gboolean step_fidelity,
                                   uint64_t bytes, double *seconds, GError **err);

/**
 * As sp_whatif_engine_simulate, with the algorithm and protocol given instead of
 * chosen for @p bytes (SP_ALGO_AUTO and SP_PROTO_AUTO: chosen).
 */
gboolean sp_whatif_engine_simulate_as(const sp_comm *c, int32_t gpus_per_node, gboolean step_fidelity,
                                      uint64_t bytes, sp_algo algo, sp_proto proto, double *seconds, GError **err);

/**
 * The algorithm and protocol NCCL's tuning model picks for collective @p c on @p bytes
 * (same convention) in the group of rank 0 of sp_whatif_engine_simulate, without
 * simulating it.
 */
gboolean sp_whatif_engine_choose(const sp_comm *c, int32_t gpus_per_node, uint64_t bytes, sp_algo *algo,
                                 sp_proto *proto, GError **err);

/**
 * The what-if's collective pricer on its own: SimGrid on a grid of sizes, interpolated,
 * extrapolated above 64 MiB with the algorithm and protocol chosen for the size asked
 * (the what-if prices every collective of a layout with it). One per process: it loads
 * @p xml into SimGrid.
 */
typedef struct sp_whatif_pricer sp_whatif_pricer;
sp_whatif_pricer *sp_whatif_pricer_new(const char *xml, int32_t gpus_per_node, gboolean step_fidelity, GError **err);
/** Price collective @p c (its bytes in the sp_whatif_engine_simulate convention). */
gboolean sp_whatif_pricer_price(sp_whatif_pricer *p, const sp_comm *c, double *seconds, GError **err);
/**
 * Price tree all-reduces and ring all-reduces, all-gathers and reduce-scatters of more
 * than @p ranks simulated ranks (members times sibling groups) on the line through three
 * smaller groups of the same shape, where their times lie on one (default 4,096; tests
 * set it lower to check the line against the simulation).
 */
void sp_whatif_pricer_set_line_max(sp_whatif_pricer *p, int32_t ranks);
/** How many prices sp_whatif_pricer_price drew from such lines so far (grid points). */
guint sp_whatif_pricer_by_line(const sp_whatif_pricer *p);
void sp_whatif_pricer_free(sp_whatif_pricer *p);

/**
 * Run the data-mode replay @p r of a step graph on the loaded platform, in STEP
 * fidelity: local rank i on the host of global rank sp_step_replay_ranks(r)[i].
 * @p seconds receives the simulated time. Check the results with
 * sp_step_replay_check.
 */
gboolean sp_whatif_engine_replay(sp_step_replay *r, double *seconds, GError **err);

G_END_DECLS

#endif
