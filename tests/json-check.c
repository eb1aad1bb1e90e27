/* json-check FILE [PATH]: parse FILE with json-glib (exit 1 with the parser's error if it
 * is not JSON); with PATH ("model.name", "layouts.0.rank"), print the value there (a
 * string unquoted, a number as written by json-glib). Used by the shell tests. */
#include <stdio.h>
#include <stdlib.h>

#include <json-glib/json-glib.h>

int main(int argc, char **argv)
{
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: json-check FILE [PATH]\n");
    return 2;
  }
  g_autoptr(JsonParser) p = json_parser_new();
  GError *err = NULL;
  if (!json_parser_load_from_file(p, argv[1], &err)) {
    fprintf(stderr, "json-check: %s: %s\n", argv[1], err->message);
    g_error_free(err);
    return 1;
  }
  if (argc == 2) return 0;
  JsonNode *n = json_parser_get_root(p);
  g_auto(GStrv) parts = g_strsplit(argv[2], ".", -1);
  for (char **k = parts; *k != NULL && n != NULL; k++) {
    if (JSON_NODE_HOLDS_OBJECT(n)) n = json_object_get_member(json_node_get_object(n), *k);
    else if (JSON_NODE_HOLDS_ARRAY(n) && (guint)atoi(*k) < json_array_get_length(json_node_get_array(n)))
      n = json_array_get_element(json_node_get_array(n), (guint)atoi(*k));
    else n = NULL;
  }
  if (n == NULL) {
    fprintf(stderr, "json-check: %s: no member %s\n", argv[1], argv[2]);
    return 1;
  }
  if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING) printf("%s\n", json_node_get_string(n));
  else {
    g_autofree char *t = json_to_string(n, FALSE);
    printf("%s\n", t);
  }
  return 0;
}
