/* Pipeline parallelism (GPipe, 1F1B, interleaved 1F1B) and data parallelism (bucketed all-reduce, ZeRO). */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

/* ---------------------------------------------------------------- pipeline */

void sp_pipeline_clear(sp_pipeline *pl)
{
  g_clear_pointer(&pl->x, g_free);
  g_clear_pointer(&pl->gx, g_free);
  g_clear_pointer(&pl->y, g_free);
}

/*
 * The model is cut into C = stages x virtual_stages chunks; global chunk g runs on
 * stage g % stages (chunk g / stages of that stage). Without interleaving C = stages
 * and chunk g is stage g.
 */
typedef struct {
  sp_graph *g;
  const sp_groups *pipe;
  const sp_pipe_cfg *cfg;
  int32_t S, V, C, M;
  uint32_t *act_in;   /* [g][m]: activation entering chunk g (saved for backward) */
  uint32_t *grad_in;  /* [g][m]: gradient entering chunk g */
  gboolean *fdone, *bdone;
  sp_pipeline *pl;
} pipe_ctx;

/* "F3.s1" without interleaving, "F3.c1.s0" (local chunk c of stage s) with it */
static char *chunk_name(const pipe_ctx *c, const char *what, int32_t gc, int32_t m, int32_t s)
{
  if (c->V == 1)
    return g_strdup_printf("%s%d.s%d", what, m, s);
  return g_strdup_printf("%s%d.c%d.s%d", what, m, gc / c->S, s);
}

static uint32_t stage_tensor(pipe_ctx *c, int32_t s, const char *name, sp_tensor_init init, GError **err)
{
  uint32_t t = sp_graph_tensor_new(c->g, name, SP_F32, c->cfg->ndim, c->cfg->shape, SP_TENSOR_ACTIVATION,
                                   init, err);
  if (t == BAD)
    return BAD;
  int32_t *r = g_new(int32_t, c->pipe->n_groups);
  for (int32_t k = 0; k < c->pipe->n_groups; k++)
    r[k] = c->pipe->ranks[k * c->S + s];
  gboolean ok = sp_graph_tensor_place(c->g, t, r, c->pipe->n_groups, err);
  g_free(r);
  return ok ? t : BAD;
}

/* groups {stage a, stage b} of every pipe */
static sp_groups pair_groups(pipe_ctx *c, int32_t a, int32_t b)
{
  sp_groups p = { c->pipe->n_groups, 2, g_new(int32_t, 2 * c->pipe->n_groups) };
  for (int32_t k = 0; k < c->pipe->n_groups; k++) {
    p.ranks[2 * k] = c->pipe->ranks[k * c->S + a];
    p.ranks[2 * k + 1] = c->pipe->ranks[k * c->S + b];
  }
  return p;
}

/*
 * Hand @p src (on stage @p from) to the chunk on stage @p to: an async send/recv into a
 * new tensor, or, with one stage (an interleaved single stage passing between its own
 * chunks), the tensor itself.
 */
static uint32_t transfer(pipe_ctx *c, int32_t from, int32_t to, uint32_t src, const char *name, GError **err)
{
  if (from == to)
    return src;
  uint32_t dst = stage_tensor(c, to, name, SP_INIT_NONE, err);
  if (dst == BAD)
    return BAD;
  sp_groups p = pair_groups(c, from, to);
  uint32_t n = sp_graph_send_recv(c->g, &p, src, dst, err);
  g_free(p.ranks);
  if (n == BAD)
    return BAD;
  sp_graph_node_set_async(c->g, n, TRUE);
  return dst;
}

static gboolean emit_f(pipe_ctx *c, int32_t gc, int32_t m, GError **err)
{
  const int32_t S = c->S, M = c->M, s = gc % S;
  char *nm = chunk_name(c, "F", gc, m, s);
  uint32_t in = c->act_in[gc * M + m];
  double fl = c->cfg->flops_fwd_layer * (c->cfg->layers / c->C);
  gboolean ok = sp_graph_compute(c->g, nm, in, fl, 0, err) != BAD;
  g_free(nm);
  char *an = chunk_name(c, "act", gc, m, s);
  nm = g_strdup_printf("%s.out", an);
  g_free(an);
  uint32_t out = ok ? stage_tensor(c, s, nm, SP_INIT_NONE, err) : BAD;
  g_free(nm);
  if (out == BAD || sp_graph_scale(c->g, in, out, 2.0, FALSE, err) == BAD)
    return FALSE;
  if (gc + 1 < c->C) {
    /* to the next chunk: stage s + 1, or from the last stage back to stage 0 */
    nm = chunk_name(c, "act", gc + 1, m, (gc + 1) % S);
    uint32_t nx = transfer(c, s, (gc + 1) % S, out, nm, err);
    g_free(nm);
    if (nx == BAD)
      return FALSE;
    c->act_in[(gc + 1) * M + m] = nx;
  } else {
    c->pl->y[m] = out;
    c->grad_in[gc * M + m] = out; /* the loss gradient: the output itself */
  }
  return TRUE;
}

