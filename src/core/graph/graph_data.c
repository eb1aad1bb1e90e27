/* Data mode of the graph IR: per-rank buffers of every storage, their filling and
 * comparison, and the reference interpreter that runs a graph globally (collectives
 * folded in group order, local nodes and kernels on each holding rank). */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/graph.h"
#include "graph_build.h"
#include "graph_private.h"

/* ---------------------------------------------------------------- data */

sp_graph_data *sp_graph_data_new(const sp_graph *g)
{
  sp_graph_data *d = g_new0(sp_graph_data, 1);
  d->g = g;
  d->world = g->world;
  d->nstor = g->storage->len;
  d->buf = g_new0(void **, d->world);
  for (int32_t r = 0; r < d->world; r++) {
    d->buf[r] = g_new0(void *, d->nstor ? d->nstor : 1);
    for (guint s = 0; s < d->nstor; s++) {
      uint64_t b = sp_graph_storage_bytes(g, s, r);
      d->buf[r][s] = b ? g_malloc0(b) : NULL;
    }
  }
  for (guint t = 0; t < g->tensors->len; t++) {
    const sp_tensor *x = sp_graph_tensor(g, t);
    if (x->init != SP_INIT_IOTA)
      continue;
    int64_t last = x->shape[x->ndim - 1];
    uint64_t n = sp_tensor_numel(x);
    for (int32_t r = 0; r < d->world; r++) {
      void *p = sp_graph_data_get(d, t, r);
      if (!p)
        continue;
      for (uint64_t i = 0; i < n; i++) {
        int64_t v = (int64_t)(i % (uint64_t)last);
        switch (x->dtype) {
        case SP_F32: ((float *)p)[i] = (float)v; break;
        case SP_F16: ((uint16_t *)p)[i] = sp_f32_to_f16((float)v); break;
        case SP_BF16: ((uint16_t *)p)[i] = sp_f32_to_bf16((float)v); break;
        case SP_I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case SP_I64: ((int64_t *)p)[i] = v; break;
        case SP_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
        default: break;
        }
      }
    }
  }
  return d;
}

void sp_graph_data_free(sp_graph_data *d)
{
  if (!d)
    return;
  for (int32_t r = 0; r < d->world; r++) {
    for (guint s = 0; s < d->nstor; s++)
      g_free(d->buf[r][s]);
    g_free(d->buf[r]);
  }
  g_free(d->buf);
  g_free(d);
}

void *sp_graph_data_get(sp_graph_data *d, uint32_t t, int32_t rank)
{
  if (!sp_graph_tensor_on(d->g, t, rank))
    return NULL;
  return d->buf[rank][sp_graph_tensor(d->g, t)->storage];
}

void sp_graph_input_fill(const sp_graph *g, uint32_t t, int32_t rank, uint64_t seed, void *buf)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  sp_fill_pattern(buf, sp_tensor_numel(x), x->dtype,
                  seed ^ ((uint64_t)(t + 1) * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(rank + 1) << 40), 0);
}

void sp_graph_data_fill_inputs(sp_graph_data *d, uint64_t seed)
{
  for (guint t = 0; t < d->g->tensors->len; t++) {
    const sp_tensor *x = sp_graph_tensor(d->g, t);
    if (x->init != SP_INIT_INPUT)
      continue;
    for (int32_t r = 0; r < d->world; r++) {
      void *p = sp_graph_data_get(d, t, r);
      if (p)
        sp_graph_input_fill(d->g, t, r, seed, p);
    }
  }
}

void sp_graph_data_copy(sp_graph_data *dst, const sp_graph_data *src)
{
  for (int32_t r = 0; r < dst->world && r < src->world; r++)
    for (guint s = 0; s < dst->nstor && s < src->nstor; s++) {
      uint64_t b = sp_graph_storage_bytes(dst->g, s, r);
      if (b)
        memcpy(dst->buf[r][s], src->buf[r][s], b);
    }
}

