/* The single-device reference of a mixture-of-experts layer (sp_moe_reference_check):
 * every rank's tokens routed and run through the whole experts (all FFN columns,
 * no communication, no capacity buffers) token by token on the host, then compared
 * with a run's tensors. Sums run in the order the distributed schedule uses where
 * it fixes one, so the comparison is bitwise without expert tensor parallelism. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/kernels.h"
#include "spsim/ops.h"
#include "ops_private.h"

/* The whole layer's data for one MoE group. */
typedef struct {
  int64_t T, H, E, K, F, C, El, Fl;
  int32_t P, etp, ep;
  float *wr;        /* [H, E] */
  float *w1, *w2;   /* [E, H, F], [E, F, H] */
  float *dwr, *dw1, *dw2;
} ref_t;

static float *get(const sp_graph *g, sp_graph_data *d, uint32_t t, int32_t rank)
{
  (void)g;
  return sp_graph_data_get(d, t, rank);
}

static gboolean close_to(float got, float want, double tol)
{
  if (tol == 0)
    return memcmp(&got, &want, sizeof got) == 0;
  return fabs((double)got - (double)want) <= tol * fmax(1.0, fabs((double)want));
}

static gboolean compare(const char *what, int32_t rank, const float *got, const float *want, int64_t n,
                        double tol, GError **err)
{
  for (int64_t i = 0; i < n; i++)
    if (!close_to(got[i], want[i], tol)) {
      g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                  "moe single-device reference: %s differs on rank %d at element %" G_GINT64_FORMAT
                  ": %.9g, expected %.9g", what, rank, i, (double)got[i], (double)want[i]);
      return FALSE;
    }
  return TRUE;
}

/* One token through expert e: pre, act [F], out [H]. */
static void ffn(const ref_t *r, int64_t e, const float *x, float *pre, float *act, float *out)
{
  const float *w1 = r->w1 + e * r->H * r->F, *w2 = r->w2 + e * r->F * r->H;
  for (int64_t f = 0; f < r->F; f++) {
    float a = 0.0f;
    for (int64_t h = 0; h < r->H; h++)
      a += x[h] * w1[h * r->F + f];
    pre[f] = a;
  }
  sp_kernel_relu_f32(pre, r->F, act);
  for (int64_t h = 0; h < r->H; h++) {
    float a = 0.0f;
    for (int64_t f = 0; f < r->F; f++)
      a += act[f] * w2[f * r->H + h];
    out[h] = a;
  }
}

/* Forward (and backward when dy) of one member's tokens; compares y and dx. */
static gboolean one_rank(ref_t *r, const sp_graph *g, sp_graph_data *d, const sp_moe_layer *st, int32_t rank,
                         uint32_t dy_t, uint32_t dx_t, double tol_fwd, double tol_bwd, GError **err)
{
  const int64_t T = r->T, H = r->H, E = r->E, K = r->K, F = r->F;
  const float *x = get(g, d, st->x, rank);
  float *logits = g_new(float, T * E), *scores = g_new(float, T * E), *route = g_new(float, T * K * 3);
  float *counts = g_new(float, E), *y = g_new0(float, T * H), *o = g_new(float, K * H);
  float *pre = g_new(float, K * F), *act = g_new(float, K * F);
  sp_kernel_matmul_f32(x, FALSE, r->wr, FALSE, logits, T, E, H);
  sp_kernel_moe_route_f32(logits, T, E, K, r->C, st->cfg.drop, route, scores, counts);
  gboolean ok = TRUE;
  float *dprob = g_new0(float, T * K), *dx = g_new0(float, T * H), *dxk = g_new(float, K * H);
  float *dact = g_new(float, F), *dpre = g_new(float, F), *gr = g_new(float, H);
  const float *dy = dy_t != SP_NO_TENSOR ? get(NULL, d, dy_t, rank) : NULL;
  for (int64_t t = 0; t < T; t++) {
    const float *xt = x + t * H;
    for (int64_t k = 0; k < K; k++) {
      const float *rt = route + (t * K + k) * 3;
      if (rt[1] >= 0.0f)
        ffn(r, (int64_t)rt[0], xt, pre + k * F, act + k * F, o + k * H);
    }
    for (int64_t h = 0; h < H; h++) {
      float a = 0.0f;
      for (int64_t k = 0; k < K; k++)
        if (route[(t * K + k) * 3 + 1] >= 0.0f)
          a += route[(t * K + k) * 3 + 2] * o[k * H + h];
      y[t * H + h] = a;
    }
    if (!dy)
      continue;
    const float *dyt = dy + t * H;
    for (int64_t k = 0; k < K; k++) {
      const float *rt = route + (t * K + k) * 3;
      if (rt[1] < 0.0f)
        continue;
      const int64_t e = (int64_t)rt[0];
      const float *w1 = r->w1 + e * H * F, *w2 = r->w2 + e * F * H;
      float dp = 0.0f;
      for (int64_t h = 0; h < H; h++) {
        dp += dyt[h] * o[k * H + h];
        gr[h] = rt[2] * dyt[h];
      }
      dprob[t * K + k] = dp;
      for (int64_t f = 0; f < F; f++) {
        float a = 0.0f;
        for (int64_t h = 0; h < H; h++)
          a += gr[h] * w2[f * H + h];
        dact[f] = a;
      }
      sp_kernel_relu_bwd_f32(pre + k * F, dact, F, dpre);
      for (int64_t h = 0; h < H; h++) {
        float a = 0.0f;
        for (int64_t f = 0; f < F; f++)
          a += dpre[f] * w1[h * F + f];
        dxk[k * H + h] = a;
      }
      for (int64_t h = 0; h < H; h++)
        for (int64_t f = 0; f < F; f++) {
          r->dw1[(e * H + h) * F + f] += xt[h] * dpre[f];
          r->dw2[(e * F + f) * H + h] += act[k * F + f] * gr[h];
        }
    }
    for (int64_t h = 0; h < H; h++) {
      float a = 0.0f;
      for (int64_t k = 0; k < K; k++)
        if (route[(t * K + k) * 3 + 1] >= 0.0f)
          a += dxk[k * H + h];
      dx[t * H + h] = a;
    }
  }
  ok = compare("y", rank, get(g, d, st->y, rank), y, T * H, tol_fwd, err);
  if (ok && dy) {
    float *dlog = g_new(float, T * E), *dxr = g_new(float, T * H), *dwr = g_new(float, H * E);
    sp_kernel_moe_route_bwd_f32(scores, route, dprob, T, E, K, dlog);
    sp_kernel_matmul_f32(dlog, FALSE, r->wr, TRUE, dxr, T, H, E);
    for (int64_t i = 0; i < T * H; i++)
      dx[i] = dx[i] + dxr[i];
    sp_kernel_matmul_f32(x, TRUE, dlog, FALSE, dwr, H, E, T);
    for (int64_t i = 0; i < H * E; i++)
      r->dwr[i] += dwr[i];
    ok = compare("dx", rank, get(g, d, dx_t, rank), dx, T * H, tol_fwd, err);
    g_free(dlog);
    g_free(dxr);
    g_free(dwr);
  }
  (void)tol_bwd;
  g_free(logits);
  g_free(scores);
  g_free(route);
  g_free(counts);
  g_free(y);
  g_free(o);
  g_free(pre);
  g_free(act);
  g_free(dprob);
  g_free(dx);
  g_free(dxk);
  g_free(dact);
  g_free(dpre);
  g_free(gr);
  return ok;
}

