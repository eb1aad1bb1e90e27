/* Work spread over processes of this machine, children forked with one stream socket
 * each:
 *  - the what-if (`spsim PLATFORM.xml -j N`): the exchanges of sp_whatif_spread, as
 *    under mpirun, between this process (rank 0) and N - 1 children forked before the
 *    engine opens. A message is a header (tag, length) and its bytes; a child that fails
 *    sends its error instead of data, and a child that dies is named by rank 0 with its
 *    exit status or signal;
 *  - independent items of plain data (`spsim bench --jobs N`, sp_cli_jobs_map): children
 *    forked once the platform is loaded compute their share and send it back. */
#define _GNU_SOURCE 1 /* MSG_NOSIGNAL, SOCK_CLOEXEC */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"
#include "spsim/error.h"

enum { TAG_DATA = 0, TAG_FAILED = 1 };

/* A message larger than this is a broken stream, not a result (the largest, --all
 * --json-full's rows of every layout, is tens of megabytes). */
#define MAX_MESSAGE ((uint64_t)1 << 34)

typedef struct {
  uint32_t tag, pad;
  uint64_t len;
} header;

typedef struct {
  const sp_cli_spread_ops *ops; /* first: sp_cli_spread_failed/close find it there */
  sp_whatif_spread s;
  int *fd;   /* rank 0: the socket to child k at [k]; a child: its socket to rank 0 at [0] */
  pid_t *pid; /* rank 0: child k's process at [k] */
} spread_jobs;

static gboolean send_all(int fd, const void *p, gsize n)
{
  const char *c = p;
  while (n > 0) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return FALSE;
    c += k;
    n -= (gsize)k;
  }
  return TRUE;
}

static gboolean recv_all(int fd, void *p, gsize n)
{
  char *c = p;
  while (n > 0) {
    ssize_t k = recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return FALSE;
    c += k;
    n -= (gsize)k;
  }
  return TRUE;
}

static gboolean send_msg(int fd, uint32_t tag, const void *p, gsize len)
{
  header h = { tag, 0, len };
  return send_all(fd, &h, sizeof h) && (len == 0 || send_all(fd, p, len));
}

/* The next message's tag and bytes, or NULL when the stream ended or broke. */
static GBytes *recv_msg(int fd, uint32_t *tag)
{
  header h;
  if (!recv_all(fd, &h, sizeof h) || h.len > MAX_MESSAGE) return NULL;
  guint8 *p = g_try_malloc(h.len ? h.len : 1);
  if (p == NULL) return NULL;
  if (!recv_all(fd, p, h.len)) {
    g_free(p);
    return NULL;
  }
  *tag = h.tag;
  return g_bytes_new_take(p, h.len);
}

/* Wait for child @p *pid where this process is its parent (after the engine opens,
 * rank 0 may carry on in a process of its own, sim_load.c: then its first process
 * reaps them), forget it, and say how it ended. */
static char *reap(pid_t *pid)
{
  int st = 0;
  pid_t r = -1;
  if (*pid > 0)
    while ((r = waitpid(*pid, &st, 0)) < 0 && errno == EINTR)
      ;
  *pid = 0;
  if (r > 0 && WIFSIGNALED(st))
    return g_strdup_printf("was killed by signal %d (%s)", WTERMSIG(st), g_strsignal(WTERMSIG(st)));
  if (r > 0 && WIFEXITED(st)) return g_strdup_printf("exited with status %d", WEXITSTATUS(st));
  return g_strdup("stopped");
}

/* Rank 0: child @p k has gone; what became of it. */
static gboolean child_gone(spread_jobs *j, int32_t k, GError **err)
{
  g_autofree char *how = reap(&j->pid[k]);
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "-j %d: worker process %d of the what-if %s before it was done "
              "(run with -j 1 for one process)", j->s.size, k, how);
  return FALSE;
}

