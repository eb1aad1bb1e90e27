/* spsim-run --step: a training step under mpirun. Every rank builds the step graph
 * the what-if builds for the layout on the launched GPUs, reduces it as the what-if's
 * --verify does (sp_step_replay_reduce), builds its data-mode replay
 * (spsim/step_replay.h) and runs its own local rank's program over the MPI host
 * transport; each rank checks its own outputs, rank 0 prints the verdict, the counts
 * of calls and the replay's wall time (max over ranks). Then, unless --dry-compute,
 * every rank runs the unreduced step graph with compute (step_exec.c): rank 0 prints
 * the measured step time and its busy and exposed time per kind, writes --trace and
 * runs --compare (run_compare.c). */
#include "config.h"

#include "run_priv.h"
#include "spsim/kernel_model.h"
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/step.h"
#include "spsim/step_replay.h"
#include "spsim/stepgraph.h"
#include "step_compute.h"
#include "step_exec.h"

/* Elements per block of each call, as the what-if's --verify replays a step. */
#define STEP_ELEMS 16

/* Built-in models: the source tree's and the installed ones (spsim/model.h). */
static char **model_dirs(void)
{
#ifndef SP_SRC_MODELS_DIR
#define SP_SRC_MODELS_DIR NULL
#endif
#ifndef SP_MODELS_DIR
#define SP_MODELS_DIR NULL
#endif
  return sp_model_search_dirs(SP_SRC_MODELS_DIR, SP_MODELS_DIR);
}

/* What every rank builds, the same everywhere. */
typedef struct {
  sp_model *model;      /* as loaded */
  sp_model reduced;     /* shares model's strings */
  sp_layout layout;     /* checked on the world */
  int32_t gpn;
  sp_stepgraph *graph;  /* of the reduced step */
  sp_step_replay *replay;
} step_case;

static void step_case_clear(step_case *s)
{
  sp_step_replay_free(s->replay);
  sp_stepgraph_free(s->graph);
  sp_model_free(s->model);
}

static gboolean step_case_build(const run_config *cfg, int32_t world, step_case *s, GError **err)
{
  g_auto(GStrv) dirs = model_dirs();
  s->model = sp_model_find(cfg->model, (const char *const *)dirs, err);
  if (s->model == NULL) {
    g_prefix_error(err, "--model: ");
    return FALSE;
  }
  s->gpn = cfg->gpus_per_node ? MIN(cfg->gpus_per_node, world) : world <= 8 ? world : 8;
  if (!sp_layout_parse(cfg->layout, &s->layout, err)) {
    g_prefix_error(err, "--layout: ");
    return FALSE;
  }
  sp_layout_ctx lctx = { .model = s->model, .world = world, .gpus_per_node = s->gpn, .seq = cfg->seq,
                         .global_batch = cfg->global_batch, .mb = cfg->micro_batch };
  if (sp_layout_check(&s->layout, &lctx, err) != SP_SKIP_NONE) {
    g_prefix_error(err, "--layout %s on %d GPUs: ", cfg->layout, world);
    return FALSE;
  }
  sp_step_ctx c = { .model = s->model, .seq = cfg->seq, .global_batch = cfg->global_batch, .world = world,
                    .gpus_per_node = s->gpn };
  sp_step_hw_init(&c.hw);
  sp_step_ctx rc;
  sp_layout rl;
  if (!sp_step_replay_reduce(&c, &s->layout, &s->reduced, &rc, &rl, err))
    return FALSE;
  s->graph = sp_stepgraph_build(&rc, &rl, SP_SCHED_1F1B, err);
  if (s->graph == NULL)
    return FALSE;
  s->replay = sp_step_replay_new(s->graph, world, s->gpn, STEP_ELEMS, err);
  return s->replay != NULL;
}

/* Bytes of memory available on this machine: MemAvailable of /proc/meminfo (0: unknown). */
static double mem_available(const run_config *cfg)
{
  if (cfg->debug_mem_avail > 0) return cfg->debug_mem_avail;
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL)) return 0;
  const char *p = strstr(text, "MemAvailable:");
  if (p == NULL) return 0;
  return g_ascii_strtod(p + strlen("MemAvailable:"), NULL) * 1024.0; /* kB */
}

/* The step at the model's real sizes: its graph and this rank's kernels. */
typedef struct {
  sp_stepgraph *graph;
  GArray *kernels;
  uint32_t *koff;
} full_case;

