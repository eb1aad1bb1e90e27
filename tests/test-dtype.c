/* dtypes: names, half conversions against known bit patterns and an independent
 * formula/compiler reference, reductions and scaling on hand-computed arrays,
 * fill patterns, FNV-1a checksums. */
#include "config.h"
#include <glib.h>
#include <math.h>
#include <string.h>
#include "spsim/dtype.h"
#include "spsim/error.h"

static uint32_t fbits(float f)
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bitsf(uint32_t u)
{
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_names(void)
{
  static const struct {
    const char *s;
    sp_dtype t;
    size_t size;
  } cases[] = {
    { "f32", SP_F32, 4 },      { "float32", SP_F32, 4 }, { "f16", SP_F16, 2 },
    { "float16", SP_F16, 2 },  { "bf16", SP_BF16, 2 },   { "bfloat16", SP_BF16, 2 },
    { "i32", SP_I32, 4 },      { "int32", SP_I32, 4 },   { "i64", SP_I64, 8 },
    { "int64", SP_I64, 8 },    { "u8", SP_U8, 1 },       { "uint8", SP_U8, 1 },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    sp_dtype t = SP_DTYPE_COUNT;
    GError *err = NULL;
    g_assert_true(sp_dtype_parse(cases[i].s, &t, &err));
    g_assert_no_error(err);
    g_assert_cmpint(t, ==, cases[i].t);
    g_assert_cmpuint(sp_dtype_size(t), ==, cases[i].size);
  }
  g_assert_cmpstr(sp_dtype_name(SP_BF16), ==, "bf16");
  g_assert_cmpstr(sp_dtype_name(SP_U8), ==, "u8");

  sp_dtype t;
  GError *err = NULL;
  g_assert_false(sp_dtype_parse("f8", &t, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "'f8'"));
  g_assert_nonnull(strstr(err->message, "bf16"));
  g_assert_nonnull(strstr(err->message, "u8"));
  g_clear_error(&err);

  sp_redop op;
  g_assert_true(sp_redop_parse("avg", &op, NULL));
  g_assert_cmpint(op, ==, SP_RED_AVG);
  g_assert_true(sp_redop_parse("min", &op, NULL));
  g_assert_cmpint(op, ==, SP_RED_MIN);
  g_assert_cmpstr(sp_redop_name(SP_RED_MAX), ==, "max");
  g_assert_false(sp_redop_parse("prod", &op, &err));
  g_assert_nonnull(strstr(err->message, "sum, avg, max, min"));
  g_clear_error(&err);
}

static void test_f16_known(void)
{
  g_assert_cmpfloat(sp_f16_to_f32(0x3C00), ==, 1.0f);
  g_assert_cmpfloat(sp_f16_to_f32(0xC000), ==, -2.0f);
  g_assert_cmpfloat(sp_f16_to_f32(0x7BFF), ==, 65504.0f);
  g_assert_cmpfloat(sp_f16_to_f32(0x0001), ==, ldexpf(1.0f, -24));
  g_assert_cmpfloat(sp_f16_to_f32(0x03FF), ==, ldexpf(1023.0f, -24));
  g_assert_cmpfloat(sp_f16_to_f32(0x0400), ==, ldexpf(1.0f, -14));
  g_assert_cmpfloat(sp_f16_to_f32(0x3555), ==, 0.333251953125f);
  g_assert_cmphex(fbits(sp_f16_to_f32(0x8000)), ==, 0x80000000u);
  g_assert_true(isinf(sp_f16_to_f32(0x7C00)) && sp_f16_to_f32(0x7C00) > 0);
  g_assert_true(isinf(sp_f16_to_f32(0xFC00)) && sp_f16_to_f32(0xFC00) < 0);
  g_assert_true(isnan(sp_f16_to_f32(0x7E00)));
  g_assert_true(isnan(sp_f16_to_f32(0x7C01))); /* signalling NaN stays NaN */

  g_assert_cmphex(sp_f32_to_f16(1.0f), ==, 0x3C00);
  g_assert_cmphex(sp_f32_to_f16(-2.0f), ==, 0xC000);
  g_assert_cmphex(sp_f32_to_f16(-0.0f), ==, 0x8000);
  /* ties to even: 1 + 2^-11 lies halfway between 0x3C00 and 0x3C01 */
  g_assert_cmphex(sp_f32_to_f16(1.0f + ldexpf(1.0f, -11)), ==, 0x3C00);
  g_assert_cmphex(sp_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), ==, 0x3C02);
  g_assert_cmphex(sp_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), ==, 0x3C01);
  g_assert_cmphex(sp_f32_to_f16(-(1.0f + 3 * ldexpf(1.0f, -11))), ==, 0xBC02);
  /* largest finite and overflow */
  g_assert_cmphex(sp_f32_to_f16(65504.0f), ==, 0x7BFF);
  g_assert_cmphex(sp_f32_to_f16(65519.0f), ==, 0x7BFF);
  g_assert_cmphex(sp_f32_to_f16(65520.0f), ==, 0x7C00); /* tie rounds to even = inf */
  g_assert_cmphex(sp_f32_to_f16(1e10f), ==, 0x7C00);
  g_assert_cmphex(sp_f32_to_f16(-1e10f), ==, 0xFC00);
  g_assert_cmphex(sp_f32_to_f16(INFINITY), ==, 0x7C00);
  /* subnormals */
  g_assert_cmphex(sp_f32_to_f16(ldexpf(1.0f, -24)), ==, 0x0001);
  g_assert_cmphex(sp_f32_to_f16(ldexpf(1.0f, -25)), ==, 0x0000); /* tie to even 0 */
  g_assert_cmphex(sp_f32_to_f16(ldexpf(1.0f, -25) + ldexpf(1.0f, -40)), ==, 0x0001);
  g_assert_cmphex(sp_f32_to_f16(ldexpf(3.0f, -25)), ==, 0x0002); /* 1.5 units -> 2 */
  g_assert_cmphex(sp_f32_to_f16(ldexpf(5.0f, -25)), ==, 0x0002); /* 2.5 units -> 2 */
  g_assert_cmphex(sp_f32_to_f16(ldexpf(2047.0f, -25)), ==, 0x0400); /* 1023.5 -> min normal */
  g_assert_cmphex(sp_f32_to_f16(ldexpf(1.0f, -30)), ==, 0x0000);
  g_assert_cmphex(sp_f32_to_f16(-ldexpf(1.0f, -30)), ==, 0x8000);
  /* NaN stays a quiet NaN, also from a signalling f32 NaN */
  uint16_t h = sp_f32_to_f16(bitsf(0x7f800001u));
  g_assert_cmphex(h & 0x7C00, ==, 0x7C00);
  g_assert_cmphex(h & 0x0200, ==, 0x0200);
  h = sp_f32_to_f16(NAN);
  g_assert_cmphex(h & 0x7E00, ==, 0x7E00);
}