static gboolean jobs_gather(void *user, GBytes *mine, GPtrArray **all, GError **err)
{
  spread_jobs *j = user;
  *all = NULL;
  gsize len;
  const void *p = g_bytes_get_data(mine, &len);
  if (j->s.rank > 0) {
    if (send_msg(j->fd[0], TAG_DATA, p, len)) return TRUE;
    g_set_error_literal(err, SP_ERROR, SP_ERROR_TRANSPORT, "-j: the what-if's first process has gone");
    return FALSE;
  }
  GPtrArray *a = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  g_ptr_array_add(a, g_bytes_ref(mine));
  for (int32_t k = 1; k < j->s.size; k++) {
    uint32_t tag = 0;
    GBytes *b = recv_msg(j->fd[k], &tag);
    if (b == NULL || tag != TAG_DATA) {
      g_ptr_array_unref(a);
      if (b == NULL) return child_gone(j, k, err);
      gsize ml;
      const char *m = g_bytes_get_data(b, &ml);
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "-j %d: worker process %d: %.*s", j->s.size, k, (int)ml, m);
      g_bytes_unref(b);
      return FALSE;
    }
    g_ptr_array_add(a, b);
  }
  *all = a;
  return TRUE;
}

static gboolean jobs_bcast(void *user, GBytes **buf, GError **err)
{
  spread_jobs *j = user;
  if (j->s.rank == 0) {
    gsize len;
    const void *p = g_bytes_get_data(*buf, &len);
    for (int32_t k = 1; k < j->s.size; k++)
      if (!send_msg(j->fd[k], TAG_DATA, p, len)) return child_gone(j, k, err);
    return TRUE;
  }
  uint32_t tag = 0;
  if ((*buf = recv_msg(j->fd[0], &tag)) != NULL && tag == TAG_DATA) return TRUE;
  if (*buf != NULL) g_bytes_unref(*buf);
  *buf = NULL;
  g_set_error_literal(err, SP_ERROR, SP_ERROR_TRANSPORT, "-j: the what-if's first process has gone");
  return FALSE;
}

/* A child's error goes to rank 0, which says it at its next exchange; rank 0 has
 * printed its own. */
static void jobs_failed(sp_whatif_spread *s, const char *message)
{
  spread_jobs *j = s->user;
  if (s->rank > 0) send_msg(j->fd[0], TAG_FAILED, message, strlen(message));
}

static void jobs_close(sp_whatif_spread *s, int rc)
{
  spread_jobs *j = s->user;
  (void)rc;
  if (s->rank > 0) {
    close(j->fd[0]);
  } else {
    /* done: the children end on their own; else (rank 0 failed, or a child did) they
     * are stopped. Either way rank 0 returns once each has closed its socket: no
     * child outlives the command. */
    for (int32_t k = 1; k < s->size; k++) {
      if (!s->finished && j->pid[k] > 0) kill(j->pid[k], SIGTERM);
      if (j->fd[k] < 0) continue;
      char buf[4096];
      for (;;) {
        ssize_t r = recv(j->fd[k], buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EINTR)) break;
      }
      close(j->fd[k]);
    }
    for (int32_t k = 1; k < s->size; k++) g_free(reap(&j->pid[k]));
  }
  g_free(j->fd);
  g_free(j->pid);
  g_free(j);
}

/* Fork @p want - 1 children, each joined to this process by a socket pair (fewer when
 * a fork fails: the results are the same). This process: returns 0, fd[k] and pid[k]
 * of each child k and *@p size the processes started. Child k: returns k, its socket in
 * fd[0] (the others' closed) and *@p size once the parent has started them all. */
static int32_t fork_children(int32_t want, int *fd, pid_t *pid, int32_t *size)
{
  fflush(stdout); /* nothing buffered is written twice */
  fflush(stderr);
  pid_t parent = getpid();
  int32_t started = 1;
  for (int32_t k = 1; k < want; k++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) break;
    pid_t p = fork();
    if (p < 0) {
      close(sv[0]);
      close(sv[1]);
      break;
    }
    if (p == 0) {
#ifdef __linux__
      prctl(PR_SET_PDEATHSIG, SIGTERM); /* the parent killed: no orphan keeps computing */
#endif
      if (getppid() != parent) _exit(1);
      for (int32_t i = 1; i < k; i++) close(fd[i]);
      close(sv[0]);
      fd[0] = sv[1];
      if (!recv_all(fd[0], size, sizeof *size) || *size <= k) _exit(1);
      return k;
    }
    close(sv[1]);
    fd[k] = sv[0];
    pid[k] = p;
    started++;
  }
  /* a child that cannot be told is found gone at its first exchange */
  for (int32_t k = 1; k < started; k++) send_all(fd[k], &started, sizeof started);
  *size = started;
  return 0;
}

