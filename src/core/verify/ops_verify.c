/* Self-checks of the operation library for `spsim verify --op NAME`: build an
 * operation's forward and backward on every group of a world, compute the global
 * reference, execute the lowered programs with the caller's runner and compare.
 * The table of operations and its cases; the case machinery is in graph_case.c. */
#include "config.h"
#include "spsim/error.h"
#include "spsim/ops.h"
#include "graph_case.h"

#define BAD SP_OPS_BAD

/* The outputs of an attention forward + backward case, compared bitwise. */
static void add_attn_outs(outs_t *o, uint32_t out, uint32_t dq, uint32_t dk, uint32_t dv)
{
  add_out(o, out, 0);
  add_out(o, dq, 0);
  add_out(o, dk, 0);
  add_out(o, dv, 0);
}

typedef gboolean (*build_fn)(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err);

static gboolean build_a2a(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  int64_t s[4] = { 2, 3, 2 * gs->group_size, 4 };
  uint32_t x = input(g, "x", SP_F32, 4, s, err);
  uint32_t y = x == BAD ? BAD : sp_op_seq_all_to_all(g, gs, x, 2, 1, FALSE, err);
  uint32_t z = y == BAD ? BAD : sp_op_seq_all_to_all(g, gs, y, 1, 2, FALSE, err);
  if (z == BAD)
    return FALSE;
  add_out(o, y, 0);
  add_out(o, z, 0);
  return TRUE;
}

static gboolean build_gather_split(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  int64_t s[2] = { 3, 2 }, sg[2] = { 3, 2 * gs->group_size };
  uint32_t x = input(g, "x", SP_F32, 2, s, err), dy = x == BAD ? BAD : input(g, "dy", SP_F32, 2, sg, err);
  if (dy == BAD)
    return FALSE;
  uint32_t y = sp_op_gather_fwd(g, gs, x, 1, err);
  uint32_t dx = y == BAD ? BAD : sp_op_gather_bwd(g, gs, dy, 1, SP_GRAD_SCALE_DOWN, err);
  if (dx == BAD)
    return FALSE;
  add_out(o, y, 0);
  add_out(o, dx, 0);
  return TRUE;
}

static gboolean build_slice_pad(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  int64_t S = 3 * gs->group_size - 1 > 0 ? 3 * gs->group_size - 1 : 1;
  int64_t s[2] = { 1, S };
  uint32_t ids = input(g, "ids", SP_I64, 2, s, err), pos = ids == BAD ? BAD : input(g, "pos", SP_I64, 2, s, err);
  uint32_t io, po;
  int64_t pad;
  if (pos == BAD || !sp_op_slice_and_pad(g, gs, ids, pos, &io, &po, &pad, err))
    return FALSE;
  uint32_t back = sp_op_gather_and_unpad(g, gs, io, 1, pad, 1, err);
  if (back == BAD)
    return FALSE;
  add_out(o, io, 0);
  add_out(o, po, 0);
  add_out(o, back, 0);
  return TRUE;
}

static gboolean build_attention(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  const int64_t P = gs->group_size;
  int64_t s[4] = { 1, 2, P, 4 };
  uint32_t q, k, v;
  uint32_t d = qkv_inputs(g, 2, s[2], s[2], &q, &k, &v, err) ? input(g, "dout", SP_F32, 4, s, err) : BAD;
  sp_ulysses_attn st;
  uint32_t grads[3];
  if (d == BAD || !sp_op_ulysses_attention(g, gs, SP_QKV_SEPARATE, SP_LAYOUT_BSHD, q, k, v, TRUE, &st, err) ||
      !sp_op_ulysses_attention_bwd(g, gs, &st, d, grads, err))
    return FALSE;
  add_out(o, st.out, 0);
  for (int i = 0; i < 3; i++)
    add_out(o, grads[i], 0);
  return TRUE;
}

