/* The SimGrid engine's platform loading (see sim_priv.h): SimGrid's arguments, and the
 * check of a platform file in a forked child, which then carries on as the process
 * with the platform loaded (sp_sim_load_checked) or only answers (sp_sim_check_platform). */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>
#include <xbt/config.h>
#include <xbt/log.h>
#include <simgrid/mailbox.h>

#include "flow.h"
#include "platform.h"
#include "platform_args.h"
#include "platform_routed.h"
#include "sim.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "sim_priv.h"

#ifdef SP_SANITIZERS
#define SIM_STACK_KIB 1024
#define SIM_FACTORY "--cfg=contexts/factory:thread"
#else
#define SIM_STACK_KIB 256
#define SIM_FACTORY NULL
#endif

/* ---- room for actors' stacks ----------------------------------------------- */

/* Lines of a /proc file (mappings), or a number it holds (limit); -1 if unreadable. */
static int64_t proc_count(const char *path, gboolean lines)
{
  gchar *txt = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &txt, &len, NULL))
    return -1;
  int64_t v = 0;
  if (lines) {
    for (gsize i = 0; i < len; i++) v += txt[i] == '\n';
  } else {
    v = g_ascii_strtoll(txt, NULL, 10);
  }
  g_free(txt);
  return v;
}

/* Mappings kept free for everything else the run maps (its buffers, SimGrid's). */
#define SIM_MAP_SLACK 4096

gboolean sp_sim_reserve_actors(int64_t nactors, int *guard, GError **err)
{
  *guard = -1;
  int64_t limit = proc_count("/proc/sys/vm/max_map_count", FALSE);
  int64_t used = proc_count("/proc/self/maps", TRUE);
  if (limit <= 0 || used < 0)
    return TRUE; /* not Linux, or unreadable: nothing to compare against */
  int g = sg_cfg_get_int("contexts/guard-size");
  int64_t need = used + (g > 0 ? 2 : 1) * nactors + SIM_MAP_SLACK;
  if (need <= limit)
    return TRUE;
#ifdef SP_SANITIZERS
  g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
              "simulating %" G_GINT64_FORMAT " ranks needs one SimGrid actor (a thread and its stack) each, about %"
              G_GINT64_FORMAT " memory mappings, and this system allows %" G_GINT64_FORMAT
              " per process: raise it (sysctl -w vm.max_map_count=%" G_GINT64_FORMAT
              ") or use a release build, whose actors need no mapping of their own",
              nactors, need, limit, 2 * need);
  return FALSE;
#else
  (void)err;
  /* Stacks from mmap (not the heap, whose calloc would write every page) and as many
   * as asked; no guard page, so consecutive stacks merge into one mapping. */
  mallopt(M_MMAP_THRESHOLD, SIM_STACK_KIB * 1024 / 2);
  mallopt(M_MMAP_MAX, G_MAXINT);
  sg_cfg_set_int("contexts/guard-size", 0);
  *guard = g;
  return TRUE;
#endif
}

void sp_sim_actors_done(int guard)
{
  if (guard >= 0)
    sg_cfg_set_int("contexts/guard-size", guard);
}

/* ---- SimGrid arguments and the child-process check ------------------------ */

GPtrArray *sp_sim_args_new(const sp_plat_desc *pp, gboolean quiet)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup("spsim"));
  g_ptr_array_add(a, g_strdup("--cfg=network/model:CM02"));
  g_ptr_array_add(a, g_strdup("--cfg=network/TCP-gamma:0"));
  g_ptr_array_add(a, g_strdup("--cfg=network/crosstraffic:0"));
  /* Max-min shares solved over the whole system at every event. SimGrid's default (Lazy,
   * which re-solves only the constraints it marks as modified) gave shares that depend on
   * the order in which a route lists its links: a tree all-reduce of 128 GPUs on 128 nodes,
   * 32 MiB, took 3,320.21 us with the links in node-zone order and 3,231.23 us in SU-zone
   * order, the same links; Full gives 3,320.21 us for both, and as fast on spsim's runs
   * (bench/RESULTS.md, "Max-min solved in full") */
  g_ptr_array_add(a, g_strdup("--cfg=network/optim:Full"));
  g_ptr_array_add(a, g_strdup("--cfg=contexts/nthreads:1"));
  g_ptr_array_add(a, g_strdup_printf("--cfg=contexts/stack-size:%d", SIM_STACK_KIB));
  if (SIM_FACTORY)
    g_ptr_array_add(a, g_strdup(SIM_FACTORY));
  /* the check's child keeps SimGrid's errors: they say why a file is rejected */
  g_ptr_array_add(a, g_strdup(quiet ? "--log=root.thresh:critical" : "--log=root.thresh:error"));
  if (quiet)
    g_ptr_array_add(a, g_strdup("--log=root.app:file:/dev/null"));
  for (guint i = 0; i < pp->cfg->len; i++)
    g_ptr_array_add(a, g_strdup(g_ptr_array_index(pp->cfg, i)));
  const char *extra = g_getenv("SPSIM_SIMGRID_ARGS");
  if (extra && *extra) {
    gchar **toks = g_strsplit_set(extra, " \t", -1);
    for (int i = 0; toks[i]; i++)
      if (*toks[i])
        g_ptr_array_add(a, g_strdup(toks[i]));
    g_strfreev(toks);
  }
  g_ptr_array_add(a, NULL);
  return a;
}

