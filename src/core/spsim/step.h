/**
 * @file step.h
 * @brief Closed-form cost model of one training step of a layout: compute time,
 *        the list of collectives the step issues (with the volumes the operation
 *        library emits), their exposure on the critical path, pipeline bubbles and
 *        memory per GPU. Collectives are priced through a callback, so the same model
 *        runs on the SimGrid engine (src/sim) or on the analytic alpha-beta pricer here.
 *
 * The communication list is the seam to the operation library: once step graphs are
 * built from the ops, sp_step_comms() is replaced by a walk of that graph.
 */
#ifndef SPSIM_STEP_H
#define SPSIM_STEP_H

#include <glib.h>
#include <stdint.h>
#include "spsim/coll.h"
#include "spsim/kernel_model.h"
#include "spsim/layout.h"
#include "spsim/model.h"

G_BEGIN_DECLS

/** Kinds of communication, as reported. */
typedef enum {
  SP_COMM_TP = 0,  /**< Megatron TP all-reduce, or all-gather/reduce-scatter with SP */
  SP_COMM_SP,      /**< Ulysses all-to-alls */
  SP_COMM_ISP,     /**< ISP weight all-gather / gradient reduce-scatter, and ZeRO-3's */
  SP_COMM_RING,    /**< ring attention K/V exchange */
  SP_COMM_PP,      /**< pipeline activation / gradient send-recv */
  SP_COMM_DP,      /**< data-parallel gradient reduction and ZeRO-1/2 parameter gather */
  SP_COMM_KIND_COUNT
} sp_comm_kind;

/** @return "tp", "sp", "isp", "ring", "pp", "dp". */
const char *sp_comm_kind_name(sp_comm_kind k);

/** When a collective happens. */
typedef enum {
  SP_PER_LAYER_FWD = 0, /**< every layer, every micro-batch, forward */
  SP_PER_LAYER_BWD,     /**< every layer, every micro-batch, backward (incl. recompute) */
  SP_PER_MB,            /**< every micro-batch, once per stage (pipeline sends: fwd + bwd) */
  SP_PER_STEP,          /**< once per step (gradient reduction, parameter gather) */
  SP_PER_MB_EMBED,      /**< every micro-batch, on the stage holding the input embedding */
  SP_PER_MB_HEAD,       /**< every micro-batch, on the stage holding the output layer */
} sp_comm_when;

/**
 * One collective of the step. The group is {0, stride, 2 stride, ..., (n-1) stride}
 * (the group of rank 0; the others are translations of it under the rank order).
 * @c bytes is the per-rank size of the large side: the all-reduce buffer, the gathered
 * all-gather output, the reduce-scatter input, the all-to-all buffer, the message.
 */
typedef struct {
  sp_comm_kind kind;
  sp_comm_when when;
  sp_coll coll;
  int32_t n;
  int32_t stride;
  uint64_t bytes;
  double times;      /**< occurrences per @c when */
  const char *what;  /**< static description */
} sp_comm;

/** Prices one collective (the whole group, every member running it) in seconds. */
typedef gboolean (*sp_comm_price_fn)(void *user, const sp_comm *c, double *seconds, GError **err);

/** Hardware and efficiency assumptions (docs/whatif.md gives the sources). */
typedef struct {
  sp_kernel_gpu gpu;       /**< kernel time model: peak, HBM, SMs, GEMM and attention efficiency */
  sp_attn_impl attn;       /**< attention implementation */
  sp_fp8_recipe fp8;       /**< FP8 recipe of the layers' linears (SP_FP8_NONE: the model's dtype) */
  double mem_bytes;        /**< GPU memory in bytes */
  double mem_usable;       /**< usable fraction of it (allocator, CUDA context, NCCL) */
  double dp_bucket_params; /**< gradient bucket size in parameters (last bucket is exposed) */
  double comm_slowdown;    /**< kernels take 1 + comm_slowdown times as long while a collective runs
                                beside them (the closed form's estimate of the step simulation's;
                                0: none) */
} sp_step_hw;

/** Fill the defaults for an H100 SXM (sp_kernel_gpu_h100, flash attention, 80 GiB). */
void sp_step_hw_init(sp_step_hw *hw);

