/* Communication graph IR: tensors, nodes, builders, data, reference interpreter. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/graph.h"
#include "spsim/kernels.h"
#include "graph_private.h"

static const char *const kind_names[SP_NODE_KIND_COUNT] = {
  "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce",
  "send-recv", "copy", "slice", "split", "pad", "concat", "repeat", "repeat-sum", "add",
  "scale", "compute", "sync", "matmul", "attention", "attention-bwd", "shift", "ring-attn",
  "ring-final", "ring-attn-bwd",
};

const char *sp_node_kind_name(sp_node_kind k)
{
  return (unsigned)k < SP_NODE_KIND_COUNT ? kind_names[k] : "?";
}

gboolean sp_node_kind_is_coll(sp_node_kind k)
{
  return k <= SP_NODE_SEND_RECV || k == SP_NODE_SHIFT;
}

/* ---------------------------------------------------------------- graph */

static void tensor_free(gpointer p)
{
  sp_tensor *t = p;
  g_free(t->name);
  g_free(t->on);
  g_free(t);
}

static void node_free(gpointer p)
{
  sp_node *n = p;
  g_free(n->name);
  g_free(n->ranks);
  if (n->deps)
    g_array_unref(n->deps);
  g_free(n);
}

sp_graph *sp_graph_new(int32_t world)
{
  sp_graph *g = g_new0(sp_graph, 1);
  g->world = world < 1 ? 1 : world;
  g->tensors = g_ptr_array_new_with_free_func(tensor_free);
  g->nodes = g_ptr_array_new_with_free_func(node_free);
  g->storage = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  g->pools = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  return g;
}

void sp_graph_free(sp_graph *g)
{
  if (!g)
    return;
  g_ptr_array_unref(g->tensors);
  g_ptr_array_unref(g->nodes);
  g_ptr_array_unref(g->storage);
  g_hash_table_unref(g->pools);
  g_free(g);
}

int32_t sp_graph_world(const sp_graph *g) { return g->world; }
guint sp_graph_n_tensors(const sp_graph *g) { return g->tensors->len; }
guint sp_graph_n_nodes(const sp_graph *g) { return g->nodes->len; }
const sp_tensor *sp_graph_tensor(const sp_graph *g, uint32_t t)
{
  return t < g->tensors->len ? g_ptr_array_index(g->tensors, t) : NULL;
}
const sp_node *sp_graph_node(const sp_graph *g, uint32_t n)
{
  return n < g->nodes->len ? g_ptr_array_index(g->nodes, n) : NULL;
}

uint32_t sp_graph_find_tensor(const sp_graph *g, const char *name)
{
  for (guint i = 0; i < g->tensors->len; i++)
    if (g_strcmp0(((sp_tensor *)g_ptr_array_index(g->tensors, i))->name, name) == 0)
      return i;
  return SP_NO_TENSOR;
}

uint64_t sp_tensor_numel(const sp_tensor *t)
{
  uint64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= (uint64_t)t->shape[i];
  return n;
}

uint64_t sp_tensor_bytes(const sp_tensor *t)
{
  return sp_tensor_numel(t) * sp_dtype_size(t->dtype);
}

static uint32_t new_storage(sp_graph *g, uint32_t t)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_val(a, t);
  g_ptr_array_add(g->storage, a);
  return g->storage->len - 1;
}

uint32_t sp_graph_tensor_new(sp_graph *g, const char *name, sp_dtype dtype, int ndim,
                             const int64_t *shape, sp_tensor_kind kind, sp_tensor_init init,
                             GError **err)
{
  if ((unsigned)dtype >= SP_DTYPE_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "tensor '%s': unknown dtype %d", name, dtype);
    return SP_NO_TENSOR;
  }
  if (ndim < 1 || ndim > SP_MAX_DIMS) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "tensor '%s': %d dims; use 1 to %d", name, ndim,
                SP_MAX_DIMS);
    return SP_NO_TENSOR;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 1) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                  "tensor '%s': dim %d is %" G_GINT64_FORMAT "; every dim must be >= 1", name, i,
                  shape[i]);
      return SP_NO_TENSOR;
    }
  sp_tensor *t = g_new0(sp_tensor, 1);
  t->name = g_strdup(name ? name : "t");
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  t->kind = kind;
  t->init = init;
  t->pool = -1;
  t->persistent = (kind == SP_TENSOR_WEIGHT);
  g_ptr_array_add(g->tensors, t);
  uint32_t id = g->tensors->len - 1;
  t->storage = new_storage(g, id);
  return id;
}

gboolean sp_graph_tensor_place(sp_graph *g, uint32_t t, const int32_t *ranks, int32_t n, GError **err)
{
  sp_tensor *x = (sp_tensor *)sp_graph_tensor(g, t);
  if (!x) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no tensor %u", t);
    return FALSE;
  }
  guint8 *on = g_new0(guint8, g->world);
  for (int32_t i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= g->world) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "tensor '%s': rank %d is outside the world of %d",
                  x->name, ranks[i], g->world);
      g_free(on);
      return FALSE;
    }
    on[ranks[i]] = 1;
  }
  g_free(x->on);
  x->on = on;
  return TRUE;
}

