/**
 * @file coll.h
 * @brief Collectives on a group, their lowering into per-rank programs, and their
 *        reference semantics computed globally without communication.
 *
 * Lowering is the only place where algorithms live: every engine runs its output,
 * so simulated cost and real execution come from the same schedule.
 *
 * Buffer convention (element counts; n = group size, c = spec->count):
 * | collective     | in        | out       | meaning                                      |
 * |----------------|-----------|-----------|----------------------------------------------|
 * | all-reduce     | c         | c         | out = op over ranks of in                    |
 * | all-gather     | c         | n*c       | out block j = in of group member j           |
 * | reduce-scatter | n*c       | c         | out = op over ranks of in block (my index)   |
 * | all-to-all     | n*c       | n*c       | out block j = in block (my index) of member j|
 * | broadcast      | c         | c         | out = in of the root                         |
 * | reduce         | c         | c         | root's out = op over ranks; others untouched |
 * | send-recv      | c         | c         | member 1's out = member 0's in (n == 2)      |
 *
 * Below, i is a member's group index, x[j] member j's input (the block or
 * segment concerned), ⊕ the reduction operator and indices are taken mod n.
 * Every ⊕ of dtype.h is commutative bit for bit (IEEE a+b == b+a, MAX/MIN with
 * -0 < +0 and canonical NaN, wrapping integers), so only the grouping matters.
 * For f16/bf16 every partial result is rounded back to the half type after each
 * ⊕ (the buffers a real schedule moves are half), in f32 arithmetic with
 * round-to-nearest-even. With n == 1 every collective is one local COPY (no
 * scale). Zero-length messages are never posted (both sides skip them), so a
 * count of 0 gives empty programs.
 *
 * Algorithms and their fixed reduction orders:
 * - RING (chunked: each segment/block is cut into chunks of chunk_bytes,
 *   default #SP_RING_DEFAULT_CHUNK_BYTES; chunk round r runs the whole ring on
 *   chunk r; every ring step sends one chunk and receives one chunk):
 *   - all-reduce: count is cut into n segments, the first count % n one element
 *     longer. Reduce-scatter (n-1 steps; at step k member i sends segment
 *     i-k-1 to i+1 and receives segment i-k-2 from i-1, then ⊕ its own input),
 *     then all-gather (n-1 steps; step k sends segment i-k, receives i-k-1).
 *     Segment s = (((x[s+1] ⊕ x[s+2]) ⊕ x[s+3]) ⊕ ... ) ⊕ x[s]; AVG divides
 *     segment s once at member s, before the all-gather.
 *   - reduce-scatter: the same n-1 steps on the blocks of in; block s (member
 *     s's out) = (((x[s+1] ⊕ x[s+2]) ⊕ ...) ⊕ x[s]).
 *   - all-gather: n-1 steps; step k sends block i-k, receives block i-k-1.
 *   - broadcast: pipelined chain root -> root+1 -> ... -> root-1 (chunks; on a
 *     platform the engine picks the chunk of least time, sp_sim_coll_resolve).
 *   - reduce: pipelined chain root+1 -> root+2 -> ... -> root; result
 *     (((x[root+1] ⊕ x[root+2]) ⊕ ...) ⊕ x[root]).
 *   - all-to-all: not supported (use DIRECT).
 * - RING with channels (all-reduce, all-gather, reduce-scatter; C =
 *   spec->channels > 1, B = spec->channel_block): the data is split into C
 *   contiguous parts, the first (per-member element count) % C one element
 *   longer: all-reduce splits count, all-gather and reduce-scatter split every
 *   member's block of count elements the same way (part c = elements
 *   [off_c, off_c + len_c) of each block). Channel c runs the schedule above on
 *   its part over a permutation P_c of the members: position q of the ring is
 *   member P_c[q]; for the block of B members starting at b = floor(q / B) B,
 *   of length L = min(B, n - b), P_c[q] = b + ((q - b + c) mod L) (B = 0 or 1,
 *   or c a multiple of L: identity). So channel c leaves every node through a
 *   different member (and NIC). Orders, with indices mod n over positions:
 *   all-reduce part c is cut into n segments as above; segment s =
 *   ((x[P_c[s+1]] ⊕ x[P_c[s+2]]) ⊕ ...) ⊕ x[P_c[s]], finished (and AVG-divided)
 *   at member P_c[s]; reduce-scatter: part c of member m's block, with m =
 *   P_c[q], = ((x[P_c[q+1]] ⊕ x[P_c[q+2]]) ⊕ ...) ⊕ x[P_c[q]]; all-gather has
 *   no reduction. Chunk rounds and steps are taken in lock step: step k of
 *   round r posts every channel's sends and receives (channel 0 first) before
 *   one WAIT, then each channel's reduction, so no channel waits for another's
 *   step beyond that shared WAIT. Every channel has its own pair of chunk
 *   scratch buffers. Two channels may post to the same peer in one block;
 *   their messages share the tag and match in posting order (both ends post
 *   in channel order). C == 1 is exactly the single ring above.
 *   Broadcast and reduce chains ignore channels.
 * - DIRECT (one message per pair, no chunking):
 *   - all-to-all: own block copied locally; block i+k sent to member i+k and
 *     block i-k received from member i-k for k = 1..n-1, all posted before one
 *     wait (NCCL's grouped point-to-point). Cost only (no local steps) with
 *     channel_block = B dividing n (members as n/B nodes of B, set by the SimGrid
 *     engine in FLOW fidelity): member (u, l) sends its node's other B-1 blocks as
 *     one message to (u, l+1 mod B) and node v's B blocks as one to (v, l), so each
 *     NVLink port and NIC carries the same bytes in n/B messages, not n-1.
 *   - all-gather: one step, everyone sends its block to everyone.
 *   - reduce-scatter: one step, member j receives block j from everyone;
 *     result ((x[0] ⊕ x[1]) ⊕ ...) ⊕ x[n-1] (index order).
 *   - all-reduce: direct reduce-scatter over the n segments defined as for RING
 *     (index order 0..n-1, AVG divides at the segment's owner) + direct all-gather.
 *   - broadcast: the root sends to every member. reduce: every member sends to
 *     the root, which reduces in index order 0..n-1.
 * - TREE all-reduce: NCCL's double binary tree (spsim/dbtree.h): nodes of
 *   channel_block members (1 when it does not divide n), 2 x block tree instances,
 *   instance k on segment k of the vector (sp_seg_off over the instances), chunked
 *   (chunk_bytes, default #SP_RING_DEFAULT_CHUNK_BYTES) and pipelined. In instance
 *   k the sum of member m's subtree is x[m] ⊕ sum(chain child) ⊕ sum(child node 0)
 *   ⊕ sum(child node 1) (left to right, absent ones skipped); the root's sum is the
 *   result (AVG divides it once, at the root) and comes down the tree unchanged.
 * - TREE, the other collectives (whole messages, chunk_bytes ignored). With p the
 *   largest power of two <= n and r = n - p, members 2j and 2j+1 (j < r) first
 *   fold into one "virtual" member j (the odd one keeps w[j] = x[2j] ⊕ x[2j+1]);
 *   member m >= 2r is virtual m - r with w = x[m]; virtual j owns the contiguous
 *   members [start(j), start(j+1)) and the odd member hands results back at the end.
 *   - reduce-scatter: recursive halving over the p virtual members (step k
 *     exchanges with v XOR p/2^(k+1) the half of the current block range that
 *     the partner keeps). Every block: v = w; for d = p/2, p/4, .., 1: for
 *     j < d: v[j] = v[j] ⊕ v[j+d]; the result is v[0].
 *   - all-gather: recursive doubling over virtual members (contiguous block
 *     ranges), no reduction.
 *   - broadcast: binomial tree in ceil(log2 n) rounds; with u = (i - root) mod n,
 *     in round t members u < 2^t send to u + 2^t.
 *   - reduce: the reverse binomial tree: a[u] = x[root+u]; for t = ceil(log2 n)-1
 *     down to 0: for u < 2^t with u + 2^t < n: a[u] = a[u] ⊕ a[u+2^t]; the
 *     root's result is a[0].
 *   - all-to-all: not supported (use DIRECT).
 * - send-recv: one message from member 0 to member 1 under every algorithm.
 * - NVLS (all-reduce, all-gather, reduce-scatter; others: not supported): the
 *   programs, messages and reduction order of DIRECT. Only the cost differs: the
 *   engine prices them as NVLink SHARP, where the NVSwitch reduces and multicasts,
 *   so each GPU sends its data to the switch once and receives the result once
 *   (spsim/tuning.h, sp_tune_cost_of).
 * - NVLS_TREE, COLLNET_DIRECT, COLLNET_CHAIN (all-reduce only; lower/lower_hier.c):
 *   nodes of B = sp_dbtree_block(n, channel_block) members, the vector in B segments
 *   (segment l to local index l of every node). Node partial of segment l: index order
 *   ((x[0] ⊕ x[1]) ⊕ ...) ⊕ x[B-1] over the node's members (NVLS_TREE, COLLNET_DIRECT),
 *   or the chain from local l+1: ((x[l+1] ⊕ x[l+2]) ⊕ ...) ⊕ x[l] (COLLNET_CHAIN). Across
 *   the N = n / B nodes: NVLS_TREE folds the node partials over NCCL's double binary tree
 *   of the nodes as TREE does (2 instances, instance k on half k of the segment);
 *   COLLNET_* in node order ((p[0] ⊕ p[1]) ⊕ ...) ⊕ p[N-1]. AVG divides once where the
 *   total is complete. The engine prices the exchanges as the switches run them
 *   (spsim/tuning.h, sp_tune_cost_of).
 *
 * AVG is SUM through the schedule, then one SCALE (divide by n) where the final
 * value is produced; on integer dtypes the division truncates toward zero.
 *
 * Steps carry op = spec->op_id and phase = the algorithm's step index (ring
 * step, tree round, chunk round * steps per round + step); message tags are
 * tag + (phase mod 1024), safe because messages of one (src, dst, tag) match in
 * posting order. Peers are global ranks (spec->ranks).
 */
