/* spsim platform dgx --nodes N [--gpu h100|a100|h100-hbm2e|h200|b200|gb200|toy] [--gpus-per-node 8] [--charge-local]
 *                    [--nvlink-bw GBPS] [--nic-bw GBPS] [--su-nodes N] [--oversubscription R[,C]]
 *                    [--nvlink-domain G] [--nics-per-node K] [--pod-sus N] [--mix KIND:N,...] [--zones node|su|auto] [-o FILE]:
 * write a calibrated platform XML (stdout by default). The options are read by
 * sp_platform_args_parse (src/sim/platform_args.c). */
#include "config.h"
#include "cli.h"
#include "spsim/error.h"
#include "platform_args.h"
#include "platform_gen.h"

#include <stdio.h>
#include <string.h>

int sp_cmd_platform(int argc, char **argv)
{
  sp_platform_opts o;
  GError *err = NULL;
  g_autofree char *out = NULL;
  if (!sp_platform_args_parse(argc, argv, TRUE, &o, &out, &err)) {
    g_prefix_error(&err, "platform: ");
    return sp_cli_fail(err); /* G_OPTION_ERROR: usage error, exit 2 */
  }
  g_autofree char *xml = sp_platform_dgx_xml(&o, &err);
  if (xml == NULL) {
    g_prefix_error(&err, "platform: ");
    return sp_cli_fail(err);
  }
  if (out != NULL && strcmp(out, "-") != 0) {
    if (!g_file_set_contents(out, xml, -1, &err)) {
      GError *e2 = g_error_new(SP_ERROR, SP_ERROR_IO, "platform: cannot write %s: %s", out, err->message);
      g_error_free(err);
      return sp_cli_fail(e2);
    }
    return 0;
  }
  size_t len = strlen(xml);
  if (fwrite(xml, 1, len, stdout) != len || fflush(stdout) != 0)
    return sp_cli_fail(g_error_new(SP_ERROR, SP_ERROR_IO, "platform: cannot write to stdout"));
  return 0;
}
