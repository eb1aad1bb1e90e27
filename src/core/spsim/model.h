/**
 * @file model.h
 * @brief Transformer model configurations (decoder-only, dense or mixture-of-experts,
 *        with grouped-query or multi-head latent attention) and the closed-form
 *        formulas of the what-if analysis: parameter counts, FLOPs per token and
 *        per layer, and training memory per parameter.
 *
 * Conventions (docs/whatif.md states the sources):
 * - head dim d = hidden / heads unless the model sets @c head_dim (Qwen3, Gemma and
 *   gpt-oss have heads x d != hidden); Q has heads * d columns, K and V kv_heads * d
 *   each (GQA/MQA), and the output projection maps heads * d back to hidden.
 * - sliding-window attention (Mistral, Gemma, gpt-oss): with @c window > 0 a query of
 *   the layers in @c window_mask sees only the @c window latest keys, itself included.
 * - a layer holds the attention projections Q, K, V, O and the MLP (two matrices for
 *   GELU, three for SwiGLU: gate, up, down), plus two norms of @c hidden weights.
 * - embeddings: vocab x hidden input table, plus an output (LM head) matrix of the same
 *   size unless @c tied_embeddings.
 * - "model FLOPs" follow the PaLM MFU definition (Chowdhery et al. 2022, App. B):
 *   6 N + 12 L h s per token for training, N the non-embedding-lookup parameters
 *   (matmul weights including the LM head), attention counted non-causal.
 * - mixture of experts (Shazeer et al. 2017; GShard; Switch; Mixtral): an MoE layer
 *   replaces the MLP by @c experts routed expert MLPs of @c expert_ffn columns each, of
 *   which a token visits @c topk chosen by a router (an h x experts matrix), plus
 *   @c shared_experts MLPs of @c shared_ffn columns every token visits (DeepSeekMoE).
 *   For an MoE model, N in the FLOP formulas is the ACTIVE parameter count (what one
 *   token multiplies with), as the DeepSeek-V3 report's "37B activated" counts it.
 * - multi-head latent attention (DeepSeek-V2, sec. 2.1; DeepSeek-V3): with
 *   @c kv_lora_rank > 0, Q is h -> q_lora_rank -> heads x (nope + rope) (or h -> heads x
 *   (nope + rope) without q_lora_rank), K and V come from one h -> kv_lora_rank + rope
 *   down-projection and a kv_lora_rank -> heads x (nope + v) up-projection, and the
 *   output projection is heads x v -> h; RMSNorms of q_lora_rank and kv_lora_rank
 *   weights follow the two down-projections.
 */
#ifndef SPSIM_MODEL_H
#define SPSIM_MODEL_H

#include <glib.h>
#include <stdint.h>
#include "spsim/dtype.h"

G_BEGIN_DECLS

/** MLP flavours. */
typedef enum {
  SP_MLP_GELU = 0,  /**< two matrices h x ffn and ffn x h */
  SP_MLP_SWIGLU,    /**< three matrices: gate and up h x ffn, down ffn x h */
} sp_mlp;

/** How a layer's element-wise ops (norms, rotary, activation, residual adds) run. */
typedef enum {
  SP_ELEM_FUSED = 0, /**< fused kernels, one pass over each stored activation (Megatron-LM; the default) */
  SP_ELEM_EAGER,     /**< separate PyTorch eager kernels, as torchtitan's Llama block writes them: RMSNorm
                          in fp32, rotary through complex fp32 products, K and V repeated for GQA, SiLU and
                          the gate product, residual adds (a SwiGLU model) */
} sp_elementwise;

/** How the loss (softmax cross-entropy over the logits) runs. */
typedef enum {
  SP_LOSS_UNFUSED = 0, /**< separate PyTorch kernels in fp32 over the logits (Megatron-LM's vocab-parallel
                            cross entropy, torchtitan's cross_entropy(logits.float()); the default) */
  SP_LOSS_FUSED,       /**< one kernel each way over the 16-bit logits (flash-attn's fused cross entropy,
                            llm-foundry's default loss_fn) */
} sp_loss_impl;

