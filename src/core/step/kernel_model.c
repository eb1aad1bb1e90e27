/* Kernel time model (see spsim/kernel_model.h): GEMM roofline with tile and wave
 * quantisation, flash and unfused attention, element-wise kernels, measured
 * GEMM tables. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "spsim/error.h"
#include "spsim/kernel_model.h"

const char *sp_attn_impl_name(sp_attn_impl a)
{
  return a == SP_ATTN_UNFUSED ? "unfused" : a == SP_ATTN_FLASH2 ? "flash2" : a == SP_ATTN_TRITON ? "triton" : "flash";
}

gboolean sp_attn_impl_parse(const char *s, sp_attn_impl *out, GError **err)
{
  if (s != NULL && (strcmp(s, "flash") == 0 || strcmp(s, "fused") == 0)) {
    *out = SP_ATTN_FLASH;
    return TRUE;
  }
  if (s != NULL && strcmp(s, "flash2") == 0) {
    *out = SP_ATTN_FLASH2;
    return TRUE;
  }
  if (s != NULL && strcmp(s, "triton") == 0) {
    *out = SP_ATTN_TRITON;
    return TRUE;
  }
  if (s != NULL && strcmp(s, "unfused") == 0) {
    *out = SP_ATTN_UNFUSED;
    return TRUE;
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "attention must be flash (or fused), flash2, triton or unfused (got '%s')",
              s ? s : "");
  return FALSE;
}

/* FlashAttention-2 and -3 (Dao-AILab/flash-attention README: "Datatype fp16 and bf16",
 * "All head dimensions up to 256"; FlashAttention-3: head dims 64, 128 and 256). */
gboolean sp_attn_impl_check(sp_attn_impl a, int64_t head_dim, sp_dtype dtype, GError **err)
{
  if (a == SP_ATTN_UNFUSED) return TRUE;
  if (dtype != SP_BF16 && dtype != SP_F16) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "attention %s runs on fp16 or bf16 activations, and the model trains in %s: use --attention unfused",
                sp_attn_impl_name(a), sp_dtype_name(dtype));
    return FALSE;
  }
  int maxd = a == SP_ATTN_TRITON ? SP_ATTN_TRITON_MAX_HEAD_DIM : SP_ATTN_FLASH_MAX_HEAD_DIM;
  if (head_dim > maxd) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "attention %s takes head dims up to %d, and the model's heads are %" G_GINT64_FORMAT
                " wide (head_dim, or hidden / heads): use --attention unfused",
                sp_attn_impl_name(a), maxd, head_dim);
    return FALSE;
  }
  return TRUE;
}