void sp_graph_tensor_pool(sp_graph *g, uint32_t t, int32_t pool, int32_t slot)
{
  sp_tensor *x = (sp_tensor *)sp_graph_tensor(g, t);
  if (!x || pool < 0)
    return;
  /* detach from the current storage */
  GArray *cur = g_ptr_array_index(g->storage, x->storage);
  for (guint i = 0; i < cur->len; i++)
    if (g_array_index(cur, uint32_t, i) == t) {
      g_array_remove_index(cur, i);
      break;
    }
  gint64 key = ((gint64)pool << 32) | (guint32)slot;
  gpointer v;
  if (g_hash_table_lookup_extended(g->pools, &key, NULL, &v)) {
    x->storage = GPOINTER_TO_UINT(v);
    g_array_append_val((GArray *)g_ptr_array_index(g->storage, x->storage), t);
  } else {
    x->storage = new_storage(g, t);
    gint64 *k = g_new(gint64, 1);
    *k = key;
    g_hash_table_insert(g->pools, k, GUINT_TO_POINTER(x->storage));
  }
  x->pool = pool;
  x->slot = slot;
}

void sp_graph_tensor_set_init(sp_graph *g, uint32_t t, sp_tensor_init init)
{
  sp_tensor *x = (sp_tensor *)sp_graph_tensor(g, t);
  if (x)
    x->init = init;
}

void sp_graph_tensor_persist(sp_graph *g, uint32_t t)
{
  sp_tensor *x = (sp_tensor *)sp_graph_tensor(g, t);
  if (x)
    x->persistent = TRUE;
}

gboolean sp_graph_tensor_on(const sp_graph *g, uint32_t t, int32_t rank)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  if (!x || rank < 0 || rank >= g->world)
    return FALSE;
  return x->on == NULL || x->on[rank];
}

guint sp_graph_n_storage(const sp_graph *g) { return g->storage->len; }
uint32_t sp_graph_tensor_storage(const sp_graph *g, uint32_t t) { return sp_graph_tensor(g, t)->storage; }

uint64_t sp_graph_storage_bytes(const sp_graph *g, uint32_t s, int32_t rank)
{
  GArray *a = g_ptr_array_index(g->storage, s);
  uint64_t m = 0;
  for (guint i = 0; i < a->len; i++) {
    uint32_t t = g_array_index(a, uint32_t, i);
    if (sp_graph_tensor_on(g, t, rank)) {
      uint64_t b = sp_tensor_bytes(sp_graph_tensor(g, t));
      if (b > m)
        m = b;
    }
  }
  return m;
}

/* ---------------------------------------------------------------- builders */

#define BAD UINT32_MAX

static const sp_tensor *get_t(const sp_graph *g, uint32_t t, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  if (!x)
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no tensor with id %u in the graph", t);
  return x;
}

static gboolean check_dim(const sp_tensor *t, int dim, const char *what, GError **err)
{
  if (dim < 0 || dim >= t->ndim) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "%s: dim %d is out of range for '%s' (%d dims)",
                what, dim, t->name, t->ndim);
    return FALSE;
  }
  return TRUE;
}

/* Shapes equal except possibly at dim @p except (-1: none). */
static gboolean same_shape_except(const sp_tensor *a, const sp_tensor *b, int except)
{
  if (a->ndim != b->ndim)
    return FALSE;
  for (int i = 0; i < a->ndim; i++)
    if (i != except && a->shape[i] != b->shape[i])
      return FALSE;
  return TRUE;
}

static char *shape_str(const sp_tensor *t)
{
  GString *s = g_string_new("[");
  for (int i = 0; i < t->ndim; i++)
    g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i ? ", " : "", t->shape[i]);
  g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

static gboolean shape_err(GError **err, const char *what, const sp_tensor *a, const sp_tensor *b,
                          const char *expect)
{
  char *sa = shape_str(a), *sb = shape_str(b);
  g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "%s: '%s' %s and '%s' %s do not fit: %s", what,
              a->name, sa, b->name, sb, expect);
  g_free(sa);
  g_free(sb);
  return FALSE;
}

static sp_node *node_alloc(sp_node_kind kind)
{
  sp_node *n = g_new0(sp_node, 1);
  n->kind = kind;
  n->scale = 1.0;
  for (int i = 0; i < SP_NODE_MAX_IO; i++)
    n->in[i] = n->out[i] = SP_NO_TENSOR;
  return n;
}

static uint32_t node_push(sp_graph *g, sp_node *n)
{
  if (!n->name) {
    const sp_tensor *o = n->nout ? sp_graph_tensor(g, n->out[0]) : NULL;
    n->name = g_strdup_printf("%s%s%s", sp_node_kind_name(n->kind), o ? ":" : "", o ? o->name : "");
  }
  g_ptr_array_add(g->nodes, n);
  return g->nodes->len - 1;
}

static gboolean check_groups(const sp_graph *g, const sp_groups *gs, const uint32_t *ts, int nts,
                             const char *what, GError **err)
{
  if (!gs || !gs->ranks || gs->n_groups < 1 || gs->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: empty group set", what);
    return FALSE;
  }
  guint8 *seen = g_new0(guint8, g->world);
  gboolean ok = TRUE;
  for (int64_t i = 0; ok && i < (int64_t)gs->n_groups * gs->group_size; i++) {
    int32_t r = gs->ranks[i];
    if (r < 0 || r >= g->world) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: rank %d is outside the world of %d ranks",
                  what, r, g->world);
      ok = FALSE;
    } else if (seen[r]) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s: rank %d appears twice in the group set (groups must be disjoint)", what, r);
      ok = FALSE;
    } else {
      seen[r] = 1;
      for (int k = 0; k < nts; k++)
        if (ts[k] != SP_NO_TENSOR && !sp_graph_tensor_on(g, ts[k], r)) {
          g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: group member %d does not hold tensor '%s'",
                      what, r, sp_graph_tensor(g, ts[k])->name);
          ok = FALSE;
          break;
        }
    }
  }
  g_free(seen);
  return ok;
}

