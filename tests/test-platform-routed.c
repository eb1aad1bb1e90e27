/* A generated platform built as one routed zone (platform_routed.h) against SimGrid's
 * own reading of the same file: for each shape of the generator (one node, SUs, pods,
 * NVLink domains, shared NICs, mixed presets, oversubscription, local steps charged),
 * every host's name, speed and properties, every link's name, bandwidths, latency and
 * sharing policy, the top zone's properties and the route of every ordered GPU pair
 * (its links in order and its latency, before and after the links' latencies change)
 * must be those SimGrid gives when it parses the XML, with node zones and with SU
 * zones. The engine's own routes (sp_sim_routed_lean) are the same routes without the
 * FATPIPE links that cannot set a share. Each engine runs in a child process (SimGrid
 * has one engine per process). */
#include "config.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/zone.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/dict.h>
#include <xbt/dynar.h>

#include "platform_args.h"
#include "platform-file.h"
#include "platform_gen.h"
#include "platform_routed.h"

/* Every pair up to this many hosts; above, each host with a stride of others. */
#define ALL_PAIRS_MAX 160

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Everything SimGrid holds of the platform, as text. */
static char *describe(void)
{
  GString *s = g_string_new(NULL);
  size_t n = sg_host_count();
  sg_host_t *h = sg_host_list();
  for (size_t i = 0; i < n; i++) {
    g_string_append_printf(s, "host %s %.17g", sg_host_get_name(h[i]), sg_host_get_speed(h[i]));
    xbt_dict_t props = sg_host_get_properties(h[i]);
    xbt_dict_cursor_t c = NULL;
    char *k, *v;
    GPtrArray *kv = g_ptr_array_new_with_free_func(g_free);
    xbt_dict_foreach (props, c, k, v)
      g_ptr_array_add(kv, g_strdup_printf("%s=%s", k, v));
    xbt_dict_free(&props);
    qsort(kv->pdata, kv->len, sizeof(char *), cmp_str);
    for (guint j = 0; j < kv->len; j++) g_string_append_printf(s, " %s", (char *)kv->pdata[j]);
    g_ptr_array_unref(kv);
    g_string_append_c(s, '\n');
  }
  size_t nl = sg_link_count();
  sg_link_t *l = sg_link_list();
  for (size_t i = 0; i < nl; i++)
    g_string_append_printf(s, "link %s %.17g %.17g %d\n", sg_link_get_name(l[i]), sg_link_get_bandwidth(l[i]),
                           sg_link_get_latency(l[i]), (int)sg_link_is_shared(l[i]));
  free(l);
  const char *keys[] = { "gpus_per_node", "nvls", "sharp", "sharp_bw" };
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
    const char *v = sg_zone_get_property_value(sg_zone_get_root(), keys[i]);
    g_string_append_printf(s, "zone %s=%s\n", keys[i], v ? v : "(none)");
  }
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  size_t stride = n <= ALL_PAIRS_MAX ? 1 : 7;
  /* twice: as loaded, then with every link's latency changed as spsim changes them
   * between runs (sg_link_set_latency, each direction on its own) */
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      l = sg_link_list();
      for (size_t i = 0; i < nl; i++) sg_link_set_latency(l[i], sg_link_get_latency(l[i]) * (1.5 + (double)(i % 3)));
      free(l);
    }
    for (size_t i = 0; i < n; i++)
      for (size_t j = i % stride; j < n; j += stride) {
        if (i == j) continue;
        xbt_dynar_reset(d);
        sg_host_get_route(h[i], h[j], d);
        g_string_append_printf(s, "route %s %s %.17g:", sg_host_get_name(h[i]), sg_host_get_name(h[j]),
                               sg_host_get_route_latency(h[i], h[j]));
        unsigned k;
        sg_link_t link;
        xbt_dynar_foreach (d, k, link) g_string_append_printf(s, " %s", sg_link_get_name(link));
        g_string_append_c(s, '\n');
      }
  }
  xbt_dynar_free(&d);
  free(h);
  return g_string_free(s, FALSE);
}

/* Fork a child that writes to fds[1] with @p path loaded into its engine, parsed by
 * SimGrid or built routed (the child returns 0, exiting 3 if the build fails); the
 * parent keeps fds[0] and gets the child's pid. */
static pid_t engine_child(const char *path, gboolean routed, int fds[2])
{
  g_assert_cmpint(pipe(fds), ==, 0);
  fflush(stdout);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid != 0) {
    close(fds[1]);
    return pid;
  }
  close(fds[0]);
  char *argv[] = { "test", "--cfg=network/model:CM02", "--log=root.thresh:critical", NULL };
  int argc = 3;
  simgrid_init(&argc, argv);
  sp_platform_opts o;
  if (!routed)
    simgrid_load_platform(path);
  else if (!sp_platform_generated(path, &o) || !sp_sim_build_routed(&o, NULL))
    _exit(3);
  simgrid_run();
  return 0;
}

