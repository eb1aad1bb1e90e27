/* Generator of the DGX-style platform family (SimGrid platform XML 4.1). Plain
 * text output: no SimGrid call here. Constants and their sources are in
 * docs/calibration.md; keep the two in step. */
#include "config.h"
#include "platform_gen.h"
#include "spsim/error.h"

#include <string.h>

/* Calibrated presets. Bandwidths are effective per direction (what SimGrid's
 * CM02 model shares), latencies per traversal; see docs/calibration.md. */
static const sp_gpu_spec specs[SP_GPU_COUNT] = {
  [SP_GPU_H100] = {
    .key = "h100", .model = "H100-SXM5-80GB",
    .flops = 989.4e12, .gpu_mem = 85899345920.0, .mem_bw = 3.35e12,
    .nvl_bw = 450e9, .nvl_lat = 1.3e-6,
    .nic_bw = 48e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6, .nvls = TRUE,
  },
  [SP_GPU_A100] = {
    .key = "a100", .model = "A100-SXM4-80GB",
    .flops = 312e12, .gpu_mem = 85899345920.0, .mem_bw = 2.039e12,
    .nvl_bw = 270e9, .nvl_lat = 1.3e-6,
    .nic_bw = 24e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6,
  },
  /* The H100 of Meta's Grand Teton hosts that torchtitan's benchmarks ran on: 96 GB
   * HBM2e at 2.4 TB/s, NVLink within the host, 400 Gb/s RDMA per GPU, 500 W power
   * limit (pytorch/torchtitan docs/performance.md and
   * benchmarks/llama3_h100_202412_torchtitan.md). The peak is the H100 SXM5's (132
   * SMs at 1830 MHz); the lower power limit is not modelled. */
  [SP_GPU_H100_HBM2E] = {
    .key = "h100-hbm2e", .model = "H100-96GB-HBM2e",
    .flops = 989.4e12, .gpu_mem = 103079215104.0, .mem_bw = 2.4e12,
    .nvl_bw = 450e9, .nvl_lat = 1.3e-6,
    .nic_bw = 48e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6, .nvls = TRUE,
  },
  /* DGX B200 (NVIDIA DGX B200 datasheet: 8 GPUs, 1,440 GB HBM3e and 64 TB/s in all, 72
   * PFLOPS FP8 training; HGX B200: 2.25 PFLOPS dense BF16 per GPU; fifth-generation
   * NVLink, 1.8 TB/s per GPU bidirectional = 900 GB/s per direction; 8 ConnectX-7 at
   * 400 Gb/s, as DGX H100, so the NIC and switch constants are the H100 preset's).
   * NVLink is taken at its line rate, as the H100 preset's. */
  [SP_GPU_B200] = {
    .key = "b200", .model = "B200-SXM-180GB",
    .flops = 2250e12, .gpu_mem = 193273528320.0, .mem_bw = 8.0e12,
    .nvl_bw = 900e9, .nvl_lat = 1.3e-6,
    .nic_bw = 48e9, .nic_lat = 2.0e-6,
    .leaf_lat = 0.3e-6, .spine_lat = 0.3e-6, .su_up_lat = 0.1e-6,
    .coll_lat = 8.4e-6, .nvls = TRUE,
  },
  [SP_GPU_TOY] = {
    .key = "toy", .model = "toy-gpu",
    .flops = 100e12, .gpu_mem = 17179869184.0, .mem_bw = 1e12,
    .nvl_bw = 100e9, .nvl_lat = 1e-6,
    .nic_bw = 10e9, .nic_lat = 5e-6,
    .leaf_lat = 1e-6, .spine_lat = 1e-6, .su_up_lat = 1e-6,
    .coll_lat = 10e-6,
  },
};

void sp_platform_opts_init(sp_platform_opts *opts)
{
  opts->nodes = 1;
  opts->gpus_per_node = 8;
  opts->gpu = SP_GPU_H100;
  opts->charge_local = FALSE;
  opts->nvl_bw = 0;
  opts->nic_bw = 0;
  opts->su_nodes = 0;
  opts->oversubscription = 1.0;
}

