/* The SimGrid engine's collectives in cost mode (see sim.h): a collective's programs
 * streamed into FLOW summaries or run step by step, the sibling groups of the what-if,
 * and NCCL's tuning model on the loaded platform (algorithm, protocol and its cost:
 * wire bytes, link latencies scaled inside and between nodes). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>

#include "flow.h"
#include "platform.h"
#include "sim.h"
#include "sim_priv.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/tuning.h"

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

static void a2a_rail_block(sp_coll_spec *spec, sp_fidelity fid); /* below */

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
    /* every spec of a coll_src was validated when it was made */
    ok = sp_lower_coll_stream_member(p, spec, me, in, out, src->comm_only, coll_sink, su, err);
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
  static const sp_tune_cost neutral = { 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0 };
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
  t->sharp = g_sim.sharp;
  t->no_hier = spec->no_hier && spec->algo == SP_ALGO_AUTO; /* an explicit algorithm is kept */
  t->bw_sharp = g_sim.sharp_bw / 1e9;
  t->tuner = g_sim.tuner;
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
  /* PAT (tuning.h): only on platforms whose nodes hold one GPU each */
  t->pat_nodes = TRUE;
  for (int32_t h = 1; h < g_sim.nhosts && t->pat_nodes; h++)
    if (g_sim.node[h] == g_sim.node[h - 1])
      t->pat_nodes = FALSE;
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

/* The slowest hop of the ring sp->ranks (each member to the next), priced with @p c's
 * latency factors and wire: its largest latency *L (s) and least bandwidth *B (B/s).
 * FALSE where the platform is not loaded or a member has no host. The routes' latencies
 * are read unscaled: every run that scales them (sp_sim_set_cost) resets them before the
 * next collective is resolved. */
static gboolean ring_slowest_hop(const sp_coll_spec *sp, const sp_tune_cost *c, double *L, double *B)
{
  *L = *B = 0;
  if (!g_sim.ready)
    return FALSE;
  for (int32_t i = 0; i < sp->n; i++) {
    int32_t a = sp_sim_host_of(sp->ranks[i]), b = sp_sim_host_of(sp->ranks[(i + 1) % sp->n]);
    if (a < 0 || b < 0 || a >= g_sim.nhosts || b >= g_sim.nhosts)
      return FALSE;
    double bw, lat;
    route_bw_lat(a, b, &bw, &lat);
    lat *= g_sim.node[a] == g_sim.node[b] ? c->lat_intra : c->lat_inter;
    bw /= c->wire;
    *L = MAX(*L, lat);
    *B = *B == 0 || bw < *B ? bw : *B;
  }
  return TRUE;
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
  double L, B;
  if (n < 2 || S == 0 || !ring_slowest_hop(sp, c, &L, &B) || B <= 0)
    return 0;
  double C = L > 0 ? floor(sqrt((double)(n - 2) * (double)S / (B * L)) + 0.5) : (double)S;
  if (C < 1)
    C = 1;
  uint64_t chunk = (uint64_t)ceil((double)S / C);
  chunk = (chunk + es - 1) / es * es;
  return chunk < es ? es : chunk;
}

/* A ring whose chunk rounds NCCL pipelines (sp_tune_cost.fill_steps): the hop latency of
 * its steps, the slowest hop of the ring at the protocol's factor, is paid once as the
 * pipeline's fill; the rounds then run without link latency inside the node. */
static void pipeline_ring(const sp_coll_spec *sp, sp_tune_cost *c)
{
  double L, B;
  if (!ring_slowest_hop(sp, c, &L, &B))
    L = 0;
  c->fill_s += c->fill_steps * L;
  c->lat_intra = 0.0;
}

gboolean sp_sim_coll_resolve(const sp_coll_spec *spec, sp_coll_spec *out, sp_tune_cost *cost,
                             double *model_us, GError **err)
{
  *out = *spec;
  *cost = SP_TUNE_COST_NEUTRAL;
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
  if (a == SP_ALGO_NVLS)
    cost->fill_s = sp_tune_nvls_fill_s(&t, spec->coll, nccl_bytes(spec));
  if (cost->fill_steps > 0)
    pipeline_ring(spec, cost);
  /* broadcast and reduce chains: the chunk of least time (unless given) */
  if ((spec->coll == SP_COLL_BROADCAST || spec->coll == SP_COLL_REDUCE) && a == SP_ALGO_RING &&
      spec->chunk_bytes == 0 && spec->n > 1)
    out->chunk_bytes = chain_chunk_bytes(out, cost);
  return TRUE;
}