/** A model configuration. */
typedef struct {
  char *name;        /**< e.g. "llama3-70b" (owned) */
  int64_t layers;    /**< transformer blocks */
  int64_t hidden;    /**< model dimension h */
  int64_t heads;     /**< attention (query) heads a */
  int64_t kv_heads;  /**< key/value heads (== heads without GQA) */
  int64_t ffn;       /**< MLP inner dimension */
  int64_t vocab;     /**< vocabulary size V */
  sp_dtype dtype;    /**< training dtype of weights and activations (bf16, f16, f32) */
  sp_mlp mlp;        /**< MLP flavour */
  gboolean tied_embeddings; /**< the LM head shares the input embedding table */
  sp_elementwise elementwise; /**< how the element-wise ops of a layer run (model file key "elementwise") */
  sp_loss_impl loss;          /**< how the loss over the logits runs (model file key "loss") */
  /* Mixture of experts (all 0 for a dense model). */
  int64_t experts;        /**< routed experts per MoE layer (model key "experts"; 0: dense) */
  int64_t topk;           /**< routed experts each token visits ("experts_per_token") */
  int64_t expert_ffn;     /**< inner dimension of one routed expert MLP ("expert_ffn"; default ffn) */
  int64_t shared_experts; /**< experts every token visits ("shared_experts", default 0) */
  int64_t shared_ffn;     /**< inner dimension of one shared expert ("shared_expert_ffn"; default expert_ffn) */
  guint8 *moe_mask;       /**< layers entries, 1 for an MoE layer (owned; NULL for a dense model). Set
                               by "moe_layers" (0-based list), or by "first_dense_layers" (k: layers
                               0..k-1 dense, as DeepSeek's first_k_dense_replace) and "moe_layer_freq"
                               (f: layer i is MoE when (i - k) % f == 0; default 1) */
  double capacity_factor; /**< expert capacity factor ("capacity_factor"; 0: dropless, the default) */
  int64_t expert_groups;  /**< group-limited routing: the experts in this many equal groups ("expert_groups";
                               0: none), of which a token's experts come from at most ... */
  int64_t groups_per_token; /**< ... this many ("groups_per_token"; DeepSeek-V3's node-limited routing, 8
                               groups and 4, arXiv:2412.19437 sec. 2.1.2; Hugging Face n_group, topk_group) */
  sp_dtype router_dtype;  /**< dtype of the router GEMM and softmax ("router_dtype", default f32) */
  /* Multi-head latent attention (all 0 for Q, K, V projections of kv_heads x d). */
  int64_t q_lora_rank;    /**< query down-projection rank ("q_lora_rank"; 0: no query compression) */
  int64_t kv_lora_rank;   /**< key/value latent rank ("kv_lora_rank"; 0: no MLA) */
  int64_t qk_nope_head_dim; /**< per-head query/key dimension without rotary ("qk_nope_head_dim") */
  int64_t qk_rope_head_dim; /**< per-head rotary query/key dimension ("qk_rope_head_dim") */
  int64_t v_head_dim;     /**< per-head value dimension ("v_head_dim") */
  int64_t head_dim;       /**< per-head width of Q, K and V without MLA ("head_dim"; 0: hidden / heads) */
  /* Sliding-window attention (0 and NULL: every layer attends to the whole causal prefix). */
  int64_t window;         /**< keys a query of a windowed layer sees, itself included ("sliding_window") */
  guint8 *window_mask;    /**< layers entries, 1 for a windowed layer (owned; NULL when window is 0). Set by
                               "window_layers" (0-based list); absent, every layer is windowed */
  char *sources;     /**< where the numbers come from, "; "-joined (owned, may be "") */
  char *ignored;     /**< unknown keys skipped in SP_MODEL_LENIENT mode, ", "-joined (owned), else NULL */
} sp_model;

/** How a model file is read. */
typedef enum {
  SP_MODEL_STRICT = 0,       /**< an unknown key is an error naming it and the known keys */
  SP_MODEL_LENIENT = 1 << 0, /**< unknown keys are skipped and listed in sp_model.ignored */
} sp_model_flags;

