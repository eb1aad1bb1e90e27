/* Byte sizes (sp_size_parse, sp_size_range_parse): values derived by hand from
 * the grammar of spsim/units.h, overflow at 2^64, and inputs that must be errors. */
#include "config.h"

#include <string.h>

#include "spsim/error.h"
#include "spsim/units.h"

static void expect_size(const char *s, uint64_t want)
{
  uint64_t v = 12345;
  GError *e = NULL;
  if (!sp_size_parse(s, &v, &e))
    g_error("'%s': unexpected error: %s", s, e->message);
  if (v != want)
    g_error("'%s': got %" G_GUINT64_FORMAT ", expected %" G_GUINT64_FORMAT, s, v, want);
}

static void expect_bad(const char *s, const char *fragment)
{
  uint64_t v = 12345;
  GError *e = NULL;
  if (sp_size_parse(s, &v, &e))
    g_error("'%s': parsed as %" G_GUINT64_FORMAT ", expected an error", s ? s : "(null)", v);
  g_assert_error(e, SP_ERROR, SP_ERROR_INVALID);
  if (strstr(e->message, fragment) == NULL)
    g_error("'%s': message '%s' lacks '%s'", s ? s : "(null)", e->message, fragment);
  g_assert_cmpuint(v, ==, 12345); /* untouched */
  g_error_free(e);
}

static void test_values(void)
{
  expect_size("8", 8);
  expect_size("0", 0);
  expect_size("4096", 4096);
  expect_size("  4096", 4096);         /* leading spaces */
  expect_size("1K", 1024);             /* binary multiples: 2^10 */
  expect_size("1k", 1024);
  expect_size("64K", 65536);
  expect_size("64KB", 65536);
  expect_size("64KiB", 65536);
  expect_size("64kib", 65536);
  expect_size("1M", 1048576);          /* 2^20 */
  expect_size("1MiB", 1048576);
  expect_size("8G", 8589934592ull);    /* 8 x 2^30 */
  expect_size("2GiB", 2147483648ull);
  expect_size("1T", 1099511627776ull); /* 2^40 */
  expect_size("1B", 1);
  expect_size("1b", 1);
  expect_size("007", 7);
  expect_size("18446744073709551615", G_MAXUINT64);
  /* the largest T value: (2^24 - 1) x 2^40 = 2^64 - 2^40 */
  expect_size("16777215T", 18446742974197923840ull);
  expect_size("17179869183G", 18446744072635809792ull); /* (2^34 - 1) x 2^30 */
}

static void test_errors(void)
{
  expect_bad(NULL, "cannot parse size");
  expect_bad("", "cannot parse size");
  expect_bad("   ", "cannot parse size");
  expect_bad("-1", "cannot parse size");
  expect_bad("+1", "cannot parse size");
  expect_bad("K", "cannot parse size");
  expect_bad("1 K", "cannot parse size");
  expect_bad("1K ", "cannot parse size");
  expect_bad("1KK", "cannot parse size");
  expect_bad("1iB", "cannot parse size");
  expect_bad("1P", "cannot parse size");
  expect_bad("1.5K", "cannot parse size");
  expect_bad("0x10", "cannot parse size");
  expect_bad("1e6", "cannot parse size"); /* no exponents */
  expect_bad("1e400", "cannot parse size");
  expect_bad("NaN", "cannot parse size");
  expect_bad("nan", "cannot parse size");
  expect_bad("inf", "cannot parse size");
  expect_bad("12Q", "cannot parse size");
  /* overflow is an error, never a wrapped value */
  expect_bad("18446744073709551616", "cannot parse size");
  expect_bad("99999999999999999999G", "cannot parse size");
  expect_bad("16777216T", "64 bits");
  expect_bad("17179869184G", "64 bits");
  expect_bad("18446744073709551615K", "64 bits");
}

static void test_ranges(void)
{
  uint64_t lo = 1, hi = 1;
  g_assert_true(sp_size_range_parse("8:8G", &lo, &hi, NULL));
  g_assert_cmpuint(lo, ==, 8);
  g_assert_cmpuint(hi, ==, 8589934592ull);
  g_assert_true(sp_size_range_parse("1M", &lo, &hi, NULL));
  g_assert_cmpuint(lo, ==, 1048576);
  g_assert_cmpuint(hi, ==, 1048576);
  g_assert_true(sp_size_range_parse("1K:1K", &lo, &hi, NULL));
  g_assert_cmpuint(lo, ==, 1024);
  g_assert_cmpuint(hi, ==, 1024);
  g_assert_true(sp_size_range_parse("0:0", &lo, &hi, NULL));
  g_assert_cmpuint(lo, ==, 0);
  g_assert_cmpuint(hi, ==, 0);

  static const struct { const char *s, *fragment; } bad[] = {
    { "1M:1K", "min is larger than max" },
    { "1:2:3", "must be MIN:MAX" },
    { "::", "must be MIN:MAX" },
    { "", "must be MIN:MAX" },
    { ":", "cannot parse size" },
    { "1K:", "cannot parse size" },
    { ":1K", "cannot parse size" },
    { "8:lots", "cannot parse size 'lots'" },
    { "1:99999999999999999999G", "cannot parse size" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *e = NULL;
    lo = hi = 77;
    if (sp_size_range_parse(bad[i].s, &lo, &hi, &e))
      g_error("'%s': parsed, expected an error", bad[i].s);
    g_assert_error(e, SP_ERROR, SP_ERROR_INVALID);
    if (strstr(e->message, bad[i].fragment) == NULL)
      g_error("'%s': message '%s' lacks '%s'", bad[i].s, e->message, bad[i].fragment);
    g_assert_cmpuint(lo, ==, 77);
    g_assert_cmpuint(hi, ==, 77);
    g_error_free(e);
  }
  g_assert_false(sp_size_range_parse(NULL, &lo, &hi, NULL));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/units/values", test_values);
  g_test_add_func("/units/errors", test_errors);
  g_test_add_func("/units/ranges", test_ranges);
  return g_test_run();
}
