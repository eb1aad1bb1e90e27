/* Engine side of the what-if analysis (see whatif_sim.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "spsim/coll.h"
#include "spsim/dbtree.h"
#include "spsim/error.h"
#include "spsim/step.h"
#include "platform.h"
#include "sim.h"
#include "stepsim.h"
#include "whatif_sim.h"

gboolean sp_whatif_engine_open(const char *xml, GError **err)
{
  return sp_sim_init(xml, err);
}

int32_t sp_whatif_engine_hosts(void)
{
  return sp_sim_num_hosts();
}

gboolean sp_whatif_engine_simulate(const sp_comm *c, int32_t gpus_per_node, gboolean step_fidelity,
                                   uint64_t bytes, double *seconds, GError **err)
{
  return sp_whatif_engine_simulate_as(c, gpus_per_node, step_fidelity, bytes, SP_ALGO_AUTO, SP_PROTO_AUTO, seconds,
                                      err);
}

/* The calls of @p nb groups of @p n members, as NCCL would issue them (count per member,
 * ring channels per node): the groups {b + j*stride : j < n}, b < nb, on their hosts; their
 * members are the simulated ranks, in host order (rank j*nb + b on host b + j*stride), so
 * the hosts between them, idle, are not part of the run. g_free *@p specs, *@p members,
 * *@p hosts. */
static void group_calls(const sp_comm *c, int32_t gpus_per_node, uint64_t bytes, sp_algo algo, sp_proto proto,
                        int32_t n, int32_t nb, sp_coll_spec **specs, int32_t **members, int32_t **hosts)
{
  sp_coll_spec cs;
  sp_comm_coll_spec(c, gpus_per_node, bytes, &cs);
  *members = g_new(int32_t, (gsize)n * nb);
  *hosts = g_new(int32_t, (gsize)n * nb);
  *specs = g_new(sp_coll_spec, nb);
  for (int32_t b = 0; b < nb; b++) {
    (*specs)[b] = (sp_coll_spec){ .coll = c->coll, .algo = algo, .proto = proto, .dtype = SP_BF16,
                                  .redop = SP_RED_SUM, .ranks = *members + (size_t)b * n, .n = n, .count = cs.count,
                                  .channels = cs.channels, .channel_block = cs.channel_block, .no_hier = TRUE };
    for (int32_t j = 0; j < n; j++) {
      (*members)[(size_t)b * n + j] = j * nb + b;
      (*hosts)[j * nb + b] = b + j * c->stride;
    }
  }
}

gboolean sp_whatif_engine_choose(const sp_comm *c, int32_t gpus_per_node, uint64_t bytes, sp_algo *algo,
                                 sp_proto *proto, GError **err)
{
  *algo = SP_ALGO_AUTO;
  *proto = SP_PROTO_AUTO;
  if (c->n < 2 || bytes == 0) return TRUE;
  int32_t n = c->coll == SP_COLL_SEND_RECV ? 2 : c->n;
  if (c->stride < 1 || gpus_per_node < 1 || (int64_t)(n - 1) * c->stride + 1 > sp_sim_num_hosts()) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "engine pricer: a %s group of %d ranks %d apart does not fit the %d hosts",
                sp_coll_name(c->coll), n, c->stride, sp_sim_num_hosts());
    return FALSE;
  }
  /* group 0 alone, on the hosts sp_whatif_engine_simulate gives it */
  sp_coll_spec *specs, out;
  int32_t *members, *hosts;
  group_calls(c, gpus_per_node, bytes, SP_ALGO_AUTO, SP_PROTO_AUTO, n, 1, &specs, &members, &hosts);
  sp_tune_cost cost;
  gboolean ok = sp_sim_set_host_map(hosts, n, err) && sp_sim_coll_resolve(&specs[0], &out, &cost, NULL, err);
  sp_sim_set_host_map(NULL, 0, NULL);
  if (ok) {
    *algo = out.algo;
    *proto = out.proto;
  }
  g_free(specs);
  g_free(members);
  g_free(hosts);
  return ok;
}

/* How many groups sp_whatif_engine_simulate_as runs for @p c: the group of rank 0 and its
 * siblings on the same nodes, min(stride, GPUs per node), or the first alone where the
 * siblings do not fit the platform. */
static int32_t sibling_groups(const sp_comm *c, int32_t gpus_per_node)
{
  int32_t n = c->coll == SP_COLL_SEND_RECV ? 2 : c->n;
  int32_t nb = MIN(c->stride, gpus_per_node);
  return (int64_t)(n - 1) * c->stride + nb <= sp_sim_num_hosts() ? nb : 1;
}