/**
 * Parse a model from JSON text. Required integer fields (all > 0): layers, hidden,
 * heads, kv_heads, ffn, vocab; optional: name (default @p what), dtype ("bf16"),
 * mlp ("swiglu" | "gelu", default "swiglu"), tied_embeddings (false), elementwise ("fused" |
 * "eager", default "fused"; "eager" needs a SwiGLU model), loss ("unfused" | "fused", default
 * "unfused"), sources
 * (string or array of strings). Mixture of experts: experts, experts_per_token (1 ..
 * experts), expert_ffn, shared_experts, shared_expert_ffn, moe_layers (a list of 0-based
 * layer indices) or first_dense_layers and moe_layer_freq, capacity_factor (> 0),
 * router_dtype, expert_groups with groups_per_token; multi-head latent attention: kv_lora_rank with qk_nope_head_dim,
 * qk_rope_head_dim and v_head_dim (kv_heads == heads), and q_lora_rank; head_dim (the
 * width of a head when it is not hidden / heads); sliding_window (keys per query) with
 * window_layers (0-based list; absent: every layer).
 * Checks hidden % heads == 0 (unless head_dim is given) and heads % kv_heads == 0.
 * A Hugging Face config.json (it has "num_hidden_layers") is read by its transformers key
 * names instead: num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads,
 * intermediate_size, vocab_size, tie_word_embeddings, torch_dtype, hidden_act (or
 * hidden_activation) with model_type for a gated or plain MLP (docs/whatif.md);
 * num_local_experts / n_routed_experts / num_experts, num_experts_per_tok,
 * moe_intermediate_size, n_shared_experts, shared_expert_intermediate_size,
 * first_k_dense_replace, moe_layer_freq / decoder_sparse_step, n_group, topk_group; q_lora_rank, kv_lora_rank,
 * qk_nope_head_dim, qk_rope_head_dim, v_head_dim, head_dim; sliding_window with
 * layer_types ("sliding_attention" entries) or, without it, every layer (Mistral), and
 * none when use_sliding_window is false (Qwen2, Qwen3).
 * Any other key is an error (SP_ERROR_INVALID) that names it and lists the known
 * ones. @p what names the input in messages (a file name).
 */
sp_model *sp_model_parse(const char *json, gssize len, const char *what, GError **err);
/** sp_model_parse with @p flags (SP_MODEL_LENIENT: unknown keys skipped, see sp_model.ignored). */
sp_model *sp_model_parse_flags(const char *json, gssize len, const char *what, sp_model_flags flags, GError **err);
/** Load a model JSON file. */
sp_model *sp_model_load_file(const char *path, GError **err);
/**
 * Where built-in models are looked for, in order: $SPSIM_MODELS_DIR, @p src_dir (the
 * source tree's models/, may be NULL), @p installed_dir (may be NULL), then
 * $SPSIM_SRCDIR/models. @return a NULL-terminated list (g_strfreev).
 */
char **sp_model_search_dirs(const char *src_dir, const char *installed_dir);

/**
 * Resolve @p name_or_file: a path to a .json file (contains '/' or ends in .json), or
 * the name of a built-in model looked up as NAME.json in each of @p dirs (NULL-terminated).
 * An unknown name fails with a message listing the known models.
 */
sp_model *sp_model_find(const char *name_or_file, const char *const *dirs, GError **err);
/** sp_model_find with @p flags (see sp_model_parse_flags). */
sp_model *sp_model_find_flags(const char *name_or_file, const char *const *dirs, sp_model_flags flags,
                              GError **err);
/** Sorted, NULL-terminated list of model names found in @p dirs (g_strfreev it). */
char **sp_model_list(const char *const *dirs);
/** Free a model; NULL is accepted. */
void sp_model_free(sp_model *m);
/** Validate ranges and divisibility (what sp_model_parse checks). */
gboolean sp_model_validate(const sp_model *m, GError **err);

/** @return the head dimension: head_dim when the model sets it, else hidden / heads. */
int64_t sp_model_head_dim(const sp_model *m);
/** @return TRUE when the model has routed experts (experts > 0). */
gboolean sp_model_is_moe(const sp_model *m);
/** @return TRUE when layer @p i (0-based) is an MoE layer. */
gboolean sp_model_layer_is_moe(const sp_model *m, int64_t i);
/** @return the number of MoE layers. */
int64_t sp_model_moe_layers(const sp_model *m);
/** @return TRUE when the attention is multi-head latent attention (kv_lora_rank > 0). */
gboolean sp_model_is_mla(const sp_model *m);
/** @return per-head query/key width: qk_nope + qk_rope with MLA, else sp_model_head_dim. */
int64_t sp_model_qk_head_dim(const sp_model *m);
/** @return per-head value width: v_head_dim with MLA, else sp_model_head_dim. */
int64_t sp_model_v_head_dim(const sp_model *m);
/** @return the attention width heads x (qk + v) / 2: heads x d without MLA (h when d = h / heads). */
double sp_model_attn_width(const sp_model *m);
/** @return TRUE when layer @p i (0-based) has sliding-window attention. */
gboolean sp_model_layer_is_windowed(const sp_model *m, int64_t i);
/**
 * Causal (query, key) pairs of one sequence of @p seq tokens, averaged over the layers,
 * as a fraction of full causal attention's seq^2 / 2: 1 without a window or when seq <=
 * window; a windowed layer keeps window^2 / 2 + (seq - window) window.
 */