static void full_case_clear(full_case *f)
{
  sp_stepgraph_free(f->graph);
  if (f->kernels) g_array_free(f->kernels, TRUE);
  g_free(f->koff);
}

static gboolean full_case_build(const run_config *cfg, const step_case *s, int32_t world, int rank, full_case *f,
                                GError **err)
{
  sp_step_ctx c = { .model = s->model, .seq = cfg->seq, .global_batch = cfg->global_batch, .world = world,
                    .gpus_per_node = s->gpn };
  sp_step_hw_init(&c.hw);
  f->graph = sp_stepgraph_build(&c, &s->layout, SP_SCHED_1F1B, err);
  if (f->graph == NULL) return FALSE;
  f->kernels = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
  return sk_plan(f->graph, &c, &s->layout, rank / f->graph->ranks_per_stage, f->kernels, &f->koff, err);
}

/* Refuse before allocating: the ranks of this machine together against MemAvailable. */
static gboolean fits_memory(runner *r, const full_case *f, GError **err)
{
  world_info *w = r->w;
  uint64_t need = (uint64_t)step_exec_bytes(f->graph, w->rank / f->graph->ranks_per_stage, f->kernels);
  allreduce_max(w, &need, 1, "the other ranks' memory needs");
  const char *ls = g_getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int local = ls ? MAX(1, atoi(ls)) : w->world;
  double want = (double)need * local, avail = mem_available(r->cfg);
  if (avail > 0 && want > avail) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "model too big for memory: the step needs %.2f GiB per rank, %.2f GiB for the %d ranks of this "
                "machine, but only %.2f GiB are available (MemAvailable); use a smaller --model, --seq or "
                "--micro-batch, fewer ranks per machine, or --dry-compute", (double)need / 1073741824.0,
                want / 1073741824.0, local, avail / 1073741824.0);
    return FALSE;
  }
  return TRUE;
}

/* Rank 0: the measured step, per kind. */
static void print_measured(const sp_stepgraph *g, const double *st, const double *en, double step_s, double *busy,
                           double *exposed)
{
  sp_stepgraph_breakdown b;
  sp_stepgraph_breakdown_of(g, st, en, &b);
  printf("measured: step %.6f s (last task end over ranks); stage %d's streams (busiest compute):\n", step_s, b.stage);
  printf("  %-8s %10s %10s\n", "kind", "busy s", "exposed s");
  printf("  %-8s %10.6f %10s\n", "compute", b.compute, "-");
  busy[0] = b.compute;
  exposed[0] = b.compute;
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    printf("  %-8s %10.6f %10.6f\n", sp_comm_kind_name(k), b.comm[k], b.exposed[k]);
    busy[k + 1] = b.comm[k];
    exposed[k + 1] = b.exposed[k];
  }
  printf("  %-8s %10s %10.6f\n", "idle", "-", b.idle);
  exposed[SP_COMM_KIND_COUNT + 1] = b.idle;
}

/* --device cuda: rank 0's GEMMs and element-wise passes as the kernel model prices them
 * on this GPU, beside what they took. */
static void print_kernel_model(const char *gpu, const GArray *kernels, const double *kind_s)
{
  sp_kernel_gpu g;
  if (!sp_kernel_gpu_for_device(gpu, &g)) {
    printf("measured: no kernel model for the GPU '%s' (H100, H200, A100 and B200 have one)\n", gpu);
    return;
  }
  double gemm = 0, elem = 0;
  for (guint i = 0; i < kernels->len; i++) {
    const sk_kernel *k = &g_array_index(kernels, sk_kernel, i);
    double t = 0;
    if (k->kind == SK_GEMM && sp_kernel_gemm_time(&g, 1, k->m, k->n, k->k, 2, &t, NULL)) gemm += t;
    else if (k->kind == SK_ELEM) elem += sp_kernel_elementwise_time(&g, k->bytes);
  }
  printf("measured: on %s the kernel model prices rank 0's GEMMs (BF16) at %.6f s (%+.1f %% of the measured) and "
         "its element-wise passes at %.6f s (%+.1f %%); its attention runs as blocks of GEMMs, not a fused "
         "kernel, so it is not compared\n", gpu, gemm, kind_s[SK_GEMM] > 0 ? 100 * (gemm / kind_s[SK_GEMM] - 1) : 0.0,
         elem, kind_s[SK_ELEM] > 0 ? 100 * (elem / kind_s[SK_ELEM] - 1) : 0.0);
}