static gboolean emit_b(pipe_ctx *c, int32_t gc, int32_t m, GError **err)
{
  const int32_t S = c->S, M = c->M, s = gc % S;
  char *nm = chunk_name(c, "B", gc, m, s);
  double fl = c->cfg->flops_bwd_layer * (c->cfg->layers / c->C);
  /* backward reads the saved activation: it stays live until here */
  gboolean ok = sp_graph_compute(c->g, nm, c->act_in[gc * M + m], fl, 0, err) != BAD;
  g_free(nm);
  char *an = chunk_name(c, "grad", gc, m, s);
  nm = g_strdup_printf("%s.out", an);
  g_free(an);
  uint32_t gout = ok ? stage_tensor(c, s, nm, SP_INIT_NONE, err) : BAD;
  g_free(nm);
  if (gout == BAD || sp_graph_scale(c->g, c->grad_in[gc * M + m], gout, 2.0, FALSE, err) == BAD)
    return FALSE;
  if (gc > 0) {
    /* to the previous chunk: stage s - 1, or from stage 0 back to the last stage */
    nm = chunk_name(c, "grad", gc - 1, m, (gc - 1) % S);
    uint32_t gp = transfer(c, s, (gc - 1) % S, gout, nm, err);
    g_free(nm);
    if (gp == BAD)
      return FALSE;
    c->grad_in[(gc - 1) * M + m] = gp;
  } else {
    c->pl->gx[m] = gout;
  }
  return TRUE;
}

/*
 * Action list of stage @p s: 2 V M entries, +(1 + g M + m) for the forward of
 * micro-batch m through global chunk g, -(1 + g M + m) for its backward.
 */
static void stage_actions(const pipe_ctx *c, int32_t s, int32_t *a)
{
  const int32_t S = c->S, V = c->V, M = c->M, N = V * M;
  int32_t n = 0;
  if (V == 1) {
    int32_t w = c->cfg->schedule == SP_PIPE_GPIPE ? M : MIN(S - s - 1, M);
    for (int32_t m = 0; m < w; m++)
      a[n++] = 1 + s * M + m;
    for (int32_t i = 0; i < M - w; i++) {
      a[n++] = 1 + s * M + w + i;
      a[n++] = -(1 + s * M + i);
    }
    for (int32_t m = M - w; m < M; m++)
      a[n++] = -(1 + s * M + m);
    return;
  }
  /*
   * Megatron's interleaved order over N = V M virtual micro-batches: virtual index k
   * is micro-batch (k / (S V)) S + k % S of local chunk (k % (S V)) / S going
   * forward, of local chunk V - 1 - (k % (S V)) / S going backward. Warm-up
   * (S - s - 1) 2 + (V - 1) S forwards (all of them for GPipe), then one forward one
   * backward, then the remaining backwards.
   */
  int32_t w = c->cfg->schedule == SP_PIPE_GPIPE ? N : MIN((S - s - 1) * 2 + (V - 1) * S, N);
#define VMB(k) (((k) / (S * V)) * S + (k) % S)
#define FWD(k) (1 + ((((k) % (S * V)) / S) * S + s) * M + VMB(k))
#define BWD(k) (-(1 + ((V - 1 - ((k) % (S * V)) / S) * S + s) * M + VMB(k)))
  for (int32_t k = 0; k < w; k++)
    a[n++] = FWD(k);
  for (int32_t i = 0; i < N - w; i++) {
    a[n++] = FWD(w + i);
    a[n++] = BWD(i);
  }
  for (int32_t k = N - w; k < N; k++)
    a[n++] = BWD(k);
#undef VMB
#undef FWD
#undef BWD
}