static void test_bf16_known(void)
{
  g_assert_cmpfloat(sp_bf16_to_f32(0x3F80), ==, 1.0f);
  g_assert_cmpfloat(sp_bf16_to_f32(0xC040), ==, -3.0f);
  g_assert_cmpfloat(sp_bf16_to_f32(0x0001), ==, ldexpf(1.0f, -133)); /* subnormal */
  g_assert_cmphex(sp_f32_to_bf16(1.0f), ==, 0x3F80);
  g_assert_cmphex(sp_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), ==, 0x3F80);     /* tie, even */
  g_assert_cmphex(sp_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), ==, 0x3F82); /* tie, even */
  g_assert_cmphex(sp_f32_to_bf16(bitsf(0x3F808001u)), ==, 0x3F81);
  g_assert_cmphex(sp_f32_to_bf16(bitsf(0x3F807FFFu)), ==, 0x3F80);
  g_assert_cmphex(sp_f32_to_bf16(bitsf(0x7F7FFFFFu)), ==, 0x7F80); /* FLT_MAX -> inf */
  g_assert_cmphex(sp_f32_to_bf16(bitsf(0x7F7F7FFFu)), ==, 0x7F7F); /* stays finite */
  g_assert_cmphex(sp_f32_to_bf16(-INFINITY), ==, 0xFF80);
  g_assert_cmphex(sp_f32_to_bf16(1.0f / 3.0f), ==, 0x3EAB);
  uint16_t h = sp_f32_to_bf16(bitsf(0x7f800001u)); /* signalling NaN must not become inf */
  g_assert_cmphex(h & 0x7F80, ==, 0x7F80);
  g_assert_cmphex(h & 0x0040, ==, 0x0040);
  g_assert_true(isnan(sp_bf16_to_f32(h)));
}

