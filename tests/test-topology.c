/* Process topologies: layouts of the reference topology's documentation and docstrings, derived
 * by hand; pipeline grids; the model/pipeline/data initialiser; factorisations
 * against a brute-force count and the closed form; every error path. */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "spsim/topology.h"

/* Assert that @g equals the n_groups x group_size rows of @expect. */
static void assert_groups(const sp_groups *g, int32_t n_groups, int32_t group_size, const int32_t *expect)
{
  g_assert_nonnull(g);
  g_assert_cmpint(g->n_groups, ==, n_groups);
  g_assert_cmpint(g->group_size, ==, group_size);
  for (int32_t i = 0; i < n_groups * group_size; i++) {
    if (g->ranks[i] != expect[i])
      g_error("group %d entry %d: got %d, expected %d", i / group_size, i % group_size, g->ranks[i],
              expect[i]);
  }
}

static void assert_ranks(const int32_t *got, int32_t n_got, int32_t n, const int32_t *expect)
{
  g_assert_nonnull(got);
  g_assert_cmpint(n_got, ==, n);
  for (int32_t i = 0; i < n; i++) g_assert_cmpint(got[i], ==, expect[i]);
}

static sp_topo *pdt222(void)
{
  const char *names[] = { "pipe", "data", "tensor" };
  const int32_t sizes[] = { 2, 2, 2 };
  sp_topo *t = sp_topo_new(3, names, sizes, NULL);
  g_assert_nonnull(t);
  return t;
}

/* Named axes pipe,data,tensor = 2,2,2 (last axis fastest), as DeepSpeed's topology documents. */
static void test_reference_layout(void)
{
  g_autoptr(sp_topo) t = pdt222();
  g_assert_cmpint(sp_topo_world(t), ==, 8);
  g_assert_cmpuint(sp_topo_n_axes(t), ==, 3);
  g_assert_cmpstr(sp_topo_axis_name(t, 0), ==, "pipe");
  g_assert_cmpstr(sp_topo_axis_name(t, 2), ==, "tensor");
  g_assert_null(sp_topo_axis_name(t, 3));
  g_assert_cmpint(sp_topo_axis_size(t, 3), ==, 0);
  g_autoptr(sp_groups) pipe = sp_topo_axis_groups(t, "pipe", NULL);
  assert_groups(pipe, 4, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7 });
  g_autoptr(sp_groups) data = sp_topo_axis_groups(t, "data", NULL);
  assert_groups(data, 4, 2, (const int32_t[]){ 0, 2, 1, 3, 4, 6, 5, 7 });
  g_autoptr(sp_groups) tensor = sp_topo_axis_groups(t, "tensor", NULL);
  assert_groups(tensor, 4, 2, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 });

  int32_t n = 0;
  g_autofree int32_t *f = sp_topo_filter(t, 2, (const char *const[]){ "pipe", "data" },
                                         (const int32_t[]){ 0, 1 }, &n, NULL);
  assert_ranks(f, n, 2, (const int32_t[]){ 2, 3 });
  /* The same filter given in the other order. */
  g_autofree int32_t *f2 = sp_topo_filter(t, 2, (const char *const[]){ "data", "pipe" },
                                          (const int32_t[]){ 1, 0 }, &n, NULL);
  assert_ranks(f2, n, 2, (const int32_t[]){ 2, 3 });
  g_autofree int32_t *all = sp_topo_filter(t, 0, NULL, NULL, &n, NULL);
  assert_ranks(all, n, 8, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 });
  g_autofree int32_t *t1 = sp_topo_filter(t, 1, (const char *const[]){ "tensor" },
                                          (const int32_t[]){ 1 }, &n, NULL);
  assert_ranks(t1, n, 4, (const int32_t[]){ 1, 3, 5, 7 });

  /* rank = pipe*4 + data*2 + tensor */
  int32_t c[3];
  g_assert_true(sp_topo_coord(t, 5, c, NULL));
  g_assert_cmpint(c[0], ==, 1);
  g_assert_cmpint(c[1], ==, 0);
  g_assert_cmpint(c[2], ==, 1);
  g_assert_cmpint(sp_topo_rank(t, (const int32_t[]){ 1, 1, 0 }, NULL), ==, 6);
  g_assert_cmpint(sp_topo_rank_named(t, 3, (const char *const[]){ "tensor", "pipe", "data" },
                                     (const int32_t[]){ 1, 0, 1 }, NULL), ==, 3);
  /* Round trip over every rank. */
  for (int32_t r = 0; r < 8; r++) {
    g_assert_true(sp_topo_coord(t, r, c, NULL));
    g_assert_cmpint(sp_topo_rank(t, c, NULL), ==, r);
  }
}

/* The reference topology's docstring examples: axes x, y = 2, 3. */
static void test_reference_docstrings(void)
{
  g_autoptr(sp_topo) t = sp_topo_new_from_spec("x=2,y=3", NULL);
  g_assert_nonnull(t);
  g_assert_cmpint(sp_topo_rank_named(t, 2, (const char *const[]){ "x", "y" },
                                     (const int32_t[]){ 0, 1 }, NULL), ==, 1);
  g_assert_cmpint(sp_topo_get_dim(t, "y"), ==, 3);
  g_assert_cmpint(sp_topo_get_dim(t, "x"), ==, 2);
  g_assert_cmpint(sp_topo_get_dim(t, "z"), ==, 0);
  g_assert_cmpint(sp_topo_get_dim_strict(t, "y", NULL), ==, 3);
  int32_t c[2];
  g_assert_true(sp_topo_coord(t, 1, c, NULL));
  g_assert_cmpint(c[0], ==, 0);
  g_assert_cmpint(c[1], ==, 1);
  int32_t n = 0;
  g_autofree int32_t *x0 = sp_topo_axis_list(t, "x", 0, &n, NULL);
  assert_ranks(x0, n, 3, (const int32_t[]){ 0, 1, 2 });
  g_autofree int32_t *y0 = sp_topo_axis_list(t, "y", 0, &n, NULL);
  assert_ranks(y0, n, 2, (const int32_t[]){ 0, 3 });
  g_autofree int32_t *y2 = sp_topo_axis_list(t, "y", 2, &n, NULL);
  assert_ranks(y2, n, 2, (const int32_t[]){ 2, 5 });

  /* get_axis_comm_lists docstring: pipe,data,model = 2,2,2, along pipe. */
  g_autoptr(sp_topo) m = sp_topo_new_from_spec("pipe=2,data=2,model=2", NULL);
  g_autoptr(sp_groups) pg = sp_topo_axis_groups(m, "pipe", NULL);
  assert_groups(pg, 4, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7 });
}

