/* Step graph: one training step of a layout as tasks on streams with dependencies
 * (stepgraph.h), and a contention-free reference run of it. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/stepgraph.h"
#include "stepgraph_private.h"


static const char *const stream_names[SP_STREAM_COUNT] = { "compute", "tp", "sp", "isp", "ring", "pp", "dp" };
static const char *const phase_names[SP_PHASE_COUNT] = { "fwd", "bwd", "recompute", "step" };

const char *sp_stream_name(sp_stream s) { return (unsigned)s < SP_STREAM_COUNT ? stream_names[s] : "?"; }
const char *sp_task_phase_name(sp_task_phase p) { return (unsigned)p < SP_PHASE_COUNT ? phase_names[p] : "?"; }

/* The collectives a layer issues, with the sizes sp_step_comms uses. */
static void layer_comms(sb *b)
{
  const sp_layout *l = b->l;
  sp_step_sizes z;
  sp_step_comm_sizes(b->c, l, &z);
  double act = z.act;
  b->tp_ag = b->tp_rs = b->tp_ar = b->a2a_q = b->a2a_kv = b->ring_f = b->ring_b = b->w_ag = b->w_rs = b->pp_msg = -1;
  if (l->tp > 1) {
    if (l->tp_sp) {
      b->tp_ag = sg_comm_of(b, SP_COMM_TP, SP_COLL_ALL_GATHER, l->tp, 1, act, "TP+SP all-gather");
      b->tp_rs = sg_comm_of(b, SP_COMM_TP, SP_COLL_REDUCE_SCATTER, l->tp, 1, act, "TP+SP reduce-scatter");
    } else {
      b->tp_ar = sg_comm_of(b, SP_COMM_TP, SP_COLL_ALL_REDUCE, l->tp, 1, act, "TP all-reduce");
    }
  }
  if (l->sp > 1) {
    b->a2a_q = sg_comm_of(b, SP_COMM_SP, SP_COLL_ALL_TO_ALL, l->sp, l->tp, z.q, "Ulysses all-to-all (Q or output)");
    b->a2a_kv = sg_comm_of(b, SP_COMM_SP, SP_COLL_ALL_TO_ALL, l->sp, l->tp, z.kv, "Ulysses all-to-all (K or V)");
  }
  if (l->cp > 1) {
    b->ring_f = sg_comm_of(b, SP_COMM_RING, SP_COLL_SEND_RECV, 2, l->tp * l->sp, z.ring_blk, "ring attention K,V block");
    b->ring_b = sg_comm_of(b, SP_COMM_RING, SP_COLL_SEND_RECV, 2, l->tp * l->sp, 2.0 * z.ring_blk, "ring attention K,V and dK,dV blocks");
  }
  double mmw = z.layer_weights;
  int32_t g = sp_layout_replicas(l) / l->wp;
  if (l->wp > 1) {
    b->w_ag = sg_comm_of(b, SP_COMM_ISP, SP_COLL_ALL_GATHER, l->wp, l->tp, mmw, "ISP weight all-gather");
    b->w_rs = sg_comm_of(b, SP_COMM_ISP, SP_COLL_REDUCE_SCATTER, l->wp, l->tp, mmw, "ISP gradient reduce-scatter");
    b->w_stream = SP_STREAM_ISP;
  } else if (l->zero >= 3) {
    b->w_ag = sg_comm_of(b, SP_COMM_DP, SP_COLL_ALL_GATHER, g, l->tp * l->wp, mmw, "ZeRO-3 parameter all-gather");
    b->w_rs = sg_comm_of(b, SP_COMM_DP, SP_COLL_REDUCE_SCATTER, g, l->tp * l->wp, mmw * sp_step_grad_bytes(b->c->model, l) /
                      sp_model_dtype_bytes(b->c->model), "ZeRO-3 gradient reduce-scatter");
    b->w_stream = SP_STREAM_DP;
  }
  if (l->pp > 1)
    b->pp_msg = sg_comm_of(b, SP_COMM_PP, SP_COLL_SEND_RECV, 2, l->tp * l->sp * l->cp * l->dp, z.pp_msg, "pipeline send");
  b->tpo_shard = b->tpo_rs = -1;
  if (l->tp_overlap && l->tp > 1 && l->tp_sp) {
    sp_comm sh, rs;
    sp_step_tpo_comms(b->c, l, &sh, &rs);
    b->tpo_shard = sg_comm_of(b, sh.kind, sh.coll, sh.n, sh.stride, (double)sh.bytes, sh.what);
    b->tpo_rs = sg_comm_of(b, rs.kind, rs.coll, rs.n, rs.stride, (double)rs.bytes, rs.what);
  }
}

