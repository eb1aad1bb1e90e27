/* The generator's command line (`spsim platform dgx ...`) read into sp_platform_opts:
 * GOption for the syntax, then every value's range, each error saying which option and
 * what it takes. */
#include "config.h"
#include "platform_args.h"
#include "spsim/error.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Set @p err to SP_ERROR_INVALID with the message; FALSE. */
G_GNUC_PRINTF(2, 3) static gboolean fail(GError **err, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(err, SP_ERROR, SP_ERROR_INVALID, msg);
  g_free(msg);
  return FALSE;
}

/* A bandwidth in GB/s: a finite number above 0. */
static gboolean parse_gbps(const char *s, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || !(v > 0)) return FALSE;
  *out = v;
  return TRUE;
}

/* One oversubscription ratio: "R" or "R:1", a finite number. */
static gboolean parse_ratio(const char *s, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || !isfinite(v)) return FALSE;
  if (*end == ':' && strcmp(end, ":1") == 0) end += 2;
  if (*end != '\0') return FALSE;
  *out = v;
  return TRUE;
}

/* --oversubscription LEAF[,CORE]: leaf-to-spine, then spine-to-core (each "R" or "R:1"). */
static gboolean parse_oversubscription(const char *s, double *leaf, double *core)
{
  g_auto(GStrv) parts = g_strsplit(s, ",", -1);
  guint n = g_strv_length(parts);
  if (n < 1 || n > 2 || !parse_ratio(parts[0], leaf)) return FALSE;
  return n == 1 || parse_ratio(parts[1], core);
}

