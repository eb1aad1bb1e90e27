/**
 * @file platform_args.h
 * @brief The command line of the platform generator (`spsim platform dgx ...`) read into
 *        sp_platform_opts. The CLI reads its arguments with it, and spsim reads the
 *        command a generated platform names in its header with it (platform_routed.h),
 *        so both take the same options with the same checks. Text only: no SimGrid call.
 */
#ifndef SPSIM_PLATFORM_ARGS_H
#define SPSIM_PLATFORM_ARGS_H

#include <glib.h>

#include "platform_gen.h"

G_BEGIN_DECLS

/**
 * Read `PROGRAM dgx [options]` (@p argv[0] is the program's name) into @p opts.
 * @p help: --help prints the options and exits, as a command line's does (FALSE when
 * the arguments come from a file). @p output (may be NULL): the -o FILE given, or NULL.
 * Fails with G_OPTION_ERROR (an unknown or malformed option) or SP_ERROR_INVALID (a
 * value out of range, a missing --nodes, a family other than dgx), saying which.
 */
gboolean sp_platform_args_parse(int argc, char **argv, gboolean help, sp_platform_opts *opts, char **output,
                                GError **err);

G_END_DECLS

#endif
