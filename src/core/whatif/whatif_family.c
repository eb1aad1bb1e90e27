/* Families of layouts (spsim/whatif.h): layouts that differ only in the sharding of
 * the data-parallel group (wp, zero) and agree in step time within 1 % are one plan,
 * shown once; the rows the table shows; the ranking's step-time key. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/whatif.h"
#include "whatif_private.h"

double sp_whatif_time_key(double t)
{
  if (!(t > 0) || !isfinite(t)) return t;
  double e = pow(10.0, floor(log10(t)) - 4.0);
  return (double)llround(t / e) * e;
}

/* What a family shares; rows with equal keys may join one family. */
static char *family_key(const sp_step_result *r)
{
  const sp_layout *l = &r->layout;
  return g_strdup_printf("%d%c%c %d %d %d %d %d %d %d/%u %d %d%d", l->tp, l->tp_sp ? 's' : '-', l->tp_overlap ? 'o' : '-', l->sp, l->cp, l->pp,
                         l->vpp > 1 ? l->vpp : 1, l->pp_first, l->pp_last, (int)l->ckpt, (unsigned)l->rmods, l->mb, r->fits,
                         r->simulated);
}

/* The label of @p l with @p wp and @p zero in place of its degrees when they vary in
 * its family ("X", or the values: "16/256"; NULL: its own), in sp_layout_label's order
 * (tp sp cp wp pp dp z ckpt mb). */
static char *family_label(const sp_layout *l, const char *wp, const char *zero)
{
  sp_layout base = *l;
  base.wp = 1;
  base.zero = 0;
  g_autofree char *plain = sp_layout_label(&base);
  g_auto(GStrv) tok = g_strsplit(plain, " ", -1);
  GString *s = g_string_new("");
  for (guint i = 0; tok[i] != NULL; i++) {
    /* the degrees: "dp32", "pp4v5" (not "dpsync", "dpfp32") */
    gboolean dp = g_str_has_prefix(tok[i], "dp") && g_ascii_isdigit(tok[i][2]);
    gboolean pp = g_str_has_prefix(tok[i], "pp") && g_ascii_isdigit(tok[i][2]);
    /* wp sits just before pp (or dp when there is no pipeline) */
    if ((pp || (dp && l->pp <= 1)) && (wp || l->wp > 1)) {
      if (wp) g_string_append_printf(s, "wp%s ", wp);
      else g_string_append_printf(s, "wp%d ", l->wp);
    }
    g_string_append(s, tok[i]);
    if (dp && (zero || l->zero > 0)) {
      if (zero) g_string_append_printf(s, " z%s", zero);
      else g_string_append_printf(s, " z%d", l->zero);
    }
    if (tok[i + 1] != NULL) g_string_append_c(s, ' ');
  }
  return g_string_free(s, FALSE);
}

static gint cmp_int(gconstpointer a, gconstpointer b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return x < y ? -1 : x > y;
}

/* The distinct values of @p v joined by "/" ("16/256"), ascending. */
static char *values_text(GArray *v)
{
  g_array_sort(v, cmp_int);
  GString *s = g_string_new("");
  for (guint i = 0; i < v->len; i++) {
    int32_t x = g_array_index(v, int32_t, i);
    if (i > 0 && x == g_array_index(v, int32_t, i - 1)) continue;
    g_string_append_printf(s, "%s%d", s->len ? "/" : "", x);
  }
  return g_string_free(s, FALSE);
}

static void family_clear(gpointer p)
{
  g_free(((sp_whatif_family *)p)->label);
}

/* The order of --all: step time (to 5 significant digits), then fitting first, less
 * memory, and the ranking. */
static gint cmp_time(gconstpointer a, gconstpointer b, gpointer user)
{
  const GArray *rows = user;
  guint ia = *(const guint *)a, ib = *(const guint *)b;
  const sp_step_result *x = &g_array_index(rows, sp_whatif_row, ia).r;
  const sp_step_result *y = &g_array_index(rows, sp_whatif_row, ib).r;
  double tx = sp_whatif_time_key(x->step_time), ty = sp_whatif_time_key(y->step_time);
  if (tx != ty) return tx < ty ? -1 : 1;
  if (x->fits != y->fits) return x->fits ? -1 : 1;
  if (x->mem.total != y->mem.total) return x->mem.total < y->mem.total ? -1 : 1;
  return ia < ib ? -1 : ia > ib;
}

