/* Hierarchical all-reduces: NVLS-tree, CollNet Direct and CollNet Chain (spsim/coll.h).
 *
 * The n members come as N nodes of B consecutive members (B = sp_dbtree_block of the
 * spec's channel_block; member m is local index m % B of node m / B). The vector is
 * cut into B segments (sp_seg_off); segment l belongs to local index l of every node.
 * Three phases, pipelined chunk by chunk:
 *   1. inside every node the B inputs of segment l are reduced to local member l:
 *      NVLS-tree and CollNet Direct in one direct exchange (NVIDIA/nccl
 *      src/device/all_reduce.h: the NVLS scatter / the CollNet Direct scatter to the
 *      heads), CollNet Chain along a chain of the node's members ending at l (the
 *      chain's head; all_reduce.h, COLLNET_CHAIN's "up" direction);
 *   2. across nodes, the N node partials of segment l (held by local member l of
 *      every node) are all-reduced: NVLS-tree with NCCL's double binary tree over the
 *      nodes (spsim/dbtree.h, two instances on the two halves of the segment: NCCL's
 *      nvls->treeUp / treeDown), CollNet with one exchange standing for the switch's
 *      reduction: each of the N members reduces 1/N of the chunk from all nodes and
 *      hands it back (the engine prices it as the switch does: spsim/tuning.h);
 *   3. inside every node the total of segment l goes from member l to the others:
 *      direct (NVLS multicast, CollNet Direct gather) or back down the chain.
 * Chunk x of every segment enters phase 1 at step x; phase 2 starts R steps later
 * (R = 1 direct, B - 1 chain), phase 3 R + D steps later (D = 2H for a tree of depth
 * H, 2 for CollNet, 0 on one node), so the phases of consecutive chunks overlap as
 * NCCL's warps of scatter, reduce/tree and gather do.
 *
 * Reduction order (reference.c follows it): node partial of segment l = index order
 * ((x[0] ⊕ x[1]) ⊕ ...) ⊕ x[B-1] over the node's members (direct), or the chain's
 * order from local l+1: ((x[l+1] ⊕ x[l+2]) ⊕ ...) ⊕ x[l] (indices mod B); then the
 * tree's order of lower_dbtree.c over the node partials (NVLS-tree) or their index
 * order over nodes (CollNet); AVG divides once by n where the total is complete. */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/dbtree.h"

/* Smallest and largest default chunk: NCCL's Simple step (NCCL_BUFFSIZE 4 MiB /
 * NCCL_STEPS 8, src/include/device.h) and spsim's ring chunk; between them, a part of
 * S bytes runs S / (4 x steps of the pipeline) per chunk, as spsim/dbtree.h's rule. */
#define HIER_CHUNK_MIN ((uint64_t)512 << 10)
/* CollNet's exchange across N nodes posts 2(N-1) messages per chunk and member (the
 * switches' reduction as point-to-point), so by default its chunks are at most
 * HIER_COLLNET_POSTS / (N + B): the engine's messages stay O(n x this). Measured: 128
 * nodes of one GPU, 64 MiB, 16 chunks of 4 MiB: 7 min 53 s (`spsim bench` on `spsim
 * platform dgx --nodes 128 --sharp`, --ranks 128 --per-node 1); one GPU per node has no
 * phase inside the node to overlap, so its chunks buy nothing there. */
#define HIER_COLLNET_POSTS 256

typedef struct {
  sp_lctx *c;
  gboolean chain, tree; /* intra chain (CollNet Chain); inter tree (NVLS-tree) */
  gboolean rail;        /* cost only, direct inside the node: its exchanges by rail */
  int32_t B, N, nu, j;  /* members per node, nodes, my node, my local index */
  int32_t K;            /* parts of a segment: tree instances (2) or 1 */
  int32_t R, D, E;      /* steps of phases 1, 2, 3 */
  uint64_t ce;          /* chunk, elements */
  sp_dbtree_place pl[2];
  int32_t H[2];
  uint64_t cb, sb;      /* bytes of a chunk slot and of a CollNet sub-piece slot */
  uint32_t islot;       /* phase 1 direct: K x B chunks, part k's member i at (k B + i) cb */
  uint32_t nslot;       /* CollNet: N sub-pieces (node m's at m sb) and the accumulator */
  uint32_t tslot[2];    /* tree: three chunks per instance */
} hier;

static int32_t member_of(const hier *h, int32_t node, int32_t local)
{
  return node * h->B + local;
}