gboolean sp_whatif_engine_simulate_as(const sp_comm *c, int32_t gpus_per_node, gboolean step_fidelity,
                                      uint64_t bytes, sp_algo algo, sp_proto proto, double *seconds, GError **err)
{
  if (c->n < 2 || bytes == 0) {
    *seconds = 0.0;
    return TRUE;
  }
  if (c->stride < 1 || gpus_per_node < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "engine pricer: bad group (n=%d, stride=%d, %d GPUs per node)",
                c->n, c->stride, gpus_per_node);
    return FALSE;
  }
  int32_t n = c->coll == SP_COLL_SEND_RECV ? 2 : c->n;
  int32_t nb = sibling_groups(c, gpus_per_node);
  int64_t world = (int64_t)(n - 1) * c->stride + nb;
  if (world > sp_sim_num_hosts()) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                "a %s group of %d ranks %d apart needs %" G_GINT64_FORMAT " hosts; the platform has %d",
                sp_coll_name(c->coll), n, c->stride, world, sp_sim_num_hosts());
    return FALSE;
  }
  sp_coll_spec *specs;
  int32_t *members, *hosts;
  group_calls(c, gpus_per_node, bytes, algo, proto, n, nb, &specs, &members, &hosts);
  /* NCCL's NVLS-tree and CollNet all-reduces are priced by `spsim bench` but not yet by
   * the what-if (no_hier in group_calls). With NVLS-tree's pipeline one FLOW group per rank
   * the default run takes 9.0 s with them instead of 6.7 s (`spsim platforms/dgx.xml`, its
   * --json and bench/validate.sh byte-identical), but the llama3-405b sweep on 16,384 GPUs
   * 392.8 s instead of 20.9 s for the same answer (release build, 2 cores; before that
   * change the default sweep's closed forms alone took 71 s instead of 10.7 s; with the
   * node's exchanges by rail, 423.8 s against 31.7 s: bench/RESULTS.md) */
  gboolean ok = sp_sim_coll_groups_time(specs, nb, hosts, step_fidelity ? SP_FIDELITY_STEP : SP_FIDELITY_FLOW,
                                        seconds, err);
  g_free(specs);
  g_free(members);
  g_free(hosts);
  return ok;
}

gboolean sp_whatif_engine_replay(sp_step_replay *r, double *seconds, GError **err)
{
  if (!sp_sim_set_host_map(sp_step_replay_ranks(r), sp_step_replay_nranks(r), err)) return FALSE;
  gboolean ok = sp_sim_run(sp_step_replay_programs(r), sp_step_replay_nranks(r), sp_step_replay_bufs(r),
                           SP_FIDELITY_STEP, NULL, seconds, err);
  sp_sim_set_host_map(NULL, 0, NULL);
  return ok;
}

/* ---------- a what-if on a platform file ---------- */

/* The engine's state for one what-if: the platform and a cache of priced collectives. */
typedef struct {
  char *xml;
  int32_t hosts;           /* hosts the file declares */
  int32_t gpus_per_node;   /* of the job (set when the engine opens) */
  gboolean step_fidelity;  /* --fidelity step */
  gboolean opened;         /* the platform is loaded */
  GHashTable *cache;       /* price_key -> double* */
  GHashTable *choice;      /* price_key (auto) -> price_key with the algorithm and protocol chosen */
  gboolean noting;         /* note(): misses are noted, not priced */
  GHashTable *noted_set;   /* price_key, while noting */
  GArray *noted;           /* price_key, in the order first asked for */
  int32_t line_max;        /* groups above this many simulated ranks: on a line (0: LINE_SIM_MAX) */
  guint by_line;           /* prices drawn from such lines */
  int alike;               /* the platform's hosts all alike: 1, not: 2, not asked yet: 0 */
} wi_engine;

/* A priced point: (collective, group size, stride, bytes, algorithm and protocol given,
 * SP_ALGO_AUTO / SP_PROTO_AUTO when chosen for the size). */
typedef struct {
  int32_t coll, n, stride;
  uint64_t bytes;
  int32_t algo, proto;
} price_key;

static guint price_key_hash(gconstpointer p)
{
  const price_key *k = p;
  guint64 h = (guint64)(uint32_t)k->coll * 0x9E3779B97F4A7C15ull;
  h = (h ^ (uint32_t)k->n) * 0x9E3779B97F4A7C15ull;
  h = (h ^ (uint32_t)k->stride) * 0x9E3779B97F4A7C15ull;
  h = (h ^ k->bytes) * 0x9E3779B97F4A7C15ull;
  h = (h ^ ((uint64_t)(uint32_t)k->algo << 32 | (uint32_t)k->proto)) * 0x9E3779B97F4A7C15ull;
  return (guint)(h ^ (h >> 32));
}

