/* spsim topo: process topologies, their groups, pipeline grids, the
 * model/pipeline/data initialiser and factorisations of a world size. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <json-glib/json-glib.h>

#include "cli.h"
#include "spsim/error.h"
#include "spsim/topology.h"

/* Largest world whose groups the CLI lists (every axis' groups are printed). */
#define TOPO_CLI_MAX_WORLD (1 << 18)

typedef struct {
  char *axes, *order, *filter, *rank;
  gboolean grid, json;
  char *init_mp, *init_pp, *world;
  char *factor, *k;
} topo_opts;

static void topo_opts_clear(topo_opts *o)
{
  g_free(o->axes);
  g_free(o->order);
  g_free(o->filter);
  g_free(o->rank);
  g_free(o->init_mp);
  g_free(o->init_pp);
  g_free(o->world);
  g_free(o->factor);
  g_free(o->k);
}

/* Parse an integer option value (@p what names it in the error). */
static gboolean parse_int(const char *s, const char *what, int64_t min, int32_t *out, GError **error)
{
  gint64 v = 0;
  if (s == NULL || !g_ascii_string_to_signed(s, 10, G_MININT32, G_MAXINT32, &v, NULL)) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "%s '%s' is not an integer", what, s ? s : "");
    return FALSE;
  }
  if (v < min) {
    g_set_error(error, SP_ERROR, SP_ERROR_INVALID, "%s %" G_GINT64_FORMAT " is invalid: it must be >= %"
                G_GINT64_FORMAT, what, v, min);
    return FALSE;
  }
  *out = (int32_t)v;
  return TRUE;
}

/* ------------------------------------------------------------------ output */

static void json_add_groups(JsonBuilder *b, const char *key, const sp_groups *g)
{
  if (key) json_builder_set_member_name(b, key);
  json_builder_begin_array(b);
  for (int32_t i = 0; i < g->n_groups; i++) {
    const int32_t *row = sp_groups_row(g, i);
    json_builder_begin_array(b);
    for (int32_t j = 0; j < g->group_size; j++) json_builder_add_int_value(b, row[j]);
    json_builder_end_array(b);
  }
  json_builder_end_array(b);
}

static void json_add_ranks(JsonBuilder *b, const char *key, const int32_t *r, int32_t n)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_array(b);
  for (int32_t i = 0; i < n; i++) json_builder_add_int_value(b, r[i]);
  json_builder_end_array(b);
}

static void print_ranks(const int32_t *r, int32_t n)
{
  putchar('[');
  for (int32_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", r[i]);
  putchar(']');
}

static void print_groups_line(const char *label, int width, const sp_groups *g)
{
  printf("%-*s :", width, label);
  for (int32_t i = 0; i < g->n_groups; i++) {
    putchar(' ');
    print_ranks(sp_groups_row(g, i), g->group_size);
  }
  putchar('\n');
}

/* ---------------------------------------------------------------- factorise */

static int run_factor(const topo_opts *o)
{
  GError *err = NULL;
  int32_t n = 0, k = 3;
  if (!parse_int(o->factor, "--factor", 1, &n, &err)) return sp_cli_fail(err);
  if (o->k && !parse_int(o->k, "--k", 1, &k, &err)) return sp_cli_fail(err);
  g_autoptr(sp_groups) f = sp_factorizations(n, k, &err);
  if (f == NULL) return sp_cli_fail(err);
  if (o->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "n");
    json_builder_add_int_value(b, n);
    json_builder_set_member_name(b, "k");
    json_builder_add_int_value(b, k);
    json_add_groups(b, "factorizations", f);
    json_builder_end_object(b);
    sp_cli_print_json(b);
    return 0;
  }
  printf("%d into %d factors: %d ordered factorisations\n", n, k, f->n_groups);
  for (int32_t i = 0; i < f->n_groups; i++) {
    const int32_t *row = sp_groups_row(f, i);
    for (int32_t j = 0; j < k; j++) printf("%s%d", j ? " x " : "", row[j]);
    putchar('\n');
  }
  return 0;
}

