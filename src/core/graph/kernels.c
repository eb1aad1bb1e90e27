/* Deterministic f32 CPU kernels (data mode). Built with -ffp-contract=off. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/kernels.h"

void sp_kernel_matmul_f32(const float *a, gboolean trans_a, const float *b, gboolean trans_b,
                          float *c, int64_t M, int64_t N, int64_t K)
{
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        float x = trans_a ? a[k * M + m] : a[m * K + k];
        float y = trans_b ? b[n * K + k] : b[k * N + n];
        acc += x * y;
      }
      c[m * N + n] = acc;
    }
}

/* Probabilities of query i (keys 0..i) into p[0..i]; returns nothing, p normalised. */
static void attn_probs(gboolean sf, int64_t B, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                       const float *q, const float *k, int64_t b, int64_t h, int64_t i, float *p)
{
  const int64_t hk = h / (Hq / Hkv);
  const float scale = 1.0f / sqrtf((float)D);
  float mx = -INFINITY;
  for (int64_t j = 0; j <= i; j++) {
    float s = 0.0f;
    for (int64_t c = 0; c < D; c++)
      s += q[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] * k[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
    p[j] = s * scale;
    if (p[j] > mx)
      mx = p[j];
  }
  float l = 0.0f;
  for (int64_t j = 0; j <= i; j++) {
    p[j] = expf(p[j] - mx);
    l += p[j];
  }
  for (int64_t j = 0; j <= i; j++)
    p[j] = p[j] / l;
}

void sp_kernel_attention_f32(gboolean sf, int64_t B, int64_t S, int64_t Hq, int64_t Hkv,
                             int64_t D, const float *q, const float *k, const float *v, float *out)
{
  float *p = g_new(float, S);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < S; i++) {
        attn_probs(sf, B, S, Hq, Hkv, D, q, k, b, h, i, p);
        for (int64_t c = 0; c < D; c++) {
          float acc = 0.0f;
          for (int64_t j = 0; j <= i; j++)
            acc += p[j] * v[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          out[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] = acc;
        }
      }
    }
  g_free(p);
}

void sp_kernel_attention_bwd_f32(gboolean sf, int64_t B, int64_t S, int64_t Hq, int64_t Hkv,
                                 int64_t D, const float *q, const float *k, const float *v,
                                 const float *dout, float *dq, float *dk, float *dv)
{
  const float scale = 1.0f / sqrtf((float)D);
  float *p = g_new(float, S), *ds = g_new(float, S);
  memset(dk, 0, sizeof(float) * (size_t)(B * S * Hkv * D));
  memset(dv, 0, sizeof(float) * (size_t)(B * S * Hkv * D));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < S; i++) {
        attn_probs(sf, B, S, Hq, Hkv, D, q, k, b, h, i, p);
        float dsum = 0.0f;
        for (int64_t j = 0; j <= i; j++) {
          float dp = 0.0f;
          for (int64_t c = 0; c < D; c++)
            dp += dout[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] *
                  v[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          ds[j] = dp;
          dsum += p[j] * dp;
        }
        for (int64_t j = 0; j <= i; j++)
          ds[j] = p[j] * (ds[j] - dsum);
        for (int64_t c = 0; c < D; c++) {
          float acc = 0.0f;
          for (int64_t j = 0; j <= i; j++)
            acc += ds[j] * k[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          dq[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] = acc * scale;
        }
        for (int64_t j = 0; j <= i; j++)
          for (int64_t c = 0; c < D; c++) {
            dk[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)] +=
                (ds[j] * scale) * q[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)];
            dv[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)] +=
                p[j] * dout[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)];
          }
      }
    }
  g_free(p);
  g_free(ds);
}

