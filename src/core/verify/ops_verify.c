/* Self-checks of the operation library for `spsim verify --op NAME`: build an
 * operation's forward and backward on every group of a world, compute the global
 * reference, execute the lowered programs with the caller's runner and compare. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"
#include "graph_private.h"

#define BAD SP_OPS_BAD
#define MAX_OUTS 8

typedef struct {
  uint32_t t[MAX_OUTS];
  double tol[MAX_OUTS];
  int n;
} outs_t;

static void add_out(outs_t *o, uint32_t t, double tol)
{
  if (o->n < MAX_OUTS && t != BAD) {
    o->t[o->n] = t;
    o->tol[o->n] = tol;
    o->n++;
  }
}

/* The outputs of an attention forward + backward case, compared bitwise. */
static void add_attn_outs(outs_t *o, uint32_t out, uint32_t dq, uint32_t dk, uint32_t dv)
{
  add_out(o, out, 0);
  add_out(o, dq, 0);
  add_out(o, dk, 0);
  add_out(o, dv, 0);
}

static uint32_t input(sp_graph *g, const char *name, sp_dtype dt, int nd, const int64_t *shape, GError **err)
{
  return sp_graph_tensor_new(g, name, dt, nd, shape, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, err);
}

typedef gboolean (*build_fn)(sp_graph *g, const sp_groups *gs, outs_t *o, GError **err);

#define CHK_HEAD_DIM 4

/* q [1, s, H, d], k and v [1, s, KV, d] per rank */
static gboolean qkv_inputs(sp_graph *g, int64_t s, int64_t H, int64_t KV, uint32_t *q, uint32_t *k, uint32_t *v,
                           GError **err)
{
  int64_t sq[4] = { 1, s, H, CHK_HEAD_DIM }, skv[4] = { 1, s, KV, CHK_HEAD_DIM };
  *q = input(g, "q", SP_F32, 4, sq, err);
  *k = *q == BAD ? BAD : input(g, "k", SP_F32, 4, skv, err);
  *v = *k == BAD ? BAD : input(g, "v", SP_F32, 4, skv, err);
  return *v != BAD;
}

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
    sp_graph_data_fill_inputs(ref, 20240601);
    got = sp_graph_data_new(g);
    sp_graph_data_copy(got, ref);
    ok = sp_graph_reference(g, ref, err);
  }
  if (ok && run)
    ok = run(g, got, err);
  for (int i = 0; ok && run && i < o.n; i++)
    ok = sp_graph_data_compare(g, got, ref, o.t[i], o.tol[i], err);
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

/* build function of each entry, by table index (kept beside the public table) */
static const build_fn builders[] = { build_a2a, build_gather_split, build_slice_pad, build_attention,
                                     build_tp_plain, build_tp_sp, build_isp, build_ring, build_hybrid,
                                     build_pipeline, build_ring_bwd, build_hybrid_bwd,
                                     build_pipeline_interleaved };

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

/* ---------------------------------------------------------------- whole-world cases */

struct sp_graph_case {
  sp_graph *g;
  outs_t outs;
  sp_graph_data *ref, *run;
  int32_t world;
  sp_program **progs;
  void ***bufs;
  guint *nbufs;
};

/* Build a case on @p world ranks with @p build, fill the inputs, compute the reference and
 * lower every rank's program with its buffers (storage first, then scratch). */
typedef gboolean (*case_build_fn)(sp_graph *g, const void *ud, outs_t *o, GError **err);

