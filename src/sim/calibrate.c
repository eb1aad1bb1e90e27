/* Placing nccl-tests' ranks on a platform, and fitting a generated platform's
 * constants to measured times (calibrate.h). Each candidate platform is
 * simulated in a forked child: SimGrid loads one platform per process. */
#include "config.h"
#include "calibrate.h"
#include "platform.h"
#include "sim.h"
#include "spsim/error.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fit constants (choices of this fit, not measured quantities): */
#define FD_STEP 0.01        /* finite-difference step of ln(parameter): 1 % */
#define SENS_MIN 1e-4       /* d ln t / d ln p below this at every point: not determined */
#define COLLINEAR_COS 0.9999 /* two latency columns this parallel cannot be told apart */
#define MAX_LOG_STEP 1.0    /* largest change of ln(parameter) per iteration (x e) */

int32_t *sp_cal_place(int32_t n, const int32_t *node_of, const int32_t *local_of, GError **err)
{
  int32_t hosts = sp_sim_num_hosts();
  GArray *order = g_array_new(FALSE, FALSE, sizeof(int32_t));    /* node values, first-host order */
  GHashTable *members = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
  int32_t *map = NULL;
  for (int32_t h = 0; h < hosts; h++) {
    int32_t node = sp_sim_host_node(h);
    if (node < 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "host '%s' has no 'node' property: ranks cannot be placed by node",
                  sp_sim_host_name(h));
      goto out;
    }
    GArray *m = g_hash_table_lookup(members, GINT_TO_POINTER(node + 1));
    if (m == NULL) {
      m = g_array_new(FALSE, FALSE, sizeof(int32_t));
      g_hash_table_insert(members, GINT_TO_POINTER(node + 1), m);
      g_array_append_val(order, node);
    }
    g_array_append_val(m, h);
  }
  map = g_new(int32_t, MAX(n, 1));
  for (int32_t r = 0; r < n; r++) {
    if (node_of[r] < 0 || (guint)node_of[r] >= order->len) {
      g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "rank %d is on node %d but the platform has %u node(s)", r,
                  node_of[r], order->len);
      g_clear_pointer(&map, g_free);
      goto out;
    }
    GArray *m = g_hash_table_lookup(members, GINT_TO_POINTER(g_array_index(order, int32_t, node_of[r]) + 1));
    if (local_of[r] < 0 || (guint)local_of[r] >= m->len) {
      g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "rank %d is GPU %d of its node but the platform's nodes have %u GPU(s)",
                  r, local_of[r], m->len);
      g_clear_pointer(&map, g_free);
      goto out;
    }
    map[r] = g_array_index(m, int32_t, local_of[r]);
  }
out:
  g_hash_table_unref(members);
  g_array_unref(order);
  return map;
}

static const char *const param_names[SP_CAL_NPARAMS] = {
  "nvlink-bw", "nvlink-lat", "nic-bw", "nic-lat", "coll-lat",
};

const char *sp_cal_param_name(sp_cal_param p)
{
  return (int)p >= 0 && p < SP_CAL_NPARAMS ? param_names[p] : "?";
}

double sp_cal_get(const sp_gpu_spec *g, sp_cal_param p)
{
  switch (p) {
  case SP_CAL_NVL_BW: return g->nvl_bw;
  case SP_CAL_NVL_LAT: return g->nvl_lat;
  case SP_CAL_NIC_BW: return g->nic_bw;
  case SP_CAL_NIC_LAT: return g->nic_lat;
  case SP_CAL_COLL_LAT: return g->coll_lat;
  default: return 0;
  }
}

void sp_cal_set(sp_gpu_spec *g, sp_cal_param p, double v)
{
  switch (p) {
  case SP_CAL_NVL_BW: g->nvl_bw = v; break;
  case SP_CAL_NVL_LAT: g->nvl_lat = v; break;
  case SP_CAL_NIC_BW: g->nic_bw = v; break;
  case SP_CAL_NIC_LAT: g->nic_lat = v; break;
  case SP_CAL_COLL_LAT: g->coll_lat = v; break;
  default: break;
  }
}

/* ---- one candidate, in a child ------------------------------------------------ */