static gboolean price_key_equal(gconstpointer a, gconstpointer b)
{
  const price_key *x = a, *y = b;
  return x->coll == y->coll && x->n == y->n && x->stride == y->stride && x->bytes == y->bytes && x->algo == y->algo &&
         x->proto == y->proto;
}

/* The key of @p c at @p bytes run with @p algo and @p proto (zeroed first: padding too,
 * since keys travel between processes). */
static price_key price_key_of(const sp_comm *c, uint64_t bytes, sp_algo algo, sp_proto proto)
{
  price_key key;
  memset(&key, 0, sizeof key);
  key.coll = (int32_t)c->coll;
  key.n = c->n;
  key.stride = c->stride;
  key.bytes = bytes;
  key.algo = (int32_t)algo;
  key.proto = (int32_t)proto;
  return key;
}

static void wi_engine_free(gpointer p)
{
  wi_engine *e = p;
  if (e == NULL) return;
  g_free(e->xml);
  if (e->cache) g_hash_table_destroy(e->cache);
  if (e->choice) g_hash_table_destroy(e->choice);
  if (e->noted_set) g_hash_table_destroy(e->noted_set);
  if (e->noted) g_array_unref(e->noted);
  g_free(e);
}

static gboolean wi_open(void *user, const sp_step_ctx *c, GError **err)
{
  wi_engine *e = user;
  e->gpus_per_node = c->gpus_per_node;
  if (!sp_whatif_engine_open(e->xml, err)) return FALSE;
  e->opened = TRUE;
  if (sp_whatif_engine_hosts() != e->hosts) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "platform '%s': SimGrid loads %d hosts where the file declares %d", e->xml,
                sp_whatif_engine_hosts(), e->hosts);
    return FALSE;
  }
  return TRUE;
}

/* One simulation per (collective, group, size grid point, algorithm, protocol), cached. */
static gboolean engine_point(wi_engine *e, const sp_comm *c, uint64_t bytes, sp_algo algo, sp_proto proto, double *t,
                             GError **err)
{
  price_key key = price_key_of(c, bytes, algo, proto);
  double *hit = g_hash_table_lookup(e->cache, &key);
  if (hit != NULL) { *t = *hit; return TRUE; }
  if (e->noting) {
    if (!g_hash_table_contains(e->noted_set, &key)) {
      g_hash_table_add(e->noted_set, g_memdup2(&key, sizeof key));
      g_array_append_val(e->noted, key);
    }
    *t = 0.0;
    return TRUE;
  }
  gint64 t0 = g_get_monotonic_time();
  if (!sp_whatif_engine_simulate_as(c, e->gpus_per_node, e->step_fidelity, bytes, algo, proto, t, err)) return FALSE;
  if (g_getenv("SPSIM_DEBUG_PRICE"))
    fprintf(stderr, "price %s %s/%s n=%d stride=%d bytes=%" G_GUINT64_FORMAT " -> %.6g s (%.3f s wall)\n", sp_coll_name(c->coll), sp_algo_name(algo), sp_proto_name(proto), c->n,
               c->stride, bytes, *t, (double)(g_get_monotonic_time() - t0) / 1e6);
  double *v = g_new(double, 1);
  *v = *t;
  g_hash_table_insert(e->cache, g_memdup2(&key, sizeof key), v);
  return TRUE;
}

/* SimGrid prices sizes on a grid of powers of two and interpolates linearly between
 * them: a collective's cost is affine in its size between grid points (latency terms
 * plus bytes over bandwidth; ring chunk rounds add latency in proportion to size).
 * Above ENGINE_MAX_BYTES it extrapolates the line through the last two points, so
 * a gradient all-reduce of 100 GiB on 1,024 ranks costs two simulations of 32 and
 * 64 MiB, not one of hours. Those two points run the algorithm and protocol that
 * NCCL's tuning model picks for the size asked: each point's own choice may differ
 * (LL128 at 32 MiB, Simple at 64 MiB on a large ring), and a line through two
 * algorithms can fall (an all-gather of 6 GiB on 2,048 ranks priced at -16,000 s).
 * A sweep of thousands of layouts then needs a few hundred simulations. */
#define ENGINE_MAX_BYTES ((uint64_t)64 << 20)