gboolean sp_sim_coll_local_free(const sp_coll_spec *spec)
{
  return g_sim.ready && spec != NULL && spec->ranks != NULL && free_local_steps(spec);
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
    /* fewer channels than members per node (NCCL's choice for few bytes): NCCL's model
     * prices the protocol's rate for the whole collective, whatever channels it runs, so
     * each of them carries its share of that rate, up to the link's */
    int32_t full = MIN(sp.channel_block, SP_MAX_CHANNELS);
    if (sp.algo == SP_ALGO_RING && sp.channels < full && cost.wire > 1.0)
      cost.wire = MAX(1.0, cost.wire * sp.channels / full);
  } else if (sp.channels > 1 && sp.channel_block == 0) {
    int32_t ch, blk;
    sp_sim_ring_channels(&sp, &ch, &blk);
    sp.channel_block = blk;
  }
  a2a_rail_block(&sp, fid);
  /* the spec as resolved, checked once for all members (coll_stream_rank) */
  if (!sp_coll_spec_validate(&sp, err))
    return FALSE;
  /* each rank's member index, found once (a search per rank is n^2 at 131,072 ranks) */
  int32_t *group = g_new(int32_t, world), *member = g_new(int32_t, world);
  for (int32_t r = 0; r < world; r++)
    group[r] = member[r] = -1;
  for (int32_t i = 0; i < sp.n; i++) {
    group[sp.ranks[i]] = 0;
    member[sp.ranks[i]] = i;
  }
  coll_src src = { .spec = &sp, .comm_only = free_local_steps(&sp), .in_place = in_place, .specs = &sp,
                   .group = group, .member = member };
  /* lowered programs are valid by construction (tests/test-coll checks them) */
  sp_sim_set_cost(&cost);
  gboolean ok = sp_sim_run_common(coll_get, coll_release, coll_stream, &src, world, TRUE, NULL, fid, NULL,
                           seconds, err);
  sp_sim_set_cost(NULL);
  sp_program_free(src.spare);
  g_free(group);
  g_free(member);
  return ok;
}

/* ---- sibling groups by symmetry ------------------------------------------------ */

/* A link group 0 shares with k groups (itself included), its bandwidth as loaded. */
typedef struct {
  sg_link_t link;
  int32_t k;
  double bw;
} sym_link;

/* Route checks at most this many member pairs over all groups: beyond, every group
 * is simulated (the check would cost more than it saves). */
#define SYM_ROUTE_BUDGET (4 << 20)
static int64_t sym_budget = SYM_ROUTE_BUDGET;
static guint probes_accepted, probes_declined;

/* More member pairs than the check before a run covers? */
static gboolean over_budget(int32_t n, int32_t ngroups)
{
  return (int64_t)n * (n - 1) * ngroups > sym_budget;
}

/* In flow fidelity, groups with more member pairs than this are checked on the pairs
 * group 0's programs use (a ring's neighbours: about n x channels) instead of on every
 * pair before the run: the same answer on the pairs that carry traffic, and the full
 * check of 1,024 members in 4 groups walked 4 M routes (6.5 s) to price one all-reduce. */
#define SYM_PROBE_PAIRS (64 << 10)

static gboolean probe_first(int32_t n, int32_t ngroups, sp_fidelity fid)
{
  return fid == SP_FIDELITY_FLOW && (int64_t)n * (n - 1) * ngroups > MIN(sym_budget, (int64_t)SYM_PROBE_PAIRS);
}

/* Shared links of group 0 (sym_link) at 1/k of their bandwidth (@p scaled), or back. */
static void scale_links(const GArray *links, gboolean scaled)
{
  for (guint i = 0; links != NULL && i < links->len; i++) {
    const sym_link *l = &g_array_index(links, sym_link, i);
    sg_link_set_bandwidth(l->link, scaled ? l->bw / l->k : l->bw);
  }
}

void sp_sim_set_sibling_budget(int64_t pairs)
{
  sym_budget = pairs;
}

void sp_sim_sibling_probes(guint *accepted, guint *declined)
{
  if (accepted)
    *accepted = probes_accepted;
  if (declined)
    *declined = probes_declined;
}

void sp_sim_set_sibling_symmetry(gboolean on)
{
  g_sim.sym_off = !on;
}

