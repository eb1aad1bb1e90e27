/* spsim-run: running this rank's case: buffers on the transport's device, one run,
 * the check against the reference, the verdicts gathered on rank 0; a single
 * collective, a graph operation, timed sizes, and the deadlock probe. */
#include "config.h"

#include "run_priv.h"

/* ------------------------------------------------------------ running one case */

/* Device copies of a case's buffers (CUDA transports) or the host ones. */
typedef struct {
  void *const *host;
  void **dev;
  guint nb;
} run_bufs;

static gboolean bufs_prepare(runner *r, const sp_case *c, run_bufs *b, GError **err)
{
  sp_program *p = sp_case_program(c, r->w->rank);
  b->host = sp_case_bufs(c, r->w->rank);
  b->dev = NULL;
  b->nb = p ? p->bufs->len : 0;
  if (r->cfg->transport == TR_MPI)
    return TRUE;
#ifdef SP_HAVE_CUDA
  g_autofree uint64_t *bytes = g_new0(uint64_t, b->nb + 1);
  for (guint i = 0; i < b->nb; i++)
    bytes[i] = g_array_index(p->bufs, sp_buffer, i).bytes;
  return sp_cuda_bufs_new(r->cuda, b->nb, bytes, b->host, &b->dev, err);
#else
  (void)err;
  return FALSE;
#endif
}

static void bufs_release(runner *r, run_bufs *b)
{
#ifdef SP_HAVE_CUDA
  if (b->dev)
    sp_cuda_bufs_free(r->cuda, b->nb, b->dev);
#else
  (void)r;
#endif
  b->dev = NULL;
}

/* Copy the out buffer back to host memory (CUDA transports). */
static gboolean bufs_fetch_out(runner *r, const sp_case *c, run_bufs *b, GError **err)
{
  if (b->dev == NULL || b->nb < 2 || sp_case_member(c, r->w->rank) < 0)
    return TRUE;
#ifdef SP_HAVE_CUDA
  return sp_cuda_download(r->cuda, b->host[1], b->dev[1], sp_case_out_bytes(c), err);
#else
  (void)err;
  return TRUE;
#endif
}

static double run_clock(runner *r)
{
#ifdef SP_HAVE_CUDA
  if (r->cuda)
    return sp_cuda_clock(r->cuda);
#else
  (void)r;
#endif
  return MPI_Wtime();
}

/* One execution of this rank's part of @p c (lowered program or native call). */
static gboolean run_once(runner *r, const sp_case *c, run_bufs *b, GError **err)
{
  int32_t rank = r->w->rank;
  void *const *bufs = b->dev ? (void *const *)b->dev : b->host;
  if (r->cfg->native) {
    if (sp_case_member(c, rank) < 0) /* no buffers; MPI/NCCL calls involve members only */
      return TRUE;
    const sp_coll_spec *spec = sp_case_spec(c);
    if (r->cfg->transport == TR_NCCL) {
#ifdef SP_HAVE_CUDA
      return sp_nccl_native_coll(r->cuda, spec, bufs ? bufs[0] : NULL, bufs ? bufs[1] : NULL, err);
#endif
    }
    if (r->cfg->transport != TR_MPI) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "--native runs MPI's collectives on --transport mpi or NCCL's on --transport nccl");
      return FALSE;
    }
    static char dummy[8];
    return sp_mpi_native_coll(spec, MPI_COMM_WORLD, bufs ? bufs[0] : dummy, bufs ? bufs[1] : dummy,
                              r->cfg->timeout, r->w->mpi_yield, err);
  }
  const sp_program *p = sp_case_program(c, rank);
  return sp_exec_run(p, &r->tr, bufs, NULL, err);
}

/* A transport failure ends the job: print, then MPI_Abort (the peers may be
 * blocked waiting for this rank). */
G_NORETURN void die_transport(world_info *w, GError *err)
{
  if (g_str_has_prefix(err->message, "rank "))
    fprintf(stderr, "spsim-run: %s; aborting the job\n", err->message);
  else
    fprintf(stderr, "spsim-run: rank %d: %s; aborting the job\n", w->rank, err->message);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, EXIT_TRANSPORT);
  exit(EXIT_TRANSPORT);
}