/* member m's rank of group gi, from its (edp, ep, etp) indices */
static int32_t member(const sp_moe_layer *st, int32_t gi, int32_t dd, int32_t e, int32_t t)
{
  const int32_t P = st->all.group_size;
  return st->all.ranks[gi * P + (dd * st->cfg.ep + e) * st->cfg.etp + t];
}

gboolean sp_moe_reference_check(const sp_graph *g, sp_graph_data *d, const sp_moe_layer *st, uint32_t dy,
                                uint32_t dx, uint32_t dwr, uint32_t dw1, uint32_t dw2, double tol_fwd,
                                double tol_bwd, GError **err)
{
  ref_t r = { .T = st->cfg.tokens, .H = st->cfg.hidden, .E = st->cfg.experts, .K = st->cfg.topk,
              .F = st->cfg.ffn, .C = st->capacity, .P = st->all.group_size, .etp = st->cfg.etp,
              .ep = st->cfg.ep };
  r.El = r.E / r.ep;
  r.Fl = r.F / r.etp;
  const int32_t D = r.P / (r.ep * r.etp);
  gboolean ok = TRUE;
  for (int32_t gi = 0; ok && gi < st->all.n_groups; gi++) {
    r.wr = get(g, d, st->wr, member(st, gi, 0, 0, 0));
    r.w1 = g_new(float, r.E * r.H * r.F);
    r.w2 = g_new(float, r.E * r.F * r.H);
    r.dwr = g_new0(float, r.H * r.E);
    r.dw1 = g_new0(float, r.E * r.H * r.F);
    r.dw2 = g_new0(float, r.E * r.F * r.H);
    /* the whole experts from the shards of expert-data index 0 */
    for (int32_t e = 0; e < r.ep; e++)
      for (int32_t t = 0; t < r.etp; t++) {
        const float *s1 = get(g, d, st->w1, member(st, gi, 0, e, t)), *s2 = get(g, d, st->w2, member(st, gi, 0, e, t));
        for (int64_t l = 0; l < r.El; l++)
          for (int64_t a = 0; a < r.H; a++)
            for (int64_t f = 0; f < r.Fl; f++) {
              const int64_t ex = e * r.El + l;
              r.w1[(ex * r.H + a) * r.F + t * r.Fl + f] = s1[(l * r.H + a) * r.Fl + f];
              r.w2[(ex * r.F + t * r.Fl + f) * r.H + a] = s2[(l * r.Fl + f) * r.H + a];
            }
      }
    for (int32_t m = 0; ok && m < r.P; m++)
      ok = one_rank(&r, g, d, st, st->all.ranks[gi * r.P + m], dy, dx, tol_fwd, tol_bwd, err);
    for (int32_t m = 0; ok && dy != SP_NO_TENSOR && m < r.P; m++) {
      const int32_t rank = st->all.ranks[gi * r.P + m], t = m % r.etp, e = (m / r.etp) % r.ep;
      ok = compare("dwr", rank, get(g, d, dwr, rank), r.dwr, r.H * r.E, tol_bwd, err);
      const float *g1 = get(g, d, dw1, rank), *g2 = get(g, d, dw2, rank);
      for (int64_t l = 0; ok && l < r.El; l++)
        for (int64_t a = 0; ok && a < r.H; a++)
          for (int64_t f = 0; ok && f < r.Fl; f++) {
            const int64_t ex = e * r.El + l;
            ok = compare("dw1", rank, g1 + (l * r.H + a) * r.Fl + f, r.dw1 + (ex * r.H + a) * r.F + t * r.Fl + f, 1,
                         tol_bwd, err) &&
                 compare("dw2", rank, g2 + (l * r.Fl + f) * r.H + a, r.dw2 + (ex * r.F + t * r.Fl + f) * r.H + a, 1,
                         tol_bwd, err);
          }
    }
    (void)D;
    g_free(r.w1);
    g_free(r.w2);
    g_free(r.dwr);
    g_free(r.dw1);
    g_free(r.dw2);
  }
  return ok;
}
