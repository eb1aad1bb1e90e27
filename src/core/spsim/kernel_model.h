/**
 * @file kernel_model.h
 * @brief Time of one GPU kernel by shape: GEMMs as a roofline over peak FLOP/s and
 *        HBM bandwidth with tile and wave quantisation over the SMs, attention
 *        (fused flash or unfused batched GEMMs plus softmax/dropout traffic),
 *        element-wise kernels as bytes over HBM bandwidth, and a measured GEMM
 *        table that replaces the model where the user has one.
 *
 * ## GEMM model
 * C[M,N] = A[M,K] B[K,N], @c batch independent products. The output is cut into
 * tiles of tm x tn; ceil(M/tm) ceil(N/tn) batch tiles run in waves of @c sms
 * tiles (one tile per SM at a time). A full wave of full tiles runs at
 * gemm_eff x peak, so
 *
 *     t_math = min over tiles of waves x (2 tm tn (K + tile_k0)) x sms / (gemm_eff x peak)
 *
 * over the tiles tile_m x tile_n, tile_m x tile_n/2, tile_m/2 x tile_n/2 and
 * tile_m/2 x tile_n/4 (small M or N run on smaller tiles, as libraries choose);
 *     t_mem  = elem x batch x (M K + K N + M N) / hbm_bw
 *     t      = max(t_math, t_mem) + launch
 *
 * Tile and wave quantisation are the effects NVIDIA's "Matrix Multiplication
 * Background User's Guide" (Deep Learning Performance documentation) describes:
 * a partial tile does a full tile's work, a partial wave takes a full wave's time.
 * tile_k0 is the fixed cost of a tile (filling the operand pipeline, writing C),
 * counted in steps of K: a short K runs further below peak than a long one.
 *
 * ## Attention
 * Flash (fused, Dao 2023): causal forward FLOPs 2 b a s_q s_kv d (half of the
 * 4 b a s_q s_kv d of the full score matrix, as causal FLOP counts take it), at attn_fwd_eff x peak; the backward
 * does 2.5 times the forward FLOPs (five GEMM-like products against two) at
 * attn_bwd_eff x peak; no s^2 memory traffic. The GPU's best fused kernel sets
 * these (FlashAttention-3 or cuDNN on H100, FlashAttention-2 on A100).
 * Flash2: the same FLOPs at attn2_fwd_eff / attn2_bwd_eff, the rates of a
 * FlashAttention-2-generation kernel (FlashAttention-2 itself, PyTorch SDPA's
 * default flash backend, Triton FlashAttention), which on H100 does not use the
 * Hopper-specific instructions (equal to flash on A100).
 * Triton: the Triton FlashAttention of flash-attention's flash_attn_triton.py
 * (December 2022, pre-MLIR Triton), which llm-foundry's attn_impl triton runs: the
 * flash2 rates divided by #SP_ATTN_TRITON_FWD_SLOWDOWN forward and
 * #SP_ATTN_TRITON_BWD_SLOWDOWN backward, on heads padded to the next power of two
 * (at least 16), the width its blocks compute on.
 * Unfused (Megatron-LM's core attention before FlashAttention): two batched
 * GEMMs over the full score matrix (QK^T and PV, b a of them), plus the
 * element-wise passes over b a s_q s_kv scores: scale-mask-softmax reads and
 * writes them (2 + 2 bytes each in 16-bit), dropout reads them, writes them and
 * a one-byte mask (2 + 2 + 1): 9 bytes per score forward; the backward runs
 * four batched GEMMs, dropout's backward (gradient and mask in, gradient out: 2 + 1 + 2)
 * and the fused softmax backward (gradient and probabilities in, gradient out: 2 + 2 +
 * 2): 11 bytes per score.
 */
#ifndef SPSIM_KERNEL_MODEL_H
#define SPSIM_KERNEL_MODEL_H

#include <glib.h>
#include <stdint.h>
#include "spsim/dtype.h"

G_BEGIN_DECLS

/** Attention implementations. */
typedef enum {
  SP_ATTN_FLASH = 0, /**< fused flash attention (causal FLOPs, no s^2 traffic) */
  SP_ATTN_UNFUSED,   /**< batched GEMMs over full scores + softmax/dropout passes */
  SP_ATTN_FLASH2,    /**< FlashAttention-2-generation kernel (flash, at attn2_*_eff) */
  SP_ATTN_TRITON,    /**< Triton FlashAttention of December 2022 (flash2 rates / the slowdowns below) */
} sp_attn_impl;

