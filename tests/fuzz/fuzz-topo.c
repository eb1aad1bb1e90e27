/* Fuzz harness: process topologies from user text, as `spsim topo` reads them:
 * an axis list "pipe=2,data=2" (sp_topo_parse_assignments, sp_topo_new_from_spec)
 * and, when the input has a first line, a Megatron order string "tp-cp-dp-pp"
 * (sp_topo_new_from_order_spec, sp_topo_new_from_order). Input: "ORDER\nSPEC" or
 * "SPEC". Every topology built is walked: coordinates, groups, grid, labels. */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/topology.h"

/* Largest world walked rank by rank (bigger ones are only queried). */
#define WALK_MAX 4096

static void check_groups(sp_groups *g, GError *err, int32_t world)
{
  if (g == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return;
  }
  FUZZ_ASSERT((int64_t)g->n_groups * g->group_size == world, "groups cover %d x %d ranks of %d",
              g->n_groups, g->group_size, world);
  for (int64_t i = 0; i < (int64_t)g->n_groups * g->group_size; i++)
    FUZZ_ASSERT(g->ranks[i] >= 0 && g->ranks[i] < world, "rank %d out of range", g->ranks[i]);
  sp_groups_free(g);
}

static void walk(const sp_topo *t, char **fnames, const int32_t *fvals, guint fn)
{
  int32_t world = sp_topo_world(t);
  guint n = sp_topo_n_axes(t);
  FUZZ_ASSERT(world >= 1 && n >= 1 && n <= SP_TOPO_MAX_AXES, "world %d axes %u", world, n);
  int64_t prod = 1;
  for (guint i = 0; i < n; i++) {
    const char *name = sp_topo_axis_name(t, i);
    FUZZ_ASSERT(name != NULL && sp_topo_axis_index(t, name) == (int)i, "axis %u", i);
    prod *= sp_topo_axis_size(t, i);
  }
  FUZZ_ASSERT(prod == world, "product of sizes %" G_GINT64_FORMAT " != world %d", prod, world);
  GError *err = NULL;
  int32_t nf = 0;
  int32_t *f = sp_topo_filter(t, fn, (const char *const *)fnames, fvals, &nf, &err);
  if (f == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_clear_error(&err);
  } else {
    FUZZ_ASSERT(nf >= 0 && nf <= world, "filter returned %d ranks", nf);
    g_free(f);
  }
  if (world > WALK_MAX)
    return;
  int32_t coord[SP_TOPO_MAX_AXES];
  for (int32_t r = 0; r < world; r += 1 + world / 64) {
    FUZZ_ASSERT(sp_topo_coord(t, r, coord, NULL), "coord of %d", r);
    FUZZ_ASSERT(sp_topo_rank(t, coord, NULL) == r, "rank of coord of %d", r);
    g_free(sp_topo_rank_label(t, r, NULL, NULL, NULL, NULL));
  }
  for (guint i = 0; i < n; i++) {
    err = NULL;
    check_groups(sp_topo_axis_groups(t, sp_topo_axis_name(t, i), &err), err, world);
  }
  sp_grid *grid = sp_grid_new(t, &err);
  if (grid == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_clear_error(&err);
    return;
  }
  sp_groups *(*const lists[])(const sp_grid *, GError **) = {
    sp_grid_data_groups, sp_grid_pipe_groups, sp_grid_tensor_groups, sp_grid_model_groups,
    sp_grid_tensor_data_groups,
  };
  for (size_t i = 0; i < G_N_ELEMENTS(lists); i++) {
    err = NULL;
    check_groups(lists[i](grid, &err), err, world);
  }
  err = NULL;
  sp_groups *p2p = sp_grid_p2p_pairs(grid, &err);
  if (p2p) sp_groups_free(p2p); else g_clear_error(&err);
  sp_groups *emb = sp_grid_embedding_groups(grid, &err);
  if (emb) sp_groups_free(emb); else g_clear_error(&err);
  int32_t last = world - 1;
  int32_t stage = sp_grid_stage_id(grid, last, NULL);
  FUZZ_ASSERT(stage >= 0 && stage < sp_grid_pipe_size(grid), "stage %d of the last rank", stage);
  sp_grid_free(grid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size > 4096)
    return 0;
  char *text = g_strndup((const char *)data, size);
  char *nl = strchr(text, '\n');
  const char *order = NULL, *spec = text;
  if (nl != NULL) {
    *nl = '\0';
    order = text;
    spec = nl + 1;
  }
  GError *err = NULL;
  char **names = NULL;
  int32_t *vals = NULL;
  guint nv = 0;
  if (sp_topo_parse_assignments(spec, &names, &vals, &nv, &err)) {
    FUZZ_ASSERT(names != NULL && vals != NULL && g_strv_length(names) == nv, "assignment lists");
  } else {
    FUZZ_EXPECT_ERROR(err);
    FUZZ_ASSERT(names == NULL && vals == NULL && nv == 0, "outputs set on error");
    g_clear_error(&err);
  }

  sp_topo *t = sp_topo_new_from_spec(spec, &err);
  if (t == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_clear_error(&err);
  } else {
    sp_topo *c = sp_topo_copy(t);
    walk(c, names, vals, names ? nv : 0);
    sp_topo_free(c);
    sp_topo_free(t);
  }

  if (order != NULL) {
    t = sp_topo_new_from_order_spec(order, spec, &err);
    if (t == NULL) {
      FUZZ_EXPECT_ERROR(err);
      g_clear_error(&err);
    } else {
      walk(t, names, vals, names ? nv : 0);
      sp_topo_free(t);
    }
    /* the order alone, every axis of size 2 (the count of tokens may be anything) */
    guint ntok = 1;
    for (const char *p = order; *p; p++)
      ntok += *p == '-';
    if (ntok <= 2 * SP_TOPO_MAX_AXES) {
      int32_t sizes[2 * SP_TOPO_MAX_AXES];
      for (guint i = 0; i < ntok; i++)
        sizes[i] = 2;
      t = sp_topo_new_from_order(order, sizes, ntok, &err);
      if (t == NULL) {
        FUZZ_EXPECT_ERROR(err);
        g_clear_error(&err);
      } else {
        walk(t, NULL, NULL, 0);
        sp_topo_free(t);
      }
    }
  }
  g_strfreev(names);
  g_free(vals);
  g_free(text);
  return 0;
}
