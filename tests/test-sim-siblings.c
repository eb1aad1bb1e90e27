/* Sibling groups priced by symmetry (sp_sim_coll_groups_time): on generated platforms
 * whose sibling groups are images of the first, pricing the first group alone (its shared
 * links at 1/k) gives the time of simulating every group, for every collective and
 * algorithm tried; where the platform breaks the symmetry (one NIC slower), every group is
 * simulated. The same with no member pairs checked before the run (they are checked on the
 * pairs group 0's programs use, as for groups too large to check every pair). The
 * expectation is the engine's own full simulation of all groups
 * (sp_sim_set_sibling_symmetry(FALSE)), an independent path through SimGrid. Each platform
 * runs in a child process: SimGrid loads one platform per process. */
#include "config.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/link.h>

#include "platform-file.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/error.h"

/* A failure in the child: said on stderr (the TAP stream on stdout is the parent's), and
 * the child's exit status 1. */
#define FAIL(...)                     \
  do {                                \
    fprintf(stderr, __VA_ARGS__);     \
    fputc('\n', stderr);              \
    _exit(1);                         \
  } while (0)

/* Groups of n members @p stride hosts apart, nb of them on hosts b + j stride; ranks as
 * the what-if numbers them (member j of group b is rank j nb + b). */
typedef struct {
  int32_t n, stride, nb;
  int32_t *ranks, *hosts;
  sp_coll_spec specs[8];
} groups;

static void groups_init(groups *g, int32_t n, int32_t stride, int32_t nb, sp_coll c, sp_algo a, uint64_t count)
{
  g->n = n;
  g->stride = stride;
  g->nb = nb;
  g->ranks = g_new(int32_t, (gsize)n * nb);
  g->hosts = g_new(int32_t, (gsize)n * nb);
  for (int32_t b = 0; b < nb; b++) {
    for (int32_t j = 0; j < n; j++) {
      g->ranks[(size_t)b * n + j] = j * nb + b;
      g->hosts[j * nb + b] = b + j * stride;
    }
    g->specs[b] = (sp_coll_spec){ .coll = c, .algo = a, .dtype = SP_BF16, .redop = SP_RED_SUM,
                                  .ranks = g->ranks + (size_t)b * n, .n = n, .count = count };
  }
}

static void groups_clear(groups *g)
{
  g_free(g->ranks);
  g_free(g->hosts);
}

/* The time with symmetry and without; *sym: whether symmetry was used. */
static void both(groups *g, double *with, double *without, gboolean *sym)
{
  GError *err = NULL;
  sp_sim_set_sibling_symmetry(TRUE);
  *sym = sp_sim_coll_groups_symmetric(g->specs, g->nb, g->hosts);
  if (!sp_sim_coll_groups_time(g->specs, g->nb, g->hosts, SP_FIDELITY_FLOW, with, &err))
    FAIL("%s", err->message);
  sp_sim_set_sibling_symmetry(FALSE);
  if (sp_sim_coll_groups_symmetric(g->specs, g->nb, g->hosts))
    FAIL("symmetry reported while turned off");
  if (!sp_sim_coll_groups_time(g->specs, g->nb, g->hosts, SP_FIDELITY_FLOW, without, &err))
    FAIL("%s", err->message);
  sp_sim_set_sibling_symmetry(TRUE);
}

/* Every case on the loaded platform: equal times (1e-12 relative), and symmetry used
 * exactly when @p expect_sym. */
static void check_cases(gboolean expect_sym)
{
  static const struct {
    int32_t n, stride, nb;
    sp_coll coll;
    sp_algo algo;
    uint64_t count;
  } cases[] = {
    { 4, 8, 8, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 64u << 20 },     /* one member per node, 8 rails */
    { 4, 8, 8, SP_COLL_ALL_REDUCE, SP_ALGO_TREE, 64u << 20 },
    { 4, 8, 8, SP_COLL_ALL_GATHER, SP_ALGO_AUTO, 16u << 20 },
    { 4, 8, 8, SP_COLL_REDUCE_SCATTER, SP_ALGO_AUTO, 16u << 20 },
    { 4, 8, 8, SP_COLL_ALL_TO_ALL, SP_ALGO_AUTO, 4u << 20 },
    { 4, 8, 8, SP_COLL_ALL_REDUCE, SP_ALGO_AUTO, 1u << 10 },      /* latency-bound */
    { 8, 4, 4, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 64u << 20 },     /* two members per node */
    { 16, 2, 2, SP_COLL_ALL_GATHER, SP_ALGO_RING, 16u << 20 },    /* four members per node */
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    groups g;
    groups_init(&g, cases[i].n, cases[i].stride, cases[i].nb, cases[i].coll, cases[i].algo, cases[i].count);
    double with = 0, without = 0;
    gboolean sym = FALSE;
    both(&g, &with, &without, &sym);
    if (sym != expect_sym)
      FAIL("case %u: symmetry %s, expected %s", i, sym ? "used" : "not used", expect_sym ? "used" : "not used");
    if (!(without > 0) || fabs(with - without) > 1e-12 * without)
      FAIL("case %u (%s, n %d, stride %d): %.17g s by symmetry, %.17g s with every group", i,
              sp_coll_name(cases[i].coll), cases[i].n, cases[i].stride, with, without);
    /* no pairs checked before the run: checked on those group 0's programs use */
    guint acc0, dec0, acc1, dec1;
    double probed = 0;
    GError *err = NULL;
    sp_sim_sibling_probes(&acc0, &dec0);
    sp_sim_set_sibling_budget(0);
    if (!sp_sim_coll_groups_time(g.specs, g.nb, g.hosts, SP_FIDELITY_FLOW, &probed, &err))
      FAIL("%s", err->message);
    sp_sim_set_sibling_budget(4 << 20);
    sp_sim_sibling_probes(&acc1, &dec1);
    if (acc1 != acc0 + (expect_sym ? 1 : 0) || dec1 != dec0 + (expect_sym ? 0 : 1))
      FAIL("case %u: probe accepted %u, declined %u times", i, acc1 - acc0, dec1 - dec0);
    if (fabs(probed - without) > 1e-12 * without)
      FAIL("case %u (%s, n %d, stride %d): %.17g s probed, %.17g s with every group", i, sp_coll_name(cases[i].coll),
           cases[i].n, cases[i].stride, probed, without);
    groups_clear(&g);
  }
}