gboolean sp_op_pipeline(sp_graph *g, const sp_groups *pipe, const sp_pipe_cfg *cfg, sp_pipeline *pl,
                        GError **err)
{
  memset(pl, 0, sizeof *pl);
  if (!pipe || pipe->group_size < 1 || !cfg || cfg->stages != pipe->group_size || cfg->micro_batches < 1 ||
      cfg->virtual_stages < 1 || cfg->layers < 1 || cfg->ndim < 1 || cfg->ndim > SP_MAX_DIMS) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "pipeline: stages must equal the pipe group size and micro-batches, layers, "
                "virtual stages and the activation shape be positive");
    return FALSE;
  }
  if (cfg->schedule != SP_PIPE_GPIPE && cfg->schedule != SP_PIPE_1F1B) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "pipeline: unknown schedule %d", (int)cfg->schedule);
    return FALSE;
  }
  const int64_t chunks = (int64_t)cfg->stages * cfg->virtual_stages;
  if (chunks * cfg->micro_batches > G_MAXINT32 / 4) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "pipeline: stages x virtual stages x micro-batches is too large");
    return FALSE;
  }
  if (cfg->layers % chunks != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                "pipeline: %d layers do not divide by %d stages x %d virtual stages; layers would be "
                "dropped (choose a layer count that is a multiple of %" G_GINT64_FORMAT ")",
                cfg->layers, cfg->stages, cfg->virtual_stages, chunks);
    return FALSE;
  }
  if (cfg->virtual_stages > 1 && cfg->micro_batches % cfg->stages != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                "pipeline: the interleaved schedule (%d virtual stages) needs the micro-batches (%d) to "
                "divide by the stages (%d); use a multiple of %d micro-batches or 1 virtual stage",
                cfg->virtual_stages, cfg->micro_batches, cfg->stages, cfg->stages);
    return FALSE;
  }
  const int32_t S = cfg->stages, V = cfg->virtual_stages, C = S * V, M = cfg->micro_batches;
  pipe_ctx c = { g, pipe, cfg, S, V, C, M, g_new0(uint32_t, C * M), g_new0(uint32_t, C * M),
                 g_new0(gboolean, C * M), g_new0(gboolean, C * M), pl };
  pl->x = g_new(uint32_t, M);
  pl->gx = g_new(uint32_t, M);
  pl->y = g_new(uint32_t, M);
  gboolean ok = TRUE;
  for (int32_t m = 0; ok && m < M; m++) {
    char *nm = g_strdup_printf("x%d", m);
    pl->x[m] = c.act_in[m] = stage_tensor(&c, 0, nm, SP_INIT_INPUT, err);
    g_free(nm);
    ok = pl->x[m] != BAD;
  }
  const int32_t per = 2 * V * M;
  int32_t **acts = g_new(int32_t *, S), *pos = g_new0(int32_t, S);
  for (int32_t s = 0; s < S; s++) {
    acts[s] = g_new(int32_t, per);
    stage_actions(&c, s, acts[s]);
  }
  /* linearise: emit any stage's next action whose inputs exist */
  int32_t left = ok ? S * per : 0;
  while (ok && left > 0) {
    gboolean progress = FALSE;
    for (int32_t s = 0; ok && s < S; s++) {
      while (ok && pos[s] < per) {
        int32_t a = acts[s][pos[s]];
        int32_t id = (a > 0 ? a : -a) - 1, gc = id / M, m = id % M;
        gboolean ready = a > 0 ? (gc == 0 || c.fdone[(gc - 1) * M + m])
                               : (c.fdone[gc * M + m] && (gc == C - 1 || c.bdone[(gc + 1) * M + m]));
        if (!ready)
          break;
        ok = a > 0 ? emit_f(&c, gc, m, err) : emit_b(&c, gc, m, err);
        (a > 0 ? c.fdone : c.bdone)[gc * M + m] = TRUE;
        pos[s]++;
        left--;
        progress = TRUE;
      }
    }
    if (ok && !progress) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "pipeline: the schedule cannot progress (internal error)");
      ok = FALSE;
    }
  }
  for (int32_t s = 0; s < S; s++)
    g_free(acts[s]);
  g_free(acts);
  g_free(pos);
  g_free(c.act_in);
  g_free(c.grad_in);
  g_free(c.fdone);
  g_free(c.bdone);
  if (!ok)
    sp_pipeline_clear(pl);
  return ok;
}

/* ---------------------------------------------------------------- data parallel */

/* Flat f32-or-any 1-D tensor of @p n elements placed like @p like. */
static uint32_t flat_like(sp_graph *g, uint32_t like, const char *nm, uint64_t n, sp_tensor_kind kind,
                          GError **err)
{
  int64_t shp[1] = { (int64_t)n };
  return sp_ops_like(g, like, nm, 1, shp, kind, err);
}

