/* Step graph: an MoE layer's collectives and the parts of its MLP. */
#include "config.h"

#include <math.h>

#include "stepgraph_private.h"

/* ---------- mixture of experts: an MoE layer's MLP part (step_moe.c has the sizes) ---------- */

void sg_moe_layer_comms(sb *b)
{
  const sp_layout *l = b->l;
  const sp_model *m = b->c->model;
  b->ep_a2a = b->ep_node = b->etp_ag = b->etp_rs = b->edp_red = b->edp_ag = -1;
  if (!b->moe) return;
  int32_t ep = sp_layout_ep(l), etp = sp_layout_etp(l), ge = sp_layout_expert_replicas(l);
  double e = sp_model_dtype_bytes(m);
  int32_t nodes = b->mk.nodes;
  b->ep_a2a = sg_comm_of(b, SP_COMM_SP, SP_COLL_ALL_TO_ALL, nodes > 1 ? ep / nodes : ep, etp, b->mk.a2a_bytes,
                         sp_moe_what_dispatch);
  if (nodes > 1)
    b->ep_node = sg_comm_of(b, SP_COMM_SP, SP_COLL_ALL_TO_ALL, nodes, b->c->gpus_per_node, b->mk.node_bytes,
                            sp_moe_what_dispatch_node);
  b->etp_ag = sg_comm_of(b, SP_COMM_TP, SP_COLL_ALL_GATHER, etp, 1, b->mk.a2a_bytes * etp, sp_moe_what_etp_ag);
  b->etp_rs = sg_comm_of(b, SP_COMM_TP, SP_COLL_REDUCE_SCATTER, etp, 1, b->mk.a2a_bytes * etp, sp_moe_what_etp_rs);
  double grads = sp_step_moe_layer_expert_params(m, l) * e;
  b->edp_red = sg_comm_of(b, SP_COMM_DP, l->zero == 0 ? SP_COLL_ALL_REDUCE : SP_COLL_REDUCE_SCATTER, ge, etp * ep, grads,
                       sp_moe_what_edp_grad);
  if (l->zero >= 1) b->edp_ag = sg_comm_of(b, SP_COMM_DP, SP_COLL_ALL_GATHER, ge, etp * ep, grads, sp_moe_what_edp_gather);
}

gboolean sg_moe_layer(const sb *b) { return b->moe && sp_model_layer_is_moe(b->c->model, b->layer); }

/* A dispatch or combine: one all-to-all on the SP stream; with dispatcher=flex across
 * nodes, its network stage there and its NVLink stage on the ISP stream (which MoE
 * layouts leave idle: check_ep refuses ISP and ZeRO-3), both from where the data path
 * is, and the data path waits for both. */
static void moe_a2a(sb *b)
{
  if (b->ep_node < 0) {
    sg_coll_block(b, SP_STREAM_SP, b->ep_a2a);
    return;
  }
  uint32_t x = sg_coll_async(b, SP_STREAM_SP, b->ep_node, b->chain);
  uint32_t y = sg_coll_async(b, SP_STREAM_ISP, b->ep_a2a, b->chain);
  for (int i = 0; i < 2; i++) {
    sg_add_dep(sg_task_at(b, x), b->need[i]);
    if (y != SG_NONE) sg_add_dep(sg_task_at(b, y), b->need[i]);
    b->need[i] = SG_NONE;
  }
  sg_need(b, x);
  sg_need(b, y);
}

/* An MoE layer's MLP in the parts Megatron-Core's combined 1F1B schedules apart
 * (megatron/core/models/common/model_chunk_schedule_plan.py, TransformerLayerSchedulePlan:
 * pre-dispatch computation, dispatch, mlp, combine), forward: 0 router and permute,
 * 1 dispatch all-to-all, 2 the experts (with the expert-TP gather and reduce-scatter),
 * 3 combine all-to-all, 4 unpermute and shared experts. */
void sg_moe_fwd_part(sb *b, int part)
{
  gboolean shared = b->c->model->shared_experts > 0; /* shared experts run on the tp-gathered tokens */
  switch (part) {
  case 0:
    if (shared) sg_coll_block(b, SP_STREAM_TP, b->tp_ag);
    sg_compute(b, b->mk.router[0] + b->mk.permute / 2, "router, permute");
    break;
  case 1: case 3: moe_a2a(b); break;
  case 2:
    sg_coll_block(b, SP_STREAM_TP, b->etp_ag);
    sg_compute(b, b->mk.experts[0] + b->mk.act, "experts (grouped GEMM, activation)");
    sg_coll_block(b, SP_STREAM_TP, b->etp_rs);
    break;
  default:
    sg_compute(b, b->mk.permute / 2 + b->mk.shared[0], "unpermute, shared experts");
    if (shared) sg_coll_block(b, SP_STREAM_TP, b->l->tp_sp ? b->tp_rs : b->tp_ar);
  }
}

/* Backward: 0 shared experts and unpermute, 1 combine all-to-all, 2 the experts, 3
 * dispatch all-to-all, 4 router and permute. */
void sg_moe_bwd_part(sb *b, int part)
{
  gboolean shared = b->c->model->shared_experts > 0;
  switch (part) {
  case 0:
    if (shared) sg_coll_block(b, SP_STREAM_TP, b->tp_ag);
    sg_compute(b, b->mk.permute / 2 + b->mk.shared[1] + b->mk.shared[2], "shared experts, unpermute backward");
    break;
  case 1: case 3: moe_a2a(b); break;
  case 2:
    sg_coll_block(b, SP_STREAM_TP, b->etp_ag);
    /* recompute=moe_act runs the activation's forward again ahead of its backward */
    sg_compute(b, b->mk.experts[1] + b->mk.experts[2] + (sp_layout_rmods(b->l) & SP_RMOD_MOE_ACT ? 3.0 : 2.0) * b->mk.act,
               "experts backward (grouped GEMM, activation)");
    sg_coll_block(b, SP_STREAM_TP, b->etp_rs);
    break;
  default:
    sg_compute(b, b->mk.router[1] + b->mk.router[2] + b->mk.permute / 2, "router, permute backward");
    if (shared) sg_coll_block(b, SP_STREAM_TP, b->l->tp_sp ? b->tp_rs : b->tp_ar);
  }
}

/* The layer's expert gradients are final: reduce them over the expert-dp group (and, with
 * ZeRO, gather the updated shards back ahead of the next step, here after the reduction). */
void sg_moe_grad_reduce(sb *b)
{
  if (!sg_moe_layer(b) || b->edp_red < 0) return;
  uint8_t keep = b->phase;
  b->phase = SP_PHASE_STEP;
  b->last_dp = sg_coll_async(b, SP_STREAM_DP, b->edp_red, b->chain);
  if (b->edp_ag >= 0) b->last_dp = sg_coll_async(b, SP_STREAM_DP, b->edp_ag, b->last_dp);
  b->phase = keep;
}