/* Sources:
 * - peaks, HBM bandwidth and SM counts: NVIDIA H100 Tensor Core GPU datasheet
 *   (SXM5: 989.4 TFLOP/s dense BF16, 3.35 TB/s) and "NVIDIA H100 Tensor Core GPU
 *   Architecture" whitepaper (132 SMs on SXM5); NVIDIA A100 datasheet (312 TFLOP/s
 *   BF16, 2.039 TB/s for 80 GB SXM4) and "NVIDIA A100 Tensor Core GPU
 *   Architecture" whitepaper (108 SMs).
 * - gemm_eff and tile_k0 H100: fitted to 1,014 BF16 GEMMs measured with cuBLAS on an
 *   NVIDIA H200 (bench/gpu/h200-gemm.csv, bench/gpu/hopper-kernels.py; m 512-16384, n
 *   and k 256-28672): the H200 is the H100 SXM's compute (GH100, 132 SMs, 989.4 TFLOP/s
 *   dense BF16, NVIDIA H200 datasheet) with faster HBM3e. Over the 700 GEMMs of at least
 *   50 us (shorter ones are bound by the host's launch rate) a full wave of full tiles
 *   runs at 0.74 of peak over K + 208, mean |error| 4.0 %, with no drift in K
 *   (tests/test-kernel-model.c holds it). Without the tile's fixed cost (0.70 over K, as
 *   before) GEMMs of K 256, 512 and 1024 came out 38, 24 and 12 % fast. The best shape
 *   reached 793 TFLOP/s, 0.80 of peak, as other measurements of an isolated GEMM's best
 *   (H. He, "H100 peak matmul FLOPS", 2024: 780 TFLOP/s with autotuned CUTLASS kernels;
 *   S. Bekman, stas00/ml-engineering compute/accelerator/README.md, "Maximum Achievable
 *   Matmul FLOPS comparison table": H100 SXM 792.1). Checked, not fitted, on a published
 *   per-layer time: NVIDIA Transformer Engine's getting-started benchmark
 *   (NVIDIA/TransformerEngine docs/getting_started/getting_started_pytorch.out, commit
 *   a976740, January 2026, "on an NVIDIA H100 GPU"; the variant is not named, SXM taken)
 *   times one GPT layer (hidden 4096, FFN 16384, 32 heads, sequence 2048, batch 8, BF16,
 *   te.Linear and te.LayerNorm with TE's causal attention, dropout 0.1) forward and
 *   backward at 35.709 ms; bench/layer-profile.sh prices it -2.0 %, and the same layer in
 *   FP8 (delayed scaling, 23.406 ms) +0.2 %.
 *   A100: 0.70 (below, gemm_eff A100), no tile cost (none measured); a measured table
 *   (sp_gemm_table_load, the what-if's --gemm-table) replaces either.
 * - tile 128 x 256: the largest CUTLASS/cuBLAS tensor-core tile for 16-bit GEMMs on
 *   Ampere and Hopper (CUTLASS profiler's default large tile).
 * - attention: FlashAttention-2 (Dao 2023) reaches up to 73 % of A100 peak forward
 *   and about 63 % backward; FlashAttention-3 (Shah et al. 2024) up to 75 % of H100
 *   peak forward in FP16, with the backward at about two thirds of that. Training
 *   shapes (head dim 128, 2k-8k tokens, causal) sit below those peaks: H100 0.60 /
 *   0.45, A100 0.65 / 0.55.
 * - flash2 on H100: FlashAttention-2-generation kernels do not use Hopper's
 *   asynchronous tensor-core instructions. Measured (bench/gpu/h100-layer-warm-kernels.txt,
 *   bench/gpu/torch-layer.py --warm 20 on an H100 80GB HBM3 SXM at 700 W, PyTorch 2.11's
 *   FlashAttention-2 backend, head dim 128, 32 heads, causal, inside a training layer):
 *   forward 0.314, 0.290 and 0.297 of peak at sequence 2048 x batch 8, 8192 x 1 and
 *   8192 x 2, backward (its three kernels) 0.254, 0.265 and 0.263: 0.30 and 0.26. The
 *   same order as published: PyTorch's default SDPA (then FlashAttention-2) ran at 329
 *   TFLOP/s forward on H100, 0.33, against 631 for cuDNN and FlashAttention-3
 *   (pytorch/pytorch issue #142132, head dim 128, 4608 tokens), and Shah et al. 2024
 *   (FlashAttention-3, arXiv:2407.08608, Section 4.1) measure FlashAttention-3 1.5-2.0x
 *   faster forward and 1.5-1.75x backward on H100 SXM5. On A100 FlashAttention-2 is the
 *   flash kernel.
 * - flash attention's head dim (attn_d0_fwd 80, attn_d0_bwd 44): measured with PyTorch's
 *   default fused attention on an H100 80GB HBM3 SXM (bench/gpu/h100-attention.csv,
 *   bench/gpu/hopper-kernels.py: causal, batch 1, 8 to 64 heads, sequence 4096 to
 *   32768), head dim 64 reaches 0.722 of head dim 128's FLOP rate forward and 0.795
 *   backward (geometric means over the 16 shapes; 0.69-0.78 and 0.77-0.88): a fixed cost
 *   per tile of 80 and 44 steps of the head dim, the form of the GEMMs' tile_k0. Head
 *   dims from 128 up keep the measured rates (none above 128 measured). FlashAttention-2
 *   on the H100 lost less at head dim 64 (0.89 of its head-dim-128 rate, one MoE layer
 *   in bench/gpu/h100-moe-layer.csv), so flash2 and triton keep one rate.
 * - hbm_eff: memory-bound kernels stream at BabelStream's rate, not the datasheet's.
 *   A100 SXM4 80 GB: Triad 1,724.8 GB/s (Copy 1,709.4) of 2,039 GB/s, 0.846
 *   (ukri-bench/benchmark-BabelStream README.md, "Example performance data", Tursa,
 *   BabelStream 5.0 CUDA, NVIDIA A100-SXM4-80GB): 0.85. Hopper: Triad 3,314.9 GB/s
 *   (Add 3,301.4) on a GH200 of 4.0 TB/s HBM3 (UoB-HPC/BabelStream issue #194,
 *   BabelStream 5.0), 0.83, taken for H100 SXM (the same GH100 die and HBM3 memory
 *   system; no H100 SXM run was found published). Measured since on an H100 SXM
 *   (bench/gpu/h100-stream.csv, PyTorch's vectorised copy, scale, add and triad over
 *   1 GiB): 0.89-0.91. 0.83 is kept: in the training layers measured on the same GPU
 *   (bench/gpu/h100-layer-warm.csv) the element-wise kernels moved spsim's count of their
 *   bytes at 0.76 of 3.35 TB/s (eager PyTorch: unvectorised FP32 kernels, strided copies,
 *   row reductions), so the streaming rate alone would price them 15 % fast.
 * - gemm_eff A100: calibrated on a published per-layer profile. Korthikanti et al. 2022
 *   (arXiv:2205.05198, Table 4) time one layer of a 22B GPT on 8 A100s of Selene with
 *   Megatron-LM: 19.6, 19.0, 27.2, 20.9 and 20.3 ms forward and backward for no
 *   recomputation, sequence parallelism, full and selective recomputation, and both.
 *   bench/layer-profile.sh prices the same layer: at 0.70 within -1.8 % to +0.3 % of
 *   all five (tests/test-layer-profile.sh); at 0.80 it was 8 to 10 % fast. The 0.80 it
 *   replaces was derived from the maximum achievable matmul FLOPS, an isolated GEMM's
 *   best shape on a current library (S. Bekman, stas00/ml-engineering
 *   compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table",
 *   CUDA 12.1: A100 SXM 267.9 TFLOP/s BF16, 0.859 of 312; H100 SXM 792.1 of 989, 0.801),
 *   above what a training layer's GEMMs reach. On both GPUs the calibrated constant
 *   takes up whatever else makes a layer slower than spsim's kernels (the element-wise
 *   and softmax kernels are counted by their bytes at the streamed HBM rate); the runs
 *   of bench/validate.sh are the check.
 * - launch: about 4 us per kernel without CUDA graphs (NVIDIA developer blog,
 *   "Getting Started with CUDA Graphs", 2019: 3.8 us per short kernel launched in a
 *   stream).
 * - FP8: H100 SXM 1,979 TFLOP/s dense FP8 against 989.4 dense BF16 (NVIDIA H100
 *   datasheet; the sparsity figures halved), fp8_peak_ratio 2. fp8_gemm_eff 0.668 over
 *   K + 448 (fp8_tile_k0, the form of the BF16 GEMMs' tile_k0), measured: the 12 FP8
 *   GEMMs (forward, data and weight gradients of QKV, output projection, SwiGLU up and
 *   down projections) of a Llama 3 70B layer at TP 4 and of a Llama 3.1 405B layer at
 *   TP 8, CP 2, per-tensor scales (torch._scaled_mm), run in a loop for 15 s so that the
 *   GPU holds a training run's clocks, then timed, on an H100 SXM at 700 W
 *   (bench/gpu/h100-fp8-layer-gemms.txt, bench/gpu/fp8-layer-gemms.py): 0.618 and 0.611
 *   of the dense FP8 peak over the layer, 0.53-0.56 at K 2048-2560 and 0.61-0.66 at K
 *   6656-16384. The least absolute error fit of this model (tiles, waves, launch) to the
 *   24 GEMMs (`python3 bench/gpu/fit-fp8-tile.py`) gives 0.668 and 448: mean |error|
 *   3.8 % (the flat 0.62 of the layer average before it: 6.5 %, 8-12 % fast at K 2048-2560),
 *   both layers' sums within 1 %. The two QKV forwards (N 2560 and 2304) run at 0.42 and
 *   miss by 30 % under either. The per-shape sets, not used in the fit, check the form in
 *   K: FP8 GEMMs timed with cuBLAS in short runs (bench/gpu/h100-gemm-fp8.csv and
 *   h200-gemm-fp8.csv, 92 of at least 50 us each, m 2048-16384, n and k 1024-28672):
 *   mean |error| 7.0 % and 5.0 % (the flat 0.62: 11.3 % and 10.4 %, 24-27 % fast at
 *   K 1024), their means per power of two of K within -3 to +5 % (tests/test-kernel-model.c).
 *   A flat rate was best published at 0.68 (DeepGEMM "1350+ FP8 TFLOPS" on Hopper,
 *   deepseek-ai/DeepGEMM README, February 2025: 1350 / 1979), an isolated GEMM's best.
 *   Transformer Engine's FP8 layer, a short one-GPU benchmark, comes out slower than
 *   published (a GPU that has just started runs its GEMMs faster than a sustained run:
 *   BF16 GEMMs measured at 780-805 TFLOP/s in such runs against 690-700 in the sustained
 *   table). Per-tensor (delayed, tensorwise) and blockwise FP8 GEMMs are priced at the
 *   same rate. A100 has no FP8 tensor cores (A100 datasheet): fp8_peak_ratio 0. */
