/* The breakdown of a step graph's run: compute, communication by kind and the part of it
 * on the critical path, idle time, on the busiest stage. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "spsim/stepgraph.h"

typedef struct { double t; int32_t stream; int32_t delta; int32_t kind; } edge;

static int cmp_edge(const void *a, const void *b)
{
  const edge *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->delta - y->delta; /* ends before starts at one instant */
}

void sp_stepgraph_breakdown_of(const sp_stepgraph *g, const double *start, const double *end, sp_stepgraph_breakdown *b)
{
  memset(b, 0, sizeof *b);
  const sp_task *T = (const sp_task *)g->tasks->data;
  guint n = g->tasks->len;
  /* the step ends with the last task; the stage whose kernels are busiest is the one
   * the others wait for, and its idle time is the pipeline bubble */
  g_autofree double *busy = g_new0(double, g->stages);
  for (guint i = 0; i < n; i++) {
    b->step_time = MAX(b->step_time, end[i]);
    if (T[i].kind == SP_TASK_COMPUTE && end[i] > start[i]) busy[T[i].stage] += end[i] - start[i];
  }
  for (int32_t s = 1; s < g->stages; s++)
    if (busy[s] > busy[b->stage]) b->stage = s;
  GArray *ev = g_array_new(FALSE, FALSE, sizeof(edge));
  for (guint i = 0; i < n; i++) {
    if (T[i].stage != b->stage || end[i] <= start[i]) continue;
    int32_t kind = -1;
    if (T[i].kind == SP_TASK_COMPUTE) b->compute += end[i] - start[i];
    else {
      kind = g_array_index(g->comms, sp_comm, T[i].comm).kind;
      b->comm[kind] += end[i] - start[i];
    }
    edge s = { start[i], T[i].stream, +1, kind }, e = { end[i], T[i].stream, -1, kind };
    g_array_append_val(ev, s);
    g_array_append_val(ev, e);
  }
  qsort(ev->data, ev->len, sizeof(edge), cmp_edge);
  int32_t busy_compute = 0, active[SP_COMM_KIND_COUNT] = { 0 };
  double t = 0;
  for (guint i = 0; i <= ev->len; i++) {
    double nt = i < ev->len ? g_array_index(ev, edge, i).t : b->step_time;
    if (nt > t && busy_compute == 0) {
      int nk = 0;
      for (int k = 0; k < SP_COMM_KIND_COUNT; k++) nk += active[k] > 0;
      if (nk == 0) b->idle += nt - t;
      else
        for (int k = 0; k < SP_COMM_KIND_COUNT; k++)
          if (active[k] > 0) b->exposed[k] += (nt - t) / nk;
    }
    if (i == ev->len) break;
    const edge *x = &g_array_index(ev, edge, i);
    if (x->kind < 0) busy_compute += x->delta;
    else active[x->kind] += x->delta;
    t = MAX(t, nt);
  }
  g_array_unref(ev);
}