/* The algorithm and protocol chosen for @p c at its size, cached per size. */
static gboolean engine_choice(wi_engine *e, const sp_comm *c, sp_algo *algo, sp_proto *proto, GError **err)
{
  price_key key = price_key_of(c, c->bytes, SP_ALGO_AUTO, SP_PROTO_AUTO);
  if (e->choice == NULL) e->choice = g_hash_table_new_full(price_key_hash, price_key_equal, g_free, g_free);
  const price_key *hit = g_hash_table_lookup(e->choice, &key);
  if (hit == NULL) {
    if (!sp_whatif_engine_choose(c, e->gpus_per_node, c->bytes, algo, proto, err)) return FALSE;
    price_key *v = g_memdup2(&key, sizeof key);
    v->algo = (int32_t)*algo;
    v->proto = (int32_t)*proto;
    g_hash_table_insert(e->choice, g_memdup2(&key, sizeof key), v);
    return TRUE;
  }
  *algo = (sp_algo)hit->algo;
  *proto = (sp_proto)hit->proto;
  return TRUE;
}

/* Large trees and rings are priced from smaller ones of the same shape (by_line): the
 * simulation of a group grows faster than its size, from 1-3 s for 4,096 simulated ranks
 * to 13-29 s for a tree of 16,384 and 90-136 s of 32,768 (bench/RESULTS.md, "The
 * 131,072-GPU sweep"), a ring all-gather from 1.6 s at 16,384 members to 11.9 s at
 * 32,768, and a sweep of 131,072 GPUs needs groups of all of them. Simulated ranks: the
 * group's members times the sibling groups that run beside it. */
#define LINE_SIM_MAX 4096

/* Largest relative difference between the two slopes of the three smaller groups for the
 * line to be used (they agree to 1e-4 or better where the time is affine, and differ by
 * tens of percent where it is not yet). */
#define LINE_SLOPE_TOL 0.01

/* The deepest member of any instance of NCCL's double binary tree over @p n members
 * in nodes of @p block (the two trees alternate over the instances). */
static int32_t tree_depth(int32_t n, int32_t block)
{
  return MAX(sp_dbtree_depth_max(n, block, 0), sp_dbtree_depth_max(n, block, 1));
}

/* A group of more than @p sim_max simulated ranks, from the same collective (stride,
 * bytes, algorithm, protocol, members per node and sibling groups) on n / 2^j, n / 2^(j+1)
 * and n / 2^(j+2) members (the largest within @p sim_max), as a line in x:
 * - TREE all-reduce, x = the tree's depth H: its lowering (lower_dbtree.c) runs C + 2H + 1
 *   lock-step phases for C chunks, and once the tree spans enough of the fat tree each
 *   level it gains adds phases of one cost. Measured on `spsim platform dgx --nodes
 *   16384`, LL128, one member per node: at 32 MiB 256 to 16,384 members (H 8 to 14) on
 *   one line to 0.01 us, members that are not a power of two (1,536 to 12,288: the depth
 *   of the next one) within 0.1 % of it; at 64 MiB from 512 members on, not below (256
 *   members add 828 us, 512 430 us, every level after 379.02 us).
 * - RING all-gather, reduce-scatter and all-reduce, x = n: n - 1 (twice n - 1) steps of
 *   one cost once a step's share of the bytes is small (all-gather of 32 MiB, LL128, 8
 *   members per node: 1,024 to 32,768 members at 1.45714-1.45719 us per member).
 * The line is used only where the three smaller groups' slopes agree (LINE_SLOPE_TOL).
 * @return TRUE with *@p done FALSE where it is not (n without such a triple, slopes that
 * disagree): the caller simulates. */
static gboolean by_line(wi_engine *e, const sp_comm *c, int32_t sim_max, int32_t nb, uint64_t bytes, sp_algo algo,
                        sp_proto proto, double *t, GError **err, gboolean *done)
{
  *done = FALSE;
  sp_coll_spec cs;
  sp_comm_coll_spec(c, e->gpus_per_node, bytes, &cs);
  int32_t B = algo == SP_ALGO_TREE ? sp_dbtree_block(c->n, cs.channel_block) : MAX(cs.channel_block, 1);
  int32_t j = 1;
  while ((int64_t)(c->n >> j) * nb > sim_max) j++;
  /* the three smaller groups in whole nodes of B members, over three nodes or more
   * (NCCL's tree bandwidth is the same from three nodes on: tuning.c, nccl_tree_busbw) */
  if (c->n % ((int64_t)B << (j + 2)) != 0 || (c->n >> (j + 2)) / B < 3) return TRUE;
  sp_comm r[3];
  double tr[3], xr[3];
  for (int i = 0; i < 3; i++) {
    r[i] = *c;
    r[i].n = c->n >> (j + i);
    if (!engine_point(e, &r[i], bytes, algo, proto, &tr[i], err)) return FALSE;
  }
  if (e->noting) { *done = TRUE; *t = 0.0; return TRUE; }
  double x = algo == SP_ALGO_TREE ? tree_depth(c->n, B) : c->n;
  for (int i = 0; i < 3; i++) xr[i] = algo == SP_ALGO_TREE ? tree_depth(r[i].n, B) : r[i].n;
  if (xr[0] <= xr[1] || xr[1] <= xr[2]) return TRUE;
  double s01 = (tr[0] - tr[1]) / (xr[0] - xr[1]), s12 = (tr[1] - tr[2]) / (xr[1] - xr[2]);
  if (!(fabs(s01 - s12) <= LINE_SLOPE_TOL * fabs(s01)) || !(s01 > 0)) return TRUE;
  *t = tr[0] + s01 * (x - xr[0]);
  *done = TRUE;
  e->by_line++;
  if (g_getenv("SPSIM_DEBUG_PRICE"))
    fprintf(stderr, "price %s %s/%s n=%d stride=%d bytes=%" G_GUINT64_FORMAT " -> %.6g s (line from %d, %d and %d members)\n",
            sp_coll_name(c->coll), sp_algo_name(algo), sp_proto_name(proto), c->n, c->stride, bytes, *t, r[2].n, r[1].n,
            r[0].n);
  return TRUE;
}