void sp_kernel_gpu_h100(sp_kernel_gpu *g)
{
  *g = (sp_kernel_gpu){ .peak_flops = 989.4e12, .hbm_bw = 3.35e12, .sms = 132, .tile_m = 128, .tile_n = 256,
                        .gemm_eff = 0.74, .tile_k0 = 208, .attn_fwd_eff = 0.60, .attn_bwd_eff = 0.45, .attn2_fwd_eff = 0.30,
                        .attn2_bwd_eff = 0.26, .attn_d0_fwd = 80, .attn_d0_bwd = 44, .launch = 4e-6, .hbm_eff = 0.83,
                        .fp8_peak_ratio = 2.0,
                        .fp8_gemm_eff = 0.668, .fp8_tile_k0 = 448 };
}

void sp_kernel_gpu_a100(sp_kernel_gpu *g)
{
  *g = (sp_kernel_gpu){ .peak_flops = 312e12, .hbm_bw = 2.039e12, .sms = 108, .tile_m = 128, .tile_n = 256,
                        .gemm_eff = 0.70, .attn_fwd_eff = 0.65, .attn_bwd_eff = 0.55, .attn2_fwd_eff = 0.65,
                        .attn2_bwd_eff = 0.55, .launch = 4e-6, .hbm_eff = 0.85 };
}

