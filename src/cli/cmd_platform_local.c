/* spsim platform local [-np N] -o FILE: a platform of this machine. Runs
 *   mpirun -np N spsim-run --probe
 * (spsim-run beside spsim, else on PATH), which measures the CPU's single-precision
 * GEMM and attention rates and memory bandwidth on every rank at once and MPI's
 * point-to-point latency and bandwidth between two ranks, and writes a one-node
 * platform of N hosts (one per rank) with the DGX generator's structure
 * (sp_platform_dgx_xml_spec) and the measured figures: host speed = GEMM FLOP/s,
 * hbm_bw = memory bandwidth, gpu_mem = MemAvailable / N, the NVLink-style links =
 * MPI bandwidth with half the one-way latency per port (a pair crosses two),
 * coll_latency = what a collective between computing ranks costs beyond their compute
 * (at least the one-way latency), and the
 * top-zone properties local_gemm_flops, local_attn_flops, local_attn_bwd_flops and
 * local_gemm_table (the measured GEMM table, written beside the platform) that the
 * what-if reads as the CPU's rates (spsim-run --compare passes the GEMM rate and
 * table again as --peak-tflops and --gemm-table). */
#include "config.h"
#include "cli.h"
#include "spsim/error.h"
#include "spsim/programs.h"
#include "platform_gen.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* spsim-run: beside this spsim, else on PATH. */
static char *find_run(void)
{
  char *p = sp_program_beside_self("spsim-run");
  return p != NULL ? p : g_find_program_in_path("spsim-run");
}

static double mem_available(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL)) return 0;
  const char *p = strstr(text, "MemAvailable:");
  return p ? g_ascii_strtod(p + strlen("MemAvailable:"), NULL) * 1024.0 : 0; /* kB */
}

static double num(JsonObject *o, const char *k)
{
  return json_object_has_member(o, k) ? json_object_get_double_member(o, k) : 0.0;
}

/* The probe's JSON object into the figures and the GEMM table's CSV. */
static gboolean parse_probe(const char *out, double *gemm, double *attn, double *attn_bwd, double *membw,
                            double *lat, double *bw, double *sync, GString *table, GError **err)
{
  g_autoptr(JsonParser) p = json_parser_new();
  if (!json_parser_load_from_data(p, out, -1, err)) {
    g_prefix_error(err, "platform local: the probe's output is not JSON: ");
    return FALSE;
  }
  JsonNode *root = json_parser_get_root(p);
  JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  if (o == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "platform local: the probe wrote no JSON object");
    return FALSE;
  }
  *gemm = num(o, "gemm_flops");
  *attn = num(o, "attn_flops");
  *attn_bwd = num(o, "attn_bwd_flops");
  *membw = num(o, "mem_bw");
  *lat = num(o, "mpi_latency_s");
  *bw = num(o, "mpi_bw");
  *sync = num(o, "sync_s");
  /* the GEMM table as spsim's --gemm-table CSV (m, n, k, tflops) */
  JsonArray *rows = json_object_has_member(o, "gemm_table") ? json_object_get_array_member(o, "gemm_table") : NULL;
  g_string_append_printf(table, "# measured by spsim platform local: single-precision OpenBLAS sgemm, one thread per "
                         "rank, all ranks at once: each shape's rate per second of processor time (median over ranks) "
                         "times the share of a core the ranks got (%.4g)\nm,n,k,tflops\n", num(o, "core_share"));
  for (guint i = 0; rows != NULL && i < json_array_get_length(rows); i++) {
    JsonArray *r = json_array_get_array_element(rows, i);
    if (r == NULL || json_array_get_length(r) != 4 || !(json_array_get_double_element(r, 3) > 0)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "platform local: GEMM table row %u of the probe is malformed", i);
      return FALSE;
    }
    char v[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append_printf(table, "%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%s\n",
                           json_array_get_int_element(r, 0), json_array_get_int_element(r, 1),
                           json_array_get_int_element(r, 2),
                           g_ascii_formatd(v, sizeof v, "%.6e", json_array_get_double_element(r, 3) / 1e12));
  }
  if (!(*gemm > 0 && *attn > 0 && *attn_bwd > 0 && *membw > 0 && *lat > 0 && *bw > 0 && *sync >= 0) ||
      rows == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "platform local: the probe reported a figure that is not above 0: %s",
                out);
    return FALSE;
  }
  return TRUE;
}

/* The probe's JSON output: read from @p given (spsim-run --compare measured it in its
 * own job), else measured now by `mpirun -np NP spsim-run --probe`. NULL on failure. */