/**
 * Triton FlashAttention against FlashAttention-2: "FlashAttention-2 is around 1.3-1.5x
 * faster than FlashAttention in Triton in the forward pass and around 2x faster in the
 * backward pass" (T. Dao, "FlashAttention-2: Faster Attention with Better Parallelism
 * and Work Partitioning", arXiv:2307.08691, 2023, Section 4.1; A100, head dims 64 and
 * 128, causal and not): 1.4, the middle of the forward range, and 2.
 */
#define SP_ATTN_TRITON_FWD_SLOWDOWN 1.4
#define SP_ATTN_TRITON_BWD_SLOWDOWN 2.0
/** Largest head dimension the Triton FlashAttention takes ("all head dimensions up to
 * 128", flash_attn_triton.py at flash-attention eff9fe6). */
#define SP_ATTN_TRITON_MAX_HEAD_DIM 128

/** @return "flash", "flash2", "triton" or "unfused". */
const char *sp_attn_impl_name(sp_attn_impl a);
/** Parse "flash" (also "fused"), "flash2", "triton" or "unfused". */
gboolean sp_attn_impl_parse(const char *s, sp_attn_impl *out, GError **err);

/** Largest head dimension the fused (flash) attention kernels take. */
#define SP_ATTN_FLASH_MAX_HEAD_DIM 256

/**
 * Whether a model with heads of @p head_dim and activations of @p dtype can use
 * attention @p a: the fused kernels (flash, flash2) take 16-bit activations (fp16,
 * bf16) and head dims up to #SP_ATTN_FLASH_MAX_HEAD_DIM; unfused attention takes any.
 * FALSE with SP_ERROR_SHAPE saying what does not fit and to use unfused attention.
 */
gboolean sp_attn_impl_check(sp_attn_impl a, int64_t head_dim, sp_dtype dtype, GError **err);

/**
 * FP8 training recipes (Transformer Engine, Megatron-Core --fp8-recipe, hybrid format:
 * E4M3 forward, E5M2 gradients). The transformer layers' linear GEMMs (QKV, output
 * projection, MLP and experts; forward, data and weight gradient) run in FP8; the
 * embedding, LM head, attention, router and norms stay in 16-bit, as Transformer Engine
 * and DeepSeek-V3 (arXiv:2412.19437, sec. 3.3.1) keep them.
 */
typedef enum {
  SP_FP8_NONE = 0,    /**< no FP8: the model's dtype throughout */
  SP_FP8_DELAYED,     /**< per-tensor scales from an amax history (TE DelayedScaling) */
  SP_FP8_TENSORWISE,  /**< per-tensor scales from the current amax (TE Float8CurrentScaling) */
  SP_FP8_BLOCKWISE,   /**< 1x128 activation and 128x128 weight blocks (DeepSeek-V3 sec. 3.3.2,
                           TE Float8BlockScaling) */
} sp_fp8_recipe;

/** @return "none", "delayed", "tensorwise" or "blockwise". */
const char *sp_fp8_recipe_name(sp_fp8_recipe r);
/** Parse "delayed", "tensorwise", "blockwise" (or "none"); SP_ERROR_INVALID otherwise. */
gboolean sp_fp8_recipe_parse(const char *s, sp_fp8_recipe *out, GError **err);
/**
 * HBM bytes per element of the cast of one 16-bit GEMM operand to FP8 under @p r (0 for
 * SP_FP8_NONE): read 2, write the FP8 copy 1 and its FP8 transpose 1 (Hopper's FP8 tensor
 * cores take only the TN layout, so the weight gradient needs transposed operands: TE's
 * fused cast-transpose); tensorwise adds a 2-byte amax pass before the cast; blockwise adds
 * one fp32 scale per 128 elements for each of the two copies (2 x 4 / 128).
 */
double sp_fp8_cast_bytes_per_elem(sp_fp8_recipe r);
/** Kernels of one cast under @p r: 2 for tensorwise (amax, then cast), else 1. */
int sp_fp8_cast_kernels(sp_fp8_recipe r);

