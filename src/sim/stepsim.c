/* The step graph on SimGrid: one actor per (stage, stream) runs its tasks in order,
 * waiting on their dependencies; kernels execute on the stage's host, collectives
 * occupy the links their rank uses, pipeline sends cross the platform (stepsim.h). */
#include "config.h"

#include <math.h>
#include <string.h>

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/semaphore.h>
#include <xbt/dynar.h>

#include "platform_routed.h"
#include "sim.h"
#include "stepsim.h"
#include "spsim/error.h"

#define NONE UINT32_MAX

typedef struct run_s run_t;

/* How a collective of a stage occupies the network: a flow to host @c to. */
typedef struct {
  sg_host_t to;   /* NULL: sleep instead (no route) */
  double lat, bw; /* route latency and bottleneck bandwidth */
} flow_plan;

typedef struct {
  run_t *run;
  int32_t stage, stream;
  GArray *tasks;    /* of uint32_t, in stream order */
  uint32_t waiting; /* task the actor waits for, NONE when running */
  sg_sem_t sem;
} stream_actor;

struct run_s {
  const sp_stepgraph *g;
  const sp_task *T;
  uint32_t *pending;
  uint32_t *off, *succ;
  stream_actor **owner; /* per task */
  double *start, *end;
  double t0;
  sg_host_t *host;      /* per stage */
  double *speed, *share, *coll_lat; /* per stage */
  flow_plan *plans;     /* [stage x ncomms] */
  gboolean merge;       /* run chains of kernels as one execution (run_graph) */
  guint done;
};

static double now(const run_t *r) { return simgrid_get_clock() - r->t0; }

static void finish(run_t *r, uint32_t i)
{
  r->end[i] = now(r);
  r->done++;
  for (uint32_t k = r->off[i]; k < r->off[i + 1]; k++) {
    uint32_t j = r->succ[k];
    if (--r->pending[j] == 0 && r->owner[j]->waiting == j) {
      r->owner[j]->waiting = NONE;
      sg_sem_release(r->owner[j]->sem);
    }
  }
}

/* A bounded execution standing for NCCL's kernels beside the compute stream. */
static sg_exec_t hold_sms(const run_t *r, int32_t stage)
{
  if (r->share[stage] <= 0) return NULL;
  sg_exec_t e = sg_actor_exec_init(1e300);
  sg_exec_set_bound(e, r->share[stage] * r->speed[stage]);
  sg_exec_start(e);
  return e;
}

static void release_sms(sg_exec_t e)
{
  if (e != NULL) sg_exec_cancel(e);
}

/* Whether task @p n of @p a's stream is a collective that may start now. */
static gboolean coll_ready(const stream_actor *a, guint n)
{
  if (n >= a->tasks->len) return FALSE;
  uint32_t i = g_array_index(a->tasks, uint32_t, n);
  const sp_task *t = &a->run->T[i];
  return t->kind == SP_TASK_COLL && t->seconds > 0 && a->run->pending[i] == 0;
}

static void stream_main(int argc, char **argv)
{
  (void)argc; (void)argv;
  stream_actor *a = sg_actor_self_get_data();
  run_t *r = a->run;
  guint ncomms = r->g->comms->len;
  sg_exec_t held = NULL; /* SMs a collective holds on for the next one, which starts at once */
  for (guint n = 0; n < a->tasks->len; n++) {
    uint32_t i = g_array_index(a->tasks, uint32_t, n);
    if (r->pending[i] > 0) {
      a->waiting = i;
      sg_sem_acquire(a->sem);
    }
    const sp_task *t = &r->T[i];
    r->start[i] = now(r);
    if (t->kind == SP_TASK_COMPUTE) {
      /* kernels that nothing but the next kernel waits for, followed by kernels free to
       * start, run as one execution: the same work at the same speed, one activity */
      double work = t->seconds;
      guint last = n;
      while (r->merge && last + 1 < a->tasks->len) {
        uint32_t cur = g_array_index(a->tasks, uint32_t, last), nx = g_array_index(a->tasks, uint32_t, last + 1);
        if (r->off[cur + 1] != r->off[cur] || r->T[nx].kind != SP_TASK_COMPUTE || r->pending[nx] != 0) break;
        work += r->T[nx].seconds;
        last++;
      }
      if (work > 0) sg_actor_execute(work * r->speed[t->stage]);
      for (; n < last; n++) { /* the chain's first task spans it, the others end with it */
        finish(r, i);
        i = g_array_index(a->tasks, uint32_t, n + 1);
        r->start[i] = now(r);
      }
    } else if (t->kind == SP_TASK_COLL) {
      if (t->seconds > 0) {
        const flow_plan *p = &r->plans[(size_t)t->stage * ncomms + (guint)t->comm];
        if (held == NULL) held = hold_sms(r, t->stage);
        if (p->to != NULL && t->seconds > p->lat) {
          sg_host_sendto(r->host[t->stage], p->to, (double)llround((t->seconds - p->lat) * p->bw));
        } else {
          sg_actor_sleep_for(t->seconds);
        }
      }
    } else { /* SEND */
      const sp_comm *cm = &g_array_index(r->g->comms, sp_comm, t->comm);
      if (r->coll_lat[t->stage] > 0) sg_actor_sleep_for(r->coll_lat[t->stage]);
      sg_exec_t e = hold_sms(r, t->stage);
      sg_host_sendto(r->host[t->stage], r->host[t->peer], (double)cm->bytes);
      release_sms(e);
    }
    finish(r, i);
    /* the SMs stay held across back-to-back collectives (a ring's steps): the same
     * load on the GPU as releasing and taking them again at the same instant */
    if (held != NULL && !coll_ready(a, n + 1)) {
      release_sms(held);
      held = NULL;
    }
  }
}