gboolean sp_platform_args_parse(int argc, char **argv, gboolean help, sp_platform_opts *opts, char **output,
                                GError **err)
{
  gint nodes = G_MININT, gpn = G_MININT, su_nodes = G_MININT, domain = G_MININT, nics = G_MININT;
  gint pod_sus = G_MININT;
  gboolean charge = FALSE, sharp = FALSE;
  g_autofree char *sharp_s = NULL, *tuner_s = NULL;
  double sharp_bw = 0;
  double oversub = 1.0, core_oversub = 1.0;
  g_autofree char *oversub_s = NULL;
  g_autofree char *nvl_s = NULL, *nic_s = NULL;
  g_autofree char *gpu = NULL, *out = NULL, *mix = NULL, *zones = NULL;
  GOptionEntry entries[] = {
    { "nodes", 'n', 0, G_OPTION_ARG_INT, &nodes, "number of nodes (required without --mix, >= 1)", "N" },
    { "gpu", 0, 0, G_OPTION_ARG_STRING, &gpu, "GPU preset: h100 (default), a100, h100-hbm2e (96 GB HBM2e at 2.4 TB/s), h200 (DGX H200: 141 GB HBM3e at 4.8 TB/s), b200 (DGX B200), gb200 (GB200 NVL72: trays of 4 GPUs, 72 per NVLink domain), toy", "KIND" },
    { "mix", 0, 0, G_OPTION_ARG_STRING, &mix, "mixed cluster: nodes of each preset in order, e.g. h100:2,a100:2 (--nodes: absent or their sum; not with --gpu). Each node has its own preset's GPUs, NVLink and NICs; the fabric is shared. Presets must have the same GPUs per node (gb200 cannot be mixed)", "KIND:N,..." },
    { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &gpn, "GPUs per node (default 8; gb200: 4, a compute tray)", "G" },
    { "charge-local", 0, 0, G_OPTION_ARG_NONE, &charge,
      "add mem_bw (HBM bandwidth) so local steps are charged (off: NCCL fuses reductions)", NULL },
    { "nvlink-bw", 0, 0, G_OPTION_ARG_STRING, &nvl_s, "NVLink bandwidth per GPU and direction in GB/s, effective (default: the preset's: H100/H200 450, A100 270, B200/GB200 900)", "GBPS" },
    { "nic-bw", 0, 0, G_OPTION_ARG_STRING, &nic_s, "NIC bandwidth per GPU and direction in GB/s, effective (default: the preset's)", "GBPS" },
    { "su-nodes", 0, 0, G_OPTION_ARG_INT, &su_nodes, "nodes per scalable unit, one leaf level each (default 32, as DGX SuperPOD)", "N" },
    { "oversubscription", 0, 0, G_OPTION_ARG_STRING, &oversub_s, "leaf-to-spine oversubscription R (or R:1): an SU's uplink carries its NICs' sum / R (default 1: full bisection); R,C (e.g. 2:1,4:1) also sets the spine-to-core ratio C of --pod-sus pods", "R[,C]" },
    { "pod-sus", 0, 0, G_OPTION_ARG_INT, &pod_sus, "SUs per pod: a third tier, pods of N SUs under their own spines, joined by a core (default: none)", "N" },
    { "nvlink-domain", 0, 0, G_OPTION_ARG_INT, &domain, "GPUs sharing one NVSwitch fabric, a multiple of --gpus-per-node whose nodes divide --nodes and --su-nodes (default: one node; gb200: 72); the what-if treats the domain as the node", "G" },
    { "nics-per-node", 0, 0, G_OPTION_ARG_INT, &nics, "NICs per node, dividing --gpus-per-node: GPUs share them evenly, each of --nic-bw (default: one per GPU)", "K" },
    { "zones", 0, 0, G_OPTION_ARG_STRING, &zones, "SimGrid zones: node (one per node inside one per SU), su (one per SU holding its nodes: loads in linear time, same routes) or auto (default: node up to 2048 nodes or NVLink domains, su above)", "node|su|auto" },
    { "sharp", 0, 0, G_OPTION_ARG_NONE, &sharp, "the network's switches reduce (SHARP, as NVIDIA Quantum-2 InfiniBand's SHARPv3): top-zone property sharp = 1, for NCCL's CollNet algorithms (--algo collnet-direct, collnet-chain)", NULL },
    { "sharp-bw", 0, 0, G_OPTION_ARG_STRING, &sharp_s, "with --sharp: the switches' reduction bandwidth per port and direction in GB/s (default: the NIC's line rate)", "GBPS" },
    { "nccl-tuner", 0, 0, G_OPTION_ARG_STRING, &tuner_s, "the NCCL tuner plugin the cluster runs, whose choice of algorithm and protocol replaces NCCL's model where it names one: aws-p5, aws-p5en or aws-p6 (aws-ofi-nccl v1.16.3's region tuner for p5/p5e, p5en or p6-b200, NCCL_TUNER_PLUGIN=libnccl-ofi-tuner.so) or none (default): top-zone property nccl_tuner", "NAME" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write to FILE instead of stdout", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("dgx - generate a calibrated SimGrid platform");
  g_option_context_set_summary(ctx,
      "Writes DGX-style nodes (NVSwitch inside, one NIC per GPU) in a full-bisection fat tree.\n"
      "Example: spsim platform dgx --nodes 128 > dgx.xml\n"
      "         spsim platform dgx --gpu gb200 --nodes 144 > nvl72.xml   (8 NVL72 racks)\n"
      "         spsim platform dgx --mix h100:2,a100:2 > mixed.xml       (2 DGX H100 + 2 DGX A100)");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_help_enabled(ctx, help);
  if (!g_option_context_parse(ctx, &argc, &argv, err)) return FALSE; /* G_OPTION_ERROR */
  if (argc < 2)
    return fail(err, "missing family (usage: spsim platform dgx --nodes N)");
  if (argc > 2)
    return fail(err, "unexpected argument '%s'", argv[2]);
  if (strcmp(argv[1], "dgx") != 0)
    return fail(err, "unknown family '%s' (expected dgx)", argv[1]);
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  if (mix != NULL) {
    if (gpu != NULL)
      return fail(err, "--gpu and --mix exclude each other (--mix names every preset)");
    if (!sp_platform_mix_parse(mix, &o, err)) return FALSE;
    gint sum = 0;
    for (int32_t i = 0; i < o.mix_count; i++) sum += o.mix_nodes[i]; /* each <= 65536, at most 6 */
    if (nodes != G_MININT && nodes != sum)
      return fail(err, "--mix %s gives %d node(s) but --nodes is %d: drop --nodes or make it %d",
                mix, sum, nodes, sum);
    nodes = sum;
  }
  if (nodes == G_MININT)
    return fail(err, "--nodes N is required (e.g. spsim platform dgx --nodes 128)");
  if (nodes < 1)
    return fail(err, "--nodes must be >= 1 (got %d)", nodes);

  o.nodes = nodes;
  o.charge_local = charge;
  double nvl_bw = 0, nic_bw = 0; /* 0: the preset's */
  if ((nvl_s && !parse_gbps(nvl_s, &nvl_bw)) || (nic_s && !parse_gbps(nic_s, &nic_bw)))
    return fail(err, "--%s must be a bandwidth in GB/s above 0 (got '%s')",
                nvl_s && !parse_gbps(nvl_s, &nvl_bw) ? "nvlink-bw" : "nic-bw",
                nvl_s && !parse_gbps(nvl_s, &nvl_bw) ? nvl_s : nic_s);
  if ((domain != G_MININT && domain < 1) || (nics != G_MININT && nics < 1))
    return fail(err, "--%s must be >= 1 (got %d)",
                domain != G_MININT && domain < 1 ? "nvlink-domain" : "nics-per-node",
                domain != G_MININT && domain < 1 ? domain : nics);
  if (oversub_s != NULL && !parse_oversubscription(oversub_s, &oversub, &core_oversub))
    return fail(err, "--oversubscription must be a ratio R or R:1, or two as R,C (got '%s')",
                oversub_s);
  if (sharp_s != NULL && (!sharp || !parse_gbps(sharp_s, &sharp_bw)))
    return sharp ? fail(err, "--sharp-bw must be a bandwidth in GB/s above 0 (got '%s')", sharp_s)
                 : fail(err, "--sharp-bw '%s' needs --sharp (the switches reduce)", sharp_s);
  o.sharp = sharp;
  if (tuner_s != NULL && !sp_tuner_parse(tuner_s, &o.tuner))
    return fail(err, "--nccl-tuner must be %s (got '%s')", sp_tuner_list(), tuner_s);
  o.sharp_bw = sharp_bw * 1e9;
  if (pod_sus != G_MININT && pod_sus < 1)
    return fail(err, "--pod-sus must be >= 1 (got %d)", pod_sus);
  if (su_nodes != G_MININT && su_nodes < 1)
    return fail(err, "--su-nodes must be >= 1 (got %d)", su_nodes);
  o.nvl_bw = nvl_bw * 1e9;
  o.nic_bw = nic_bw * 1e9;
  o.su_nodes = su_nodes == G_MININT ? 0 : su_nodes;
  o.oversubscription = oversub;
  o.nvlink_domain = domain == G_MININT ? 0 : domain;
  o.nics_per_node = nics == G_MININT ? 0 : nics;
  o.pod_sus = pod_sus == G_MININT ? 0 : pod_sus;
  o.core_oversubscription = core_oversub;
  if (zones != NULL) {
    if (strcmp(zones, "node") == 0) o.zones = SP_PLATFORM_ZONES_NODE;
    else if (strcmp(zones, "su") == 0) o.zones = SP_PLATFORM_ZONES_SU;
    else if (strcmp(zones, "auto") != 0)
      return fail(err, "--zones must be node, su or auto (got '%s')", zones);
  }
  if (gpu != NULL && !sp_gpu_parse(gpu, &o.gpu, err)) return FALSE;
  o.gpus_per_node = gpn != G_MININT ? gpn : sp_gpu_spec_get(o.gpu)->node_gpus;
  *opts = o;
  if (output != NULL) *output = g_steal_pointer(&out);
  return TRUE;
}

/* The command line of @p head's "Generated by:" line, in the first comment of the
 * file (NULL when there is none). */
static char *generated_by(const char *head, gsize len)
{
  static const char tag[] = "<!--\n  Generated by: spsim platform dgx ";
  const char *end = head + len, *t = g_strstr_len(head, (gssize)len, tag);
  if (t == NULL) return NULL;
  const char *first = g_strstr_len(head, (gssize)len, "<!--");
  if (first != t) return NULL; /* a comment before it: not the generator's header */
  const char *cmd = t + strlen("<!--\n  Generated by: "), *eol = memchr(cmd, '\n', (size_t)(end - cmd));
  return eol != NULL ? g_strndup(cmd, (gsize)(eol - cmd)) : NULL;
}

gboolean sp_platform_args_parse_line(const char *line, sp_platform_opts *opts, GError **err)
{
  int argc = 0;
  g_auto(GStrv) argv = NULL;
  if (!g_shell_parse_argv(line, &argc, &argv, err)) return FALSE;
  if (argc < 2 || strcmp(argv[0], "spsim") != 0) return fail(err, "not a command 'spsim platform ...': %s", line);
  /* "spsim platform dgx ...": the parser takes "platform" for the program's name, and
   * removes what it reads from the array it is given (a copy: argv keeps the strings) */
  g_autofree char **args = g_memdup2(argv + 1, sizeof(char *) * (gsize)argc);
  return sp_platform_args_parse(argc - 1, args, FALSE, opts, NULL, err);
}

gboolean sp_platform_generated(const char *path, sp_platform_opts *opts)
{
  g_autoptr(GMappedFile) map = g_mapped_file_new(path, FALSE, NULL);
  if (map == NULL) return FALSE;
  const char *data = g_mapped_file_get_contents(map);
  gsize len = g_mapped_file_get_length(map);
  if (data == NULL) return FALSE;
  g_autofree char *cmd = generated_by(data, MIN(len, (gsize)4096));
  sp_platform_opts o;
  gboolean ok = cmd != NULL && sp_platform_args_parse_line(cmd, &o, NULL);
  /* every GPU's <host> element alone is over 200 bytes: a file far shorter than its
   * command's platform is not its output (and is not worth generating to compare) */
  if (!ok || (guint64)len < (guint64)o.nodes * (guint64)o.gpus_per_node * 200u) return FALSE;
  g_autofree char *xml = sp_platform_dgx_xml(&o, NULL);
  if (xml == NULL || strlen(xml) != len || memcmp(xml, data, len) != 0) return FALSE;
  *opts = o;
  return TRUE;
}
