/* Writing a finished json-glib document to a file or standard output (library-private). */
#ifndef SPSIM_JSON_OUT_H
#define SPSIM_JSON_OUT_H

#include <glib.h>
#include <json-glib/json-glib.h>

/* Write the document of @p b to @p path ("-": standard output). A failure is
 * SP_ERROR_IO: "cannot write @p what '@p path': <reason>; check the directory exists
 * and is writable". */
gboolean sp_json_write_builder(JsonBuilder *b, const char *path, const char *what, GError **err);

/* Close a Chrome trace document opened as {"traceEvents": [ ... (the array, then
 * "displayTimeUnit": "ns") and write it as sp_json_write_builder does. */
gboolean sp_json_write_chrome_trace(JsonBuilder *b, const char *path, GError **err);

/* @p root (an object) as text with one group of members per line: a member named in
 * @p line_starts (NULL-terminated) begins a new line, the others follow on the line
 * before; an array member named in @p block_arrays puts each element on its own line.
 * Everything else is inline ("key": value, ", " between). Strings are escaped by
 * json-glib, integers written exactly, doubles to 9 significant digits. The text ends
 * with a newline; @p len (may be NULL) receives its length. */
char *sp_json_to_lines(JsonNode *root, const char *const *line_starts, const char *const *block_arrays, gsize *len);

#endif
