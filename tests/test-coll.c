/* Collectives: lowering (ring, direct, tree) run on the loopback, compared
 * bitwise with the reference semantics, with hand-derived results, textbook
 * step counts and message volumes, and the error paths. (Over 800 lines: one
 * test program for spsim/coll.h, whose cases share the loopback harness at the
 * top; each algorithm's cases are a section of their own.) */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/verify.h"

static const sp_algo algos[] = { SP_ALGO_RING, SP_ALGO_DIRECT, SP_ALGO_TREE };
static const sp_algo all_algos[] = { SP_ALGO_AUTO, SP_ALGO_RING, SP_ALGO_DIRECT, SP_ALGO_TREE };
static const int32_t sizes[] = { 1, 2, 3, 4, 5, 7, 8, 13, 16 };

static gboolean algo_ok(sp_coll coll, sp_algo a, int32_t n)
{
  if (coll == SP_COLL_SEND_RECV)
    return n == 2;
  if (coll == SP_COLL_ALL_TO_ALL)
    return a == SP_ALGO_DIRECT || a == SP_ALGO_AUTO || n == 1;
  return TRUE;
}

/* Build, run on the loopback, check against the reference; fails the test with
 * the case description on any error. */
static void run_case(const sp_coll_spec *spec, int32_t world)
{
  GError *err = NULL;
  sp_case *c = sp_case_new_coll(spec, world, TRUE, &err);
  if (c == NULL)
    g_error("%s/%s/%s/%s n=%d count=%" G_GUINT64_FORMAT " chunk=%" G_GUINT64_FORMAT ": %s",
            sp_coll_name(spec->coll), sp_algo_name(spec->algo), sp_dtype_name(spec->dtype),
            sp_redop_name(spec->redop), spec->n, spec->count, spec->chunk_bytes, err->message);
  if (!sp_loopback_run(sp_case_programs(c), world, sp_case_all_bufs(c), &err))
    g_error("%s/%s/%s n=%d count=%" G_GUINT64_FORMAT ": loopback: %s", sp_coll_name(spec->coll),
            sp_algo_name(spec->algo), sp_dtype_name(spec->dtype), spec->n, spec->count,
            err->message);
  int32_t br = -1;
  uint64_t bo = 0;
  if (!sp_case_check(c, &br, &bo, &err))
    g_error("chunk=%" G_GUINT64_FORMAT ": %s", spec->chunk_bytes, err->message);
  /* bystanders have empty programs */
  for (int32_t r = 0; r < world; r++)
    if (sp_coll_index_of(spec, r) < 0)
      g_assert_cmpuint(sp_program_len(sp_case_program(c, r)), ==, 0);
  sp_case_free(c);
}

/* Every collective x algorithm x dtype x group size x count, with and
 * without chunking; the operator cycles through sum/avg/max/min. */
static void test_matrix(gconstpointer data)
{
  sp_coll coll = (sp_coll)GPOINTER_TO_INT(data);
  guint cases = 0;
  for (size_t ai = 0; ai < G_N_ELEMENTS(all_algos); ai++)
    for (int dt = 0; dt < SP_DTYPE_COUNT; dt++)
      for (size_t ni = 0; ni < G_N_ELEMENTS(sizes); ni++) {
        int32_t n = sizes[ni];
        if (!algo_ok(coll, all_algos[ai], n))
          continue;
        int32_t *ranks = sp_group_range(0, 1, n);
        uint64_t counts[] = { 0, 1, (uint64_t)(n > 1 ? n - 1 : 2), (uint64_t)n + 1, 13, 37 };
        for (size_t ci = 0; ci < G_N_ELEMENTS(counts); ci++)
          for (int chunked = 0; chunked < 3; chunked++) {
            size_t es = sp_dtype_size((sp_dtype)dt);
            sp_coll_spec s = {
              .coll = coll, .algo = all_algos[ai], .dtype = (sp_dtype)dt,
              .redop = (sp_redop)((ni + ci + (size_t)dt + (size_t)chunked) % SP_REDOP_COUNT),
              .ranks = ranks, .n = n, .count = counts[ci], .root = (int32_t)(ci % (size_t)n),
              .chunk_bytes = chunked == 0 ? 0 : chunked == 1 ? 2 * es : 7 * es, .op_id = 7,
              .tag = 100,
            };
            run_case(&s, n);
            cases++;
          }
        g_free(ranks);
      }
  g_assert_cmpuint(cases, >, 0);
}

/* Members {5, 1, 6, 3} inside a world of 8; the other ranks are bystanders. */
static void test_noncontiguous(void)
{
  const int32_t ranks[] = { 5, 1, 6, 3 };
  for (int coll = 0; coll < SP_COLL_COUNT; coll++)
    for (size_t ai = 0; ai < G_N_ELEMENTS(algos); ai++) {
      int32_t n = coll == SP_COLL_SEND_RECV ? 2 : 4;
      if (!algo_ok((sp_coll)coll, algos[ai], n))
        continue;
      for (int chunked = 0; chunked < 2; chunked++) {
        sp_coll_spec s = {
          .coll = (sp_coll)coll, .algo = algos[ai], .dtype = SP_BF16, .redop = SP_RED_SUM,
          .ranks = ranks, .n = n, .count = 11, .root = 2, .chunk_bytes = chunked ? 6 : 0,
          .tag = 3000,
        };
        if (coll == SP_COLL_SEND_RECV)
          s.root = 0;
        run_case(&s, 8);
      }
    }
}

/* ------------------------------------------------------------ custom inputs */

typedef void (*fill_fn)(void *in, uint64_t count, sp_dtype t, int32_t member, gpointer user);

/* Lower for every rank of a world, fill inputs with @fill, run on the loopback;
 * returns the out buffers by group index (g_free each and the array). */
static void **run_custom(const sp_coll_spec *s, int32_t world, gboolean in_place, fill_fn fill,
                         gpointer user, void ***ins_out)
{
  GError *err = NULL;
  size_t es = sp_dtype_size(s->dtype);
  uint64_t inb = sp_coll_in_count(s) * es, outb = sp_coll_out_count(s) * es;
  sp_program **progs = g_new0(sp_program *, world);
  void ***bufs = g_new0(void **, world);
  void **ins = g_new0(void *, s->n), **outs = g_new0(void *, s->n);
  for (int32_t r = 0; r < world; r++) {
    progs[r] = sp_program_new(r);
    int32_t m = sp_coll_index_of(s, r);
    if (m >= 0) {
      uint32_t in = sp_program_add_buffer(progs[r], MAX(inb, outb), "in");
      uint32_t out = in_place ? in : sp_program_add_buffer(progs[r], outb, "out");
      g_assert_true(sp_lower_coll(progs[r], s, in, out, &err));
      g_assert_no_error(err);
      g_assert_true(sp_program_validate(progs[r], world, &err));
    }
    guint nb = progs[r]->bufs->len;
    bufs[r] = g_new0(void *, nb + 1);
    for (guint b = 0; b < nb; b++)
      bufs[r][b] = g_malloc0(g_array_index(progs[r]->bufs, sp_buffer, b).bytes + 1);
    if (m >= 0) {
      fill(bufs[r][0], sp_coll_in_count(s), s->dtype, m, user);
      ins[m] = g_memdup2(bufs[r][0], inb + 1);
    }
  }
  g_assert_true(sp_loopback_run(progs, world, bufs, &err));
  g_assert_no_error(err);
  for (int32_t r = 0; r < world; r++) {
    int32_t m = sp_coll_index_of(s, r);
    if (m >= 0)
      outs[m] = g_memdup2(bufs[r][in_place ? 0 : 1], outb + 1);
    for (guint b = 0; b < progs[r]->bufs->len; b++)
      g_free(bufs[r][b]);
    g_free(bufs[r]);
    sp_program_free(progs[r]);
  }
  g_free(bufs);
  g_free(progs);
  if (ins_out)
    *ins_out = ins;
  else {
    for (int32_t i = 0; i < s->n; i++)
      g_free(ins[i]);
    g_free(ins);
  }
  return outs;
}

static void free_bufs(void **b, int32_t n)
{
  for (int32_t i = 0; i < n; i++)
    g_free(b[i]);
  g_free(b);
}

/* Floats of very different magnitudes: sums depend on the order. */
static void fill_wild(void *in, uint64_t count, sp_dtype t, int32_t member, gpointer user)
{
  GRand *g = g_rand_new_with_seed(1234u + (guint32)member * 77u);
  for (uint64_t e = 0; e < count; e++) {
    double v = g_rand_double_range(g, -1.0, 1.0) * pow(2.0, g_rand_int_range(g, -20, 20));
    float f = (float)v;
    if (t == SP_F32)
      memcpy((float *)in + e, &f, 4);
    else if (t == SP_BF16) {
      uint16_t h = sp_f32_to_bf16(f);
      memcpy((uint16_t *)in + e, &h, 2);
    } else {
      uint16_t h = sp_f32_to_f16((float)(v / 65536.0 * 1000.0));
      memcpy((uint16_t *)in + e, &h, 2);
    }
  }
  g_rand_free(g);
}

/* Order-sensitive data: the run still matches the reference bit for bit, and
 * the three algorithms' references really differ (so the check has teeth). */
