/* spsim calibrate LOG... (--platform P.xml | [--gpu G] [--nodes N] [--gpus-per-node K])
 *                 [-o OUT.xml] [--coll C] [--ranks N] [--per-node K] [--max-iters N]
 * Fits a generated platform's NVLink and NIC bandwidths and latencies and its
 * per-collective latency to nccl-tests logs (src/sim/calibrate.h), prints the
 * parameters and the residual of every point, writes the calibrated platform. */
#include "config.h"
#include "calibrate.h"
#include "cli.h"
#include "platform.h"
#include "platform_gen.h"
#include "sim.h"
#include "spsim/coll.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/nccltests.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fail(GError *err)
{
  return sp_cli_fail(err);
}

/* One log, prepared: its collective and the node of each rank. */
typedef struct {
  sp_nt_log *log;
  sp_coll coll;
  int32_t n, nodes;
  int32_t *node_of, *local_of;
  const char *ranks_from; /* "Rank lines", "--ranks", "size / count" */
} prepared;

/* --sharp-bw: a bandwidth in GB/s, a finite number above 0 (as `spsim platform dgx`). */
static gboolean parse_gbps(const char *s, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || !(v > 0)) return FALSE;
  *out = v;
  return TRUE;
}

/* The `sharp`, `sharp_bw` and `nccl_tuner` properties of the platform at @p path (the
 * written platform keeps them: the fit changes no switch and no plugin). */
static gboolean platform_kept(const char *path, gboolean *sharp, double *sharp_bw, sp_tuner *tuner,
                               GError **err)
{
  sp_plat_desc *d = sp_plat_read(path, err);
  if (d == NULL) return FALSE;
  *sharp = d->sharp;
  *sharp_bw = d->sharp ? d->sharp_bw : 0;
  *tuner = d->tuner;
  sp_plat_desc_free(d);
  return TRUE;
}

/* A log whose NCCL said it loaded a tuner plugin (NCCL_DEBUG=INFO) ran that plugin's
 * choices: say so where the fit would price other ones. aws-ofi-nccl's plugin calls
 * itself "nccl_ofi_tuner" (aws/aws-ofi-nccl src/tuner/nccl_ofi_tuner.cpp). */
static void warn_tuner(const char *log, const char *plugin, sp_tuner tuner)
{
  if (plugin == NULL) return;
  gboolean aws = strcmp(plugin, "nccl_ofi_tuner") == 0;
  if (aws && tuner == SP_TUNER_NONE)
    fprintf(stderr, "spsim: warning: %s ran under aws-ofi-nccl's tuner plugin (nccl_ofi_tuner), which picks "
                    "NCCL's algorithm and protocol on AWS p5, p5en and p6: give --nccl-tuner aws-p5, aws-p5en or "
                    "aws-p6 (or a --platform written with it), or the fit prices NCCL's own choices where the plugin made "
                    "others\n", log);
  else if (!aws)
    fprintf(stderr, "spsim: warning: %s ran under the tuner plugin '%s', which spsim does not model: the fit "
                    "prices %s's choices, which may not be the ones it measured\n", log, plugin,
            tuner == SP_TUNER_NONE ? "NCCL's model" : sp_tuner_name(tuner));
}

static char *fmt_param(sp_cal_param p, double v)
{
  if (p == SP_CAL_NVL_BW || p == SP_CAL_NIC_BW) return g_strdup_printf("%.4g GB/s", v / 1e9);
  return g_strdup_printf("%.4g us", v * 1e6);
}

