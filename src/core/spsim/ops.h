/**
 * @file ops.h
 * @brief The operation library: the parallel-training operations of DeepSpeed-Ulysses, InternEvo and Megatron-LM as graph
 *        builders, each emitting its forward and (through a separate *_bwd call)
 *        its backward into an sp_graph.
 *
 * Every builder works on a group set (sp_groups: one or many disjoint groups of
 * equal size P, e.g. every SP group of a world) and creates its output tensors
 * itself, placed on the same ranks as its input. Tensor shapes are per rank.
 * Builders return the new tensor id (SP_NO_TENSOR with a GError on bad input) or
 * a gboolean with out-parameters. Errors name the fix (pad the sequence, use a
 * group size that divides the head count, ...).
 *
 * Conventions (those of the DeepSpeed-Ulysses and Megatron-LM code these operations follow):
 * - Ulysses batch-first activations are [b, s, H, d] (seq dim 1, heads dim 2),
 *   sequence-first ones [s, b, H, d] (seq dim 0, heads dim 2); packed qkv adds a
 *   dim of 3 (or 2 for kv) before the heads: [b, s, 3, H, d].
 * - Linear layers: activations are 2-D [tokens, features] (any leading dims are
 *   flattened into tokens). Megatron TP weights are stored [in, out] (y = x W);
 *   ISP weights as torch.nn.Linear, [out, in] (y = x W^T), sharded on dim 0.
 */
#ifndef SPSIM_OPS_H
#define SPSIM_OPS_H

#include <glib.h>
#include <stdint.h>
#include "spsim/graph.h"
#include "spsim/kernels.h"

G_BEGIN_DECLS

/** Gradient scaling of gather/split primitives in backward. */
typedef enum {
  SP_GRAD_SCALE_NONE = 0, /**< no scaling */
  SP_GRAD_SCALE_UP,       /**< gradient x P */
  SP_GRAD_SCALE_DOWN      /**< gradient / P */
} sp_grad_scale;

/** Parse "none", "up", "down". */
gboolean sp_grad_scale_parse(const char *s, sp_grad_scale *out, GError **err);

/* ================================================================ Ulysses primitives */

/**
 * Sequence all-to-all: split @p in along @p scatter_dim into P blocks, block j to
 * member j, concatenate the received blocks along @p gather_dim. Backward: the same
 * op with the dims swapped (sp_op_seq_all_to_all(g, gs, grad, gather_dim, scatter_dim)).
 * @p async defers its WAIT (see graph.h) and uses the direct algorithm.
 */
uint32_t sp_op_seq_all_to_all(sp_graph *g, const sp_groups *gs, uint32_t in, int scatter_dim,
                              int gather_dim, gboolean async, GError **err);

/**
 * Multi-tensor all-to-all: tensor i+1's all-to-all is posted before tensor i is
 * waited on. In program terms (per rank): pack_0, posts_0, pack_1, posts_1, WAIT,
 * unpack_0, pack_2, posts_2, WAIT, unpack_1, ..., unpack_{n-1}: every all-to-all is
 * an async node (direct algorithm, one WAIT) and a SYNC node on tensor i is placed
 * after the posting of tensor i+1. Backward: the same call on the gradients with
 * every scatter/gather pair swapped. @p outs receives n tensor ids.
 */
gboolean sp_op_multi_all_to_all(sp_graph *g, const sp_groups *gs, int n, const uint32_t *ins,
                                const int *scatter_dims, const int *gather_dims, uint32_t *outs,
                                GError **err);

/** Gather forward: all-gather along @p dim. */
uint32_t sp_op_gather_fwd(sp_graph *g, const sp_groups *gs, uint32_t in, int dim, GError **err);
/** Its backward: own slice along @p dim, then x P (UP) or / P (DOWN). */
uint32_t sp_op_gather_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad_out, int dim,
                          sp_grad_scale scale, GError **err);
/** Split forward: own slice along @p dim (the dim must divide by P: clear error otherwise). */
uint32_t sp_op_split_fwd(sp_graph *g, const sp_groups *gs, uint32_t in, int dim, GError **err);
/** Its backward: all-gather along @p dim, then x P (UP) or / P (DOWN). */
uint32_t sp_op_split_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad_out, int dim,
                         sp_grad_scale scale, GError **err);

/**
 * Slice-and-pad (pre-forward of Ulysses): @p ids [bsz, S] (any dtype) and optional
 * @p pos [1, S] (SP_NO_TENSOR for none). pad = (P - S % P) % P. ids are padded with
 * 0 to S + pad and each rank keeps its slice [bsz, (S + pad) / P]; positions are
 * padded with 0..pad-1 and stay whole [1, S + pad]. Errors: pos's first dim != 1,
 * or ids and pos lengths differ.
 */
gboolean sp_op_slice_and_pad(sp_graph *g, const sp_groups *gs, uint32_t ids, uint32_t pos,
                             uint32_t *ids_out, uint32_t *pos_out, int64_t *pad, GError **err);

/** Gather-and-unpad: all-gather along @p dim, then drop the last @p pad along @p unpad_dim. */
uint32_t sp_op_gather_and_unpad(sp_graph *g, const sp_groups *gs, uint32_t in, int dim, int64_t pad,
                                int unpad_dim, GError **err);
