/**
 * @file step_replay.h
 * @brief Data mode of the step graph: the communication of a step graph as per-rank
 *        programs that carry real bytes, with the expected result of every call.
 *
 * The what-if prices a layout by running its step graph (stepgraph.h) for cost; the
 * replay runs the same graph's communication tasks with data, so that what was
 * priced is also what is checked.
 *
 * ## Ranks
 * A step graph holds one representative rank per pipeline stage. The replay runs the
 * representatives and every rank they communicate with: the members of each group
 * of their collectives ({rep, rep + stride, ...}) and the representatives of the
 * stages they send to. These ranks are numbered 0..n-1 in increasing global rank;
 * sp_step_replay_ranks() maps them back (an engine runs local rank i on the host of
 * global rank ranks[i]).
 *
 * ## Order
 * Every COLL and SEND task becomes one call (sp_coll_spec, lowered with
 * sp_lower_coll as sp_comm_coll_spec describes it: same collective, algorithm and
 * ring channels as priced), appended to the programs of its members in one
 * topological order of the graph (each task after its dependencies and after the
 * task before it on its stream, ready tasks first come first served). Each
 * rank runs the calls it takes part in, in that one global order, so the members of
 * a call always reach it: the replay cannot deadlock. Call k uses op id k and the
 * message tags [1024 k, 1024 k + 1024).
 *
 * ## Data
 * Call k's input on the member of global rank g is sp_fill_pattern(seed
 * SP_CASE_SEED(g) ^ (k + 1) * 0x9E3779B97F4A7C15); its expected outputs come from
 * sp_coll_reference. Every call carries at most @c max_elems BF16 elements per block
 * (the reduced size): the group, its order and the algorithm are those priced, the
 * bytes are not. Compute tasks carry no data (the operation checks of `verify`
 * cover the kernels' numerics).
 */
#ifndef SPSIM_STEP_REPLAY_H
#define SPSIM_STEP_REPLAY_H

#include <glib.h>
#include <stdint.h>
#include "spsim/program.h"
#include "spsim/stepgraph.h"

G_BEGIN_DECLS

/** The communication of one step graph, ready to run in data mode. */
typedef struct sp_step_replay sp_step_replay;

/** Most bytes of buffers (inputs, outputs, expected results) a replay may allocate. */
#define SP_STEP_REPLAY_MAX_BYTES ((uint64_t)1 << 30)

/**
 * Reduce @p c and @p l to the smallest step of the same structure: the same degrees,
 * interleaving, ZeRO stage, recomputation and micro-batch size, one layer per model
 * chunk (pp x vpp layers; a layout with ppfirst/pplast keeps the model's layers) and
 * pp micro-batches per replica (two without pipelining, so that gradients
 * accumulate). @p m receives the reduced model (a shallow copy sharing @p c's
 * strings: do not free), @p rc the context pointing to it, @p rl the layout checked
 * against it. FALSE when the reduced layout is invalid (the message says why).
 */
gboolean sp_step_replay_reduce(const sp_step_ctx *c, const sp_layout *l, sp_model *m, sp_step_ctx *rc,
                               sp_layout *rl, GError **err);

/**
 * Build the replay of @p g (built for @p world ranks with @p gpus_per_node GPUs per
 * node). @p max_elems (>= 1) caps each call's elements per block. Errors:
 * SP_ERROR_UNSUPPORTED when the buffers would exceed #SP_STEP_REPLAY_MAX_BYTES or the
 * calls the tags can number; SP_ERROR_INVALID for a graph whose dependencies form a
 * cycle.
 */
sp_step_replay *sp_step_replay_new(const sp_stepgraph *g, int32_t world, int32_t gpus_per_node,
                                   uint64_t max_elems, GError **err);
void sp_step_replay_free(sp_step_replay *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_step_replay, sp_step_replay_free)

/** @return the number of ranks the replay runs. */
int32_t sp_step_replay_nranks(const sp_step_replay *r);
/** @return the global rank of each local rank (sp_step_replay_nranks entries, increasing). */
const int32_t *sp_step_replay_ranks(const sp_step_replay *r);
/** @return the programs of the local ranks (peers are local ranks). */
sp_program *const *sp_step_replay_programs(const sp_step_replay *r);
/** @return the buffer tables of the local ranks, inputs filled, outputs zeroed. */
void **const *sp_step_replay_bufs(const sp_step_replay *r);
/** @return the calls: collectives (COLL tasks) in @p colls, pipeline sends in @p sends. */
void sp_step_replay_counts(const sp_step_replay *r, guint *colls, guint *sends);

/** Flip one output byte of global rank @p rank (a test of the check); FALSE when it has no output. */
gboolean sp_step_replay_corrupt(sp_step_replay *r, int32_t rank);

/**
 * After a run: compare every call's outputs with the expected ones. TRUE when all
 * match; else FALSE with the first difference (in call order, then member order) in
 * @p bad_rank (global), @p bad_call and @p bad_offset (bytes into the output) and
 * SP_ERROR_MISMATCH naming the call's task.
 */
gboolean sp_step_replay_check(const sp_step_replay *r, int32_t *bad_rank, guint *bad_call, uint64_t *bad_offset,
                              GError **err);

/**
 * After a run: compare the outputs of local rank @p local (0..sp_step_replay_nranks-1)
 * with the expected ones, as sp_step_replay_check does for all (an engine where each
 * process runs one local rank checks its own). TRUE when they match or the rank has
 * no outputs; else FALSE with the first difference (in call order) in @p bad_call and
 * @p bad_offset and SP_ERROR_MISMATCH naming the call's task; SP_ERROR_INVALID for a
 * @p local out of range.
 */
gboolean sp_step_replay_check_rank(const sp_step_replay *r, int32_t local, guint *bad_call, uint64_t *bad_offset,
                                   GError **err);

/** @return whether local rank @p local receives any output (FALSE when out of range). */
gboolean sp_step_replay_has_outputs(const sp_step_replay *r, int32_t local);

/**
 * @return the checksum (sp_checksum, chained) of local rank @p local's outputs in call
 * order, as they are in its buffers now; 0 for a rank without outputs.
 */
uint64_t sp_step_replay_checksum(const sp_step_replay *r, int32_t local);

G_END_DECLS

#endif