/* B200 (DGX B200, 1 kW). Sources: peak 2.25 PFLOP/s dense BF16 and HBM3e 8 TB/s from
 * the NVIDIA DGX B200 / HGX B200 datasheets (72 PFLOPS FP8 training with sparsity for
 * 8 GPUs; 64 TB/s HBM3e in all), as in src/sim/platform_gen.c. SMs: 148, as
 * cudaGetDeviceProperties reports it on a B200 (Chips and Cheese, "Nvidia's B200:
 * Keeping the CUDA Juggernaut Rolling", 2025: 2 dies of 80 SMs, 74 enabled on each).
 * NVIDIA's datasheets and the "NVIDIA Blackwell Architecture Technical Brief" give no
 * SM count, nor do the CUDA programming guide's compute capability 10.0 tables
 * (per-SM limits only); secondary spec listings disagree (144, 132), so the
 * measured figure is taken. ASSUMPTIONS, no published measurement: tile 128 x 256
 * per SM as on Hopper (Blackwell's 2-SM 256 x 256 UMMA tile covers the same area
 * per SM); gemm_eff 0.74 over K + 208 and flash attention 0.60 / 0.45 as on H100 (cuDNN and
 * FlashAttention-generation kernels for sm_100 are assumed to reach the same
 * fraction of peak); flash2 0.30 / 0.26 as on H100 (FlashAttention-2's mma.sync
 * kernels use neither Hopper's nor Blackwell's asynchronous tensor-core
 * instructions); HBM3e streaming at 0.83 of its peak as Hopper's HBM3 (BabelStream, see
 * above). A measured table (--gemm-table) or --eff-matmul replaces them.
 * GB200 uses these constants with its own peak and HBM bandwidth, taken from the
 * platform's host speed and hbm_bw. FP8: 4.5 PFLOP/s dense FP8 against 2.25 dense BF16
 * (NVIDIA DGX B200 datasheet, 72 PFLOP/s FP8 and 36 BF16 for eight GPUs, dense),
 * fp8_peak_ratio 2, at H100's FP8 GEMM efficiency 0.668 over K + 448 (assumed). */
void sp_kernel_gpu_b200(sp_kernel_gpu *g)
{
  sp_kernel_gpu_h100(g); /* every efficiency, the tile and the launch as on H100 (above) */
  g->peak_flops = 2.25e15;
  g->hbm_bw = 8e12;
  g->sms = 148;
}

/* H200: the H100 SXM's compute with 4.8 TB/s of HBM3e (NVIDIA H200 datasheet). */
gboolean sp_kernel_gpu_for_device(const char *name, sp_kernel_gpu *g)
{
  if (name == NULL) return FALSE;
  if (strstr(name, "H100") != NULL || strstr(name, "H200") != NULL || strstr(name, "H800") != NULL) {
    sp_kernel_gpu_h100(g);
    if (strstr(name, "H200") != NULL) g->hbm_bw = 4.8e12;
    return TRUE;
  }
  if (strstr(name, "A100") != NULL || strstr(name, "A800") != NULL) {
    sp_kernel_gpu_a100(g);
    return TRUE;
  }
  if (strstr(name, "B200") != NULL) {
    sp_kernel_gpu_b200(g);
    return TRUE;
  }
  return FALSE;
}

static const char *const fp8_names[] = { "none", "delayed", "tensorwise", "blockwise" };

const char *sp_fp8_recipe_name(sp_fp8_recipe r)
{
  return (unsigned)r < G_N_ELEMENTS(fp8_names) ? fp8_names[r] : "?";
}

gboolean sp_fp8_recipe_parse(const char *s, sp_fp8_recipe *out, GError **err)
{
  for (guint i = 0; s && i < G_N_ELEMENTS(fp8_names); i++)
    if (g_ascii_strcasecmp(s, fp8_names[i]) == 0) { *out = (sp_fp8_recipe)i; return TRUE; }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown FP8 recipe '%s' (delayed, tensorwise or blockwise)", s ? s : "");
  return FALSE;
}

/* Bytes per element of a cast (kernel_model.h): 2 read + 1 FP8 + 1 FP8 transpose
 * (transformer_engine/common/transpose/cast_transpose.cu writes both); current scaling
 * reads the tensor once more for its amax first (Float8CurrentScaling); blockwise
 * writes an fp32 scale per 128 elements of each copy (DeepSeek-V3 sec. 3.3.2). */
double sp_fp8_cast_bytes_per_elem(sp_fp8_recipe r)
{
  switch (r) {
  case SP_FP8_DELAYED: return 4.0;
  case SP_FP8_TENSORWISE: return 6.0;
  case SP_FP8_BLOCKWISE: return 4.0 + 2.0 * 4.0 / 128.0;
  default: return 0.0;
  }
}

