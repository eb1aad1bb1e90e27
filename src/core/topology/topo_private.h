/* The representation of a topology and the helpers that topology.c shares with the
 * pipeline grid and the initialiser (topology_grid.c). Private to
 * src/core/topology/, not installed. */
#ifndef SPSIM_TOPO_PRIVATE_H
#define SPSIM_TOPO_PRIVATE_H

#include "spsim/topology.h"

struct sp_topo {
  guint n;                            /* number of axes */
  char *names[SP_TOPO_MAX_AXES];      /* slowest first */
  int32_t sizes[SP_TOPO_MAX_AXES];
  int32_t strides[SP_TOPO_MAX_AXES];  /* row-major: last axis has stride 1 */
  int32_t world;
};

/* Allocate an n_groups x group_size list, refusing more than SP_TOPO_MAX_LIST entries. */
sp_groups *sp_t_groups_alloc(int64_t n_groups, int64_t group_size, GError **error);
/* FALSE with @p error set when the world is too large to list its groups. */
gboolean sp_t_check_world_listable(const sp_topo *t, GError **error);
/* FALSE with @p error set when @p rank is outside the world. */
gboolean sp_t_check_rank(const sp_topo *t, int32_t rank, GError **error);
/* Map (names, values) onto axis indices; rejects unknown/repeated axes and bad values. */
gboolean sp_t_resolve_partial(const sp_topo *t, guint n, const char *const *names,
                              const int32_t *values, int *idx_out, GError **error);
/* Groups along the axes in @mask: ranks equal on every other axis form a group.
 * Group index: row-major over the other axes; position: row-major over the masked axes. */
sp_groups *sp_t_groups_mask(const sp_topo *t, guint32 mask, GError **error);

/* Coordinate of a rank known to be in range. */
static inline int32_t sp_t_coord_of(const sp_topo *t, int32_t rank, guint axis)
{
  return (rank / t->strides[axis]) % t->sizes[axis];
}

#endif
