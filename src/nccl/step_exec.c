/* spsim-run --step: the step graph at the model's real sizes, compute and
 * communication. Every MPI rank is one GPU of the layout (world = mpirun -np) and runs
 * the tasks of its pipeline stage (the ranks of a stage run the same tasks, as the
 * graph's representative does): compute tasks on the main thread as CPU kernels
 * (step_compute.c), each collective stream's tasks as nonblocking MPI collectives on a
 * communicator of its own per (stream, group), pipeline sends as MPI_Isend with their
 * receives posted up front. A task starts when the task before it on its stream and
 * its dependencies have ended, as on SimGrid (src/sim/stepsim.c); the compute kernels
 * poll the communication between pieces of about a millisecond, so that a stream's
 * collectives progress under the compute, where the graph overlaps them. */
#include "config.h"

#include <sched.h>

#include "run_priv.h"
#include "step_compute.h"
#include "step_exec.h"

typedef struct {
  int stream, n, stride;
  MPI_Comm comm;
} group_comm;

typedef struct {
  runner *r;
  const sp_stepgraph *g;
  const sp_task *T;
  guint n;
  int32_t stage, rps, me;
  uint8_t *done, *started;
  double *ts, *te;
  MPI_Request (*req)[2];
  GArray *queue[SP_STREAM_COUNT]; /* of guint: this stage's tasks per stream */
  guint head[SP_STREAM_COUNT];
  GArray *groups;                  /* of group_comm */
  int *task_group;                 /* per task: index in groups, -1 */
  char *sbuf[SP_STREAM_COUNT], *rbuf[SP_STREAM_COUNT];
  guint nrecv;
  guint *rtask;
  MPI_Request *rreq;
  char **rmem;
  double t0, last;
  GError *err;
  /* compute */
  const GArray *kernels;
  const uint32_t *koff;
  sk_buffers *kb;
} ex;

static double now(const ex *e)
{
  return MPI_Wtime() - e->t0;
}

static gboolean ready(const ex *e, guint i)
{
  const sp_task *t = &e->T[i];
  for (int d = 0; d < t->ndeps; d++)
    if (!e->done[t->deps[d]]) return FALSE;
  return TRUE;
}

static uint64_t elems(uint64_t bytes)
{
  return MAX((uint64_t)1, bytes / 2); /* 16-bit elements, as the model's bf16 */
}

static gboolean check(ex *e, int rc, const char *call)
{
  if (e->err != NULL) return FALSE;
  return sp_mpi_check(rc, call, e->me, &e->err);
}

/* Post the calls of task i. */
static void start(ex *e, guint i)
{
  const sp_task *t = &e->T[i];
  const sp_comm *cm = &g_array_index(e->g->comms, sp_comm, t->comm);
  e->started[i] = 1;
  e->ts[i] = now(e);
  e->req[i][0] = e->req[i][1] = MPI_REQUEST_NULL;
  char *sb = e->sbuf[t->stream], *rb = e->rbuf[t->stream];
  int tag = (int)(i % 32768); /* MPI guarantees tags up to 32767 */
  if (t->kind == SP_TASK_SEND) {
    int dest = e->me + (t->peer - t->stage) * e->rps;
    check(e, MPI_Isend(sb, (int)elems(cm->bytes), MPI_UNSIGNED_SHORT, dest, tag, MPI_COMM_WORLD, &e->req[i][0]),
          "MPI_Isend");
    return;
  }
  const group_comm *gc = &g_array_index(e->groups, group_comm, e->task_group[i]);
  const int n = gc->n;
  const uint64_t all = elems(cm->bytes), part = MAX((uint64_t)1, all / (uint64_t)n);
  switch (cm->coll) {
  case SP_COLL_ALL_REDUCE:
    check(e, MPI_Iallreduce(sb, rb, (int)all, MPI_UNSIGNED_SHORT, MPI_SUM, gc->comm, &e->req[i][0]), "MPI_Iallreduce");
    break;
  case SP_COLL_ALL_GATHER:
    check(e, MPI_Iallgather(sb, (int)part, MPI_UNSIGNED_SHORT, rb, (int)part, MPI_UNSIGNED_SHORT, gc->comm, &e->req[i][0]),
          "MPI_Iallgather");
    break;
  case SP_COLL_REDUCE_SCATTER:
    check(e, MPI_Ireduce_scatter_block(sb, rb, (int)part, MPI_UNSIGNED_SHORT, MPI_SUM, gc->comm, &e->req[i][0]),
          "MPI_Ireduce_scatter_block");
    break;
  case SP_COLL_ALL_TO_ALL:
    check(e, MPI_Ialltoall(sb, (int)part, MPI_UNSIGNED_SHORT, rb, (int)part, MPI_UNSIGNED_SHORT, gc->comm, &e->req[i][0]),
          "MPI_Ialltoall");
    break;
  default: { /* SEND_RECV: the ring's block to the next member, from the previous */
    int me = 0;
    MPI_Comm_rank(gc->comm, &me);
    check(e, MPI_Irecv(rb, (int)all, MPI_UNSIGNED_SHORT, (me + n - 1) % n, tag, gc->comm, &e->req[i][1]), "MPI_Irecv");
    check(e, MPI_Isend(sb, (int)all, MPI_UNSIGNED_SHORT, (me + 1) % n, tag, gc->comm, &e->req[i][0]), "MPI_Isend");
    break;
  }
  }
}

