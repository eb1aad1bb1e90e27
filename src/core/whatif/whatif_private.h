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

/* The what-if spread over processes (whatif_spread.c). The closed forms of @p cands:
 * the collectives they need priced once over the ranks (with @p engine open and its
 * note hooks), then each rank its contiguous share, gathered on rank 0 into @p rows in the candidates'
 * order (labelled); the first error in that order is rank 0's. Other ranks leave
 * @p rows alone. */
gboolean sp_whatif_spread_closed_form(sp_whatif_spread *s, const sp_whatif_engine *eng, gboolean engine,
                                      const sp_step_ctx *ctx, const GArray *cands, GArray *rows,
                                      sp_whatif_progress_fn progress, void *user, GError **err);
/* Rank 0: run the step graphs of @p res[0..n) (closed forms in, outcomes out) over
 * the ranks, every size-th on each; @p errs[i] receives run i's error (NULL: it ran).
 * @p n = 0 ends the other ranks' sp_whatif_spread_follow. */
gboolean sp_whatif_spread_simulate(sp_whatif_spread *s, const sp_whatif_engine *eng, const sp_step_ctx *ctx,
                                   gboolean engine, double slowdown, sp_step_result *res, guint n, GError **errs,
                                   GError **err);
/* Other ranks: run their share of each round until rank 0 ends them. */
gboolean sp_whatif_spread_follow(sp_whatif_spread *s, const sp_whatif_engine *eng, const sp_step_ctx *ctx,
                                 gboolean engine, double slowdown, GError **err);

#endif
