/* Megatron-style process groups over a topology: the pipeline grid (stage, data and
 * tensor roles, their groups, embedding groups, stage-to-global ranks) and the
 * model/pipeline/data initialiser. */
#include "config.h"

#include "spsim/error.h"
#include "spsim/topology.h"
#include "topo_private.h"

/* ----------------------------------------------------------- pipeline grid */

struct sp_grid {
  sp_topo *topo;
  int pipe, data, tensor; /* axis indices, -1 when absent */
};

/* Axis by its canonical name, else by its Megatron alias. */
static int find_role(const sp_topo *t, const char *name, const char *alias)
{
  int i = sp_topo_axis_index(t, name);
  return i >= 0 ? i : sp_topo_axis_index(t, alias);
}

sp_grid *sp_grid_new(const sp_topo *topo, GError **error)
{
  if (topo == NULL) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "a pipeline grid needs a topology");
    return NULL;
  }
  sp_grid *g = g_new0(sp_grid, 1);
  g->topo = sp_topo_copy(topo);
  g->pipe = find_role(topo, "pipe", "pp");
  g->data = find_role(topo, "data", "dp");
  g->tensor = find_role(topo, "tensor", "tp");
  return g;
}

void sp_grid_free(sp_grid *grid)
{
  if (grid == NULL) return;
  sp_topo_free(grid->topo);
  g_free(grid);
}

const sp_topo *sp_grid_topo(const sp_grid *grid)
{
  g_return_val_if_fail(grid != NULL, NULL);
  return grid->topo;
}

static int32_t role_size(const sp_grid *g, int axis)
{
  return axis < 0 ? 1 : g->topo->sizes[axis];
}

int32_t sp_grid_pipe_size(const sp_grid *grid) { return role_size(grid, grid->pipe); }
int32_t sp_grid_data_size(const sp_grid *grid) { return role_size(grid, grid->data); }
int32_t sp_grid_tensor_size(const sp_grid *grid) { return role_size(grid, grid->tensor); }

static int32_t role_id(const sp_grid *g, int axis, int32_t rank, GError **error)
{
  if (!sp_t_check_rank(g->topo, rank, error)) return -1;
  return axis < 0 ? 0 : sp_t_coord_of(g->topo, rank, (guint)axis);
}

int32_t sp_grid_stage_id(const sp_grid *grid, int32_t rank, GError **error)
{
  return role_id(grid, grid->pipe, rank, error);
}

int32_t sp_grid_data_parallel_id(const sp_grid *grid, int32_t rank, GError **error)
{
  return role_id(grid, grid->data, rank, error);
}

int32_t sp_grid_tensor_id(const sp_grid *grid, int32_t rank, GError **error)
{
  return role_id(grid, grid->tensor, rank, error);
}

gboolean sp_grid_is_first_stage(const sp_grid *grid, int32_t rank)
{
  return sp_grid_stage_id(grid, rank, NULL) == 0;
}

gboolean sp_grid_is_last_stage(const sp_grid *grid, int32_t rank)
{
  int32_t s = sp_grid_stage_id(grid, rank, NULL);
  return s >= 0 && s == sp_grid_pipe_size(grid) - 1;
}

/* Mask of one role axis (0 when the axis is absent: groups of one rank). */
static guint32 role_mask(int axis)
{
  return axis < 0 ? 0u : 1u << axis;
}

static guint32 all_mask(const sp_topo *t)
{
  return t->n >= 32 ? 0xffffffffu : (1u << t->n) - 1u;
}

sp_groups *sp_grid_data_groups(const sp_grid *grid, GError **error)
{
  return sp_t_groups_mask(grid->topo, role_mask(grid->data), error);
}

sp_groups *sp_grid_pipe_groups(const sp_grid *grid, GError **error)
{
  return sp_t_groups_mask(grid->topo, role_mask(grid->pipe), error);
}

sp_groups *sp_grid_tensor_groups(const sp_grid *grid, GError **error)
{
  return sp_t_groups_mask(grid->topo, role_mask(grid->tensor), error);
}

