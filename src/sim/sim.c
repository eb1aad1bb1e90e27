/* The SimGrid engine (see sim.h): platform loading, one actor per rank running
 * sp_exec over a SimGrid transport, cost and data modes, STEP and FLOW fidelity. */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>
#include <simgrid/mailbox.h>

#include "flow.h"
#include "platform.h"
#include "sim.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/tuning.h"

G_STATIC_ASSERT(sizeof(gpointer) >= 8); /* (src, tag) keys are packed into pointers */

#include "sim_priv.h"


/* ---- global engine state ------------------------------------------------ */

static struct {
  gboolean ready;
  char *path;
  int32_t nhosts;
  char **names;        /* declaration order */
  sg_host_t *hosts;
  double *mem_bw;      /* bytes/s, 0 = free */
  double *local_lat;   /* seconds per local step */
  double *coll_lat;    /* seconds charged once per collective (op id) per rank */
  int32_t *node;       /* host property "node", -1 when absent */
  int32_t *map;        /* rank -> host, map_n entries */
  int32_t map_n;
  GHashTable *lat;     /* (host a, host b) -> route latency + 1 (cache, filled inside actors) */
  uint32_t generation; /* mailbox namespace; bumped after a failed run */
  char **argv;         /* handed to simgrid_init, kept for the process lifetime */
  GPtrArray *args;     /* owns the strings of argv */
  sp_sim_compute_fn compute;
  void *compute_ud;
  sp_tune_arch arch;   /* GPU generation of the platform's `gpu` model (tuning model) */
  gboolean nvls;       /* platform property nvls: the NVSwitches reduce */
  sp_tune_cost cost;   /* cost attributes of the collective being priced (neutral: 1s) */
  /* link latencies scaled by the protocol (sp_sim_set_cost): every link on a route
   * between GPUs, its latency as loaded, and whether it lies inside a node */
  gboolean links_ready;
  guint nlinks;
  sg_link_t *links;
  double *link_lat0;
  gboolean *link_intra;
  double lat_fi, lat_fe; /* factors applied now (1, 1 as loaded) */
} g_sim = { .cost = { 1.0, 1.0, 1.0, 1.0 }, .lat_fi = 1.0, .lat_fe = 1.0 };

/* SPSIM_FLOW_STEPS set: FLOW summaries of rings read every step (no
 * sp_lower_coll_pattern), to check that both give the same programs. */
static gboolean g_sim_no_pattern;

const char *sp_fidelity_name(sp_fidelity f) { return f == SP_FIDELITY_FLOW ? "flow" : "step"; }

gboolean sp_fidelity_parse(const char *s, sp_fidelity *out, GError **err)
{
  if (s && strcmp(s, "step") == 0) {
    *out = SP_FIDELITY_STEP;
    return TRUE;
  }
  if (s && strcmp(s, "flow") == 0) {
    *out = SP_FIDELITY_FLOW;
    return TRUE;
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown fidelity '%s' (use step or flow)",
              s ? s : "");
  return FALSE;
}

gboolean sp_sim_ready(void) { return g_sim.ready; }
const char *sp_sim_platform_path(void) { return g_sim.path; }
int32_t sp_sim_num_hosts(void) { return g_sim.ready ? g_sim.nhosts : 0; }

const char *sp_sim_host_name(int32_t i)
{
  if (!g_sim.ready || i < 0 || i >= g_sim.nhosts)
    return NULL;
  return g_sim.names[i];
}

void sp_sim_set_compute_hook(sp_sim_compute_fn fn, void *ud)
{
  g_sim.compute = fn;
  g_sim.compute_ud = ud;
}

int32_t sp_sim_host_of(int32_t r)
{
  return (r >= 0 && r < g_sim.map_n) ? g_sim.map[r] : r;
}

gboolean sp_sim_set_host_map(const int32_t *map, int32_t n, GError **err)
{
  if (map == NULL || n <= 0) {
    g_clear_pointer(&g_sim.map, g_free);
    g_sim.map_n = 0;
    return TRUE;
  }
  int32_t limit = g_sim.ready ? g_sim.nhosts : G_MAXINT32;
  GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int32_t r = 0; r < n; r++) {
    if (map[r] < 0 || map[r] >= limit || g_hash_table_contains(seen, GINT_TO_POINTER(map[r] + 1))) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "host map: rank %d -> host %d is %s; map each rank to a distinct host in [0, %d)",
                  r, map[r], map[r] < 0 || map[r] >= limit ? "out of range" : "already used",
                  limit);
      g_hash_table_unref(seen);
      return FALSE;
    }
    g_hash_table_add(seen, GINT_TO_POINTER(map[r] + 1));
  }
  g_hash_table_unref(seen);
  g_free(g_sim.map);
  g_sim.map = g_memdup2(map, sizeof(int32_t) * (gsize)n);
  g_sim.map_n = n;
  return TRUE;
}


/* A non-negative integer property ("node"); -1 when absent or not a number. */
static int32_t parse_node(const char *s)
{
  if (s == NULL)
    return -1;
  char *end = NULL;
  errno = 0;
  gint64 v = g_ascii_strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < 0 || v > G_MAXINT32)
    return -1;
  return (int32_t)v;
}

/* "h10" after "h9": compare digit runs numerically (fallback host order). */
static gint natural_cmp(gconstpointer pa, gconstpointer pb)
{
  const char *a = sg_host_get_name(*(const sg_host_t *)pa), *b = sg_host_get_name(*(const sg_host_t *)pb);
  while (*a && *b) {
    if (g_ascii_isdigit(*a) && g_ascii_isdigit(*b)) {
      char *ea, *eb;
      unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
      if (x != y)
        return x < y ? -1 : 1;
      a = ea;
      b = eb;
    } else {
      if (*a != *b)
        return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
      a++;
      b++;
    }
  }
  return (unsigned char)*a - (unsigned char)*b;
}

gboolean sp_sim_init(const char *platform_xml, GError **err)
{
  g_sim_no_pattern = g_getenv("SPSIM_FLOW_STEPS") != NULL;
  if (platform_xml == NULL || *platform_xml == '\0') {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no platform file given");
    return FALSE;
  }
  if (g_sim.ready) {
    if (strcmp(g_sim.path, platform_xml) == 0)
      return TRUE;
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "platform '%s' is already loaded; SimGrid holds one platform per process, so "
                "'%s' needs a new process",
                g_sim.path, platform_xml);
    return FALSE;
  }
  sp_plat_desc *pp = sp_sim_read_checked(platform_xml, err);
  gboolean ok = pp != NULL;
  if (ok) {
    /* simgrid_init drops the arguments it consumes from argv (and may refer to argv[0]
     * later): it gets a shallow copy, the strings stay owned by g_sim.args */
    GPtrArray *a = sp_sim_args_new(pp, TRUE);
    int argc = (int)a->len - 1;
    char **argv = g_new0(char *, a->len);
    memcpy(argv, a->pdata, sizeof(char *) * a->len);
    g_sim.args = a;
    g_sim.argv = argv;
    simgrid_init(&argc, argv);
    simgrid_load_platform(platform_xml);
    sp_sim_seal_platform();

    size_t n = sg_host_count();
    g_sim.nhosts = (int32_t)n;
    g_sim.hosts = g_new0(sg_host_t, n);
    if (!sp_sim_hosts_by_names(pp->names, g_sim.hosts, n)) {
      sg_host_t *list = sg_host_list();
      memcpy(g_sim.hosts, list, n * sizeof(sg_host_t));
      free(list);
      qsort(g_sim.hosts, n, sizeof(sg_host_t), natural_cmp);
    }
    g_sim.names = g_new0(char *, n + 1);
    g_sim.mem_bw = g_new0(double, n);
    g_sim.local_lat = g_new0(double, n);
    g_sim.coll_lat = g_new0(double, n);
    g_sim.node = g_new0(int32_t, n);
    for (size_t i = 0; i < n; i++) {
      g_sim.names[i] = g_strdup(sg_host_get_name(g_sim.hosts[i]));
      g_sim.mem_bw[i] = sp_plat_parse_unit(sg_host_get_property_value(g_sim.hosts[i], "mem_bw"), FALSE);
      g_sim.local_lat[i] = sp_plat_parse_unit(sg_host_get_property_value(g_sim.hosts[i], "local_latency"), TRUE);
      g_sim.coll_lat[i] = sp_plat_parse_unit(sg_host_get_property_value(g_sim.hosts[i], "coll_latency"), TRUE);
      g_sim.node[i] = parse_node(sg_host_get_property_value(g_sim.hosts[i], "node"));
    }
    g_sim.lat = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    g_sim.arch = sp_tune_arch_of_model(pp->gpu_model);
    g_sim.nvls = pp->nvls;
    g_sim.path = g_strdup(platform_xml);
    g_sim.ready = TRUE;
  }
  sp_plat_desc_free(pp);
  return ok;
}