void sp_kernel_ring_attn_step_f32(gboolean sf, int64_t B, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                                  const float *q, const float *k, const float *v, const float *state_in,
                                  float *state_out, int mode)
{
  const float scale = 1.0f / sqrtf((float)D);
  const int64_t W = D + 2;
  memcpy(state_out, state_in, sizeof(float) * (size_t)(B * S * Hq * W));
  if (mode == 0)
    return;
  float *sc = g_new(float, S);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < S; i++) {
        float *row = state_out + sp_attn_index(sf, B, S, Hq, 1, b, i, h, 0) * W;
        const int64_t nk = mode == 1 ? i + 1 : S;
        float bm = -INFINITY;
        for (int64_t j = 0; j < nk; j++) {
          float s = 0.0f;
          for (int64_t c = 0; c < D; c++)
            s += q[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] * k[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          sc[j] = s * scale;
          if (sc[j] > bm)
            bm = sc[j];
        }
        const float l0 = row[D + 1], m0 = row[D];
        const float mn = (l0 > 0.0f && m0 > bm) ? m0 : bm;
        const float alpha = l0 > 0.0f ? expf(m0 - mn) : 0.0f;
        float l = l0 * alpha;
        for (int64_t c = 0; c < D; c++)
          row[c] = row[c] * alpha;
        for (int64_t j = 0; j < nk; j++) {
          float p = expf(sc[j] - mn);
          l += p;
          for (int64_t c = 0; c < D; c++)
            row[c] += p * v[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
        }
        row[D] = mn;
        row[D + 1] = l;
      }
    }
  g_free(sc);
}

void sp_kernel_ring_attn_final_f32(uint64_t rows, int64_t D, const float *state, float *out)
{
  for (uint64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < D; c++)
      out[r * (uint64_t)D + (uint64_t)c] = state[r * (uint64_t)(D + 2) + (uint64_t)c] / state[r * (uint64_t)(D + 2) + (uint64_t)D + 1];
}

void sp_kernel_ring_attn_bwd_step_f32(gboolean sf, int64_t B, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                                      const float *q, const float *k, const float *v, const float *dout,
                                      const float *state, const float *dq_in, const float *dk_in,
                                      const float *dv_in, float *dq_out, float *dk_out, float *dv_out, int mode)
{
  const float scale = 1.0f / sqrtf((float)D);
  const int64_t W = D + 2;
  const size_t nq = (size_t)(B * S * Hq * D), nkv = (size_t)(B * S * Hkv * D);
  if (dq_out != dq_in)
    memmove(dq_out, dq_in, sizeof(float) * nq);
  if (dk_out != dk_in)
    memmove(dk_out, dk_in, sizeof(float) * nkv);
  if (dv_out != dv_in)
    memmove(dv_out, dv_in, sizeof(float) * nkv);
  if (mode == 0)
    return;
  float *p = g_new(float, S), *ds = g_new(float, S), *acc = g_new(float, D);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < S; i++) {
        const float *row = state + sp_attn_index(sf, B, S, Hq, 1, b, i, h, 0) * W;
        const float m = row[D], l = row[D + 1];
        const int64_t nk = mode == 1 ? i + 1 : S;
        /* delta = dout . out, with out = o / l as sp_kernel_ring_attn_final_f32 forms it */
        float delta = 0.0f;
        for (int64_t c = 0; c < D; c++)
          delta += dout[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] * (row[c] / row[D + 1]);
        for (int64_t j = 0; j < nk; j++) {
          float s = 0.0f, dp = 0.0f;
          for (int64_t c = 0; c < D; c++)
            s += q[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] * k[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          for (int64_t c = 0; c < D; c++)
            dp += dout[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] * v[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          p[j] = l > 0.0f ? expf(s * scale - m) / l : 0.0f;
          ds[j] = p[j] * (dp - delta);
        }
        for (int64_t c = 0; c < D; c++) {
          float a = 0.0f;
          for (int64_t j = 0; j < nk; j++)
            a += ds[j] * k[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)];
          acc[c] = a;
        }
        for (int64_t c = 0; c < D; c++)
          dq_out[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)] += acc[c] * scale;
        for (int64_t j = 0; j < nk; j++)
          for (int64_t c = 0; c < D; c++) {
            dk_out[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)] +=
                (ds[j] * scale) * q[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)];
            dv_out[sp_attn_index(sf, B, S, Hkv, D, b, j, hk, c)] +=
                p[j] * dout[sp_attn_index(sf, B, S, Hq, D, b, i, h, c)];
          }
      }
    }
  g_free(p);
  g_free(ds);
  g_free(acc);
}
