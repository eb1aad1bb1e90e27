/* Communication graph IR: node kinds, tensors and their storage, node records and
 * attributes, and the checks every node builder shares (graph_build.h). The
 * builders are in graph_coll.c, graph_local.c and graph_kernel.c; data mode and the
 * reference interpreter in graph_data.c. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/graph.h"
#include "graph_build.h"
#include "graph_private.h"

static const char *const kind_names[SP_NODE_KIND_COUNT] = {
  "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce",
  "send-recv", "copy", "slice", "split", "pad", "concat", "repeat", "repeat-sum", "add",
  "scale", "compute", "sync", "matmul", "attention", "attention-bwd", "shift", "ring-attn",
  "ring-final", "ring-attn-bwd", "moe",
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

/* ---------------------------------------------------------------- builder checks */

const sp_tensor *sp_g_tensor(const sp_graph *g, uint32_t t, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  if (!x)
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no tensor with id %u in the graph", t);
  return x;
}

gboolean sp_g_check_dim(const sp_tensor *t, int dim, const char *what, GError **err)
{
  if (dim < 0 || dim >= t->ndim) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "%s: dim %d is out of range for '%s' (%d dims)",
                what, dim, t->name, t->ndim);
    return FALSE;
  }
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

gboolean sp_g_shape_err(GError **err, const char *what, const sp_tensor *a, const sp_tensor *b,
                        const char *expect)
{
  char *sa = shape_str(a), *sb = shape_str(b);
  g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "%s: '%s' %s and '%s' %s do not fit: %s", what,
              a->name, sa, b->name, sb, expect);
  g_free(sa);
  g_free(sb);
  return FALSE;
}

sp_node *sp_g_node_alloc(sp_node_kind kind)
{
  sp_node *n = g_new0(sp_node, 1);
  n->kind = kind;
  n->scale = 1.0;
  for (int i = 0; i < SP_NODE_MAX_IO; i++)
    n->in[i] = n->out[i] = SP_NO_TENSOR;
  return n;
}

uint32_t sp_g_node_push(sp_graph *g, sp_node *n)
{
  if (!n->name) {
    const sp_tensor *o = n->nout ? sp_graph_tensor(g, n->out[0]) : NULL;
    n->name = g_strdup_printf("%s%s%s", sp_node_kind_name(n->kind), o ? ":" : "", o ? o->name : "");
  }
  g_ptr_array_add(g->nodes, n);
  return g->nodes->len - 1;
}

gboolean sp_g_check_groups(const sp_graph *g, const sp_groups *gs, const uint32_t *ts, int nts,
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

/* Local nodes: every rank holding out must hold the inputs. */
gboolean sp_g_local_holders(const sp_graph *g, const uint32_t *ins, int nin, uint32_t out,
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

sp_node *sp_g_local_node(sp_node_kind kind, const uint32_t *ins, int nin, uint32_t out)
{
  sp_node *n = sp_g_node_alloc(kind);
  for (int i = 0; i < nin; i++)
    n->in[i] = ins[i];
  n->nin = nin;
  n->out[0] = out;
  n->nout = 1;
  return n;
}

/* ---------------------------------------------------------------- node attributes */

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