/* Native collectives reduce in their own order: compare with a tolerance. */
static gboolean check_tolerance(const sp_case *c, int32_t rank, const void *got, GError **err)
{
  const void *exp = sp_case_expected(c, rank);
  if (exp == NULL)
    return TRUE;
  const sp_coll_spec *spec = sp_case_spec(c);
  size_t es = sp_dtype_size(spec->dtype);
  uint64_t n = sp_case_out_bytes(c) / es;
  double rtol = spec->dtype == SP_F32 ? 1e-5 : 1e-2;
  for (uint64_t i = 0; i < n; i++) {
    const unsigned char *g = (const unsigned char *)got + i * es;
    const unsigned char *e = (const unsigned char *)exp + i * es;
    gboolean same;
    double a = 0, x = 0;
    if (spec->dtype == SP_F32 || spec->dtype == SP_F16 || spec->dtype == SP_BF16) {
      if (spec->dtype == SP_F32) {
        float fa, fx;
        memcpy(&fa, g, 4);
        memcpy(&fx, e, 4);
        a = fa;
        x = fx;
      } else {
        uint16_t ha, hx;
        memcpy(&ha, g, 2);
        memcpy(&hx, e, 2);
        a = spec->dtype == SP_F16 ? sp_f16_to_f32(ha) : sp_bf16_to_f32(ha);
        x = spec->dtype == SP_F16 ? sp_f16_to_f32(hx) : sp_bf16_to_f32(hx);
      }
      same = (isnan(a) && isnan(x)) || a == x || fabs(a - x) <= rtol * fmax(fabs(a), fabs(x)) + 1e-6;
    } else {
      same = memcmp(g, e, es) == 0;
    }
    if (!same) {
      g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                  "%s (native, %s): rank %d out element %" G_GUINT64_FORMAT " is %g, expected %g "
                  "(relative tolerance %g)",
                  sp_coll_name(spec->coll), sp_dtype_name(spec->dtype), rank, i, a, x, rtol);
      return FALSE;
    }
  }
  return TRUE;
}

/* Gather every rank's (member, ok, checksum) to rank 0, which prints the canonical
 * checksum lines of the members (with --checksum) and lists the failing members in
 * @p bad (rank 0 only; *nbad of them). Returns TRUE when no rank failed (the same
 * on every rank). */
gboolean gather_verdicts(runner *r, gboolean member, gboolean ok, uint64_t sum, GString *bad,
                                int *nbad)
{
  world_info *w = r->w;
  int32_t rank = w->rank;
  GError *err = NULL;
  uint64_t mine[3] = { (uint64_t)member, (uint64_t)ok, sum };
  g_autofree uint64_t *all = rank == 0 ? g_new0(uint64_t, 3 * (size_t)w->world) : NULL;
  MPI_Request req;
  if (!sp_mpi_check(MPI_Igather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req),
                    "MPI_Igather", rank, &err) ||
      !sp_mpi_wait_bounded(1, &req, r->cfg->timeout, w->mpi_yield, rank, "the checksums of the other ranks",
                           NULL, NULL, &err))
    die_transport(w, err);
  uint64_t failed = !ok;
  allreduce_max(w, &failed, 1, "the other ranks' verdicts");
  *nbad = 0;
  if (rank == 0) {
    if (r->cfg->checksum) {
      g_autofree int32_t *ranks = g_new(int32_t, w->world);
      g_autofree uint64_t *sums = g_new(uint64_t, w->world);
      size_t k = 0;
      for (int i = 0; i < w->world; i++)
        if (all[3 * i]) {
          ranks[k] = i;
          sums[k++] = all[3 * i + 2];
        }
      sp_checksum_print_lines(stdout, ranks, sums, k);
    }
    for (int i = 0; i < w->world; i++)
      if (all[3 * i] && !all[3 * i + 1]) {
        g_string_append_printf(bad, "%s%d", *nbad ? ", " : "", i);
        (*nbad)++;
      }
  }
  return failed == 0;
}

/* Check this rank's result, gather checksums to rank 0, print lines and verdict.
 * Returns the exit code (the same on every rank). */