int sp_op_dp_allreduce(sp_graph *g, const sp_groups *dp, const uint32_t *grads, int n,
                       uint64_t bucket_bytes, uint32_t *out, GError **err)
{
  if (n < 1 || !dp || dp->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "data-parallel all-reduce: no gradients or no group");
    return -1;
  }
  int buckets = 0;
  for (int i = 0; i < n;) {
    const sp_tensor *t0 = sp_graph_tensor(g, grads[i]);
    if (!t0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "data-parallel all-reduce: bad gradient id");
      return -1;
    }
    /* grow the bucket while it fits (same dtype, at most SP_NODE_MAX_IO tensors) */
    int j = i + 1;
    uint64_t bytes = sp_tensor_bytes(t0), elems = sp_tensor_numel(t0);
    while (j < n && j - i < SP_NODE_MAX_IO) {
      const sp_tensor *t = sp_graph_tensor(g, grads[j]);
      if (!t || t->dtype != t0->dtype || bytes + sp_tensor_bytes(t) > bucket_bytes)
        break;
      bytes += sp_tensor_bytes(t);
      elems += sp_tensor_numel(t);
      j++;
    }
    char *nm = g_strdup_printf("bucket%d", buckets);
    uint32_t flat = flat_like(g, grads[i], nm, elems, SP_TENSOR_COMM, err);
    uint32_t red = flat == BAD ? BAD : flat_like(g, grads[i], "reduced", elems, SP_TENSOR_COMM, err);
    g_free(nm);
    if (red == BAD || sp_graph_concat(g, grads + i, j - i, flat, 0, err) == BAD ||
        sp_graph_all_reduce(g, dp, flat, red, SP_RED_AVG, SP_ALGO_AUTO, err) == BAD)
      return -1;
    uint64_t off = 0;
    for (int k = i; k < j; k++) {
      const sp_tensor *t = sp_graph_tensor(g, grads[k]);
      out[k] = sp_ops_like(g, grads[k], "avg", t->ndim, t->shape, SP_TENSOR_GRAD, err);
      if (out[k] == BAD || sp_graph_slice(g, red, out[k], 0, (int64_t)off, (int64_t)sp_tensor_numel(t), err) == BAD)
        return -1;
      off += sp_tensor_numel(t);
    }
    buckets++;
    i = j;
  }
  return buckets;
}

gboolean sp_op_zero_step(sp_graph *g, const sp_groups *dp, int stage, const uint32_t *grads, int n,
                         uint32_t param_shard, double lr, uint32_t *grad_shard, uint32_t *params_full,
                         GError **err)
{
  if (stage < 1 || stage > 3 || n < 1 || n > SP_NODE_MAX_IO || !dp || dp->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "ZeRO: stage must be 1, 2 or 3 with 1 to %d gradients",
                SP_NODE_MAX_IO);
    return FALSE;
  }
  const int32_t P = dp->group_size;
  uint64_t N = 0;
  for (int i = 0; i < n; i++) {
    const sp_tensor *t = sp_graph_tensor(g, grads[i]);
    if (!t || t->dtype != SP_F32) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "ZeRO: gradients must be f32 tensors");
      return FALSE;
    }
    N += sp_tensor_numel(t);
  }
  const uint64_t Np = (N + P - 1) / P * P;
  const sp_tensor *ps = sp_graph_tensor(g, param_shard);
  if (!ps || ps->dtype != SP_F32 || sp_tensor_numel(ps) != Np / P) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "ZeRO: the parameter shard must be f32 with %" G_GUINT64_FORMAT " elements (N padded to P / P)",
                Np / P);
    return FALSE;
  }
  uint32_t flat = flat_like(g, grads[0], "flat", N, SP_TENSOR_COMM, err);
  if (flat == BAD || sp_graph_concat(g, grads, n, flat, 0, err) == BAD)
    return FALSE;
  if (Np != N) {
    uint32_t padded = flat_like(g, grads[0], "padded", Np, SP_TENSOR_COMM, err);
    if (padded == BAD || sp_graph_pad(g, flat, padded, 0, err) == BAD)
      return FALSE;
    flat = padded;
  }
  *grad_shard = flat_like(g, grads[0], "shard", Np / P, SP_TENSOR_GRAD, err);
  if (*grad_shard == BAD ||
      sp_graph_reduce_scatter(g, dp, flat, *grad_shard, 0, SP_RED_AVG, SP_ALGO_AUTO, err) == BAD)
    return FALSE;
  /* SGD on the shard: step = -lr g; p += step */
  uint32_t step = flat_like(g, *grad_shard, "step", Np / P, SP_TENSOR_GRAD, err);
  uint32_t newp = step == BAD ? BAD : sp_ops_like(g, param_shard, "new", 1, (int64_t[]){ (int64_t)(Np / P) },
                                                 SP_TENSOR_WEIGHT, err);
  if (newp == BAD || sp_graph_scale(g, *grad_shard, step, -lr, FALSE, err) == BAD ||
      sp_graph_add(g, param_shard, step, newp, SP_RED_SUM, err) == BAD)
    return FALSE;
  *params_full = SP_NO_TENSOR;
  if (stage <= 2) {
    *params_full = flat_like(g, newp, "full", Np, SP_TENSOR_WEIGHT, err);
    if (*params_full == BAD || sp_graph_all_gather(g, dp, newp, *params_full, 0, SP_ALGO_AUTO, err) == BAD)
      return FALSE;
  }
  return TRUE;
}

uint32_t sp_op_fsdp_gather(sp_graph *g, const sp_groups *dp, uint32_t shard, GError **err)
{
  return sp_op_gather_fwd(g, dp, shard, 0, err);
}