/* All 65536 f16 patterns: value by the IEEE formula, and exact round trip. */
static void test_f16_exhaustive(void)
{
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    int sign = (h >> 15) ? -1 : 1;
    int e = (h >> 10) & 31;
    int m = h & 1023;
    float f = sp_f16_to_f32(h);
    if (e == 31 && m != 0) {
      g_assert_true(isnan(f));
      uint16_t back = sp_f32_to_f16(f);
      g_assert_true((back & 0x7C00) == 0x7C00 && (back & 0x3FF) != 0);
      continue;
    }
    double expect = e == 31 ? INFINITY : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    g_assert_cmpfloat((double)f, ==, sign * expect);
    g_assert_cmphex(sp_f32_to_f16(f), ==, h);
  }
}

static void test_bf16_exhaustive(void)
{
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    float f = sp_bf16_to_f32(h);
    if (isnan(f))
      continue;
    g_assert_cmphex(fbits(f), ==, (uint32_t)h << 16);
    g_assert_cmphex(sp_f32_to_bf16(f), ==, h);
  }
}

/* f32 -> f16 against the compiler's _Float16 conversion (IEEE RNE) over a
 * sample of 4.3 million f32 bit patterns covering every exponent. */
static void test_f16_vs_compiler(void)
{
#ifdef __FLT16_MAX__
  guint64 checked = 0;
  for (uint64_t u = 0; u < 0x100000000ull; u += 997) {
    float f = bitsf((uint32_t)u);
    volatile _Float16 ref = (_Float16)f;
    uint16_t rb;
    memcpy(&rb, (const void *)&ref, 2);
    uint16_t h = sp_f32_to_f16(f);
    if (isnan(f)) {
      g_assert_cmphex(h & 0x7C00, ==, 0x7C00);
      g_assert_cmphex(h & 0x03FF, !=, 0);
    } else if (h != rb) {
      g_test_message("f32 0x%08x: got 0x%04x, compiler 0x%04x", (uint32_t)u, h, rb);
      g_assert_cmphex(h, ==, rb);
    }
    checked++;
  }
  g_assert_cmpuint(checked, >, 4000000);
#else
  g_test_skip("compiler has no _Float16");
#endif
}

