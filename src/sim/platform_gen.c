/* Generator of the DGX-style platform family (SimGrid platform XML 4.1). Plain
 * text output: no SimGrid call here. Constants and their sources are in
 * docs/calibration.md; keep the two in step. */
#include "config.h"
#include "platform_gen.h"
#include "spsim/error.h"

#include <string.h>

/* Calibrated presets. Bandwidths are effective per direction (what SimGrid's
 * CM02 model shares), latencies per traversal; see docs/calibration.md. */

/* The DGX H100 node's NVLink4, NVSwitches, eight 400 Gb/s NICs and fabric latencies, as
 * calibrated (docs/calibration.md); the Hopper presets that share them use them all. */
#define DGX_H100_NODE                                                                          \
  .nvl_bw = 450e9, .nvl_lat = 1.3e-6, .nic_bw = 48e9, .nic_lat = 2.0e-6, .leaf_lat = 0.3e-6,   \
  .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6, .coll_lat = 8.4e-6, .nvls = TRUE, .node_gpus = 8

static const sp_gpu_spec specs[SP_GPU_COUNT] = {
  [SP_GPU_H100] = {
    .key = "h100", .model = "H100-SXM5-80GB",
    .flops = 989.4e12, .gpu_mem = 85899345920.0, .mem_bw = 3.35e12,
    DGX_H100_NODE,
  },
  [SP_GPU_A100] = {
    .key = "a100", .model = "A100-SXM4-80GB",
    .flops = 312e12, .gpu_mem = 85899345920.0, .mem_bw = 2.039e12,
    .nvl_bw = 270e9, .nvl_lat = 1.3e-6,
    .nic_bw = 24e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6, .node_gpus = 8,
  },
  /* The H100 of Meta's Grand Teton hosts that torchtitan's benchmarks ran on: 96 GB
   * HBM2e at 2.4 TB/s, NVLink within the host, 400 Gb/s RDMA per GPU, 500 W power
   * limit (pytorch/torchtitan docs/performance.md and
   * benchmarks/llama3_h100_202412_torchtitan.md). The peak is the H100 SXM5's (132
   * SMs at 1830 MHz); the lower power limit is not modelled. */
  [SP_GPU_H100_HBM2E] = {
    .key = "h100-hbm2e", .model = "H100-96GB-HBM2e",
    .flops = 989.4e12, .gpu_mem = 103079215104.0, .mem_bw = 2.4e12,
    DGX_H100_NODE,
  },
  /* DGX B200 (NVIDIA DGX B200 datasheet and user guide, "Introduction to NVIDIA DGX
   * B200 Systems"): 8 B200 with 1,440 GB of HBM3e in all (180 GB each, counted in
   * GiB as the H100's 80 GB) at 64 TB/s (8 TB/s each); 72 PFLOPS FP8 training with
   * sparsity = 4.5 PFLOPS dense FP8 per GPU = 2.25 PFLOPS dense BF16 (HGX B200
   * datasheet: BF16 36 PFLOPS with sparsity for 8 GPUs); NVLink 5 at 1.8 TB/s
   * bidirectional per GPU = 900 GB/s per direction (18 links x 50 GB/s, "NVIDIA
   * Blackwell Architecture Technical Brief"); 8 single-port ConnectX-7 at 400 Gb/s,
   * one per GPU. Effective bandwidths DERIVED, not measured: the H100 preset's
   * fractions of the line rate (NVLink 450 / 450 = 1.0, NIC 48 / 50 = 0.96);
   * latencies the H100's (same NCCL base latencies, same NDR fabric). */
  [SP_GPU_B200] = {
    .key = "b200", .model = "B200-SXM-180GB",
    .flops = 2.25e15, .gpu_mem = 193273528320.0, .mem_bw = 8e12,
    .nvl_bw = 900e9, .nvl_lat = 1.3e-6,
    .nic_bw = 48e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6, .nvls = TRUE, .node_gpus = 8,
  },
  /* DGX GB200 NVL72 (NVIDIA GB200 NVL72 datasheet): 72 Blackwell GPUs in one NVLink
   * domain (130 TB/s = 72 x 1.8 TB/s), 18 compute trays of 2 GB200 superchips (4
   * GPUs); 360 PFLOPS FP16/BF16 with sparsity = 2.5 PFLOPS dense BF16 per GPU (at
   * 1.2 kW, against the B200's 1 kW); 13.4 TB HBM3e at 576 TB/s = 186 GB (GiB, as
   * above) and 8 TB/s per GPU. Network: one ConnectX-7 400 Gb/s NIC per GPU (DGX
   * SuperPOD with DGX GB200 reference architecture, NDR InfiniBand compute fabric),
   * whose scalable unit is 8 DGX GB200 racks = 144 trays.
   * Effective bandwidths and latencies derived as for b200; the NVLink latency of a
   * route through the NVLink Switch trays is assumed to equal a node's NVSwitch. */
  [SP_GPU_GB200] = {
    .key = "gb200", .model = "GB200-NVL72-186GB",
    .flops = 2.5e15, .gpu_mem = 199715979264.0, .mem_bw = 8e12,
    .nvl_bw = 900e9, .nvl_lat = 1.3e-6,
    .nic_bw = 48e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6, .nvls = TRUE, .node_gpus = 4, .nvl_domain = 72, .su_nodes = 144,
  },
  /* DGX H200 (NVIDIA H200 Tensor Core GPU datasheet; NVIDIA DGX H200 datasheet): the
   * H100 SXM's compute (GH100, 989.4 TFLOP/s dense BF16: 1,979 with sparsity, halved)
   * with 141 GB of HBM3e at 4.8 TB/s (counted in GiB as the H100's 80 GB); the DGX H100's
   * NVLink4 (900 GB/s bidirectional per GPU, 4 NVSwitches, NVLink SHARP) and 8 single-port
   * ConnectX-7 400 Gb/s NICs. Effective NVLink and NIC bandwidths and every latency are
   * the H100 preset's: the same links, switches and NICs. The kernel model prices its
   * GEMMs with the H100 constants, which were fitted on an H200 (bench/gpu/h200-gemm.csv). */
  [SP_GPU_H200] = {
    .key = "h200", .model = "H200-SXM-141GB",
    .flops = 989.4e12, .gpu_mem = 151397597184.0, .mem_bw = 4.8e12,
    DGX_H100_NODE,
  },
  [SP_GPU_TOY] = {
    .key = "toy", .model = "toy-gpu",
    .flops = 100e12, .gpu_mem = 17179869184.0, .mem_bw = 1e12,
    .nvl_bw = 100e9, .nvl_lat = 1e-6,
    .nic_bw = 10e9, .nic_lat = 5e-6,
    .leaf_lat = 1e-6, .spine_lat = 1e-6, .su_up_lat = 1e-6,
    .coll_lat = 10e-6, .node_gpus = 8,
  },
};

void sp_platform_opts_init(sp_platform_opts *opts)
{
  memset(opts, 0, sizeof *opts); /* every option off unless set below */
  opts->nodes = 1;
  opts->gpus_per_node = 8;
  opts->gpu = SP_GPU_H100;
  opts->charge_local = FALSE;
  opts->nvl_bw = 0;
  opts->nic_bw = 0;
  opts->su_nodes = 0;
  opts->oversubscription = 1.0;
  opts->nvlink_domain = 0;
  opts->nics_per_node = 0;
  opts->pod_sus = 0;
  opts->core_oversubscription = 1.0;
  opts->mix_count = 0;
  opts->zones = SP_PLATFORM_ZONES_AUTO;
}