/* The collectives of the input embedding and the output layer, as Megatron-LM issues
 * them (NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py, mappings.py,
 * models/common/embeddings/language_model_embedding.py, distributed/finalize_model_grads.py);
 * sizes in sp_step_edge_comms (step.c), which the closed form prices:
 *  - VocabParallelEmbedding sums the TP ranks' partial lookups: an all-reduce
 *    (reduce_from_tensor_model_parallel_region, whose backward is the identity) without
 *    sequence parallelism, a reduce-scatter (reduce_scatter_to_sequence_parallel_region,
 *    whose backward is an all-gather) with it;
 *  - the output layer is a ColumnParallelLinear: its backward reduces the input gradient
 *    like a layer's column-parallel GEMMs (column_bwd), see build_stage;
 *  - tied embeddings split over pipeline stages: the first and last stage all-reduce
 *    the word-embedding gradient after the data-parallel reduction, before the optimizer
 *    (_allreduce_word_embedding_grads). */
static void edge_comms(sb *b)
{
  g_autoptr(GArray) a = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  sp_step_edge_comms(b->c, b->l, a);
  b->emb_f = b->emb_b = b->tie_ar = -1;
  for (guint i = 0; i < a->len; i++) {
    const sp_comm *cm = &g_array_index(a, sp_comm, i);
    if (cm->when == SP_PER_MB_HEAD) continue; /* the layers' TP collectives, in build_stage */
    int32_t id = sg_comm_of(b, cm->kind, cm->coll, cm->n, cm->stride, (double)cm->bytes, cm->what);
    if (cm->when == SP_PER_STEP) b->tie_ar = id;
    else if (cm->coll == SP_COLL_ALL_GATHER) b->emb_b = id;
    else b->emb_f = id;
  }
}

/* Tied embeddings: the stage's copy of the word-embedding gradient is all-reduced with
 * the other end of the pipeline once its data-parallel reduction is over. */
static void tie_reduce(sb *b, int32_t s)
{
  if (b->tie_ar < 0 || (s != 0 && s != b->l->pp - 1)) return;
  uint8_t keep = b->phase;
  b->phase = SP_PHASE_STEP;
  uint32_t id = sg_coll_async(b, SP_STREAM_DP, b->tie_ar, b->chain);
  sg_add_dep(sg_task_at(b, id), b->last_dp);
  b->last_dp = id;
  b->phase = keep;
}

/* ISP and ZeRO-3 gather a layer's weights into one of two buffers: the current
 * layer's gather was issued at the start of the previous layer of the pass (or now,
 * for the first), and the next layer's is issued now, once its buffer is free, so
 * that it runs under this layer's compute (InternEvo's and FSDP's prefetch). */
static void weight_gather(sb *b, gboolean has_next)
{
  if (b->w_ag < 0) return;
  if (b->w_next == SG_NONE) {
    uint32_t slot = (uint32_t)(b->wcount++ & 1);
    b->w_next = sg_coll_async(b, b->w_stream, b->w_ag, b->wslot[slot]);
  }
  sg_need(b, b->w_next);
  b->w_next = SG_NONE;
  if (has_next) {
    uint32_t slot = (uint32_t)(b->wcount++ & 1);
    b->w_next = sg_coll_async(b, b->w_stream, b->w_ag, b->wslot[slot]);
  }
}

/* The layer is done with its buffer (the one gathered before the prefetched one). */
static void weight_release(sb *b, gboolean has_next)
{
  if (b->w_ag < 0) return;
  b->wslot[(b->wcount - (has_next ? 2 : 1)) & 1] = b->chain;
  if (b->chain == b->open) b->open = SG_NONE;
}

static void attention_fwd(sb *b, uint8_t phase)
{
  const sp_layout *l = b->l;
  uint8_t keep = b->phase;
  b->phase = phase;
  if (l->cp > 1) {
    /* the ring passes K,V blocks on while the attention of the held block runs */
    uint32_t prev = b->chain;
    uint32_t xfer = SG_NONE;
    for (int32_t j = 0; j < l->cp; j++) {
      if (j + 1 < l->cp) {
        uint32_t x = sg_coll_async(b, SP_STREAM_RING, b->ring_f, prev);
        if (j == 0) prev = SG_NONE;
        sg_need(b, xfer);
        sg_compute(b, b->k.attn_fwd / l->cp, "attention block");
        xfer = x;
      } else {
        sg_need(b, xfer);
        sg_compute(b, b->k.attn_fwd / l->cp, "attention block");
      }
    }
  } else {
    sg_compute(b, b->k.attn_fwd, "attention");
  }
  b->phase = keep;
}