/* Simulate every point on the loaded platform into @p out. */
static gboolean child_points(const sp_cal_problem *pb, double *out, GError **err)
{
  for (int32_t i = 0; i < pb->npoints; i++) {
    const sp_cal_point *p = &pb->points[i];
    g_autofree int32_t *map = sp_cal_place(p->n, p->node, p->local, err);
    if (map == NULL || !sp_sim_set_host_map(map, p->n, err)) return FALSE;
    int32_t members[2], nm = p->n;
    g_autofree int32_t *all = NULL;
    const int32_t *ranks;
    if (p->coll == SP_COLL_SEND_RECV) {
      /* sendrecv_perf's ring (rank r sends to r + 1): on a platform without
       * contention its time is its slowest pair's, a pair across nodes if any */
      int32_t a = 0;
      for (int32_t r = 0; r < p->n; r++)
        if (p->node[r] != p->node[(r + 1) % p->n]) { a = r; break; }
      members[0] = a;
      members[1] = (a + 1) % p->n;
      ranks = members;
      nm = 2;
    } else {
      all = g_new(int32_t, p->n);
      for (int32_t r = 0; r < p->n; r++) all[r] = r;
      ranks = all;
    }
    sp_coll_spec spec = { .coll = p->coll, .algo = SP_ALGO_AUTO, .dtype = p->dtype, .redop = p->redop,
                          .ranks = ranks, .n = nm, .count = p->count,
                          .root = p->coll == SP_COLL_SEND_RECV ? 0 : MAX(p->root, 0) };
    if (!sp_sim_coll_time(&spec, p->n, SP_FIDELITY_FLOW, &out[i], err)) {
      g_prefix_error(err, "point %d (%s, %d ranks, %" G_GUINT64_FORMAT " elements): ", i, sp_coll_name(p->coll),
                     p->n, (guint64)p->count);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean write_all(int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return FALSE;
    p += w;
    len -= (size_t)w;
  }
  return TRUE;
}

typedef struct {
  pid_t pid;
  int fd;
  char *path;
} child;

/* Start a child that simulates @p pb on constants @p g. */
static gboolean start_child(const sp_cal_problem *pb, const sp_gpu_spec *g, child *c, GError **err)
{
  sp_platform_opts o;
  sp_platform_opts_init(&o);
  o.nodes = pb->nodes;
  o.gpus_per_node = pb->gpus_per_node;
  o.charge_local = pb->charge_local;
  o.tuner = pb->tuner; /* the logs' algorithms are those the cluster's plugin picked */
  o.sharp = pb->sharp; /* and CollNet where the switches reduce */
  o.sharp_bw = pb->sharp_bw;
  g_autofree char *xml = sp_platform_dgx_xml_spec(&o, g, NULL, err);
  if (xml == NULL) return FALSE;
  GError *e = NULL;
  int tfd = g_file_open_tmp("spsim-cal-XXXXXX.xml", &c->path, &e);
  if (tfd < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot create a temporary platform: %s", e->message);
    g_error_free(e);
    return FALSE;
  }
  gboolean ok = write_all(tfd, xml, strlen(xml));
  close(tfd);
  int fds[2];
  if (!ok || pipe(fds) != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot write the temporary platform '%s'", c->path);
    return FALSE;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "fork: %s", g_strerror(errno));
    return FALSE;
  }
  if (pid == 0) {
    close(fds[0]);
    double *out = g_new0(double, MAX(pb->npoints, 1));
    GError *ce = NULL;
    int status = 0;
    if (!sp_sim_init(c->path, &ce) || !child_points(pb, out, &ce)) {
      const char *msg = ce ? ce->message : "failed";
      uint32_t len = (uint32_t)strlen(msg);
      double nan_marker = NAN;
      write_all(fds[1], &nan_marker, sizeof nan_marker);
      write_all(fds[1], &len, sizeof len);
      write_all(fds[1], msg, len);
      status = 1;
    } else {
      write_all(fds[1], out, sizeof(double) * (size_t)pb->npoints);
    }
    close(fds[1]);
    _exit(status);
  }
  close(fds[1]);
  c->pid = pid;
  c->fd = fds[0];
  return TRUE;
}

static gboolean read_all(int fd, void *buf, size_t len)
{
  char *p = buf;
  while (len > 0) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return FALSE;
    p += r;
    len -= (size_t)r;
  }
  return TRUE;
}

