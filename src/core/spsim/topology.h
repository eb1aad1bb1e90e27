/**
 * @file topology.h
 * @brief Process topologies: named axes, rank <-> coordinate, communication groups,
 *        pipeline grids, the model/pipeline/data initialiser and factorisations of a
 *        world size.
 *
 * @section topo_conv Axis-order conventions (read this first)
 *
 * spsim accepts two ways of naming a layout. They list the axes in OPPOSITE orders:
 *
 * - **Axis lists** (DeepSpeed-style, sp_topo_new(), sp_topo_new_from_spec(),
 *   `spsim topo --axes pipe=2,data=2,tensor=2`): the axes are listed from the
 *   SLOWEST to the FASTEST. The layout is row-major: the LAST axis varies fastest,
 *   so coordinates (.., x) and (.., x+1) are adjacent ranks. With axes
 *   pipe,data,tensor = 2,2,2: rank = pipe*4 + data*2 + tensor.
 *
 * - **Order strings** (Megatron-style, sp_topo_new_from_order(),
 *   `spsim topo --order tp-cp-ep-dp-pp`): tokens separated by '-' listed from the
 *   FASTEST to the SLOWEST: the FIRST token varies fastest. "tp-dp-pp" with sizes
 *   2,2,2 is the same topology as the axis list pp,dp,tp = 2,2,2. A topology built
 *   from an order string stores its axes in the axis-list convention (reversed), so
 *   every other function of this header (coordinates, groups, labels) reads axes
 *   slowest-first whatever the constructor was.
 *
 * @section topo_groups Groups
 *
 * Group lists are returned as #sp_groups: @c n_groups rows of @c group_size ranks
 * each, stored row after row. Free with sp_groups_free().
 *
 * Nothing here aborts on user input: every fallible call takes a `GError **` (domain
 * #SP_ERROR) and returns NULL, FALSE or -1 on error.
 */
#ifndef SPSIM_TOPOLOGY_H
#define SPSIM_TOPOLOGY_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/** Most axes a topology may have. */
#define SP_TOPO_MAX_AXES 16

/** Longest accepted axis name, in bytes. */
#define SP_TOPO_MAX_NAME 64

/** Most rows sp_factorizations() will produce before refusing. */
#define SP_FACTOR_MAX_COUNT 1000000

/** Most factors (k) sp_factorizations() accepts. */
#define SP_FACTOR_MAX_K 64

/**
 * Most ranks (or factorisation entries) a list-returning call will allocate: group
 * lists of bigger worlds are refused with an error rather than risking memory.
 */
#define SP_TOPO_MAX_LIST (1 << 24)

/* ------------------------------------------------------------------ groups */

/**
 * A list of equally sized groups of ranks (owned, plain data).
 * Group @c g is `ranks[g * group_size .. (g + 1) * group_size)`.
 */
typedef struct {
  int32_t n_groups;   /**< number of groups */
  int32_t group_size; /**< ranks per group */
  int32_t *ranks;     /**< n_groups * group_size ranks, row after row (g_malloc'ed) */
} sp_groups;

/** Free a group list (NULL is fine). */
void sp_groups_free(sp_groups *groups);

/** @return a pointer to the first rank of group @p g (no bounds check beyond a g_return). */
const int32_t *sp_groups_row(const sp_groups *groups, int32_t g);

/**
 * Find the group that contains @p rank.
 * @param group_out (optional) index of the first group containing @p rank
 * @param pos_out (optional) position of @p rank inside that group
 * @return TRUE when found, FALSE when no group contains @p rank.
 */
gboolean sp_groups_find(const sp_groups *groups, int32_t rank, int32_t *group_out, int32_t *pos_out);

/* ---------------------------------------------------------------- topology */

/** Opaque process topology: named axes with sizes, row-major (last axis fastest). */
typedef struct sp_topo sp_topo;

/**
 * Make a topology from axis names and sizes listed SLOWEST FIRST (the last axis
 * varies fastest; see @ref topo_conv).
 *
 * Errors (#SP_ERROR_INVALID): no axes or more than #SP_TOPO_MAX_AXES; an empty,
 * too long or repeated name; a size < 1; a world size (product of sizes) above
 * INT32_MAX.
 */
