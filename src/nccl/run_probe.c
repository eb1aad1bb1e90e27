/* spsim-run --probe: the figures of this machine that `spsim platform local` writes
 * into a platform. Every rank measures at the same time (ranks share the cores as
 * they do in a step): single-precision GEMM FLOP/s (OpenBLAS, one thread) per second
 * of wall-clock time and of processor time (their ratio: the share of a core the
 * ranks get), the attention kernel's FLOP/s forward and backward, the bandwidth of
 * the element-wise pass (the kernels of step_compute.c) and what a collective costs
 * between ranks that compute (sync_cost); then the GEMM table in processor time;
 * ranks 0 and 1 then measure MPI point-to-point latency (8-byte ping-pong) and
 * bandwidth (4 MiB ping-pong) while the others wait. Rank 0 prints one JSON object:
 * the medians over ranks of the compute figures, the table's rates at the median
 * share of a core, the MPI figures. */
#include "config.h"

#include <sched.h>

#include "run_priv.h"
#include "step_compute.h"

/* Shapes measured: the tiny model's MLP GEMM at 256 tokens (models/tiny.json: hidden
 * 256, SwiGLU up projection 2 x 1024) and one head of 64 over 256 tokens. */
#define PROBE_M 256
#define PROBE_N 2048
#define PROBE_K 256
#define PROBE_SEQ 256
#define PROBE_D 64
/* Seconds per measurement: long enough for a stable rate under the OS scheduler. */
#define PROBE_SECS 0.4
/* The figures every rank measures: GEMM, attention forward, memory, attention
 * backward, the synchronisation cost of a collective, the share of a core the GEMM
 * got (its rate per wall-clock second over its rate per second of processor time). */
#define NFIG 6
/* The GEMM table: every (m, n, k) of this grid, so that any shape from 32 to 8192 in
 * each dimension is within a factor of 2 of a row (sp_gemm_table_lookup's bound). */
static const int64_t grid[] = { 64, 256, 1024, 4096 };
/* Dimensions above this are measured at it: one core's OpenBLAS sgemm reaches its
 * asymptotic rate by 1024 in each dimension (measured with this probe: 1024^3 and
 * 1024 x 1024 x 4096 within 3 % on this machine), and a 4096^3 product would take
 * seconds. */
#define GRID_CAP 1024
/* Seconds of processor time per table shape (after one warm-up product). The table
 * is measured in processor time and scaled by the share of a core the ranks got
 * during the longer GEMM measurement (PROBE_SECS of wall-clock time): windows this
 * short in wall-clock time measured the OS's scheduling, not the shape (-np 4 on the
 * 2-core build machine at load average 10: rates from 4.7 to 26.8 GFLOP/s with no
 * order by shape, 256 x 1024 x 64 the slowest and 1024 x 64 x 256 the fastest). */
#define GRID_SECS 0.02
/* Ping-pong sizes and repetitions. */
#define PROBE_LAT_BYTES 8
#define PROBE_LAT_ITERS 200
#define PROBE_BW_BYTES (4u << 20)
#define PROBE_BW_ITERS 20

/* The synchronisation cost of a collective between computing ranks: rounds of one
 * GEMM piece (the tiny model's MLP down projection at 256 tokens, 256 x 256 x 1024: a
 * task between two of the step's collectives) followed, or not, by an 8-byte
 * all-reduce over all ranks, waited for as the step's executor waits (MPI_Test, then
 * sched_yield). A round with the all-reduce takes longer than one without by what a
 * collective costs once its ranks compute between collectives on shared cores: the
 * call itself and the wait for the slowest rank's piece, which the OS schedules
 * beside the other ranks and every other process of the machine. Blocks of each kind
 * alternate, SYNC_BLOCKS times SYNC_ROUNDS rounds, and the medians are compared. */