/* Complete what has ended and start what is ready on the communication streams. */
static gboolean progress(ex *e)
{
  gboolean any = FALSE;
  for (guint j = 0; j < e->nrecv; j++) {
    if (e->rreq[j] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    if (!check(e, MPI_Test(&e->rreq[j], &flag, MPI_STATUS_IGNORE), "MPI_Test")) return FALSE;
    if (flag) {
      e->done[e->rtask[j]] = 1;
      any = TRUE;
    }
  }
  for (int s = SP_STREAM_COMPUTE + 1; s < SP_STREAM_COUNT; s++) {
    GArray *q = e->queue[s];
    while (e->head[s] < q->len) {
      guint i = g_array_index(q, guint, e->head[s]);
      if (!e->started[i]) {
        if (!ready(e, i)) break;
        start(e, i);
        any = TRUE;
      }
      int flag = 0;
      if (!check(e, MPI_Testall(2, e->req[i], &flag, MPI_STATUSES_IGNORE), "MPI_Testall")) return FALSE;
      if (!flag) break;
      e->te[i] = now(e);
      e->done[i] = 1;
      e->head[s]++;
      any = TRUE;
    }
  }
  if (any) e->last = now(e);
  return any;
}

static void poll_cb(void *user)
{
  progress(user);
}

/* The communicators: one per (stream, group) of the graph's collectives, split from
 * MPI_COMM_WORLD in the order of first use (the same on every rank). */
static gboolean make_groups(ex *e)
{
  e->groups = g_array_new(FALSE, FALSE, sizeof(group_comm));
  e->task_group = g_new(int, e->n);
  for (guint i = 0; i < e->n; i++) {
    const sp_task *t = &e->T[i];
    e->task_group[i] = -1;
    if (t->kind != SP_TASK_COLL) continue;
    const sp_comm *cm = &g_array_index(e->g->comms, sp_comm, t->comm);
    int found = -1;
    for (guint k = 0; k < e->groups->len && found < 0; k++) {
      const group_comm *gc = &g_array_index(e->groups, group_comm, k);
      if (gc->stream == t->stream && gc->n == cm->n && gc->stride == cm->stride) found = (int)k;
    }
    if (found < 0) {
      group_comm gc = { .stream = t->stream, .n = cm->n, .stride = cm->stride, .comm = MPI_COMM_NULL };
      /* the group of rank 0 is {0, stride, ..., (n-1) stride}; the others translate it */
      int pos = (e->me / cm->stride) % cm->n, base = e->me - pos * cm->stride;
      if (!check(e, MPI_Comm_split(MPI_COMM_WORLD, base, pos, &gc.comm), "MPI_Comm_split")) return FALSE;
      int size = 0;
      MPI_Comm_size(gc.comm, &size);
      if (size != cm->n) {
        g_set_error(&e->err, SP_ERROR, SP_ERROR_INVALID, "rank %d: the group of '%s' has %d members, want %d",
                    e->me, cm->what, size, cm->n);
        return FALSE;
      }
      g_array_append_val(e->groups, gc);
      found = (int)e->groups->len - 1;
    }
    e->task_group[i] = found;
  }
  return TRUE;
}

double step_exec_bytes(const sp_stepgraph *g, int32_t stage, const GArray *kernels)
{
  double comm[SP_STREAM_COUNT] = { 0 }, recv = 0;
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    if (t->kind == SP_TASK_COMPUTE) continue;
    double b = (double)g_array_index(g->comms, sp_comm, t->comm).bytes;
    if (t->stage == stage) comm[t->stream] = MAX(comm[t->stream], b);
    if (t->kind == SP_TASK_SEND && t->peer == stage) recv += b;
  }
  double sum = recv + sk_buffers_bytes(kernels);
  for (int s = 0; s < SP_STREAM_COUNT; s++) sum += 2.0 * comm[s];
  return sum;
}