/* Labels. The reference topology's docstring shows 'a_01-b_01' for rank 3 of a=2,b=2, but its code
 * pads to len(str(world)) = len("4") = 1 digit, so it really prints 'a_1-b_1'. */
static void test_labels(void)
{
  g_autoptr(sp_topo) ab = sp_topo_new_from_spec("a=2,b=2", NULL);
  g_autofree char *l1 = sp_topo_rank_label(ab, 3, NULL, NULL, NULL, NULL);
  g_assert_cmpstr(l1, ==, "a_1-b_1");
  g_autofree char *l2 = sp_topo_rank_label(ab, 3, (const char *const[]){ "a", NULL }, NULL, NULL, NULL);
  g_assert_cmpstr(l2, ==, "b_1");
  g_autofree char *l3 = sp_topo_rank_label(ab, 2, (const char *const[]){ "a", "b", NULL }, NULL, NULL, NULL);
  g_assert_cmpstr(l3, ==, "");

  /* world 16 -> 2 digits; default omits data and pipe. rank 6 = data 0, tensor 1, seq 2. */
  g_autoptr(sp_topo) dts = sp_topo_new_from_spec("data=2,tensor=2,seq=4", NULL);
  g_autofree char *l4 = sp_topo_rank_label(dts, 6, NULL, NULL, NULL, NULL);
  g_assert_cmpstr(l4, ==, "tensor_01-seq_02");
  /* rank 13 = data 1, tensor 1, seq 1; keep every axis, custom separators. */
  g_autofree char *l5 = sp_topo_rank_label(dts, 13, (const char *const[]){ NULL }, ":", "/", NULL);
  g_assert_cmpstr(l5, ==, "data:01/tensor:01/seq:01");

  /* world 10 -> 2 digits; world 9 -> 1 digit. */
  g_autoptr(sp_topo) w10 = sp_topo_new_from_spec("a=2,b=5", NULL);
  g_autofree char *l6 = sp_topo_rank_label(w10, 7, NULL, NULL, NULL, NULL);
  g_assert_cmpstr(l6, ==, "a_01-b_02");
  g_autoptr(sp_topo) w9 = sp_topo_new_from_spec("pipe=3,tensor=3", NULL);
  g_autofree char *l7 = sp_topo_rank_label(w9, 8, NULL, NULL, NULL, NULL);
  g_assert_cmpstr(l7, ==, "tensor_2");
  g_autofree char *l8 = sp_topo_rank_label(w9, 8, (const char *const[]){ NULL }, NULL, NULL, NULL);
  g_assert_cmpstr(l8, ==, "pipe_2-tensor_2");
}

/* Groups along sets of axes; a = 2, b = 3, c = 2 (strides 6, 2, 1). */
static void test_axis_sets(void)
{
  g_autoptr(sp_topo) t = sp_topo_new_from_spec("a=2,b=3,c=2", NULL);
  g_autoptr(sp_groups) b = sp_topo_axis_groups(t, "b", NULL);
  assert_groups(b, 4, 3, (const int32_t[]){ 0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11 });
  g_autoptr(sp_groups) ac = sp_topo_groups_along(t, 2, (const char *const[]){ "a", "c" }, NULL);
  assert_groups(ac, 3, 4, (const int32_t[]){ 0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11 });
  g_autoptr(sp_groups) ca = sp_topo_groups_along(t, 2, (const char *const[]){ "c", "a" }, NULL);
  assert_groups(ca, 3, 4, (const int32_t[]){ 0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11 });
  g_autoptr(sp_groups) none = sp_topo_groups_along(t, 0, NULL, NULL);
  g_assert_cmpint(none->n_groups, ==, 12);
  g_assert_cmpint(none->group_size, ==, 1);
  for (int32_t r = 0; r < 12; r++) g_assert_cmpint(none->ranks[r], ==, r);
  g_autoptr(sp_groups) every = sp_topo_groups_along(t, 3, (const char *const[]){ "b", "c", "a" }, NULL);
  g_assert_cmpint(every->n_groups, ==, 1);
  for (int32_t r = 0; r < 12; r++) g_assert_cmpint(every->ranks[r], ==, r);

  /* tensor+data on pipe,data,tensor = same pipe index. */
  g_autoptr(sp_topo) p = pdt222();
  g_autoptr(sp_groups) td = sp_topo_groups_along(p, 2, (const char *const[]){ "tensor", "data" }, NULL);
  assert_groups(td, 2, 4, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 });

  int32_t gi = -1, pos = -1;
  g_assert_true(sp_groups_find(b, 9, &gi, &pos));
  g_assert_cmpint(gi, ==, 3);
  g_assert_cmpint(pos, ==, 1);
  g_assert_false(sp_groups_find(b, 12, NULL, NULL));
}

/* Megatron order strings: first token fastest. */
static void test_order_strings(void)
{
  g_autoptr(sp_topo) t = sp_topo_new_from_order("tp-dp-pp", (const int32_t[]){ 2, 3, 2 }, 3, NULL);
  g_assert_nonnull(t);
  g_assert_cmpint(sp_topo_world(t), ==, 12);
  g_assert_cmpstr(sp_topo_axis_name(t, 0), ==, "pp");
  g_assert_cmpstr(sp_topo_axis_name(t, 1), ==, "dp");
  g_assert_cmpstr(sp_topo_axis_name(t, 2), ==, "tp");
  g_assert_cmpint(sp_topo_axis_size(t, 1), ==, 3);
  /* rank = pp*6 + dp*2 + tp */
  g_autoptr(sp_groups) tp = sp_topo_axis_groups(t, "tp", NULL);
  assert_groups(tp, 6, 2, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 });
  g_autoptr(sp_groups) dp = sp_topo_axis_groups(t, "dp", NULL);
  assert_groups(dp, 4, 3, (const int32_t[]){ 0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11 });
  g_autoptr(sp_groups) pp = sp_topo_axis_groups(t, "pp", NULL);
  assert_groups(pp, 6, 2, (const int32_t[]){ 0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11 });

  /* Sizes by name, in any order, give the same topology. */
  g_autoptr(sp_topo) s = sp_topo_new_from_order_spec("tp-dp-pp", "pp=2,tp=2,dp=3", NULL);
  g_assert_nonnull(s);
  for (guint i = 0; i < 3; i++) {
    g_assert_cmpstr(sp_topo_axis_name(s, i), ==, sp_topo_axis_name(t, i));
    g_assert_cmpint(sp_topo_axis_size(s, i), ==, sp_topo_axis_size(t, i));
  }
  /* The five-axis Megatron order: tp fastest, pp slowest. */
  g_autoptr(sp_topo) five = sp_topo_new_from_order_spec("tp-cp-ep-dp-pp", "tp=2,cp=2,ep=1,dp=2,pp=2", NULL);
  g_assert_cmpstr(sp_topo_axis_name(five, 0), ==, "pp");
  g_assert_cmpstr(sp_topo_axis_name(five, 4), ==, "tp");
  int32_t c[5];
  g_assert_true(sp_topo_coord(five, 1, c, NULL));
  g_assert_cmpint(c[4], ==, 1); /* rank 1 differs from rank 0 on tp only */
  g_assert_true(sp_topo_coord(five, 2, c, NULL));
  g_assert_cmpint(c[3], ==, 1); /* then cp */
  g_assert_cmpint(c[4], ==, 0);
}

