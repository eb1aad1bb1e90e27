/**
 * @file platform_routed.h
 * @brief A generated DGX-style platform built straight into SimGrid as one zone whose
 *        routes are computed by arithmetic, instead of parsing its XML.
 *
 * SimGrid 3.32's loading work grows with zones x hosts (every new host's name is looked
 * up zone by zone, every zone lists all hosts when sealed), and one zone of 131,072 GPUs
 * routed by Dijkstra would run one search over the whole graph per source. A platform
 * that `spsim platform dgx` generated is known exactly from the command in its header,
 * so spsim builds it as one zone (a SimGrid NetZoneImpl of its own, platform_routed.cpp):
 * the same hosts with the same properties and the same links with the same bandwidths,
 * latencies and sharing policies, created in the file's order from the generator's own
 * strings (sp_platform_dgx_emit), and for each GPU pair the links of the node zones'
 * route, in their order, looked up by index. Routers and zones, which carry no resource,
 * are not created. Only a file whose bytes are exactly the generator's output for its
 * header's command is built this way (sp_platform_generated); any other goes through
 * SimGrid's parser as before.
 */
#ifndef SPSIM_PLATFORM_ROUTED_H
#define SPSIM_PLATFORM_ROUTED_H

#include <glib.h>

#include "platform_gen.h"

G_BEGIN_DECLS

/**
 * Build the platform of @p opts into SimGrid's engine (after simgrid_init, in place of
 * simgrid_load_platform; the engine must have no platform yet) and seal it. The top
 * zone "cluster" carries the file's top-zone properties. Fails with SP_ERROR_INVALID
 * when the generator refuses @p opts.
 */
gboolean sp_sim_build_routed(const sp_platform_opts *opts, GError **err);

/**
 * While @p on, the routes of a platform built by sp_sim_build_routed leave out each
 * FATPIPE link faster than the route's slowest shared link: such a link does not set a
 * flow's max-min share, so the engine's shares are the same without it,
 * and SimGrid's solver no longer walks the leaf, spine and rail constraints that every
 * flow between nodes crossed. Route latencies still count every link. For the engine's
 * runs only (around simgrid_run): spsim's own route queries (link classes, NCCL's
 * tuning inputs, the sibling groups' symmetry) see every link. No effect on platforms
 * SimGrid parsed. @return the previous setting.
 */
gboolean sp_sim_routed_lean(gboolean on);

G_END_DECLS

#endif