/* A layer's forward up to its MLP (Megatron-Core's pre-dispatch computation but the router). */
static void layer_fwd_attn(sb *b, gboolean gather, gboolean has_next)
{
  const sp_layout *l = b->l;
  double half = b->k.elem_fwd / 2;
  if (gather) weight_gather(b, has_next);
  if (b->pgather != NULL && b->mb == 0 && b->phase == SP_PHASE_FWD) sg_need(b, b->pgather[b->layer]);
  sg_compute(b, half, "norm");
  sg_tpo_ag_gemm(b, b->k.qkv[0], "QKV");
  sg_coll_block(b, SP_STREAM_SP, b->a2a_q);
  sg_coll_block(b, SP_STREAM_SP, b->a2a_kv);
  sg_coll_block(b, SP_STREAM_SP, b->a2a_kv);
  attention_fwd(b, b->phase);
  sg_coll_block(b, SP_STREAM_SP, b->a2a_q);
  sg_tpo_gemm_rs(b, l->tp_sp ? b->tp_rs : b->tp_ar, b->k.proj[0], "output projection");
  sg_compute(b, half, "residual, norm");
}

static void layer_fwd(sb *b, gboolean gather, gboolean has_next)
{
  const sp_layout *l = b->l;
  layer_fwd_attn(b, gather, has_next);
  if (sg_moe_layer(b)) {
    for (int part = 0; part < 5; part++) sg_moe_fwd_part(b, part);
    if (gather) weight_release(b, has_next);
    return;
  }
  sg_tpo_ag_gemm(b, b->k.up[0], "MLP");
  sg_tpo_gemm_rs(b, l->tp_sp ? b->tp_rs : b->tp_ar, b->k.down[0], "MLP");
  if (gather) weight_release(b, has_next);
}

/* Backward of a column-parallel GEMM: re-gather the input (sequence parallelism) for
 * the weight gradient while the data gradient runs, then reduce the data gradient
 * while the weight gradient runs. */
static void column_bwd(sb *b, const double t[3], const char *what)
{
  const sp_layout *l = b->l;
  uint32_t ag = l->tp_sp ? sg_coll_async(b, SP_STREAM_TP, b->tp_ag, b->chain) : SG_NONE;
  sg_compute(b, t[1], what);
  uint32_t red = sg_coll_async(b, SP_STREAM_TP, l->tp_sp ? b->tp_rs : b->tp_ar, b->chain);
  if (red == SG_NONE && ag == SG_NONE) {
    sg_compute(b, t[2], what);
    return;
  }
  sg_need(b, ag);
  sg_compute(b, t[2], "weight gradient");
  sg_need(b, red);
}

static void layer_bwd_attn(sb *b, gboolean has_next);

/* Recomputation ahead of a layer's backward (ckpt=full or op). */
static void layer_bwd_recompute(sb *b)
{
  const sp_layout *l = b->l;
  if (l->ckpt == SP_CKPT_FULL) {
    uint8_t keep = b->phase;
    b->phase = SP_PHASE_RECOMPUTE;
    layer_fwd(b, FALSE, FALSE);
    b->phase = keep;
  } else if (l->ckpt == SP_CKPT_OP) {
    uint8_t keep = b->phase;
    b->phase = SP_PHASE_RECOMPUTE;
    sg_compute(b, b->k.op_recompute, "recompute (op policy)");
    b->phase = keep;
  } else if (l->ckpt == SP_CKPT_SELECTIVE) {
    /* the selective modules but the attention core (layer_bwd_attn), ahead of the MLP's
     * backward: the norms, MLA's up-projections and a dense layer's MLP */
    double t = b->k.rmod_attn + (sg_moe_layer(b) ? 0.0 : b->k.rmod_mlp);
    if (t <= 0) return;
    uint8_t keep = b->phase;
    b->phase = SP_PHASE_RECOMPUTE;
    sg_compute(b, t, "recompute (modules)");
    b->phase = keep;
  }
}

static void layer_bwd(sb *b, gboolean has_next)
{
  weight_gather(b, has_next);
  layer_bwd_recompute(b);
  /* MLP: row-parallel down projection, then column-parallel up projection */
  if (sg_moe_layer(b)) {
    for (int part = 0; part < 5; part++) sg_moe_bwd_part(b, part);
  } else {
    sg_tpo_ag_gemm(b, b->k.down[1], "MLP down backward");
    sg_compute(b, b->k.down[2], "MLP down backward");
    column_bwd(b, b->k.up, "MLP up backward");
  }
  layer_bwd_attn(b, has_next);
}

