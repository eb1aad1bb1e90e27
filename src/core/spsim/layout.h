/**
 * @file layout.h
 * @brief Parallel layouts of a training job (TP with or without Megatron sequence
 *        parallelism, Ulysses SP, ring/context parallelism, ISP weight parallelism,
 *        pipeline parallelism, data parallelism with ZeRO, activation checkpointing)
 *        and the sweep that enumerates the valid ones for a world size.
 *
 * Rank order (fastest axis first): tp, sp, cp, dp, pp. World = tp x sp x cp x dp x pp.
 * Replicas of the same weights form the gradient group of size sp x cp x dp (stride tp);
 * ISP shards weights over the first wp ranks of that group (wp divides sp x cp x dp)
 * and ZeRO shards over the remaining sp x cp x dp / wp replicas.
 */
#ifndef SPSIM_LAYOUT_H
#define SPSIM_LAYOUT_H

#include <glib.h>
#include <stdint.h>
#include "spsim/model.h"

G_BEGIN_DECLS

/** Activation checkpointing modes (Korthikanti et al. 2022). */
typedef enum {
  SP_CKPT_NONE = 0,   /**< keep every activation */
  SP_CKPT_SELECTIVE,  /**< recompute the attention core (scores, softmax, dropout, A.V) */
  SP_CKPT_FULL,       /**< keep only each layer's input; recompute the whole layer forward */
  SP_CKPT_OP,         /**< torchtitan's per-op policy: keep every matmul output but every second and the
                           attention output, recompute the rest (the element-wise ops and every second matmul) */
  SP_CKPT_COUNT
} sp_ckpt;

/** Modules that ckpt=selective recomputes, as Megatron-Core's --recompute-modules names them
 *  (megatron/core/transformer/transformer_config.py, recompute_modules; Megatron Bridge's
 *  "Activation Recomputation" guide). A layout's set is a bitwise OR; none given means
 *  Megatron-Core's default, core_attn. */
typedef enum {
  SP_RMOD_CORE_ATTN = 1u << 0,   /**< the attention core (scores, softmax, dropout, A.V) */
  SP_RMOD_LAYERNORM = 1u << 1,   /**< the two layer norms' outputs (input and pre-MLP), discarded after use */
  SP_RMOD_MLA_UP_PROJ = 1u << 2, /**< multi-head latent attention: the Q, K and V up-projections and RoPE,
                                      discarded after use (the latents stay) */
  SP_RMOD_MLP = 1u << 3,         /**< a dense layer's MLP: only its input kept */
  SP_RMOD_MOE_ACT = 1u << 4      /**< the experts' activation function output, discarded after use */
} sp_rmod;

/** Parse "+"-separated module names (core_attn, layernorm, mla_up_proj, mlp, moe_act) into
 *  a set; an unknown or repeated name is an error that lists the known ones. */
gboolean sp_rmods_parse(const char *s, uint32_t *out, GError **err);
/** @return the set as "+"-separated names in the order above (newly allocated). */
char *sp_rmods_format(uint32_t set);
/** The modules the sweep tries as a fourth recomputation mode beside none, selective and
 *  full, where the model has modules cheap to recompute and costly to keep: layernorm
 *  with moe_act for MoE models, with mla_up_proj for latent attention (Megatron Bridge's
 *  "Activation Recomputation" guide: grouped MoE starts with moe_act or layernorm plus
 *  moe_act, MLA with mla_up_proj); 0 for other models (no fourth mode). */
uint32_t sp_rmods_swept(const sp_model *m);

/** The modes the layout sweep enumerates (SP_CKPT_OP is only taken when a layout names it). */
#define SP_CKPT_SWEPT (SP_CKPT_FULL + 1)

/** @return "none", "selective", "full", "op". */
const char *sp_ckpt_name(sp_ckpt c);
/** Parse "none" | "selective" (or "sel") | "full" | "op". */
gboolean sp_ckpt_parse(const char *s, sp_ckpt *out, GError **err);