static gboolean build_tp(sp_graph *g, const sp_groups *gs, gboolean sp, outs_t *o, GError **err)
{
  const int64_t P = gs->group_size, T = 2 * P, h = 4, f = 2 * P;
  int64_t sx[2] = { sp ? T / P : T, h }, s1[2] = { h, f / P }, s2[2] = { f / P, h };
  uint32_t x = input(g, "x", SP_F32, 2, sx, err), w1 = x == BAD ? BAD : input(g, "w1", SP_F32, 2, s1, err);
  uint32_t w2 = w1 == BAD ? BAD : input(g, "w2", SP_F32, 2, s2, err);
  uint32_t dz = w2 == BAD ? BAD : input(g, "dz", SP_F32, 2, sx, err);
  sp_tp_mlp st;
  uint32_t dx, dw1, dw2;
  if (dz == BAD || !sp_op_tp_mlp(g, gs, x, w1, w2, sp, SP_ALGO_AUTO, &st, err) ||
      !sp_op_tp_mlp_bwd(g, gs, &st, dz, &dx, &dw1, &dw2, err))
    return FALSE;
  add_out(o, st.z, 1e-5);
  add_out(o, dx, 1e-5);
  add_out(o, dw1, 1e-5);
  add_out(o, dw2, 1e-5);
  return TRUE;
}

static gboolean build_tp_plain(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  return build_tp(g, gs, FALSE, o, err);
}

static gboolean build_tp_sp(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  return build_tp(g, gs, TRUE, o, err);
}

static gboolean build_isp(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  sp_isp_cfg cfg = { .blocks = 2, .modules = 2, .out_proj = 1, .tokens = 2, .hidden = 2 * gs->group_size,
                     .overlap = TRUE, .ckpt_blocks = 1, .algo = SP_ALGO_AUTO };
  int64_t s[2] = { cfg.tokens, cfg.hidden };
  uint32_t x = input(g, "x", SP_F32, 2, s, err), dy = x == BAD ? BAD : input(g, "dy", SP_F32, 2, s, err);
  sp_isp_stack st;
  if (dy == BAD || !sp_op_isp_stack(g, gs, &cfg, x, &st, err) || !sp_op_isp_stack_bwd(g, gs, &st, dy, err)) {
    sp_isp_stack_clear(&st);
    return FALSE;
  }
  add_out(o, st.y, 0);
  add_out(o, st.dx, 0);
  add_out(o, st.dw[0], 1e-5);
  add_out(o, st.dw[3], 1e-5);
  sp_isp_stack_clear(&st);
  return TRUE;
}

static gboolean build_ring(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  int64_t s[4] = { 1, 2, 2, 4 };
  uint32_t q, k, v;
  qkv_inputs(g, 2, s[2], s[2], &q, &k, &v, err);
  uint32_t out = v == BAD ? BAD : sp_op_ring_attention(g, gs, SP_LAYOUT_BSHD, q, k, v, err);
  if (out == BAD)
    return FALSE;
  add_out(o, out, 0);
  return TRUE;
}

/* Split each group of G ranks into Ulysses pairs (U = 2 when G is even, else 1) x a ring
 * of G / U: member r * U + u is Ulysses member u of pair r and ring member r. Returns U;
 * g_free both rank arrays. */
static int32_t hybrid_groups(const sp_groups *gs, sp_groups *uly, sp_groups *ring)
{
  const int32_t G = gs->group_size, U = G % 2 == 0 ? 2 : 1, R = G / U, W = gs->n_groups * G;
  *uly = (sp_groups){ W / U, U, g_new(int32_t, W) };
  *ring = (sp_groups){ W / R, R, g_new(int32_t, W) };
  for (int32_t gi = 0; gi < gs->n_groups; gi++)
    for (int32_t r = 0; r < R; r++)
      for (int32_t u = 0; u < U; u++) {
        int32_t rank = gs->ranks[gi * G + r * U + u];
        uly->ranks[(gi * R + r) * U + u] = rank;
        ring->ranks[(gi * U + u) * R + r] = rank;
      }
  return U;
}

