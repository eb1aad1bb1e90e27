/* One writer for the library's SVG pictures (see svg_out.h). */
#include "config.h"

#include <stdarg.h>

#include "svg_out.h"

void sp_svg_chars(GString *s, const char *text)
{
  g_autofree char *e = g_markup_escape_text(text, -1);
  g_string_append(s, e);
}

void sp_svg_begin(GString *s, double width, double height, const char *attrs)
{
  g_string_append_printf(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\"%s%s>\n", width, height,
                         attrs ? " " : "", attrs ? attrs : "");
  g_string_append(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
}

void sp_svg_end(GString *s)
{
  g_string_append(s, "</svg>\n");
}

void sp_svg_text(GString *s, const char *attrs, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *text = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_string_append_printf(s, "<text %s>", attrs);
  sp_svg_chars(s, text);
  g_string_append(s, "</text>\n");
}
