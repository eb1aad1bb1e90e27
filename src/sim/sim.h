/**
 * @file sim.h
 * @brief The SimGrid engine: runs per-rank programs as SimGrid actors on a
 *        platform XML, in cost mode (sizes only) or data mode (real bytes), and
 *        reports the simulated time. No SimGrid type appears here; only src/sim
 *        includes SimGrid headers.
 *
 * ## Engine configuration (fixed by sp_sim_init, overridable by the platform)
 * - Network model: **CM02** with TCP-gamma 0 (no window bound) and cross-traffic
 *   off. A lone message of S bytes on a route with links l_1..l_k then takes
 *   exactly sum(lat_i) + S / min(bw_i) simulated seconds, and concurrent flows
 *   share each link max-min fairly: a closed form that calibration can reason
 *   about. A platform may choose otherwise with
 *   `<config><prop id="network/model" value="..."/></config>` (any
 *   `<config>` prop of the file is passed to SimGrid after these defaults).
 * - Contexts: one thread of simulation (contexts/nthreads 1), small actor stacks
 *   (contexts/stack-size 256 KiB; 1 MiB in sanitizer builds), and the "thread"
 *   context factory in builds configured with --enable-sanitizers (SP_SANITIZERS):
 *   the default raw context switching makes ASan report false positives.
 * - SimGrid's logging goes to /dev/null at threshold "critical"; nothing is printed
 *   on stdout. For debugging, the environment variable SPSIM_SIMGRID_ARGS holds
 *   extra SimGrid arguments (e.g. "--log=root.thresh:info --log=root.app:stderr"),
 *   appended last.
 *
 * ## Host properties read by the engine (optional, in the platform XML)
 * Declared as `<prop id="NAME" value="VALUE"/>` inside a `<host>` (or `<cluster>`
 * hosts):
 * - `mem_bw`: memory bandwidth of the device in bytes/s (a number, optionally
 *   with the suffix Bps, kBps, MBps, GBps, TBps, KiBps, MiBps, GiBps, TiBps).
 *   Local steps are charged bytes_touched / mem_bw seconds: COPY 2 x bytes (read +
 *   write), REDUCE 3 x count x elem size (two reads, one write), SCALE 2 x count x
 *   elem size, FILL 1 x bytes; COMPUTE max(flops / host speed, bytes / mem_bw).
 *   **Default: absent or 0 = local steps cost nothing** (NCCL fuses reductions into
 *   its copy kernels, so the network terms dominate); COMPUTE then costs
 *   flops / host speed.
 * - `local_latency`: fixed seconds added to every local step except COMPUTE (a
 *   kernel launch; number with optional suffix s, ms, us, ns). Default 0.
 * - `coll_latency`: fixed seconds charged once per collective per rank, at its
 *   start (NCCL's base latency per collective: launch, proxy and protocol
 *   set-up; same syntax as local_latency). A collective is an op id
 *   (sp_step.op): the rank sleeps this long on its host just before it posts the
 *   first SEND or RECV of each op id it has not communicated for yet in the run,
 *   so a collective without messages (one member) is not charged. Default 0.
 * - `node`: index of the node (machine) holding the host, a non-negative
 *   integer. Hosts with the same value share a node; sp_sim_ring_channels uses
 *   it to run one ring channel per member of a node.
 *
 * ## Ranks and hosts
 * Hosts are numbered in the order the platform file declares them (`<host>` in
 * document order, `<cluster>`/`<cabinet>` expanded by radical). Rank r runs on host
 * map[r], by default r (see sp_sim_set_host_map). One actor per rank.
 *
 * ## Message matching
 * Every rank has one mailbox. A receive posts an anonymous get on it; a message
 * carries (source, tag) and, at WAIT, is matched to the earliest unmatched
 * posted receive with the same (source, tag); messages that belong to a later
 * receive (a peer already in a later phase) are kept aside, transferred eagerly
 * as an eager MPI protocol would. Data is exact; timing differs from a strictly
 * rendezvous transfer only in that early-arriving case. O(ranks) mailboxes, so
 * all-to-all on thousands of ranks stays light.
 *
 * ## Repeated runs
 * sp_sim_run may be called any number of times in one process (SimGrid's clock
 * keeps advancing between runs; times reported are relative to each run's start).
 * One platform per process: SimGrid cannot unload a platform.
 */
#ifndef SPSIM_SIM_H
#define SPSIM_SIM_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include "spsim/coll.h"
#include "spsim/exec.h"
#include "spsim/program.h"
#include "spsim/tuning.h"

G_BEGIN_DECLS

/** How finely communication is simulated. */
typedef enum {
  SP_FIDELITY_STEP = 0, /**< every lowered step is one SimGrid message */
  SP_FIDELITY_FLOW      /**< runs of blocks with the same peers are one flow (cost mode only) */
} sp_fidelity;