/* Elements [*off, *off + *len) of chunk x of part k of segment l (len 0: none). */
static void region(const hier *h, int32_t l, int32_t k, int64_t x, uint64_t *off, uint64_t *len)
{
  uint64_t cnt = h->c->spec->count;
  uint64_t so = sp_seg_off(cnt, h->B, l), sl = sp_seg_len(cnt, h->B, l);
  uint64_t po = so + sp_seg_off(sl, h->K, k), plen = sp_seg_len(sl, h->K, k);
  *off = po;
  *len = 0;
  if (x < 0 || (uint64_t)x * h->ce >= plen)
    return;
  *off = po + (uint64_t)x * h->ce;
  uint64_t rest = plen - (uint64_t)x * h->ce;
  *len = rest < h->ce ? rest : h->ce;
}

/* Sub-piece m of N of a chunk region (CollNet's reduction in the switch). */
static void sub(const hier *h, uint64_t off, uint64_t len, int32_t m, uint64_t *so, uint64_t *sl)
{
  *so = off + sp_seg_off(len, h->N, m);
  *sl = sp_seg_len(len, h->N, m);
}

/* Chain position of local member i in segment l's chain (0 = local l+1, B-1 = l). */
static int32_t chain_pos(const hier *h, int32_t l, int32_t i)
{
  return ((i - l - 1) % h->B + h->B) % h->B;
}

static int32_t chain_member(const hier *h, int32_t l, int32_t pos)
{
  return member_of(h, h->nu, (l + 1 + pos) % h->B);
}

/* ---- the direct phases by rail (cost only) ----
 * Without bytes to deliver, the direct exchanges inside the node go as one message per
 * member and phase, by rail as the all-to-all's (lower_direct.c): member j sends to
 * j + 1 mod B, in one message, the bytes it would send to its B - 1 peers, and gets
 * from j - 1 mod B. Every NVLink port carries, each way, the bytes of the B - 1 pairwise
 * messages (up to a chunk's rounding between segments), in 1 message instead of B - 1. */

/* Elements of chunk x of part k over every segment. */
static uint64_t all_elems(const hier *h, int32_t k, int64_t x)
{
  uint64_t off, len, sum = 0;
  for (int32_t l = 0; l < h->B; l++) {
    region(h, l, k, x, &off, &len);
    sum += len;
  }
  return sum;
}

/* Bytes of chunk x of part k over the segments other than @skip, of @all elements. */
static uint64_t others_bytes(const hier *h, uint64_t all, int32_t skip, int32_t k, int64_t x)
{
  uint64_t off, len;
  region(h, skip, k, x, &off, &len);
  return (all - len) * h->c->es;
}

static void intra_by_rail(hier *h, uint32_t ph, uint64_t sent, uint32_t sbuf, uint64_t got,
                          uint32_t rbuf, uint64_t roff)
{
  sp_lctx *c = h->c;
  sp_l_send(c, member_of(h, h->nu, (h->j + 1) % h->B), ph, sbuf, 0, sent);
  sp_l_recv(c, member_of(h, h->nu, (h->j + h->B - 1) % h->B), ph, rbuf, roff, got);
}

/* ---- phase 1: inside the node, to local member l ---- */

static void intra_reduce_posts(hier *h, int64_t t, uint32_t ph)
{
  sp_lctx *c = h->c;
  size_t es = c->es;
  uint64_t off, len;
  if (h->B == 1)
    return;
  for (int32_t k = 0; k < h->K; k++) {
    if (h->rail) {
      uint64_t all = all_elems(h, k, t);
      intra_by_rail(h, ph, others_bytes(h, all, h->j, k, t), c->in,
                    others_bytes(h, all, (h->j + h->B - 1) % h->B, k, t), h->islot,
                    (uint64_t)(k * h->B) * h->cb);
      continue;
    }
    if (!h->chain) {
      for (int32_t l = 0; l < h->B; l++) {
        if (l == h->j)
          continue;
        region(h, l, k, t, &off, &len);
        sp_l_send(c, member_of(h, h->nu, l), ph, c->in, off * es, len * es);
      }
      region(h, h->j, k, t, &off, &len);
      for (int32_t i = 0; i < h->B; i++)
        if (i != h->j)
          sp_l_recv(c, member_of(h, h->nu, i), ph, h->islot, (uint64_t)(k * h->B + i) * h->cb,
                    len * es);
      continue;
    }
    for (int32_t l = 0; l < h->B; l++) {
      int32_t p = chain_pos(h, l, h->j);
      if (p < h->B - 1) { /* my partial of chunk t - p to the next position */
        region(h, l, k, t - p, &off, &len);
        sp_l_send(c, chain_member(h, l, p + 1), ph, p == 0 ? c->in : c->out, off * es, len * es);
      }
      if (p > 0) { /* the previous position's partial of chunk t - (p - 1) */
        region(h, l, k, t - (p - 1), &off, &len);
        sp_l_recv(c, chain_member(h, l, p - 1), ph, c->out, off * es, len * es);
      }
    }
  }
}

