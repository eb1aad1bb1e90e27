/* The what-if spread over processes (sp_whatif_spread, spsim/whatif.h): each rank's
 * share of the closed forms gathered on rank 0 in the candidates' order, and rounds of
 * step graphs run every N-th on each rank. Messages are the results' in-memory bytes
 * (every process runs the same build) with a small header; an error travels as its
 * domain, code and message and is raised on rank 0 as if it had happened there. */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "whatif_private.h"

/* A message: a buffer that grows, or one read from the start. */
typedef struct {
  const guint8 *p;
  gsize len, off;
} reader;

static void put(GByteArray *b, const void *v, gsize n)
{
  g_byte_array_append(b, v, (guint)n);
}

static void put_u32(GByteArray *b, guint32 v)
{
  put(b, &v, sizeof v);
}

static gboolean get(reader *r, void *v, gsize n)
{
  if (r->len - r->off < n) return FALSE;
  memcpy(v, r->p + r->off, n);
  r->off += n;
  return TRUE;
}

static gboolean get_u32(reader *r, guint32 *v)
{
  return get(r, v, sizeof *v);
}

/* An error: its domain's name, code and message. */
static void put_error(GByteArray *b, const GError *e)
{
  const char *dom = g_quark_to_string(e->domain);
  guint32 dl = (guint32)strlen(dom), ml = (guint32)strlen(e->message);
  put_u32(b, dl);
  put(b, dom, dl);
  put_u32(b, (guint32)e->code);
  put_u32(b, ml);
  put(b, e->message, ml);
}

static GError *get_error(reader *r)
{
  guint32 dl, code, ml;
  if (!get_u32(r, &dl) || r->len - r->off < dl) return NULL;
  g_autofree char *dom = g_strndup((const char *)r->p + r->off, dl);
  r->off += dl;
  if (!get_u32(r, &code) || !get_u32(r, &ml) || r->len - r->off < ml) return NULL;
  g_autofree char *msg = g_strndup((const char *)r->p + r->off, ml);
  r->off += ml;
  return g_error_new_literal(g_quark_from_string(dom), (gint)code, msg);
}

static gboolean malformed(GError **err, const char *what)
{
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "spread what-if: a malformed %s message came back from another "
              "process (every process must run the same spsim build)", what);
  return FALSE;
}

/* Rank @p k's contiguous share [*lo, *hi) of @p n candidates. */
static void share(guint n, int32_t k, int32_t size, guint *lo, guint *hi)
{
  *lo = (guint)((guint64)n * (guint64)k / (guint64)size);
  *hi = (guint)((guint64)n * (guint64)(k + 1) / (guint64)size);
}

/* Price each collective the closed forms need once over all processes: every rank
 * notes those of its share (a pass with the engine only noting), rank 0 merges them
 * in rank order and hands them out, every size-th to each rank, and every rank keeps
 * all the prices. The closed forms then find them priced (a collective the noting
 * pass missed is priced where it is needed: the same figure, as every run starts at
 * time 0). */
static gboolean share_prices(sp_whatif_spread *s, const sp_whatif_engine *eng, const sp_step_ctx *ctx,
                             const GArray *cands, guint lo, guint hi, GError **err)
{
  gsize ks = eng->key_size;
  eng->note(eng->user, TRUE);
  for (guint i = lo; i < hi; i++) {
    sp_step_result res;
    GError *e = NULL; /* an error recurs in the pass that counts */
    if (!sp_step_eval(ctx, &g_array_index(cands, sp_layout, i), &res, &e)) g_error_free(e);
  }
  eng->note(eng->user, FALSE);
  GBytes *mine = eng->take_noted(eng->user);
  GPtrArray *all = NULL;
  gboolean ok = s->gather(s->user, mine, &all, err);
  g_bytes_unref(mine);
  if (!ok) return FALSE;
  GBytes *list = NULL;
  if (s->rank == 0) {
    /* distinct keys, in rank order */
    GHashTable *seen = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
    GByteArray *b = g_byte_array_new();
    for (guint k = 0; k < all->len; k++) {
      gsize len;
      const guint8 *p = g_bytes_get_data(g_ptr_array_index(all, k), &len);
      for (gsize off = 0; off + ks <= len; off += ks) {
        GBytes *key = g_bytes_new_static(p + off, ks);
        if (g_hash_table_contains(seen, key)) g_bytes_unref(key);
        else {
          g_hash_table_add(seen, key);
          put(b, p + off, ks);
        }
      }
    }
    g_hash_table_destroy(seen); /* (before all, whose bytes its keys refer to) */
    list = g_byte_array_free_to_bytes(b);
  }
  ok = s->bcast(s->user, &list, err);
  gsize len = 0;
  if (all) g_ptr_array_unref(all);
  all = NULL;
  const guint8 *keys = list ? g_bytes_get_data(list, &len) : NULL;
  guint n = ks > 0 ? (guint)(len / ks) : 0;
  double *sec = g_new0(double, n + 1);
  GByteArray *b = g_byte_array_new();
  /* a collective the engine refuses stops this rank's share short: the closed forms
   * meet the error again, where it counts */
  for (guint i = (guint)s->rank; ok && i < n; i += (guint)s->size) {
    GError *e = NULL;
    if (!eng->price_keys(eng->user, keys + (gsize)i * ks, 1, &sec[i], &e)) {
      g_error_free(e);
      break;
    }
    put(b, &sec[i], sizeof sec[i]);
  }
  GBytes *priced = g_byte_array_free_to_bytes(b);
  ok = ok && s->gather(s->user, priced, &all, err);
  g_bytes_unref(priced);
  GBytes *table = NULL;
  if (ok && s->rank == 0) {
    gboolean whole = TRUE;
    for (guint k = 0; k < all->len; k++) {
      gsize pl;
      const double *p = g_bytes_get_data(g_ptr_array_index(all, k), &pl);
      guint want = k < n ? (n - k + (guint)s->size - 1) / (guint)s->size : 0;
      whole = whole && pl == sizeof(double) * want;
      for (guint j = 0, i = k; i < n && (gsize)(j + 1) * sizeof(double) <= pl; j++, i += (guint)s->size) sec[i] = p[j];
    }
    /* a share short: no table (every rank prices what it needs itself) */
    table = whole ? g_bytes_new(sec, sizeof(double) * n) : g_bytes_new(NULL, 0);
  }
  if (all) g_ptr_array_unref(all);
  ok = ok && s->bcast(s->user, &table, err);
  gsize tl = 0;
  const double *t = table ? g_bytes_get_data(table, &tl) : NULL;
  if (ok && n > 0 && tl == sizeof(double) * n) eng->add_prices(eng->user, keys, t, n);
  if (table) g_bytes_unref(table);
  if (list) g_bytes_unref(list);
  g_free(sec);
  return ok;
}