/* ---- the platform check, in a child process ------------------------------
 * SimGrid aborts (or faults) on files it rejects and on a route that does not
 * exist, so everything that can make it die runs in a forked child first. The
 * child reports through a shared page: a message, or the pair of hosts whose
 * route it was looking up when it died. */

/* Exhaustive route check up to this many hosts (about 0.5 us per lookup:
 * 256 hosts = 65 k ordered pairs, 30 ms). */
#define ROUTE_ALL_PAIRS_MAX 256
/* Above: all pairs inside zones up to this size, and all zone pairs up to this
 * many zones. */
#define ROUTE_ZONE_PAIRS_MAX 64
#define ROUTE_ZONES_MAX 1024

#define NO_ROUTE_FMT                                                                              \
  "no route from host '%s' to host '%s': add a <route> (or a <zoneRoute> between their zones), " \
  "or use routing=\"Floyd\" or \"Dijkstra\" with links that connect them"

typedef struct {
  int phase;          /* 0 load, 1 speeds and bandwidths, 2 routes, 3 done */
  char from[256], to[256];
  char msg[1024];
} child_report;

static void route_pair(child_report *rep, sg_host_t *h, int32_t i, int32_t j, xbt_dynar_t d)
{
  if (i == j)
    return;
  g_strlcpy(rep->from, sg_host_get_name(h[i]), sizeof rep->from);
  g_strlcpy(rep->to, sg_host_get_name(h[j]), sizeof rep->to);
  xbt_dynar_reset(d);
  sg_host_get_route(h[i], h[j], d);
  /* SimGrid returns an empty route for a missing entry of a Full zone: no link
   * would mean infinite bandwidth, so it is a missing route too */
  if (xbt_dynar_is_empty(d)) {
    g_snprintf(rep->msg, sizeof rep->msg, NO_ROUTE_FMT, rep->from, rep->to);
    _exit(3);
  }
}

static void route_both(child_report *rep, sg_host_t *h, int32_t i, int32_t j, xbt_dynar_t d)
{
  route_pair(rep, h, i, j, d);
  route_pair(rep, h, j, i, d);
}

/* Every ordered pair up to ROUTE_ALL_PAIRS_MAX hosts. Above, by the zones of the
 * file (group): every pair inside a zone (each member with the first one in large
 * zones), every host with a member of the next zone, and the first members of
 * every pair of zones (of zones at power-of-two distances beyond ROUTE_ZONES_MAX). */