/** @return "step" or "flow". */
const char *sp_fidelity_name(sp_fidelity f);
/** Parse "step" or "flow". */
gboolean sp_fidelity_parse(const char *s, sp_fidelity *out, GError **err);

/**
 * Check @p platform_xml without loading it in this process: readable, well-formed,
 * a DOCTYPE line, accepted by SimGrid, every host speed and link bandwidth
 * positive, and a route between every pair of hosts (every ordered pair up to
 * 256 hosts; above, every pair inside each zone, each host with the next zone,
 * and every pair of zones). SimGrid runs in a forked child, so a file it would
 * abort on becomes an error: SP_ERROR_IO, SP_ERROR_PARSE (SimGrid's own reason),
 * or SP_ERROR_PLATFORM (the first host without a route, naming both hosts, or the
 * host or link with a non-positive speed or bandwidth). sp_sim_init runs it first.
 */
gboolean sp_sim_check_platform(const char *platform_xml, GError **err);
/**
 * Initialise SimGrid once per process and load @p platform_xml. A missing or
 * unreadable file is SP_ERROR_IO; malformed XML, a file without hosts or one that
 * SimGrid rejects (checked in a child process first, so SimGrid's own aborts
 * never reach the caller) is SP_ERROR_PARSE. Calling it again with the same file
 * is a no-op; with another file it is SP_ERROR_UNSUPPORTED.
 */
gboolean sp_sim_init(const char *platform_xml, GError **err);
/** Put SimGrid's clock back at 0 between runs (nothing pending): every run starts at
 *  time 0, so its result does not depend on the runs before it in the process. */
void sp_sim_clock_reset(void);
/** @return TRUE once a platform is loaded. */
gboolean sp_sim_ready(void);
/** @return the loaded platform's path, or NULL. */
const char *sp_sim_platform_path(void);
/** @return the loaded platform's GPU model (`gpu` property of its first host or top
 *  zone), or NULL (none, or no platform loaded). */
const char *sp_sim_gpu_model(void);
/** @return the number of hosts (GPUs) of the loaded platform, 0 before sp_sim_init. */
int32_t sp_sim_num_hosts(void);
/** TRUE when every host of the loaded platform computes as the first (speed, memory
 *  bandwidth, latencies of local steps and collectives, its "gpu" property). */
gboolean sp_sim_hosts_alike(void);
/** @return the name of host @p i (declaration order), or NULL when out of range. */
const char *sp_sim_host_name(int32_t i);

/**
 * Set the rank -> host map used by the next runs: rank r runs on host map[r] for
 * r < n, and on host r beyond (the default when @p map is NULL). Hosts must be
 * in range and distinct among the mapped ranks. Copied.
 */
gboolean sp_sim_set_host_map(const int32_t *map, int32_t n, GError **err);
/** @return the host of rank @p r under the current map. */
int32_t sp_sim_host_of(int32_t r);

/**
 * Run ranks 0..world-1's programs, one SimGrid actor each (rank r on host
 * sp_sim_host_of(r)). @p bufs NULL is cost mode, else bufs[r] is rank r's buffer
 * table (data mode, STEP fidelity only). @p trace (may be NULL) receives every
 * rank's timeline, times in seconds from the run's start. @p makespan (may be NULL)
 * receives the simulated seconds from the start to the end of the last actor.
 * Fewer hosts than @p world is SP_ERROR_PLATFORM; an inconsistent schedule
 * (a deadlock, mismatched sizes) is SP_ERROR_TRANSPORT naming the ranks.
 */
gboolean sp_sim_run(sp_program *const *progs, int32_t world, void **const *bufs,
                    sp_fidelity fid, sp_trace *trace, double *makespan, GError **err);

/**
 * Lower @p spec for every rank of [0, @p world) in cost mode and run it (lowering
 * rank by rank, so FLOW fidelity keeps only the merged programs in memory);
 * @p seconds receives the makespan. AUTO algorithm and protocol are resolved by
 * NCCL's tuning model (sp_sim_coll_resolve) and the protocol priced
 * (sp_sim_set_cost). spec->channels == 0 lets the engine choose
 * the ring channels for the platform (sp_sim_ring_channels); 1 or more is used
 * as given, with spec->channel_block == 0 taking the platform's members per node
 * (sp_sim_ring_channels' block; set it to 1 for rings without rotation).
 */
gboolean sp_sim_coll_time(const sp_coll_spec *spec, int32_t world, sp_fidelity fid,
                          double *seconds, GError **err);
/**
 * sp_sim_coll_time, in place when @p in_place: every member's program has one
 * buffer for in and out (as NCCL's sendbuff == recvbuff), which sp_lower_coll
 * accepts where both have the same size (all-reduce, all-to-all, broadcast,
 * reduce, send-recv; SP_ERROR_INVALID otherwise).
 */