/* ---- local step costs ------------------------------------------------------ */

/* Seconds of a local step on host h (COMPUTE: with speed; markers excluded). */
static double local_seconds(int32_t h, const sp_step *s, double *flops_part)
{
  double bw = g_sim.mem_bw[h], lat = g_sim.local_lat[h];
  double touched = 0.0;
  *flops_part = 0.0;
  switch (s->kind) {
  case SP_STEP_COPY: touched = 2.0 * (double)s->bytes; break;
  case SP_STEP_REDUCE: touched = 3.0 * (double)s->count * (double)sp_dtype_size(s->dtype); break;
  case SP_STEP_SCALE: touched = 2.0 * (double)s->count * (double)sp_dtype_size(s->dtype); break;
  case SP_STEP_FILL: touched = (double)s->bytes; break;
  case SP_STEP_COMPUTE: {
    double speed = sg_host_get_speed(g_sim.hosts[h]);
    double tf = speed > 0 ? s->flops / speed : 0.0;
    double tm = bw > 0 ? (double)s->bytes / bw : 0.0;
    *flops_part = tf;
    return MAX(tf, tm);
  }
  default: return 0.0;
  }
  return (bw > 0 ? touched / bw : 0.0) + lat;
}

static double flow_cost(void *ud, int32_t rank, const sp_step *s)
{
  (void)ud;
  double fp;
  return local_seconds(sp_sim_host_of(rank), s, &fp);
}

/* Route latency between two hosts; must run inside an actor (SimGrid 3.32). */
static double route_latency(int32_t a, int32_t b)
{
  gint64 key = ((gint64)a << 32) | (uint32_t)b;
  double *v = g_hash_table_lookup(g_sim.lat, &key);
  if (v)
    return *v;
  gint64 *k = g_new(gint64, 1);
  double *val = g_new(double, 1);
  *k = key;
  *val = sg_host_get_route_latency(g_sim.hosts[a], g_sim.hosts[b]);
  g_hash_table_insert(g_sim.lat, k, val);
  return *val;
}

/* ---- one run ---------------------------------------------------------------- */

typedef struct sim_msg {
  int32_t src, tag;
  uint64_t bytes;
  void *payload;               /* packed bytes (data mode) or NULL */
  struct sim_msg *prev, *next; /* run-wide list of live messages, freed if a run fails */
} sim_msg;

typedef struct {
  int32_t peer, tag;
  void *data;
  uint64_t rows, row_bytes, stride;
  gboolean done;
} posted_recv;

typedef struct sim_run sim_run;

typedef struct {
  sim_run *run;
  int32_t rank, host;
  sp_program *prog;
  gboolean owned;      /* prog released through the source */
  void *const *bufs;
  sp_exec *exec;
  sp_transport transport;
  GArray *sends;       /* sg_comm_t of the open block */
  GArray *recvs;       /* posted_recv of the open block */
  GArray *comms;       /* scratch for wait_all */
  gpointer *slots;     /* get_async landing slots */
  guint nslots;
  GHashTable *stash;   /* (src, tag) -> GQueue of sim_msg arrived early */
  guint comm_pc;       /* coll_latency: index of the next SEND/RECV step to be posted */
  GHashTable *ops_seen;/* coll_latency: op ids (+ 1) whose latency was charged */
  GError *error;
  gboolean finished;
  double end;
} rank_ctx;

struct sim_run {
  int32_t world;
  rank_ctx *ranks;
  sg_mailbox_t *mbox;  /* per rank, created on first use */
  sim_msg live;        /* sentinel */
  double t0;
  sp_trace *trace;
  gboolean data;
  gboolean killing;
};

static double sim_now(const sim_run *run) { return simgrid_get_clock() - run->t0; }

static sg_mailbox_t mbox_of(sim_run *run, int32_t r)
{
  if (run->mbox[r] == NULL) {
    char name[64];
    g_snprintf(name, sizeof name, "spsim.g%u.r%d", g_sim.generation, r);
    run->mbox[r] = sg_mailbox_by_name(name);
  }
  return run->mbox[r];
}

static void msg_free(sim_msg *m)
{
  m->prev->next = m->next;
  m->next->prev = m->prev;
  g_free(m->payload);
  g_free(m);
}

static gpointer key_of(int32_t src, int32_t tag)
{
  return GSIZE_TO_POINTER(((gsize)(uint32_t)src << 32) | (uint32_t)tag);
}

static guint key_hash(gconstpointer k)
{
  guint64 x = (guint64)GPOINTER_TO_SIZE(k);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (guint)x;
}

static void queue_free(gpointer q) { g_queue_free((GQueue *)q); }

/* coll_latency: the executor posts the program's SEND/RECV steps in order, so
 * comm_pc finds the step being posted; the first post of every op id waits for
 * the host's per-collective latency before it is made. */
static void charge_coll_latency(rank_ctx *c)
{
  double lat = g_sim.coll_lat[c->host] * g_sim.cost.coll_lat;
  if (lat <= 0.0 || c->prog == NULL)
    return;
  guint len = sp_program_len(c->prog);
  while (c->comm_pc < len) {
    sp_step_kind k = sp_program_step(c->prog, c->comm_pc)->kind;
    if (k == SP_STEP_SEND || k == SP_STEP_RECV)
      break;
    c->comm_pc++;
  }
  if (c->comm_pc >= len)
    return;
  uint32_t op = sp_program_step(c->prog, c->comm_pc)->op;
  c->comm_pc++;
  if (c->ops_seen == NULL)
    c->ops_seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  gpointer key = GSIZE_TO_POINTER((gsize)op + 1);
  if (g_hash_table_contains(c->ops_seen, key))
    return;
  g_hash_table_add(c->ops_seen, key);
  sg_actor_sleep_for(lat);
}