static sp_node *coll_node(sp_graph *g, sp_node_kind kind, const sp_groups *gs, uint32_t in,
                          uint32_t out, sp_algo algo)
{
  sp_node *n = node_alloc(kind);
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
  const sp_tensor *a = get_t(g, in, err);
  if (!a)
    return FALSE;
  const sp_tensor *b = get_t(g, out, err);
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
  if (!check_groups(g, gs, ts, 2, what, err))
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
    shape_err(err, "all-reduce", a, b, "sizes must be equal");
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_ALL_REDUCE, gs, in, out, algo);
  n->redop = op;
  return node_push(g, n);
}

uint32_t sp_graph_all_gather(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, int dim,
                             sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "all-gather", &a, &b, err) || !check_dim(a, dim, "all-gather", err))
    return BAD;
  if (!same_shape_except(a, b, dim) || b->shape[dim] != a->shape[dim] * gs->group_size) {
    shape_err(err, "all-gather", a, b, "the output's gather dim must be P times the input's");
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_ALL_GATHER, gs, in, out, algo);
  n->dim = dim;
  return node_push(g, n);
}

uint32_t sp_graph_reduce_scatter(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                                 int dim, sp_redop op, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "reduce-scatter", &a, &b, err) ||
      !check_dim(a, dim, "reduce-scatter", err))
    return BAD;
  if (a->shape[dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "reduce-scatter: dim %d of '%s' (%" G_GINT64_FORMAT ") does not divide by the group size %d",
                dim, a->name, a->shape[dim], gs->group_size);
    return BAD;
  }
  if (!same_shape_except(a, b, dim) || b->shape[dim] * gs->group_size != a->shape[dim]) {
    shape_err(err, "reduce-scatter", a, b, "the output's dim must be the input's divided by P");
    return BAD;
  }
  sp_node *n = coll_node(g, SP_NODE_REDUCE_SCATTER, gs, in, out, algo);
  n->dim = dim;
  n->redop = op;
  return node_push(g, n);
}

uint32_t sp_graph_all_to_all(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out,
                             int scatter_dim, int gather_dim, sp_algo algo, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "all-to-all", &a, &b, err) ||
      !check_dim(a, scatter_dim, "all-to-all scatter", err) ||
      !check_dim(a, gather_dim, "all-to-all gather", err))
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
      shape_err(err, "all-to-all", a, b, "output = input with scatter dim / P and gather dim x P");
      return BAD;
    }
  sp_node *n = coll_node(g, SP_NODE_ALL_TO_ALL, gs, in, out, algo);
  n->dim = gather_dim;
  n->dim2 = scatter_dim;
  return node_push(g, n);
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
  return node_push(g, n);
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
  return node_push(g, n);
}

uint32_t sp_graph_send_recv(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, GError **err)
{
  const sp_tensor *a = get_t(g, in, err), *b = a ? get_t(g, out, err) : NULL;
  if (!b)
    return BAD;
  if (!gs || gs->group_size != 2) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "send-recv: groups must have 2 members (sender, receiver)");
    return BAD;
  }
  if (a->dtype != b->dtype || sp_tensor_numel(a) != sp_tensor_numel(b)) {
    shape_err(err, "send-recv", a, b, "dtype and size must be equal");
    return BAD;
  }
  if (!check_groups(g, gs, NULL, 0, "send-recv", err))
    return BAD;
  for (int32_t i = 0; i < gs->n_groups; i++) {
    if (!sp_graph_tensor_on(g, in, gs->ranks[2 * i]) || !sp_graph_tensor_on(g, out, gs->ranks[2 * i + 1])) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "send-recv: sender %d must hold '%s' and receiver %d must hold '%s'",
                  gs->ranks[2 * i], a->name, gs->ranks[2 * i + 1], b->name);
      return BAD;
    }
  }
  return node_push(g, coll_node(g, SP_NODE_SEND_RECV, gs, in, out, SP_ALGO_DIRECT));
}

/* Local nodes: every rank holding out must hold the inputs. */
static gboolean local_holders(const sp_graph *g, const uint32_t *ins, int nin, uint32_t out,
                              const char *what, GError **err)
{
  for (int32_t r = 0; r < g->world; r++) {
    if (!sp_graph_tensor_on(g, out, r))
      continue;
    for (int i = 0; i < nin; i++)
      if (!sp_graph_tensor_on(g, ins[i], r)) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: rank %d holds '%s' but not its input '%s'",
                    what, r, sp_graph_tensor(g, out)->name, sp_graph_tensor(g, ins[i])->name);
        return FALSE;
      }
  }
  return TRUE;
}

static sp_node *local_node(sp_node_kind kind, const uint32_t *ins, int nin, uint32_t out)
{
  sp_node *n = node_alloc(kind);
  for (int i = 0; i < nin; i++)
    n->in[i] = ins[i];
  n->nin = nin;
  n->out[0] = out;
  n->nout = 1;
  return n;
}

