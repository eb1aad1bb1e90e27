/* spsim platform dgx --nodes N [--gpu h100|a100|h100-hbm2e|b200|toy] [--gpus-per-node 8] [--charge-local]
 *                    [--nvlink-bw GBPS] [--nic-bw GBPS] [--su-nodes N] [--oversubscription R] [-o FILE]:
 * write a calibrated platform XML (stdout by default). */
#include "config.h"
#include "cli.h"
#include "spsim/error.h"
#include "platform_gen.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A bandwidth in GB/s: a finite number above 0. */
static gboolean parse_gbps(const char *s, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || !(v > 0)) return FALSE;
  *out = v;
  return TRUE;
}

int sp_cmd_platform(int argc, char **argv)
{
  gint nodes = G_MININT, gpn = 8, su_nodes = G_MININT;
  gboolean charge = FALSE;
  double oversub = 1.0;
  g_autofree char *nvl_s = NULL, *nic_s = NULL;
  g_autofree char *gpu = NULL, *out = NULL;
  GOptionEntry entries[] = {
    { "nodes", 'n', 0, G_OPTION_ARG_INT, &nodes, "number of nodes (required, >= 1)", "N" },
    { "gpu", 0, 0, G_OPTION_ARG_STRING, &gpu, "GPU preset: h100 (default), a100, h100-hbm2e (96 GB HBM2e at 2.4 TB/s), b200, toy", "KIND" },
    { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &gpn, "GPUs per node (default 8)", "G" },
    { "charge-local", 0, 0, G_OPTION_ARG_NONE, &charge,
      "add mem_bw (HBM bandwidth) so local steps are charged (off: NCCL fuses reductions)", NULL },
    { "nvlink-bw", 0, 0, G_OPTION_ARG_STRING, &nvl_s, "NVLink bandwidth per GPU and direction in GB/s, effective (default: the preset's: H100 450, A100 270)", "GBPS" },
    { "nic-bw", 0, 0, G_OPTION_ARG_STRING, &nic_s, "NIC bandwidth per GPU and direction in GB/s, effective (default: the preset's)", "GBPS" },
    { "su-nodes", 0, 0, G_OPTION_ARG_INT, &su_nodes, "nodes per scalable unit, one leaf level each (default 32, as DGX SuperPOD)", "N" },
    { "oversubscription", 0, 0, G_OPTION_ARG_DOUBLE, &oversub, "leaf-to-spine oversubscription R: an SU's uplink carries its NICs' sum / R (default 1: full bisection)", "R" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write to FILE instead of stdout", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("dgx - generate a calibrated SimGrid platform");
  g_option_context_set_summary(ctx,
      "Writes DGX-style nodes (NVSwitch inside, one NIC per GPU) in a full-bisection fat tree.\n"
      "Example: spsim platform dgx --nodes 128 > dgx.xml");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_help_enabled(ctx, TRUE);
  GError *err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
    g_prefix_error(&err, "platform: ");
    return sp_cli_fail(err); /* G_OPTION_ERROR: usage error, exit 2 */
  }
  if (argc < 2)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "platform: missing family (usage: spsim platform dgx --nodes N)"));
  if (argc > 2)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform: unexpected argument '%s'", argv[2]));
  if (strcmp(argv[1], "dgx") != 0)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "platform: unknown family '%s' (expected dgx)", argv[1]));
  if (nodes == G_MININT)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "platform: --nodes N is required (e.g. spsim platform dgx --nodes 128)"));
  if (nodes < 1)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "platform: --nodes must be >= 1 (got %d)", nodes));

  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = nodes;
  o.gpus_per_node = gpn;
  o.charge_local = charge;
  double nvl_bw = 0, nic_bw = 0; /* 0: the preset's */
  if ((nvl_s && !parse_gbps(nvl_s, &nvl_bw)) || (nic_s && !parse_gbps(nic_s, &nic_bw)))
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform: --%s must be a bandwidth in GB/s above 0 (got '%s')",
                                   nvl_s && !parse_gbps(nvl_s, &nvl_bw) ? "nvlink-bw" : "nic-bw",
                                   nvl_s && !parse_gbps(nvl_s, &nvl_bw) ? nvl_s : nic_s));
  if (su_nodes != G_MININT && su_nodes < 1)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "platform: --su-nodes must be >= 1 (got %d)", su_nodes));
  o.nvl_bw = nvl_bw * 1e9;
  o.nic_bw = nic_bw * 1e9;
  o.su_nodes = su_nodes == G_MININT ? 0 : su_nodes;
  o.oversubscription = oversub;
  if (gpu != NULL && !sp_gpu_parse(gpu, &o.gpu, &err)) {
    g_prefix_error(&err, "platform: ");
    return sp_cli_fail(err);
  }
  g_autofree char *xml = sp_platform_dgx_xml(&o, &err);
  if (xml == NULL) {
    g_prefix_error(&err, "platform: ");
    return sp_cli_fail(err);
  }
  if (out != NULL && strcmp(out, "-") != 0) {
    if (!g_file_set_contents(out, xml, -1, &err)) {
      GError *e2 = g_error_new(SP_ERROR, SP_ERROR_IO, "platform: cannot write %s: %s", out, err->message);
      g_error_free(err);
      return sp_cli_fail(e2);
    }
    return 0;
  }
  size_t len = strlen(xml);
  if (fwrite(xml, 1, len, stdout) != len || fflush(stdout) != 0)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_IO, "platform: cannot write to stdout"));
  return 0;
}