int sp_fp8_cast_kernels(sp_fp8_recipe r)
{
  return r == SP_FP8_TENSORWISE ? 2 : r == SP_FP8_NONE ? 0 : 1;
}

gboolean sp_kernel_gpu_fp8(const sp_kernel_gpu *g, sp_kernel_gpu *out, GError **err)
{
  if (!(g->fp8_peak_ratio > 0) || !(g->fp8_gemm_eff > 0)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "this GPU has no FP8 tensor cores (A100 and CPUs do not; H100, H200 and B200 do): drop --fp8");
    return FALSE;
  }
  *out = *g;
  out->peak_flops = g->peak_flops * g->fp8_peak_ratio;
  out->gemm_eff = g->fp8_gemm_eff;
  out->tile_k0 = g->fp8_tile_k0; /* see fp8_gemm_eff in sp_kernel_gpu_h100's sources */
  out->table_fp8 = TRUE; /* a table's FP8 rows, if it has any, price these GEMMs */
  return TRUE;
}

double sp_kernel_hbm_rate(const sp_kernel_gpu *g)
{
  if (!(g->hbm_bw > 0)) return 0.0;
  return g->hbm_eff > 0 ? g->hbm_bw * g->hbm_eff : g->hbm_bw;
}

static double ceil_div(double a, double b)
{
  return ceil(a / b);
}

gboolean sp_kernel_gemm_time(const sp_kernel_gpu *g, double batch, int64_t m, int64_t n, int64_t k, double elem,
                             double *t, GError **err)
{
  if (m <= 0 || n <= 0 || k <= 0 || !(batch > 0)) {
    *t = 0;
    return TRUE;
  }
  double flops = 2.0 * batch * (double)m * (double)n * (double)k;
  /* a measured table prices the GEMMs of the precision it has rows of; the model the rest */
  if (sp_gemm_table_has(g->table, g->table_fp8)) {
    double rate = 0;
    if (!sp_gemm_table_lookup(g->table, g->table_fp8, m, n, k, &rate, err))
      return FALSE;
    *t = flops / rate + g->launch;
    return TRUE;
  }
  /* the library picks the tile that finishes first: the largest, or halves of it
   * when a small M or N leaves SMs idle (cuBLAS' heuristics choose among such
   * tile shapes; a smaller tile does proportionally less work per wave) */
  static const double shrink[][2] = { { 1, 1 }, { 1, 2 }, { 2, 2 }, { 2, 4 } };
  double t_math = G_MAXDOUBLE;
  for (gsize i = 0; i < G_N_ELEMENTS(shrink); i++) {
    double tm = MAX(1.0, g->tile_m / shrink[i][0]), tn = MAX(1.0, g->tile_n / shrink[i][1]);
    double tiles = batch * ceil_div((double)m, tm) * ceil_div((double)n, tn);
    double waves = ceil_div(tiles, g->sms);
    t_math = MIN(t_math, waves * 2.0 * tm * tn * ((double)k + g->tile_k0) * g->sms / (g->gemm_eff * g->peak_flops));
  }
  double bw = sp_kernel_hbm_rate(g);
  double t_mem = bw > 0 ? elem * batch * ((double)m * k + (double)k * n + (double)m * n) / bw : 0.0;
  *t = MAX(t_math, t_mem) + g->launch;
  return TRUE;
}

/* Score pairs a query block of sq sees among skv keys under a causal mask: half
 * of them, as FLOP counts of causal attention take it (Dao 2023). */
static double causal_pairs(int64_t sq, int64_t skv)
{
  return (double)sq * (double)skv / 2.0;
}

void sp_kernel_attn_eff(const sp_kernel_gpu *g, sp_attn_impl impl, double *fwd, double *bwd)
{
  gboolean fa2 = impl == SP_ATTN_FLASH2 || impl == SP_ATTN_TRITON;
  *fwd = fa2 && g->attn2_fwd_eff > 0 ? g->attn2_fwd_eff : g->attn_fwd_eff;
  *bwd = fa2 && g->attn2_bwd_eff > 0 ? g->attn2_bwd_eff : g->attn_bwd_eff;
  if (impl == SP_ATTN_TRITON) {
    *fwd /= SP_ATTN_TRITON_FWD_SLOWDOWN;
    *bwd /= SP_ATTN_TRITON_BWD_SLOWDOWN;
  }
}