gboolean sp_platform_mix_parse(const char *s, sp_platform_opts *o, GError **err)
{
  g_auto(GStrv) parts = g_strsplit(s != NULL ? s : "", ",", -1);
  const guint n = g_strv_length(parts);
  if (n == 0 || (n == 1 && parts[0][0] == '\0')) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: empty list (give KIND:N[,KIND:N...], e.g. h100:2,a100:2)");
    return FALSE;
  }
  if (n > SP_GPU_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: %u entries, more than the %d presets (each preset once)", n,
                (int)SP_GPU_COUNT);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    char *colon = strchr(parts[i], ':');
    if (colon == NULL) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: '%s' is not KIND:N (e.g. a100:2)", parts[i]);
      return FALSE;
    }
    *colon = '\0';
    sp_gpu_kind k;
    if (!sp_gpu_parse(parts[i], &k, err)) {
      g_prefix_error(err, "--mix: ");
      return FALSE;
    }
    for (guint j = 0; j < i; j++)
      if (o->mix_gpu[j] == k) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: preset %s given twice (give each preset once with its node count)",
                    specs[k].key);
        return FALSE;
      }
    const char *c = colon + 1;
    char *end = NULL;
    guint64 v = 0;
    if (*c < '0' || *c > '9' || (v = g_ascii_strtoull(c, &end, 10), *end != '\0') || v < 1 ||
        v > SP_PLATFORM_MAX_NODES) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: the node count of %s must be a number between 1 and %d (got '%s')",
                  specs[k].key, SP_PLATFORM_MAX_NODES, c);
      return FALSE;
    }
    o->mix_gpu[i] = k;
    o->mix_nodes[i] = (int32_t)v;
  }
  o->mix_count = (int32_t)n;
  o->gpu = o->mix_gpu[0];
  return TRUE;
}

gboolean sp_gpu_parse(const char *s, sp_gpu_kind *out, GError **err)
{
  for (int k = 0; s != NULL && k < SP_GPU_COUNT; k++) {
    if (g_ascii_strcasecmp(s, specs[k].key) == 0) {
      *out = (sp_gpu_kind)k;
      return TRUE;
    }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown GPU '%s' (expected h100, a100, h100-hbm2e, h200, b200, gb200 or toy)",
              s ? s : "(null)");
  return FALSE;
}

const sp_gpu_spec *sp_gpu_spec_get(sp_gpu_kind kind)
{
  if ((int)kind < 0 || kind >= SP_GPU_COUNT) return NULL;
  return &specs[kind];
}

static int digits(int64_t v)
{
  int d = 1;
  while (v >= 10) { v /= 10; d++; }
  return d;
}

static int node_width(int32_t nodes)
{
  int d = digits(nodes > 1 ? nodes - 1 : 0);
  return d < 3 ? 3 : d;
}

char *sp_platform_host_name(int32_t nodes, int32_t node, int32_t gpu)
{
  return g_strdup_printf("node%0*d-gpu%d", node_width(nodes), node, gpu);
}

/* How the nodes group into the platform's zones. A node zone holds one NVLink
 * domain: a DGX node (the default) or several nodes of one NVSwitch fabric (GB200
 * NVL72: 18 trays of 4 GPUs), so the engine's and the what-if's "node" is the
 * NVLink-connected group. NICs are numbered per zone; gpus_per_nic GPUs in a row
 * share one. */
typedef struct {
  int32_t zones;        /* node zones: nodes / nodes_per_zone */
  int32_t zone_gpus;    /* GPUs per zone (the NVLink domain) */
  int32_t zone_nics;    /* NICs per zone */
  int32_t gpus_per_nic; /* GPUs sharing one NIC (1: one NIC per GPU) */
  int32_t nodes_per_zone;
  int w;                /* digits of a zone index */
  const sp_platform_sink *sink; /* elements also go there (NULL: text only) */
} geom;

/* Locale-independent, deterministic number text ("%.6g"). */
static const char *num(char *buf, double v)
{
  return g_ascii_formatd(buf, G_ASCII_DTOSTR_BUF_SIZE, "%.6g", v);
}

/* Link @p id of @p kind (its index and sub-index: see sp_platform_sink): bandwidth in
 * GBps (1e9 bytes/s), latency in us, the text and the sink given the same strings. */
static void put_link(GString *s, const geom *m, sp_plink_kind kind, int32_t index, int32_t sub, const char *id,
                     double bw, double lat, const char *policy)
{
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE];
  g_autofree char *bws = g_strconcat(num(b1, bw / 1e9), "GBps", NULL);
  g_autofree char *lats = g_strconcat(num(b2, lat * 1e6), "us", NULL);
  g_string_append_printf(s, "  <link id=\"%s\" bandwidth=\"%s\" latency=\"%s\" sharing_policy=\"%s\"/>\n", id, bws,
                         lats, policy);
  if (m->sink != NULL) m->sink->link(m->sink->ctx, kind, index, sub, id, bws, lats, policy);
}

/* A FATPIPE's bandwidth: the capacity it stands for (@p sum), but wider than a NIC
 * (@p nic). A FATPIPE caps each flow alone, which the flow's own NIC already does; one
 * only as wide as that NIC binds as well: SimGrid's max-min saturates a FATPIPE as soon
 * as one flow reaches its bandwidth and then holds all of its flows at one level weighted
 * by their routes' latencies (CM02's sharing penalty; SimGrid 3.32 maxmin.cpp), so the
 * flows of longer routes fall below their NIC (measured: a 64-rank ring across two SUs
 * of one-GPU nodes at 86 % of the same ring inside one SU). Twice the NIC never binds. */
static double fat_bw(double sum, double nic)
{
  return sum > nic ? sum : 2.0 * nic;
}

/* A top-zone property, in the text and to the sink. */
static void put_zone_prop(GString *s, const geom *m, const char *key, const char *value)
{
  g_string_append_printf(s, "  <prop id=\"%s\" value=\"%s\"/>\n", key, value);
  if (m->sink != NULL) m->sink->zone_prop(m->sink->ctx, key, value);
}

/* The header's lines for the Blackwell presets, NVLink domains beyond one node and
 * shared NICs ("" otherwise, so that the older presets' text is unchanged). */
