/**
 * @file graph.h
 * @brief The communication graph IR: per-rank tensors, collective and local nodes,
 *        lowering to per-rank programs, a global reference interpreter, an
 *        in-process data-mode runner and cost statistics.
 *
 * A graph lives on a world of ranks 0..world-1.
 *
 * **Tensors.** A tensor is a per-rank buffer with one shape (up to 8 dims, int64)
 * and one dtype, identical on every rank that holds it. It is held by every rank
 * (default) or by an explicit rank set (sp_graph_tensor_place()). Its contents
 * may differ per rank (each rank's shard). Tensors may share storage through a
 * pool slot (sp_graph_tensor_pool()): tensors with the same (pool, slot) key use
 * one buffer, the largest of them (double-buffered weight gathers).
 *
 * **Nodes.** Nodes are kept in program order: a node may only read tensors
 * written by earlier nodes (or initialised tensors). A collective node runs on a
 * *group set*: @c ngroups disjoint groups of @c gsize ranks each, all running the
 * same collective independently (e.g. every SP group of a 1,024-rank world). Its
 * input and output tensors must be held by every member. A local node runs on
 * every rank that holds its (first) output; SPLIT also needs the group set, to know
 * each rank's index.
 *
 * **Collective semantics along dims** (P = group size, member index i):
 * - all-gather along dim g: out = concat over members (in group order) along g.
 * - reduce-scatter along dim s: out = block i along s of (op over members of in).
 * - all-to-all (scatter s, gather g): in is split into P blocks along s, block j
 *   goes to member j, received blocks are concatenated along g in member order.
 * - all-reduce, broadcast, reduce: elementwise on whole tensors (flat).
 * - send/recv: groups of 2; member 1's out = member 0's in.
 * Sizes along a split dim must divide by P (clear error otherwise).
 *
 * **Async collectives.** A collective flagged async (sp_graph_node_set_async())
 * is posted where it stands in the node order but its WAIT (and its unpack
 * copies) are deferred until (a) a SYNC node on its output, (b) the first later
 * node that reads its output, or (c) the end of the lowered range. This is how
 * "post the all-to-all of tensor i+1 before waiting on tensor i" (multi-tensor
 * all-to-all) and ISP weight prefetch are expressed in per-rank programs, whose
 * WAIT completes everything posted since the previous WAIT. Only collectives
 * whose lowered schedule has a single WAIT (e.g. the direct algorithm) can be
 * deferred; others are lowered synchronously.
 *
 * **Lowering** (sp_graph_lower()): collective = pack (strided COPY into
 * contiguous blocks) + sp_lower_coll() on flat buffers + unpack (strided COPY);
 * local nodes = local steps; data kernels (matmul, attention) = COMPUTE steps
 * carrying their FLOPs, with the node id in sp_step::op so a data-mode engine can
 * run the kernel with sp_graph_kernel_host(). Each node n uses the tags
 * [n * 1024, n * 1024 + 1024). Program buffer i < sp_graph_n_storage() is storage
 * i (sp_graph_tensor_storage()); later buffers are scratch.
 *
 * **Reference** (sp_graph_reference()): computes every tensor on every rank
 * directly by index arithmetic on the global data, with no communication and no
 * code shared with the lowering. Data movement matches the lowered programs
 * bitwise; float reductions are summed in group order (compare to a tolerance).
 */
#ifndef SPSIM_GRAPH_H
#define SPSIM_GRAPH_H

#include <glib.h>
#include <stdint.h>
#include "spsim/dtype.h"
#include "spsim/coll.h"
#include "spsim/program.h"
#include "spsim/topology.h"

G_BEGIN_DECLS

/** Maximum number of tensor dims. */
#define SP_MAX_DIMS 8
/** Maximum inputs / outputs of one node. */
#define SP_NODE_MAX_IO 8
/** Tag range of one node: node n uses [n * SP_NODE_TAG_SPAN, (n+1) * SP_NODE_TAG_SPAN). */
#define SP_NODE_TAG_SPAN 1024
/** "No tensor". */
#define SP_NO_TENSOR UINT32_MAX