double sp_kernel_attn_time(const sp_kernel_gpu *g, sp_attn_impl impl, gboolean bwd, double b, double heads,
                           int64_t sq, int64_t skv, int64_t d, double elem)
{
  if (!(b > 0) || !(heads > 0) || sq <= 0 || skv <= 0 || d <= 0)
    return 0.0;
  if (impl == SP_ATTN_FLASH || impl == SP_ATTN_FLASH2 || impl == SP_ATTN_TRITON) {
    double fe, be;
    sp_kernel_attn_eff(g, impl, &fe, &be);
    /* the Triton kernel works on head-dim blocks of the next power of two (at least 16)
     * in both directions: BLOCK_HEADDIM = max(triton.next_power_of_2(d), 16) in
     * _flash_attn_forward and _flash_attn_backward (llm-foundry
     * llmfoundry/models/layers/flash_attn_triton.py at 5e85bd6); its time follows the
     * padded width (a head dim of 112 runs as 128) */
    double dk = (double)d;
    if (impl == SP_ATTN_TRITON) {
      int64_t p2 = 16;
      while (p2 < d) p2 *= 2;
      dk = (double)p2;
    }
    double d0 = bwd ? g->attn_d0_bwd : g->attn_d0_fwd;
    if (impl == SP_ATTN_FLASH && d0 > 0 && d < 128) {
      double at = (double)d / ((double)d + d0) / (128.0 / (128.0 + d0));
      fe *= at;
      be *= at;
    }
    double fwd = 4.0 * b * heads * causal_pairs(sq, skv) * dk;
    return bwd ? 2.5 * fwd / (be * g->peak_flops) + g->launch : fwd / (fe * g->peak_flops) + g->launch;
  }
  /* unfused: full scores; the model's GEMM shapes, no table (batched products
   * with K = d or s are not what a user measures) */
  sp_kernel_gpu plain = *g;
  plain.table = NULL;
  double bh = b * heads, scores = bh * (double)sq * (double)skv, t1 = 0, t2 = 0;
  (void)sp_kernel_gemm_time(&plain, bh, sq, skv, d, elem, &t1, NULL); /* Q K^T */
  (void)sp_kernel_gemm_time(&plain, bh, sq, d, skv, elem, &t2, NULL); /* P V */
  /* HBM bytes per score of the element-wise kernels between the GEMMs, 16-bit scores,
   * as Megatron-LM runs them (megatron/core/transformer/dot_product_attention.py and
   * megatron/legacy/model/transformer.py CoreAttention: baddbmm, scale_mask_softmax,
   * attention_dropout, bmm; megatron/core/fusions/fused_softmax.py):
   *  - forward: the fused scale-mask-softmax (ScaledUpperTriangMaskedSoftmax, the causal
   *    mask made in the kernel) reads the scores and writes the probabilities, 2 + 2;
   *    dropout (torch native_dropout) reads them and writes its output and a one-byte
   *    bool mask, 2 + 2 + 1: 9 bytes, 2 kernels;
   *  - backward: dropout's (native_dropout_backward: grad x mask x scale) reads the
   *    gradient and the mask and writes the gradient, 2 + 1 + 2; the fused softmax
   *    backward (scaled_upper_triang_masked_softmax_cuda.backward(output_grads,
   *    softmax_results, scale)) reads the gradient and the saved probabilities and writes
   *    the input gradient, 2 + 2 + 2: 11 bytes, 2 kernels.
   * The scores' and their gradient's writes and reads by the GEMMs are in the GEMMs'
   * times (the two forward products, four backward). */
  double bw = sp_kernel_hbm_rate(g);
  double gemms = t1 + t2, hbm = bw > 0 ? scores / bw : 0.0;
  if (bwd) return 2.0 * gemms + 11.0 * hbm + 2.0 * g->launch;
  return gemms + 9.0 * hbm + 2.0 * g->launch;
}

double sp_kernel_elementwise_time(const sp_kernel_gpu *g, double bytes)
{
  double bw = sp_kernel_hbm_rate(g);
  return bytes > 0 && bw > 0 ? bytes / bw + g->launch : 0.0;
}

double sp_kernel_linear_cast_bytes(sp_fp8_recipe fp8, int64_t m, int64_t n, int64_t k)
{
  if (m < 1 || n < 1 || k < 1) return 0.0;
  return sp_fp8_cast_bytes_per_elem(fp8) * (double)m * ((double)k + (double)n);
}

gboolean sp_kernel_linear3(const sp_kernel_gpu *g, sp_fp8_recipe fp8, int64_t m, int64_t n, int64_t k, double elem,
                           double t[3], GError **err)
{
  t[0] = t[1] = t[2] = 0;
  if (fp8 != SP_FP8_NONE && (m < 1 || n < 1 || k < 1)) return TRUE;
  sp_kernel_gpu g8;
  const sp_kernel_gpu *gg = g;
  if (fp8 != SP_FP8_NONE) {
    if (!sp_kernel_gpu_fp8(g, &g8, err)) return FALSE;
    gg = &g8;
    elem = 1.0;
  }
  if (!sp_kernel_gemm_time(gg, 1, m, n, k, elem, &t[0], err) || !sp_kernel_gemm_time(gg, 1, m, k, n, elem, &t[1], err) ||
      !sp_kernel_gemm_time(gg, 1, k, n, m, elem, &t[2], err))
    return FALSE;
  double bw = sp_kernel_hbm_rate(g), cb = sp_fp8_cast_bytes_per_elem(fp8);
  if (fp8 != SP_FP8_NONE && bw > 0) {
    double launches = sp_fp8_cast_kernels(fp8) * g->launch;
    t[0] += cb * (double)m * (double)k / bw + launches;
    t[1] += cb * (double)m * (double)n / bw + launches;
  }
  return TRUE;
}

