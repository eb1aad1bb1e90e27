/* spsim-run --step --compare: the measured step beside spsim's prediction of the same
 * step. spsim-run links MPI and spsim links SimGrid, whose SMPI exports the MPI_*
 * symbols too, so the two never share a process: rank 0 runs
 *   spsim PLATFORM --model M --layout L --seq S --global-batch B --json -
 * as a child (the spsim beside spsim-run, else on PATH) and reads the JSON row of the
 * layout with json-glib. A platform of this machine (spsim platform local) carries the
 * measured rates as top-zone properties, which the what-if reads (the attention rates
 * local_attn_flops and local_attn_bwd_flops among them); local_gemm_flops is passed
 * again as --peak-tflops (--eff-matmul 1), because the what-if takes its peak from a
 * host speed only at GPU scale (1 TFLOP/s and above); local_gemm_table (the measured GEMM table beside the platform)
 * becomes --gemm-table, so that GEMMs are priced at this CPU's measured rate of
 * their shape instead of the GPU model's tile and wave quantisation over 132 SMs. */
#include "config.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "run_priv.h"
#include "spsim/programs.h"
#include "spsim/step.h"

typedef struct {
  double gemm;
  char *table; /* local_gemm_table, relative to the platform's folder */
} local_props;

static void on_start(GMarkupParseContext *ctx, const char *el, const char **an, const char **av, gpointer user,
                     GError **err)
{
  (void)ctx;
  (void)err;
  local_props *p = user;
  if (strcmp(el, "prop") != 0) return;
  const char *id = NULL, *val = NULL;
  for (int i = 0; an[i] != NULL; i++) {
    if (strcmp(an[i], "id") == 0) id = av[i];
    else if (strcmp(an[i], "value") == 0) val = av[i];
  }
  if (id == NULL || val == NULL) return;
  if (strcmp(id, "local_gemm_flops") == 0 && p->gemm == 0) p->gemm = g_ascii_strtod(val, NULL);
  if (strcmp(id, "local_gemm_table") == 0 && p->table == NULL) p->table = g_strdup(val);
}

static gboolean read_props(const char *path, local_props *p, GError **err)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &text, &len, err)) return FALSE;
  GMarkupParser parser = { .start_element = on_start };
  GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, p, NULL);
  gboolean ok = g_markup_parse_context_parse(ctx, text, (gssize)len, err) && g_markup_parse_context_end_parse(ctx, err);
  g_markup_parse_context_free(ctx);
  if (!ok) g_prefix_error(err, "--platform %s: ", path);
  return ok;
}

static char *find_spsim(void)
{
  char *p = sp_program_beside_self("spsim");
  return p != NULL ? p : g_find_program_in_path("spsim");
}

static double member(JsonObject *o, const char *name)
{
  return o != NULL && json_object_has_member(o, name) ? json_object_get_double_member(o, name) : 0.0;
}

static double pct(double measured, double predicted)
{
  return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

/* The platform of this machine from the probe's output measured in this job: `spsim
 * platform local --probe-output` into @p dir. NULL (said on stderr) on failure. */
static char *local_platform(const char *spsim, const char *dir, const char *probe_json, int np)
{
  GError *err = NULL;
  g_autofree char *json = g_build_filename(dir, "probe.json", NULL);
  char *xml = g_build_filename(dir, "local.xml", NULL);
  g_autofree char *nps = g_strdup_printf("%d", np);
  const char *argv[] = { spsim, "platform", "local", "--np", nps, "--probe-output", json, "-o", xml, NULL };
  g_autofree char *errtext = NULL;
  int status = 0;
  if (!g_file_set_contents(json, probe_json, -1, &err) ||
      !g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &errtext, &status, &err) ||
      !g_spawn_check_wait_status(status, &err)) {
    fprintf(stderr, "spsim-run: --compare: the platform of this machine: %s%s%s\n", err ? err->message : "?",
            errtext && *errtext ? ": " : "", errtext ? g_strstrip(errtext) : "");
    g_clear_error(&err);
    g_free(xml);
    return NULL;
  }
  return xml;
}

/* Remove what local_platform wrote (the platform, its GEMM table, the probe) and @p dir. */
static void remove_dir(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *f = g_build_filename(dir, name, NULL);
    (void)g_remove(f);
  }
  if (d != NULL) g_dir_close(d);
  (void)g_rmdir(dir);
}