static void test_reduce_f32(void)
{
  float d[6] = { 1.0f, 2.5f, -3.0f, 0.1f, -0.0f, INFINITY };
  float s[6] = { 2.0f, 0.25f, 3.0f, 0.2f, -0.0f, -INFINITY };
  sp_reduce_host(d, s, 6, SP_F32, SP_RED_SUM);
  g_assert_cmpfloat(d[0], ==, 3.0f);
  g_assert_cmpfloat(d[1], ==, 2.75f);
  g_assert_cmphex(fbits(d[2]), ==, 0x00000000u); /* -3 + 3 = +0 */
  g_assert_cmphex(fbits(d[3]), ==, 0x3E99999Au); /* f32(0.1)+f32(0.2) rounded in f32 */
  g_assert_cmphex(fbits(d[4]), ==, 0x80000000u); /* -0 + -0 = -0 */
  g_assert_cmphex(fbits(d[5]), ==, 0x7FC00000u); /* inf - inf: canonical NaN */

  /* longer than the vectorised blocks, edge values in the body and the tail,
   * disjoint and in place: each element is a + b in f32, NaN made canonical */
  enum { N = 37 };
  static const uint32_t edge[] = { 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                   0xffc00001u, 0x00000001u, 0x7f7fffffu, 0x3f800000u };
  float xs[N], ys[N], want[N], twice[N];
  for (int i = 0; i < N; i++) {
    xs[i] = i % 5 == 0 ? bitsf(edge[i % 8]) : (float)i * 0.37f - 4.0f;
    ys[i] = i % 3 == 0 ? bitsf(edge[(i + 3) % 8]) : 1.0f / (float)(i + 1);
    float r = xs[i] + ys[i], t = xs[i] + xs[i];
    want[i] = isnan(r) ? bitsf(0x7FC00000u) : r;
    twice[i] = isnan(t) ? bitsf(0x7FC00000u) : t;
  }
  sp_reduce_host(xs, ys, N, SP_F32, SP_RED_SUM);
  for (int i = 0; i < N; i++)
    g_assert_cmphex(fbits(xs[i]), ==, fbits(want[i]));
  for (int i = 0; i < N; i++)
    xs[i] = i % 5 == 0 ? bitsf(edge[i % 8]) : (float)i * 0.37f - 4.0f;
  sp_reduce_host(xs, xs, N, SP_F32, SP_RED_AVG); /* in place: the scalar loop */
  for (int i = 0; i < N; i++)
    g_assert_cmphex(fbits(xs[i]), ==, fbits(twice[i]));

  float a[5] = { NAN, 1.0f, -0.0f, 3.0f, 0.0f };
  float b[5] = { 2.0f, NAN, 0.0f, -INFINITY, -0.0f };
  float mx[5], mn[5];
  memcpy(mx, a, sizeof a);
  memcpy(mn, a, sizeof a);
  sp_reduce_host(mx, b, 5, SP_F32, SP_RED_MAX);
  sp_reduce_host(mn, b, 5, SP_F32, SP_RED_MIN);
  g_assert_cmphex(fbits(mx[0]), ==, 0x7FC00000u); /* NaN propagates */
  g_assert_cmphex(fbits(mx[1]), ==, 0x7FC00000u);
  g_assert_cmphex(fbits(mx[2]), ==, 0x00000000u); /* max(-0, +0) = +0 */
  g_assert_cmpfloat(mx[3], ==, 3.0f);
  g_assert_cmphex(fbits(mx[4]), ==, 0x00000000u); /* either operand order */
  g_assert_cmphex(fbits(mn[0]), ==, 0x7FC00000u);
  g_assert_cmphex(fbits(mn[2]), ==, 0x80000000u); /* min(-0, +0) = -0 */
  g_assert_true(isinf(mn[3]) && mn[3] < 0);
  g_assert_cmphex(fbits(mn[4]), ==, 0x80000000u);

  /* AVG reduces as SUM */
  float x[2] = { 1.0f, 2.0f }, y[2] = { 3.0f, 5.0f };
  sp_reduce_host(x, y, 2, SP_F32, SP_RED_AVG);
  g_assert_cmpfloat(x[0], ==, 4.0f);
  g_assert_cmpfloat(x[1], ==, 7.0f);
  sp_scale_host(x, 2, SP_F32, 2.0, TRUE);
  g_assert_cmpfloat(x[0], ==, 2.0f);
  g_assert_cmpfloat(x[1], ==, 3.5f);
}