/* After the WAIT of step t: the partials; TRUE in *done for the chunk of my segment
 * completed at this step (its index in *xd). */
static void intra_reduce_local(hier *h, int64_t t, uint32_t ph, int64_t *xd)
{
  sp_lctx *c = h->c;
  size_t es = c->es;
  uint64_t off, len;
  *xd = -1;
  if (h->B == 1)
    return;
  for (int32_t k = 0; k < h->K; k++) {
    if (!h->chain) {
      region(h, h->j, k, t, &off, &len);
      if (len == 0)
        continue;
      for (int32_t i = 0; i < h->B; i++) {
        uint32_t b = i == h->j ? c->in : h->islot;
        uint64_t o = i == h->j ? off * es : (uint64_t)(k * h->B + i) * h->cb;
        if (i == 0)
          sp_l_copy(c, ph, c->out, off * es, b, o, len * es);
        else
          sp_l_reduce(c, ph, c->out, off * es, b, o, len);
      }
      *xd = t;
      continue;
    }
    for (int32_t l = 0; l < h->B; l++) {
      int32_t p = chain_pos(h, l, h->j);
      if (p == 0)
        continue;
      region(h, l, k, t - (p - 1), &off, &len);
      sp_l_reduce(c, ph, c->out, off * es, c->in, off * es, len);
      if (l == h->j && len > 0)
        *xd = t - (p - 1);
    }
  }
}

/* ---- phase 3: the total of segment l from local member l to the node ---- */

static void intra_expand_posts(hier *h, int64_t t, uint32_t ph)
{
  sp_lctx *c = h->c;
  size_t es = c->es;
  uint64_t off, len;
  int64_t x0 = t - h->R - h->D;
  if (h->B == 1)
    return;
  for (int32_t k = 0; k < h->K; k++) {
    if (h->rail) {
      uint64_t mine, prev;
      region(h, h->j, k, x0, &off, &mine);
      region(h, (h->j + h->B - 1) % h->B, k, x0, &off, &prev);
      intra_by_rail(h, ph, (uint64_t)(h->B - 1) * mine * es, c->out,
                    (uint64_t)(h->B - 1) * prev * es, c->out, 0);
      continue;
    }
    if (!h->chain) {
      region(h, h->j, k, x0, &off, &len);
      for (int32_t i = 0; i < h->B; i++)
        if (i != h->j)
          sp_l_send(c, member_of(h, h->nu, i), ph, c->out, off * es, len * es);
      for (int32_t l = 0; l < h->B; l++) {
        if (l == h->j)
          continue;
        region(h, l, k, x0, &off, &len);
        sp_l_recv(c, member_of(h, h->nu, l), ph, c->out, off * es, len * es);
      }
      continue;
    }
    /* down the chain: hop g from position B-1-g to B-2-g at step x + R + D + g */
    for (int32_t l = 0; l < h->B; l++) {
      int32_t p = chain_pos(h, l, h->j);
      if (p > 0) {
        region(h, l, k, x0 - (h->B - 1 - p), &off, &len);
        sp_l_send(c, chain_member(h, l, p - 1), ph, c->out, off * es, len * es);
      }
      if (p < h->B - 1) {
        region(h, l, k, x0 - (h->B - 2 - p), &off, &len);
        sp_l_recv(c, chain_member(h, l, p + 1), ph, c->out, off * es, len * es);
      }
    }
  }
}

/* ---- phase 2: across nodes, on my segment ---- */

