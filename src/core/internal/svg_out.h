/* Writing SVG documents (library-private): text content is XML-escaped here, so that
 * names taken from inputs (a model's name, a layout label) never break the markup. */
#ifndef SPSIM_SVG_OUT_H
#define SPSIM_SVG_OUT_H

#include <glib.h>

/* Append <svg ...> (with a white background) for a @p width x @p height picture, and
 * @p attrs (may be NULL) as further attributes of the root. */
void sp_svg_begin(GString *s, double width, double height, const char *attrs);
/* Append </svg>. */
void sp_svg_end(GString *s);
/* Append <text ATTRS>TEXT</text> and a newline, with TEXT printf-formatted from
 * @p fmt and XML-escaped (@p attrs is trusted markup: numbers and fixed words). */
void sp_svg_text(GString *s, const char *attrs, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/* Append @p text XML-escaped (& < > " '). */
void sp_svg_chars(GString *s, const char *text);

#endif