/* each group of G ranks: Ulysses pairs (U = 2 when G is even) x a ring of G / U */
static gboolean build_hybrid(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  sp_groups uly, ring;
  const int32_t U = hybrid_groups(gs, &uly, &ring);
  int64_t s[4] = { 1, 2, 2 * U, 4 };
  uint32_t q, k, v;
  qkv_inputs(g, 2, s[2], s[2], &q, &k, &v, err);
  uint32_t out = v == BAD ? BAD : sp_op_ulysses_ring_attention(g, &uly, &ring, SP_LAYOUT_BSHD, q, k, v, err);
  g_free(uly.ranks);
  g_free(ring.ranks);
  if (out == BAD)
    return FALSE;
  add_out(o, out, 0);
  return TRUE;
}

static gboolean build_pipeline(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  sp_pipe_cfg cfg = { .stages = gs->group_size, .micro_batches = 3, .layers = gs->group_size,
                      .virtual_stages = 1, .schedule = SP_PIPE_1F1B, .ndim = 2, .shape = { 2, 4 },
                      .flops_fwd_layer = 1e6, .flops_bwd_layer = 2e6 };
  sp_pipeline pl;
  if (!sp_op_pipeline(g, gs, &cfg, &pl, err))
    return FALSE;
  for (int m = 0; m < 3; m++) {
    add_out(o, pl.y[m], 0);
    add_out(o, pl.gx[m], 0);
  }
  sp_pipeline_clear(&pl);
  return TRUE;
}

/* ring attention forward + backward (dq, dk, dv); same kernels as the reference: bitwise */
static gboolean build_ring_bwd(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  int64_t s[4] = { 1, 2, 2, 4 };
  uint32_t q, k, v;
  uint32_t dout = qkv_inputs(g, 2, s[2], s[2], &q, &k, &v, err) ? input(g, "dout", SP_F32, 4, s, err) : BAD;
  sp_ring_attn saved;
  uint32_t dq, dk, dv;
  uint32_t out = dout == BAD ? BAD : sp_op_ring_attention_fwd(g, gs, SP_LAYOUT_BSHD, q, k, v, &saved, err);
  if (out == BAD || !sp_op_ring_attention_bwd(g, gs, &saved, dout, &dq, &dk, &dv, err))
    return FALSE;
  add_attn_outs(o, out, dq, dk, dv);
  return TRUE;
}

/* Ulysses x ring forward + backward, groups as build_hybrid */
static gboolean build_hybrid_bwd(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  sp_groups uly, ring;
  const int32_t U = hybrid_groups(gs, &uly, &ring);
  int64_t s[4] = { 1, 2, 2 * U, 4 };
  uint32_t q, k, v;
  uint32_t dout = qkv_inputs(g, 2, s[2], s[2], &q, &k, &v, err) ? input(g, "dout", SP_F32, 4, s, err) : BAD;
  sp_ring_attn saved;
  uint32_t dq, dk, dv;
  uint32_t out = dout == BAD ? BAD : sp_op_ulysses_ring_attention_fwd(g, &uly, &ring, SP_LAYOUT_BSHD, q, k, v, &saved, err);
  gboolean ok = out != BAD && sp_op_ulysses_ring_attention_bwd(g, &uly, &ring, &saved, dout, &dq, &dk, &dv, err);
  g_free(uly.ranks);
  g_free(ring.ranks);
  if (!ok)
    return FALSE;
  add_attn_outs(o, out, dq, dk, dv);
  return TRUE;
}