/** One layout. Degrees are >= 1 once resolved. */
typedef struct {
  int32_t tp;       /**< tensor parallel degree */
  gboolean tp_sp;   /**< Megatron sequence parallelism with TP (all-gather/reduce-scatter) */
  gboolean tp_overlap; /**< TP communication overlapped with the GEMMs beside it, as Megatron-LM's
                            --tp-comm-overlap (Transformer Engine userbuffers) runs it: all-gathers
                            as a ring exchange of shards under GEMM chunks, reduce-scatters
                            pipelined under a GEMM in chunks; needs tp > 1 and tp_sp (layout key
                            tpoverlap=1) */
  int32_t sp;       /**< Ulysses sequence parallel degree (head all-to-all) */
  int32_t cp;       /**< ring attention / context parallel degree */
  int32_t wp;       /**< ISP weight parallel degree (1: off) */
  int32_t pp;       /**< pipeline stages (1F1B) */
  int32_t vpp;      /**< virtual stages per pipeline rank: interleaved 1F1B (Narayanan et al.
                         2021) when > 1; 0 or 1: plain 1F1B. Each stage's layers must divide
                         by vpp (see sp_layout_chunk_layers for uneven first and last stages)
                         and micro-batches by pp (see vpp_group). */
  int32_t vpp_group; /**< interleaved schedule: micro-batches run back to back on one chunk before
                         the next chunk (0: pp, the default), as Megatron-Core's
                         --microbatch-group-size-per-virtual-pipeline-stage
                         (megatron/core/pipeline_parallel/schedules.py, get_schedule_table). In
                         [pp, micro-batches]; the micro-batches need not divide by pp then, but
                         their remainder modulo the group must be 0 or at least pp, as
                         Megatron-Core requires; layout key vppgroup=N */
  int32_t pp_first; /**< layers on the first pipeline stage (0: even split), as Megatron-LM's
                         --decoder-first-pipeline-num-layers */
  int32_t pp_last;  /**< layers on the last pipeline stage (0: even split), as
                         --decoder-last-pipeline-num-layers; the middle stages share the rest
                         equally */
  int32_t dp;       /**< data parallel degree */
  int32_t zero;     /**< ZeRO stage 0..3 over the gradient group */
  sp_ckpt ckpt;     /**< activation checkpointing */
  uint32_t rmods;   /**< with ckpt=selective: the modules recomputed (sp_rmod set; 0: the default,
                         core_attn alone); layout key recompute=mla_up_proj+mlp. See sp_layout_rmods */
  int32_t mb;       /**< micro-batch size in sequences */
  gboolean dp_sync; /**< the data-parallel gradient reduction starts once the step's backward is
                         over, in one collective, instead of in buckets under the last
                         micro-batch's backward (Megatron-LM's --DDP-impl local of 2021-2022:
                         train_step calls allreduce_gradients after forward_backward_func);
                         layout key dpsync=1 */
  gboolean dp_fp32; /**< gradients are reduced over the data-parallel group in fp32 (4 bytes)
                         rather than the model's dtype: Megatron-LM with bf16
                         (--accumulate-allreduce-grads-in-fp32, forced for bf16 by
                         megatron/training/arguments.py), FSDP2 with reduce_dtype float32;
                         layout key dpfp32=1 */
  int32_t ep;       /**< expert parallel degree (MoE models; 0 or 1: off). As Megatron-Core lays it out
                         (topology.h, sp_topo_moe_new) the ep groups fold inside the sp x cp x dp
                         replicas: ep divides them and the number of experts */
  int32_t etp;      /**< expert tensor parallel degree (0: tp, Megatron-Core's default); 1 or tp */
  gboolean a2a_overlap; /**< MoE: the expert all-to-alls of one micro-batch run on their own stream
                         beside the other micro-batch's compute in the 1F1B steady state
                         (Megatron-Core's --overlap-moe-expert-parallel-comm, off by default:
                         megatron/core/model_parallel_config.py; the combined 1F1B of
                         megatron/core/pipeline_parallel/combined_1f1b.py; DeepSeek-V3's
                         DualPipe, arXiv:2412.19437 sec. 3.2.1); layout key a2aoverlap=1. Needs
                         ep > 1, no full recompute, and vpp > 1 when pp > 1, as Megatron-Core
                         asserts (megatron/core/transformer/transformer_config.py) */
  gboolean ep_flex;     /**< MoE: the token dispatcher sends a token once to each node that holds one of
                         its experts, over the network to the GPU of the same local rank, which forwards
                         it over NVLink to the experts' GPUs, the two overlapped; combine in reverse
                         (DeepSeek-V3, arXiv:2412.19437 sec. 3.2.2; DeepEP and HybridEP under
                         Megatron-Core's --moe-token-dispatcher-type flex); layout key
                         dispatcher=flex (default dispatcher=alltoall: every routed copy sent
                         straight to its expert's GPU). Needs ep > 1, and an expert-parallel group
                         that fits in one node or fills whole nodes */
} sp_layout;

