/* Engine side of the step graph: runs an sp_stepgraph on the loaded SimGrid platform,
 * so that overlap, contention between the collectives of one rank, pipeline bubbles
 * and the slowdown of kernels while collectives run come out of the simulation.
 * Only src/sim includes SimGrid. */
#ifndef SPSIM_STEPSIM_H
#define SPSIM_STEPSIM_H

#include <glib.h>
#include <stdint.h>
#include "spsim/stepgraph.h"

G_BEGIN_DECLS

/**
 * Compute slowdown while a collective runs on the same GPU, when the platform's host
 * has no `comm_slowdown` property: kernels overlapped with NCCL collectives ran 18.9 %
 * slower on average on A100 and H100 (Hossain et al., "Characterizing
 * Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning",
 * arXiv:2507.03114, 2025): NCCL's kernels hold SMs and HBM bandwidth.
 */
#define SP_STEPSIM_COMM_SLOWDOWN 0.189

/**
 * Run @p g on the loaded platform (sp_sim_init), stage s on the host of rank
 * s x g->ranks_per_stage (sp_sim_host_of):
 * - a COMPUTE task executes seconds x host speed flops on its host; while k
 *   collectives of the same rank run, kernels get 1 - k f of the GPU, with
 *   f = slowdown / (1 + slowdown) (SimGrid shares the host max-min fairly; each
 *   collective holds a bounded execution of f x speed);
 * - a COLL task, priced alone (sp_stepgraph_price) at T seconds, moves
 *   (T - latency) x bandwidth bytes over the route from its host to the first member
 *   of its group on another node (else the next member): alone it takes exactly T,
 *   beside the rank's other collectives and pipeline sends it shares that route's
 *   links (its NIC or NVLink ports) with them;
 * - a SEND task moves its bytes to the next stage's host over the platform after the
 *   host's coll_latency.
 * @p slowdown < 0 reads each host's `comm_slowdown` property (default
 * SP_STEPSIM_COMM_SLOWDOWN). @p start, @p end (task count entries each, may be NULL)
 * receive the simulated times from the run's start; @p makespan the last end.
 */
gboolean sp_stepsim_run(const sp_stepgraph *g, double slowdown, double *start, double *end, double *makespan,
                        GError **err);

/**
 * sp_stepsim_run with fewer SimGrid activities, as the what-if runs its graphs: a chain
 * of kernels on one stream, each but the last waited for by nothing but the next and
 * each after the first free to start when the chain does, runs as one execution. The
 * first task of a chain spans it and the others start and end with it, so the makespan,
 * the compute time and the breakdown are those of sp_stepsim_run up to rounding; the
 * other tasks' times are too.
 */
gboolean sp_stepsim_run_merged(const sp_stepgraph *g, double slowdown, double *start, double *end,
                               double *makespan, GError **err);

/** What a simulated step leaves for traces: the graph and every task's times. */
typedef struct {
  sp_stepgraph *g;
  double *start, *end;
  sp_stepgraph_breakdown bd;
} sp_stepsim_timeline;

/** Free what @p t holds (not @p t). */
void sp_stepsim_timeline_clear(sp_stepsim_timeline *t);

/**
 * Price and run the step graph of @p l (1F1B, interleaved when vpp > 1) and put its
 * outcome in @p r, which sp_step_eval() has filled: step time and throughput, compute,
 * exposed and total communication per kind and the bubble (idle time) of the busiest
 * stage; r->simulated is set, r->closed_form keeps the closed form. @p engine runs
 * the graph on the loaded platform (sp_stepsim_run), else without contention
 * (sp_stepgraph_schedule). @p keep (may be NULL) receives the timeline. A large graph
 * on the platform runs as two shorter steps, extrapolated (SP_STEPSIM_PERIODIC_TASKS).
 */
gboolean sp_stepsim_eval(const sp_step_ctx *c, const sp_layout *l, gboolean engine, double slowdown,
                         sp_step_result *r, sp_stepsim_timeline *keep, GError **err);

/** Tasks from which sp_stepsim_eval runs a step of m > 5 pp micro-batches on the
 *  platform as two steps of 2 pp and 3 pp and extrapolates (its schedule repeats once the
 *  pipeline is full); smaller graphs, traces and runs without the platform run whole. */
#define SP_STEPSIM_PERIODIC_TASKS 250000

/** Set that threshold (tasks, estimated as micro-batches x layers x 40 like
 *  sp_stepgraph_build's limit); 0: every graph that can, -1: none. */
void sp_stepsim_set_periodic(int64_t min_tasks);
/** Steps this process has extrapolated so far (diagnostics, tests). */
guint sp_stepsim_periodic_runs(void);

/** Step graphs whose simulation this process took from an earlier run of the same
 *  graph (same tasks, prices and slowdown: the result is the same bit for bit) instead
 *  of running it again (diagnostics, tests). */
guint sp_stepsim_memo_hits(void);
/** Forget the step graphs simulated so far (tests). */
void sp_stepsim_memo_clear(void);

G_END_DECLS

#endif
