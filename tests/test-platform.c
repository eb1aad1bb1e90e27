/* Platform generator (src/sim/platform_gen.c) and the shipped platforms.
 * Expected counts are derived by hand from the layout documented in
 * docs/calibration.md (per node: G hosts, 3 routers, 2G + 1 links and 3G routes
 * (G to the NVSwitch, G out through the NICs, G in); per SU of m nodes: a leaf
 * and an uplink link, one router and 2m zone routes; at the top: the spine
 * link, one router and 2 zone routes per SU). No count grows with the square of
 * anything. The constants checked are the ones docs/calibration.md states with
 * their sources. */
#include "config.h"
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "platform.h"
#include "platform_gen.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/error.h"

typedef struct {
  int hosts, routers, links, routes, zone_routes, zones, configs;
  GPtrArray *host_names;               /* in document order */
  GHashTable *host_props;              /* "host/prop" -> value */
  GHashTable *link_bw, *link_lat;      /* link id -> attribute text */
  GHashTable *link_policy;
  GHashTable *config;                  /* config prop id -> value */
  GHashTable *top_props;
  char *cur_host;
  int depth_zone;
  gboolean in_config;
} plat;

static const char *attr(const char **n, const char **v, const char *key)
{
  for (int i = 0; n[i]; i++)
    if (strcmp(n[i], key) == 0) return v[i];
  return NULL;
}

static void on_start(GMarkupParseContext *c, const char *el, const char **n, const char **v, gpointer u,
                     GError **e)
{
  (void)c; (void)e;
  plat *p = u;
  if (strcmp(el, "host") == 0) {
    p->hosts++;
    g_ptr_array_add(p->host_names, g_strdup(attr(n, v, "id")));
    g_free(p->cur_host);
    p->cur_host = g_strdup(attr(n, v, "id"));
    g_hash_table_insert(p->host_props, g_strdup_printf("%s/speed", p->cur_host), g_strdup(attr(n, v, "speed")));
  } else if (strcmp(el, "router") == 0) {
    p->routers++;
  } else if (strcmp(el, "link") == 0) {
    p->links++;
    const char *id = attr(n, v, "id");
    g_hash_table_insert(p->link_bw, g_strdup(id), g_strdup(attr(n, v, "bandwidth")));
    g_hash_table_insert(p->link_lat, g_strdup(id), g_strdup(attr(n, v, "latency")));
    g_hash_table_insert(p->link_policy, g_strdup(id), g_strdup(attr(n, v, "sharing_policy")));
  } else if (strcmp(el, "route") == 0) {
    p->routes++;
  } else if (strcmp(el, "zoneRoute") == 0) {
    p->zone_routes++;
  } else if (strcmp(el, "zone") == 0) {
    p->zones++;
    p->depth_zone++;
  } else if (strcmp(el, "config") == 0) {
    p->configs++;
    p->in_config = TRUE;
  } else if (strcmp(el, "prop") == 0) {
    const char *id = attr(n, v, "id"), *val = attr(n, v, "value");
    if (p->in_config) g_hash_table_insert(p->config, g_strdup(id), g_strdup(val));
    else if (p->cur_host) g_hash_table_insert(p->host_props, g_strdup_printf("%s/%s", p->cur_host, id), g_strdup(val));
    else if (p->depth_zone == 1) g_hash_table_insert(p->top_props, g_strdup(id), g_strdup(val));
  }
}

static void on_end(GMarkupParseContext *c, const char *el, gpointer u, GError **e)
{
  (void)c; (void)e;
  plat *p = u;
  if (strcmp(el, "host") == 0) g_clear_pointer(&p->cur_host, g_free);
  else if (strcmp(el, "zone") == 0) p->depth_zone--;
  else if (strcmp(el, "config") == 0) p->in_config = FALSE;
}

static plat *plat_parse(const char *xml)
{
  plat *p = g_new0(plat, 1);
  p->host_names = g_ptr_array_new_with_free_func(g_free);
  p->host_props = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  p->link_bw = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  p->link_lat = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  p->link_policy = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  p->config = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  p->top_props = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GMarkupParser parser = { on_start, on_end, NULL, NULL, NULL };
  GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, p, NULL);
  GError *err = NULL;
  gboolean ok = g_markup_parse_context_parse(ctx, xml, -1, &err) && g_markup_parse_context_end_parse(ctx, &err);
  g_assert_no_error(err);
  g_assert_true(ok);
  g_markup_parse_context_free(ctx);
  return p;
}

