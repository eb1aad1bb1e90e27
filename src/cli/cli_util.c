/* Helpers shared by the subcommands of the spsim command (cli.h): error exit
 * and JSON printing. main.c dispatches to the cmd_*.c files, which use these;
 * nothing here calls back into either. */
#include "config.h"

#include <stdio.h>

#include <json-glib/json-glib.h>

#include "cli.h"

int sp_cli_fail(GError *err)
{
  int code = 1;
  if (err != NULL) {
    fprintf(stderr, "spsim: %s\n", err->message);
    if (err->domain == G_OPTION_ERROR) code = 2;
    g_error_free(err);
  }
  return code;
}

void sp_cli_print_json(JsonBuilder *b)
{
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autoptr(JsonGenerator) gen = json_generator_new();
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, FALSE);
  g_autofree char *text = json_generator_to_data(gen, NULL);
  printf("%s\n", text);
}
