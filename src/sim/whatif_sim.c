/* Engine-side glue of the what-if analysis (see whatif_sim.h). */
#include "config.h"

#include <math.h>

#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/step.h"
#include "sim.h"
#include "whatif_sim.h"

gboolean sp_whatif_engine_open(const char *xml, GError **err)
{
  return sp_sim_init(xml, err);
}

int32_t sp_whatif_engine_hosts(void)
{
  return sp_sim_num_hosts();
}

/* Program source for the sibling groups {b + j*stride : j < n}, b < nb. */
typedef struct {
  sp_coll coll;
  int32_t n, stride, nb;
  uint64_t count;
  int32_t channels, channel_block; /* ring channels (coll.h) */
  int32_t *members; /* scratch, n entries */
  sp_program *spare; /* a released program, reused by the next get (FLOW) */
} sib_src;

static sp_program *sib_get(void *ud, int32_t rank, GError **err)
{
  sib_src *s = ud;
  sp_program *p = s->spare;
  if (p != NULL) {
    /* emptied, keeping the arrays' capacity: no regrowth for every rank */
    s->spare = NULL;
    p->rank = rank;
    g_array_set_size(p->bufs, 0);
    g_array_set_size(p->steps, 0);
  } else {
    p = sp_program_new(rank);
  }
  int32_t b = rank % s->stride, j = rank / s->stride;
  if (b >= s->nb || j >= s->n)
    return p; /* not in a simulated group: idle */
  for (int32_t k = 0; k < s->n; k++)
    s->members[k] = b + k * s->stride;
  sp_coll_spec spec = { .coll = s->coll, .algo = SP_ALGO_AUTO, .dtype = SP_BF16, .redop = SP_RED_SUM,
                        .ranks = s->members, .n = s->n, .count = s->count,
                        .channels = s->channels, .channel_block = s->channel_block };
  size_t es = sp_dtype_size(spec.dtype);
  uint32_t in = sp_program_add_buffer(p, sp_coll_in_count(&spec) * es, "in");
  uint32_t out = sp_program_add_buffer(p, sp_coll_out_count(&spec) * es, "out");
  if (!sp_lower_coll(p, &spec, in, out, err)) {
    sp_program_free(p);
    return NULL;
  }
  return p;
}

static void sib_release(void *ud, sp_program *p)
{
  sib_src *s = ud;
  if (s->spare == NULL)
    s->spare = p;
  else
    sp_program_free(p);
}

gboolean sp_whatif_engine_simulate(const sp_comm *c, int32_t gpus_per_node, gboolean step_fidelity,
                                   uint64_t bytes, double *seconds, GError **err)
{
  if (c->n < 2 || bytes == 0) {
    *seconds = 0.0;
    return TRUE;
  }
  if (c->stride < 1 || gpus_per_node < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "engine pricer: bad group (n=%d, stride=%d, %d GPUs per node)",
                c->n, c->stride, gpus_per_node);
    return FALSE;
  }
  int32_t n = c->coll == SP_COLL_SEND_RECV ? 2 : c->n;
  int32_t nb = MIN(c->stride, gpus_per_node);
  int64_t world = (int64_t)(n - 1) * c->stride + nb;
  if (world > sp_sim_num_hosts()) {
    nb = 1; /* the siblings do not fit: price the first group alone */
    world = (int64_t)(n - 1) * c->stride + 1;
  }
  if (world > sp_sim_num_hosts()) {
    g_set_error(err, SP_ERROR, SP_ERROR_PLATFORM,
                "a %s group of %d ranks %d apart needs %" G_GINT64_FORMAT " hosts; the platform has %d",
                sp_coll_name(c->coll), n, c->stride, world, sp_sim_num_hosts());
    return FALSE;
  }
  /* the call as NCCL would issue it: count per member, ring channels per node */
  sp_coll_spec cs;
  sp_comm_coll_spec(c, gpus_per_node, bytes, &cs);
  sib_src src = { .coll = c->coll, .n = n, .stride = c->stride, .nb = nb, .count = cs.count,
                  .channels = cs.channels, .channel_block = cs.channel_block,
                  .members = g_new(int32_t, n), .spare = NULL };
  gboolean ok = sp_sim_run_source_lowered(sib_get, sib_release, &src, (int32_t)world,
                                          step_fidelity ? SP_FIDELITY_STEP : SP_FIDELITY_FLOW, NULL,
                                          seconds, err);
  sp_program_free(src.spare);
  g_free(src.members);
  return ok;
}

gboolean sp_whatif_engine_replay(sp_step_replay *r, double *seconds, GError **err)
{
  if (!sp_sim_set_host_map(sp_step_replay_ranks(r), sp_step_replay_nranks(r), err)) return FALSE;
  gboolean ok = sp_sim_run(sp_step_replay_programs(r), sp_step_replay_nranks(r), sp_step_replay_bufs(r),
                           SP_FIDELITY_STEP, NULL, seconds, err);
  sp_sim_set_host_map(NULL, 0, NULL);
  return ok;
}