#ifndef SPSIM_COLL_H
#define SPSIM_COLL_H

#include <glib.h>
#include <stdint.h>
#include "spsim/dtype.h"
#include "spsim/program.h"

G_BEGIN_DECLS

/** Collective kinds. */
typedef enum {
  SP_COLL_ALL_REDUCE = 0,
  SP_COLL_ALL_GATHER,
  SP_COLL_REDUCE_SCATTER,
  SP_COLL_ALL_TO_ALL,
  SP_COLL_BROADCAST,
  SP_COLL_REDUCE,
  SP_COLL_SEND_RECV,
  SP_COLL_COUNT
} sp_coll;

/** Algorithms a collective can be lowered with. */
typedef enum {
  SP_ALGO_AUTO = 0, /**< the default policy (sp_algo_choose) */
  SP_ALGO_RING,     /**< ring, chunked and pipelined */
  SP_ALGO_DIRECT,   /**< direct: a message per pair of members */
  SP_ALGO_TREE,     /**< all-reduce: NCCL's double binary tree; others: binomial tree or
                         recursive doubling/halving */
  SP_ALGO_NVLS,     /**< NVLink SHARP: the NVSwitch reduces (all-reduce, all-gather,
                         reduce-scatter); lowered as DIRECT, priced as the switch does it */
  SP_ALGO_PAT,      /**< NCCL's PAT (all-gather, reduce-scatter): log2 steps of recursive
                         doubling/halving (lower_pat.c); NCCL runs it at one GPU per node */
  SP_ALGO_NVLS_TREE, /**< all-reduce: NVLink SHARP reduce-scatter inside every node, NCCL's
                          double binary tree across nodes, NVLink SHARP all-gather
                          (lower_hier.c); NCCL's choice across H100 nodes */
  SP_ALGO_COLLNET_DIRECT, /**< all-reduce: reduce-scatter inside every node, one reduction
                               per segment in the network switches (SHARP), all-gather
                               (lower_hier.c); needs the platform's sharp property */
  SP_ALGO_COLLNET_CHAIN,  /**< all-reduce: a chain inside every node to the GPU whose NIC
                               carries the segment, the switches' reduction, the chain back
                               (lower_hier.c); needs the platform's sharp property */
  SP_ALGO_COUNT
} sp_algo;

