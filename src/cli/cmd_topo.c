/* placeholder until the topo subcommand lands */
#include "config.h"
#include "cli.h"
#include "spsim/error.h"
int sp_cmd_topo(int argc, char **argv)
{
  (void)argc; (void)argv;
  return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_UNSUPPORTED, "'%s' is not built yet", argv[0]));
}
