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

#endif