sp_groups *sp_grid_model_groups(const sp_grid *grid, GError **error)
{
  /* Same data index: every axis but data varies inside a group. */
  return sp_t_groups_mask(grid->topo, all_mask(grid->topo) & ~role_mask(grid->data), error);
}

sp_groups *sp_grid_tensor_data_groups(const sp_grid *grid, GError **error)
{
  /* Same pipe index. */
  return sp_t_groups_mask(grid->topo, all_mask(grid->topo) & ~role_mask(grid->pipe), error);
}

sp_groups *sp_grid_p2p_pairs(const sp_grid *grid, GError **error)
{
  const sp_topo *t = grid->topo;
  if (!sp_t_check_world_listable(t, error)) return NULL;
  sp_groups *gr = sp_t_groups_alloc(t->world, 2, error);
  if (gr == NULL) return NULL;
  int32_t stages = sp_grid_pipe_size(grid);
  for (int32_t r = 0; r < t->world; r++) {
    int32_t next = r;
    if (grid->pipe >= 0) {
      int32_t s = sp_t_coord_of(t, r, (guint)grid->pipe);
      int32_t ns = (s + 1) % stages;
      next = r + (ns - s) * t->strides[grid->pipe];
    }
    gr->ranks[2 * r] = r;
    gr->ranks[2 * r + 1] = next;
  }
  return gr;
}

/* Per pipe group: the first and last stages (first_only: the first stage only). */
static sp_groups *stage_ends(const sp_grid *grid, gboolean first_only, GError **error)
{
  g_autoptr(sp_groups) pipes = sp_grid_pipe_groups(grid, error);
  if (pipes == NULL) return NULL;
  int32_t size = (first_only || pipes->group_size == 1) ? 1 : 2;
  sp_groups *gr = sp_t_groups_alloc(pipes->n_groups, size, error);
  if (gr == NULL) return NULL;
  for (int32_t g = 0; g < pipes->n_groups; g++) {
    const int32_t *row = sp_groups_row(pipes, g);
    gr->ranks[g * size] = row[0];
    if (size == 2) gr->ranks[g * size + 1] = row[pipes->group_size - 1];
  }
  return gr;
}

sp_groups *sp_grid_embedding_groups(const sp_grid *grid, GError **error)
{
  return stage_ends(grid, FALSE, error);
}

sp_groups *sp_grid_position_embedding_groups(const sp_grid *grid, GError **error)
{
  return stage_ends(grid, TRUE, error);
}

int32_t sp_grid_stage_to_global(const sp_grid *grid, int32_t rank, int32_t stage, guint n,
                                const char *const *names, const int32_t *values, GError **error)
{
  g_return_val_if_fail(grid != NULL, -1);
  const sp_topo *t = grid->topo;
  if (!sp_t_check_rank(t, rank, error)) return -1;
  int32_t stages = sp_grid_pipe_size(grid);
  if (stage < 0 || stage >= stages) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "stage %d is out of range: the pipeline has stages 0..%d", stage, stages - 1);
    return -1;
  }
  if (n > t->n) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%u overrides given for a topology of %u axes", n, t->n);
    return -1;
  }
  int idx[SP_TOPO_MAX_AXES];
  if (!sp_t_resolve_partial(t, n, names, values, idx, error)) return -1;
  int32_t coord[SP_TOPO_MAX_AXES];
  for (guint i = 0; i < t->n; i++) coord[i] = sp_t_coord_of(t, rank, i);
  for (guint j = 0; j < n; j++) {
    if (idx[j] == grid->pipe) {
      g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                  "axis '%s' is the stage itself: give it as the stage, not as an override",
                  names[j]);
      return -1;
    }
    coord[idx[j]] = values[j];
  }
  if (grid->pipe >= 0) coord[grid->pipe] = stage;
  return sp_topo_rank(t, coord, error);
}

/* ------------------------------------------------- model/pipeline/data init */