static double elem_f64(const void *p, uint64_t i, sp_dtype t)
{
  switch (t) {
  case SP_F32: return ((const float *)p)[i];
  case SP_F16: return sp_f16_to_f32(((const uint16_t *)p)[i]);
  case SP_BF16: return sp_bf16_to_f32(((const uint16_t *)p)[i]);
  case SP_I32: return ((const int32_t *)p)[i];
  case SP_I64: return (double)((const int64_t *)p)[i];
  case SP_U8: return ((const uint8_t *)p)[i];
  default: return 0;
  }
}

gboolean sp_graph_data_compare(const sp_graph *g, const sp_graph_data *a, const sp_graph_data *b,
                               uint32_t t, double tol, GError **err)
{
  const sp_tensor *x = sp_g_tensor(g, t, err);
  if (!x)
    return FALSE;
  uint64_t n = sp_tensor_numel(x);
  size_t es = sp_dtype_size(x->dtype);
  for (int32_t r = 0; r < g->world; r++) {
    if (!sp_graph_tensor_on(g, t, r))
      continue;
    const uint8_t *pa = a->buf[r][x->storage], *pb = b->buf[r][x->storage];
    for (uint64_t i = 0; i < n; i++) {
      gboolean same;
      if (tol == 0.0) {
        same = memcmp(pa + i * es, pb + i * es, es) == 0;
      } else {
        double u = elem_f64(pa, i, x->dtype), v = elem_f64(pb, i, x->dtype);
        same = fabs(u - v) <= tol * fmax(1.0, fabs(v));
      }
      if (!same) {
        g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                    "tensor '%s' differs on rank %d at element %" G_GUINT64_FORMAT ": %.9g vs %.9g%s",
                    x->name, r, i, elem_f64(pa, i, x->dtype), elem_f64(pb, i, x->dtype),
                    tol == 0.0 ? " (bitwise)" : "");
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* ---------------------------------------------------------------- reference */

/* Decompose a linear index into a multi-index over shape. */
static void unravel(uint64_t lin, const int64_t *shape, int nd, int64_t *idx)
{
  for (int k = nd - 1; k >= 0; k--) {
    idx[k] = (int64_t)(lin % (uint64_t)shape[k]);
    lin /= (uint64_t)shape[k];
  }
}

static uint64_t ravel(const int64_t *idx, const int64_t *shape, int nd)
{
  uint64_t lin = 0;
  for (int k = 0; k < nd; k++)
    lin = lin * (uint64_t)shape[k] + (uint64_t)idx[k];
  return lin;
}

static void reduce_into(void *acc, void *const *ins, int32_t n, uint64_t count, sp_dtype t,
                        sp_redop op)
{
  memcpy(acc, ins[0], count * sp_dtype_size(t));
  for (int32_t i = 1; i < n; i++)
    sp_reduce_host(acc, ins[i], count, t, op == SP_RED_AVG ? SP_RED_SUM : op);
  if (op == SP_RED_AVG)
    sp_scale_host(acc, count, t, (double)n, TRUE);
}

static void ref_coll(const sp_graph *g, const sp_node *n, sp_graph_data *d, const int32_t *grp)
{
  const sp_tensor *a = sp_graph_tensor(g, n->in[0]), *b = sp_graph_tensor(g, n->out[0]);
  const int32_t P = n->gsize;
  const size_t es = sp_dtype_size(a->dtype);
  const uint64_t na = sp_tensor_numel(a), nb = sp_tensor_numel(b);
  void **ins = g_new(void *, P);
  void **outs = g_new(void *, P);
  for (int32_t i = 0; i < P; i++) {
    ins[i] = sp_graph_data_get(d, n->in[0], grp[i]);
    outs[i] = sp_graph_data_get(d, n->out[0], grp[i]);
  }
  /* results go to fresh buffers first, written at the end (outputs may alias nothing) */
  uint8_t **res = g_new0(uint8_t *, P);
  int64_t idx[SP_MAX_DIMS];
  switch (n->kind) {
  case SP_NODE_ALL_REDUCE:
  case SP_NODE_REDUCE: {
    uint8_t *acc = g_malloc(na * es);
    reduce_into(acc, ins, P, na, a->dtype, n->redop);
    for (int32_t i = 0; i < P; i++)
      if (n->kind == SP_NODE_ALL_REDUCE || i == n->root)
        res[i] = g_memdup2(acc, na * es);
    g_free(acc);
    break;
  }
  case SP_NODE_BROADCAST:
    for (int32_t i = 0; i < P; i++)
      res[i] = g_memdup2(ins[n->root], na * es);
    break;
  case SP_NODE_SEND_RECV:
    res[1] = g_memdup2(ins[0], na * es);
    break;
  case SP_NODE_SHIFT:
    for (int32_t i = 0; i < P; i++)
      res[i] = g_memdup2(ins[(i + P - 1) % P], na * es);
    break;
  case SP_NODE_ALL_GATHER:
    for (int32_t j = 0; j < P; j++) {
      res[j] = g_malloc(nb * es);
      for (uint64_t o = 0; o < nb; o++) {
        unravel(o, b->shape, b->ndim, idx);
        int64_t src = idx[n->dim] / a->shape[n->dim];
        idx[n->dim] -= src * a->shape[n->dim];
        memcpy(res[j] + o * es, (uint8_t *)ins[src] + ravel(idx, a->shape, a->ndim) * es, es);
      }
    }
    break;
  case SP_NODE_REDUCE_SCATTER: {
    uint8_t *acc = g_malloc(na * es);
    reduce_into(acc, ins, P, na, a->dtype, n->redop);
    for (int32_t j = 0; j < P; j++) {
      res[j] = g_malloc(nb * es);
      for (uint64_t o = 0; o < nb; o++) {
        unravel(o, b->shape, b->ndim, idx);
        idx[n->dim] += j * b->shape[n->dim];
        memcpy(res[j] + o * es, acc + ravel(idx, a->shape, a->ndim) * es, es);
      }
    }
    g_free(acc);
    break;
  }
  case SP_NODE_ALL_TO_ALL: {
    /* block shape: the input with the scatter dim divided by P */
    const int s = n->dim2, gd = n->dim;
    int64_t blk[SP_MAX_DIMS];
    memcpy(blk, a->shape, sizeof blk);
    blk[s] /= P;
    for (int32_t j = 0; j < P; j++) {
      res[j] = g_malloc(nb * es);
      for (uint64_t o = 0; o < nb; o++) {
        unravel(o, b->shape, b->ndim, idx);
        int64_t src = idx[gd] / blk[gd];  /* member the block came from */
        idx[gd] -= src * blk[gd];         /* position inside the block */
        idx[s] += j * blk[s];             /* block j of the sender's scatter dim */
        memcpy(res[j] + o * es, (uint8_t *)ins[src] + ravel(idx, a->shape, a->ndim) * es, es);
      }
    }
    break;
  }
  default:
    break;
  }
  for (int32_t i = 0; i < P; i++)
    if (res[i]) {
      memcpy(outs[i], res[i], nb * es);
      g_free(res[i]);
    }
  g_free(res);
  g_free(ins);
  g_free(outs);
}

static void ref_local(const sp_graph *g, const sp_node *n, sp_graph_data *d, int32_t r)
{
  const sp_tensor *b = sp_graph_tensor(g, n->out[0]);
  const sp_tensor *a = n->nin ? sp_graph_tensor(g, n->in[0]) : NULL;
  const size_t es = sp_dtype_size(b->dtype);
  const uint64_t nb = sp_tensor_numel(b);
  uint8_t *out = sp_graph_data_get(d, n->out[0], r);
  uint8_t *in = a ? sp_graph_data_get(d, n->in[0], r) : NULL;
  uint8_t *res = g_malloc0(nb * es);
  int64_t idx[SP_MAX_DIMS], view[SP_MAX_DIMS];
  switch (n->kind) {
  case SP_NODE_COPY:
    memcpy(res, in, nb * es);
    break;
  case SP_NODE_SLICE:
  case SP_NODE_SPLIT: {
    int64_t start = n->start;
    if (n->kind == SP_NODE_SPLIT) {
      int32_t gi = sp_node_group_index(n, r, NULL);
      if (gi < 0) {
        g_free(res);
        return; /* not in the group set: the output stays as is */
      }
      start = gi * n->len;
    }
    memcpy(view, a->shape, sizeof view);
    view[n->dim] = n->len;
    for (uint64_t o = 0; o < nb; o++) {
      unravel(o, view, a->ndim, idx);
      idx[n->dim] += start;
      memcpy(res + o * es, in + ravel(idx, a->shape, a->ndim) * es, es);
    }
    break;
  }
  case SP_NODE_PAD:
    for (uint64_t o = 0; o < nb; o++) {
      unravel(o, b->shape, b->ndim, idx);
      if (idx[n->dim] < a->shape[n->dim])
        memcpy(res + o * es, in + ravel(idx, a->shape, a->ndim) * es, es);
    }
    break;
  case SP_NODE_CONCAT: {
    uint64_t outer, inner;
    sp_g_outer_inner(b, n->dim, &outer, &inner);
    for (uint64_t o = 0; o < nb; o++) {
      unravel(o, b->shape, b->ndim, idx);
      int64_t pos = idx[n->dim];
      for (int k = 0; k < n->nin; k++) {
        const sp_tensor *x = sp_graph_tensor(g, n->in[k]);
        int64_t len = (int64_t)(sp_tensor_numel(x) / (outer * inner));
        if (pos < len) {
          memcpy(view, b->shape, sizeof view);
          view[n->dim] = len;
          idx[n->dim] = pos;
          memcpy(res + o * es, (uint8_t *)sp_graph_data_get(d, n->in[k], r) + ravel(idx, view, b->ndim) * es, es);
          break;
        }
        pos -= len;
      }
    }
    break;
  }
  case SP_NODE_REPEAT:
    for (uint64_t o = 0; o < nb; o++) {
      unravel(o, b->shape, b->ndim, idx);
      idx[n->dim] /= n->repeat;
      memcpy(res + o * es, in + ravel(idx, a->shape, a->ndim) * es, es);
    }
    break;
  case SP_NODE_REPEAT_SUM:
    for (uint64_t o = 0; o < nb; o++) {
      unravel(o, b->shape, b->ndim, idx);
      int64_t h = idx[n->dim];
      for (int32_t t = 0; t < n->repeat; t++) {
        idx[n->dim] = h * n->repeat + t;
        const uint8_t *src = in + ravel(idx, a->shape, a->ndim) * es;
        if (t == 0)
          memcpy(res + o * es, src, es);
        else
          sp_reduce_host(res + o * es, src, 1, b->dtype, SP_RED_SUM);
      }
    }
    break;
  case SP_NODE_ADD:
    memcpy(res, in, nb * es);
    sp_reduce_host(res, sp_graph_data_get(d, n->in[1], r), nb, b->dtype, n->redop);
    break;
  case SP_NODE_SCALE:
    memcpy(res, in, nb * es);
    sp_scale_host(res, nb, b->dtype, n->scale, n->divide);
    break;
  default:
    break;
  }
  memcpy(out, res, nb * es);
  g_free(res);
}

gboolean sp_graph_reference(const sp_graph *g, sp_graph_data *d, GError **err)
{
  for (guint ni = 0; ni < g->nodes->len; ni++) {
    const sp_node *n = sp_graph_node(g, ni);
    if (sp_node_kind_is_coll(n->kind)) {
      for (int32_t k = 0; k < n->ngroups; k++)
        ref_coll(g, n, d, n->ranks + (int64_t)k * n->gsize);
    } else if (sp_node_is_kernel(n)) {
      for (int32_t r = 0; r < g->world; r++)
        if (sp_graph_tensor_on(g, n->out[0], r) && !sp_graph_kernel_host(g, ni, r, d->buf[r], err))
          return FALSE;
    } else if (n->kind != SP_NODE_COMPUTE && n->kind != SP_NODE_SYNC) {
      for (int32_t r = 0; r < g->world; r++)
        if (sp_graph_tensor_on(g, n->out[0], r))
          ref_local(g, n, d, r);
    }
  }
  return TRUE;
}