void sp_whatif_group(sp_whatif_result *r)
{
  GArray *rows = r->rows;
  r->families = g_array_new(FALSE, FALSE, sizeof(sp_whatif_family));
  g_array_set_clear_func(r->families, family_clear);
  r->shown = g_array_new(FALSE, FALSE, sizeof(guint));
  /* the latest family of each key: rows come fastest first within a (fits,
   * simulated) class, so a row joins it or, slower than the tolerance, starts one */
  g_autoptr(GHashTable) open = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GByteArray) repeat = g_byte_array_new(); /* per family: a family of its label came before */
  /* labels do not show fits or simulated: families that differ only there read alike */
  g_autoptr(GHashTable) labels = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < rows->len; i++) {
    sp_whatif_row *rw = &g_array_index(rows, sp_whatif_row, i);
    char *key = family_key(&rw->r);
    gpointer v;
    if (g_hash_table_lookup_extended(open, key, NULL, &v)) {
      sp_whatif_family *f = &g_array_index(r->families, sp_whatif_family, GPOINTER_TO_UINT(v));
      double best = g_array_index(rows, sp_whatif_row, f->first).r.step_time;
      if (r->outcome != SP_WHATIF_NONE_FITS || r->all) /* rows ordered by time */
        if (rw->r.step_time <= best * (1.0 + SP_WHATIF_FAMILY_TOL)) {
          rw->family = GPOINTER_TO_UINT(v);
          f->n++;
          f->t_max = MAX(f->t_max, rw->r.step_time);
          g_free(key);
          continue;
        }
    }
    sp_whatif_family f = { .first = i, .n = 1, .t_max = rw->r.step_time };
    rw->family = r->families->len;
    g_array_append_val(r->families, f);
    char *lkey = g_strndup(key, strlen(key) - 2); /* without fits and simulated */
    guint8 again = g_hash_table_contains(labels, lkey);
    g_byte_array_append(repeat, &again, 1);
    g_hash_table_add(labels, lkey);
    g_hash_table_replace(open, key, GUINT_TO_POINTER(rw->family));
  }
  /* what varies in each family: "X", or its values when an earlier family has the
   * same key (the same label with X would read as a duplicate) */
  guint nf = r->families->len;
  g_autofree guint8 *wpv = g_new0(guint8, nf), *zv = g_new0(guint8, nf);
  g_autofree GArray **wps = g_new0(GArray *, nf), **zs = g_new0(GArray *, nf);
  for (guint i = 0; i < rows->len; i++) {
    const sp_whatif_row *rw = &g_array_index(rows, sp_whatif_row, i);
    guint k = rw->family;
    const sp_layout *b = &g_array_index(rows, sp_whatif_row, g_array_index(r->families, sp_whatif_family, k).first).r.layout;
    wpv[k] |= rw->r.layout.wp != b->wp;
    zv[k] |= rw->r.layout.zero != b->zero;
    if (repeat->data[k]) {
      if (wps[k] == NULL) { wps[k] = g_array_new(FALSE, FALSE, sizeof(int32_t)); zs[k] = g_array_new(FALSE, FALSE, sizeof(int32_t)); }
      g_array_append_val(wps[k], rw->r.layout.wp);
      g_array_append_val(zs[k], rw->r.layout.zero);
    }
  }
  for (guint k = 0; k < nf; k++) {
    sp_whatif_family *f = &g_array_index(r->families, sp_whatif_family, k);
    g_autofree char *wp = !wpv[k] ? NULL : wps[k] ? values_text(wps[k]) : g_strdup("X");
    g_autofree char *zero = !zv[k] ? NULL : zs[k] ? values_text(zs[k]) : g_strdup("X");
    f->label = family_label(&g_array_index(rows, sp_whatif_row, f->first).r.layout, wp, zero);
    if (wps[k] != NULL) { g_array_free(wps[k], TRUE); g_array_free(zs[k], TRUE); }
  }
  /* the rows shown */
  if (r->all) {
    for (guint i = 0; i < rows->len; i++) g_array_append_val(r->shown, i);
    g_qsort_with_data(r->shown->data, (gint)r->shown->len, sizeof(guint), cmp_time, rows);
  } else if (r->outcome == SP_WHATIF_OK) {
    for (guint k = 0; k < nf && r->shown->len < (guint)r->top; k++) {
      const sp_whatif_family *f = &g_array_index(r->families, sp_whatif_family, k);
      if (g_array_index(rows, sp_whatif_row, f->first).r.fits) g_array_append_val(r->shown, f->first);
    }
  } else {
    guint n = r->outcome == SP_WHATIF_NONE_FITS ? MIN((guint)r->top, rows->len) : MIN(1u, rows->len);
    for (guint i = 0; i < n; i++) g_array_append_val(r->shown, i);
  }
}

const sp_whatif_row *sp_whatif_runner_up(const sp_whatif_result *r)
{
  if (r->families == NULL || r->families->len < 2) return NULL;
  const sp_whatif_family *f = &g_array_index(r->families, sp_whatif_family, 1);
  const sp_whatif_row *q = &g_array_index(r->rows, sp_whatif_row, f->first);
  return q->r.fits ? q : NULL;
}
