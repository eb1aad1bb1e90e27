/* The what-if spread over the processes of `mpirun -np N spsim PLATFORM.xml`
 * (sp_whatif_spread): which rank this process is, from the launcher's environment,
 * and the exchanges through spsim-mpi-relay, a child process that is this rank's MPI
 * (src/nccl/mpi_relay.c says why spsim does not link MPI itself and how they talk). */
#define _GNU_SOURCE 1 /* pipe2 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "spsim/error.h"
#include "spsim/programs.h"

enum { OP_GATHER = 1, OP_BCAST = 2, OP_END = 3, OP_ABORT = 4 };

typedef struct {
  sp_whatif_spread s;
  pid_t pid;          /* the relay, once started (0: not yet) */
  int to, from;       /* pipes to and from it */
} spread_mpi;

static gboolean io_fail(GError **err, const char *what)
{
  g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "mpirun: %s spsim-mpi-relay (%s); the other ranks stop too",
              what, errno ? g_strerror(errno) : "it stopped");
  return FALSE;
}

static gboolean write_full(int fd, const void *p, gsize n, GError **err)
{
  const char *c = p;
  while (n > 0) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return io_fail(err, "cannot write to");
    c += k;
    n -= (gsize)k;
  }
  return TRUE;
}

static gboolean read_full(int fd, void *p, gsize n, GError **err)
{
  char *c = p;
  while (n > 0) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      if (k == 0) errno = 0;
      return io_fail(err, "no answer from");
    }
    c += k;
    n -= (gsize)k;
  }
  return TRUE;
}

/* Where spsim-mpi-relay is: $SPSIM_MPI_RELAY, beside this program (in a build tree,
 * beside the libtool wrapper too), else the installed one. */
static char *relay_path(void)
{
  const char *env = g_getenv("SPSIM_MPI_RELAY");
  if (env && *env) return g_strdup(env);
  char *p = sp_program_beside_self("spsim-mpi-relay");
  if (p != NULL) return p;
#ifdef SP_RELAY_DIR
  return g_build_filename(SP_RELAY_DIR, "spsim-mpi-relay", NULL);
#else
  return g_strdup("spsim-mpi-relay");
#endif
}

/* Start the relay at the first exchange: a process that fails before it never joins
 * MPI, and mpirun stops the job on its exit status. */
static gboolean relay_start(spread_mpi *m, GError **err)
{
  if (m->pid > 0) return TRUE;
  g_autofree char *path = relay_path();
  int to[2], from[2];
  if (pipe2(to, O_CLOEXEC) != 0) return io_fail(err, "cannot make a pipe to");
  if (pipe2(from, O_CLOEXEC) != 0) {
    close(to[0]);
    close(to[1]);
    return io_fail(err, "cannot make a pipe from");
  }
  char a_in[16], a_out[16];
  g_snprintf(a_in, sizeof a_in, "%d", to[0]);
  g_snprintf(a_out, sizeof a_out, "%d", from[1]);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(to[0]); close(to[1]); close(from[0]); close(from[1]);
    return io_fail(err, "cannot start");
  }
  if (pid == 0) {
    /* the relay keeps its two ends; the others close on exec */
    if (fcntl(to[0], F_SETFD, 0) != 0 || fcntl(from[1], F_SETFD, 0) != 0) _exit(127);
    char *argv[] = { path, a_in, a_out, NULL };
    execv(path, argv);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  m->pid = pid;
  m->to = to[1];
  m->from = from[0];
  int32_t hdr[2];
  if (!read_full(m->from, hdr, sizeof hdr, err)) {
    g_prefix_error(err, "%s: ", path);
    return FALSE;
  }
  if (hdr[0] != m->s.rank || hdr[1] != m->s.size) {
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "mpirun: spsim-mpi-relay is rank %d of %d where the launcher said %d of %d",
                hdr[0], hdr[1], m->s.rank, m->s.size);
    return FALSE;
  }
  return TRUE;
}

