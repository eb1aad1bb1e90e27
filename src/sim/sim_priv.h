/* Private interface between the SimGrid engine's files (sim.c, sim_load.c). */
#ifndef SPSIM_SIM_PRIV_H
#define SPSIM_SIM_PRIV_H

#include <glib.h>
#include <simgrid/host.h>

#include "platform.h"

/* SimGrid's command line for @p pp (its <config> properties, SPSIM_SIMGRID_ARGS);
 * @p quiet silences SimGrid's log. NULL-terminated, owns its strings. */
GPtrArray *sp_sim_args_new(const sp_plat_desc *pp, gboolean quiet);

/* Seal the loaded platform (SimGrid's engine state after loading). */
void sp_sim_seal_platform(void);

/* Fill @p out with SimGrid's hosts in the declaration order of @p names;
 * @return FALSE when the names do not match SimGrid's hosts one to one. */
gboolean sp_sim_hosts_by_names(const GPtrArray *names, sg_host_t *out, size_t n);

/* Read @p path and check it in a forked child (SimGrid aborts on files it
 * rejects); @return its description, or NULL with an error saying why. */
sp_plat_desc *sp_sim_read_checked(const char *path, GError **err);

#endif