static void test_order_sensitive(void)
{
  const sp_dtype ts[] = { SP_F32, SP_F16, SP_BF16 };
  const sp_coll colls[] = { SP_COLL_ALL_REDUCE, SP_COLL_REDUCE_SCATTER, SP_COLL_REDUCE };
  for (size_t ti = 0; ti < G_N_ELEMENTS(ts); ti++)
    for (size_t ci = 0; ci < G_N_ELEMENTS(colls); ci++)
      for (size_t ni = 2; ni < G_N_ELEMENTS(sizes); ni++) {
        int32_t n = sizes[ni];
        int32_t *ranks = sp_group_range(0, 1, n);
        void **res[3];
        uint64_t count = 101;
        for (size_t ai = 0; ai < 3; ai++) {
          sp_coll_spec s = { .coll = colls[ci], .algo = algos[ai], .dtype = ts[ti],
                             .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = count,
                             .root = 1, .chunk_bytes = 64 };
          void **ins;
          void **outs = run_custom(&s, n, FALSE, fill_wild, NULL, &ins);
          size_t ob = sp_coll_out_count(&s) * sp_dtype_size(ts[ti]);
          void **ref = g_new0(void *, n);
          for (int32_t i = 0; i < n; i++)
            ref[i] = g_malloc0(ob + 1);
          GError *err = NULL;
          g_assert_true(sp_coll_reference(&s, (const void *const *)ins, ref, &err));
          g_assert_no_error(err);
          for (int32_t i = 0; i < n; i++)
            g_assert_cmpmem(outs[i], ob, ref[i], ob);
          free_bufs(outs, n);
          free_bufs(ins, n);
          res[ai] = ref;
        }
        /* root (reduce) or member 1 holds a written result in all three */
        size_t ob = (size_t)count * sp_dtype_size(ts[ti]);
        g_assert_true(memcmp(res[0][1], res[1][1], ob) != 0 || memcmp(res[1][1], res[2][1], ob) != 0);
        for (int a = 0; a < 3; a++)
          free_bufs(res[a], n);
        g_free(ranks);
      }
}

/* ------------------------------------------------------------ hand-derived */

static void fill_const_i32(void *in, uint64_t count, sp_dtype t, int32_t member, gpointer user)
{
  int32_t base = GPOINTER_TO_INT(user);
  for (uint64_t e = 0; e < count; e++)
    ((int32_t *)in)[e] = member + base;
}

/* all-reduce SUM of member constants i = n(n-1)/2, MAX = n-1, AVG of i+1 in f32 = (n+1)/2 */
static void test_allreduce_constants(void)
{
  for (int32_t n = 1; n <= 16; n++)
    for (size_t ai = 0; ai < G_N_ELEMENTS(algos); ai++)
      for (int chunked = 0; chunked < 2; chunked++) {
        int32_t *ranks = sp_group_range(0, 1, n);
        sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = algos[ai], .dtype = SP_I32,
                           .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = 37,
                           .chunk_bytes = chunked ? 12 : 0 };
        void **outs = run_custom(&s, n, FALSE, fill_const_i32, GINT_TO_POINTER(0), NULL);
        for (int32_t i = 0; i < n; i++)
          for (int e = 0; e < 37; e++)
            g_assert_cmpint(((int32_t *)outs[i])[e], ==, n * (n - 1) / 2);
        free_bufs(outs, n);

        s.redop = SP_RED_MAX;
        outs = run_custom(&s, n, FALSE, fill_const_i32, GINT_TO_POINTER(0), NULL);
        for (int32_t i = 0; i < n; i++)
          g_assert_cmpint(((int32_t *)outs[i])[36], ==, n - 1);
        free_bufs(outs, n);

        s.redop = SP_RED_MIN;
        outs = run_custom(&s, n, FALSE, fill_const_i32, GINT_TO_POINTER(5), NULL);
        for (int32_t i = 0; i < n; i++)
          g_assert_cmpint(((int32_t *)outs[i])[0], ==, 5);
        free_bufs(outs, n);

        /* integer AVG truncates: (0 + 1 + ... + n-1) / n = (n-1)/2 truncated */
        s.redop = SP_RED_AVG;
        outs = run_custom(&s, n, FALSE, fill_const_i32, GINT_TO_POINTER(0), NULL);
        for (int32_t i = 0; i < n; i++)
          g_assert_cmpint(((int32_t *)outs[i])[10], ==, (n * (n - 1) / 2) / n);
        free_bufs(outs, n);
        g_free(ranks);
      }
}

static void fill_const_f32(void *in, uint64_t count, sp_dtype t, int32_t member, gpointer user)
{
  for (uint64_t e = 0; e < count; e++)
    ((float *)in)[e] = (float)(member + 1);
}

static void test_avg_float(void)
{
  for (int32_t n = 1; n <= 16; n++)
    for (int coll = 0; coll < 3; coll++) {
      sp_coll cl = coll == 0 ? SP_COLL_ALL_REDUCE : coll == 1 ? SP_COLL_REDUCE_SCATTER : SP_COLL_REDUCE;
      for (size_t ai = 0; ai < G_N_ELEMENTS(algos); ai++) {
        int32_t *ranks = sp_group_range(0, 1, n);
        sp_coll_spec s = { .coll = cl, .algo = algos[ai], .dtype = SP_F32, .redop = SP_RED_AVG,
                           .ranks = ranks, .n = n, .count = 9, .root = n - 1, .chunk_bytes = 8 };
        void **outs = run_custom(&s, n, FALSE, fill_const_f32, NULL, NULL);
        float want = (float)(n + 1) / 2.0f;
        for (int32_t i = 0; i < n; i++) {
          if (cl == SP_COLL_REDUCE && i != n - 1) {
            g_assert_cmpfloat(((float *)outs[i])[0], ==, 0.0f); /* untouched */
            continue;
          }
          for (int e = 0; e < 9; e++)
            g_assert_cmpfloat(((float *)outs[i])[e], ==, want);
        }
        free_bufs(outs, n);
        g_free(ranks);
      }
    }
}

/* member i's input element (j*c + e) = 10000 i + 100 j + e */
static void fill_a2a(void *in, uint64_t count, sp_dtype t, int32_t member, gpointer user)
{
  uint64_t c = (uint64_t)GPOINTER_TO_INT(user);
  for (uint64_t k = 0; k < count; k++)
    ((int32_t *)in)[k] = 10000 * member + 100 * (int32_t)(k / c) + (int32_t)(k % c);
}

static void test_block_placement(void)
{
  for (int32_t n = 1; n <= 13; n += 3) {
    int32_t c = 5;
    /* a strided group inside a larger world */
    int32_t *ranks = sp_group_range(1, 2, n);
    sp_coll_spec s = { .coll = SP_COLL_ALL_TO_ALL, .algo = SP_ALGO_AUTO, .dtype = SP_I32,
                       .ranks = ranks, .n = n, .count = (uint64_t)c };
    void **outs = run_custom(&s, 2 * n + 1, FALSE, fill_a2a, GINT_TO_POINTER(c), NULL);
    for (int32_t i = 0; i < n; i++)
      for (int32_t j = 0; j < n; j++)
        for (int32_t e = 0; e < c; e++)
          g_assert_cmpint(((int32_t *)outs[i])[j * c + e], ==, 10000 * j + 100 * i + e);
    free_bufs(outs, n);
    /* in place gives the same placement */
    outs = run_custom(&s, 2 * n + 1, TRUE, fill_a2a, GINT_TO_POINTER(c), NULL);
    for (int32_t i = 0; i < n; i++)
      for (int32_t j = 0; j < n; j++)
        g_assert_cmpint(((int32_t *)outs[i])[j * c + 1], ==, 10000 * j + 100 * i + 1);
    free_bufs(outs, n);

    /* all-gather: out block j = member j's input; broadcast: the root's */
    for (size_t ai = 0; ai < G_N_ELEMENTS(algos); ai++) {
      s.coll = SP_COLL_ALL_GATHER;
      s.algo = algos[ai];
      outs = run_custom(&s, 2 * n + 1, FALSE, fill_a2a, GINT_TO_POINTER(c), NULL);
      for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++)
          for (int32_t e = 0; e < c; e++)
            g_assert_cmpint(((int32_t *)outs[i])[j * c + e], ==, 10000 * j + e);
      free_bufs(outs, n);
      s.coll = SP_COLL_BROADCAST;
      s.root = n / 2;
      s.chunk_bytes = 8;
      outs = run_custom(&s, 2 * n + 1, FALSE, fill_a2a, GINT_TO_POINTER(c), NULL);
      for (int32_t i = 0; i < n; i++)
        for (int32_t e = 0; e < c; e++)
          g_assert_cmpint(((int32_t *)outs[i])[e], ==, 10000 * (n / 2) + e);
      free_bufs(outs, n);
      s.chunk_bytes = 0;
    }
    g_free(ranks);
  }
}

static void fill_magn(void *in, uint64_t count, sp_dtype t, int32_t member, gpointer user)
{
  const float *vals = user;
  for (uint64_t e = 0; e < count; e++)
    ((float *)in)[e] = vals[member];
}

/* Hand-derived orders with x = {1e8, 1, -1e8} (f32 spacing at 1e8 is 8):
 * ring segment s = (x[s+1] + x[s+2]) + x[s]:
 *   s=0: (1 - 1e8) + 1e8 = 0; s=1: (-1e8 + 1e8) + 1 = 1; s=2: (1e8 + 1) - 1e8 = 0.
 * direct: (x0 + x1) + x2 = 0 everywhere. The ring reduce-scatter gives member s
 * its segment value. With n = 4, x = {1e8, 1, -1e8, 1}: direct ((x0+x1)+x2)+x3 = 1;
 * tree (NCCL's double binary tree, elements 0-3 on tree 0 = 0 -> 2 -> {1, 3}, 4-7 on
 * tree 1 = 3 -> 1 -> {2, 0}; a member adds its children's sums in child order):
 * tree 0: x0 + ((x2 + x1) + x3) = 1e8 + (-1e8 + 1) = 0 (-1e8 + 1 rounds to -1e8);
 * tree 1: x3 + ((x1 + x2) + x0) = 1 + ((1 - 1e8) + 1e8) = 1 + 0 = 1. */
