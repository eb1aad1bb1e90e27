/* Shared by the files of src/core/whatif (never installed). */
#ifndef SPSIM_WHATIF_PRIVATE_H
#define SPSIM_WHATIF_PRIVATE_H

#include <glib.h>
#include "spsim/whatif.h"

#define SP_WHATIF_GIB (1024.0 * 1024.0 * 1024.0)

/* Pass a message to the result's report function (if any). */
void sp_whatif_report(const sp_whatif_result *r, sp_whatif_msg kind, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/* @p t rounded to 5 significant digits: step times equal under it are a tie
 * (whatif_family.c). */
double sp_whatif_time_key(double t);
/* An empty array of sp_whatif_check that frees its members. */
GArray *sp_whatif_checks_new(void);
/* Free what @p v holds (not @p v). */
void sp_whatif_check_clear(sp_whatif_check *v);

/* Group the ranked rows into families and fill r->families, each row's family and
 * r->shown (whatif_family.c); after the outcome is set. */
void sp_whatif_group(sp_whatif_result *r);
/* The best row of the second family when it fits (the runner-up), else NULL. */
const sp_whatif_row *sp_whatif_runner_up(const sp_whatif_result *r);

#endif