static gboolean local_pair(sp_graph *g, uint32_t in, uint32_t out, const char *what,
                           const sp_tensor **pa, const sp_tensor **pb, GError **err)
{
  const sp_tensor *a = get_t(g, in, err), *b = a ? get_t(g, out, err) : NULL;
  if (!b)
    return FALSE;
  if (a->dtype != b->dtype) {
    shape_err(err, what, a, b, "dtypes differ");
    return FALSE;
  }
  if (!local_holders(g, &in, 1, out, what, err))
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
    shape_err(err, "copy", a, b, "distinct tensors of the same size");
    return BAD;
  }
  return node_push(g, local_node(SP_NODE_COPY, &in, 1, out));
}

static void outer_inner(const sp_tensor *t, int dim, uint64_t *outer, uint64_t *inner)
{
  uint64_t o = 1, i = 1;
  for (int k = 0; k < dim; k++)
    o *= (uint64_t)t->shape[k];
  for (int k = dim + 1; k < t->ndim; k++)
    i *= (uint64_t)t->shape[k];
  *outer = o;
  *inner = i;
}

uint32_t sp_graph_slice(sp_graph *g, uint32_t in, uint32_t out, int dim, int64_t start, int64_t len,
                        GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "slice", &a, &b, err) || !check_dim(a, dim, "slice", err))
    return BAD;
  uint64_t o, i;
  outer_inner(a, dim, &o, &i);
  if (start < 0 || len < 1 || start + len > a->shape[dim] || sp_tensor_numel(b) != o * i * (uint64_t)len) {
    char *s = g_strdup_printf("slice [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") of dim %d must lie inside "
                              "the input and match the output's size", start, start + len, dim);
    shape_err(err, "slice", a, b, s);
    g_free(s);
    return BAD;
  }
  sp_node *n = local_node(SP_NODE_SLICE, &in, 1, out);
  n->dim = dim;
  n->start = start;
  n->len = len;
  return node_push(g, n);
}

uint32_t sp_graph_split(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, int dim,
                        GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "split", &a, &b, err) || !check_dim(a, dim, "split", err))
    return BAD;
  uint32_t ts[2] = { in, out };
  if (!check_groups(g, gs, ts, 2, "split", err))
    return BAD;
  if (a->shape[dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "split: dim %d of '%s' has size %" G_GINT64_FORMAT
                ", not a multiple of the group size %d; cannot split it evenly (pad it first)",
                dim, a->name, a->shape[dim], gs->group_size);
    return BAD;
  }
  if (!same_shape_except(a, b, dim) || b->shape[dim] * gs->group_size != a->shape[dim]) {
    shape_err(err, "split", a, b, "the output's dim must be the input's divided by P");
    return BAD;
  }
  sp_node *n = local_node(SP_NODE_SPLIT, &in, 1, out);
  n->dim = dim;
  n->len = b->shape[dim];
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  return node_push(g, n);
}

uint32_t sp_graph_pad(sp_graph *g, uint32_t in, uint32_t out, int dim, GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "pad", &a, &b, err) || !check_dim(a, dim, "pad", err))
    return BAD;
  if (!same_shape_except(a, b, dim) || b->shape[dim] < a->shape[dim]) {
    shape_err(err, "pad", a, b, "the output must equal the input except a larger pad dim");
    return BAD;
  }
  sp_node *n = local_node(SP_NODE_PAD, &in, 1, out);
  n->dim = dim;
  return node_push(g, n);
}

uint32_t sp_graph_concat(sp_graph *g, const uint32_t *ins, int nin, uint32_t out, int dim, GError **err)
{
  const sp_tensor *b = get_t(g, out, err);
  if (!b || !check_dim(b, dim, "concat", err))
    return BAD;
  if (nin < 1 || nin > SP_NODE_MAX_IO) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "concat: 1 to %d inputs", SP_NODE_MAX_IO);
    return BAD;
  }
  uint64_t o, i, rows = 0;
  outer_inner(b, dim, &o, &i);
  for (int k = 0; k < nin; k++) {
    const sp_tensor *a = get_t(g, ins[k], err);
    if (!a)
      return BAD;
    if (a->dtype != b->dtype || sp_tensor_numel(a) % (o * i) != 0) {
      shape_err(err, "concat", a, b, "each input must be a block of whole slices along the dim");
      return BAD;
    }
    rows += sp_tensor_numel(a) / (o * i);
  }
  if (rows != (uint64_t)b->shape[dim]) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "concat: inputs add up to %" G_GUINT64_FORMAT
                " along dim %d but '%s' has %" G_GINT64_FORMAT, rows, dim, b->name, b->shape[dim]);
    return BAD;
  }
  if (!local_holders(g, ins, nin, out, "concat", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_CONCAT, ins, nin, out);
  n->dim = dim;
  return node_push(g, n);
}