static void test_reduce_half(void)
{
  /* f16: accumulate in f32, round once: 1 + 2^-11 ties to 1.0; 1+2^-10 + 2^-11 ties up */
  uint16_t d[6] = { 0x3C00, 0x3C01, 0x7BFF, 0x7C00, 0x3C00, 0x0001 };
  uint16_t s[6] = { 0x1000, 0x1000, 0x7BFF, 0xFC00, 0xC000, 0x0001 };
  sp_reduce_host(d, s, 6, SP_F16, SP_RED_SUM);
  g_assert_cmphex(d[0], ==, 0x3C00);
  g_assert_cmphex(d[1], ==, 0x3C02);
  g_assert_cmphex(d[2], ==, 0x7C00); /* 65504 + 65504 overflows to inf */
  g_assert_cmphex(d[3], ==, 0x7E00); /* inf - inf: canonical NaN */
  g_assert_cmphex(d[4], ==, 0xBC00); /* 1 - 2 = -1 */
  g_assert_cmphex(d[5], ==, 0x0002); /* subnormals add exactly */

  uint16_t m[3] = { 0x3C00, 0x7E00, 0x8000 }, n[3] = { 0xC000, 0x3C00, 0x0000 };
  sp_reduce_host(m, n, 3, SP_F16, SP_RED_MAX);
  g_assert_cmphex(m[0], ==, 0x3C00);
  g_assert_cmphex(m[1], ==, 0x7E00);
  g_assert_cmphex(m[2], ==, 0x0000);
  uint16_t m2[3] = { 0x3C00, 0x3C00, 0x8000 }, n2[3] = { 0xC000, 0x7D00, 0x0000 };
  sp_reduce_host(m2, n2, 3, SP_F16, SP_RED_MIN);
  g_assert_cmphex(m2[0], ==, 0xC000);
  g_assert_cmphex(m2[1], ==, 0x7E00); /* a NaN operand (signalling here) gives the canonical NaN */
  g_assert_cmphex(m2[2], ==, 0x8000);

  /* bf16: 2^-8 = 0x3B80 */
  uint16_t bd[4] = { 0x3F80, 0x3F81, 0x7F7F, 0x3F80 };
  uint16_t bs[4] = { 0x3B80, 0x3B80, 0x7F7F, 0x4000 };
  sp_reduce_host(bd, bs, 4, SP_BF16, SP_RED_SUM);
  g_assert_cmphex(bd[0], ==, 0x3F80);
  g_assert_cmphex(bd[1], ==, 0x3F82);
  g_assert_cmphex(bd[2], ==, 0x7F80); /* 2 x 0x7F7F overflows to inf */
  g_assert_cmphex(bd[3], ==, 0x4040); /* 1 + 2 = 3 */
  uint16_t bm[2] = { 0x3F80, 0xBF80 }, bn[2] = { 0x4000, 0xC000 };
  sp_reduce_host(bm, bn, 2, SP_BF16, SP_RED_MAX);
  g_assert_cmphex(bm[0], ==, 0x4000);
  g_assert_cmphex(bm[1], ==, 0xBF80);
  uint16_t bm2[2] = { 0x3F80, 0xBF80 };
  sp_reduce_host(bm2, bn, 2, SP_BF16, SP_RED_MIN);
  g_assert_cmphex(bm2[0], ==, 0x3F80);
  g_assert_cmphex(bm2[1], ==, 0xC000);
}