int sp_cmd_calibrate(int argc, char **argv)
{
  g_autofree char *platform = NULL, *out = NULL, *coll_s = NULL, *gpu_s = NULL;
  g_autofree char *sharp_s = NULL, *tuner_s = NULL;
  sp_tuner tuner = SP_TUNER_NONE;
  gint nodes_opt = 0, gpn_opt = 0, ranks_opt = 0, per_node = 0, max_iters = 0;
  gboolean sharp = FALSE;
  double sharp_bw = 0;
  GOptionEntry entries[] = {
    { "platform", 'p', 0, G_OPTION_ARG_FILENAME, &platform,
      "platform written by 'spsim platform dgx' (its constants are the starting point)", "P.xml" },
    { "gpu", 0, 0, G_OPTION_ARG_STRING, &gpu_s, "without --platform: generator preset h100 (default), a100, toy", "KIND" },
    { "nodes", 0, 0, G_OPTION_ARG_INT, &nodes_opt, "without --platform: nodes of the written platform (default: the logs')", "N" },
    { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &gpn_opt, "without --platform: GPUs per node (default 8)", "K" },
    { "sharp", 0, 0, G_OPTION_ARG_NONE, &sharp,
      "without --platform: the network's switches reduce (SHARP), as `spsim platform dgx --sharp` (with --platform: "
      "its sharp properties are kept)", NULL },
    { "sharp-bw", 0, 0, G_OPTION_ARG_STRING, &sharp_s,
      "without --platform, with --sharp: the switches' reduction bandwidth per port and direction in GB/s", "GBPS" },
    { "nccl-tuner", 0, 0, G_OPTION_ARG_STRING, &tuner_s,
      "without --platform: the NCCL tuner plugin the logs ran under, as `spsim platform dgx --nccl-tuner` "
      "(aws-p5, aws-p5en, aws-p6 or none; with --platform: its nccl_tuner property is kept)", "NAME" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write the calibrated platform here", "OUT.xml" },
    { "coll", 0, 0, G_OPTION_ARG_STRING, &coll_s, "collective of logs that do not name theirs", "C" },
    { "ranks", 0, 0, G_OPTION_ARG_INT, &ranks_opt, "GPUs of logs without '#  Rank' lines", "N" },
    { "per-node", 0, 0, G_OPTION_ARG_INT, &per_node,
      "ranks per node of logs without '#  Rank' lines (default: the platform's GPUs per node)", "K" },
    { "max-iters", 0, 0, G_OPTION_ARG_INT, &max_iters, "fit iterations (default 30)", "N" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("LOG... - fit a platform to nccl-tests logs");
  g_option_context_set_summary(ctx,
      "Reads nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,\n"
      "sendrecv_perf, broadcast_perf, reduce_perf; one or several nodes) and fits the platform's NVLink\n"
      "and NIC bandwidth and latency per GPU and its per-collective latency (coll_latency).\n"
      "Example: spsim calibrate ar-8.log ar-16.log --platform platforms/dgx.xml -o calibrated.xml");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
    g_prefix_error(&err, "calibrate: ");
    return fail(err);
  }
  if (argc < 2)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "calibrate: no log (usage: spsim calibrate LOG... --platform P.xml [-o OUT.xml])"));
  if (ranks_opt < 0 || per_node < 0 || nodes_opt < 0 || gpn_opt < 0 || max_iters < 0)
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "calibrate: --ranks, --per-node, --nodes, --gpus-per-node "
                                                         "and --max-iters must be >= 1"));
  if (platform && (gpu_s || nodes_opt || gpn_opt || sharp || sharp_s || tuner_s))
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "calibrate: --platform and generator options (--gpu, --nodes, --gpus-per-node, --sharp, "
                            "--sharp-bw, --nccl-tuner) both given"));
  if (tuner_s != NULL && !sp_tuner_parse(tuner_s, &tuner))
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            "calibrate: --nccl-tuner must be %s (got '%s')", sp_tuner_list(), tuner_s));
  if (sharp_s != NULL && (!sharp || !parse_gbps(sharp_s, &sharp_bw)))
    return fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                            sharp ? "calibrate: --sharp-bw must be a bandwidth in GB/s above 0 (got '%s')"
                                  : "calibrate: --sharp-bw '%s' needs --sharp (the switches reduce)",
                            sharp_s));
  sharp_bw *= 1e9;
  sp_coll coll_opt = SP_COLL_ALL_REDUCE;
  if (coll_s && !sp_nt_coll_parse(coll_s, &coll_opt) && !sp_coll_parse(coll_s, &coll_opt, &err)) {
    g_prefix_error(&err, "calibrate: ");
    return fail(err);
  }

  /* the starting platform */
  sp_gpu_spec spec;
  int32_t pnodes = 0, gpn = 8;
  gboolean charge_local = FALSE;
  sp_gpu_kind kind = SP_GPU_H100;
  if (platform) {
    if (!sp_cal_platform_spec(platform, &spec, &pnodes, &gpn, &charge_local, &err) ||
        !platform_kept(platform, &sharp, &sharp_bw, &tuner, &err)) {
      g_prefix_error(&err, "calibrate: ");
      return fail(err);
    }
    for (int k = 0; k < SP_GPU_COUNT; k++)
      if (strcmp(sp_gpu_spec_get((sp_gpu_kind)k)->key, spec.key) == 0) kind = (sp_gpu_kind)k;
  } else {
    if (gpu_s && !sp_gpu_parse(gpu_s, &kind, &err)) {
      g_prefix_error(&err, "calibrate: ");
      return fail(err);
    }
    spec = *sp_gpu_spec_get(kind);
    if (gpn_opt > 0) gpn = gpn_opt;
    pnodes = nodes_opt;
  }

  /* the logs */
  int32_t nlogs = argc - 1;
  prepared *pl = g_new0(prepared, nlogs);
  int ret = 1;
  int32_t need_nodes = 1;
  GArray *points = g_array_new(FALSE, FALSE, sizeof(sp_cal_point));
  int32_t ratio_log = -1; /* a log whose count came from its rows */
  for (int32_t li = 0; li < nlogs; li++) {
    prepared *p = &pl[li];
    p->log = sp_nt_log_read(argv[li + 1], &err);
    if (p->log == NULL) goto error;
    const char *name = argv[li + 1];
    warn_tuner(name, p->log->tuner_plugin, tuner);
    if (p->log->skipped_rows > 0)
      fprintf(stderr, "spsim: warning: %s: %u line%s shaped like a result row could not be read, left out (the "
                      "first: line %u; a field that is not a number, or a negative or infinite figure)\n",
              name, p->log->skipped_rows, p->log->skipped_rows == 1 ? "" : "s", p->log->first_skipped_line);
    if (p->log->has_coll) {
      p->coll = p->log->coll;
      if (coll_s && p->coll != coll_opt) {
        err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "%s is %s output but --coll says %s", name,
                          sp_nt_program(p->coll), sp_coll_name(coll_opt));
        goto error;
      }
    } else if (coll_s) {
      p->coll = coll_opt;
    } else {
      err = g_error_new(SP_ERROR, SP_ERROR_INVALID,
                        "%s: cannot tell which collective it measured (no '# Collective test starting' line "
                        "or binary name): give --coll", name);
      goto error;
    }
    if (p->log->nranks > 0) {
      p->n = p->log->nranks;
      p->ranks_from = "its Rank lines";
      if (!sp_nt_log_nodes(p->log, &p->nodes, &p->node_of, &p->local_of)) goto error;
    } else {
      int32_t from_rows = sp_nt_log_ranks_from_rows(p->log, p->coll);
      if (ranks_opt > 0 && from_rows > 0 && from_rows != ranks_opt) {
        err = g_error_new(SP_ERROR, SP_ERROR_INVALID,
                          "%s: its sizes and counts say %d GPUs, --ranks says %d: logs of different GPU counts "
                          "need their '#  Rank' lines to say which is which", name, from_rows, ranks_opt);
        goto error;
      }
      if (from_rows > 0 && ratio_log >= 0 && pl[ratio_log].n != from_rows) {
        err = g_error_new(SP_ERROR, SP_ERROR_INVALID,
                          "logs of different GPU counts (%s: %d, %s: %d) without '#  Rank' lines to say which "
                          "is which", argv[ratio_log + 1], pl[ratio_log].n, name, from_rows);
        goto error;
      }
      p->n = ranks_opt > 0 ? ranks_opt : from_rows;
      p->ranks_from = ranks_opt > 0 ? "--ranks" : "its sizes and counts";
      if (from_rows > 0) ratio_log = li;
      if (p->n <= 0) {
        err = g_error_new(SP_ERROR, SP_ERROR_INVALID,
                          "%s: no '#  Rank' lines, so its GPU count is unknown: give --ranks N", name);
        goto error;
      }
      int32_t k = per_node > 0 ? per_node : MIN(p->n, gpn);
      p->node_of = g_new(int32_t, p->n);
      p->local_of = g_new(int32_t, p->n);
      for (int32_t r = 0; r < p->n; r++) {
        p->node_of[r] = r / k;
        p->local_of[r] = r % k;
      }
      p->nodes = (p->n + k - 1) / k;
    }
    if (p->coll == SP_COLL_SEND_RECV && p->n < 2) {
      err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "%s: sendrecv on %d rank: nothing crosses a link", name, p->n);
      goto error;
    }
    for (int32_t r = 0; r < p->n; r++)
      if (p->local_of[r] >= gpn) {
        err = g_error_new(SP_ERROR, SP_ERROR_PLATFORM,
                          "%s: %d or more ranks on one node ('%s'), the platform has %d GPUs per node", name,
                          p->local_of[r] + 1, p->log->hosts->len ? (char *)g_ptr_array_index(p->log->hosts, r) : "",
                          gpn);
        goto error;
      }
    need_nodes = MAX(need_nodes, p->nodes);
    for (guint i = 0; i < p->log->rows->len; i++) {
      const sp_nt_row *r = &g_array_index(p->log->rows, sp_nt_row, i);
      if (r->count == 0 || !(r->time_us[0] > 0)) continue;
      sp_cal_point pt = { .coll = p->coll, .redop = SP_RED_SUM, .root = MAX(r->root, 0), .n = p->n,
                          .node = p->node_of, .local = p->local_of, .count = r->count, .bytes = r->size,
                          .time_s = r->time_us[0] * 1e-6, .log = li };
      if (!sp_nt_type_parse(r->type, &pt.dtype, &err) ||
          (strcmp(r->redop, "none") != 0 && !sp_redop_parse(r->redop, &pt.redop, &err))) {
        g_prefix_error(&err, "%s, size %" G_GUINT64_FORMAT ": ", name, (guint64)r->size);
        goto error;
      }
      if (pt.root >= p->n) {
        err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "%s: root %d of a %d-rank run", name, pt.root, p->n);
        goto error;
      }
      g_array_append_val(points, pt);
    }
  }
  if (points->len == 0) {
    err = g_error_new(SP_ERROR, SP_ERROR_INVALID, "calibrate: the logs hold no row with a count and an out-of-place time above 0");
    goto error;
  }
  if (pnodes > 0 && need_nodes > pnodes) {
    err = g_error_new(SP_ERROR, SP_ERROR_PLATFORM, "the logs span %d nodes, the platform has %d", need_nodes, pnodes);
    goto error;
  }
  if (pnodes == 0) pnodes = need_nodes;

  sp_cal_problem pb = { .spec = spec, .nodes = need_nodes, .gpus_per_node = gpn, .charge_local = charge_local,
                        .tuner = tuner, .sharp = sharp, .sharp_bw = sharp_bw,
                        .points = (const sp_cal_point *)points->data, .npoints = (int32_t)points->len,
                        .max_iters = max_iters };
  sp_cal_result res;
  if (!sp_cal_fit(&pb, &res, &err)) goto error;

  /* report */
  printf("# spsim calibrate: %d log(s), %u points; starting platform %s (%s preset, %d node(s) x %d GPUs)\n", nlogs,
         points->len, platform ? platform : "from the generator", spec.key, pnodes, gpn);
  for (int32_t li = 0; li < nlogs; li++)
    printf("#   %s: %s, %d ranks on %d node(s) (from %s)\n", argv[li + 1], sp_nt_program(pl[li].coll), pl[li].n,
           pl[li].nodes, pl[li].ranks_from);
  printf("#\n# %-11s %14s %14s  %s\n", "parameter", "start", "calibrated", "");
  for (int j = 0; j < SP_CAL_NPARAMS; j++) {
    g_autofree char *a = fmt_param((sp_cal_param)j, sp_cal_get(&spec, (sp_cal_param)j));
    g_autofree char *b = fmt_param((sp_cal_param)j, sp_cal_get(&res.spec, (sp_cal_param)j));
    const char *note = !res.determined[j] ? "not determined by these logs: kept"
                       : res.held[j] ? "not separable from coll-lat by these logs: kept" : "fitted";
    printf("  %-11s %14s %14s  %s\n", sp_cal_param_name((sp_cal_param)j), a, b, note);
  }
  /* whether some log puts two ranks on one node (then NVLink's bandwidth is undetermined
   * because nothing of those logs is bound by it: NCCL's effective NVLink bandwidth or a
   * protocol's cap is below the platform's line rate) */
  gboolean shared_node = FALSE;
  for (int32_t li = 0; li < nlogs; li++) shared_node |= pl[li].n > pl[li].nodes;
  for (int j = 0; j < SP_CAL_NPARAMS; j++) {
    if (res.determined[j] && !res.held[j]) continue;
    g_autofree char *v = fmt_param((sp_cal_param)j, sp_cal_get(&res.spec, (sp_cal_param)j));
    const char *why = res.held[j] ? " (over their points it moves every time in proportion to coll-lat, so the fit "
                                    "cannot tell the two apart)"
                      : j == SP_CAL_NIC_BW || j == SP_CAL_NIC_LAT ? " (no log spans two nodes)"
                      : j == SP_CAL_NVL_BW && shared_node
                        ? " (no collective of these logs inside a node is bound by it: NCCL's effective NVLink "
                          "bandwidth or a protocol's cap is lower)"
                      : j == SP_CAL_NVL_BW || j == SP_CAL_NVL_LAT ? " (no log has two ranks in one node)" : "";
    fprintf(stderr, "spsim: warning: %s is %s%s; kept at %s\n", sp_cal_param_name((sp_cal_param)j),
            res.held[j] ? "not separable from coll-lat by these logs" : "not determined by these logs", why, v);
  }
  printf("# RMS of ln(simulated / measured time): %.4f before, %.4f calibrated (%d iterations, %d platforms simulated)\n",
         res.rms_start, res.rms, res.iters, res.evals);
  printf("#\n# %-24s %-14s %5s %14s %12s %12s %12s %8s %8s\n", "log", "collective", "ranks", "size", "measured",
         "before", "calibrated", "error", "busbw");
  printf("# %-24s %-14s %5s %14s %12s %12s %12s %8s %8s\n", "", "", "", "(B)", "(us)", "(us)", "(us)", "(%)",
         "(GB/s)");
  for (guint i = 0; i < points->len; i++) {
    const sp_cal_point *pt = &g_array_index(points, sp_cal_point, i);
    g_autofree char *base = g_path_get_basename(argv[pt->log + 1]);
    double f = sp_coll_busbw_factor(pt->coll, pt->coll == SP_COLL_SEND_RECV ? 2 : pt->n);
    double busbw = (double)pt->bytes / res.sim_s[i] / 1e9 * f;
    printf("  %-24s %-14s %5d %14" G_GUINT64_FORMAT " %12.2f %12.2f %12.2f %+8.2f %8.2f\n", base,
           sp_coll_name(pt->coll), pt->n, (guint64)pt->bytes, pt->time_s * 1e6, res.start_s[i] * 1e6,
           res.sim_s[i] * 1e6, (res.sim_s[i] / pt->time_s - 1) * 100, busbw);
  }
  if (out) {
    sp_platform_opts o;
    sp_platform_opts_init(&o);
    o.nodes = pnodes;
    o.gpus_per_node = gpn;
    o.gpu = kind;
    o.charge_local = charge_local;
    o.sharp = sharp;
    o.sharp_bw = sharp_bw;
    o.tuner = tuner;
    g_autoptr(GString) origin = g_string_new("Calibrated by spsim calibrate from");
    for (int32_t li = 0; li < nlogs; li++) {
      g_autofree char *b = g_path_get_basename(argv[li + 1]);
      g_autofree char *valid = g_utf8_make_valid(b, -1);
      g_string_append_printf(origin, " %s", valid);
    }
    g_string_append_printf(origin, " (RMS of ln(simulated / measured) %.4f); constants not determined by them "
                                   "are the starting platform's", res.rms);
    /* an XML comment may not hold "--" */
    while (strstr(origin->str, "--")) {
      char *d = strstr(origin->str, "--");
      d[1] = '_';
    }
    g_autofree char *xml = sp_platform_dgx_xml_spec(&o, &res.spec, origin->str, &err);
    if (xml == NULL || !g_file_set_contents(out, xml, -1, NULL)) {
      if (err == NULL) err = g_error_new(SP_ERROR, SP_ERROR_IO, "cannot write '%s'", out);
      sp_cal_result_clear(&res);
      goto error;
    }
    printf("# calibrated platform written to %s (%d node(s) x %d GPUs)\n", out, pnodes, gpn);
  } else {
    printf("# calibrated platform not written (-o OUT.xml writes it)\n");
  }
  sp_cal_result_clear(&res);
  ret = 0;
  if (fflush(stdout) != 0) {
    err = g_error_new(SP_ERROR, SP_ERROR_IO, "cannot write to stdout");
    ret = 1;
  }
error:
  if (err) {
    if (!g_str_has_prefix(err->message, "calibrate: ")) g_prefix_error(&err, "calibrate: ");
    ret = fail(err);
  }
  for (int32_t li = 0; li < nlogs; li++) {
    sp_nt_log_free(pl[li].log);
    g_free(pl[li].node_of);
    g_free(pl[li].local_of);
  }
  g_free(pl);
  g_array_unref(points);
  return ret;
}