static uint32_t repeat_common(sp_graph *g, sp_node_kind kind, uint32_t in, uint32_t out, int dim,
                              int32_t repeat, GError **err)
{
  const sp_tensor *a, *b;
  const char *what = sp_node_kind_name(kind);
  if (!local_pair(g, in, out, what, &a, &b, err) || !check_dim(a, dim, what, err))
    return BAD;
  const sp_tensor *small = kind == SP_NODE_REPEAT ? a : b, *big = kind == SP_NODE_REPEAT ? b : a;
  if (repeat < 1 || !same_shape_except(a, b, dim) || big->shape[dim] != small->shape[dim] * repeat) {
    shape_err(err, what, a, b, "the repeated dim must be the other's times the repeat factor");
    return BAD;
  }
  sp_node *n = local_node(kind, &in, 1, out);
  n->dim = dim;
  n->repeat = repeat;
  return node_push(g, n);
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
  const sp_tensor *x = get_t(g, a, err), *y = x ? get_t(g, b, err) : NULL;
  const sp_tensor *o = y ? get_t(g, out, err) : NULL;
  if (!o)
    return BAD;
  if (x->dtype != o->dtype || y->dtype != o->dtype || sp_tensor_numel(x) != sp_tensor_numel(o) ||
      sp_tensor_numel(y) != sp_tensor_numel(o) || b == out || o->storage == y->storage) {
    shape_err(err, "add", x, o, "same dtype and size; the second input must not be the output");
    return BAD;
  }
  uint32_t ins[2] = { a, b };
  if (!local_holders(g, ins, 2, out, "add", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_ADD, ins, 2, out);
  n->redop = op == SP_RED_AVG ? SP_RED_SUM : op;
  return node_push(g, n);
}

uint32_t sp_graph_scale(sp_graph *g, uint32_t in, uint32_t out, double factor, gboolean divide,
                        GError **err)
{
  const sp_tensor *a, *b;
  if (!local_pair(g, in, out, "scale", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b) || (divide && factor == 0.0)) {
    shape_err(err, "scale", a, b, "same size and a non-zero divisor");
    return BAD;
  }
  sp_node *n = local_node(SP_NODE_SCALE, &in, 1, out);
  n->scale = factor;
  n->divide = divide;
  return node_push(g, n);
}

uint32_t sp_graph_compute(sp_graph *g, const char *name, uint32_t on_tensor, double flops,
                          uint64_t bytes, GError **err)
{
  if (on_tensor != SP_NO_TENSOR && !get_t(g, on_tensor, err))
    return BAD;
  sp_node *n = node_alloc(SP_NODE_COMPUTE);
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
  return node_push(g, n);
}

uint32_t sp_graph_sync(sp_graph *g, uint32_t t, GError **err)
{
  if (!get_t(g, t, err))
    return BAD;
  sp_node *n = node_alloc(SP_NODE_SYNC);
  n->in[0] = t;
  n->nin = 1;
  n->name = g_strdup_printf("sync:%s", sp_graph_tensor(g, t)->name);
  return node_push(g, n);
}

static gboolean need_f32(const sp_tensor *t, const char *what, GError **err)
{
  if (t->dtype != SP_F32) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "%s: data kernels run in f32; '%s' is %s", what,
                t->name, sp_dtype_name(t->dtype));
    return FALSE;
  }
  return TRUE;
}

/* 2-D view of a tensor: [numel / last, last]. */
static void view2(const sp_tensor *t, gboolean trans, int64_t *rows, int64_t *cols)
{
  int64_t last = t->shape[t->ndim - 1];
  int64_t r = (int64_t)sp_tensor_numel(t) / last;
  *rows = trans ? last : r;
  *cols = trans ? r : last;
}