/** Inputs of the step model. */
typedef struct {
  const sp_model *model;
  int64_t seq;
  int64_t global_batch;   /**< sequences */
  int32_t world;
  int32_t gpus_per_node;
  sp_step_hw hw;
  sp_comm_price_fn price;
  void *price_user;
  const double *expert_share; /**< MoE routing: token share of each expert (n_expert_share = experts values,
                                   any positive scale), experts placed in order, experts / ep per rank;
                                   NULL: uniform routing (sp_moe_routing_parse) */
  int64_t n_expert_share;
} sp_step_ctx;

/** Memory per GPU, bytes (the fullest pipeline stage). */
typedef struct {
  double weights, grads, optim, act, buffers, total;
} sp_step_mem;

/** Result of evaluating one layout. All times in seconds, per step unless noted. */
typedef struct {
  sp_layout layout;
  int64_t microbatches;
  double step_time;
  double compute;                        /**< compute on the critical path (incl. recompute) */
  double bubble;                         /**< pipeline fill/drain */
  double exposed[SP_COMM_KIND_COUNT];    /**< communication on the critical path */
  double comm[SP_COMM_KIND_COUNT];       /**< all communication time of the kind, before overlap */
  double mb_fwd, mb_bwd, mb_p2p;         /**< one micro-batch on the fullest stage */
  double dp_tail;                        /**< exposed gradient/parameter collectives at step end */
  double optimizer;                      /**< optimizer step (Adam, HBM bound) at step end */
  double tokens_per_s;
  double mfu;                            /**< model FLOPs, causal attention: tokens x (6 N + 6 L h s), / (time x GPUs x peak) */
  double mfu_palm;                       /**< the same with PaLM's non-causal attention count, 6 N + 12 L h s */
  double hfu;                            /**< incl. recomputation */
  double tflops;                         /**< model TFLOP/s per GPU */
  sp_step_mem mem;
  gboolean fits;
  gboolean simulated;                    /**< step_time comes from running the step graph */
  double closed_form;                    /**< the closed form's step time (sp_step_eval) */
} sp_step_result;

/** Tokens each rank processes per micro-batch in token-parallel parts: mb x seq / (sp x cp). */
double sp_step_local_tokens(const sp_layout *l, int64_t seq);

/** Fraction of the step spent in 1F1B fill/drain relative to useful work: (pp - 1) / m. */
double sp_step_bubble_fraction(int32_t pp, int64_t microbatches);

/** KV heads one TP rank holds: kv_heads / tp, or 1 (replicated) when tp does not divide them. */
double sp_step_kv_per_tp(const sp_model *m, const sp_layout *l);

/**
 * Activation bytes of one layer for one micro-batch on one rank: Korthikanti et al.
 * 2022 (sec. 4.1) written with the model's shapes (dtype, GQA/MLA widths, GeLU or
 * SwiGLU MLP). An MHA GeLU layer with ffn = 4h in 16 bits keeps sbh (10 + 24/t) without
 * SP and sbh 34/t with SP, plus, without recomputation, the attention core's tensors:
 * 5 a s^2 b / t for @p attn SP_ATTN_UNFUSED, one fp32 log-sum-exp per query row and
 * head for the fused kernels. Selective keeps the token-wise part; full keeps the layer
 * input, 2 sbh (/t with SP); op is torchtitan's per-op policy. Sequence splits sp, cp
 * divide s for token-wise terms and the score term keeps (s/cp) x s scores of a/(t sp)
 * heads.
 */
double sp_step_act_layer_bytes(const sp_model *m, const sp_layout *l, int64_t seq, sp_attn_impl attn);

/**
 * sp_step_act_layer_bytes with the inputs the linears save for their weight gradient
 * kept at @p lin bytes per value (the model's dtype bytes without FP8:
 * sp_step_act_lin_bytes): with FP8 linears the QKV, MLP (and expert) inputs and the
 * second MLP GEMM's input are kept as FP8 copies, and the output projection keeps one
 * beside the attention kernel's own output.
 */
double sp_step_act_layer_bytes_lin(const sp_model *m, const sp_layout *l, int64_t seq, sp_attn_impl attn, double lin);

