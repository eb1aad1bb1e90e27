/* spsim-run: every rank agrees on the flags before anything runs, and on each stage's
 * outcome, with bounded collectives over MPI_COMM_WORLD. */
#include "config.h"

#include "run_priv.h"

/* ------------------------------------------------------------ agreement across ranks */

typedef struct {
  const char *flag;
  char *value;
} field;

#define N_FIELDS 31

/* The configuration as (flag, canonical value) pairs; every rank must agree. */
static void config_fields(const run_config *c, field *f)
{
  int i = 0;
#define F(name, ...) (f[i].flag = name, f[i].value = g_strdup_printf(__VA_ARGS__), i++)
  F("--op", "%s", c->graph ? c->graph->name : c->op ? c->op->name : "");
  F("--dtype", "%s", sp_dtype_name(c->dtype));
  F("--algo", "%s", sp_algo_name(c->algo));
  F("--redop", "%s", sp_redop_name(c->redop));
  F("--transport", "%s", transport_names[c->transport]);
  F("--count", "%" G_GUINT64_FORMAT, c->count);
  F("--size", "%" G_GUINT64_FORMAT, c->size_bytes);
  F("--ranks", "%d", c->ranks);
  F("--root", "%d", c->root);
  F("--chunk", "%" G_GUINT64_FORMAT, c->chunk);
  F("--checksum", "%d", c->checksum);
  F("--time", "%d", c->time);
  F("--native", "%d", c->native);
  F("--iters", "%d/%d", c->iters, c->warmup);
  F("--sizes", "%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT, c->lo, c->hi);
  F("--timeout", "%.17g", c->timeout);
  F("--debug-deadlock", "%d", c->debug_deadlock);
  F("--step", "%d", c->step);
  F("--model", "%s", c->model ? c->model : "");
  F("--layout", "%s", c->layout ? c->layout : "");
  F("--seq", "%" G_GINT64_FORMAT, c->seq);
  F("--global-batch", "%" G_GINT64_FORMAT, c->global_batch);
  F("--micro-batch", "%d", c->micro_batch);
  F("--gpus-per-node", "%d", c->gpus_per_node);
  F("--world", "%d", c->world);
  F("--dry-compute", "%d", c->dry_compute);
  F("--device", "%s", c->device_cuda ? "cuda" : "cpu");
  F("--trace", "%s", c->trace ? c->trace : "");
  F("--compare", "%d", c->compare);
  F("--platform", "%s", c->platform ? c->platform : "");
  F("--probe", "%d", c->probe);
#undef F
  g_assert(i == N_FIELDS);
}


/* Allreduce(MAX) of @p n values, bounded by the timeout; a failure aborts the job. */
void allreduce_max(world_info *w, uint64_t *vals, int n, const char *what)
{
  g_autofree uint64_t *out = g_new(uint64_t, n);
  MPI_Request req;
  GError *err = NULL;
  if (!sp_mpi_check(MPI_Iallreduce(vals, out, n, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &req),
                    "MPI_Iallreduce", w->rank, &err) ||
      !sp_mpi_wait_bounded(1, &req, w->timeout, w->mpi_yield, w->rank, what, NULL, NULL, &err)) {
    fprintf(stderr, "spsim-run: %s\n", err->message);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, EXIT_TRANSPORT);
  }
  memcpy(vals, out, sizeof(uint64_t) * (size_t)n);
}

/* Every rank says whether it is fine; returns TRUE when all are. A failing rank
 * prints its own message, prefixed by its rank. */
gboolean agree_ok(world_info *w, GError *local_err, const char *stage)
{
  uint64_t failed = local_err != NULL;
  if (local_err && g_str_has_prefix(local_err->message, "rank ")) {
    fprintf(stderr, "spsim-run: %s\n", local_err->message);
    fflush(stderr);
  } else if (local_err) {
    fprintf(stderr, "spsim-run: rank %d: %s\n", w->rank, local_err->message);
    fflush(stderr);
  }
  allreduce_max(w, &failed, 1, stage);
  return failed == 0;
}

/* Compare the parsed flags of every rank; FALSE (and rank 0 explains) when they differ. */
gboolean agree_flags(world_info *w, const run_config *cfg, GError *parse_err)
{
  field f[N_FIELDS];
  config_fields(cfg, f);
  uint64_t vals[2 * N_FIELDS + 2];
  for (int i = 0; i < N_FIELDS; i++) {
    uint64_t h = sp_checksum(0, f[i].value, strlen(f[i].value));
    vals[i] = h;
    vals[N_FIELDS + i] = ~h; /* max of ~h = ~(min of h) */
  }
  vals[2 * N_FIELDS] = parse_err != NULL;                        /* someone failed to parse */
  vals[2 * N_FIELDS + 1] = parse_err != NULL && w->rank == 0;    /* rank 0 did */
  allreduce_max(w, vals, 2 * N_FIELDS + 2, "the other ranks' flags");
  gboolean ok = TRUE;
  if (vals[2 * N_FIELDS]) {
    /* flags are normally the same everywhere: rank 0 speaks for all; a rank
     * failing alone speaks for itself */
    if (parse_err && w->rank == 0)
      fprintf(stderr, "spsim-run: %s\n", parse_err->message);
    else if (parse_err && !vals[2 * N_FIELDS + 1])
      fprintf(stderr, "spsim-run: rank %d: %s\n", w->rank, parse_err->message);
    ok = FALSE;
  } else {
    GString *diff = g_string_new(NULL);
    int first = -1;
    for (int i = 0; i < N_FIELDS; i++)
      if (vals[i] != ~vals[N_FIELDS + i]) {
        g_string_append_printf(diff, "%s%s", diff->len ? ", " : "", f[i].flag);
        if (first < 0)
          first = i;
      }
    if (first >= 0) {
      if (w->rank == 0)
        fprintf(stderr,
                "spsim-run: ranks disagree on flags (%s differ%s between ranks; rank 0 has %s %s); "
                "launch every rank with the same arguments\n",
                diff->str, strchr(diff->str, ',') ? "" : "s", f[first].flag, f[first].value);
      ok = FALSE;
    }
    g_string_free(diff, TRUE);
  }
  for (int i = 0; i < N_FIELDS; i++)
    g_free(f[i].value);
  fflush(stderr);
  return ok;
}

