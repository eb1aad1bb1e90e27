/* Fuzz harness: byte sizes (sp_size_parse, sp_size_range_parse) against a second,
 * independent reading of the grammar of spsim/units.h (128-bit arithmetic), and
 * ranges (MIN <= MAX, each end parsing on its own). */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "spsim/error.h"
#include "spsim/units.h"

/* The grammar again, written differently: TRUE and *out when @p s is a size. */
static gboolean reference(const char *s, uint64_t *out)
{
  size_t i = 0, n = strlen(s);
  while (i < n && s[i] == ' ')
    i++;
  size_t d0 = i;
  unsigned __int128 v = 0;
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + (unsigned)(s[i] - '0');
    if (v > UINT64_MAX)
      return FALSE;
    i++;
  }
  if (i == d0)
    return FALSE;
  const char *units = "kmgt";
  const char *u = i < n ? strchr(units, g_ascii_tolower(s[i])) : NULL;
  unsigned shift = 0;
  if (u != NULL && *u != '\0') {
    shift = 10u * (unsigned)(u - units + 1);
    i++;
    if (i < n && s[i] == 'i')
      i++;
  }
  if (i < n && (s[i] == 'B' || s[i] == 'b'))
    i++;
  if (i != n)
    return FALSE;
  v <<= shift;
  if (v > UINT64_MAX)
    return FALSE;
  *out = (uint64_t)v;
  return TRUE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size > 256)
    return 0;
  char *s = g_strndup((const char *)data, size);
  uint64_t v = 0, want = 0;
  GError *err = NULL;
  gboolean ok = sp_size_parse(s, &v, &err);
  gboolean ref = reference(s, &want);
  FUZZ_ASSERT(ok == ref, "'%s': parser says %d, reference says %d", s, ok, ref);
  if (ok) {
    FUZZ_ASSERT(v == want, "'%s': %" PRIu64 " != %" PRIu64, s, v, want);
    char buf[32];
    g_snprintf(buf, sizeof buf, "%" PRIu64, v);
    uint64_t back = 1;
    FUZZ_ASSERT(sp_size_parse(buf, &back, NULL) && back == v, "'%s' does not parse back", buf);
  } else {
    FUZZ_EXPECT_ERROR(err);
    g_clear_error(&err);
  }

  uint64_t lo = 7, hi = 7;
  if (sp_size_range_parse(s, &lo, &hi, &err)) {
    FUZZ_ASSERT(lo <= hi, "'%s': %" PRIu64 " > %" PRIu64, s, lo, hi);
    const char *colon = strchr(s, ':');
    uint64_t a = 0, b = 0;
    if (colon == NULL) {
      FUZZ_ASSERT(ok && lo == v && hi == v, "'%s': one size, another range", s);
    } else {
      char *first = g_strndup(s, (gsize)(colon - s));
      FUZZ_ASSERT(sp_size_parse(first, &a, NULL) && sp_size_parse(colon + 1, &b, NULL) && a == lo &&
                  b == hi, "'%s': ends disagree", s);
      g_free(first);
    }
  } else {
    FUZZ_EXPECT_ERROR(err);
    FUZZ_ASSERT(lo == 7 && hi == 7, "'%s': outputs written on error", s);
    g_clear_error(&err);
  }
  g_free(s);
  return 0;
}