static char *domain_notes(const sp_platform_opts *o, const geom *m, gboolean folded)
{
  GString *t = g_string_new("");
  char b[G_ASCII_DTOSTR_BUF_SIZE];
  if (o->gpu == SP_GPU_B200 || o->gpu == SP_GPU_GB200)
    g_string_append(t, "  * Preset b200/gb200: NVLink and NIC bandwidths derived from the line rates\n"
                       "    with the H100 preset's measured fractions, not measured on this GPU.\n");
  if (o->gpu == SP_GPU_H200)
    g_string_append(t, "  * Preset h200: NVLink and NIC bandwidths and latencies are the H100 preset's\n"
                       "    (the same NVLink4, NVSwitch and 400 Gb/s NICs), not measured on this GPU.\n");
  if (m->nodes_per_zone > 1)
    g_string_append_printf(t,
        "  * NVLink domain of %d GPUs = %d nodes of %d: each %s nodeN (hosts\n"
        "    nodeN-gpuG, G = 0..%d, node property = domain index) is one domain with one\n"
        "    non-blocking NVSwitch fabric; GPU G sits in the domain's node G / %d.\n"
        "    gpus_per_node (top zone) is the domain size: the NVLink-connected group.\n",
        m->zone_gpus, m->nodes_per_zone, o->gpus_per_node, folded ? "domain" : "SimGrid zone", m->zone_gpus - 1,
        o->gpus_per_node);
  if (m->zone_nics == 1)
    g_string_append(t, "  * One NIC per node: each FATPIPE (nodeN-rails, leaf, spine) is at least twice\n"
                       "    the NIC's bandwidth. It caps each flow alone, as the flow's NIC does; one\n"
                       "    only as wide as the NIC would bind too (SimGrid holds a saturated FATPIPE's\n"
                       "    flows at one latency-weighted level) and slow the flows of longer routes.\n");
  if (o->pod_sus > 0)
    g_string_append_printf(t,
        "  * Three tiers: pods of %d SU(s), each a star of its SUs around its spine\n"
        "    (podP-spine), joined by a core (link core, FATPIPE); a pod's uplink\n"
        "    (podP-up) carries its NICs' sum / %s (leaf-to-spine x spine-to-core).\n",
        o->pod_sus, num(b, o->oversubscription * o->core_oversubscription));
  if (m->gpus_per_nic > 1)
    g_string_append_printf(t,
        "  * %d NIC(s) per node: GPUs G of a zone share NIC nodeN-nicJ, J = G / %d,\n"
        "    so %d GPUs divide its bandwidth when they send across nodes together.\n",
        o->gpus_per_node / m->gpus_per_nic, m->gpus_per_nic, m->gpus_per_nic);
  return g_string_free(t, FALSE);
}

/* The header's lines of a mixed cluster: each preset's nodes and constants. */
static char *mix_notes(const sp_platform_opts *o, const sp_gpu_spec *mspec)
{
  GString *t = g_string_new("  * Mixed cluster (--mix): the figures above are node 0's preset's; each node\n"
                            "    has its own preset's host speed, gpu, gpu_mem, hbm_bw, coll_latency,\n"
                            "    NVLink ports and NICs (nodeN-nicG and nodeN-rails at its own NIC rate; an\n"
                            "    SU's uplink carries the sum of its nodes' NICs). The leaf, spine and core\n"
                            "    (FATPIPE) take the fastest NIC, so only a flow's own NICs bound it; switch\n"
                            "    and cable latencies are the slowest preset's.\n");
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE], b3[G_ASCII_DTOSTR_BUF_SIZE];
  for (int32_t i = 0, first = 0; i < o->mix_count; first += o->mix_nodes[i], i++)
    g_string_append_printf(t, "    nodes %d-%d: %s (%s), %s Tflop/s, NVLink %s GB/s, NIC %s GB/s\n", first,
                           first + o->mix_nodes[i] - 1, mspec[i].key, mspec[i].model, num(b1, mspec[i].flops / 1e12),
                           num(b2, mspec[i].nvl_bw / 1e9), num(b3, mspec[i].nic_bw / 1e9));
  return g_string_free(t, FALSE);
}