/* interleaved 1F1B: 2 virtual stages, 2 x stages micro-batches */
static gboolean build_pipeline_interleaved(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  const int32_t S = gs->group_size, M = 2 * S;
  sp_pipe_cfg cfg = { .stages = S, .micro_batches = M, .layers = 2 * S, .virtual_stages = 2,
                      .schedule = SP_PIPE_1F1B, .ndim = 2, .shape = { 2, 4 },
                      .flops_fwd_layer = 1e6, .flops_bwd_layer = 2e6 };
  sp_pipeline pl;
  if (!sp_op_pipeline(g, gs, &cfg, &pl, err))
    return FALSE;
  for (int32_t m = 0; m < M && o->n + 2 <= (int)G_N_ELEMENTS(o->t); m++) {
    add_out(o, pl.y[m], 0);
    add_out(o, pl.gx[m], 0);
  }
  sp_pipeline_clear(&pl);
  return TRUE;
}

/* all-to-all-v on groups of P: blocks of P rows of 2 columns, member i sends
 * (i + 2 j) mod (P + 1) rows to member j (0 to P rows: uneven, some pairs nothing) */
static gboolean build_a2av(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  const int32_t P = gs->group_size;
  int64_t s[2] = { (int64_t)P * P, 2 };
  int64_t *counts = g_new(int64_t, (gsize)P * P);
  for (int32_t i = 0; i < P; i++)
    for (int32_t j = 0; j < P; j++)
      counts[i * P + j] = (i + 2 * j) % (P + 1);
  uint32_t x = input(g, "x", SP_F32, 2, s, err);
  uint32_t y = x == BAD ? BAD : sp_op_all_to_all_v(g, gs, x, counts, P, err);
  g_free(counts);
  if (y == BAD)
    return FALSE;
  add_out(o, y, 0);
  return TRUE;
}

/* ---- mixture of experts ---- */

/* What the single-device check of a MoE case needs. */
typedef struct {
  sp_moe_layer st;
  uint32_t dy, dx, dwr, dw1, dw2;
  double tol_fwd, tol_bwd;
} moe_whole;

static gboolean moe_check(const sp_graph *g, sp_graph_data *ref, void *ud, GError **err)
{
  const moe_whole *w = ud;
  return sp_moe_reference_check(g, ref, &w->st, w->dy, w->dx, w->dwr, w->dw1, w->dw2, w->tol_fwd, w->tol_bwd, err);
}

static void moe_whole_clear(void *ud)
{
  sp_moe_layer_clear(&((moe_whole *)ud)->st);
}

/* The case's MoE configuration on groups of P ranks: E = 2 ep experts, top-2, 4
 * tokens of hidden 4 per rank, FFN 4, capacity factor 1 (so C = ceil(4 x 2 / E),
 * and experts over capacity drop tokens). moe-layer: etp 1, ep = P / 2 (P >= 4)
 * with expert-data groups of 2; moe-layer-bwd: etp 2 where 4 divides P. */
static sp_moe_cfg moe_case_cfg(int32_t P, gboolean bwd)
{
  int32_t etp = bwd && P % 4 == 0 ? 2 : 1, q = P / etp;
  int32_t ep = q >= 4 && q % 2 == 0 ? q / 2 : q;
  return (sp_moe_cfg){ .experts = 2 * ep, .topk = 2, .ep = ep, .etp = etp, .tokens = 4, .hidden = 4, .ffn = 4,
                       .capacity_factor = 1.0, .drop = SP_MOE_DROP_PROBS, .algo = SP_ALGO_DIRECT };
}

/* Weights as a data-parallel start leaves them: the router's on every member and each
 * expert's on its expert-data replicas equal (broadcast from member 0 of each group).
 * The broadcasts are direct (as every collective of the case): with the ring chain, SimGrid's data mode stalls
 * ranks 0-7 of `spsim verify --op moe-layer-bwd --ranks 16` on a 16-host star while
 * the loopback run of the same programs completes (left to the engine's owners). */