static sg_host_t host_at(int32_t h)
{
  const char *name = sp_sim_host_name(h);
  return name ? sg_host_by_name(name) : NULL;
}

/* Where a collective of @p rep's group sends its stand-in flow. */
static void plan_flow(const sp_comm *c, int32_t rep, flow_plan *p)
{
  p->to = NULL;
  p->lat = 0;
  p->bw = 0;
  int32_t world = sp_sim_num_hosts();
  int32_t me = sp_sim_host_of(rep), node = sp_sim_host_node(me);
  int32_t peer = -1;
  for (int32_t j = 1; j < c->n; j++) {
    int64_t q = (int64_t)rep + (int64_t)j * c->stride;
    if (q >= world) break;
    int32_t h = sp_sim_host_of((int32_t)q);
    if (peer < 0) peer = h;
    if (node >= 0 && sp_sim_host_node(h) != node) { peer = h; break; }
  }
  if (peer < 0 || peer == me) return;
  sg_host_t a = host_at(me), b = host_at(peer);
  if (a == NULL || b == NULL) return;
  xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(a, b, links);
  double bw = INFINITY;
  unsigned i;
  sg_link_t lk;
  xbt_dynar_foreach (links, i, lk)
    bw = MIN(bw, sg_link_get_bandwidth(lk));
  xbt_dynar_free(&links);
  if (!(bw > 0) || isinf(bw)) return;
  p->bw = bw;
  p->lat = sg_host_get_route_latency(a, b);
  p->to = b;
}