gboolean step_exec_run(runner *r, const sp_stepgraph *g, const GArray *kernels, const uint32_t *koff,
                       sk_gpu *gpu, double *start_out, double *end_out, double *step_s, double *kind_s, GError **err)
{
  world_info *w = r->w;
  ex e = { .r = r, .g = g, .T = (const sp_task *)(void *)g->tasks->data, .n = g->tasks->len, .me = w->rank,
           .rps = g->ranks_per_stage, .kernels = kernels, .koff = koff };
  e.stage = w->rank / g->ranks_per_stage;
  e.done = g_new0(uint8_t, e.n);
  e.started = g_new0(uint8_t, e.n);
  e.ts = g_new0(double, e.n);
  e.te = g_new0(double, e.n);
  e.req = g_malloc(sizeof(MPI_Request[2]) * MAX(e.n, 1u));
  double maxb[SP_STREAM_COUNT] = { 0 };
  for (int s = 0; s < SP_STREAM_COUNT; s++) e.queue[s] = g_array_new(FALSE, FALSE, sizeof(guint));
  GArray *rt = g_array_new(FALSE, FALSE, sizeof(guint));
  guint left = 0;
  for (guint i = 0; i < e.n; i++) {
    const sp_task *t = &e.T[i];
    if (t->stage == e.stage) {
      g_array_append_val(e.queue[t->stream], i);
      left++;
      if (t->kind != SP_TASK_COMPUTE)
        maxb[t->stream] = MAX(maxb[t->stream], (double)g_array_index(g->comms, sp_comm, t->comm).bytes);
    } else if (t->kind == SP_TASK_SEND && t->peer == e.stage) {
      g_array_append_val(rt, i);
    }
  }
  for (int s = 0; s < SP_STREAM_COUNT; s++) {
    e.sbuf[s] = g_malloc0((gsize)maxb[s] + 2);
    e.rbuf[s] = g_malloc0((gsize)maxb[s] + 2);
  }
  gboolean ok = make_groups(&e);
  /* receives of the pipeline sends to this stage, posted up front */
  e.nrecv = rt->len;
  e.rtask = (guint *)(void *)g_array_free(rt, FALSE);
  e.rreq = g_new(MPI_Request, MAX(e.nrecv, 1u));
  e.rmem = g_new0(char *, MAX(e.nrecv, 1u));
  e.kb = gpu ? NULL : sk_buffers_new(kernels);
  barrier(r);
  e.t0 = MPI_Wtime();
  for (guint j = 0; ok && j < e.nrecv; j++) {
    const sp_task *t = &e.T[e.rtask[j]];
    uint64_t b = g_array_index(g->comms, sp_comm, t->comm).bytes;
    e.rmem[j] = g_malloc(elems(b) * 2);
    int src = e.me + (t->stage - e.stage) * e.rps;
    ok = check(&e, MPI_Irecv(e.rmem[j], (int)elems(b), MPI_UNSIGNED_SHORT, src, (int)(e.rtask[j] % 32768),
                             MPI_COMM_WORLD, &e.rreq[j]), "MPI_Irecv");
  }
  GArray *cq = e.queue[SP_STREAM_COMPUTE];
  const gboolean hang = r->cfg->debug_hang_rank == e.me;
  const guint die_at = r->cfg->debug_die_mid_rank == e.me || hang ? cq->len / 2 : G_MAXUINT;
  while (ok && left > 0) {
    guint before = e.head[SP_STREAM_COMPUTE];
    for (int s = 1; s < SP_STREAM_COUNT; s++) before += e.head[s];
    progress(&e);
    if (e.err) break;
    if (e.head[SP_STREAM_COMPUTE] < cq->len) {
      guint i = g_array_index(cq, guint, e.head[SP_STREAM_COMPUTE]);
      if (ready(&e, i)) {
        if (e.head[SP_STREAM_COMPUTE] == die_at && hang) { /* alive, never progressing: the others' bounds */
          fprintf(stderr, "spsim-run: rank %d: hanging in the middle of the step (--debug-hang-rank)\n", e.me);
          fflush(stderr);
          for (;;)
            g_usleep(G_USEC_PER_SEC);
        }
        if (e.head[SP_STREAM_COMPUTE] == die_at) {
          fprintf(stderr, "spsim-run: rank %d: exiting with status %d in the middle of the step "
                  "(--debug-die-mid-rank)\n", e.me, EXIT_DIED);
          fflush(stderr);
          exit(EXIT_DIED);
        }
        e.ts[i] = now(&e);
        for (uint32_t k = koff[i]; k < koff[i + 1]; k++) {
          const sk_kernel *kk = &g_array_index(kernels, sk_kernel, k);
          double k0 = MPI_Wtime();
          if (gpu == NULL) sk_run(e.kb, kk, poll_cb, &e);
          else if (!sk_gpu_run(gpu, kk, poll_cb, &e, &e.err)) break;
          if (kind_s) kind_s[kk->kind] += MPI_Wtime() - k0;
        }
        if (e.err) break;
        e.te[i] = now(&e);
        e.done[i] = 1;
        e.head[SP_STREAM_COMPUTE]++;
        e.last = e.te[i];
      }
    }
    guint after = 0;
    for (int s = 0; s < SP_STREAM_COUNT; s++) after += e.head[s];
    left -= after - before;
    if (after == before) {
      if (now(&e) - e.last > w->timeout) {
        GString *wait = g_string_new(NULL);
        for (int s = 0; s < SP_STREAM_COUNT; s++)
          if (e.head[s] < e.queue[s]->len)
            g_string_append_printf(wait, "%s%s '%s'", wait->len ? ", " : "", sp_stream_name(s),
                                   e.T[g_array_index(e.queue[s], guint, e.head[s])].what);
        g_set_error(&e.err, SP_ERROR, SP_ERROR_TRANSPORT,
                    "rank %d: the step made no progress for %.0f s (--timeout); waiting on: %s", e.me, w->timeout,
                    wait->str);
        g_string_free(wait, TRUE);
        break;
      }
      sched_yield(); /* waiting: leave the core to the peers this rank waits for */
    }
  }
  double mine = 0;
  for (guint i = 0; i < e.n; i++)
    if (e.T[i].stage == e.stage) mine = MAX(mine, e.te[i]);
  ok = e.err == NULL;
  if (!ok) {
    g_propagate_error(err, e.err);
  } else {
    /* the representative of each stage reports its tasks' times; rank 0 gathers them */
    gboolean rep = e.me % e.rps == 0;
    g_autofree double *buf = g_new0(double, 2 * (gsize)e.n + 1);
    for (guint i = 0; rep && i < e.n; i++)
      if (e.T[i].stage == e.stage) {
        buf[i] = e.ts[i];
        buf[e.n + i] = e.te[i];
      }
    buf[2 * e.n] = mine;
    g_autofree double *all = g_new0(double, 2 * (gsize)e.n + 1);
    MPI_Request q;
    if (sp_mpi_check(MPI_Iallreduce(buf, all, (int)(2 * e.n + 1), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &q),
                     "MPI_Iallreduce", e.me, err) &&
        sp_mpi_wait_bounded(1, &q, w->timeout, w->mpi_yield, e.me, "the other ranks' task times", NULL, NULL, err)) {
      if (start_out) memcpy(start_out, all, sizeof(double) * e.n);
      if (end_out) memcpy(end_out, all + e.n, sizeof(double) * e.n);
      *step_s = all[2 * e.n];
    } else {
      ok = FALSE;
    }
  }
  for (guint k = 0; k < (e.groups ? e.groups->len : 0); k++) MPI_Comm_free(&g_array_index(e.groups, group_comm, k).comm);
  if (e.groups) g_array_free(e.groups, TRUE);
  for (guint j = 0; j < e.nrecv; j++) g_free(e.rmem[j]);
  for (int s = 0; s < SP_STREAM_COUNT; s++) {
    g_array_free(e.queue[s], TRUE);
    g_free(e.sbuf[s]);
    g_free(e.rbuf[s]);
  }
  sk_buffers_free(e.kb);
  g_free(e.rmem);
  g_free(e.rreq);
  g_free(e.rtask);
  g_free(e.task_group);
  g_free(e.req);
  g_free(e.ts);
  g_free(e.te);
  g_free(e.started);
  g_free(e.done);
  return ok;
}
