/**
 * @file kernels.h
 * @brief Small deterministic CPU kernels for data mode: f32 matmul and causal
 *        softmax attention (forward and backward), ring-attention steps (forward
 *        and backward). Every sum runs in one fixed
 *        index order starting from 0.0f, compiled without FMA contraction
 *        (-ffp-contract=off), so one head's result depends only on that head's
 *        data: Ulysses attention on a shard of heads equals single-device
 *        attention bitwise.
 */
#ifndef SPSIM_KERNELS_H
#define SPSIM_KERNELS_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/**
 * c[M, N] = op(a) x op(b). @p a is stored row-major as [M, K] (or [K, M] when
 * @p trans_a), @p b as [K, N] (or [N, K] when @p trans_b). c[m][n] sums k = 0..K-1
 * in order.
 */
void sp_kernel_matmul_f32(const float *a, gboolean trans_a, const float *b, gboolean trans_b,
                          float *c, int64_t M, int64_t N, int64_t K);

/** Index of element (batch, seq, head, c) in a [b, s, h, d] (seq_first FALSE) or [s, b, h, d] tensor. */
static inline int64_t sp_attn_index(gboolean seq_first, int64_t B, int64_t S, int64_t H, int64_t D,
                                    int64_t b, int64_t s, int64_t h, int64_t c)
{
  return seq_first ? ((s * B + b) * H + h) * D + c : ((b * S + s) * H + h) * D + c;
}

/**
 * Causal attention: out[b,i,h] = sum_{j<=i} softmax_j(q_i . k_j / sqrt(D)) v_j, with q
 * head h reading kv head h / (Hq / Hkv). Hq must be a multiple of Hkv.
 */
void sp_kernel_attention_f32(gboolean seq_first, int64_t B, int64_t S, int64_t Hq, int64_t Hkv,
                             int64_t D, const float *q, const float *k, const float *v, float *out);

/** Gradients of sp_kernel_attention_f32 (dq, dk, dv overwritten; dk/dv sum over the q heads of a group). */
void sp_kernel_attention_bwd_f32(gboolean seq_first, int64_t B, int64_t S, int64_t Hq, int64_t Hkv,
                                 int64_t D, const float *q, const float *k, const float *v,
                                 const float *dout, float *dq, float *dk, float *dv);

/**
 * One online-softmax step of ring attention: the block's keys (all of them when
 * @p mode is 2, causal j <= i inside the block when 1, none when 0) update the state
 * rows (o[0..D), m, l) of every (b, i, h) of the local queries; keys in index order.
 * state rows with l == 0 are empty.
 */
void sp_kernel_ring_attn_step_f32(gboolean seq_first, int64_t B, int64_t S, int64_t Hq, int64_t Hkv,
                                  int64_t D, const float *q, const float *k, const float *v,
                                  const float *state_in, float *state_out, int mode);
/** out[r][c] = o[r][c] / l[r] for @p rows state rows of D + 2 values. */
void sp_kernel_ring_attn_final_f32(uint64_t rows, int64_t D, const float *state, float *out);

/**
 * One backward step of ring attention, the mirror of sp_kernel_ring_attn_step_f32:
 * the local queries @p q with their output gradient @p dout against the k/v block the
 * member holds (@p mode 2: every key, 1: causal j <= i inside the block, 0: none).
 * @p state is the forward's final state (o, m, l per query row): probabilities are
 * p = exp(q.k / sqrt(D) - m) / l and delta = dout . (o / l), so
 * ds = p (dout . v - delta). The gradients accumulate: dq_out = dq_in + (sum_j ds_j
 * k_j) / sqrt(D) (this block's keys summed first, in index order), dk_out = dk_in +
 * sum over (h, i) of (ds / sqrt(D)) q_i, dv_out = dv_in + sum of p dout_i (q heads of
 * a kv group, then query rows, in index order). In and out may be the same buffers;
 * mode 0 only copies.
 */
void sp_kernel_ring_attn_bwd_step_f32(gboolean seq_first, int64_t B, int64_t S, int64_t Hq, int64_t Hkv,
                                      int64_t D, const float *q, const float *k, const float *v,
                                      const float *dout, const float *state, const float *dq_in,
                                      const float *dk_in, const float *dv_in, float *dq_out, float *dk_out,
                                      float *dv_out, int mode);

/* ---- mixture of experts (kernels_moe.c) ---- */

/** Which tokens an expert keeps when more are routed to it than its capacity. */
typedef enum {
  SP_MOE_DROP_PROBS = 0, /**< the highest router probabilities (Megatron-Core drop policy "probs") */
  SP_MOE_DROP_POSITION   /**< the first tokens (Megatron-Core "position"; DeepSpeed's cumsum locations) */
} sp_moe_drop;

/**
 * Router of @p T tokens over @p E experts: scores = softmax(logits) per token
 * ([T, E]); the @p K experts of highest score in descending order, an equal score
 * going to the lower expert index; then each expert keeps at most @p C of the
 * (token, expert) pairs routed to it, chosen by @p policy (#sp_moe_drop; equal
 * probabilities and "position" prefer the lower token index), numbered 0..kept-1
 * in token order. @p route [T, K, 3] holds per pair (expert, capacity slot or -1
 * when dropped, probability or 0 when dropped); @p counts [E] the kept pairs per
 * expert. All as f32 (indices are exact small integers).
 */
void sp_kernel_moe_route_f32(const float *logits, int64_t T, int64_t E, int64_t K, int64_t C, int policy,
                             float *route, float *scores, float *counts);
/** disp [E, C, H]: row (e, slot) = the token routed there, zeros in unused slots. */
void sp_kernel_moe_permute_f32(const float *x, const float *route, int64_t T, int64_t K, int64_t E, int64_t C,
                               int64_t H, float *disp);
/** y [T, H] = sum over k = 0..K-1 of kept pairs of prob * eo[e, slot] (from 0.0f, in k order). */
void sp_kernel_moe_unpermute_f32(const float *eo, const float *route, int64_t T, int64_t K, int64_t C,
                                 int64_t H, float *y);
/** Backward of unpermute: deo [E, C, H] = prob * dy at kept slots, else 0; dprob [T, K] = dy . eo[slot]. */
void sp_kernel_moe_unpermute_bwd_f32(const float *dy, const float *eo, const float *route, int64_t T, int64_t K,
                                     int64_t E, int64_t C, int64_t H, float *deo, float *dprob);
/** Backward of permute: dx [T, H] = sum over k in order of the kept slots' rows of ddisp. */
void sp_kernel_moe_permute_bwd_f32(const float *ddisp, const float *route, int64_t T, int64_t K, int64_t C,
                                   int64_t H, float *dx);
/** Backward of the router: dlogits [T, E] = s (g - g . s), g = dprob at the kept pairs' experts, else 0. */
void sp_kernel_moe_route_bwd_f32(const float *scores, const float *route, const float *dprob, int64_t T,
                                 int64_t E, int64_t K, float *dlogits);
/** y = max(x, 0) elementwise (the expert FFN's activation). */
void sp_kernel_relu_f32(const float *x, int64_t n, float *y);
/** dx = dy where x > 0, else 0. */
void sp_kernel_relu_bwd_f32(const float *x, const float *dy, int64_t n, float *dx);

G_END_DECLS

#endif