/* Load @p o's platform in a child and run @p body(@p ud) there (it exits through FAIL on
 * a failure); the child's exit status. */
static int in_child(const sp_platform_opts *o, void (*body)(void *ud), void *ud)
{
  fflush(NULL);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    GError *err = NULL;
    char *path = platform_file(o);
    gboolean ok = sp_sim_init(path, &err);
    g_unlink(path);
    g_free(path);
    if (!ok)
      FAIL("%s", err->message);
    body(ud);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

typedef struct {
  const char *slow;
  gboolean expect_sym;
} slow_case;

/* check_cases after slowing the NIC @p slow (a link name, NULL: none) to half */
static void slow_body(void *ud)
{
  const slow_case *sc = ud;
  if (sc->slow != NULL) {
    /* both directions of the split-duplex link (its names begin with @p slow) */
    size_t nl = sg_link_count(), slowed = 0;
    sg_link_t *links = sg_link_list();
    for (size_t i = 0; i < nl; i++)
      if (g_str_has_prefix(sg_link_get_name(links[i]), sc->slow)) {
        sg_link_set_bandwidth(links[i], sg_link_get_bandwidth(links[i]) / 2);
        slowed++;
      }
    free(links);
    if (slowed == 0)
      FAIL("no link %s", sc->slow);
  }
  check_cases(sc->expect_sym);
}

/* check_cases on @p o's platform in a child, the NIC @p slow at half speed */
static int run_child(const sp_platform_opts *o, const char *slow, gboolean expect_sym)
{
  slow_case sc = { slow, expect_sym };
  return in_child(o, slow_body, &sc);
}

static sp_platform_opts four_nodes(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 4;
  o.gpu = SP_GPU_H100;
  o.su_nodes = 2; /* two SUs: the groups cross the SUs' uplinks */
  return o;
}

/* Oversubscribed uplinks (4:1): the eight rails' groups contend on them, so group 0
 * alone runs on an eighth of each uplink: the scaled capacity matters. */
static void test_oversubscribed(void)
{
  sp_platform_opts o = four_nodes();
  o.oversubscription = 4;
  g_assert_cmpint(run_child(&o, NULL, TRUE), ==, 0);
}

/* Two GPUs per NIC: groups 0 and 1 share their NICs, groups 2 and 3 the next ones. */
static void test_shared_nics(void)
{
  sp_platform_opts o = four_nodes();
  o.nics_per_node = 4;
  g_assert_cmpint(run_child(&o, NULL, TRUE), ==, 0);
}

/* One NIC at half speed breaks the symmetry: every group is simulated. */
static void test_broken_symmetry(void)
{
  sp_platform_opts o = four_nodes();
  g_assert_cmpint(run_child(&o, "node001-nic1", FALSE), ==, 0);
}

/* Groups of more member pairs than a check before the run walks (92 members in 8 groups:
 * 66,976 pairs) are probed on the pairs they use, at the default budget, in flow
 * fidelity: the probe is accepted and the time is that of every group simulated. */
static void test_large_groups_probed(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 92;
  o.gpu = SP_GPU_H100;
  fflush(NULL);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    GError *err = NULL;
    char *path = platform_file(&o);
    gboolean ok = sp_sim_init(path, &err);
    g_unlink(path);
    g_free(path);
    if (!ok)
      FAIL("%s", err->message);
    groups g;
    groups_init(&g, 92, 8, 8, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 64u << 20);
    guint acc0, dec0, acc1, dec1;
    sp_sim_sibling_probes(&acc0, &dec0);
    double with = 0, without = 0;
    gboolean sym = FALSE;
    both(&g, &with, &without, &sym);
    sp_sim_sibling_probes(&acc1, &dec1);
    if (acc1 != acc0 + 1 || dec1 != dec0)
      FAIL("92 members in 8 groups: probe accepted %u, declined %u times (want 1, 0)", acc1 - acc0, dec1 - dec0);
    if (!(without > 0) || fabs(with - without) > 1e-12 * without)
      FAIL("%.17g s probed, %.17g s with every group", with, without);
    groups_clear(&g);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  g_assert_cmpint(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ==, 0);
}

/* FLOW prices a direct all-to-all by rail (one message per node and member, lowered in
 * lower_direct.c), STEP with a message per pair: both for groups of all GPUs, two nodes,
 * one GPU per node and two per node, every pair of times within *@p ud (relative). */
typedef struct { int32_t n, stride; } a2a_group;

typedef struct {
  double tol;
  const a2a_group *groups;
  guint ngroups;
} a2a_case;

static void a2a_rail_body(void *ud)
{
  const a2a_case *k = ud;
  double tol = k->tol;
  GError *err = NULL;
  int32_t world = sp_sim_num_hosts();
  for (guint i = 0; i < k->ngroups; i++) {
    int32_t n = k->groups[i].n;
    int32_t *ranks = g_new(int32_t, n);
    for (int32_t j = 0; j < n; j++)
      ranks[j] = j * k->groups[i].stride;
    sp_coll_spec spec = { .coll = SP_COLL_ALL_TO_ALL, .algo = SP_ALGO_DIRECT, .dtype = SP_BF16,
                          .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = (64u << 20) / (uint64_t)n };
    double tf = 0, ts = 0;
    if (!sp_sim_coll_time(&spec, world, SP_FIDELITY_FLOW, &tf, &err) ||
        !sp_sim_coll_time(&spec, world, SP_FIDELITY_STEP, &ts, &err))
      FAIL("%s", err->message);
    if (!(ts > 0) || fabs(tf - ts) > tol * ts)
      FAIL("all-to-all of %d members %d apart: %.17g s by rail, %.17g s per pair", n, k->groups[i].stride, tf, ts);
    g_free(ranks);
  }
}

static const a2a_group four_node_groups[] = { { 32, 1 }, { 16, 1 }, { 4, 8 }, { 8, 2 } };

static int a2a_rail_child(const sp_platform_opts *o, double tol)
{
  a2a_case k = { tol, four_node_groups, G_N_ELEMENTS(four_node_groups) };
  return in_child(o, a2a_rail_body, &k);
}

/* Full bisection: the same time (each NIC and NVLink port carries the same bytes, every
 * route of a class has the same latency), up to the rounding of each message's bytes on
 * the wire (bytes / 0.876 between nodes, rounded per message: a message by rail rounds
 * once for B pairs). */
static void test_a2a_by_rail(void)
{
  sp_platform_opts o = four_nodes();
  g_assert_cmpint(a2a_rail_child(&o, 1e-6), ==, 0);
}

/* Uplinks 4:1: max-min shares a congested uplink per message, and a message by rail
 * stands for B pairs; every message crossing an uplink carries the same bytes from a
 * sender with the same load, so the shares, hence the times, are still the same (up to
 * the wire rounding above). */
static void test_a2a_by_rail_oversubscribed(void)
{
  sp_platform_opts o = four_nodes();
  o.oversubscription = 4;
  g_assert_cmpint(a2a_rail_child(&o, 1e-6), ==, 0);
}

/* Groups of 160 and 136 GPUs on 20 nodes: STEP's member sends to and gets from 159 (135)
 * peers, more than one SimGrid actor posts (sim.c posts them through helper actors on
 * the member's host), while FLOW by rail sends one message per node; the times agree as
 * on four nodes, so the helpers' messages start and end when the member's would. */
static void test_a2a_by_rail_many_peers(void)
{
  sp_platform_opts o = four_nodes();
  o.nodes = 20;
  o.su_nodes = 4;
  static const a2a_group many[] = { { 160, 1 }, { 136, 1 } };
  a2a_case k = { 1e-6, many, G_N_ELEMENTS(many) };
  g_assert_cmpint(in_child(&o, a2a_rail_body, &k), ==, 0);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim-siblings/oversubscribed", test_oversubscribed);
  g_test_add_func("/sim-siblings/shared-nics", test_shared_nics);
  g_test_add_func("/sim-siblings/broken-symmetry", test_broken_symmetry);
  g_test_add_func("/sim-siblings/large-groups-probed", test_large_groups_probed);
  g_test_add_func("/sim-siblings/a2a-by-rail", test_a2a_by_rail);
  g_test_add_func("/sim-siblings/a2a-by-rail-oversubscribed", test_a2a_by_rail_oversubscribed);
  g_test_add_func("/sim-siblings/a2a-by-rail-many-peers", test_a2a_by_rail_many_peers);
  return g_test_run();
}