static gboolean sim_post_send(void *vctx, int32_t peer, int32_t tag, const void *data, uint64_t rows,
                              uint64_t row_bytes, uint64_t stride, GError **err)
{
  rank_ctx *c = vctx;
  sim_run *run = c->run;
  if (peer < 0 || peer >= run->world || peer == c->rank) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d sends to rank %d, outside [0, %d)",
                c->rank, peer, run->world);
    return FALSE;
  }
  charge_coll_latency(c);
  sim_msg *m = g_new0(sim_msg, 1);
  m->src = c->rank;
  m->tag = tag;
  m->bytes = rows * row_bytes;
  if (data && m->bytes > 0) {
    m->payload = g_malloc(m->bytes);
    sp_pack_host(m->payload, data, rows, row_bytes, stride);
  }
  m->next = run->live.next;
  m->prev = &run->live;
  run->live.next->prev = m;
  run->live.next = m;
  /* the protocol's bandwidth fraction: bytes / f on the wire (the payload is exact) */
  double wire = g_sim.cost.wire == 1.0 ? (double)m->bytes : floor((double)m->bytes * g_sim.cost.wire + 0.5);
  sg_comm_t comm = sg_mailbox_put_async(mbox_of(run, peer), m, (long)wire);
  g_array_append_val(c->sends, comm);
  return TRUE;
}

static gboolean sim_post_recv(void *vctx, int32_t peer, int32_t tag, void *data, uint64_t rows,
                              uint64_t row_bytes, uint64_t stride, GError **err)
{
  rank_ctx *c = vctx;
  if (peer < 0 || peer >= c->run->world || peer == c->rank) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d receives from rank %d, outside [0, %d)",
                c->rank, peer, c->run->world);
    return FALSE;
  }
  charge_coll_latency(c);
  posted_recv pr = { peer, tag, data, rows, row_bytes, stride, FALSE };
  g_array_append_val(c->recvs, pr);
  return TRUE;
}

/* Hand message @m to posted receive @pr. */
static gboolean deliver(rank_ctx *c, posted_recv *pr, sim_msg *m, GError **err)
{
  uint64_t want = pr->rows * pr->row_bytes;
  if (m->bytes != want) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                "rank %d posted a receive of %" G_GUINT64_FORMAT " bytes from rank %d (tag %d) but "
                "the message carries %" G_GUINT64_FORMAT " bytes; the programs do not match",
                c->rank, want, m->src, m->tag, m->bytes);
    msg_free(m);
    return FALSE;
  }
  if (pr->data && m->payload)
    sp_unpack_host(pr->data, m->payload, pr->rows, pr->row_bytes, pr->stride);
  msg_free(m);
  pr->done = TRUE;
  return TRUE;
}

static sim_msg *stash_pop(rank_ctx *c, int32_t src, int32_t tag)
{
  gpointer k = key_of(src, tag);
  GQueue *q = g_hash_table_lookup(c->stash, k);
  if (q == NULL)
    return NULL;
  sim_msg *m = g_queue_pop_head(q);
  if (g_queue_is_empty(q))
    g_hash_table_remove(c->stash, k);
  return m;
}

static void stash_push(rank_ctx *c, sim_msg *m)
{
  gpointer k = key_of(m->src, m->tag);
  GQueue *q = g_hash_table_lookup(c->stash, k);
  if (q == NULL) {
    q = g_queue_new();
    g_hash_table_insert(c->stash, k, q);
  }
  g_queue_push_tail(q, m);
}

/* Match stashed messages to pending receives in posting order; @return receives left. */
static gboolean match_pending(rank_ctx *c, guint *left, GError **err)
{
  guint n = 0;
  for (guint i = 0; i < c->recvs->len; i++) {
    posted_recv *pr = &g_array_index(c->recvs, posted_recv, i);
    if (pr->done)
      continue;
    sim_msg *m = g_hash_table_size(c->stash) ? stash_pop(c, pr->peer, pr->tag) : NULL;
    if (m) {
      if (!deliver(c, pr, m, err))
        return FALSE;
    } else {
      n++;
    }
  }
  *left = n;
  return TRUE;
}

static sp_wait_status sim_wait_all(void *vctx, GError **err)
{
  rank_ctx *c = vctx;
  sim_run *run = c->run;
  guint left = 0;
  if (!match_pending(c, &left, err))
    return SP_WAIT_ERROR;
  gboolean first = TRUE;
  while (first || left > 0) {
    g_array_set_size(c->comms, 0);
    if (first)
      g_array_append_vals(c->comms, c->sends->data, c->sends->len);
    if (left > c->nslots) {
      c->slots = g_renew(gpointer, c->slots, left);
      c->nslots = left;
    }
    for (guint i = 0; i < left; i++) {
      c->slots[i] = NULL;
      sg_comm_t g = sg_mailbox_get_async(mbox_of(run, c->rank), &c->slots[i]);
      g_array_append_val(c->comms, g);
    }
    if (c->comms->len > 0)
      sg_comm_wait_all((sg_comm_t *)(void *)c->comms->data, c->comms->len);
    first = FALSE;
    for (guint i = 0; i < left; i++)
      stash_push(c, c->slots[i]);
    if (!match_pending(c, &left, err))
      return SP_WAIT_ERROR;
  }
  g_array_set_size(c->sends, 0);
  g_array_set_size(c->recvs, 0);
  return SP_WAIT_DONE;
}

static gboolean sim_local(void *vctx, const sp_step *s, void *const *bufs, GError **err)
{
  rank_ctx *c = vctx;
  if (s->kind == SP_STEP_COMPUTE && s->tag == SP_SIM_FLOW_TAG) {
    double t = s->scale;
    if (s->count > 0 && s->peer >= 0 && s->peer < c->run->world)
      t += (double)s->count * route_latency(c->host, sp_sim_host_of(s->peer));
    if (t > 0)
      sg_actor_sleep_for(t);
    return TRUE;
  }
  if (bufs && !sp_step_run_host(s, bufs, err))
    return FALSE;
  if (bufs && s->kind == SP_STEP_COMPUTE && g_sim.compute &&
      !g_sim.compute(g_sim.compute_ud, c->rank, s, bufs, err))
    return FALSE;
  double flops_t = 0.0;
  double t = local_seconds(c->host, s, &flops_t);
  if (s->kind == SP_STEP_COMPUTE && s->flops > 0 && flops_t > 0) {
    sg_actor_execute(s->flops); /* shares the host's speed with co-located actors */
    t -= flops_t;
  }
  if (t > 0)
    sg_actor_sleep_for(t);
  return TRUE;
}

static double sim_clock(void *vctx) { return sim_now(((rank_ctx *)vctx)->run); }

static const sp_transport_ops sim_ops = {
  .name = "simgrid",
  .post_send = sim_post_send,
  .post_recv = sim_post_recv,
  .wait_all = sim_wait_all,
  .local = sim_local,
  .clock = sim_clock,
};

static void rank_main(int argc, char **argv)
{
  (void)argc; (void)argv;
  rank_ctx *c = sg_actor_self_get_data();
  sp_wait_status st = sp_exec_resume(c->exec, &c->error);
  if (st == SP_WAIT_PENDING && c->error == NULL)
    g_set_error(&c->error, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: the executor stopped early",
                c->rank);
  c->end = sim_now(c->run);
  if (st == SP_WAIT_DONE) {
    c->finished = TRUE;
  } else if (!c->run->killing) {
    /* the others would wait forever for this rank: stop them */
    c->run->killing = TRUE;
    sg_actor_kill_all();
  }
}