static char *probe(int np, const char *given, GError **err)
{
  char *out = NULL;
  if (given != NULL) {
    if (!g_file_get_contents(given, &out, NULL, err))
      g_prefix_error(err, "platform local: --probe-output: ");
    return out;
  }
  g_autofree char *run = find_run();
  g_autofree char *mpirun = g_find_program_in_path("mpirun");
  if (run == NULL || mpirun == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "platform local: %s not found (beside spsim or on PATH); %s",
                run == NULL ? "spsim-run" : "mpirun",
                run == NULL ? "build it (./build.sh)" : "install it with 'apt-get install openmpi-bin'");
    return NULL;
  }
  g_autofree char *nps = g_strdup_printf("%d", np);
  /* the probe is spsim's own program: run as root, say so to Open MPI's mpirun, which
   * refuses root otherwise (Open MPI 4.1 mpirun(1): --allow-run-as-root) */
  gboolean as_root = geteuid() == 0;
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, mpirun);
  if (as_root) g_ptr_array_add(argv, "--allow-run-as-root");
  const char *rest[] = { "--oversubscribe", "-np", nps, run, "--probe", NULL };
  for (const char **a = rest; *a != NULL; a++) g_ptr_array_add(argv, (char *)*a);
  g_ptr_array_add(argv, NULL);
  g_autofree char *errtext = NULL;
  int status = 0;
  if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errtext, &status, err))
    return NULL;
  if (!g_spawn_check_wait_status(status, NULL)) {
    /* one line: mpirun's first line of text, or the probe's own */
    const char *why = "?";
    g_auto(GStrv) lines = g_strsplit(errtext ? errtext : "", "\n", -1);
    for (char **l = lines; *l != NULL; l++) {
      g_strstrip(*l);
      if (**l != '\0' && strspn(*l, "-") != strlen(*l)) {
        why = *l;
        break;
      }
    }
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "platform local: `%s%s --oversubscribe -np %d %s --probe` failed: %s "
                "(run it by hand for the whole output)", mpirun, as_root ? " --allow-run-as-root" : "", np, run, why);
    g_free(out);
    return NULL;
  }
  return out;
}

