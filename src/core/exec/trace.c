/* Timelines of many ranks and their Chrome trace JSON (opens in Perfetto). */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_out.h"
#include "spsim/error.h"
#include "spsim/exec.h"

struct sp_trace {
  GArray *events;     /* of sp_trace_event */
  GHashTable *names;  /* GUINT_TO_POINTER(op) -> char* */
};

sp_trace *sp_trace_new(void)
{
  sp_trace *t = g_new0(sp_trace, 1);
  t->events = g_array_new(FALSE, TRUE, sizeof(sp_trace_event));
  t->names = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  return t;
}

void sp_trace_free(sp_trace *t)
{
  if (t == NULL)
    return;
  g_array_unref(t->events);
  g_hash_table_destroy(t->names);
  g_free(t);
}

void sp_trace_add(sp_trace *t, const sp_trace_event *ev)
{
  g_array_append_vals(t->events, ev, 1);
}

void sp_trace_set_op_name(sp_trace *t, uint32_t op, const char *name)
{
  /* kept as valid UTF-8 (a byte that is not becomes U+FFFD): the JSON of
   * sp_trace_write_chrome is UTF-8 text and json-glib copies strings as they are */
  g_hash_table_replace(t->names, GUINT_TO_POINTER(op), g_utf8_make_valid(name ? name : "", -1));
}

guint sp_trace_len(const sp_trace *t)
{
  return t->events->len;
}

const sp_trace_event *sp_trace_get(const sp_trace *t, guint i)
{
  g_return_val_if_fail(i < t->events->len, NULL);
  return &g_array_index(t->events, sp_trace_event, i);
}

#define CMP(a, b) \
  do {            \
    if ((a) < (b)) \
      return -1;  \
    if ((a) > (b)) \
      return 1;   \
  } while (0)

/* Total order: (rank, start, op, phase, kind, end, bytes, insertion index). */
static gint event_cmp(gconstpointer pa, gconstpointer pb, gpointer data)
{
  const sp_trace_event *ev = data;
  guint ia = *(const guint *)pa, ib = *(const guint *)pb;
  const sp_trace_event *a = &ev[ia], *b = &ev[ib];
  CMP(a->rank, b->rank);
  CMP(a->start, b->start);
  CMP(a->op, b->op);
  CMP(a->phase, b->phase);
  CMP(a->kind, b->kind);
  CMP(a->end, b->end);
  CMP(a->bytes, b->bytes);
  CMP(ia, ib);
  return 0;
}

/* Seconds -> integer picoseconds (times and durations are computed on these,
 * so a duration does not pick up the rounding noise of two large times). */
static gint64 to_ps(double s)
{
  if (!isfinite(s) || fabs(s) > 9.0e6) /* beyond ~100 days: clamp, never UB */
    return s > 0 ? (gint64)9.0e18 : s < 0 ? -(gint64)9.0e18 : 0;
  return (gint64)llround(s * 1e12);
}

gboolean sp_trace_write_chrome(const sp_trace *t, const char *path, GError **err)
{
  guint n = t->events->len;
  const sp_trace_event *ev = (const sp_trace_event *)(void *)t->events->data;
  guint *order = g_new(guint, n ? n : 1);
  for (guint i = 0; i < n; i++)
    order[i] = i;
  g_qsort_with_data(order, (gint)n, sizeof(guint), event_cmp, (gpointer)ev);

  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "traceEvents");
  json_builder_begin_array(b);

  /* thread names: one per rank that appears, in rank order */
  gboolean have_prev = FALSE;
  int32_t prev = 0;
  for (guint k = 0; k < n; k++) {
    int32_t r = ev[order[k]].rank;
    if (have_prev && r == prev)
      continue;
    have_prev = TRUE;
    prev = r;
    char *label = g_strdup_printf("rank %d", r);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, "thread_name");
    json_builder_set_member_name(b, "ph");
    json_builder_add_string_value(b, "M");
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, 0);
    json_builder_set_member_name(b, "tid");
    json_builder_add_int_value(b, r);
    json_builder_set_member_name(b, "args");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, label);
    json_builder_end_object(b);
    json_builder_end_object(b);
    g_free(label);
  }

  for (guint k = 0; k < n; k++) {
    const sp_trace_event *e = &ev[order[k]];
    const char *name = g_hash_table_lookup(t->names, GUINT_TO_POINTER(e->op));
    char *fallback = name ? NULL : g_strdup_printf("op%u", e->op);
    gint64 ps0 = to_ps(e->start), ps1 = to_ps(e->end);
    double ts = (double)ps0 / 1e6;
    double dur = ps1 > ps0 ? (double)(ps1 - ps0) / 1e6 : 0.0;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, name ? name : fallback);
    json_builder_set_member_name(b, "cat");
    json_builder_add_string_value(b, sp_step_kind_name(e->kind));
    json_builder_set_member_name(b, "ph");
    json_builder_add_string_value(b, "X");
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, 0);
    json_builder_set_member_name(b, "tid");
    json_builder_add_int_value(b, e->rank);
    json_builder_set_member_name(b, "ts");
    json_builder_add_double_value(b, ts);
    json_builder_set_member_name(b, "dur");
    json_builder_add_double_value(b, dur);
    json_builder_set_member_name(b, "args");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "op");
    json_builder_add_int_value(b, e->op);
    json_builder_set_member_name(b, "phase");
    json_builder_add_int_value(b, e->phase);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)e->bytes);
    json_builder_end_object(b);
    json_builder_end_object(b);
    g_free(fallback);
  }
  gboolean ok = sp_json_write_chrome_trace(b, path, err);
  g_object_unref(b);
  g_free(order);
  return ok;
}
