/* The simulated timeline of a step graph as Chrome trace JSON (json-glib): one
 * process per pipeline stage, one thread per stream. */
#include "config.h"

#include <math.h>
#include <string.h>

#include <json-glib/json-glib.h>

#include "json_out.h"
#include "spsim/error.h"
#include "spsim/stepgraph.h"

/* Seconds -> microseconds rounded to the picosecond, as trace.c writes them. */
static double us(double s)
{
  if (!isfinite(s)) return 0.0;
  return (double)llround(s * 1e12) / 1e6;
}

static void meta(JsonBuilder *b, const char *what, int32_t pid, int32_t tid, const char *name)
{
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "name");
  json_builder_add_string_value(b, what);
  json_builder_set_member_name(b, "ph");
  json_builder_add_string_value(b, "M");
  json_builder_set_member_name(b, "pid");
  json_builder_add_int_value(b, pid);
  json_builder_set_member_name(b, "tid");
  json_builder_add_int_value(b, tid);
  json_builder_set_member_name(b, "args");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "name");
  json_builder_add_string_value(b, name);
  json_builder_end_object(b);
  json_builder_end_object(b);
}

gboolean sp_stepgraph_write_chrome(const sp_stepgraph *g, const double *start, const double *end, const char *path,
                                   GError **err)
{
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "traceEvents");
  json_builder_begin_array(b);
  for (int32_t s = 0; s < g->stages; s++) {
    g_autofree char *pn = g_strdup_printf("stage %d (rank %d)", s, s * g->ranks_per_stage);
    meta(b, "process_name", s, 0, pn);
    for (int k = 0; k < SP_STREAM_COUNT; k++) meta(b, "thread_name", s, k, sp_stream_name((sp_stream)k));
  }
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (end[i] <= start[i]) continue; /* zero-time waits */
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, t->what);
    json_builder_set_member_name(b, "cat");
    json_builder_add_string_value(b, sp_task_phase_name((sp_task_phase)t->phase));
    json_builder_set_member_name(b, "ph");
    json_builder_add_string_value(b, "X");
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, t->stage);
    json_builder_set_member_name(b, "tid");
    json_builder_add_int_value(b, t->stream);
    json_builder_set_member_name(b, "ts");
    json_builder_add_double_value(b, us(start[i]));
    json_builder_set_member_name(b, "dur");
    json_builder_add_double_value(b, us(end[i]) - us(start[i]));
    json_builder_set_member_name(b, "args");
    json_builder_begin_object(b);
    if (t->mb >= 0) { json_builder_set_member_name(b, "mb"); json_builder_add_int_value(b, t->mb); }
    if (t->chunk >= 0) { json_builder_set_member_name(b, "chunk"); json_builder_add_int_value(b, t->chunk); }
    if (t->layer >= 0) { json_builder_set_member_name(b, "layer"); json_builder_add_int_value(b, t->layer); }
    if (t->comm >= 0) {
      const sp_comm *c = &g_array_index(g->comms, sp_comm, t->comm);
      json_builder_set_member_name(b, "collective");
      json_builder_add_string_value(b, sp_coll_name(c->coll));
      json_builder_set_member_name(b, "group");
      json_builder_add_int_value(b, c->n);
      json_builder_set_member_name(b, "bytes");
      json_builder_add_int_value(b, (gint64)c->bytes);
    }
    json_builder_set_member_name(b, "model_seconds");
    json_builder_add_double_value(b, t->seconds);
    json_builder_end_object(b);
    json_builder_end_object(b);
  }
  gboolean ok = sp_json_write_chrome_trace(b, path, err);
  g_object_unref(b);
  return ok;
}
