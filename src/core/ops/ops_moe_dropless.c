/* The dropless dispatch of a mixture-of-experts layer: every routed (token, expert)
 * pair is kept and each source rank sends an expert exactly the tokens it routed
 * there, as Megatron-Core's MoEAlltoAllTokenDispatcher does without capacity
 * (megatron/core/transformer/moe/token_dispatcher.py: the tokens permuted by the
 * routing map, torch.distributed.all_to_all_single with input/output splits, then
 * sort_chunks_by_idxs into local-expert-major order). spsim fixes every message's
 * size when the graph is built, so the per-(source rank, expert) counts come from
 * the router evaluated at build time on the case's inputs (sp_moe_route_counts);
 * the exchanges here move exactly those rows as grouped send-recvs (the
 * construction of sp_op_all_to_all_v, ops_a2av.c), and the capacity path keeps its
 * even all-to-all. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/kernels.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

void sp_moe_route_counts(const sp_moe_cfg *c, const float *x, const float *wr, int64_t *counts)
{
  const int64_t T = c->tokens, E = c->experts, K = c->topk, H = c->hidden;
  float *logits = g_new(float, T * E), *scores = g_new(float, T * E), *route = g_new(float, T * K * 3);
  float *cnt = g_new(float, E);
  sp_kernel_matmul_f32(x, FALSE, wr, FALSE, logits, T, E, H);
  /* capacity T: no expert is routed more than the T tokens of a rank, so nothing is dropped */
  sp_kernel_moe_route_f32(logits, T, E, K, T, c->drop, route, scores, cnt);
  for (int64_t e = 0; e < E; e++)
    counts[e] = (int64_t)cnt[e];
  g_free(logits);
  g_free(scores);
  g_free(route);
  g_free(cnt);
}

int64_t sp_ops_moe_dropless_setup(sp_moe_layer *st, const sp_groups *gs, GError **err)
{
  const sp_moe_cfg *c = &st->cfg;
  if (!c->dropless_counts) {
    g_set_error_literal(err, SP_ERROR, SP_ERROR_INVALID,
                        "moe: a dropless layer needs the router's per-rank counts at build time "
                        "(sp_moe_cfg.dropless_counts, from sp_moe_route_counts)");
    return 0;
  }
  int32_t W = 0;
  for (int64_t k = 0; k < (int64_t)gs->n_groups * gs->group_size; k++)
    W = gs->ranks[k] + 1 > W ? gs->ranks[k] + 1 : W;
  st->counts_ranks = W;
  st->counts_tab = g_memdup2(c->dropless_counts, sizeof(int64_t) * (size_t)W * (size_t)c->experts);
  int64_t C = 1;
  for (int64_t k = 0; k < (int64_t)gs->n_groups * gs->group_size; k++) {
    int64_t sum = 0;
    for (int64_t e = 0; e < c->experts; e++) {
      const int64_t n = st->counts_tab[(int64_t)gs->ranks[k] * c->experts + e];
      if (n < 0 || n > c->tokens) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "moe: dropless count %" G_GINT64_FORMAT " of rank %d for expert %" G_GINT64_FORMAT
                    " is outside [0, %" G_GINT64_FORMAT "] (the tokens of a rank)", n, gs->ranks[k], e, c->tokens);
        return 0;
      }
      C = n > C ? n : C;
      sum += n;
    }
    if (sum != c->tokens * c->topk) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "moe: the dropless counts of rank %d sum to %" G_GINT64_FORMAT ", not tokens x topk = %" G_GINT64_FORMAT,
                  gs->ranks[k], sum, c->tokens * c->topk);
      return 0;
    }
  }
  return C;
}

/* A tensor of @p rows x @p H f32 held by @p n ranks. */
static uint32_t piece(sp_graph *g, const char *nm, int64_t rows, int64_t H, const int32_t *ranks, int32_t n,
                      sp_tensor_init init, GError **err)
{
  int64_t s[2] = { rows, H };
  uint32_t t = sp_graph_tensor_new(g, nm, SP_F32, 2, s, SP_TENSOR_COMM, init, err);
  if (t != BAD && !sp_graph_tensor_place(g, t, ranks, n, err))
    return BAD;
  return t;
}

/* One chunk of a dropless exchange: rows [off, off + n) of slab a (dim 0) of the
 * source's @p in, received into the first n rows of block @p blk (zeros after them)
 * of the receiver. */
typedef struct {
  int32_t src, dst;   /* members */
  int64_t a, off, n;  /* source slab, row offset in it, rows */
} chunk_t;

