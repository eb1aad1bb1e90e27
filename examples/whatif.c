/* A what-if through the library: llama3-8b on an 8-GPU platform (its GPUs taken as
 * 80 GiB ones), first one layout, then a sweep of every layout, printing the winner
 * and why it wins.
 *
 *   examples/whatif [PLATFORM.xml [MODELS_DIR]]
 *
 * (defaults: the source tree's platforms/small.xml and models/). */
#include "config.h"

#include <stdio.h>

#include "spsim/whatif.h"
#include "whatif_sim.h"

static void report(void *user, sp_whatif_msg kind, const char *text)
{
  (void)user;
  fprintf(stderr, "%s: %s\n", kind == SP_WHATIF_WARNING ? "warning" : "note", text);
}

/* Run one what-if and print its winner; FALSE (with the error printed) on failure. */
static gboolean run(const char *what, const sp_whatif_opts *o, const char *platform)
{
  GError *err = NULL;
  g_autoptr(sp_whatif_result) r = sp_whatif_run(o, platform, &err);
  if (r == NULL || !sp_whatif_result_ok(r, &err)) {
    fprintf(stderr, "%s: %s\n", what, err->message);
    g_error_free(err);
    return FALSE;
  }
  const sp_whatif_row *w = sp_whatif_winner(r);
  printf("%s: %u layout%s evaluated, %u fit; winner %s: %.3f s per step, MFU %.1f%%, %.1f GiB per GPU (%s)\n", what,
         r->rows->len, r->rows->len == 1 ? "" : "s", r->nfit, w->label, w->r.step_time, 100 * w->r.mfu,
         w->r.mem.total / (1024.0 * 1024 * 1024), w->r.simulated ? "simulated step graph" : "closed form");
  g_autofree char *why = sp_whatif_explain_text(r);
  printf("  %s\n", why);
  return TRUE;
}

int main(int argc, char **argv)
{
  const char *platform = argc > 1 ? argv[1] : SPSIM_TOP_SRCDIR "/platforms/small.xml";
  const char *dirs[] = { argc > 2 ? argv[2] : SPSIM_TOP_SRCDIR "/models", NULL };

  sp_whatif_opts o;
  sp_whatif_opts_init(&o);
  o.model = "llama3-8b";
  o.model_dirs = dirs;
  o.global_batch = "64";
  o.gpu_mem_gib = 80;
  o.report = report;

  /* one layout: tensor parallel inside the node, data parallel across */
  o.layout = "tp=4,dp=2,ckpt=selective";
  gboolean ok = run("one layout", &o, platform);

  /* the sweep: every valid layout, the step graph of the best four simulated */
  o.layout = NULL;
  o.simulate = 4;
  ok = run("sweep", &o, platform) && ok;
  return ok ? 0 : 1;
}
