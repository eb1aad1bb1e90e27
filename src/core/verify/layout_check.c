/* The reduced-size checks of a layout's parallel dimensions (sp_check_case_new, for
 * the what-if's --verify): one operation per dimension built at small sizes on the
 * real ranks of its groups, as a whole-world case (graph_case.c). */
#include "config.h"
#include "spsim/error.h"
#include "spsim/ops.h"
#include "graph_case.h"

#define BAD SP_OPS_BAD

/* Small sizes of the reduced-size checks: tokens per rank, head dim, hidden. */
#define CHK_LOCAL_SEQ 2
#define CHK_HIDDEN 8

const char *sp_check_kind_name(sp_check_kind k, gboolean seq_parallel)
{
  switch (k) {
  case SP_CHECK_TP_MLP: return seq_parallel ? "tp-mlp-sp" : "tp-mlp";
  case SP_CHECK_ULYSSES: return "ulysses-attention";
  case SP_CHECK_RING: return "ring-attention";
  case SP_CHECK_ULYSSES_RING: return "ulysses-ring";
  case SP_CHECK_ISP: return "isp-linear";
  case SP_CHECK_PIPELINE: return "pipeline-1f1b";
  case SP_CHECK_DP: return "dp";
  }
  return "?";
}

/* Tolerance of a float sum over P ranks compared with the reference's group-order sum:
 * ring and tree reductions add in another order (grows with P). */
static double red_tol(int32_t P)
{
  return 1e-5 * MAX(1.0, P / 8.0);
}


static gboolean check_heads(const sp_check_cfg *cfg, GError **err)
{
  if (cfg->heads < 1 || cfg->kv_heads < 1 || cfg->heads % cfg->kv_heads != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "verify: %" G_GINT64_FORMAT " attention heads are not a positive multiple of %" G_GINT64_FORMAT
                " KV heads", cfg->heads, cfg->kv_heads);
    return FALSE;
  }
  return TRUE;
}