/* (link, group): a shared link counted once per group */
typedef struct {
  sg_link_t link;
  int32_t g;
} link_group;

static guint link_group_hash(gconstpointer p)
{
  const link_group *a = p;
  return g_direct_hash(a->link) * 31u + (guint)a->g;
}

static gboolean link_group_equal(gconstpointer pa, gconstpointer pb)
{
  const link_group *a = pa, *b = pb;
  return a->link == b->link && a->g == b->g;
}

static gboolean same_link_kind(const_sg_link_t a, const_sg_link_t b)
{
  return sg_link_get_bandwidth(a) == sg_link_get_bandwidth(b) && sg_link_get_latency(a) == sg_link_get_latency(b) &&
         sg_link_is_shared(a) == sg_link_is_shared(b);
}

/* An image link: the one link of group 0 that groups map onto it, and how many do. */
typedef struct {
  sg_link_t of;
  int32_t groups;
} sym_image;

/* Do member i's hosts in group 0 and group g compute alike (speed, memory bandwidth,
 * latencies of local steps and collectives)? */
static gboolean same_host_kind(int32_t a, int32_t b)
{
  return sg_host_get_speed(g_sim.hosts[a]) == sg_host_get_speed(g_sim.hosts[b]) && g_sim.mem_bw[a] == g_sim.mem_bw[b] &&
         g_sim.local_lat[a] == g_sim.local_lat[b] && g_sim.coll_lat[a] == g_sim.coll_lat[b];
}

gboolean sp_sim_hosts_alike(void)
{
  if (!g_sim.ready)
    return FALSE;
  const char *gpu0 = sg_host_get_property_value(g_sim.hosts[0], "gpu");
  for (int32_t i = 1; i < g_sim.nhosts; i++) {
    if (!same_host_kind(0, i))
      return FALSE;
    const char *gpu = sg_host_get_property_value(g_sim.hosts[i], "gpu");
    if (g_strcmp0(gpu0, gpu) != 0)
      return FALSE;
  }
  return TRUE;
}

/* Are groups 1.. of @p specs images of group 0 under a symmetry of the platform (see
 * sp_sim_coll_groups_time)? Walks the routes between every ordered pair of members of
 * every group against group 0's, position by position: group g maps each link a of group
 * 0 to one link b (a itself when they share it); an image b != a must be of the same
 * kind, of no other link of group 0, not a link of group 0, and taken by as many groups
 * as share a (then its load and capacity are a's, scaled). The shared (not FATPIPE)
 * links group 0 shares with k > 1 groups come back with k; NULL when not symmetric. */