/* ---- measured GEMM tables ------------------------------------------------- */

typedef struct {
  double m, n, k, flops;
  gboolean fp8; /* a GEMM of FP8 operands (dtype fp8 or e4m3), else 16-bit */
} gemm_row;

struct sp_gemm_table {
  GArray *rows; /* gemm_row */
  char *path;
  guint n_fp8;  /* rows of FP8 GEMMs */
};

guint sp_gemm_table_len(const sp_gemm_table *t)
{
  return t ? t->rows->len : 0;
}

void sp_gemm_table_free(sp_gemm_table *t)
{
  if (t == NULL)
    return;
  g_array_unref(t->rows);
  g_free(t->path);
  g_free(t);
}

/* The precision a dtype names: 16-bit (bf16, fp16, f16) or FP8 (fp8, e4m3); FALSE otherwise. */
static gboolean parse_dtype(const char *dt, gboolean *fp8)
{
  static const char *const b16[] = { "bf16", "fp16", "f16" }, *const f8[] = { "fp8", "e4m3" };
  for (gsize i = 0; i < G_N_ELEMENTS(b16); i++)
    if (g_ascii_strcasecmp(dt, b16[i]) == 0) { *fp8 = FALSE; return TRUE; }
  for (gsize i = 0; i < G_N_ELEMENTS(f8); i++)
    if (g_ascii_strcasecmp(dt, f8[i]) == 0) { *fp8 = TRUE; return TRUE; }
  return FALSE;
}

static gboolean add_row(sp_gemm_table *t, double m, double n, double k, double tflops, gboolean fp8,
                        const char *where, GError **err)
{
  if (!(m >= 1 && n >= 1 && k >= 1 && m < 1e9 && n < 1e9 && k < 1e9 && tflops > 0 && tflops < 1e5)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "GEMM table '%s', %s: m, n, k must be positive sizes and tflops a positive TFLOP/s figure",
                t->path, where);
    return FALSE;
  }
  gemm_row r = { m, n, k, tflops * 1e12, fp8 };
  g_array_append_val(t->rows, r);
  t->n_fp8 += fp8 ? 1 : 0;
  return TRUE;
}

static gboolean json_num_member(JsonObject *o, const char *key, double *v)
{
  JsonNode *n = json_object_get_member(o, key);
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n))
    return FALSE;
  GType ty = json_node_get_value_type(n);
  if (ty != G_TYPE_INT64 && ty != G_TYPE_DOUBLE)
    return FALSE;
  *v = json_node_get_double(n);
  return isfinite(*v);
}

static gboolean load_json(sp_gemm_table *t, const char *text, gsize len, GError **err)
{
  g_autoptr(JsonParser) p = json_parser_new();
  GError *e = NULL;
  if (!json_parser_load_from_data(p, text, (gssize)len, &e)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s' is not valid JSON: %s", t->path, e->message);
    g_error_free(e);
    return FALSE;
  }
  JsonNode *root = json_parser_get_root(p);
  if (root == NULL || !JSON_NODE_HOLDS_ARRAY(root)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "GEMM table '%s' must be a JSON array of {\"m\":..,\"n\":..,\"k\":..,\"tflops\":..}", t->path);
    return FALSE;
  }
  JsonArray *a = json_node_get_array(root);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    JsonNode *n = json_array_get_element(a, i);
    g_autofree char *where = g_strdup_printf("entry %u", i);
    double m = 0, nn = 0, k = 0, tf = 0;
    if (!JSON_NODE_HOLDS_OBJECT(n) || !json_num_member(json_node_get_object(n), "m", &m) ||
        !json_num_member(json_node_get_object(n), "n", &nn) || !json_num_member(json_node_get_object(n), "k", &k) ||
        !json_num_member(json_node_get_object(n), "tflops", &tf)) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s', %s: needs numbers m, n, k and tflops", t->path,
                  where);
      return FALSE;
    }
    gboolean fp8 = FALSE;
    JsonNode *dn = json_object_get_member(json_node_get_object(n), "dtype");
    if (dn != NULL && (!JSON_NODE_HOLDS_VALUE(dn) || json_node_get_value_type(dn) != G_TYPE_STRING ||
                       !parse_dtype(json_node_get_string(dn), &fp8))) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s', %s: dtype must be \"bf16\", \"fp16\" or \"fp8\"",
                  t->path, where);
      return FALSE;
    }
    if (!add_row(t, m, nn, k, tf, fp8, where, err))
      return FALSE;
  }
  return TRUE;
}