static void put_header(GString *s, const sp_platform_opts *o, const sp_gpu_spec *g, const geom *m,
                       int32_t n_su, int32_t per, const char *origin, const sp_gpu_spec *mspec, gboolean folded)
{
  /* the options beyond the preset, as given on the command line (none: the text of
   * the preset's platform is unchanged) */
  char v[G_ASCII_DTOSTR_BUF_SIZE];
  GString *ex = g_string_new("");
  if (o->nvl_bw > 0) g_string_append_printf(ex, " --nvlink-bw %s", num(v, o->nvl_bw / 1e9));
  if (o->nic_bw > 0) g_string_append_printf(ex, " --nic-bw %s", num(v, o->nic_bw / 1e9));
  if (o->su_nodes > 0) g_string_append_printf(ex, " --su-nodes %d", o->su_nodes);
  char v2[G_ASCII_DTOSTR_BUF_SIZE];
  if (o->oversubscription > 1.0 && !(o->core_oversubscription > 1.0))
    g_string_append_printf(ex, " --oversubscription %s", num(v, o->oversubscription));
  if (o->nvlink_domain > 0) g_string_append_printf(ex, " --nvlink-domain %d", o->nvlink_domain);
  if (o->nics_per_node > 0) g_string_append_printf(ex, " --nics-per-node %d", o->nics_per_node);
  if (o->pod_sus > 0) g_string_append_printf(ex, " --pod-sus %d", o->pod_sus);
  if (o->zones != SP_PLATFORM_ZONES_AUTO)
    g_string_append(ex, o->zones == SP_PLATFORM_ZONES_SU ? " --zones su" : " --zones node");
  if (o->sharp) g_string_append(ex, " --sharp");
  if (o->sharp && o->sharp_bw > 0) g_string_append_printf(ex, " --sharp-bw %s", num(v, o->sharp_bw / 1e9));
  if (o->tuner != SP_TUNER_NONE) g_string_append_printf(ex, " --nccl-tuner %s", sp_tuner_name(o->tuner));
  if (o->core_oversubscription > 1.0)
    g_string_append_printf(ex, " --oversubscription %s,%s", num(v, o->oversubscription),
                           g_ascii_formatd(v2, sizeof v2, "%.6g", o->core_oversubscription));
  g_autofree char *extra = g_string_free(ex, ex->len == 0);
  g_autofree char *bisection =
    o->oversubscription > 1.0
      ? g_strdup_printf("  * Fat tree, %s:1 oversubscribed from leaf to spine: a leaf level per SU (links\n"
                        "    suK-leaf, FATPIPE, switch hop latency) whose uplink capacity (suK-up) is the\n"
                        "    sum of its NICs divided by %s,\n", num(v, o->oversubscription), v)
      : g_strdup("  * Fat tree with full bisection: a leaf level per SU (links suK-leaf, FATPIPE,\n"
                 "    switch hop latency) whose uplink capacity (suK-up) equals the sum of its\n");
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE], b3[G_ASCII_DTOSTR_BUF_SIZE],
      b4[G_ASCII_DTOSTR_BUF_SIZE], b5[G_ASCII_DTOSTR_BUF_SIZE], b6[G_ASCII_DTOSTR_BUF_SIZE];
  int32_t gpn = o->gpus_per_node;
  g_autofree char *notes = domain_notes(o, m, folded);
  g_autofree char *mixn = mspec != NULL ? mix_notes(o, mspec) : NULL;
  g_autofree char *gpuopt = NULL;
  if (mspec != NULL) {
    GString *t = g_string_new("--mix ");
    for (int32_t i = 0; i < o->mix_count; i++)
      g_string_append_printf(t, "%s%s:%d", i ? "," : "", mspec[i].key, o->mix_nodes[i]);
    gpuopt = g_string_free(t, FALSE);
  } else {
    gpuopt = g_strconcat("--gpu ", g->key, NULL);
  }
  static const char routing_nodes[] =
      "  * Routing is computed, not listed: each node is a Floyd zone (GPU <->\n"
      "    nodeN-nvswitch over its NVLink ports; GPU -> nodeN-tx and nodeN-rx -> GPU\n"
      "    over its NIC), each SU a Floyd star of nodes around its leaf (node -> leaf:\n"
      "    nodeN-rails, suK-leaf; leaf -> node: nodeN-rails, a FATPIPE of the node's\n"
      "    NICs' sum with no latency of its own, so never the bottleneck), the top a\n"
      "    Dijkstra star of SUs around the spine (up: suK-up UP, spine; down: suJ-up\n"
      "    DOWN, suJ-leaf). Links are declared at the top level for fast loading.\n";
  static const char routing_folded[] =
      "  * Routing is computed, not listed: each SU is one DijkstraCache zone holding\n"
      "    its nodes' GPUs and routers (no zone per node: SimGrid's loading work grows\n"
      "    with zones x hosts), with routes between neighbours only: GPU <->\n"
      "    nodeN-nvswitch over its NVLink ports, GPU -> nodeN-tx and nodeN-rx -> GPU\n"
      "    over its NIC, nodeN-tx -> suK-gw over nodeN-rails and suK-leaf, suK-gw ->\n"
      "    nodeN-rx over nodeN-rails (a FATPIPE of the node's NICs' sum with no latency\n"
      "    of its own, so never the bottleneck). The route of fewest links is the\n"
      "    only one: NVLink within a node, the GPUs' own NICs across nodes. The top is\n"
      "    a Dijkstra star of SUs around the spine (up: suK-up UP, spine; down: suJ-up\n"
      "    DOWN, suJ-leaf). Links are declared at the top level for fast loading.\n";
  g_string_append(s, "<?xml version='1.0'?>\n"
                     "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                     "<platform version=\"4.1\">\n");
  if (origin != NULL)
    g_string_append_printf(s, "<!--\n  %s\n-->\n", origin);
  g_string_append_printf(s,
      "<!--\n"
      "  Generated by: spsim platform dgx --nodes %d %s --gpus-per-node %d%s%s\n"
      "  %d node(s) x %d %s = %d GPUs (one SimGrid host per GPU), %d scalable unit(s)\n"
      "  of up to %d nodes. Sources of every constant: docs/calibration.md.\n"
      "\n"
      "  Assumptions:\n"
      "  * Host speed = dense BF16 peak of the GPU (%s Tflop/s).\n"
      "  * NVSwitch is non-blocking: a GPU pair inside a node crosses the sender's\n"
      "    NVLink ports (nodeN-nvlG, UP) and the receiver's (DOWN). %s GB/s per GPU and\n"
      "    direction is the effective figure calibrated so that spsim's ring collectives\n"
      "    reproduce the published NCCL bus bandwidths; %s us per port traversal.\n"
      "  * Each GPU has its own NIC (nodeN-nicG, rail G): %s GB/s effective per\n"
      "    direction (NCCL-measured, not line rate), %s us per traversal (NIC, PCIe,\n"
      "    proxy). Inter-node traffic of a GPU always leaves through its own NIC.\n"
      "%s"
      "    NICs, and a non-blocking spine (link spine, FATPIPE). Rails are aggregated\n"
      "    per SU: the model is exact for traffic that is balanced across rails.\n"
      "%s"
      "  * Network model CM02 with unit latency/bandwidth factors, no TCP window\n"
      "    bound and no cross-traffic: an uncontended message of S bytes takes\n"
      "    sum(route latencies) + S / min(route bandwidths); contention is max-min fair.\n"
      "  * Local steps (the reduction after each ring receive) cost nothing: NCCL fuses\n"
      "    them into its copy kernels, overlapped with the NVLink traffic. Generated\n"
      "    with --charge-local, hosts also get mem_bw and spsim charges local steps\n"
      "    bytes / mem_bw, serially (this lowers ring busbw; docs/calibration.md).\n"
      "  * Every collective costs each rank %s us once, at its start (coll_latency:\n"
      "    NCCL's base latency per collective, launch and protocol set-up).\n"
      "%s"
      "  * Host properties: gpu (model), gpu_mem (bytes), hbm_bw (HBM bytes/s),\n"
      "    [mem_bw,] node (node index), local_rank (GPU index in the node),\n"
      "    coll_latency. Hosts are declared node-major: declaration order = name\n"
      "    order = rank order.\n"
      "%s%s%s"
      "-->\n",
      o->nodes, gpuopt, gpn, o->charge_local ? " --charge-local" : "", extra ? extra : "", o->nodes, gpn,
      mspec != NULL ? "GPUs of mixed presets (below)" : g->model,
      o->nodes * gpn, n_su, per,
      num(b1, g->flops / 1e12), num(b2, g->nvl_bw / 1e9), num(b3, g->nvl_lat * 1e6), num(b4, g->nic_bw / 1e9),
      num(b5, g->nic_lat * 1e6), bisection, folded ? routing_folded : routing_nodes, num(b6, g->coll_lat * 1e6),
      g->nvls ? "  * The NVSwitches reduce (NVLink SHARP): top-zone property nvls = 1.\n" : "",
      o->gpu == SP_GPU_TOY ? "  * Preset toy: round numbers for tests, not a real machine.\n" : "", notes,
      mixn ? mixn : "");
  g_string_append(s, "<config>\n"
                     "  <prop id=\"network/model\" value=\"CM02\"/>\n"
                     "  <prop id=\"network/latency-factor\" value=\"1.0\"/>\n"
                     "  <prop id=\"network/bandwidth-factor\" value=\"1.0\"/>\n"
                     "  <prop id=\"network/weight-S\" value=\"0.0\"/>\n"
                     "  <prop id=\"network/TCP-gamma\" value=\"0\"/>\n"
                     "  <prop id=\"network/crosstraffic\" value=\"0\"/>\n"
                     "</config>\n");
}

/* The hosts and routers of node (NVLink domain) @p node (see put_node), at @p indent. */
static void put_hosts(GString *s, const sp_platform_opts *o, const sp_gpu_spec *g, const geom *m, int32_t node,
                      const char *indent)
{
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE];
  const int w = m->w;
  /* each value's text once, for the file and the sink alike */
  g_autofree char *speed = g_strconcat(num(b1, g->flops / 1e12), "Tf", NULL);
  g_autofree char *mem = g_strdup_printf("%.0f", g->gpu_mem), *hbm = g_strdup_printf("%.0f", g->mem_bw);
  g_autofree char *coll = g_strconcat(num(b2, g->coll_lat * 1e6), "us", NULL), *nodes = g_strdup_printf("%d", node);
  for (int32_t k = 0; k < m->zone_gpus; k++) {
    g_autofree char *id = g_strdup_printf("node%0*d-gpu%d", w, node, k), *lr = g_strdup_printf("%d", k);
    /* mem_bw makes the engine charge local steps (reductions, copies) at HBM speed */
    const char *props[] = { "gpu", g->model, "gpu_mem", mem, "hbm_bw", hbm, "mem_bw", hbm, "node", nodes,
                            "local_rank", lr, "coll_latency", coll, NULL };
    if (!o->charge_local) /* no mem_bw: drop its pair */
      memmove(&props[6], &props[8], sizeof props - 8 * sizeof props[0]);
    g_string_append_printf(s, "%s<host id=\"%s\" speed=\"%s\">", indent, id, speed);
    for (const char *const *p = props; p[0] != NULL; p += 2)
      g_string_append_printf(s, "<prop id=\"%s\" value=\"%s\"/>", p[0], p[1]);
    g_string_append(s, "</host>\n");
    if (m->sink != NULL) m->sink->host(m->sink->ctx, node, k, id, speed, props);
  }
  g_string_append_printf(s, "%s<router id=\"node%0*d-nvswitch\"/><router id=\"node%0*d-tx\"/><router id=\"node%0*d-rx\"/>\n",
                         indent, w, node, w, node, w, node);
}