/**
 * NCCL's protocols. A protocol is a cost attribute of a lowered collective: the
 * engine prices its messages with the protocol's bandwidth fraction and latencies
 * (spsim/tuning.h); it never changes the program, its messages or its data.
 */
typedef enum {
  SP_PROTO_AUTO = 0, /**< the tuning model's choice (engine), Simple elsewhere */
  SP_PROTO_LL,       /**< 8-byte lines of 4 data bytes + 4 flag bytes: low latency, 1/2 bandwidth */
  SP_PROTO_LL128,    /**< 128-byte lines of 120 data bytes + 8 flag bytes */
  SP_PROTO_SIMPLE,   /**< bulk copies with a flag per step: full bandwidth, highest latency */
  SP_PROTO_COUNT
} sp_proto;

/** Default chunk of the RING algorithms when spec->chunk_bytes is 0 (4 MiB). */
#define SP_RING_DEFAULT_CHUNK_BYTES ((uint64_t)4 << 20)
/** AUTO uses TREE for all-reduces of fewer bytes than this (64 KiB), RING above. */
#define SP_TREE_MAX_BYTES ((uint64_t)64 << 10)

/** One collective call. */
typedef struct {
  sp_coll coll;
  sp_algo algo;
  sp_dtype dtype;
  sp_redop redop;          /**< reducing collectives */
  const int32_t *ranks;    /**< group members' global ranks, in group order (borrowed) */
  int32_t n;               /**< group size, >= 1 */
  uint64_t count;          /**< elements, see the table above */
  int32_t root;            /**< group index of the root (broadcast, reduce) */
  uint64_t chunk_bytes;    /**< pipelining chunk (0: the algorithm's default) */
  uint32_t op_id;          /**< recorded in every step (traces) */
  int32_t tag;             /**< base tag; a lowering uses tags in [tag, tag + 1024) */
  int32_t channels;        /**< RING all-reduce / all-gather / reduce-scatter: rings run
                                concurrently, each on 1/channels of the data (0 or 1: one
                                ring; at most #SP_MAX_CHANNELS); other algorithms and
                                collectives ignore it */
  int32_t channel_block;   /**< members per block (one node's members, in group order)
                                rotated by c in channel c's ring (0 or 1: no rotation);
                                cost-only DIRECT all-to-all: by rail (above) */
  sp_proto proto;          /**< protocol the engine prices (cost only; AUTO: the tuning model) */
  gboolean no_hier;        /**< AUTO on a platform leaves NCCL's hierarchical all-reduces
                                (NVLS-tree, CollNet) out of its choice; an explicit algo
                                ignores it */
} sp_coll_spec;