/* --------------------------------------------------------------------- init */

static int run_init(const topo_opts *o)
{
  GError *err = NULL;
  int32_t world = 0, mp = 1, pp = 1, rank = -1;
  if (o->world == NULL) {
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "--init-mp/--init-pp need --world W (the number of ranks)"));
  }
  if (!parse_int(o->world, "--world", 1, &world, &err)) return sp_cli_fail(err);
  if (o->init_mp && !parse_int(o->init_mp, "--init-mp", 1, &mp, &err)) return sp_cli_fail(err);
  if (o->init_pp && !parse_int(o->init_pp, "--init-pp", 1, &pp, &err)) return sp_cli_fail(err);
  if (world > TOPO_CLI_MAX_WORLD) {
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "--world %d is too large to list its groups (at most %d)",
                                   world, TOPO_CLI_MAX_WORLD));
  }
  if (o->rank && !parse_int(o->rank, "--rank", 0, &rank, &err)) return sp_cli_fail(err);
  g_autoptr(sp_init_groups) init = sp_init_parallelism(world, mp, pp, &err);
  if (init == NULL) return sp_cli_fail(err);
  int32_t mg = 0, mpos = 0, pg = 0, ppos = 0, dg = 0, dpos = 0;
  if (rank >= 0 && !sp_init_rank_groups(init, rank, &mg, &mpos, &pg, &ppos, &dg, &dpos, &err))
    return sp_cli_fail(err);
  if (init->mp_clamped) {
    fprintf(stderr, "spsim: warning: model parallelism %d is greater than world size %d, using %d\n",
            init->requested_mp, world, init->mp);
  }
  if (o->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "world");
    json_builder_add_int_value(b, world);
    json_builder_set_member_name(b, "mp");
    json_builder_add_int_value(b, init->mp);
    json_builder_set_member_name(b, "pp");
    json_builder_add_int_value(b, init->pp);
    json_builder_set_member_name(b, "dp");
    json_builder_add_int_value(b, init->dp);
    json_builder_set_member_name(b, "mp_clamped");
    json_builder_add_boolean_value(b, init->mp_clamped);
    json_builder_set_member_name(b, "groups");
    json_builder_begin_object(b);
    json_add_groups(b, "model", init->model);
    json_add_groups(b, "pipeline", init->pipeline);
    json_add_groups(b, "data", init->data);
    json_builder_end_object(b);
    if (rank >= 0) {
      const struct { const char *name; int32_t g, pos; } rows[3] = {
        { "model", mg, mpos }, { "pipeline", pg, ppos }, { "data", dg, dpos } };
      json_builder_set_member_name(b, "rank");
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "rank");
      json_builder_add_int_value(b, rank);
      for (int i = 0; i < 3; i++) {
        json_builder_set_member_name(b, rows[i].name);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "group");
        json_builder_add_int_value(b, rows[i].g);
        json_builder_set_member_name(b, "position");
        json_builder_add_int_value(b, rows[i].pos);
        json_builder_end_object(b);
      }
      json_builder_end_object(b);
    }
    json_builder_end_object(b);
    sp_cli_print_json(b);
    return 0;
  }
  printf("world %d: model parallel %d, pipeline parallel %d, data parallel %d\n", world, init->mp,
         init->pp, init->dp);
  print_groups_line("model", 8, init->model);
  print_groups_line("pipeline", 8, init->pipeline);
  print_groups_line("data", 8, init->data);
  if (rank >= 0) {
    printf("rank %d: model group %d ", rank, mg);
    print_ranks(sp_groups_row(init->model, mg), init->model->group_size);
    printf(" (position %d), pipeline group %d ", mpos, pg);
    print_ranks(sp_groups_row(init->pipeline, pg), init->pipeline->group_size);
    printf(" (position %d), data group %d ", ppos, dg);
    print_ranks(sp_groups_row(init->data, dg), init->data->group_size);
    printf(" (position %d)\n", dpos);
  }
  return 0;
}