/** Its backward: zero-pad @p pad along @p unpad_dim, then own slice along @p dim (scaled). */
uint32_t sp_op_gather_and_unpad_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad_out, int dim,
                                    int64_t pad, int unpad_dim, sp_grad_scale scale, GError **err);

/**
 * SP data pre-processing: every rank's list (a tensor [items, item_bytes...]) is
 * gathered in rank order and flattened: [P * items, ...]. Lists must have equal
 * length on every rank (variable-length object lists are not modelled).
 */
uint32_t sp_op_sp_data_pre(sp_graph *g, const sp_groups *gs, uint32_t list, GError **err);
/** SP data post-processing: keep this rank's 1/P of the list (error when not divisible). */
uint32_t sp_op_sp_data_post(sp_graph *g, const sp_groups *gs, uint32_t list, GError **err);

/* ================================================================ Ulysses attention */

/** Input packing of distributed attention. */
typedef enum {
  SP_QKV_SEPARATE = 0, /**< q, k, v each [b, s, H, d] (k, v with KV heads) */
  SP_QKV_PACKED,       /**< qkv [b, s, 3, H, d] */
  SP_QKV_KV_PACKED     /**< q [b, s, H, d] and kv [b, s, 2, KV, d] */
} sp_qkv_pack;

/** State of one Ulysses attention call, kept for its backward. */
typedef struct {
  sp_qkv_pack pack;
  sp_attn_layout layout;
  int32_t P;
  int32_t kv_repeat;       /**< KV heads replicated this many times (1: none) */
  gboolean overlap;        /**< multi-tensor all-to-all for q, k, v */
  uint32_t in[3];          /**< the inputs (q, k, v / qkv / q, kv) */
  uint32_t ql, kl, vl;     /**< full-sequence head shards fed to the local kernel */
  uint32_t outl;           /**< local attention output [b, S, H/P, d] */
  uint32_t out;            /**< the result [b, s, H, d] */
} sp_ulysses_attn;

/**
 * Ulysses distributed attention forward. Heads must divide by P (clear error
 * otherwise). KV heads: divisible by P -> split; fewer than P with P divisible by
 * them -> replicated (P / KV copies, consecutive) before the all-to-all, gradients
 * summed in backward; otherwise a clear error. @p k / @p v are SP_NO_TENSOR for
 * the packed forms (for KV_PACKED, @p k is kv). @p overlap posts the all-to-alls
 * of q, k, v as a multi-tensor all-to-all.
 */
gboolean sp_op_ulysses_attention(sp_graph *g, const sp_groups *gs, sp_qkv_pack pack,
                                 sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                 gboolean overlap, sp_ulysses_attn *st, GError **err);
/**
 * Backward: @p dout [b, s, H, d] -> gradients of the inputs in @p grads (3 ids for
 * SEPARATE, 1 for PACKED, 2 for KV_PACKED; unused entries SP_NO_TENSOR).
 */
gboolean sp_op_ulysses_attention_bwd(sp_graph *g, const sp_groups *gs, const sp_ulysses_attn *st,
                                     uint32_t dout, uint32_t grads[3], GError **err);

/* ================================================================ Megatron TP */

/** A tensor-parallel MLP-style pair: column-parallel W1 [h, f/P] then row-parallel W2 [f/P, h]. */
typedef struct {
  gboolean seq_parallel; /**< all-gather / reduce-scatter on the sequence dim instead of f / g */
  sp_algo algo;          /**< algorithm of its collectives */
  uint32_t x;            /**< input [T, h] (seq-parallel: [T/P, h]) */
  uint32_t xg;           /**< column input after f / all-gather [T, h] */
  uint32_t w1, w2;       /**< weight shards */
  uint32_t y;            /**< column output [T, f/P] */
  uint32_t zp;           /**< row partial output [T, h] */
  uint32_t z;            /**< output [T, h] (seq-parallel: [T/P, h]) */
} sp_tp_mlp;

/**
 * Column-parallel then row-parallel linear (no activation between: the data-mode
 * check is z = x W1 W2). f: identity forward, all-reduce backward; g: all-reduce
 * forward, identity backward. With @p seq_parallel: all-gather along tokens before
 * the column linear and reduce-scatter along tokens after the row linear (and the
 * conjugates in backward). f dims must divide by P. @p w1, @p w2 are this rank's
 * shards ([h, f/P] and [f/P, h], f32).
 */
gboolean sp_op_tp_mlp(sp_graph *g, const sp_groups *gs, uint32_t x, uint32_t w1, uint32_t w2,
                      gboolean seq_parallel, sp_algo algo, sp_tp_mlp *st, GError **err);
/** Backward: @p dz -> dx, dw1, dw2 (this rank's shards). */
gboolean sp_op_tp_mlp_bwd(sp_graph *g, const sp_groups *gs, const sp_tp_mlp *st, uint32_t dz,
                          uint32_t *dx, uint32_t *dw1, uint32_t *dw2, GError **err);

/* ================================================================ ISP weight parallel */