/** What a tensor holds, for memory reports. */
typedef enum {
  SP_TENSOR_ACTIVATION = 0, /**< activations and their gradients */
  SP_TENSOR_WEIGHT,         /**< persistent parameters (shards) */
  SP_TENSOR_GRAD,           /**< parameter gradients */
  SP_TENSOR_GATHERED,       /**< gathered (unsharded) weights, transient */
  SP_TENSOR_COMM,           /**< communication buffers (pooled reduce-scatter inputs, ...) */
  SP_TENSOR_KIND_COUNT
} sp_tensor_kind;

/** How a tensor's contents start. */
typedef enum {
  SP_INIT_NONE = 0, /**< written by a node */
  SP_INIT_INPUT,    /**< an input the caller fills (sp_graph_data_fill_inputs: pattern) */
  SP_INIT_ZERO,     /**< zeros */
  SP_INIT_IOTA      /**< integer/float value = index along the last dim (padding positions) */
} sp_tensor_init;

/** A tensor. */
typedef struct {
  char *name;
  sp_dtype dtype;
  int ndim;
  int64_t shape[SP_MAX_DIMS];
  sp_tensor_kind kind;
  sp_tensor_init init;
  guint8 *on;          /**< world flags; NULL: every rank */
  int32_t pool;        /**< -1: own storage; else pool id (any integer >= 0) */
  int32_t slot;        /**< slot inside the pool */
  gboolean persistent; /**< live for the whole graph (memory report) */
  uint32_t storage;    /**< storage index (set by the graph) */
} sp_tensor;

/** Node kinds. */
typedef enum {
  /* collectives on a group set */
  SP_NODE_ALL_REDUCE = 0,
  SP_NODE_ALL_GATHER,     /**< along dim */
  SP_NODE_REDUCE_SCATTER, /**< along dim */
  SP_NODE_ALL_TO_ALL,     /**< scatter dim2, gather dim */
  SP_NODE_BROADCAST,
  SP_NODE_REDUCE,
  SP_NODE_SEND_RECV,
  /* local */
  SP_NODE_COPY,        /**< out = in (out may have another shape with the same numel) */
  SP_NODE_SLICE,       /**< out = in[start : start + len] along dim (out: any shape of that numel) */
  SP_NODE_SPLIT,       /**< out = own block (group index) of P along dim; needs the group set */
  SP_NODE_PAD,         /**< out = in padded at the end of dim to out's size with zeros */
  SP_NODE_CONCAT,      /**< out = concat of inputs along dim (input i spans numel_i / (outer*inner)) */
  SP_NODE_REPEAT,      /**< out[.., e, ..] = in[.., e / repeat, ..] along dim */
  SP_NODE_REPEAT_SUM,  /**< out[.., h, ..] = sum_t in[.., h*repeat + t, ..] along dim */
  SP_NODE_ADD,         /**< out = in0 op in1 (elementwise, redop) */
  SP_NODE_SCALE,       /**< out = in * scale (or / scale when divide) */
  SP_NODE_COMPUTE,     /**< charges flops and bytes; no data */
  SP_NODE_SYNC,        /**< complete the async collective that wrote in0 */
  /* data kernels (f32) */
  SP_NODE_MATMUL,      /**< out[M,N] = op(in0)[M,K] x op(in1)[K,N] (see sp_graph_matmul) */
  SP_NODE_ATTENTION,   /**< out = causal_attention(q, k, v) */
  SP_NODE_ATTENTION_BWD, /**< (dq, dk, dv) = d attention(q, k, v; dout) */
  SP_NODE_SHIFT,       /**< collective: member i sends in to member i+1 and receives out from i-1 (ring) */
  SP_NODE_RING_ATTN,   /**< kernel: one ring-attention step (online softmax) on (q, k, v, state) -> state */
  SP_NODE_RING_FINAL,  /**< kernel: out = o / l of a ring-attention state */
  SP_NODE_RING_ATTN_BWD, /**< kernel: one ring-attention backward step -> (dq, dk, dv) accumulators */
  SP_NODE_MOE,         /**< kernel: a mixture-of-experts step (#sp_moe_kernel in repeat; sp_graph_moe) */
  SP_NODE_KIND_COUNT
} sp_node_kind;

/** Attention tensor layouts. */
typedef enum {
  SP_LAYOUT_BSHD = 0, /**< batch first: [b, s, heads, d] */
  SP_LAYOUT_SBHD      /**< sequence first: [s, b, heads, d] */
} sp_attn_layout;