static gboolean moe_weights(sp_graph *g, const sp_groups *gs, const sp_moe_cfg *c, uint32_t *wr, uint32_t *w1,
                            uint32_t *w2, GError **err)
{
  sp_groups ep, etp, edp;
  if (!sp_moe_groups(c, gs, &ep, &etp, &edp, err))
    return FALSE;
  const int64_t El = c->experts / c->ep, Fl = c->ffn / c->etp;
  int64_t sr[2] = { c->hidden, c->experts }, s1[3] = { El, c->hidden, Fl }, s2[3] = { El, Fl, c->hidden };
  uint32_t r0 = input(g, "wr_init", SP_F32, 2, sr, err);
  uint32_t a0 = r0 == BAD ? BAD : input(g, "w1_init", SP_F32, 3, s1, err);
  uint32_t b0 = a0 == BAD ? BAD : input(g, "w2_init", SP_F32, 3, s2, err);
  *wr = b0 == BAD ? BAD : sp_graph_tensor_new(g, "wr", SP_F32, 2, sr, SP_TENSOR_WEIGHT, SP_INIT_NONE, err);
  *w1 = *wr == BAD ? BAD : sp_graph_tensor_new(g, "w1", SP_F32, 3, s1, SP_TENSOR_WEIGHT, SP_INIT_NONE, err);
  *w2 = *w1 == BAD ? BAD : sp_graph_tensor_new(g, "w2", SP_F32, 3, s2, SP_TENSOR_WEIGHT, SP_INIT_NONE, err);
  gboolean ok = *w2 != BAD && sp_graph_broadcast(g, gs, r0, *wr, 0, SP_ALGO_DIRECT, err) != BAD &&
                sp_graph_broadcast(g, &edp, a0, *w1, 0, SP_ALGO_DIRECT, err) != BAD &&
                sp_graph_broadcast(g, &edp, b0, *w2, 0, SP_ALGO_DIRECT, err) != BAD;
  g_free(ep.ranks);
  g_free(etp.ranks);
  g_free(edp.ranks);
  return ok;
}

/* A dropless layer's router counts, [rank * E + e], evaluated now on the inputs the
 * case will be filled with: each rank's x and its group's router weights (member
 * 0's wr_init, which the case broadcasts). */
static int64_t *moe_dropless_counts(const sp_graph *g, const sp_groups *gs, const sp_moe_cfg *c, uint32_t x)
{
  const int32_t W = gs->n_groups * gs->group_size;
  const uint32_t r0 = sp_graph_find_tensor(g, "wr_init");
  int64_t *counts = g_new0(int64_t, (gsize)W * (gsize)c->experts);
  float *xs = g_new(float, c->tokens * c->hidden), *wr = g_new(float, c->hidden * c->experts);
  for (int32_t gi = 0; gi < gs->n_groups; gi++) {
    sp_graph_input_fill(g, r0, gs->ranks[gi * gs->group_size], CASE_INPUT_SEED, wr);
    for (int32_t m = 0; m < gs->group_size; m++) {
      const int32_t r = gs->ranks[gi * gs->group_size + m];
      sp_graph_input_fill(g, x, r, CASE_INPUT_SEED, xs);
      sp_moe_route_counts(c, xs, wr, counts + (int64_t)r * c->experts);
    }
  }
  g_free(xs);
  g_free(wr);
  return counts;
}

