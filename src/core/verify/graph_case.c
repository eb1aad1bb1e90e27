/* Whole-world verification cases (sp_graph_case, spsim/ops.h): a graph built on every
 * rank with its global reference and lowered programs, run by any engine through the
 * compute hook, then compared with the reference as a whole or rank by rank. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "graph_case.h"
#include "graph_private.h"

struct sp_graph_case {
  sp_graph *g;
  outs_t outs;
  sp_graph_data *ref, *run;
  int32_t world;
  sp_program **progs;
  void ***bufs;
  guint *nbufs;
};

sp_graph_case *sp_vc_case_new(int32_t world, case_build_fn build, const void *ud, GError **err)
{
  sp_graph_case *c = g_new0(sp_graph_case, 1);
  c->world = world;
  c->g = sp_graph_new(world);
  gboolean ok = build(c->g, ud, &c->outs, err);
  if (ok && c->outs.n == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: the case has no output to compare");
    ok = FALSE;
  }
  if (ok) {
    c->ref = sp_graph_data_new(c->g);
    sp_graph_data_fill_inputs(c->ref, CASE_INPUT_SEED);
    c->run = sp_graph_data_new(c->g);
    sp_graph_data_copy(c->run, c->ref);
    ok = sp_graph_reference(c->g, c->ref, err) && outs_whole(&c->outs, c->g, c->ref, err);
  }
  if (ok) {
    c->progs = g_new0(sp_program *, world);
    c->bufs = g_new0(void **, world);
    c->nbufs = g_new0(guint, world);
    const guint ns = sp_graph_n_storage(c->g);
    for (int32_t r = 0; ok && r < world; r++) {
      c->progs[r] = sp_graph_lower(c->g, r, err);
      if (!c->progs[r]) {
        ok = FALSE;
        break;
      }
      guint nb = c->progs[r]->bufs->len;
      c->nbufs[r] = nb;
      c->bufs[r] = g_new0(void *, nb ? nb : 1);
      for (guint b = 0; b < nb; b++)
        c->bufs[r][b] = b < ns ? c->run->buf[r][b]
                               : g_malloc0(MAX(1, g_array_index(c->progs[r]->bufs, sp_buffer, b).bytes));
    }
  }
  if (!ok) {
    sp_graph_case_free(c);
    return NULL;
  }
  return c;
}

gboolean sp_graph_case_corrupt(sp_graph_case *c, int32_t rank)
{
  if (!c || rank < 0 || rank >= c->world)
    return FALSE;
  for (int i = 0; i < c->outs.n; i++) {
    uint8_t *p = sp_graph_data_get(c->run, c->outs.t[i], rank);
    const sp_tensor *t = sp_graph_tensor(c->g, c->outs.t[i]);
    if (p && sp_tensor_bytes(t) > 0) {
      /* the most significant byte of element 0 (little endian): an exponent bit of a
       * float, so the change exceeds any tolerance */
      p[sp_dtype_size(t->dtype) - 1] ^= 0x40;
      return TRUE;
    }
  }
  return FALSE;
}

int32_t sp_graph_case_world(const sp_graph_case *c) { return c->world; }
sp_program *const *sp_graph_case_progs(const sp_graph_case *c) { return c->progs; }
void **const *sp_graph_case_bufs(const sp_graph_case *c) { return (void **const *)c->bufs; }

uint64_t sp_graph_case_bytes(const sp_graph_case *c)
{
  uint64_t b = 0;
  for (int i = 0; i < c->outs.n; i++)
    b += sp_tensor_bytes(sp_graph_tensor(c->g, c->outs.t[i]));
  return b;
}

gboolean sp_graph_case_compute(void *cv, int32_t rank, const sp_step *s, void *const *bufs, GError **err)
{
  sp_graph_case *c = cv;
  const sp_node *n = sp_graph_node(c->g, s->op);
  if (!n || !sp_node_is_kernel(n))
    return TRUE;
  return sp_graph_kernel_host(c->g, s->op, rank, bufs, err);
}