static const sp_cli_spread_ops jobs_ops = { jobs_failed, jobs_close };

gboolean sp_cli_jobs_open(int32_t jobs, sp_whatif_spread **out, GError **err)
{
  (void)err;
  *out = NULL;
  if (jobs <= 1) return TRUE;
  spread_jobs *j = g_new0(spread_jobs, 1);
  j->ops = &jobs_ops;
  j->fd = g_new(int, jobs);
  j->pid = g_new0(pid_t, jobs);
  for (int32_t k = 0; k < jobs; k++) j->fd[k] = -1;
  int32_t size = 1, rank = fork_children(jobs, j->fd, j->pid, &size);
  j->s = (sp_whatif_spread){ .rank = rank, .size = size, .gather = jobs_gather, .bcast = jobs_bcast, .user = j };
  if (size == 1) { /* no child could start: this process alone */
    jobs_close(&j->s, 0);
    return TRUE;
  }
  *out = &j->s;
  return TRUE;
}

int32_t sp_cli_jobs_auto(guint64 need)
{
  int32_t n = (int32_t)g_get_num_processors();
  n = CLAMP(n, 1, SP_CLI_JOBS_MAX);
  /* each process runs its own engine: at least @p need (and SP_CLI_JOBS_MIN_MEM) of
   * available memory each (Linux's MemAvailable) */
  need = MAX(need, SP_CLI_JOBS_MIN_MEM);
  g_autofree char *mi = NULL;
  if (g_file_get_contents("/proc/meminfo", &mi, NULL, NULL)) {
    const char *p = strstr(mi, "MemAvailable:");
    if (p != NULL) {
      guint64 kib = g_ascii_strtoull(p + strlen("MemAvailable:"), NULL, 10);
      int64_t fit = (int64_t)(kib / MAX(need >> 10, 1));
      n = (int32_t)CLAMP(fit, 1, n);
    }
  }
  return n;
}

/* An item's record in a child's stream: its index, whether it is a result or an
 * error, and the length of what follows (the item's bytes; an error's domain, a
 * NUL, its code and its message). */
typedef struct {
  uint32_t index, failed;
  uint64_t len;
} item_header;

static void send_item_error(int fd, guint i, const GError *e)
{
  const char *dom = g_quark_to_string(e->domain);
  gsize dl = strlen(dom) + 1, ml = strlen(e->message);
  int32_t code = e->code;
  item_header h = { i, 1, dl + sizeof code + ml };
  if (send_all(fd, &h, sizeof h) && send_all(fd, dom, dl) && send_all(fd, &code, sizeof code)) send_all(fd, e->message, ml);
}

static GError *item_error(const guint8 *p, gsize len)
{
  const guint8 *nul = memchr(p, 0, len);
  if (nul == NULL || (gsize)(nul - p) + 1 + sizeof(int32_t) > len) return NULL;
  gsize dl = (gsize)(nul - p) + 1;
  int32_t code;
  memcpy(&code, p + dl, sizeof code);
  g_autofree char *msg = g_strndup((const char *)p + dl + sizeof code, len - dl - sizeof code);
  return g_error_new_literal(g_quark_from_string((const char *)p), code, msg);
}

/* Keep @p e as the error of item @p i when no earlier item has failed. */
static void keep_first(GError **first, guint *first_i, guint i, GError *e)
{
  if (*first == NULL || i < *first_i) {
    g_clear_error(first);
    *first = e;
    *first_i = i;
  } else {
    g_error_free(e);
  }
}