/* One node: its GPUs, the NVSwitch and the two NIC-side gateways. Floyd finds
 * GPU a -> GPU b through the NVSwitch (nvl a UP, nvl b DOWN) and GPU a -> the
 * node's exit through its own NIC; "tx" has no way back in and "rx" no way out,
 * so no GPU pair can take a path through the NICs. The links are declared at
 * the top level (put_node_links). */
static void put_node(GString *s, const sp_platform_opts *o, const sp_gpu_spec *g, const geom *m, int32_t node)
{
  int w = m->w;
  int32_t gpn = m->zone_gpus;
  g_string_append_printf(s, "    <zone id=\"node%0*d\" routing=\"Floyd\">\n", w, node);
  put_hosts(s, o, g, m, node, "      ");
  for (int32_t k = 0; k < gpn; k++)
    g_string_append_printf(s,
        "      <route src=\"node%0*d-gpu%d\" dst=\"node%0*d-nvswitch\">"
        "<link_ctn id=\"node%0*d-nvl%d\" direction=\"UP\"/></route>\n",
        w, node, k, w, node, w, node, k);
  for (int32_t k = 0; k < gpn; k++)
    g_string_append_printf(s,
        "      <route src=\"node%0*d-gpu%d\" dst=\"node%0*d-tx\" symmetrical=\"NO\">"
        "<link_ctn id=\"node%0*d-nic%d\" direction=\"UP\"/></route>\n"
        "      <route src=\"node%0*d-rx\" dst=\"node%0*d-gpu%d\" symmetrical=\"NO\">"
        "<link_ctn id=\"node%0*d-nic%d\" direction=\"DOWN\"/></route>\n",
        w, node, k, w, node, w, node, k / m->gpus_per_nic, w, node, w, node, k, w, node, k / m->gpus_per_nic);
  g_string_append(s, "    </zone>\n");
}

/* The links of one node: per GPU its NVLink ports and its NIC, and the node's
 * rail cables towards the leaf level (their sum of NICs, latency in the NICs'). */
static void put_node_links(GString *s, const sp_gpu_spec *g, const geom *m, int32_t node)
{
  int w = m->w;
  for (int32_t k = 0; k < m->zone_gpus; k++) {
    g_autofree char *id = g_strdup_printf("node%0*d-nvl%d", w, node, k);
    put_link(s, m, SP_PLINK_NVL, node, k, id, g->nvl_bw, g->nvl_lat, "SPLITDUPLEX");
  }
  for (int32_t k = 0; k < m->zone_nics; k++) {
    g_autofree char *id = g_strdup_printf("node%0*d-nic%d", w, node, k);
    put_link(s, m, SP_PLINK_NIC, node, k, id, g->nic_bw, g->nic_lat, "SPLITDUPLEX");
  }
  g_autofree char *id = g_strdup_printf("node%0*d-rails", w, node);
  put_link(s, m, SP_PLINK_RAILS, node, 0, id, fat_bw(g->nic_bw * m->zone_nics, g->nic_bw), 0.0, "FATPIPE");
}

/* What the scalable units' writers share. */
typedef struct {
  const sp_platform_opts *o;
  const sp_gpu_spec *g;
  const geom *m;
  int32_t zper; /* zones per SU */
  int ws;       /* digits of an SU index */
  const sp_gpu_spec *const *zg; /* mixed cluster: each zone's preset (NULL: g for all) */
  gboolean folded; /* one zone per SU (SP_PLATFORM_ZONES_SU), no node zones */
} su_ctx;

/* The constants of zone @p z's nodes: its own preset's in a mixed cluster. */
static const sp_gpu_spec *zspec(const su_ctx *c, int32_t z)
{
  return c->zg != NULL ? c->zg[z] : c->g;
}

/* The NICs' sum of zones [first, last): a uniform cluster's product (unchanged text),
 * a mixed cluster's sum of each node's own NICs. */
static double nics_sum(const su_ctx *c, int32_t first, int32_t last)
{
  if (c->zg == NULL) return c->g->nic_bw * (last - first) * c->m->zone_nics;
  double sum = 0;
  for (int32_t z = first; z < last; z++) sum += c->zg[z]->nic_bw * c->m->zone_nics;
  return sum;
}

/* The zones [first, last) of SU @p u. */
static void su_zones(const su_ctx *c, int32_t u, int32_t *first, int32_t *last)
{
  *first = u * c->zper;
  *last = MIN(c->m->zones, *first + c->zper);
}

/* The links of SU @p u (its nodes', its leaf level, its uplink), declared in the top
 * zone before the zone that uses them. */
static void put_su_links(GString *s, const su_ctx *c, int32_t u)
{
  const sp_gpu_spec *g = c->g;
  int32_t first, last;
  su_zones(c, u, &first, &last);
  g_autofree char *leaf = g_strdup_printf("su%0*d-leaf", c->ws, u);
  g_string_append_printf(s, "  <!-- scalable unit %d: nodes %d to %d -->\n", u, first, last - 1);
  for (int32_t n = first; n < last; n++) put_node_links(s, zspec(c, n), c->m, n);
  /* FATPIPE: every flow gets the full bandwidth; only the hop latency counts. */
  put_link(s, c->m, SP_PLINK_LEAF, u, 0, leaf, fat_bw(g->nic_bw * c->zper * c->m->zone_nics, g->nic_bw),
           g->leaf_lat, "FATPIPE");
  g_autofree char *up = g_strdup_printf("su%0*d-up", c->ws, u);
  put_link(s, c->m, SP_PLINK_SU_UP, u, 0, up, nics_sum(c, first, last) / c->o->oversubscription, g->su_up_lat,
           "SPLITDUPLEX");
}

/* SU @p u with its nodes folded into one zone (SP_PLATFORM_ZONES_SU): the hosts and
 * routers of every node, the SU's gateway suK-gw, and routes between neighbours only:
 * GPU <-> NVSwitch (nvl G), GPU -> tx (nic UP), rx -> GPU (nic DOWN), tx -> gw (rails,
 * leaf), gw -> rx (rails). DijkstraCache takes the route of fewest links: NVSwitch for
 * a GPU pair of a node (2 links; through the NICs it would take 5), tx, gw, rx across
 * nodes (5 links, the only way: a node's GPUs reach only its NVSwitch and tx). The links
 * and the latencies are those of the node zones; only SimGrid's zone count changes.
 * Dijkstra writes each hop's links in reverse order, hence "leaf, rails" below: the
 * route lists rails before leaf, as the node zones' routes do. */