/**
 * Whether sp_sim_coll_groups_time may simulate group 0 alone when the other groups are
 * images of it under a symmetry of the platform (default TRUE; FALSE simulates every
 * group, for checks).
 */
void sp_sim_set_sibling_symmetry(gboolean on);
/**
 * Whether sp_sim_coll_groups_time prices these groups by group 0 alone (the symmetry
 * it describes holds, and the check is within its budget of member pairs); FALSE when
 * turned off by sp_sim_set_sibling_symmetry.
 */
gboolean sp_sim_coll_groups_symmetric(const sp_coll_spec *specs, int32_t ngroups, const int32_t *hosts);
/**
 * Most member pairs (n (n - 1) groups) whose routes sp_sim_coll_groups_time checks before
 * a run (default 4 Mi; in flow fidelity at most 64 Ki); larger groups in flow fidelity are
 * checked on the pairs group 0's programs use once built, and run alone when that holds
 * (tests set 0 to probe every group). @p accepted and @p declined (may be NULL) count those probes so far.
 */
void sp_sim_set_sibling_budget(int64_t pairs);
void sp_sim_sibling_probes(guint *accepted, guint *declined);
/**
 * The time of @p ngroups collectives run together, each of specs[g].n (all equal)
 * members, on ranks 0 .. ngroups * n - 1 (specs[g].ranks: each rank in one
 * group) placed on @p hosts (rank r on host hosts[r]: the world is only the
 * members, not the hosts between them). Specs are used as given (channels
 * included). Sets and then clears the host map (sp_sim_set_host_map).
 * When groups 1.. are images of group 0 under a symmetry of the platform (checked on
 * the routes between every two members: the same links where a group shares them with
 * group 0, else links of the same bandwidth, latency and sharing that no other group's
 * route maps onto and group 0 does not use), group 0 runs alone with every shared
 * link it shares with k groups at 1/k of its bandwidth (FATPIPE links as they are):
 * max-min fair sharing has one allocation, so by symmetry every group gets group 0's
 * rates, and group 0's flows the same share of each link as among all groups.
 */
gboolean sp_sim_coll_groups_time(const sp_coll_spec *specs, int32_t ngroups, const int32_t *hosts,
                                 sp_fidelity fid, double *seconds, GError **err);
gboolean sp_sim_coll_time_ex(const sp_coll_spec *spec, int32_t world, sp_fidelity fid,
                             gboolean in_place, double *seconds, GError **err);

/**
 * TRUE when the hosts of all members of @p spec (under the current host map) charge
 * local steps nothing (no `mem_bw`, no `local_latency`): the in-place and out-of-place
 * runs of @p spec then take the same time, since their programs differ in local
 * copies only (sp_lower_coll's snapshot of the input), so one simulation serves both.
 */
gboolean sp_sim_coll_local_free(const sp_coll_spec *spec);

/**
 * The platform's facts for NCCL's tuning model (spsim/tuning.h) about the group of
 * @p spec under the current host map: ranks; nodes (distinct `node` properties of
 * the members' hosts; hosts without one count as one node); the GPU generation of
 * the platform's `gpu` model; AMD hosts for Ampere (DGX A100); the bandwidth of
 * the route from member 0 to another GPU of its node (NVLink) and to a member on
 * another node (its NIC), in GB/s; the platform's `nvls` property.
 */
void sp_sim_tune_topo(const sp_coll_spec *spec, sp_tune_topo *t);
/**
 * Resolve @p spec on the loaded platform: @p out = @p spec with AUTO algorithm and
 * protocol replaced by NCCL's tuning model's choice (sp_tune_choose; an explicit
 * algorithm or protocol is kept and the other chosen for it), and @p cost its cost
 * attributes (sp_tune_cost_of). @p model_us (may be NULL) receives the model's
 * predicted time (-1 where it has none). Fails (SP_ERROR_UNSUPPORTED) on a forced
 * pair that cannot run, such as nvls on a platform without NVLink SHARP. Ring
 * broadcast and reduce (pipelined chains) without a chunk_bytes get the chunk of least
 * time: C = round(sqrt((n-2) S / (B L))) chunks of S / C bytes (rounded up to whole
 * elements), L and B the latency and bandwidth of the chain's slowest hop with the
 * protocol's cost, so t = coll_latency + (C + n - 2)(L + S / (C B)).
 * sp_sim_coll_time and the what-if's pricer run the resolved spec.
 */
gboolean sp_sim_coll_resolve(const sp_coll_spec *spec, sp_coll_spec *out, sp_tune_cost *cost,
                             double *model_us, GError **err);