static gboolean request(spread_mpi *m, uint32_t op, const void *p, uint64_t len, GError **err)
{
  return relay_start(m, err) && write_full(m->to, &op, sizeof op, err) && write_full(m->to, &len, sizeof len, err) &&
         write_full(m->to, p, (gsize)len, err);
}

static GBytes *answer(spread_mpi *m, GError **err)
{
  uint64_t len;
  if (!read_full(m->from, &len, sizeof len, err)) return NULL;
  char *buf = g_malloc(len > 0 ? (gsize)len : 1);
  if (!read_full(m->from, buf, (gsize)len, err)) {
    g_free(buf);
    return NULL;
  }
  return g_bytes_new_take(buf, (gsize)len);
}

static gboolean mpi_gather(void *user, GBytes *mine, GPtrArray **all, GError **err)
{
  spread_mpi *m = user;
  gsize len;
  const void *p = g_bytes_get_data(mine, &len);
  *all = NULL;
  if (!request(m, OP_GATHER, p, len, err)) return FALSE;
  if (m->s.rank != 0) return TRUE;
  GPtrArray *a = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  for (int32_t k = 0; k < m->s.size; k++) {
    GBytes *b = answer(m, err);
    if (b == NULL) {
      g_ptr_array_unref(a);
      return FALSE;
    }
    g_ptr_array_add(a, b);
  }
  *all = a;
  return TRUE;
}

static gboolean mpi_bcast(void *user, GBytes **buf, GError **err)
{
  spread_mpi *m = user;
  if (m->s.rank == 0) {
    gsize len;
    const void *p = g_bytes_get_data(*buf, &len);
    return request(m, OP_BCAST, p, len, err);
  }
  if (!request(m, OP_BCAST, "", 0, err)) return FALSE;
  return (*buf = answer(m, err)) != NULL;
}

gboolean sp_cli_spread_open(sp_whatif_spread **out, GError **err)
{
  *out = NULL;
  /* Open MPI's launcher (mpirun, orterun) sets these in every process it starts */
  const char *size_s = g_getenv("OMPI_COMM_WORLD_SIZE"), *rank_s = g_getenv("OMPI_COMM_WORLD_RANK");
  if (size_s == NULL) return TRUE;
  guint64 size = 0, rank = 0;
  if (!g_ascii_string_to_unsigned(size_s, 10, 1, G_MAXINT32, &size, NULL) || rank_s == NULL ||
      !g_ascii_string_to_unsigned(rank_s, 10, 0, size - 1, &rank, NULL)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "mpirun: OMPI_COMM_WORLD_SIZE '%s' and OMPI_COMM_WORLD_RANK '%s' are not "
                "a rank of a job; start spsim with mpirun, or unset them", size_s, rank_s ? rank_s : "(unset)");
    return FALSE;
  }
  if (size == 1) return TRUE; /* mpirun -np 1: this process alone */
  spread_mpi *m = g_new0(spread_mpi, 1);
  m->s = (sp_whatif_spread){ .rank = (int32_t)rank, .size = (int32_t)size, .gather = mpi_gather, .bcast = mpi_bcast, .user = m };
  m->to = m->from = -1;
  *out = &m->s;
  return TRUE;
}

void sp_cli_spread_close(sp_whatif_spread *s, int rc)
{
  if (s == NULL) return;
  spread_mpi *m = s->user;
  if (m->pid > 0) {
    /* all exchanges done: every rank finalizes; else this rank's failure stops the job */
    uint32_t code = rc != 0 ? (uint32_t)rc : 1;
    if (s->finished) request(m, OP_END, "", 0, NULL);
    else request(m, OP_ABORT, &code, sizeof code, NULL);
    close(m->to);
    int status;
    while (waitpid(m->pid, &status, 0) < 0 && errno == EINTR)
      ;
    close(m->from);
  }
  g_free(m);
}
