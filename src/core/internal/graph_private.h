/* Internal structures of the graph IR (not installed). */
#ifndef SPSIM_GRAPH_PRIVATE_H
#define SPSIM_GRAPH_PRIVATE_H

#include "spsim/graph.h"

struct sp_graph {
  int32_t world;
  GPtrArray *tensors;  /* sp_tensor* */
  GPtrArray *nodes;    /* sp_node* */
  GPtrArray *storage;  /* GArray of uint32_t tensor ids per storage */
  GHashTable *pools;   /* (pool << 32 | slot) -> storage index */
};

struct sp_graph_data {
  const sp_graph *g;
  int32_t world;
  guint nstor;
  void ***buf; /* [rank][storage] */
};

gboolean sp_node_is_kernel(const sp_node *n);
/* Group index of @p r in the node's group set (and its group), or -1. */
int32_t sp_node_group_index(const sp_node *n, int32_t r, const int32_t **grp);

#endif