/* engine_point, with large trees and rings on their line where they can be (the line's
 * price is kept in the cache under the algorithm and protocol it ran). */
static gboolean engine_price(wi_engine *e, const sp_comm *c, uint64_t bytes, sp_algo algo, sp_proto proto, double *t,
                             GError **err)
{
  int32_t sim_max = e->line_max > 0 ? e->line_max : LINE_SIM_MAX;
  int32_t nb = sibling_groups(c, e->gpus_per_node);
  gboolean ring_coll = c->coll == SP_COLL_ALL_REDUCE || c->coll == SP_COLL_ALL_GATHER || c->coll == SP_COLL_REDUCE_SCATTER;
  /* not where the group runs without the siblings its smaller groups would have, nor on
   * a mixed cluster, where the smaller groups on the first hosts may not see every kind
   * of GPU and NIC the whole group spans: simulated as it is */
  if (!ring_coll || (int64_t)c->n * nb <= sim_max || nb != MIN(c->stride, e->gpus_per_node))
    return engine_point(e, c, bytes, algo, proto, t, err);
  if (e->alike == 0) e->alike = sp_sim_hosts_alike() ? 1 : 2;
  if (e->alike != 1) return engine_point(e, c, bytes, algo, proto, t, err);
  sp_algo a = algo;
  sp_proto p = proto;
  if (a == SP_ALGO_AUTO || p == SP_PROTO_AUTO) {
    sp_comm at = *c;
    at.bytes = bytes;
    if (!engine_choice(e, &at, &a, &p, err)) return FALSE;
    if (algo != SP_ALGO_AUTO) a = algo;
    if (proto != SP_PROTO_AUTO) p = proto;
  }
  if (a == SP_ALGO_RING || (a == SP_ALGO_TREE && c->coll == SP_COLL_ALL_REDUCE)) {
    price_key key = price_key_of(c, bytes, a, p);
    const double *hit = g_hash_table_lookup(e->cache, &key);
    if (hit != NULL) { *t = *hit; return TRUE; }
    gboolean done;
    if (!by_line(e, c, sim_max, nb, bytes, a, p, t, err, &done)) return FALSE;
    if (done && !e->noting) g_hash_table_insert(e->cache, g_memdup2(&key, sizeof key), g_memdup2(t, sizeof *t));
    if (done) return TRUE;
  }
  return engine_point(e, c, bytes, algo, proto, t, err);
}

static gboolean wi_price(void *user, const sp_comm *c, double *seconds, GError **err)
{
  wi_engine *e = user;
  if (c->n < 2 || c->bytes == 0) { *seconds = 0.0; return TRUE; }
  uint64_t lo = 1;
  while (lo <= c->bytes / 2) lo <<= 1;
  sp_algo algo = SP_ALGO_AUTO;
  sp_proto proto = SP_PROTO_AUTO;
  if (lo > ENGINE_MAX_BYTES / 2) {
    lo = ENGINE_MAX_BYTES / 2;
    if (!engine_choice(e, c, &algo, &proto, err)) return FALSE;
  }
  if (lo == c->bytes || lo < 4096) return engine_price(e, c, c->bytes, algo, proto, seconds, err);
  double tl, th;
  if (!engine_price(e, c, lo, algo, proto, &tl, err) || !engine_price(e, c, 2 * lo, algo, proto, &th, err))
    return FALSE;
  *seconds = tl + (th - tl) * ((double)c->bytes - (double)lo) / (double)lo;
  if (!(*seconds >= 0) || !isfinite(*seconds)) { /* a line that falls: never a price */
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                "the %s of %" G_GUINT64_FORMAT " bytes on %d ranks %d apart extrapolates to %.6g s from %.6g s at %"
                G_GUINT64_FORMAT " and %.6g s at %" G_GUINT64_FORMAT " bytes (one algorithm "
                "and protocol, yet more bytes cost less): a fault of spsim's pricer, please report it with the platform",
                sp_coll_name(c->coll), c->bytes, c->n, c->stride, *seconds, tl, lo, th, 2 * lo);
    return FALSE;
  }
  return TRUE;
}