/* Runs the prepared contexts; frees what the actors left behind. */
static gboolean run_actors(sim_run *run, double *makespan, GError **err)
{
  run->t0 = simgrid_get_clock();
  for (int32_t r = 0; r < run->world; r++) {
    rank_ctx *c = &run->ranks[r];
    if (c->prog == NULL || sp_program_len(c->prog) == 0) {
      c->finished = TRUE;
      continue;
    }
    c->transport.ops = &sim_ops;
    c->transport.ctx = c;
    c->exec = sp_exec_new(c->prog, &c->transport, c->bufs, run->trace);
    c->sends = g_array_new(FALSE, FALSE, sizeof(sg_comm_t));
    c->recvs = g_array_new(FALSE, FALSE, sizeof(posted_recv));
    c->comms = g_array_new(FALSE, FALSE, sizeof(sg_comm_t));
    c->stash = g_hash_table_new_full(key_hash, g_direct_equal, NULL, queue_free);
    char name[32];
    g_snprintf(name, sizeof name, "rank%d", r);
    sg_actor_t a = sg_actor_init(name, g_sim.hosts[c->host]);
    sg_actor_set_data(a, c);
    sg_actor_start_(a, rank_main, 0, NULL);
  }
  simgrid_run();

  gboolean ok = TRUE;
  double end = 0.0;
  GString *blocked = g_string_new(NULL);
  int nblocked = 0;
  for (int32_t r = 0; r < run->world; r++) {
    rank_ctx *c = &run->ranks[r];
    if (c->error && ok) {
      g_propagate_error(err, c->error);
      c->error = NULL;
      ok = FALSE;
    }
    if (!c->finished) {
      if (nblocked < 8)
        g_string_append_printf(blocked, "%s%d", nblocked ? ", " : "", r);
      nblocked++;
    } else {
      end = MAX(end, c->end);
    }
  }
  if (ok && nblocked > 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                "deadlock: %d rank%s never finished (%s%s); the schedule waits for messages that "
                "are never sent",
                nblocked, nblocked > 1 ? "s" : "", blocked->str, nblocked > 8 ? ", ..." : "");
    ok = FALSE;
  }
  g_string_free(blocked, TRUE);
  if (ok && makespan)
    *makespan = end;
  if (!ok)
    g_sim.generation++; /* messages may linger in the old mailboxes */
  return ok;
}

static void run_free(sim_run *run, sp_sim_release_fn release, void *ud)
{
  for (int32_t r = 0; r < run->world; r++) {
    rank_ctx *c = &run->ranks[r];
    if (c->exec)
      sp_exec_free(c->exec);
    if (c->sends) g_array_unref(c->sends);
    if (c->recvs) g_array_unref(c->recvs);
    if (c->comms) g_array_unref(c->comms);
    if (c->stash) g_hash_table_unref(c->stash);
    if (c->ops_seen) g_hash_table_unref(c->ops_seen);
    g_free(c->slots);
    g_clear_error(&c->error);
    if (c->owned && c->prog) {
      if (release)
        release(ud, c->prog);
    }
  }
  while (run->live.next != &run->live)
    msg_free(run->live.next);
  g_free(run->mbox);
  g_free(run->ranks);
}

static gboolean check_world(int32_t world, GError **err)
{
  if (!g_sim.ready) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no platform loaded; call sp_sim_init first");
    return FALSE;
  }
  if (world <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--ranks must be at least 1 (got %d)", world);
    return FALSE;
  }
  if (world > g_sim.nhosts) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "platform has %d hosts, --ranks asks for %d",
                g_sim.nhosts, world);
    return FALSE;
  }
  for (int32_t r = 0; r < world; r++) {
    int32_t h = sp_sim_host_of(r);
    if (h < 0 || h >= g_sim.nhosts) {
      g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                  "rank %d maps to host %d but the platform has %d hosts", r, h, g_sim.nhosts);
      return FALSE;
    }
  }
  return TRUE;
}

static void init_run(sim_run *run, int32_t world, sp_trace *trace, gboolean data)
{
  memset(run, 0, sizeof *run);
  run->world = world;
  run->ranks = g_new0(rank_ctx, world);
  run->mbox = g_new0(sg_mailbox_t, world);
  run->live.next = run->live.prev = &run->live;
  run->trace = trace;
  run->data = data;
  for (int32_t r = 0; r < world; r++) {
    run->ranks[r].run = run;
    run->ranks[r].rank = r;
    run->ranks[r].host = sp_sim_host_of(r);
  }
}

typedef struct {
  sp_program *const *progs;
} array_src;

static sp_program *array_get(void *ud, int32_t rank, GError **err)
{
  (void)err;
  return ((array_src *)ud)->progs[rank];
}

/* FLOW, for sources that can stream: summarise every rank of [0, @p world) into
 * @p fp (@p refine: every rank sp_flow_plan_needs) with sp_flow_plan_begin,
 * sp_flow_sum_feed and sp_flow_sum_end, without materialising programs. */
typedef gboolean (*flow_stream_fn)(void *ud, sp_flow_plan *fp, int32_t world, gboolean refine,
                                   GError **err);

/* FLOW: summarise every rank (streamed when @p stream is not NULL, else from the
 * programs of @p get), reconcile, emit merged programs. */
static gboolean flow_programs_with(sp_sim_program_fn get, sp_sim_release_fn release,
                                   flow_stream_fn stream, void *ud, int32_t world,
                                   gboolean trusted, gboolean coalesce, gboolean *unaligned,
                                   sp_program **out, GError **err)
{
  sp_flow_plan *fp = sp_flow_plan_new(world, flow_cost, NULL);
  sp_flow_plan_set_coalesce(fp, coalesce);
  gboolean ok = TRUE;
  if (stream != NULL)
    ok = stream(ud, fp, world, FALSE, err);
  for (int32_t r = 0; r < world && ok && stream == NULL; r++) {
    sp_program *p = get(ud, r, err);
    if (p == NULL) {
      ok = FALSE;
      break;
    }
    if (p->rank != r) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "program %d belongs to rank %d", r, p->rank);
      ok = FALSE;
    } else {
      /* the executor validates what it runs; merged programs must come from valid ones */
      ok = (trusted || sp_program_validate(p, world, err)) && sp_flow_plan_add(fp, p, err);
    }
    if (release)
      release(ud, p);
  }
  ok = ok && sp_flow_plan_reconcile(fp, err);
  if (ok && stream != NULL)
    ok = stream(ud, fp, world, TRUE, err);
  for (int32_t r = 0; r < world && ok && stream == NULL; r++) {
    if (!sp_flow_plan_needs(fp, r))
      continue;
    sp_program *p = get(ud, r, err);
    if (p == NULL) {
      ok = FALSE;
      break;
    }
    ok = sp_flow_plan_refine(fp, p, err);
    if (release)
      release(ud, p);
  }
  for (int32_t r = 0; r < world && ok; r++)
    out[r] = sp_flow_plan_emit(fp, r);
  *unaligned = !ok && sp_flow_plan_unaligned(fp);
  sp_flow_plan_free(fp);
  return ok;
}

static gboolean flow_programs(sp_sim_program_fn get, sp_sim_release_fn release,
                              flow_stream_fn stream, void *ud, int32_t world, gboolean trusted,
                              sp_program **out, GError **err)
{
  gboolean unaligned = FALSE;
  if (flow_programs_with(get, release, stream, ud, world, trusted, TRUE, &unaligned, out, err))
    return TRUE;
  if (!unaligned)
    return FALSE;
  /* a peer splits messages that a rank posts in one block: do not coalesce */
  g_clear_error(err);
  return flow_programs_with(get, release, stream, ud, world, trusted, FALSE, &unaligned, out, err);
}

static void free_prog(void *ud, sp_program *p)
{
  (void)ud;
  sp_program_free(p);
}

