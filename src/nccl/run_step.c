/* spsim-run --step: the communication of a training step under mpirun. Every rank
 * builds the step graph the what-if builds for the layout on the launched GPUs,
 * reduces it as the what-if's --verify does (sp_step_replay_reduce), builds its
 * data-mode replay (spsim/step_replay.h) and runs its own local rank's program over
 * the MPI host transport; each rank checks its own outputs, rank 0 prints the
 * verdict, the counts of calls and the replay's wall time (max over ranks). Compute
 * tasks carry no data: only the step's communication runs. */
#include "config.h"

#include "run_priv.h"
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/step.h"
#include "spsim/step_replay.h"
#include "spsim/stepgraph.h"

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

int run_step(runner *r)
{
  world_info *w = r->w;
  const run_config *cfg = r->cfg;
  GError *err = NULL;
  step_case s = { 0 };
  const int32_t world = cfg->world ? cfg->world : w->world; /* GPUs of the layout */
  gboolean built = step_case_build(cfg, world, &s, &err);
  /* building is deterministic, so errors are the same on every rank: rank 0 explains */
  uint64_t failed = !built;
  allreduce_max(w, &failed, 1, "the other ranks to build the step");
  if (failed) {
    if (err && w->rank == 0)
      fprintf(stderr, "spsim-run: %s\n", err->message);
    else if (err == NULL)
      fprintf(stderr, "spsim-run: rank %d: could not build the step\n", w->rank);
    g_clear_error(&err);
    step_case_clear(&s);
    return EXIT_USAGE;
  }
  g_autofree char *lt = sp_layout_to_string(&s.layout);
  const int32_t n = sp_step_replay_nranks(s.replay);
  guint colls, sends;
  sp_step_replay_counts(s.replay, &colls, &sends);
  if (colls + sends == 0) {
    if (w->rank == 0)
      fprintf(stderr, "spsim-run: --step: the step of %s on %d GPU%s has no communication (no collective or "
              "pipeline send): nothing to run; use a layout with tp, sp, cp, wp, pp or dp above 1\n",
              lt, world, world == 1 ? "" : "s");
    step_case_clear(&s);
    return EXIT_USAGE;
  }
  if (n != w->world) {
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
  if (w->rank == 0) {
    printf("step: %s, %s on %d GPUs (%d per node), reduced to %" G_GINT64_FORMAT " layer%s and %" G_GINT64_FORMAT
           " micro-batches: %u collectives and %u pipeline sends on %d ranks; communication of the step, compute "
           "not executed\n",
           s.model->name, lt, world, s.gpn, s.reduced.layers, s.reduced.layers == 1 ? "" : "s",
           s.graph->microbatches, colls, sends, n);
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
  /* local rank i of the replay is MPI rank i; its peers are local ranks */
  const sp_program *p = sp_step_replay_programs(s.replay)[w->rank];
  void *const *bufs = sp_step_replay_bufs(s.replay)[w->rank];
  barrier(r);
  double t0 = MPI_Wtime();
  if (!sp_exec_run(p, &r->tr, bufs, NULL, &err))
    die_transport(w, err);
  double t1 = MPI_Wtime();
  if (cfg->debug_corrupt_rank == w->rank)
    sp_step_replay_corrupt(s.replay, sp_step_replay_ranks(s.replay)[w->rank]);
  gboolean member = sp_step_replay_has_outputs(s.replay, w->rank);
  gboolean ok = sp_step_replay_check_rank(s.replay, w->rank, NULL, NULL, &err);
  if (!ok) {
    fprintf(stderr, "spsim-run: rank %d: FAIL: %s\n", w->rank, err ? err->message : "?");
    fflush(stderr);
    g_clear_error(&err);
  }
  uint64_t ns = (uint64_t)((t1 - t0) * 1e9 + 0.5);
  allreduce_max(w, &ns, 1, "the other ranks' times");
  GString *bad = g_string_new(NULL);
  int nbad = 0;
  gboolean pass = gather_verdicts(r, member, ok, sp_step_replay_checksum(s.replay, w->rank), bad, &nbad);
  if (w->rank == 0) {
    if (pass)
      printf("PASS step %s %s ranks=%d collectives=%u sends=%u transport=%s time=%.6f s (max over ranks; "
             "communication of the step, compute not executed)\n",
             s.model->name, lt, n, colls, sends, transport_names[cfg->transport], (double)ns * 1e-9);
    else
      printf("FAIL step %s %s ranks=%d collectives=%u sends=%u transport=%s: rank%s %s differ%s from the "
             "reference\n",
             s.model->name, lt, n, colls, sends, transport_names[cfg->transport], nbad > 1 ? "s" : "", bad->str,
             nbad > 1 ? "" : "s");
    fflush(stdout);
  }
  g_string_free(bad, TRUE);
  step_case_clear(&s);
  return pass ? 0 : EXIT_MISMATCH;
}