/* Collect a child's times into @p out. */
static gboolean finish_child(const sp_cal_problem *pb, child *c, double *out, GError **err)
{
  gboolean ok = TRUE;
  double first = 0;
  if (!read_all(c->fd, &first, sizeof first)) {
    ok = FALSE;
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "the simulation of a candidate platform ended without a result");
  } else if (isnan(first)) {
    uint32_t len = 0;
    char msg[1024] = "";
    if (read_all(c->fd, &len, sizeof len)) read_all(c->fd, msg, MIN(len, sizeof msg - 1));
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "simulating the candidate platform: %s", msg);
    ok = FALSE;
  } else {
    out[0] = first;
    if (pb->npoints > 1 && !read_all(c->fd, out + 1, sizeof(double) * (size_t)(pb->npoints - 1))) {
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT, "the simulation of a candidate platform was cut short");
      ok = FALSE;
    }
  }
  close(c->fd);
  int status = 0;
  while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {}
  g_unlink(c->path);
  g_free(c->path);
  c->path = NULL;
  return ok;
}

/* Simulate @p m candidates at once (one child each): outs[k] receives npoints times. */
static gboolean simulate_many(const sp_cal_problem *pb, const sp_gpu_spec *gs, int m, double **outs, GError **err)
{
  child *cs = g_new0(child, m);
  int started = 0;
  gboolean ok = TRUE;
  for (; started < m && ok; started++)
    if (!start_child(pb, &gs[started], &cs[started], err)) {
      ok = FALSE;
      g_free(cs[started].path);
      break;
    }
  for (int k = 0; k < started; k++) {
    GError *e = NULL;
    if (!finish_child(pb, &cs[k], outs[k], &e)) {
      if (ok) g_propagate_error(err, e);
      else g_clear_error(&e);
      ok = FALSE;
    }
  }
  g_free(cs);
  return ok;
}

gboolean sp_cal_simulate(const sp_cal_problem *pb, const sp_gpu_spec *g, double *out, GError **err)
{
  return simulate_many(pb, g, 1, &out, err);
}

/* ---- the fit -------------------------------------------------------------------- */

static double sse(const sp_cal_problem *pb, const double *sim)
{
  double s = 0;
  for (int32_t i = 0; i < pb->npoints; i++) {
    double r = log(sim[i] / pb->points[i].time_s);
    s += r * r;
  }
  return s;
}

/* Solve the k x k system a x = b (Gaussian elimination, partial pivoting). */
static gboolean solve(double *a, double *b, int k)
{
  for (int c = 0; c < k; c++) {
    int piv = c;
    for (int r = c + 1; r < k; r++)
      if (fabs(a[r * k + c]) > fabs(a[piv * k + c])) piv = r;
    if (fabs(a[piv * k + c]) < 1e-300) return FALSE;
    if (piv != c) {
      for (int j = 0; j < k; j++) { double t = a[c * k + j]; a[c * k + j] = a[piv * k + j]; a[piv * k + j] = t; }
      double t = b[c]; b[c] = b[piv]; b[piv] = t;
    }
    for (int r = c + 1; r < k; r++) {
      double f = a[r * k + c] / a[c * k + c];
      for (int j = c; j < k; j++) a[r * k + j] -= f * a[c * k + j];
      b[r] -= f * b[c];
    }
  }
  for (int c = k - 1; c >= 0; c--) {
    double s = b[c];
    for (int j = c + 1; j < k; j++) s -= a[c * k + j] * b[j];
    b[c] = s / a[c * k + c];
  }
  return TRUE;
}

/* Is point @p p inside one node? */
static gboolean one_node(const sp_cal_point *p)
{
  for (int32_t r = 1; r < p->n; r++)
    if (p->node[r] != p->node[0]) return FALSE;
  return TRUE;
}

/* Scale the bandwidth of each domain by measured / simulated busbw at its largest point. */
static void prescale(const sp_cal_problem *pb, sp_gpu_spec *g, const double *sim)
{
  for (int d = 0; d < 2; d++) {
    int32_t best = -1;
    for (int32_t i = 0; i < pb->npoints; i++) {
      const sp_cal_point *p = &pb->points[i];
      if (p->n < 2 || one_node(p) != (d == 0)) continue;
      if (best < 0 || p->bytes > pb->points[best].bytes) best = i;
    }
    if (best < 0) continue;
    double ratio = sim[best] / pb->points[best].time_s;
    if (!(ratio > 0.01 && ratio < 100)) continue;
    sp_cal_param bw = d == 0 ? SP_CAL_NVL_BW : SP_CAL_NIC_BW;
    sp_cal_set(g, bw, sp_cal_get(g, bw) * ratio);
  }
}

