/* The single-device reference of a mixture-of-experts layer (sp_moe_reference_check):
 * every rank's tokens routed and run through the whole experts (all FFN columns,
 * no communication, no capacity buffers) token by token on the host, then compared
 * with a run's tensors. Sums run in the order the distributed schedule uses where
 * it fixes one, so the comparison is bitwise without expert tensor parallelism.
 * Where the order differs (an expert's FFN columns summed in etp parts, weight
 * gradients summed over tokens of several ranks), the reference keeps, per element,
 * the sum of the absolute values of the terms (its magnitude m) and accepts
 * |got - want| <= tol max(1, m): reordering a float sum moves it by a few units of
 * rounding of m, however much the terms cancel. */
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
  float *wr;               /* [H, E] */
  float *w1, *w2;          /* [E, H, F], [E, F, H] */
  double *dwr, *dw1, *dw2; /* the gradients summed in double */
  double *mwr, *mw1, *mw2; /* and their magnitudes */
} ref_t;

static float *get(sp_graph_data *d, uint32_t t, int32_t rank)
{
  return sp_graph_data_get(d, t, rank);
}

/* @p got against @p want (n elements): bitwise when @p tol is 0, else within tol
 * max(1, magnitude) (magnitude @p mag, or |want| when NULL). */
static gboolean compare(const char *what, int32_t rank, const float *got, const double *want, const double *mag,
                        int64_t n, double tol, GError **err)
{
  for (int64_t i = 0; i < n; i++) {
    const float w = (float)want[i];
    gboolean ok = tol == 0 ? memcmp(&got[i], &w, sizeof w) == 0
                           : fabs((double)got[i] - want[i]) <= tol * fmax(1.0, mag ? mag[i] : fabs(want[i]));
    if (!ok) {
      g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                  "moe single-device reference: %s differs on rank %d at element %" G_GINT64_FORMAT
                  ": %.9g, expected %.9g", what, rank, i, (double)got[i], want[i]);
      return FALSE;
    }
  }
  return TRUE;
}

/* One token through expert e: pre, act [F], out [H] and out's magnitude. */
static void ffn(const ref_t *r, int64_t e, const float *x, float *pre, float *act, float *out, double *mout)
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
    double m = 0;
    for (int64_t f = 0; f < r->F; f++) {
      a += act[f] * w2[f * r->H + h];
      m += fabs((double)act[f] * w2[f * r->H + h]);
    }
    out[h] = a;
    mout[h] = m;
  }
}

/* Per-token scratch of one_rank. */
typedef struct {
  float *o, *pre, *act, *dxk, *dact, *dpre, *gr;
  double *mo, *mdxk;
} tok_t;

/* Backward of token t's kept pairs: dprob, the expert share of dx (and magnitudes),
 * the expert weight gradients. */
static void token_bwd(ref_t *r, tok_t *s, const float *route, const float *xt, const float *dyt, float *dprob,
                      double *mdprob)
{
  const int64_t H = r->H, F = r->F;
  for (int64_t k = 0; k < r->K; k++) {
    const float *rt = route + k * 3;
    if (rt[1] < 0.0f)
      continue;
    const int64_t e = (int64_t)rt[0];
    const float *w1 = r->w1 + e * H * F, *w2 = r->w2 + e * F * H;
    float dp = 0.0f;
    double mdp = 0;
    for (int64_t h = 0; h < H; h++) {
      dp += dyt[h] * s->o[k * H + h];
      mdp += fabs((double)dyt[h]) * s->mo[k * H + h];
      s->gr[h] = rt[2] * dyt[h];
    }
    dprob[k] = dp;
    mdprob[k] = mdp;
    for (int64_t f = 0; f < F; f++) {
      float a = 0.0f;
      for (int64_t h = 0; h < H; h++)
        a += s->gr[h] * w2[f * H + h];
      s->dact[f] = a;
    }
    sp_kernel_relu_bwd_f32(s->pre + k * F, s->dact, F, s->dpre);
    for (int64_t h = 0; h < H; h++) {
      float a = 0.0f;
      double m = 0;
      for (int64_t f = 0; f < F; f++) {
        a += s->dpre[f] * w1[h * F + f];
        m += fabs((double)s->dpre[f] * w1[h * F + f]);
      }
      s->dxk[k * H + h] = a;
      s->mdxk[k * H + h] = m;
    }
    for (int64_t h = 0; h < H; h++)
      for (int64_t f = 0; f < F; f++) {
        const double a = (double)xt[h] * s->dpre[f], b = (double)s->act[k * F + f] * s->gr[h];
        r->dw1[(e * H + h) * F + f] += a;
        r->mw1[(e * H + h) * F + f] += fabs(a);
        r->dw2[(e * F + f) * H + h] += b;
        r->mw2[(e * F + f) * H + h] += fabs(b);
      }
  }
}

