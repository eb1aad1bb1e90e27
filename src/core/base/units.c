/* Byte sizes written by users: "8", "64K", "1MiB", "8G" and ranges "MIN:MAX". */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/units.h"

gboolean sp_size_parse(const char *s, uint64_t *out, GError **err)
{
  if (s == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "cannot parse size '' (no value given)");
    return FALSE;
  }
  const char *p = s;
  while (*p == ' ')
    p++;
  if (!g_ascii_isdigit(*p))
    goto bad;
  errno = 0;
  char *end = NULL;
  guint64 v = g_ascii_strtoull(p, &end, 10);
  if (errno != 0 || end == p)
    goto bad;
  int shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: break;
  }
  if (shift != 0 && *end == 'i')
    end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0')
    goto bad;
  if (shift != 0 && v > (G_MAXUINT64 >> shift)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "cannot parse size '%s': it does not fit in 64 bits", s);
    return FALSE;
  }
  *out = (uint64_t)v << shift;
  return TRUE;
bad:
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "cannot parse size '%s' (expected a non-negative integer with an optional K, M, G "
              "or T suffix, e.g. 8, 64KiB or 1G)", s);
  return FALSE;
}

gboolean sp_size_range_parse(const char *s, uint64_t *lo, uint64_t *hi, GError **err)
{
  if (s == NULL || strchr(s, ':') != strrchr(s, ':') || *s == '\0') {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "'%s' must be MIN:MAX (e.g. 8:8G) or one size",
                s ? s : "");
    return FALSE;
  }
  const char *colon = strchr(s, ':');
  uint64_t a = 0, b = 0;
  if (colon == NULL) {
    if (!sp_size_parse(s, &a, err))
      return FALSE;
    *lo = *hi = a;
    return TRUE;
  }
  g_autofree char *first = g_strndup(s, (gsize)(colon - s));
  if (!sp_size_parse(first, &a, err) || !sp_size_parse(colon + 1, &b, err))
    return FALSE;
  if (a > b) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "'%s': min is larger than max", s);
    return FALSE;
  }
  *lo = a;
  *hi = b;
  return TRUE;
}