static void inter_posts(hier *h, int64_t t, uint32_t ph)
{
  sp_lctx *c = h->c;
  size_t es = c->es;
  uint64_t off, len, so, sl;
  if (h->N == 1)
    return;
  int64_t s = t - h->R; /* step relative to the phase's start of chunk 0 */
  if (h->tree) {
    for (int32_t k = 0; k < h->K; k++) {
      const sp_dbtree_place *pl = &h->pl[k];
      int64_t d = pl->depth, H = h->H[k];
      region(h, h->j, k, s - (H - d - 1), &off, &len); /* up: children's sums */
      for (int q = 0; q < 3; q++)
        if (pl->child[q] >= 0)
          sp_l_recv(c, member_of(h, pl->child[q], h->j), ph, h->tslot[k], (uint64_t)q * h->cb,
                    len * es);
      if (pl->parent >= 0) { /* up: my sum to the parent */
        region(h, h->j, k, s - (H - d), &off, &len);
        sp_l_send(c, member_of(h, pl->parent, h->j), ph, c->out, off * es, len * es);
        region(h, h->j, k, s - (H + d - 1), &off, &len); /* down: the total */
        sp_l_recv(c, member_of(h, pl->parent, h->j), ph, c->out, off * es, len * es);
      }
      region(h, h->j, k, s - (H + d), &off, &len); /* down: to the children */
      for (int q = 0; q < 3; q++)
        if (pl->child[q] >= 0)
          sp_l_send(c, member_of(h, pl->child[q], h->j), ph, c->out, off * es, len * es);
    }
    return;
  }
  /* CollNet: step 0 every node's sub-piece m to member m, step 1 the totals back */
  region(h, h->j, 0, s, &off, &len);
  for (int32_t m = 0; m < h->N; m++) {
    if (m == h->nu)
      continue;
    sub(h, off, len, m, &so, &sl);
    sp_l_send(c, member_of(h, m, h->j), ph, c->out, so * es, sl * es);
  }
  sub(h, off, len, h->nu, &so, &sl);
  for (int32_t m = 0; m < h->N; m++)
    if (m != h->nu)
      sp_l_recv(c, member_of(h, m, h->j), ph, h->nslot, (uint64_t)m * h->sb, sl * es);
  region(h, h->j, 0, s - 1, &off, &len);
  sub(h, off, len, h->nu, &so, &sl);
  for (int32_t m = 0; m < h->N; m++)
    if (m != h->nu)
      sp_l_send(c, member_of(h, m, h->j), ph, c->out, so * es, sl * es);
  for (int32_t m = 0; m < h->N; m++) {
    if (m == h->nu)
      continue;
    sub(h, off, len, m, &so, &sl);
    sp_l_recv(c, member_of(h, m, h->j), ph, c->out, so * es, sl * es);
  }
}

static void inter_local(hier *h, int64_t t, uint32_t ph)
{
  sp_lctx *c = h->c;
  size_t es = c->es;
  uint64_t off, len, so, sl;
  if (h->N == 1)
    return;
  int64_t s = t - h->R;
  if (h->tree) {
    for (int32_t k = 0; k < h->K; k++) {
      const sp_dbtree_place *pl = &h->pl[k];
      region(h, h->j, k, s - (h->H[k] - pl->depth - 1), &off, &len);
      gboolean any = FALSE;
      for (int q = 0; q < 3; q++)
        if (pl->child[q] >= 0) {
          sp_l_reduce(c, ph, c->out, off * es, h->tslot[k], (uint64_t)q * h->cb, len);
          any = TRUE;
        }
      if (any && pl->parent < 0)
        sp_l_avg(c, ph, c->out, off * es, len);
    }
    return;
  }
  /* my sub-piece: every node's partial in node order, through the last slot */
  region(h, h->j, 0, s, &off, &len);
  sub(h, off, len, h->nu, &so, &sl);
  if (sl == 0)
    return;
  uint64_t acc = (uint64_t)h->N * h->sb;
  for (int32_t m = 0; m < h->N; m++) {
    uint32_t b = m == h->nu ? c->out : h->nslot;
    uint64_t o = m == h->nu ? so * es : (uint64_t)m * h->sb;
    if (m == 0)
      sp_l_copy(c, ph, h->nslot, acc, b, o, sl * es);
    else
      sp_l_reduce(c, ph, h->nslot, acc, b, o, sl);
  }
  sp_l_copy(c, ph, c->out, so * es, h->nslot, acc, sl * es);
  sp_l_avg(c, ph, c->out, so * es, sl);
}