/** A node. */
typedef struct {
  sp_node_kind kind;
  char *name;
  uint32_t in[SP_NODE_MAX_IO];
  int nin;
  uint32_t out[SP_NODE_MAX_IO];
  int nout;
  int32_t *ranks;   /**< ngroups * gsize global ranks (collectives, SPLIT) */
  int32_t ngroups;
  int32_t gsize;
  int dim;          /**< gather / split / slice / concat / pad / repeat dim */
  int dim2;         /**< all-to-all scatter dim */
  int64_t start, len;
  int32_t repeat;
  sp_redop redop;
  sp_algo algo;
  int32_t root;     /**< broadcast/reduce: group index */
  double scale;
  gboolean divide;
  gboolean async;
  double flops;     /**< per executing rank */
  uint64_t bytes;   /**< COMPUTE: bytes touched */
  gboolean trans_a, trans_b; /**< MATMUL */
  sp_attn_layout layout;     /**< ATTENTION(_BWD) */
  GArray *deps;     /**< of uint32_t: explicit extra dependencies (earlier nodes) */
} sp_node;

/** A graph (opaque). */
typedef struct sp_graph sp_graph;

/** New empty graph over @p world ranks (world >= 1). */
sp_graph *sp_graph_new(int32_t world);
void sp_graph_free(sp_graph *g);
int32_t sp_graph_world(const sp_graph *g);
guint sp_graph_n_tensors(const sp_graph *g);
guint sp_graph_n_nodes(const sp_graph *g);
const sp_tensor *sp_graph_tensor(const sp_graph *g, uint32_t t);
const sp_node *sp_graph_node(const sp_graph *g, uint32_t n);
/** Find a tensor by name; SP_NO_TENSOR when absent. */
uint32_t sp_graph_find_tensor(const sp_graph *g, const char *name);

/**
 * Add a tensor held by every rank. @return its id, or SP_NO_TENSOR with @p err
 * (bad ndim, non-positive dim, bad dtype).
 */
uint32_t sp_graph_tensor_new(sp_graph *g, const char *name, sp_dtype dtype, int ndim,
                             const int64_t *shape, sp_tensor_kind kind, sp_tensor_init init,
                             GError **err);
/** Restrict a tensor to the ranks of @p ranks (n entries); error for ranks outside the world. */
gboolean sp_graph_tensor_place(sp_graph *g, uint32_t t, const int32_t *ranks, int32_t n, GError **err);
/** Share storage: tensors with equal (pool, slot) use one buffer. */
void sp_graph_tensor_pool(sp_graph *g, uint32_t t, int32_t pool, int32_t slot);
/** Change how @p t starts (e.g. SP_INIT_INPUT for a builder-created weight). */
void sp_graph_tensor_set_init(sp_graph *g, uint32_t t, sp_tensor_init init);
/** Keep @p t live for the whole graph in memory reports. */
void sp_graph_tensor_persist(sp_graph *g, uint32_t t);
/** @return TRUE when @p rank holds @p t. */
gboolean sp_graph_tensor_on(const sp_graph *g, uint32_t t, int32_t rank);
/** @return the number of elements / bytes of one rank's copy of @p t. */
uint64_t sp_tensor_numel(const sp_tensor *t);
uint64_t sp_tensor_bytes(const sp_tensor *t);
/** Storage buffers (distinct (pool, slot) keys and unpooled tensors). */
guint sp_graph_n_storage(const sp_graph *g);
uint32_t sp_graph_tensor_storage(const sp_graph *g, uint32_t t);
/** Bytes of storage @p s on @p rank (the largest tensor mapped to it that the rank holds; 0 if none). */
uint64_t sp_graph_storage_bytes(const sp_graph *g, uint32_t s, int32_t rank);

/*
 * Group sets are topology's #sp_groups (spsim/topology.h): n_groups disjoint groups of
 * group_size ranks, row after row. Builders borrow them (the graph copies the ranks).
 */

/** A one-group set over @p ranks (borrowed, not freed by anyone here). */
static inline sp_groups sp_groups_one(const int32_t *ranks, int32_t n)
{
  sp_groups gs = { 1, n, (int32_t *)ranks };
  return gs;
}

/* ---- node builders: each returns the node id, or UINT32_MAX with @p err ---- */