/** Configuration of an ISP (Intern sequence parallel) stack of blocks. */
typedef struct {
  int32_t blocks;          /**< transformer blocks */
  int32_t modules;         /**< weight-parallel linears per block (hidden -> hidden each) */
  int32_t out_proj;        /**< index of the out_proj module (prefetch point), < modules */
  int64_t tokens;          /**< local tokens (sequence shard) */
  int64_t hidden;          /**< in = out features of every module; divisible by P */
  gboolean overlap;        /**< prefetch next block's weights; two alternating gather buffers */
  int32_t ckpt_blocks;     /**< activation-checkpointed blocks (keep gathered weights for recompute) */
  sp_algo algo;            /**< algorithm of the collectives without overlap (overlap: direct) */
} sp_isp_cfg;

/** Tensors of an ISP stack. */
typedef struct {
  sp_isp_cfg cfg;
  uint32_t x;              /**< input [tokens, hidden] */
  uint32_t y;              /**< output */
  uint32_t *w;             /**< blocks * modules weight shards [hidden/P, hidden] */
  uint32_t *wfull;         /**< gathered weights (pooled in overlap mode) */
  uint32_t *acts;          /**< blocks * modules + 1 activations (acts[0] = x) */
  uint32_t *dw;            /**< filled by the backward: dW shards (AVG reduce-scatter) */
  uint32_t dx;             /**< filled by the backward */
  uint32_t *prefetch_node; /**< per block: first node of its forward gathers (overlap) */
  uint32_t *out_proj_node; /**< per block: the out_proj matmul node */
} sp_isp_stack;

/**
 * Build the forward of an ISP stack: every module all-gathers its weight on dim 0
 * before its matmul (y = x W^T) and frees it after. With overlap: block 0 is
 * gathered up front; block i+1's gathers are posted (async) just before block i's
 * out_proj module, i.e. after that block's attention all-to-all; gathered weights
 * use two pooled buffers alternating by block index (pool 1, slot = (block % 2) *
 * modules + module). Free with sp_isp_stack_clear().
 */
gboolean sp_op_isp_stack(sp_graph *g, const sp_groups *gs, const sp_isp_cfg *cfg, uint32_t x,
                         sp_isp_stack *st, GError **err);
/**
 * Backward: modules in reverse order; each all-gathers its weight again (except
 * checkpointed blocks, which keep the forward's gather), computes dX = dY W and
 * dW = dY^T X, and reduce-scatters dW on dim 0 with AVG. With overlap the previous
 * module's gather is prefetched (async) and dW inputs use pooled buffers (pool 2).
 */
gboolean sp_op_isp_stack_bwd(sp_graph *g, const sp_groups *gs, sp_isp_stack *st, uint32_t dy,
                             GError **err);
void sp_isp_stack_clear(sp_isp_stack *st);

/**
 * ISP head communicator on head outputs [b, s/P, V] (local sequence, whole
 * vocabulary after the weight-parallel head): with @p retain_sharded an all-to-all
 * scattering the vocabulary (dim 2) and gathering the sequence (dim 1) ->
 * [b, s, V/P]; otherwise an all-gather of the sequence -> [b, s, V].
 */
uint32_t sp_op_isp_head(sp_graph *g, const sp_groups *gs, uint32_t out, gboolean retain_sharded,
                        GError **err);
/** Its backward: all-to-all scatter seq (1) gather vocab (2), or own slice of the sequence. */
uint32_t sp_op_isp_head_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad, gboolean retain_sharded,
                            GError **err);

/**
 * Embedding weight parallel: the shard @p w is all-gathered along @p gather_dim
 * (0: vocab parallel, 1: hidden) before use; in backward each of @p micro_steps
 * full gradients in @p dfull (micro_steps ids) is reduce-scattered with AVG and
 * accumulated into one shard gradient, returned.
 */
uint32_t sp_op_isp_embedding_gather(sp_graph *g, const sp_groups *gs, uint32_t w, int gather_dim,
                                    GError **err);
uint32_t sp_op_isp_embedding_grad(sp_graph *g, const sp_groups *gs, const uint32_t *dfull,
                                  int micro_steps, int gather_dim, GError **err);

/* ================================================================ ring / context parallel */

/**
 * Ring attention (context parallelism) forward on the ring group set @p ring: member
 * i holds sequence block i of q, k, v ([b, s/P, H, d] or sequence-first). P steps: at
 * step t the member computes its queries against the k/v block it holds (block
 * i - t mod P; causal: later blocks are skipped, the diagonal block is masked) with an
 * online softmax, while k and v move on (send to member i+1, receive from i-1, posted
 * before the step's compute so they overlap it). Result: [b, s/P, H, d]. Matches
 * single-device attention to float rounding (blocks are summed in another order).
 * For the backward use sp_op_ring_attention_fwd(), which saves what it needs.
 */
uint32_t sp_op_ring_attention(sp_graph *g, const sp_groups *ring, sp_attn_layout layout, uint32_t q,
                              uint32_t k, uint32_t v, GError **err);