#define SYNC_M 256
#define SYNC_N 256
#define SYNC_K 1024
#define SYNC_ROUNDS 8
#define SYNC_BLOCKS 5

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Seconds of one ping-pong round trip of @p bytes between ranks 0 and 1. */
static double pingpong(int rank, char *buf, int bytes, int iters)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters && rank < 2; i++) {
    if (rank == 0) {
      MPI_Send(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(buf, bytes, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, bytes, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    }
  }
  double t = (MPI_Wtime() - t0) / iters;
  MPI_Barrier(MPI_COMM_WORLD);
  return t;
}

static double median_of(double *v, int n)
{
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds per round of SYNC_ROUNDS rounds, with the all-reduce or without. */
static double sync_block(sk_buffers *b, const sk_kernel *k, gboolean sync)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime(), x = 1, y = 0;
  for (int i = 0; i < SYNC_ROUNDS; i++) {
    sk_run(b, k, NULL, NULL);
    if (!sync) continue;
    MPI_Request q;
    int done = 0;
    MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
    for (MPI_Test(&q, &done, MPI_STATUS_IGNORE); !done; MPI_Test(&q, &done, MPI_STATUS_IGNORE))
      sched_yield();
  }
  return (MPI_Wtime() - t0) / SYNC_ROUNDS;
}

/* This rank's synchronisation cost per collective in seconds (>= 0). */
static double sync_cost(void)
{
  g_autoptr(GArray) ks = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
  sk_kernel k = { .kind = SK_GEMM, .m = SYNC_M, .n = SYNC_N, .k = SYNC_K };
  g_array_append_val(ks, k);
  sk_buffers *b = sk_buffers_new(ks);
  double with[SYNC_BLOCKS], without[SYNC_BLOCKS];
  sync_block(b, &k, TRUE); /* warm-up */
  for (int i = 0; i < SYNC_BLOCKS; i++) {
    without[i] = sync_block(b, &k, FALSE);
    with[i] = sync_block(b, &k, TRUE);
  }
  sk_buffers_free(b);
  return MAX(0.0, median_of(with, SYNC_BLOCKS) - median_of(without, SYNC_BLOCKS));
}

gboolean run_probe_json(runner *r, GString *out)
{
  world_info *w = r->w;
  if (!sk_available() || w->world < 2) {
    if (w->rank == 0)
      fprintf(stderr, "spsim-run: --probe: %s\n", w->world < 2 ? "needs at least 2 ranks (mpirun -np 2 or more)"
                      : "this spsim-run was built without OpenBLAS; install libopenblas-dev and reconfigure");
    return FALSE;
  }
  sk_init();
  barrier(r);
  double gemm_cpu = 0, gemm_wall = sk_measure_gemm(PROBE_M, PROBE_N, PROBE_K, PROBE_SECS, FALSE, &gemm_cpu);
  double mine[NFIG] = { gemm_wall,
                        sk_measure_attn(PROBE_SEQ, PROBE_D, FALSE, PROBE_SECS), sk_measure_membw(PROBE_SECS),
                        sk_measure_attn(PROBE_SEQ, PROBE_D, TRUE, PROBE_SECS), sync_cost(),
                        gemm_wall / MAX(gemm_cpu, 1.0) };
  g_autofree double *all = g_new0(double, NFIG * (gsize)w->world);
  MPI_Gather(mine, NFIG, MPI_DOUBLE, all, NFIG, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  /* the table: each capped shape measured once, on every rank at once */
  const int ng = (int)G_N_ELEMENTS(grid), nt = ng * ng * ng;
  double rate[64] = { 0 };
  for (int i = 0; i < nt; i++) {
    int64_t m = MIN(grid[i / (ng * ng)], GRID_CAP), n = MIN(grid[i / ng % ng], GRID_CAP), k = MIN(grid[i % ng], GRID_CAP);
    for (int j = 0; j < i && rate[i] == 0; j++)
      if (m == MIN(grid[j / (ng * ng)], GRID_CAP) && n == MIN(grid[j / ng % ng], GRID_CAP) &&
          k == MIN(grid[j % ng], GRID_CAP))
        rate[i] = rate[j];
    if (rate[i] == 0) (void)sk_measure_gemm(m, n, k, GRID_SECS, TRUE, &rate[i]);
  }
  g_autofree double *rates = g_new0(double, (gsize)nt * w->world);
  MPI_Gather(rate, nt, MPI_DOUBLE, rates, nt, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  g_autofree char *buf = g_malloc0(PROBE_BW_BYTES);
  double lat = pingpong(w->rank, buf, PROBE_LAT_BYTES, PROBE_LAT_ITERS) / 2;
  double bw_t = pingpong(w->rank, buf, PROBE_BW_BYTES, PROBE_BW_ITERS) / 2;
  if (w->rank == 0) {
    double med[NFIG];
    g_autofree double *col = g_new(double, w->world);
    for (int k = 0; k < NFIG; k++) {
      for (int i = 0; i < w->world; i++) col[i] = all[NFIG * i + k];
      qsort(col, (size_t)w->world, sizeof(double), cmp_double);
      med[k] = col[w->world / 2];
    }
    /* bandwidth of the large message after its share of latency */
    double bw = PROBE_BW_BYTES / MAX(bw_t - lat, 1e-9);
    g_string_append_printf(out, "{\"ranks\": %d, \"gemm_flops\": %.6e, \"attn_flops\": %.6e, \"attn_bwd_flops\": %.6e, "
           "\"mem_bw\": %.6e, \"mpi_latency_s\": %.6e, \"mpi_bw\": %.6e, \"sync_s\": %.6e, \"core_share\": %.6e, "
           "\"gemm_shape\": [%d, %d, %d], \"gemm_table\": [", w->world, med[0], med[1], med[3], med[2], lat, bw,
           med[4], med[5], PROBE_M, PROBE_N, PROBE_K);
    /* each shape's rate per second of processor time, over ranks, at the share of a
     * core the ranks got */
    double share = MIN(1.0, med[5]);
    for (int i = 0; i < nt; i++) {
      for (int q = 0; q < w->world; q++) col[q] = rates[(gsize)q * nt + i];
      qsort(col, (size_t)w->world, sizeof(double), cmp_double);
      g_string_append_printf(out, "%s[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %.6e]",
                             i ? ", " : "", grid[i / (ng * ng)], grid[i / ng % ng], grid[i % ng],
                             col[w->world / 2] * share);
    }
    g_string_append(out, "]}\n");
  }
  return TRUE;
}

int run_probe(runner *r)
{
  g_autoptr(GString) json = g_string_new(NULL);
  if (!run_probe_json(r, json))
    return EXIT_USAGE;
  fputs(json->str, stdout);
  fflush(stdout);
  return 0;
}