static void plat_free(plat *p)
{
  g_ptr_array_unref(p->host_names);
  g_hash_table_unref(p->host_props);
  g_hash_table_unref(p->link_bw);
  g_hash_table_unref(p->link_lat);
  g_hash_table_unref(p->link_policy);
  g_hash_table_unref(p->config);
  g_hash_table_unref(p->top_props);
  g_free(p->cur_host);
  g_free(p);
}

static char *gen(int nodes, int gpn, sp_gpu_kind gpu, gboolean charge)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = nodes;
  o.gpus_per_node = gpn;
  o.gpu = gpu;
  o.charge_local = charge;
  GError *err = NULL;
  char *xml = sp_platform_dgx_xml(&o, &err);
  g_assert_no_error(err);
  g_assert_nonnull(xml);
  return xml;
}

static const char *hprop(plat *p, const char *host, const char *prop)
{
  g_autofree char *k = g_strdup_printf("%s/%s", host, prop);
  return g_hash_table_lookup(p->host_props, k);
}

/* Two DGX H100 nodes: 16 hosts; 16 NVLink + 16 NIC + 2 rails links, leaf, uplink
 * and spine; one SU. */
static void test_two_nodes(void)
{
  g_autofree char *xml = gen(2, 8, SP_GPU_H100, FALSE);
  plat *p = plat_parse(xml);
  g_assert_cmpint(p->hosts, ==, 16);
  g_assert_cmpint(p->links, ==, 2 * 17 + 2 + 1);
  g_assert_cmpint(p->routes, ==, 2 * 3 * 8);
  g_assert_cmpint(p->zone_routes, ==, 2 * 2 + 2);
  g_assert_cmpint(p->routers, ==, 2 * 3 + 1 + 1); /* per node NVSwitch, tx, rx; SU and spine gateways */
  g_assert_cmpint(p->zones, ==, 1 + 1 + 1 + 2 + 1); /* cluster, spine, su0, 2 nodes, su0-leaf */
  for (int i = 0; i < 16; i++) {
    g_autofree char *want = g_strdup_printf("node%03d-gpu%d", i / 8, i % 8);
    g_assert_cmpstr(g_ptr_array_index(p->host_names, i), ==, want);
    g_assert_cmpstr(hprop(p, want, "speed"), ==, "989.4Tf");          /* H100 SXM dense BF16 */
    g_assert_cmpstr(hprop(p, want, "gpu"), ==, "H100-SXM5-80GB");
    g_assert_cmpstr(hprop(p, want, "gpu_mem"), ==, "85899345920");     /* 80 GiB */
    g_assert_cmpstr(hprop(p, want, "hbm_bw"), ==, "3350000000000");    /* 3.35 TB/s */
    g_assert_null(hprop(p, want, "mem_bw"));                           /* local steps free */
    g_autofree char *node = g_strdup_printf("%d", i / 8), *lr = g_strdup_printf("%d", i % 8);
    g_assert_cmpstr(hprop(p, want, "node"), ==, node);
    g_assert_cmpstr(hprop(p, want, "local_rank"), ==, lr);
    g_assert_cmpstr(hprop(p, want, "coll_latency"), ==, "8.4us"); /* NCCL Simple base latency */
  }
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "node001-nvl7"), ==, "450GBps");
  g_assert_cmpstr(g_hash_table_lookup(p->link_lat, "node001-nvl7"), ==, "1.3us");
  g_assert_cmpstr(g_hash_table_lookup(p->link_policy, "node001-nvl7"), ==, "SPLITDUPLEX");
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "node000-nic3"), ==, "48GBps");
  g_assert_cmpstr(g_hash_table_lookup(p->link_policy, "node000-nic3"), ==, "SPLITDUPLEX");
  g_assert_cmpstr(g_hash_table_lookup(p->link_policy, "su0-leaf"), ==, "FATPIPE");
  /* the node's rail cables: its 8 NICs' sum, no latency of their own */
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "node001-rails"), ==, "384GBps");
  g_assert_cmpstr(g_hash_table_lookup(p->link_lat, "node001-rails"), ==, "0us");
  g_assert_cmpstr(g_hash_table_lookup(p->link_policy, "node001-rails"), ==, "FATPIPE");
  g_assert_cmpstr(g_hash_table_lookup(p->link_policy, "spine"), ==, "FATPIPE");
  g_assert_cmpstr(g_hash_table_lookup(p->config, "network/model"), ==, "CM02");
  g_assert_cmpstr(g_hash_table_lookup(p->config, "network/TCP-gamma"), ==, "0");
  g_assert_cmpstr(g_hash_table_lookup(p->top_props, "gpus_per_node"), ==, "8");
  plat_free(p);
}