static gboolean run_common(sp_sim_program_fn get, sp_sim_release_fn release,
                           flow_stream_fn stream, void *ud, int32_t world, gboolean trusted,
                           void **const *bufs, sp_fidelity fid, sp_trace *trace,
                           double *makespan, GError **err)
{
  if (!check_world(world, err))
    return FALSE;
  if (fid == SP_FIDELITY_FLOW && bufs != NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "flow fidelity merges messages and runs in cost mode only; verify with "
                "--fidelity step");
    return FALSE;
  }
  sim_run run;
  init_run(&run, world, trace, bufs != NULL);
  gboolean ok = TRUE;
  if (fid == SP_FIDELITY_FLOW) {
    sp_program **fl = g_new0(sp_program *, world);
    ok = flow_programs(get, release, stream, ud, world, trusted, fl, err);
    for (int32_t r = 0; r < world; r++) {
      run.ranks[r].prog = fl[r];
      run.ranks[r].owned = TRUE;
    }
    g_free(fl);
    if (ok)
      ok = run_actors(&run, makespan, err);
    run_free(&run, free_prog, NULL);
  } else {
    for (int32_t r = 0; r < world && ok; r++) {
      rank_ctx *c = &run.ranks[r];
      c->prog = get(ud, r, err);
      c->owned = TRUE;
      if (c->prog == NULL) {
        ok = FALSE;
      } else if (c->prog->rank != r) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "program %d belongs to rank %d", r,
                    c->prog->rank);
        ok = FALSE;
      } else if (!trusted && !sp_program_validate(c->prog, world, err)) {
        ok = FALSE;
      } else if (bufs) {
        c->bufs = bufs[r];
        if (c->bufs == NULL && c->prog->bufs->len > 0) {
          g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d has no buffers in data mode", r);
          ok = FALSE;
        }
      }
    }
    if (ok)
      ok = run_actors(&run, makespan, err);
    run_free(&run, release, ud);
  }
  return ok;
}

gboolean sp_sim_run(sp_program *const *progs, int32_t world, void **const *bufs,
                    sp_fidelity fid, sp_trace *trace, double *makespan, GError **err)
{
  if (progs == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "sp_sim_run: no programs");
    return FALSE;
  }
  for (int32_t r = 0; r < world; r++)
    if (progs[r] == NULL) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "sp_sim_run: rank %d has no program", r);
      return FALSE;
    }
  array_src src = { progs };
  return run_common(array_get, NULL, NULL, &src, world, FALSE, bufs, fid, trace, makespan, err);
}

gboolean sp_sim_run_source(sp_sim_program_fn get, sp_sim_release_fn release, void *ud,
                           int32_t world, sp_fidelity fid, sp_trace *trace, double *makespan,
                           GError **err)
{
  return run_common(get, release, NULL, ud, world, FALSE, NULL, fid, trace, makespan, err);
}

gboolean sp_sim_run_source_lowered(sp_sim_program_fn get, sp_sim_release_fn release, void *ud,
                                   int32_t world, sp_fidelity fid, sp_trace *trace,
                                   double *makespan, GError **err)
{
  return run_common(get, release, NULL, ud, world, TRUE, NULL, fid, trace, makespan, err);
}

/* ---- collectives in cost mode -------------------------------------------------- */

typedef struct {
  const sp_coll_spec *spec;
  sp_program *spare;  /* a released program, reused by the next get (FLOW) */
  gboolean comm_only; /* FLOW: local steps cost nothing on every member's host */
  gboolean in_place;  /* one buffer for in and out (sp_lower_coll's in_buf == out_buf) */
  /* several groups run together (sp_sim_coll_groups_time): rank r is member
   * member[r] of specs[group[r]] (group -1: idle); spec is specs[0] */
  const sp_coll_spec *specs;
  const int32_t *group, *member;
} coll_src;

/* The spec of @p rank and its index in it (*me < 0: not a member). */
static const sp_coll_spec *coll_spec_of(const coll_src *src, int32_t rank, int32_t *me)
{
  if (src->group == NULL) {
    *me = sp_coll_index_of(src->spec, rank);
    return src->spec;
  }
  int32_t g = src->group[rank];
  *me = g < 0 ? -1 : src->member[rank];
  return g < 0 ? src->spec : &src->specs[g];
}

/* The in and out buffers of a member's program for @p src: two, or one of the
 * larger size when in place. */
static void coll_buffers(const coll_src *src, const sp_coll_spec *spec, sp_program *p, uint32_t *in,
                         uint32_t *out)
{
  size_t es = sp_dtype_size(spec->dtype);
  if (src->in_place) {
    *in = *out = sp_program_add_buffer(p, MAX(sp_coll_in_count(spec), sp_coll_out_count(spec)) * es, "inout");
    return;
  }
  *in = sp_program_add_buffer(p, sp_coll_in_count(spec) * es, "in");
  *out = sp_program_add_buffer(p, sp_coll_out_count(spec) * es, "out");
}

/* A program for @p rank: @p *spare emptied (its arrays keep their capacity, so
 * FLOW's lower-summarise-release loop does not grow and fault in megabytes of
 * steps for every rank of a large group), else a new one. */
static sp_program *program_reuse(sp_program **spare, int32_t rank)
{
  sp_program *p = *spare;
  if (p == NULL)
    return sp_program_new(rank);
  *spare = NULL;
  p->rank = rank;
  g_array_set_size(p->bufs, 0); /* the clear function frees the names */
  g_array_set_size(p->steps, 0);
  return p;
}

static void coll_release(void *ud, sp_program *p)
{
  coll_src *src = ud;
  if (src->spare == NULL)
    src->spare = p;
  else
    sp_program_free(p);
}

static sp_program *coll_get(void *ud, int32_t rank, GError **err)
{
  coll_src *src = ud;
  int32_t me;
  const sp_coll_spec *spec = coll_spec_of(src, rank, &me);
  sp_program *p = program_reuse(&src->spare, rank);
  if (me < 0)
    return p;
  uint32_t in, out;
  coll_buffers(src, spec, p, &in, &out);
  if (!sp_lower_coll(p, spec, in, out, err)) {
    sp_program_free(p);
    return NULL;
  }
  return p;
}

/* Do local steps (COPY, REDUCE, SCALE, FILL) cost exactly 0 s on the hosts of all
 * members of @p spec (no mem_bw, no local_latency: local_seconds is 0.0 + 0.0)?
 * Then the FLOW summary adds 0.0 for each, which changes no sum, and the
 * lowering may omit them. */
static gboolean free_local_steps(const sp_coll_spec *spec)
{
  for (int32_t i = 0; i < spec->n; i++) {
    int32_t h = sp_sim_host_of(spec->ranks[i]);
    if (h < 0 || h >= g_sim.nhosts || g_sim.mem_bw[h] > 0 || g_sim.local_lat[h] != 0.0)
      return FALSE;
  }
  return TRUE;
}

static void coll_sink(void *ud, const sp_program *prog, const sp_step *steps, guint n)
{
  (void)prog;
  sp_flow_sum_feed(ud, steps, n);
}

/* FLOW: lower @p rank straight into its summary (sp_lower_coll_stream), so a rank's
 * program never exists whole: at 4,096 ranks with 8 channels it would be 170,000
 * steps (24 MB) written and read back per rank. @p spare: a program to reuse. */
static gboolean coll_stream_rank(const coll_src *src, sp_program **spare, sp_flow_plan *fp,
                                 int32_t rank, gboolean refine, GError **err)
{
  int32_t me;
  const sp_coll_spec *spec = coll_spec_of(src, rank, &me);
  sp_flow_sum *su = sp_flow_plan_begin(fp, rank, refine, err);
  if (su == NULL)
    return FALSE;
  gboolean ok = TRUE;
  sp_step posts[2 * SP_MAX_CHANNELS];
  uint64_t totals[2 * SP_MAX_CHANNELS], nblocks = 0;
  guint np = 0;
  if (me >= 0 && !refine && src->comm_only && !g_sim_no_pattern &&
      sp_lower_coll_pattern(spec, me, posts, &np, totals, &nblocks) &&
      sp_flow_sum_feed_repeat(su, posts, np, nblocks, totals)) {
    /* a ring whose blocks all post alike: its summary without its steps */
  } else if (me >= 0) {
    sp_program *p = program_reuse(spare, rank);
    uint32_t in, out;
    coll_buffers(src, spec, p, &in, &out);
    ok = sp_lower_coll_stream(p, spec, in, out, src->comm_only, coll_sink, su, err);
    if (*spare == NULL)
      *spare = p;
    else
      sp_program_free(p);
  }
  /* always end (it frees the summary); a lowering error is the one reported */
  if (!sp_flow_sum_end(su, ok ? err : NULL))
    ok = FALSE;
  return ok;
}