static void test_hand_orders(void)
{
  static const float x3[] = { 1e8f, 1.0f, -1e8f };
  static const float x4[] = { 1e8f, 1.0f, -1e8f, 1.0f };
  int32_t *ranks = sp_group_range(0, 1, 4);
  sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                     .redop = SP_RED_SUM, .ranks = ranks, .n = 3, .count = 3 };
  void **o = run_custom(&s, 3, FALSE, fill_magn, (gpointer)x3, NULL);
  for (int i = 0; i < 3; i++) {
    g_assert_cmpfloat(((float *)o[i])[0], ==, 0.0f);
    g_assert_cmpfloat(((float *)o[i])[1], ==, 1.0f);
    g_assert_cmpfloat(((float *)o[i])[2], ==, 0.0f);
  }
  free_bufs(o, 3);
  s.algo = SP_ALGO_DIRECT;
  o = run_custom(&s, 3, FALSE, fill_magn, (gpointer)x3, NULL);
  for (int i = 0; i < 3; i++)
    for (int e = 0; e < 3; e++)
      g_assert_cmpfloat(((float *)o[i])[e], ==, 0.0f);
  free_bufs(o, 3);
  s.coll = SP_COLL_REDUCE_SCATTER;
  s.algo = SP_ALGO_RING;
  s.count = 1;
  o = run_custom(&s, 3, FALSE, fill_magn, (gpointer)x3, NULL);
  g_assert_cmpfloat(((float *)o[0])[0], ==, 0.0f);
  g_assert_cmpfloat(((float *)o[1])[0], ==, 1.0f);
  g_assert_cmpfloat(((float *)o[2])[0], ==, 0.0f);
  free_bufs(o, 3);
  /* ring reduce with root 1: (x2 + x0) + x1 = 1 */
  s.coll = SP_COLL_REDUCE;
  s.root = 1;
  o = run_custom(&s, 3, FALSE, fill_magn, (gpointer)x3, NULL);
  g_assert_cmpfloat(((float *)o[1])[0], ==, 1.0f);
  free_bufs(o, 3);

  s.coll = SP_COLL_ALL_REDUCE;
  s.n = 4;
  s.count = 8;
  s.algo = SP_ALGO_TREE;
  o = run_custom(&s, 4, FALSE, fill_magn, (gpointer)x4, NULL);
  for (int i = 0; i < 4; i++)
    for (int e = 0; e < 8; e++)
      g_assert_cmpfloat(((float *)o[i])[e], ==, e < 4 ? 0.0f : 1.0f);
  free_bufs(o, 4);
  s.algo = SP_ALGO_DIRECT;
  o = run_custom(&s, 4, FALSE, fill_magn, (gpointer)x4, NULL);
  for (int i = 0; i < 4; i++)
    for (int e = 0; e < 8; e++)
      g_assert_cmpfloat(((float *)o[i])[e], ==, 1.0f);
  free_bufs(o, 4);
  g_free(ranks);
}

/* NVLS-tree and CollNet (lower_hier.c), by hand with f32 (spacing 8 at 1e8).
 * 2 nodes of 2, x = {1e8, 1 | -1e8, 1}: node partials 1e8 + 1 = 1e8 and -1e8 + 1 = -1e8,
 * their sum 0 everywhere (a flat direct sum gives ((1e8 + 1) - 1e8) + 1 = 1).
 * 2 nodes of 3, x = {1e8, -1e8, 1 | 0, 0, 0}, 6 elements in 3 segments of 2: inside node
 * 0, direct (index order) (1e8 - 1e8) + 1 = 1 for every segment; the chain of segment l
 * starts at local l + 1: l = 0: (-1e8 + 1) + 1e8 = 0, l = 1: (1 + 1e8) - 1e8 = 0,
 * l = 2: (1e8 - 1e8) + 1 = 1; node 1 adds 0. */
static void test_hier_orders(void)
{
  static const float x4[] = { 1e8f, 1.0f, -1e8f, 1.0f };
  static const float x6[] = { 1e8f, -1e8f, 1.0f, 0.0f, 0.0f, 0.0f };
  int32_t *ranks = sp_group_range(0, 1, 6);
  static const sp_algo hier[] = { SP_ALGO_NVLS_TREE, SP_ALGO_COLLNET_DIRECT, SP_ALGO_COLLNET_CHAIN };
  for (gsize h = 0; h < G_N_ELEMENTS(hier); h++) {
    sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = hier[h], .dtype = SP_F32,
                       .redop = SP_RED_SUM, .ranks = ranks, .n = 4, .count = 8,
                       .channel_block = 2 };
    void **o = run_custom(&s, 4, FALSE, fill_magn, (gpointer)x4, NULL);
    for (int i = 0; i < 4; i++)
      for (int e = 0; e < 8; e++)
        g_assert_cmpfloat(((float *)o[i])[e], ==, 0.0f);
    free_bufs(o, 4);
    s.n = 6;
    s.count = 6;
    s.channel_block = 3;
    o = run_custom(&s, 6, FALSE, fill_magn, (gpointer)x6, NULL);
    for (int i = 0; i < 6; i++)
      for (int e = 0; e < 6; e++) {
        float want = hier[h] == SP_ALGO_COLLNET_CHAIN && e < 4 ? 0.0f : 1.0f;
        g_assert_cmpfloat(((float *)o[i])[e], ==, want);
      }
    free_bufs(o, 6);
  }
  g_free(ranks);
}

/* The three against the reference, bitwise: nodes of B members (B = 0 or not dividing n:
 * one member per node), sizes that leave segments and chunks uneven. */
static void test_hier_matrix(void)
{
  static const sp_algo hier[] = { SP_ALGO_NVLS_TREE, SP_ALGO_COLLNET_DIRECT, SP_ALGO_COLLNET_CHAIN };
  static const int32_t shapes[][2] = { { 2, 2 }, { 4, 2 }, { 6, 3 }, { 6, 2 }, { 8, 4 }, { 12, 4 },
                                       { 16, 8 }, { 5, 0 }, { 9, 3 }, { 7, 2 } };
  static const sp_dtype dts[] = { SP_F32, SP_BF16, SP_I32 };
  static const sp_redop ops[] = { SP_RED_SUM, SP_RED_AVG, SP_RED_MAX, SP_RED_MIN };
  static const uint64_t counts[] = { 0, 1, 7, 100, 1001 };
  int32_t *ranks = sp_group_range(0, 1, 16);
  int k = 0;
  for (gsize h = 0; h < G_N_ELEMENTS(hier); h++)
    for (gsize sh = 0; sh < G_N_ELEMENTS(shapes); sh++)
      for (gsize d = 0; d < G_N_ELEMENTS(dts); d++)
        for (gsize c = 0; c < G_N_ELEMENTS(counts); c++, k++) {
          sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = hier[h], .dtype = dts[d],
                             .redop = ops[k % 4], .ranks = ranks, .n = shapes[sh][0],
                             .count = counts[c], .channel_block = shapes[sh][1],
                             .chunk_bytes = k % 2 ? 16 : 0 };
          run_case(&s, 16);
        }
  g_free(ranks);
}

/* ------------------------------------------------------------ schedule shape */

typedef struct {
  guint waits, sends;
  uint64_t sent;
} shape;

static shape shape_of(const sp_program *p)
{
  shape sh = { 0, 0, 0 };
  for (guint i = 0; i < sp_program_len(p); i++) {
    const sp_step *s = sp_program_step(p, i);
    if (s->kind == SP_STEP_WAIT)
      sh.waits++;
    if (s->kind == SP_STEP_SEND) {
      sh.sends++;
      sh.sent += s->bytes;
    }
  }
  return sh;
}

static shape lower_shape(sp_coll coll, sp_algo algo, int32_t n, uint64_t count, uint64_t chunk,
                         int32_t rank)
{
  int32_t *ranks = sp_group_range(0, 1, n);
  sp_coll_spec s = { .coll = coll, .algo = algo, .dtype = SP_F32, .redop = SP_RED_SUM,
                     .ranks = ranks, .n = n, .count = count, .chunk_bytes = chunk };
  GError *err = NULL;
  sp_case *c = sp_case_new_coll_rank(&s, n, rank, FALSE, &err);
  g_assert_no_error(err);
  shape sh = shape_of(sp_case_program(c, rank));
  /* every step carries the op id and tags stay in [tag, tag + 1024) */
  sp_case_free(c);
  g_free(ranks);
  return sh;
}

/* NCCL's double binary tree (two trees, each on half the vector): every edge of
 * a tree of n members carries its half once up and once down, so the members
 * send 2 (n - 1) S in all; one chunk per half: a member at depth d of a tree of
 * largest depth H sends up at step H - d and down at step H + d, so the programs
 * span 2H + 1 steps at most. */
static void test_dbtree_shape(void)
{
  for (int32_t n = 2; n <= 16; n++) {
    uint64_t count = (uint64_t)n * 24, S = count * 4, sent = 0;
    for (int32_t r = 0; r < n; r++)
      sent += lower_shape(SP_COLL_ALL_REDUCE, SP_ALGO_TREE, n, count, 0, r).sent;
    g_assert_cmpuint(sent, ==, 2 * (uint64_t)(n - 1) * S);
  }
  /* 4 members, tree 0 = 0 -> 2 -> {1, 3} (depths 0, 2, 1, 2; H = 2), tree 1 its mirror
   * 3 -> 1 -> {2, 0}; member 2 is inner in tree 0 (receives at step 0, sends up at 1,
   * receives down at 2, sends down at 3) and a leaf in tree 1 (sends up at 0,
   * receives down at 3): blocks at steps 0, 1, 2, 3 */
  shape m2 = lower_shape(SP_COLL_ALL_REDUCE, SP_ALGO_TREE, 4, 8, 0, 2);
  g_assert_cmpuint(m2.waits, ==, 4);
  g_assert_cmpuint(m2.sends, ==, 4); /* tree 0: up to 0, down to 1 and 3; tree 1: up to 1 */
  g_assert_cmpuint(m2.sent, ==, 4 * 16);
}