/* A layer's backward from its MLP's input gradient down. */
static void layer_bwd_attn(sb *b, gboolean has_next)
{
  const sp_layout *l = b->l;
  sg_compute(b, b->k.elem_fwd, "residual, norm backward");
  /* attention */
  sg_tpo_ag_gemm(b, b->k.proj[1], "output projection backward");
  sg_compute(b, b->k.proj[2], "output projection backward");
  sg_coll_block(b, SP_STREAM_SP, b->a2a_q);
  if (sp_layout_rmods(l) & SP_RMOD_CORE_ATTN) attention_fwd(b, SP_PHASE_RECOMPUTE);
  if (l->cp > 1) {
    uint32_t prev = b->chain, xfer = SG_NONE;
    for (int32_t j = 0; j < l->cp; j++) {
      uint32_t x = j + 1 < l->cp ? sg_coll_async(b, SP_STREAM_RING, b->ring_b, prev) : SG_NONE;
      if (j == 0) prev = SG_NONE;
      sg_need(b, xfer);
      sg_compute(b, b->k.attn_bwd / l->cp, "attention block backward");
      xfer = x;
    }
  } else {
    sg_compute(b, b->k.attn_bwd, "attention backward");
  }
  sg_coll_block(b, SP_STREAM_SP, b->a2a_q);
  sg_coll_block(b, SP_STREAM_SP, b->a2a_kv);
  sg_coll_block(b, SP_STREAM_SP, b->a2a_kv);
  column_bwd(b, b->k.qkv, "QKV backward");
  sg_compute(b, b->k.elem_fwd, "norm backward");
  if (b->w_rs >= 0) {
    uint32_t id = sg_coll_async(b, b->w_stream, b->w_rs, b->chain);
    if (b->w_stream == SP_STREAM_DP) b->last_dp = id; /* ISP's: the optimizer waits for its stream */
  }
  weight_release(b, has_next);
}

/* ---------- data parallelism: gradient buckets and ZeRO-1/2 parameter gathers ---------- */

static int32_t bucket_comm(sb *b, gboolean gather, double params)
{
  const sp_layout *l = b->l;
  double e = sp_model_dtype_bytes(b->c->model);
  int32_t g = sp_layout_replicas(l) / l->wp;
  if (gather) return sg_comm_of(b, SP_COMM_DP, SP_COLL_ALL_GATHER, g, l->tp * l->wp, params * e, "ZeRO parameter all-gather (bucket)");
  double ge = sp_step_grad_bytes(b->c->model, l);
  if (l->zero == 0) return sg_comm_of(b, SP_COMM_DP, SP_COLL_ALL_REDUCE, g, l->tp * l->wp, params * ge, "gradient all-reduce (bucket)");
  return sg_comm_of(b, SP_COMM_DP, SP_COLL_REDUCE_SCATTER, g, l->tp * l->wp, params * ge, "ZeRO gradient reduce-scatter (bucket)");
}

static gboolean dp_grad_buckets(const sb *b)
{
  return sp_layout_replicas(b->l) / b->l->wp > 1 && b->l->zero <= 2;
}

static void dp_flush(sb *b)
{
  if (b->bucket_acc <= 0) return;
  int32_t cm = bucket_comm(b, FALSE, b->bucket_acc);
  b->bucket_acc = 0;
  if (cm < 0) return;
  uint8_t keep = b->phase;
  b->phase = SP_PHASE_STEP;
  b->last_dp = sg_coll_async(b, SP_STREAM_DP, cm, b->chain);
  b->phase = keep;
}

/* Gradients of @p params parameters are final (last micro-batch's backward). */
static void dp_bucket_add(sb *b, double params)
{
  if (!dp_grad_buckets(b)) return;
  b->bucket_acc += params;
  if (!b->l->dp_sync && b->bucket_acc >= b->bucket_params) dp_flush(b);
}

/* ---------- schedule ---------- */

/* pair: a forward run together with the backward after it (a2aoverlap) */
typedef struct { gboolean fwd, pair; int32_t mb, chunk; } slot;

/* Megatron-LM's order of forward and backward passes on pipeline rank @p s. With @p ov
 * (a2aoverlap) the 1F1B steady state pairs each forward with the backward after it, with
 * one more warm-up forward (megatron/core/pipeline_parallel/schedules.py,
 * get_pp_rank_microbatches; without pipelining combined_1f1b.py's
 * combined_1f1b_schedule_for_no_pipelining: F0, then F(i+1) with B(i), then the last B). */
/* Entry @p k of Megatron-Core's interleaved schedule table (schedules.py,
 * get_schedule_table): micro-batches in groups of @p g, each group through every chunk
 * in turn; a remainder of m modulo g forms the last group. */
static void table_entry(int64_t k, int64_t m, int32_t v, int64_t g, int32_t *mb, int32_t *chunk)
{
  int64_t span = g * v, full = m / g;
  if (m % g == 0 || k < full * span) {
    *mb = (int32_t)((k / span) * g + k % g);
    *chunk = (int32_t)((k % span) / g);
  } else {
    int64_t r = m % g, w = k - full * span;
    *mb = (int32_t)(full * g + w % r);
    *chunk = (int32_t)(w / r);
  }
}

