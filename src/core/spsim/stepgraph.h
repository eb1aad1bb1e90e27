/**
 * @file stepgraph.h
 * @brief One training step of a layout as a task graph: compute kernels and
 *        collectives of every micro-batch, layer and pipeline stage, with the streams
 *        the frameworks issue them on and the dependencies between them. An engine
 *        runs the graph (src/sim: SimGrid, with contention); sp_stepgraph_schedule()
 *        here runs it without contention, as a reference.
 *
 * ## Whose step
 * Every rank of a pipeline stage runs the same tasks (the ranks of a TP, SP, CP or DP
 * group are interchangeable in time), so the graph holds one representative rank per
 * stage: the first rank of the stage in spsim's rank order (tp fastest, pp slowest,
 * layout.h). The representative of stage s is global rank s x (world / pp).
 *
 * ## Streams
 * Tasks of one (stage, stream) run one at a time in the order of the task array, as
 * kernels on one CUDA stream do. Compute kernels run on SP_STREAM_COMPUTE; each kind
 * of collective on its own stream (Megatron-LM and NCCL give each process group its
 * own communicator and stream), so a gradient bucket's reduction on SP_STREAM_DP
 * overlaps the backward on SP_STREAM_COMPUTE once its dependencies are met.
 *
 * ## What a layer issues (Megatron-LM's transformer layer, Korthikanti et al. 2022)
 * Forward: norm; TP all-gather (with sequence parallelism) or nothing; QKV GEMM;
 * Ulysses all-to-alls of Q, K and V; attention (in cp blocks with the ring's K/V
 * transfers on SP_STREAM_RING overlapping them); all-to-all of the output; output
 * projection; TP reduce-scatter (or all-reduce); residual and norm; all-gather; MLP;
 * reduce-scatter (or all-reduce). Backward, in reverse: the row-parallel GEMMs wait
 * for the all-gather of their output gradient; the column-parallel GEMMs re-gather
 * their input for the weight gradient on the TP stream while the data gradient runs,
 * and reduce-scatter the data gradient while the weight gradient runs (Megatron's
 * overlapped backward of ColumnParallelLinear). Full recomputation re-runs the layer's
 * forward, collectives included, before its backward; selective recomputation re-runs
 * the attention core.
 * ISP and ZeRO-3 gather a layer's weights one layer ahead (two buffers) on their
 * stream and reduce-scatter its gradients after its weight gradients.
 * Data parallelism reduces gradients in buckets of sp_step_hw.dp_bucket_params
 * parameters, each launched when the last micro-batch's backward has produced it
 * (Megatron's overlapped gradient reduction); ZeRO-1/2 gather the updated parameters
 * in the same buckets ahead of the first forward that needs them (overlapped
 * parameter gather). The Adam step closes the step on every stage.
 *
 * ## Pipeline schedules
 * GPipe (all forwards, then all backwards), 1F1B, and Megatron-LM's interleaved 1F1B
 * when vpp > 1 (Narayanan et al. 2021), with its warm-up count and chunk order.
 * Activations and their gradients go to the next (previous) stage as SEND tasks on
 * SP_STREAM_PP; the receiving micro-batch waits for them.
 * With a2aoverlap=1 (MoE; layout.h) the steady state runs each forward paired with the
 * backward after it, one more forward in the warm-up, as Megatron-Core's combined 1F1B:
 * forward layer i beside backward layer n - 1 - i, each MoE layer pair's four expert
 * all-to-alls on SP_STREAM_SP between the other pass's kernels (stepgraph.c, pass_pair).
 */
#ifndef SPSIM_STEPGRAPH_H
#define SPSIM_STEPGRAPH_H

#include <glib.h>
#include <stdint.h>
#include "spsim/step.h"

G_BEGIN_DECLS

/** Streams of one rank: compute, then one per kind of collective (sp_comm_kind + 1). */
typedef enum {
  SP_STREAM_COMPUTE = 0,
  SP_STREAM_TP,
  SP_STREAM_SP,
  SP_STREAM_ISP,
  SP_STREAM_RING,
  SP_STREAM_PP,
  SP_STREAM_DP,
  SP_STREAM_COUNT
} sp_stream;

/** @return "compute", "tp", "sp", "isp", "ring", "pp", "dp". */
const char *sp_stream_name(sp_stream s);

/** Kinds of tasks. */
typedef enum {
  SP_TASK_COMPUTE = 0, /**< kernels on the GPU for @c seconds */
  SP_TASK_COLL,        /**< a collective of the rank's group (sp_comm @c comm) */
  SP_TASK_SEND         /**< pipeline send to stage @c peer (sp_comm @c comm, a send-recv pair) */
} sp_task_kind;

/** Where in the step a task belongs. */
typedef enum {
  SP_PHASE_FWD = 0,
  SP_PHASE_BWD,
  SP_PHASE_RECOMPUTE,
  SP_PHASE_STEP,   /**< once per step: gradient buckets, parameter gathers, optimizer */
  SP_PHASE_COUNT
} sp_task_phase;