/* The chunks member @p r receives, in its block order (@p back: the combine
 * direction). Dispatch: block (l, i) = expert j El + l's rows from member i (the
 * local-expert-major order of sort_chunks_by_idxs); combine: block e = expert e's
 * rows back from its holder. */
static void chunks_of(const sp_moe_layer *st, const sp_groups *ep, int32_t gi, int32_t r, gboolean back,
                      chunk_t *ch)
{
  const int32_t P = ep->group_size;
  const int64_t E = st->cfg.experts, El = E / P, C = st->capacity;
  if (!back) {
    for (int64_t l = 0; l < El; l++)
      for (int32_t i = 0; i < P; i++) {
        const int64_t e = (int64_t)r * El + l;
        ch[l * P + i] = (chunk_t){ i, r, e, 0, st->counts_tab[(int64_t)ep->ranks[gi * P + i] * E + e] };
      }
  } else {
    for (int64_t e = 0; e < E; e++)
      ch[e] = (chunk_t){ (int32_t)(e / El), r, e % El, (int64_t)r * C,
                         st->counts_tab[(int64_t)ep->ranks[gi * P + r] * E + e] };
  }
}

/* A [rows, H] view of @p t (a tensor of rows x H elements): a tensor sharing its
 * storage, through @p t's pool slot (@p t joins a new pool when it has none), so
 * that one slice along dim 0 takes any row range of it without copying a slab. */
static uint32_t flat(sp_graph *g, uint32_t t, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  const int64_t H = x->shape[x->ndim - 1], s[2] = { (int64_t)sp_tensor_numel(x) / H, H };
  char *nm = g_strdup_printf("%s.rows", x->name);
  uint32_t v = sp_ops_like(g, t, nm, 2, s, x->kind, err);
  g_free(nm);
  if (v == BAD)
    return BAD;
  if (sp_graph_tensor(g, t)->pool < 0)
    sp_graph_tensor_pool(g, t, 0x4D560000 + (int32_t)sp_graph_n_tensors(g), 0);
  x = sp_graph_tensor(g, t);
  sp_graph_tensor_pool(g, v, x->pool, x->slot);
  return v;
}

/* Rows [k->off, k->off + k->n) of slab k->a (@p slab rows each) of the [rows, H]
 * view @p rows into a new [n, H] tensor held by @p ranks. */
static uint32_t cut(sp_graph *g, uint32_t rows, const chunk_t *k, int64_t slab, int64_t H, const char *nm,
                    const int32_t *ranks, int32_t n, GError **err)
{
  uint32_t o = piece(g, nm, k->n, H, ranks, n, SP_INIT_NONE, err);
  if (o == BAD || sp_graph_slice(g, rows, o, 0, k->a * slab + k->off, k->n, err) == BAD)
    return BAD;
  return o;
}

