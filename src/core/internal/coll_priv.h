/* Private helpers shared by the collective files of src/core (graph/coll.c,
 * graph/reference.c, lower/lower*.c, verify/verify.c). Not installed. */
#ifndef SPSIM_COLL_PRIV_H
#define SPSIM_COLL_PRIV_H

#include <glib.h>
#include <stdint.h>
#include "spsim/coll.h"
#include "spsim/program.h"

G_BEGIN_DECLS

/* Segment s of a vector of @count elements split into @n segments as evenly as
 * possible: the first count % n segments hold one extra element. */
static inline uint64_t sp_seg_len(uint64_t count, int32_t n, int32_t s)
{
  uint64_t q = count / (uint64_t)n, r = count % (uint64_t)n;
  return q + ((uint64_t)s < r ? 1u : 0u);
}

static inline uint64_t sp_seg_off(uint64_t count, int32_t n, int32_t s)
{
  uint64_t q = count / (uint64_t)n, r = count % (uint64_t)n;
  uint64_t us = (uint64_t)s;
  return us * q + (us < r ? us : r);
}

/* Largest power of two <= n (n >= 1). */
static inline int32_t sp_pow2_floor(int32_t n)
{
  int32_t p = 1;
  while (p <= n / 2)
    p *= 2;
  return p;
}

/* Number of rounds of a binomial tree over n members: ceil(log2 n). */
static inline int32_t sp_ceil_log2(int32_t n)
{
  int32_t l = 0;
  while (((int64_t)1 << l) < n)
    l++;
  return l;
}

/* Non-power-of-two folding used by the TREE algorithms: n = p + r; members
 * 2j and 2j+1 (j < r) form virtual rank j, member m >= 2r is virtual m - r.
 * First member of virtual rank v (v in [0, p]; sp_vstart(p) == n). */
static inline int32_t sp_vstart(int32_t v, int32_t r)
{
  return v < r ? 2 * v : v + r;
}

/* Channels of a RING lowering of @spec (>= 1): spec->channels for all-reduce,
 * all-gather and reduce-scatter on n > 1 members, else 1. */
static inline int32_t sp_ring_channels(const sp_coll_spec *spec)
{
  if (spec->channels <= 1 || spec->n <= 1)
    return 1;
  if (spec->coll != SP_COLL_ALL_REDUCE && spec->coll != SP_COLL_ALL_GATHER &&
      spec->coll != SP_COLL_REDUCE_SCATTER)
    return 1;
  return spec->channels;
}

/* Ring order of channel @ch (coll.h): perm[q] = member at ring position q. */
static inline void sp_ring_perm(int32_t n, int32_t block, int32_t ch, int32_t *perm)
{
  int32_t B = block < 1 ? 1 : (block > n ? n : block);
  for (int32_t b = 0; b < n; b += B) {
    int32_t L = n - b < B ? n - b : B, r = ch % L;
    for (int32_t t = 0; t < L; t++)
      perm[b + t] = b + (t + r < L ? t + r : t + r - L);
  }
}

/* ------------------------------------------------------------ lowering context */

typedef struct {
  sp_program *prog;
  const sp_coll_spec *spec;
  int32_t me;       /* my group index */
  int32_t n;
  size_t es;        /* element size */
  uint32_t in, out; /* buffers */
  guint posted;     /* sends/recvs posted since the last WAIT */
  guint used;       /* steps of prog in use: prog->steps grows ahead in blocks of
                       cleared steps and is cut back to used by sp_lower_coll */
  sp_step_sink sink; /* sp_lower_coll_stream: receives the steps in batches, else NULL */
  void *sink_ud;
  guint base;        /* sp_lower_coll_stream: steps of prog before the lowering */
  gboolean comm_only; /* sp_lower_coll_stream: emit no local steps (sp_l_copy ...) */
  gboolean pipelined; /* posts carry SP_STEP_PIPELINED (a lock-step pipeline's lowering) */
  uint64_t pipe_chunks; /* ... and, as their count, the pipeline's number of chunks */
  gboolean pipe_pace;   /* posts being emitted also carry SP_STEP_PIPE_PACE */
} sp_lctx;