/**
 * Bytes per value of a linear's input saved for its weight gradient: the model's dtype,
 * or with FP8 linears the FP8 copy Transformer Engine's Linear keeps (its
 * transformer_engine/pytorch/module/linear.py caches the quantized input, column-wise
 * data only; DeepSeek-V3 report sec. 3.3.3 caches FP8 activations for the Linear's
 * backward), 1 byte, plus a 4-byte scale per 128 values with blockwise scaling.
 */
double sp_step_act_lin_bytes(const sp_step_ctx *c);

/**
 * Bytes one token keeps on one rank for the MLP block of a dense layer (its input,
 * dropout mask and the tensors its backward reads: 2 ffn for GeLU, 3 ffn for fused
 * SwiGLU, 4 ffn for eager SwiGLU, split by t; the input and the second GEMM's input at
 * @p lin bytes per value, sp_step_act_lin_bytes). Part of sp_step_act_layer_bytes.
 */
double sp_step_act_mlp_token_bytes(const sp_model *m, const sp_layout *l, double lin);

/**
 * Kernel times, in seconds, of one transformer layer for one micro-batch on one rank
 * (the rank's tokens mb x seq / (sp x cp), TP's share of the weights), from the
 * kernel model (kernel_model.h). GEMMs as {forward, data gradient, weight gradient}:
 * forward T x N x K, data gradient T x K x N, weight gradient K x N x T.
 */
typedef struct {
  double qkv[3];     /**< fused Q, K, V projection */
  double proj[3];    /**< attention output projection */
  double up[3];      /**< MLP up (and gate, SwiGLU) projection */
  double down[3];    /**< MLP down projection */
  double attn_fwd;   /**< core attention forward (flash or unfused) */
  double attn_bwd;   /**< core attention backward */
  double elem_fwd;   /**< element-wise kernels of the layer's forward (norms, activation, residuals) */
  double op_recompute; /**< what ckpt=op recomputes before the layer's backward: the element-wise forward
                            and the 2nd, 4th and 6th forward matmuls (K, output projection, and the MLP's
                            second: SwiGLU's up projection w3, else the down projection) */
  double rmod_attn;  /**< what ckpt=selective's modules recompute before every layer's backward beside
                          the attention core: the two norms (layernorm) and multi-head latent
                          attention's up-projections with their latent norms (mla_up_proj) */
  double rmod_mlp;   /**< what they recompute before a dense layer's backward: its MLP forward (mlp) */
  double head[3];    /**< output layer (LM head) GEMM */
  double loss;       /**< softmax cross-entropy over the logits (each direction: sp_step_loss_time) */
} sp_layer_kernels;

/**
 * HBM bytes per token of a layer's element-wise forward when the model's element-wise
 * ops run as torchtitan's eager PyTorch ops (model key "elementwise": "eager"): two fp32
 * RMSNorms, two residual adds, rotary on Q and K through complex fp32 products, the GQA
 * repeat of K and V, SiLU and the gate product; one TP rank's share.
 */
double sp_step_eager_elem_bytes_per_token(const sp_model *m, const sp_layout *l);
/**
 * HBM bytes per logit of the loss (softmax cross-entropy over logits of @p elem bytes)
 * and its backward: @p impl SP_LOSS_UNFUSED as Megatron-LM's vocab-parallel cross
 * entropy and torchtitan's cross_entropy(logits.float()) run it in fp32, 52 for 16-bit
 * logits and 40 for fp32 (no casts); SP_LOSS_FUSED (flash-attn's fused kernel) 3 @p elem.
 */
double sp_step_loss_bytes_per_logit(sp_loss_impl impl, double elem);
/**
 * Time of the loss in one direction (forward or backward: half the bytes of
 * sp_step_loss_bytes_per_logit and half its kernels, 9 unfused, 7 for fp32 logits, 2
 * fused) over @p logits logits of @p elem bytes on @p g.
 */
double sp_step_loss_time(const sp_kernel_gpu *g, sp_loss_impl impl, double elem, double logits);
/** Kernel times of one layer of @p l (and its LM head) for one micro-batch on one rank. */
gboolean sp_step_layer_kernels(const sp_step_ctx *c, const sp_layout *l, sp_layer_kernels *o, GError **err);
/** Sum of the layer's forward GEMMs. */
double sp_layer_kernels_mm_fwd(const sp_layer_kernels *k);
/** Sum of the layer's backward GEMMs (data and weight gradients). */
double sp_layer_kernels_mm_bwd(const sp_layer_kernels *k);
/**
 * Parameters pipeline stage @p stage holds on one TP rank, before ISP and ZeRO
 * sharding: its layers, the input embedding on the first stage, the final norm and
 * output layer on the last.
 */