static GArray *stage_order(int32_t pp, int32_t v, int64_t m, int64_t g, int32_t s, sp_sched sched, gboolean ov)
{
  GArray *o = g_array_new(FALSE, FALSE, sizeof(slot));
  if (ov && pp == 1) {
    for (int64_t i = 0; i <= m; i++) {
      slot f = { TRUE, TRUE, (int32_t)i, 0 }, bk = { FALSE, FALSE, (int32_t)i - 1, 0 };
      if (i < m) { f.pair = i > 0; g_array_append_val(o, f); }
      if (i > 0) g_array_append_val(o, bk);
    }
    return o;
  }
  if (sched == SP_SCHED_GPIPE || pp == 1) {
    for (int32_t c = 0; c < v; c++)
      for (int64_t i = 0; i < m; i++) { slot x = { TRUE, FALSE, (int32_t)i, c }; g_array_append_val(o, x); }
    for (int32_t c = v - 1; c >= 0; c--)
      for (int64_t i = 0; i < m; i++) { slot x = { FALSE, FALSE, (int32_t)i, c }; g_array_append_val(o, x); }
    return o;
  }
  int64_t total = m * v;
  if (g <= 0) g = pp;
  int64_t warm = sp_step_warmup(pp, v, m, g, s, ov); /* the memory model counts the same passes */
  for (int64_t k = 0; k < total; k++) {
    /* forward k, and (after the warm-up) backward k - warm, its chunk reversed */
    slot f = { TRUE, FALSE, 0, 0 };
    table_entry(k, m, v, g, &f.mb, &f.chunk);
    if (k < warm) { g_array_append_val(o, f); continue; }
    f.pair = ov;
    g_array_append_val(o, f);
    slot bk = { FALSE, FALSE, 0, 0 };
    table_entry(k - warm, m, v, g, &bk.mb, &bk.chunk);
    bk.chunk = v - 1 - bk.chunk;
    g_array_append_val(o, bk);
  }
  for (int64_t j = total - warm; j < total; j++) {
    slot bk = { FALSE, FALSE, 0, 0 };
    table_entry(j, m, v, g, &bk.mb, &bk.chunk);
    bk.chunk = v - 1 - bk.chunk;
    g_array_append_val(o, bk);
  }
  return o;
}

static double embed_time(const sb *b)
{
  const sp_model *m = b->c->model;
  double T = sp_step_local_tokens(b->l, b->c->seq);
  return sp_kernel_elementwise_time(&b->c->hw.gpu, 2.0 * T * (double)m->hidden * sp_model_dtype_bytes(m));
}

/* One forward or backward pass of a chunk, built in steps (begin, its layers, end) so
 * that two passes can interleave; the data path of the one not being built waits here. */
typedef struct {
  const slot *x;
  int32_t vs;
  int64_t first, n, key;
  gboolean last; /* the chunk's last backward: its gradients are final */
  uint32_t chain, need[2];
  uint8_t phase;
  int32_t layer;
} pass;

static void pass_init(sb *b, pass *p, const slot *x, const int32_t *last_bwd_mb)
{
  memset(p, 0, sizeof *p);
  p->x = x;
  p->vs = x->chunk * b->l->pp + b->stage;
  p->first = b->voff[p->vs];
  p->n = sp_layout_chunk_layers(b->l, b->c->model, b->stage, x->chunk);
  p->key = (int64_t)x->mb * b->nvirt + p->vs;
  p->last = !x->fwd && x->mb == last_bwd_mb[x->chunk];
  p->chain = b->chain; /* both passes of a pair start where the stage is */
  p->need[0] = p->need[1] = SG_NONE;
  p->phase = x->fwd ? SP_PHASE_FWD : SP_PHASE_BWD;
  p->layer = -1;
}

/* Leave pass @p from for pass @p to: kernels issued next belong to @p to's data path. */
static void pass_switch(sb *b, pass *from, pass *to)
{
  from->chain = b->chain;
  from->need[0] = b->need[0];
  from->need[1] = b->need[1];
  from->phase = b->phase;
  from->layer = b->layer;
  b->chain = to->chain;
  b->need[0] = to->need[0];
  b->need[1] = to->need[1];
  b->phase = to->phase;
  b->layer = to->layer;
  b->mb = to->x->mb;
  b->chunk = to->x->chunk;
  b->open = SG_NONE;
}

static double pass_emb_params(const sb *b)
{
  return (double)b->c->model->vocab * (double)b->c->model->hidden / b->l->tp / b->l->wp;
}

