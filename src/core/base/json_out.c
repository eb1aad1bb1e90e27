/* One writer for the library's JSON documents (traces, the what-if's result). */
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

static gboolean listed(const char *name, const char *const *names)
{
  for (; names != NULL && *names != NULL; names++)
    if (strcmp(*names, name) == 0) return TRUE;
  return FALSE;
}

/* One value, inline; arrays named in @p blocks (members of depth-1 objects too) put
 * each element on its own line, indented two steps deeper than @p indent. */
static void node_text(GString *s, JsonNode *n, const char *name, int indent, const char *const *blocks)
{
  switch (json_node_get_node_type(n)) {
  case JSON_NODE_OBJECT: {
    JsonObject *o = json_node_get_object(n);
    g_string_append_c(s, '{');
    JsonObjectIter it;
    const char *k;
    JsonNode *v;
    gboolean first = TRUE;
    json_object_iter_init_ordered(&it, o);
    while (json_object_iter_next_ordered(&it, &k, &v)) {
      if (!first) g_string_append(s, ", ");
      first = FALSE;
      g_autoptr(JsonNode) kn = json_node_init_string(json_node_alloc(), k);
      g_autofree char *ks = json_to_string(kn, FALSE);
      g_string_append_printf(s, "%s: ", ks);
      node_text(s, v, k, indent, blocks);
    }
    g_string_append_c(s, '}');
    break;
  }
  case JSON_NODE_ARRAY: {
    JsonArray *a = json_node_get_array(n);
    gboolean block = name != NULL && listed(name, blocks);
    guint len = json_array_get_length(a);
    g_string_append_c(s, '[');
    for (guint i = 0; i < len; i++) {
      if (i > 0) g_string_append_c(s, ',');
      if (block) g_string_append_printf(s, "\n%*s", indent + 2, "");
      else if (i > 0) g_string_append_c(s, ' ');
      node_text(s, json_array_get_element(a, i), NULL, indent + 2, blocks);
    }
    if (block && len > 0) g_string_append_printf(s, "\n%*s", indent, "");
    g_string_append_c(s, ']');
    break;
  }
  case JSON_NODE_VALUE:
    if (json_node_get_value_type(n) == G_TYPE_DOUBLE) {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];
      g_string_append(s, g_ascii_formatd(buf, sizeof buf, "%.9g", json_node_get_double(n)));
    } else {
      g_autofree char *t = json_to_string(n, FALSE);
      g_string_append(s, t);
    }
    break;
  case JSON_NODE_NULL:
    g_string_append(s, "null");
    break;
  }
}

char *sp_json_to_lines(JsonNode *root, const char *const *line_starts, const char *const *block_arrays, gsize *len)
{
  GString *s = g_string_new("{\n  ");
  JsonObjectIter it;
  const char *k;
  JsonNode *v;
  gboolean first = TRUE;
  json_object_iter_init_ordered(&it, json_node_get_object(root));
  while (json_object_iter_next_ordered(&it, &k, &v)) {
    if (!first) g_string_append(s, listed(k, line_starts) ? ",\n  " : ", ");
    first = FALSE;
    g_autoptr(JsonNode) kn = json_node_init_string(json_node_alloc(), k);
    g_autofree char *ks = json_to_string(kn, FALSE);
    g_string_append_printf(s, "%s: ", ks);
    node_text(s, v, k, 2, block_arrays);
  }
  g_string_append(s, "\n}\n");
  if (len != NULL) *len = s->len;
  return g_string_free(s, FALSE);
}