/** A measured GEMM table: (m, n, k) -> achieved TFLOP/s (opaque). */
typedef struct sp_gemm_table sp_gemm_table;

/** The GPU as the kernel model sees it. */
typedef struct {
  double peak_flops;     /**< dense 16-bit tensor-core FLOP/s */
  double hbm_bw;         /**< HBM bytes/s (the datasheet's peak) */
  double hbm_eff;        /**< fraction of hbm_bw that streaming kernels reach (0: all of it) */
  int32_t sms;           /**< streaming multiprocessors */
  int32_t tile_m, tile_n;/**< largest GEMM output tile */
  double gemm_eff;       /**< fraction of peak of a full wave of full tiles (large GEMMs) */
  double tile_k0;        /**< fixed cost of an output tile, in steps of K (0: none) */
  double attn_fwd_eff;   /**< flash attention forward, fraction of peak */
  double attn_bwd_eff;   /**< flash attention backward, fraction of peak */
  double attn2_fwd_eff;  /**< FlashAttention-2-generation forward (0: attn_fwd_eff) */
  double attn2_bwd_eff;  /**< FlashAttention-2-generation backward (0: attn_bwd_eff) */
  double attn_d0_fwd;    /**< flash attention forward at head dim d < 128 runs at d / (d + d0) over
                              128 / (128 + d0) of attn_fwd_eff (0: the same at every head dim) */
  double attn_d0_bwd;    /**< and its backward */
  double launch;         /**< seconds added to every kernel (launch and tail) */
  const sp_gemm_table *table; /**< measured GEMMs, or NULL (not owned) */
  gboolean table_fp8;    /**< look @p table's FP8 rows up, not its 16-bit ones (sp_kernel_gpu_fp8 sets it) */
  double fp8_peak_ratio; /**< dense FP8 over dense 16-bit tensor-core peak (0: no FP8) */
  double fp8_gemm_eff;   /**< fraction of the FP8 peak of a full wave of full FP8 tiles */
  double fp8_tile_k0;    /**< an FP8 tile's fixed cost, in steps of K (0: none) */
} sp_kernel_gpu;

/**
 * The GPU @p g as its FP8 GEMMs see it, into @p out: peak fp8_peak_ratio x peak_flops at
 * fp8_gemm_eff over K + fp8_tile_k0, or the FP8 rows of a measured table when it has some
 * (table_fp8). FALSE with SP_ERROR_INVALID when @p g has no
 * FP8 (fp8_peak_ratio 0).
 */
gboolean sp_kernel_gpu_fp8(const sp_kernel_gpu *g, sp_kernel_gpu *out, GError **err);

/** H100 SXM5 (the default; sources in kernel_model.c). */
void sp_kernel_gpu_h100(sp_kernel_gpu *g);
/** A100 SXM4 80 GB (sources in kernel_model.c). */
void sp_kernel_gpu_a100(sp_kernel_gpu *g);
/** B200 (DGX B200; also GB200 with the platform's peak); sources and assumptions in kernel_model.c. */
void sp_kernel_gpu_b200(sp_kernel_gpu *g);
/**
 * The constants for the GPU a device name names (as CUDA reports it, e.g. "NVIDIA H200"):
 * Hopper's for an H100, H800 or H200 (the H200 with its own HBM bandwidth), A100's for
 * an A100 or A800, B200's for a B200. FALSE, @p g untouched, for any other GPU.
 */
gboolean sp_kernel_gpu_for_device(const char *name, sp_kernel_gpu *g);

/**
 * Seconds of @p batch GEMMs of M x N x K with @p elem-byte elements into @p t:
 * the model above, or, with a table that has rows of the GEMM's precision (16-bit, or
 * FP8 when table_fp8), the FLOPs at the achieved rate of the nearest measured shape (an
 * error when none is near, see sp_gemm_table_lookup).
 */
gboolean sp_kernel_gemm_time(const sp_kernel_gpu *g, double batch, int64_t m, int64_t n, int64_t k, double elem,
                             double *t, GError **err);

/**
 * Seconds of attention forward (@p bwd FALSE) or backward over @p b sequences of
 * @p heads query heads with head dim @p d, @p sq queries against @p skv keys
 * (causal: each query sees the keys up to its position when sq == skv; with
 * sq < skv, a block of a longer causal sequence: half the scores on average).
 */
