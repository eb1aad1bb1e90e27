/* The SimGrid engine (see sim.h): one actor per rank running sp_exec over a SimGrid
 * transport, cost and data modes, STEP and FLOW fidelity. Loading is in sim_load.c,
 * collective pricing and NCCL's tuning model in sim_coll.c. (About 900 lines: the
 * transport's posts, waits and matching and the run that drives them belong together.) */
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
#include "platform_routed.h"
#include "sim.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/tuning.h"

G_STATIC_ASSERT(sizeof(gpointer) >= 8); /* (src, tag) keys are packed into pointers */

#include "sim_priv.h"


/* ---- global engine state ------------------------------------------------ */

sp_sim_state g_sim = { .cost = { 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 }, .lat_fi = 1.0, .lat_fe = 1.0 };

/* SPSIM_FLOW_STEPS set: FLOW summaries of rings read every step (no
 * sp_lower_coll_pattern), to check that both give the same programs. */
gboolean g_sim_no_pattern;

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
const char *sp_sim_gpu_model(void) { return g_sim.gpu_model; }
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
  /* SPSIM_SIBLINGS=all: every sibling group simulated, none priced by symmetry (checks) */
  g_sim.sym_off = g_strcmp0(g_getenv("SPSIM_SIBLINGS"), "all") == 0;
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
  /* checked in a child that carries on as this process with the platform loaded */
  sp_plat_desc *pp = sp_sim_load_checked(platform_xml, err);
  gboolean ok = pp != NULL;
  if (ok) {
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
    g_sim.sharp = pp->sharp;
    g_sim.sharp_bw = pp->sharp_bw;
    g_sim.tuner = pp->tuner;
    g_sim.path = g_strdup(platform_xml);
    g_sim.gpu_model = g_strdup(pp->gpu_model);
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

/* Bottleneck bandwidth (bytes/s) of the route from host @p a to host @p b. */
static double route_bandwidth(int32_t a, int32_t b)
{
  double bw = sg_host_get_route_bandwidth(g_sim.hosts[a], g_sim.hosts[b]);
  return bw > 0 ? bw : G_MAXDOUBLE;
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

/* A put the rank has made but not yet handed to SimGrid (see flush_puts). */
typedef struct {
  int32_t peer;
  sim_msg *m;
  double wire;
} pending_put;

/* The puts one helper actor posts and waits for (see flush_puts). */
typedef struct {
  sim_run *run;
  GArray *puts;   /* pending_put */
  gboolean failed;
  sg_actor_t actor;
} put_batch;

typedef struct {
  sim_run *run;
  int32_t rank, host;
  sp_program *prog;
  gboolean owned;      /* prog released through the source */
  void *const *bufs;
  sp_exec *exec;
  sp_transport transport;
  GArray *sends;       /* sg_comm_t of the open block, posted by the rank */
  GArray *puts;        /* pending_put not yet handed to SimGrid (flush_puts) */
  GPtrArray *batches;  /* put_batch of the open block, posted by helper actors */
  GArray *recvs;       /* posted_recv of the open block */
  GArray *comms;       /* get_all: the gets the rank waits for itself */
  GArray *who;         /* get_all: per comm, its get's slot */
  gpointer **slots;    /* get_async landing cells (each its own allocation) */
  guint8 *landed;      /* wait_all: the get of slot i has completed */
  guint nslots, nposted;
  guint head, left;    /* wait_all: slots landed so far; receives still unmatched */
  GPtrArray *getters;  /* get_worker helpers of the open block (get_all) */
  gboolean getter_failed;
  GHashTable *stash;   /* (src, tag) -> GQueue of sim_msg arrived early */
  GHashTable *want;    /* get_all: (peer, tag) -> GQueue of unmatched receives' indices */
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

/* Puts one actor posts itself; a block with more is posted by helper actors, this many
 * each. SimGrid 3.32 keeps an actor's unfinished activities in a list and scans all of
 * it each time one of them is waited for (std::list::remove in CommImpl::finish), so a
 * rank that posts a message to each of its 1,023 peers and gets from each of them paid
 * about (2 x 1,023)^2 / 2 list steps per all-to-all, the ranks' cube in all. Helpers on
 * the rank's host post the puts at the same simulated time and wait for them, so the
 * transfers and the block's end are those of the rank posting them itself; the rank's
 * own list keeps only its gets. */
#define PUT_BATCH 128u

/* Stack of a helper actor: its calls are shallow (SimGrid's, a message's unpacking), and
 * below sim_load.c's mmap threshold its stack comes from the heap, not a mapping each. */
#ifdef SP_SANITIZERS
#define HELPER_STACK_KIB 256u
#else
#define HELPER_STACK_KIB 64u
#endif

/* Start a helper actor on @host running @fn with @data; a reference is held for its join.
 * run_actors counts the helpers a run may need when it reserves room for stacks. */
static sg_actor_t spawn_helper(const char *name, sg_host_t host, void (*fn)(int, char **), void *data)
{
  sg_actor_t a = sg_actor_init(name, host);
  sg_actor_ref(a);
  sg_actor_set_stacksize(a, HELPER_STACK_KIB * 1024u);
  sg_actor_set_data(a, data);
  sg_actor_start_(a, fn, 0, NULL);
  return a;
}

static void put_helper(int argc, char **argv)
{
  (void)argc; (void)argv;
  put_batch *b = sg_actor_self_get_data();
  guint n = b->puts->len;
  const pending_put *pp = (const pending_put *)(const void *)b->puts->data;
  sg_comm_t *comms = g_new(sg_comm_t, n);
  for (guint i = 0; i < n; i++)
    comms[i] = sg_mailbox_put_async(mbox_of(b->run, pp[i].peer), pp[i].m, (long)pp[i].wire);
  for (guint i = 0; i < n; i++)
    if (sg_comm_wait(comms[i]) != SG_OK)
      b->failed = TRUE;
  g_free(comms);
}

static void batch_free(gpointer p)
{
  put_batch *b = p;
  if (b->actor)
    sg_actor_unref(b->actor);
  g_array_unref(b->puts);
  g_free(b);
}

/* Hand the rank's pending puts to SimGrid, now (before its clock moves): itself when
 * they are few, else through helper actors of PUT_BATCH puts, a peer's puts in one
 * helper and in their order (messages of one sender and tag keep their order). */
static void flush_puts(rank_ctx *c)
{
  guint n = c->puts->len;
  if (n == 0)
    return;
  pending_put *pp = (pending_put *)(void *)c->puts->data;
  if (n <= PUT_BATCH) {
    for (guint i = 0; i < n; i++) {
      sg_comm_t comm = sg_mailbox_put_async(mbox_of(c->run, pp[i].peer), pp[i].m, (long)pp[i].wire);
      g_array_append_val(c->sends, comm);
    }
    g_array_set_size(c->puts, 0);
    return;
  }
  guint h = (n + PUT_BATCH - 1) / PUT_BATCH;
  put_batch **b = g_new0(put_batch *, h);
  for (guint k = 0; k < h; k++) {
    b[k] = g_new0(put_batch, 1);
    b[k]->run = c->run;
    b[k]->puts = g_array_sized_new(FALSE, FALSE, sizeof(pending_put), PUT_BATCH);
  }
  for (guint i = 0; i < n; i++)
    g_array_append_val(b[(guint)pp[i].peer % h]->puts, pp[i]);
  g_array_set_size(c->puts, 0);
  sg_host_t host = g_sim.hosts[c->host];
  for (guint k = 0; k < h; k++) {
    if (b[k]->puts->len == 0) {
      batch_free(b[k]);
      continue;
    }
    char name[48];
    g_snprintf(name, sizeof name, "rank%d.put%u", c->rank, k);
    b[k]->actor = spawn_helper(name, host, put_helper, b[k]);
    g_ptr_array_add(c->batches, b[k]);
  }
  g_free(b);
}

/* coll_latency: the executor posts the program's SEND/RECV steps in order, so
 * comm_pc finds the step being posted; the first post of every op id waits for
 * the host's per-collective latency, and the fill and drain its steady state does not
 * cover (sp_tune_cost.fill_s), before it is made. */
static void charge_coll_latency(rank_ctx *c)
{
  double lat = g_sim.coll_lat[c->host] * g_sim.cost.coll_lat + g_sim.cost.fill_s;
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
  flush_puts(c);
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
  /* the protocol's bandwidth fraction: bytes / f on the wire (the payload is exact), and
   * the algorithm's factors inside and between nodes (NVLS-tree, CollNet) */
  double f = g_sim.cost.wire;
  if (g_sim.cost.wire_intra != 1.0 || g_sim.cost.wire_inter != 1.0) {
    int32_t ph = sp_sim_host_of(peer);
    gboolean same = ph >= 0 && ph < g_sim.nhosts && g_sim.node[ph] == g_sim.node[c->host] &&
                    g_sim.node[ph] >= 0;
    f *= same ? g_sim.cost.wire_intra : g_sim.cost.wire_inter;
  }
  double wire = f == 1.0 ? (double)m->bytes : floor((double)m->bytes * f + 0.5);
  pending_put p = { peer, m, wire };
  g_array_append_val(c->puts, p); /* posted before the rank's clock moves (flush_puts) */
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

/* Index the receives still unmatched by (peer, tag), in posting order, for land(). */
static void want_build(rank_ctx *c)
{
  if (c->want == NULL)
    c->want = g_hash_table_new_full(key_hash, g_direct_equal, NULL, queue_free);
  for (guint i = 0; i < c->recvs->len; i++) {
    posted_recv *pr = &g_array_index(c->recvs, posted_recv, i);
    if (pr->done)
      continue;
    gpointer k = key_of(pr->peer, pr->tag);
    GQueue *q = g_hash_table_lookup(c->want, k);
    if (q == NULL) {
      q = g_queue_new();
      g_hash_table_insert(c->want, k, q);
    }
    g_queue_push_tail(q, GUINT_TO_POINTER(i));
  }
}

/* A landed message: to the oldest unmatched receive of its sender and tag, else stashed
 * for a later block. Matches as match_pending would, without a scan of the receives. */
static gboolean land(rank_ctx *c, sim_msg *m, GError **err)
{
  gpointer k = key_of(m->src, m->tag);
  GQueue *q = g_hash_table_lookup(c->want, k);
  if (q == NULL) {
    stash_push(c, m);
    return TRUE;
  }
  guint i = GPOINTER_TO_UINT(g_queue_pop_head(q));
  if (g_queue_is_empty(q))
    g_hash_table_remove(c->want, k);
  c->left--;
  return deliver(c, &g_array_index(c->recvs, posted_recv, i), m, err);
}

/* One actor's gets on its rank's mailbox: the rank's own, or a helper's (GET_BATCH). */
typedef struct {
  rank_ctx *c;
  GArray *comms;      /* sg_comm_t, in posting order */
  GArray *who;        /* per comm, its get's slot */
  guint share;        /* gets it posts first */
  GError *error;
  sg_actor_t actor;   /* the helper; NULL for the rank itself */
} get_worker;

/* Post one more get on the rank's mailbox for @w, landing in slot c->nposted. */
static void post_get(get_worker *w)
{
  rank_ctx *c = w->c;
  if (c->nposted >= c->nslots) { /* the cells stay put: SimGrid writes into them */
    guint n = MAX(2 * c->nslots, 8u);
    c->slots = g_renew(gpointer *, c->slots, n);
    c->landed = g_renew(guint8, c->landed, n);
    for (guint i = c->nslots; i < n; i++)
      c->slots[i] = g_new0(gpointer, 1);
    c->nslots = n;
  }
  guint i = c->nposted++;
  *c->slots[i] = NULL;
  c->landed[i] = 0;
  sg_comm_t g = sg_mailbox_get_async(mbox_of(c->run, c->rank), c->slots[i]);
  gint slot = (gint)i;
  g_array_append_val(w->comms, g);
  g_array_append_val(w->who, slot);
}

/* Gets a wait for any of them covers: the oldest this many. SimGrid 3.32 pays a wait for
 * any of k activities O(k) when it starts and again when one completes. An actor acts on
 * a completed get only when it brought a message of a later block (it posts another
 * get), so noticing a younger get's completion once it is among the oldest changes
 * nothing while every landed message is of the current block; a later block's message
 * caught by a younger get is answered when that get is among the oldest. */
#define GET_WINDOW 64u

/* Gets one actor posts itself; a block waiting for more is received by helper actors of
 * this many gets each, as flush_puts posts puts: SimGrid 3.32 scans an actor's list of
 * unfinished activities each time one is waited for, so a rank holding a get for each of
 * 1,023 peers paid 1,023^2 / 2 list steps per all-to-all. */
#define GET_BATCH PUT_BATCH

/* @w's gets, waited for one at a time until none is left: when a get brings a message of
 * a later block, a new get is posted at once, so the rank keeps receiving while its
 * sends are in flight (two ranks whose gets both took early messages would otherwise
 * wait for each other's sends forever). Gets match the mailbox's messages in the order
 * they were posted, so landed messages are handed on (land) in slot order, whichever
 * actor's get they landed in (messages of one sender and tag keep their order). The
 * rank's head and left are shared by its actors: one runs at a time, and none yields in
 * here but in SimGrid's calls. */
static gboolean get_loop(get_worker *w, GError **err)
{
  rank_ctx *c = w->c;
  for (guint i = 0; i < w->share; i++)
    post_get(w);
  while (w->comms->len > 0) {
    /* the oldest GET_WINDOW gets, in posting order (see GET_WINDOW) */
    ssize_t k = sg_comm_wait_any((sg_comm_t *)(void *)w->comms->data, MIN(w->comms->len, GET_WINDOW));
    if (k < 0 || (gsize)k >= w->comms->len) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: a communication failed", c->rank);
      return FALSE;
    }
    gint slot = g_array_index(w->who, gint, k);
    g_array_remove_index(w->comms, (guint)k);
    g_array_remove_index(w->who, (guint)k);
    c->landed[slot] = 1;
    while (c->head < c->nposted && c->landed[c->head])
      if (!land(c, *c->slots[c->head++], err))
        return FALSE;
    /* gets posted whose message is not yet stashed, landed or not, serve receives left */
    while (c->nposted - c->head < c->left)
      post_get(w);
  }
  return TRUE;
}

/* Stop @p c's get helpers but @p except: after one failed they may wait for messages
 * that will not come, and the rank, joining them, reports that helper's error. */
static void kill_getters(rank_ctx *c, const get_worker *except)
{
  for (guint k = 0; k < c->getters->len; k++) {
    get_worker *o = g_ptr_array_index(c->getters, k);
    if (o != except)
      sg_actor_kill(o->actor);
  }
}

static void get_helper(int argc, char **argv)
{
  (void)argc; (void)argv;
  get_worker *w = sg_actor_self_get_data();
  if (get_loop(w, &w->error))
    return;
  w->c->getter_failed = TRUE;
  kill_getters(w->c, w);
}

static void getter_free(gpointer p)
{
  get_worker *w = p;
  if (w->actor)
    sg_actor_unref(w->actor);
  g_array_unref(w->comms);
  g_array_unref(w->who);
  g_clear_error(&w->error);
  g_free(w);
}

/* Receive the @c->left messages still unmatched: the rank itself for up to GET_BATCH,
 * else helper actors on its host, GET_BATCH gets each, started at this simulated time
 * and posting in their order, joined when all have ended. */
static gboolean get_all(rank_ctx *c, GError **err)
{
  c->nposted = 0;
  c->head = 0;
  c->getter_failed = FALSE;
  want_build(c);
  if (c->left <= GET_BATCH) {
    get_worker self = { c, c->comms, c->who, c->left, NULL, NULL };
    g_array_set_size(c->comms, 0);
    g_array_set_size(c->who, 0);
    return get_loop(&self, err);
  }
  guint h = (c->left + GET_BATCH - 1) / GET_BATCH;
  sg_host_t host = g_sim.hosts[c->host];
  for (guint k = 0; k < h; k++) {
    get_worker *w = g_new0(get_worker, 1);
    w->c = c;
    w->comms = g_array_new(FALSE, FALSE, sizeof(sg_comm_t));
    w->who = g_array_new(FALSE, FALSE, sizeof(gint));
    w->share = MIN(GET_BATCH, c->left - k * GET_BATCH);
    char name[48];
    g_snprintf(name, sizeof name, "rank%d.get%u", c->rank, k);
    w->actor = spawn_helper(name, host, get_helper, w);
    g_ptr_array_add(c->getters, w);
  }
  if (c->getter_failed) /* a helper failed before the last was made */
    kill_getters(c, NULL);
  for (guint k = 0; k < c->getters->len; k++)
    sg_actor_join(((get_worker *)g_ptr_array_index(c->getters, k))->actor, -1);
  for (guint k = 0; k < c->getters->len; k++) {
    get_worker *w = g_ptr_array_index(c->getters, k);
    if (w->error) {
      g_propagate_error(err, w->error);
      w->error = NULL;
      g_ptr_array_set_size(c->getters, 0);
      return FALSE;
    }
  }
  g_ptr_array_set_size(c->getters, 0);
  return TRUE;
}

static sp_wait_status sim_wait_all(void *vctx, GError **err)
{
  rank_ctx *c = vctx;
  flush_puts(c);
  if (!match_pending(c, &c->left, err))
    return SP_WAIT_ERROR;
  /* one receive left (a ring's or an all-to-all's step): a blocking get, posted when a
   * posted get would be and done when it would land, in one SimGrid call where a posted
   * get and its wait take two; a message of a later block it brings is stashed and the
   * next get follows at once, as below. The sends, posted already, are waited for after. */
  while (c->left == 1) {
    sim_msg *m = sg_mailbox_get(mbox_of(c->run, c->rank));
    if (m == NULL) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: a communication failed", c->rank);
      return SP_WAIT_ERROR;
    }
    stash_push(c, m);
    if (!match_pending(c, &c->left, err))
      return SP_WAIT_ERROR;
  }
  /* one get per receive still unmatched (get_all). The sends, posted already, need
   * nothing from this rank: they are waited for after the gets, each once, which ends
   * the block at the same simulated time as waiting for any of them among the gets (a
   * wait for any of k activities costs SimGrid O(k), so one over all sends and gets made
   * an all-to-all's block quadratic in its peers). */
  if (c->left > 0) {
    gboolean ok = get_all(c, err);
    g_hash_table_remove_all(c->want);
    if (!ok)
      return SP_WAIT_ERROR;
  }
  for (guint i = 0; i < c->sends->len; i++)
    if (sg_comm_wait(g_array_index(c->sends, sg_comm_t, i)) != SG_OK) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: a communication failed", c->rank);
      return SP_WAIT_ERROR;
    }
  g_array_set_size(c->sends, 0);
  gboolean failed = FALSE;
  for (guint i = 0; i < c->batches->len; i++) {
    put_batch *pb = g_ptr_array_index(c->batches, i);
    sg_actor_join(pb->actor, -1);
    failed |= pb->failed;
  }
  g_ptr_array_set_size(c->batches, 0);
  if (failed) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "rank %d: a communication failed", c->rank);
    return SP_WAIT_ERROR;
  }
  g_array_set_size(c->recvs, 0);
  return SP_WAIT_DONE;
}