/** Largest sp_coll_spec.channels. */
#define SP_MAX_CHANNELS 64

/** @return "all-reduce", "all-gather", ... */
const char *sp_coll_name(sp_coll c);
/** @return one line on what @p c computes ("out = in of the root", ...). */
const char *sp_coll_semantics(sp_coll c);
/** Parse a collective name. */
gboolean sp_coll_parse(const char *s, sp_coll *out, GError **err);
/** @return "auto", "ring", "direct", "tree", "nvls", "pat", "nvls-tree", "collnet-direct",
 *  "collnet-chain". */
const char *sp_algo_name(sp_algo a);
/** Parse an algorithm name. */
gboolean sp_algo_parse(const char *s, sp_algo *out, GError **err);
/** @return "auto", "LL", "LL128", "Simple" (NCCL's spelling). */
const char *sp_proto_name(sp_proto p);
/** Parse a protocol name (case-insensitive: ll, ll128, simple, auto). */
gboolean sp_proto_parse(const char *s, sp_proto *out, GError **err);

/**
 * Check sizes, group (distinct non-negative ranks), root, dtype/op pairing.
 * Requires n >= 1, root in [0, n) for broadcast and reduce, n == 2 for send-recv,
 * n * count * element size representable, tag in [0, INT32_MAX - 1024],
 * channels in [0, #SP_MAX_CHANNELS] and channel_block >= 0.
 * AVG is allowed on integer dtypes (truncating division). The (collective,
 * algorithm) pair is checked by sp_lower_coll / sp_coll_reference.
 */