/* 33 nodes = two SUs (32 + 1): uplinks and the spine appear. */
static void test_two_sus(void)
{
  g_autofree char *xml = gen(33, 8, SP_GPU_H100, FALSE);
  plat *p = plat_parse(xml);
  g_assert_cmpint(p->hosts, ==, 33 * 8);
  g_assert_cmpint(p->links, ==, 33 * 17 + 2 * 2 + 1);
  g_assert_cmpint(p->zone_routes, ==, 2 * 33 + 2 * 2);
  /* su0 has 32 nodes x 8 NICs x 48 GB/s = 12288 GB/s of uplink; su1 one node. */
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "su0-up"), ==, "12288GBps");
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "su1-up"), ==, "384GBps");
  g_assert_cmpstr(g_hash_table_lookup(p->link_policy, "spine"), ==, "FATPIPE");
  g_assert_cmpstr(g_ptr_array_index(p->host_names, 32 * 8), ==, "node032-gpu0");
  plat_free(p);
}

/* A100 preset and charge_local. */
static void test_a100(void)
{
  g_autofree char *xml = gen(1, 8, SP_GPU_A100, TRUE);
  plat *p = plat_parse(xml);
  g_assert_cmpint(p->hosts, ==, 8);
  g_assert_cmpstr(hprop(p, "node000-gpu5", "speed"), ==, "312Tf");          /* A100 dense BF16 */
  g_assert_cmpstr(hprop(p, "node000-gpu5", "mem_bw"), ==, "2039000000000"); /* 2.039 TB/s */
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "node000-nvl0"), ==, "270GBps");
  g_assert_cmpstr(g_hash_table_lookup(p->link_bw, "node000-nic0"), ==, "24GBps");
  g_assert_cmpstr(hprop(p, "node000-gpu5", "coll_latency"), ==, "8.4us");
  plat_free(p);
  g_autofree char *toy = gen(2, 4, SP_GPU_TOY, FALSE);
  p = plat_parse(toy);
  g_assert_cmpstr(hprop(p, "node001-gpu3", "coll_latency"), ==, "10us");
  plat_free(p);
}

/* 512 nodes = 4,096 GPUs, deterministic; many nodes pad names wider. (Its speed is a
 * benchmark, bench/sim-scale.sh, not a test: a loaded machine must not fail it.) */
static void test_large(void)
{
  g_autofree char *a = gen(512, 8, SP_GPU_H100, FALSE);
  g_autofree char *b = gen(512, 8, SP_GPU_H100, FALSE);
  g_assert_cmpstr(a, ==, b);
  plat *p = plat_parse(a);
  g_assert_cmpint(p->hosts, ==, 4096);
  g_assert_cmpstr(g_ptr_array_index(p->host_names, 4095), ==, "node511-gpu7");
  /* 16 SUs: 16 leaves, 16 uplinks and the spine; two zone routes per node and per SU. */
  g_assert_cmpint(p->links, ==, 512 * 17 + 16 + 16 + 1);
  g_assert_cmpint(p->zone_routes, ==, 2 * 512 + 2 * 16);
  g_assert_cmpint(p->routes, ==, 512 * 3 * 8);
  plat_free(p);
  g_autofree char *name = sp_platform_host_name(2000, 17, 3);
  g_assert_cmpstr(name, ==, "node0017-gpu3");
}

/* --zones su on 64 nodes (2 SUs): the same links as node zones, no node zone; per GPU 3
 * routes (NVLink port, NIC up, NIC down) and per node 2 (tx -> gw, gw -> rx); two zone
 * routes per SU (to and from the spine). Zones: the top, the spine and 2 SUs. */