uint32_t sp_ops_moe_exchange(sp_graph *g, const sp_moe_layer *st, uint32_t in, gboolean back, const char *nm,
                             GError **err)
{
  const sp_moe_cfg *c = &st->cfg;
  const int64_t E = c->experts, El = E / c->ep, C = st->capacity, H = c->hidden;
  const int64_t shape[3] = { back ? E : El, back ? C : c->ep * C, H };
  uint32_t out = sp_ops_like(g, st->x, nm, 3, shape, SP_TENSOR_ACTIVATION, err);
  if (out == BAD)
    return BAD;
  if (!c->dropless) /* the even all-to-all of the capacity slots */
    return sp_graph_all_to_all(g, &st->ep, in, out, back ? 1 : 0, back ? 0 : 1, c->algo, err) == BAD ? BAD : out;
  const sp_groups *ep = &st->ep;
  const int32_t P = ep->group_size;
  const int64_t nb = back ? E : El * P, slab = back ? P * C : C; /* blocks per receiver; rows of a source slab */
  /* As sp_op_all_to_all_v: each chunk lands in a tensor sharing storage with its
   * receiver's zero block (pool A), and a receiver's blocks concatenated share
   * storage with @p out (pool B). A pair's chunks travel as one message, in expert
   * order (Megatron-Core's permuted tokens are sorted by expert, so one split of
   * all_to_all_single per pair). */
  const int32_t pool_a = 0x4D450000 + (int32_t)sp_graph_n_tensors(g), pool_b = pool_a + 1;
  sp_graph_tensor_pool(g, out, pool_b, 0);
  chunk_t *ch = g_new(chunk_t, nb);
  uint32_t *blocks = g_new(uint32_t, nb), *parts = g_new(uint32_t, nb);
  uint32_t *msg = g_new(uint32_t, (gsize)ep->n_groups * (gsize)P * (gsize)P);
  gboolean ok = TRUE;
  const char *xn = sp_graph_tensor(g, in)->name;
  const uint32_t view = flat(g, in, err);
  if (view == BAD)
    ok = FALSE;
  /* the self chunks first, then every pair's message (posted, not waited), then each
   * receiver's unpacking and concatenation, which wait for its messages */
  for (int pass = 0; ok && pass < 3; pass++)
    for (int32_t gi = 0; ok && gi < ep->n_groups; gi++)
      for (int32_t r = 0; ok && r < P; r++) {
        const int32_t rr = ep->ranks[gi * P + r];
        chunks_of(st, ep, gi, r, back, ch);
        for (int32_t s = 0; ok && s < P; s++) {
          const int32_t pair[2] = { ep->ranks[gi * P + s], rr };
          uint32_t *m = &msg[((int64_t)gi * P + s) * P + r];
          int64_t rows = 0, np = 0;
          for (int64_t b = 0; b < nb; b++)
            if (ch[b].src == s && ch[b].n > 0)
              rows += ch[b].n;
          if (rows == 0 || (pass == 0) != (s == r) || (pass == 2 && s == r))
            continue;
          char *mn = g_strdup_printf("%s.dl%d_%d_%d", xn, gi, s, r);
          if (pass == 1) { /* pack the pair's chunks, post the message */
            for (int64_t b = 0; ok && b < nb; b++)
              if (ch[b].src == s && ch[b].n > 0) {
                char *pn = g_strdup_printf("%s.part%" G_GINT64_FORMAT, mn, b);
                ok = (parts[np++] = cut(g, view, &ch[b], slab, H, pn, pair, 2, err)) != BAD;
                g_free(pn);
              }
            char *rn = g_strdup_printf("%s.recv", mn);
            uint32_t send = ok ? piece(g, mn, rows, H, pair, 2, SP_INIT_NONE, err) : BAD, n = BAD;
            *m = send == BAD ? BAD : piece(g, rn, rows, H, pair, 2, SP_INIT_NONE, err);
            g_free(rn);
            sp_groups one = sp_groups_one(pair, 2);
            ok = *m != BAD && sp_ops_concat_parts(g, parts, np, send, err) &&
                 (n = sp_graph_send_recv(g, &one, send, *m, err)) != BAD;
            if (ok)
              sp_graph_node_set_async(g, n, TRUE); /* every pair posted before one wait */
          } else /* the self chunks, or the received message's chunks, into their blocks */
            for (int64_t b = 0, off = 0; ok && b < nb; b++) {
              if (ch[b].src != s || ch[b].n == 0)
                continue;
              char *gn = g_strdup_printf("%s.chunk%" G_GINT64_FORMAT, mn, b);
              uint32_t got = s == r ? cut(g, view, &ch[b], slab, H, gn, &rr, 1, err)
                                    : piece(g, gn, ch[b].n, H, &rr, 1, SP_INIT_NONE, err);
              g_free(gn);
              ok = got != BAD && (s == r || sp_graph_slice(g, *m, got, 0, off, ch[b].n, err) != BAD);
              if (ok)
                sp_graph_tensor_pool(g, got, pool_a, (int32_t)((gi * P + r) * nb + b));
              off += ch[b].n;
            }
          g_free(mn);
        }
        if (!ok || pass != 2)
          continue;
        for (int64_t b = 0; ok && b < nb; b++) {
          char *bn = g_strdup_printf("%s.dl%d_%d_%" G_GINT64_FORMAT ".block", xn, gi, r, b);
          blocks[b] = piece(g, bn, C, H, &rr, 1, SP_INIT_ZERO, err);
          g_free(bn);
          ok = blocks[b] != BAD;
          if (ok)
            sp_graph_tensor_pool(g, blocks[b], pool_a, (int32_t)((gi * P + r) * nb + b));
        }
        char *on = g_strdup_printf("%s.dl%d_to%d", xn, gi, r);
        uint32_t o = ok ? piece(g, on, nb * C, H, &rr, 1, SP_INIT_NONE, err) : BAD;
        g_free(on);
        if (o != BAD)
          sp_graph_tensor_pool(g, o, pool_b, 0);
        ok = o != BAD && sp_ops_concat_parts(g, blocks, nb, o, err);
      }
  g_free(ch);
  g_free(blocks);
  g_free(parts);
  g_free(msg);
  return ok ? out : BAD;
}