static sp_graph_case *case_new(int32_t world, case_build_fn build, const void *ud, GError **err)
{
  sp_graph_case *c = g_new0(sp_graph_case, 1);
  c->world = world;
  c->g = sp_graph_new(world);
  gboolean ok = build(c->g, ud, &c->outs, err);
  if (ok && c->outs.n == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: the case has no output to compare");
    ok = FALSE;
  }
  if (ok) {
    c->ref = sp_graph_data_new(c->g);
    sp_graph_data_fill_inputs(c->ref, 20240601);
    c->run = sp_graph_data_new(c->g);
    sp_graph_data_copy(c->run, c->ref);
    ok = sp_graph_reference(c->g, c->ref, err);
  }
  if (ok) {
    c->progs = g_new0(sp_program *, world);
    c->bufs = g_new0(void **, world);
    c->nbufs = g_new0(guint, world);
    const guint ns = sp_graph_n_storage(c->g);
    for (int32_t r = 0; ok && r < world; r++) {
      c->progs[r] = sp_graph_lower(c->g, r, err);
      if (!c->progs[r]) {
        ok = FALSE;
        break;
      }
      guint nb = c->progs[r]->bufs->len;
      c->nbufs[r] = nb;
      c->bufs[r] = g_new0(void *, nb ? nb : 1);
      for (guint b = 0; b < nb; b++)
        c->bufs[r][b] = b < ns ? c->run->buf[r][b]
                               : g_malloc0(MAX(1, g_array_index(c->progs[r]->bufs, sp_buffer, b).bytes));
    }
  }
  if (!ok) {
    sp_graph_case_free(c);
    return NULL;
  }
  return c;
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

sp_graph_case *sp_ops_verify_case_new(const char *name, int32_t world, int32_t group, GError **err)
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
  sp_graph_case *c = case_new(world, build_table_entry, &ud, err);
  g_free(gs.ranks);
  return c;
}

/* ---------------------------------------------------------------- layout checks */

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
  return case_new(cfg->world, build_check, cfg, err);
}

gboolean sp_graph_case_corrupt(sp_graph_case *c, int32_t rank)
{
  if (!c || rank < 0 || rank >= c->world)
    return FALSE;
  for (int i = 0; i < c->outs.n; i++) {
    uint8_t *p = sp_graph_data_get(c->run, c->outs.t[i], rank);
    const sp_tensor *t = sp_graph_tensor(c->g, c->outs.t[i]);
    if (p && sp_tensor_bytes(t) > 0) {
      /* the most significant byte of element 0 (little endian): an exponent bit of a
       * float, so the change exceeds any tolerance */
      p[sp_dtype_size(t->dtype) - 1] ^= 0x40;
      return TRUE;
    }
  }
  return FALSE;
}

int32_t sp_graph_case_world(const sp_graph_case *c) { return c->world; }
sp_program *const *sp_graph_case_progs(const sp_graph_case *c) { return c->progs; }
void **const *sp_graph_case_bufs(const sp_graph_case *c) { return (void **const *)c->bufs; }

uint64_t sp_graph_case_bytes(const sp_graph_case *c)
{
  uint64_t b = 0;
  for (int i = 0; i < c->outs.n; i++)
    b += sp_tensor_bytes(sp_graph_tensor(c->g, c->outs.t[i]));
  return b;
}

gboolean sp_graph_case_compute(void *cv, int32_t rank, const sp_step *s, void *const *bufs, GError **err)
{
  sp_graph_case *c = cv;
  const sp_node *n = sp_graph_node(c->g, s->op);
  if (!n || !sp_node_is_kernel(n))
    return TRUE;
  return sp_graph_kernel_host(c->g, s->op, rank, bufs, err);
}

gboolean sp_graph_case_check(void *cv, int32_t *bad_rank, uint64_t *bad_off, GError **err)
{
  sp_graph_case *c = cv;
  for (int i = 0; i < c->outs.n; i++) {
    GError *e = NULL;
    if (sp_graph_data_compare(c->g, c->run, c->ref, c->outs.t[i], c->outs.tol[i], &e))
      continue;
    /* locate the first differing byte for the report */
    /* locate the first element out of tolerance (bitwise when the tolerance is 0) */
    const sp_tensor *t = sp_graph_tensor(c->g, c->outs.t[i]);
    const uint64_t nb = sp_tensor_bytes(t);
    const double tol = c->outs.tol[i];
    for (int32_t r = 0; r < c->world; r++) {
      const uint8_t *a = sp_graph_data_get(c->run, c->outs.t[i], r), *b = sp_graph_data_get(c->ref, c->outs.t[i], r);
      if (!a || !b)
        continue;
      gboolean found = FALSE;
      if (tol > 0 && t->dtype == SP_F32) {
        for (uint64_t k = 0; k + 4 <= nb && !found; k += 4) {
          float x, y;
          memcpy(&x, a + k, 4);
          memcpy(&y, b + k, 4);
          if (!(fabs((double)x - (double)y) <= tol * MAX(1.0, fabs((double)y))) && memcmp(a + k, b + k, 4) != 0) {
            if (bad_off)
              *bad_off = k;
            found = TRUE;
          }
        }
      } else {
        for (uint64_t k = 0; k < nb && !found; k++)
          if (a[k] != b[k]) {
            if (bad_off)
              *bad_off = k;
            found = TRUE;
          }
      }
      if (found) {
        if (bad_rank)
          *bad_rank = r;
        break;
      }
    }
    g_propagate_error(err, e);
    return FALSE;
  }
  return TRUE;
}