/* Cost-only direct all-to-all by rail (channel_block = B): every member's sends and
 * receives pair up with equal bytes, and what each member puts on its node's links
 * and on the network, each way, is what the n - 1 pairwise messages put there:
 * (B - 1) c within its node and (n - B) c across nodes, in N = n / B messages. */
typedef struct {
  int32_t n;
  GArray *posts; /* one int64_t triple per post: member << 1 | recv, peer, bytes */
  int32_t me;
} rail_sink;

static void rail_collect(void *ud, const sp_program *prog, const sp_step *steps, guint n)
{
  (void)prog;
  rail_sink *rs = ud;
  for (guint i = 0; i < n; i++)
    if (steps[i].kind == SP_STEP_SEND || steps[i].kind == SP_STEP_RECV) {
      int64_t t[3] = { (int64_t)rs->me << 1 | (steps[i].kind == SP_STEP_RECV), steps[i].peer,
                       (int64_t)steps[i].bytes };
      g_array_append_vals(rs->posts, t, 3);
    }
}

static void test_a2a_by_rail(void)
{
  const int32_t shapes[][2] = { { 1, 8 }, { 2, 8 }, { 4, 2 }, { 5, 3 }, { 3, 1 } }; /* N nodes x B */
  const uint64_t count = 6, cb = count * 4;
  for (gsize k = 0; k < G_N_ELEMENTS(shapes); k++) {
    int32_t N = shapes[k][0], B = shapes[k][1], n = N * B;
    int32_t *ranks = sp_group_range(0, 1, n);
    sp_coll_spec s = { .coll = SP_COLL_ALL_TO_ALL, .algo = SP_ALGO_DIRECT, .dtype = SP_F32,
                       .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = count, .channel_block = B };
    rail_sink rs = { .n = n, .posts = g_array_new(FALSE, FALSE, sizeof(int64_t)) };
    uint64_t *intra_out = g_new0(uint64_t, n), *inter_out = g_new0(uint64_t, n);
    uint64_t *intra_in = g_new0(uint64_t, n), *inter_in = g_new0(uint64_t, n);
    for (int32_t me = 0; me < n; me++) {
      sp_program *p = sp_program_new(me);
      uint32_t in = sp_program_add_buffer(p, (uint64_t)n * cb, "in");
      uint32_t out = sp_program_add_buffer(p, (uint64_t)n * cb, "out");
      rs.me = me;
      guint before = rs.posts->len;
      GError *err = NULL;
      g_assert_true(sp_lower_coll_stream(p, &s, in, out, TRUE, rail_collect, &rs, &err));
      g_assert_no_error(err);
      /* N messages each way (B - 1 > 0 adds the one inside the node) */
      guint msgs = (rs.posts->len - before) / 3;
      g_assert_cmpuint(msgs, ==, 2u * (guint)(N - 1 + (B > 1)));
      sp_program_free(p);
    }
    /* pair every send with a receive of the same bytes at its peer */
    const int64_t *t = (const int64_t *)(const void *)rs.posts->data;
    guint np = rs.posts->len / 3;
    for (guint i = 0; i < np; i++) {
      int32_t me = (int32_t)(t[3 * i] >> 1), peer = (int32_t)t[3 * i + 1];
      gboolean recv = t[3 * i] & 1;
      gboolean same = me / B == peer / B;
      uint64_t b = (uint64_t)t[3 * i + 2];
      if (recv)
        (same ? intra_in : inter_in)[me] += b;
      else
        (same ? intra_out : inter_out)[me] += b;
      guint match = 0;
      for (guint j = 0; j < np; j++)
        match += (t[3 * j] >> 1) == peer && t[3 * j + 1] == me && (t[3 * j] & 1) != recv &&
                 t[3 * j + 2] == t[3 * i + 2];
      g_assert_cmpuint(match, ==, 1);
    }
    for (int32_t me = 0; me < n; me++) {
      g_assert_cmpuint(intra_out[me], ==, (uint64_t)(B - 1) * cb);
      g_assert_cmpuint(intra_in[me], ==, (uint64_t)(B - 1) * cb);
      g_assert_cmpuint(inter_out[me], ==, (uint64_t)(n - B) * cb);
      g_assert_cmpuint(inter_in[me], ==, (uint64_t)(n - B) * cb);
    }
    g_array_unref(rs.posts);
    g_free(intra_out);
    g_free(inter_out);
    g_free(intra_in);
    g_free(inter_in);
    g_free(ranks);
  }
}

/* The hierarchical all-reduces' exchanges inside the node, cost only: one message per
 * member, phase and part, by rail (lower_hier.c), carrying per step exactly the bytes
 * the pairwise messages of the data-carrying lowering put on each member's NVLink port
 * (out and in), every send met by a receive of its bytes at its peer; the posts across
 * nodes are those of the data-carrying lowering, one for one. */
typedef struct {
  int32_t me, B;
  GHashTable *intra_out, *intra_in; /* phase -> bytes */
  GArray *inter;                    /* (me << 1 | recv, peer, bytes, phase) */
  GArray *intra;                    /* (me << 1 | recv, peer, bytes, phase) */
} hier_sink;

static void hier_add(GHashTable *h, uint32_t phase, uint64_t b)
{
  gpointer k = GUINT_TO_POINTER(phase + 1);
  uint64_t *v = g_hash_table_lookup(h, k);
  if (v == NULL) {
    v = g_new0(uint64_t, 1);
    g_hash_table_insert(h, k, v);
  }
  *v += b;
}

static void hier_collect(void *ud, const sp_program *prog, const sp_step *steps, guint n)
{
  (void)prog;
  hier_sink *hs = ud;
  for (guint i = 0; i < n; i++) {
    const sp_step *st = &steps[i];
    if (st->kind != SP_STEP_SEND && st->kind != SP_STEP_RECV)
      continue;
    gboolean recv = st->kind == SP_STEP_RECV, same = st->peer / hs->B == hs->me / hs->B;
    if (st->bytes == 0)
      continue;
    int64_t t[4] = { (int64_t)hs->me << 1 | recv, st->peer, (int64_t)st->bytes, st->phase };
    g_array_append_vals(same ? hs->intra : hs->inter, t, 1);
    if (same)
      hier_add(recv ? hs->intra_in : hs->intra_out, st->phase, st->bytes);
  }
}

static int cmp_post(gconstpointer a, gconstpointer b)
{
  const int64_t *x = a, *y = b;
  for (int i = 0; i < 4; i++)
    if (x[i] != y[i])
      return x[i] < y[i] ? -1 : 1;
  return 0;
}

static hier_sink hier_lower(sp_coll_spec *s, int32_t B, gboolean comm_only)
{
  hier_sink hs = { .B = B, .intra_out = g_hash_table_new_full(NULL, NULL, NULL, g_free),
                   .intra_in = g_hash_table_new_full(NULL, NULL, NULL, g_free),
                   .inter = g_array_new(FALSE, FALSE, sizeof(int64_t) * 4),
                   .intra = g_array_new(FALSE, FALSE, sizeof(int64_t) * 4) };
  for (int32_t me = 0; me < s->n; me++) {
    sp_program *p = sp_program_new(me);
    uint32_t in = sp_program_add_buffer(p, s->count * 4, "in");
    uint32_t out = sp_program_add_buffer(p, s->count * 4, "out");
    hs.me = me;
    GError *err = NULL;
    g_assert_true(sp_lower_coll_stream(p, s, in, out, comm_only, hier_collect, &hs, &err));
    g_assert_no_error(err);
    sp_program_free(p);
  }
  g_array_sort(hs.inter, cmp_post);
  g_array_sort(hs.intra, cmp_post);
  return hs;
}

static void hier_sink_clear(hier_sink *hs)
{
  g_hash_table_unref(hs->intra_out);
  g_hash_table_unref(hs->intra_in);
  g_array_unref(hs->inter);
  g_array_unref(hs->intra);
}

static void test_hier_by_rail(void)
{
  const int32_t shapes[][2] = { { 2, 8 }, { 4, 4 }, { 3, 2 }, { 5, 3 } }; /* N nodes x B */
  const sp_algo hier_algos[] = { SP_ALGO_NVLS_TREE, SP_ALGO_COLLNET_DIRECT };
  for (gsize a = 0; a < G_N_ELEMENTS(hier_algos); a++)
    for (gsize k = 0; k < G_N_ELEMENTS(shapes); k++) {
      int32_t N = shapes[k][0], B = shapes[k][1], n = N * B;
      int32_t *ranks = sp_group_range(0, 1, n);
      /* 5 chunks of 16 elements per part, and a short last one */
      sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = hier_algos[a], .dtype = SP_F32,
                         .redop = SP_RED_SUM, .ranks = ranks, .n = n,
                         .count = (uint64_t)B * 2 * (4 * 16 + 9), .channel_block = B,
                         .chunk_bytes = 16 * 4 };
      hier_sink pair = hier_lower(&s, B, FALSE), rail = hier_lower(&s, B, TRUE);
      /* across nodes: the same posts */
      g_assert_cmpuint(rail.inter->len, ==, pair.inter->len);
      g_assert_cmpint(memcmp(rail.inter->data, pair.inter->data, pair.inter->len * 4 * sizeof(int64_t)), ==, 0);
      /* inside: one send and one receive per member and phase where the pairs have B - 1 */
      g_assert_cmpuint(rail.intra->len * (guint)(B - 1), ==, pair.intra->len);
      /* every member's port, per phase: the same bytes out and in */
      for (int pass = 0; pass < 2; pass++) {
        GHashTable *hr = pass ? rail.intra_in : rail.intra_out, *hp = pass ? pair.intra_in : pair.intra_out;
        g_assert_cmpuint(g_hash_table_size(hr), ==, g_hash_table_size(hp));
        GHashTableIter it;
        gpointer key, val;
        g_hash_table_iter_init(&it, hp);
        while (g_hash_table_iter_next(&it, &key, &val)) {
          uint64_t *v = g_hash_table_lookup(hr, key);
          g_assert_nonnull(v);
          g_assert_cmpuint(*v, ==, *(uint64_t *)val);
        }
      }
      /* each send has its receive of the same bytes at its peer, in the same phase */
      const int64_t *t = (const int64_t *)(const void *)rail.intra->data;
      for (guint i = 0; i < rail.intra->len; i++) {
        int64_t want[4] = { t[4 * i + 1] << 1 | !(t[4 * i] & 1), t[4 * i] >> 1, t[4 * i + 2], t[4 * i + 3] };
        g_assert_nonnull(bsearch(want, rail.intra->data, rail.intra->len, sizeof(int64_t) * 4, cmp_post));
      }
      hier_sink_clear(&pair);
      hier_sink_clear(&rail);
      g_free(ranks);
    }
}