/* sp_stepsim_run, or with @p merge sp_stepsim_run_merged. */
static gboolean run_graph(const sp_stepgraph *g, double slowdown, gboolean merge, double *start, double *end,
                          double *makespan, GError **err)
{
  if (!sp_sim_ready()) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "step simulation: no platform loaded");
    return FALSE;
  }
  /* a graph that cannot run would leave actors blocked: refuse it first */
  if (!sp_stepgraph_schedule(g, NULL, NULL, NULL, err)) return FALSE;
  guint n = g->tasks->len, nc = g->comms->len;
  int32_t S = g->stages;
  if ((int64_t)(S - 1) * g->ranks_per_stage >= sp_sim_num_hosts()) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "step simulation: stage %d's rank %d has no host (%d hosts)", S - 1,
                (S - 1) * g->ranks_per_stage, sp_sim_num_hosts());
    return FALSE;
  }
  run_t r = { .g = g, .T = (const sp_task *)g->tasks->data, .merge = merge };
  r.pending = g_new(uint32_t, n + 1);
  for (guint i = 0; i < n; i++) r.pending[i] = r.T[i].ndeps;
  sp_stepgraph_successors(g, &r.off, &r.succ);
  r.start = g_new0(double, n + 1);
  r.end = g_new0(double, n + 1);
  r.owner = g_new0(stream_actor *, n + 1);
  r.host = g_new(sg_host_t, S);
  r.speed = g_new(double, S);
  r.share = g_new(double, S);
  r.coll_lat = g_new(double, S);
  r.plans = g_new0(flow_plan, (size_t)S * (nc ? nc : 1));
  for (int32_t s = 0; s < S; s++) {
    int32_t rep = s * g->ranks_per_stage, h = sp_sim_host_of(rep);
    r.host[s] = host_at(h);
    r.speed[s] = sg_host_get_speed(r.host[s]);
    double sd = slowdown;
    if (sd < 0) {
      const char *v = sg_host_get_property_value(r.host[s], "comm_slowdown");
      sd = v ? g_ascii_strtod(v, NULL) : SP_STEPSIM_COMM_SLOWDOWN;
      if (!(sd >= 0 && sd < 100)) sd = SP_STEPSIM_COMM_SLOWDOWN;
    }
    r.share[s] = sd / (1.0 + sd);
    r.coll_lat[s] = sp_sim_host_coll_latency(h);
    for (guint c = 0; c < nc; c++) {
      const sp_comm *cm = &g_array_index(g->comms, sp_comm, c);
      if (cm->coll != SP_COLL_SEND_RECV || cm->kind != SP_COMM_PP) plan_flow(cm, rep, &r.plans[(size_t)s * nc + c]);
    }
  }
  /* actors: one per (stage, stream) with tasks */
  int32_t nq = S * SP_STREAM_COUNT;
  stream_actor *acts = g_new0(stream_actor, nq);
  for (int32_t q = 0; q < nq; q++) {
    acts[q].run = &r;
    acts[q].stage = q / SP_STREAM_COUNT;
    acts[q].stream = q % SP_STREAM_COUNT;
    acts[q].tasks = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    acts[q].waiting = NONE;
  }
  for (guint i = 0; i < n; i++) {
    const sp_task *t = &r.T[i];
    stream_actor *a = &acts[t->stage * SP_STREAM_COUNT + t->stream];
    g_array_append_val(a->tasks, i);
    r.owner[i] = a;
  }
  sp_sim_clock_reset();
  r.t0 = simgrid_get_clock();
  for (int32_t q = 0; q < nq; q++) {
    if (acts[q].tasks->len == 0) continue;
    acts[q].sem = sg_sem_init(0);
    char name[48];
    g_snprintf(name, sizeof name, "stage%d-%s", acts[q].stage, sp_stream_name((sp_stream)acts[q].stream));
    sg_actor_t a = sg_actor_init(name, r.host[acts[q].stage]);
    sg_actor_set_data(a, &acts[q]);
    sg_actor_start_(a, stream_main, 0, NULL);
  }
  gboolean lean = sp_sim_routed_lean(TRUE); /* the flows' routes without idle FATPIPEs */
  simgrid_run();
  sp_sim_routed_lean(lean);
  gboolean ok = r.done == n;
  if (!ok)
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "step simulation: %u of %u tasks never ran", n - r.done, n);
  double span = 0;
  for (guint i = 0; i < n; i++) span = MAX(span, r.end[i]);
  if (ok && start) memcpy(start, r.start, n * sizeof(double));
  if (ok && end) memcpy(end, r.end, n * sizeof(double));
  if (ok && makespan) *makespan = span;
  for (int32_t q = 0; q < nq; q++) {
    g_array_unref(acts[q].tasks);
    if (acts[q].sem) sg_sem_destroy(acts[q].sem);
  }
  g_free(acts);
  g_free(r.plans); g_free(r.coll_lat); g_free(r.share); g_free(r.speed); g_free(r.host);
  g_free(r.owner); g_free(r.end); g_free(r.start); g_free(r.succ); g_free(r.off); g_free(r.pending);
  return ok;
}

gboolean sp_stepsim_run(const sp_stepgraph *g, double slowdown, double *start, double *end, double *makespan,
                        GError **err)
{
  return run_graph(g, slowdown, FALSE, start, end, makespan, err);
}

gboolean sp_stepsim_run_merged(const sp_stepgraph *g, double slowdown, double *start, double *end,
                               double *makespan, GError **err)
{
  return run_graph(g, slowdown, TRUE, start, end, makespan, err);
}

void sp_stepsim_timeline_clear(sp_stepsim_timeline *t)
{
  if (t == NULL) return;
  sp_stepgraph_free(t->g);
  g_free(t->start);
  g_free(t->end);
  memset(t, 0, sizeof *t);
}

/* Micro-batches past which a large graph is run twice small and extrapolated
 * (sp_stepsim_set_periodic): the tasks a graph must have at least; -1: never. */
static int64_t periodic_min_tasks = SP_STEPSIM_PERIODIC_TASKS;

static guint periodic_runs; /* steps extrapolated so far */

void sp_stepsim_set_periodic(int64_t min_tasks)
{
  periodic_min_tasks = min_tasks;
}

guint sp_stepsim_periodic_runs(void)
{
  return periodic_runs;
}

/* Step graphs already simulated, by fingerprint: layouts of a sweep that differ only
 * where the graph does not (a ZeRO stage whose collectives are the same, say) run
 * once. A run depends on nothing but its graph, its prices and the slowdown (the
 * clock restarts at 0 for each), so a repeat gives the same result bit for bit. */