/* Items by weight, heaviest first (ties: lower index first). */
static gint by_weight(gconstpointer a, gconstpointer b, gpointer weights)
{
  const double *w = weights;
  guint x = *(const guint *)a, y = *(const guint *)b;
  if (w[x] != w[y]) return w[x] > w[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Which of @p J processes computes each item: every J-th without weights, else the
 * heaviest first to the least loaded (ties: the lowest process), so that one size of
 * a doubling sweep, as long as all the others together, gets a process of its own. */
static int32_t *assign(guint n, int32_t J, const double *w)
{
  int32_t *owner = g_new(int32_t, MAX(n, 1));
  if (w == NULL) {
    for (guint i = 0; i < n; i++) owner[i] = (int32_t)(i % (guint)J);
    return owner;
  }
  guint *order = g_new(guint, MAX(n, 1));
  for (guint i = 0; i < n; i++) order[i] = i;
  g_qsort_with_data(order, (gint)n, sizeof *order, by_weight, (gpointer)w);
  double *load = g_new0(double, J);
  for (guint r = 0; r < n; r++) {
    int32_t best = 0;
    for (int32_t k = 1; k < J; k++)
      if (load[k] < load[best]) best = k;
    owner[order[r]] = best;
    load[best] += w[order[r]];
  }
  g_free(load);
  g_free(order);
  return owner;
}

/* The first item at or after @p i that process @p k computes, or @p n. */
static guint next_of(const int32_t *owner, guint n, guint i, int32_t k)
{
  while (i < n && owner[i] != k) i++;
  return i;
}

gboolean sp_cli_jobs_map(int32_t jobs, guint n, gsize size, sp_cli_item_fn fn, void *user, const double *weight,
                         void *out, GError **err)
{
  int32_t J = (guint)MAX(jobs, 1) > n ? (int32_t)n : MAX(jobs, 1);
  if (J <= 1) {
    for (guint i = 0; i < n; i++)
      if (!fn(user, i, (guint8 *)out + (gsize)i * size, err)) return FALSE;
    return TRUE;
  }
  int *fd = g_new(int, J);
  pid_t *pid = g_new0(pid_t, J);
  int32_t started = 1, rank = fork_children(J, fd, pid, &started);
  int32_t *owner = assign(n, started, weight);
  if (rank > 0) { /* a child: its items, in order, then nothing else */
    guint8 *buf = g_malloc0(size ? size : 1);
    for (guint i = next_of(owner, n, 0, rank); i < n; i = next_of(owner, n, i + 1, rank)) {
      GError *e = NULL;
      if (!fn(user, i, buf, &e)) {
        send_item_error(fd[0], i, e);
        break; /* as one process would stop here */
      }
      item_header h = { i, 0, size };
      if (!send_all(fd[0], &h, sizeof h) || !send_all(fd[0], buf, size)) break;
    }
    _exit(0); /* the parent owns everything else: no cleanup, no buffered output */
  }
  GError *first = NULL;
  guint first_i = 0;
  for (guint i = next_of(owner, n, 0, 0); i < n; i = next_of(owner, n, i + 1, 0)) {
    GError *e = NULL;
    if (!fn(user, i, (guint8 *)out + (gsize)i * size, &e)) {
      keep_first(&first, &first_i, i, e);
      break;
    }
  }
  for (int32_t k = 1; k < started; k++) {
    guint next = next_of(owner, n, 0, k); /* the next item child k owes */
    gboolean ended = FALSE; /* by an error of its own */
    for (;;) {
      item_header h;
      if (!recv_all(fd[k], &h, sizeof h) || h.index != next || (h.failed == 0 && h.len != size) || h.len > MAX_MESSAGE)
        break;
      guint8 *p = g_try_malloc(h.len ? h.len : 1);
      if (p == NULL || !recv_all(fd[k], p, h.len)) {
        g_free(p);
        break;
      }
      if (h.failed) {
        GError *e = item_error(p, h.len);
        g_free(p);
        if (e != NULL) keep_first(&first, &first_i, h.index, e);
        ended = e != NULL;
        break;
      }
      memcpy((guint8 *)out + (gsize)h.index * size, p, size);
      g_free(p);
      next = next_of(owner, n, next + 1, k);
    }
    close(fd[k]);
    g_autofree char *how = reap(&pid[k]);
    if (!ended && next < n) /* it stopped before its items were done */
      keep_first(&first, &first_i, next,
                 g_error_new(SP_ERROR, SP_ERROR_TRANSPORT, "--jobs %d: worker process %d %s before its share was done "
                             "(run with --jobs 1 for one process)", started, k, how));
  }
  g_free(owner);
  g_free(fd);
  g_free(pid);
  if (first != NULL) {
    g_propagate_error(err, first);
    return FALSE;
  }
  return TRUE;
}