static gboolean build_moe_c(sp_graph *g, const sp_groups *gs, const sp_moe_cfg *cp, gboolean bwd, outs_t *o,
                            GError **err)
{
  sp_moe_cfg c = *cp;
  if (!sp_moe_cfg_check(&c, gs->group_size, err))
    return FALSE;
  int64_t sx[2] = { c.tokens, c.hidden };
  uint32_t wr, w1, w2, x = input(g, "x", SP_F32, 2, sx, err);
  if (x == BAD)
    return FALSE;
  uint32_t dy = bwd ? input(g, "dy", SP_F32, 2, sx, err) : SP_NO_TENSOR;
  if ((bwd && dy == BAD) || !moe_weights(g, gs, &c, &wr, &w1, &w2, err))
    return FALSE;
  int64_t *counts = NULL;
  if (c.dropless) { /* the router's counts now, on the inputs the case will be filled with */
    counts = moe_dropless_counts(g, gs, &c, x);
    c.dropless_counts = counts;
  }
  moe_whole *w = g_new0(moe_whole, 1);
  o->whole = moe_check;
  o->whole_ud = w;
  o->whole_clear = moe_whole_clear;
  w->dy = dy;
  w->dx = w->dwr = w->dw1 = w->dw2 = SP_NO_TENSOR;
  /* The run against the graph's reference: bitwise (direct collectives reduce in
   * group order, as the reference does). The graph's reference against the
   * single-device layer: bitwise where the schedule sums in the single device's
   * order (etp 1: y, dx); expert tensor parallelism sums an expert's FFN columns in
   * etp parts and the weight gradients sum the tokens of several ranks in another
   * order, so those are compared within 1e-5 of their magnitude (ops_moe_ref.c). */
  w->tol_fwd = c.etp > 1 ? 1e-5 : 0;
  w->tol_bwd = 1e-5;
  gboolean built = sp_op_moe_layer(g, gs, &c, x, wr, w1, w2, &w->st, err);
  g_free(counts);
  if (!built)
    return FALSE;
  add_out(o, w->st.y, 0);
  add_out(o, w->st.recv_counts, 0);
  if (bwd) {
    if (!sp_op_moe_layer_bwd(g, &w->st, dy, &w->dx, &w->dwr, &w->dw1, &w->dw2, err))
      return FALSE;
    add_out(o, w->dx, 0);
    add_out(o, w->dwr, 0);
    add_out(o, w->dw1, 0);
    add_out(o, w->dw2, 0);
  }
  return TRUE;
}

static gboolean build_moe_fwd(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  const sp_moe_cfg c = moe_case_cfg(gs->group_size, FALSE);
  return build_moe_c(g, gs, &c, FALSE, o, err);
}

static gboolean build_moe_bwd(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err)
{
  const sp_moe_cfg c = moe_case_cfg(gs->group_size, TRUE);
  return build_moe_c(g, gs, &c, TRUE, o, err);
}

/* A MoE case with options over the defaults. */
typedef struct {
  const sp_groups *gs;
  const char *opts;
  gboolean bwd;
} moe_opts_ud;

static gboolean build_moe_opts(sp_graph *g, const void *ud, outs_t *o, GError **err)
{
  const moe_opts_ud *m = ud;
  sp_moe_cfg c = moe_case_cfg(m->gs->group_size, m->bwd);
  if (!sp_moe_cfg_parse(m->opts, &c, err) || !sp_moe_cfg_check(&c, m->gs->group_size, err))
    return FALSE;
  /* data mode holds every tensor of every rank in this process, and the router's
   * capacity selection is quadratic in the routed pairs: bound both (2^24 f32 = 64 MiB
   * per buffer; 8192 pairs per rank) */
  /* dropless: at most T rows per block (no expert is routed more than a rank's tokens) */
  const double C = (double)(c.dropless ? c.tokens : sp_moe_capacity(&c)), lim = (double)(1 << 24);
  const double disp = (double)c.experts * C * (double)c.hidden;
  const double ffn = (double)c.ep * (double)c.etp * C * (double)(c.ffn / c.etp);
  const double pairs = (double)c.tokens * (double)c.topk;
  if (disp > lim || ffn > lim || pairs > 8192 || (double)c.tokens * (double)c.experts > lim) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "moe options: the case is too large to carry in data mode (dispatch [E, C, H] = %.0f and expert "
                "FFN %.0f elements per rank, at most %.0f; tokens x topk = %.0f, at most 8192): use smaller sizes",
                disp, ffn, lim, pairs);
    return FALSE;
  }
  /* a dropless case builds a block per (rank, expert, etp member) in every exchange
   * and expert step: ranks x experts x etp = 32768 (16 ranks, 1024 experts, etp 2,
   * `spsim verify platforms/dgx.xml --op moe-layer-bwd --ranks 16 --moe
   * experts=1024,topk=8,ep=8,etp=2,tokens=64,dropless=1`) took 3.3 s and 1 GB in a
   * release build: the bound */
  const double blocks = (double)m->gs->n_groups * m->gs->group_size * (double)c.experts * (double)c.etp;
  if (c.dropless && blocks > 32768) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "moe options: a dropless case builds ranks x experts x etp = %.0f expert blocks, at most 32768 "
                "in data mode: use fewer experts or ranks", blocks);
    return FALSE;
  }
  return build_moe_c(g, m->gs, &c, m->bwd, o, err);
}

