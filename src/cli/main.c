/* spsim: what-if analysis of parallel LLM training layouts, and the tools around it. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "spsim/error.h"

static const char usage[] =
  "Usage:\n"
  "  spsim PLATFORM.xml [OPTIONS]     what-if analysis: rank the layouts of a model on a cluster\n"
  "  spsim topo OPTIONS               process topologies, groups, factorisations\n"
  "  spsim platform dgx OPTIONS       generate a SimGrid platform of DGX nodes\n"
  "  spsim platform local -np N -o F  measure this machine (MPI ranks, CPU GEMMs) into a platform\n"
  "  spsim bench PLATFORM OPTIONS     predicted collective performance (nccl-tests style)\n"
  "  spsim verify PLATFORM OPTIONS    run a collective or operation with real bytes, check it\n"
  "  spsim calibrate LOG... OPTIONS   fit a platform's links to nccl-tests logs\n"
  "  spsim --version | --help\n"
  "Run 'spsim SUBCOMMAND --help' for the options of each.\n";

typedef struct {
  const char *name;
  int (*fn)(int, char **);
} command;

static const command commands[] = {
  { "topo", sp_cmd_topo },
  { "platform", sp_cmd_platform_family },
  { "bench", sp_cmd_bench },
  { "verify", sp_cmd_verify },
  { "calibrate", sp_cmd_calibrate },
};

int main(int argc, char **argv)
{
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("spsim %s\n", PACKAGE_VERSION);
    return 0;
  }
  for (size_t i = 0; i < G_N_ELEMENTS(commands); i++) {
    if (strcmp(argv[1], commands[i].name) == 0) {
      g_autofree char *prog = g_strdup_printf("spsim %s", argv[1]);
      argv[1] = prog;
      return commands[i].fn(argc - 1, argv + 1);
    }
  }
  if (argv[1][0] == '-') {
    fprintf(stderr, "spsim: unknown option '%s' (the first argument is a platform file or a subcommand)\n%s",
            argv[1], usage);
    return 2;
  }
  return sp_cmd_whatif(argc, argv);
}