static void put_su_zone_folded(GString *s, const su_ctx *c, int32_t u)
{
  const int w = c->m->w;
  int32_t first, last;
  su_zones(c, u, &first, &last);
  g_string_append_printf(s, "  <zone id=\"su%0*d\" routing=\"DijkstraCache\">\n", c->ws, u);
  for (int32_t n = first; n < last; n++) put_hosts(s, c->o, zspec(c, n), c->m, n, "    ");
  g_string_append_printf(s, "    <router id=\"su%0*d-gw\"/>\n", c->ws, u);
  for (int32_t n = first; n < last; n++) {
    for (int32_t k = 0; k < c->m->zone_gpus; k++) {
      const int32_t nic = k / c->m->gpus_per_nic;
      g_string_append_printf(s,
          "    <route src=\"node%0*d-gpu%d\" dst=\"node%0*d-nvswitch\">"
          "<link_ctn id=\"node%0*d-nvl%d\" direction=\"UP\"/></route>\n"
          "    <route src=\"node%0*d-gpu%d\" dst=\"node%0*d-tx\" symmetrical=\"NO\">"
          "<link_ctn id=\"node%0*d-nic%d\" direction=\"UP\"/></route>\n"
          "    <route src=\"node%0*d-rx\" dst=\"node%0*d-gpu%d\" symmetrical=\"NO\">"
          "<link_ctn id=\"node%0*d-nic%d\" direction=\"DOWN\"/></route>\n",
          w, n, k, w, n, w, n, k, w, n, k, w, n, w, n, nic, w, n, w, n, k, w, n, nic);
    }
    g_string_append_printf(s,
        "    <route src=\"node%0*d-tx\" dst=\"su%0*d-gw\" symmetrical=\"NO\">"
        "<link_ctn id=\"su%0*d-leaf\"/><link_ctn id=\"node%0*d-rails\"/></route>\n"
        "    <route src=\"su%0*d-gw\" dst=\"node%0*d-rx\" symmetrical=\"NO\">"
        "<link_ctn id=\"node%0*d-rails\"/></route>\n",
        w, n, c->ws, u, c->ws, u, w, n, c->ws, u, w, n, w, n);
  }
  g_string_append(s, "  </zone>\n");
}

/* SU @p u: a star of node zones around its leaf level. The leaf hop is charged on
 * the way in (node -> leaf), so a node pair crosses it once. */
static void put_su_zone(GString *s, const su_ctx *c, int32_t u)
{
  const int w = c->m->w;
  int32_t first, last;
  if (c->folded) {
    put_su_zone_folded(s, c, u);
    return;
  }
  su_zones(c, u, &first, &last);
  g_autofree char *gw = g_strdup_printf("su%0*d-gw", c->ws, u);
  g_autofree char *leaf = g_strdup_printf("su%0*d-leaf", c->ws, u);
  g_string_append_printf(s, "  <zone id=\"su%0*d\" routing=\"Floyd\">\n", c->ws, u);
  for (int32_t n = first; n < last; n++) put_node(s, c->o, zspec(c, n), c->m, n);
  g_string_append_printf(s, "    <zone id=\"%s\" routing=\"None\"><router id=\"%s\"/></zone>\n", leaf, gw);
  for (int32_t n = first; n < last; n++)
    g_string_append_printf(s,
        "    <zoneRoute src=\"node%0*d\" dst=\"%s\" gw_src=\"node%0*d-tx\" gw_dst=\"%s\" symmetrical=\"NO\">"
        "<link_ctn id=\"node%0*d-rails\"/><link_ctn id=\"%s\"/></zoneRoute>\n"
        "    <zoneRoute src=\"%s\" dst=\"node%0*d\" gw_src=\"%s\" gw_dst=\"node%0*d-rx\" symmetrical=\"NO\">"
        "<link_ctn id=\"node%0*d-rails\"/></zoneRoute>\n",
        w, n, leaf, w, n, gw, w, n, leaf, leaf, w, n, gw, w, n, w, n);
  g_string_append(s, "  </zone>\n");
}

/* SU @p u <-> its spine (zone and link @p spine, router @p spine-gw). Up: the SU's
 * uplink and the spine hop; down: the uplink and the SU's leaf hop. */
static void put_su_routes(GString *s, const su_ctx *c, int32_t u, const char *spine)
{
  const int ws = c->ws;
  g_string_append_printf(s,
      "  <zoneRoute src=\"su%0*d\" dst=\"%s\" gw_src=\"su%0*d-gw\" gw_dst=\"%s-gw\" symmetrical=\"NO\">"
      "<link_ctn id=\"su%0*d-up\" direction=\"UP\"/><link_ctn id=\"%s\"/></zoneRoute>\n"
      "  <zoneRoute src=\"%s\" dst=\"su%0*d\" gw_src=\"%s-gw\" gw_dst=\"su%0*d-gw\" symmetrical=\"NO\">"
      "<link_ctn id=\"su%0*d-up\" direction=\"DOWN\"/><link_ctn id=\"su%0*d-leaf\"/></zoneRoute>\n",
      ws, u, spine, ws, u, spine, ws, u, spine, spine, ws, u, spine, ws, u, ws, u, ws, u);
}

/* Three tiers (--pod-sus): pods of pod_sus SUs, each a DijkstraCache star of its SUs
 * around its spine zone "podP-spine" (router podP-spine-gw, FATPIPE link podP-spine),
 * and the top a star of pods around the core (zone and FATPIPE link "core"). A pod's
 * uplink "podP-up" (SPLITDUPLEX, cable latency) carries its NICs' sum divided by both
 * ratios (its spines' downlinks are the leaves' uplinks). Routes across pods: ..., suK-up
 * UP, podP-spine, podP-up UP, core, podQ-up DOWN, podQ-spine, suJ-up DOWN, suJ-leaf, ... */
static void put_pods(GString *s, const su_ctx *c, int32_t n_su)
{
  const sp_gpu_spec *g = c->g;
  const int32_t ps = c->o->pod_sus, n_pod = (n_su + ps - 1) / ps;
  const int wp = digits(n_pod > 1 ? n_pod - 1 : 0);
  g_string_append(s, "  <zone id=\"core\" routing=\"None\"><router id=\"core-gw\"/></zone>\n");
  put_link(s, c->m, SP_PLINK_CORE, 0, 0, "core", fat_bw(g->nic_bw * c->m->zones * c->m->zone_nics, g->nic_bw),
           g->spine_lat, "FATPIPE");
  for (int32_t p = 0; p < n_pod; p++) {
    int32_t su0 = p * ps, su1 = MIN(n_su, su0 + ps); /* SUs [su0, su1) */
    int32_t z0, z1, zend;
    su_zones(c, su0, &z0, &z1);
    su_zones(c, su1 - 1, &z1, &zend);
    g_autofree char *spine = g_strdup_printf("pod%0*d-spine", wp, p);
    g_autofree char *up = g_strdup_printf("pod%0*d-up", wp, p);
    for (int32_t u = su0; u < su1; u++) put_su_links(s, c, u);
    double pod_bw = nics_sum(c, z0, zend);
    put_link(s, c->m, SP_PLINK_POD_SPINE, p, 0, spine, fat_bw(pod_bw, g->nic_bw), g->spine_lat, "FATPIPE");
    put_link(s, c->m, SP_PLINK_POD_UP, p, 0, up, pod_bw / (c->o->oversubscription * c->o->core_oversubscription),
             g->su_up_lat,
             "SPLITDUPLEX");
    g_string_append_printf(s, "  <zone id=\"pod%0*d\" routing=\"DijkstraCache\">\n", wp, p);
    g_string_append_printf(s, "  <zone id=\"%s\" routing=\"None\"><router id=\"%s-gw\"/></zone>\n", spine, spine);
    for (int32_t u = su0; u < su1; u++) put_su_zone(s, c, u);
    for (int32_t u = su0; u < su1; u++) put_su_routes(s, c, u, spine);
    g_string_append(s, "  </zone>\n");
  }
  for (int32_t p = 0; p < n_pod; p++)
    g_string_append_printf(s,
        "  <zoneRoute src=\"pod%0*d\" dst=\"core\" gw_src=\"pod%0*d-spine-gw\" gw_dst=\"core-gw\" symmetrical=\"NO\">"
        "<link_ctn id=\"pod%0*d-up\" direction=\"UP\"/><link_ctn id=\"core\"/></zoneRoute>\n"
        "  <zoneRoute src=\"core\" dst=\"pod%0*d\" gw_src=\"core-gw\" gw_dst=\"pod%0*d-spine-gw\" symmetrical=\"NO\">"
        "<link_ctn id=\"pod%0*d-up\" direction=\"DOWN\"/><link_ctn id=\"pod%0*d-spine\"/></zoneRoute>\n",
        wp, p, wp, p, wp, p, wp, p, wp, p, wp, p, wp, p);
}