/** @return "fwd", "bwd", "recompute", "step". */
const char *sp_task_phase_name(sp_task_phase p);

/** Most dependencies of one task. */
#define SP_TASK_MAX_DEPS 4

/** One task of the step graph. */
typedef struct {
  uint8_t kind;      /**< sp_task_kind */
  uint8_t stream;    /**< sp_stream */
  uint8_t phase;     /**< sp_task_phase */
  uint8_t ndeps;     /**< entries of @c deps in use */
  int32_t stage;     /**< pipeline stage (its representative rank runs it) */
  int32_t mb;        /**< micro-batch, -1 for per-step tasks */
  int32_t chunk;     /**< model chunk on the stage (interleaving), -1 when none */
  int32_t layer;     /**< global layer index, -1 when none */
  int32_t comm;      /**< COLL and SEND: index in sp_stepgraph.comms; -1 for COMPUTE */
  int32_t peer;      /**< SEND: destination stage */
  const char *what;  /**< static label */
  double seconds;    /**< COMPUTE: kernel-model time; COLL, SEND: priced time (sp_stepgraph_price) */
  uint32_t deps[SP_TASK_MAX_DEPS]; /**< tasks that must end before this one starts */
} sp_task;

/** Pipeline schedules. */
typedef enum {
  SP_SCHED_1F1B = 0, /**< 1F1B, interleaved when vpp > 1 */
  SP_SCHED_GPIPE,    /**< every forward, then every backward */
} sp_sched;

/** A step graph. */
typedef struct {
  int32_t stages;        /**< pipeline stages (representative ranks) */
  int32_t ranks_per_stage; /**< world / pp: the representative of stage s is s x ranks_per_stage */
  int64_t microbatches;
  sp_sched sched;
  GArray *tasks;         /**< of sp_task */
  GArray *comms;         /**< of sp_comm: the distinct collectives and sends, to price */
} sp_stepgraph;

/** Most tasks a step graph may have (about 0.5 GiB with their times, a minute of simulation). */
#define SP_STEPGRAPH_MAX_TASKS 4000000.0

/**
 * Build the step graph of @p l (checked by sp_layout_check against @p c's model,
 * world, sequence and batch). Compute times come from the kernel model of c->hw;
 * COLL and SEND tasks have no time until sp_stepgraph_price(). Errors: a layout
 * whose interleaved schedule cannot be formed (sp_layout_vpp_batches_ok),
 * SP_ERROR_UNSUPPORTED for a graph of more than SP_STEPGRAPH_MAX_TASKS tasks.
 */
sp_stepgraph *sp_stepgraph_build(const sp_step_ctx *c, const sp_layout *l, sp_sched sched, GError **err);
void sp_stepgraph_free(sp_stepgraph *g);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_stepgraph, sp_stepgraph_free)

/** Price every distinct collective once with c->price and set every COLL/SEND task's time. */
gboolean sp_stepgraph_price(sp_stepgraph *g, const sp_step_ctx *c, GError **err);

/**
 * Successors of every task, as compressed rows: task i's dependants are
 * (*succ)[(*off)[i] .. (*off)[i + 1]), in task order. g_free both.
 */
void sp_stepgraph_successors(const sp_stepgraph *g, uint32_t **off, uint32_t **succ);

/**
 * Run the graph without contention: each task starts when its stream's previous task
 * and its dependencies have ended, and lasts its @c seconds. @p start and @p end
 * (task count entries each, may be NULL) receive each task's times; @p makespan the
 * end of the last task. A cycle (a schedule that cannot run) is SP_ERROR_TRANSPORT.
 */
gboolean sp_stepgraph_schedule(const sp_stepgraph *g, double *start, double *end, double *makespan, GError **err);

/** Breakdown of a run of the graph, for its busiest stage. */
typedef struct {
  int32_t stage;                          /**< the stage whose compute stream is busiest (the first of equals) */
  double step_time;                       /**< end of the last task of any stage */
  double compute;                         /**< its compute stream busy time */
  double exposed[SP_COMM_KIND_COUNT];     /**< time its compute stream waits while collectives of the kind run (shared equally when several do) */
  double comm[SP_COMM_KIND_COUNT];        /**< busy time of each collective stream */
  double idle;                            /**< compute idle with no collective of its own running: pipeline bubble and waits on other stages */
} sp_stepgraph_breakdown;

/** Break a run (task times @p start, @p end) down for its busiest stage. */
void sp_stepgraph_breakdown_of(const sp_stepgraph *g, const double *start, const double *end, sp_stepgraph_breakdown *b);

/**
 * Write a run of @p g (task times @p start, @p end) as Chrome trace JSON (Perfetto):
 * one process per stage, one thread per stream, every task that takes time with its
 * micro-batch, chunk, layer, collective, group size and bytes. @p path "-" is standard
 * output.
 */
gboolean sp_stepgraph_write_chrome(const sp_stepgraph *g, const double *start, const double *end, const char *path,
                                   GError **err);

G_END_DECLS

#endif
