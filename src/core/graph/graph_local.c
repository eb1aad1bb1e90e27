/* Local nodes of the graph IR: copies, slices, splits, padding, concatenation,
 * repeats, element-wise add and scale, and the cost-only compute and sync nodes. */
#include "config.h"
#include "spsim/error.h"
#include "spsim/graph.h"
#include "graph_build.h"
#include "graph_private.h"

#define BAD UINT32_MAX

static gboolean local_pair(sp_graph *g, uint32_t in, uint32_t out, const char *what,
                           const sp_tensor **pa, const sp_tensor **pb, GError **err)
{
  const sp_tensor *a = sp_g_tensor(g, in, err), *b = a ? sp_g_tensor(g, out, err) : NULL;
  if (!b)
    return FALSE;
  if (a->dtype != b->dtype) {
    sp_g_shape_err(err, what, a, b, "dtypes differ");
    return FALSE;
  }
  if (!sp_g_local_holders(g, &in, 1, out, what, err))
    return FALSE;
  *pa = a;
  *pb = b;
  return TRUE;
}

uint32_t sp_graph_copy(sp_graph *g, uint32_t in, uint32_t out, GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "copy", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b) || in == out) {
    sp_g_shape_err(err, "copy", a, b, "distinct tensors of the same size");
    return BAD;
  }
  return sp_g_node_push(g, sp_g_local_node(SP_NODE_COPY, &in, 1, out));
}

uint32_t sp_graph_slice(sp_graph *g, uint32_t in, uint32_t out, int dim, int64_t start, int64_t len,
                        GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "slice", &a, &b, err) || !sp_g_check_dim(a, dim, "slice", err))
    return BAD;
  uint64_t o, i;
  sp_g_outer_inner(a, dim, &o, &i);
  if (start < 0 || len < 1 || start + len > a->shape[dim] || sp_tensor_numel(b) != o * i * (uint64_t)len) {
    char *s = g_strdup_printf("slice [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") of dim %d must lie inside "
                              "the input and match the output's size", start, start + len, dim);
    sp_g_shape_err(err, "slice", a, b, s);
    g_free(s);
    return BAD;
  }
  sp_node *n = sp_g_local_node(SP_NODE_SLICE, &in, 1, out);
  n->dim = dim;
  n->start = start;
  n->len = len;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_split(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, int dim,
                        GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "split", &a, &b, err) || !sp_g_check_dim(a, dim, "split", err))
    return BAD;
  uint32_t ts[2] = { in, out };
  if (!sp_g_check_groups(g, gs, ts, 2, "split", err))
    return BAD;
  if (a->shape[dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "split: dim %d of '%s' has size %" G_GINT64_FORMAT
                ", not a multiple of the group size %d; cannot split it evenly (pad it first)",
                dim, a->name, a->shape[dim], gs->group_size);
    return BAD;
  }
  if (!sp_g_same_shape_except(a, b, dim) || b->shape[dim] * gs->group_size != a->shape[dim]) {
    sp_g_shape_err(err, "split", a, b, "the output's dim must be the input's divided by P");
    return BAD;
  }
  sp_node *n = sp_g_local_node(SP_NODE_SPLIT, &in, 1, out);
  n->dim = dim;
  n->len = b->shape[dim];
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_pad(sp_graph *g, uint32_t in, uint32_t out, int dim, GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "pad", &a, &b, err) || !sp_g_check_dim(a, dim, "pad", err))
    return BAD;
  if (!sp_g_same_shape_except(a, b, dim) || b->shape[dim] < a->shape[dim]) {
    sp_g_shape_err(err, "pad", a, b, "the output must equal the input except a larger pad dim");
    return BAD;
  }
  sp_node *n = sp_g_local_node(SP_NODE_PAD, &in, 1, out);
  n->dim = dim;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_concat(sp_graph *g, const uint32_t *ins, int nin, uint32_t out, int dim, GError **err)
{
  const sp_tensor *b = sp_g_tensor(g, out, err);
  if (!b || !sp_g_check_dim(b, dim, "concat", err))
    return BAD;
  if (nin < 1 || nin > SP_NODE_MAX_IO) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "concat: 1 to %d inputs", SP_NODE_MAX_IO);
    return BAD;
  }
  uint64_t o, i, rows = 0;
  sp_g_outer_inner(b, dim, &o, &i);
  for (int k = 0; k < nin; k++) {
    const sp_tensor *a = sp_g_tensor(g, ins[k], err);
    if (!a)
      return BAD;
    if (a->dtype != b->dtype || sp_tensor_numel(a) % (o * i) != 0) {
      sp_g_shape_err(err, "concat", a, b, "each input must be a block of whole slices along the dim");
      return BAD;
    }
    rows += sp_tensor_numel(a) / (o * i);
  }
  if (rows != (uint64_t)b->shape[dim]) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "concat: inputs add up to %" G_GUINT64_FORMAT
                " along dim %d but '%s' has %" G_GINT64_FORMAT, rows, dim, b->name, b->shape[dim]);
    return BAD;
  }
  if (!sp_g_local_holders(g, ins, nin, out, "concat", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_CONCAT, ins, nin, out);
  n->dim = dim;
  return sp_g_node_push(g, n);
}