gboolean sp_whatif_spread_closed_form(sp_whatif_spread *s, const sp_whatif_engine *eng, gboolean engine,
                                      const sp_step_ctx *ctx, const GArray *cands, GArray *rows,
                                      sp_whatif_progress_fn progress, void *user, GError **err)
{
  guint lo, hi;
  share(cands->len, s->rank, s->size, &lo, &hi);
  if (engine && eng->note != NULL && eng->take_noted != NULL && eng->price_keys != NULL && eng->add_prices != NULL &&
      eng->key_size > 0 && !share_prices(s, eng, ctx, cands, lo, hi, err))
    return FALSE;
  /* header: results, then whether an error follows (at candidate lo + results) */
  GByteArray *b = g_byte_array_new();
  put_u32(b, 0);
  put_u32(b, 0);
  guint32 done = 0;
  GError *mine = NULL;
  for (guint i = lo; i < hi; i++) {
    sp_step_result res;
    if (!sp_step_eval(ctx, &g_array_index(cands, sp_layout, i), &res, &mine)) break;
    put(b, &res, sizeof res);
    done++;
    if (progress) progress(user, done, hi - lo);
  }
  memcpy(b->data, &done, sizeof done);
  if (mine != NULL) {
    guint32 one = 1;
    memcpy(b->data + sizeof done, &one, sizeof one);
    put_error(b, mine);
    g_error_free(mine);
  }
  GBytes *msg = g_byte_array_free_to_bytes(b);
  GPtrArray *all = NULL;
  gboolean ok = s->gather(s->user, msg, &all, err);
  g_bytes_unref(msg);
  if (!ok || s->rank != 0) return ok;
  /* rank 0: every share in order; the first error in candidate order wins */
  GError *first = NULL;
  for (int32_t k = 0; k < s->size && first == NULL && ok; k++) {
    gsize len;
    reader r = { .p = g_bytes_get_data(g_ptr_array_index(all, k), &len) };
    r.len = len;
    guint32 n, failed;
    share(cands->len, k, s->size, &lo, &hi);
    if (!get_u32(&r, &n) || !get_u32(&r, &failed) || n > hi - lo) {
      ok = malformed(err, "closed-form");
      break;
    }
    for (guint32 j = 0; j < n; j++) {
      sp_whatif_row rw = { 0 };
      if (!get(&r, &rw.r, sizeof rw.r)) {
        ok = malformed(err, "closed-form");
        break;
      }
      rw.label = sp_layout_label(&rw.r.layout);
      g_array_append_val(rows, rw);
    }
    if (ok && failed && (first = get_error(&r)) == NULL) ok = malformed(err, "closed-form");
  }
  g_ptr_array_unref(all);
  if (first != NULL) {
    g_propagate_error(err, first);
    return FALSE;
  }
  return ok;
}

/* Layouts that differ in their ZeRO stage alone: often the same step graph, which a
 * process simulates once (stepsim's memo), so they go to the same rank. */
static gboolean zero_siblings(const sp_layout *a, const sp_layout *b)
{
  sp_layout x = *a, y = *b;
  x.zero = y.zero = 0;
  return memcmp(&x, &y, sizeof x) == 0;
}