struct sp_whatif_pricer {
  wi_engine e;
};

sp_whatif_pricer *sp_whatif_pricer_new(const char *xml, int32_t gpus_per_node, gboolean step_fidelity, GError **err)
{
  if (gpus_per_node < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "pricer: %d GPUs per node (at least 1)", gpus_per_node);
    return NULL;
  }
  if (!sp_whatif_engine_open(xml, err)) return NULL;
  sp_whatif_pricer *p = g_new0(sp_whatif_pricer, 1);
  p->e.hosts = sp_whatif_engine_hosts();
  p->e.gpus_per_node = gpus_per_node;
  p->e.step_fidelity = step_fidelity;
  p->e.opened = TRUE;
  p->e.cache = g_hash_table_new_full(price_key_hash, price_key_equal, g_free, g_free);
  return p;
}

gboolean sp_whatif_pricer_price(sp_whatif_pricer *p, const sp_comm *c, double *seconds, GError **err)
{
  return wi_price(&p->e, c, seconds, err);
}

void sp_whatif_pricer_set_line_max(sp_whatif_pricer *p, int32_t ranks)
{
  p->e.line_max = ranks;
}

guint sp_whatif_pricer_by_line(const sp_whatif_pricer *p)
{
  return p->e.by_line;
}

void sp_whatif_pricer_free(sp_whatif_pricer *p)
{
  if (p != NULL) wi_engine_free(&p->e); /* its first member: frees p */
}

/* ---- pricing shared between processes (sp_whatif_spread) ---- */

static void wi_note(void *user, gboolean on)
{
  wi_engine *e = user;
  e->noting = on;
  if (on && e->noted == NULL) {
    e->noted_set = g_hash_table_new_full(price_key_hash, price_key_equal, g_free, NULL);
    e->noted = g_array_new(FALSE, FALSE, sizeof(price_key));
  }
}

static GBytes *wi_take_noted(void *user)
{
  wi_engine *e = user;
  if (e->noted == NULL) return g_bytes_new(NULL, 0);
  GBytes *b = g_bytes_new(e->noted->data, sizeof(price_key) * e->noted->len);
  g_array_set_size(e->noted, 0);
  g_hash_table_remove_all(e->noted_set);
  return b;
}

static gboolean wi_price_keys(void *user, const void *keys, guint n, double *seconds, GError **err)
{
  wi_engine *e = user;
  const price_key *k = keys;
  for (guint i = 0; i < n; i++) {
    sp_comm c = { .coll = (sp_coll)k[i].coll, .n = k[i].n, .stride = k[i].stride, .bytes = k[i].bytes };
    if (!engine_point(e, &c, k[i].bytes, (sp_algo)k[i].algo, (sp_proto)k[i].proto, &seconds[i], err)) return FALSE;
  }
  return TRUE;
}

static void wi_add_prices(void *user, const void *keys, const double *seconds, guint n)
{
  wi_engine *e = user;
  const price_key *k = keys;
  for (guint i = 0; i < n; i++)
    if (!g_hash_table_contains(e->cache, &k[i]))
      g_hash_table_insert(e->cache, g_memdup2(&k[i], sizeof k[i]), g_memdup2(&seconds[i], sizeof seconds[i]));
}

static gboolean wi_simulate(void *user, const sp_step_ctx *c, const sp_layout *l, gboolean engine, double slowdown,
                            sp_step_result *r, GError **err)
{
  (void)user;
  return sp_stepsim_eval(c, l, engine, slowdown, r, NULL, err);
}

/* The GPUs a what-if uses (the first @p n hosts) when they differ in speed, memory or
 * HBM bandwidth: *@p p takes the slowest speed and HBM bandwidth, the smallest memory
 * and the slowest GPU's model, and @return the header line saying so (NULL: alike).
 * Every GPU of a synchronous step does its stage's share and waits for the others at
 * each collective and pipeline transfer, so the slowest GPU sets the pace; a layout
 * must fit on the GPU with the least memory. */