gboolean sp_gpu_parse(const char *s, sp_gpu_kind *out, GError **err)
{
  for (int k = 0; s != NULL && k < SP_GPU_COUNT; k++) {
    if (g_ascii_strcasecmp(s, specs[k].key) == 0) {
      *out = (sp_gpu_kind)k;
      return TRUE;
    }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown GPU '%s' (expected h100, a100, h100-hbm2e, b200 or toy)",
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

/* Locale-independent, deterministic number text ("%.6g"). */
static const char *num(char *buf, double v)
{
  return g_ascii_formatd(buf, G_ASCII_DTOSTR_BUF_SIZE, "%.6g", v);
}

/* Bandwidth in GBps (1e9 bytes/s), latency in us, speed in Tf. */
static void put_link(GString *s, const char *indent, const char *id, double bw, double lat,
                     const char *policy)
{
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf(s, "%s<link id=\"%s\" bandwidth=\"%sGBps\" latency=\"%sus\" sharing_policy=\"%s\"/>\n",
                         indent, id, num(b1, bw / 1e9), num(b2, lat * 1e6), policy);
}

static void put_header(GString *s, const sp_platform_opts *o, const sp_gpu_spec *g, int32_t n_su,
                       int32_t per, const char *origin)
{
  /* the options beyond the preset, as given on the command line (none: the text of
   * the preset's platform is unchanged) */
  char v[G_ASCII_DTOSTR_BUF_SIZE];
  GString *ex = g_string_new("");
  if (o->nvl_bw > 0) g_string_append_printf(ex, " --nvlink-bw %s", num(v, o->nvl_bw / 1e9));
  if (o->nic_bw > 0) g_string_append_printf(ex, " --nic-bw %s", num(v, o->nic_bw / 1e9));
  if (o->su_nodes > 0) g_string_append_printf(ex, " --su-nodes %d", o->su_nodes);
  if (o->oversubscription > 1.0) g_string_append_printf(ex, " --oversubscription %s", num(v, o->oversubscription));
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
  g_string_append(s, "<?xml version='1.0'?>\n"
                     "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                     "<platform version=\"4.1\">\n");
  if (origin != NULL)
    g_string_append_printf(s, "<!--\n  %s\n-->\n", origin);
  g_string_append_printf(s,
      "<!--\n"
      "  Generated by: spsim platform dgx --nodes %d --gpu %s --gpus-per-node %d%s%s\n"
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
      "  * Routing is computed, not listed: each node is a Floyd zone (GPU <->\n"
      "    nodeN-nvswitch over its NVLink ports; GPU -> nodeN-tx and nodeN-rx -> GPU\n"
      "    over its NIC), each SU a Floyd star of nodes around its leaf (node -> leaf:\n"
      "    nodeN-rails, suK-leaf; leaf -> node: nodeN-rails, a FATPIPE of the node's\n"
      "    NICs' sum with no latency of its own, so never the bottleneck), the top a\n"
      "    Dijkstra star of SUs around the spine (up: suK-up UP, spine; down: suJ-up\n"
      "    DOWN, suJ-leaf). Links are declared at the top level for fast loading.\n"
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
      "%s"
      "-->\n",
      o->nodes, g->key, gpn, o->charge_local ? " --charge-local" : "", extra ? extra : "", o->nodes, gpn, g->model,
      o->nodes * gpn, n_su, per,
      num(b1, g->flops / 1e12), num(b2, g->nvl_bw / 1e9), num(b3, g->nvl_lat * 1e6), num(b4, g->nic_bw / 1e9),
      num(b5, g->nic_lat * 1e6), bisection, num(b6, g->coll_lat * 1e6),
      g->nvls ? "  * The NVSwitches reduce (NVLink SHARP): top-zone property nvls = 1.\n" : "",
      o->gpu == SP_GPU_TOY ? "  * Preset toy: round numbers for tests, not a real machine.\n" : "");
  g_string_append(s, "<config>\n"
                     "  <prop id=\"network/model\" value=\"CM02\"/>\n"
                     "  <prop id=\"network/latency-factor\" value=\"1.0\"/>\n"
                     "  <prop id=\"network/bandwidth-factor\" value=\"1.0\"/>\n"
                     "  <prop id=\"network/weight-S\" value=\"0.0\"/>\n"
                     "  <prop id=\"network/TCP-gamma\" value=\"0\"/>\n"
                     "  <prop id=\"network/crosstraffic\" value=\"0\"/>\n"
                     "</config>\n");
}

/* One node: its GPUs, the NVSwitch and the two NIC-side gateways. Floyd finds
 * GPU a -> GPU b through the NVSwitch (nvl a UP, nvl b DOWN) and GPU a -> the
 * node's exit through its own NIC; "tx" has no way back in and "rx" no way out,
 * so no GPU pair can take a path through the NICs. The links are declared at
 * the top level (put_node_links). */
static void put_node(GString *s, const sp_platform_opts *o, const sp_gpu_spec *g, int32_t node)
{
  char b1[G_ASCII_DTOSTR_BUF_SIZE], b2[G_ASCII_DTOSTR_BUF_SIZE];
  int w = node_width(o->nodes);
  int32_t gpn = o->gpus_per_node;
  const char *clat = num(b2, g->coll_lat * 1e6);
  /* mem_bw makes the engine charge local steps (reductions, copies) at HBM speed. */
  g_autofree char *charge = o->charge_local ? g_strdup_printf("<prop id=\"mem_bw\" value=\"%.0f\"/>", g->mem_bw) : NULL;
  g_string_append_printf(s, "    <zone id=\"node%0*d\" routing=\"Floyd\">\n", w, node);
  for (int32_t k = 0; k < gpn; k++) {
    g_string_append_printf(s,
        "      <host id=\"node%0*d-gpu%d\" speed=\"%sTf\">"
        "<prop id=\"gpu\" value=\"%s\"/><prop id=\"gpu_mem\" value=\"%.0f\"/>"
        "<prop id=\"hbm_bw\" value=\"%.0f\"/>%s<prop id=\"node\" value=\"%d\"/>"
        "<prop id=\"local_rank\" value=\"%d\"/><prop id=\"coll_latency\" value=\"%sus\"/></host>\n",
        w, node, k, num(b1, g->flops / 1e12), g->model, g->gpu_mem, g->mem_bw, charge ? charge : "", node, k,
        clat);
  }
  g_string_append_printf(s, "      <router id=\"node%0*d-nvswitch\"/><router id=\"node%0*d-tx\"/><router id=\"node%0*d-rx\"/>\n",
                         w, node, w, node, w, node);
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
        w, node, k, w, node, w, node, k, w, node, w, node, k, w, node, k);
  g_string_append(s, "    </zone>\n");
}

/* The links of one node: per GPU its NVLink ports and its NIC, and the node's
 * rail cables towards the leaf level (their sum of NICs, latency in the NICs'). */
static void put_node_links(GString *s, const sp_platform_opts *o, const sp_gpu_spec *g, int32_t node)
{
  int w = node_width(o->nodes);
  int32_t gpn = o->gpus_per_node;
  for (int32_t k = 0; k < gpn; k++) {
    g_autofree char *id = g_strdup_printf("node%0*d-nvl%d", w, node, k);
    put_link(s, "  ", id, g->nvl_bw, g->nvl_lat, "SPLITDUPLEX");
  }
  for (int32_t k = 0; k < gpn; k++) {
    g_autofree char *id = g_strdup_printf("node%0*d-nic%d", w, node, k);
    put_link(s, "  ", id, g->nic_bw, g->nic_lat, "SPLITDUPLEX");
  }
  g_autofree char *id = g_strdup_printf("node%0*d-rails", w, node);
  put_link(s, "  ", id, g->nic_bw * gpn, 0.0, "FATPIPE");
}

char *sp_platform_dgx_xml(const sp_platform_opts *o, GError **err)
{
  return sp_platform_dgx_xml_spec(o, NULL, NULL, err);
}

char *sp_platform_dgx_xml_spec(const sp_platform_opts *o, const sp_gpu_spec *custom,
                               const char *origin, GError **err)
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
  sp_gpu_spec spec = *base;
  if (o->nvl_bw > 0) spec.nvl_bw = o->nvl_bw;
  if (o->nic_bw > 0) spec.nic_bw = o->nic_bw;
  const sp_gpu_spec *g = &spec;
  const int32_t per = o->su_nodes > 0 ? o->su_nodes : SP_PLATFORM_NODES_PER_SU;
  const int32_t n_su = (o->nodes + per - 1) / per;
  const int w = node_width(o->nodes);
  const int ws = digits(n_su > 1 ? n_su - 1 : 0);
  GString *s = g_string_sized_new((gsize)o->nodes * (gsize)o->gpus_per_node * 700u + 4096u);
  put_header(s, o, g, n_su, per, origin);

  /* Every link is declared in the top zone, just before the zone that uses it:
   * SimGrid 3.32 looks a link name up from the top zone down, through every zone
   * declared before it, so links kept deep inside many zones make loading
   * quadratic in the node count. */
  g_string_append(s, "<zone id=\"cluster\" routing=\"DijkstraCache\">\n");
  g_string_append_printf(s, "  <prop id=\"gpus_per_node\" value=\"%d\"/>\n", o->gpus_per_node);
  if (g->nvls)
    g_string_append(s, "  <prop id=\"nvls\" value=\"1\"/>\n");
  /* (a zone first: SimGrid's parser takes a zone that starts with a link for one
   * that holds hosts, not zones) */
  g_string_append(s, "  <zone id=\"spine\" routing=\"None\"><router id=\"spine-gw\"/></zone>\n");
  put_link(s, "  ", "spine", g->nic_bw * o->nodes * o->gpus_per_node, g->spine_lat, "FATPIPE");
  for (int32_t u = 0; u < n_su; u++) {
    int32_t first = u * per, last = MIN(o->nodes, first + per); /* nodes [first, last) */
    g_autofree char *gw = g_strdup_printf("su%0*d-gw", ws, u);
    g_autofree char *leaf = g_strdup_printf("su%0*d-leaf", ws, u);
    g_string_append_printf(s, "  <!-- scalable unit %d: nodes %d to %d -->\n", u, first, last - 1);
    for (int32_t n = first; n < last; n++) put_node_links(s, o, g, n);
    /* FATPIPE: every flow gets the full bandwidth; only the hop latency counts. */
    put_link(s, "  ", leaf, g->nic_bw * per * o->gpus_per_node, g->leaf_lat, "FATPIPE");
    g_autofree char *up = g_strdup_printf("su%0*d-up", ws, u);
    put_link(s, "  ", up, g->nic_bw * (last - first) * o->gpus_per_node / o->oversubscription, g->su_up_lat,
             "SPLITDUPLEX");
    /* The SU: a star of node zones around its leaf level. The leaf hop is charged
     * on the way in (node -> leaf), so a node pair crosses it once. */
    g_string_append_printf(s, "  <zone id=\"su%0*d\" routing=\"Floyd\">\n", ws, u);
    for (int32_t n = first; n < last; n++) put_node(s, o, g, n);
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
  /* Spine level: a star of SUs around the spine. Up: the SU's uplink and the spine
   * hop; down: the other SU's uplink and its leaf hop. */
  for (int32_t u = 0; u < n_su; u++)
    g_string_append_printf(s,
        "  <zoneRoute src=\"su%0*d\" dst=\"spine\" gw_src=\"su%0*d-gw\" gw_dst=\"spine-gw\" symmetrical=\"NO\">"
        "<link_ctn id=\"su%0*d-up\" direction=\"UP\"/><link_ctn id=\"spine\"/></zoneRoute>\n"
        "  <zoneRoute src=\"spine\" dst=\"su%0*d\" gw_src=\"spine-gw\" gw_dst=\"su%0*d-gw\" symmetrical=\"NO\">"
        "<link_ctn id=\"su%0*d-up\" direction=\"DOWN\"/><link_ctn id=\"su%0*d-leaf\"/></zoneRoute>\n",
        ws, u, ws, u, ws, u, ws, u, ws, u, ws, u, ws, u);
  g_string_append(s, "</zone>\n</platform>\n");
  return g_string_free(s, FALSE);
}