static void test_ring_shape(void)
{
  for (int32_t n = 2; n <= 16; n++) {
    uint64_t count = (uint64_t)n * 24, S = count * 4;
    for (int32_t r = 0; r < n; r++) {
      shape ar = lower_shape(SP_COLL_ALL_REDUCE, SP_ALGO_RING, n, count, 0, r);
      g_assert_cmpuint(ar.waits, ==, 2 * (n - 1));
      g_assert_cmpuint(ar.sent * (uint64_t)n, ==, 2 * (uint64_t)(n - 1) * S); /* 2(n-1)/n S */
      /* three chunks per segment: three rounds of 2(n-1) steps, same volume */
      shape arc = lower_shape(SP_COLL_ALL_REDUCE, SP_ALGO_RING, n, count, 8 * 4, r);
      g_assert_cmpuint(arc.waits, ==, 3 * 2 * (n - 1));
      g_assert_cmpuint(arc.sent, ==, ar.sent);
      shape ag = lower_shape(SP_COLL_ALL_GATHER, SP_ALGO_RING, n, 24, 0, r);
      g_assert_cmpuint(ag.waits, ==, n - 1);
      g_assert_cmpuint(ag.sent, ==, (uint64_t)(n - 1) * 24 * 4);
      shape rs = lower_shape(SP_COLL_REDUCE_SCATTER, SP_ALGO_RING, n, 24, 0, r);
      g_assert_cmpuint(rs.waits, ==, n - 1);
      g_assert_cmpuint(rs.sent, ==, (uint64_t)(n - 1) * 24 * 4);
      /* all-to-all: every peer posted, one wait; (n-1)/n of the whole input S = n*c */
      shape aa = lower_shape(SP_COLL_ALL_TO_ALL, SP_ALGO_DIRECT, n, 24, 0, r);
      g_assert_cmpuint(aa.waits, ==, 1);
      g_assert_cmpuint(aa.sends, ==, n - 1);
      g_assert_cmpuint(aa.sent * (uint64_t)n, ==, (uint64_t)(n - 1) * ((uint64_t)n * 24 * 4));
    }
    /* pipelined chains, 3 chunks: the root (bcast) / the first link (reduce) and
     * the chain's end have one block per chunk, the middle C + 1 (recv of
     * chunk c overlapped with the send of chunk c-1); every link moves S once */
    if (n >= 3) {
      shape h = lower_shape(SP_COLL_BROADCAST, SP_ALGO_RING, n, 24, 32, 0);
      shape m = lower_shape(SP_COLL_BROADCAST, SP_ALGO_RING, n, 24, 32, 1);
      shape e = lower_shape(SP_COLL_BROADCAST, SP_ALGO_RING, n, 24, 32, n - 1);
      g_assert_cmpuint(h.waits, ==, 3);
      g_assert_cmpuint(m.waits, ==, 4);
      g_assert_cmpuint(e.waits, ==, 3);
      g_assert_cmpuint(h.sent, ==, 96);
      g_assert_cmpuint(m.sent, ==, 96);
      g_assert_cmpuint(e.sent, ==, 0);
      shape r1 = lower_shape(SP_COLL_REDUCE, SP_ALGO_RING, n, 24, 32, 1); /* first link */
      shape rm = lower_shape(SP_COLL_REDUCE, SP_ALGO_RING, n, 24, 32, 2);
      shape r0 = lower_shape(SP_COLL_REDUCE, SP_ALGO_RING, n, 24, 32, 0); /* root */
      g_assert_cmpuint(r1.waits, ==, 3);
      g_assert_cmpuint(r1.sent, ==, 96);
      g_assert_cmpuint(rm.waits, ==, 4);
      g_assert_cmpuint(rm.sent, ==, 96);
      g_assert_cmpuint(r0.waits, ==, 3);
      g_assert_cmpuint(r0.sent, ==, 0);
    }
    /* binomial broadcast: the root sends ceil(lg n) times */
    int cl = 0;
    while ((1 << cl) < n)
      cl++;
    shape b = lower_shape(SP_COLL_BROADCAST, SP_ALGO_TREE, n, 10, 0, 0);
    g_assert_cmpuint(b.sends, ==, (guint)cl);
  }
}

static void test_steps_fields(void)
{
  const int32_t ranks[] = { 9, 2, 4 };
  sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F16,
                     .redop = SP_RED_AVG, .ranks = ranks, .n = 3, .count = 1000,
                     .chunk_bytes = 64, .op_id = 42, .tag = 5000 };
  GError *err = NULL;
  sp_case *c = sp_case_new_coll(&s, 10, FALSE, &err);
  g_assert_no_error(err);
  guint scales = 0;
  for (int32_t r = 0; r < 10; r++) {
    const sp_program *p = sp_case_program(c, r);
    for (guint i = 0; i < sp_program_len(p); i++) {
      const sp_step *st = sp_program_step(p, i);
      g_assert_cmpuint(st->op, ==, 42);
      if (st->kind == SP_STEP_SEND || st->kind == SP_STEP_RECV) {
        g_assert_cmpint(st->tag, >=, 5000);
        g_assert_cmpint(st->tag, <, 5000 + 1024);
        g_assert_true(st->peer == 9 || st->peer == 2 || st->peer == 4);
        g_assert_cmpint(st->peer, !=, r);
      }
      if (st->kind == SP_STEP_SCALE) {
        scales++;
        g_assert_true(st->divide);
        g_assert_cmpfloat(st->scale, ==, 3.0);
      }
    }
  }
  /* AVG: one scale per chunk of each final segment: 1000 halves in 3 segments of
   * 334/333/333 elements, 32-element chunks -> 11 + 11 + 11 chunks */
  g_assert_cmpuint(scales, ==, 33);
  /* cost mode runs on the loopback without buffers */
  g_assert_null(sp_case_all_bufs(c));
  g_assert_true(sp_loopback_run(sp_case_programs(c), 10, NULL, &err));
  g_assert_no_error(err);
  sp_case_free(c);
}

/* ------------------------------------------------------------ PAT */

typedef struct {
  sp_step_kind kind;
  uint32_t phase;
  int32_t peer;
  uint64_t off; /* SEND: source offset; RECV: destination offset */
  uint64_t bytes;
} xfer;

/* the sends and receives of @rank in a PAT lowering of 4-byte elements */
static guint pat_xfers(sp_coll coll, int32_t n, uint64_t count, int32_t rank, xfer *out, guint max)
{
  int32_t *ranks = sp_group_range(0, 1, n);
  sp_coll_spec s = { .coll = coll, .algo = SP_ALGO_PAT, .dtype = SP_F32, .redop = SP_RED_SUM,
                     .ranks = ranks, .n = n, .count = count };
  GError *err = NULL;
  sp_case *c = sp_case_new_coll_rank(&s, n, rank, FALSE, &err);
  g_assert_no_error(err);
  const sp_program *p = sp_case_program(c, rank);
  guint k = 0;
  for (guint i = 0; i < sp_program_len(p); i++) {
    const sp_step *st = sp_program_step(p, i);
    if (st->kind != SP_STEP_SEND && st->kind != SP_STEP_RECV)
      continue;
    g_assert_cmpuint(k, <, max);
    out[k++] = (xfer){ st->kind, st->phase, st->peer,
                       st->kind == SP_STEP_SEND ? st->src.off : st->dst.off, st->bytes };
  }
  sp_case_free(c);
  g_free(ranks);
  return k;
}

/* PAT on 4 ranks, by hand (block = count x 4 bytes = 40 B; log2 4 = 2 steps):
 * all-gather, rank 1: step 1 swaps single blocks with rank 1^1 = 0 (sends block
 * 1, gets block 0), step 2 swaps pairs with rank 1^2 = 3 (sends blocks 0-1, gets
 * blocks 2-3). Reduce-scatter, rank 1: step 1 halves with rank 3 (sends the
 * partial sums of blocks 2-3, keeps 0-1), step 2 with rank 0 (sends block 0,
 * keeps block 1, its own). */