double sp_step_stage_params(const sp_model *m, const sp_layout *l, int32_t stage);
/**
 * HBM bytes per parameter of Megatron-LM's mixed-precision optimizer step: gradient norm
 * 4, Adam 28, the copy to the 16-bit weights 6 (38), and for an fp16 model the loss
 * scaler's unscale-and-check pass 8 (46).
 */
double sp_step_optimizer_bytes_per_param(const sp_model *m);
/** Time of the Adam step over @p params parameters of one TP rank (ISP and ZeRO shard them). */
double sp_step_optimizer_time(const sp_step_ctx *c, const sp_layout *l, double params);

/** Per-rank sizes in bytes of the collectives of one layer and micro-batch. */
typedef struct {
  double act;           /**< the rank's activations, sl h (TP all-reduce buffer, SP gathered array) */
  double q;             /**< Ulysses all-to-all of Q or of the attention output, sl h / tp */
  double kv;            /**< Ulysses all-to-all of K or V, sl max(kv heads / tp, sp) d */
  double ring_blk;      /**< ring attention K,V block, 2 (b s / cp) kv d */
  double layer_weights; /**< a layer's GEMM weights on one TP rank (ISP and ZeRO-3 gathers) */
  double pp_msg;        /**< pipeline send, sl h (/ tp with sequence parallelism) */
} sp_step_sizes;

/** Sizes of @p l's per-layer collectives (sp_step_comms and the step graph use them). */
void sp_step_comm_sizes(const sp_step_ctx *c, const sp_layout *l, sp_step_sizes *o);

/**
 * The collective call that carries @p c with @p bytes per rank on nodes of
 * @p gpus_per_node GPUs, as the engine prices it and the data-mode replay of the
 * step graph runs it: c->coll (a send-recv pair has n = 2), the AUTO algorithm,
 * BF16 and SUM, the count per member from @p bytes (all-gather, reduce-scatter and
 * all-to-all: the per-rank array split in n blocks; the others: one buffer), and
 * ring channels as NCCL lays them out on multi-GPU nodes: a ring that leaves the
 * node with k > 1 consecutive members per node (stride < gpus per node) runs
 * min(k, SP_MAX_CHANNELS) channels rotated by k, each crossing between nodes
 * through a different GPU's NIC. @p spec->ranks is left NULL for the caller.
 */
void sp_comm_coll_spec(const sp_comm *c, int32_t gpus_per_node, uint64_t bytes, sp_coll_spec *spec);

/**
 * Warm-up forward passes of pipeline rank @p stage in Megatron-LM's 1F1B order
 * (megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches): pp - stage - 1,
 * interleaved (@p v > 1) 2 (pp - stage - 1) + (v - 1) @p group (the micro-batches per group,
 * sp_layout_vpp_group; 0: pp), or every pass when m = pp; @p ov (a2aoverlap, paired forward
 * and backward) one more; at most m x v.
 */
int64_t sp_step_warmup(int32_t pp, int32_t v, int64_t m, int64_t group, int32_t stage, gboolean ov);

/**
 * Most chunk forward passes whose activations pipeline rank @p stage holds at once in
 * that order: its warm-up plus the forward run before each backward, at most m x v;
 * without pipelining (pp = 1) one micro-batch, two with @p ov.
 */
int64_t sp_step_live_passes(int32_t pp, int32_t v, int64_t m, int64_t group, int32_t stage, gboolean ov);

/** Memory per GPU of @p l: its fullest pipeline stage (weights, and activations of the
 *  passes sp_step_live_passes counts on each stage). */
void sp_step_memory(const sp_step_ctx *c, const sp_layout *l, sp_step_mem *out);

/** Append the collectives of one step of @p l to @p out (GArray of sp_comm). */
void sp_step_comms(const sp_step_ctx *c, const sp_layout *l, GArray *out);