/** What a layout is checked against. */
typedef struct {
  const sp_model *model;
  int32_t world;          /**< GPUs */
  int32_t gpus_per_node;  /**< GPUs sharing a node (TP stays inside one) */
  int64_t seq;            /**< sequence length in tokens */
  int64_t global_batch;   /**< sequences per optimizer step */
  int32_t mb;             /**< micro-batch size when the layout leaves it 0 */
} sp_layout_ctx;

/** Reasons a layout is invalid (counted by the sweep). */
typedef enum {
  SP_SKIP_NONE = 0,   /**< valid */
  SP_SKIP_WORLD,      /**< degrees do not multiply to the GPU count */
  SP_SKIP_TP_NODE,    /**< tp larger than a node */
  SP_SKIP_HEADS,      /**< heads not divisible by tp x sp */
  SP_SKIP_KV_HEADS,   /**< KV heads neither divisible by nor a divisor of the split */
  SP_SKIP_SEQ,        /**< sequence not divisible by the sequence split */
  SP_SKIP_BATCH,      /**< global batch not divisible by dp x micro-batch */
  SP_SKIP_LAYERS,     /**< more pipeline stages than layers allow */
  SP_SKIP_WP,         /**< ISP degree does not divide the replica group, or used with tp */
  SP_SKIP_ZERO,       /**< ZeRO stage not applicable (no replicas, or > 1 with ISP) */
  SP_SKIP_COUNT
} sp_skip;

/** @return a short description of a skip reason. */
const char *sp_skip_reason(sp_skip r);

/** Fill @p l with the defaults: every degree 1 except dp = 0 (derive), zero 0, ckpt none, mb 0. */
void sp_layout_init(sp_layout *l);

/**
 * Parse "tp=8,sp=4,pp=8,vpp=2,dp=4,cp=1,wp=1,zero=1,ckpt=full,mb=1,tpsp=1" (and
 * "ppfirst=N,pplast=N" for uneven pipeline stages, "ep=N,etp=N" for MoE models, "tpoverlap=1" for
 * Megatron's --tp-comm-overlap, which needs tp > 1 and tpsp=1). Keys left out keep the defaults of
 * sp_layout_init; tpsp defaults to 1 when tp > 1.
 */
gboolean sp_layout_parse(const char *s, sp_layout *out, GError **err);

/**
 * Resolve derived fields (dp = 0 -> world / (tp sp cp pp); mb = 0 -> ctx->mb) and check
 * the layout. @return SP_SKIP_NONE when valid; otherwise the reason, with a message in
 * @p err when it is not NULL.
 */
sp_skip sp_layout_check(sp_layout *l, const sp_layout_ctx *ctx, GError **err);

/** Canonical text "tp=8,tpsp=1,sp=1,cp=1,wp=1,pp=4,dp=32,zero=1,ckpt=selective,mb=1"
 * (",tpoverlap=1" after tpsp when set, ",vpp=V" after pp when vpp > 1, then ",ppfirst=F" and ",pplast=L" when set; ",ep=E" and
 * ",etp=T" at the end when ep > 1) (g_free). */
char *sp_layout_to_string(const sp_layout *l);
/** Compact label for tables, e.g. "tp8s pp4 dp32 z1 sel", "tp8so" with tpoverlap=1, "pp16v4" when
 *  interleaved (g_free). */
char *sp_layout_label(const sp_layout *l);

/** Pipeline micro-batches per step: global_batch / (dp x mb). */
int64_t sp_layout_microbatches(const sp_layout *l, const sp_layout_ctx *ctx);
/** Virtual stages per pipeline rank (>= 1). */
int32_t sp_layout_vpp(const sp_layout *l);
/** Micro-batches per group of the interleaved schedule: vpp_group, or pp when it is 0. */
int32_t sp_layout_vpp_group(const sp_layout *l);
/**
 * Whether @p m micro-batches form Megatron-Core's interleaved schedule on @p pp stages in
 * groups of @p group (0: pp): pp <= group <= m, and m modulo group 0 or at least pp
 * (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving).
 */