sp_init_groups *sp_init_parallelism(int32_t world, int32_t mp, int32_t pp, GError **error)
{
  if (world < 1) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "world size %d is invalid: it needs at least 1 rank", world);
    return NULL;
  }
  if (mp < 1 || pp < 1) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "%s parallelism %d is invalid: every degree must be >= 1",
                mp < 1 ? "model" : "pipeline", mp < 1 ? mp : pp);
    return NULL;
  }
  int32_t requested = mp;
  /* As the reference initialiser: a model parallelism larger than the world is clamped to it. */
  if (mp > world) mp = world;
  if (world % mp != 0) {
    g_set_error(error, SP_ERROR, SP_ERROR_LAYOUT,
                "world size %d is not divisible by model parallelism %d: choose a model "
                "parallelism that divides %d", world, mp, world);
    return NULL;
  }
  int64_t mpp = (int64_t)mp * pp;
  if (world % mpp != 0) {
    g_set_error(error, SP_ERROR, SP_ERROR_LAYOUT,
                "world size %d is not divisible by model x pipeline parallelism %d x %d = %"
                G_GINT64_FORMAT ": choose degrees whose product divides %d", world, mp, pp, mpp,
                world);
    return NULL;
  }
  int32_t dp = (int32_t)(world / mpp);
  /* [dp][pp][mp] with mp fastest. */
  const char *names[3] = { "data", "pipe", "model" };
  int32_t sizes[3] = { dp, pp, mp };
  g_autoptr(sp_topo) t = sp_topo_new(3, names, sizes, error);
  if (t == NULL) return NULL;
  g_autoptr(sp_groups) model = sp_t_groups_mask(t, 1u << 2, error);
  if (model == NULL) return NULL;
  g_autoptr(sp_groups) pipe = sp_t_groups_mask(t, 1u << 1, error);
  if (pipe == NULL) return NULL;
  g_autoptr(sp_groups) data = sp_t_groups_mask(t, 1u << 0, error);
  if (data == NULL) return NULL;
  sp_init_groups *init = g_new0(sp_init_groups, 1);
  init->world = world;
  init->mp = mp;
  init->pp = pp;
  init->dp = dp;
  init->requested_mp = requested;
  init->mp_clamped = requested != mp;
  init->model = g_steal_pointer(&model);
  init->pipeline = g_steal_pointer(&pipe);
  init->data = g_steal_pointer(&data);
  return init;
}

gboolean sp_init_rank_groups(const sp_init_groups *init, int32_t rank,
                             int32_t *model_group, int32_t *model_pos,
                             int32_t *pipe_group, int32_t *pipe_pos,
                             int32_t *data_group, int32_t *data_pos, GError **error)
{
  g_return_val_if_fail(init != NULL, FALSE);
  if (rank < 0 || rank >= init->world) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID,
                "rank %d is out of range: the world has ranks 0..%d", rank, init->world - 1);
    return FALSE;
  }
  /* NOTE (divergence from the reference initialiser): it picks this rank's groups with
   *   dp_rank = rank % (mp*pp), pp_rank = (rank // pp) % mp, mp_rank = rank // (mp*pp)
   * which index its own lists wrongly: with world 8, mp 2, pp 2, rank 2 gets model
   * group 0 = [0,1] and pipeline group 1 = [1,3], neither of which contains 2. Here
   * the indices follow from rank = d*pp*mp + p*mp + m and the list orders above:
   * model group d*pp + p (position m), pipeline group d*mp + m (position p), data
   * group p*mp + m (position d) — the groups that actually contain the rank. */
  int32_t m = rank % init->mp;
  int32_t p = (rank / init->mp) % init->pp;
  int32_t d = rank / (init->mp * init->pp);
  if (model_group) *model_group = d * init->pp + p;
  if (model_pos) *model_pos = m;
  if (pipe_group) *pipe_group = d * init->mp + m;
  if (pipe_pos) *pipe_pos = p;
  if (data_group) *data_group = p * init->mp + m;
  if (data_pos) *data_pos = d;
  return TRUE;
}

void sp_init_groups_free(sp_init_groups *init)
{
  if (init == NULL) return;
  sp_groups_free(init->model);
  sp_groups_free(init->pipeline);
  sp_groups_free(init->data);
  g_free(init);
}