/* The description of @p path in a child: parsed by SimGrid, or built routed. */
static char *child_describe(const char *path, gboolean routed)
{
  int fds[2];
  pid_t pid = engine_child(path, routed, fds);
  if (pid == 0) {
    char *text = describe();
    size_t len = strlen(text), off = 0;
    while (off < len) {
      ssize_t w = write(fds[1], text + off, len - off);
      if (w <= 0) _exit(4);
      off += (size_t)w;
    }
    g_free(text); /* (a memory checker follows the child to its end) */
    _exit(0);
  }
  GString *out = g_string_new(NULL);
  char buf[65536];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0) g_string_append_len(out, buf, r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return g_string_free(out, FALSE);
}

static void check_same(const char *args)
{
  g_autofree char *cmd = g_strconcat("spsim platform dgx ", args, NULL);
  sp_platform_opts o;
  g_autoptr(GError) err = NULL;
  g_assert_true(sp_platform_args_parse_line(cmd, &o, &err));
  g_autofree char *path = platform_file(&o);
  sp_platform_opts back;
  g_assert_true(sp_platform_generated(path, &back));
  g_autofree char *parsed = child_describe(path, FALSE), *built = child_describe(path, TRUE);
  g_unlink(path);
  gboolean same = strcmp(parsed, built) == 0;
  if (!same) {
    g_auto(GStrv) a = g_strsplit(parsed, "\n", -1), b = g_strsplit(built, "\n", -1);
    for (int i = 0; a[i] != NULL || b[i] != NULL; i++)
      if (a[i] == NULL || b[i] == NULL || strcmp(a[i], b[i]) != 0) {
        g_test_message("%s: first difference at line %d:\n  SimGrid's XML: %s\n  routed zone:   %s", args, i + 1,
                       a[i] ? a[i] : "(end)", b[i] ? b[i] : "(end)");
        break;
      }
  }
  g_assert_true(same);
}

static const char *const cases[] = {
  "--nodes 1 --gpu h100 --gpus-per-node 8",
  "--nodes 4 --gpu a100 --gpus-per-node 8 --charge-local",
  "--nodes 6 --gpu toy --gpus-per-node 4 --su-nodes 2 --oversubscription 2",
  "--nodes 8 --gpu h100 --gpus-per-node 8 --su-nodes 2 --pod-sus 2 --oversubscription 2,2",
  "--nodes 36 --gpu gb200 --gpus-per-node 4",
  "--nodes 4 --gpu h100 --gpus-per-node 8 --nics-per-node 2 --su-nodes 2",
  "--nodes 4 --mix h100:2,a100:2 --gpus-per-node 8 --su-nodes 1",
  "--nodes 4 --gpu b200 --gpus-per-node 8 --su-nodes 2 --sharp --sharp-bw 40",
  "--nodes 70 --gpu h100 --gpus-per-node 8",
  "--nodes 6 --gpu toy --gpus-per-node 4 --su-nodes 2 --zones su",
  "--nodes 8 --gpu h100 --gpus-per-node 8 --su-nodes 2 --pod-sus 2 --oversubscription 2,2 --zones su",
  "--nodes 36 --gpu gb200 --gpus-per-node 4 --su-nodes 18 --zones su",
  "--nodes 4 --mix h100:2,a100:2 --gpus-per-node 8 --su-nodes 1 --nics-per-node 4 --zones su",
  "--nodes 6 --gpu toy --gpus-per-node 4 --su-nodes 2 --zones node",
};

static void test_case(gconstpointer data)
{
  check_same((const char *)data);
}

/* An edited file is not taken for the generator's: one byte changed. */
static void test_edited(void)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 2;
  g_autofree char *xml = sp_platform_dgx_xml(&o, NULL);
  char *bw = strstr(xml, "450GBps");
  g_assert_nonnull(bw);
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp("spsim-routed-XXXXXX.xml", &path, NULL);
  close(fd);
  g_assert_true(g_file_set_contents(path, xml, -1, NULL));
  sp_platform_opts back;
  g_assert_true(sp_platform_generated(path, &back));
  g_assert_cmpint(back.nodes, ==, 2);
  bw[0] = '5';
  g_assert_true(g_file_set_contents(path, xml, -1, NULL));
  g_assert_false(sp_platform_generated(path, &back));
  g_unlink(path);
  g_assert_false(sp_platform_generated("/nonexistent/spsim.xml", &back));
  /* a header that names a large platform over a short file */
  g_assert_true(g_file_set_contents(path, "<?xml version='1.0'?>\n<platform version=\"4.1\">\n<!--\n"
                                          "  Generated by: spsim platform dgx --nodes 65536 --gpu h100 "
                                          "--gpus-per-node 8\n-->\n</platform>\n", -1, NULL));
  g_assert_false(sp_platform_generated(path, &back));
  g_unlink(path);
}