static int compare_on(runner *r, const char *platform, const char *spsim, const char *model, const char *layout,
                      const double *exposed, const double *busy, double step_s)
{
  const run_config *cfg = r->cfg;
  GError *err = NULL;
  local_props lp = { 0 };
  if (!read_props(platform, &lp, &err)) {
    fprintf(stderr, "spsim-run: %s\n", err->message);
    g_error_free(err);
    g_free(lp.table);
    return EXIT_USAGE;
  }
  g_autofree char *table = lp.table;
  GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(argv, g_strdup(spsim));
  g_ptr_array_add(argv, g_strdup(platform));
  g_ptr_array_add(argv, g_strdup("--model"));
  g_ptr_array_add(argv, g_strdup(model));
  g_ptr_array_add(argv, g_strdup("--layout"));
  g_ptr_array_add(argv, g_strdup(layout));
  g_ptr_array_add(argv, g_strdup_printf("--seq=%" G_GINT64_FORMAT, cfg->seq));
  g_ptr_array_add(argv, g_strdup_printf("--global-batch=%" G_GINT64_FORMAT, cfg->global_batch));
  if (cfg->micro_batch) g_ptr_array_add(argv, g_strdup_printf("--micro-batch=%d", cfg->micro_batch));
  if (lp.gemm > 0) {
    char num[G_ASCII_DTOSTR_BUF_SIZE];
    g_ptr_array_add(argv, g_strdup_printf("--peak-tflops=%s", g_ascii_dtostr(num, sizeof num, lp.gemm / 1e12)));
    g_ptr_array_add(argv, g_strdup("--eff-matmul=1"));
    if (lp.table != NULL) {
      g_autofree char *dir = g_path_get_dirname(platform);
      g_ptr_array_add(argv, g_strdup("--gemm-table"));
      g_ptr_array_add(argv, g_path_is_absolute(lp.table) ? g_strdup(lp.table) : g_build_filename(dir, lp.table, NULL));
    }
  }
  g_ptr_array_add(argv, g_strdup("--json"));
  g_ptr_array_add(argv, g_strdup("-"));
  g_ptr_array_add(argv, NULL);
  g_autofree char *out = NULL, *errtext = NULL;
  int status = 0;
  /* the prediction is one process's what-if: without mpirun's rank variables, which
   * would make spsim spread itself over this job's ranks */
  char **envp = g_get_environ();
  envp = g_environ_unsetenv(envp, "OMPI_COMM_WORLD_SIZE");
  envp = g_environ_unsetenv(envp, "OMPI_COMM_WORLD_RANK");
  gboolean spawned = g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &errtext,
                                  &status, &err);
  g_strfreev(envp);
  g_autofree char *cmdline = g_strjoinv(" ", (char **)argv->pdata);
  g_ptr_array_free(argv, TRUE);
  if (!spawned || !g_spawn_check_wait_status(status, NULL)) {
    g_autofree char *last = errtext ? g_strstrip(g_strdup(errtext)) : NULL;
    fprintf(stderr, "spsim-run: --compare: `%s` failed: %s\n", cmdline, err ? err->message : last ? last : "?");
    g_clear_error(&err);
    return EXIT_USAGE;
  }
  g_autoptr(JsonParser) parser = json_parser_new();
  JsonObject *row = NULL;
  if (json_parser_load_from_data(parser, out, -1, &err)) {
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonArray *rows = o && json_object_has_member(o, "layouts") ? json_object_get_array_member(o, "layouts") : NULL;
    if (rows && json_array_get_length(rows) > 0) row = json_array_get_object_element(rows, 0);
  }
  if (row == NULL) {
    fprintf(stderr, "spsim-run: --compare: `%s` wrote no layout row: %s\n", cmdline, err ? err->message : "");
    g_clear_error(&err);
    return EXIT_USAGE;
  }
  JsonObject *pe = json_object_has_member(row, "exposed_s") ? json_object_get_object_member(row, "exposed_s") : NULL;
  JsonObject *pc = json_object_has_member(row, "comm_s") ? json_object_get_object_member(row, "comm_s") : NULL;
  printf("compare: predicted by `%s`%s\n", cmdline, lp.gemm > 0 ? "" : " (the platform has no local_gemm_flops: "
         "GPU figures, not this machine's)");
  printf("  %-8s %12s %12s %8s %12s %12s %8s\n", "term", "measured s", "predicted s", "error", "exposed s",
         "predicted s", "error");
  double ps = member(row, "step_s"), pcomp = member(row, "compute_s");
  printf("  %-8s %12.6f %12.6f %+7.1f%%\n", "step", step_s, ps, pct(step_s, ps));
  printf("  %-8s %12.6f %12.6f %+7.1f%%\n", "compute", busy[0], pcomp, pct(busy[0], pcomp));
  for (int k = 0; k < SP_COMM_KIND_COUNT; k++) {
    const char *name = sp_comm_kind_name(k);
    double b = member(pc, name), e = member(pe, name);
    if (busy[k + 1] == 0 && b == 0) continue;
    printf("  %-8s %12.6f %12.6f %+7.1f%% %12.6f %12.6f %+7.1f%%\n", name, busy[k + 1], b, pct(busy[k + 1], b),
           exposed[k + 1], e, pct(exposed[k + 1], e));
  }
  printf("compare: step error %+.1f%% (predicted - measured) / measured\n", pct(step_s, ps));
  return 0;
}

int step_compare(runner *r, const char *platform, const char *probe_json, const char *model, const char *layout,
                 const double *exposed, const double *busy, double step_s)
{
  g_autofree char *spsim = find_spsim();
  if (spsim == NULL) {
    fprintf(stderr, "spsim-run: --compare: spsim not found beside spsim-run nor on PATH; build it (./build.sh) "
            "or add it to PATH\n");
    return EXIT_USAGE;
  }
  if (platform != NULL)
    return compare_on(r, platform, spsim, model, layout, exposed, busy, step_s);
  if (probe_json == NULL) {
    fprintf(stderr, "spsim-run: --compare needs --platform FILE here: without it the platform of this machine "
            "is measured in the job, on the CPU and between 2 ranks or more (not with one rank nor --device "
            "cuda); write one with `spsim platform local -np 2 -o local.xml` (or `spsim platform dgx` for "
            "GPUs), then add --platform local.xml\n");
    return EXIT_USAGE;
  }
  GError *err = NULL;
  g_autofree char *dir = g_dir_make_tmp("spsim-run-XXXXXX", &err);
  if (dir == NULL) {
    fprintf(stderr, "spsim-run: --compare: %s\n", err->message);
    g_error_free(err);
    return EXIT_USAGE;
  }
  printf("compare: the platform of this machine measured in this job (spsim platform local's probe; "
         "--platform FILE reuses one)\n");
  fflush(stdout);
  g_autofree char *xml = local_platform(spsim, dir, probe_json, r->w->world);
  int rc = xml ? compare_on(r, xml, spsim, model, layout, exposed, busy, step_s) : EXIT_USAGE;
  remove_dir(dir);
  return rc;
}
