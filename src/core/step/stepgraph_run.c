/* Step graph: freeing it, pricing its collectives, its contention-free run (each task
 * starts when its stream's previous task and its dependencies are over) and the
 * breakdown of a run into compute, exposed communication and idle time (stepgraph.h). */
#include "config.h"

#include <string.h>
#include <glib.h>

#include "spsim/error.h"
#include "spsim/stepgraph.h"

#define NONE UINT32_MAX

void sp_stepgraph_free(sp_stepgraph *g)
{
  if (g == NULL) return;
  if (g->tasks) g_array_unref(g->tasks);
  if (g->comms) g_array_unref(g->comms);
  g_free(g);
}

gboolean sp_stepgraph_price(sp_stepgraph *g, const sp_step_ctx *c, GError **err)
{
  g_autofree double *t = g_new0(double, g->comms->len + 1);
  for (guint i = 0; i < g->comms->len; i++)
    if (!c->price(c->price_user, &g_array_index(g->comms, sp_comm, i), &t[i], err)) return FALSE;
  for (guint i = 0; i < g->tasks->len; i++) {
    sp_task *k = &g_array_index(g->tasks, sp_task, i);
    if (k->kind != SP_TASK_COMPUTE) k->seconds = k->comm >= 0 ? t[k->comm] : 0.0;
  }
  return TRUE;
}

/* ---------- contention-free run ---------- */

void sp_stepgraph_successors(const sp_stepgraph *g, uint32_t **off_out, uint32_t **succ_out)
{
  guint n = g->tasks->len;
  const sp_task *T = (const sp_task *)g->tasks->data;
  uint32_t *off = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < n; i++)
    for (int d = 0; d < T[i].ndeps; d++) off[T[i].deps[d] + 1]++;
  for (guint i = 0; i < n; i++) off[i + 1] += off[i];
  uint32_t *succ = g_new(uint32_t, off[n] + 1);
  g_autofree uint32_t *fill = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < n; i++)
    for (int d = 0; d < T[i].ndeps; d++) {
      uint32_t p = T[i].deps[d];
      succ[off[p] + fill[p]++] = i;
    }
  *off_out = off;
  *succ_out = succ;
}

gboolean sp_stepgraph_schedule(const sp_stepgraph *g, double *start, double *end, double *makespan, GError **err)
{
  guint n = g->tasks->len;
  const sp_task *T = (const sp_task *)g->tasks->data;
  g_autofree uint32_t *off = NULL, *succ = NULL;
  sp_stepgraph_successors(g, &off, &succ);
  /* next task of each (stage, stream) */
  int32_t nq = g->stages * SP_STREAM_COUNT;
  g_autofree uint32_t *next_in_stream = g_new(uint32_t, n + 1);
  g_autofree uint32_t *head = g_new(uint32_t, nq);
  g_autofree uint32_t *tail = g_new(uint32_t, nq);
  for (int32_t q = 0; q < nq; q++) head[q] = tail[q] = NONE;
  for (guint i = 0; i < n; i++) {
    int32_t q = T[i].stage * SP_STREAM_COUNT + T[i].stream;
    next_in_stream[i] = NONE;
    if (tail[q] == NONE) head[q] = i;
    else next_in_stream[tail[q]] = i;
    tail[q] = i;
  }
  g_autofree uint32_t *pending = g_new(uint32_t, n + 1);
  g_autofree double *ready = g_new0(double, n + 1);  /* latest end of a dependency */
  g_autofree double *s0 = g_new0(double, n + 1), *e0 = g_new0(double, n + 1);
  g_autofree uint8_t *is_head = g_new0(uint8_t, n + 1);
  for (guint i = 0; i < n; i++) pending[i] = T[i].ndeps;
  GArray *work = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (int32_t q = 0; q < nq; q++)
    if (head[q] != NONE) {
      is_head[head[q]] = 1;
      if (pending[head[q]] == 0) g_array_append_val(work, head[q]);
    }
  g_autofree double *qfree = g_new0(double, nq);
  guint done = 0;
  double span = 0;
  while (work->len > 0) {
    uint32_t i = g_array_index(work, uint32_t, work->len - 1);
    g_array_set_size(work, work->len - 1);
    int32_t q = T[i].stage * SP_STREAM_COUNT + T[i].stream;
    s0[i] = MAX(ready[i], qfree[q]);
    e0[i] = s0[i] + T[i].seconds;
    qfree[q] = e0[i];
    span = MAX(span, e0[i]);
    done++;
    for (uint32_t k = off[i]; k < off[i + 1]; k++) {
      uint32_t j = succ[k];
      ready[j] = MAX(ready[j], e0[i]);
      if (--pending[j] == 0 && is_head[j]) g_array_append_val(work, j);
    }
    uint32_t nx = next_in_stream[i];
    if (nx != NONE) {
      is_head[nx] = 1;
      if (pending[nx] == 0) g_array_append_val(work, nx);
    }
  }
  g_array_unref(work);
  if (done != n) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "step graph: %u of %u tasks can never start (a dependency cycle)", n - done, n);
    return FALSE;
  }
  if (start) memcpy(start, s0, n * sizeof(double));
  if (end) memcpy(end, e0, n * sizeof(double));
  if (makespan) *makespan = span;
  return TRUE;
}

/* ---------- breakdown ---------- */

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