/** All-reduce of @p in into @p out (same shape) with @p op on every group. */
uint32_t sp_graph_all_reduce(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                             sp_redop op, sp_algo algo, GError **err);
/** All-gather along @p dim: out's dim = P x in's dim. */
uint32_t sp_graph_all_gather(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                             int dim, sp_algo algo, GError **err);
/** Reduce-scatter along @p dim: in's dim = P x out's dim. */
uint32_t sp_graph_reduce_scatter(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                                 int dim, sp_redop op, sp_algo algo, GError **err);
/** All-to-all scattering along @p scatter_dim and gathering along @p gather_dim. */
uint32_t sp_graph_all_to_all(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                             int scatter_dim, int gather_dim, sp_algo algo, GError **err);
/** Broadcast from group index @p root. */
uint32_t sp_graph_broadcast(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                            int32_t root, sp_algo algo, GError **err);
/** Reduce to group index @p root (others' out untouched). */
uint32_t sp_graph_reduce(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                         int32_t root, sp_redop op, sp_algo algo, GError **err);
/** Point-to-point: groups of 2, member 0 sends @p in, member 1 receives into @p out. */
uint32_t sp_graph_send_recv(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, GError **err);

uint32_t sp_graph_copy(sp_graph *g, uint32_t in, uint32_t out, GError **err);
uint32_t sp_graph_slice(sp_graph *g, uint32_t in, uint32_t out, int dim, int64_t start,
                        int64_t len, GError **err);
/** Own block of P along @p dim (P = gs->size); error when the dim does not divide by P. */
uint32_t sp_graph_split(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, int dim,
                        GError **err);
uint32_t sp_graph_pad(sp_graph *g, uint32_t in, uint32_t out, int dim, GError **err);
uint32_t sp_graph_concat(sp_graph *g, const uint32_t *ins, int nin, uint32_t out, int dim,
                         GError **err);
uint32_t sp_graph_repeat(sp_graph *g, uint32_t in, uint32_t out, int dim, int32_t repeat,
                         GError **err);
uint32_t sp_graph_repeat_sum(sp_graph *g, uint32_t in, uint32_t out, int dim, int32_t repeat,
                             GError **err);
uint32_t sp_graph_add(sp_graph *g, uint32_t a, uint32_t b, uint32_t out, sp_redop op, GError **err);
/** out = in * factor, or in / factor when @p divide (in == out allowed). */
uint32_t sp_graph_scale(sp_graph *g, uint32_t in, uint32_t out, double factor, gboolean divide,
                        GError **err);
/** Charge @p flops and @p bytes on every rank holding @p on_tensor (or every rank). */
uint32_t sp_graph_compute(sp_graph *g, const char *name, uint32_t on_tensor, double flops,
                          uint64_t bytes, GError **err);
/** Complete the async collective that produced @p t (no-op if already complete). */
uint32_t sp_graph_sync(sp_graph *g, uint32_t t, GError **err);
/**
 * out = op(a) x op(b), a viewed as [numel/last, last] (trans: its transpose), b as
 * [rows, cols] likewise; f32 only. FLOPs 2 M N K.
 */
uint32_t sp_graph_matmul(sp_graph *g, uint32_t a, gboolean trans_a, uint32_t b,
                         gboolean trans_b, uint32_t out, GError **err);
/**
 * Causal softmax attention, scale 1/sqrt(d), f32. q [.., Hq, d], k/v [.., Hkv, d]
 * in @p layout; Hq % Hkv == 0 (q head h reads kv head h / (Hq / Hkv)).
 * FLOPs 4 d per (query, key) pair: b Hq d 2 S (S + 1).
 */
uint32_t sp_graph_attention(sp_graph *g, sp_attn_layout layout, uint32_t q, uint32_t k,
                            uint32_t v, uint32_t out, GError **err);
/** Backward of sp_graph_attention: FLOPs 10 d per pair (recomputes the scores). */
uint32_t sp_graph_attention_bwd(sp_graph *g, sp_attn_layout layout, uint32_t q, uint32_t k,
                                uint32_t v, uint32_t dout, uint32_t dq, uint32_t dk,
                                uint32_t dv, GError **err);

/** Ring shift on a group set: member i's @p out = member (i-1) mod P's @p in. */
uint32_t sp_graph_shift(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, GError **err);
/**
 * One ring-attention step on the ring group set @p gs: at step @p step, member i holds
 * the k/v block j = (i - step) mod P of a causal sequence split in P blocks (block i is
 * its own queries). j > i: skipped (state copied, no FLOPs); j == i: causal inside the
 * block; j < i: every key. @p state_in / @p state_out are [b, s, Hq, d + 2] f32 (o, m,
 * l per query row; zeros = empty).
 */
