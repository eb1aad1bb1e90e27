/* Programs: construction, validation errors (bounds, strides, peers, counts),
 * host kernels for local steps checked by hand. */
#include "config.h"
#include <glib.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/program.h"

static void test_build(void)
{
  sp_program *p = sp_program_new(2);
  g_assert_cmpint(p->rank, ==, 2);
  g_assert_cmpuint(sp_program_add_buffer(p, 64, "in"), ==, 0);
  g_assert_cmpuint(sp_program_add_buffer(p, 32, "out"), ==, 1);
  g_assert_cmpstr(g_array_index(p->bufs, sp_buffer, 1).name, ==, "out");
  sp_step s = { .kind = SP_STEP_SEND, .peer = 0, .src = { 0, 8 }, .bytes = 16 };
  g_assert_cmpuint(sp_program_append(p, &s), ==, 0);
  s.kind = SP_STEP_WAIT;
  g_assert_cmpuint(sp_program_append(p, &s), ==, 1);
  g_assert_cmpuint(sp_program_len(p), ==, 2);
  g_assert_cmpint(sp_program_step(p, 0)->kind, ==, SP_STEP_SEND);
  g_assert_cmpuint(sp_program_step(p, 0)->src.off, ==, 8);
  GError *err = NULL;
  g_assert_true(sp_program_validate(p, 4, &err));
  g_assert_no_error(err);
  g_assert_cmpstr(sp_step_kind_name(SP_STEP_RECV), ==, "recv");
  g_assert_cmpstr(sp_step_kind_name(SP_STEP_COMPUTE), ==, "compute");
  g_assert_cmpstr(sp_step_kind_name(SP_STEP_REDUCE), ==, "reduce");
  sp_program_free(p);
  sp_program_free(NULL);
}

/* Validate a one-step (plus WAIT for comms) program over one buffer of
 * @p buf_bytes; return the error message or NULL when valid. */
static char *check_one(const sp_step *s, uint64_t buf_bytes, int32_t world)
{
  sp_program *p = sp_program_new(1);
  sp_program_add_buffer(p, buf_bytes, "b");
  sp_program_append(p, s);
  if (s->kind == SP_STEP_SEND || s->kind == SP_STEP_RECV) {
    sp_step w = { .kind = SP_STEP_WAIT };
    sp_program_append(p, &w);
  }
  GError *err = NULL;
  gboolean ok = sp_program_validate(p, world, &err);
  sp_program_free(p);
  if (ok) {
    g_assert_no_error(err);
    return NULL;
  }
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  char *msg = g_strdup(err->message);
  g_error_free(err);
  return msg;
}

#define EXPECT_OK(s, bytes) g_assert_null(check_one(&(s), (bytes), 4))
#define EXPECT_FAIL(s, bytes, needle)                         \
  do {                                                        \
    char *m_ = check_one(&(s), (bytes), 4);                   \
    g_assert_nonnull(m_);                                     \
    if (!strstr(m_, (needle)))                                \
      g_error("message '%s' lacks '%s'", m_, (needle));       \
    g_free(m_);                                               \
  } while (0)

static void test_validate_bounds(void)
{
  sp_step s = { .kind = SP_STEP_SEND, .peer = 0, .src = { 0, 60 }, .bytes = 4 };
  EXPECT_OK(s, 64);
  s.src.off = 61; /* [61, 65) */
  EXPECT_FAIL(s, 64, "[61, 65) is outside buffer 0 'b' of 64 bytes");
  s.src.buf = 1;
  s.src.off = 0;
  EXPECT_FAIL(s, 64, "buffer index 1 is out of range");

  /* strided: 4 rows of 4 bytes, stride 10: last row ends at 3*10 + 4 = 34 */
  sp_step r = { .kind = SP_STEP_RECV, .peer = 3, .dst = { 0, 0 }, .bytes = 16, .rows = 4,
                .row_bytes = 4, .dst_stride = 10 };
  EXPECT_OK(r, 34);
  EXPECT_FAIL(r, 33, "overruns buffer 0");
  r.dst.off = 1;
  EXPECT_FAIL(r, 34, "overruns");
  r.dst.off = 0;
  r.bytes = 12;
  EXPECT_FAIL(r, 64, "bytes == rows * row_bytes");
  r.bytes = 16;
  r.dst_stride = 3; /* rows would overlap */
  EXPECT_FAIL(r, 64, "overlap");
  /* a huge stride must not wrap around */
  r.dst_stride = G_MAXUINT64 / 2;
  EXPECT_FAIL(r, 64, "overruns");

  sp_step f = { .kind = SP_STEP_FILL, .dst = { 0, 10 }, .bytes = 55 };
  EXPECT_FAIL(f, 64, "[10, 65)");
  f.bytes = 54;
  EXPECT_OK(f, 64);
}