static gboolean sim_local(void *vctx, const sp_step *s, void *const *bufs, GError **err)
{
  rank_ctx *c = vctx;
  flush_puts(c); /* before the rank's clock moves */
  if (s->kind == SP_STEP_COMPUTE && s->tag == SP_SIM_FLOW_TAG) {
    double t = s->scale;
    if (s->count > 0 && s->peer >= 0 && s->peer < c->run->world)
      t += (double)s->count * route_latency(c->host, sp_sim_host_of(s->peer));
    if (s->rows > 0 && s->row_bytes > 0 && s->peer >= 0 && s->peer < c->run->world)
      t += (double)s->rows * (double)s->row_bytes / route_bandwidth(c->host, sp_sim_host_of(s->peer));
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
  if (st == SP_WAIT_DONE)
    flush_puts(c); /* sends never waited for still leave, as they would posted at once */
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

/* Helper actors @p p's rank may run at once: the most any block (steps up to a WAIT)
 * needs, its sends in flushes of more than PUT_BATCH (at most 2 S / PUT_BATCH helpers)
 * and its receives beyond GET_BATCH. */
static int64_t helpers_of(const sp_program *p)
{
  int64_t most = 0, sends = 0, recvs = 0;
  guint len = sp_program_len(p);
  for (guint i = 0; i <= len; i++) {
    sp_step_kind k = i < len ? sp_program_step(p, i)->kind : SP_STEP_WAIT;
    if (k == SP_STEP_SEND) {
      sends++;
    } else if (k == SP_STEP_RECV) {
      recvs++;
    } else if (k == SP_STEP_WAIT) {
      int64_t h = (sends > PUT_BATCH ? 2 * ((sends + PUT_BATCH - 1) / PUT_BATCH) : 0) +
                  (recvs > GET_BATCH ? (recvs + GET_BATCH - 1) / GET_BATCH : 0);
      most = MAX(most, h);
      sends = recvs = 0;
    }
  }
  return most;
}

/* Does rank @p c run an actor (a program with steps)? */
static gboolean has_work(const rank_ctx *c)
{
  return c->prog != NULL && sp_program_len(c->prog) > 0;
}

/* Runs the prepared contexts; frees what the actors left behind. */
static gboolean run_actors(sim_run *run, double *makespan, GError **err)
{
  sp_sim_clock_reset();
  run->t0 = simgrid_get_clock();
  int64_t nactors = 0;
  for (int32_t r = 0; r < run->world; r++)
    if (has_work(&run->ranks[r]))
      nactors += 1 + helpers_of(run->ranks[r].prog);
  int guard;
  if (!sp_sim_reserve_actors(nactors, &guard, err))
    return FALSE;
  for (int32_t r = 0; r < run->world; r++) {
    rank_ctx *c = &run->ranks[r];
    if (!has_work(c)) {
      c->finished = TRUE;
      continue;
    }
    c->transport.ops = &sim_ops;
    c->transport.ctx = c;
    c->exec = sp_exec_new(c->prog, &c->transport, c->bufs, run->trace);
    c->sends = g_array_new(FALSE, FALSE, sizeof(sg_comm_t));
    c->puts = g_array_new(FALSE, FALSE, sizeof(pending_put));
    c->batches = g_ptr_array_new_with_free_func(batch_free);
    c->getters = g_ptr_array_new_with_free_func(getter_free);
    c->recvs = g_array_new(FALSE, FALSE, sizeof(posted_recv));
    c->comms = g_array_new(FALSE, FALSE, sizeof(sg_comm_t));
    c->who = g_array_new(FALSE, FALSE, sizeof(gint));
    c->stash = g_hash_table_new_full(key_hash, g_direct_equal, NULL, queue_free);
    char name[32];
    g_snprintf(name, sizeof name, "rank%d", r);
    sg_actor_t a = sg_actor_init(name, g_sim.hosts[c->host]);
    sg_actor_set_data(a, c);
    sg_actor_start_(a, rank_main, 0, NULL);
  }
  gboolean lean = sp_sim_routed_lean(TRUE); /* the flows' routes without idle FATPIPEs */
  simgrid_run();
  sp_sim_routed_lean(lean);
  sp_sim_actors_done(guard);

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
    if (c->puts) g_array_unref(c->puts);
    if (c->batches) g_ptr_array_unref(c->batches);
    if (c->getters) g_ptr_array_unref(c->getters);
    if (c->recvs) g_array_unref(c->recvs);
    if (c->comms) g_array_unref(c->comms);
    if (c->who) g_array_unref(c->who);
    if (c->stash) g_hash_table_unref(c->stash);
    if (c->want) g_hash_table_unref(c->want);
    if (c->ops_seen) g_hash_table_unref(c->ops_seen);
    for (guint i = 0; i < c->nslots; i++)
      g_free(c->slots[i]);
    g_free(c->slots);
    g_free(c->landed);
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

gboolean sp_sim_run_common(sp_sim_program_fn get, sp_sim_release_fn release,
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
    if (ok && g_sim.before_run != NULL)
      ok = g_sim.before_run(g_sim.before_ud, fl, world, err);
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
  return sp_sim_run_common(array_get, NULL, NULL, &src, world, FALSE, bufs, fid, trace, makespan, err);
}

gboolean sp_sim_run_source(sp_sim_program_fn get, sp_sim_release_fn release, void *ud,
                           int32_t world, sp_fidelity fid, sp_trace *trace, double *makespan,
                           GError **err)
{
  return sp_sim_run_common(get, release, NULL, ud, world, FALSE, NULL, fid, trace, makespan, err);
}

gboolean sp_sim_run_source_lowered(sp_sim_program_fn get, sp_sim_release_fn release, void *ud,
                                   int32_t world, sp_fidelity fid, sp_trace *trace,
                                   double *makespan, GError **err)
{
  return sp_sim_run_common(get, release, NULL, ud, world, TRUE, NULL, fid, trace, makespan, err);
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