/* Position of @p rank in @p gs's rank table (-1: absent). */
static int64_t pos_of(const sp_groups *gs, int32_t rank)
{
  for (int64_t k = 0; k < (int64_t)gs->n_groups * gs->group_size; k++)
    if (gs->ranks[k] == rank)
      return k;
  return -1;
}

/* Rows of each block (etp member t', ep member i) of world rank @p r's local expert
 * @p l in the experts' padded tokens [E/ep, etp ep C, H]: what member i of the ep
 * group of r's etp peer t' routed to that expert. Returns their sum. */
static int64_t block_rows(const sp_moe_layer *st, int32_t r, int64_t l, int64_t *n)
{
  const int32_t ep = st->cfg.ep, etp = st->cfg.etp;
  const int64_t E = st->cfg.experts, El = E / ep;
  const int64_t pt = pos_of(&st->etp, r), pe = pos_of(&st->ep, r);
  const int64_t e = (pe % ep) * El + l;
  int64_t sum = 0;
  for (int32_t t = 0; t < etp; t++) {
    const int64_t q = pos_of(&st->ep, st->etp.ranks[(pt / etp) * etp + t]);
    for (int32_t i = 0; i < ep; i++) {
      const int64_t c = st->counts_tab[(int64_t)st->ep.ranks[(q / ep) * ep + i] * E + e];
      n[t * ep + i] = c;
      sum += c;
    }
  }
  return sum;
}

/* A tensor of @p a x @p b f32 on one rank. */
static uint32_t on_rank(sp_graph *g, const char *nm, int64_t a, int64_t b, int32_t rank, sp_tensor_kind kind,
                        sp_tensor_init init, GError **err)
{
  int64_t s[2] = { a, b };
  uint32_t t = sp_graph_tensor_new(g, nm, SP_F32, 2, s, kind, init, err);
  if (t != BAD && !sp_graph_tensor_place(g, t, &rank, 1, err))
    return BAD;
  return t;
}

gboolean sp_ops_moe_compact(sp_graph *g, const sp_moe_layer *st, const uint32_t *slab, const char *nm,
                            uint32_t *exact, GError **err)
{
  const int32_t nb = st->cfg.ep * st->cfg.etp;
  const int64_t El = st->cfg.experts / st->cfg.ep, C = st->capacity, H = st->cfg.hidden;
  int64_t *n = g_new(int64_t, nb);
  uint32_t *parts = g_new(uint32_t, nb);
  gboolean ok = TRUE;
  for (int64_t k = 0; ok && k < (int64_t)st->all.n_groups * st->all.group_size; k++)
    for (int64_t l = 0; ok && l < El; l++) {
      const int32_t r = st->all.ranks[k];
      const int64_t N = block_rows(st, r, l, n);
      uint32_t *x = &exact[k * El + l];
      *x = BAD;
      if (N == 0)
        continue;
      int np = 0;
      for (int32_t b = 0; ok && b < nb; b++) {
        if (n[b] == 0)
          continue;
        char *pn = g_strdup_printf("%s%" G_GINT64_FORMAT ".r%d.b%d", nm, l, r, b);
        uint32_t p = on_rank(g, pn, n[b], H, r, SP_TENSOR_ACTIVATION, SP_INIT_NONE, err);
        g_free(pn);
        ok = p != BAD && sp_graph_slice(g, slab[l], p, 0, b * C, n[b], err) != BAD;
        parts[np++] = p;
      }
      char *xn = g_strdup_printf("%s%" G_GINT64_FORMAT ".r%d", nm, l, r);
      *x = ok ? on_rank(g, xn, N, H, r, SP_TENSOR_ACTIVATION, SP_INIT_NONE, err) : BAD;
      g_free(xn);
      ok = *x != BAD && sp_ops_concat_parts(g, parts, np, *x, err);
    }
  g_free(n);
  g_free(parts);
  return ok;
}