static GArray *sym_check(const sp_coll_spec *specs, int32_t ngroups, const int32_t *hosts, const GArray *pairs)
{
  int32_t n = specs[0].n;
  if (ngroups < 2 || n < 2 || (pairs == NULL && over_budget(n, ngroups)))
    return NULL;
  gboolean ok = TRUE;
  for (int32_t g = 1; g < ngroups && ok; g++)
    for (int32_t i = 0; i < n && ok; i++)
      ok = same_host_kind(hosts[specs[0].ranks[i]], hosts[specs[g].ranks[i]]);
  GHashTable *mine = g_hash_table_new(g_direct_hash, g_direct_equal); /* group 0's links -> groups sharing */
  GHashTable *map = g_hash_table_new_full(link_group_hash, link_group_equal, g_free, NULL); /* (a, g) -> b */
  GHashTable *img = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);   /* b -> sym_image */
  GPtrArray *order = g_ptr_array_new();                                                   /* group 0's links */
  xbt_dynar_t r0 = xbt_dynar_new(sizeof(sg_link_t), NULL), rg = xbt_dynar_new(sizeof(sg_link_t), NULL);
  /* the ordered member pairs (i, j): every one, or those @p pairs lists */
  guint npairs = pairs != NULL ? pairs->len / 2 : (guint)n * (guint)n;
  for (guint q = 0; q < npairs && ok; q++) {
    int32_t i = pairs != NULL ? g_array_index(pairs, int32_t, 2 * q) : (int32_t)(q / (guint)n);
    int32_t j = pairs != NULL ? g_array_index(pairs, int32_t, 2 * q + 1) : (int32_t)(q % (guint)n);
    if (i == j || i < 0 || j < 0 || i >= n || j >= n)
      continue;
    xbt_dynar_reset(r0);
    sg_host_get_route(g_sim.hosts[hosts[specs[0].ranks[i]]], g_sim.hosts[hosts[specs[0].ranks[j]]], r0);
    unsigned len = (unsigned)xbt_dynar_length(r0);
    for (unsigned k = 0; k < len; k++) {
      sg_link_t l = xbt_dynar_get_as(r0, k, sg_link_t);
      if (!g_hash_table_contains(mine, l)) {
        g_hash_table_insert(mine, l, GINT_TO_POINTER(1));
        g_ptr_array_add(order, l);
      }
    }
    for (int32_t g = 1; g < ngroups && ok; g++) {
      xbt_dynar_reset(rg);
      sg_host_get_route(g_sim.hosts[hosts[specs[g].ranks[i]]], g_sim.hosts[hosts[specs[g].ranks[j]]], rg);
      ok = (unsigned)xbt_dynar_length(rg) == len;
      for (unsigned k = 0; k < len && ok; k++) {
        sg_link_t a = xbt_dynar_get_as(r0, k, sg_link_t), b = xbt_dynar_get_as(rg, k, sg_link_t);
        link_group ag = { .link = a, .g = g };
        gpointer was = g_hash_table_lookup(map, &ag);
        if (was != NULL) {
          ok = was == (gpointer)b; /* group g maps a to one link */
          continue;
        }
        g_hash_table_insert(map, g_memdup2(&ag, sizeof ag), b);
        if (a == b) {
          g_hash_table_insert(mine, a, GINT_TO_POINTER(GPOINTER_TO_INT(g_hash_table_lookup(mine, a)) + 1));
          continue;
        }
        sym_image *im = g_hash_table_lookup(img, b);
        if (im == NULL) {
          ok = same_link_kind(a, b);
          im = g_new(sym_image, 1);
          *im = (sym_image){ .of = a, .groups = 0 };
          g_hash_table_insert(img, b, im);
        }
        ok = ok && im->of == a;
        im->groups++;
      }
    }
  }
  GHashTableIter it;
  gpointer key, val;
  g_hash_table_iter_init(&it, img);
  while (ok && g_hash_table_iter_next(&it, &key, &val)) {
    const sym_image *im = val;
    ok = !g_hash_table_contains(mine, key) && im->groups == GPOINTER_TO_INT(g_hash_table_lookup(mine, im->of));
  }
  GArray *out = NULL;
  if (ok) {
    out = g_array_new(FALSE, FALSE, sizeof(sym_link));
    for (guint i = 0; i < order->len && out != NULL; i++) {
      sg_link_t l = g_ptr_array_index(order, i);
      int32_t k = GPOINTER_TO_INT(g_hash_table_lookup(mine, l));
      int policy = sg_link_is_shared(l); /* SimGrid's SharingPolicy: 0 FATPIPE, 1 SHARED */
      if (k > 1 && policy == 1) {
        sym_link sl = { .link = l, .k = k, .bw = sg_link_get_bandwidth(l) };
        g_array_append_val(out, sl);
      } else if (k > 1 && policy != 0) {
        g_clear_pointer(&out, g_array_unref); /* wifi or non-linear sharing: not by 1/k */
      }
    }
  }
  xbt_dynar_free(&r0);
  xbt_dynar_free(&rg);
  g_ptr_array_unref(order);
  g_hash_table_unref(img);
  g_hash_table_unref(map);
  g_hash_table_unref(mine);
  return out;
}

static void sym_free(gpointer a)
{
  if (a != NULL)
    g_array_unref(a);
}

/* sym_check, once per layout of the groups' hosts (a key of ngroups, n and every
 * member's host): the shared links to scale, or NULL when every group must run. */
static const GArray *sym_links(const sp_coll_spec *specs, int32_t ngroups, const int32_t *hosts)
{
  int32_t n = specs[0].n;
  if (g_sim.sym_off || ngroups < 2 || over_budget(n, ngroups))
    return NULL;
  GByteArray *k = g_byte_array_sized_new((guint)(((gsize)ngroups * n + 2) * sizeof(int32_t)));
  g_byte_array_append(k, (const guint8 *)&ngroups, sizeof ngroups);
  g_byte_array_append(k, (const guint8 *)&n, sizeof n);
  for (int32_t g = 0; g < ngroups; g++)
    for (int32_t i = 0; i < n; i++)
      g_byte_array_append(k, (const guint8 *)&hosts[specs[g].ranks[i]], sizeof(int32_t));
  GBytes *key = g_byte_array_free_to_bytes(k);
  if (g_sim.sym == NULL)
    g_sim.sym = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, sym_free);
  gpointer v = NULL;
  if (g_hash_table_lookup_extended(g_sim.sym, key, NULL, &v)) {
    g_bytes_unref(key);
    return v;
  }
  GArray *a = sym_check(specs, ngroups, hosts, NULL);
  g_hash_table_insert(g_sim.sym, key, a);
  return a;
}