double sp_kernel_attn_time(const sp_kernel_gpu *g, sp_attn_impl impl, gboolean bwd, double b, double heads,
                           int64_t sq, int64_t skv, int64_t d, double elem);

/**
 * The fractions of peak a fused attention kernel @p impl runs at on @p g, forward
 * (@p fwd) and backward (@p bwd): flash at attn_*_eff, flash2 at attn2_*_eff,
 * triton at the flash2 rates over the Triton slowdowns. (Unfused attention is
 * priced as GEMMs; its values here are flash's.)
 */
void sp_kernel_attn_eff(const sp_kernel_gpu *g, sp_attn_impl impl, double *fwd, double *bwd);

/**
 * HBM bytes/s that memory-bound kernels reach: hbm_bw x hbm_eff (hbm_eff 0: hbm_bw);
 * 0 when hbm_bw is 0 (memory traffic free).
 */
double sp_kernel_hbm_rate(const sp_kernel_gpu *g);

/** Seconds of an element-wise kernel that moves @p bytes through HBM at sp_kernel_hbm_rate (hbm_bw 0: free). */
double sp_kernel_elementwise_time(const sp_kernel_gpu *g, double bytes);

/**
 * A transformer layer's linear over @p m tokens, @p n output and @p k input features,
 * into @p t: {forward m x n x k, data gradient m x k x n, weight gradient k x n x m}
 * (with FP8, m, n or k below 1: all zero). With @p fp8 SP_FP8_NONE, GEMMs of @p elem-byte
 * elements on @p g. With an FP8 recipe, GEMMs of 1-byte elements on sp_kernel_gpu_fp8(g);
 * the forward adds the cast of its input (m k elements) and the data gradient the cast
 * of the output gradient (m n elements), each sp_fp8_cast_bytes_per_elem bytes per
 * element over sp_kernel_hbm_rate plus sp_fp8_cast_kernels launches; the weight
 * gradient reuses both casts' transposes. Weights are cast once per step (TE caches
 * the FP8 weights across micro-batches), not here. FALSE when @p g has no FP8.
 */
gboolean sp_kernel_linear3(const sp_kernel_gpu *g, sp_fp8_recipe fp8, int64_t m, int64_t n, int64_t k, double elem,
                           double t[3], GError **err);
/** HBM bytes of the FP8 casts of sp_kernel_linear3 for one linear (0 without FP8). */
double sp_kernel_linear_cast_bytes(sp_fp8_recipe fp8, int64_t m, int64_t n, int64_t k);

/**
 * Load a measured GEMM table: JSON `[{"m":..,"n":..,"k":..,"tflops":..}, ...]`
 * or CSV with a header naming the columns m, n, k, tflops (any order). An optional
 * dtype (JSON member or CSV column) says the precision of each row: bf16, fp16 or f16
 * (16-bit, the default) or fp8 or e4m3 (FP8 operands). Every value must be positive. In
 * a CSV, a line equal to the header is skipped, so tables concatenated with cat load
 * as one.
 */
sp_gemm_table *sp_gemm_table_load(const char *path, GError **err);
/** sp_gemm_table_load on @p size bytes of @p text (-1: NUL-terminated), named @p name in messages. */
sp_gemm_table *sp_gemm_table_parse(const char *text, gssize size, const char *name, GError **err);
void sp_gemm_table_free(sp_gemm_table *t);
/** Rows of the table. */
guint sp_gemm_table_len(const sp_gemm_table *t);

/**
 * Achieved FLOP/s of an M x N x K GEMM of FP8 (@p fp8) or 16-bit operands from @p t: that
 * of the row of that precision nearest in log-space, when the shape lies within a factor
 * of 2 of it in every dimension; otherwise FALSE with SP_ERROR_INVALID naming the shape
 * and the nearest row.
 */
gboolean sp_gemm_table_lookup(const sp_gemm_table *t, gboolean fp8, int64_t m, int64_t n, int64_t k, double *flops,
                              GError **err);
/** Whether @p t (may be NULL) has rows of FP8 GEMMs (@p fp8) or of 16-bit ones. */
gboolean sp_gemm_table_has(const sp_gemm_table *t, gboolean fp8);

G_END_DECLS

#endif