static gboolean verify_with(build_fn build, int32_t world, int32_t group,
                            gboolean (*run)(const sp_graph *g, sp_graph_data *d, GError **err), GError **err)
{
  if (world < 1 || group < 1 || world % group != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "verify: the world (%d) must be a positive multiple of the group size (%d)", world, group);
    return FALSE;
  }
  sp_groups gs = { world / group, group, g_new(int32_t, world) };
  for (int32_t r = 0; r < world; r++)
    gs.ranks[r] = r;
  sp_graph *g = sp_graph_new(world);
  outs_t o = { .n = 0 };
  gboolean ok = build(g, &gs, &o, err);
  g_free(gs.ranks);
  sp_graph_data *ref = NULL, *got = NULL;
  if (ok) {
    ref = sp_graph_data_new(g);
    sp_graph_data_fill_inputs(ref, CASE_INPUT_SEED);
    got = sp_graph_data_new(g);
    sp_graph_data_copy(got, ref);
    ok = sp_graph_reference(g, ref, err) && outs_whole(&o, g, ref, err);
  }
  if (ok && run)
    ok = run(g, got, err);
  for (int i = 0; ok && run && i < o.n; i++)
    ok = sp_graph_data_compare(g, got, ref, o.t[i], o.tol[i], err);
  outs_clear(&o);
  sp_graph_data_free(ref);
  sp_graph_data_free(got);
  sp_graph_free(g);
  return ok;
}