gboolean sp_cal_fit(const sp_cal_problem *pb, sp_cal_result *res, GError **err)
{
  memset(res, 0, sizeof *res);
  if (pb->npoints < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no measured point to fit");
    return FALSE;
  }
  for (int32_t i = 0; i < pb->npoints; i++)
    if (!(pb->points[i].time_s > 0)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "point %d has a time of 0", i);
      return FALSE;
    }
  const int32_t np = pb->npoints;
  const int P = SP_CAL_NPARAMS;
  int max_iters = pb->max_iters > 0 ? pb->max_iters : 30;
  sp_gpu_spec g = pb->spec;
  res->start_s = g_new0(double, np);
  res->sim_s = g_new0(double, np);
  double *cur = g_new0(double, np), *trial = g_new0(double, np);
  double *jac = g_new0(double, (size_t)np * P);
  double **cols = g_new0(double *, P);
  for (int j = 0; j < P; j++) cols[j] = g_new0(double, np);
  sp_gpu_spec cand[SP_CAL_NPARAMS];
  gboolean ok = FALSE;

  if (!sp_cal_simulate(pb, &g, res->start_s, err)) goto out;
  res->evals++;
  res->rms_start = sqrt(sse(pb, res->start_s) / np);
  memcpy(cur, res->start_s, sizeof(double) * np);
  for (int pass = 0; pass < 2; pass++) {
    prescale(pb, &g, cur);
    if (!sp_cal_simulate(pb, &g, cur, err)) goto out;
    res->evals++;
  }
  double f = sse(pb, cur), lambda = 1e-3;
  gboolean active[SP_CAL_NPARAMS];
  for (int it = 0; it < max_iters; it++) {
    /* Jacobian d ln t_i / d ln p_j by forward differences, all columns at once */
    for (int j = 0; j < P; j++) {
      cand[j] = g;
      sp_cal_set(&cand[j], (sp_cal_param)j, sp_cal_get(&g, (sp_cal_param)j) * exp(FD_STEP));
    }
    if (!simulate_many(pb, cand, P, cols, err)) goto out;
    res->evals += P;
    for (int j = 0; j < P; j++)
      for (int32_t i = 0; i < np; i++) jac[(size_t)i * P + j] = log(cols[j][i] / cur[i]) / FD_STEP;
    if (it == 0) {
      /* which parameters the points determine, and which latencies they separate */
      for (int j = 0; j < P; j++) {
        double mx = 0;
        for (int32_t i = 0; i < np; i++) mx = MAX(mx, fabs(jac[(size_t)i * P + j]));
        res->determined[j] = mx > SENS_MIN;
        active[j] = res->determined[j];
      }
      const sp_cal_param lat[2] = { SP_CAL_NVL_LAT, SP_CAL_NIC_LAT };
      for (int q = 0; q < 2; q++) {
        int a = lat[q], b = SP_CAL_COLL_LAT;
        if (!active[a] || !active[b]) continue;
        double sab = 0, saa = 0, sbb = 0;
        for (int32_t i = 0; i < np; i++) {
          double x = jac[(size_t)i * P + a], y = jac[(size_t)i * P + b];
          sab += x * y;
          saa += x * x;
          sbb += y * y;
        }
        if (sab / sqrt(saa * sbb) > COLLINEAR_COS) {
          res->held[a] = TRUE;
          active[a] = FALSE;
        }
      }
    }
    int idx[SP_CAL_NPARAMS], k = 0;
    for (int j = 0; j < P; j++)
      if (active[j]) idx[k++] = j;
    if (k == 0) break;
    double jtj[SP_CAL_NPARAMS * SP_CAL_NPARAMS], jtr[SP_CAL_NPARAMS];
    for (int a = 0; a < k; a++) {
      jtr[a] = 0;
      for (int32_t i = 0; i < np; i++) jtr[a] += jac[(size_t)i * P + idx[a]] * log(cur[i] / pb->points[i].time_s);
      for (int b = 0; b < k; b++) {
        double s = 0;
        for (int32_t i = 0; i < np; i++) s += jac[(size_t)i * P + idx[a]] * jac[(size_t)i * P + idx[b]];
        jtj[a * k + b] = s;
      }
    }
    gboolean improved = FALSE;
    double maxstep = 0;
    for (int tries = 0; tries < 8 && !improved; tries++) {
      double m[SP_CAL_NPARAMS * SP_CAL_NPARAMS], d[SP_CAL_NPARAMS];
      memcpy(m, jtj, sizeof(double) * k * k);
      for (int a = 0; a < k; a++) {
        m[a * k + a] *= 1 + lambda;
        d[a] = -jtr[a];
      }
      if (!solve(m, d, k)) { lambda *= 10; continue; }
      sp_gpu_spec t = g;
      maxstep = 0;
      for (int a = 0; a < k; a++) {
        double s = CLAMP(d[a], -MAX_LOG_STEP, MAX_LOG_STEP);
        maxstep = MAX(maxstep, fabs(s));
        sp_cal_set(&t, (sp_cal_param)idx[a], sp_cal_get(&g, (sp_cal_param)idx[a]) * exp(s));
      }
      if (!sp_cal_simulate(pb, &t, trial, err)) goto out;
      res->evals++;
      double ft = sse(pb, trial);
      if (ft < f) {
        g = t;
        memcpy(cur, trial, sizeof(double) * np);
        double gain = f - ft;
        f = ft;
        lambda = MAX(lambda / 3, 1e-7);
        improved = TRUE;
        if (gain < 1e-14 * np) maxstep = 0;
      } else {
        lambda *= 4;
      }
    }
    res->iters = it + 1;
    if (!improved || maxstep < 1e-6) break;
  }
  res->spec = g;
  memcpy(res->sim_s, cur, sizeof(double) * np);
  res->rms = sqrt(f / np);
  ok = TRUE;