static GHashTable *memo; /* fingerprint (hex SHA-1) -> its sp_stepgraph_breakdown */
static guint memo_hits;

guint sp_stepsim_memo_hits(void)
{
  return memo_hits;
}

void sp_stepsim_memo_clear(void)
{
  if (memo != NULL) g_hash_table_remove_all(memo);
}

/* Bytes gathered before each checksum update: one update per field cost more than
 * the hash itself. */
#define FP_BUF 65536

typedef struct {
  GChecksum *h;
  guint8 buf[FP_BUF];
  size_t len;
} fp_state;

static void feed(fp_state *f, const void *p, size_t n)
{
  if (f->len + n > FP_BUF) {
    g_checksum_update(f->h, f->buf, (gssize)f->len);
    f->len = 0;
  }
  memcpy(f->buf + f->len, p, n);
  f->len += n;
}

/* Everything of a priced graph that its simulation and breakdown read, hashed (SHA-1:
 * the inputs are spsim's own, so a collision is a matter of chance, 2^-160). */
static char *fingerprint(const sp_stepgraph *g, double slowdown)
{
  fp_state *f = g_new(fp_state, 1);
  f->h = g_checksum_new(G_CHECKSUM_SHA1);
  f->len = 0;
  int64_t head[4] = { g->stages, g->ranks_per_stage, g->microbatches, g->sched };
  feed(f, head, sizeof head);
  feed(f, &slowdown, sizeof slowdown);
  for (guint i = 0; i < g->tasks->len; i++) {
    const sp_task *t = &g_array_index(g->tasks, sp_task, i);
    uint8_t b[4] = { t->kind, t->stream, t->phase, t->ndeps };
    int32_t v[6] = { t->stage, t->mb, t->chunk, t->layer, t->comm, t->peer };
    feed(f, b, sizeof b);
    feed(f, v, sizeof v);
    feed(f, &t->seconds, sizeof t->seconds);
    feed(f, t->deps, t->ndeps * sizeof t->deps[0]);
  }
  for (guint c = 0; c < g->comms->len; c++) {
    const sp_comm *cm = &g_array_index(g->comms, sp_comm, c);
    int32_t v[5] = { (int32_t)cm->kind, (int32_t)cm->when, (int32_t)cm->coll, cm->n, cm->stride };
    feed(f, v, sizeof v);
    feed(f, &cm->bytes, sizeof cm->bytes);
    feed(f, &cm->times, sizeof cm->times);
  }
  g_checksum_update(f->h, f->buf, (gssize)f->len);
  char *k = g_strdup(g_checksum_get_string(f->h));
  g_checksum_free(f->h);
  g_free(f);
  return k;
}

/* Build, price and run the step graph of @p l with @p mbs micro-batches per step (the
 * global batch to give that many), keeping the timeline in @p t. */
static gboolean eval_graph(const sp_step_ctx *c, const sp_layout *l, int64_t mbs, gboolean engine, double slowdown,
                           gboolean keep_times, sp_stepsim_timeline *t, GError **err)
{
  sp_step_ctx cm = *c;
  if (mbs > 0) cm.global_batch = mbs * (int64_t)l->dp * l->mb;
  t->g = sp_stepgraph_build(&cm, l, SP_SCHED_1F1B, err);
  if (t->g == NULL) return FALSE;
  guint n = t->g->tasks->len;
  t->start = g_new(double, n + 1);
  t->end = g_new(double, n + 1);
  double span = 0;
  if (!sp_stepgraph_price(t->g, &cm, err)) return FALSE;
  /* a kept timeline (a trace) needs its task times: run it */
  char *key = engine && !keep_times ? fingerprint(t->g, slowdown) : NULL;
  const sp_stepgraph_breakdown *hit = key != NULL && memo != NULL ? g_hash_table_lookup(memo, key) : NULL;
  if (hit != NULL) {
    memo_hits++;
    t->bd = *hit;
    g_free(key);
    return TRUE;
  }
  gboolean ok = engine ? run_graph(t->g, slowdown, !keep_times, t->start, t->end, &span, err)
                       : sp_stepgraph_schedule(t->g, t->start, t->end, &span, err);
  if (ok) sp_stepgraph_breakdown_of(t->g, t->start, t->end, &t->bd);
  if (ok && key != NULL) {
    if (memo == NULL) memo = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_insert(memo, key, g_memdup2(&t->bd, sizeof t->bd));
    key = NULL;
  }
  g_free(key);
  return ok;
}