gboolean sp_lower_hier(sp_lctx *c, GError **err)
{
  (void)err;
  const sp_coll_spec *sp = c->spec;
  uint64_t cnt = sp->count;
  size_t es = c->es;
  if (cnt == 0)
    return TRUE;
  hier h = { .c = c, .chain = sp->algo == SP_ALGO_COLLNET_CHAIN, .tree = sp->algo == SP_ALGO_NVLS_TREE };
  h.B = sp_dbtree_block(c->n, sp->channel_block);
  h.N = c->n / h.B;
  h.nu = c->me / h.B;
  h.j = c->me % h.B;
  h.rail = !h.chain && !sp_l_local(c);
  h.K = h.tree && h.N > 1 ? sp_dbtree_instances(h.N, 1) : 1;
  h.R = h.B == 1 ? 0 : h.chain ? h.B - 1 : 1;
  h.E = h.R;
  h.D = 0;
  if (h.N > 1 && h.tree) {
    for (int32_t k = 0; k < h.K; k++) {
      sp_dbtree_place_of(h.N, 1, k, h.nu, &h.pl[k]);
      h.H[k] = sp_dbtree_depth_max(h.N, 1, k);
      h.D = MAX(h.D, 2 * h.H[k]);
    }
  } else if (h.N > 1) {
    h.D = 2;
  }
  /* the chunk: given, else a part over 4 x the pipeline's steps within [min, ring's] */
  if (sp->chunk_bytes) {
    h.ce = sp_l_chunk_elems(sp);
  } else {
    uint64_t part = (cnt / (uint64_t)h.B / (uint64_t)h.K) * es;
    uint64_t cb = part / (4u * (uint64_t)(h.R + h.D + h.E + 1));
    cb = CLAMP(cb, HIER_CHUNK_MIN, SP_RING_DEFAULT_CHUNK_BYTES);
    h.ce = MAX(cb / es, 1);
  }
  uint64_t plen_max = sp_seg_len(sp_seg_len(cnt, h.B, 0), h.K, 0);
  if (!sp->chunk_bytes && !h.tree && h.N > 1 && plen_max > 0) {
    uint64_t xmax = MAX(1, HIER_COLLNET_POSTS / (uint64_t)(h.N + h.B));
    if (h.B == 1)
      xmax = 1;
    if ((plen_max + h.ce - 1) / h.ce > xmax)
      h.ce = (plen_max + xmax - 1) / xmax;
  }
  int64_t X = (int64_t)((plen_max + h.ce - 1) / h.ce);
  uint64_t ce_used = MIN(h.ce, plen_max);
  h.cb = ce_used * es;
  h.sb = (ce_used + (uint64_t)h.N - 1) / (uint64_t)h.N * es;
  if (!h.chain && h.B > 1)
    h.islot = sp_l_scratch(c, (uint64_t)h.K * (uint64_t)h.B * h.cb, "intra");
  if (!h.tree && h.N > 1)
    h.nslot = sp_l_scratch(c, (uint64_t)(h.N + 1) * h.sb, "switch");
  for (int32_t k = 0; h.tree && h.N > 1 && k < h.K; k++)
    h.tslot[k] = sp_l_scratch(c, 3 * h.cb, "tree");
  if (h.B == 1) /* my node partial is my input */
    sp_l_copy(c, 0, c->out, 0, c->in, 0, cnt * es);
  int64_t T = X + h.R + h.D + h.E;
  /* chunk x enters phase 1 at step x: a lock-step pipeline of X chunks, priced as one
   * (flow.h) where its steady state is at least as long as its fill and drain. Only the
   * tree's: its hops across nodes pace the fill; CollNet Chain's are the chain's inside
   * the node, and one group with the network's hops put it 18 % over STEP (1 GiB on 2
   * DGX nodes: 5,214.82 us against 4,418.29). */
  c->pipelined = h.tree && X >= (int64_t)h.R + h.D + h.E;
  c->pipe_chunks = (uint64_t)X;
  for (int64_t t = 0; t < T; t++) {
    uint32_t ph = (uint32_t)t;
    intra_reduce_posts(&h, t, ph);
    c->pipe_pace = TRUE; /* the network's hops pace the fill and drain */
    inter_posts(&h, t, ph);
    c->pipe_pace = FALSE;
    intra_expand_posts(&h, t, ph);
    sp_l_wait(c, ph);
    if (!sp_l_local(c)) /* the reductions and copies below: local steps only */
      continue;
    int64_t xd;
    intra_reduce_local(&h, t, ph, &xd);
    if (h.N == 1 && xd >= 0) /* one node: the partial is the total */
      for (int32_t k = 0; k < h.K; k++) {
        uint64_t off, len;
        region(&h, h.j, k, xd, &off, &len);
        sp_l_avg(c, ph, c->out, off * es, len);
      }
    inter_local(&h, t, ph);
  }
  return TRUE;
}
