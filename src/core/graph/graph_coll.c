/* Collective nodes of the graph IR: all-reduce, all-gather, reduce-scatter,
 * all-to-all, broadcast, reduce, send-recv and the ring shift, each checked against
 * its group set and shapes. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/graph.h"
#include "graph_build.h"
#include "graph_private.h"

#define BAD UINT32_MAX

static sp_node *coll_node(sp_graph *g, sp_node_kind kind, const sp_groups *gs, uint32_t in,
                          uint32_t out, sp_algo algo)
{
  sp_node *n = sp_g_node_alloc(kind);
  n->in[0] = in;
  n->nin = 1;
  n->out[0] = out;
  n->nout = 1;
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  n->algo = algo;
  (void)g;
  return n;
}

static gboolean coll_common(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                            const char *what, const sp_tensor **pi, const sp_tensor **po, GError **err)
{
  const sp_tensor *a = sp_g_tensor(g, in, err);
  if (!a)
    return FALSE;
  const sp_tensor *b = sp_g_tensor(g, out, err);
  if (!b)
    return FALSE;
  if (a->dtype != b->dtype) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "%s: '%s' is %s but '%s' is %s", what, a->name,
                sp_dtype_name(a->dtype), b->name, sp_dtype_name(b->dtype));
    return FALSE;
  }
  if (in == out || a->storage == b->storage) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: input and output must be distinct buffers", what);
    return FALSE;
  }
  uint32_t ts[2] = { in, out };
  if (!sp_g_check_groups(g, gs, ts, 2, what, err))
    return FALSE;
  *pi = a;
  *po = b;
  return TRUE;
}

uint32_t sp_graph_all_reduce(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                             sp_redop op, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "all-reduce", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b)) {
    sp_g_shape_err(err, "all-reduce", a, b, "sizes must be equal");
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_ALL_REDUCE, gs, in, out, algo);
  n->redop = op;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_all_gather(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, int dim,
                             sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "all-gather", &a, &b, err) || !sp_g_check_dim(a, dim, "all-gather", err))
    return BAD;
  if (!sp_g_same_shape_except(a, b, dim) || b->shape[dim] != a->shape[dim] * gs->group_size) {
    sp_g_shape_err(err, "all-gather", a, b, "the output's gather dim must be P times the input's");
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_ALL_GATHER, gs, in, out, algo);
  n->dim = dim;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_reduce_scatter(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                                 int dim, sp_redop op, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "reduce-scatter", &a, &b, err) ||
      !sp_g_check_dim(a, dim, "reduce-scatter", err))
    return BAD;
  if (a->shape[dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "reduce-scatter: dim %d of '%s' (%" G_GINT64_FORMAT ") does not divide by the group size %d",
                dim, a->name, a->shape[dim], gs->group_size);
    return BAD;
  }
  if (!sp_g_same_shape_except(a, b, dim) || b->shape[dim] * gs->group_size != a->shape[dim]) {
    sp_g_shape_err(err, "reduce-scatter", a, b, "the output's dim must be the input's divided by P");
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_REDUCE_SCATTER, gs, in, out, algo);
  n->dim = dim;
  n->redop = op;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_all_to_all(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                             int scatter_dim, int gather_dim, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "all-to-all", &a, &b, err) ||
      !sp_g_check_dim(a, scatter_dim, "all-to-all scatter", err) ||
      !sp_g_check_dim(a, gather_dim, "all-to-all gather", err))
    return BAD;
  if (a->shape[scatter_dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "all-to-all: scatter dim %d of '%s' has size %" G_GINT64_FORMAT
                ", not divisible by the group size %d; pad it or choose a group size that divides it",
                scatter_dim, a->name, a->shape[scatter_dim], gs->group_size);
    return BAD;
  }
  int64_t want[SP_MAX_DIMS];
  memcpy(want, a->shape, sizeof want);
  want[scatter_dim] /= gs->group_size;
  want[gather_dim] *= gs->group_size;
  for (int i = 0; i < a->ndim; i++)
    if (b->ndim != a->ndim || b->shape[i] != want[i]) {
      sp_g_shape_err(err, "all-to-all", a, b, "output = input with scatter dim / P and gather dim x P");
      return BAD;
    }
  sp_node *n = coll_node(g, SP_NODE_ALL_TO_ALL, gs, in, out, algo);
  n->dim = gather_dim;
  n->dim2 = scatter_dim;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_broadcast(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                            int32_t root, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "broadcast", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b) || root < 0 || root >= gs->group_size) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "broadcast: sizes must be equal and root (%d) a group index below %d", root, gs->group_size);
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_BROADCAST, gs, in, out, algo);
  n->root = root;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_reduce(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, int32_t root,
                         sp_redop op, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "reduce", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b) || root < 0 || root >= gs->group_size) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "reduce: sizes must be equal and root (%d) a group index below %d", root, gs->group_size);
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_REDUCE, gs, in, out, algo);
  n->root = root;
  n->redop = op;
  return sp_g_node_push(g, n);
}

uint32_t sp_graph_send_recv(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, GError **err)
{
  const sp_tensor *a = sp_g_tensor(g, in, err), *b = a ? sp_g_tensor(g, out, err) : NULL;
  if (!b)
    return BAD;
  if (!gs || gs->group_size != 2) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "send-recv: groups must have 2 members (sender, receiver)");
    return BAD;
  }
  if (a->dtype != b->dtype || sp_tensor_numel(a) != sp_tensor_numel(b)) {
    sp_g_shape_err(err, "send-recv", a, b, "dtype and size must be equal");
    return BAD;
  }
  if (!sp_g_check_groups(g, gs, NULL, 0, "send-recv", err))
    return BAD;
  for (int32_t i = 0; i < gs->n_groups; i++) {
    if (!sp_graph_tensor_on(g, in, gs->ranks[2 * i]) || !sp_graph_tensor_on(g, out, gs->ranks[2 * i + 1])) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "send-recv: sender %d must hold '%s' and receiver %d must hold '%s'",
                  gs->ranks[2 * i], a->name, gs->ranks[2 * i + 1], b->name);
      return BAD;
    }
  }
  return sp_g_node_push(g, coll_node(g, SP_NODE_SEND_RECV, gs, in, out, SP_ALGO_DIRECT));
}

uint32_t sp_graph_shift(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "shift", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b)) {
    sp_g_shape_err(err, "shift", a, b, "sizes must be equal");
    return BAD;
  }
  return sp_g_node_push(g, coll_node(g, SP_NODE_SHIFT, gs, in, out, SP_ALGO_DIRECT));
}
