/* Engine-side glue of the what-if analysis: prices one collective of a step on the
 * platform with the SimGrid engine (cost mode). Only src/sim includes SimGrid. */
#ifndef SPSIM_WHATIF_SIM_H
#define SPSIM_WHATIF_SIM_H

#include <glib.h>
#include <stdint.h>
#include "spsim/step.h"

G_BEGIN_DECLS

/**
 * Load @p xml into the engine for pricing. Fails with SP_ERROR_UNSUPPORTED when this
 * build's engine cannot price collectives (the caller falls back to the analytic model).
 */
gboolean sp_whatif_engine_open(const char *xml, GError **err);
/** Hosts of the loaded platform (0 when none). */
int32_t sp_whatif_engine_hosts(void);
/**
 * Simulate @p c (the group of rank 0: {0, stride, ...}) in cost mode; @p step_fidelity
 * selects step-by-step instead of flow fidelity.
 */
gboolean sp_whatif_engine_price(const sp_comm *c, gboolean step_fidelity, double *seconds, GError **err);

G_END_DECLS

#endif