out:
  for (int j = 0; j < P; j++) g_free(cols[j]);
  g_free(cols);
  g_free(jac);
  g_free(cur);
  g_free(trial);
  if (!ok) sp_cal_result_clear(res);
  return ok;
}

void sp_cal_result_clear(sp_cal_result *r)
{
  g_clear_pointer(&r->sim_s, g_free);
  g_clear_pointer(&r->start_s, g_free);
}

/* ---- reading a generated platform ----------------------------------------------- */

/* The bandwidth and latency of link @p id. */
static gboolean scan_link(const sp_plat_desc *d, const char *path, const char *id, double *bw, double *lat, GError **err)
{
  const sp_plat_link *l = g_hash_table_lookup(d->links, id);
  if (l == NULL || l->bandwidth == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                "%s: not a platform of spsim's generator (no link '%s'); give generator options instead", path, id);
    return FALSE;
  }
  *bw = sp_plat_parse_unit(l->bandwidth, FALSE);
  *lat = sp_plat_parse_unit(l->latency ? l->latency : "0s", TRUE);
  if (!(*bw > 0)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM, "%s: link '%s' has no readable bandwidth ('%s')", path, id,
                l->bandwidth);
    return FALSE;
  }
  return TRUE;
}

gboolean sp_cal_platform_spec(const char *path, sp_gpu_spec *g, int32_t *nodes, int32_t *gpus_per_node,
                              gboolean *charge_local, GError **err)
{
  sp_plat_desc *d = sp_plat_read(path, err);
  if (d == NULL) return FALSE;
  gboolean ok = FALSE;
  const sp_gpu_spec *preset = NULL;
  for (int k = 0; k < SP_GPU_COUNT && d->gpu_model; k++)
    if (strcmp(sp_gpu_spec_get((sp_gpu_kind)k)->model, d->gpu_model) == 0) preset = sp_gpu_spec_get((sp_gpu_kind)k);
  if (preset == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                "%s: not a platform of spsim's generator (GPU model '%s' is none of its presets); give generator "
                "options instead", path, d->gpu_model ? d->gpu_model : "(none)");
    goto out;
  }
  *g = *preset;
  double su_bw, spine_bw;
  if (!scan_link(d, path, "node000-nvl0", &g->nvl_bw, &g->nvl_lat, err) ||
      !scan_link(d, path, "node000-nic0", &g->nic_bw, &g->nic_lat, err) ||
      !scan_link(d, path, "su0-leaf", &su_bw, &g->leaf_lat, err) ||
      !scan_link(d, path, "su0-up", &su_bw, &g->su_up_lat, err) ||
      !scan_link(d, path, "spine", &spine_bw, &g->spine_lat, err))
    goto out;
  if (d->speed > 0) g->flops = d->speed;
  if (d->gpu_mem > 0) g->gpu_mem = d->gpu_mem;
  g->nvls = d->nvls;
  g->coll_lat = d->coll_latency;
  *nodes = d->nodes;
  *gpus_per_node = d->gpus_per_node;
  *charge_local = d->mem_bw;
  if (*nodes < 1 || *gpus_per_node < 1 || (int64_t)*nodes * *gpus_per_node != d->host_elems) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                "%s: not a platform of spsim's generator (%d hosts are not %d nodes of %d GPUs)", path, d->host_elems,
                *nodes, *gpus_per_node);
    goto out;
  }
  ok = TRUE;
out:
  sp_plat_desc_free(d);
  return ok;
}