double sp_model_attn_causal_fraction(const sp_model *m, int64_t seq);
/** @return attention matmul weights of one layer (Q, K, V, O, or MLA's five projections). */
double sp_model_attn_matmul_params(const sp_model *m);
/** @return the other attention weights of a layer: MLA's two latent RMSNorms (0 without MLA). */
double sp_model_attn_norm_params(const sp_model *m);
/** @return weights of one MLP of inner dimension @p ffn: (2|3) h ffn. */
double sp_model_mlp_params(const sp_model *m, int64_t ffn);
/** @return weights of the dense MLP of a layer that is not MoE: (2|3) h ffn. */
double sp_model_dense_mlp_params(const sp_model *m);
/** @return router weights of an MoE layer: h x experts. */
double sp_model_router_params(const sp_model *m);
/** @return routed expert weights of an MoE layer: experts x (2|3) h expert_ffn. */
double sp_model_routed_expert_params(const sp_model *m);
/** @return shared expert weights of an MoE layer: shared_experts x (2|3) h shared_ffn. */
double sp_model_shared_expert_params(const sp_model *m);
/** @return parameters one token multiplies with: every attention and dense-MLP weight,
 *  the router, shared experts and topk routed experts of each MoE layer, the LM head
 *  and input embedding (the "activated parameters" of MoE reports). */
double sp_model_active_params(const sp_model *m);
/** @return matmul weights of one layer: h(a d + 2 kv d) + a d h + (2|3) h ffn. For an MoE
 *  model, the matmul weights one token multiplies with, averaged over the layers
 *  (attention, plus the dense MLP or the router, shared and topk routed experts). */
double sp_model_layer_matmul_params(const sp_model *m);
/** @return all weights of one layer (matmuls + two norms). For an MoE model, the
 *  weights a layer stores averaged over the layers (every expert counted). */
double sp_model_layer_params(const sp_model *m);
/** @return embedding weights: V h, doubled when the LM head is not tied. */
double sp_model_embedding_params(const sp_model *m);
/** @return total parameters: layers x layer + embeddings + final norm. */
double sp_model_params(const sp_model *m);

/**
 * Forward FLOPs of one layer for @p tokens tokens in sequences of length @p seq:
 * matmuls 2 x tokens x layer_matmul_params, and attention scores plus weighted sum
 * 2 x tokens x seq x heads x (qk + v) (4 x tokens x seq x h when qk = v = h / heads;
 * non-causal; causal: halved, and scaled by sp_model_attn_causal_fraction for windows).
 */
double sp_model_layer_fwd_matmul_flops(const sp_model *m, double tokens);
double sp_model_layer_fwd_attn_flops(const sp_model *m, double tokens, double seq, gboolean causal);
/** Forward FLOPs of the LM head for @p tokens tokens: 2 x tokens x V x h. */
double sp_model_head_fwd_flops(const sp_model *m, double tokens);
/**
 * Model FLOPs of training (forward + backward, no recomputation) per token at
 * sequence length @p seq (PaLM): 6 N + 12 L h seq, N = layers x layer matmul
 * params + V h (the LM head); the attention term is 6 L seq heads (qk + v) in general
 * (with MLA or head_dim), counted non-causal and without windows as PaLM does.
 * For an MoE model N counts the active weights (sp_model_layer_matmul_params).
 */
double sp_model_train_flops_per_token(const sp_model *m, double seq);

/** Bytes of one element of the model's dtype. */
double sp_model_dtype_bytes(const sp_model *m);

G_END_DECLS

#endif