static int report_case(runner *r, const sp_case *c, const run_bufs *b)
{
  world_info *w = r->w;
  int32_t rank = w->rank;
  GError *err = NULL;
  gboolean member = sp_case_member(c, rank) >= 0;
  gboolean ok = TRUE;
  if (member) {
    if (r->cfg->native)
      ok = check_tolerance(c, rank, b->host[1], &err);
    else
      ok = sp_case_check(c, NULL, NULL, &err);
  }
  if (!ok) {
    fprintf(stderr, "spsim-run: rank %d: FAIL: %s\n", rank, err->message);
    fflush(stderr);
    g_clear_error(&err);
  }
  GString *bad = g_string_new(NULL);
  int nbad = 0;
  gboolean failed = !gather_verdicts(r, member, ok, sp_case_checksum(c, rank), bad, &nbad);
  if (rank == 0) {
    const sp_coll_spec *spec = sp_case_spec(c);
    const char *algo = r->cfg->native ? "native" : sp_algo_name(sp_algo_choose(spec));
    if (nbad == 0)
      printf("PASS %s %s %s %s count=%" G_GUINT64_FORMAT " ranks=%d transport=%s\n",
             r->cfg->op->name, algo, sp_dtype_name(spec->dtype), sp_redop_name(spec->redop),
             spec->count, w->world, transport_names[r->cfg->transport]);
    else
      printf("FAIL %s %s %s %s count=%" G_GUINT64_FORMAT " ranks=%d transport=%s: rank%s %s "
             "differ%s from the reference\n",
             r->cfg->op->name, algo, sp_dtype_name(spec->dtype), sp_redop_name(spec->redop),
             spec->count, w->world, transport_names[r->cfg->transport], nbad > 1 ? "s" : "",
             bad->str, nbad > 1 ? "" : "s");
    fflush(stdout);
  }
  g_string_free(bad, TRUE);
  return failed ? EXIT_MISMATCH : 0;
}

/* The per-rank count of a single run, as `spsim verify`: --size / element size,
 * --count, or 1024 (all-gather, reduce-scatter, all-to-all: 1024 / n, at least 1). */
static uint64_t single_count(const run_config *cfg, int32_t world)
{
  if (cfg->size_bytes)
    return cfg->size_bytes / sp_dtype_size(cfg->dtype);
  if (cfg->count)
    return cfg->count;
  int32_t n = cfg->op->coll == SP_COLL_SEND_RECV ? 2 : world;
  switch (cfg->op->coll) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return MAX(1, DEFAULT_COUNT / (uint64_t)n);
  default: return DEFAULT_COUNT;
  }
}

int run_single(runner *r)
{
  world_info *w = r->w;
  GError *err = NULL;
  sp_case *c = r->cfg->op->build(r->cfg, single_count(r->cfg, w->world), w->world, w->rank, &err);
  run_bufs b = { 0 };
  if (c && !bufs_prepare(r, c, &b, &err)) {
    sp_case_free(c);
    c = NULL;
  }
  /* lowering errors are the same on every rank: rank 0 alone explains them */
  if (err && w->rank != 0 && err->domain == SP_ERROR && err->code != SP_ERROR_TRANSPORT)
    g_clear_error(&err), err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "(see rank 0)");
  /* 2: a device or transport failure (exit 4), 1: bad input (exit 2) */
  uint64_t failed = err == NULL ? 0 : err->domain == SP_ERROR && err->code == SP_ERROR_TRANSPORT ? 2 : 1;
  allreduce_max(w, &failed, 1, "the other ranks to build their programs");
  if (failed) {
    if (err && (w->rank == 0 || strcmp(err->message, "(see rank 0)") != 0))
      fprintf(stderr, "spsim-run: %s\n", err->message);
    g_clear_error(&err);
    bufs_release(r, &b);
    sp_case_free(c);
    return failed == 2 ? EXIT_TRANSPORT : EXIT_USAGE;
  }
  if (r->cfg->debug_die_rank == w->rank) {
    fprintf(stderr, "spsim-run: rank %d: exiting with status %d before communicating "
            "(--debug-die-rank)\n", w->rank, EXIT_DIED);
    fflush(stderr);
    exit(EXIT_DIED);
  }
  if (r->cfg->debug_hang_rank == w->rank) { /* alive, never communicating: the others' bounds */
    fprintf(stderr, "spsim-run: rank %d: hanging before communicating (--debug-hang-rank)\n", w->rank);
    fflush(stderr);
    for (;;)
      g_usleep(G_USEC_PER_SEC);
  }
  if (!run_once(r, c, &b, &err) || !bufs_fetch_out(r, c, &b, &err))
    die_transport(w, err);
  sp_mpi_native_disarm();
  if (r->cfg->debug_corrupt_rank == w->rank && sp_case_member(c, w->rank) >= 0 &&
      sp_case_out_bytes(c) > 0)
    ((unsigned char *)b.host[1])[sp_case_out_bytes(c) - 1] ^= 1; /* a wrong result */
  int rc = report_case(r, c, &b);
  bufs_release(r, &b);
  sp_case_free(c);
  return rc;
}