static void test_validate_peers(void)
{
  sp_step s = { .kind = SP_STEP_SEND, .peer = 1, .src = { 0, 0 }, .bytes = 4 };
  EXPECT_FAIL(s, 8, "the rank itself"); /* program rank is 1 */
  s.peer = 4;
  EXPECT_FAIL(s, 8, "out of range");
  s.peer = -1;
  EXPECT_FAIL(s, 8, "[0, 4)");
  s.peer = 3;
  EXPECT_OK(s, 8);

  /* posts not completed by a WAIT */
  sp_program *p = sp_program_new(0);
  sp_program_add_buffer(p, 8, "b");
  sp_program_append(p, &s);
  GError *err = NULL;
  g_assert_false(sp_program_validate(p, 4, &err));
  g_assert_nonnull(strstr(err->message, "append a WAIT"));
  g_clear_error(&err);
  /* rank outside the world */
  g_assert_false(sp_program_validate(p, 0, &err));
  g_clear_error(&err);
  sp_program_free(p);
}

static void test_validate_elems(void)
{
  sp_step s = { .kind = SP_STEP_REDUCE, .dst = { 0, 0 }, .src = { 0, 32 }, .count = 8,
                .dtype = SP_F32, .redop = SP_RED_SUM };
  EXPECT_OK(s, 64);
  s.bytes = 16; /* 8 x f32 = 32 bytes */
  EXPECT_FAIL(s, 64, "disagree with count 8 x f32");
  s.bytes = 32;
  EXPECT_OK(s, 64);
  s.count = 9; /* src [32, 68) */
  s.bytes = 0;
  EXPECT_FAIL(s, 64, "src range [32, 68)");
  s.count = 16;
  s.dtype = SP_F16; /* 16 x 2 bytes fits */
  EXPECT_OK(s, 64);

  sp_step c = { .kind = SP_STEP_SCALE, .dst = { 0, 0 }, .count = 4, .dtype = SP_I32, .scale = 2,
                .divide = TRUE };
  EXPECT_OK(c, 16);
  c.scale = 2.5;
  EXPECT_FAIL(c, 16, "integer factor");
  c.scale = 0;
  EXPECT_FAIL(c, 16, "divisor");
  c.dtype = SP_F32;
  EXPECT_FAIL(c, 16, "divisor");
  c.scale = 0.5;
  EXPECT_OK(c, 16);
  c.count = 5;
  EXPECT_FAIL(c, 16, "[0, 20)");
}

static void test_strided_copy(void)
{
  guchar src[24], dst[16];
  for (int i = 0; i < 24; i++)
    src[i] = (guchar)i;
  memset(dst, 0xEE, sizeof dst);
  void *bufs[2] = { src, dst };
  /* 3 rows of 2 bytes: src rows at 1, 9, 17; dst rows at 2, 5, 8 */
  sp_step s = { .kind = SP_STEP_COPY, .src = { 0, 1 }, .dst = { 1, 2 }, .bytes = 6, .rows = 3,
                .row_bytes = 2, .src_stride = 8, .dst_stride = 3 };
  GError *err = NULL;
  g_assert_true(sp_step_run_host(&s, bufs, &err));
  g_assert_no_error(err);
  const guchar expect[16] = { 0xEE, 0xEE, 1, 2, 0xEE, 9, 10, 0xEE, 17, 18, 0xEE, 0xEE,
                              0xEE, 0xEE, 0xEE, 0xEE };
  g_assert_cmpmem(dst, 16, expect, 16);

  /* stride 0 on one side means packed rows */
  memset(dst, 0, sizeof dst);
  sp_step t = { .kind = SP_STEP_COPY, .src = { 0, 4 }, .dst = { 1, 0 }, .bytes = 6, .rows = 3,
                .row_bytes = 2, .src_stride = 0, .dst_stride = 5 };
  g_assert_true(sp_step_run_host(&t, bufs, &err));
  const guchar expect2[16] = { 4, 5, 0, 0, 0, 6, 7, 0, 0, 0, 8, 9, 0, 0, 0, 0 };
  g_assert_cmpmem(dst, 16, expect2, 16);

  /* and the validator agrees on the extents: dst ends at 2*5 + 2 = 12 */
  sp_program *p = sp_program_new(0);
  sp_program_add_buffer(p, 24, "src");
  sp_program_add_buffer(p, 12, "dst");
  sp_program_append(p, &t);
  g_assert_true(sp_program_validate(p, 1, &err));
  g_assert_no_error(err);
  sp_program_free(p);
}