/* Groups too large for sym_links' check of every member pair: whether group 0's run,
 * once its programs are built, shows the siblings to be its images on the pairs it uses
 * (sym_check on those pairs), and then its shared links scaled as sp_sim_coll_groups_time
 * does. */
typedef struct {
  const sp_coll_spec *specs;
  int32_t ngroups;
  const int32_t *hosts;
  GArray *scaled;    /* the shared links scaled (to restore), NULL: not symmetric */
  gboolean declined; /* the run was stopped: not symmetric */
} sym_probe;

static gboolean sym_probe_ready(void *ud, sp_program *const *progs, int32_t world, GError **err)
{
  (void)err;
  sym_probe *pr = ud;
  GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int32_t r = 0; r < world; r++)
    for (guint k = 0; progs[r] != NULL && k < progs[r]->steps->len; k++) {
      const sp_step *st = sp_program_step(progs[r], k);
      if (st->kind != SP_STEP_SEND || st->peer < 0 || st->peer >= world)
        continue;
      gint64 key = (gint64)r * world + st->peer;
      if (g_hash_table_contains(seen, &key))
        continue;
      g_hash_table_add(seen, g_memdup2(&key, sizeof key));
      int32_t ij[2] = { r, st->peer };
      g_array_append_vals(pairs, ij, 2);
    }
  g_hash_table_unref(seen);
  pr->scaled = pairs->len > 0 ? sym_check(pr->specs, pr->ngroups, pr->hosts, pairs) : NULL;
  g_array_unref(pairs);
  if (pr->scaled == NULL) {
    pr->declined = TRUE;
    probes_declined++;
    return FALSE;
  }
  probes_accepted++;
  scale_links(pr->scaled, TRUE);
  return TRUE;
}

gboolean sp_sim_coll_groups_symmetric(const sp_coll_spec *specs, int32_t ngroups, const int32_t *hosts)
{
  if (!g_sim.ready || specs == NULL || hosts == NULL || ngroups < 2)
    return FALSE;
  for (int32_t g = 0; g < ngroups; g++)
    for (int32_t i = 0; i < specs[g].n; i++) {
      int32_t h = hosts[specs[g].ranks[i]];
      if (h < 0 || h >= g_sim.nhosts || specs[g].n != specs[0].n)
        return FALSE;
    }
  return sym_links(specs, ngroups, hosts) != NULL;
}