/* The group size `spsim verify --op` uses for a graph operation on @p world ranks:
 * the largest divisor of the world not above 64. */
static int32_t graph_group(int32_t world)
{
  int32_t group = 1;
  for (int32_t d = 1; d <= 64 && d <= world; d++)
    if (world % d == 0)
      group = d;
  return group;
}

#ifdef SP_HAVE_CUDA
/* COMPUTE steps of a graph on a CUDA transport: the model kernels (attention,
 * matmuls) exist on the host only, so the rank's buffers go to the host, the
 * host kernel runs, and they come back. Messages and local steps (copies,
 * reductions, padding) stay on the device. */
typedef struct {
  sp_cuda_ctx *cuda;
  sp_graph_case *c;
  void *const *host;
  const uint64_t *bytes;
  guint nb;
} staged_compute;

static gboolean stage(staged_compute *sc, void *const *dev, gboolean down, GError **err)
{
  for (guint i = 0; i < sc->nb; i++)
    if (sc->host[i] && sc->bytes[i] &&
        !(down ? sp_cuda_download(sc->cuda, sc->host[i], dev[i], sc->bytes[i], err)
               : sp_cuda_upload(sc->cuda, dev[i], sc->host[i], sc->bytes[i], err)))
      return FALSE;
  return TRUE;
}

static gboolean compute_staged(void *ud, int32_t rank, const sp_step *s, void *const *dev,
                               GError **err)
{
  staged_compute *sc = ud;
  return stage(sc, dev, TRUE, err) && sp_graph_case_compute(sc->c, rank, s, sc->host, err) &&
         stage(sc, dev, FALSE, err);
}
#endif

/* Run this rank's program of a graph case; its outputs end in the host buffers. */
static gboolean run_graph_program(runner *r, sp_graph_case *c, const sp_program *p,
                                  void *const *host, GError **err)
{
  if (r->cfg->transport == TR_MPI)
    return sp_exec_run_compute(p, &r->tr, host, NULL, sp_graph_case_compute, c, err);
#ifdef SP_HAVE_CUDA
  guint nb = p->bufs->len;
  g_autofree uint64_t *bytes = g_new0(uint64_t, nb + 1);
  for (guint i = 0; i < nb; i++)
    bytes[i] = host[i] ? g_array_index(p->bufs, sp_buffer, i).bytes : 0;
  void **dev = NULL;
  if (!sp_cuda_bufs_new(r->cuda, nb, bytes, host, &dev, err))
    return FALSE;
  staged_compute sc = { r->cuda, c, host, bytes, nb };
  gboolean ok = sp_exec_run_compute(p, &r->tr, dev, NULL, compute_staged, &sc, err) &&
                stage(&sc, dev, TRUE, err);
  sp_cuda_bufs_free(r->cuda, nb, dev);
  return ok;
#else
  g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "this spsim-run was built without CUDA");
  return FALSE;
#endif
}

/* A graph operation (sp_ops_verify_table): every process builds the whole case
 * deterministically (world = MPI size, the groups of `spsim verify --op`), runs
 * its own rank's lowered program over the chosen transport with the case's data
 * kernels on COMPUTE steps, and judges its own rank against the reference. */