/* A worker of coll_stream: ranks first, first + step, ... (in order, up to the
 * first failure). */
typedef struct {
  const coll_src *src;
  sp_flow_plan *fp;
  int32_t world, first, step;
  gboolean refine;
  sp_program *spare;
  int32_t failed; /* the rank that failed, or -1 */
  GError *err;
} coll_worker;

static gpointer coll_work(gpointer ud)
{
  coll_worker *w = ud;
  for (int32_t r = w->first; r < w->world; r += w->step) {
    if (w->refine && !sp_flow_plan_needs(w->fp, r))
      continue;
    if (!coll_stream_rank(w->src, &w->spare, w->fp, r, w->refine, &w->err)) {
      w->failed = r;
      break;
    }
  }
  return NULL;
}

/* Ranks per worker thread below which coll_stream stays on one thread. */
#define COLL_STREAM_MIN_RANKS 256
#define COLL_STREAM_MAX_THREADS 8

/* The flow_stream_fn of collectives. Ranks are summarised independently, each
 * into its own entry of @p fp, so large groups are split over the processors'
 * threads when local steps are omitted (comm_only: then no summary calls the
 * cost callback, and no worker enters SimGrid). The summaries, hence the results,
 * do not depend on the number of threads; the error reported is the one of the
 * lowest failing rank, as on one thread. */
static gboolean coll_stream(void *ud, sp_flow_plan *fp, int32_t world, gboolean refine,
                            GError **err)
{
  coll_src *src = ud;
  int32_t nt = 1;
  if (src->comm_only)
    nt = (int32_t)MIN(MIN(g_get_num_processors(), COLL_STREAM_MAX_THREADS),
                      (guint)MAX(world / COLL_STREAM_MIN_RANKS, 1));
  coll_worker *w = g_new0(coll_worker, nt);
  GThread **th = g_new0(GThread *, nt);
  for (int32_t t = 0; t < nt; t++) {
    w[t] = (coll_worker){ .src = src, .fp = fp, .world = world, .first = t, .step = nt,
                          .refine = refine, .failed = -1 };
    if (t > 0)
      th[t] = g_thread_new("spsim-flow", coll_work, &w[t]);
  }
  w[0].spare = src->spare;
  coll_work(&w[0]);
  src->spare = w[0].spare;
  int32_t failed = -1, which = -1;
  for (int32_t t = 0; t < nt; t++) {
    if (t > 0) {
      g_thread_join(th[t]);
      sp_program_free(w[t].spare);
    }
    if (w[t].failed >= 0 && (failed < 0 || w[t].failed < failed)) {
      failed = w[t].failed;
      which = t;
    }
  }
  if (which >= 0)
    g_propagate_error(err, g_steal_pointer(&w[which].err));
  for (int32_t t = 0; t < nt; t++)
    g_clear_error(&w[t].err);
  g_free(th);
  g_free(w);
  return failed < 0;
}

/* ---- protocols and NCCL's tuning model (spsim/tuning.h) ------------------------ */

/* The links of a route, appended to @p set with @p intra (an intra mark wins). */
static void mark_route(GHashTable *set, int32_t a, int32_t b, gboolean intra, xbt_dynar_t d)
{
  if (a == b)
    return;
  xbt_dynar_reset(d);
  sg_host_get_route(g_sim.hosts[a], g_sim.hosts[b], d);
  unsigned i;
  sg_link_t l;
  xbt_dynar_foreach (d, i, l) {
    gpointer old = g_hash_table_lookup(set, l);
    if (old == NULL || (intra && GPOINTER_TO_INT(old) == 2))
      g_hash_table_insert(set, l, GINT_TO_POINTER(intra ? 1 : 2));
  }
}

/* Classify once every link that carries GPU traffic: on a route between two hosts
 * of one node (property `node`; hosts without it form one node) it is inside a
 * node, else between nodes. Routes walked: each node's first host to and from
 * every other host of the node, and every host to and from the first host of
 * another node (which crosses every leaf, uplink and the spine of the generated
 * fat trees). */
static void links_classify(void)
{
  if (g_sim.links_ready)
    return;
  g_sim.links_ready = TRUE;
  GHashTable *first = g_hash_table_new(g_direct_hash, g_direct_equal); /* node + 2 -> host + 1 */
  for (int32_t h = 0; h < g_sim.nhosts; h++) {
    gpointer k = GINT_TO_POINTER(g_sim.node[h] + 2);
    if (!g_hash_table_contains(first, k))
      g_hash_table_insert(first, k, GINT_TO_POINTER(h + 1));
  }
  GHashTable *set = g_hash_table_new(g_direct_hash, g_direct_equal);
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  int32_t other0 = -1; /* the first host of a node other than host 0's */
  for (int32_t h = 0; h < g_sim.nhosts && other0 < 0; h++)
    if (g_sim.node[h] != g_sim.node[0])
      other0 = h;
  for (int32_t h = 0; h < g_sim.nhosts; h++) {
    int32_t f = GPOINTER_TO_INT(g_hash_table_lookup(first, GINT_TO_POINTER(g_sim.node[h] + 2))) - 1;
    mark_route(set, f, h, TRUE, d);
    mark_route(set, h, f, TRUE, d);
  }
  for (int32_t h = 0; h < g_sim.nhosts && other0 >= 0; h++) {
    int32_t o = g_sim.node[h] == g_sim.node[0] ? other0 : 0;
    mark_route(set, h, o, FALSE, d);
    mark_route(set, o, h, FALSE, d);
  }
  xbt_dynar_free(&d);
  g_sim.nlinks = g_hash_table_size(set);
  g_sim.links = g_new(sg_link_t, g_sim.nlinks);
  g_sim.link_lat0 = g_new(double, g_sim.nlinks);
  g_sim.link_intra = g_new(gboolean, g_sim.nlinks);
  GList *keys = g_hash_table_get_keys(set);
  guint i = 0;
  for (GList *k = keys; k; k = k->next, i++)
    g_sim.links[i] = k->data;
  g_list_free(keys);
  for (i = 0; i < g_sim.nlinks; i++) {
    g_sim.link_lat0[i] = sg_link_get_latency(g_sim.links[i]);
    g_sim.link_intra[i] = GPOINTER_TO_INT(g_hash_table_lookup(set, g_sim.links[i])) == 1;
  }
  g_hash_table_unref(set);
  g_hash_table_unref(first);
}

void sp_sim_set_cost(const sp_tune_cost *c)
{
  static const sp_tune_cost neutral = { 1.0, 1.0, 1.0, 1.0 };
  if (c == NULL)
    c = &neutral;
  g_sim.cost = *c;
  if (!g_sim.ready || (c->lat_intra == g_sim.lat_fi && c->lat_inter == g_sim.lat_fe))
    return;
  links_classify();
  for (guint i = 0; i < g_sim.nlinks; i++)
    sg_link_set_latency(g_sim.links[i],
                        g_sim.link_lat0[i] * (g_sim.link_intra[i] ? c->lat_intra : c->lat_inter));
  g_sim.lat_fi = c->lat_intra;
  g_sim.lat_fe = c->lat_inter;
  g_hash_table_remove_all(g_sim.lat); /* route latencies changed */
}