static uint32_t repeat_common(sp_graph *g, sp_node_kind kind, uint32_t in, uint32_t out, int dim,
                              int32_t repeat, GError **err)
{
  const sp_tensor *a, *b;
  const char *what = sp_node_kind_name(kind);
  if (!local_pair(g, in, out, what, &a, &b, err) || !sp_g_check_dim(a, dim, what, err))
    return BAD;
  const sp_tensor *small = kind == SP_NODE_REPEAT ? a : b, *big = kind == SP_NODE_REPEAT ? b : a;
  if (repeat < 1 || !sp_g_same_shape_except(a, b, dim) || big->shape[dim] != small->shape[dim] * repeat) {
    sp_g_shape_err(err, what, a, b, "the repeated dim must be the other's times the repeat factor");
    return BAD;
  }
  sp_node *n = sp_g_local_node(kind, &in, 1, out);
  n->dim = dim;
  n->repeat = repeat;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_repeat(sp_graph *g, uint32_t in, uint32_t out, int dim, int32_t repeat, GError **err)
{
  return repeat_common(g, SP_NODE_REPEAT, in, out, dim, repeat, err);
}

uint32_t sp_graph_repeat_sum(sp_graph *g, uint32_t in, uint32_t out, int dim, int32_t repeat,
                             GError **err)
{
  return repeat_common(g, SP_NODE_REPEAT_SUM, in, out, dim, repeat, err);
}

uint32_t sp_graph_add(sp_graph *g, uint32_t a, uint32_t b, uint32_t out, sp_redop op, GError **err)
{
  const sp_tensor *x = sp_g_tensor(g, a, err), *y = x ? sp_g_tensor(g, b, err) : NULL;
  const sp_tensor *o = y ? sp_g_tensor(g, out, err) : NULL;
  if (!o)
    return BAD;
  if (x->dtype != o->dtype || y->dtype != o->dtype || sp_tensor_numel(x) != sp_tensor_numel(o) ||
      sp_tensor_numel(y) != sp_tensor_numel(o) || b == out || o->storage == y->storage) {
    sp_g_shape_err(err, "add", x, o, "same dtype and size; the second input must not be the output");
    return BAD;
  }
  uint32_t ins[2] = { a, b };
  if (!sp_g_local_holders(g, ins, 2, out, "add", err))
    return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_ADD, ins, 2, out);
  n->redop = op == SP_RED_AVG ? SP_RED_SUM : op;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_scale(sp_graph *g, uint32_t in, uint32_t out, double factor, gboolean divide,
                        GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "scale", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b) || (divide && factor == 0.0)) {
    sp_g_shape_err(err, "scale", a, b, "same size and a non-zero divisor");
    return BAD;
  }
  sp_node *n = sp_g_local_node(SP_NODE_SCALE, &in, 1, out);
  n->scale = factor;
  n->divide = divide;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_compute(sp_graph *g, const char *name, uint32_t on_tensor, double flops,
                          uint64_t bytes, GError **err)
{
  if (on_tensor != SP_NO_TENSOR && !sp_g_tensor(g, on_tensor, err))
    return BAD;
  sp_node *n = sp_g_node_alloc(SP_NODE_COMPUTE);
  n->out[0] = on_tensor;
  n->nout = on_tensor == SP_NO_TENSOR ? 0 : 1;
  n->flops = flops;
  n->bytes = bytes;
  n->name = g_strdup(name ? name : "compute");
  /* the tensor is "touched", not written: record it as an input too */
  if (on_tensor != SP_NO_TENSOR) {
    n->in[0] = on_tensor;
    n->nin = 1;
  }
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_sync(sp_graph *g, uint32_t t, GError **err)
{
  if (!sp_g_tensor(g, t, err))
    return BAD;
  sp_node *n = sp_g_node_alloc(SP_NODE_SYNC);
  n->in[0] = t;
  n->nin = 1;
  n->name = g_strdup_printf("sync:%s", sp_graph_tensor(g, t)->name);
  return sp_g_node_push(g, n);
}