static gboolean build_check(sp_graph *g, const void *ud, outs_t *o, GError **err)
{
  const sp_check_cfg *cfg = ud;
  const sp_groups *gs = &cfg->groups;
  const int32_t P = gs->group_size;
  switch (cfg->kind) {
  case SP_CHECK_TP_MLP: {
    /* T = 2 P tokens, h = 8, f = 4 P (4 columns per rank) */
    const int64_t T = 2 * (int64_t)P, h = CHK_HIDDEN, f = 4 * (int64_t)P;
    int64_t sx[2] = { cfg->seq_parallel ? T / P : T, h }, s1[2] = { h, f / P }, s2[2] = { f / P, h };
    uint32_t x = input(g, "x", SP_F32, 2, sx, err), w1 = x == BAD ? BAD : input(g, "w1", SP_F32, 2, s1, err);
    uint32_t w2 = w1 == BAD ? BAD : input(g, "w2", SP_F32, 2, s2, err);
    uint32_t dz = w2 == BAD ? BAD : input(g, "dz", SP_F32, 2, sx, err);
    sp_tp_mlp st;
    uint32_t dx, dw1, dw2;
    if (dz == BAD || !sp_op_tp_mlp(g, gs, x, w1, w2, cfg->seq_parallel, SP_ALGO_AUTO, &st, err) ||
        !sp_op_tp_mlp_bwd(g, gs, &st, dz, &dx, &dw1, &dw2, err))
      return FALSE;
    add_out(o, st.z, red_tol(P));
    add_out(o, dx, red_tol(P));
    add_out(o, dw1, red_tol(P));
    add_out(o, dw2, red_tol(P));
    return TRUE;
  }
  case SP_CHECK_ULYSSES: {
    if (!check_heads(cfg, err))
      return FALSE;
    uint32_t q, k, v;
    int64_t sd[4] = { 1, CHK_LOCAL_SEQ, cfg->heads, CHK_HEAD_DIM };
    if (!qkv_inputs(g, CHK_LOCAL_SEQ, cfg->heads, cfg->kv_heads, &q, &k, &v, err))
      return FALSE;
    uint32_t d = input(g, "dout", SP_F32, 4, sd, err);
    sp_ulysses_attn st;
    uint32_t grads[3];
    if (d == BAD || !sp_op_ulysses_attention(g, gs, SP_QKV_SEPARATE, SP_LAYOUT_BSHD, q, k, v, TRUE, &st, err) ||
        !sp_op_ulysses_attention_bwd(g, gs, &st, d, grads, err))
      return FALSE;
    add_out(o, st.out, 1e-5);
    for (int i = 0; i < 3; i++)
      add_out(o, grads[i], 1e-5);
    return TRUE;
  }
  case SP_CHECK_RING: {
    if (!check_heads(cfg, err))
      return FALSE;
    uint32_t q, k, v;
    if (!qkv_inputs(g, CHK_LOCAL_SEQ, cfg->heads, cfg->kv_heads, &q, &k, &v, err))
      return FALSE;
    int64_t sd[4] = { 1, CHK_LOCAL_SEQ, cfg->heads, CHK_HEAD_DIM };
    uint32_t d = input(g, "dout", SP_F32, 4, sd, err);
    sp_ring_attn saved;
    uint32_t out = d == BAD ? BAD : sp_op_ring_attention_fwd(g, gs, SP_LAYOUT_BSHD, q, k, v, &saved, err);
    uint32_t dq, dk, dv;
    if (out == BAD || !sp_op_ring_attention_bwd(g, gs, &saved, d, &dq, &dk, &dv, err))
      return FALSE;
    add_out(o, out, 1e-5);
    add_out(o, dq, 1e-5);
    add_out(o, dk, 1e-5);
    add_out(o, dv, 1e-5);
    return TRUE;
  }
  case SP_CHECK_ULYSSES_RING: {
    if (!check_heads(cfg, err))
      return FALSE;
    if (cfg->groups2.group_size < 1 || cfg->groups2.n_groups * cfg->groups2.group_size != gs->n_groups * P) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: Ulysses x ring needs ring groups over the same ranks");
      return FALSE;
    }
    uint32_t q, k, v;
    if (!qkv_inputs(g, CHK_LOCAL_SEQ, cfg->heads, cfg->kv_heads, &q, &k, &v, err))
      return FALSE;
    /* fewer KV heads than the Ulysses degree: replicate them first (consecutive copies),
     * as Ulysses attention does, so that each member receives whole KV heads */
    int32_t rep = 1;
    if (cfg->kv_heads % P != 0) {
      if (P % cfg->kv_heads != 0) {
        g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                    "verify: %" G_GINT64_FORMAT " KV heads can be neither split nor replicated over the Ulysses "
                    "degree %d", cfg->kv_heads, P);
        return FALSE;
      }
      rep = (int32_t)(P / cfg->kv_heads);
      uint32_t kr = sp_ops_like_dim(g, k, "kvrep", 2, cfg->kv_heads * rep, err);
      uint32_t vr = kr == BAD ? BAD : sp_ops_like_dim(g, v, "kvrep", 2, cfg->kv_heads * rep, err);
      if (vr == BAD || sp_graph_repeat(g, k, kr, 2, rep, err) == BAD || sp_graph_repeat(g, v, vr, 2, rep, err) == BAD)
        return FALSE;
      k = kr;
      v = vr;
    }
    int64_t sd[4] = { 1, CHK_LOCAL_SEQ, cfg->heads, CHK_HEAD_DIM };
    uint32_t d = input(g, "dout", SP_F32, 4, sd, err);
    sp_ring_attn saved;
    uint32_t out = d == BAD ? BAD
                            : sp_op_ulysses_ring_attention_fwd(g, gs, &cfg->groups2, SP_LAYOUT_BSHD, q, k, v, &saved, err);
    uint32_t dq, dk, dv;
    if (out == BAD || !sp_op_ulysses_ring_attention_bwd(g, gs, &cfg->groups2, &saved, d, &dq, &dk, &dv, err))
      return FALSE;
    if (rep > 1) {
      /* gradients of replicated KV heads: the copies' gradients summed */
      uint32_t dk0 = sp_ops_like_dim(g, dk, "kvsum", 2, cfg->kv_heads, err);
      uint32_t dv0 = dk0 == BAD ? BAD : sp_ops_like_dim(g, dv, "kvsum", 2, cfg->kv_heads, err);
      if (dv0 == BAD || sp_graph_repeat_sum(g, dk, dk0, 2, rep, err) == BAD ||
          sp_graph_repeat_sum(g, dv, dv0, 2, rep, err) == BAD)
        return FALSE;
      dk = dk0;
      dv = dv0;
    }
    add_out(o, out, 1e-5);
    add_out(o, dq, 1e-5);
    add_out(o, dk, 1e-5);
    add_out(o, dv, 1e-5);
    return TRUE;
  }
  case SP_CHECK_ISP: {
    /* hidden: the smallest multiple of P that is at least 8 (weights [hidden/P, hidden]) */
    const int64_t hidden = (int64_t)P * ((CHK_HIDDEN + P - 1) / P);
    const int32_t blocks = cfg->layers > 0 ? cfg->layers : 2;
    /* with prefetch: two modules per block (the out_proj prefetch point), direct
     * collectives; without: one module, ring collectives (P concurrent flows instead of P^2) */
    sp_isp_cfg ic = { .blocks = blocks, .modules = cfg->prefetch ? 2 : 1, .out_proj = cfg->prefetch ? 1 : 0,
                      .tokens = CHK_LOCAL_SEQ, .hidden = hidden, .overlap = cfg->prefetch,
                      .ckpt_blocks = blocks > 1 ? 1 : 0, .algo = cfg->prefetch ? SP_ALGO_AUTO : SP_ALGO_RING };
    int64_t s[2] = { ic.tokens, ic.hidden };
    uint32_t x = input(g, "x", SP_F32, 2, s, err), dy = x == BAD ? BAD : input(g, "dy", SP_F32, 2, s, err);
    sp_isp_stack st;
    memset(&st, 0, sizeof st);
    if (dy == BAD || !sp_op_isp_stack(g, gs, &ic, x, &st, err) || !sp_op_isp_stack_bwd(g, gs, &st, dy, err)) {
      sp_isp_stack_clear(&st);
      return FALSE;
    }
    add_out(o, st.y, 1e-5);
    add_out(o, st.dx, 1e-5);
    add_out(o, st.dw[0], red_tol(P));
    add_out(o, st.dw[blocks * ic.modules - 1], red_tol(P));
    sp_isp_stack_clear(&st);
    return TRUE;
  }
  case SP_CHECK_PIPELINE: {
    const int32_t V = cfg->virtual_stages > 1 ? cfg->virtual_stages : 1;
    const int32_t M = V > 1 ? 2 * P : MIN(P + 1, 8);
    sp_pipe_cfg pc = { .stages = P, .micro_batches = M, .layers = cfg->layers > 0 ? cfg->layers : P * V,
                       .virtual_stages = V, .schedule = SP_PIPE_1F1B, .ndim = 2, .shape = { CHK_LOCAL_SEQ, CHK_HIDDEN },
                       .flops_fwd_layer = 1e6, .flops_bwd_layer = 2e6 };
    sp_pipeline pl;
    if (!sp_op_pipeline(g, gs, &pc, &pl, err))
      return FALSE;
    /* first and last micro-batch: the output on the last stage, the gradient on the first */
    add_out(o, pl.y[0], 0);
    add_out(o, pl.gx[0], 0);
    add_out(o, pl.y[M - 1], 0);
    add_out(o, pl.gx[M - 1], 0);
    sp_pipeline_clear(&pl);
    return TRUE;
  }
  case SP_CHECK_DP: {
    if (cfg->zero < 0 || cfg->zero > 3) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: ZeRO stage %d is not 0..3", cfg->zero);
      return FALSE;
    }
    /* two gradients of 4 x 8 and 8 elements (40: padded when P does not divide it) */
    int64_t s0[2] = { 4, CHK_HIDDEN }, s1[1] = { CHK_HIDDEN };
    uint32_t grads[2];
    grads[0] = input(g, "dw", SP_F32, 2, s0, err);
    grads[1] = grads[0] == BAD ? BAD : input(g, "db", SP_F32, 1, s1, err);
    if (grads[1] == BAD)
      return FALSE;
    if (cfg->zero == 0) {
      uint32_t avg[2];
      /* a 128-byte bucket: one all-reduce per gradient */
      if (sp_op_dp_allreduce(g, gs, grads, 2, 128, avg, err) < 0)
        return FALSE;
      add_out(o, avg[0], red_tol(P));
      add_out(o, avg[1], red_tol(P));
      return TRUE;
    }
    const int64_t N = 4 * CHK_HIDDEN + CHK_HIDDEN, Np = (N + P - 1) / P * P;
    int64_t sp_[1] = { Np / P };
    uint32_t shard = input(g, "param", SP_F32, 1, sp_, err), gshard = BAD, full = BAD;
    if (shard == BAD || !sp_op_zero_step(g, gs, cfg->zero, grads, 2, shard, 0.5, &gshard, &full, err))
      return FALSE;
    add_out(o, gshard, red_tol(P));
    if (full == SP_NO_TENSOR) /* ZeRO-3: parameters are gathered before use */
      full = sp_op_fsdp_gather(g, gs, shard, err);
    if (full == BAD)
      return FALSE;
    add_out(o, full, red_tol(P));
    return TRUE;
  }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: unknown check kind %d", (int)cfg->kind);
  return FALSE;
}