/** What a ring-attention forward keeps for its backward. */
typedef struct {
  sp_attn_layout layout;
  uint32_t q, k, v; /**< the ring's inputs (hybrid: after the Ulysses all-to-all) */
  uint32_t state;   /**< the final online-softmax state [.., Hq, d + 2]: (o, m, l) per query row */
  uint32_t out;     /**< the output (hybrid: after the all-to-all back) */
} sp_ring_attn;

/** sp_op_ring_attention(), saving its tensors in @p saved for sp_op_ring_attention_bwd(). */
uint32_t sp_op_ring_attention_fwd(sp_graph *g, const sp_groups *ring, sp_attn_layout layout, uint32_t q,
                                  uint32_t k, uint32_t v, sp_ring_attn *saved, GError **err);

/**
 * Ring attention backward: given @p dout (the output's shape) returns @p dq, @p dk,
 * @p dv (q's, k's and v's shapes, this member's sequence block). P steps on the same
 * ring: at step t member i holds k/v block j = i - t mod P together with that block's
 * dk/dv accumulator; it adds its queries' share (sp_graph_ring_attn_bwd: the
 * probabilities come from the forward's saved m and l, so nothing is recomputed
 * across the ring) and its dq accumulates locally. k and v move on to member i+1
 * before the step's compute (as in the forward); the dk/dv accumulators move on after
 * it, so after P shifts every block's gradient is back with its owner. Causal: blocks
 * j > i are skipped exactly as in the forward (the accumulators pass through). Per
 * member: 2 (P - 1) k/v sends and 2 P dk/dv sends; FLOPs 10 d per (query, key) pair
 * computed, i.e. 10 d b H (i (s/P)^2 + (s/P)(s/P + 1) / 2) on ring index i. Matches
 * single-device attention backward to float rounding (blocks are summed in another
 * order and l comes from the online merge).
 */
gboolean sp_op_ring_attention_bwd(sp_graph *g, const sp_groups *ring, const sp_ring_attn *saved, uint32_t dout,
                                  uint32_t *dq, uint32_t *dk, uint32_t *dv, GError **err);

/**
 * Ulysses x ring hybrid: all-to-all (scatter heads, gather seq) inside the Ulysses
 * groups @p uly (degree U), ring attention across the ring groups @p ring (degree R)
 * on [b, U s/P, H/U, d], then the output all-to-all back. Sequence blocks are indexed
 * ring-major: the rank at ring index r and Ulysses index u holds block r U + u
 * (either physical placement of the two axes works). Heads and KV heads must divide
 * by U.
 */
uint32_t sp_op_ulysses_ring_attention(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                      sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                      GError **err);
/** sp_op_ulysses_ring_attention(), saving its tensors for sp_op_ulysses_ring_attention_bwd(). */
uint32_t sp_op_ulysses_ring_attention_fwd(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                          sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                          sp_ring_attn *saved, GError **err);
/**
 * Hybrid backward: the output all-to-all backward (scatter heads, gather seq) of
 * @p dout, sp_op_ring_attention_bwd() across @p ring, then the input all-to-alls
 * backward (multi-tensor: scatter seq, gather heads) of dq, dk, dv.
 */
gboolean sp_op_ulysses_ring_attention_bwd(sp_graph *g, const sp_groups *uly, const sp_groups *ring,
                                          const sp_ring_attn *saved, uint32_t dout, uint32_t *dq, uint32_t *dk,
                                          uint32_t *dv, GError **err);

/* ================================================================ pipeline */

/** Pipeline schedules. */
typedef enum {
  SP_PIPE_GPIPE = 0, /**< all forwards, then all backwards */
  SP_PIPE_1F1B       /**< warm-up forwards (stages - stage - 1), then one forward one backward;
                          with virtual stages > 1: Megatron's interleaved 1F1B (see sp_op_pipeline) */
} sp_pipe_schedule;

/** A pipeline over micro-batches. */
typedef struct {
  int32_t stages;           /**< = group size of the pipe groups */
  int32_t micro_batches;
  int32_t layers;           /**< must divide by stages x virtual_stages */
  int32_t virtual_stages;   /**< model chunks per stage (1: not interleaved; > 1: micro_batches % stages == 0) */
  sp_pipe_schedule schedule;
  int ndim;                 /**< activation shape sent between stages */
  int64_t shape[SP_MAX_DIMS];
  double flops_fwd_layer;   /**< per micro-batch and layer */
  double flops_bwd_layer;
} sp_pipe_cfg;

/** Tensors of a built pipeline. */
typedef struct {
  uint32_t *x;      /**< micro_batches inputs on stage 0 */
  uint32_t *gx;     /**< micro_batches input gradients on stage 0 */
  uint32_t *y;      /**< micro_batches outputs on the last stage */
} sp_pipeline;

