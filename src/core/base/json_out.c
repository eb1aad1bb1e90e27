/* One writer for the library's JSON documents (traces). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "json_out.h"
#include "spsim/error.h"

gboolean sp_json_write_builder(JsonBuilder *b, const char *path, const char *what, GError **err)
{
  JsonNode *root = json_builder_get_root(b);
  JsonGenerator *gen = json_generator_new();
  json_generator_set_root(gen, root);
  gsize len = 0;
  char *text = json_generator_to_data(gen, &len);
  GError *local = NULL;
  gboolean ok;
  if (strcmp(path, "-") == 0) { /* standard output */
    ok = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
    if (!ok)
      local = g_error_new_literal(SP_ERROR, SP_ERROR_IO, "standard output is not writable");
  } else {
    ok = g_file_set_contents(path, text, (gssize)len, &local);
  }
  if (!ok) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot write %s '%s': %s; check the directory "
                "exists and is writable", what, path, local->message);
    g_error_free(local);
  }
  g_free(text);
  g_object_unref(gen);
  json_node_unref(root);
  return ok;
}

gboolean sp_json_write_chrome_trace(JsonBuilder *b, const char *path, GError **err)
{
  json_builder_end_array(b);
  json_builder_set_member_name(b, "displayTimeUnit");
  json_builder_add_string_value(b, "ns");
  json_builder_end_object(b);
  return sp_json_write_builder(b, path, "trace", err);
}