/* The engine's routes (sp_sim_routed_lean): in a child, for every GPU pair of @p args'
 * platform, the lean route must be the full one without each FATPIPE faster than the
 * full route's slowest shared link, in the same order, at the same latency; @return how
 * many pairs lost a link. */
static int lean_pairs(const char *args)
{
  g_autofree char *cmd = g_strconcat("spsim platform dgx ", args, NULL);
  sp_platform_opts o;
  g_assert_true(sp_platform_args_parse_line(cmd, &o, NULL));
  g_autofree char *path = platform_file(&o);
  int fds[2];
  pid_t pid = engine_child(path, TRUE, fds);
  if (pid == 0) {
    size_t n = sg_host_count();
    sg_host_t *h = sg_host_list();
    xbt_dynar_t full = xbt_dynar_new(sizeof(sg_link_t), NULL), lean = xbt_dynar_new(sizeof(sg_link_t), NULL);
    int shorter = 0;
    if (sp_sim_routed_lean(FALSE)) _exit(5); /* off by default */
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++) {
        if (i == j) continue;
        xbt_dynar_reset(full);
        xbt_dynar_reset(lean);
        sg_host_get_route(h[i], h[j], full);
        double lat = sg_host_get_route_latency(h[i], h[j]);
        if (sp_sim_routed_lean(TRUE)) _exit(6);
        sg_host_get_route(h[i], h[j], lean);
        double lean_lat = sg_host_get_route_latency(h[i], h[j]);
        if (!sp_sim_routed_lean(FALSE)) _exit(7);
        if (lean_lat != lat) _exit(8);
        double slowest = -1;
        unsigned k;
        sg_link_t l;
        xbt_dynar_foreach (full, k, l)
          if (sg_link_is_shared(l) && (slowest < 0 || sg_link_get_bandwidth(l) < slowest))
            slowest = sg_link_get_bandwidth(l);
        unsigned m = 0;
        xbt_dynar_foreach (full, k, l) {
          if (slowest >= 0 && !sg_link_is_shared(l) && sg_link_get_bandwidth(l) > slowest) continue;
          if (m >= xbt_dynar_length(lean) || xbt_dynar_get_as(lean, m, sg_link_t) != l) _exit(9);
          m++;
        }
        if (m != xbt_dynar_length(lean)) _exit(10);
        shorter += xbt_dynar_length(lean) < xbt_dynar_length(full);
      }
    xbt_dynar_free(&full);
    xbt_dynar_free(&lean);
    free(h);
    g_clear_pointer(&path, g_free); /* (a memory checker follows the child to its end) */
    g_clear_pointer(&cmd, g_free);
    if (write(fds[1], &shorter, sizeof shorter) != (ssize_t)sizeof shorter) _exit(4);
    _exit(0);
  }
  int shorter = -1;
  g_assert_cmpint(read(fds[0], &shorter, sizeof shorter), ==, (ssize_t)sizeof shorter);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  g_unlink(path);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
  return shorter;
}

static void test_lean(void)
{
  /* 4 GPUs per node, 2 SUs: every pair of two nodes drops its rails (4 NICs wide) and
   * leaf (8 NICs) and, across SUs, the spine: 4 x 4 x 4 x 3 = 192 pairs; a node's own
   * pairs (NVLink only) keep their route */
  g_assert_cmpint(lean_pairs("--nodes 4 --gpu toy --gpus-per-node 4 --su-nodes 2"), ==, 192);
  /* one GPU and NIC per node: its rails (twice the NIC: the generator keeps every FATPIPE
   * wider than a NIC), the leaf and the spine go: all 12 pairs */
  g_assert_cmpint(lean_pairs("--nodes 4 --gpu toy --gpus-per-node 1 --su-nodes 2"), ==, 12);
  /* pods and oversubscribed uplinks (shared: kept), SU zones */
  g_assert_cmpint(lean_pairs("--nodes 8 --gpu toy --gpus-per-node 2 --su-nodes 2 --pod-sus 2 --oversubscription 2,2 "
                             "--zones su"), ==, 16 * 14);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("/platform-routed/same/%zu", i);
    g_test_add_data_func(name, cases[i], test_case);
  }
  g_test_add_func("/platform-routed/edited", test_edited);
  g_test_add_func("/platform-routed/lean", test_lean);
  return g_test_run();
}