/**
 * Build a pipeline-parallel training step over every pipe group of @p pipe (group
 * member s = stage s). The layers are cut into C = stages x virtual_stages chunks of
 * layers / C layers; chunk c of stage s is global chunk c stages + s, so a
 * micro-batch visits stage 0, 1, .., stages - 1 once per chunk, going from the last
 * stage back to stage 0 between chunks (the wrap-around send). Each chunk is modelled
 * by a COMPUTE node (FLOPs of its layers) and, for data checks, by a scale-by-2 of the
 * activation (so the last chunk's output is x * 2^C and the input gradient x * 2^(2 C)).
 * Activations go to the next chunk and gradients to the previous one by async
 * send/recv (receives complete where the receiving stage consumes them; with a single
 * stage the chunks hand tensors over locally). The node order is a linearisation of
 * the schedule, so each rank's program runs its stage's schedule in order.
 *
 * Schedules without interleaving: GPipe (all forwards, then all backwards) and 1F1B
 * (stages - s - 1 warm-up forwards). With virtual_stages v > 1, 1F1B is Megatron's
 * interleaved schedule (Narayanan et al. 2021) over the v m virtual micro-batches
 * k = 0 .. v m - 1 of stage s: k is micro-batch (k / (p v)) p + k % p (p = stages) in
 * local chunk (k % (p v)) / p going forward and chunk v - 1 - (k % (p v)) / p going
 * backward; warm-up min((p - s - 1) 2 + (v - 1) p, v m) forwards, then one forward one
 * backward, then the remaining backwards. With unit-time chunks its idle fraction
 * is (p - 1) / (v m) (plain 1F1B: (p - 1) / m); stage s sends
 * m (2 v - [s = p - 1] - [s = 0]) messages (v times plain 1F1B's on inner stages).
 * GPipe with v > 1 runs the same order with every forward in the warm-up.
 *
 * Errors (GError, nothing built): layers not divisible by stages x virtual stages (no
 * silent dropping, SP_ERROR_LAYOUT); virtual stages > 1 with micro-batches not
 * divisible by stages (SP_ERROR_LAYOUT); stages not equal to the group size or
 * non-positive sizes (SP_ERROR_INVALID).
 */
gboolean sp_op_pipeline(sp_graph *g, const sp_groups *pipe, const sp_pipe_cfg *cfg, sp_pipeline *pl,
                        GError **err);
void sp_pipeline_clear(sp_pipeline *pl);

/* ================================================================ data parallel */

/**
 * Gradient all-reduce (AVG) in buckets: gradients are packed in order into flat
 * buckets of at most @p bucket_bytes (a gradient larger than that gets its own),
 * each bucket is all-reduced, and results are unpacked into @p out (n new tensors).
 * @return the number of buckets, or -1 with @p err.
 */
int sp_op_dp_allreduce(sp_graph *g, const sp_groups *dp, const uint32_t *grads, int n,
                       uint64_t bucket_bytes, uint32_t *out, GError **err);

/**
 * ZeRO step for @p stage 1, 2 or 3 on flat f32 parameters: gradients (n tensors) are
 * packed into one flat buffer padded to a multiple of P, reduce-scattered with AVG;
 * this rank's parameter shard @p param_shard ([N/P], N padded) is updated by SGD
 * (p += -lr g) and all-gathered into a new full parameter buffer returned in
 * @p params_full (stages 1 and 2; stage 3 returns SP_NO_TENSOR: parameters stay
 * sharded and are gathered before use with sp_op_fsdp_gather). Stages 1 and 2 differ
 * only in memory (stage 2 keeps no full gradient after the reduce-scatter).
 */
gboolean sp_op_zero_step(sp_graph *g, const sp_groups *dp, int stage, const uint32_t *grads, int n,
                         uint32_t param_shard, double lr, uint32_t *grad_shard, uint32_t *params_full,
                         GError **err);
/** ZeRO-3 / FSDP: all-gather a parameter shard on dim 0 before use. */
uint32_t sp_op_fsdp_gather(sp_graph *g, const sp_groups *dp, uint32_t shard, GError **err);

/* ================================================================ all-to-all-v */

/**
 * All-to-all with uneven counts over every group of @p gs (ops_a2av.c): @p in is
 * [P cap, H] f32 on every member, block j (rows [j cap, (j + 1) cap)) for member j;
 * member i sends the first counts[i P + j] rows of its block j to member j (0 <=
 * count <= cap; nothing is sent for 0). @return out [P cap, H]: block i of member j
 * holds the rows member i sent it, zeros after them (MPI_Alltoallv with
 * displacements of cap rows). Built as one send-recv per pair with rows to move, all
 * posted before one wait, received in place through pooled storage. The counts are
 * fixed when the graph is built.
 */
uint32_t sp_op_all_to_all_v(sp_graph *g, const sp_groups *gs, uint32_t in, const int64_t *counts, int64_t cap,
                            GError **err);

/* ================================================================ mixture of experts */

/**
 * A mixture-of-experts layer (ops_moe.c). Each group of the group set is one MoE
 * instance of P = edp x ep x etp ranks; member m has expert-tensor index m % etp,
 * expert-parallel index (m / etp) % ep and expert-data index m / (etp ep) (the
 * tp-ep-dp order of Megatron-Core's expert groups). Every rank routes its own
 * @c tokens tokens (sequence-parallel activations, as Megatron-Core requires for
 * MoE with tensor parallelism).
 */