static void test_su_zones(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 64;
  o.zones = SP_PLATFORM_ZONES_SU;
  GError *err = NULL;
  g_autofree char *xml = sp_platform_dgx_xml(&o, &err);
  g_assert_no_error(err);
  plat *p = plat_parse(xml);
  g_assert_cmpint(p->hosts, ==, 512);
  g_assert_cmpint(p->zones, ==, 1 + 1 + 2);
  g_assert_cmpint(p->routers, ==, 64 * 3 + 2 + 1);
  g_assert_cmpint(p->links, ==, 64 * 17 + 2 + 2 + 1);
  g_assert_cmpint(p->routes, ==, 64 * (3 * 8 + 2));
  g_assert_cmpint(p->zone_routes, ==, 2 * 2);
  g_assert_cmpstr(g_ptr_array_index(p->host_names, 511), ==, "node063-gpu7");
  g_assert_cmpstr(hprop(p, "node063-gpu7", "local_rank"), ==, "7");
  g_assert_cmpstr(g_hash_table_lookup(p->top_props, "gpus_per_node"), ==, "8");
  plat_free(p);
  /* auto: node zones at 2,048 nodes (one per node), SU zones above */
  o.zones = SP_PLATFORM_ZONES_AUTO;
  o.gpus_per_node = 1;
  o.nodes = 2048;
  g_autofree char *a = sp_platform_dgx_xml(&o, &err);
  g_assert_no_error(err);
  p = plat_parse(a);
  g_assert_cmpint(p->zones, ==, 1 + 1 + 64 + 2048 + 64);
  plat_free(p);
  o.nodes = 2049;
  g_autofree char *b = sp_platform_dgx_xml(&o, &err);
  g_assert_no_error(err);
  p = plat_parse(b);
  g_assert_cmpint(p->zones, ==, 1 + 1 + 65);
  plat_free(p);
}