static void test_reduce_int(void)
{
  int32_t a[4] = { G_MAXINT32, -5, 7, G_MININT32 }, b[4] = { 1, 3, -9, -1 };
  int32_t mx[4], mn[4];
  memcpy(mx, a, sizeof a);
  memcpy(mn, a, sizeof a);
  sp_reduce_host(a, b, 4, SP_I32, SP_RED_SUM);
  g_assert_cmpint(a[0], ==, G_MININT32); /* wraps modulo 2^32 */
  g_assert_cmpint(a[1], ==, -2);
  g_assert_cmpint(a[2], ==, -2);
  g_assert_cmpint(a[3], ==, G_MAXINT32);
  sp_reduce_host(mx, b, 4, SP_I32, SP_RED_MAX);
  sp_reduce_host(mn, b, 4, SP_I32, SP_RED_MIN);
  g_assert_cmpint(mx[0], ==, G_MAXINT32);
  g_assert_cmpint(mx[1], ==, 3);
  g_assert_cmpint(mx[2], ==, 7);
  g_assert_cmpint(mx[3], ==, -1);
  g_assert_cmpint(mn[0], ==, 1);
  g_assert_cmpint(mn[1], ==, -5);
  g_assert_cmpint(mn[2], ==, -9);
  g_assert_cmpint(mn[3], ==, G_MININT32);

  int64_t c[3] = { G_MAXINT64, 1000000000000, -4 }, e[3] = { 2, 2000000000000, 4 };
  int64_t cmx[3];
  memcpy(cmx, c, sizeof c);
  sp_reduce_host(c, e, 3, SP_I64, SP_RED_AVG); /* AVG reduces as SUM */
  g_assert_cmpint(c[0], ==, G_MININT64 + 1);
  g_assert_cmpint(c[1], ==, 3000000000000);
  g_assert_cmpint(c[2], ==, 0);
  sp_reduce_host(cmx, e, 3, SP_I64, SP_RED_MIN);
  g_assert_cmpint(cmx[0], ==, 2);
  g_assert_cmpint(cmx[2], ==, -4);

  uint8_t u[3] = { 200, 5, 255 }, v[3] = { 100, 250, 0 };
  uint8_t umx[3];
  memcpy(umx, u, 3);
  sp_reduce_host(u, v, 3, SP_U8, SP_RED_SUM);
  g_assert_cmpuint(u[0], ==, 44);
  g_assert_cmpuint(u[1], ==, 255);
  g_assert_cmpuint(u[2], ==, 255);
  sp_reduce_host(umx, v, 3, SP_U8, SP_RED_MAX);
  g_assert_cmpuint(umx[0], ==, 200);
  g_assert_cmpuint(umx[1], ==, 250);
  g_assert_cmpuint(umx[2], ==, 255);
}