typedef struct {
  int32_t experts;        /**< E: experts of the layer; ep must divide it */
  int32_t topk;           /**< K: experts per token, 1..E */
  int32_t ep;             /**< expert-parallel size: each ep rank holds E / ep experts */
  int32_t etp;            /**< expert tensor parallelism: each expert's FFN split over etp ranks */
  int64_t tokens;         /**< T: tokens per rank */
  int64_t hidden;         /**< H */
  int64_t ffn;            /**< F: expert FFN size (etp must divide it) */
  double capacity_factor; /**< > 0: capacity C = min(T, ceil(T K / E x factor)) slots per expert */
  sp_moe_drop drop;       /**< which tokens an expert over capacity keeps */
  sp_algo algo;           /**< algorithm of the collectives */
  /** 1: dropless dispatch (every routed pair kept, exact per-(source, expert) counts
   *  sent; no capacity); 0: drop-and-pad to the capacity */
  int32_t dropless;
  /** dropless only: the router's counts known at build time, [rank * experts + e] =
   *  the pairs world rank @c rank routes to expert e (sp_moe_route_counts()), for
   *  every rank of the group set; borrowed for the call of sp_op_moe_layer() */
  const int64_t *dropless_counts;
} sp_moe_cfg;

/** The tensors of a MoE layer's forward (needed by its backward). Clear with sp_moe_layer_clear(). */
typedef struct {
  sp_moe_cfg cfg;
  int64_t capacity;       /**< C */
  sp_groups ep, etp, edp, all; /**< the derived group sets (owned ranks) */
  uint32_t x, wr, w1, w2; /**< x [T, H], wr [H, E], w1 [E/ep, H, F/etp], w2 [E/ep, F/etp, H] */
  uint32_t logits, route, scores, counts; /**< [T, E], [T, K, 3], [T, E], [E] */
  uint32_t recv_counts;   /**< [E]: block j = the kept tokens member j sends to each of my experts */
  uint32_t disp, xin;     /**< dispatch [E, C, H]; the experts' tokens [E/ep, etp ep C, H] */
  uint32_t *xl, *pre, *act; /**< per local expert: its tokens [M, H], x W1 and relu [M, F/etp] */
  uint32_t *w1l, *w2l;    /**< per local expert: its weight shards */
  uint32_t eout;          /**< expert outputs [E/ep, ep C, H] (after the etp reduce-scatter) */
  uint32_t comb;          /**< combined back [E, C, H] */
  uint32_t y;             /**< [T, H] */
  int64_t *counts_tab;    /**< dropless: a copy of sp_moe_cfg.dropless_counts (owned) */
  int32_t counts_ranks;   /**< ranks covered by counts_tab */
  /** dropless: per (k-th rank of the group set, local expert l) at [k E/ep + l], the
   *  expert's exact tokens [N, H] on that rank, x W1 and relu [N, F/etp]
   *  (UINT32_MAX where the rank's expert has no token) */
  uint32_t *dl_x, *dl_pre, *dl_act;
} sp_moe_layer;

/**
 * Check a MoE configuration on groups of @p group_size ranks: top-k between 1 and
 * the experts, ep dividing the experts, group size divisible by ep x etp, etp
 * dividing the FFN size, capacity factor > 0, positive sizes. One clear error line.
 */
gboolean sp_moe_cfg_check(const sp_moe_cfg *cfg, int32_t group_size, GError **err);
/**
 * Update @p cfg from @p spec, "KEY=VALUE,..." with KEY experts, topk, ep, etp,
 * tokens, hidden, ffn (integers from 1; experts at most 1024, the others at most
 * 4096), capacity (the capacity factor), drop (probs or position) and dropless (0 or
 * 1; dropless=1 together with capacity= is refused: a dropless layer has no
 * capacity). Keys left
 * out keep their value; the whole configuration is checked by sp_moe_cfg_check().
 */
gboolean sp_moe_cfg_parse(const char *spec, sp_moe_cfg *cfg, GError **err);
/** Capacity C of @p cfg: min(T, ceil(T K / E x capacity_factor)), at least 1. */
int64_t sp_moe_capacity(const sp_moe_cfg *cfg);
/**
 * The router of @p cfg evaluated on the host for one rank's tokens @p x [T, H] and
 * router weights @p wr [H, E] (the same matmul, softmax and top-k kernels as the
 * graph's router nodes, so the same choices): @p counts [E] = the (token, expert)
 * pairs routed to each expert, nothing dropped. A dropless layer's message sizes
 * come from these counts at build time.
 */
void sp_moe_route_counts(const sp_moe_cfg *cfg, const float *x, const float *wr, int64_t *counts);
/**
 * The derived group sets of @p gs: expert-parallel groups (ep members sharing the
 * etp and edp indices), expert-tensor groups and expert-data groups. g_free the
 * three rank arrays.
 */
gboolean sp_moe_groups(const sp_moe_cfg *cfg, const sp_groups *gs, sp_groups *ep, sp_groups *etp,
                       sp_groups *edp, GError **err);
/**
 * MoE layer forward on @p gs: logits = x wr, the router (softmax, top-k with the
 * lower expert index winning ties, capacity; sp_kernel_moe_route_f32), the
 * per-expert kept counts exchanged over the ep group (all-to-all), the tokens
 * permuted into per-expert capacity slots [E, C, H] and dispatched (all-to-all
 * over the ep group), gathered over the etp group, each local expert's FFN
 * relu(x W1) W2 on its slots, reduce-scattered over etp, combined back (all-to-all)
 * and summed weighted by the router probabilities. f32 tensors.
 *
 * With @c cfg->dropless, nothing is dropped: the counts in @c cfg->dropless_counts
 * (fixed at build time) size every message, each pair's dispatch and combine move
 * exactly the rows routed between them (grouped send-recvs, ops_moe_dropless.c),
 * and every rank's experts compute on exactly their tokens.
 */