static void test_bad(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  GError *err = NULL;
  o.nodes = 0;
  g_assert_null(sp_platform_dgx_xml(&o, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  o.nodes = 2;
  o.gpus_per_node = 0;
  g_assert_null(sp_platform_dgx_xml(&o, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_gpu_kind k;
  g_assert_false(sp_gpu_parse("v100", &k, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  g_assert_true(sp_gpu_parse("A100", &k, NULL));
  g_assert_cmpint(k, ==, SP_GPU_A100);
}

/* --mix lists: the parse, then the generator's own checks (sum against nodes, node sizes). */
static void test_mix(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  GError *err = NULL;
  g_assert_true(sp_platform_mix_parse("H100:2,a100:3", &o, &err));
  g_assert_no_error(err);
  g_assert_cmpint(o.mix_count, ==, 2);
  g_assert_cmpint(o.mix_gpu[0], ==, SP_GPU_H100);
  g_assert_cmpint(o.mix_gpu[1], ==, SP_GPU_A100);
  g_assert_cmpint(o.mix_nodes[0], ==, 2);
  g_assert_cmpint(o.mix_nodes[1], ==, 3);
  g_assert_cmpint(o.gpu, ==, SP_GPU_H100);
  o.nodes = 4; /* 2 + 3 = 5 */
  g_assert_null(sp_platform_dgx_xml(&o, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  o.nodes = 5;
  char *xml = sp_platform_dgx_xml(&o, &err);
  g_assert_no_error(err);
  g_assert_nonnull(strstr(xml, "<host id=\"node001-gpu7\" speed=\"989.4Tf\">"));
  g_assert_nonnull(strstr(xml, "<host id=\"node002-gpu0\" speed=\"312Tf\">"));
  g_assert_null(strstr(xml, "id=\"nvls\"")); /* the A100's NVSwitches do not reduce */
  g_free(xml);
  const char *bad[] = { "", "a100", "a100:0", "a100:1x", "a100:+1", "v100:1", "a100:1,A100:2", "a100:1,", NULL };
  for (int i = 0; bad[i] != NULL; i++) {
    sp_platform_opts b;
    sp_platform_opts_init(&b);
    g_assert_false(sp_platform_mix_parse(bad[i], &b, &err));
    g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
    g_clear_error(&err);
  }
  sp_platform_opts_init(&o);
  g_assert_true(sp_platform_mix_parse("h100:1,gb200:18", &o, NULL));
  o.nodes = 19;
  g_assert_null(sp_platform_dgx_xml(&o, &err)); /* 4-GPU trays in a 72-GPU domain */
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
}

static char *srcdir_file(const char *rel)
{
  const char *top = g_getenv("SPSIM_SRCDIR");
  return g_build_filename(top ? top : SP_TOP_SRCDIR, rel, NULL);
}

/* The shipped files are exactly the generator's output. */
static void test_shipped(void)
{
  struct { const char *file; int nodes, gpn; sp_gpu_kind gpu; } cases[] = {
    { "platforms/dgx.xml", 128, 8, SP_GPU_H100 },
    { "platforms/a100.xml", 1, 8, SP_GPU_A100 },
    { "platforms/small.xml", 2, 4, SP_GPU_TOY },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = srcdir_file(cases[i].file), *text = NULL;
    GError *err = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, &err));
    g_assert_no_error(err);
    g_autofree char *want = gen(cases[i].nodes, cases[i].gpn, cases[i].gpu, FALSE);
    g_assert_cmpstr(text, ==, want);
  }
  g_autofree char *path = srcdir_file("platforms/dgx.xml"), *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  plat *p = plat_parse(text);
  g_assert_cmpint(p->hosts, ==, 1024);
  plat_free(p);
}

/* Through SimGrid: small.xml's routes give the closed forms of its documented
 * numbers (NVLink 100 GB/s and 1 us per port; NIC 10 GB/s and 5 us per NIC,
 * leaf 1 us; 10 us per collective). One 1 MiB message: inside a node
 * 10 us + 2 us + S / 100e9; across nodes (rank 0 -> rank 7, own NICs)
 * 10 us + 11 us + S / 10e9. */
static void test_routes_closed_form(void)
{
  g_autofree char *path = srcdir_file("platforms/small.xml");
  GError *err = NULL;
  if (!sp_sim_init(path, &err)) {
    if (g_error_matches(err, SP_ERROR, SP_ERROR_UNSUPPORTED)) {
      g_test_skip(err->message);
      g_clear_error(&err);
      return;
    }
    g_assert_no_error(err);
  }
  g_assert_cmpint(sp_sim_num_hosts(), ==, 8);
  const double S = 1048576.0, C = 10e-6;
  struct { int32_t a, b; double want; } cases[] = {
    { 0, 1, C + 2e-6 + S / 100e9 },
    { 2, 3, C + 2e-6 + S / 100e9 },
    { 0, 7, C + 11e-6 + S / 10e9 },
    { 5, 1, C + 11e-6 + S / 10e9 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    int32_t members[2] = { cases[i].a, cases[i].b };
    sp_coll_spec spec = { .coll = SP_COLL_SEND_RECV, .algo = SP_ALGO_AUTO, .dtype = SP_U8, .redop = SP_RED_SUM,
                          .ranks = members, .n = 2, .count = (uint64_t)S };
    double t = 0;
    g_assert_true(sp_sim_coll_time(&spec, 8, SP_FIDELITY_STEP, &t, &err));
    g_assert_no_error(err);
    g_assert_cmpfloat_with_epsilon(t, cases[i].want, cases[i].want * 0.01);
  }
}

static gboolean load_small(void)
{
  g_autofree char *path = srcdir_file("platforms/small.xml");
  GError *err = NULL;
  if (!sp_sim_init(path, &err)) {
    if (g_error_matches(err, SP_ERROR, SP_ERROR_UNSUPPORTED)) {
      g_test_skip(err->message);
      g_clear_error(&err);
      return FALSE;
    }
    g_assert_no_error(err);
  }
  return TRUE;
}

/* Rank 0 sends S bytes to rank 1 three times, in three blocks: op 1, then op 2
 * twice. */
static sp_program **three_sends(uint64_t S)
{
  sp_program **p = g_new0(sp_program *, 8);
  for (int32_t r = 0; r < 8; r++) {
    p[r] = sp_program_new(r);
    uint32_t b = sp_program_add_buffer(p[r], S, "b");
    if (r > 1)
      continue;
    for (int k = 0; k < 3; k++) {
      sp_step s = { .kind = r == 0 ? SP_STEP_SEND : SP_STEP_RECV, .op = k == 0 ? 1u : 2u,
                    .phase = (uint32_t)k, .peer = 1 - r, .tag = k, .bytes = S, .rows = 1,
                    .row_bytes = S };
      s.src = (sp_ref){ b, 0 };
      s.dst = (sp_ref){ b, 0 };
      sp_program_append(p[r], &s);
      sp_step w = { .kind = SP_STEP_WAIT, .op = s.op, .phase = s.phase };
      sp_program_append(p[r], &w);
    }
  }
  return p;
}

/* coll_latency (10 us on small.xml) is charged once per op id and rank, at the
 * op's first post: two ops of three 1 MiB NVLink messages take
 * 2 x 10 us + 3 x (2 us + S / 100e9), in STEP and in FLOW fidelity. */
static void test_coll_latency(void)
{
  if (!load_small())
    return;
  g_assert_cmpfloat_with_epsilon(sp_sim_host_coll_latency(0), 10e-6, 1e-15);
  g_assert_cmpfloat_with_epsilon(sp_sim_host_coll_latency(7), 10e-6, 1e-15);
  g_assert_cmpint(sp_sim_host_node(3), ==, 0);
  g_assert_cmpint(sp_sim_host_node(4), ==, 1);
  g_assert_cmpint(sp_sim_host_node(8), ==, -1);
  const double S = 1048576.0;
  const double want = 2 * 10e-6 + 3 * (2e-6 + S / 100e9);
  const sp_fidelity fids[] = { SP_FIDELITY_STEP, SP_FIDELITY_FLOW };
  for (gsize f = 0; f < G_N_ELEMENTS(fids); f++) {
    sp_program **p = three_sends((uint64_t)S);
    double t = -1;
    GError *err = NULL;
    g_assert_true(sp_sim_run(p, 8, NULL, fids[f], NULL, &t, &err));
    g_assert_no_error(err);
    g_assert_cmpfloat(fabs(t - want), <=, 1e-3 * want);
    for (int r = 0; r < 8; r++)
      sp_program_free(p[r]);
    g_free(p);
  }
  /* a collective without messages (one member) is not charged */
  int32_t one = 0;
  sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                        .redop = SP_RED_SUM, .ranks = &one, .n = 1, .count = 16 };
  double t = -1;
  GError *err = NULL;
  g_assert_true(sp_sim_coll_time(&spec, 1, SP_FIDELITY_STEP, &t, &err));
  g_assert_no_error(err);
  g_assert_cmpfloat(t, ==, 0.0);
}

/* The engine's channel choice on small.xml (2 nodes x 4 GPUs, property node). */
static void test_auto_channels(void)
{
  if (!load_small())
    return;
  struct { int32_t n; int32_t ranks[8]; sp_coll coll; sp_algo algo; int32_t ch, blk; } cases[] = {
    { 8, { 0, 1, 2, 3, 4, 5, 6, 7 }, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 4, 4 },
    { 8, { 4, 5, 6, 7, 0, 1, 2, 3 }, SP_COLL_REDUCE_SCATTER, SP_ALGO_AUTO, 4, 4 },
    { 4, { 0, 1, 4, 5 }, SP_COLL_ALL_GATHER, SP_ALGO_AUTO, 2, 2 },
    { 4, { 0, 1, 2, 3 }, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 1, 0 },       /* one node */
    { 4, { 0, 4, 1, 5 }, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 1, 0 },       /* one member per run */
    { 6, { 0, 1, 4, 5, 2, 3 }, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 1, 0 }, /* node 0 twice */
    { 5, { 0, 1, 2, 4, 5 }, SP_COLL_ALL_REDUCE, SP_ALGO_RING, 1, 0 },    /* 3 + 2 members */
    /* NCCL's double binary tree chains each node's 4 members: blocks of 4, one channel */
    { 8, { 0, 1, 2, 3, 4, 5, 6, 7 }, SP_COLL_ALL_REDUCE, SP_ALGO_TREE, 1, 4 },
    { 8, { 0, 1, 2, 3, 4, 5, 6, 7 }, SP_COLL_ALL_TO_ALL, SP_ALGO_DIRECT, 1, 0 },
    { 8, { 0, 1, 2, 3, 4, 5, 6, 7 }, SP_COLL_BROADCAST, SP_ALGO_RING, 1, 0 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    sp_coll_spec spec = { .coll = cases[i].coll, .algo = cases[i].algo, .dtype = SP_F32,
                          .redop = SP_RED_SUM, .ranks = cases[i].ranks, .n = cases[i].n,
                          .count = 1 << 20 };
    int32_t ch = -1, blk = -1;
    sp_sim_ring_channels(&spec, &ch, &blk);
    g_assert_cmpint(ch, ==, cases[i].ch);
    g_assert_cmpint(blk, ==, cases[i].blk);
  }
}

/* A ring all-reduce of S = 32 MiB (f32) over both nodes of small.xml. With the
 * engine's 4 channels, channel c leaves each node through GPU c-1 and enters
 * through GPU c: every NIC carries one channel, the NVLink ports three. Per
 * channel S/4, per step one segment of S/32 = 1 MiB, one chunk round; a step is
 * bound by its NIC message (11 us + 1 MiB / 10e9 s) against the NVLink port's
 * three (2 us + 3 MiB / 100e9 s), so with the 10 us collective latency
 * t = 10 us + 14 x (11 us + 2^20 / 10e9 s) = 1632.01 us.
 * One ring (--channels 1): a step moves S/8 = 4 MiB through one NIC:
 * t = 10 us + 14 x (11 us + 2^22 / 10e9 s) = 6036.03 us. */
static void test_channels_closed_form(void)
{
  if (!load_small())
    return;
  int32_t ranks[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
  const double S = 33554432.0;
  struct { int32_t channels; double want; } cases[] = {
    { 0, 10e-6 + 14 * (11e-6 + S / 32 / 10e9) },
    { 4, 10e-6 + 14 * (11e-6 + S / 32 / 10e9) },
    { 1, 10e-6 + 14 * (11e-6 + S / 8 / 10e9) },
  };
  const sp_fidelity fids[] = { SP_FIDELITY_STEP, SP_FIDELITY_FLOW };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++)
    for (gsize f = 0; f < G_N_ELEMENTS(fids); f++) {
      sp_coll_spec spec = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                            .redop = SP_RED_SUM, .ranks = ranks, .n = 8,
                            .count = (uint64_t)S / 4, .channels = cases[i].channels };
      double t = -1;
      GError *err = NULL;
      g_assert_true(sp_sim_coll_time(&spec, 8, fids[f], &t, &err));
      g_assert_no_error(err);
      if (g_test_verbose())
        g_printerr("channels %d %s: %.3f us (closed form %.3f)\n", cases[i].channels,
                   sp_fidelity_name(fids[f]), t * 1e6, cases[i].want * 1e6);
      g_assert_cmpfloat(fabs(t - cases[i].want), <=, 0.01 * cases[i].want);
    }
}

/* A hand-written flat <cluster>: no node zones, so GPUs per node come from its
 * gpus_per_node property, or from the caller's flag, or are refused with a
 * message naming both; never 8 by default. */
static void test_cluster_gpus_per_node(void)
{
  g_autofree char *dir = g_dir_make_tmp("spsim-plat-XXXXXX", NULL);
  g_assert_nonnull(dir);
  const char *head = "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                     "<platform version=\"4.1\">\n";
  const char *cl = "<cluster id=\"c\" prefix=\"gpu\" suffix=\"\" radical=\"0-11\" speed=\"100Tf\" bw=\"10GBps\" lat=\"1us\">";
  struct { const char *name, *props; int32_t want; } cases[] = {
    { "with.xml", "<prop id=\"gpus_per_node\" value=\"4\"/><prop id=\"hbm_bw\" value=\"2.4T\"/>", 4 },
    { "without.xml", "", 0 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_build_filename(dir, cases[i].name, NULL);
    g_autofree char *xml = g_strdup_printf("%s%s%s</cluster>\n</platform>\n", head, cl, cases[i].props);
    g_assert_true(g_file_set_contents(path, xml, -1, NULL));
    GError *err = NULL;
    sp_plat_desc *d = sp_plat_read(path, &err);
    g_assert_no_error(err);
    g_assert_cmpint((int)d->names->len, ==, 12);
    g_assert_cmpint(d->unknown->len, ==, 0); /* gpus_per_node is known on a <cluster> */
    g_assert_cmpint(d->gpus_per_node, ==, cases[i].want);
    g_assert_cmpfloat(d->hbm_bw, ==, cases[i].want > 0 ? 2.4e12 : 0.0); /* "2.4T": 2.4 x 10^12 bytes/s */
    g_assert_cmpint(sp_plat_gpus_per_node(d, 6, NULL), ==, 6); /* the flag wins */
    int32_t g = sp_plat_gpus_per_node(d, 0, &err);
    if (cases[i].want > 0) {
      g_assert_no_error(err);
      g_assert_cmpint(g, ==, cases[i].want);
    } else {
      g_assert_cmpint(g, ==, 0);
      g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
      g_assert_nonnull(strstr(err->message, "gpus_per_node"));
      g_assert_nonnull(strstr(err->message, "--gpus-per-node"));
      g_clear_error(&err);
    }
    sp_plat_desc_free(d);
    g_unlink(path);
  }
  /* a value that is not a whole number >= 1 is refused, with the value */
  const char *bad[] = { "eight", "0", "-2", "4x" };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *path = g_build_filename(dir, "bad.xml", NULL);
    g_autofree char *xml = g_strdup_printf("%s%s<prop id=\"gpus_per_node\" value=\"%s\"/></cluster>\n</platform>\n",
                                           head, cl, bad[i]);
    g_assert_true(g_file_set_contents(path, xml, -1, NULL));
    GError *err = NULL;
    g_assert_null(sp_plat_read(path, &err));
    g_assert_error(err, SP_ERROR, SP_ERROR_PARSE);
    g_assert_nonnull(strstr(err->message, "gpus_per_node"));
    g_assert_nonnull(strstr(err->message, bad[i]));
    g_clear_error(&err);
    g_unlink(path);
  }
  g_rmdir(dir);
}

/* The one reader also gives what calibration reads: links as written, the
 * first host's coll_latency and mem_bw, the distinct node values, <host> count. */
static void test_reader_links_nodes(void)
{
  g_autofree char *dir = g_dir_make_tmp("spsim-plat-XXXXXX", NULL);
  g_assert_nonnull(dir);
  g_autofree char *path = g_build_filename(dir, "p.xml", NULL);
  const char *xml =
    "<?xml version='1.0'?>\n<platform version=\"4.1\">\n<zone id=\"top\" routing=\"Full\">\n"
    "<host id=\"a\" speed=\"1Tf\"><prop id=\"node\" value=\"0\"/><prop id=\"coll_latency\" value=\"6us\"/>"
    "<prop id=\"mem_bw\" value=\"2e12\"/></host>\n"
    "<host id=\"b\" speed=\"1Tf\"><prop id=\"node\" value=\"0\"/><prop id=\"coll_latency\" value=\"9us\"/></host>\n"
    "<host id=\"c\" speed=\"1Tf\"><prop id=\"node\" value=\"1\"/></host>\n"
    "<link id=\"l1\" bandwidth=\"25GBps\" latency=\"2us\"/><link id=\"l2\" bandwidth=\"1GBps\"/><link bandwidth=\"3GBps\"/>\n"
    "</zone>\n</platform>\n";
  g_assert_true(g_file_set_contents(path, xml, -1, NULL));
  GError *err = NULL;
  sp_plat_desc *d = sp_plat_read(path, &err);
  g_assert_no_error(err);
  g_assert_cmpint(d->host_elems, ==, 3);
  g_assert_cmpint(d->nodes, ==, 2);                    /* node values 0 and 1 */
  g_assert_cmpfloat_with_epsilon(d->coll_latency, 6e-6, 1e-18); /* the first host's, not b's 9us */
  g_assert_true(d->mem_bw);
  g_assert_cmpint(g_hash_table_size(d->links), ==, 2); /* the link without an id is not kept */
  const sp_plat_link *l1 = g_hash_table_lookup(d->links, "l1"), *l2 = g_hash_table_lookup(d->links, "l2");
  g_assert_nonnull(l1);
  g_assert_cmpstr(l1->bandwidth, ==, "25GBps");
  g_assert_cmpstr(l1->latency, ==, "2us");
  g_assert_nonnull(l2);
  g_assert_null(l2->latency);
  sp_plat_desc_free(d);
  g_unlink(path);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/platform/two-nodes", test_two_nodes);
  g_test_add_func("/platform/two-sus", test_two_sus);
  g_test_add_func("/platform/a100", test_a100);
  g_test_add_func("/platform/coll-latency", test_coll_latency);
  g_test_add_func("/platform/auto-channels", test_auto_channels);
  g_test_add_func("/platform/channels-closed-form", test_channels_closed_form);
  g_test_add_func("/platform/large", test_large);
  g_test_add_func("/platform/su-zones", test_su_zones);
  g_test_add_func("/platform/bad", test_bad);
  g_test_add_func("/platform/mix", test_mix);
  g_test_add_func("/platform/cluster-gpus-per-node", test_cluster_gpus_per_node);
  g_test_add_func("/platform/reader-links-nodes", test_reader_links_nodes);
  g_test_add_func("/platform/shipped", test_shipped);
  g_test_add_func("/platform/routes-closed-form", test_routes_closed_form);
  return g_test_run();
}