uint32_t sp_graph_ring_attn(sp_graph *g, const sp_groups *gs, sp_attn_layout layout, uint32_t q,
                            uint32_t k, uint32_t v, uint32_t state_in, uint32_t state_out, int32_t step,
                            GError **err);
/** out [.., Hq, d] = o / l of a ring-attention state. */
uint32_t sp_graph_ring_final(sp_graph *g, sp_attn_layout layout, uint32_t state, uint32_t out, GError **err);
/**
 * One ring-attention backward step on the ring group set @p gs, the mirror of
 * sp_graph_ring_attn() at the same @p step: member i holds k/v block j = (i - step)
 * mod P; j > i: skipped (accumulators copied, no FLOPs), j == i: causal inside the
 * block, j < i: every key. @p state is the forward's final state [.., Hq, d + 2];
 * @p dout has q's shape. Accumulators: @p dq_out = @p dq_in + this block's share (q's
 * shape), @p dk_out / @p dv_out = @p dk_in / @p dv_in + the local queries' share
 * (k's shape); outs use other storage than ins (sp_kernel_ring_attn_bwd_step_f32).
 * FLOPs 10 d per (query, key) pair, as sp_graph_attention_bwd().
 */
uint32_t sp_graph_ring_attn_bwd(sp_graph *g, const sp_groups *gs, sp_attn_layout layout, uint32_t q,
                                uint32_t k, uint32_t v, uint32_t dout, uint32_t state, uint32_t dq_in,
                                uint32_t dk_in, uint32_t dv_in, uint32_t dq_out, uint32_t dk_out,
                                uint32_t dv_out, int32_t step, GError **err);
/** The mixture-of-experts kernels (spsim/kernels.h, kernels_moe.c) a #SP_NODE_MOE runs. */
typedef enum {
  SP_MOE_ROUTE = 0,     /**< logits [T, E] -> route [T, K, 3], scores [T, E], counts [E] */
  SP_MOE_PERMUTE,       /**< x [T, H], route -> disp [E, C, H] */
  SP_MOE_UNPERMUTE,     /**< eo [E, C, H], route -> y [T, H] */
  SP_MOE_UNPERMUTE_BWD, /**< dy [T, H], eo [E, C, H], route -> deo [E, C, H], dprob [T, K] */
  SP_MOE_PERMUTE_BWD,   /**< ddisp [E, C, H], route -> dx [T, H] */
  SP_MOE_ROUTE_BWD,     /**< scores [T, E], route, dprob [T, K] -> dlogits [T, E] */
  SP_MOE_RELU,          /**< x -> max(x, 0) (any shape) */
  SP_MOE_RELU_BWD,      /**< x, dy -> dx (any shape) */
  SP_MOE_KERNEL_COUNT
} sp_moe_kernel;

/**
 * A mixture-of-experts kernel node @p which reading @p ins (@p nin) and writing
 * @p outs (@p nout) as listed in #sp_moe_kernel; f32, every holder of the first
 * output holds the rest. @p topk (K) and @p capacity (C, slots per expert) fix the
 * route's and the dispatch buffers' shapes; @p drop is an #sp_moe_drop (ROUTE
 * only). Shapes that do not agree: SP_ERROR_SHAPE naming the kernel.
 */
uint32_t sp_graph_moe(sp_graph *g, sp_moe_kernel which, const uint32_t *ins, int nin, const uint32_t *outs,
                      int nout, int64_t topk, int64_t capacity, int drop, GError **err);

/** FLOPs node @p n charges on @p rank (per-rank for ring steps). */
double sp_graph_node_flops(const sp_graph *g, uint32_t n, int32_t rank);

/** Defer the WAIT of collective node @p n (see the file comment). */
void sp_graph_node_set_async(sp_graph *g, uint32_t n, gboolean async);
/** Record that node @p n depends on earlier node @p on. */
gboolean sp_graph_node_add_dep(sp_graph *g, uint32_t n, uint32_t on, GError **err);
/** Give node @p n a display name. */
void sp_graph_node_set_name(sp_graph *g, uint32_t n, const char *name);

