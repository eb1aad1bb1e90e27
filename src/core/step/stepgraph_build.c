/* Step graph builder: tasks on streams, their dependencies, and the collectives they
 * run (stepgraph_private.h). */
#include "config.h"

#include <math.h>

#include "stepgraph_private.h"

void sg_add_dep(sp_task *t, uint32_t d)
{
  if (d == SG_NONE) return;
  for (int i = 0; i < t->ndeps; i++)
    if (t->deps[i] == d) return;
  if (t->ndeps < SP_TASK_MAX_DEPS) t->deps[t->ndeps++] = d;
}

sp_task *sg_task_at(sb *b, uint32_t id) { return &g_array_index(b->g->tasks, sp_task, id); }

uint32_t sg_add(sb *b, sp_task_kind kind, sp_stream st, double secs, int32_t comm, const char *what)
{
  sp_task t = { .kind = (uint8_t)kind, .stream = (uint8_t)st, .phase = b->phase, .stage = b->stage, .mb = b->mb,
                .chunk = b->chunk, .layer = b->layer, .comm = comm, .peer = -1, .what = what, .seconds = secs };
  g_array_append_val(b->g->tasks, t);
  return b->g->tasks->len - 1;
}

/* Kernels on the data path; extends the previous compute task when nothing else
 * waits for its end. */
void sg_compute(sb *b, double secs, const char *what)
{
  if (b->open != SG_NONE && b->need[0] == SG_NONE && b->need[1] == SG_NONE && sg_task_at(b, b->open)->phase == b->phase &&
      sg_task_at(b, b->open)->layer == b->layer && b->open == b->chain) {
    sg_task_at(b, b->open)->seconds += secs;
    return;
  }
  uint32_t id = sg_add(b, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, secs, -1, what);
  sp_task *t = sg_task_at(b, id);
  sg_add_dep(t, b->chain);
  sg_add_dep(t, b->need[0]);
  sg_add_dep(t, b->need[1]);
  b->need[0] = b->need[1] = SG_NONE;
  b->chain = b->open = id;
}

void sg_need(sb *b, uint32_t id)
{
  if (id == SG_NONE) return;
  if (b->need[0] == SG_NONE) b->need[0] = id;
  else b->need[1] = id;
}

/* A collective the data path waits for. */
void sg_coll_block(sb *b, sp_stream st, int32_t comm)
{
  if (comm < 0) return;
  const sp_comm *cm = &g_array_index(b->g->comms, sp_comm, comm);
  uint32_t id = sg_add(b, SP_TASK_COLL, st, 0.0, comm, cm->what);
  sp_task *t = sg_task_at(b, id);
  sg_add_dep(t, b->chain);
  sg_add_dep(t, b->need[0]);
  sg_add_dep(t, b->need[1]);
  b->need[0] = b->need[1] = SG_NONE;
  b->chain = id;
  b->open = SG_NONE;
}

/* A collective started after @p after, which the data path does not wait for yet. */
uint32_t sg_coll_async(sb *b, sp_stream st, int32_t comm, uint32_t after)
{
  if (comm < 0) return SG_NONE;
  const sp_comm *cm = &g_array_index(b->g->comms, sp_comm, comm);
  uint32_t id = sg_add(b, SP_TASK_COLL, st, 0.0, comm, cm->what);
  sg_add_dep(sg_task_at(b, id), after);
  if (after == b->open) b->open = SG_NONE;
  return id;
}

/* A zero-time task on the compute stream that waits for a pipeline receive. */
void sg_recv_wait(sb *b, gboolean fwd, int64_t key)
{
  uint32_t id = sg_add(b, SP_TASK_COMPUTE, SP_STREAM_COMPUTE, 0.0, -1, fwd ? "wait for activations" : "wait for gradients");
  sg_add_dep(sg_task_at(b, id), b->chain);
  patch p = { id, fwd, key };
  g_array_append_val(b->patch, p);
  b->chain = id;
  b->open = SG_NONE;
}

int32_t sg_comm_of(sb *b, sp_comm_kind kind, sp_coll coll, int32_t n, int32_t stride, double bytes, const char *what)
{
  if (n < 2 || bytes <= 0) return -1;
  uint64_t by = (uint64_t)llround(bytes);
  char key[96];
  g_snprintf(key, sizeof key, "%d/%d/%d/%" G_GUINT64_FORMAT "/%d/%p", (int)coll, n, stride, by, (int)kind, (const void *)what);
  gpointer v = g_hash_table_lookup(b->comm_ix, key);
  if (v != NULL) return GPOINTER_TO_INT(v) - 1;
  sp_comm cm = { .kind = kind, .when = SP_PER_STEP, .coll = coll, .n = n, .stride = stride, .bytes = by, .times = 1,
                 .what = what };
  g_array_append_val(b->g->comms, cm);
  g_hash_table_insert(b->comm_ix, g_strdup(key), GINT_TO_POINTER((int)b->g->comms->len));
  return (int32_t)b->g->comms->len - 1;
}
