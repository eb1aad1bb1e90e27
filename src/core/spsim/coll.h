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
  SP_ALGO_DIRECT,   /**< direct / pairwise exchange */
  SP_ALGO_TREE,     /**< binomial tree or recursive doubling/halving */
  SP_ALGO_COUNT
} sp_algo;

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
} sp_coll_spec;

/** @return "all-reduce", "all-gather", ... */
const char *sp_coll_name(sp_coll c);
/** Parse a collective name. */
gboolean sp_coll_parse(const char *s, sp_coll *out, GError **err);
/** @return "auto", "ring", "direct", "tree". */
const char *sp_algo_name(sp_algo a);
/** Parse an algorithm name. */
gboolean sp_algo_parse(const char *s, sp_algo *out, GError **err);

/** Check sizes, group (distinct non-negative ranks), root, dtype/op pairing. */
gboolean sp_coll_spec_validate(const sp_coll_spec *spec, GError **err);
/** Elements of the input / output buffer of every member. */
uint64_t sp_coll_in_count(const sp_coll_spec *spec);
uint64_t sp_coll_out_count(const sp_coll_spec *spec);
/** The algorithm AUTO resolves to for this spec (deterministic). */
sp_algo sp_algo_choose(const sp_coll_spec *spec);
/** @return the group index of @p rank, or -1 when it is not a member. */
int32_t sp_coll_index_of(const sp_coll_spec *spec, int32_t rank);

/**
 * Append the steps @p prog->rank runs for @p spec. @p in_buf and @p out_buf are
 * buffers of @p prog sized by the convention above; scratch buffers are added as
 * needed. A rank outside the group gets no steps.
 */
gboolean sp_lower_coll(sp_program *prog, const sp_coll_spec *spec,
                       uint32_t in_buf, uint32_t out_buf, GError **err);

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