/** @return "all-to-all", "matmul", ... */
const char *sp_node_kind_name(sp_node_kind k);
/** @return TRUE for collective kinds. */
gboolean sp_node_kind_is_coll(sp_node_kind k);

/* ---- lowering ---- */

/**
 * Lower nodes [first, last) for @p rank into a new program. Buffers 0..n_storage-1
 * are the storages (sized for @p rank), then scratch. Async collectives still
 * pending at @p last are completed there.
 */
sp_program *sp_graph_lower_range(const sp_graph *g, int32_t rank, uint32_t first, uint32_t last,
                                 GError **err);
/** Lower the whole graph for @p rank. */
sp_program *sp_graph_lower(const sp_graph *g, int32_t rank, GError **err);

/* ---- data ---- */

/** Per-rank storage contents of a graph. */
typedef struct sp_graph_data sp_graph_data;

/** Allocate zeroed storage for every rank and initialise ZERO/IOTA tensors. */
sp_graph_data *sp_graph_data_new(const sp_graph *g);
void sp_graph_data_free(sp_graph_data *d);
/** @return rank @p rank's copy of tensor @p t (NULL when the rank does not hold it). */
void *sp_graph_data_get(sp_graph_data *d, uint32_t t, int32_t rank);
/** Fill every INPUT tensor on every rank with sp_fill_pattern(seed ^ (t, rank)). */
void sp_graph_data_fill_inputs(sp_graph_data *d, uint64_t seed);
/**
 * Write into @p buf (numel of @p t elements) what sp_graph_data_fill_inputs(@p seed)
 * puts in input tensor @p t on @p rank: a builder that needs the data at build time
 * (a dropless MoE layer's router counts) computes it from the same inputs.
 */
void sp_graph_input_fill(const sp_graph *g, uint32_t t, int32_t rank, uint64_t seed, void *buf);
/** Copy the contents of @p src into @p dst (same graph). */
void sp_graph_data_copy(sp_graph_data *dst, const sp_graph_data *src);

/** Global reference interpreter over @p d (inputs set). */
gboolean sp_graph_reference(const sp_graph *g, sp_graph_data *d, GError **err);
/**
 * Run the lowered programs of every rank in process over the loopback transport,
 * segment by segment; data kernels run between segments with sp_graph_kernel_host().
 */
gboolean sp_graph_run_loopback(const sp_graph *g, sp_graph_data *d, GError **err);
/**
 * Run data kernel node @p n (MATMUL, ATTENTION, ATTENTION_BWD, RING_*) for @p rank on host
 * memory: @p bufs are the rank's program buffers (storage first). For engines that
 * meet a COMPUTE step whose op is a kernel node in data mode.
 */
gboolean sp_graph_kernel_host(const sp_graph *g, uint32_t n, int32_t rank, void *const *bufs,
                              GError **err);

/**
 * Compare tensor @p t on every rank between @p a and @p b: bitwise when @p tol is 0,
 * else |x - y| <= tol * max(1, |y|) for f32. Error SP_ERROR_MISMATCH names the
 * first differing rank and element.
 */
gboolean sp_graph_data_compare(const sp_graph *g, const sp_graph_data *a, const sp_graph_data *b,
                               uint32_t t, double tol, GError **err);

/* ---- cost ---- */

/** Cost statistics of one rank. */
typedef struct {
  double flops;                 /**< data kernels + COMPUTE nodes */
  uint64_t bytes_sent;          /**< all SEND payload bytes */
  uint64_t bytes_intra;         /**< to peers on the same node */
  uint64_t bytes_inter;         /**< to peers on other nodes */
  uint64_t msgs;                /**< SEND steps */
  uint64_t mem_kind[SP_TENSOR_KIND_COUNT]; /**< storage bytes by kind (all storages held) */
  uint64_t mem_storage;         /**< sum of storage bytes held */
  uint64_t mem_scratch_max;     /**< largest scratch of one node */
  uint64_t mem_peak;            /**< peak of live storages + that node's scratch */
} sp_graph_stats;

/**
 * Statistics of @p rank over nodes [first, last) (last = UINT32_MAX: all). Ranks r
 * and q share a node when r / ranks_per_node == q / ranks_per_node.
 */
gboolean sp_graph_rank_stats(const sp_graph *g, int32_t rank, int32_t ranks_per_node,
                             uint32_t first, uint32_t last, sp_graph_stats *st, GError **err);

G_END_DECLS

#endif