sp_topo *sp_topo_new(guint n_axes, const char *const *names, const int32_t *sizes, GError **error);

/**
 * Make a topology from an axis-list spec "name=size,name=size,..." listed SLOWEST
 * FIRST, e.g. "pipe=2,data=2,tensor=2" (same convention as sp_topo_new()).
 */
sp_topo *sp_topo_new_from_spec(const char *spec, GError **error);

/**
 * Make a topology from a Megatron-style order string, FASTEST FIRST: tokens separated
 * by '-', e.g. "tp-cp-ep-dp-pp" (tp fastest, pp slowest). @p sizes[i] is the size of
 * token i of @p order. The result stores the axes reversed (slowest first), so
 * sp_topo_axis_name(t, 0) is the LAST token. Errors: empty token, repeated token,
 * @p n_sizes different from the number of tokens, plus those of sp_topo_new().
 */
sp_topo *sp_topo_new_from_order(const char *order, const int32_t *sizes, guint n_sizes, GError **error);

/**
 * Like sp_topo_new_from_order() with the sizes given by name in a spec such as
 * "tp=2,dp=2,pp=2" (any order in the spec). A token of @p order without a size in
 * @p spec has size 1 (Megatron-LM's RankGenerator: a parallelism not asked for is 1);
 * every name of @p spec must be a token of @p order.
 */
sp_topo *sp_topo_new_from_order_spec(const char *order, const char *spec, GError **error);

/** Free a topology (NULL is fine). */
void sp_topo_free(sp_topo *topo);

/** @return a deep copy of @p topo. */
sp_topo *sp_topo_copy(const sp_topo *topo);

/** @return the number of ranks (product of the axis sizes). */
int32_t sp_topo_world(const sp_topo *topo);

/** @return the number of axes. */
guint sp_topo_n_axes(const sp_topo *topo);

/** @return the name of axis @p i (slowest first), owned by @p topo; NULL if out of range. */
const char *sp_topo_axis_name(const sp_topo *topo, guint i);

/** @return the size of axis @p i (slowest first); 0 if out of range. */
int32_t sp_topo_axis_size(const sp_topo *topo, guint i);

/** @return the index of the axis named @p name, or -1 when there is none. */
int sp_topo_axis_index(const sp_topo *topo, const char *name);

/** @return the size of the axis named @p name, or 0 when there is none (as DeepSpeed's get_dim). */
int32_t sp_topo_get_dim(const sp_topo *topo, const char *name);

/** Strict sp_topo_get_dim(): an unknown axis is an error (listing the known axes); returns -1. */
int32_t sp_topo_get_dim_strict(const sp_topo *topo, const char *name, GError **error);

/**
 * Rank of a full coordinate given in axis order (slowest first).
 * @return the rank, or -1 with an error when a value is out of range.
 */
int32_t sp_topo_rank(const sp_topo *topo, const int32_t *coord, GError **error);

/**
 * Rank of a coordinate given by name: every axis exactly once (in any order).
 * @return the rank, or -1 (unknown, missing or repeated axis; value out of range).
 */
int32_t sp_topo_rank_named(const sp_topo *topo, guint n, const char *const *names,
                           const int32_t *values, GError **error);

/**
 * Coordinate of @p rank, written to @p coord_out (sp_topo_n_axes() values, slowest first).
 * @return FALSE with an error when @p rank is not in [0, world).
 */
gboolean sp_topo_coord(const sp_topo *topo, int32_t rank, int32_t *coord_out, GError **error);

/**
 * Group lists (this and every sp_groups / rank-array call below) are refused with an
 * error when the world has more than #SP_TOPO_MAX_LIST ranks.
 *
 * Groups along one axis (DeepSpeed's get_axis_comm_lists): one group per combination
 * of the OTHER axes, combinations enumerated in row-major order (slowest first), each
 * group ordered by its index on @p axis. For pipe,data,tensor = 2,2,2 the pipe groups
 * are [0,4] [1,5] [2,6] [3,7].
 * Unlike DeepSpeed (which returns an empty list), an unknown axis is an error.
 */
