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
  const sp_cli_spread_ops *ops; /* first: sp_cli_spread_failed/close find it there */
  sp_whatif_spread s;
  pid_t pid;          /* the relay, once started (0: not yet) */
  int to, from;       /* pipes to and from it */
  gboolean failing;   /* this rank failed before its first exchange */
  gboolean alone;     /* rank 0, failing: some rank did not fail with it */
  gboolean broken;    /* rank 0: another rank failed before its first exchange */
} spread_mpi;

/* Every gathered message starts with a tag: data, or the error of a rank that failed
 * before its first exchange (the message that follows). The tag takes 8 bytes, so
 * that what follows keeps the alignment of the buffer it arrives in. */
enum { TAG_DATA = 0, TAG_FAILED = 1, TAG_SIZE = 8 };

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

/* Gather @p len bytes at @p p, after @p tag, on rank 0. Rank 0 gets the messages
 * without their tags in *@p all, how many ranks sent a failure in *@p n_failed, and
 * the first failure of a rank other than itself (*@p failed_rank, its message in
 * *@p failed), or -1. */
static gboolean tagged_gather(spread_mpi *m, guint8 tag, const void *p, gsize len, GPtrArray **all, int32_t *n_failed,
                              int32_t *failed_rank, char **failed, GError **err)
{
  *all = NULL;
  *n_failed = 0;
  *failed_rank = -1;
  *failed = NULL;
  guint8 *msg = g_malloc0(len + TAG_SIZE);
  msg[0] = tag;
  if (len > 0) memcpy(msg + TAG_SIZE, p, len);
  gboolean ok = request(m, OP_GATHER, msg, len + TAG_SIZE, err);
  g_free(msg);
  if (!ok) return FALSE;
  if (m->s.rank != 0) return TRUE;
  GPtrArray *a = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  for (int32_t k = 0; k < m->s.size; k++) {
    GBytes *b = answer(m, err);
    if (b == NULL) {
      g_ptr_array_unref(a);
      g_free(*failed);
      *failed = NULL;
      return FALSE;
    }
    gsize bl;
    const guint8 *bp = g_bytes_get_data(b, &bl);
    if (bl < TAG_SIZE) {
      g_bytes_unref(b);
      g_ptr_array_unref(a);
      g_free(*failed);
      *failed = NULL;
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "mpirun: rank %d sent a message without its tag (every rank must "
                  "run the same spsim build)", k);
      return FALSE;
    }
    if (bp[0] == TAG_FAILED) {
      (*n_failed)++;
      if (k > 0 && *failed_rank < 0) {
        *failed_rank = k;
        *failed = g_strndup((const char *)bp + TAG_SIZE, bl - TAG_SIZE);
      }
    }
    g_ptr_array_add(a, g_bytes_new_from_bytes(b, TAG_SIZE, bl - TAG_SIZE));
    g_bytes_unref(b);
  }
  *all = a;
  return TRUE;
}

static gboolean mpi_gather(void *user, GBytes *mine, GPtrArray **all, GError **err)
{
  spread_mpi *m = user;
  gsize len;
  const void *p = g_bytes_get_data(mine, &len);
  int32_t nf, fk;
  g_autofree char *why = NULL;
  if (!tagged_gather(m, TAG_DATA, p, len, all, &nf, &fk, &why, err)) return FALSE;
  if (fk >= 0) {
    /* a rank stopped before the what-if began (a file only some nodes have, say):
     * say why here, and stop the job */
    g_ptr_array_unref(*all);
    *all = NULL;
    m->broken = TRUE;
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d of the mpirun job: %s", fk, why);
    return FALSE;
  }
  return TRUE;
}

static gboolean mpi_bcast(void *user, GBytes **buf, GError **err)
{
  spread_mpi *m = user;
  if (m->broken) {
    /* a rank has left; the job stops when rank 0 has said why */
    g_set_error_literal(err, SP_ERROR, SP_ERROR_TRANSPORT, "mpirun: a rank stopped before the what-if began");
    return FALSE;
  }
  if (m->s.rank == 0) {
    gsize len;
    const void *p = g_bytes_get_data(*buf, &len);
    return request(m, OP_BCAST, p, len, err);
  }
  if (!request(m, OP_BCAST, "", 0, err)) return FALSE;
  return (*buf = answer(m, err)) != NULL;
}

static void mpi_failed(sp_whatif_spread *s, const char *message);
static void mpi_close(sp_whatif_spread *s, int rc);
static const sp_cli_spread_ops mpi_ops = { mpi_failed, mpi_close };

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
  m->ops = &mpi_ops;
  m->s = (sp_whatif_spread){ .rank = (int32_t)rank, .size = (int32_t)size, .gather = mpi_gather, .bcast = mpi_bcast, .user = m };
  m->to = m->from = -1;
  *out = &m->s;
  return TRUE;
}

static void mpi_failed(sp_whatif_spread *s, const char *message)
{
  spread_mpi *m = s->user;
  if (m->pid > 0) return; /* past its first exchange: sp_cli_spread_close stops the job */
  /* Failed before the first exchange: the other ranks most likely failed the same way
   * (same flags, same files), and rank 0 has said why. One gather holds every rank
   * until rank 0 has (no rank's exit stops rank 0 before its line is out) and tells
   * rank 0 whether the others failed too. */
  m->failing = TRUE;
  GPtrArray *all = NULL;
  int32_t nf = 0, fk;
  g_autofree char *why = NULL;
  GError *e = NULL;
  if (!tagged_gather(m, TAG_FAILED, message, strlen(message), &all, &nf, &fk, &why, &e)) {
    g_error_free(e);
    m->alone = TRUE; /* no MPI to end in order: stop the job */
    return;
  }
  if (all != NULL) g_ptr_array_unref(all);
  if (s->rank == 0 && nf < s->size) m->alone = TRUE; /* the others are past it, waiting for rank 0 */
}

static void mpi_close(sp_whatif_spread *s, int rc)
{
  spread_mpi *m = s->user;
  if (m->pid > 0) {
    /* all exchanges done, or every rank failed before the first: every rank finalizes;
     * else this rank's failure stops the job */
    uint32_t code = rc != 0 ? (uint32_t)rc : 1;
    gboolean end = !m->broken && ((s->finished && !m->failing) || (m->failing && !m->alone));
    if (end) request(m, OP_END, "", 0, NULL);
    else request(m, OP_ABORT, &code, sizeof code, NULL);
    close(m->to);
    int status;
    while (waitpid(m->pid, &status, 0) < 0 && errno == EINTR)
      ;
    close(m->from);
  }
  g_free(m);
}

/* Either transport: its state (s->user) starts with its operations. */
void sp_cli_spread_failed(sp_whatif_spread *s, const char *message)
{
  if (s != NULL) (*(const sp_cli_spread_ops *const *)s->user)->failed(s, message);
}

void sp_cli_spread_close(sp_whatif_spread *s, int rc)
{
  if (s != NULL) (*(const sp_cli_spread_ops *const *)s->user)->close(s, rc);
}