int run_step(runner *r)
{
  world_info *w = r->w;
  const run_config *cfg = r->cfg;
  GError *err = NULL;
  step_case s = { 0 };
  full_case f = { 0 };
  const gboolean compute = !cfg->dry_compute;
  if (compute) sk_init();
  const int32_t world = cfg->world ? cfg->world : w->world; /* GPUs of the layout */
  gboolean built = step_case_build(cfg, world, &s, &err);
  if (built && compute && cfg->device_cuda && !sk_gpu_available())
    err = g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED, "--device cuda: this spsim-run was built without CUDA and "
                      "cuBLAS (configure --with-cuda=DIR, with libcublas); use --device cpu");
  else if (built && compute && !cfg->device_cuda && !sk_available())
    err = g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED, "--step: this spsim-run was built without OpenBLAS and "
                      "cannot execute compute; install libopenblas-dev and reconfigure, or use --dry-compute");
  else if (built && compute && s.model->window > 0 && sp_model_attn_causal_fraction(s.model, cfg->seq) < 1.0)
    /* the host and cuBLAS attention kernels score the whole causal prefix */
    err = g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED, "--step: model '%s' has sliding-window layers "
                      "(sliding_window %" G_GINT64_FORMAT " < --seq %" G_GINT64_FORMAT "), which the what-if prices "
                      "and spsim-run's attention kernels do not run; use --dry-compute, or --seq %" G_GINT64_FORMAT
                      " or less", s.model->name, s.model->window, (int64_t)cfg->seq, s.model->window);
  else if (built && compute && world != w->world)
    err = g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED, "--step runs the step with compute on every GPU of the "
                      "layout: --world %d needs mpirun -np %d (or use --dry-compute for the reduced replay on "
                      "fewer ranks)", world, world);
  else if (built && compute && !full_case_build(cfg, &s, world, w->rank, &f, &err))
    g_prefix_error(&err, "--step (the step with compute): ");
  built = built && err == NULL;
  /* building is deterministic, so errors are mostly the same on every rank: rank 0
   * explains, and a rank whose stage fails alone explains its own */
  uint64_t failed[2] = { !built, w->rank == 0 && !built };
  allreduce_max(w, failed, 2, "the other ranks to build the step");
  if (failed[0]) {
    if (err && w->rank == 0)
      fprintf(stderr, "spsim-run: %s\n", err->message);
    else if (err && !failed[1])
      fprintf(stderr, "spsim-run: rank %d: %s\n", w->rank, err->message);
    else if (err == NULL)
      fprintf(stderr, "spsim-run: rank %d: could not build the step\n", w->rank);
    g_clear_error(&err);
    full_case_clear(&f);
    step_case_clear(&s);
    return EXIT_USAGE;
  }
  if (compute && !fits_memory(r, &f, &err)) {
    if (w->rank == 0) fprintf(stderr, "spsim-run: %s\n", err->message);
    g_clear_error(&err);
    full_case_clear(&f);
    step_case_clear(&s);
    return EXIT_USAGE;
  }
  g_autofree char *lt = sp_layout_to_string(&s.layout);
  const int32_t n = sp_step_replay_nranks(s.replay);
  guint colls, sends;
  sp_step_replay_counts(s.replay, &colls, &sends);
  /* a step without communication (one GPU, say) has nothing to replay, but its
   * compute still runs and is timed */
  const gboolean replay = colls + sends > 0;
  if (!replay && !compute) {
    if (w->rank == 0)
      fprintf(stderr, "spsim-run: --step: the step of %s on %d GPU%s has no communication (no collective or "
              "pipeline send): --dry-compute leaves nothing to run; drop it to time the step's compute, or use "
              "a layout with tp, sp, cp, wp, pp or dp above 1\n",
              lt, world, world == 1 ? "" : "s");
    full_case_clear(&f);
    step_case_clear(&s);
    return EXIT_USAGE;
  }
  if (n != w->world && !compute) {
    g_autofree char *hint = cfg->world ? g_strdup("") : g_strdup_printf(" ... --world %d", world);
    if (w->rank == 0)
      fprintf(stderr,
              "spsim-run: --step: the step of %s on %d GPUs replays on %d ranks (its stages' "
              "representatives and the members of their groups) but mpirun launched %d; use "
              "mpirun -np %d%s\n",
              lt, world, n, w->world, n, hint);
    step_case_clear(&s);
    return EXIT_USAGE;
  }
  const char *what = compute ? "the reduced replay of the step's communication" :
                               "communication of the step, compute not executed";
  if (w->rank == 0 && !replay) {
    printf("step: %s, %s on %d GPU%s: no collective or pipeline send, so no replay; the step's compute only\n",
           s.model->name, lt, world, world == 1 ? "" : "s");
    fflush(stdout);
  } else if (w->rank == 0) {
    printf("step: %s, %s on %d GPUs (%d per node), reduced to %" G_GINT64_FORMAT " layer%s and %" G_GINT64_FORMAT
           " micro-batches: %u collectives and %u pipeline sends on %d ranks; %s\n",
           s.model->name, lt, world, s.gpn, s.reduced.layers, s.reduced.layers == 1 ? "" : "s",
           s.graph->microbatches, colls, sends, n, what);
    if (n < world) {
      /* the checksum lines and messages name local ranks: say which GPUs they are */
      GString *map = g_string_new(NULL);
      for (int32_t i = 0; i < n; i++)
        g_string_append_printf(map, "%s%d", i ? "," : "", sp_step_replay_ranks(s.replay)[i]);
      printf("step: ranks 0..%d run the GPUs %s of the %d\n", n - 1, map->str, world);
      g_string_free(map, TRUE);
    }
    fflush(stdout);
  }
  if (cfg->debug_die_rank == w->rank) {
    fprintf(stderr, "spsim-run: rank %d: exiting with status %d before communicating "
            "(--debug-die-rank)\n", w->rank, EXIT_DIED);
    fflush(stderr);
    exit(EXIT_DIED);
  }
  /* local rank i of the replay is MPI rank i; its peers are local ranks (with compute
   * on every GPU, the ranks beyond the replay's wait) */
  const gboolean in_replay = replay && w->rank < n;
  barrier(r);
  double t0 = MPI_Wtime();
  if (in_replay && !sp_exec_run(sp_step_replay_programs(s.replay)[w->rank], &r->tr,
                                sp_step_replay_bufs(s.replay)[w->rank], NULL, &err))
    die_transport(w, err);
  double t1 = MPI_Wtime();
  if (in_replay && cfg->debug_corrupt_rank == w->rank)
    sp_step_replay_corrupt(s.replay, sp_step_replay_ranks(s.replay)[w->rank]);
  gboolean member = in_replay && sp_step_replay_has_outputs(s.replay, w->rank);
  gboolean ok = !in_replay || sp_step_replay_check_rank(s.replay, w->rank, NULL, NULL, &err);
  if (!ok) {
    fprintf(stderr, "spsim-run: rank %d: FAIL: %s\n", w->rank, err ? err->message : "?");
    fflush(stderr);
    g_clear_error(&err);
  }
  uint64_t ns = (uint64_t)((t1 - t0) * 1e9 + 0.5);
  allreduce_max(w, &ns, 1, "the other ranks' times");
  GString *bad = g_string_new(NULL);
  int nbad = 0;
  gboolean pass = gather_verdicts(r, member, ok, in_replay ? sp_step_replay_checksum(s.replay, w->rank) : 0, bad,
                                  &nbad);
  if (w->rank == 0 && replay) {
    if (pass)
      printf("PASS step %s %s ranks=%d collectives=%u sends=%u transport=%s time=%.6f s (max over ranks; %s)\n",
             s.model->name, lt, n, colls, sends, transport_names[cfg->transport], (double)ns * 1e-9, what);
    else
      printf("FAIL step %s %s ranks=%d collectives=%u sends=%u transport=%s: rank%s %s differ%s from the "
             "reference\n",
             s.model->name, lt, n, colls, sends, transport_names[cfg->transport], nbad > 1 ? "s" : "", bad->str,
             nbad > 1 ? "" : "s");
    fflush(stdout);
  }
  g_string_free(bad, TRUE);
  int rc = pass ? 0 : EXIT_MISMATCH;
  if (pass && compute) {
    const guint nt = f.graph->tasks->len;
    g_autofree double *st = g_new0(double, nt);
    g_autofree double *en = g_new0(double, nt);
    double step_s = 0;
    double fl[2] = { 0 }, bytes = 0;
    for (guint k = 0; k < f.kernels->len; k++) {
      const sk_kernel *kk = &g_array_index(f.kernels, sk_kernel, k);
      if (kk->kind == SK_ELEM) bytes += kk->bytes;
      else fl[kk->kind == SK_ATTN] += sk_flops(kk);
    }
    if (w->rank == 0) {
      printf("step: %s at its real sizes (%" G_GINT64_FORMAT " layers, %" G_GINT64_FORMAT " micro-batches, seq %"
             G_GINT64_FORMAT "): %u tasks, %.3g FLOP on rank 0, compute %s\n", s.model->name, s.model->layers,
             f.graph->microbatches, cfg->seq, nt, fl[0] + fl[1],
             cfg->device_cuda ? "on the GPU (cuBLAS)" : "on the CPU (OpenBLAS, one thread per rank)");
      fflush(stdout);
    }
    double kind_s[3] = { 0 };
    sk_gpu *gpu = NULL;
    if (cfg->device_cuda) gpu = sk_gpu_new(f.kernels, &err);
    if (!agree_ok(w, err, "the other ranks to set up their GPU")) {
      g_clear_error(&err);
      sk_gpu_free(gpu);
      full_case_clear(&f);
      step_case_clear(&s);
      return EXIT_TRANSPORT;
    }
    if (!step_exec_run(r, f.graph, f.kernels, f.koff, gpu, st, en, &step_s, kind_s, &err))
      die_transport(w, err);
    g_autofree char *gpu_name = gpu ? g_strdup(sk_gpu_name(gpu)) : NULL;
    sk_gpu_free(gpu);
    /* --compare without --platform: this machine's platform is measured now, by every
     * rank, as `spsim platform local` measures it (the CPU path, 2 ranks or more) */
    g_autoptr(GString) probe = NULL;
    if (cfg->compare && cfg->platform == NULL && !cfg->device_cuda && w->world >= 2) {
      probe = g_string_new(NULL);
      if (w->rank == 0) {
        printf("step: measuring this machine for --compare (the probe of spsim platform local)\n");
        fflush(stdout);
      }
      if (!run_probe_json(r, probe)) {
        g_string_free(probe, TRUE);
        probe = NULL;
      }
    }
    if (w->rank == 0) {
      double busy[SP_COMM_KIND_COUNT + 1], exposed[SP_COMM_KIND_COUNT + 2];
      printf("measured: rank 0 (stage 0) ran %u kernels: %.0f GEMM FLOP, %.0f attention FLOP, %.0f element-wise "
             "bytes\n", f.kernels->len, fl[0], fl[1], bytes);
      printf("measured: rank 0's kernels took %.6f s GEMM (%.3g FLOP/s), %.6f s attention (%.3g FLOP/s), %.6f s "
             "element-wise (%.3g B/s)\n", kind_s[SK_GEMM], kind_s[SK_GEMM] > 0 ? fl[0] / kind_s[SK_GEMM] : 0.0,
             kind_s[SK_ATTN], kind_s[SK_ATTN] > 0 ? fl[1] / kind_s[SK_ATTN] : 0.0, kind_s[SK_ELEM],
             kind_s[SK_ELEM] > 0 ? bytes / kind_s[SK_ELEM] : 0.0);
      if (gpu_name != NULL) print_kernel_model(gpu_name, f.kernels, kind_s);
      print_measured(f.graph, st, en, step_s, busy, exposed);
      fflush(stdout);
      if (cfg->trace && !sp_stepgraph_write_chrome(f.graph, st, en, cfg->trace, &err)) {
        fprintf(stderr, "spsim-run: --trace: %s\n", err->message);
        g_clear_error(&err);
        rc = EXIT_USAGE;
      }
      if (rc == 0 && cfg->compare)
        rc = step_compare(r, cfg->platform, probe ? probe->str : NULL, cfg->model, lt, exposed, busy, step_s);
    }
    /* rank 0's verdict for everyone */
    uint64_t v = (uint64_t)rc;
    allreduce_max(w, &v, 1, "rank 0's comparison");
    rc = (int)v;
  }
  full_case_clear(&f);
  step_case_clear(&s);
  return rc;
}