int sp_cmd_platform_local(int argc, char **argv)
{
  /* argv[0] is "spsim platform"; the family "local" is taken out */
  gint np = 2;
  g_autofree char *out = NULL, *given = NULL; /* --probe-output: the probe's JSON, measured by spsim-run --compare */
  GOptionEntry entries[] = {
    { "np", 0, 0, G_OPTION_ARG_INT, &np, "ranks to measure, as mpirun -np (default 2; -np N is accepted)", "N" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write the platform to FILE (required) and the measured GEMM table to FILE-gemm.csv (FILE without .xml)", "FILE" },
    { "probe-output", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_FILENAME, &given, "", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  /* mpirun's spelling -np N */
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "-np") == 0) argv[i] = (char *)"--np";
  g_autoptr(GOptionContext) ctx = g_option_context_new("local - measure this machine and write its platform");
  g_option_context_set_summary(ctx,
      "Runs `mpirun -np N spsim-run --probe` (GEMM FLOP/s and table, attention FLOP/s forward and backward,\n"
      "memory bandwidth, MPI latency and bandwidth, what a collective costs between computing ranks) and\n"
      "writes a platform of N hosts, one per rank, for spsim PLATFORM and spsim-run --compare.\n"
      "Example: spsim platform local -np 4 -o local.xml");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
    g_prefix_error(&err, "platform local: ");
    return sp_cli_fail(err);
  }
  if (argc > 1)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform local: unexpected argument '%s'", argv[1]));
  if (np < 2 || np > 256)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "platform local: -np must be 2 to 256 ranks (got %d)", np));
  if (out == NULL || strcmp(out, "-") == 0)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform local: -o FILE is required (the measured "
                                   "GEMM table is written beside it as FILE's name with -gemm.csv)"));
  double gemm = 0, attn = 0, attn_bwd = 0, membw = 0, lat = 0, bw = 0, sync = -1;
  g_autoptr(GString) table = g_string_new(NULL);
  g_autofree char *probe_json = probe(np, given, &err);
  if (probe_json == NULL || !parse_probe(probe_json, &gemm, &attn, &attn_bwd, &membw, &lat, &bw, &sync, table, &err))
    return sp_cli_fail(err);
  /* every collective of a step costs what a collective between computing ranks was
   * measured to cost, at least the point-to-point latency */
  double coll_lat = MAX(lat, sync);
  g_autofree char *stem = g_str_has_suffix(out, ".xml") ? g_strndup(out, strlen(out) - 4) : g_strdup(out);
  g_autofree char *table_path = g_strconcat(stem, "-gemm.csv", NULL);
  g_autofree char *table_base = g_path_get_basename(table_path);
  if (!g_file_set_contents(table_path, table->str, -1, &err)) {
    GError *e2 = g_error_new(SP_ERROR, SP_ERROR_IO, "platform local: cannot write %s: %s", table_path, err->message);
    g_error_free(err);
    return sp_cli_fail(e2);
  }
  double avail = mem_available();
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = 1;
  o.gpus_per_node = np;
  o.gpu = SP_GPU_TOY;
  sp_gpu_spec spec = *sp_gpu_spec_get(SP_GPU_TOY);
  spec.key = "local";
  spec.model = "cpu-local";
  spec.flops = gemm;
  spec.gpu_mem = avail > 0 ? avail / np : spec.gpu_mem;
  spec.mem_bw = membw;
  spec.nvl_bw = spec.nic_bw = bw;
  spec.nvl_lat = spec.nic_lat = lat / 2;
  spec.coll_lat = coll_lat;
  spec.nvls = FALSE;
  g_autofree char *origin = g_strdup_printf(
      "Measured on this machine by spsim platform local -np %d (mpirun -np %d spsim-run --probe):\n"
      "  single-precision GEMM %.4g FLOP/s per rank (host speed; OpenBLAS, one thread, all ranks at once),\n"
      "  attention %.4g FLOP/s forward, %.4g backward, memory %.4g B/s per rank (hbm_bw),\n"
      "  MemAvailable / %d = gpu_mem,\n"
      "  MPI point-to-point %.4g s one way (%.4g s per link, two links a pair) and %.4g B/s\n"
      "  (NVLink and NIC links), a collective between computing ranks %.4g s more than their\n"
      "  compute (coll_latency %.4g s: that, at least the one-way latency).\n"
      "  The preset named below gives the structure only.",
      np, np, gemm, attn, attn_bwd, membw, np, lat, lat / 2, bw, sync, coll_lat);
  g_autofree char *xml = sp_platform_dgx_xml_spec(&o, &spec, origin, &err);
  if (xml == NULL) {
    g_prefix_error(&err, "platform local: ");
    return sp_cli_fail(err);
  }
  /* the measured rates as properties of the top zone, after its gpus_per_node */
  g_autofree char *anchor = g_strdup_printf("<prop id=\"gpus_per_node\" value=\"%d\"/>\n", np);
  const char *at = strstr(xml, anchor);
  if (at == NULL)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform local: the generated platform has no "
                                   "gpus_per_node property to anchor the measured rates"));
  char gs[G_ASCII_DTOSTR_BUF_SIZE], as[G_ASCII_DTOSTR_BUF_SIZE], bs[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree char *tb = g_markup_escape_text(table_base, -1);
  g_autofree char *props = g_strdup_printf("  <prop id=\"local_gemm_flops\" value=\"%s\"/>\n"
                                           "  <prop id=\"local_attn_flops\" value=\"%s\"/>\n"
                                           "  <prop id=\"local_attn_bwd_flops\" value=\"%s\"/>\n"
                                           "  <prop id=\"local_gemm_table\" value=\"%s\"/>\n",
                                           g_ascii_formatd(gs, sizeof gs, "%.6e", gemm),
                                           g_ascii_formatd(as, sizeof as, "%.6e", attn),
                                           g_ascii_formatd(bs, sizeof bs, "%.6e", attn_bwd), tb);
  size_t cut = (size_t)(at - xml) + strlen(anchor);
  g_autofree char *full = g_strdup_printf("%.*s%s%s", (int)cut, xml, props, xml + cut);
  if (!g_file_set_contents(out, full, -1, &err)) {
    GError *e2 = g_error_new(SP_ERROR, SP_ERROR_IO, "platform local: cannot write %s: %s", out, err->message);
    g_error_free(err);
    return sp_cli_fail(e2);
  }
  fprintf(stderr, "spsim platform local: GEMM %.3g GFLOP/s, attention %.3g GFLOP/s (backward %.3g), memory %.3g GB/s "
          "per rank; MPI %.3g us, %.3g GB/s; a collective %.3g us; wrote %s and %s\n", gemm / 1e9, attn / 1e9,
          attn_bwd / 1e9, membw / 1e9, lat * 1e6, bw / 1e9, coll_lat * 1e6, out, table_path);
  return 0;
}

int sp_cmd_platform_family(int argc, char **argv)
{
  /* the first argument that is not an option names the family */
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    if (strcmp(argv[i], "local") == 0) {
      /* "spsim platform" and the options, without the family, as sp_cmd_platform gets them */
      g_autofree char **args = g_new0(char *, (gsize)argc);
      int n = 0;
      for (int j = 0; j < argc; j++)
        if (j != i) args[n++] = argv[j];
      return sp_cmd_platform_local(n, args);
    }
    break;
  }
  return sp_cmd_platform(argc, argv);
}