/**
 * Append the collectives of the input embedding and the output layer (Megatron-LM's
 * VocabParallelEmbedding and ColumnParallelLinear) to @p out, per micro-batch
 * (SP_PER_MB_EMBED, SP_PER_MB_HEAD), and, for tied embeddings split over pipeline
 * stages, the all-reduce of the word-embedding gradient between the first and last
 * stage (SP_PER_STEP, kind SP_COMM_PP). sp_step_comms includes them.
 */
void sp_step_edge_comms(const sp_step_ctx *c, const sp_layout *l, GArray *out);

/** Bytes per element of the data-parallel gradient reduction: 4 with dpfp32=1, else
 * the model's dtype. */
double sp_step_grad_bytes(const sp_model *m, const sp_layout *l);

/**
 * Set @p r's step time to @p step_time and derive its throughput figures from it:
 * tokens/s, MFU (causal attention), PaLM-style MFU, HFU and model TFLOP/s per GPU.
 */
void sp_step_set_time(const sp_step_ctx *c, const sp_layout *l, sp_step_result *r, double step_time);

/** Evaluate @p l (a checked layout) with the closed form. */
gboolean sp_step_eval(const sp_step_ctx *c, const sp_layout *l, sp_step_result *r, GError **err);

/** Network of the analytic pricer. */
typedef struct {
  int32_t gpus_per_node;
  double intra_busbw;   /**< NVLink bus bandwidth per GPU, bytes/s (ring all-reduce) */
  double nic_bw;        /**< network bandwidth per GPU (one NIC each), bytes/s */
  double alpha_intra;   /**< latency per step inside a node, s */
  double alpha_inter;   /**< latency per step across nodes, s */
} sp_analytic_net;

/** Defaults: DGX H100 (360 GB/s NVLink busbw, 8 x 400 Gb/s NICs at 46 GB/s, 3.4 / 14 us). */
void sp_analytic_net_init(sp_analytic_net *n);

/**
 * Alpha-beta pricer (@p user is an sp_analytic_net): ring/pairwise time with bandwidth
 * min(NVLink, members per node x NIC) for groups spanning nodes; latency (n-1) hops for
 * ring all-gather/reduce-scatter/all-to-all, the smaller of ring 2(n-1) hops and tree
 * 2 log2(n) hops for all-reduce (NCCL's tuning model), a hop costing alpha_inter when
 * the group spans nodes.
 */
gboolean sp_price_analytic(void *user, const sp_comm *c, double *seconds, GError **err);

/* ---------- TP communication overlap (step_tpoverlap.c) ---------- */

/** Chunks of Megatron-LM's --tp-comm-overlap (Transformer Engine's default userbuffers): the
 *  reduce-scatter after a row-parallel GEMM is pipelined in this many chunks (4). */
int32_t sp_step_tpo_rs_splits(void);
/** The collectives of an overlapped TP layer: @p shard, one ring-exchange step of an
 *  all-gather (a send-recv of one rank's shard, act / tp bytes), and @p rs, one chunk of a
 *  pipelined reduce-scatter (act / sp_step_tpo_rs_splits() bytes over the TP group). */
void sp_step_tpo_comms(const sp_step_ctx *c, const sp_layout *l, sp_comm *shard, sp_comm *rs);
/** Time of a GEMM of @p gemm seconds behind a ring-exchange all-gather over @p n ranks whose
 *  steps take @p shard each: the held shard's GEMM first, then each of the n - 1 others as
 *  soon as both its shard and the previous chunk are done: gemm/n + (n-1) max(gemm/n, shard). */
double sp_step_tpo_ag_time(double gemm, int32_t n, double shard);
/** Time of a GEMM of @p gemm seconds in @p k chunks, each chunk's reduce-scatter of @p chunk
 *  seconds after it and under the next chunk: gemm/k + (k-1) max(gemm/k, chunk) + chunk. */