/* Store / load one element of any dtype from a double (test helper). */
static void put(void *base, sp_dtype t, size_t i, double v)
{
  guchar *p = (guchar *)base + i * sp_dtype_size(t);
  switch (t) {
  case SP_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
  case SP_F16: { uint16_t h = sp_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
  case SP_BF16: { uint16_t h = sp_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
  case SP_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
  case SP_I64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
  default: *p = (uint8_t)v; break;
  }
}

static double get(const void *base, sp_dtype t, size_t i)
{
  const guchar *p = (const guchar *)base + i * sp_dtype_size(t);
  uint16_t h;
  switch (t) {
  case SP_F32: { float f; memcpy(&f, p, 4); return f; }
  case SP_F16: memcpy(&h, p, 2); return sp_f16_to_f32(h);
  case SP_BF16: memcpy(&h, p, 2); return sp_bf16_to_f32(h);
  case SP_I32: { int32_t x; memcpy(&x, p, 4); return x; }
  case SP_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
  default: return *p;
  }
}

/* Every dtype x every operator on the same small arrays, results by hand:
 * a = {3, 6, 5, 0}, b = {4, 1, 5, 2}. AVG then divide by 2. */
static void test_reduce_table(void)
{
  static const double a[4] = { 3, 6, 5, 0 }, b[4] = { 4, 1, 5, 2 };
  static const double want[SP_REDOP_COUNT][4] = {
    [SP_RED_SUM] = { 7, 7, 10, 2 },
    [SP_RED_AVG] = { 7, 7, 10, 2 },
    [SP_RED_MAX] = { 4, 6, 5, 2 },
    [SP_RED_MIN] = { 3, 1, 5, 0 },
  };
  static const double avg_float[4] = { 3.5, 3.5, 5, 1 }, avg_int[4] = { 3, 3, 5, 1 };
  for (int t = 0; t < SP_DTYPE_COUNT; t++)
    for (int op = 0; op < SP_REDOP_COUNT; op++) {
      guchar d[32], s[32];
      for (size_t i = 0; i < 4; i++) {
        put(d, (sp_dtype)t, i, a[i]);
        put(s, (sp_dtype)t, i, b[i]);
      }
      sp_reduce_host(d, s, 4, (sp_dtype)t, (sp_redop)op);
      for (size_t i = 0; i < 4; i++)
        g_assert_cmpfloat(get(d, (sp_dtype)t, i), ==, want[op][i]);
      for (size_t i = 0; i < 4; i++) /* src untouched */
        g_assert_cmpfloat(get(s, (sp_dtype)t, i), ==, b[i]);
      if (op == SP_RED_AVG) {
        sp_scale_host(d, 4, (sp_dtype)t, 2.0, TRUE);
        gboolean is_float = t == SP_F32 || t == SP_F16 || t == SP_BF16;
        for (size_t i = 0; i < 4; i++)
          g_assert_cmpfloat(get(d, (sp_dtype)t, i), ==, is_float ? avg_float[i] : avg_int[i]);
      }
    }
}

static void test_scale(void)
{
  float f[3] = { 1.0f, -3.0f, 0.0f };
  sp_scale_host(f, 3, SP_F32, 0.5, FALSE);
  g_assert_cmpfloat(f[0], ==, 0.5f);
  g_assert_cmpfloat(f[1], ==, -1.5f);
  sp_scale_host(f, 3, SP_F32, 0.0, TRUE); /* IEEE: x/0 = inf, 0/0 = NaN (canonical) */
  g_assert_true(isinf(f[0]) && f[0] > 0);
  g_assert_cmphex(fbits(f[2]), ==, 0x7FC00000u);

  uint16_t h[3] = { 0x3C00, 0x4000, 0x7BFF };
  sp_scale_host(h, 3, SP_F16, 3.0, TRUE);
  g_assert_cmphex(h[0], ==, 0x3555); /* 1/3 in f32 then RNE to f16 */
  g_assert_cmphex(h[1], ==, 0x3955); /* 2/3 */
  uint16_t h2[1] = { 0x7BFF };
  sp_scale_host(h2, 1, SP_F16, 2.0, FALSE);
  g_assert_cmphex(h2[0], ==, 0x7C00);
  uint16_t b[2] = { 0x3F80, 0x4040 };
  sp_scale_host(b, 2, SP_BF16, 3.0, TRUE);
  g_assert_cmphex(b[0], ==, 0x3EAB);
  g_assert_cmphex(b[1], ==, 0x3F80);

  int32_t i[4] = { 7, -7, G_MININT32, G_MAXINT32 };
  sp_scale_host(i, 3, SP_I32, 2.0, TRUE); /* truncation toward zero */
  g_assert_cmpint(i[0], ==, 3);
  g_assert_cmpint(i[1], ==, -3);
  g_assert_cmpint(i[2], ==, -1073741824);
  sp_scale_host(&i[3], 1, SP_I32, 3.0, FALSE); /* 3 x (2^31 - 1) mod 2^32 */
  g_assert_cmpint(i[3], ==, 2147483645);
  int32_t j[2] = { G_MININT32, 9 };
  sp_scale_host(j, 2, SP_I32, -1.0, TRUE); /* INT_MIN / -1 wraps to INT_MIN */
  g_assert_cmpint(j[0], ==, G_MININT32);
  g_assert_cmpint(j[1], ==, -9);
  sp_scale_host(j, 2, SP_I32, 0.0, TRUE); /* divide by 0 leaves x unchanged */
  g_assert_cmpint(j[1], ==, -9);
  sp_scale_host(j, 2, SP_I32, 2.9, FALSE); /* factor truncated to 2 */
  g_assert_cmpint(j[1], ==, -18);

  int64_t l[2] = { G_MININT64, -10 };
  sp_scale_host(l, 2, SP_I64, -1.0, TRUE);
  g_assert_cmpint(l[0], ==, G_MININT64);
  g_assert_cmpint(l[1], ==, 10);
  uint8_t u[2] = { 100, 9 };
  sp_scale_host(u, 2, SP_U8, 3.0, FALSE);
  g_assert_cmpuint(u[0], ==, 44);
  g_assert_cmpuint(u[1], ==, 27);
  sp_scale_host(u, 2, SP_U8, 4.0, TRUE);
  g_assert_cmpuint(u[0], ==, 11);
  g_assert_cmpuint(u[1], ==, 6);
}

static void test_fill_pattern(void)
{
  enum { N = 1000 };
  for (int t = 0; t < SP_DTYPE_COUNT; t++) {
    size_t es = sp_dtype_size((sp_dtype)t);
    guchar *a = g_malloc(N * es), *b = g_malloc(N * es), *c = g_malloc(N * es);
    sp_fill_pattern(a, N, (sp_dtype)t, 42, 0);
    sp_fill_pattern(b, N, (sp_dtype)t, 42, 0);
    g_assert_cmpmem(a, N * es, b, N * es); /* same inputs, same bytes */
    sp_fill_pattern(c, N - 300, (sp_dtype)t, 42, 300); /* depends on the index only */
    g_assert_cmpmem(a + 300 * es, (N - 300) * es, c, (N - 300) * es);
    sp_fill_pattern(b, N, (sp_dtype)t, 43, 0);
    g_assert_true(memcmp(a, b, N * es) != 0);

    GHashTable *distinct = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (int i = 0; i < N; i++) {
      double v = 0;
      switch ((sp_dtype)t) {
      case SP_F32: {
        float f;
        memcpy(&f, a + 4 * i, 4);
        v = f * 8.0;
        break;
      }
      case SP_F16: {
        uint16_t h;
        memcpy(&h, a + 2 * i, 2);
        v = sp_f16_to_f32(h) * 8.0;
        break;
      }
      case SP_BF16: {
        uint16_t h;
        memcpy(&h, a + 2 * i, 2);
        v = sp_bf16_to_f32(h) * 8.0;
        break;
      }
      case SP_I32: {
        int32_t x;
        memcpy(&x, a + 4 * i, 4);
        v = x;
        break;
      }
      case SP_I64: {
        int64_t x;
        memcpy(&x, a + 8 * i, 8);
        v = (double)x;
        break;
      }
      default: v = a[i]; break;
      }
      /* finite small integers (floats: multiples of 1/8), exactly representable */
      g_assert_true(isfinite(v));
      g_assert_cmpfloat(v, ==, rint(v));
      g_assert_cmpfloat(v, >=, -64.0);
      g_assert_cmpfloat(v, <=, 64.0);
      g_hash_table_add(distinct, GINT_TO_POINTER((int)v));
    }
    g_assert_cmpuint(g_hash_table_size(distinct), >=, 50);
    g_hash_table_destroy(distinct);
    g_free(a);
    g_free(b);
    g_free(c);
  }
}

static void test_checksum(void)
{
  /* published FNV-1a 64 test vectors */
  g_assert_cmphex(sp_checksum(0, "", 0), ==, 0xcbf29ce484222325ull);
  g_assert_cmphex(sp_checksum(0, "a", 1), ==, 0xaf63dc4c8601ec8cull);
  g_assert_cmphex(sp_checksum(0, "foobar", 6), ==, 0x85944171f73967e8ull);
  g_assert_cmphex(sp_checksum(sp_checksum(0, "foo", 3), "bar", 3), ==, 0x85944171f73967e8ull);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dtype/names", test_names);
  g_test_add_func("/dtype/f16-known", test_f16_known);
  g_test_add_func("/dtype/bf16-known", test_bf16_known);
  g_test_add_func("/dtype/f16-exhaustive", test_f16_exhaustive);
  g_test_add_func("/dtype/bf16-exhaustive", test_bf16_exhaustive);
  g_test_add_func("/dtype/f16-vs-compiler", test_f16_vs_compiler);
  g_test_add_func("/dtype/reduce-f32", test_reduce_f32);
  g_test_add_func("/dtype/reduce-half", test_reduce_half);
  g_test_add_func("/dtype/reduce-int", test_reduce_int);
  g_test_add_func("/dtype/reduce-table", test_reduce_table);
  g_test_add_func("/dtype/scale", test_scale);
  g_test_add_func("/dtype/fill-pattern", test_fill_pattern);
  g_test_add_func("/dtype/checksum", test_checksum);
  return g_test_run();
}