sp_groups *sp_topo_axis_groups(const sp_topo *topo, const char *axis, GError **error);

/**
 * Groups along a SET of axes: ranks that agree on every axis NOT in @p axes form one
 * group. Groups are enumerated in row-major order of the other axes; inside a group
 * ranks are ordered by their coordinates on @p axes in row-major order (which is
 * ascending rank). With n == 0 every rank is its own group; with all axes there is
 * one group of all ranks. Errors: unknown or repeated axis.
 */
sp_groups *sp_topo_groups_along(const sp_topo *topo, guint n, const char *const *axes, GError **error);

/**
 * Ranks whose coordinates match a partial coordinate (DeepSpeed's filter_match), in
 * ascending order. n == 0 matches every rank.
 * @param n_out number of ranks returned
 * @return a g_malloc'ed array (g_free it), or NULL with an error for an unknown or
 *         repeated axis or a value outside [0, size).
 */
int32_t *sp_topo_filter(const sp_topo *topo, guint n, const char *const *names,
                        const int32_t *values, int32_t *n_out, GError **error);

/** Ranks whose index on @p axis is @p idx (DeepSpeed's get_axis_list); as sp_topo_filter(). */
int32_t *sp_topo_axis_list(const sp_topo *topo, const char *axis, int32_t idx, int32_t *n_out,
                           GError **error);

/**
 * Label of a rank, DeepSpeed's get_rank_repr: "axis<inner>idx" joined by @p outer for
 * every axis not in @p omit, indices zero-padded to the number of decimal digits of
 * the world size (world 8 -> 1 digit, world 16 -> 2 digits: "tensor_01").
 * @param omit NULL-terminated names to leave out; NULL means the default {"data", "pipe"};
 *        pass an empty vector to keep every axis. Unknown names are ignored.
 * @param inner separator between name and index; NULL means "_"
 * @param outer separator between axes; NULL means "-"
 * @return a g_malloc'ed string (may be empty when every axis is omitted), NULL on error
 *         (rank out of range).
 */
char *sp_topo_rank_label(const sp_topo *topo, int32_t rank, const char *const *omit,
                         const char *inner, const char *outer, GError **error);

/**
 * Parse "name=value,name=value" (used for --axes and --filter). Names are trimmed
 * and must be non-empty; values are decimal integers in int32 range (any sign: the
 * caller validates ranges). Errors say which item is wrong ("'pipe' has no value:
 * write pipe=N").
 * @param names_out NULL-terminated vector (g_strfreev)
 * @param values_out g_malloc'ed values (g_free)
 */
gboolean sp_topo_parse_assignments(const char *spec, char ***names_out, int32_t **values_out,
                                   guint *n_out, GError **error);

/* ----------------------------------------------------------- pipeline grid */

/**
 * A pipeline grid (DeepSpeed's ParallelGrid) over a topology: ranks are placed by
 * their "pipe" (stage), "data" and "tensor" (slice) coordinates. An axis that is
 * missing counts as size 1 (index 0). The aliases "pp", "dp" and "tp" are accepted
 * when "pipe", "data" or "tensor" is absent (Megatron order strings). Other axes
 * (e.g. "seq") are carried along: a pipe group holds ranks equal on every axis but
 * pipe, a model group ranks equal on data, and so on.
 */
typedef struct sp_grid sp_grid;

/** Make a grid over a copy of @p topo (never fails for a valid topology). */
sp_grid *sp_grid_new(const sp_topo *topo, GError **error);

/** Free a grid (NULL is fine). */
void sp_grid_free(sp_grid *grid);

/** @return the grid's topology (owned by the grid). */
const sp_topo *sp_grid_topo(const sp_grid *grid);

/** @return the number of pipeline stages (size of the pipe axis, 1 if absent). */
int32_t sp_grid_pipe_size(const sp_grid *grid);
/** @return the data-parallel size (size of the data axis, 1 if absent). */
int32_t sp_grid_data_size(const sp_grid *grid);
/** @return the tensor (slice) parallel size (size of the tensor axis, 1 if absent). */
int32_t sp_grid_tensor_size(const sp_grid *grid);