gboolean sp_op_moe_layer(sp_graph *g, const sp_groups *gs, const sp_moe_cfg *cfg, uint32_t x, uint32_t wr,
                         uint32_t w1, uint32_t w2, sp_moe_layer *st, GError **err);
/**
 * Backward of sp_op_moe_layer for @p dy [T, H]: @p dx [T, H]; @p dwr [H, E]
 * summed over the whole group (the router is replicated); @p dw1, @p dw2 the
 * expert weight gradients summed over the expert-data group (the loss is the sum
 * over tokens).
 */
gboolean sp_op_moe_layer_bwd(sp_graph *g, sp_moe_layer *st, uint32_t dy, uint32_t *dx, uint32_t *dwr,
                             uint32_t *dw1, uint32_t *dw2, GError **err);
void sp_moe_layer_clear(sp_moe_layer *st);
/**
 * The single-device reference of a MoE layer: from the inputs in @p d (every rank's
 * x, member 0's wr, the expert shards of the expert-data index 0), compute the
 * whole layer of every group rank by rank on the host without communication and
 * compare it with the tensors in @p d: y (and, when @p dy is not SP_NO_TENSOR, dx,
 * dwr, dw1, dw2), each within @p tol relative (0: bitwise; sp_graph_data_compare's
 * rule). SP_ERROR_MISMATCH names the tensor, rank and element.
 */
gboolean sp_moe_reference_check(const sp_graph *g, sp_graph_data *d, const sp_moe_layer *st, uint32_t dy,
                                 uint32_t dx, uint32_t dwr, uint32_t dw1, uint32_t dw2, double tol_fwd,
                                 double tol_bwd, GError **err);

/* ================================================================ verify hook */

/** Result of a built-in self-check of one operation. */
typedef struct {
  const char *name;        /**< operation name for `spsim verify --op` */
  const char *help;        /**< one line */
  /**
   * Build the operation's forward+backward graph on a world of @p world ranks with
   * groups of @p group ranks (world % group == 0), run its reference, and (when
   * @p run is non-NULL) execute it with @p run over the lowered programs, then
   * compare. @p run may be sp_graph_run_loopback or an engine's runner.
   */
  gboolean (*check)(int32_t world, int32_t group,
                    gboolean (*run)(const sp_graph *g, sp_graph_data *d, GError **err),
                    GError **err);
} sp_op_verify_entry;

/**
 * A whole-world verification case of one operation, for engines that run all
 * ranks' programs themselves (`spsim verify --op` on SimGrid): the graph is built
 * on @p world ranks in groups of @p group, inputs filled, the reference computed,
 * and every rank's whole program lowered with buffers ready (storage first, then
 * scratch). The engine runs sp_graph_case_progs() over sp_graph_case_bufs(),
 * calling sp_graph_case_compute() for every COMPUTE step in data mode (it runs the
 * data kernels; the signature fits sp_sim_set_compute_hook), then
 * sp_graph_case_check() compares every output with the reference.
 */
typedef struct sp_graph_case sp_graph_case;
sp_graph_case *sp_ops_verify_case_new(const char *name, int32_t world, int32_t group, GError **err);
/**
 * sp_ops_verify_case_new with the operation's options @p opts (NULL: its defaults):
 * moe-layer and moe-layer-bwd take sp_moe_cfg_parse()'s "KEY=VALUE,..." over their
 * defaults (E = 2 ep experts, top-2, ep = group / 2 from 4 ranks, 4 tokens, hidden
 * and FFN 4, capacity factor 1, drop probs; etp 2 for moe-layer-bwd when 4 divides
 * the group); other operations take none (SP_ERROR_INVALID).
 */
sp_graph_case *sp_ops_verify_case_new_opts(const char *name, int32_t world, int32_t group, const char *opts,
                                           GError **err);
int32_t sp_graph_case_world(const sp_graph_case *c);
sp_program *const *sp_graph_case_progs(const sp_graph_case *c);
void **const *sp_graph_case_bufs(const sp_graph_case *c);
/** Bytes of the compared outputs on one rank (for reports). */
uint64_t sp_graph_case_bytes(const sp_graph_case *c);
/** COMPUTE-step hook: runs the step's data kernel on @p rank's buffers (other steps: no-op). */
gboolean sp_graph_case_compute(void *c, int32_t rank, const sp_step *s, void *const *bufs, GError **err);
/** Compare outputs with the reference; on mismatch FALSE with the first rank and byte offset. */
gboolean sp_graph_case_check(void *c, int32_t *bad_rank, uint64_t *bad_off, GError **err);
/**
 * Per-rank view, for engines where each process runs one rank (spsim-run): every
 * process builds the same case, runs sp_graph_case_progs()[rank] over
 * sp_graph_case_bufs()[rank] and judges that rank alone.
 *
 * sp_graph_case_has_outputs: TRUE when @p rank holds at least one compared output
 * (the "members" that get a checksum line).
 */