/* Run @p src's ranks 0..world-1 on hosts @p map at protocol cost @p cost. */
static gboolean run_groups(coll_src *src, const int32_t *map, int32_t world, const sp_tune_cost *cost, sp_fidelity fid,
                           double *seconds, GError **err)
{
  gboolean ok = sp_sim_set_host_map(map, world, err);
  sp_sim_set_cost(cost);
  ok = ok && sp_sim_run_common(coll_get, coll_release, coll_stream, src, world, TRUE, NULL, fid, NULL, seconds, err);
  sp_sim_set_cost(NULL);
  sp_program_free(src->spare);
  src->spare = NULL;
  sp_sim_set_host_map(NULL, 0, NULL);
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
      a2a_rail_block(&rs[g], fid);
      ok = sp_coll_spec_validate(&rs[g], err); /* as resolved, once for all members */
    }
    if (!ok)
      sp_sim_set_host_map(NULL, 0, NULL);
  }
  if (ok) {
    for (int32_t g = 0; g < ngroups && comm_only; g++)
      comm_only = free_local_steps(&rs[g]);
    /* groups 1.. as images of group 0: group 0 alone, on its hosts, its shared links
     * at 1/k (resolved above on the whole platform, as every group is). Groups with too
     * many member pairs to check them all are checked on the pairs group 0's programs
     * use, once built (sym_probe_ready); where that fails, every group runs. */
    gboolean early = probe_first(n, ngroups, fid);
    const GArray *sym = ngroups > 1 && !early ? sym_links(specs, ngroups, hosts) : NULL;
    sym_probe pr = { .specs = specs, .ngroups = ngroups, .hosts = hosts };
    gboolean probe = sym == NULL && ngroups > 1 && !g_sim.sym_off && early; /* early covers over_budget in flow */
    gboolean all = sym == NULL && !probe;
    if (!all) {
      /* group 0 as ranks 0..n-1 on its hosts: member i of group 0 is rank i */
      int32_t *h0 = g_new(int32_t, n), *r0 = g_new(int32_t, n), *g0 = g_new0(int32_t, n);
      for (int32_t i = 0; i < n; i++) {
        h0[i] = hosts[rs[0].ranks[i]];
        r0[i] = i;
      }
      const int32_t *ranks0 = rs[0].ranks;
      rs[0].ranks = r0;
      coll_src src = { .spec = &rs[0], .comm_only = comm_only, .specs = rs, .group = g0, .member = r0 };
      scale_links(sym, TRUE);
      if (probe) {
        g_sim.before_run = sym_probe_ready;
        g_sim.before_ud = &pr;
      }
      ok = run_groups(&src, h0, n, &cost, fid, seconds, err);
      g_sim.before_run = NULL;
      g_sim.before_ud = NULL;
      scale_links(sym != NULL ? sym : pr.scaled, FALSE);
      if (pr.scaled != NULL)
        g_array_unref(pr.scaled);
      rs[0].ranks = ranks0;
      g_free(h0);
      g_free(r0);
      g_free(g0);
      /* not symmetric on the pairs it uses (the run stopped, no error): every group runs */
      all = pr.declined && !ok && (err == NULL || *err == NULL);
      ok = ok || all;
    }
    if (ok && all) {
      coll_src src = { .spec = &rs[0], .comm_only = comm_only, .specs = rs, .group = group, .member = member };
      ok = run_groups(&src, hosts, world, &cost, fid, seconds, err);
    }
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

/* Members per node of @p spec's group when they come as runs of that many consecutive
 * members per node, each node once (*@p runs: the nodes); 0 otherwise. */
static int32_t node_runs(const sp_coll_spec *spec, int32_t *runs)
{
  GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  int32_t k = 0, run = 0, prev = -1;
  gboolean ok = TRUE;
  *runs = 0;
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
      (*runs)++;
    }
  }
  if (ok && k != 0 && run != k)
    ok = FALSE;
  g_hash_table_unref(seen);
  return ok ? run : 0;
}

/* FLOW: a direct all-to-all whose members come as equal runs per node is priced by
 * rail (lower_direct.c, a2a_by_rail): its spec gets the members per node as its block. */
static void a2a_rail_block(sp_coll_spec *spec, sp_fidelity fid)
{
  int32_t runs = 0;
  if (fid == SP_FIDELITY_FLOW && spec->coll == SP_COLL_ALL_TO_ALL && spec->algo == SP_ALGO_DIRECT &&
      spec->channel_block == 0 && spec->n > 2)
    spec->channel_block = node_runs(spec, &runs);
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
  sp_algo algo = sp_algo_choose(spec);
  gboolean tree = (algo == SP_ALGO_TREE || algo == SP_ALGO_NVLS_TREE || algo == SP_ALGO_COLLNET_DIRECT ||
                   algo == SP_ALGO_COLLNET_CHAIN) && spec->coll == SP_COLL_ALL_REDUCE;
  if (algo != SP_ALGO_RING && !tree)
    return;
  int32_t runs = 0, run = node_runs(spec, &runs);
  gboolean ok = run > 0;
  if (tree) { /* NCCL's double binary tree chains each node's members (spsim/dbtree.h); the
                 hierarchical all-reduces (lower_hier.c) take the node's members as a block */
    if (ok)
      *block = run;
    return;
  }
  if (!ok || runs < 2 || run < 2)
    return;
  /* one channel per member of a node, but no more than NCCL runs for these bytes:
   * small collectives (most of all ring LL on many ranks) use fewer */
  sp_tune_topo t;
  sp_sim_tune_topo(spec, &t);
  int32_t nc = sp_tune_channels(&t, algo, spec->proto, nccl_bytes(spec));
  *channels = MIN(MIN(run, nc), SP_MAX_CHANNELS);
  *block = run;
}