/* The zones of @p o (see geom) and the nodes per SU, checked: the NVLink domain is
 * whole nodes and the nodes and SUs are whole domains; the NICs divide a node's GPUs. */
static gboolean resolve_geom(const sp_platform_opts *o, const sp_gpu_spec *g, geom *m, int32_t *per, GError **err)
{
  const int32_t gpn = o->gpus_per_node;
  if (o->nvlink_domain < 0 || o->nvlink_domain > SP_PLATFORM_MAX_NVLINK_DOMAIN) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--nvlink-domain must be between 1 and %d GPUs (got %d)",
                SP_PLATFORM_MAX_NVLINK_DOMAIN, o->nvlink_domain);
    return FALSE;
  }
  const int32_t dom = o->nvlink_domain > 0 ? o->nvlink_domain : g->nvl_domain > 0 ? g->nvl_domain : gpn;
  if (dom % gpn != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--nvlink-domain %d is not a whole number of nodes of %d GPUs: give a multiple of --gpus-per-node%s",
                dom, gpn, o->nvlink_domain > 0 ? "" : " (the domain is the preset's: set --nvlink-domain)");
    return FALSE;
  }
  m->nodes_per_zone = dom / gpn;
  if (o->nodes % m->nodes_per_zone != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--nodes %d is not a whole number of NVLink domains of %d nodes (%d GPUs): give a multiple of %d "
                "or a smaller --nvlink-domain", o->nodes, m->nodes_per_zone, dom, m->nodes_per_zone);
    return FALSE;
  }
  const int32_t nics = o->nics_per_node > 0 ? o->nics_per_node : gpn;
  if (o->nics_per_node < 0 || o->nics_per_node > gpn || gpn % nics != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--nics-per-node must divide --gpus-per-node %d so that GPUs share NICs evenly (got %d)", gpn,
                o->nics_per_node);
    return FALSE;
  }
  m->zones = o->nodes / m->nodes_per_zone;
  m->zone_gpus = dom;
  m->gpus_per_nic = gpn / nics;
  m->zone_nics = nics * m->nodes_per_zone;
  m->w = node_width(m->zones);
  *per = o->su_nodes > 0 ? o->su_nodes : g->su_nodes > 0 ? g->su_nodes : SP_PLATFORM_NODES_PER_SU;
  if (*per % m->nodes_per_zone != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--su-nodes %d is not a whole number of NVLink domains of %d nodes: give a multiple of %d", *per,
                m->nodes_per_zone, m->nodes_per_zone);
    return FALSE;
  }
  return TRUE;
}

/* A mixed cluster's presets: known, each once, their nodes summing to --nodes, all of
 * --gpus-per-node GPUs in one-node NVLink domains (a GB200 tray of 4 GPUs in a 72-GPU
 * domain has no common zone with an 8-GPU node). Fills @p mspec (each preset's
 * constants, with the bandwidth overrides) and @p fabric (see the caller). */
static gboolean check_mix(const sp_platform_opts *o, const sp_gpu_spec *custom, sp_gpu_spec *mspec,
                          sp_gpu_spec *fabric, GError **err)
{
  if (custom != NULL || o->mix_count > SP_GPU_COUNT || o->nvlink_domain > 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: %s",
                custom != NULL ? "calibrated constants apply to one preset: mix presets only"
                : o->nvlink_domain > 0 ? "--nvlink-domain cannot be combined with a mixed cluster (one-node domains only)"
                : "more entries than presets");
    return FALSE;
  }
  int64_t sum = 0;
  for (int32_t i = 0; i < o->mix_count; i++) {
    const sp_gpu_spec *p = sp_gpu_spec_get(o->mix_gpu[i]);
    if (p == NULL || o->mix_nodes[i] < 1) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix: entry %d is not a known preset with >= 1 node", i + 1);
      return FALSE;
    }
    const sp_gpu_spec *p0 = sp_gpu_spec_get(o->mix_gpu[0]);
    if (p->node_gpus != p0->node_gpus || p->nvl_domain > 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "--mix: %s has %d GPUs per node%s, %s %d: mix presets with the same node size and one-node "
                  "NVLink domains (gb200 cannot be mixed)",
                  p->key, p->node_gpus, p->nvl_domain > 0 ? " in a multi-node NVLink domain" : "", p0->key,
                  p0->node_gpus);
      return FALSE;
    }
    sum += o->mix_nodes[i];
    mspec[i] = *p;
    if (o->nvl_bw > 0) mspec[i].nvl_bw = o->nvl_bw;
    if (o->nic_bw > 0) mspec[i].nic_bw = o->nic_bw;
    if (i == 0) {
      *fabric = mspec[0];
      continue;
    }
    fabric->leaf_lat = MAX(fabric->leaf_lat, p->leaf_lat);
    fabric->spine_lat = MAX(fabric->spine_lat, p->spine_lat);
    fabric->su_up_lat = MAX(fabric->su_up_lat, p->su_up_lat);
    fabric->nic_bw = MAX(fabric->nic_bw, mspec[i].nic_bw);
    fabric->nvls = fabric->nvls && p->nvls;
  }
  if (sum != o->nodes) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--mix gives %" G_GINT64_FORMAT " node(s) but --nodes is %d: "
                "drop --nodes or make it the sum", sum, o->nodes);
    return FALSE;
  }
  return TRUE;
}

char *sp_platform_dgx_xml(const sp_platform_opts *o, GError **err)
{
  return sp_platform_dgx_xml_spec(o, NULL, NULL, err);
}

char *sp_platform_dgx_xml_spec(const sp_platform_opts *o, const sp_gpu_spec *custom,
                               const char *origin, GError **err)
{
  return sp_platform_dgx_emit(o, custom, origin, NULL, err);
}