static char *mixed_cluster(const sp_plat_desc *pd, int32_t n, sp_whatif_platform *p)
{
  const sp_plat_host *H = (const sp_plat_host *)(void *)pd->host->data;
  gboolean mixed = FALSE;
  for (int32_t i = 1; i < n && !mixed; i++)
    mixed = H[i].speed != H[0].speed || H[i].gpu_mem != H[0].gpu_mem || H[i].hbm_bw != H[0].hbm_bw;
  if (!mixed) return NULL;
  /* kinds in order of first appearance */
  GArray *first = g_array_new(FALSE, FALSE, sizeof(int32_t)), *count = g_array_new(FALSE, FALSE, sizeof(int32_t));
  int32_t slow = -1;
  double mem = 0, hbm = 0;
  for (int32_t i = 0; i < n; i++) {
    guint k = 0;
    for (; k < first->len; k++) {
      const sp_plat_host *f = &H[g_array_index(first, int32_t, k)];
      if (f->speed == H[i].speed && f->gpu_mem == H[i].gpu_mem && f->hbm_bw == H[i].hbm_bw &&
          g_strcmp0(f->gpu, H[i].gpu) == 0)
        break;
    }
    if (k == first->len) {
      int32_t one = 0;
      g_array_append_val(first, i);
      g_array_append_val(count, one);
    }
    g_array_index(count, int32_t, k)++;
    if (H[i].speed > 0 && (slow < 0 || H[i].speed < H[slow].speed)) slow = i;
    if (H[i].gpu_mem > 0 && (mem == 0 || H[i].gpu_mem < mem)) mem = H[i].gpu_mem;
    if (H[i].hbm_bw > 0 && (hbm == 0 || H[i].hbm_bw < hbm)) hbm = H[i].hbm_bw;
  }
  GString *s = g_string_new("mixed cluster: ");
  for (guint k = 0; k < first->len; k++) {
    const sp_plat_host *f = &H[g_array_index(first, int32_t, k)];
    g_string_append_printf(s, "%s%d x %s (%.1f TFLOP/s, %.1f GiB, %.2f TB/s HBM)", k ? ", " : "",
                           g_array_index(count, int32_t, k), f->gpu ? f->gpu : "GPU", f->speed / 1e12,
                           f->gpu_mem / (1024.0 * 1024.0 * 1024.0), f->hbm_bw / 1e12);
  }
  g_string_append_printf(s, "; every GPU is priced as the slowest (%.1f TFLOP/s, %.2f TB/s HBM: a synchronous step "
                         "waits for it) and a layout must fit the smallest memory (%.1f GiB)",
                         slow >= 0 ? H[slow].speed / 1e12 : 0.0, hbm / 1e12, mem / (1024.0 * 1024.0 * 1024.0));
  if (slow >= 0) {
    p->speed = H[slow].speed;
    p->gpu_model = H[slow].gpu;
  }
  p->gpu_mem = mem;
  p->hbm_bw = hbm;
  g_array_unref(first);
  g_array_unref(count);
  return g_string_free(s, FALSE);
}

sp_whatif_result *sp_whatif_run(const sp_whatif_opts *o, const char *xml, GError **err)
{
  if (!sp_whatif_opts_check(o, err)) return NULL;
  sp_plat_desc *pd = sp_plat_read(xml, err);
  if (pd == NULL) return NULL;
  sp_whatif_result *res = NULL;
  wi_engine *e = NULL;
  char *mixed = NULL, *gemm_table = NULL;
  if (pd->unknown->len > 0) {
    g_autofree char *known = g_strjoinv(", ", (char **)sp_plat_known_props);
    g_ptr_array_add(pd->unknown, NULL);
    g_autofree char *list = g_strjoinv(", ", (char **)pd->unknown->pdata);
    g_ptr_array_remove_index(pd->unknown, pd->unknown->len - 1);
    if (!o->lenient) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "platform '%s': unknown host property %s (spsim knows %s; "
                  "--lenient ignores unknown keys with a warning)", xml, list, known);
      goto out;
    }
    if (o->report) {
      g_autofree char *w = g_strdup_printf("platform '%s': ignoring unknown host properties (--lenient): %s", xml, list);
      o->report(o->user, SP_WHATIF_WARNING, w);
    }
  }
  /* GPUs per node: the flag's, else the platform's (a bad flag is the what-if's to refuse) */
  int32_t gpn = o->gpus_per_node;
  if (gpn == SP_WHATIF_UNSET_INT && (gpn = sp_plat_gpus_per_node(pd, 0, err)) <= 0) goto out;
  sp_whatif_platform plat = { .name = xml, .hosts = (int32_t)pd->names->len, .gpus_per_node = gpn, .node_gpus = pd->gpus_per_node,
                              .gpu_model = pd->gpu_model, .speed = pd->speed, .gpu_mem = pd->gpu_mem,
                              .hbm_bw = pd->hbm_bw };
  /* a platform of this machine (spsim platform local): its measured rates; the GEMM
   * table's path is relative to the platform's folder */
  if (pd->local_gemm_flops > 0) {
    plat.measured_gemm_flops = pd->local_gemm_flops;
    plat.measured_attn_flops = pd->local_attn_flops;
    plat.measured_attn_bwd_flops = pd->local_attn_bwd_flops;
    if (pd->local_gemm_table != NULL) {
      g_autofree char *dir = g_path_get_dirname(xml);
      gemm_table = g_path_is_absolute(pd->local_gemm_table) ? g_strdup(pd->local_gemm_table)
                                                            : g_build_filename(dir, pd->local_gemm_table, NULL);
      plat.measured_gemm_table = gemm_table;
    }
  }
  /* the GPUs used: --gpus N takes the first N hosts (a bad N is the what-if's to refuse) */
  int32_t used = o->gpus != SP_WHATIF_UNSET_INT && o->gpus >= 1 && o->gpus <= plat.hosts ? o->gpus : plat.hosts;
  mixed = mixed_cluster(pd, used, &plat);
  plat.mixed = mixed;
  e = g_new0(wi_engine, 1);
  e->xml = g_strdup(xml);
  e->hosts = plat.hosts;
  e->step_fidelity = o->fidelity != NULL && strcmp(o->fidelity, "step") == 0;
  e->cache = g_hash_table_new_full(price_key_hash, price_key_equal, g_free, g_free);
  sp_whatif_engine eng = { .open = wi_open, .price = wi_price, .simulate = wi_simulate,
                           .comm_slowdown = SP_STEPSIM_COMM_SLOWDOWN, .note = wi_note, .take_noted = wi_take_noted,
                           .price_keys = wi_price_keys, .add_prices = wi_add_prices, .key_size = sizeof(price_key),
                           .user = e };
  res = sp_whatif_evaluate(o, &plat, &eng, err);
  if (res != NULL) {
    res->engine_data = g_steal_pointer(&e);
    res->engine_free = wi_engine_free;
  }