gboolean sp_layout_vpp_batches_ok(int32_t pp, int64_t group, int64_t m);
/** The modules recomputed (sp_rmod set): with ckpt=selective the layout's set, or core_attn
 *  when it names none; 0 for the other modes (none keeps all; full and op recompute by
 *  their own rules). */
uint32_t sp_layout_rmods(const sp_layout *l);
/** Layers on the largest pipeline stage (ceil(layers / pp) when the split is even). */
int64_t sp_layout_stage_layers(const sp_layout *l, const sp_model *m);
/**
 * Layers on pipeline stage @p stage: pp_first on the first, pp_last on the last (when
 * set), the others sharing the rest equally (the first of them taking one more while
 * the split leaves a remainder, for layouts that sp_layout_check has not checked).
 */
int64_t sp_layout_layers_of_stage(const sp_layout *l, const sp_model *m, int32_t stage);
/**
 * Layers of model chunk @p chunk (0 .. vpp-1) on pipeline stage @p stage. A stage's
 * layers spread equally over its chunks; when they do not divide (an uneven first or
 * last stage) the first stage's first chunks and the last stage's last chunks are
 * the short ones, so that the first virtual stage holds the embedding alone and the
 * last the output layer and loss alone, as Llama 3's 126 layers on 16 interleaved
 * stages (Llama 3 report, sec. 3.3.2). Middle stages must divide by vpp (checked).
 */
int64_t sp_layout_chunk_layers(const sp_layout *l, const sp_model *m, int32_t stage, int32_t chunk);
/** Ranks holding the same weights: sp x cp x dp. */
int32_t sp_layout_replicas(const sp_layout *l);
/** Expert parallel degree (>= 1). */
int32_t sp_layout_ep(const sp_layout *l);
/** Expert tensor parallel degree (etp, or tp when 0). */
int32_t sp_layout_etp(const sp_layout *l);
/** Ranks holding the same expert weights (the expert data-parallel group of Megatron-Core):
 *  tp x sp x cp x dp / (etp x ep). */
int32_t sp_layout_expert_replicas(const sp_layout *l);

/** Limits of the sweep. */
typedef struct {
  int32_t max_tp;        /**< largest tp (default: gpus_per_node) */
  int32_t max_sp;        /**< largest Ulysses degree (default 64) */
  int32_t max_cp;        /**< largest ring degree (default 32) */
  gboolean with_isp;     /**< include wp > 1 (default TRUE) */
  int32_t max_mb;        /**< micro-batch sizes 1, 2, 4, ... up to this when ctx->mb is 0
                              (default 4); ignored when ctx->mb fixes the size */
} sp_sweep_opts;

/** Result of a sweep. */
typedef struct {
  GArray *layouts;                 /**< of sp_layout, valid ones, deterministic order */
  uint64_t considered;             /**< candidates generated */
  uint64_t skipped[SP_SKIP_COUNT]; /**< per reason ([SP_SKIP_NONE] unused) */
} sp_sweep;

/** Default sweep limits for @p ctx. */
void sp_sweep_opts_init(sp_sweep_opts *o, const sp_layout_ctx *ctx);

/**
 * Enumerate candidate layouts: tp over divisors of the world up to max_tp (with and
 * without tpsp when tp > 1; with tpsp, TP communication overlapped, tpoverlap=1, as Megatron
 * runs at scale with --tp-comm-overlap), sp, cp, pp over divisors of the world, dp derived, wp over
 * divisors of sp x cp x dp when tp == 1, every vpp that divides the layers of a stage
 * (layers / pp) when pp > 1, zero 0..3, ckpt none/selective/full, and mb = ctx->mb
 * when it is set, else the powers of two up to opts->max_mb that divide the
 * sequences of a replica (global batch / dp). Invalid candidates are counted per
 * reason. For an MoE model: every ep dividing the experts and sp x cp x dp, sp = 1, no
 * wp, tpsp = 1 when tp > 1.
 */
sp_sweep *sp_sweep_run(const sp_layout_ctx *ctx, const sp_sweep_opts *opts);
void sp_sweep_free(sp_sweep *s);

G_END_DECLS

#endif
