/* The deterministic f32 host kernels of mixture-of-experts layers (spsim/kernels.h):
 * router softmax, top-k and capacity, token permutation into per-expert capacity
 * slots and back, the expert activation, and their backward passes. Every sum runs
 * in one fixed index order starting from 0.0f (compiled with -ffp-contract=off). */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/kernels.h"

/* route[t, k] = (expert, slot or -1 when dropped, probability; 0 when dropped) */
#define R_EXPERT 0
#define R_SLOT 1
#define R_PROB 2

/* a is preferred to b when kept by expert capacity: higher probability first under
 * "probs", lower token index first under "position" and on equal probabilities */
static gboolean keep_before(int policy, float pa, int64_t ta, float pb, int64_t tb)
{
  if (policy == SP_MOE_DROP_PROBS && pa != pb)
    return pa > pb;
  return ta < tb;
}

void sp_kernel_moe_route_f32(const float *logits, int64_t T, int64_t E, int64_t K, int64_t C, int policy,
                             float *route, float *scores, float *counts)
{
  /* softmax over all experts, then top-k (the pre-softmax order of Megatron-Core's
   * topk_softmax_with_capacity with use_pre_softmax) */
  for (int64_t t = 0; t < T; t++) {
    const float *l = logits + t * E;
    float *s = scores + t * E;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t e = 0; e < E; e++)
      mx = l[e] > mx ? l[e] : mx;
    for (int64_t e = 0; e < E; e++) {
      s[e] = expf(l[e] - mx);
      sum += s[e];
    }
    for (int64_t e = 0; e < E; e++)
      s[e] = s[e] / sum;
    for (int64_t k = 0; k < K; k++) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; e++) {
        gboolean taken = FALSE;
        for (int64_t j = 0; j < k; j++)
          taken = taken || (int64_t)route[(t * K + j) * 3 + R_EXPERT] == e;
        /* strictly greater: on equal scores the lower expert index wins */
        if (!taken && (best < 0 || s[e] > s[best]))
          best = e;
      }
      float *r = route + (t * K + k) * 3;
      r[R_EXPERT] = (float)best;
      r[R_SLOT] = -1.0f;
      r[R_PROB] = s[best];
    }
  }
  /* capacity per expert: the C preferred of its tokens are kept, in token order */
  for (int64_t e = 0; e < E; e++) {
    int64_t n = 0;
    for (int64_t t = 0; t < T; t++)
      for (int64_t k = 0; k < K; k++) {
        float *r = route + (t * K + k) * 3;
        if ((int64_t)r[R_EXPERT] != e)
          continue;
        /* rank of (t, k) among the tokens of e: how many are preferred to it */
        int64_t before = 0;
        for (int64_t u = 0; u < T; u++)
          for (int64_t j = 0; j < K; j++) {
            const float *q = route + (u * K + j) * 3;
            if (u != t && (int64_t)q[R_EXPERT] == e && keep_before(policy, q[R_PROB], u, r[R_PROB], t))
              before++;
          }
        if (before < C)
          r[R_SLOT] = 0.0f; /* kept; its slot is set below */
      }
    for (int64_t t = 0; t < T; t++)
      for (int64_t k = 0; k < K; k++) {
        float *r = route + (t * K + k) * 3;
        if ((int64_t)r[R_EXPERT] == e) {
          if (r[R_SLOT] >= 0.0f)
            r[R_SLOT] = (float)n++;
          else
            r[R_PROB] = 0.0f;
        }
      }
    counts[e] = (float)n;
  }
}

void sp_kernel_moe_permute_f32(const float *x, const float *route, int64_t T, int64_t K, int64_t E, int64_t C,
                               int64_t H, float *disp)
{
  memset(disp, 0, sizeof(float) * (size_t)(E * C * H));
  for (int64_t t = 0; t < T; t++)
    for (int64_t k = 0; k < K; k++) {
      const float *r = route + (t * K + k) * 3;
      if (r[R_SLOT] >= 0.0f)
        memcpy(disp + ((int64_t)r[R_EXPERT] * C + (int64_t)r[R_SLOT]) * H, x + t * H, sizeof(float) * (size_t)H);
    }
}

void sp_kernel_moe_unpermute_f32(const float *eo, const float *route, int64_t T, int64_t K, int64_t C,
                                 int64_t H, float *y)
{
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < H; c++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        const float *r = route + (t * K + k) * 3;
        if (r[R_SLOT] >= 0.0f)
          acc += r[R_PROB] * eo[((int64_t)r[R_EXPERT] * C + (int64_t)r[R_SLOT]) * H + c];
      }
      y[t * H + c] = acc;
    }
}

void sp_kernel_moe_unpermute_bwd_f32(const float *dy, const float *eo, const float *route, int64_t T, int64_t K,
                                     int64_t E, int64_t C, int64_t H, float *deo, float *dprob)
{
  memset(deo, 0, sizeof(float) * (size_t)(E * C * H));
  for (int64_t t = 0; t < T; t++)
    for (int64_t k = 0; k < K; k++) {
      const float *r = route + (t * K + k) * 3;
      float acc = 0.0f;
      if (r[R_SLOT] >= 0.0f) {
        int64_t row = ((int64_t)r[R_EXPERT] * C + (int64_t)r[R_SLOT]) * H;
        for (int64_t c = 0; c < H; c++) {
          deo[row + c] = r[R_PROB] * dy[t * H + c];
          acc += dy[t * H + c] * eo[row + c];
        }
      }
      dprob[t * K + k] = acc;
    }
}

void sp_kernel_moe_permute_bwd_f32(const float *ddisp, const float *route, int64_t T, int64_t K, int64_t C,
                                   int64_t H, float *dx)
{
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < H; c++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        const float *r = route + (t * K + k) * 3;
        if (r[R_SLOT] >= 0.0f)
          acc += ddisp[((int64_t)r[R_EXPERT] * C + (int64_t)r[R_SLOT]) * H + c];
      }
      dx[t * H + c] = acc;
    }
}

void sp_kernel_moe_route_bwd_f32(const float *scores, const float *route, const float *dprob, int64_t T,
                                 int64_t E, int64_t K, float *dlogits)
{
  for (int64_t t = 0; t < T; t++) {
    const float *s = scores + t * E;
    float *dl = dlogits + t * E;
    /* gradient reaching each score: the kept top-k slots only (dropped ones carry
     * probability 0, as Megatron-Core's final_probs = probs * capacity mask) */
    for (int64_t e = 0; e < E; e++)
      dl[e] = 0.0f;
    for (int64_t k = 0; k < K; k++) {
      const float *r = route + (t * K + k) * 3;
      if (r[R_SLOT] >= 0.0f)
        dl[(int64_t)r[R_EXPERT]] = dprob[t * K + k];
    }
    float dot = 0.0f;
    for (int64_t e = 0; e < E; e++)
      dot += dl[e] * s[e];
    for (int64_t e = 0; e < E; e++)
      dl[e] = s[e] * (dl[e] - dot);
  }
}

void sp_kernel_relu_f32(const float *x, int64_t n, float *y)
{
  for (int64_t i = 0; i < n; i++)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void sp_kernel_relu_bwd_f32(const float *x, const float *dy, int64_t n, float *dx)
{
  for (int64_t i = 0; i < n; i++)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
