/* Checks and node records shared by the builders of the graph IR (graph.c,
 * graph_coll.c, graph_local.c, graph_kernel.c, graph_data.c). Private to
 * src/core/graph/, not installed. */
#ifndef SPSIM_GRAPH_BUILD_H
#define SPSIM_GRAPH_BUILD_H

#include "spsim/graph.h"

/* Tensor @p t of @p g, or NULL with @p err set. */
const sp_tensor *sp_g_tensor(const sp_graph *g, uint32_t t, GError **err);
/* FALSE with @p err set when @p dim is not a dim of @p t. */
gboolean sp_g_check_dim(const sp_tensor *t, int dim, const char *what, GError **err);
/* Sets a shape error naming both tensors and what was expected; returns FALSE. */
gboolean sp_g_shape_err(GError **err, const char *what, const sp_tensor *a, const sp_tensor *b,
                        const char *expect);
/* A zeroed node of @p kind with no inputs or outputs and scale 1. */
sp_node *sp_g_node_alloc(sp_node_kind kind);
/* Appends @p n (named after its kind and first output unless named) and returns its id. */
uint32_t sp_g_node_push(sp_graph *g, sp_node *n);
/* A group set of disjoint ranks inside the world whose members hold each of @p ts
 * (SP_NO_TENSOR entries skipped). */
gboolean sp_g_check_groups(const sp_graph *g, const sp_groups *gs, const uint32_t *ts, int nts,
                           const char *what, GError **err);
/* Local nodes: every rank holding out must hold the inputs. */
gboolean sp_g_local_holders(const sp_graph *g, const uint32_t *ins, int nin, uint32_t out,
                            const char *what, GError **err);
/* A local node of @p kind reading @p ins and writing @p out. */
sp_node *sp_g_local_node(sp_node_kind kind, const uint32_t *ins, int nin, uint32_t out);

/* Runs MoE kernel node @p n (graph_moe.c) on one rank's program buffers @p bufs. */
gboolean sp_g_moe_host(const sp_graph *g, const sp_node *n, void *const *bufs, GError **err);

/* Shapes equal except possibly at dim @p except (-1: none). */
static inline gboolean sp_g_same_shape_except(const sp_tensor *a, const sp_tensor *b, int except)
{
  if (a->ndim != b->ndim)
    return FALSE;
  for (int i = 0; i < a->ndim; i++)
    if (i != except && a->shape[i] != b->shape[i])
      return FALSE;
  return TRUE;
}

/* Elements before and after dim @p dim of @p t (row-major). */
static inline void sp_g_outer_inner(const sp_tensor *t, int dim, uint64_t *outer, uint64_t *inner)
{
  uint64_t o = 1, i = 1;
  for (int k = 0; k < dim; k++)
    o *= (uint64_t)t->shape[k];
  for (int k = dim + 1; k < t->ndim; k++)
    i *= (uint64_t)t->shape[k];
  *outer = o;
  *inner = i;
}

#endif