static void check_routes(child_report *rep, sg_host_t *h, int32_t n, const int32_t *group)
{
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  if (n <= ROUTE_ALL_PAIRS_MAX || group == NULL) {
    /* (without zones: every host to and from the first one) */
    for (int32_t i = 0; i < n && (n <= ROUTE_ALL_PAIRS_MAX || i < 1); i++)
      for (int32_t j = 0; j < n; j++)
        if (n <= ROUTE_ALL_PAIRS_MAX)
          route_pair(rep, h, i, j, d);
        else
          route_both(rep, h, i, j, d);
  } else {
    /* members of each group, in order */
    GHashTable *index = g_hash_table_new(g_direct_hash, g_direct_equal);
    GPtrArray *members = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (int32_t i = 0; i < n; i++) {
      gpointer k = GINT_TO_POINTER(group[i] + 2), v;
      if (!g_hash_table_lookup_extended(index, k, NULL, &v)) {
        v = GUINT_TO_POINTER(members->len);
        g_hash_table_insert(index, k, v);
        g_ptr_array_add(members, g_array_new(FALSE, FALSE, sizeof(int32_t)));
      }
      g_array_append_val((GArray *)g_ptr_array_index(members, GPOINTER_TO_UINT(v)), i);
    }
    int32_t z = (int32_t)members->len;
    for (int32_t g = 0; g < z; g++) {
      GArray *m = g_ptr_array_index(members, g), *next = g_ptr_array_index(members, (g + 1) % z);
      int32_t k = (int32_t)m->len, first = g_array_index(m, int32_t, 0);
      for (int32_t a = 0; a < k; a++) {
        int32_t ha = g_array_index(m, int32_t, a);
        if (k <= ROUTE_ZONE_PAIRS_MAX)
          for (int32_t b = a + 1; b < k; b++)
            route_both(rep, h, ha, g_array_index(m, int32_t, b), d);
        else
          route_both(rep, h, ha, first, d);
        route_both(rep, h, ha, g_array_index(next, int32_t, 0), d);
      }
      for (int32_t step = 1; step < z; step = z <= ROUTE_ZONES_MAX ? step + 1 : step * 2)
        route_both(rep, h, first, g_array_index((GArray *)g_ptr_array_index(members, (g + step) % z), int32_t, 0), d);
    }
    g_ptr_array_unref(members);
    g_hash_table_unref(index);
  }
  xbt_dynar_free(&d);
}

/* SimGrid 3.32 computes Floyd and Dijkstra zones' tables when the platform is
 * sealed, at the first run: a run without actors seals it, so that routes can be
 * queried before any actor runs (the check below, stepsim's flow plans). */
void sp_sim_seal_platform(void)
{
  simgrid_run();
}

/* SimGrid's clock (simgrid::kernel::EngineImpl::now_, exported by libsimgrid 3.32;
 * simgrid_get_clock() reads it). Every run is timed from the clock at its start, and
 * the event dates it computes are absolute: the same run started at another clock
 * rounds differently (by up to 3.4e-8 relative in the default what-if, measured by
 * starting it 777 s later). Runs start at 0 so that a result does not depend on what
 * ran before in the process (a layout priced alone or in a sweep, on one process or
 * spread over several). */
extern double sp_sg_clock __asm__("_ZN7simgrid6kernel10EngineImpl4now_E");

void sp_sim_clock_reset(void)
{
  /* between runs nothing is pending: no actor, action or timer holds a date */
  sp_sg_clock = 0.0;
}

/* @p out[i] = the SimGrid host named names[i], through one list of all hosts
 * (sg_host_by_name searches zone by zone: O(zones) per name on large platforms).
 * FALSE when the counts differ or a name is not a SimGrid host. */
gboolean sp_sim_hosts_by_names(const GPtrArray *names, sg_host_t *out, size_t n)
{
  if (names->len != n)
    return FALSE;
  sg_host_t *list = sg_host_list();
  GHashTable *by_name = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < n; i++)
    g_hash_table_insert(by_name, (gpointer)sg_host_get_name(list[i]), list[i]);
  gboolean ok = TRUE;
  for (size_t i = 0; i < n && ok; i++)
    ok = (out[i] = g_hash_table_lookup(by_name, g_ptr_array_index(names, i))) != NULL;
  g_hash_table_unref(by_name);
  free(list);
  return ok;
}

/* Load @p path into SimGrid's engine: a platform `spsim platform dgx` generated and
 * left unchanged is built as one zone routed by arithmetic, the same hosts, links and
 * routes as SimGrid's reading of the file in a fraction of the time (platform_routed.h);
 * any other file, or any file when SPSIM_PLATFORM_XML=1, through SimGrid's parser.
 * @return TRUE when built routed. */
static gboolean load_platform(const char *path)
{
  sp_platform_opts gen;
  if (g_strcmp0(g_getenv("SPSIM_PLATFORM_XML"), "1") != 0 && sp_platform_generated(path, &gen) &&
      sp_sim_build_routed(&gen, NULL))
    return TRUE;
  simgrid_load_platform(path);
  return FALSE;
}