uint32_t sp_graph_matmul(sp_graph *g, uint32_t a, gboolean trans_a, uint32_t b, gboolean trans_b,
                         uint32_t out, GError **err)
{
  const sp_tensor *x = get_t(g, a, err), *y = x ? get_t(g, b, err) : NULL;
  const sp_tensor *o = y ? get_t(g, out, err) : NULL;
  if (!o || !need_f32(x, "matmul", err) || !need_f32(y, "matmul", err) || !need_f32(o, "matmul", err))
    return BAD;
  int64_t M, K, K2, N;
  view2(x, trans_a, &M, &K);
  view2(y, trans_b, &K2, &N);
  if (K != K2 || (int64_t)sp_tensor_numel(o) != M * N || o->shape[o->ndim - 1] != N) {
    shape_err(err, "matmul", x, y, "inner dims must agree and the output be [M, N]");
    return BAD;
  }
  uint32_t ins[2] = { a, b };
  if (!local_holders(g, ins, 2, out, "matmul", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_MATMUL, ins, 2, out);
  n->trans_a = trans_a;
  n->trans_b = trans_b;
  n->flops = 2.0 * (double)M * (double)N * (double)K;
  return node_push(g, n);
}

/* Attention shape check: B, S, Hq, Hkv, D. */
static gboolean attn_dims(const sp_tensor *q, const sp_tensor *k, const sp_tensor *v,
                          sp_attn_layout layout, int64_t *dims, GError **err)
{
  if (!need_f32(q, "attention", err) || !need_f32(k, "attention", err) || !need_f32(v, "attention", err))
    return FALSE;
  if (q->ndim != 4 || k->ndim != 4 || !same_shape_except(k, v, -1)) {
    shape_err(err, "attention", q, k, "q, k, v must be 4-D and k, v equal");
    return FALSE;
  }
  int bi = layout == SP_LAYOUT_SBHD ? 1 : 0, si = 1 - bi;
  if (q->shape[bi] != k->shape[bi] || q->shape[si] != k->shape[si] || q->shape[3] != k->shape[3] ||
      q->shape[2] % k->shape[2] != 0) {
    shape_err(err, "attention", q, k, "batch, seq and head dim must agree and q heads be a multiple of kv heads");
    return FALSE;
  }
  dims[0] = q->shape[bi];
  dims[1] = q->shape[si];
  dims[2] = q->shape[2];
  dims[3] = k->shape[2];
  dims[4] = q->shape[3];
  return TRUE;
}

uint32_t sp_graph_attention(sp_graph *g, sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                            uint32_t out, GError **err)
{
  const sp_tensor *tq = get_t(g, q, err), *tk = tq ? get_t(g, k, err) : NULL;
  const sp_tensor *tv = tk ? get_t(g, v, err) : NULL, *to = tv ? get_t(g, out, err) : NULL;
  int64_t d[5];
  if (!to || !attn_dims(tq, tk, tv, layout, d, err))
    return BAD;
  if (!same_shape_except(tq, to, -1) || to->dtype != SP_F32) {
    shape_err(err, "attention", tq, to, "the output has q's shape");
    return BAD;
  }
  uint32_t ins[3] = { q, k, v };
  if (!local_holders(g, ins, 3, out, "attention", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_ATTENTION, ins, 3, out);
  n->layout = layout;
  n->flops = (double)d[0] * d[2] * d[4] * 2.0 * (double)d[1] * (double)(d[1] + 1);
  return node_push(g, n);
}

uint32_t sp_graph_attention_bwd(sp_graph *g, sp_attn_layout layout, uint32_t q, uint32_t k,
                                uint32_t v, uint32_t dout, uint32_t dq, uint32_t dk, uint32_t dv,
                                GError **err)
{
  const sp_tensor *tq = get_t(g, q, err), *tk = tq ? get_t(g, k, err) : NULL;
  const sp_tensor *tv = tk ? get_t(g, v, err) : NULL, *tdo = tv ? get_t(g, dout, err) : NULL;
  const sp_tensor *tdq = tdo ? get_t(g, dq, err) : NULL, *tdk = tdq ? get_t(g, dk, err) : NULL;
  const sp_tensor *tdv = tdk ? get_t(g, dv, err) : NULL;
  int64_t d[5];
  if (!tdv || !attn_dims(tq, tk, tv, layout, d, err))
    return BAD;
  if (!same_shape_except(tq, tdo, -1) || !same_shape_except(tq, tdq, -1) ||
      !same_shape_except(tk, tdk, -1) || !same_shape_except(tv, tdv, -1) || tdo->dtype != SP_F32 ||
      tdq->dtype != SP_F32 || tdk->dtype != SP_F32 || tdv->dtype != SP_F32) {
    shape_err(err, "attention-bwd", tq, tdq, "gradients have the shapes of q, k, v, out");
    return BAD;
  }
  uint32_t ins[4] = { q, k, v, dout };
  if (!local_holders(g, ins, 4, dq, "attention-bwd", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_ATTENTION_BWD, ins, 4, dq);
  n->out[1] = dk;
  n->out[2] = dv;
  n->nout = 3;
  n->layout = layout;
  n->flops = (double)d[0] * d[2] * d[4] * 5.0 * (double)d[1] * (double)(d[1] + 1);
  return node_push(g, n);
}

uint32_t sp_graph_shift(sp_graph *g, const sp_groups *gs, uint32_t in, uint32_t out, GError **err)
{
  const sp_tensor *a, *b;
  if (!coll_common(g, gs, in, out, "shift", &a, &b, err))
    return BAD;
  if (sp_tensor_numel(a) != sp_tensor_numel(b)) {
    shape_err(err, "shift", a, b, "sizes must be equal");
    return BAD;
  }
  return node_push(g, coll_node(g, SP_NODE_SHIFT, gs, in, out, SP_ALGO_DIRECT));
}

uint32_t sp_graph_ring_attn(sp_graph *g, const sp_groups *gs, sp_attn_layout layout, uint32_t q,
                            uint32_t k, uint32_t v, uint32_t state_in, uint32_t state_out, int32_t step,
                            GError **err)
{
  const sp_tensor *tq = get_t(g, q, err), *tk = tq ? get_t(g, k, err) : NULL;
  const sp_tensor *tv = tk ? get_t(g, v, err) : NULL, *si = tv ? get_t(g, state_in, err) : NULL;
  const sp_tensor *so = si ? get_t(g, state_out, err) : NULL;
  int64_t d[5];
  if (!so || !attn_dims(tq, tk, tv, layout, d, err))
    return BAD;
  if (!same_shape_except(si, so, -1) || si->ndim != 4 || si->dtype != SP_F32 || so->dtype != SP_F32 ||
      si->shape[3] != d[4] + 2 || si->shape[2] != d[2] || sp_tensor_numel(si) != (uint64_t)(d[0] * d[1] * d[2] * (d[4] + 2)) ||
      si->storage == so->storage) {
    shape_err(err, "ring-attn", tq, si, "the states are distinct [.., Hq, d + 2] f32 tensors");
    return BAD;
  }
  uint32_t ts[5] = { q, k, v, state_in, state_out };
  if (!check_groups(g, gs, ts, 5, "ring-attn", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_RING_ATTN, ts, 4, state_out);
  n->layout = layout;
  n->start = step;
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  n->flops = (double)d[0] * d[2] * d[4] * 4.0 * (double)d[1] * (double)d[1];
  return node_push(g, n);
}

uint32_t sp_graph_ring_final(sp_graph *g, sp_attn_layout layout, uint32_t state, uint32_t out, GError **err)
{
  const sp_tensor *a = get_t(g, state, err), *b = a ? get_t(g, out, err) : NULL;
  if (!b)
    return BAD;
  if (a->ndim != 4 || b->ndim != 4 || a->dtype != SP_F32 || b->dtype != SP_F32 || !same_shape_except(a, b, 3) ||
      a->shape[3] != b->shape[3] + 2) {
    shape_err(err, "ring-final", a, b, "state [.., d + 2] -> out [.., d]");
    return BAD;
  }
  if (!local_holders(g, &state, 1, out, "ring-final", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_RING_FINAL, &state, 1, out);
  n->layout = layout;
  return node_push(g, n);
}

uint32_t sp_graph_ring_attn_bwd(sp_graph *g, const sp_groups *gs, sp_attn_layout layout, uint32_t q,
                                uint32_t k, uint32_t v, uint32_t dout, uint32_t state, uint32_t dq_in,
                                uint32_t dk_in, uint32_t dv_in, uint32_t dq_out, uint32_t dk_out,
                                uint32_t dv_out, int32_t step, GError **err)
{
  uint32_t ts[11] = { q, k, v, dout, state, dq_in, dk_in, dv_in, dq_out, dk_out, dv_out };
  const sp_tensor *t[11];
  for (int i = 0; i < 11; i++)
    if (!(t[i] = get_t(g, ts[i], err)))
      return BAD;
  int64_t d[5];
  if (!attn_dims(t[0], t[1], t[2], layout, d, err))
    return BAD;
  gboolean ok = t[4]->ndim == 4 && t[4]->dtype == SP_F32 && t[4]->shape[3] == d[4] + 2 &&
                same_shape_except(t[0], t[4], 3);
  for (int i = 3; ok && i < 11; i++)
    if (i != 4)
      ok = t[i]->dtype == SP_F32 && same_shape_except(i == 3 || i == 5 || i == 8 ? t[0] : t[1], t[i], -1);
  for (int i = 5; ok && i < 8; i++)
    ok = t[i]->storage != t[i + 3]->storage;
  if (!ok) {
    shape_err(err, "ring-attn-bwd", t[0], t[4],
              "dout and dq have q's shape, dk and dv k's, the state is [.., Hq, d + 2] f32, outs use other storage than ins");
    return BAD;
  }
  if (!check_groups(g, gs, ts, 11, "ring-attn-bwd", err))
    return BAD;
  sp_node *n = local_node(SP_NODE_RING_ATTN_BWD, ts, 8, dq_out);
  n->out[1] = dk_out;
  n->out[2] = dv_out;
  n->nout = 3;
  n->layout = layout;
  n->start = step;
  n->ngroups = gs->n_groups;
  n->gsize = gs->group_size;
  n->ranks = g_memdup2(gs->ranks, sizeof(int32_t) * (size_t)gs->n_groups * (size_t)gs->group_size);
  n->flops = (double)d[0] * d[2] * d[4] * 10.0 * (double)d[1] * (double)d[1];
  return node_push(g, n);
}

void sp_graph_node_set_async(sp_graph *g, uint32_t n, gboolean async)
{
  sp_node *x = (sp_node *)sp_graph_node(g, n);
  if (x && sp_node_kind_is_coll(x->kind))
    x->async = async;
}

gboolean sp_graph_node_add_dep(sp_graph *g, uint32_t n, uint32_t on, GError **err)
{
  sp_node *x = (sp_node *)sp_graph_node(g, n);
  if (!x || on >= n) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "dependency %u -> %u: a node may only depend on an earlier node", n, on);
    return FALSE;
  }
  if (!x->deps)
    x->deps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_val(x->deps, on);
  return TRUE;
}

void sp_graph_node_set_name(sp_graph *g, uint32_t n, const char *name)
{
  sp_node *x = (sp_node *)sp_graph_node(g, n);
  if (x) {
    g_free(x->name);
    x->name = g_strdup(name);
  }
}

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

void sp_graph_data_fill_inputs(sp_graph_data *d, uint64_t seed)
{
  for (guint t = 0; t < d->g->tensors->len; t++) {
    const sp_tensor *x = sp_graph_tensor(d->g, t);
    if (x->init != SP_INIT_INPUT)
      continue;
    for (int32_t r = 0; r < d->world; r++) {
      void *p = sp_graph_data_get(d, t, r);
      if (p)
        sp_fill_pattern(p, sp_tensor_numel(x), x->dtype,
                        seed ^ ((uint64_t)(t + 1) * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(r + 1) << 40), 0);
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
  const sp_tensor *x = get_t(g, t, err);
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

/* ---------------------------------------------------------------- kernels */

static int ring_mode(const sp_node *n, int32_t rank);

/* A ring-attention step's dimensions (from q, k, v) and @p mode (ring_mode; < 0:
 * nothing to do on this rank). */
static gboolean ring_step(const sp_graph *g, const sp_node *n, int32_t rank, int64_t d[5], int *mode,
                          GError **err)
{
  if (!attn_dims(sp_graph_tensor(g, n->in[0]), sp_graph_tensor(g, n->in[1]),
                 sp_graph_tensor(g, n->in[2]), n->layout, d, err))
    return FALSE;
  *mode = ring_mode(n, rank);
  return TRUE;
}

gboolean sp_graph_kernel_host(const sp_graph *g, uint32_t ni, int32_t rank, void *const *bufs,
                              GError **err)
{
  const sp_node *n = sp_graph_node(g, ni);
  if (!n) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no node %u", ni);
    return FALSE;
  }
  if (n->nout < 1 || !sp_graph_tensor_on(g, n->out[0], rank))
    return TRUE;
#define B(t) (bufs[sp_graph_tensor(g, (t))->storage])
  switch (n->kind) {
  case SP_NODE_MATMUL: {
    int64_t M, K, K2, N;
    view2(sp_graph_tensor(g, n->in[0]), n->trans_a, &M, &K);
    view2(sp_graph_tensor(g, n->in[1]), n->trans_b, &K2, &N);
    /* a separate output buffer so that out may alias nothing it reads */
    float *c = g_new(float, (gsize)(M * N));
    sp_kernel_matmul_f32(B(n->in[0]), n->trans_a, B(n->in[1]), n->trans_b, c, M, N, K);
    memcpy(B(n->out[0]), c, sizeof(float) * (size_t)(M * N));
    g_free(c);
    return TRUE;
  }
  case SP_NODE_ATTENTION:
  case SP_NODE_ATTENTION_BWD: {
    int64_t d[5];
    if (!attn_dims(sp_graph_tensor(g, n->in[0]), sp_graph_tensor(g, n->in[1]),
                   sp_graph_tensor(g, n->in[2]), n->layout, d, err))
      return FALSE;
    gboolean sf = n->layout == SP_LAYOUT_SBHD;
    if (n->kind == SP_NODE_ATTENTION)
      sp_kernel_attention_f32(sf, d[0], d[1], d[2], d[3], d[4], B(n->in[0]), B(n->in[1]), B(n->in[2]),
                              B(n->out[0]));
    else
      sp_kernel_attention_bwd_f32(sf, d[0], d[1], d[2], d[3], d[4], B(n->in[0]), B(n->in[1]),
                                  B(n->in[2]), B(n->in[3]), B(n->out[0]), B(n->out[1]), B(n->out[2]));
    return TRUE;
  }
  case SP_NODE_RING_ATTN: {
    int64_t d[5];
    int m;
    if (!ring_step(g, n, rank, d, &m, err))
      return FALSE;
    if (m < 0)
      return TRUE;
    sp_kernel_ring_attn_step_f32(n->layout == SP_LAYOUT_SBHD, d[0], d[1], d[2], d[3], d[4], B(n->in[0]),
                                 B(n->in[1]), B(n->in[2]), B(n->in[3]), B(n->out[0]), m);
    return TRUE;
  }
  case SP_NODE_RING_ATTN_BWD: {
    int64_t d[5];
    int m;
    if (!ring_step(g, n, rank, d, &m, err))
      return FALSE;
    if (m < 0)
      return TRUE;
    sp_kernel_ring_attn_bwd_step_f32(n->layout == SP_LAYOUT_SBHD, d[0], d[1], d[2], d[3], d[4], B(n->in[0]),
                                     B(n->in[1]), B(n->in[2]), B(n->in[3]), B(n->in[4]), B(n->in[5]),
                                     B(n->in[6]), B(n->in[7]), B(n->out[0]), B(n->out[1]), B(n->out[2]), m);
    return TRUE;
  }
  case SP_NODE_RING_FINAL: {
    const sp_tensor *o = sp_graph_tensor(g, n->out[0]);
    sp_kernel_ring_attn_final_f32(sp_tensor_numel(o) / (uint64_t)o->shape[3], o->shape[3], B(n->in[0]),
                                  B(n->out[0]));
    return TRUE;
  }
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "node %u (%s) is not a data kernel", ni,
                sp_node_kind_name(n->kind));
    return FALSE;
  }
#undef B
}

gboolean sp_node_is_kernel(const sp_node *n)
{
  return n->kind == SP_NODE_MATMUL || n->kind == SP_NODE_ATTENTION || n->kind == SP_NODE_ATTENTION_BWD ||
         n->kind == SP_NODE_RING_ATTN || n->kind == SP_NODE_RING_FINAL || n->kind == SP_NODE_RING_ATTN_BWD;
}

/* Ring step mode of @p rank: 0 skipped, 1 diagonal (causal), 2 full; -1 not a member. */
static int ring_mode(const sp_node *n, int32_t rank)
{
  int32_t i = sp_node_group_index(n, rank, NULL);
  if (i < 0)
    return -1;
  int32_t P = n->gsize, j = (int32_t)(((i - n->start) % P + P) % P);
  return j > i ? 0 : j == i ? 1 : 2;
}

double sp_graph_node_flops(const sp_graph *g, uint32_t ni, int32_t rank)
{
  const sp_node *n = sp_graph_node(g, ni);
  if (!n)
    return 0;
  if (n->kind == SP_NODE_COMPUTE)
    return (n->nout == 0 || sp_graph_tensor_on(g, n->out[0], rank)) ? n->flops : 0;
  if (!sp_node_is_kernel(n) || !sp_graph_tensor_on(g, n->out[0], rank))
    return 0;
  if (n->kind == SP_NODE_RING_ATTN || n->kind == SP_NODE_RING_ATTN_BWD) {
    int m = ring_mode(n, rank);
    /* n->flops holds a full block: 4 d (backward: 10 d) per (query, key) pair */
    const sp_tensor *q = sp_graph_tensor(g, n->in[0]);
    int64_t S = n->layout == SP_LAYOUT_SBHD ? q->shape[0] : q->shape[1];
    return m == 2 ? n->flops : m == 1 ? n->flops * (double)(S + 1) / (2.0 * (double)S) : 0.0;
  }
  return n->flops;
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

/* Group index of rank r in a node's group set, or -1. */
int32_t sp_node_group_index(const sp_node *n, int32_t r, const int32_t **grp)
{
  for (int32_t k = 0; k < n->ngroups * n->gsize; k++)
    if (n->ranks[k] == r) {
      if (grp)
        *grp = n->ranks + (k / n->gsize) * n->gsize;
      return k % n->gsize;
    }
  return -1;
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
    outer_inner(b, n->dim, &outer, &inner);
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