uint32_t sp_ops_moe_expand(sp_graph *g, const sp_moe_layer *st, const uint32_t *exact, const char *nm,
                           GError **err)
{
  const int32_t nb = st->cfg.ep * st->cfg.etp;
  const int64_t El = st->cfg.experts / st->cfg.ep, C = st->capacity, H = st->cfg.hidden, M = nb * C;
  const int64_t shape[3] = { El, M, H };
  uint32_t out = sp_ops_like(g, st->x, nm, 3, shape, SP_TENSOR_ACTIVATION, err);
  if (out == BAD)
    return BAD;
  /* each exact row range lands in a zero block (pool A, a slot per block); a rank's
   * blocks concatenated share storage with @p out (pool B) */
  const int32_t pool_a = 0x4D580000 + (int32_t)sp_graph_n_tensors(g), pool_b = pool_a + 1;
  sp_graph_tensor_pool(g, out, pool_b, 0);
  int64_t *n = g_new(int64_t, nb);
  uint32_t *blocks = g_new(uint32_t, El * nb);
  gboolean ok = TRUE;
  for (int64_t k = 0; ok && k < (int64_t)st->all.n_groups * st->all.group_size; k++) {
    const int32_t r = st->all.ranks[k];
    for (int64_t l = 0; ok && l < El; l++) {
      block_rows(st, r, l, n);
      for (int64_t b = 0, off = 0; ok && b < nb; b++) {
        const int32_t slot = (int32_t)((k * El + l) * nb + b);
        char *bn = g_strdup_printf("%s%" G_GINT64_FORMAT ".r%d.b%" G_GINT64_FORMAT, nm, l, r, b);
        uint32_t blk = on_rank(g, bn, C, H, r, SP_TENSOR_ACTIVATION, SP_INIT_ZERO, err);
        g_free(bn);
        blocks[l * nb + b] = blk;
        ok = blk != BAD;
        if (!ok || n[b] == 0)
          continue;
        sp_graph_tensor_pool(g, blk, pool_a, slot);
        char *pn = g_strdup_printf("%s%" G_GINT64_FORMAT ".r%d.p%" G_GINT64_FORMAT, nm, l, r, b);
        uint32_t p = on_rank(g, pn, n[b], H, r, SP_TENSOR_ACTIVATION, SP_INIT_NONE, err);
        g_free(pn);
        ok = p != BAD && sp_graph_slice(g, exact[k * El + l], p, 0, off, n[b], err) != BAD;
        if (ok)
          sp_graph_tensor_pool(g, p, pool_a, slot);
        off += n[b];
      }
    }
    char *on = g_strdup_printf("%s.r%d", nm, r);
    uint32_t o = ok ? on_rank(g, on, El * M, H, r, SP_TENSOR_ACTIVATION, SP_INIT_NONE, err) : BAD;
    g_free(on);
    if (o != BAD)
      sp_graph_tensor_pool(g, o, pool_b, 0);
    ok = o != BAD && sp_ops_concat_parts(g, blocks, El * nb, o, err);
  }
  g_free(n);
  g_free(blocks);
  return ok ? out : BAD;
}

uint32_t sp_ops_moe_stack(sp_graph *g, const sp_moe_layer *st, const uint32_t *per, uint32_t ref, int64_t a,
                          int64_t b, const char *nm, GError **err)
{
  const int64_t El = st->cfg.experts / st->cfg.ep;
  const int64_t shape[3] = { El, a, b };
  uint32_t out = sp_ops_like(g, ref, nm, 3, shape, SP_TENSOR_GRAD, err);
  if (out == BAD)
    return BAD;
  const int32_t pool = 0x4D530000 + (int32_t)sp_graph_n_tensors(g);
  sp_graph_tensor_pool(g, out, pool, 0);
  uint32_t *parts = g_new(uint32_t, El);
  gboolean ok = TRUE;
  for (int64_t k = 0; ok && k < (int64_t)st->all.n_groups * st->all.group_size; k++) {
    const int32_t r = st->all.ranks[k];
    for (int64_t l = 0; ok && l < El; l++) {
      parts[l] = per[k * El + l];
      if (parts[l] == BAD) { /* an expert with no token on this rank: a zero gradient */
        char *zn = g_strdup_printf("%s%" G_GINT64_FORMAT ".r%d.zero", nm, l, r);
        parts[l] = on_rank(g, zn, a, b, r, SP_TENSOR_GRAD, SP_INIT_ZERO, err);
        g_free(zn);
        ok = parts[l] != BAD;
      }
    }
    char *on = g_strdup_printf("%s.r%d", nm, r);
    int64_t s3[3] = { El, a, b };
    uint32_t o = ok ? sp_graph_tensor_new(g, on, SP_F32, 3, s3, SP_TENSOR_GRAD, SP_INIT_NONE, err) : BAD;
    g_free(on);
    ok = o != BAD && sp_graph_tensor_place(g, o, &r, 1, err);
    if (ok)
      sp_graph_tensor_pool(g, o, pool, 0);
    ok = ok && sp_ops_concat_parts(g, parts, El, o, err);
  }
  g_free(parts);
  return ok ? out : BAD;
}