void sp_graph_case_free(void *cv)
{
  sp_graph_case *c = cv;
  if (!c)
    return;
  const guint ns = c->g ? sp_graph_n_storage(c->g) : 0;
  for (int32_t r = 0; c->progs && r < c->world; r++) {
    if (c->bufs && c->bufs[r])
      for (guint b = ns; b < c->nbufs[r]; b++)
        g_free(c->bufs[r][b]);
    if (c->bufs)
      g_free(c->bufs[r]);
    sp_program_free(c->progs[r]);
  }
  g_free(c->progs);
  g_free(c->bufs);
  g_free(c->nbufs);
  sp_graph_data_free(c->ref);
  sp_graph_data_free(c->run);
  sp_graph_free(c->g);
  g_free(c);
}

/* ---------------------------------------------------------------- per-rank view */

gboolean sp_graph_case_has_outputs(const sp_graph_case *c, int32_t rank)
{
  if (!c || rank < 0 || rank >= c->world)
    return FALSE;
  for (int i = 0; i < c->outs.n; i++)
    if (sp_graph_tensor_on(c->g, c->outs.t[i], rank))
      return TRUE;
  return FALSE;
}

gboolean sp_graph_case_check_rank(const sp_graph_case *c, int32_t rank, uint64_t *bad_off, GError **err)
{
  if (!c || rank < 0 || rank >= c->world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "verify: rank %d is outside the case's world of %d ranks",
                rank, c ? c->world : 0);
    return FALSE;
  }
  for (int i = 0; i < c->outs.n; i++) {
    if (!sp_graph_tensor_on(c->g, c->outs.t[i], rank))
      continue;
    const sp_tensor *t = sp_graph_tensor(c->g, c->outs.t[i]);
    const uint8_t *a = sp_graph_data_get(c->run, c->outs.t[i], rank);
    const uint8_t *b = sp_graph_data_get(c->ref, c->outs.t[i], rank);
    const uint64_t nb = sp_tensor_bytes(t);
    const double tol = c->outs.tol[i];
    if (!a || !b || nb == 0)
      continue;
    if (tol > 0 && t->dtype == SP_F32) {
      for (uint64_t k = 0; k + 4 <= nb; k += 4) {
        float x, y;
        memcpy(&x, a + k, 4);
        memcpy(&y, b + k, 4);
        if (memcmp(a + k, b + k, 4) != 0 && !(fabs((double)x - (double)y) <= tol * MAX(1.0, fabs((double)y)))) {
          if (bad_off)
            *bad_off = k;
          g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                      "tensor '%s' differs on rank %d at element %" G_GUINT64_FORMAT ": %.9g vs %.9g "
                      "(relative tolerance %g)", t->name, rank, k / 4, (double)x, (double)y, tol);
          return FALSE;
        }
      }
    } else {
      for (uint64_t k = 0; k < nb; k++)
        if (a[k] != b[k]) {
          if (bad_off)
            *bad_off = k;
          g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                      "tensor '%s' differs on rank %d at byte %" G_GUINT64_FORMAT " (bitwise)", t->name, rank, k);
          return FALSE;
        }
    }
  }
  return TRUE;
}

uint64_t sp_graph_case_checksum(const sp_graph_case *c, int32_t rank)
{
  if (!sp_graph_case_has_outputs(c, rank))
    return 0;
  uint64_t h = 0;
  for (int i = 0; i < c->outs.n; i++) {
    const uint8_t *p = sp_graph_data_get(c->run, c->outs.t[i], rank);
    const uint64_t nb = sp_tensor_bytes(sp_graph_tensor(c->g, c->outs.t[i]));
    if (p && nb > 0)
      h = sp_checksum(h, p, nb);
  }
  return h;
}