double sp_step_tpo_rs_time(double gemm, int32_t k, double chunk);
/** Per layer and micro-batch, what tpoverlap=1 changes in the closed form's TP terms. */
typedef struct {
  double plain_f, plain_b;     /**< the blocking all-gathers / reduce-scatters it replaces (forward, backward) */
  double comm_f, comm_b;       /**< the chunks' communication time */
  double exposed_f, exposed_b; /**< the time the data path waits beyond the GEMMs */
} sp_tpo_terms;
/**
 * The terms of @p l (all 0 unless tp_overlap): forward, the QKV and MLP-up GEMMs behind
 * ring-exchange all-gathers and the output-projection and MLP-down GEMMs before pipelined
 * reduce-scatters; backward, the output-projection and MLP-down data gradients behind
 * ring-exchange all-gathers. @p dense: the share of the stage's layers with a dense MLP
 * (MoE layers keep their MLP's collectives).
 */
gboolean sp_step_tpo_terms(const sp_step_ctx *c, const sp_layout *l, const sp_layer_kernels *k, double dense,
                           sp_tpo_terms *o, GError **err);
/** Descriptions of the overlapped TP collectives. */
extern const char sp_tpo_what_shard[], sp_tpo_what_rs[];

/* ---------- mixture of experts (step_moe.c) ---------- */

/**
 * Parse a routing model for @p experts experts: "uniform" (*shares = NULL), "zipf:S"
 * (expert i of popularity rank i takes a share proportional to 1 / (i + 1)^S, S >= 0), or
 * FILE, a JSON list of @p experts non-negative token shares (any scale, not all zero).
 * @p shares (g_malloc'ed: g_free) are those shares scaled to sum 1.
 */
gboolean sp_moe_routing_parse(const char *spec, int64_t experts, double **shares, GError **err);
/**
 * The shares of a routing file from its text: @p len bytes of @p json (-1:
 * NUL-terminated), named @p name in messages, read as sp_moe_routing_parse reads FILE.
 */
gboolean sp_moe_routing_shares_parse(const char *json, gssize len, const char *name, int64_t experts, double **shares,
                                     GError **err);

/**
 * Imbalance of @p l's MoE layers: the busiest EP rank's routed tokens over the mean
 * (1 with uniform routing): ep x the largest sum of shares over a rank's experts / the
 * sum of all shares, capped by the capacity factor when the model has one (tokens past
 * an expert's capacity are dropped).
 */
double sp_step_moe_imbalance(const sp_step_ctx *c, const sp_layout *l);

/** Kernel times (seconds) of one MoE layer for one micro-batch on the busiest rank. */
typedef struct {
  double tokens;      /**< tokens the rank routes: its sequence shard, mb x seq / (sp x cp x tp) */
  double assigned;    /**< token-expert pairs its experts compute: tokens x topk x etp x imbalance */
  double a2a_bytes;   /**< dispatch (= combine) all-to-all buffer per rank: tokens x topk x h x bytes x imbalance */
  int32_t nodes;      /**< dispatcher=flex across nodes: the nodes the expert-parallel group spans (else 0) */
  double node_bytes;  /**< and the network all-to-all's buffer per rank: tokens x h x bytes x imbalance x nodes x
                           the chance that a node holds one of a token's experts (sp_step_moe_node_share) */
  double router[3];   /**< router GEMM tokens x experts x h (router dtype) */
  double experts[3];  /**< the rank's experts as one grouped GEMM: up (and gate) then down, expert_ffn / etp columns */
  double shared[3];   /**< shared experts, split by tp as a dense MLP over the gathered tokens */
  double permute;     /**< token permutation before dispatch and after combine (HBM bound), each direction */
  double act;         /**< the experts' activation over their rows (routed and shared), element-wise, less the
                           dense MLP's that sp_layer_kernels elem_fwd counts (negative where the dense MLP is
                           wider); forward, the backward twice it as for elem_fwd */
  double dense_fwd;   /**< the dense MLP this layer replaces (sp_layer_kernels up + down), forward */
  double dense_bwd;   /**< and backward */
} sp_moe_kernels;

/**
 * With dispatcher=flex, the chance that a given node of the expert-parallel group's
 * @p nodes holds at least one of a token's experts, experts spread evenly over the nodes
 * and routing uniform: 1 - C(E - E/n, k) / C(E, k) over the E experts and top-k, or
 * with group-limited routing whose groups fill whole nodes, 1 - C(G - G/n, M) / C(G, M)
 * over the G groups of which a token uses M.
 */
double sp_step_moe_node_share(const sp_model *m, int32_t nodes);