/* The child: load, then check speeds, bandwidths and routes. @return 0 when all
 * hold (@p keep: SimGrid's arguments stay in g_sim, the process carries on with
 * the platform loaded), else the exit status. */
static int child_check(const char *path, const sp_plat_desc *pp, child_report *rep, gboolean keep)
{
  /* as in sp_sim_init: simgrid_init drops what it consumes from a shallow copy,
   * so every string is still freed (nothing lost for a leak checker) */
  GPtrArray *a = sp_sim_args_new(pp, FALSE);
  int argc = (int)a->len - 1;
  char **argv = g_memdup2(a->pdata, sizeof(char *) * a->len);
  simgrid_init(&argc, argv);
  /* a routed build's routes exist by construction (tests/test-platform-routed holds them
   * to SimGrid's reading of the file): only a parsed file's are checked */
  const gboolean routed = load_platform(path);
  sp_sim_seal_platform();
  if (keep) {
    g_sim.args = a; /* simgrid_init may refer to argv later */
    g_sim.argv = argv;
  } else {
    g_free(argv);
    g_ptr_array_free(a, TRUE);
  }

  rep->phase = 1;
  int32_t n = (int32_t)sg_host_count();
  sg_host_t *h = g_new0(sg_host_t, n);
  gboolean by_decl = sp_sim_hosts_by_names(pp->names, h, (size_t)n);
  if (!by_decl) {
    sg_host_t *list = sg_host_list();
    memcpy(h, list, (size_t)n * sizeof(sg_host_t));
    free(list);
  }
  int rc = 0;
  for (int32_t i = 0; i < n && rc == 0; i++)
    if (!(sg_host_get_speed(h[i]) > 0)) {
      g_snprintf(rep->msg, sizeof rep->msg,
                 "host '%s' has speed %g flop/s; give every host a positive speed (e.g. speed=\"989.4Tf\")",
                 sg_host_get_name(h[i]), sg_host_get_speed(h[i]));
      rc = 3;
    }
  size_t nl = sg_link_count();
  sg_link_t *links = sg_link_list();
  for (size_t i = 0; i < nl && rc == 0; i++)
    if (!(sg_link_get_bandwidth(links[i]) > 0)) {
      g_snprintf(rep->msg, sizeof rep->msg,
                 "link '%s' has bandwidth %g B/s; give every link a positive bandwidth (e.g. bandwidth=\"48GBps\")",
                 sg_link_get_name(links[i]), sg_link_get_bandwidth(links[i]));
      rc = 3;
    }
  free(links);
  if (rc == 0) {
    rep->phase = 2;
    if (!routed)
      check_routes(rep, h, n, by_decl ? (const int32_t *)(void *)pp->group->data : NULL);
    rep->phase = 3;
  }
  g_free(h);
  return rc;
}

/* SimGrid's most telling line of @p out: the last error or uncaught exception
 * that is not "Exiting now" or a backtrace, without SimGrid's
 * "[time] file:line: [category/LEVEL] " prefix. */
static char *simgrid_reason(const char *out)
{
  gchar **lines = g_strsplit(out, "\n", -1);
  char *best = NULL;
  for (int i = 0; lines[i]; i++) {
    const char *l = g_strstrip(lines[i]), *tag = strstr(l, ": [");
    if (tag && (tag = strstr(tag, "] ")) != NULL)
      l = tag + 2;
    if (!*l || g_str_has_prefix(l, "Exiting now") || g_str_has_prefix(l, "Current backtrace") ||
        g_str_has_prefix(l, "->") || g_str_has_prefix(l, "Backtrace") || strstr(l, "Sanitizer"))
      continue;
    if (tag != NULL || best == NULL) {
      g_free(best);
      best = g_strdup(l);
    }
  }
  g_strfreev(lines);
  return best;
}

/* The supervisor: the child carries on as the process. Pass on the signals that end
 * a process, and end as the child ends, with its status or its signal. */
static pid_t carrier;

static void pass_signal(int sig)
{
  if (carrier > 0) kill(carrier, sig);
}