/* --------------------------------------------------------------------- axes */

typedef struct {
  const char *key;   /* JSON key */
  const char *label; /* human label */
  sp_groups *(*fn)(const sp_grid *, GError **);
} grid_list;

static const grid_list grid_lists[] = {
  { "data", "data", sp_grid_data_groups },
  { "pipe", "pipe", sp_grid_pipe_groups },
  { "tensor", "tensor", sp_grid_tensor_groups },
  { "model", "model", sp_grid_model_groups },
  { "tensor_data", "tensor+data", sp_grid_tensor_data_groups },
  { "p2p", "p2p", sp_grid_p2p_pairs },
  { "embedding", "embedding", sp_grid_embedding_groups },
  { "position_embedding", "position-embedding", sp_grid_position_embedding_groups },
};

static int run_axes(const topo_opts *o)
{
  GError *err = NULL;
  /* an order with an ep token lays out experts as Megatron-Core does (sp_topo_moe_new) */
  g_auto(GStrv) otoks = o->order ? g_strsplit(o->order, "-", -1) : NULL;
  g_autoptr(sp_topo_moe) moe = NULL;
  if (otoks != NULL && g_strv_contains((const char *const *)otoks, "ep")) {
    moe = sp_topo_moe_new(o->order, o->axes, &err);
    if (moe == NULL) return sp_cli_fail(err);
  }
  g_autoptr(sp_topo) t = moe ? sp_topo_copy(moe->dense)
                       : o->order ? sp_topo_new_from_order_spec(o->order, o->axes, &err)
                                  : sp_topo_new_from_spec(o->axes, &err);
  if (t == NULL) return sp_cli_fail(err);
  /* expert groups: expert-parallel, expert tensor-parallel, expert data-parallel */
  static const char *const moe_axes[3] = { "ep", "etp", "edp" };
  static const char *const moe_labels[3] = { "ep", "expert-tp", "expert-dp" };
  g_autoptr(GPtrArray) moe_groups = g_ptr_array_new_with_free_func((GDestroyNotify)sp_groups_free);
  for (int i = 0; moe != NULL && i < 3; i++) {
    sp_groups *g = sp_topo_axis_groups(moe->expert, moe_axes[i], &err);
    if (g == NULL) return sp_cli_fail(err);
    g_ptr_array_add(moe_groups, g);
  }
  int32_t world = sp_topo_world(t);
  guint n_axes = sp_topo_n_axes(t);
  if (world > TOPO_CLI_MAX_WORLD) {
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                   "the world has %d ranks: too many to list its groups (at most %d)",
                                   world, TOPO_CLI_MAX_WORLD));
  }

  /* Everything is computed before anything is printed: errors leave stdout empty. */
  g_autoptr(GPtrArray) axis_groups = g_ptr_array_new_with_free_func((GDestroyNotify)sp_groups_free);
  for (guint i = 0; i < n_axes; i++) {
    sp_groups *g = sp_topo_axis_groups(t, sp_topo_axis_name(t, i), &err);
    if (g == NULL) return sp_cli_fail(err);
    g_ptr_array_add(axis_groups, g);
  }
  g_autofree int32_t *filtered = NULL;
  int32_t n_filtered = 0;
  if (o->filter) {
    g_auto(GStrv) fnames = NULL;
    g_autofree int32_t *fvals = NULL;
    guint fn = 0;
    if (!sp_topo_parse_assignments(o->filter, &fnames, &fvals, &fn, &err)) return sp_cli_fail(err);
    filtered = sp_topo_filter(t, fn, (const char *const *)fnames, fvals, &n_filtered, &err);
    if (filtered == NULL) return sp_cli_fail(err);
  }
  int32_t rank = -1;
  int32_t coord[SP_TOPO_MAX_AXES];
  g_autofree char *label = NULL;
  if (o->rank) {
    if (!parse_int(o->rank, "--rank", 0, &rank, &err)) return sp_cli_fail(err);
    if (!sp_topo_coord(t, rank, coord, &err)) return sp_cli_fail(err);
    label = sp_topo_rank_label(t, rank, NULL, NULL, NULL, &err);
    if (label == NULL) return sp_cli_fail(err);
  }
  g_autoptr(sp_grid) grid = NULL;
  g_autoptr(GPtrArray) grid_groups = g_ptr_array_new_with_free_func((GDestroyNotify)sp_groups_free);
  int32_t stage = 0, dpid = 0, next = 0;
  if (o->grid) {
    grid = sp_grid_new(t, &err);
    if (grid == NULL) return sp_cli_fail(err);
    for (gsize i = 0; i < G_N_ELEMENTS(grid_lists); i++) {
      sp_groups *g = grid_lists[i].fn(grid, &err);
      if (g == NULL) return sp_cli_fail(err);
      g_ptr_array_add(grid_groups, g);
    }
    if (rank >= 0) {
      stage = sp_grid_stage_id(grid, rank, &err);
      if (stage < 0) return sp_cli_fail(err);
      dpid = sp_grid_data_parallel_id(grid, rank, &err);
      if (dpid < 0) return sp_cli_fail(err);
      next = sp_grid_stage_to_global(grid, rank, (stage + 1) % sp_grid_pipe_size(grid), 0, NULL,
                                     NULL, &err);
      if (next < 0) return sp_cli_fail(err);
    }
  }

  if (o->json) {
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "world");
    json_builder_add_int_value(b, world);
    if (o->order) {
      json_builder_set_member_name(b, "order");
      json_builder_add_string_value(b, o->order);
    }
    json_builder_set_member_name(b, "axes");
    json_builder_begin_array(b);
    for (guint i = 0; i < n_axes; i++) {
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "name");
      json_builder_add_string_value(b, sp_topo_axis_name(t, i));
      json_builder_set_member_name(b, "size");
      json_builder_add_int_value(b, sp_topo_axis_size(t, i));
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "groups");
    json_builder_begin_object(b);
    for (guint i = 0; i < n_axes; i++)
      json_add_groups(b, sp_topo_axis_name(t, i), g_ptr_array_index(axis_groups, i));
    json_builder_end_object(b);
    if (moe) {
      json_builder_set_member_name(b, "expert");
      json_builder_begin_object(b);
      const char *keys[] = { "ep", "etp", "edp" };
      const int32_t sz[] = { moe->ep, moe->etp, moe->edp };
      for (int i = 0; i < 3; i++) {
        json_builder_set_member_name(b, keys[i]);
        json_builder_add_int_value(b, sz[i]);
      }
      json_builder_set_member_name(b, "groups");
      json_builder_begin_object(b);
      for (int i = 0; i < 3; i++) json_add_groups(b, moe_labels[i], g_ptr_array_index(moe_groups, i));
      json_builder_end_object(b);
      json_builder_end_object(b);
    }
    if (filtered) json_add_ranks(b, "filter", filtered, n_filtered);
    if (grid) {
      json_builder_set_member_name(b, "grid");
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "stages");
      json_builder_add_int_value(b, sp_grid_pipe_size(grid));
      json_builder_set_member_name(b, "data_size");
      json_builder_add_int_value(b, sp_grid_data_size(grid));
      json_builder_set_member_name(b, "tensor_size");
      json_builder_add_int_value(b, sp_grid_tensor_size(grid));
      for (gsize i = 0; i < G_N_ELEMENTS(grid_lists); i++)
        json_add_groups(b, grid_lists[i].key, g_ptr_array_index(grid_groups, i));
      json_builder_end_object(b);
    }
    if (rank >= 0) {
      json_builder_set_member_name(b, "rank");
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "rank");
      json_builder_add_int_value(b, rank);
      json_builder_set_member_name(b, "coord");
      json_builder_begin_object(b);
      for (guint i = 0; i < n_axes; i++) {
        json_builder_set_member_name(b, sp_topo_axis_name(t, i));
        json_builder_add_int_value(b, coord[i]);
      }
      json_builder_end_object(b);
      json_builder_set_member_name(b, "label");
      json_builder_add_string_value(b, label);
      if (grid) {
        json_builder_set_member_name(b, "stage");
        json_builder_add_int_value(b, stage);
        json_builder_set_member_name(b, "data_parallel_id");
        json_builder_add_int_value(b, dpid);
        json_builder_set_member_name(b, "first_stage");
        json_builder_add_boolean_value(b, sp_grid_is_first_stage(grid, rank));
        json_builder_set_member_name(b, "last_stage");
        json_builder_add_boolean_value(b, sp_grid_is_last_stage(grid, rank));
        json_builder_set_member_name(b, "next_stage_rank");
        json_builder_add_int_value(b, next);
      }
      json_builder_end_object(b);
    }
    json_builder_end_object(b);
    sp_cli_print_json(b);
    return 0;
  }

  /* Human-readable. */
  int width = 6;
  for (guint i = 0; i < n_axes; i++) width = MAX(width, (int)strlen(sp_topo_axis_name(t, i)));
  printf("world %d, %u axes (slowest first: the last axis varies fastest)\n", world, n_axes);
  if (o->order) {
    printf("order %s (first token fastest) = axes", o->order);
    for (guint i = 0; i < n_axes; i++) printf("%s%s", i ? "," : " ", sp_topo_axis_name(t, i));
    putchar('\n');
  }
  printf("  %-*s %8s %10s\n", width, "axis", "size", "stride");
  int32_t stride = world;
  for (guint i = 0; i < n_axes; i++) {
    stride /= sp_topo_axis_size(t, i);
    printf("  %-*s %8d %10d\n", width, sp_topo_axis_name(t, i), sp_topo_axis_size(t, i), stride);
  }
  for (guint i = 0; i < n_axes; i++)
    print_groups_line(sp_topo_axis_name(t, i), width, g_ptr_array_index(axis_groups, i));
  if (moe) {
    printf("experts (Megatron-Core: ep folded into dp x cp): ep %d, expert tp %d, expert dp %d = world / (etp x ep x pp)\n",
           moe->ep, moe->etp, moe->edp);
    for (int i = 0; i < 3; i++) print_groups_line(moe_labels[i], MAX(width, 9), g_ptr_array_index(moe_groups, i));
  }
  if (filtered) {
    printf("filter %s: ", o->filter);
    print_ranks(filtered, n_filtered);
    putchar('\n');
  }
  if (grid) {
    printf("pipeline grid: %d stages x data %d x tensor %d\n", sp_grid_pipe_size(grid),
           sp_grid_data_size(grid), sp_grid_tensor_size(grid));
    for (gsize i = 0; i < G_N_ELEMENTS(grid_lists); i++)
      print_groups_line(grid_lists[i].label, 18, g_ptr_array_index(grid_groups, i));
  }
  if (rank >= 0) {
    printf("rank %d:", rank);
    for (guint i = 0; i < n_axes; i++) printf(" %s=%d", sp_topo_axis_name(t, i), coord[i]);
    printf("  label '%s'\n", label);
    if (grid) {
      printf("rank %d: stage %d%s%s, data-parallel id %d, next stage rank %d\n", rank, stage,
             sp_grid_is_first_stage(grid, rank) ? " (first)" : "",
             sp_grid_is_last_stage(grid, rank) ? " (last)" : "", dpid, next);
    }
  }
  return 0;
}