static void pass_begin(sb *b, pass *p)
{
  const slot *x = p->x;
  b->mb = x->mb;
  b->chunk = x->chunk;
  b->layer = -1;
  if (x->fwd) {
    b->phase = SP_PHASE_FWD;
    if (p->vs > 0) sg_recv_wait(b, TRUE, p->key - 1);
    if (p->vs == 0) {
      sg_compute(b, embed_time(b), "embedding");
      sg_coll_block(b, SP_STREAM_TP, b->emb_f);
    }
    return;
  }
  b->phase = SP_PHASE_BWD;
  if (p->vs < b->nvirt - 1) sg_recv_wait(b, FALSE, p->key + 1);
  else {
    sg_compute(b, b->k.loss, "loss backward");
    column_bwd(b, b->k.head, "output layer backward");
    if (p->last) dp_bucket_add(b, pass_emb_params(b));
  }
}

/* The gradients of backward layer @p li are final. */
static void pass_layer_done(sb *b, const pass *p, int64_t li)
{
  const sp_model *mo = b->c->model;
  if (!p->last) return;
  if (b->moe) sg_moe_grad_reduce(b);
  dp_bucket_add(b, b->moe ? sp_step_moe_layer_dense_params(mo, b->l, li) / b->l->wp
                          : sp_model_layer_params(mo) / b->l->tp / b->l->wp);
}

/* The @p j-th layer of the pass in its order. */
static void pass_layer(sb *b, pass *p, int64_t j)
{
  if (p->x->fwd) {
    b->layer = (int32_t)(p->first + j);
    layer_fwd(b, TRUE, j + 1 < p->n);
    return;
  }
  int64_t li = p->first + p->n - 1 - j;
  b->layer = (int32_t)li;
  layer_bwd(b, li > p->first);
  pass_layer_done(b, p, li);
}

static void pass_end(sb *b, pass *p)
{
  const sp_layout *l = b->l;
  const sp_model *mo = b->c->model;
  int32_t vs = p->vs, pp = l->pp;
  b->layer = -1;
  if (p->x->fwd) {
    if (vs == b->nvirt - 1) {
      sg_coll_block(b, SP_STREAM_TP, b->tp_ag);
      sg_compute(b, b->k.head[0] + b->k.loss, "output layer, loss");
    } else {
      uint32_t id = sg_add(b, SP_TASK_SEND, SP_STREAM_PP, 0.0, b->pp_msg, "send activations");
      sp_task *t = sg_task_at(b, id);
      t->peer = (vs + 1) % pp;
      sg_add_dep(t, b->chain);
      if (b->chain == b->open) b->open = SG_NONE;
      b->send_f[p->key] = id;
    }
    return;
  }
  if (vs == 0) {
    sg_coll_block(b, SP_STREAM_TP, b->emb_b);
    sg_compute(b, embed_time(b), "embedding backward");
    /* one table when the output layer shares it on the same rank */
    if (p->last && !(mo->tied_embeddings && pp == 1)) dp_bucket_add(b, pass_emb_params(b));
  }
  if (p->last && dp_grad_buckets(b) && !l->dp_sync) dp_flush(b);
  if (vs > 0) {
    uint32_t id = sg_add(b, SP_TASK_SEND, SP_STREAM_PP, 0.0, b->pp_msg, "send gradients");
    sp_task *t = sg_task_at(b, id);
    t->peer = (vs - 1) % pp;
    sg_add_dep(t, b->chain);
    if (b->chain == b->open) b->open = SG_NONE;
    b->send_b[p->key] = id;
  }
}

/* A forward pass @p f and the backward pass @p w after it, as Megatron-Core's combined
 * 1F1B runs them (TransformerModelChunkSchedulePlan.run and
 * TransformerLayerSchedulePlan.run, megatron/core/models/common/model_chunk_schedule_plan.py):
 * forward layer i beside backward layer n-1-i; in an MoE pair the all-to-alls of one
 * pass go to the communication stream while the other pass's kernels run:
 *   comm:    combine bwd      | dispatch fwd, dispatch bwd | combine fwd
 *   compute: attention+router | experts bwd, experts fwd   | router+attention bwd
 * The layers one pass has more of run after the pair, backward first. */