static void test_pat_schedule(void)
{
  const uint64_t B = 40;
  xfer x[8];
  guint k = pat_xfers(SP_COLL_ALL_GATHER, 4, 10, 1, x, 8);
  g_assert_cmpuint(k, ==, 4);
  const xfer ag[] = { { SP_STEP_SEND, 1, 0, 1 * B, B }, { SP_STEP_RECV, 1, 0, 0, B },
                      { SP_STEP_SEND, 2, 3, 0, 2 * B }, { SP_STEP_RECV, 2, 3, 2 * B, 2 * B } };
  for (guint i = 0; i < k; i++) {
    g_assert_cmpint(x[i].kind, ==, ag[i].kind);
    g_assert_cmpuint(x[i].phase, ==, ag[i].phase);
    g_assert_cmpint(x[i].peer, ==, ag[i].peer);
    g_assert_cmpuint(x[i].off, ==, ag[i].off);
    g_assert_cmpuint(x[i].bytes, ==, ag[i].bytes);
  }
  k = pat_xfers(SP_COLL_REDUCE_SCATTER, 4, 10, 1, x, 8);
  g_assert_cmpuint(k, ==, 4);
  const xfer rs[] = { { SP_STEP_SEND, 1, 3, 2 * B, 2 * B }, { SP_STEP_RECV, 1, 3, 0, 2 * B },
                      { SP_STEP_SEND, 2, 0, 0, B }, { SP_STEP_RECV, 2, 0, 1 * B, B } };
  for (guint i = 0; i < k; i++) {
    g_assert_cmpint(x[i].kind, ==, rs[i].kind);
    g_assert_cmpuint(x[i].phase, ==, rs[i].phase);
    g_assert_cmpint(x[i].peer, ==, rs[i].peer);
    g_assert_cmpuint(x[i].off, ==, rs[i].off);
    g_assert_cmpuint(x[i].bytes, ==, rs[i].bytes);
  }
  /* log2 n exchanges at a power of two n, each member sends (n - 1) blocks in all */
  for (int32_t n = 2; n <= 16; n *= 2) {
    int32_t lg = 0;
    while ((1 << lg) < n)
      lg++;
    for (int32_t r = 0; r < n; r++) {
      shape ag2 = lower_shape(SP_COLL_ALL_GATHER, SP_ALGO_PAT, n, 10, 0, r);
      shape rs2 = lower_shape(SP_COLL_REDUCE_SCATTER, SP_ALGO_PAT, n, 10, 0, r);
      g_assert_cmpuint(ag2.sends, ==, (guint)lg);
      g_assert_cmpuint(rs2.sends, ==, (guint)lg);
      g_assert_cmpuint(ag2.sent, ==, (uint64_t)(n - 1) * B);
      g_assert_cmpuint(rs2.sent, ==, (uint64_t)(n - 1) * B);
    }
  }
}

/* PAT verifies against the reference for every group size 1..16, every dtype and
 * operator; other collectives are refused */
static void test_pat_data(void)
{
  const sp_coll colls[] = { SP_COLL_ALL_GATHER, SP_COLL_REDUCE_SCATTER };
  const sp_dtype dts[] = { SP_F32, SP_BF16, SP_I32 };
  const sp_redop ops[] = { SP_RED_SUM, SP_RED_AVG, SP_RED_MAX, SP_RED_MIN };
  for (int32_t n = 1; n <= 16; n++)
    for (guint c = 0; c < G_N_ELEMENTS(colls); c++)
      for (guint d = 0; d < G_N_ELEMENTS(dts); d++) {
        if (dts[d] == SP_I32 && ops[(n + d) % 4] == SP_RED_AVG)
          continue;
        int32_t *ranks = sp_group_range(0, 1, n);
        sp_coll_spec s = { .coll = colls[c], .algo = SP_ALGO_PAT, .dtype = dts[d],
                           .redop = ops[(n + d) % 4], .ranks = ranks, .n = n, .count = 7 };
        run_case(&s, n);
        g_free(ranks);
      }
  int32_t *ranks = sp_group_range(0, 1, 4);
  sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_PAT, .dtype = SP_F32,
                     .redop = SP_RED_SUM, .ranks = ranks, .n = 4, .count = 8 };
  GError *err = NULL;
  g_assert_null(sp_case_new_coll(&s, 4, TRUE, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(err->message, "all-gather and reduce-scatter only"));
  g_clear_error(&err);
  g_free(ranks);
}

/* ------------------------------------------------------------ verify cases */

static void test_case_checksums(void)
{
  int32_t *ranks = sp_group_range(1, 1, 5);
  sp_coll_spec s = { .coll = SP_COLL_REDUCE_SCATTER, .algo = SP_ALGO_AUTO, .dtype = SP_BF16,
                     .redop = SP_RED_SUM, .ranks = ranks, .n = 5, .count = 17 };
  GError *err = NULL;
  sp_case *c = sp_case_new_coll(&s, 7, TRUE, &err);
  g_assert_no_error(err);
  g_assert_true(sp_loopback_run(sp_case_programs(c), 7, sp_case_all_bufs(c), &err));
  g_assert_true(sp_case_check(c, NULL, NULL, &err));
  g_assert_no_error(err);
  uint64_t sums[5];
  for (int32_t i = 0; i < 5; i++) {
    sums[i] = sp_case_checksum(c, i + 1);
    g_assert_cmpuint(sums[i], ==, sp_case_expected_checksum(c, i + 1));
    /* FNV-1a of the out bytes, written out independently */
    const unsigned char *e = sp_case_expected(c, i + 1);
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t b = 0; b < sp_case_out_bytes(c); b++)
      h = (h ^ e[b]) * 0x100000001b3ull;
    g_assert_cmpuint(h, ==, sums[i]);
  }
  g_assert_cmpuint(sp_case_checksum(c, 0), ==, 0);
  g_assert_cmpuint(sp_case_checksum(c, 6), ==, 0);
  g_assert_cmpuint(sp_case_checksum_all(c), ==, sp_checksum_combine(sums, 5));

  /* a single rank's case has the same program and expected output */
  for (int32_t r = 0; r < 7; r++) {
    sp_case *one = sp_case_new_coll_rank(&s, 7, r, TRUE, &err);
    g_assert_no_error(err);
    g_assert_nonnull(sp_case_program(one, r));
    g_assert_null(sp_case_program(one, (r + 1) % 7));
    g_assert_cmpuint(sp_program_len(sp_case_program(one, r)), ==,
                     sp_program_len(sp_case_program(c, r)));
    if (r >= 1 && r <= 5)
      g_assert_cmpmem(sp_case_expected(one, r), sp_case_out_bytes(c), sp_case_expected(c, r),
                      sp_case_out_bytes(c));
    else
      g_assert_null(sp_case_expected(one, r));
    sp_case_free(one);
  }

  /* the printed lines */
  char *path = NULL;
  int fd = g_file_open_tmp("coll-XXXXXX", &path, &err);
  g_assert_no_error(err);
  FILE *f = fdopen(fd, "w");
  sp_case_print_checksums(c, f);
  fclose(f);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, &err));
  char **lines = g_strsplit(text, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 7); /* 5 ranks + all + trailing "" */
  char *want = g_strdup_printf("checksum rank=1 0x%016" G_GINT64_MODIFIER "x", sums[0]);
  g_assert_cmpstr(lines[0], ==, want);
  g_free(want);
  g_assert_true(g_str_has_prefix(lines[5], "checksum all=0x"));
  g_assert_cmpuint(strlen(lines[5]), ==, strlen("checksum all=0x") + 16);
  g_strfreev(lines);
  g_free(text);
  g_unlink(path);
  g_free(path);

  /* corrupt one byte: the check names the rank and the offset */
  ((unsigned char *)sp_case_bufs(c, 3)[1])[9] ^= 1;
  int32_t br = -1;
  uint64_t bo = 0;
  g_assert_false(sp_case_check(c, &br, &bo, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_MISMATCH);
  g_assert_cmpint(br, ==, 3);
  g_assert_cmpuint(bo, ==, 9);
  g_clear_error(&err);
  sp_case_free(c);
  g_free(ranks);
}

static void test_in_place(void)
{
  const sp_coll colls[] = { SP_COLL_ALL_REDUCE, SP_COLL_REDUCE, SP_COLL_BROADCAST };
  for (size_t ci = 0; ci < G_N_ELEMENTS(colls); ci++)
    for (size_t ai = 0; ai < G_N_ELEMENTS(algos); ai++) {
      int32_t *ranks = sp_group_range(0, 1, 6);
      sp_coll_spec s = { .coll = colls[ci], .algo = algos[ai], .dtype = SP_F32,
                         .redop = SP_RED_SUM, .ranks = ranks, .n = 6, .count = 29, .root = 4,
                         .chunk_bytes = 16 };
      void **ins;
      void **outs = run_custom(&s, 6, TRUE, fill_wild, NULL, &ins);
      void **ref = g_new0(void *, 6);
      for (int i = 0; i < 6; i++)
        ref[i] = g_memdup2(ins[i], 29 * 4 + 1); /* untouched outs keep the input */
      GError *err = NULL;
      g_assert_true(sp_coll_reference(&s, (const void *const *)ins, ref, &err));
      for (int i = 0; i < 6; i++)
        g_assert_cmpmem(outs[i], 29 * 4, ref[i], 29 * 4);
      free_bufs(ref, 6);
      free_bufs(ins, 6);
      free_bufs(outs, 6);
      g_free(ranks);
    }
}

/* ------------------------------------------------------------ errors, names */

/* ------------------------------------------------------------ ring channels */

/* RING with channels: every dtype, group sizes, channel counts 1..4, node blocks
 * (0 = no rotation, the channel count as in the engine's choice, 3 = blocks that
 * do not divide n), counts that leave channels, segments and chunks uneven or
 * empty, chunked and not; bitwise against the reference. */