static gboolean groups_valid(const sp_groups *gs, int32_t world, const char *what, GError **err)
{
  if (gs->n_groups < 1 || gs->group_size < 1 || gs->ranks == NULL ||
      (int64_t)gs->n_groups * gs->group_size > world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: the %s group set does not fit the %d ranks", what, world);
    return FALSE;
  }
  g_autofree guint8 *seen = g_new0(guint8, world);
  for (int32_t i = 0; i < gs->n_groups * gs->group_size; i++) {
    int32_t r = gs->ranks[i];
    if (r < 0 || r >= world || seen[r]) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "verify: rank %d of the %s group set is outside [0, %d) or repeated", r, what, world);
      return FALSE;
    }
    seen[r] = 1;
  }
  return TRUE;
}

sp_graph_case *sp_check_case_new(const sp_check_cfg *cfg, GError **err)
{
  if (!cfg || cfg->world < 1 || !groups_valid(&cfg->groups, cfg->world, "check's", err) ||
      (cfg->kind == SP_CHECK_ULYSSES_RING && !groups_valid(&cfg->groups2, cfg->world, "ring", err))) {
    if (err && !*err)
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: no check configuration or an empty world");
    return NULL;
  }
  return sp_vc_case_new(cfg->world, build_check, cfg, err);
}