/* Bandwidth (B/s) and latency (s) of the route between hosts @p a and @p b. */
static void route_bw_lat(int32_t a, int32_t b, double *bw, double *lat)
{
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(g_sim.hosts[a], g_sim.hosts[b], d);
  unsigned i;
  sg_link_t l;
  *bw = 0;
  *lat = 0;
  xbt_dynar_foreach (d, i, l) {
    double v = sg_link_get_bandwidth(l);
    if (*bw == 0 || v < *bw)
      *bw = v;
    *lat += sg_link_get_latency(l);
  }
  xbt_dynar_free(&d);
}

void sp_sim_tune_topo(const sp_coll_spec *spec, sp_tune_topo *t)
{
  memset(t, 0, sizeof *t);
  t->nranks = spec->n;
  t->nnodes = 1;
  t->arch = g_sim.arch;
  t->cpu_amd = g_sim.arch == SP_TUNE_AMPERE; /* DGX A100: AMD EPYC; DGX H100/B200: Intel */
  t->nvls = g_sim.nvls;
  if (!g_sim.ready || spec->n < 1 || spec->ranks == NULL)
    return;
  int32_t h0 = sp_sim_host_of(spec->ranks[0]);
  if (h0 < 0 || h0 >= g_sim.nhosts)
    return;
  GHashTable *nodes = g_hash_table_new(g_direct_hash, g_direct_equal);
  int32_t same = -1, other = -1;
  for (int32_t i = 0; i < spec->n; i++) {
    int32_t h = sp_sim_host_of(spec->ranks[i]);
    if (h < 0 || h >= g_sim.nhosts)
      continue;
    g_hash_table_add(nodes, GINT_TO_POINTER(g_sim.node[h] + 2));
    if (i > 0 && g_sim.node[h] == g_sim.node[h0] && same < 0)
      same = h;
    if (g_sim.node[h] != g_sim.node[h0] && other < 0)
      other = h;
  }
  t->nnodes = MAX(1, (int32_t)g_hash_table_size(nodes));
  g_hash_table_unref(nodes);
  /* NVLink: to another GPU of the node (of the group, else of the platform) */
  for (int32_t h = 0; same < 0 && h < g_sim.nhosts; h++)
    if (h != h0 && g_sim.node[h] == g_sim.node[h0])
      same = h;
  double bw, lat;
  if (same >= 0) {
    route_bw_lat(h0, same, &bw, &lat);
    t->bw_nvl = bw / 1e9;
  }
  if (other >= 0) {
    route_bw_lat(h0, other, &bw, &lat);
    t->bw_nic = bw / 1e9;
  }
  if (t->bw_nvl <= 0)
    t->bw_nvl = t->bw_nic;
}

/* NCCL's nBytes of a call (tuning.h): all-gather and reduce-scatter count the whole
 * gathered buffer; all-to-all one peer's block. */
static uint64_t nccl_bytes(const sp_coll_spec *spec)
{
  uint64_t b = spec->count * sp_dtype_size(spec->dtype);
  if (spec->coll == SP_COLL_ALL_GATHER || spec->coll == SP_COLL_REDUCE_SCATTER)
    b *= (uint64_t)spec->n;
  return b;
}

/* The chunk of a pipelined chain (ring broadcast and reduce) that minimises its time:
 * with C chunks of S / C bytes, the n-1 hops of the chain take C + n - 2 steps, each
 * step one chunk over the slowest hop (latency L, bandwidth B, both priced with the
 * protocol's cost): t = (C + n - 2)(L + S / (C B)), least at C = sqrt((n-2) S / (B L)).
 * NCCL pipelines 512 KiB chunks with 8 in flight per channel, which hides the hop
 * latency that spsim's steps pay one after the other; the optimum of spsim's schedule
 * is its equivalent. 0 (the lowering's default) when nothing is known. */
static uint64_t chain_chunk_bytes(const sp_coll_spec *sp, const sp_tune_cost *c)
{
  int32_t n = sp->n;
  size_t es = sp_dtype_size(sp->dtype);
  uint64_t S = sp->count * es;
  if (n < 2 || S == 0 || !g_sim.ready)
    return 0;
  double L = 0, B = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t a = sp_sim_host_of(sp->ranks[i]), b = sp_sim_host_of(sp->ranks[(i + 1) % n]);
    if (a < 0 || b < 0 || a >= g_sim.nhosts || b >= g_sim.nhosts)
      return 0;
    double bw, lat;
    route_bw_lat(a, b, &bw, &lat);
    lat *= g_sim.node[a] == g_sim.node[b] ? c->lat_intra : c->lat_inter;
    bw /= c->wire;
    L = MAX(L, lat);
    B = B == 0 || bw < B ? bw : B;
  }
  if (B <= 0)
    return 0;
  double C = L > 0 ? floor(sqrt((double)(n - 2) * (double)S / (B * L)) + 0.5) : (double)S;
  if (C < 1)
    C = 1;
  uint64_t chunk = (uint64_t)ceil((double)S / C);
  chunk = (chunk + es - 1) / es * es;
  return chunk < es ? es : chunk;
}

gboolean sp_sim_coll_resolve(const sp_coll_spec *spec, sp_coll_spec *out, sp_tune_cost *cost,
                             double *model_us, GError **err)
{
  *out = *spec;
  *cost = (sp_tune_cost){ 1.0, 1.0, 1.0, 1.0 };
  if (model_us)
    *model_us = -1;
  if (!sp_coll_spec_validate(spec, err))
    return FALSE;
  sp_tune_topo t;
  sp_sim_tune_topo(spec, &t);
  sp_algo a;
  sp_proto p;
  gboolean nvls_ok = sp_tune_nvls_supported(spec->coll, spec->redop, spec->dtype);
  if (!sp_tune_choose(&t, spec->coll, nccl_bytes(spec), nvls_ok, spec->algo, spec->proto, &a, &p,
                      model_us, err))
    return FALSE;
  out->algo = a;
  out->proto = p;
  sp_tune_cost_of(&t, spec->coll, a, p, cost);
  /* broadcast and reduce chains: the chunk of least time (unless given) */
  if ((spec->coll == SP_COLL_BROADCAST || spec->coll == SP_COLL_REDUCE) && a == SP_ALGO_RING &&
      spec->chunk_bytes == 0 && spec->n > 1)
    out->chunk_bytes = chain_chunk_bytes(out, cost);
  return TRUE;
}

gboolean sp_sim_coll_time(const sp_coll_spec *spec, int32_t world, sp_fidelity fid,
                          double *seconds, GError **err)
{
  return sp_sim_coll_time_ex(spec, world, fid, FALSE, seconds, err);
}