static void test_overlap(void)
{
  guchar b[9] = "abcdefgh";
  void *bufs[1] = { b };
  GError *err = NULL;
  /* contiguous overlap behaves like memmove */
  sp_step s = { .kind = SP_STEP_COPY, .src = { 0, 0 }, .dst = { 0, 2 }, .bytes = 5 };
  g_assert_true(sp_step_run_host(&s, bufs, &err));
  g_assert_cmpstr((char *)b, ==, "ababcdeh");
  /* strided overlap inside one buffer is refused, by the validator too */
  sp_step t = { .kind = SP_STEP_COPY, .src = { 0, 0 }, .dst = { 0, 1 }, .bytes = 4, .rows = 2,
                .row_bytes = 2, .src_stride = 4, .dst_stride = 4 };
  g_assert_false(sp_step_run_host(&t, bufs, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "overlap"));
  g_clear_error(&err);
  EXPECT_FAIL(t, 8, "overlap");
  t.dst.off = 6; /* rows at 6..7 and 10..11 vs src 0..5: disjoint */
  EXPECT_OK(t, 12);
}

static void test_local_steps(void)
{
  float a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 };
  guchar pad[8];
  memset(pad, 0, sizeof pad);
  void *bufs[3] = { a, b, pad };
  GError *err = NULL;
  sp_step r = { .kind = SP_STEP_REDUCE, .dst = { 0, 4 }, .src = { 1, 0 }, .count = 2,
                .dtype = SP_F32, .redop = SP_RED_MAX };
  g_assert_true(sp_step_run_host(&r, bufs, &err));
  g_assert_cmpfloat(a[0], ==, 1);
  g_assert_cmpfloat(a[1], ==, 10);
  g_assert_cmpfloat(a[2], ==, 20);
  g_assert_cmpfloat(a[3], ==, 4);
  r.redop = SP_RED_SUM;
  g_assert_true(sp_step_run_host(&r, bufs, &err));
  g_assert_cmpfloat(a[1], ==, 20);
  g_assert_cmpfloat(a[2], ==, 40);

  sp_step c = { .kind = SP_STEP_SCALE, .dst = { 1, 8 }, .count = 2, .dtype = SP_F32, .scale = 4,
                .divide = TRUE };
  g_assert_true(sp_step_run_host(&c, bufs, &err));
  g_assert_cmpfloat(b[1], ==, 20);
  g_assert_cmpfloat(b[2], ==, 7.5);
  g_assert_cmpfloat(b[3], ==, 10);

  sp_step f = { .kind = SP_STEP_FILL, .dst = { 2, 3 }, .bytes = 4, .fill_byte = 0x5A };
  g_assert_true(sp_step_run_host(&f, bufs, &err));
  const guchar ef[8] = { 0, 0, 0, 0x5A, 0x5A, 0x5A, 0x5A, 0 };
  g_assert_cmpmem(pad, 8, ef, 8);

  sp_step k = { .kind = SP_STEP_COMPUTE, .flops = 1e12 };
  g_assert_true(sp_step_run_host(&k, bufs, &err));
  g_assert_cmpmem(pad, 8, ef, 8);

  sp_step snd = { .kind = SP_STEP_SEND, .peer = 1, .bytes = 4 };
  g_assert_false(sp_step_run_host(&snd, bufs, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "not a local step"));
  g_clear_error(&err);
  sp_step w = { .kind = SP_STEP_WAIT };
  g_assert_false(sp_step_run_host(&w, bufs, &err));
  g_clear_error(&err);
}

static void test_pack_unpack(void)
{
  guchar base[12], out[6], back[12];
  for (int i = 0; i < 12; i++)
    base[i] = (guchar)(100 + i);
  sp_pack_host(out, base + 1, 3, 2, 4); /* rows at 1, 5, 9 */
  const guchar e[6] = { 101, 102, 105, 106, 109, 110 };
  g_assert_cmpmem(out, 6, e, 6);
  memset(back, 0, sizeof back);
  sp_unpack_host(back + 1, out, 3, 2, 4);
  const guchar eb[12] = { 0, 101, 102, 0, 0, 105, 106, 0, 0, 109, 110, 0 };
  g_assert_cmpmem(back, 12, eb, 12);
  sp_pack_host(out, base, 1, 5, 0); /* one row: contiguous */
  const guchar ec[5] = { 100, 101, 102, 103, 104 };
  g_assert_cmpmem(out, 5, ec, 5);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/program/build", test_build);
  g_test_add_func("/program/validate-bounds", test_validate_bounds);
  g_test_add_func("/program/validate-peers", test_validate_peers);
  g_test_add_func("/program/validate-elems", test_validate_elems);
  g_test_add_func("/program/strided-copy", test_strided_copy);
  g_test_add_func("/program/overlap", test_overlap);
  g_test_add_func("/program/local-steps", test_local_steps);
  g_test_add_func("/program/pack-unpack", test_pack_unpack);
  return g_test_run();
}