/* ------------------------------------------------------------------- main */

int sp_cmd_topo(int argc, char **argv)
{
  topo_opts o = { 0 };
  GOptionEntry entries[] = {
    { "axes", 0, 0, G_OPTION_ARG_STRING, &o.axes,
      "axes slowest first, the last varies fastest (with --order: sizes by name)", "NAME=N,..." },
    { "order", 0, 0, G_OPTION_ARG_STRING, &o.order,
      "Megatron-style order, FIRST token fastest (sizes from --axes; an axis without one is 1, as in Megatron); "
      "with an ep token, ep is folded into dp x cp as in Megatron-Core and the expert groups are listed (--axes may set etp)", "tp-cp-ep-dp-pp" },
    { "filter", 0, 0, G_OPTION_ARG_STRING, &o.filter, "ranks matching a partial coordinate",
      "NAME=I,..." },
    { "rank", 0, 0, G_OPTION_ARG_STRING, &o.rank, "coordinate and label of one rank (with --world: its groups)", "R" },
    { "grid", 0, 0, G_OPTION_ARG_NONE, &o.grid,
      "pipeline-grid groups (axes pipe/data/tensor; missing ones count as size 1)", NULL },
    { "init-mp", 0, 0, G_OPTION_ARG_STRING, &o.init_mp, "model/pipeline/data initialiser: model parallelism", "M" },
    { "init-pp", 0, 0, G_OPTION_ARG_STRING, &o.init_pp, "model/pipeline/data initialiser: pipeline parallelism", "P" },
    { "world", 0, 0, G_OPTION_ARG_STRING, &o.world, "model/pipeline/data initialiser: number of ranks", "W" },
    { "factor", 0, 0, G_OPTION_ARG_STRING, &o.factor, "list the ordered factorisations of N", "N" },
    { "k", 0, 0, G_OPTION_ARG_STRING, &o.k, "number of factors for --factor (default 3)", "K" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &o.json, "print JSON instead of text", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- process topologies, groups, factorisations");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_description(ctx,
    "Modes (exactly one):\n"
    "  --axes pipe=2,data=2,tensor=2 [--order ...] [--filter ...] [--rank R] [--grid]\n"
    "  --world W [--init-mp M] [--init-pp P] [--rank R]\n"
    "  --factor N [--k K]\n"
    "Add --json for machine-readable output.\n");
  GError *err = NULL;
  int rc = 0;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
    rc = sp_cli_fail(err);
    goto out;
  }
  if (argc > 1) {
    rc = sp_cli_fail(g_error_new(G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                                 "unexpected argument '%s' (see spsim topo --help)", argv[1]));
    goto out;
  }
  gboolean axes_mode = o.axes || o.order || o.filter || o.grid;
  gboolean init_mode = o.world || o.init_mp || o.init_pp;
  gboolean factor_mode = o.factor || o.k;
  int modes = (axes_mode ? 1 : 0) + (init_mode ? 1 : 0) + (factor_mode ? 1 : 0);
  if (modes == 0) {
    rc = sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                 "nothing to do: give --axes NAME=N,..., --world W [--init-mp M "
                                 "--init-pp P] or --factor N [--k K]"));
  } else if (modes > 1) {
    rc = sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                 "--axes/--order/--filter/--grid, --world/--init-mp/--init-pp and "
                                 "--factor/--k are separate modes: use one at a time"));
  } else if (factor_mode) {
    if (o.factor == NULL) {
      rc = sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "--k needs --factor N"));
    } else if (o.rank) {
      rc = sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID, "--rank does not apply to --factor"));
    } else {
      rc = run_factor(&o);
    }
  } else if (init_mode) {
    rc = run_init(&o);
  } else if (o.axes == NULL) {
    rc = sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_INVALID,
                                 "%s needs --axes NAME=N,... (with --order: the sizes by name, "
                                 "e.g. --order tp-dp-pp --axes tp=2,dp=2,pp=2)",
                                 o.order ? "--order" : o.filter ? "--filter" : "--grid"));
  } else {
    rc = run_axes(&o);
  }
out:
  topo_opts_clear(&o);
  return rc;
}