/** Kernel times of an MoE layer of @p l (all 0 for a dense model). */
gboolean sp_step_moe_kernels(const sp_step_ctx *c, const sp_layout *l, sp_moe_kernels *o, GError **err);
/** Forward time of an MoE layer's MLP part: router, permutations, experts, shared experts. */
double sp_moe_kernels_fwd(const sp_moe_kernels *k);
/** Backward time of it (data and weight gradients). */
double sp_moe_kernels_bwd(const sp_moe_kernels *k);

/** MoE layers on pipeline stage @p stage (its layers in order, stage after stage). */
int64_t sp_step_moe_stage_layers(const sp_model *m, const sp_layout *l, int32_t stage);
/** Non-expert weights of stage @p stage's layers (attention, norms, dense MLPs, routers, shared
 *  experts), all TP ranks together (no embeddings). */
double sp_step_moe_stage_dense_params(const sp_model *m, const sp_layout *l, int32_t stage);
/** The most non-expert weights any stage holds on one TP rank, embeddings included
 *  (sp_step_stage_params' counterpart for MoE models). */
double sp_step_moe_max_stage_dense_params(const sp_model *m, const sp_layout *l);
/** The most MoE layers of any stage. */
int64_t sp_step_moe_max_stage_layers(const sp_model *m, const sp_layout *l);
/** Non-expert weights of layer @p i on one TP rank: attention, norms, and the dense MLP or the
 *  router and shared experts. */
double sp_step_moe_layer_dense_params(const sp_model *m, const sp_layout *l, int64_t i);
/** Routed-expert weights of one MoE layer on one rank: experts x MLP / (ep x etp). */
double sp_step_moe_layer_expert_params(const sp_model *m, const sp_layout *l);
/** Adam time over stage @p stage's expert weights (stage < 0: the stage with the most MoE
 *  layers), sharded by ZeRO-1+ over the expert-dp group. */
double sp_step_moe_optimizer_time(const sp_step_ctx *c, const sp_layout *l, int32_t stage);
/** Add the expert weights, gradients, optimizer state and dispatch buffers of @p l to
 *  @p o (the fullest stage) and update its total. */
void sp_step_moe_memory(const sp_step_ctx *c, const sp_layout *l, sp_step_mem *o);
/** Activation bytes an MoE layer keeps for one micro-batch beyond a dense layer's MLP
 *  (the routed copies' and shared experts' inputs and outputs; 0 with full or per-op
 *  recomputation, or a dense model). */
double sp_step_moe_act_layer_extra(const sp_step_ctx *c, const sp_layout *l);
/** Append the MoE collectives of @p l (all-to-alls, expert-TP gathers, expert-dp gradient
 *  reduction) to @p out, per layer weighted by the fullest stage's share of MoE layers. */
void sp_step_moe_comms(const sp_step_ctx *c, const sp_layout *l, GArray *out);
/**
 * With a2aoverlap=1: the expert all-to-all time (@p a2a, one dispatch or combine) hidden per
 * layer of the fullest stage and micro-batch, forward and backward together. In the 1F1B
 * steady state a forward and a backward pass run paired (Megatron-Core's combined 1F1B) and
 * each of a layer pair's four all-to-alls runs beside one block of the other pass's kernels:
 * the backward combine beside the forward's attention and router, the forward dispatch
 * beside the experts' backward, the backward dispatch beside the experts' forward, the
 * forward combine beside the router's and attention's backward; each hides up to its
 * block's time. Scaled by the share of paired micro-batches (all but one without
 * pipelining; the interleaved schedule's warm-up and cool-down are unpaired) and of MoE
 * layers. 0 when the layout does not overlap.
 */
gboolean sp_step_moe_a2a_hidden(const sp_step_ctx *c, const sp_layout *l, const sp_layer_kernels *lk, double a2a,
                                double *hidden, GError **err);
/** Descriptions of the MoE collectives (the step graph and the list share them). */
extern const char sp_moe_what_dispatch[], sp_moe_what_dispatch_node[], sp_moe_what_etp_ag[], sp_moe_what_etp_rs[],
    sp_moe_what_edp_grad[], sp_moe_what_edp_gather[];

G_END_DECLS

#endif