out:
  g_free(mixed);
  g_free(gemm_table);
  wi_engine_free(e);
  sp_plat_desc_free(pd);
  return res;
}

/* ---------- --verify on the platform ---------- */

static gboolean wi_verify_prepare(void *user, GError **err)
{
  wi_engine *e = user;
  /* the platform is loaded when the engine priced the collectives; else load it now */
  if (e->opened) return TRUE;
  if (!sp_sim_init(e->xml, err)) {
    g_prefix_error(err, "--verify needs the SimGrid engine: ");
    return FALSE;
  }
  e->opened = TRUE;
  return TRUE;
}

static gboolean wi_run_case(void *user, sp_graph_case *c, const int32_t *map, int32_t world, double *seconds, GError **err)
{
  (void)user;
  gboolean ok = sp_sim_set_host_map(map, world, err);
  if (ok) {
    sp_sim_set_compute_hook(sp_graph_case_compute, c);
    ok = sp_sim_run(sp_graph_case_progs(c), world, sp_graph_case_bufs(c), SP_FIDELITY_STEP, NULL, seconds, err);
    sp_sim_set_compute_hook(NULL, NULL);
  }
  sp_sim_set_host_map(NULL, 0, NULL);
  return ok;
}

static gboolean wi_run_replay(void *user, sp_step_replay *r, double *seconds, GError **err)
{
  (void)user;
  return sp_whatif_engine_replay(r, seconds, err);
}

gboolean sp_whatif_run_verify(sp_whatif_result *r, GError **err)
{
  if (r->engine_free != wi_engine_free) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--verify: the what-if did not run on a platform file (use sp_whatif_run)");
    return FALSE;
  }
  sp_whatif_verify_engine eng = { .prepare = wi_verify_prepare, .run_case = wi_run_case, .run_replay = wi_run_replay,
                                  .user = r->engine_data };
  return sp_whatif_verify(r, &eng, err);
}

/* ---------- the winner's step as a trace ---------- */

gboolean sp_whatif_write_trace(const sp_whatif_result *res, const char *path, GError **err)
{
  const sp_whatif_row *w = sp_whatif_winner(res);
  if (w == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--trace: no layout to trace (the what-if found none)");
    return FALSE;
  }
  sp_step_result r = { 0 };
  sp_stepsim_timeline t = { 0 };
  if (!sp_step_eval(&res->ctx, &w->r.layout, &r, err) ||
      !sp_stepsim_eval(&res->ctx, &w->r.layout, res->engine, res->slowdown, &r, &t, err)) {
    sp_stepsim_timeline_clear(&t);
    return FALSE;
  }
  gboolean ok = sp_stepgraph_write_chrome(t.g, t.start, t.end, path, err);
  sp_stepsim_timeline_clear(&t);
  return ok;
}
