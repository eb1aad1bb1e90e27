/* --sensitivity (spsim/whatif.h): the ranking re-done under variations of the inputs
 * spsim cannot know exactly, to say how far the winner's step time moves and whether
 * another plan would win. The closed form is re-ranked (cheap); only the compute
 * slowdown beside collectives, which the closed form does not model, re-runs the
 * step graph of the shown rows. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/whatif.h"
#include "whatif_private.h"

/* Rows re-ranked: those that fit, simulated as the winner is (the ranking never sets a
 * closed form alone against a simulated time), with a closed form within this factor of the
 * winner's. A variation scales a layout's time by at most 1.25 either way (bandwidth
 * -20 %: comm x 1/0.8; GEMM -10 %: compute x 1/0.9), so a layout slower than
 * 1.25 x 1.25 = 1.5625 times the winner cannot overtake it. */
#define SENS_MARGIN 1.5625

/* The variations: GEMM efficiency +-10 %, NIC and NVLink bandwidth +-20 %, the compute
 * slowdown beside collectives +-50 % (the ranges are assumptions: the GPU's GEMM
 * efficiency varies by that much across shapes and libraries, achieved bus bandwidth
 * by that much across NCCL versions and message sizes; the slowdown's one measurement,
 * arXiv:2507.03114, spans kernels by about that factor). */
typedef enum { V_GEMM, V_NIC, V_NVLINK, V_SLOWDOWN } var_kind;
static const struct {
  var_kind kind;
  double factor;
  const char *name;
} vars[] = {
  { V_GEMM, 0.9, "GEMM efficiency -10%" },   { V_GEMM, 1.1, "GEMM efficiency +10%" },
  { V_NIC, 0.8, "NIC bandwidth -20%" },      { V_NIC, 1.2, "NIC bandwidth +20%" },
  { V_NVLINK, 0.8, "NVLink bandwidth -20%" }, { V_NVLINK, 1.2, "NVLink bandwidth +20%" },
  { V_SLOWDOWN, 0.5, "compute slowdown beside collectives -50%" },
  { V_SLOWDOWN, 1.5, "compute slowdown beside collectives +50%" },
};

/* The closed form of @p l on @p c0 with @p hw, priced with the analytic model @p net
 * (NULL: with @p c0's pricer, the engine's when it runs). */
static gboolean closed_form(const sp_step_ctx *c0, const sp_analytic_net *net, const sp_step_hw *hw, const sp_layout *l,
                            double *t, GError **err)
{
  sp_step_ctx c = *c0;
  c.hw = *hw;
  if (net != NULL) {
    c.price = sp_price_analytic;
    c.price_user = (void *)net;
  }
  sp_step_result res;
  if (!sp_step_eval(&c, l, &res, err)) return FALSE;
  *t = res.closed_form;
  return TRUE;
}