static void pass_pair(sb *b, pass *f, pass *w)
{
  pass *cur = f;
#define TO(p) do { if (cur != (p)) { pass_switch(b, cur, (p)); cur = (p); } } while (0)
  pass_begin(b, f);
  TO(w);
  pass_begin(b, w);
  int64_t both = MIN(f->n, w->n);
  for (int64_t j = 0; j < both; j++) {
    int64_t fl = f->first + j, wl = w->first + w->n - 1 - j;
    TO(f);
    b->layer = (int32_t)fl;
    gboolean fm = sg_moe_layer(b);
    TO(w);
    b->layer = (int32_t)wl;
    if (!fm || !sg_moe_layer(b)) { /* nothing to overlap: one after the other */
      TO(f);
      pass_layer(b, f, j);
      TO(w);
      pass_layer(b, w, j);
      continue;
    }
    weight_gather(b, wl > w->first);
    layer_bwd_recompute(b);
    sg_moe_bwd_part(b, 0);
    sg_moe_bwd_part(b, 1);
    TO(f);
    layer_fwd_attn(b, TRUE, j + 1 < f->n);
    sg_moe_fwd_part(b, 0);
    TO(w);
    sg_moe_bwd_part(b, 2);
    TO(f);
    sg_moe_fwd_part(b, 1);
    TO(w);
    sg_moe_bwd_part(b, 3);
    TO(f);
    sg_moe_fwd_part(b, 2);
    sg_moe_fwd_part(b, 3);
    TO(w);
    sg_moe_bwd_part(b, 4);
    layer_bwd_attn(b, wl > w->first);
    pass_layer_done(b, w, wl);
    TO(f);
    sg_moe_fwd_part(b, 4);
    weight_release(b, j + 1 < f->n);
  }
  TO(w);
  for (int64_t j = both; j < w->n; j++) pass_layer(b, w, j);
  TO(f);
  for (int64_t j = both; j < f->n; j++) pass_layer(b, f, j);
  pass_end(b, f);
  TO(w);
  pass_end(b, w);
#undef TO
}

static void build_stage(sb *b, int32_t s, int64_t m, sp_sched sched)
{
  const sp_layout *l = b->l;
  const sp_model *mo = b->c->model;
  int32_t pp = l->pp, v = sp_layout_vpp(l);
  b->stage = s;
  b->chain = b->open = SG_NONE;
  b->need[0] = b->need[1] = SG_NONE;
  b->wslot[0] = b->wslot[1] = SG_NONE;
  b->wcount = 0;
  b->w_next = SG_NONE;
  b->bucket_acc = 0;
  b->last_dp = SG_NONE;
  b->mb = -1; b->chunk = -1; b->layer = -1;
  double layer_params = sp_model_layer_params(mo) / l->tp / l->wp;
  g_free(b->pgather);
  b->pgather = NULL;
  if (l->zero >= 1 && l->zero <= 2 && dp_grad_buckets(b)) {
    /* ZeRO-1/2: the updated parameters come back in buckets before the forward needs them */
    b->pgather = g_new(uint32_t, mo->layers > 0 ? mo->layers : 1);
    b->phase = SP_PHASE_STEP;
    for (int32_t c = 0; c < v; c++) {
      int64_t first = b->voff[c * pp + s], n = sp_layout_chunk_layers(l, mo, s, c);
      double acc = 0;
      int64_t from = first;
      for (int64_t i = first; i < first + n; i++) {
        acc += b->moe ? sp_step_moe_layer_dense_params(mo, l, i) / l->wp : layer_params;
        if (acc >= b->bucket_params || i + 1 == first + n) {
          int32_t cm = bucket_comm(b, TRUE, acc);
          uint32_t id = sg_coll_async(b, SP_STREAM_DP, cm, SG_NONE);
          for (int64_t j = from; j <= i; j++) b->pgather[j] = id;
          acc = 0;
          from = i + 1;
        }
      }
    }
  }
  g_autoptr(GArray) order = stage_order(pp, v, m, sp_layout_vpp_group(l), s, sched, l->a2a_overlap && b->moe);
  /* the last backward of each chunk finalises its gradients */
  g_autofree int32_t *last_bwd_mb = g_new(int32_t, v);
  for (guint i = 0; i < order->len; i++) {
    const slot *x = &g_array_index(order, slot, i);
    if (!x->fwd) last_bwd_mb[x->chunk] = x->mb;
  }
  for (guint i = 0; i < order->len; i++) {
    const slot *x = &g_array_index(order, slot, i);
    pass p[2];
    pass_init(b, &p[0], x, last_bwd_mb);
    if (x->pair && i + 1 < order->len) {
      pass_init(b, &p[1], &g_array_index(order, slot, ++i), last_bwd_mb);
      pass_pair(b, &p[0], &p[1]);
      continue;
    }
    pass_begin(b, &p[0]);
    for (int64_t j = 0; j < p[0].n; j++) pass_layer(b, &p[0], j);
    pass_end(b, &p[0]);
  }
  /* the optimizer step, once every gradient of the stage is reduced */
  b->mb = b->chunk = b->layer = -1;
  /* dpsync: one reduction of every gradient of the stage after its last backward */
  if (l->dp_sync && dp_grad_buckets(b)) dp_flush(b);
  tie_reduce(b, s);
  b->phase = SP_PHASE_STEP;
  sg_need(b, b->last_dp);
  b->open = SG_NONE;
  sg_compute(b, sp_step_optimizer_time(b->c, l, sp_step_stage_params(mo, l, s)) + (b->moe ? sp_step_moe_optimizer_time(b->c, l, s) : 0.0),
          "optimizer step");
  /* ISP gradient reduce-scatters end before the update too */
  if (b->w_stream == SP_STREAM_ISP && b->w_ag >= 0) {
    for (guint i = b->g->tasks->len; i-- > 0;) {
      const sp_task *t = sg_task_at(b, i);
      if (t->stage == s && t->stream == SP_STREAM_ISP) { sg_add_dep(sg_task_at(b, b->chain), i); break; }
    }
  }
}