static void test_channels_matrix(gconstpointer data)
{
  sp_coll coll = (sp_coll)GPOINTER_TO_INT(data);
  static const int32_t ns[] = { 2, 3, 4, 5, 7, 8, 13, 16 };
  guint cases = 0;
  for (int dt = 0; dt < SP_DTYPE_COUNT; dt++)
    for (size_t ni = 0; ni < G_N_ELEMENTS(ns); ni++) {
      int32_t n = ns[ni];
      int32_t *ranks = sp_group_range(0, 1, n);
      for (int32_t ch = 1; ch <= 4; ch++) {
        const int32_t blocks[] = { 0, ch, 3 };
        for (size_t bi = 0; bi < G_N_ELEMENTS(blocks); bi++) {
          uint64_t counts[] = { 0, 1, (uint64_t)n + 1, 37 };
          for (size_t ci = 0; ci < G_N_ELEMENTS(counts); ci++)
            for (int chunked = 0; chunked < 2; chunked++) {
              size_t es = sp_dtype_size((sp_dtype)dt);
              sp_coll_spec s = {
                .coll = coll, .algo = SP_ALGO_RING, .dtype = (sp_dtype)dt,
                .redop = (sp_redop)((ni + ci + bi + (size_t)dt + (size_t)ch) % SP_REDOP_COUNT),
                .ranks = ranks, .n = n, .count = counts[ci], .chunk_bytes = chunked ? 3 * es : 0,
                .op_id = 9, .tag = 200, .channels = ch, .channel_block = blocks[bi],
              };
              run_case(&s, n);
              cases++;
            }
        }
      }
      g_free(ranks);
    }
  g_assert_cmpuint(cases, ==, (guint)SP_DTYPE_COUNT * 8 * 4 * 3 * 4 * 2);
}

/* The permutation of coll.h: blocks of B members rotated by c, a short last block
 * rotated by c mod its length. */
static void test_channel_perm(void)
{
  int32_t ranks[10];
  for (int i = 0; i < 10; i++)
    ranks[i] = i;
  /* n = 10, B = 4: P_0 = identity, P_1 = [1 2 3 0 | 5 6 7 4 | 9 8],
   * P_2 = [2 3 0 1 | 6 7 4 5 | 8 9], P_3 = [3 0 1 2 | 7 4 5 6 | 9 8] */
  sp_coll_spec s = { .coll = SP_COLL_ALL_GATHER, .algo = SP_ALGO_RING, .dtype = SP_I32,
                     .ranks = ranks, .n = 10, .count = 4, .channels = 4, .channel_block = 4 };
  GError *err = NULL;
  /* the ring neighbours of member 3 per channel: channel c sends to the member after
   * 3 in P_c and receives from the one before */
  static const int32_t next[4] = { 4, 0, 0, 0 }, prev[4] = { 2, 2, 2, 8 };
  sp_case *k = sp_case_new_coll(&s, 10, FALSE, &err);
  g_assert_no_error(err);
  const sp_program *p = sp_case_program(k, 3);
  /* the first block holds channel 0..3's step-0 send and receive, in channel order */
  guint seen = 0;
  for (guint i = 0; i < sp_program_len(p) && seen < 8; i++) {
    const sp_step *st = sp_program_step(p, i);
    if (st->kind == SP_STEP_SEND) {
      g_assert_cmpint(st->peer, ==, next[seen / 2]);
      seen++;
    } else if (st->kind == SP_STEP_RECV) {
      g_assert_cmpint(st->peer, ==, prev[seen / 2]);
      seen++;
    } else if (st->kind == SP_STEP_WAIT) {
      break;
    }
  }
  g_assert_cmpuint(seen, ==, 8);
  sp_case_free(k);
}

/* Hand-derived orders, n = 4, two nodes of two (channel_block 2), x = {1e8, -1e8,
 * 1, 2} (f32 spacing at 1e8 is 8, so 1e8 + 2 = 1e8 and 1 - 1e8 = -1e8).
 * P_0 = [0 1 2 3], P_1 = [1 0 3 2].
 * all-reduce, count 8, 2 channels: part 0 = elements 0..3 on P_0, one element per
 * segment s = ((x[s+1] + x[s+2]) + x[s+3]) + x[s]:
 *   s=0: ((-1e8 + 1) + 2) + 1e8 = 0; s=1: ((1 + 2) + 1e8) - 1e8 = 0;
 *   s=2: ((2 + 1e8) - 1e8) + 1 = 1; s=3: ((1e8 - 1e8) + 1) + 2 = 3;
 * part 1 = elements 4..7 on P_1, segment s starts at P_1[s+1]:
 *   s=0: x0,x3,x2,x1 = ((1e8 + 2) + 1) - 1e8 = 0; s=1: x3,x2,x1,x0 = ((2 + 1) - 1e8) + 1e8 = 0;
 *   s=2: x2,x1,x0,x3 = ((1 - 1e8) + 1e8) + 2 = 2; s=3: x1,x0,x3,x2 = ((-1e8 + 1e8) + 2) + 1 = 3.
 * One ring (segments of two): {0,0, 0,0, 1,1, 3,3}.
 * reduce-scatter, count 2: element 0 of member m on P_0 as above (0, 0, 1, 3);
 * element 1 on P_1 from m's position q + 1: m=0 (q=1): x3,x2,x1,x0 = 0;
 * m=1 (q=0): x0,x3,x2,x1 = 0; m=2 (q=3): x1,x0,x3,x2 = 3; m=3 (q=2): x2,x1,x0,x3 = 2. */
static void test_channel_orders(void)
{
  static const float x4[] = { 1e8f, -1e8f, 1.0f, 2.0f };
  int32_t *ranks = sp_group_range(0, 1, 4);
  sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                     .redop = SP_RED_SUM, .ranks = ranks, .n = 4, .count = 8, .channels = 2,
                     .channel_block = 2 };
  static const float ar[8] = { 0, 0, 1, 3, 0, 0, 2, 3 }, ar1[8] = { 0, 0, 0, 0, 1, 1, 3, 3 };
  for (int in_place = 0; in_place < 2; in_place++) {
    void **o = run_custom(&s, 4, in_place, fill_magn, (gpointer)x4, NULL);
    for (int i = 0; i < 4; i++)
      for (int e = 0; e < 8; e++)
        g_assert_cmpfloat(((float *)o[i])[e], ==, ar[e]);
    free_bufs(o, 4);
  }
  s.channels = 1;
  void **o = run_custom(&s, 4, FALSE, fill_magn, (gpointer)x4, NULL);
  for (int i = 0; i < 4; i++)
    for (int e = 0; e < 8; e++)
      g_assert_cmpfloat(((float *)o[i])[e], ==, ar1[e]);
  free_bufs(o, 4);
  s.coll = SP_COLL_REDUCE_SCATTER;
  s.count = 2;
  s.channels = 2;
  static const float rs[4][2] = { { 0, 0 }, { 0, 0 }, { 1, 3 }, { 3, 2 } };
  o = run_custom(&s, 4, FALSE, fill_magn, (gpointer)x4, NULL);
  for (int i = 0; i < 4; i++)
    for (int e = 0; e < 2; e++)
      g_assert_cmpfloat(((float *)o[i])[e], ==, rs[i][e]);
  free_bufs(o, 4);
  /* broadcast and reduce chains ignore channels: same programs as one ring */
  s.coll = SP_COLL_REDUCE;
  s.root = 1;
  GError *err = NULL;
  sp_case *a = sp_case_new_coll(&s, 4, FALSE, &err);
  s.channels = 1;
  sp_case *b = sp_case_new_coll(&s, 4, FALSE, &err);
  g_assert_no_error(err);
  for (int32_t r = 0; r < 4; r++)
    g_assert_cmpuint(sp_program_len(sp_case_program(a, r)), ==, sp_program_len(sp_case_program(b, r)));
  sp_case_free(a);
  sp_case_free(b);
  g_free(ranks);
}

/* Two nodes of 8 (n = 16, channel_block 8), 8 channels: the same number of steps
 * (WAITs) as one ring and the same volume, 2(n-1)/n S; every block posts one send
 * per channel, and exactly one of them leaves the node: each GPU's NIC carries one
 * channel (with one ring only members 7 and 15 send across). */
static void test_channel_shape(void)
{
  int32_t n = 16;
  int32_t *ranks = sp_group_range(0, 1, n);
  uint64_t count = (uint64_t)n * 8 * 24, S = count * 4;
  for (int32_t ch = 1; ch <= 8; ch *= 8) {
    sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                       .redop = SP_RED_SUM, .ranks = ranks, .n = n, .count = count,
                       .channels = ch, .channel_block = 8 };
    GError *err = NULL;
    sp_case *k = sp_case_new_coll(&s, n, FALSE, &err);
    g_assert_no_error(err);
    for (int32_t r = 0; r < n; r++) {
      const sp_program *p = sp_case_program(k, r);
      shape sh = shape_of(p);
      g_assert_cmpuint(sh.waits, ==, 2 * (n - 1));
      g_assert_cmpuint(sh.sent * (uint64_t)n, ==, 2 * (uint64_t)(n - 1) * S);
      guint sends = 0, cross = 0, blocks_cross = 0;
      for (guint i = 0; i < sp_program_len(p); i++) {
        const sp_step *st = sp_program_step(p, i);
        if (st->kind == SP_STEP_SEND) {
          sends++;
          cross += st->peer / 8 != r / 8;
        } else if (st->kind == SP_STEP_WAIT) {
          g_assert_cmpuint(sends, ==, (guint)ch);
          blocks_cross += cross;
          g_assert_cmpuint(cross, <=, 1);
          sends = cross = 0;
        }
      }
      if (ch == 8)
        g_assert_cmpuint(blocks_cross, ==, 2 * (n - 1));
      else
        g_assert_cmpuint(blocks_cross, ==, r % 8 == 7 ? 2 * (guint)(n - 1) : 0);
    }
    sp_case_free(k);
  }
  g_free(ranks);
}

