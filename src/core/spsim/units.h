/**
 * @file units.h
 * @brief Byte sizes written by users ("8", "64K", "1MiB", "8G", "1:1G"): the one
 *        parser behind every size option of `spsim` and `spsim-run`.
 *
 * Grammar of a size: optional leading spaces, decimal digits, then an optional
 * binary multiple K, M, G or T (either case; K = 2^10, M = 2^20, G = 2^30,
 * T = 2^40) which may be followed by "i", then an optional "B" or "b" (bytes),
 * and nothing else. So "64K", "64k", "64KB", "64KiB" and "65536" are the same
 * size. There is no sign, no fraction and no exponent ("1e6" is rejected); a
 * value that does not fit in 64 bits after scaling is an error, never wrapped.
 * Zero is accepted: callers that need a positive size check it themselves.
 */
#ifndef SPSIM_UNITS_H
#define SPSIM_UNITS_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/**
 * Parse one size (see the grammar above).
 * @param s the text (NULL is an error)
 * @param out receives the number of bytes; untouched on error
 * @param err #SP_ERROR_INVALID with a message naming @p s ("cannot parse size ...")
 * @return TRUE on success.
 */
gboolean sp_size_parse(const char *s, uint64_t *out, GError **err);

/**
 * Parse a range "MIN:MAX" or a single size (then MIN = MAX), each end as
 * sp_size_parse(). Errors (#SP_ERROR_INVALID): not one or two sizes separated by
 * one ':'; an end that does not parse; MIN larger than MAX.
 * @param lo receives MIN, @param hi receives MAX; both untouched on error.
 * @return TRUE on success.
 */
gboolean sp_size_range_parse(const char *s, uint64_t *lo, uint64_t *hi, GError **err);

G_END_DECLS

#endif