gboolean sp_graph_case_check(void *cv, int32_t *bad_rank, uint64_t *bad_off, GError **err)
{
  sp_graph_case *c = cv;
  for (int i = 0; i < c->outs.n; i++) {
    GError *e = NULL;
    if (sp_graph_data_compare(c->g, c->run, c->ref, c->outs.t[i], c->outs.tol[i], &e))
      continue;
    /* locate the first differing byte for the report */
    /* locate the first element out of tolerance (bitwise when the tolerance is 0) */
    const sp_tensor *t = sp_graph_tensor(c->g, c->outs.t[i]);
    const uint64_t nb = sp_tensor_bytes(t);
    const double tol = c->outs.tol[i];
    for (int32_t r = 0; r < c->world; r++) {
      const uint8_t *a = sp_graph_data_get(c->run, c->outs.t[i], r), *b = sp_graph_data_get(c->ref, c->outs.t[i], r);
      if (!a || !b)
        continue;
      gboolean found = FALSE;
      if (tol > 0 && t->dtype == SP_F32) {
        for (uint64_t k = 0; k + 4 <= nb && !found; k += 4) {
          float x, y;
          memcpy(&x, a + k, 4);
          memcpy(&y, b + k, 4);
          if (!(fabs((double)x - (double)y) <= tol * MAX(1.0, fabs((double)y))) && memcmp(a + k, b + k, 4) != 0) {
            if (bad_off)
              *bad_off = k;
            found = TRUE;
          }
        }
      } else {
        for (uint64_t k = 0; k < nb && !found; k++)
          if (a[k] != b[k]) {
            if (bad_off)
              *bad_off = k;
            found = TRUE;
          }
      }
      if (found) {
        if (bad_rank)
          *bad_rank = r;
        break;
      }
    }
    g_propagate_error(err, e);
    return FALSE;
  }
  return TRUE;
}

void sp_graph_case_free(void *cv)
{
  sp_graph_case *c = cv;
  if (!c)
    return;
  outs_clear(&c->outs);
  const guint ns = c->g ? sp_graph_n_storage(c->g) : 0;
  for (int32_t r = 0; c->progs && r < c->world; r++) {
    if (c->bufs && c->bufs[r])
      for (guint b = ns; b < c->nbufs[r]; b++)
        g_free(c->bufs[r][b]);
    if (c->bufs)
      g_free(c->bufs[r]);
    sp_program_free(c->progs[r]);
  }
  g_free(c->progs);
  g_free(c->bufs);
  g_free(c->nbufs);
  sp_graph_data_free(c->ref);
  sp_graph_data_free(c->run);
  sp_graph_free(c->g);
  g_free(c);
}

/* ---------------------------------------------------------------- per-rank view */

gboolean sp_graph_case_has_outputs(const sp_graph_case *c, int32_t rank)
{
  if (!c || rank < 0 || rank >= c->world)
    return FALSE;
  for (int i = 0; i < c->outs.n; i++)
    if (sp_graph_tensor_on(c->g, c->outs.t[i], rank))
      return TRUE;
  return FALSE;
}

gboolean sp_graph_case_check_rank(const sp_graph_case *c, int32_t rank, uint64_t *bad_off, GError **err)
{
  if (!c || rank < 0 || rank >= c->world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: rank %d is outside the case's world of %d ranks",
                rank, c ? c->world : 0);
    return FALSE;
  }
  for (int i = 0; i < c->outs.n; i++) {
    if (!sp_graph_tensor_on(c->g, c->outs.t[i], rank))
      continue;
    const sp_tensor *t = sp_graph_tensor(c->g, c->outs.t[i]);
    const uint8_t *a = sp_graph_data_get(c->run, c->outs.t[i], rank);
    const uint8_t *b = sp_graph_data_get(c->ref, c->outs.t[i], rank);
    const uint64_t nb = sp_tensor_bytes(t);
    const double tol = c->outs.tol[i];
    if (!a || !b || nb == 0)
      continue;
    if (tol > 0 && t->dtype == SP_F32) {
      for (uint64_t k = 0; k + 4 <= nb; k += 4) {
        float x, y;
        memcpy(&x, a + k, 4);
        memcpy(&y, b + k, 4);
        if (memcmp(a + k, b + k, 4) != 0 && !(fabs((double)x - (double)y) <= tol * MAX(1.0, fabs((double)y)))) {
          if (bad_off)
            *bad_off = k;
          g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                      "tensor '%s' differs on rank %d at element %" G_GUINT64_FORMAT ": %.9g vs %.9g "
                      "(relative tolerance %g)", t->name, rank, k / 4, (double)x, (double)y, tol);
          return FALSE;
        }
      }
    } else {
      for (uint64_t k = 0; k < nb; k++)
        if (a[k] != b[k]) {
          if (bad_off)
            *bad_off = k;
          g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                      "tensor '%s' differs on rank %d at byte %" G_GUINT64_FORMAT " (bitwise)", t->name, rank, k);
          return FALSE;
        }
    }
  }
  return TRUE;
}

uint64_t sp_graph_case_checksum(const sp_graph_case *c, int32_t rank)
{
  if (!sp_graph_case_has_outputs(c, rank))
    return 0;
  uint64_t h = 0;
  for (int i = 0; i < c->outs.n; i++) {
    const uint8_t *p = sp_graph_data_get(c->run, c->outs.t[i], rank);
    const uint64_t nb = sp_tensor_bytes(sp_graph_tensor(c->g, c->outs.t[i]));
    if (p && nb > 0)
      h = sp_checksum(h, p, nb);
  }
  return h;
}
