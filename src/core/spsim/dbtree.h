/**
 * @file dbtree.h
 * @brief NCCL's double binary tree: the two complementary trees over the nodes and
 *        the tree a TREE all-reduce runs over the members of a group.
 *
 * NCCL (src/graph/trees.cc, ncclGetBtree / ncclGetDtree / ncclGetDtreeRoots) builds,
 * over the N nodes of a communicator, a binary tree rooted at node 0 in which node x
 * with lowest set bit b has the parent (x ^ b) | 2b, or x ^ b when that is out of
 * range, and the children x - b/2 and x + b/2 (the latter, when out of range, moved
 * down by halving b/2 until in range); node 0 has the one child 2^k / 2, 2^k the
 * least power of two >= N. The second tree is that tree mirrored (x -> N-1-x) when N
 * is even and shifted by one (x -> x+1 mod N) when N is odd, so that a node that is
 * a leaf in one tree is inside the other. Roots: 0, and N-1 (even N) or 1 (odd N).
 *
 * Over the members of a group (node-major blocks of B members per node), NCCL's
 * tree of a channel chains the B GPUs of every node (src/graph/connect.cc,
 * connectTrees; the pattern of all network traffic on one GPU,
 * NCCL_TOPO_PATTERN_TREE): the chain's head talks to the parent node's head and to
 * the child nodes' heads; every other member's parent is its predecessor in the
 * chain. spsim runs 2 x B such trees ("instances", at most #SP_MAX_CHANNELS):
 * instance k uses tree k % 2 of the double binary tree and starts every node's chain
 * at local member (k / 2) % B, so the network traffic of the node is spread over all
 * its members' NICs, as NCCL's channels spread it. Instance k carries segment k of
 * the vector (sp_seg_off over the instances).
 */
#ifndef SPSIM_DBTREE_H
#define SPSIM_DBTREE_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/** Smallest default pipelining chunk of the TREE all-reduce: NCCL's Simple step, its
 *  buffer (NCCL_BUFFSIZE, 4 MiB) over NCCL_STEPS (8) (src/include/device.h). The
 *  default chunk of an instance of S bytes and largest depth H is S / (4 (2H + 1)),
 *  within [this, #SP_RING_DEFAULT_CHUNK_BYTES]: a pipeline of 2H + 1 steps then runs
 *  at least 80 % full, as NCCL shrinks its tree chunks with the tree's depth
 *  (src/enqueue.cc), while the step count stays bounded for the engine. */
#define SP_DBTREE_CHUNK_BYTES ((uint64_t)512 << 10)

/** NCCL's ncclGetBtree: the links of @p node (0 .. @p n - 1) in the binary tree over
 *  @p n nodes (-1: none). @p child0 < node < @p child1 when both exist. */
void sp_btree(int32_t n, int32_t node, int32_t *parent, int32_t *child0, int32_t *child1);

/** Tree @p t (0 or 1) of NCCL's double binary tree over @p n nodes (ncclGetDtree). */
void sp_dbtree(int32_t n, int32_t t, int32_t node, int32_t *parent, int32_t *child0,
               int32_t *child1);

/** Root of tree @p t (ncclGetDtreeRoots). */
int32_t sp_dbtree_root(int32_t n, int32_t t);

/** Members per node of the TREE all-reduce of @p n members whose spec says
 *  @p channel_block: the block when it is >= 1 and divides @p n, else 1. */
int32_t sp_dbtree_block(int32_t n, int32_t channel_block);

/** Tree instances of @p n members in blocks of @p block: 2 x block, at most
 *  #SP_MAX_CHANNELS (even). */
int32_t sp_dbtree_instances(int32_t n, int32_t block);

/** A member's place in tree instance k. */
typedef struct {
  int32_t parent;   /**< member index, -1 at the root */
  int32_t child[3]; /**< the chain's next member, then the child nodes' heads (-1: none) */
  int32_t depth;    /**< hops from the root */
} sp_dbtree_place;

/** The place of member @p m in instance @p k (see the file comment). */
void sp_dbtree_place_of(int32_t n, int32_t block, int32_t k, int32_t m, sp_dbtree_place *out);

/** The root member of instance @p k. */
int32_t sp_dbtree_root_member(int32_t n, int32_t block, int32_t k);

/** Largest depth of a member in instance @p k. */
int32_t sp_dbtree_depth_max(int32_t n, int32_t block, int32_t k);

G_END_DECLS

#endif