/** @return the stage (pipe index) of @p rank, or -1 with an error when out of range. */
int32_t sp_grid_stage_id(const sp_grid *grid, int32_t rank, GError **error);
/** @return the data-parallel index of @p rank, or -1 with an error. */
int32_t sp_grid_data_parallel_id(const sp_grid *grid, int32_t rank, GError **error);
/** @return the tensor index of @p rank, or -1 with an error. */
int32_t sp_grid_tensor_id(const sp_grid *grid, int32_t rank, GError **error);
/** @return TRUE when @p rank is on stage 0 (FALSE for a rank out of range). */
gboolean sp_grid_is_first_stage(const sp_grid *grid, int32_t rank);
/** @return TRUE when @p rank is on the last stage (FALSE for a rank out of range). */
gboolean sp_grid_is_last_stage(const sp_grid *grid, int32_t rank);

/** Data-parallel groups: ranks equal on every axis but data (gradient all-reduce). */
sp_groups *sp_grid_data_groups(const sp_grid *grid, GError **error);
/** Pipe groups: ranks equal on every axis but pipe (one pipeline each), ordered by stage. */
sp_groups *sp_grid_pipe_groups(const sp_grid *grid, GError **error);
/** Tensor (slice) groups: ranks equal on every axis but tensor. */
sp_groups *sp_grid_tensor_groups(const sp_grid *grid, GError **error);
/** Model groups: ranks with the same data index (tensor + pipe + others), one per data index. */
sp_groups *sp_grid_model_groups(const sp_grid *grid, GError **error);
/** Tensor+data groups: ranks with the same pipe index, one per stage. */
sp_groups *sp_grid_tensor_data_groups(const sp_grid *grid, GError **error);
/**
 * Point-to-point pairs: for every rank r (in rank order) the pair [r, next], next being
 * the rank of the following stage in r's pipe group, wrapping from the last stage to
 * the first ([r, r] with one stage). world groups of 2.
 */
sp_groups *sp_grid_p2p_pairs(const sp_grid *grid, GError **error);
/**
 * Embedding groups (tied input/output embedding): per pipe group, [first, last] stage;
 * the whole group (one rank) when there is one stage. Same order as the pipe groups.
 */
sp_groups *sp_grid_embedding_groups(const sp_grid *grid, GError **error);
/** Position-embedding groups: per pipe group, its first stage only. */
sp_groups *sp_grid_position_embedding_groups(const sp_grid *grid, GError **error);

/**
 * Rank at stage @p stage with the same coordinate as @p rank on every other axis,
 * except the @p n overrides (@p names -> @p values), as DeepSpeed's stage_to_global.
 * @return the rank, or -1 with an error (rank or stage out of range, unknown axis,
 *         override out of range, override of the pipe axis itself).
 */
int32_t sp_grid_stage_to_global(const sp_grid *grid, int32_t rank, int32_t stage, guint n,
                                const char *const *names, const int32_t *values, GError **error);

/* ------------------------------------------------- model/pipeline/data init */

/**
 * Groups of the model/pipeline/data initialiser (the reference "init_parallelism"). Ranks are
 * laid out as a [dp][pp][mp] array (mp fastest): rank = d*pp*mp + p*mp + m.
 * 8 ranks, mp 2, pp 2: model [[0,1],[2,3],[4,5],[6,7]], pipeline
 * [[0,2],[1,3],[4,6],[5,7]], data [[0,4],[1,5],[2,6],[3,7]].
 */
typedef struct {
  int32_t world;         /**< number of ranks */
  int32_t mp;            /**< model parallel degree actually used (after clamping) */
  int32_t pp;            /**< pipeline parallel degree */
  int32_t dp;            /**< data parallel degree = world / (mp * pp) */
  int32_t requested_mp;  /**< the mp asked for */
  gboolean mp_clamped;   /**< TRUE when requested_mp > world and mp was set to world */
  sp_groups *model;      /**< (d, p) -> ranks m = 0..mp-1; dp*pp groups */
  sp_groups *pipeline;   /**< (d, m) -> ranks p = 0..pp-1; dp*mp groups */
  sp_groups *data;       /**< (p, m) -> ranks d = 0..dp-1; pp*mp groups */
} sp_init_groups;