gboolean sp_sim_coll_time_ex(const sp_coll_spec *spec, int32_t world, sp_fidelity fid,
                             gboolean in_place, double *seconds, GError **err)
{
  if (!sp_coll_spec_validate(spec, err))
    return FALSE;
  for (int32_t i = 0; i < spec->n; i++)
    if (spec->ranks[i] >= world) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "group member %d is outside the world of %d ranks", spec->ranks[i], world);
      return FALSE;
    }
  /* AUTO algorithm and protocol: NCCL's tuning model on this platform */
  sp_coll_spec sp;
  sp_tune_cost cost;
  if (!sp_sim_coll_resolve(spec, &sp, &cost, NULL, err))
    return FALSE;
  if (sp.channels == 0) {
    sp_sim_ring_channels(&sp, &sp.channels, &sp.channel_block);
  } else if (sp.channels > 1 && sp.channel_block == 0) {
    int32_t ch, blk;
    sp_sim_ring_channels(&sp, &ch, &blk);
    sp.channel_block = blk;
  }
  coll_src src = { .spec = &sp, .comm_only = free_local_steps(&sp), .in_place = in_place };
  /* lowered programs are valid by construction (tests/test-coll checks them) */
  sp_sim_set_cost(&cost);
  gboolean ok = run_common(coll_get, coll_release, coll_stream, &src, world, TRUE, NULL, fid, NULL,
                           seconds, err);
  sp_sim_set_cost(NULL);
  sp_program_free(src.spare);
  return ok;
}

gboolean sp_sim_coll_groups_time(const sp_coll_spec *specs, int32_t ngroups, const int32_t *hosts,
                                 sp_fidelity fid, double *seconds, GError **err)
{
  int32_t n = specs[0].n;
  int32_t world = n * ngroups;
  gboolean ok = TRUE, comm_only = TRUE;
  for (int32_t g = 0; g < ngroups && ok; g++) {
    ok = sp_coll_spec_validate(&specs[g], err);
    if (ok && specs[g].n != n) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "groups of %d and %d members", n, specs[g].n);
      ok = FALSE;
    }
  }
  if (!ok)
    return FALSE;
  int32_t *group = g_new(int32_t, world), *member = g_new(int32_t, world);
  for (int32_t r = 0; r < world; r++)
    group[r] = -1;
  for (int32_t g = 0; g < ngroups && ok; g++)
    for (int32_t i = 0; i < n && ok; i++) {
      int32_t r = specs[g].ranks[i];
      if (r < 0 || r >= world || group[r] >= 0) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "groups: member %d is outside [0, %d) or in two groups", r, world);
        ok = FALSE;
      } else {
        group[r] = g;
        member[r] = i;
      }
    }
  ok = ok && sp_sim_set_host_map(hosts, world, err);
  /* AUTO algorithm and protocol: NCCL's tuning model on the first group's hosts (every
   * group has its shape), the same call and protocol cost for all */
  sp_coll_spec *rs = NULL;
  sp_tune_cost cost;
  if (ok) {
    rs = g_new(sp_coll_spec, (gsize)MAX(ngroups, 1));
    sp_coll_spec r0;
    ok = sp_sim_coll_resolve(&specs[0], &r0, &cost, NULL, err);
    for (int32_t g = 0; g < ngroups && ok; g++) {
      rs[g] = specs[g];
      rs[g].algo = r0.algo;
      rs[g].proto = r0.proto;
      rs[g].chunk_bytes = r0.chunk_bytes;
    }
    if (!ok)
      sp_sim_set_host_map(NULL, 0, NULL);
  }
  if (ok) {
    for (int32_t g = 0; g < ngroups && comm_only; g++)
      comm_only = free_local_steps(&rs[g]);
    coll_src src = { .spec = &rs[0], .comm_only = comm_only, .specs = rs, .group = group, .member = member };
    sp_sim_set_cost(&cost);
    ok = run_common(coll_get, coll_release, coll_stream, &src, world, TRUE, NULL, fid, NULL, seconds, err);
    sp_sim_set_cost(NULL);
    sp_program_free(src.spare);
    sp_sim_set_host_map(NULL, 0, NULL);
  }
  g_free(rs);
  g_free(group);
  g_free(member);
  return ok;
}

int32_t sp_sim_host_node(int32_t host)
{
  if (!g_sim.ready || host < 0 || host >= g_sim.nhosts)
    return -1;
  return g_sim.node[host];
}

double sp_sim_host_coll_latency(int32_t host)
{
  if (!g_sim.ready || host < 0 || host >= g_sim.nhosts)
    return 0.0;
  return g_sim.coll_lat[host];
}

void sp_sim_ring_channels(const sp_coll_spec *spec, int32_t *channels, int32_t *block)
{
  *channels = 1;
  *block = 0;
  if (!g_sim.ready || spec == NULL || spec->n < 2 || spec->ranks == NULL)
    return;
  if (spec->coll != SP_COLL_ALL_REDUCE && spec->coll != SP_COLL_ALL_GATHER &&
      spec->coll != SP_COLL_REDUCE_SCATTER)
    return;
  if (sp_algo_choose(spec) != SP_ALGO_RING)
    return;
  /* members must come as runs of k consecutive members per node, each node once */
  GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  int32_t k = 0, run = 0, runs = 0, prev = -1;
  gboolean ok = TRUE;
  for (int32_t i = 0; i < spec->n && ok; i++) {
    int32_t node = sp_sim_host_node(sp_sim_host_of(spec->ranks[i]));
    if (node < 0) {
      ok = FALSE;
    } else if (i > 0 && node == prev) {
      run++;
    } else {
      if (i > 0) {
        if (k == 0)
          k = run;
        else if (run != k)
          ok = FALSE;
      }
      if (g_hash_table_contains(seen, GINT_TO_POINTER(node + 1)))
        ok = FALSE;
      g_hash_table_add(seen, GINT_TO_POINTER(node + 1));
      run = 1;
      prev = node;
      runs++;
    }
  }
  if (ok && k != 0 && run != k)
    ok = FALSE;
  g_hash_table_unref(seen);
  if (!ok || runs < 2 || run < 2)
    return;
  *channels = MIN(run, SP_MAX_CHANNELS);
  *block = run;
}

/* ---- per-op summary ---------------------------------------------------------------- */

static gint summary_cmp(gconstpointer a, gconstpointer b)
{
  uint32_t x = ((const sp_op_summary *)a)->op, y = ((const sp_op_summary *)b)->op;
  return x < y ? -1 : x > y;
}

GArray *sp_trace_op_summary(const sp_trace *t)
{
  GArray *out = g_array_new(FALSE, FALSE, sizeof(sp_op_summary));
  GHashTable *idx = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; t && i < sp_trace_len(t); i++) {
    const sp_trace_event *ev = sp_trace_get(t, i);
    gpointer k = GUINT_TO_POINTER(ev->op + 1u);
    gpointer v = g_hash_table_lookup(idx, k);
    sp_op_summary *s;
    if (v == NULL) {
      sp_op_summary n = { .op = ev->op, .bytes = 0, .first_start = ev->start, .last_end = ev->end };
      g_array_append_val(out, n);
      g_hash_table_insert(idx, k, GUINT_TO_POINTER(out->len));
      s = &g_array_index(out, sp_op_summary, out->len - 1);
    } else {
      s = &g_array_index(out, sp_op_summary, GPOINTER_TO_UINT(v) - 1);
    }
    if (ev->kind == SP_STEP_WAIT)
      s->bytes += ev->bytes;
    s->first_start = MIN(s->first_start, ev->start);
    s->last_end = MAX(s->last_end, ev->end);
    s->events++;
  }
  g_hash_table_unref(idx);
  g_array_sort(out, summary_cmp);
  return out;
}

void sp_trace_print_op_summary(const sp_trace *t, FILE *out)
{
  GArray *a = sp_trace_op_summary(t);
  for (guint i = 0; i < a->len; i++) {
    const sp_op_summary *s = &g_array_index(a, sp_op_summary, i);
    fprintf(out, "op=%u bytes=%" G_GUINT64_FORMAT " start_us=%.3f end_us=%.3f time_us=%.3f\n", s->op,
            s->bytes, s->first_start * 1e6, s->last_end * 1e6, (s->last_end - s->first_start) * 1e6);
  }
  g_array_unref(a);
}