/* Forward (and backward when dy) of one member's tokens; compares y and dx. */
static gboolean one_rank(ref_t *r, sp_graph_data *d, const sp_moe_layer *st, int32_t rank, uint32_t dy_t,
                         uint32_t dx_t, double tol, GError **err)
{
  const int64_t T = r->T, H = r->H, E = r->E, K = r->K, F = r->F;
  const float *x = get(d, st->x, rank);
  const float *dy = dy_t != SP_NO_TENSOR ? get(d, dy_t, rank) : NULL;
  float *logits = g_new(float, T * E), *scores = g_new(float, T * E), *route = g_new(float, T * K * 3);
  float *counts = g_new(float, E), *dprob = g_new0(float, T * K), *dx = g_new0(float, T * H);
  double *y = g_new0(double, T * H), *my = g_new0(double, T * H), *mdprob = g_new0(double, T * K);
  double *dxw = g_new0(double, T * H), *mdx = g_new0(double, T * H);
  tok_t s = { g_new(float, K * H), g_new(float, K * F), g_new(float, K * F), g_new(float, K * H), g_new(float, F),
              g_new(float, F), g_new(float, H), g_new(double, K * H), g_new(double, K * H) };
  sp_kernel_matmul_f32(x, FALSE, r->wr, FALSE, logits, T, E, H);
  sp_kernel_moe_route_f32(logits, T, E, K, r->C, st->cfg.drop, route, scores, counts);
  for (int64_t t = 0; t < T; t++) {
    const float *xt = x + t * H, *rt = route + t * K * 3;
    for (int64_t k = 0; k < K; k++)
      if (rt[k * 3 + 1] >= 0.0f)
        ffn(r, (int64_t)rt[k * 3], xt, s.pre + k * F, s.act + k * F, s.o + k * H, s.mo + k * H);
    for (int64_t h = 0; h < H; h++) {
      float a = 0.0f;
      for (int64_t k = 0; k < K; k++)
        if (rt[k * 3 + 1] >= 0.0f) {
          a += rt[k * 3 + 2] * s.o[k * H + h];
          my[t * H + h] += fabs((double)rt[k * 3 + 2]) * s.mo[k * H + h];
        }
      y[t * H + h] = a;
    }
    if (!dy)
      continue;
    token_bwd(r, &s, rt, xt, dy + t * H, dprob + t * K, mdprob + t * K);
    for (int64_t h = 0; h < H; h++) {
      float a = 0.0f;
      for (int64_t k = 0; k < K; k++)
        if (rt[k * 3 + 1] >= 0.0f) {
          a += s.dxk[k * H + h];
          mdx[t * H + h] += s.mdxk[k * H + h];
        }
      dx[t * H + h] = a;
    }
  }
  gboolean ok = compare("y", rank, get(d, st->y, rank), y, my, T * H, tol, err);
  if (ok && dy) {
    float *dlog = g_new(float, T * E), *dxr = g_new(float, T * H);
    sp_kernel_moe_route_bwd_f32(scores, route, dprob, T, E, K, dlog);
    sp_kernel_matmul_f32(dlog, FALSE, r->wr, TRUE, dxr, T, H, E);
    for (int64_t t = 0; t < T; t++) {
      /* the router's share: dlogits = s (g - g . s) and its magnitude from dprob's */
      double mg = 0;
      for (int64_t k = 0; k < K; k++)
        mg += mdprob[t * K + k];
      for (int64_t e = 0; e < E; e++) {
        const double se = scores[t * E + e], me = se * 2.0 * mg + fabs((double)dlog[t * E + e]);
        for (int64_t h = 0; h < H; h++) {
          const double a = me * fabs((double)r->wr[h * E + e]);
          mdx[t * H + h] += a;
          r->dwr[h * E + e] += (double)x[t * H + h] * dlog[t * E + e];
          r->mwr[h * E + e] += fabs((double)x[t * H + h]) * me;
        }
      }
    }
    for (int64_t i = 0; i < T * H; i++)
      dxw[i] = dx[i] + dxr[i];
    ok = compare("dx", rank, get(d, dx_t, rank), dxw, mdx, T * H, tol, err);
    g_free(dlog);
    g_free(dxr);
  }
  g_free(logits);
  g_free(scores);
  g_free(route);
  g_free(counts);
  g_free(dprob);
  g_free(dx);
  g_free(y);
  g_free(my);
  g_free(mdprob);
  g_free(dxw);
  g_free(mdx);
  g_free(s.o);
  g_free(s.pre);
  g_free(s.act);
  g_free(s.dxk);
  g_free(s.dact);
  g_free(s.dpre);
  g_free(s.gr);
  g_free(s.mo);
  g_free(s.mdxk);
  return ok;
}

