/* Writing CSV tables (library-private): RFC 4180, one writer for every table, so that
 * text taken from inputs (a model's name, a layout) never breaks a row. */
#ifndef SPSIM_CSV_OUT_H
#define SPSIM_CSV_OUT_H

#include <glib.h>

/* A table being written into @p s, one row at a time. */
typedef struct {
  GString *s;
  guint col; /* fields written in the current row */
} sp_csv;

/* Append @p text as the row's next field, quoted when it holds a comma, a double quote,
 * CR or LF (quotes doubled inside), as RFC 4180 section 2 requires. */
void sp_csv_str(sp_csv *c, const char *text);
/* Append a printf-formatted field, quoted as sp_csv_str(). */
void sp_csv_printf(sp_csv *c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* Append @p v to 9 significant digits, whatever the locale (the JSON's precision). */
void sp_csv_num(sp_csv *c, double v);
/* End the row with CRLF (RFC 4180). */
void sp_csv_end_row(sp_csv *c);

#endif