gboolean sp_graph_case_has_outputs(const sp_graph_case *c, int32_t rank);
/**
 * Compare the compared outputs that @p rank holds with the reference (same rules
 * as sp_graph_case_check: bitwise, or the output's relative tolerance for f32).
 * On mismatch FALSE with SP_ERROR_MISMATCH and the first differing byte offset
 * inside the first differing output in *@p bad_off (may be NULL). A rank outside
 * the world: SP_ERROR_INVALID.
 */
gboolean sp_graph_case_check_rank(const sp_graph_case *c, int32_t rank, uint64_t *bad_off, GError **err);
/**
 * Checksum of @p rank's run data: sp_checksum() chained from 0 over the bytes of
 * each compared output the rank holds, in the case's output order (0 for ranks
 * without outputs). Printed with sp_checksum_print_lines() over the ranks with
 * outputs in increasing order, and combined with sp_checksum_combine(), exactly
 * as the collectives' sp_case_print_checksums() (spsim/verify.h).
 */
uint64_t sp_graph_case_checksum(const sp_graph_case *c, int32_t rank);
void sp_graph_case_free(void *c);
/**
 * Testing aid: change one exponent bit of element 0 of the first compared output
 * that @p rank holds in the run's data (call after the run, before the check), so
 * that sp_graph_case_check() must report that rank. @return FALSE when @p rank
 * holds no compared output.
 */
gboolean sp_graph_case_corrupt(sp_graph_case *c, int32_t rank);

/* ================================================================ layout checks */

/** What a reduced-size check of one parallel dimension builds (`spsim PLATFORM.xml --verify`). */
typedef enum {
  SP_CHECK_TP_MLP = 0,   /**< Megatron column->row MLP, forward + backward (SP variant by flag) */
  SP_CHECK_ULYSSES,      /**< Ulysses attention, forward + backward */
  SP_CHECK_RING,         /**< ring attention, forward + backward */
  SP_CHECK_ULYSSES_RING, /**< Ulysses (groups) x ring (groups2) hybrid attention, forward + backward */
  SP_CHECK_ISP,          /**< ISP weight-parallel linear stack (with or without prefetch), forward + backward */
  SP_CHECK_PIPELINE,     /**< 1F1B pipeline over the pipe groups (member s = stage s) */
  SP_CHECK_DP            /**< gradient all-reduce (zero 0) or ZeRO step 1-3 with parameter gather */
} sp_check_kind;

/**
 * One check on a world of @p world ranks 0..world-1 (an engine maps them to the
 * hosts of the layout's real ranks). Group sets are borrowed; any disjoint groups of
 * ranks inside the world (e.g. stride-tp Ulysses groups with their TP siblings).
 * Sizes are small and fixed: 2 tokens per rank of the sequence split (q, k, v
 * [1, 2, heads, 4]), hidden 8 (ISP: the smallest multiple of the degree >= 8), TP
 * ffn 4 per rank, 2 gradients of 40 elements in all for DP. Outputs reduced over P
 * ranks are compared to a relative tolerance of 1e-5 x max(1, P / 8) (summation order).
 */
typedef struct {
  sp_check_kind kind;
  int32_t world;
  sp_groups groups;       /**< the dimension's groups (ULYSSES_RING: the Ulysses groups) */
  sp_groups groups2;      /**< ULYSSES_RING: the ring groups over the same ranks */
  gboolean seq_parallel;  /**< TP_MLP: Megatron sequence parallelism */
  int64_t heads;          /**< attention: query heads entering the op on each rank */
  int64_t kv_heads;       /**< attention: KV heads (fewer than the Ulysses degree: replicated) */
  int32_t zero;           /**< DP: ZeRO stage 0..3 */
  int32_t layers;         /**< ISP blocks (0: 2) / pipeline layers (0: one per chunk) */
  int32_t virtual_stages; /**< PIPELINE: chunks per stage (0, 1: plain 1F1B; > 1: interleaved,
                               2 x stages micro-batches) */
  gboolean prefetch;      /**< ISP: overlap mode (prefetch, two alternating gather buffers,
                               direct collectives: P^2 concurrent flows); FALSE: ring collectives */
} sp_check_cfg;

/** "tp-mlp", "tp-mlp-sp", "ulysses-attention", "ring-attention", "ulysses-ring", "isp-linear", "pipeline-1f1b", "dp". */
const char *sp_check_kind_name(sp_check_kind k, gboolean seq_parallel);
/**
 * Build the case of @p cfg (inputs filled, reference computed, programs lowered),
 * to be run like sp_ops_verify_case_new()'s. Bad groups or a degree the operation
 * cannot be built for: NULL with @p err.
 */
sp_graph_case *sp_check_case_new(const sp_check_cfg *cfg, GError **err);

/** The entry for operation @p name, or NULL. */
const sp_op_verify_entry *sp_ops_verify_lookup(const char *name);
/** All entries, terminated by an entry with name NULL. */
const sp_op_verify_entry *sp_ops_verify_table(void);

G_END_DECLS

#endif