static gboolean load_csv(sp_gemm_table *t, const char *text, GError **err)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int col[4] = { -1, -1, -1, -1 }, dcol = -1, ncols = 0;
  static const char *const names[4] = { "m", "n", "k", "tflops" };
  gboolean header = FALSE;
  g_autofree char *header_line = NULL;
  for (int li = 0; lines[li]; li++) {
    char *l = g_strstrip(lines[li]);
    if (*l == '\0' || *l == '#')
      continue;
    if (header && strcmp(l, header_line) == 0)
      continue; /* the header again: tables concatenated with cat */
    if (!header)
      header_line = g_strdup(l);
    g_auto(GStrv) f = g_strsplit(l, ",", -1);
    int nf = (int)g_strv_length(f);
    g_autofree char *where = g_strdup_printf("line %d", li + 1);
    if (!header) {
      for (int i = 0; i < nf; i++) {
        char *c = g_strstrip(f[i]);
        for (int j = 0; j < 4; j++)
          if (g_ascii_strcasecmp(c, names[j]) == 0)
            col[j] = i;
        if (g_ascii_strcasecmp(c, "dtype") == 0)
          dcol = i;
      }
      for (int j = 0; j < 4; j++)
        if (col[j] < 0) {
          g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                      "GEMM table '%s': the CSV header must name the columns m, n, k and tflops (no '%s')", t->path,
                      names[j]);
          return FALSE;
        }
      ncols = nf;
      header = TRUE;
      continue;
    }
    if (nf != ncols) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s', %s: %d fields where the header has %d", t->path,
                  where, nf, ncols);
      return FALSE;
    }
    gboolean fp8 = FALSE;
    if (dcol >= 0) {
      const char *dt = g_strstrip(f[dcol]);
      if (!parse_dtype(dt, &fp8)) {
        g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s', %s: dtype '%s' (bf16, fp16 or fp8 expected)",
                    t->path, where, dt);
        return FALSE;
      }
    }
    double v[4];
    for (int j = 0; j < 4; j++) {
      char *s = g_strstrip(f[col[j]]), *end = NULL;
      v[j] = g_ascii_strtod(s, &end);
      if (end == s || *end != '\0') {
        g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s', %s: '%s' is not a number", t->path, where, s);
        return FALSE;
      }
    }
    if (!add_row(t, v[0], v[1], v[2], v[3], fp8, where, err))
      return FALSE;
  }
  return TRUE;
}

/* The table in @p len bytes of @p text, which has a NUL at text[len] (the CSV reader
 * stops at a NUL; the JSON reader sees every byte). */
static sp_gemm_table *parse_text(const char *text, gsize len, const char *name, GError **err)
{
  sp_gemm_table *t = g_new0(sp_gemm_table, 1);
  t->rows = g_array_new(FALSE, FALSE, sizeof(gemm_row));
  t->path = g_strdup(name);
  const char *p = text;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  gboolean ok = *p == '[' ? load_json(t, text, len, err) : load_csv(t, text, err);
  if (ok && t->rows->len == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "GEMM table '%s' has no rows", name);
    ok = FALSE;
  }
  if (!ok) {
    sp_gemm_table_free(t);
    return NULL;
  }
  return t;
}

sp_gemm_table *sp_gemm_table_load(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *e = NULL;
  if (!g_file_get_contents(path, &text, &len, &e)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot read GEMM table: %s", e->message);
    g_error_free(e);
    return NULL;
  }
  return parse_text(text, len, path, err); /* g_file_get_contents ends its buffer with a NUL */
}

sp_gemm_table *sp_gemm_table_parse(const char *data, gssize size, const char *name, GError **err)
{
  gsize len = size < 0 ? strlen(data) : (gsize)size;
  g_autofree char *text = g_malloc(len + 1);
  memcpy(text, data, len);
  text[len] = '\0';
  return parse_text(text, len, name, err);
}

gboolean sp_gemm_table_has(const sp_gemm_table *t, gboolean fp8)
{
  return t != NULL && (fp8 ? t->n_fp8 > 0 : t->rows->len > t->n_fp8);
}

gboolean sp_gemm_table_lookup(const sp_gemm_table *t, gboolean fp8, int64_t m, int64_t n, int64_t k, double *flops,
                              GError **err)
{
  const gemm_row *best = NULL;
  double bd = G_MAXDOUBLE;
  for (guint i = 0; i < t->rows->len; i++) {
    const gemm_row *r = &g_array_index(t->rows, gemm_row, i);
    if (r->fp8 != fp8)
      continue;
    double dm = log2((double)m / r->m), dn = log2((double)n / r->n), dk = log2((double)k / r->k);
    double dist = dm * dm + dn * dn + dk * dk;
    if (dist < bd) {
      bd = dist;
      best = r;
    }
  }
  if (best == NULL || fabs(log2((double)m / best->m)) > 1 || fabs(log2((double)n / best->n)) > 1 ||
      fabs(log2((double)k / best->k)) > 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "GEMM table '%s' has no %s shape near %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                " (nearest: %.0f x %.0f x %.0f); add measured rows within a factor of 2 of it in m, n and k",
                t->path, fp8 ? "FP8" : "16-bit", m, n, k, best ? best->m : 0, best ? best->n : 0, best ? best->k : 0);
    return FALSE;
  }
  *flops = best->flops;
  return TRUE;
}