int run_graph(runner *r)
{
  world_info *w = r->w;
  const run_config *cfg = r->cfg;
  GError *err = NULL;
  const int32_t group = graph_group(w->world);
  sp_graph_case *c = sp_ops_verify_case_new_opts(cfg->graph->name, w->world, group, cfg->op_opts, &err);
  /* building is deterministic, so errors are the same on every rank: rank 0 explains */
  uint64_t failed = c == NULL;
  allreduce_max(w, &failed, 1, "the other ranks to build their programs");
  if (failed) {
    if (err && w->rank == 0)
      fprintf(stderr, "spsim-run: %s\n", err->message);
    else if (err == NULL && c == NULL)
      fprintf(stderr, "spsim-run: rank %d: could not build '%s'\n", w->rank, cfg->graph->name);
    g_clear_error(&err);
    sp_graph_case_free(c);
    return EXIT_USAGE;
  }
  if (cfg->debug_die_rank == w->rank) {
    fprintf(stderr, "spsim-run: rank %d: exiting with status %d before communicating "
            "(--debug-die-rank)\n", w->rank, EXIT_DIED);
    fflush(stderr);
    exit(EXIT_DIED);
  }
  const sp_program *p = sp_graph_case_progs(c)[w->rank];
  void *const *bufs = sp_graph_case_bufs(c)[w->rank];
  if (!run_graph_program(r, c, p, bufs, &err))
    die_transport(w, err);
  if (cfg->debug_corrupt_rank == w->rank)
    sp_graph_case_corrupt(c, w->rank); /* a wrong result (no-op on a rank without outputs) */
  gboolean member = sp_graph_case_has_outputs(c, w->rank);
  gboolean ok = sp_graph_case_check_rank(c, w->rank, NULL, &err);
  if (!ok) {
    if (err && g_str_has_prefix(err->message, "rank "))
      fprintf(stderr, "spsim-run: FAIL: %s\n", err->message);
    else
      fprintf(stderr, "spsim-run: rank %d: FAIL: %s\n", w->rank, err ? err->message : "?");
    fflush(stderr);
    g_clear_error(&err);
  }
  GString *bad = g_string_new(NULL);
  int nbad = 0;
  gboolean pass = gather_verdicts(r, member, ok, sp_graph_case_checksum(c, w->rank), bad, &nbad);
  if (w->rank == 0) {
    if (pass)
      printf("PASS %s graph bytes=%" G_GUINT64_FORMAT " ranks=%d group=%d transport=%s\n",
             cfg->graph->name, sp_graph_case_bytes(c), w->world, group, transport_names[cfg->transport]);
    else
      printf("FAIL %s graph bytes=%" G_GUINT64_FORMAT " ranks=%d group=%d transport=%s: rank%s %s "
             "differ%s from the reference\n",
             cfg->graph->name, sp_graph_case_bytes(c), w->world, group, transport_names[cfg->transport],
             nbad > 1 ? "s" : "", bad->str, nbad > 1 ? "" : "s");
    fflush(stdout);
  }
  g_string_free(bad, TRUE);
  sp_graph_case_free(c);
  return pass ? 0 : EXIT_MISMATCH;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Barrier bounded by the timeout. */
void barrier(runner *r)
{
  MPI_Request req;
  GError *err = NULL;
  if (!sp_mpi_check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier", r->w->rank, &err) ||
      !sp_mpi_wait_bounded(1, &req, r->cfg->timeout, r->w->mpi_yield, r->w->rank,
                           "the other ranks at a barrier", NULL, NULL, &err))
    die_transport(r->w, err);
}

int run_timed(runner *r)
{
  world_info *w = r->w;
  const run_config *cfg = r->cfg;
  sp_coll coll = cfg->op->coll;
  int32_t n = coll == SP_COLL_SEND_RECV ? 2 : w->world;
  size_t es = sp_dtype_size(cfg->dtype);
  double factor = sp_coll_busbw_factor(coll, n);
  int rc = 0;
  if (w->rank == 0) {
    printf("# spsim-run (measured): %s, %d ranks, transport %s%s, algo %s, dtype %s, "
           "%d iterations after %d warm-up (median per rank, max over ranks)\n",
           cfg->op->name, w->world, transport_names[cfg->transport],
           cfg->native ? " (native collective)" : "", cfg->native ? "native" : sp_algo_name(cfg->algo),
           sp_dtype_name(cfg->dtype), cfg->iters, cfg->warmup);
    if (coll == SP_COLL_SEND_RECV)
      printf("# send-recv: rank 0 sends to rank %d\n", w->world - 1);
    printf("#\n# %12s %12s %6s %6s %12s %8s %8s\n", "size", "count", "type", "algo", "time",
           "algbw", "busbw");
    printf("# %12s %12s %6s %6s %12s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
           "(GB/s)");
    fflush(stdout);
  }
  double *t = g_new(double, cfg->iters);
  for (uint64_t s = cfg->lo; s <= cfg->hi && rc == 0; s *= 2) {
    uint64_t count = count_for(coll, s, n, es);
    if (count > 0) {
      GError *err = NULL;
      sp_case *c = cfg->op->build(cfg, count, w->world, w->rank, &err);
      run_bufs b = { 0 };
      if (c && !bufs_prepare(r, c, &b, &err)) {
        sp_case_free(c);
        c = NULL;
      }
      if (!agree_ok(w, err, "the other ranks to build their programs")) {
        g_clear_error(&err);
        sp_case_free(c);
        rc = EXIT_USAGE;
        break;
      }
      /* first run: checked, so a timing never comes from a wrong schedule */
      if (!run_once(r, c, &b, &err) || !bufs_fetch_out(r, c, &b, &err))
        die_transport(w, err);
      sp_mpi_native_disarm();
      GError *chk = NULL;
      if (sp_case_member(c, w->rank) >= 0) {
        if (cfg->native)
          check_tolerance(c, w->rank, b.host[1], &chk);
        else
          sp_case_check(c, NULL, NULL, &chk);
      }
      if (!agree_ok(w, chk, "the other ranks' verdicts")) {
        g_clear_error(&chk);
        bufs_release(r, &b);
        sp_case_free(c);
        rc = EXIT_MISMATCH;
        break;
      }
      for (int i = 0; i < cfg->warmup + cfg->iters; i++) {
        barrier(r);
        double t0 = run_clock(r);
        if (!run_once(r, c, &b, &err))
          die_transport(w, err);
        double t1 = run_clock(r);
        if (i >= cfg->warmup)
          t[i - cfg->warmup] = t1 - t0;
      }
      sp_mpi_native_disarm();
      qsort(t, (size_t)cfg->iters, sizeof(double), cmp_double);
      double med = cfg->iters % 2 ? t[cfg->iters / 2]
                                  : 0.5 * (t[cfg->iters / 2 - 1] + t[cfg->iters / 2]);
      /* max over ranks of the medians (as an integer number of ns, for MAX) */
      uint64_t ns = (uint64_t)llround(med * 1e9);
      allreduce_max(w, &ns, 1, "the other ranks' timings");
      if (w->rank == 0) {
        double secs = (double)ns * 1e-9;
        uint64_t bytes = bytes_for(coll, count, n, es);
        double algbw = secs > 0 ? (double)bytes / secs / 1e9 : 0;
        printf("  %12" G_GUINT64_FORMAT " %12" G_GUINT64_FORMAT " %6s %6s %12.2f %8.2f %8.2f\n",
               bytes, count, sp_dtype_name(cfg->dtype),
               cfg->native ? "native" : sp_algo_name(sp_algo_choose(sp_case_spec(c))), secs * 1e6,
               algbw, algbw * factor);
        fflush(stdout);
      }
      bufs_release(r, &b);
      sp_case_free(c);
    }
    if (s > G_MAXUINT64 / 2)
      break;
  }
  g_free(t);
  return rc;
}

/* --debug-deadlock: every rank waits for a message its neighbour never sends. */
int run_deadlock(runner *r)
{
  world_info *w = r->w;
  if (w->world < 2) {
    if (w->rank == 0)
      fprintf(stderr, "spsim-run: --debug-deadlock needs at least 2 ranks\n");
    return EXIT_USAGE;
  }
  sp_program *p = sp_program_new(w->rank);
  uint32_t buf = sp_program_add_buffer(p, 8, "in");
  sp_step s = { .kind = SP_STEP_RECV, .peer = (w->rank + 1) % w->world, .tag = 7,
                .dst = { buf, 0 }, .bytes = 8 };
  sp_program_append(p, &s);
  sp_step wt = { .kind = SP_STEP_WAIT };
  sp_program_append(p, &wt);
  char data[8] = { 0 };
  void *host[1] = { data };
  void **bufs = host;
  GError *err = NULL;
#ifdef SP_HAVE_CUDA
  const uint64_t bytes[1] = { sizeof data };
  if (r->cuda && !sp_cuda_bufs_new(r->cuda, 1, bytes, host, &bufs, &err))
    die_transport(w, err);
#endif
  if (!sp_exec_run(p, &r->tr, bufs, NULL, &err))
    die_transport(w, err);
#ifdef SP_HAVE_CUDA
  if (r->cuda)
    sp_cuda_bufs_free(r->cuda, 1, bufs);
#endif
  sp_program_free(p);
  return 0;
}