/**
 * Build the groups. As the reference, an mp larger than the world is CLAMPED to the world
 * size (reported through @c mp_clamped, for the caller to warn). Errors
 * (#SP_ERROR_LAYOUT / #SP_ERROR_INVALID): world, mp or pp < 1; world % mp != 0;
 * world % (mp*pp) != 0.
 */
sp_init_groups *sp_init_parallelism(int32_t world, int32_t mp, int32_t pp, GError **error);

/**
 * Where @p rank sits: the index of the model/pipeline/data group that CONTAINS it
 * and its position inside each. (The reference computes these indices with formulas that
 * do not match its own group lists; spsim returns the containing groups.)
 * Outputs may be NULL. @return FALSE with an error for a rank out of range.
 */
gboolean sp_init_rank_groups(const sp_init_groups *init, int32_t rank,
                             int32_t *model_group, int32_t *model_pos,
                             int32_t *pipe_group, int32_t *pipe_pos,
                             int32_t *data_group, int32_t *data_pos, GError **error);

/** Free the result of sp_init_parallelism() (NULL is fine). */
void sp_init_groups_free(sp_init_groups *init);

/* ----------------------------------------------------------- factorisations */

/**
 * Number of ordered factorisations of @p n into @p k factors >= 1:
 * prod over primes p^a || n of C(a + k - 1, k - 1). Saturates at G_MAXUINT64.
 * @return 0 for n < 1 or k < 1.
 */
guint64 sp_factorization_count(int32_t n, int32_t k);

/**
 * Every ORDERED factorisation of @p n into @p k factors (each >= 1, product n), in
 * lexicographic order, without duplicates: n_groups = count, group_size = k.
 * E.g. n = 12, k = 2: [1,12] [2,6] [3,4] [4,3] [6,2] [12,1].
 * Errors (#SP_ERROR_INVALID): n < 1; k < 1 or k > #SP_FACTOR_MAX_K; more than
 * #SP_FACTOR_MAX_COUNT results (or more than #SP_TOPO_MAX_LIST numbers in all).
 */
sp_groups *sp_factorizations(int32_t n, int32_t k, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_groups, sp_groups_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_topo, sp_topo_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_grid, sp_grid_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_init_groups, sp_init_groups_free)

/* ----------------------------------------------------- expert parallelism */

/**
 * Megatron-Core's expert-parallel layout (megatron/core/parallel_state.py,
 * initialize_model_parallel at NVIDIA/Megatron-LM 00caa53): two RankGenerators over the
 * same order string. The dense one has ep = 1 and dp = world / (tp x cp x pp); the
 * expert one has tp = etp (expert tensor parallelism, default tp), ep, dp = expert dp =
 * world / (etp x ep x pp), pp, and cp = 1. With the default order tp-cp-ep-dp-pp and
 * etp = tp the expert-parallel groups are thus folded inside the data-parallel (x
 * context-parallel) groups, and ep must divide dp x cp.
 */
typedef struct {
  sp_topo *dense;   /**< the order's axes but ep (the dense generator's ep = 1): world = tp x cp x dp x pp */
  sp_topo *expert;  /**< axes "etp", "ep", "edp", "pp" at the positions of tp, ep, dp, pp in the order */
  int32_t tp, cp, dp, pp, ep, etp, edp;
} sp_topo_moe;

/**
 * Build both layouts from a Megatron order holding the token "ep" (tokens among tp, cp,
 * ep, dp, pp) and a spec "tp=2,ep=4,dp=8,pp=2" (optionally "etp=N"); a token without a
 * size is 1. Errors (SP_ERROR_INVALID) say what to change: ep not dividing dp x cp (etp =
 * tp), etp x ep x pp not dividing the world, an order not ending in pp whose expert dp
 * differs from dp (Megatron's assertion), unknown tokens.
 */
sp_topo_moe *sp_topo_moe_new(const char *order, const char *spec, GError **error);
/** Free (NULL is fine). */
void sp_topo_moe_free(sp_topo_moe *moe);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_topo_moe, sp_topo_moe_free)

G_END_DECLS

#endif