gboolean sp_coll_spec_validate(const sp_coll_spec *spec, GError **err);
/** Elements of the input / output buffer of every member. */
uint64_t sp_coll_in_count(const sp_coll_spec *spec);
uint64_t sp_coll_out_count(const sp_coll_spec *spec);
/**
 * The algorithm AUTO resolves to for this spec without a platform (deterministic);
 * an explicit spec->algo is returned as is. Policy: all-reduce -> TREE when count *
 * element size < #SP_TREE_MAX_BYTES, else RING; all-gather, reduce-scatter ->
 * RING; broadcast, reduce -> RING (NCCL's pipelined chain: NCCL has no other
 * algorithm for them); all-to-all, send-recv -> DIRECT. On a platform the engine
 * resolves AUTO with NCCL's tuning model instead (spsim/tuning.h,
 * sp_sim_coll_resolve) and lowers the resolved spec.
 */
sp_algo sp_algo_choose(const sp_coll_spec *spec);
/** @return the group index of @p rank, or -1 when it is not a member. */
int32_t sp_coll_index_of(const sp_coll_spec *spec, int32_t rank);

/**
 * Append the steps @p prog->rank runs for @p spec. @p in_buf and @p out_buf are
 * buffers of @p prog sized by the convention above; scratch buffers are added as
 * needed. A rank outside the group gets no steps. @p in_buf == @p out_buf (in
 * place) is accepted where in and out have the same size (all-reduce,
 * all-to-all, broadcast, reduce, send-recv): the input is first copied to a
 * scratch buffer. An unsupported (collective, algorithm) pair fails with
 * SP_ERROR_UNSUPPORTED naming the supported algorithms.
 */
gboolean sp_lower_coll(sp_program *prog, const sp_coll_spec *spec,
                       uint32_t in_buf, uint32_t out_buf, GError **err);

/**
 * Receives the steps of sp_lower_coll_stream in program order, in batches of at
 * most a few hundred; @p steps are valid during the call only.
 */
typedef void (*sp_step_sink)(void *ud, const sp_program *prog, const sp_step *steps, guint n);

/**
 * sp_lower_coll that hands the steps to @p sink instead of keeping them: the
 * buffers are still added to @p prog, whose step list is used as a small batch
 * and left as it was. Consumers that only read a program once (the FLOW
 * summary of the SimGrid engine) lower huge groups without materialising
 * megabytes of steps per rank. @p comm_only omits the local steps (COPY,
 * REDUCE, SCALE, FILL), for consumers that charge them nothing.
 */
gboolean sp_lower_coll_stream(sp_program *prog, const sp_coll_spec *spec, uint32_t in_buf,
                              uint32_t out_buf, gboolean comm_only, sp_step_sink sink,
                              void *sink_ud, GError **err);

/**
 * sp_lower_coll_stream for member @p me (spec->ranks[me] == prog->rank) of a @p spec the
 * caller has already checked with sp_coll_spec_validate: neither the check nor the
 * search for the member is done again. A consumer that lowers every member of a group
 * of n in turn (the FLOW summary) would otherwise pay n^2 log n for them.
 */
gboolean sp_lower_coll_stream_member(sp_program *prog, const sp_coll_spec *spec, int32_t me, uint32_t in_buf,
                                     uint32_t out_buf, gboolean comm_only, sp_step_sink sink, void *sink_ud,
                                     GError **err);

/**
 * The communication of member @p me of a RING all-reduce, reduce-scatter or
 * all-gather when every block of its schedule posts to the same peers (no chunk
 * is empty): the first block's posts (@p posts, at most 2 * #SP_MAX_CHANNELS,
 * as sp_lower_coll emits them), the number of blocks (@p nblocks: WAITs with
 * posts) and, per post, its bytes summed over all blocks (@p totals). FALSE when
 * @p spec does not resolve to such a schedule (then lower it). Lets a consumer
 * that merges identical blocks (the FLOW summary) skip the n x (n-1) steps.
 */
gboolean sp_lower_coll_pattern(const sp_coll_spec *spec, int32_t me, sp_step *posts, guint *nposts,
                               uint64_t *totals, uint64_t *nblocks);

/**
 * Reference semantics: fill outs[i] for every group index i from ins[], computed
 * globally. Reductions follow the fixed order of the algorithm @p spec resolves to,
 * so the lowered schedule must match bitwise.
 */
gboolean sp_coll_reference(const sp_coll_spec *spec, const void *const *ins,
                           void *const *outs, GError **err);

/** nccl-tests bus bandwidth factor for @p c on @p n ranks (all-reduce 2(n-1)/n, ...). */
double sp_coll_busbw_factor(sp_coll c, int32_t n);

G_END_DECLS

#endif