#define ENTRY(fn)                                                                                          \
  static gboolean check_##fn(int32_t w, int32_t gsz,                                                       \
                             gboolean (*run)(const sp_graph *, sp_graph_data *, GError **), GError **err)   \
  {                                                                                                        \
    return verify_with(build_##fn, w, gsz, run, err);                                                      \
  }
ENTRY(a2a)
ENTRY(gather_split)
ENTRY(slice_pad)
ENTRY(attention)
ENTRY(tp_plain)
ENTRY(tp_sp)
ENTRY(isp)
ENTRY(ring)
ENTRY(hybrid)
ENTRY(pipeline)
ENTRY(ring_bwd)
ENTRY(hybrid_bwd)
ENTRY(pipeline_interleaved)
ENTRY(a2av)
ENTRY(moe_fwd)
ENTRY(moe_bwd)

/* build function of each entry, by table index (kept beside the public table) */
static const build_fn builders[] = { build_a2a, build_gather_split, build_slice_pad, build_attention,
                                     build_tp_plain, build_tp_sp, build_isp, build_ring, build_hybrid,
                                     build_pipeline, build_ring_bwd, build_hybrid_bwd,
                                     build_pipeline_interleaved, build_a2av, build_moe_fwd,
                                     build_moe_bwd };

static const sp_op_verify_entry table[] = {
  { "ulysses-all-to-all", "Ulysses sequence all-to-all (scatter heads, gather seq) and its backward", check_a2a },
  { "gather-split", "gather-forward / split-backward with grad scaling down", check_gather_split },
  { "slice-and-pad", "slice-and-pad of input_ids/position_ids, then gather-and-unpad", check_slice_pad },
  { "ulysses-attention", "Ulysses attention (q, k, v; multi-tensor all-to-all), forward and backward",
    check_attention },
  { "tp-mlp", "Megatron column->row parallel linear with f/g, forward and backward", check_tp_plain },
  { "tp-mlp-sp", "Megatron TP with sequence parallelism (all-gather / reduce-scatter on seq)", check_tp_sp },
  { "isp-linear", "ISP weight-parallel linears: prefetch, alternating buffers, AVG reduce-scatter",
    check_isp },
  { "ring-attention", "ring attention (context parallel), causal steps skipped", check_ring },
  { "ulysses-ring", "Ulysses x ring hybrid attention", check_hybrid },
  { "pipeline-1f1b", "1F1B pipeline over micro-batches (stages = group size)", check_pipeline },
  { "ring-attention-bwd", "ring attention forward and backward (dq, dk, dv travel round the ring)",
    check_ring_bwd },
  { "ulysses-ring-bwd", "Ulysses x ring hybrid attention, forward and backward", check_hybrid_bwd },
  { "pipeline-interleaved", "interleaved 1F1B pipeline, 2 virtual stages (stages = group size)",
    check_pipeline_interleaved },
  { "all-to-all-v", "all-to-all with uneven counts per pair, as grouped point-to-point sends", check_a2av },
  { "moe-layer", "MoE layer: router top-2, capacity dropping, dispatch/combine all-to-all over ep, "
                 "checked against a single-device reference", check_moe_fwd },
  { "moe-layer-bwd", "MoE layer forward and backward with expert tensor and data parallelism, "
                     "checked against a single-device reference", check_moe_bwd },
  { NULL, NULL, NULL },
};

G_STATIC_ASSERT(G_N_ELEMENTS(builders) == G_N_ELEMENTS(table) - 1);

const sp_op_verify_entry *sp_ops_verify_table(void)
{
  return table;
}

const sp_op_verify_entry *sp_ops_verify_lookup(const char *name)
{
  for (const sp_op_verify_entry *e = table; e->name; e++)
    if (g_strcmp0(e->name, name) == 0)
      return e;
  return NULL;
}

typedef struct {
  build_fn build;
  const sp_groups *gs;
} table_ud;

static gboolean build_table_entry(sp_graph *g, const void *ud, outs_t *o, GError **err)
{
  const table_ud *t = ud;
  return t->build(g, t->gs, o, err);
}

sp_graph_case *sp_ops_verify_case_new_opts(const char *name, int32_t world, int32_t group, const char *opts,
                                           GError **err)
{
  const sp_op_verify_entry *e = sp_ops_verify_lookup(name);
  if (!e) {
    GString *names = g_string_new(NULL);
    for (const sp_op_verify_entry *t = table; t->name; t++)
      g_string_append_printf(names, "%s%s", t == table ? "" : ", ", t->name);
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown operation '%s' (known: %s)", name ? name : "",
                names->str);
    g_string_free(names, TRUE);
    return NULL;
  }
  if (world < 1 || group < 1 || world % group != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "verify: the world (%d) must be a positive multiple of the group size (%d)", world, group);
    return NULL;
  }
  sp_groups gs = { world / group, group, g_new(int32_t, world) };
  for (int32_t r = 0; r < world; r++)
    gs.ranks[r] = r;
  table_ud ud = { builders[e - table], &gs };
  sp_graph_case *c = NULL;
  const gboolean moe = builders[e - table] == build_moe_fwd || builders[e - table] == build_moe_bwd;
  if (opts && !moe) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "the operation '%s' takes no options (moe-layer and moe-layer-bwd do)", e->name);
  } else if (opts) {
    moe_opts_ud mu = { &gs, opts, builders[e - table] == build_moe_bwd };
    c = sp_vc_case_new(world, build_moe_opts, &mu, err);
  } else {
    c = sp_vc_case_new(world, build_table_entry, &ud, err);
  }
  g_free(gs.ranks);
  return c;
}

sp_graph_case *sp_ops_verify_case_new(const char *name, int32_t world, int32_t group, GError **err)
{
  return sp_ops_verify_case_new_opts(name, world, group, NULL, err);
}