/* the global rank of the member with indices (expert-data dd, ep e, etp t) of group gi */
static int32_t member(const sp_moe_layer *st, int32_t gi, int32_t dd, int32_t e, int32_t t)
{
  const int32_t P = st->all.group_size;
  return st->all.ranks[gi * P + (dd * st->cfg.ep + e) * st->cfg.etp + t];
}

/* Compare one rank's expert shards of dw1 and dw2 with the whole gradients. */
static gboolean check_dw(const ref_t *r, sp_graph_data *d, int32_t rank, int32_t e, int32_t t, uint32_t dw1,
                         uint32_t dw2, double tol, GError **err)
{
  const float *g1 = get(d, dw1, rank), *g2 = get(d, dw2, rank);
  gboolean ok = TRUE;
  for (int64_t l = 0; ok && l < r->El; l++)
    for (int64_t a = 0; ok && a < r->H; a++)
      for (int64_t f = 0; ok && f < r->Fl; f++) {
        const int64_t ex = e * r->El + l, i1 = (ex * r->H + a) * r->F + t * r->Fl + f;
        const int64_t i2 = (ex * r->F + t * r->Fl + f) * r->H + a;
        ok = compare("dw1", rank, g1 + (l * r->H + a) * r->Fl + f, r->dw1 + i1, r->mw1 + i1, 1, tol, err) &&
             compare("dw2", rank, g2 + (l * r->Fl + f) * r->H + a, r->dw2 + i2, r->mw2 + i2, 1, tol, err);
      }
  return ok;
}

gboolean sp_moe_reference_check(const sp_graph *g, sp_graph_data *d, const sp_moe_layer *st, uint32_t dy,
                                uint32_t dx, uint32_t dwr, uint32_t dw1, uint32_t dw2, double tol_fwd,
                                double tol_bwd, GError **err)
{
  (void)g;
  ref_t r = { .T = st->cfg.tokens, .H = st->cfg.hidden, .E = st->cfg.experts, .K = st->cfg.topk,
              .F = st->cfg.ffn, .C = st->capacity, .P = st->all.group_size, .etp = st->cfg.etp,
              .ep = st->cfg.ep };
  r.El = r.E / r.ep;
  r.Fl = r.F / r.etp;
  const int64_t nw = r.E * r.H * r.F;
  gboolean ok = TRUE;
  for (int32_t gi = 0; ok && gi < st->all.n_groups; gi++) {
    r.wr = get(d, st->wr, member(st, gi, 0, 0, 0));
    r.w1 = g_new(float, nw);
    r.w2 = g_new(float, nw);
    r.dwr = g_new0(double, r.H * r.E);
    r.mwr = g_new0(double, r.H * r.E);
    r.dw1 = g_new0(double, nw);
    r.mw1 = g_new0(double, nw);
    r.dw2 = g_new0(double, nw);
    r.mw2 = g_new0(double, nw);
    /* the whole experts from the shards of expert-data index 0 */
    for (int32_t e = 0; e < r.ep; e++)
      for (int32_t t = 0; t < r.etp; t++) {
        const float *s1 = get(d, st->w1, member(st, gi, 0, e, t)), *s2 = get(d, st->w2, member(st, gi, 0, e, t));
        for (int64_t l = 0; l < r.El; l++)
          for (int64_t a = 0; a < r.H; a++)
            for (int64_t f = 0; f < r.Fl; f++) {
              const int64_t ex = e * r.El + l;
              r.w1[(ex * r.H + a) * r.F + t * r.Fl + f] = s1[(l * r.H + a) * r.Fl + f];
              r.w2[(ex * r.F + t * r.Fl + f) * r.H + a] = s2[(l * r.Fl + f) * r.H + a];
            }
      }
    for (int32_t m = 0; ok && m < r.P; m++)
      ok = one_rank(&r, d, st, st->all.ranks[gi * r.P + m], dy, dx, tol_fwd, err);
    for (int32_t m = 0; ok && dy != SP_NO_TENSOR && m < r.P; m++) {
      const int32_t rank = st->all.ranks[gi * r.P + m], t = m % r.etp, e = (m / r.etp) % r.ep;
      ok = compare("dwr", rank, get(d, dwr, rank), r.dwr, r.mwr, r.H * r.E, tol_bwd, err) &&
           check_dw(&r, d, rank, e, t, dw1, dw2, tol_bwd, err);
    }
    g_free(r.w1);
    g_free(r.w2);
    g_free(r.dwr);
    g_free(r.mwr);
    g_free(r.dw1);
    g_free(r.mw1);
    g_free(r.dw2);
    g_free(r.mw2);
  }
  return ok;
}
