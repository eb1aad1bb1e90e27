/* spsim command line: one function per subcommand, each returning the exit code
 * (main.c dispatches to them), and the helpers they share (cli_util.c). */
#ifndef SPSIM_CLI_H
#define SPSIM_CLI_H

#include <glib.h>
#include "spsim/whatif.h"

/* Each takes the arguments after the subcommand name (argv[0] is "spsim SUBCOMMAND"). */
int sp_cmd_topo(int argc, char **argv);
int sp_cmd_platform(int argc, char **argv);
/* spsim platform local (cmd_platform_local.c): argv[0] is "spsim platform", the family taken out. */
int sp_cmd_platform_local(int argc, char **argv);
/* spsim platform FAMILY: local to sp_cmd_platform_local, the others to sp_cmd_platform. */
int sp_cmd_platform_family(int argc, char **argv);
int sp_cmd_bench(int argc, char **argv);
int sp_cmd_verify(int argc, char **argv);
int sp_cmd_calibrate(int argc, char **argv);
/* What-if analysis: argv[1] is the platform file. */
int sp_cmd_whatif(int argc, char **argv);

/* Exit status of a verification that ran and found a differing output (`spsim verify`,
 * `spsim PLATFORM.xml --verify`); errors exit through sp_cli_fail. */
#define SP_CLI_EXIT_MISMATCH 1

/* Shared helpers (cli_util.c). */

/* Print "spsim: <message>" for @p err on stderr, free it and return 2 (usage) or 1. */
int sp_cli_fail(GError *err);

typedef struct _JsonBuilder JsonBuilder;
/* Print the finished document of @p b on stdout as one compact line. */
void sp_cli_print_json(JsonBuilder *b);

/* A transport of the spread what-if: mpirun's ranks (cli_spread.c) or forked
 * processes (cli_jobs.c). Its state,
 * sp_whatif_spread::user, starts with a pointer to these. */
typedef struct {
  void (*failed)(sp_whatif_spread *s, const char *message); /* see sp_cli_spread_failed */
  void (*close)(sp_whatif_spread *s, int rc);               /* see sp_cli_spread_close */
} sp_cli_spread_ops;

/* The what-if spread over the ranks of `mpirun -np N spsim ...` (cli_spread.c).
 * *@p out: NULL outside mpirun or with one rank, else this rank's exchanges through
 * spsim-mpi-relay (started at the first exchange). FALSE with @p err when the
 * launcher's variables make no sense. */
gboolean sp_cli_spread_open(sp_whatif_spread **out, GError **err);
/* This rank failed with @p message (rank 0 has printed it). Before the first
 * exchange: wait until every rank has failed or rank 0 has said why, so that no
 * rank's exit status stops rank 0 before its line is out; rank 0 names another rank
 * that failed alone. Later: nothing (sp_cli_spread_close stops the job). */
void sp_cli_spread_failed(sp_whatif_spread *s, const char *message);
/* End this rank's part: MPI_Finalize once every exchange is over, else stop the whole
 * job with @p rc (a rank that failed half-way). Frees @p s. */
void sp_cli_spread_close(sp_whatif_spread *s, int rc);

/* The what-if spread over @p jobs processes of this machine (cli_jobs.c): this
 * process forks @p jobs - 1 children before the engine opens and is rank 0; *@p out is
 * each process's side of the exchanges (NULL for @p jobs <= 1, or when no child could
 * start: fewer processes give the same result). Close with sp_cli_spread_close. */
gboolean sp_cli_jobs_open(int32_t jobs, sp_whatif_spread **out, GError **err);
/* Most processes -j accepts. */
#define SP_CLI_JOBS_MAX 1024
/* Available memory asked of each process by the default -j: the 16,384-GPU sweep's
 * peak resident set, 1.5 GiB (bench/RESULTS.md, "Routed build"), with room. */
#define SP_CLI_JOBS_MIN_MEM ((guint64)2 << 30)
/* The default -j: one process per processor this process may run on, at most one per
 * @p need bytes (at least SP_CLI_JOBS_MIN_MEM) of available memory (Linux), at least 1. */
int32_t sp_cli_jobs_auto(guint64 need);

/* Computes item @p i (of sp_cli_jobs_map) into @p out; FALSE with @p err. */
typedef gboolean (*sp_cli_item_fn)(void *user, guint i, void *out, GError **err);
/* Compute @p n items of @p size bytes of plain data, item i into out + i x size, over
 * @p jobs processes of this machine (cli_jobs.c): children forked here (sharing what
 * this process has loaded) compute their share and send its bytes back, this process
 * the rest. Shares: every jobs-th item, or with @p weight (the items' expected costs,
 * may be NULL) the heaviest first to the least loaded. FALSE with the error of the
 * lowest item that failed, as one process computing them in order would report it. */
gboolean sp_cli_jobs_map(int32_t jobs, guint n, gsize size, sp_cli_item_fn fn, void *user, const double *weight,
                         void *out, GError **err);

#endif