static void expect_error(const sp_coll_spec *s, int code, const char *fragment)
{
  GError *err = NULL;
  sp_program *p = sp_program_new(s->ranks ? s->ranks[0] : 0);
  uint32_t b = sp_program_add_buffer(p, 1 << 20, "in");
  uint32_t o = sp_program_add_buffer(p, 1 << 20, "out");
  g_assert_false(sp_lower_coll(p, s, b, o, &err));
  g_assert_error(err, SP_ERROR, code);
  if (strstr(err->message, fragment) == NULL)
    g_error("error '%s' lacks '%s'", err->message, fragment);
  g_clear_error(&err);
  sp_program_free(p);
}

static void test_errors(void)
{
  int32_t four[] = { 0, 1, 2, 3 };
  sp_coll_spec c = { .coll = SP_COLL_ALL_REDUCE, .algo = SP_ALGO_RING, .dtype = SP_F32,
                     .ranks = four, .n = 4, .count = 8, .channels = SP_MAX_CHANNELS + 1 };
  expect_error(&c, SP_ERROR_INVALID, "65 channels");
  c.channels = -1;
  expect_error(&c, SP_ERROR_INVALID, "channels");
  c.channels = 2;
  c.channel_block = -4;
  expect_error(&c, SP_ERROR_INVALID, "channel block -4");
  int32_t dup[] = { 0, 3, 1, 3 };
  sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .dtype = SP_F32, .ranks = dup, .n = 4,
                     .count = 8 };
  expect_error(&s, SP_ERROR_INVALID, "appears twice");
  int32_t neg[] = { 0, -2 };
  s.ranks = neg;
  s.n = 2;
  expect_error(&s, SP_ERROR_INVALID, "negative");
  int32_t ok[] = { 0, 1, 2 };
  s.ranks = ok;
  s.n = 3;
  s.coll = SP_COLL_BROADCAST;
  s.root = 3;
  expect_error(&s, SP_ERROR_INVALID, "root 3");
  s.root = -1;
  s.coll = SP_COLL_REDUCE;
  expect_error(&s, SP_ERROR_INVALID, "root -1");
  s.root = 0;
  s.coll = SP_COLL_SEND_RECV;
  expect_error(&s, SP_ERROR_INVALID, "exactly 2");
  s.coll = SP_COLL_ALL_TO_ALL;
  s.algo = SP_ALGO_RING;
  expect_error(&s, SP_ERROR_UNSUPPORTED, "use direct");
  s.algo = SP_ALGO_TREE;
  expect_error(&s, SP_ERROR_UNSUPPORTED, "use direct");
  s.algo = SP_ALGO_AUTO;
  s.count = G_MAXUINT64 / 2;
  expect_error(&s, SP_ERROR_INVALID, "overflows");
  s.count = 8;
  s.n = 0;
  expect_error(&s, SP_ERROR_INVALID, "at least one");
  s.n = 3;
  s.tag = -5;
  expect_error(&s, SP_ERROR_INVALID, "tag");
  s.tag = 0;
  /* buffers too small */
  s.coll = SP_COLL_ALL_GATHER;
  s.count = 1 << 19;
  expect_error(&s, SP_ERROR_INVALID, "needs");
  /* all-gather in place cannot be */
  GError *err = NULL;
  s.count = 8;
  sp_program *p = sp_program_new(1);
  uint32_t b = sp_program_add_buffer(p, 1024, "io");
  g_assert_false(sp_lower_coll(p, &s, b, b, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  sp_program_free(p);
  /* a case whose group does not fit in the world */
  g_assert_null(sp_case_new_coll(&s, 2, TRUE, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  /* reference refuses the unsupported pair as well */
  s.coll = SP_COLL_ALL_TO_ALL;
  s.algo = SP_ALGO_TREE;
  g_assert_false(sp_coll_reference(&s, NULL, NULL, &err));
  g_assert_nonnull(err);
  g_clear_error(&err);
}

static void test_names_policy(void)
{
  for (int c = 0; c < SP_COLL_COUNT; c++) {
    sp_coll back;
    g_assert_true(sp_coll_parse(sp_coll_name((sp_coll)c), &back, NULL));
    g_assert_cmpint(back, ==, c);
  }
  for (int a = 0; a < SP_ALGO_COUNT; a++) {
    sp_algo back;
    g_assert_true(sp_algo_parse(sp_algo_name((sp_algo)a), &back, NULL));
    g_assert_cmpint(back, ==, a);
  }
  sp_coll cc;
  g_assert_true(sp_coll_parse("allreduce", &cc, NULL));
  g_assert_cmpint(cc, ==, SP_COLL_ALL_REDUCE);
  GError *err = NULL;
  g_assert_false(sp_coll_parse("allreduc", &cc, &err));
  g_assert_nonnull(strstr(err->message, "all-reduce"));
  g_clear_error(&err);
  sp_algo aa;
  g_assert_false(sp_algo_parse("rings", &aa, &err));
  g_assert_nonnull(strstr(err->message, "ring"));
  g_clear_error(&err);

  g_assert_cmpstr(sp_coll_name(SP_COLL_REDUCE_SCATTER), ==, "reduce-scatter");
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_ALL_REDUCE, 8), ==, 14.0 / 8.0);
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_ALL_GATHER, 8), ==, 7.0 / 8.0);
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_REDUCE_SCATTER, 4), ==, 0.75);
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_ALL_TO_ALL, 2), ==, 0.5);
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_BROADCAST, 8), ==, 1.0);
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_REDUCE, 8), ==, 1.0);
  g_assert_cmpfloat(sp_coll_busbw_factor(SP_COLL_SEND_RECV, 2), ==, 1.0);

  int32_t r8[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
  sp_coll_spec s = { .coll = SP_COLL_ALL_REDUCE, .dtype = SP_F32, .ranks = r8, .n = 8 };
  s.count = 1024; /* 4 KiB */
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_TREE);
  s.count = 1 << 20; /* 4 MiB */
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_RING);
  s.algo = SP_ALGO_DIRECT;
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_DIRECT);
  s.algo = SP_ALGO_AUTO;
  s.coll = SP_COLL_ALL_TO_ALL;
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_DIRECT);
  s.coll = SP_COLL_ALL_GATHER;
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_RING);
  /* broadcast and reduce: NCCL's pipelined chain (NCCL has no other algorithm) */
  s.coll = SP_COLL_BROADCAST;
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_RING);
  s.coll = SP_COLL_REDUCE;
  g_assert_cmpint(sp_algo_choose(&s), ==, SP_ALGO_RING);
  s.coll = SP_COLL_BROADCAST;

  g_assert_cmpint(sp_coll_index_of(&s, 5), ==, 5);
  g_assert_cmpint(sp_coll_index_of(&s, 9), ==, -1);
  s.coll = SP_COLL_ALL_GATHER;
  s.count = 3;
  g_assert_cmpuint(sp_coll_in_count(&s), ==, 3);
  g_assert_cmpuint(sp_coll_out_count(&s), ==, 24);
  s.coll = SP_COLL_REDUCE_SCATTER;
  g_assert_cmpuint(sp_coll_in_count(&s), ==, 24);
  g_assert_cmpuint(sp_coll_out_count(&s), ==, 3);

  int32_t *g = sp_group_range(3, 4, 3);
  g_assert_cmpint(g[0], ==, 3);
  g_assert_cmpint(g[2], ==, 11);
  g_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (int c = 0; c < SP_COLL_COUNT; c++) {
    char *path = g_strdup_printf("/coll/matrix/%s", sp_coll_name((sp_coll)c));
    g_test_add_data_func(path, GINT_TO_POINTER(c), test_matrix);
    g_free(path);
  }
  const sp_coll chc[] = { SP_COLL_ALL_REDUCE, SP_COLL_ALL_GATHER, SP_COLL_REDUCE_SCATTER };
  for (gsize c = 0; c < G_N_ELEMENTS(chc); c++) {
    char *path = g_strdup_printf("/coll/channels/matrix/%s", sp_coll_name(chc[c]));
    g_test_add_data_func(path, GINT_TO_POINTER((int)chc[c]), test_channels_matrix);
    g_free(path);
  }
  g_test_add_func("/coll/channels/perm", test_channel_perm);
  g_test_add_func("/coll/channels/orders", test_channel_orders);
  g_test_add_func("/coll/channels/shape", test_channel_shape);
  g_test_add_func("/coll/noncontiguous", test_noncontiguous);
  g_test_add_func("/coll/order-sensitive", test_order_sensitive);
  g_test_add_func("/coll/allreduce-constants", test_allreduce_constants);
  g_test_add_func("/coll/avg-float", test_avg_float);
  g_test_add_func("/coll/block-placement", test_block_placement);
  g_test_add_func("/coll/hand-orders", test_hand_orders);
  g_test_add_func("/coll/hier-orders", test_hier_orders);
  g_test_add_func("/coll/hier-matrix", test_hier_matrix);
  g_test_add_func("/coll/ring-shape", test_ring_shape);
  g_test_add_func("/coll/a2a-by-rail", test_a2a_by_rail);
  g_test_add_func("/coll/hier-by-rail", test_hier_by_rail);
  g_test_add_func("/coll/dbtree-shape", test_dbtree_shape);
  g_test_add_func("/coll/pat-schedule", test_pat_schedule);
  g_test_add_func("/coll/pat-data", test_pat_data);
  g_test_add_func("/coll/step-fields", test_steps_fields);
  g_test_add_func("/coll/case-checksums", test_case_checksums);
  g_test_add_func("/coll/in-place", test_in_place);
  g_test_add_func("/coll/errors", test_errors);
  g_test_add_func("/coll/names-policy", test_names_policy);
  return g_test_run();
}