/* Step emitters (lower_emit.c): the algorithms build a member's program with
 * these and nothing else of the lowering. */

/* Post a send of @bytes at (buf, off) to group member @member (skipped when empty). */
void sp_l_send(sp_lctx *c, int32_t member, uint32_t phase, uint32_t buf, uint64_t off, uint64_t bytes);
void sp_l_recv(sp_lctx *c, int32_t member, uint32_t phase, uint32_t buf, uint64_t off, uint64_t bytes);
/* Close a communication block: a WAIT when anything was posted. */
void sp_l_wait(sp_lctx *c, uint32_t phase);
void sp_l_copy(sp_lctx *c, uint32_t phase, uint32_t dbuf, uint64_t doff, uint32_t sbuf, uint64_t soff,
               uint64_t bytes);
/* dst <- dst op src over @elems elements (skipped when empty). */
void sp_l_reduce(sp_lctx *c, uint32_t phase, uint32_t dbuf, uint64_t doff, uint32_t sbuf, uint64_t soff,
                 uint64_t elems);
/* AVG only: dst <- dst / n (skipped for other operators and when empty). */
void sp_l_avg(sp_lctx *c, uint32_t phase, uint32_t buf, uint64_t off, uint64_t elems);
uint32_t sp_l_scratch(sp_lctx *c, uint64_t bytes, const char *what);
/* Are local steps emitted? (FALSE when streaming communication only: algorithms
 * may then skip computing them; sp_l_copy/reduce/avg emit nothing anyway.) */
static inline gboolean sp_l_local(const sp_lctx *c) { return !c->comm_only; }

/* Chunk size in elements of a chunked algorithm (>= 1). */
uint64_t sp_l_chunk_elems(const sp_coll_spec *spec);
/* Streaming: hand the steps emitted since the last flush to the sink (the
 * dispatcher calls it once at the end; full batches are flushed as emitted). */
void sp_l_flush(sp_lctx *c);

/* Algorithms: the steps of member c->me (n > 1, not send-recv), one function per
 * algorithm, looked up by the dispatcher's table in lower.c. */
typedef gboolean (*sp_lower_fn)(sp_lctx *c, GError **err);
gboolean sp_lower_ring(sp_lctx *c, GError **err);   /* lower_ring.c */
gboolean sp_lower_direct(sp_lctx *c, GError **err); /* lower_direct.c */
gboolean sp_lower_tree(sp_lctx *c, GError **err);   /* lower_tree.c */
gboolean sp_lower_pat(sp_lctx *c, GError **err);    /* lower_pat.c */
/* NVLS-tree, CollNet Direct and CollNet Chain all-reduces (lower_hier.c) */
gboolean sp_lower_hier(sp_lctx *c, GError **err);
void sp_lower_tree_all_gather(sp_lctx *c);          /* lower_tree.c */
void sp_lower_tree_reduce_scatter(sp_lctx *c);      /* lower_tree.c */
/* TREE all-reduce: NCCL's double binary tree (lower_dbtree.c) */
void sp_lower_dbtree_allreduce(sp_lctx *c);

/* ------------------------------------------------------------ reference */

/* Supplies @count input elements of group member @member starting at element
 * @first of its input buffer into @dst. */
typedef void (*sp_ref_input_fn)(void *user, int32_t member, uint64_t first, uint64_t count, void *dst);

/* The reference output of one group member (sp_coll_out_count elements; for the
 * members whose out buffer a collective leaves untouched, nothing is written and
 * *written is FALSE). @spec must be valid; AUTO is resolved here. */
gboolean sp_coll_reference_member(const sp_coll_spec *spec, sp_ref_input_fn get, void *user,
                                  int32_t member, void *out, gboolean *written, GError **err);

/* Error for an unsupported (collective, algorithm) pair, listing the supported ones. */
gboolean sp_coll_algo_supported(const sp_coll_spec *spec, sp_algo algo, GError **err);

G_END_DECLS

#endif
