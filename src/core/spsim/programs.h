/**
 * @file programs.h
 * @brief Finding spsim's other programs (spsim, spsim-run, spsim-mpi-relay) next to
 *        the running one, in a build tree or an installation.
 */
#ifndef SPSIM_PROGRAMS_H
#define SPSIM_PROGRAMS_H

#include <glib.h>

G_BEGIN_DECLS

/**
 * The program @p name in the folder of the running executable; when that folder is
 * libtool's `.libs` (an uninstalled build), in the folder above it, where the
 * wrapper scripts are.
 * @return a newly allocated path of an executable file, or NULL if there is none.
 */
char *sp_program_beside_self(const char *name);

G_END_DECLS

#endif