/* The rank that runs each of @p n results: runs of ZeRO siblings in turn over the ranks
 * (the same on every rank: all have the round's results). g_free the array. */
static guint32 *owners(const sp_step_result *res, guint32 n, int32_t size)
{
  guint32 *o = g_new(guint32, n > 0 ? n : 1);
  guint32 block = 0;
  for (guint32 i = 0; i < n; i++) {
    if (i > 0 && !zero_siblings(&res[i - 1].layout, &res[i].layout)) block++;
    o[i] = block % (guint32)size;
  }
  return o;
}

/* One round: rank 0 sends the results to run (their closed forms), each rank runs its
 * share (owners) and sends back, per run: its index, whether it failed, the result or
 * the error. */
static GByteArray *run_share(sp_whatif_spread *s, const sp_whatif_engine *eng, const sp_step_ctx *ctx, gboolean engine,
                             double slowdown, sp_step_result *res, guint32 n, const guint32 *own, GError **errs)
{
  GByteArray *b = g_byte_array_new();
  for (guint32 i = 0; i < n; i++) {
    if (own[i] != (guint32)s->rank) continue;
    GError *e = NULL;
    gboolean ok = eng->simulate(eng->user, ctx, &res[i].layout, engine, slowdown, &res[i], &e);
    if (errs != NULL) { /* rank 0 keeps its own outcomes */
      errs[i] = e;
      continue;
    }
    put_u32(b, i);
    put_u32(b, ok ? 0 : 1);
    if (ok) put(b, &res[i], sizeof res[i]);
    else {
      put_error(b, e);
      g_error_free(e);
    }
  }
  return b;
}

static gboolean send_round(sp_whatif_spread *s, const sp_step_result *res, guint32 n, GError **err)
{
  GByteArray *b = g_byte_array_new();
  put_u32(b, n);
  if (n > 0) put(b, res, sizeof *res * n);
  GBytes *msg = g_byte_array_free_to_bytes(b);
  gboolean ok = s->bcast(s->user, &msg, err);
  g_bytes_unref(msg);
  if (ok && n == 0) s->finished = TRUE;
  return ok;
}

gboolean sp_whatif_spread_simulate(sp_whatif_spread *s, const sp_whatif_engine *eng, const sp_step_ctx *ctx,
                                   gboolean engine, double slowdown, sp_step_result *res, guint n, GError **errs,
                                   GError **err)
{
  if (!send_round(s, res, (guint32)n, err)) return FALSE;
  if (n == 0) return TRUE;
  g_autofree guint32 *own = owners(res, (guint32)n, s->size);
  GByteArray *b = run_share(s, eng, ctx, engine, slowdown, res, (guint32)n, own, errs);
  GBytes *msg = g_byte_array_free_to_bytes(b);
  GPtrArray *all = NULL;
  gboolean ok = s->gather(s->user, msg, &all, err);
  g_bytes_unref(msg);
  for (int32_t k = 1; ok && k < s->size; k++) {
    gsize len;
    reader r = { .p = g_bytes_get_data(g_ptr_array_index(all, k), &len) };
    r.len = len;
    guint32 i, failed;
    while (ok && r.off < r.len) {
      if (!get_u32(&r, &i) || !get_u32(&r, &failed) || i >= n || (guint32)k != own[i]) {
        ok = malformed(err, "step-graph");
        break;
      }
      if (!failed) {
        if (!get(&r, &res[i], sizeof res[i])) ok = malformed(err, "step-graph");
      } else if ((errs[i] = get_error(&r)) == NULL) {
        ok = malformed(err, "step-graph");
      }
    }
  }
  if (all) g_ptr_array_unref(all);
  return ok;
}

gboolean sp_whatif_spread_follow(sp_whatif_spread *s, const sp_whatif_engine *eng, const sp_step_ctx *ctx,
                                 gboolean engine, double slowdown, GError **err)
{
  for (;;) {
    GBytes *msg = NULL;
    if (!s->bcast(s->user, &msg, err)) return FALSE;
    gsize len;
    reader r = { .p = g_bytes_get_data(msg, &len) };
    r.len = len;
    guint32 n;
    if (!get_u32(&r, &n) || r.len - r.off != sizeof(sp_step_result) * (gsize)n) {
      g_bytes_unref(msg);
      return malformed(err, "step-graph round");
    }
    if (n == 0) {
      g_bytes_unref(msg);
      s->finished = TRUE;
      return TRUE;
    }
    sp_step_result *res = g_new(sp_step_result, n);
    memcpy(res, r.p + r.off, sizeof *res * n);
    g_bytes_unref(msg);
    guint32 *own = owners(res, n, s->size);
    GByteArray *b = run_share(s, eng, ctx, engine, slowdown, res, n, own, NULL);
    g_free(own);
    g_free(res);
    GBytes *mine = g_byte_array_free_to_bytes(b);
    GPtrArray *none = NULL;
    gboolean ok = s->gather(s->user, mine, &none, err);
    g_bytes_unref(mine);
    if (none) g_ptr_array_unref(none);
    if (!ok) return FALSE;
  }
}