char *sp_whatif_sensitivity_text(const sp_whatif_result *r, GError **err)
{
  const sp_whatif_row *w = sp_whatif_winner(r);
  if (w == NULL || r->outcome != SP_WHATIF_OK) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--sensitivity needs a layout that fits");
    return NULL;
  }
  /* the rows that could overtake the winner, with their closed form under the nominal inputs */
  g_autoptr(GArray) idx = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(GArray) base = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint i = 0; i < r->rows->len; i++) {
    const sp_whatif_row *q = &g_array_index(r->rows, sp_whatif_row, i);
    /* as the ranking: a closed form alone (about 10 % optimistic) is not set against simulated times */
    if (!q->r.fits || q->r.simulated != w->r.simulated || q->r.closed_form > SENS_MARGIN * w->r.closed_form) continue;
    double t;
    if (!closed_form(&r->ctx, &r->net, &r->ctx.hw, &q->r.layout, &t, err)) return NULL;
    g_array_append_val(idx, i);
    g_array_append_val(base, t);
  }
  double nominal = r->slowdown >= 0 ? r->slowdown : r->eng.comm_slowdown;
  GString *s = g_string_new("");
  g_string_append_printf(s, "Sensitivity of %s (%.3f s): the closed form re-ranks the %u fitting%s layouts within %.2fx of its "
                            "closed form, each keeping its step time scaled by its closed form's change (bandwidth: "
                            "priced with the analytic model); the compute slowdown re-runs the step graph of the %u "
                            "shown layouts.\n",
                         w->label, w->r.step_time, idx->len, w->r.simulated ? " simulated" : "", SENS_MARGIN, sp_whatif_shown(r));
  double lo = w->r.step_time, hi = w->r.step_time;
  guint changes = 0;
  for (guint v = 0; v < G_N_ELEMENTS(vars); v++) {
    double tw = w->r.step_time;
    const sp_whatif_row *best = w;
    double tbest = tw;
    if (vars[v].kind == V_SLOWDOWN) {
      if (r->eng.simulate == NULL) continue; /* no step graph: the closed form has no slowdown */
      for (guint k = 0; k < sp_whatif_shown(r); k++) {
        const sp_whatif_row *q = &g_array_index(r->rows, sp_whatif_row, g_array_index(r->shown, guint, k));
        if (!q->r.simulated) continue;
        sp_step_result res = q->r;
        if (!r->eng.simulate(r->eng.user, &r->ctx, &q->r.layout, r->engine, nominal * vars[v].factor, &res, err)) {
          g_string_free(s, TRUE);
          return NULL;
        }
        if (q == w) tw = tbest = res.step_time; /* the winner comes first: ties keep it */
        else if (sp_whatif_time_key(res.step_time) < sp_whatif_time_key(tbest)) { best = q; tbest = res.step_time; }
      }
    } else {
      sp_analytic_net net = r->net;
      sp_step_hw hw = r->ctx.hw;
      if (vars[v].kind == V_GEMM) hw.gpu.gemm_eff = MIN(1.0, hw.gpu.gemm_eff * vars[v].factor);
      if (vars[v].kind == V_NIC) net.nic_bw *= vars[v].factor;
      if (vars[v].kind == V_NVLINK) net.intra_busbw *= vars[v].factor;
      for (guint k = 0; k < idx->len; k++) {
        const sp_whatif_row *q = &g_array_index(r->rows, sp_whatif_row, g_array_index(idx, guint, k));
        double t;
        /* GEMM: the run's own pricer, against the row's closed form; bandwidth: the analytic
         * model (the engine's platform is fixed), against its nominal analytic closed form */
        gboolean gemm = vars[v].kind == V_GEMM;
        if (!closed_form(&r->ctx, gemm ? NULL : &net, &hw, &q->r.layout, &t, err)) {
          g_string_free(s, TRUE);
          return NULL;
        }
        double est = q->r.step_time * t / (gemm ? q->r.closed_form : g_array_index(base, double, k));
        if (q == w) tw = tbest = est; /* rows[0]: first */
        else if (sp_whatif_time_key(est) < sp_whatif_time_key(tbest)) { best = q; tbest = est; }
      }
    }
    lo = MIN(lo, tw);
    hi = MAX(hi, tw);
    gboolean other = best != w && best->family != w->family;
    changes += other;
    g_string_append_printf(s, "  %-42s winner %8.3f s (%+5.1f%%)", vars[v].name, tw, 100.0 * (tw / w->r.step_time - 1.0));
    if (other) g_string_append_printf(s, "; best: %s, %.3f s\n", best->label, tbest);
    else g_string_append(s, "; still the best\n");
  }
  g_string_append_printf(s, "Winner's step time %.3f-%.3f s over these variations; ", lo, hi);
  if (changes == 0) g_string_append(s, "it stays the best under every one.\n");
  else g_string_append_printf(s, "another plan wins under %u of them.\n", changes);
  return g_string_free(s, FALSE);
}
