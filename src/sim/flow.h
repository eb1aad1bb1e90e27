/* FLOW fidelity: a program transform that coalesces communication (src/sim only).
 *
 * A rank's program is cut into communication blocks (the SEND/RECV posts up to
 * their WAIT) and the local steps that follow each block. Consecutive blocks that
 * post to the same peers in the same order (each peer at most once per direction
 * per block) form a group; a group of k blocks becomes ONE block that sends to
 * (receives from) each peer the summed bytes, followed by one SP_SIM_FLOW_TAG
 * marker charging the group's local-step costs plus (k - 1) route latencies to
 * the group's first send peer (else its first receive peer): the latency terms
 * of the k - 1 steps that were merged away.
 *
 * Inside one block, several posts to the same (dir, peer) (e.g. the channels of a
 * channelled ring) are coalesced into one entry of their summed bytes: concurrent
 * messages on one route finish together as one message of their summed size would.
 * The entry counts for all of them when message sequences are aligned; when a peer
 * needs a cut between such messages (it posts them in different blocks) the
 * reconciliation fails with sp_flow_plan_unaligned() TRUE, and the caller retries
 * with coalescing off (sp_flow_transform does). A group never spans two op ids.
 *
 * A lock-step pipeline's blocks (posts marked SP_STEP_PIPELINED: NVLS-tree)
 * post to changing subsets of the same links while it fills and drains; consecutive
 * such blocks of one op form one group whose entries are the union of their (dir,
 * peer) links. Its marker also charges the fill and drain: (blocks - chunks) hops of
 * the largest message posted with SP_STEP_PIPE_PACE, over its route's bottleneck.
 *
 * Groups must cut every pair's message sequence at the same places on both ends
 * (rank A merges its messages 3..7 to B into one iff B merges its messages 3..7
 * from A into one). Groups chosen per rank are therefore reconciled globally:
 * a cut present on one end only splits the other end's group, until a fixpoint.
 * Ranks whose groups were split are summarised again from their program
 * (sp_flow_plan_needs / sp_flow_plan_refine), so callers that lower on demand
 * keep only summaries in memory.
 */
#ifndef SPSIM_SIM_FLOW_H
#define SPSIM_SIM_FLOW_H

#include <glib.h>
#include <stdint.h>
#include "spsim/program.h"

G_BEGIN_DECLS

/** Seconds a local step of @p rank costs (cost mode); NULL callback = free. */
typedef double (*sp_flow_cost_fn)(void *ud, int32_t rank, const sp_step *s);

typedef struct sp_flow_plan sp_flow_plan;

sp_flow_plan *sp_flow_plan_new(int32_t world, sp_flow_cost_fn cost, void *cost_ud);
void sp_flow_plan_free(sp_flow_plan *fp);
/** Coalesce a block's posts to one (dir, peer) (default TRUE); set before adding programs. */
void sp_flow_plan_set_coalesce(sp_flow_plan *fp, gboolean on);
/** @return TRUE when sp_flow_plan_reconcile failed on a cut inside a coalesced entry. */
gboolean sp_flow_plan_unaligned(const sp_flow_plan *fp);
/** Summarise @p p (its rank must be in the world; each rank once). */
gboolean sp_flow_plan_add(sp_flow_plan *fp, const sp_program *p, GError **err);
/** Make group boundaries agree between peers (after every rank was added). */
gboolean sp_flow_plan_reconcile(sp_flow_plan *fp, GError **err);
/** @return TRUE when @p rank must be summarised again with sp_flow_plan_refine. */
gboolean sp_flow_plan_needs(const sp_flow_plan *fp, int32_t rank);
/** Summarise @p p again along the reconciled group boundaries. */
gboolean sp_flow_plan_refine(sp_flow_plan *fp, const sp_program *p, GError **err);
/**
 * Streaming form of sp_flow_plan_add (@p refine FALSE) and sp_flow_plan_refine
 * (@p refine TRUE, for a rank sp_flow_plan_needs): feed the rank's steps in
 * program order with sp_flow_sum_feed, then sp_flow_sum_end (which frees the
 * summary, also on failure). @return NULL with @p err set for a rank outside the
 * world, added twice, or not needing a refine. A summary writes only its own
 * rank's entry of the plan: distinct ranks may be summarised on concurrent
 * threads, provided no other call on the plan runs meanwhile and the cost
 * callback is thread-safe for the steps fed (or never called).
 */
typedef struct sp_flow_sum sp_flow_sum;
sp_flow_sum *sp_flow_plan_begin(sp_flow_plan *fp, int32_t rank, gboolean refine, GError **err);
void sp_flow_sum_feed(sp_flow_sum *su, const sp_step *steps, guint n);

/* Feed @p nblocks blocks that each post @p posts (n sends and receives, then a
 * WAIT), the first with the bytes of @p posts, all together with @p totals bytes
 * per post: the summary is the one of feeding them one by one. FALSE (nothing
 * fed) where that summary would not merge the blocks (a refine pass, a block
 * being read, posts to one peer twice without coalescing): then feed the steps. */
gboolean sp_flow_sum_feed_repeat(sp_flow_sum *su, const sp_step *posts, guint n, uint64_t nblocks,
                                 const uint64_t *totals);
gboolean sp_flow_sum_end(sp_flow_sum *su, GError **err);
/** @return the merged program of @p rank (new; cost mode only: one scratch buffer). */
sp_program *sp_flow_plan_emit(const sp_flow_plan *fp, int32_t rank);
/** Number of blocks and groups of @p rank (tests, diagnostics). */
void sp_flow_plan_stats(const sp_flow_plan *fp, int32_t rank, uint32_t *blocks, uint32_t *groups);

/** All of the above on in-memory programs: @p out receives world new programs. */
gboolean sp_flow_transform(sp_program *const *progs, int32_t world, sp_flow_cost_fn cost,
                           void *cost_ud, sp_program ***out, GError **err);

G_END_DECLS

#endif
