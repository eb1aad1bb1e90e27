/* Engine-side glue of the what-if analysis (see whatif_sim.h). */
#include "config.h"

#include "spsim/error.h"
#include "whatif_sim.h"

gboolean sp_whatif_engine_open(const char *xml, GError **err)
{
  (void)xml;
  g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "the SimGrid engine cannot price collectives in this build");
  return FALSE;
}

int32_t sp_whatif_engine_hosts(void) { return 0; }

gboolean sp_whatif_engine_price(const sp_comm *c, gboolean step_fidelity, double *seconds, GError **err)
{
  (void)c; (void)step_fidelity; (void)seconds;
  g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "the SimGrid engine cannot price collectives in this build");
  return FALSE;
}