/* x(m) on the line through x(m1) = @p a and x(m2) = @p b. */
static double along(double a, double b, int64_t m1, int64_t m2, int64_t m)
{
  return b + (b - a) * (double)(m - m2) / (double)(m2 - m1);
}

/* The breakdown of @p m micro-batches from runs of m1 < m2 < m (each stage's work grows
 * by one micro-batch's per micro-batch once the pipeline is full): FALSE where the runs
 * do not line up (another busiest stage, a term that would fall below zero). */
static gboolean extrapolate(const sp_stepgraph_breakdown *a, const sp_stepgraph_breakdown *b, int64_t m1, int64_t m2,
                            int64_t m, sp_stepgraph_breakdown *out)
{
  if (a->stage != b->stage || !(b->step_time >= a->step_time)) return FALSE;
  *out = *b;
  out->step_time = along(a->step_time, b->step_time, m1, m2, m);
  out->compute = along(a->compute, b->compute, m1, m2, m);
  out->idle = along(a->idle, b->idle, m1, m2, m);
  gboolean ok = out->compute >= 0 && out->idle >= -1e-9 * out->step_time;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    out->exposed[k] = along(a->exposed[k], b->exposed[k], m1, m2, m);
    out->comm[k] = along(a->comm[k], b->comm[k], m1, m2, m);
    ok = ok && out->exposed[k] >= -1e-9 * out->step_time && out->comm[k] >= -1e-9 * out->step_time;
  }
  out->idle = MAX(out->idle, 0.0);
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    out->exposed[k] = MAX(out->exposed[k], 0.0);
    out->comm[k] = MAX(out->comm[k], 0.0);
  }
  return ok;
}

gboolean sp_stepsim_eval(const sp_step_ctx *c, const sp_layout *l, gboolean engine, double slowdown,
                         sp_step_result *r, sp_stepsim_timeline *keep, GError **err)
{
  sp_stepsim_timeline t = { 0 };
  int64_t mbs = l->dp > 0 && l->mb > 0 ? c->global_batch / ((int64_t)l->dp * l->mb) : 0;
  /* whole groups of the interleaved schedule (pp micro-batches, or vppgroup's, with the
   * step's last, shorter group after them) */
  int64_t unit = sp_layout_vpp(l) > 1 ? sp_layout_vpp_group(l) : l->pp;
  int64_t rest = l->vpp_group > 0 && unit > 0 ? mbs % unit : 0;
  int64_t m1 = 2 * unit + rest, m2 = 3 * unit + rest;
  gboolean done = FALSE;
  /* A large step on the platform, not traced: its schedule repeats once the pipeline is
   * full, so the step is affine in the micro-batches past 2 pp (1F1B and interleaved
   * alike: warm-up and cool-down are fixed, the gradient reduction and optimizer step
   * end the step once). Runs of 2 and 3 groups of micro-batches (pp each, or vppgroup's,
   * then the step's last group) give the line, as the interleaved schedule needs whole
   * groups, when they are fewer than the step's. */
  /* SPSIM_MICROBATCHES=all: every micro-batch simulated (checks) */
  if (engine && keep == NULL && periodic_min_tasks >= 0 && mbs > m1 + m2 &&
      g_strcmp0(g_getenv("SPSIM_MICROBATCHES"), "all") != 0 &&
      (double)mbs * (double)c->model->layers * 40.0 >= (double)periodic_min_tasks) {
    sp_stepsim_timeline a = { 0 }, b = { 0 };
    sp_stepgraph_breakdown bd;
    if (!eval_graph(c, l, m1, engine, slowdown, FALSE, &a, err) || !eval_graph(c, l, m2, engine, slowdown, FALSE, &b, err)) {
      sp_stepsim_timeline_clear(&a);
      sp_stepsim_timeline_clear(&b);
      return FALSE;
    }
    if (extrapolate(&a.bd, &b.bd, m1, m2, mbs, &bd)) {
      t.bd = bd;
      done = TRUE;
      periodic_runs++;
    }
    sp_stepsim_timeline_clear(&a);
    sp_stepsim_timeline_clear(&b);
  }
  if (!done && !eval_graph(c, l, 0, engine, slowdown, keep != NULL, &t, err)) {
    sp_stepsim_timeline_clear(&t);
    return FALSE;
  }
  sp_step_set_time(c, l, r, t.bd.step_time);
  r->simulated = TRUE;
  r->compute = t.bd.compute;
  r->bubble = t.bd.idle;
  memcpy(r->exposed, t.bd.exposed, sizeof r->exposed);
  memcpy(r->comm, t.bd.comm, sizeof r->comm);
  if (keep != NULL) *keep = t;
  else sp_stepsim_timeline_clear(&t);
  return TRUE;
}
