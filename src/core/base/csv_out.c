/* One writer for the library's CSV tables (see csv_out.h). */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "csv_out.h"

void sp_csv_str(sp_csv *c, const char *text)
{
  if (c->col++ > 0) g_string_append_c(c->s, ',');
  if (strpbrk(text, ",\"\r\n") == NULL) {
    g_string_append(c->s, text);
    return;
  }
  g_string_append_c(c->s, '"');
  for (const char *p = text; *p; p++) {
    if (*p == '"') g_string_append_c(c->s, '"');
    g_string_append_c(c->s, *p);
  }
  g_string_append_c(c->s, '"');
}

void sp_csv_printf(sp_csv *c, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *text = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  sp_csv_str(c, text);
}

void sp_csv_num(sp_csv *c, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  sp_csv_str(c, g_ascii_formatd(buf, sizeof buf, "%.9g", v));
}

void sp_csv_end_row(sp_csv *c)
{
  g_string_append(c->s, "\r\n");
  c->col = 0;
}