static void expect_error(GError *err, gint code, const char *needle)
{
  g_assert_nonnull(err);
  g_assert_true(err->domain == SP_ERROR);
  g_assert_cmpint(err->code, ==, code);
  if (needle && strstr(err->message, needle) == NULL)
    g_error("message '%s' does not mention '%s'", err->message, needle);
}

#define EXPECT_NULL_ERR(call, code, needle) \
  do { \
    GError *e_ = NULL; \
    g_assert_null(call); \
    expect_error(e_, code, needle); \
    g_error_free(e_); \
  } while (0)

static void test_topo_errors(void)
{
  GError *e = NULL;
  g_assert_null(sp_topo_new(1, (const char *const[]){ "pipe" }, (const int32_t[]){ 0 }, &e));
  expect_error(e, SP_ERROR_INVALID, "size 0");
  g_clear_error(&e);
  g_assert_null(sp_topo_new(1, (const char *const[]){ "pipe" }, (const int32_t[]){ -2 }, &e));
  expect_error(e, SP_ERROR_INVALID, ">= 1");
  g_clear_error(&e);
  g_assert_null(sp_topo_new(2, (const char *const[]){ "a", "a" }, (const int32_t[]){ 2, 2 }, &e));
  expect_error(e, SP_ERROR_INVALID, "unique");
  g_clear_error(&e);
  g_assert_null(sp_topo_new(2, (const char *const[]){ "a", "" }, (const int32_t[]){ 2, 2 }, &e));
  expect_error(e, SP_ERROR_INVALID, "empty name");
  g_clear_error(&e);
  g_assert_null(sp_topo_new(0, NULL, NULL, &e));
  expect_error(e, SP_ERROR_INVALID, "at least one axis");
  g_clear_error(&e);
  g_assert_null(sp_topo_new(2, (const char *const[]){ "a", "b" }, (const int32_t[]){ 65536, 32768 }, &e));
  expect_error(e, SP_ERROR_INVALID, "2147483647");
  g_clear_error(&e);
  {
    const char *names[17];
    int32_t sizes[17];
    char buf[17][8];
    for (int i = 0; i < 17; i++) {
      g_snprintf(buf[i], sizeof buf[i], "x%d", i);
      names[i] = buf[i];
      sizes[i] = 1;
    }
    g_autoptr(sp_topo) sixteen = sp_topo_new(16, names, sizes, NULL);
    g_assert_nonnull(sixteen);
    g_assert_null(sp_topo_new(17, names, sizes, &e));
    expect_error(e, SP_ERROR_INVALID, "at most 16");
    g_clear_error(&e);
  }
  /* The largest world fits; listing its groups is refused, arithmetic still works. */
  g_autoptr(sp_topo) big = sp_topo_new_from_spec("data=2147483647", NULL);
  g_assert_nonnull(big);
  g_assert_cmpint(sp_topo_world(big), ==, G_MAXINT32);
  int32_t c1[1];
  g_assert_true(sp_topo_coord(big, G_MAXINT32 - 1, c1, NULL));
  g_assert_cmpint(c1[0], ==, G_MAXINT32 - 1);
  g_assert_null(sp_topo_axis_groups(big, "data", &e));
  expect_error(e, SP_ERROR_INVALID, "limited");
  g_clear_error(&e);
  g_autoptr(sp_topo) big2 = sp_topo_new_from_spec("a=46341,b=46340", NULL);
  g_assert_nonnull(big2); /* 2147441940 <= INT32_MAX */
  g_assert_null(sp_topo_new_from_spec("a=46341,b=46341", &e)); /* 2147488281 */
  expect_error(e, SP_ERROR_INVALID, "exceeds");
  g_clear_error(&e);

  g_autoptr(sp_topo) t = pdt222();
  int32_t c[3], n = -1;
  g_assert_false(sp_topo_coord(t, 8, c, &e));
  expect_error(e, SP_ERROR_INVALID, "rank 8 is out of range");
  g_clear_error(&e);
  g_assert_false(sp_topo_coord(t, -1, c, &e));
  expect_error(e, SP_ERROR_INVALID, "out of range");
  g_clear_error(&e);
  g_assert_cmpint(sp_topo_rank(t, (const int32_t[]){ 0, 2, 0 }, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "data=2");
  g_clear_error(&e);
  g_assert_cmpint(sp_topo_rank_named(t, 2, (const char *const[]){ "pipe", "data" },
                                     (const int32_t[]){ 0, 0 }, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "'tensor' has no value");
  g_clear_error(&e);
  g_assert_cmpint(sp_topo_rank_named(t, 3, (const char *const[]){ "pipe", "data", "pipe" },
                                     (const int32_t[]){ 0, 0, 0 }, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "twice");
  g_clear_error(&e);
  g_assert_cmpint(sp_topo_rank_named(t, 3, (const char *const[]){ "pipe", "data", "seq" },
                                     (const int32_t[]){ 0, 0, 0 }, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "unknown axis 'seq'");
  g_clear_error(&e);
  g_assert_cmpint(sp_topo_get_dim_strict(t, "seq", &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "pipe, data, tensor");
  g_clear_error(&e);
  g_assert_null(sp_topo_axis_groups(t, "seq", &e));
  expect_error(e, SP_ERROR_INVALID, "unknown axis");
  g_clear_error(&e);
  g_assert_null(sp_topo_groups_along(t, 2, (const char *const[]){ "data", "data" }, &e));
  expect_error(e, SP_ERROR_INVALID, "twice");
  g_clear_error(&e);
  g_assert_null(sp_topo_filter(t, 1, (const char *const[]){ "seq" }, (const int32_t[]){ 0 }, &n, &e));
  expect_error(e, SP_ERROR_INVALID, "unknown axis 'seq'");
  g_clear_error(&e);
  g_assert_null(sp_topo_filter(t, 1, (const char *const[]){ "data" }, (const int32_t[]){ 2 }, &n, &e));
  expect_error(e, SP_ERROR_INVALID, "indices 0..1");
  g_clear_error(&e);
  g_assert_null(sp_topo_filter(t, 1, (const char *const[]){ "data" }, (const int32_t[]){ -1 }, &n, &e));
  expect_error(e, SP_ERROR_INVALID, "out of range");
  g_clear_error(&e);
  g_assert_null(sp_topo_axis_list(t, "tensor", 5, &n, &e));
  expect_error(e, SP_ERROR_INVALID, "tensor=5");
  g_clear_error(&e);
  g_assert_null(sp_topo_rank_label(t, 9, NULL, NULL, NULL, &e));
  expect_error(e, SP_ERROR_INVALID, "rank 9");
  g_clear_error(&e);

  /* Order strings. */
  g_assert_null(sp_topo_new_from_order("tp-dp", (const int32_t[]){ 2 }, 1, &e));
  expect_error(e, SP_ERROR_INVALID, "2 axes but 1 sizes");
  g_clear_error(&e);
  g_assert_null(sp_topo_new_from_order("tp--dp", (const int32_t[]){ 2, 2, 2 }, 3, &e));
  expect_error(e, SP_ERROR_INVALID, "empty axis name");
  g_clear_error(&e);
  g_assert_null(sp_topo_new_from_order("tp-tp", (const int32_t[]){ 2, 2 }, 2, &e));
  expect_error(e, SP_ERROR_INVALID, "unique");
  g_clear_error(&e);
  g_assert_null(sp_topo_new_from_order("", NULL, 0, &e));
  expect_error(e, SP_ERROR_INVALID, "empty order");
  g_clear_error(&e);
  { /* an axis of the order without a size is 1, as Megatron takes it: tp fastest, dp of size 1 */
    g_autoptr(sp_topo) ot = sp_topo_new_from_order_spec("tp-dp", "tp=2", &e);
    g_assert_no_error(e);
    g_assert_nonnull(ot);
    g_assert_cmpint(sp_topo_world(ot), ==, 2);
    g_assert_cmpuint(sp_topo_n_axes(ot), ==, 2);
    g_assert_cmpstr(sp_topo_axis_name(ot, 0), ==, "dp");
    g_assert_cmpint(sp_topo_axis_size(ot, 0), ==, 1);
  }
  g_assert_null(sp_topo_new_from_order_spec("tp-dp", "tp=2,dp=2,pp=2", &e));
  expect_error(e, SP_ERROR_INVALID, "'pp' has a size but is not in the order");
  g_clear_error(&e);
  g_assert_null(sp_topo_new_from_order_spec("tp-dp", "tp=2,dp=2,tp=2", &e));
  expect_error(e, SP_ERROR_INVALID, "twice");
  g_clear_error(&e);
  g_assert_null(sp_topo_new_from_order_spec("tp-dp", "tp=2,dp=0", &e));
  expect_error(e, SP_ERROR_INVALID, "size 0");
  g_clear_error(&e);
}

static void test_parse_assignments(void)
{
  g_auto(GStrv) names = NULL;
  g_autofree int32_t *vals = NULL;
  guint n = 0;
  g_assert_true(sp_topo_parse_assignments(" pipe = 2, data=-1 ", &names, &vals, &n, NULL));
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpstr(names[0], ==, "pipe");
  g_assert_cmpstr(names[1], ==, "data");
  g_assert_null(names[2]);
  g_assert_cmpint(vals[0], ==, 2);
  g_assert_cmpint(vals[1], ==, -1);
  const struct { const char *spec, *needle; } bad[] = {
    { "pipe", "'pipe' has no value" }, { "pipe=x", "must be an integer" },
    { "pipe=2.5", "must be an integer" }, { "pipe=", "must be an integer" },
    { "", "empty list" }, { "  ", "empty list" }, { ",", "empty item 1" },
    { "a=1,", "empty item 2" }, { "=2", "has no name" }, { "a=99999999999", "must be an integer" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *e = NULL;
    char **nm = NULL;
    int32_t *v = NULL;
    guint k = 0;
    g_assert_false(sp_topo_parse_assignments(bad[i].spec, &nm, &v, &k, &e));
    g_assert_null(nm);
    g_assert_null(v);
    expect_error(e, SP_ERROR_INVALID, bad[i].needle);
    g_error_free(e);
  }
  GError *e = NULL;
  g_assert_null(sp_topo_new_from_spec("pipe", &e));
  expect_error(e, SP_ERROR_INVALID, "pipe=N");
  g_clear_error(&e);
}

/* Pipeline grid over pipe,data,tensor = 2,2,2: stage = r/4, data = (r/2)%2, tensor = r%2. */
static void test_grid_222(void)
{
  g_autoptr(sp_topo) t = pdt222();
  g_autoptr(sp_grid) g = sp_grid_new(t, NULL);
  g_assert_cmpint(sp_grid_pipe_size(g), ==, 2);
  g_assert_cmpint(sp_grid_data_size(g), ==, 2);
  g_assert_cmpint(sp_grid_tensor_size(g), ==, 2);
  const int32_t stage[8] = { 0, 0, 0, 0, 1, 1, 1, 1 };
  const int32_t dpid[8] = { 0, 0, 1, 1, 0, 0, 1, 1 };
  for (int32_t r = 0; r < 8; r++) {
    g_assert_cmpint(sp_grid_stage_id(g, r, NULL), ==, stage[r]);
    g_assert_cmpint(sp_grid_data_parallel_id(g, r, NULL), ==, dpid[r]);
    g_assert_cmpint(sp_grid_tensor_id(g, r, NULL), ==, r % 2);
    g_assert_true(sp_grid_is_first_stage(g, r) == (r < 4));
    g_assert_true(sp_grid_is_last_stage(g, r) == (r >= 4));
  }
  g_autoptr(sp_groups) data = sp_grid_data_groups(g, NULL);
  assert_groups(data, 4, 2, (const int32_t[]){ 0, 2, 1, 3, 4, 6, 5, 7 });
  g_autoptr(sp_groups) pipe = sp_grid_pipe_groups(g, NULL);
  assert_groups(pipe, 4, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7 });
  g_autoptr(sp_groups) tensor = sp_grid_tensor_groups(g, NULL);
  assert_groups(tensor, 4, 2, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 });
  g_autoptr(sp_groups) model = sp_grid_model_groups(g, NULL);
  assert_groups(model, 2, 4, (const int32_t[]){ 0, 1, 4, 5, 2, 3, 6, 7 });
  g_autoptr(sp_groups) td = sp_grid_tensor_data_groups(g, NULL);
  assert_groups(td, 2, 4, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 });
  g_autoptr(sp_groups) p2p = sp_grid_p2p_pairs(g, NULL);
  assert_groups(p2p, 8, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7, 4, 0, 5, 1, 6, 2, 7, 3 });
  g_autoptr(sp_groups) emb = sp_grid_embedding_groups(g, NULL);
  assert_groups(emb, 4, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7 });
  g_autoptr(sp_groups) pos = sp_grid_position_embedding_groups(g, NULL);
  assert_groups(pos, 4, 1, (const int32_t[]){ 0, 1, 2, 3 });

  g_assert_cmpint(sp_grid_stage_to_global(g, 1, 1, 0, NULL, NULL, NULL), ==, 5);
  g_assert_cmpint(sp_grid_stage_to_global(g, 6, 0, 0, NULL, NULL, NULL), ==, 2);
  g_assert_cmpint(sp_grid_stage_to_global(g, 1, 1, 1, (const char *const[]){ "data" },
                                          (const int32_t[]){ 1 }, NULL), ==, 7);
  GError *e = NULL;
  g_assert_cmpint(sp_grid_stage_to_global(g, 1, 2, 0, NULL, NULL, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "stages 0..1");
  g_clear_error(&e);
  g_assert_cmpint(sp_grid_stage_to_global(g, 1, 0, 1, (const char *const[]){ "pipe" },
                                          (const int32_t[]){ 1 }, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "stage itself");
  g_clear_error(&e);
  g_assert_cmpint(sp_grid_stage_to_global(g, 1, 0, 1, (const char *const[]){ "tensor" },
                                          (const int32_t[]){ 2 }, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "tensor=2");
  g_clear_error(&e);
  g_assert_cmpint(sp_grid_stage_to_global(g, 8, 0, 0, NULL, NULL, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "rank 8");
  g_clear_error(&e);
  g_assert_cmpint(sp_grid_stage_id(g, -1, &e), ==, -1);
  expect_error(e, SP_ERROR_INVALID, "out of range");
  g_clear_error(&e);
  g_assert_false(sp_grid_is_first_stage(g, 9));
  g_assert_false(sp_grid_is_last_stage(g, 9));
}

/* Three stages: pipe=3, data=1, tensor=2 (rank = pipe*2 + tensor). */
static void test_grid_three_stages(void)
{
  g_autoptr(sp_topo) t = sp_topo_new_from_spec("pipe=3,data=1,tensor=2", NULL);
  g_autoptr(sp_grid) g = sp_grid_new(t, NULL);
  g_autoptr(sp_groups) pipe = sp_grid_pipe_groups(g, NULL);
  assert_groups(pipe, 2, 3, (const int32_t[]){ 0, 2, 4, 1, 3, 5 });
  g_autoptr(sp_groups) p2p = sp_grid_p2p_pairs(g, NULL);
  assert_groups(p2p, 6, 2, (const int32_t[]){ 0, 2, 1, 3, 2, 4, 3, 5, 4, 0, 5, 1 });
  g_autoptr(sp_groups) emb = sp_grid_embedding_groups(g, NULL);
  assert_groups(emb, 2, 2, (const int32_t[]){ 0, 4, 1, 5 });
  g_autoptr(sp_groups) pos = sp_grid_position_embedding_groups(g, NULL);
  assert_groups(pos, 2, 1, (const int32_t[]){ 0, 1 });
  g_assert_false(sp_grid_is_last_stage(g, 2));
  g_assert_false(sp_grid_is_first_stage(g, 2));
  g_assert_true(sp_grid_is_last_stage(g, 5));
  g_assert_cmpint(sp_grid_stage_to_global(g, 3, 2, 0, NULL, NULL, NULL), ==, 5);
}

/* No pipe axis (one stage), Megatron aliases, an extra axis. */
static void test_grid_variants(void)
{
  g_autoptr(sp_topo) t = sp_topo_new_from_spec("data=2,tensor=2", NULL);
  g_autoptr(sp_grid) g = sp_grid_new(t, NULL);
  g_assert_cmpint(sp_grid_pipe_size(g), ==, 1);
  for (int32_t r = 0; r < 4; r++) {
    g_assert_cmpint(sp_grid_stage_id(g, r, NULL), ==, 0);
    g_assert_true(sp_grid_is_first_stage(g, r));
    g_assert_true(sp_grid_is_last_stage(g, r));
  }
  g_autoptr(sp_groups) pipe = sp_grid_pipe_groups(g, NULL);
  assert_groups(pipe, 4, 1, (const int32_t[]){ 0, 1, 2, 3 });
  g_autoptr(sp_groups) emb = sp_grid_embedding_groups(g, NULL);
  assert_groups(emb, 4, 1, (const int32_t[]){ 0, 1, 2, 3 });
  g_autoptr(sp_groups) p2p = sp_grid_p2p_pairs(g, NULL);
  assert_groups(p2p, 4, 2, (const int32_t[]){ 0, 0, 1, 1, 2, 2, 3, 3 });
  g_autoptr(sp_groups) model = sp_grid_model_groups(g, NULL);
  assert_groups(model, 2, 2, (const int32_t[]){ 0, 1, 2, 3 });
  g_autoptr(sp_groups) td = sp_grid_tensor_data_groups(g, NULL);
  assert_groups(td, 1, 4, (const int32_t[]){ 0, 1, 2, 3 });

  /* Megatron names: tp-dp-pp = 2,2,2 is pipe,data,tensor = 2,2,2. */
  g_autoptr(sp_topo) m = sp_topo_new_from_order("tp-dp-pp", (const int32_t[]){ 2, 2, 2 }, 3, NULL);
  g_autoptr(sp_grid) mg = sp_grid_new(m, NULL);
  g_assert_cmpint(sp_grid_pipe_size(mg), ==, 2);
  g_autoptr(sp_groups) mp2p = sp_grid_p2p_pairs(mg, NULL);
  assert_groups(mp2p, 8, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7, 4, 0, 5, 1, 6, 2, 7, 3 });
  g_autoptr(sp_groups) mdata = sp_grid_data_groups(mg, NULL);
  assert_groups(mdata, 4, 2, (const int32_t[]){ 0, 2, 1, 3, 4, 6, 5, 7 });

  /* Extra axis "seq" and no tensor: pipe=2,data=2,seq=2. Model groups hold every rank
   * of one data index (pipe and seq vary); tensor groups are single ranks. */
  g_autoptr(sp_topo) s = sp_topo_new_from_spec("pipe=2,data=2,seq=2", NULL);
  g_autoptr(sp_grid) sg = sp_grid_new(s, NULL);
  g_assert_cmpint(sp_grid_tensor_size(sg), ==, 1);
  g_autoptr(sp_groups) smodel = sp_grid_model_groups(sg, NULL);
  assert_groups(smodel, 2, 4, (const int32_t[]){ 0, 1, 4, 5, 2, 3, 6, 7 });
  g_autoptr(sp_groups) stensor = sp_grid_tensor_groups(sg, NULL);
  g_assert_cmpint(stensor->n_groups, ==, 8);
  g_assert_cmpint(stensor->group_size, ==, 1);
}

/* The reference model/pipeline/data initialiser. */
static void test_init_8_2_2(void)
{
  g_autoptr(sp_init_groups) in = sp_init_parallelism(8, 2, 2, NULL);
  g_assert_nonnull(in);
  g_assert_cmpint(in->dp, ==, 2);
  g_assert_false(in->mp_clamped);
  assert_groups(in->model, 4, 2, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 });
  assert_groups(in->pipeline, 4, 2, (const int32_t[]){ 0, 2, 1, 3, 4, 6, 5, 7 });
  assert_groups(in->data, 4, 2, (const int32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7 });
  /* Rank 2 is in model [2,3] (group 1, pos 0), pipeline [0,2] (group 0, pos 1),
   * data [2,6] (group 2, pos 0). (The reference's formulas give model group 0 = [0,1] and
   * pipeline group 1 = [1,3], which do not contain rank 2.) */
  int32_t mg, mp, pg, pp, dg, dp;
  g_assert_true(sp_init_rank_groups(in, 2, &mg, &mp, &pg, &pp, &dg, &dp, NULL));
  g_assert_cmpint(mg, ==, 1);
  g_assert_cmpint(mp, ==, 0);
  g_assert_cmpint(pg, ==, 0);
  g_assert_cmpint(pp, ==, 1);
  g_assert_cmpint(dg, ==, 2);
  g_assert_cmpint(dp, ==, 0);
}

/* world 12, mp 2, pp 3 -> dp 2; rank = d*6 + p*2 + m. */
static void test_init_12_2_3(void)
{
  g_autoptr(sp_init_groups) in = sp_init_parallelism(12, 2, 3, NULL);
  g_assert_nonnull(in);
  g_assert_cmpint(in->dp, ==, 2);
  assert_groups(in->model, 6, 2, (const int32_t[]){ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 });
  assert_groups(in->pipeline, 4, 3, (const int32_t[]){ 0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11 });
  assert_groups(in->data, 6, 2, (const int32_t[]){ 0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11 });
  /* Rank 9: m 1, p 1, d 1 -> model [8,9] (4, pos 1), pipeline [7,9,11] (3, pos 1),
   * data [3,9] (3, pos 1). The reference would pick pipeline group (9//3)%2 = 1 = [1,3,5]
   * and model group 9//6 = 1 = [2,3]. */
  int32_t mg, mp, pg, pp, dg, dp;
  g_assert_true(sp_init_rank_groups(in, 9, &mg, &mp, &pg, &pp, &dg, &dp, NULL));
  g_assert_cmpint(mg, ==, 4);
  g_assert_cmpint(mp, ==, 1);
  g_assert_cmpint(pg, ==, 3);
  g_assert_cmpint(pp, ==, 1);
  g_assert_cmpint(dg, ==, 3);
  g_assert_cmpint(dp, ==, 1);
  /* For every rank, the reported groups contain it at the reported position. */
  for (int32_t r = 0; r < 12; r++) {
    g_assert_true(sp_init_rank_groups(in, r, &mg, &mp, &pg, &pp, &dg, &dp, NULL));
    g_assert_cmpint(sp_groups_row(in->model, mg)[mp], ==, r);
    g_assert_cmpint(sp_groups_row(in->pipeline, pg)[pp], ==, r);
    g_assert_cmpint(sp_groups_row(in->data, dg)[dp], ==, r);
  }
  GError *e = NULL;
  g_assert_false(sp_init_rank_groups(in, 12, NULL, NULL, NULL, NULL, NULL, NULL, &e));
  expect_error(e, SP_ERROR_INVALID, "rank 12");
  g_clear_error(&e);
}

static void test_init_clamp_and_errors(void)
{
  g_autoptr(sp_init_groups) in = sp_init_parallelism(4, 8, 1, NULL);
  g_assert_nonnull(in);
  g_assert_true(in->mp_clamped);
  g_assert_cmpint(in->requested_mp, ==, 8);
  g_assert_cmpint(in->mp, ==, 4);
  g_assert_cmpint(in->dp, ==, 1);
  assert_groups(in->model, 1, 4, (const int32_t[]){ 0, 1, 2, 3 });
  assert_groups(in->data, 4, 1, (const int32_t[]){ 0, 1, 2, 3 });

  g_autoptr(sp_init_groups) one = sp_init_parallelism(3, 1, 1, NULL);
  assert_groups(one->model, 3, 1, (const int32_t[]){ 0, 1, 2 });
  assert_groups(one->pipeline, 3, 1, (const int32_t[]){ 0, 1, 2 });
  assert_groups(one->data, 1, 3, (const int32_t[]){ 0, 1, 2 });

  EXPECT_NULL_ERR(sp_init_parallelism(0, 1, 1, &e_), SP_ERROR_INVALID, "world size 0");
  EXPECT_NULL_ERR(sp_init_parallelism(8, 0, 1, &e_), SP_ERROR_INVALID, "model parallelism 0");
  EXPECT_NULL_ERR(sp_init_parallelism(8, 1, 0, &e_), SP_ERROR_INVALID, "pipeline parallelism 0");
  EXPECT_NULL_ERR(sp_init_parallelism(8, 1, -2, &e_), SP_ERROR_INVALID, ">= 1");
  EXPECT_NULL_ERR(sp_init_parallelism(8, 3, 1, &e_), SP_ERROR_LAYOUT, "8 is not divisible by model parallelism 3");
  EXPECT_NULL_ERR(sp_init_parallelism(8, 2, 3, &e_), SP_ERROR_LAYOUT, "2 x 3 = 6");
  /* Clamped mp = 4, then 4 * 2 does not divide 4. */
  EXPECT_NULL_ERR(sp_init_parallelism(4, 8, 2, &e_), SP_ERROR_LAYOUT, "4 x 2 = 8");
}

/* ----------------------------------------------------------- factorisations */

/* Independent count: sum over first factors d | n of the count for n/d. */
static guint64 brute_count(int32_t n, int32_t k)
{
  if (k == 1) return 1;
  guint64 c = 0;
  for (int32_t d = 1; d <= n; d++)
    if (n % d == 0) c += brute_count(n / d, k - 1);
  return c;
}

/* Closed form prod C(a_i + k - 1, k - 1) with binomials from Pascal's triangle. */
static guint64 closed_form(int32_t n, int32_t k)
{
  static guint64 pascal[64][64];
  if (pascal[0][0] == 0) {
    for (int i = 0; i < 64; i++) {
      pascal[i][0] = 1;
      for (int j = 1; j <= i; j++) pascal[i][j] = pascal[i - 1][j - 1] + (j < i ? pascal[i - 1][j] : 0);
    }
  }
  guint64 total = 1;
  for (int32_t p = 2; n > 1; p++) {
    int a = 0;
    while (n % p == 0) {
      n /= p;
      a++;
    }
    if (a) total *= pascal[a + k - 1][k - 1];
  }
  return total;
}

static void test_factor_explicit(void)
{
  g_autoptr(sp_groups) f = sp_factorizations(12, 2, NULL);
  assert_groups(f, 6, 2, (const int32_t[]){ 1, 12, 2, 6, 3, 4, 4, 3, 6, 2, 12, 1 });
  g_autoptr(sp_groups) one = sp_factorizations(7, 1, NULL);
  assert_groups(one, 1, 1, (const int32_t[]){ 7 });
  g_autoptr(sp_groups) ones = sp_factorizations(1, 4, NULL);
  assert_groups(ones, 1, 4, (const int32_t[]){ 1, 1, 1, 1 });
  g_autoptr(sp_groups) p3 = sp_factorizations(5, 3, NULL);
  assert_groups(p3, 3, 3, (const int32_t[]){ 1, 1, 5, 1, 5, 1, 5, 1, 1 });
  g_autoptr(sp_groups) f8 = sp_factorizations(8, 3, NULL);
  /* 8 = 2^3: C(5,2) = 10 */
  assert_groups(f8, 10, 3, (const int32_t[]){ 1, 1, 8, 1, 2, 4, 1, 4, 2, 1, 8, 1, 2, 1, 4,
                                              2, 2, 2, 2, 4, 1, 4, 1, 2, 4, 2, 1, 8, 1, 1 });
  g_assert_cmpuint(sp_factorization_count(64, 3), ==, 28);
  g_assert_cmpuint(sp_factorization_count(720, 3), ==, 270); /* 2^4 3^2 5: 15 * 6 * 3 */
  g_assert_cmpuint(sp_factorization_count(12, 3), ==, 18);
  g_assert_cmpuint(sp_factorization_count(0, 3), ==, 0);
  g_assert_cmpuint(sp_factorization_count(12, 0), ==, 0);
}

static void test_factor_counts(void)
{
  const int32_t ns[] = { 1, 2, 7, 12, 36, 64, 97, 360, 720, 1024, 30030, 65536 };
  for (gsize i = 0; i < G_N_ELEMENTS(ns); i++) {
    for (int32_t k = 1; k <= 5; k++) {
      g_autoptr(sp_groups) f = sp_factorizations(ns[i], k, NULL);
      g_assert_nonnull(f);
      guint64 cf = closed_form(ns[i], k);
      g_assert_cmpuint((guint64)f->n_groups, ==, cf);
      if (ns[i] <= 1024) g_assert_cmpuint(brute_count(ns[i], k), ==, cf);
      g_assert_cmpuint(sp_factorization_count(ns[i], k), ==, cf);
      g_assert_cmpint(f->group_size, ==, k);
      for (int32_t r = 0; r < f->n_groups; r++) {
        const int32_t *row = sp_groups_row(f, r);
        int64_t prod = 1;
        for (int32_t j = 0; j < k; j++) {
          g_assert_cmpint(row[j], >=, 1);
          prod *= row[j];
        }
        g_assert_cmpint(prod, ==, ns[i]);
        if (r > 0) { /* strictly increasing lexicographically: sorted, no duplicates */
          const int32_t *prev = sp_groups_row(f, r - 1);
          int j = 0;
          while (j < k && prev[j] == row[j]) j++;
          g_assert_cmpint(j, <, k);
          g_assert_cmpint(prev[j], <, row[j]);
        }
      }
    }
  }
  /* A large prime: k factorisations (the prime in each position). */
  g_autoptr(sp_groups) big = sp_factorizations(2147483647, 3, NULL);
  assert_groups(big, 3, 3, (const int32_t[]){ 1, 1, 2147483647, 1, 2147483647, 1, 2147483647, 1, 1 });
}

static void test_factor_errors(void)
{
  EXPECT_NULL_ERR(sp_factorizations(0, 3, &e_), SP_ERROR_INVALID, "cannot factorise 0");
  EXPECT_NULL_ERR(sp_factorizations(-6, 3, &e_), SP_ERROR_INVALID, ">= 1");
  EXPECT_NULL_ERR(sp_factorizations(12, 0, &e_), SP_ERROR_INVALID, "1..64");
  EXPECT_NULL_ERR(sp_factorizations(12, 65, &e_), SP_ERROR_INVALID, "1..64");
  /* 2^30 into 20 factors: C(49, 19) ~ 1.5e13 */
  EXPECT_NULL_ERR(sp_factorizations(1 << 30, 20, &e_), SP_ERROR_INVALID, "smaller k");
  EXPECT_NULL_ERR(sp_factorizations(1 << 30, 64, &e_), SP_ERROR_INVALID, "more than 2^64");
  /* Just under the cap is produced: 2^12 * 3^... keep it modest: 2^20, k = 4 -> C(23,3) = 1771 */
  g_autoptr(sp_groups) ok = sp_factorizations(1 << 20, 4, NULL);
  g_assert_cmpint(ok->n_groups, ==, 1771);
}

/* Megatron-Core's expert layout (parallel_state.py: the expert RankGenerator with tp =
 * etp, cp = 1, dp = world / (etp ep pp)); groups derived by hand from rank = sum of
 * index x stride over the order's tokens. */
static void check_group(const sp_groups *g, int32_t row, const int32_t *want, int32_t n)
{
  g_assert_cmpint(g->group_size, ==, n);
  const int32_t *r = sp_groups_row(g, row);
  for (int32_t i = 0; i < n; i++) g_assert_cmpint(r[i], ==, want[i]);
}

static void test_moe_groups(void)
{
  GError *err = NULL;
  /* tp=2 ep=4 dp=8 pp=2: world tp x dp x pp = 32; expert dp = 32 / (2 x 4 x 2) = 2;
   * expert rank = etp + 2 ep + 8 edp + 16 pp */
  g_autoptr(sp_topo_moe) a = sp_topo_moe_new("tp-cp-ep-dp-pp", "tp=2,ep=4,dp=8,pp=2", &err);
  g_assert_no_error(err);
  g_assert_cmpint(sp_topo_world(a->dense), ==, 32);
  g_assert_cmpint(sp_topo_world(a->expert), ==, 32);
  g_assert_cmpint(a->edp, ==, 2);
  g_assert_cmpint(a->etp, ==, 2);
  g_autoptr(sp_groups) ep = sp_topo_axis_groups(a->expert, "ep", &err);
  g_autoptr(sp_groups) edp = sp_topo_axis_groups(a->expert, "edp", &err);
  g_autoptr(sp_groups) etp = sp_topo_axis_groups(a->expert, "etp", &err);
  g_autoptr(sp_groups) dp = sp_topo_axis_groups(a->dense, "dp", &err);
  g_assert_no_error(err);
  g_assert_cmpint(ep->n_groups, ==, 8);
  check_group(ep, 0, (const int32_t[]){ 0, 2, 4, 6 }, 4);
  check_group(ep, 1, (const int32_t[]){ 1, 3, 5, 7 }, 4);
  check_group(ep, 7, (const int32_t[]){ 25, 27, 29, 31 }, 4);
  g_assert_cmpint(edp->n_groups, ==, 16);
  check_group(edp, 0, (const int32_t[]){ 0, 8 }, 2);
  check_group(edp, 15, (const int32_t[]){ 23, 31 }, 2);
  check_group(etp, 0, (const int32_t[]){ 0, 1 }, 2);
  /* every ep group lies inside a dense data-parallel group (dense rank = tp + 2 dp + 16 pp) */
  check_group(dp, 0, (const int32_t[]){ 0, 2, 4, 6, 8, 10, 12, 14 }, 8);

  /* with cp: tp=2 cp=2 dp=2 ep=4: the ep group spans dp x cp = {0, 2, 4, 6} */
  g_autoptr(sp_topo_moe) b = sp_topo_moe_new("tp-cp-ep-dp-pp", "tp=2,cp=2,dp=2,ep=4", &err);
  g_assert_no_error(err);
  g_autoptr(sp_groups) ep2 = sp_topo_axis_groups(b->expert, "ep", &err);
  check_group(ep2, 0, (const int32_t[]){ 0, 2, 4, 6 }, 4);
  g_assert_cmpint(b->edp, ==, 1);

  /* etp=1: expert rank = ep + 4 edp + 16 pp, expert dp = 32 / (1 x 4 x 2) = 4 */
  g_autoptr(sp_topo_moe) c = sp_topo_moe_new("tp-ep-dp-pp", "tp=2,ep=4,dp=8,pp=2,etp=1", &err);
  g_assert_no_error(err);
  g_assert_cmpint(c->edp, ==, 4);
  g_autoptr(sp_groups) ep3 = sp_topo_axis_groups(c->expert, "ep", &err);
  g_autoptr(sp_groups) edp3 = sp_topo_axis_groups(c->expert, "edp", &err);
  check_group(ep3, 0, (const int32_t[]){ 0, 1, 2, 3 }, 4);
  check_group(edp3, 0, (const int32_t[]){ 0, 4, 8, 12 }, 4);

  /* refused, with the fix */
  g_assert_null(sp_topo_moe_new("tp-cp-ep-dp-pp", "tp=2,ep=3,dp=8,pp=2", &err));
  expect_error(err, SP_ERROR_INVALID, "ep=3 must divide dp x cp = 8 x 1");
  g_clear_error(&err);
  g_assert_null(sp_topo_moe_new("tp-ep-dp-pp", "tp=2,ep=4,dp=6,pp=2,etp=4", &err));
  expect_error(err, SP_ERROR_INVALID, "etp x ep x pp = 4 x 4 x 2 does not divide");
  g_clear_error(&err);
  g_assert_null(sp_topo_moe_new("tp-pp-ep-dp", "tp=2,ep=4,dp=8,pp=2,etp=1", &err));
  expect_error(err, SP_ERROR_INVALID, "put pp last");
  g_clear_error(&err);
  g_assert_null(sp_topo_moe_new("tp-xp-ep-dp", "tp=2", &err));
  expect_error(err, SP_ERROR_INVALID, "got 'xp'");
  g_clear_error(&err);
  g_assert_null(sp_topo_moe_new("tp-dp-pp", "tp=2", &err));
  expect_error(err, SP_ERROR_INVALID, "no ep token");
  g_clear_error(&err);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/topology/reference-layout", test_reference_layout);
  g_test_add_func("/topology/reference-docstrings", test_reference_docstrings);
  g_test_add_func("/topology/labels", test_labels);
  g_test_add_func("/topology/axis-sets", test_axis_sets);
  g_test_add_func("/topology/order-strings", test_order_strings);
  g_test_add_func("/topology/errors", test_topo_errors);
  g_test_add_func("/topology/parse-assignments", test_parse_assignments);
  g_test_add_func("/grid/2x2x2", test_grid_222);
  g_test_add_func("/grid/three-stages", test_grid_three_stages);
  g_test_add_func("/grid/variants", test_grid_variants);
  g_test_add_func("/init/8-2-2", test_init_8_2_2);
  g_test_add_func("/init/12-2-3", test_init_12_2_3);
  g_test_add_func("/init/clamp-and-errors", test_init_clamp_and_errors);
  g_test_add_func("/factor/explicit", test_factor_explicit);
  g_test_add_func("/factor/counts", test_factor_counts);
  g_test_add_func("/factor/errors", test_factor_errors);
  g_test_add_func("/topo/moe-groups", test_moe_groups);
  return g_test_run();
}