/**
 * Price the next runs with @p c (NULL: neutral, as the platform says): every
 * message moves bytes x c->wire simulated bytes (its payload is unchanged), the
 * links inside a node (on a route between two GPUs of one node) get their loaded
 * latency x c->lat_intra, the other links between GPUs x c->lat_inter, and each
 * collective's coll_latency is x c->coll_lat. sp_sim_coll_time sets and clears it
 * around its run.
 */
void sp_sim_set_cost(const sp_tune_cost *c);

/** @return the `node` property of host @p host, -1 when absent or out of range. */
int32_t sp_sim_host_node(int32_t host);
/** @return the `coll_latency` of host @p host in seconds (0 when absent). */
double sp_sim_host_coll_latency(int32_t host);

/**
 * The engine's channel choice for a RING collective on the loaded platform, as
 * NCCL does on multi-GPU nodes: when @p spec is an all-reduce, all-gather or
 * reduce-scatter that resolves to RING and its members (through the host map)
 * come as runs of k > 1 consecutive members per node (property `node`), each
 * node in one run, over two nodes or more, *channels = min(k, SP_MAX_CHANNELS,
 * NCCL's channels for its bytes and protocol: sp_tune_channels) and *block = k:
 * channel c leaves every node through its member c - 1 and enters through member
 * c, so the channels use different NICs per node. (sp_sim_coll_time gives fewer
 * channels than k the protocol's rate of all k: NCCL's model prices the
 * collective, not its channels.)
 * A TREE all-reduce whose members come as such runs (one node included) gets
 * *channels = 1 and *block = k: NCCL's double binary tree chains each node's k
 * members (spsim/dbtree.h). Otherwise (one node, nodes with different member
 * counts, a host without `node`) *channels = 1 and *block = 0.
 */
void sp_sim_ring_channels(const sp_coll_spec *spec, int32_t *channels, int32_t *block);

/**
 * Like sp_sim_run but taking a program source: @p get returns rank r's program
 * (owned by the caller of get when @p release is NULL, else released with it
 * once the engine no longer needs it). Used to keep memory bounded at scale.
 */
typedef sp_program *(*sp_sim_program_fn)(void *ud, int32_t rank, GError **err);
typedef void (*sp_sim_release_fn)(void *ud, sp_program *p);
gboolean sp_sim_run_source(sp_sim_program_fn get, sp_sim_release_fn release, void *ud,
                           int32_t world, sp_fidelity fid, sp_trace *trace, double *makespan,
                           GError **err);
/**
 * sp_sim_run_source for programs that are valid by construction (sp_lower_coll's
 * output; tests/test-coll validates it): skips sp_program_validate, which costs
 * as much as lowering on large groups. A release function may keep a program
 * and hand it out again from @p get (after emptying it): in FLOW fidelity each
 * program is released before the next is got.
 */
gboolean sp_sim_run_source_lowered(sp_sim_program_fn get, sp_sim_release_fn release, void *ud,
                                   int32_t world, sp_fidelity fid, sp_trace *trace,
                                   double *makespan, GError **err);

/**
 * Data-mode hook for COMPUTE steps (e.g. the graph's matmul/attention kernels,
 * sp_graph_kernel_host): called with the rank's buffers for every COMPUTE step
 * of a data-mode run, before its time is charged. NULL (default): COMPUTE
 * changes no data.
 */
typedef gboolean (*sp_sim_compute_fn)(void *ud, int32_t rank, const sp_step *s,
                                      void *const *bufs, GError **err);
void sp_sim_set_compute_hook(sp_sim_compute_fn fn, void *ud);

/** Per-op summary of a trace. */
typedef struct {
  uint32_t op;       /**< op id (sp_step.op) */
  uint64_t bytes;    /**< bytes sent by all ranks */
  double first_start;/**< earliest event start, seconds */
  double last_end;   /**< latest event end, seconds */
  uint32_t events;   /**< timeline events of this op */
} sp_op_summary;

/**
 * Summarise @p t per op id: an array of #sp_op_summary sorted by op id
 * (g_array_unref it).
 */
GArray *sp_trace_op_summary(const sp_trace *t);
/** Print the summary as lines "op=<id> bytes=<n> start_us=<x> end_us=<y> time_us=<d>". */
void sp_trace_print_op_summary(const sp_trace *t, FILE *out);

/**
 * Marker used by FLOW fidelity inside transformed programs: a COMPUTE step whose
 * tag is SP_SIM_FLOW_TAG charges @c scale seconds plus @c count times the route
 * latency from the rank's host to @c peer's host (the latency terms of merged
 * steps), plus, for a pipeline's merged blocks (SP_STEP_PIPELINED), @c rows times
 * @c row_bytes over the route's bottleneck bandwidth to @c peer: its fill and drain
 * steps, each one hop of its largest message. Lowerings never emit it.
 */
#define SP_SIM_FLOW_TAG INT32_MIN

G_END_DECLS

#endif
