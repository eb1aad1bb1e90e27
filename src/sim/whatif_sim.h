/* Engine-side glue of the what-if analysis: prices one collective of a step on the
 * platform with the SimGrid engine (cost mode). Only src/sim includes SimGrid. */
#ifndef SPSIM_WHATIF_SIM_H
#define SPSIM_WHATIF_SIM_H

#include <glib.h>
#include <stdint.h>
#include "spsim/step.h"
#include "spsim/step_replay.h"

G_BEGIN_DECLS

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
 * Run the data-mode replay @p r of a step graph on the loaded platform, in STEP
 * fidelity: local rank i on the host of global rank sp_step_replay_ranks(r)[i].
 * @p seconds receives the simulated time. Check the results with
 * sp_step_replay_check.
 */
gboolean sp_whatif_engine_replay(sp_step_replay *r, double *seconds, GError **err);

G_END_DECLS

#endif