char *sp_platform_dgx_emit(const sp_platform_opts *o, const sp_gpu_spec *custom, const char *origin,
                           const sp_platform_sink *sink, GError **err)
{
  if (o->nodes < 1 || o->nodes > SP_PLATFORM_MAX_NODES) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--nodes must be between 1 and %d (got %d)",
                SP_PLATFORM_MAX_NODES, o->nodes);
    return NULL;
  }
  if (o->gpus_per_node < 1 || o->gpus_per_node > SP_PLATFORM_MAX_GPUS_PER_NODE) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--gpus-per-node must be between 1 and %d (got %d)",
                SP_PLATFORM_MAX_GPUS_PER_NODE, o->gpus_per_node);
    return NULL;
  }
  const sp_gpu_spec *base = custom != NULL ? custom : sp_gpu_spec_get(o->gpu);
  if (base == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown GPU preset %d", (int)o->gpu);
    return NULL;
  }
  if (!(o->nvl_bw >= 0 && o->nvl_bw < 1e15) || !(o->nic_bw >= 0 && o->nic_bw < 1e15)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--%s must be a bandwidth in GB/s above 0 and below 10^6",
                !(o->nvl_bw >= 0 && o->nvl_bw < 1e15) ? "nvlink-bw" : "nic-bw");
    return NULL;
  }
  if (o->su_nodes < 0 || o->su_nodes > SP_PLATFORM_MAX_NODES) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--su-nodes must be between 1 and %d (got %d)",
                SP_PLATFORM_MAX_NODES, o->su_nodes);
    return NULL;
  }
  if (!(o->oversubscription >= 1.0 && o->oversubscription <= SP_PLATFORM_MAX_OVERSUBSCRIPTION)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--oversubscription must be between 1 (full bisection) and %g (got %g)",
                SP_PLATFORM_MAX_OVERSUBSCRIPTION, o->oversubscription);
    return NULL;
  }
  if (o->pod_sus < 0 || o->pod_sus > SP_PLATFORM_MAX_NODES) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "--pod-sus must be between 1 and %d SUs (got %d)",
                SP_PLATFORM_MAX_NODES, o->pod_sus);
    return NULL;
  }
  if (!(o->core_oversubscription >= 1.0 && o->core_oversubscription <= SP_PLATFORM_MAX_OVERSUBSCRIPTION)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--oversubscription: the spine-to-core ratio must be between 1 and %g (got %g)",
                SP_PLATFORM_MAX_OVERSUBSCRIPTION, o->core_oversubscription);
    return NULL;
  }
  if (o->core_oversubscription > 1.0 && o->pod_sus == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "--oversubscription: a spine-to-core ratio needs a core tier: add --pod-sus N (SUs per pod)");
    return NULL;
  }
  sp_gpu_spec spec = *base;
  if (o->nvl_bw > 0) spec.nvl_bw = o->nvl_bw;
  if (o->nic_bw > 0) spec.nic_bw = o->nic_bw;
  /* a mixed cluster: each preset's constants (with the overrides), and the fabric's in
   * spec: the slowest switch and cable latencies, the fastest NIC (the FATPIPE leaf,
   * spine and core never bound a flow below its own NIC), nvls only if every preset's */
  sp_gpu_spec mspec[SP_GPU_COUNT];
  if (o->mix_count > 0 && !check_mix(o, custom, mspec, &spec, err)) return NULL;
  const sp_gpu_spec *g = &spec;
  geom m;
  int32_t per; /* nodes per SU */
  if (!resolve_geom(o, g, &m, &per, err)) return NULL;
  m.sink = sink;
  g_autofree const sp_gpu_spec **zg = NULL;
  if (o->mix_count > 0) {
    zg = g_new(const sp_gpu_spec *, m.zones);
    for (int32_t i = 0, z = 0; i < o->mix_count; i++)
      for (int32_t k = 0; k < o->mix_nodes[i]; k++) zg[z++] = &mspec[i];
  }
  const int32_t n_su = (o->nodes + per - 1) / per;
  const int32_t zper = per / m.nodes_per_zone; /* zones per SU */
  const int ws = digits(n_su > 1 ? n_su - 1 : 0);
  const gboolean folded = o->zones == SP_PLATFORM_ZONES_SU ||
                          (o->zones == SP_PLATFORM_ZONES_AUTO && m.zones > SP_PLATFORM_NODE_ZONES_MAX);
  if (sink != NULL) {
    const sp_platform_shape shape = { .zones = m.zones, .zone_gpus = m.zone_gpus, .gpus_per_nic = m.gpus_per_nic,
                                      .zones_per_su = zper, .sus = n_su, .pod_sus = o->pod_sus,
                                      .folded = folded };
    sink->shape(sink->ctx, &shape);
  }
  GString *s = g_string_sized_new((gsize)o->nodes * (gsize)o->gpus_per_node * 700u + 4096u);
  put_header(s, o, g, &m, n_su, per, origin, o->mix_count > 0 ? mspec : NULL, folded);

  /* Every link is declared in the top zone, just before the zone that uses it:
   * SimGrid 3.32 looks a link name up from the top zone down, through every zone
   * declared before it, so links kept deep inside many zones make loading
   * quadratic in the node count. */
  g_string_append(s, "<zone id=\"cluster\" routing=\"DijkstraCache\">\n");
  char gpz[16];
  g_snprintf(gpz, sizeof gpz, "%d", m.zone_gpus);
  put_zone_prop(s, &m, "gpus_per_node", gpz);
  if (g->nvls)
    put_zone_prop(s, &m, "nvls", "1");
  if (o->tuner != SP_TUNER_NONE) /* the cluster's NCCL tuner plugin (spsim/tuner_plugin.h) */
    put_zone_prop(s, &m, "nccl_tuner", sp_tuner_name(o->tuner));
  if (o->sharp) { /* the switches reduce: NVIDIA Quantum-2 (SHARPv3), NCCL's CollNet */
    char v[G_ASCII_DTOSTR_BUF_SIZE];
    put_zone_prop(s, &m, "sharp", "1");
    if (o->sharp_bw > 0) {
      g_autofree char *bw = g_strconcat(num(v, o->sharp_bw / 1e9), "GBps", NULL);
      put_zone_prop(s, &m, "sharp_bw", bw);
    }
  }
  su_ctx c = { .o = o, .g = g, .m = &m, .zper = zper, .ws = ws, .zg = (const sp_gpu_spec *const *)zg,
               .folded = folded };
  if (o->pod_sus > 0) {
    put_pods(s, &c, n_su);
  } else {
    /* (a zone first: SimGrid's parser takes a zone that starts with a link for one
     * that holds hosts, not zones) */
    g_string_append(s, "  <zone id=\"spine\" routing=\"None\"><router id=\"spine-gw\"/></zone>\n");
    put_link(s, &m, SP_PLINK_SPINE, 0, 0, "spine", fat_bw(g->nic_bw * m.zones * m.zone_nics, g->nic_bw), g->spine_lat,
             "FATPIPE");
    for (int32_t u = 0; u < n_su; u++) {
      put_su_links(s, &c, u);
      put_su_zone(s, &c, u);
    }
    /* Spine level: a star of SUs around the spine. */
    for (int32_t u = 0; u < n_su; u++) put_su_routes(s, &c, u, "spine");
  }
  g_string_append(s, "</zone>\n</platform>\n");
  return g_string_free(s, FALSE);
}
