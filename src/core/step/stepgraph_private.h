/* The step graph's builder state and the helpers its parts share (stepgraph.c builds
 * the step; stepgraph_build.c adds tasks; stepgraph_tpo.c and stepgraph_moe.c build the
 * TP-overlap chunks and an MoE layer's parts). Private to src/core/step. */
#ifndef SP_STEPGRAPH_PRIVATE_H
#define SP_STEPGRAPH_PRIVATE_H

#include <stdint.h>

#include "spsim/stepgraph.h"

/* no task */
#define SG_NONE UINT32_MAX
typedef struct {
  const sp_step_ctx *c;
  const sp_layout *l;
  sp_stepgraph *g;
  sp_layer_kernels k;
  GHashTable *comm_ix;  /* "coll/n/stride/bytes/kind" -> index + 1 */
  /* where the builder is */
  int32_t stage, mb, chunk, layer;
  uint8_t phase;
  uint32_t chain;       /* last task on the data path */
  uint32_t open;        /* compute task the next compute may extend, SG_NONE when closed */
  uint32_t need[2];     /* extra dependencies of the next task on the data path */
  /* collectives of a layer (-1: none) */
  int32_t tp_ag, tp_rs, tp_ar, a2a_q, a2a_kv, ring_f, ring_b, w_ag, w_rs, pp_msg;
  int32_t tpo_shard, tpo_rs; /* tpoverlap: ring-exchange step, pipelined reduce-scatter chunk (tpo_*) */
  /* collectives of the input embedding and the output layer (-1: none) */
  int32_t emb_f, emb_b, tie_ar;
  sp_stream w_stream;   /* ISP or DP (ZeRO-3) */
  uint32_t w_next;      /* gather already issued for the next layer of the pass */
  uint32_t wslot[2];    /* last task using each weight-gather buffer */
  uint64_t wcount;      /* gathers issued on the stage */
  /* data parallelism */
  double bucket_params, bucket_acc;
  uint32_t last_dp;     /* last DP task of the stage */
  uint32_t *pgather;    /* ZeRO-1/2: parameter gather task per global layer (this stage) */
  int32_t nvirt;        /* pp x vpp */
  int64_t *voff;        /* first global layer of each virtual stage */
  uint32_t *send_f, *send_b; /* [mb x nvirt]: the send after fwd / bwd of (mb, virtual stage) */
  GArray *patch;        /* of patch: waits on sends of other stages */
  /* mixture of experts (moe_* functions below; -1: none) */
  gboolean moe;
  sp_moe_kernels mk;
  int32_t ep_a2a, ep_node, etp_ag, etp_rs, edp_red, edp_ag; /* ep_node: dispatcher=flex's network stage */
} sb;

typedef struct { uint32_t task; gboolean fwd; int64_t key; } patch;


/* stepgraph_build.c: tasks and collectives */
void sg_add_dep(sp_task *t, uint32_t d);
sp_task *sg_task_at(sb *b, uint32_t id);
uint32_t sg_add(sb *b, sp_task_kind kind, sp_stream st, double secs, int32_t comm, const char *what);
void sg_compute(sb *b, double secs, const char *what);
void sg_need(sb *b, uint32_t id);
void sg_coll_block(sb *b, sp_stream st, int32_t comm);
uint32_t sg_coll_async(sb *b, sp_stream st, int32_t comm, uint32_t after);
void sg_recv_wait(sb *b, gboolean fwd, int64_t key);
int32_t sg_comm_of(sb *b, sp_comm_kind kind, sp_coll coll, int32_t n, int32_t stride, double bytes, const char *what);

/* stepgraph_tpo.c: Megatron-LM's --tp-comm-overlap chunks */
void sg_tpo_ag_gemm(sb *b, double gemm, const char *what);
void sg_tpo_gemm_rs(sb *b, int32_t plain, double gemm, const char *what);

/* stepgraph_moe.c: an MoE layer's collectives and parts */
void sg_moe_layer_comms(sb *b);
gboolean sg_moe_layer(const sb *b);
void sg_moe_fwd_part(sb *b, int part);
void sg_moe_bwd_part(sb *b, int part);
void sg_moe_grad_reduce(sb *b);

#endif