sp_stepgraph *sp_stepgraph_build(const sp_step_ctx *c, const sp_layout *l, sp_sched sched, GError **err)
{
  const sp_model *m = c->model;
  int64_t mbs = c->global_batch / ((int64_t)l->dp * l->mb);
  int32_t v = sp_layout_vpp(l);
  if (mbs < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT, "step graph: global batch %" G_GINT64_FORMAT " gives no micro-batch of %d on dp=%d",
                c->global_batch, l->mb, l->dp);
    return NULL;
  }
  if (v > 1 && sched == SP_SCHED_1F1B && !sp_layout_vpp_batches_ok(l->pp, sp_layout_vpp_group(l), mbs)) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT, "step graph: the interleaved schedule cannot run %" G_GINT64_FORMAT
                " micro-batches on pp=%d in groups of %d (the groups lie in [pp, micro-batches], the last one 0 or at "
                "least pp)", mbs, l->pp, sp_layout_vpp_group(l));
    return NULL;
  }
  /* about 30 tasks per layer and micro-batch (plus a few per stage): refuse graphs that
   * would not fit in memory rather than build them */
  double est = (double)mbs * (double)m->layers * 40.0 + 64.0 * l->pp;
  if (est > SP_STEPGRAPH_MAX_TASKS) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "step graph: %" G_GINT64_FORMAT " micro-batches of %" G_GINT64_FORMAT
                " layers would need about %.3g tasks (at most %.3g are built); the closed form prices this layout",
                mbs, m->layers, est, (double)SP_STEPGRAPH_MAX_TASKS);
    return NULL;
  }
  sb b = { .c = c, .l = l };
  b.g = g_new0(sp_stepgraph, 1);
  b.g->stages = l->pp;
  b.g->ranks_per_stage = c->world / l->pp;
  b.g->microbatches = mbs;
  b.g->sched = sched;
  b.g->tasks = g_array_new(FALSE, FALSE, sizeof(sp_task));
  b.g->comms = g_array_new(FALSE, FALSE, sizeof(sp_comm));
  if (!sp_step_layer_kernels(c, l, &b.k, err)) {
    sp_stepgraph_free(b.g);
    return NULL;
  }
  b.comm_ix = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  b.bucket_params = c->hw.dp_bucket_params > 0 ? c->hw.dp_bucket_params : 40e6;
  b.nvirt = l->pp * v;
  b.voff = g_new0(int64_t, b.nvirt + 1);
  for (int32_t vs = 0; vs < b.nvirt; vs++)
    b.voff[vs + 1] = b.voff[vs] + sp_layout_chunk_layers(l, m, vs % l->pp, vs / l->pp);
  size_t keys = (size_t)mbs * (size_t)b.nvirt;
  b.send_f = g_new(uint32_t, keys);
  b.send_b = g_new(uint32_t, keys);
  for (size_t i = 0; i < keys; i++) b.send_f[i] = b.send_b[i] = SG_NONE;
  b.patch = g_array_new(FALSE, FALSE, sizeof(patch));
  b.moe = sp_model_is_moe(m);
  if (b.moe && !sp_step_moe_kernels(c, l, &b.mk, err)) {
    g_array_unref(b.patch);
    g_free(b.send_f);
    g_free(b.send_b);
    g_free(b.voff);
    g_hash_table_destroy(b.comm_ix);
    sp_stepgraph_free(b.g);
    return NULL;
  }
  layer_comms(&b);
  edge_comms(&b);
  sg_moe_layer_comms(&b);
  for (int32_t s = 0; s < l->pp; s++) build_stage(&b, s, mbs, sched);
  for (guint i = 0; i < b.patch->len; i++) {
    const patch *p = &g_array_index(b.patch, patch, i);
    sg_add_dep(sg_task_at(&b, p->task), (p->fwd ? b.send_f : b.send_b)[p->key]);
  }
  g_array_unref(b.patch);
  g_free(b.send_f);
  g_free(b.send_b);
  g_free(b.voff);
  g_free(b.pgather);
  g_hash_table_destroy(b.comm_ix);
  return b.g;
}