G_GNUC_NORETURN static void supervise(pid_t pid)
{
  carrier = pid;
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
  for (size_t i = 0; i < G_N_ELEMENTS(sigs); i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pass_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, NULL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* Check @p path in a forked child. @p carry_on: once the platform passes, the child
 * returns TRUE with it loaded and carries on as the process, while this one waits
 * and ends as it ends (supervise): the platform is loaded once, and a file SimGrid
 * dies on still only takes the child with it. */
static gboolean check_in_child(const char *path, const sp_plat_desc *pp, gboolean carry_on, GError **err)
{
  if (!pp->has_doctype) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "platform '%s' has no DOCTYPE line, which SimGrid's parser needs: add "
                "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\"> after the <?xml ...?> line",
                path);
    return FALSE;
  }
  child_report *rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (rep == MAP_FAILED) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "mmap: %s", g_strerror(errno));
    return FALSE;
  }
  memset(rep, 0, sizeof *rep);
  int fds[2];
  if (pipe(fds) != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "pipe: %s", g_strerror(errno));
    munmap(rep, sizeof *rep);
    return FALSE;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    munmap(rep, sizeof *rep);
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "fork: %s", g_strerror(errno));
    return FALSE;
  }
  if (pid == 0) {
    close(fds[0]);
    /* the supervisor's death (a SIGKILL) takes the child along */
    if (carry_on) prctl(PR_SET_PDEATHSIG, SIGKILL);
    int out = carry_on ? dup(1) : -1, errfd = carry_on ? dup(2) : -1;
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0)
      dup2(devnull, 1);
    dup2(fds[1], 2);
    int rc = child_check(path, pp, rep, carry_on);
    if (rc != 0 || !carry_on || out < 0 || errfd < 0)
      _exit(rc);
    /* passed: SimGrid quiet from now on (as sp_sim_args_new(quiet) has it), the
     * process's own outputs back, and the report page and pipe let go */
    xbt_log_control_set("root.thresh:critical");
    xbt_log_control_set("root.app:file:/dev/null");
    fflush(stdout); /* what the check printed goes where it went: /dev/null, the pipe */
    fflush(stderr);
    dup2(out, 1);
    dup2(errfd, 2);
    close(out);
    close(errfd);
    if (devnull >= 0)
      close(devnull);
    close(fds[1]);
    munmap(rep, sizeof *rep);
    return TRUE;
  }
  close(fds[1]);
  GString *out = g_string_new(NULL);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0)
      g_string_append_len(out, buf, n);
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(fds[0]);
  if (carry_on && rep->phase == 3) {
    /* the child passed and closed the pipe: it is the process now */
    g_string_free(out, TRUE);
    munmap(rep, sizeof *rep);
    supervise(pid);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  gboolean ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && rep->phase == 3;
  if (!ok) {
    if (rep->msg[0])
      g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "platform '%s': %s", path, rep->msg);
    else if (rep->phase == 2) {
      g_snprintf(rep->msg, sizeof rep->msg, NO_ROUTE_FMT, rep->from, rep->to);
      g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "platform '%s': %s", path, rep->msg);
    }
    else {
      char *why = simgrid_reason(out->str);
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "platform '%s' rejected by SimGrid: %s", path,
                  why ? why : WIFSIGNALED(status) ? "SimGrid stopped on a signal while loading it"
                                                  : "SimGrid stopped without a message");
      g_free(why);
    }
  }
  g_string_free(out, TRUE);
  munmap(rep, sizeof *rep);
  return ok;
}

/* Read and check @p path in a child process; @return its description, or NULL.
 * @p load: the child carries on as the process with the platform loaded. */
static sp_plat_desc *read_checked(const char *path, gboolean load, GError **err)
{
  if (path == NULL || *path == '\0') {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no platform file given");
    return NULL;
  }
  if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "platform file '%s' does not exist", path);
    return NULL;
  }
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "platform '%s' is a directory, not an XML file", path);
    return NULL;
  }
  sp_plat_desc *pp = sp_plat_read(path, err);
  if (pp != NULL && !check_in_child(path, pp, load, err)) {
    sp_plat_desc_free(pp);
    return NULL;
  }
  return pp;
}

sp_plat_desc *sp_sim_read_checked(const char *path, GError **err)
{
  return read_checked(path, FALSE, err);
}

sp_plat_desc *sp_sim_load_checked(const char *path, GError **err)
{
  return read_checked(path, TRUE, err);
}

gboolean sp_sim_check_platform(const char *platform_xml, GError **err)
{
  sp_plat_desc *pp = sp_sim_read_checked(platform_xml, err);
  sp_plat_desc_free(pp);
  return pp != NULL;
}
