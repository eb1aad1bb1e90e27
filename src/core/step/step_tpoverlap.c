/* Tensor-parallel communication overlapped with the GEMMs beside it, as Megatron-LM's
 * --tp-comm-overlap runs it through Transformer Engine's userbuffers: the chunk sizes,
 * the time of one overlapped GEMM and the closed form's per-layer terms. */
#include "config.h"

#include <math.h>

#include "spsim/step.h"

/* Transformer Engine's default userbuffers configuration (NVIDIA/TransformerEngine
 * transformer_engine/pytorch/module/base.py, initialize_ub, the `methods` table and
 * add_ub's defaults; Megatron-LM passes no --tp-comm-overlap-cfg by default,
 * megatron/training/arguments.py and megatron/training/initialize.py _initialize_tp_communicators):
 *  - "ring_exchange" for qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad: the all-gather
 *    before a GEMM runs as tp - 1 point-to-point steps, each passing one shard to the
 *    next rank while the GEMM of the shard held runs (UbufP2PCommOverlap);
 *  - "pipeline" for proj_fprop, fc2_fprop: the GEMM runs in num_splits = 4 chunks, each
 *    chunk's reduce-scatter under the next chunk's GEMM (UbufCommOverlap);
 *  - "bulk" for qkv_dgrad/fc1_dgrad (the input's re-gather under the data gradient) and
 *    qkv_wgrad/fc1_wgrad (the data gradient's reduce-scatter under the weight gradient),
 *    which the step graph overlaps the same way without it (column_bwd in stepgraph.c);
 *  - every userbuffer takes num_sm = 16 SMs by default (of an H100's 132: GEMMs keep
 *    116/132, 13.8 % slower), which the step prices with the platform's comm_slowdown
 *    (18.9 % by default) like any collective beside kernels. */
#define TPO_RS_SPLITS 4

const char sp_tpo_what_shard[] = "TP overlap: all-gather ring-exchange step (one shard)";
const char sp_tpo_what_rs[] = "TP overlap: reduce-scatter chunk (pipelined)";

int32_t sp_step_tpo_rs_splits(void) { return TPO_RS_SPLITS; }

/* The rank's gathered activations, sp_step_comm_sizes' act: mb x seq / (sp x cp) tokens of h. */
static double act_bytes(const sp_step_ctx *c, const sp_layout *l)
{
  const sp_model *m = c->model;
  return (double)l->mb * (double)c->seq / ((double)l->sp * l->cp) * (double)m->hidden * sp_model_dtype_bytes(m);
}

void sp_step_tpo_comms(const sp_step_ctx *c, const sp_layout *l, sp_comm *shard, sp_comm *rs)
{
  double act = act_bytes(c, l);
  int32_t tp = MAX(l->tp, 1);
  *shard = (sp_comm){ .kind = SP_COMM_TP, .when = SP_PER_LAYER_FWD, .coll = SP_COLL_SEND_RECV, .n = 2, .stride = 1,
                      .bytes = (uint64_t)llround(act / tp), .times = 1, .what = sp_tpo_what_shard };
  *rs = (sp_comm){ .kind = SP_COMM_TP, .when = SP_PER_LAYER_FWD, .coll = SP_COLL_REDUCE_SCATTER, .n = tp, .stride = 1,
                   .bytes = (uint64_t)llround(act / TPO_RS_SPLITS), .times = 1, .what = sp_tpo_what_rs };
}

double sp_step_tpo_ag_time(double gemm, int32_t n, double shard)
{
  if (n < 2) return gemm;
  double g = gemm / n;
  return g + (n - 1) * MAX(g, shard);
}

double sp_step_tpo_rs_time(double gemm, int32_t k, double chunk)
{
  if (k < 1) k = 1;
  double g = gemm / k;
  return g + (k - 1) * MAX(g, chunk) + chunk;
}

gboolean sp_step_tpo_terms(const sp_step_ctx *c, const sp_layout *l, const sp_layer_kernels *k, double dense,
                           sp_tpo_terms *o, GError **err)
{
  *o = (sp_tpo_terms){ 0 };
  if (!l->tp_overlap || l->tp < 2 || !l->tp_sp) return TRUE;
  sp_comm shard, rs, whole_ag, whole_rs;
  sp_step_tpo_comms(c, l, &shard, &rs);
  whole_ag = (sp_comm){ .kind = SP_COMM_TP, .when = SP_PER_LAYER_FWD, .coll = SP_COLL_ALL_GATHER, .n = l->tp,
                        .stride = 1, .bytes = (uint64_t)llround(act_bytes(c, l)), .times = 1, .what = "TP+SP all-gather" };
  whole_rs = whole_ag;
  whole_rs.coll = SP_COLL_REDUCE_SCATTER;
  double s = 0, r = 0, A = 0, R = 0;
  if (!c->price(c->price_user, &shard, &s, err) || !c->price(c->price_user, &rs, &r, err) ||
      !c->price(c->price_user, &whole_ag, &A, err) || !c->price(c->price_user, &whole_rs, &R, err))
    return FALSE;
  int32_t n = l->tp, K = TPO_RS_SPLITS;
  /* forward: QKV after a ring-exchange gather, the output projection before a pipelined
   * reduce-scatter; the MLP's up and down projections likewise (dense layers only) */
  double ag_comm = (n - 1) * s, rs_comm = K * r;
  o->plain_f = A + R + dense * (A + R);
  o->comm_f = ag_comm + rs_comm + dense * (ag_comm + rs_comm);
  o->exposed_f = (sp_step_tpo_ag_time(k->qkv[0], n, s) - k->qkv[0]) + (sp_step_tpo_rs_time(k->proj[0], K, r) - k->proj[0]) +
                 dense * ((sp_step_tpo_ag_time(k->up[0], n, s) - k->up[0]) + (sp_step_tpo_rs_time(k->down[0], K, r) - k->down[0]));
  /* backward: the gradient's gather before the data gradients of the row-parallel
   * GEMMs (output projection, MLP down) as a ring exchange */
  o->plain_b = A + dense * A;
  o->comm_b = ag_comm + dense * ag_comm;
  o->exposed_b = (sp_step_tpo_ag_time(k->proj[1], n, s) - k->proj[1]) +
                 dense * (sp_step_tpo_ag_time(k->down[1], n, s) - k->down[1]);
  return TRUE;
}
