/* FLOW fidelity program transform (see flow.h). */
#include "config.h"

#include <string.h>

#include "flow.h"
#include "sim.h"
#include "spsim/error.h"

typedef struct {
  int32_t peer;
  int32_t tag;
  uint32_t mult; /* messages of the block coalesced into this entry (>= 1) */
  uint32_t msgs; /* messages of this entry added to its group (read through ent_msgs) */
  gboolean pace; /* a pipeline's post that paces its fill and drain (SP_STEP_PIPE_PACE) */
  uint8_t dir;   /* 0 send, 1 recv */
} fent;

typedef struct {
  uint32_t start, nblocks; /* block range */
  uint32_t ent0, nent;     /* into rank ents / bytes */
  gboolean mergeable;      /* each peer at most once per direction */
  double local_s;          /* local-step seconds after its blocks */
  uint32_t op, phase;      /* of the first block */
  gboolean uniform;        /* every block posts the group's entries (else a pipeline's union) */
  gboolean pipelined;      /* its posts are SP_STEP_PIPELINED */
  uint64_t chunks;         /* ... of a pipeline of this many chunks */
} fgroup;

/* Messages of entry @p e of group @p g. A uniform group's halves after a split share
 * its entries, so theirs follow from the blocks; a pipeline's union, which is never
 * split (a cut inside it is unaligned), keeps its count. */
static uint32_t ent_msgs(const fgroup *g, const fent *e)
{
  return g->uniform ? g->nblocks * e->mult : e->msgs;
}

typedef struct {
  GArray *groups;   /* fgroup */
  GArray *ents;     /* fent */
  GArray *bytes;    /* uint64_t, parallel to ents (valid unless dirty) */
  double prelude_s; /* local steps before the first block */
  uint32_t nblocks;
  gboolean added;
  gboolean dirty;   /* groups split by reconcile: bytes/local need a refine */
  GArray *forced;   /* uint32_t sorted block indices that must start a group (refine) */
} frank;

struct sp_flow_plan {
  int32_t world;
  sp_flow_cost_fn cost;
  void *cost_ud;
  frank *ranks;
  gboolean coalesce;  /* merge a block's posts to one (dir, peer) into one entry */
  gboolean unaligned; /* reconcile failed on a cut inside a coalesced entry */
};

sp_flow_plan *sp_flow_plan_new(int32_t world, sp_flow_cost_fn cost, void *cost_ud)
{
  g_return_val_if_fail(world > 0, NULL);
  sp_flow_plan *fp = g_new0(sp_flow_plan, 1);
  fp->world = world;
  fp->cost = cost;
  fp->cost_ud = cost_ud;
  fp->ranks = g_new0(frank, world);
  fp->coalesce = TRUE;
  return fp;
}

void sp_flow_plan_set_coalesce(sp_flow_plan *fp, gboolean on)
{
  fp->coalesce = on;
}

gboolean sp_flow_plan_unaligned(const sp_flow_plan *fp)
{
  return fp->unaligned;
}

static void frank_clear(frank *r)
{
  if (r->groups) g_array_unref(r->groups);
  if (r->ents) g_array_unref(r->ents);
  if (r->bytes) g_array_unref(r->bytes);
  if (r->forced) g_array_unref(r->forced);
  r->groups = r->ents = r->bytes = r->forced = NULL;
}

void sp_flow_plan_free(sp_flow_plan *fp)
{
  if (fp == NULL)
    return;
  for (int32_t i = 0; i < fp->world; i++)
    frank_clear(&fp->ranks[i]);
  g_free(fp->ranks);
  g_free(fp);
}

/* The block being read: its posts in order. */
typedef struct {
  fent *ents;      /* len posts (capacity cap) */
  uint64_t *bytes; /* parallel to ents */
  guint len, cap;
  uint32_t op, phase;
  gboolean pipelined; /* every post is SP_STEP_PIPELINED */
  uint64_t chunks;    /* their pipeline's chunks (largest count) */
  /* the previous block as posted (before coalescing) and, per post, its entry in
   * the rank's last group: a block posting the same sequence merges directly */
  GArray *prev;  /* fent */
  GArray *map;   /* guint: post index -> entry offset in the last group */
  gboolean prev_ok;
} cur_block;

static gboolean block_mergeable(const cur_block *b)
{
  /* each (dir, peer) at most once; blocks are small except all-to-all, so hash when large */
  guint n = b->len;
  if (n <= 16) {
    for (guint i = 0; i < n; i++)
      for (guint j = i + 1; j < n; j++) {
        const fent *a = &b->ents[i], *c = &b->ents[j];
        if (a->dir == c->dir && a->peer == c->peer)
          return FALSE;
      }
    return TRUE;
  }
  GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  gboolean ok = TRUE;
  for (guint i = 0; i < n && ok; i++) {
    const fent *a = &b->ents[i];
    gpointer key = GINT_TO_POINTER((a->peer << 1 | a->dir) + 1);
    if (g_hash_table_contains(seen, key))
      ok = FALSE;
    else
      g_hash_table_add(seen, key);
  }
  g_hash_table_unref(seen);
  return ok;
}

/* Does block @b post to the same (dir, peer, mult) sequence as group @g? */
static gboolean same_signature(const frank *r, const fgroup *g, const cur_block *b)
{
  if (g->nent != b->len)
    return FALSE;
  for (guint i = 0; i < g->nent; i++) {
    const fent *a = &g_array_index(r->ents, fent, g->ent0 + i);
    const fent *c = &b->ents[i];
    if (a->dir != c->dir || a->peer != c->peer || a->mult != c->mult)
      return FALSE;
  }
  return TRUE;
}

/* Merge the posts of @b to one (dir, peer) into its first entry (bytes summed,
 * mult counted), keeping first-appearance order. Concurrent messages on one
 * route finish together as one message of their summed size would. */
static void coalesce_block(cur_block *b)
{
  guint w = 0;
  guint *M = (guint *)(void *)b->map->data; /* sized by the caller */
  if (b->len <= 64) {
    /* small blocks (a ring's channels): quadratic, no allocation */
    fent *E = b->ents;
    uint64_t *Y = b->bytes;
    for (guint i = 0; i < b->len; i++) {
      guint j = 0;
      while (j < w && (E[j].peer != E[i].peer || E[j].dir != E[i].dir))
        j++;
      M[i] = j;
      if (j < w) {
        E[j].mult += E[i].mult;
        Y[j] += Y[i];
      } else {
        E[w] = E[i];
        Y[w] = Y[i];
        w++;
      }
    }
    b->len = w;
    return;
  }
  GHashTable *idx = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < b->len; i++) {
    fent e = b->ents[i];
    uint64_t by = b->bytes[i];
    gpointer key = GSIZE_TO_POINTER((gsize)(((guint64)(uint32_t)e.peer << 1) | e.dir) + 1);
    gpointer v = g_hash_table_lookup(idx, key);
    if (v) {
      guint j = GPOINTER_TO_UINT(v) - 1;
      M[i] = j;
      b->ents[j].mult += e.mult;
      b->bytes[j] += by;
    } else {
      M[i] = w;
      b->ents[w] = e;
      b->bytes[w] = by;
      g_hash_table_insert(idx, key, GUINT_TO_POINTER(w + 1));
      w++;
    }
  }
  b->len = w;
  g_hash_table_unref(idx);
}

/* Close block @b (index r->nblocks) into the rank's groups. Groups never span
 * two ops, so every op keeps its first block (the engine charges a collective's
 * launch latency there). */
static void close_block(frank *r, cur_block *b, gboolean force_start, gboolean coalesce)
{
  fgroup *last = r->groups->len ? &g_array_index(r->groups, fgroup, r->groups->len - 1) : NULL;
  guint np = b->len;
  if (!force_start && b->prev_ok && last != NULL && last->op == b->op && b->prev->len == np) {
    /* fast path: the same posts as the previous block, which went into last */
    const fent *E = b->ents, *P = (const fent *)(void *)b->prev->data;
    guint i = 0;
    while (i < np && E[i].peer == P[i].peer && E[i].dir == P[i].dir)
      i++;
    if (i == np) {
      const guint *M = (const guint *)(void *)b->map->data;
      const uint64_t *Y = b->bytes;
      uint64_t *R = &g_array_index(r->bytes, uint64_t, last->ent0);
      fent *Ee = &g_array_index(r->ents, fent, last->ent0);
      for (i = 0; i < np; i++) {
        R[M[i]] += Y[i];
        Ee[M[i]].msgs++;
      }
      last->nblocks++;
      r->nblocks++;
      b->len = 0;
      return;
    }
  }
  g_array_set_size(b->prev, 0);
  g_array_append_vals(b->prev, b->ents, np);
  g_array_set_size(b->map, np);
  gboolean mergeable = block_mergeable(b);
  if (!mergeable && coalesce) {
    coalesce_block(b);
    mergeable = TRUE;
  } else {
    for (guint i = 0; i < np; i++)
      g_array_index(b->map, guint, i) = i;
  }
  b->prev_ok = mergeable;
  gboolean merge = !force_start && last != NULL && last->mergeable && last->op == b->op &&
                   same_signature(r, last, b) && mergeable;
  if (merge) {
    for (guint i = 0; i < b->len; i++) {
      g_array_index(r->bytes, uint64_t, last->ent0 + i) += b->bytes[i];
      g_array_index(r->ents, fent, last->ent0 + i).msgs += b->ents[i].mult;
    }
    last->nblocks++;
  } else if (!force_start && last != NULL && last->pipelined && b->pipelined && last->mergeable &&
             mergeable && last->op == b->op && last->ent0 + last->nent == r->ents->len) {
    /* a pipeline's blocks (warm-up, steady state, drain) post to subsets of its links:
     * their union, each link once with all its messages, is one group; the map then
     * sends each post to its link, so a next block posting alike takes the fast path */
    guint jbuf[64], *J = b->len <= G_N_ELEMENTS(jbuf) ? jbuf : g_new(guint, b->len);
    for (guint i = 0; i < b->len; i++) {
      guint j = 0;
      while (j < last->nent) {
        fent *e = &g_array_index(r->ents, fent, last->ent0 + j);
        if (e->peer == b->ents[i].peer && e->dir == b->ents[i].dir) break;
        j++;
      }
      if (j < last->nent) {
        g_array_index(r->bytes, uint64_t, last->ent0 + j) += b->bytes[i];
        g_array_index(r->ents, fent, last->ent0 + j).msgs += b->ents[i].mult;
      } else {
        fent e = b->ents[i];
        e.msgs = e.mult;
        g_array_append_val(r->ents, e);
        g_array_append_val(r->bytes, b->bytes[i]);
        last->nent++;
      }
      J[i] = j;
    }
    guint *M = (guint *)(void *)b->map->data;
    for (guint i = 0; i < np; i++)
      M[i] = J[M[i]];
    if (J != jbuf)
      g_free(J);
    last->uniform = FALSE;
    last->chunks = MAX(last->chunks, b->chunks);
    last->nblocks++;
  } else {
    fgroup g = { .start = r->nblocks, .nblocks = 1, .ent0 = r->ents->len, .nent = b->len,
                 .mergeable = mergeable, .local_s = 0.0, .op = b->op, .phase = b->phase, .uniform = TRUE,
                 .pipelined = b->pipelined, .chunks = b->chunks };
    for (guint i = 0; i < b->len; i++)
      b->ents[i].msgs = b->ents[i].mult;
    g_array_append_vals(r->ents, b->ents, b->len);
    g_array_append_vals(r->bytes, b->bytes, b->len);
    g_array_append_val(r->groups, g);
  }
  r->nblocks++;
  b->len = 0;
}

/* A rank being summarised: its steps are fed in program order (sp_flow_sum_feed). */
struct sp_flow_sum {
  const sp_flow_plan *fp;
  frank *r;
  int32_t rank;
  cur_block b;           /* the block being read */
  GArray *forced;        /* sorted block indices that must start a group, or NULL */
  guint fi;              /* first entry of forced not below r->nblocks */
  gboolean refine;       /* sp_flow_plan_refine: check forced against the result */
};

/* Start summarising into @p r; @p forced (sorted block indices, may be NULL) must
 * start groups and is owned by the caller until sum_end. */
static sp_flow_sum *sum_begin(const sp_flow_plan *fp, frank *r, int32_t rank, GArray *forced)
{
  r->groups = g_array_new(FALSE, FALSE, sizeof(fgroup));
  r->ents = g_array_new(FALSE, FALSE, sizeof(fent));
  r->bytes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  r->nblocks = 0;
  r->prelude_s = 0.0;
  sp_flow_sum *su = g_new0(sp_flow_sum, 1);
  su->fp = fp;
  su->r = r;
  su->rank = rank;
  su->forced = forced;
  su->b = (cur_block){ .ents = g_new(fent, 16), .bytes = g_new(uint64_t, 16), .cap = 16,
                       .prev = g_array_new(FALSE, FALSE, sizeof(fent)),
                       .map = g_array_new(FALSE, FALSE, sizeof(guint)) };
  return su;
}

void sp_flow_sum_feed(sp_flow_sum *su, const sp_step *steps, guint n)
{
  const sp_flow_plan *fp = su->fp;
  frank *r = su->r;
  cur_block *b = &su->b;
  const GArray *forced = su->forced;
  for (guint i = 0; i < n; i++) {
    const sp_step *s = &steps[i];
    switch (s->kind) {
    case SP_STEP_SEND:
    case SP_STEP_RECV: {
      if (b->len == 0) {
        b->op = s->op;
        b->phase = s->phase;
        b->pipelined = TRUE;
        b->chunks = 0;
      }
      b->pipelined = b->pipelined && (s->flags & SP_STEP_PIPELINED);
      if (s->flags & SP_STEP_PIPELINED)
        b->chunks = MAX(b->chunks, s->count);
      if (b->len == b->cap) {
        b->cap *= 2;
        b->ents = g_renew(fent, b->ents, b->cap);
        b->bytes = g_renew(uint64_t, b->bytes, b->cap);
      }
      b->ents[b->len] = (fent){ .peer = s->peer, .tag = s->tag, .mult = 1, .dir = s->kind == SP_STEP_RECV,
                                .pace = (s->flags & SP_STEP_PIPE_PACE) != 0 };
      b->bytes[b->len] = s->bytes;
      b->len++;
      break;
    }
    case SP_STEP_WAIT:
      if (b->len > 0) {
        gboolean force = FALSE;
        while (forced && su->fi < forced->len && g_array_index(forced, uint32_t, su->fi) < r->nblocks)
          su->fi++;
        if (forced && su->fi < forced->len && g_array_index(forced, uint32_t, su->fi) == r->nblocks)
          force = TRUE;
        close_block(r, b, force, fp->coalesce);
      }
      break;
    default: {
      double c = fp->cost ? fp->cost(fp->cost_ud, su->rank, s) : 0.0;
      if (r->groups->len == 0)
        r->prelude_s += c;
      else
        g_array_index(r->groups, fgroup, r->groups->len - 1).local_s += c;
      break;
    }
    }
  }
}

gboolean sp_flow_sum_feed_repeat(sp_flow_sum *su, const sp_step *posts, guint n, uint64_t nblocks,
                                 const uint64_t *totals)
{
  cur_block *b = &su->b;
  if (n == 0 || nblocks == 0 || nblocks > G_MAXUINT32 - su->r->nblocks || b->len != 0 || su->forced != NULL)
    return FALSE;
  /* a block that is not mergeable and is not coalesced starts a group each time */
  if (!su->fp->coalesce) {
    cur_block t = { .ents = g_new(fent, n), .len = n };
    for (guint i = 0; i < n; i++)
      t.ents[i] = (fent){ .peer = posts[i].peer, .dir = posts[i].kind == SP_STEP_RECV };
    gboolean m = block_mergeable(&t);
    g_free(t.ents);
    if (!m)
      return FALSE;
  }
  for (guint i = 0; i < n; i++)
    if ((posts[i].kind != SP_STEP_SEND && posts[i].kind != SP_STEP_RECV) || totals[i] < posts[i].bytes)
      return FALSE;
  /* the first block as fed, then the others through close_block's fast path
   * (same posts as the previous block): their bytes add up in the group */
  sp_step w = { .kind = SP_STEP_WAIT, .op = posts[0].op, .phase = posts[0].phase };
  sp_flow_sum_feed(su, posts, n);
  sp_flow_sum_feed(su, &w, 1);
  if (nblocks > 1) {
    frank *r = su->r;
    fgroup *last = &g_array_index(r->groups, fgroup, r->groups->len - 1);
    const guint *M = (const guint *)(void *)b->map->data;
    uint64_t *R = &g_array_index(r->bytes, uint64_t, last->ent0);
    fent *Ee = &g_array_index(r->ents, fent, last->ent0);
    for (guint i = 0; i < n; i++) {
      R[M[i]] += totals[i] - posts[i].bytes;
      Ee[M[i]].msgs += (uint32_t)(nblocks - 1);
    }
    last->nblocks += (uint32_t)(nblocks - 1);
    r->nblocks += (uint32_t)(nblocks - 1);
  }
  return TRUE;
}

/* Finish a summary (posts without a final WAIT complete at the end) and free it. */
static void sum_end(sp_flow_sum *su)
{
  cur_block *b = &su->b;
  if (b->len > 0)
    close_block(su->r, b, FALSE, su->fp->coalesce);
  g_free(b->ents);
  g_free(b->bytes);
  g_array_unref(b->prev);
  g_array_unref(b->map);
  g_free(su);
}

sp_flow_sum *sp_flow_plan_begin(sp_flow_plan *fp, int32_t rank, gboolean refine, GError **err)
{
  if (rank < 0 || rank >= fp->world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: program rank %d outside the world of %d",
                rank, fp->world);
    return NULL;
  }
  frank *r = &fp->ranks[rank];
  if (!refine) {
    if (r->added) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: rank %d added twice", rank);
      return NULL;
    }
    r->added = TRUE;
    return sum_begin(fp, r, rank, NULL);
  }
  if (!r->dirty) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: rank %d needs no refine", rank);
    return NULL;
  }
  /* summarise again from scratch along the reconciled group starts */
  GArray *forced = r->forced;
  r->forced = NULL;
  g_array_unref(r->groups);
  g_array_unref(r->ents);
  g_array_unref(r->bytes);
  sp_flow_sum *su = sum_begin(fp, r, rank, forced);
  su->refine = TRUE;
  return su;
}

gboolean sp_flow_sum_end(sp_flow_sum *su, GError **err)
{
  frank *r = su->r;
  int32_t rank = su->rank;
  GArray *forced = su->forced;
  gboolean refine = su->refine;
  sum_end(su);
  if (!refine)
    return TRUE;
  gboolean ok = TRUE;
  /* the forced starts must reproduce the reconciled groups exactly */
  if (r->groups->len != forced->len) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "flow: rank %d's program changed between the two passes", rank);
    ok = FALSE;
  }
  g_array_unref(forced);
  r->dirty = FALSE;
  return ok;
}

gboolean sp_flow_plan_add(sp_flow_plan *fp, const sp_program *p, GError **err)
{
  sp_flow_sum *su = sp_flow_plan_begin(fp, p->rank, FALSE, err);
  if (su == NULL)
    return FALSE;
  sp_flow_sum_feed(su, (const sp_step *)(void *)p->steps->data, sp_program_len(p));
  return sp_flow_sum_end(su, err);
}

/* ---- reconciliation ---------------------------------------------------- */

/* A cut of the message sequence src -> dst at message offset off, seen by the sender
 * (side 0) or the receiver (side 1); end records carry the totals. */
typedef struct {
  int32_t src, dst;
  uint32_t off;
  uint8_t end, side;
} cutrec;

static gint cutrec_cmp(gconstpointer pa, gconstpointer pb)
{
  const cutrec *a = pa, *b = pb;
  if (a->src != b->src) return a->src < b->src ? -1 : 1;
  if (a->dst != b->dst) return a->dst < b->dst ? -1 : 1;
  if (a->end != b->end) return a->end < b->end ? -1 : 1;
  if (a->off != b->off) return a->off < b->off ? -1 : 1;
  if (a->side != b->side) return a->side < b->side ? -1 : 1;
  return 0;
}

static guint64 dp_key(uint8_t dir, int32_t peer) { return ((guint64)(uint32_t)peer << 1) | dir; }

/* Running message offsets of one rank, per (dir, peer). */
typedef struct {
  GHashTable *off; /* dp_key -> offset + 1 (in a guint64 pointer-sized value) */
} offsets;

static uint32_t off_get(GHashTable *h, guint64 key)
{
  gpointer v = g_hash_table_lookup(h, GSIZE_TO_POINTER((gsize)key + 1));
  return v ? (uint32_t)(GPOINTER_TO_SIZE(v) - 1) : 0;
}

static void off_set(GHashTable *h, guint64 key, uint32_t v)
{
  g_hash_table_insert(h, GSIZE_TO_POINTER((gsize)key + 1), GSIZE_TO_POINTER((gsize)v + 1));
}

static void collect_cuts(const frank *r, int32_t rank, GArray *recs)
{
  GHashTable *h = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint gi = 0; gi < r->groups->len; gi++) {
    const fgroup *g = &g_array_index(r->groups, fgroup, gi);
    for (guint i = 0; i < g->nent; i++) {
      const fent *e = &g_array_index(r->ents, fent, g->ent0 + i);
      guint64 k = dp_key(e->dir, e->peer);
      uint32_t o = off_get(h, k);
      cutrec c = { .src = e->dir ? e->peer : rank, .dst = e->dir ? rank : e->peer, .off = o,
                   .end = 0, .side = e->dir };
      g_array_append_val(recs, c);
      off_set(h, k, o + ent_msgs(g, e));
    }
  }
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, h);
  while (g_hash_table_iter_next(&it, &k, &v)) {
    guint64 key = (guint64)GPOINTER_TO_SIZE(k) - 1;
    uint8_t dir = key & 1;
    int32_t peer = (int32_t)(key >> 1);
    cutrec c = { .src = dir ? peer : rank, .dst = dir ? rank : peer,
                 .off = (uint32_t)(GPOINTER_TO_SIZE(v) - 1), .end = 1, .side = dir };
    g_array_append_val(recs, c);
  }
  g_hash_table_unref(h);
}

/* A requested split: rank must cut its (dir, peer) message sequence at off. */
typedef struct {
  int32_t rank;
  uint8_t dir;
  int32_t peer;
  uint32_t off;
} splitreq;

static gint splitreq_cmp(gconstpointer pa, gconstpointer pb)
{
  const splitreq *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return 0;
}

static gint u32_cmp(gconstpointer pa, gconstpointer pb)
{
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  return a < b ? -1 : a > b;
}

/* Apply the split requests reqs[from, to) (all of one rank); @return TRUE if a group split.
 * A request that falls inside a coalesced entry cannot be met: *unaligned is set. */
static gboolean apply_splits(frank *r, const splitreq *reqs, guint n, gboolean *unaligned)
{
  GHashTable *want = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                           (GDestroyNotify)g_array_unref);
  for (guint i = 0; i < n; i++) {
    gpointer key = GSIZE_TO_POINTER((gsize)dp_key(reqs[i].dir, reqs[i].peer) + 1);
    GArray *a = g_hash_table_lookup(want, key);
    if (!a) {
      a = g_array_new(FALSE, FALSE, sizeof(uint32_t));
      g_hash_table_insert(want, key, a);
    }
    g_array_append_val(a, reqs[i].off);
  }
  GArray *cuts = g_array_new(FALSE, FALSE, sizeof(uint32_t)); /* block indices */
  GHashTable *h = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint gi = 0; gi < r->groups->len; gi++) {
    const fgroup *g = &g_array_index(r->groups, fgroup, gi);
    for (guint i = 0; i < g->nent; i++) {
      const fent *e = &g_array_index(r->ents, fent, g->ent0 + i);
      guint64 k = dp_key(e->dir, e->peer);
      uint32_t o = off_get(h, k);
      GArray *a = g_hash_table_lookup(want, GSIZE_TO_POINTER((gsize)k + 1));
      if (a)
        for (guint j = 0; j < a->len; j++) {
          uint32_t w = g_array_index(a, uint32_t, j);
          if (w > o && w < o + ent_msgs(g, e)) {
            if (!g->uniform || (w - o) % e->mult != 0) {
              *unaligned = TRUE;
              continue;
            }
            uint32_t blk = g->start + (w - o) / e->mult;
            g_array_append_val(cuts, blk);
          }
        }
      off_set(h, k, o + ent_msgs(g, e));
    }
  }
  g_hash_table_unref(h);
  g_hash_table_unref(want);
  if (cuts->len == 0) {
    g_array_unref(cuts);
    return FALSE;
  }
  g_array_sort(cuts, u32_cmp);
  /* rebuild the group list, splitting at the cut blocks (ents shared by both halves) */
  GArray *ng = g_array_new(FALSE, FALSE, sizeof(fgroup));
  guint ci = 0;
  for (guint gi = 0; gi < r->groups->len; gi++) {
    fgroup g = g_array_index(r->groups, fgroup, gi);
    uint32_t end = g.start + g.nblocks;
    while (ci < cuts->len && g_array_index(cuts, uint32_t, ci) <= g.start)
      ci++;
    while (ci < cuts->len && g_array_index(cuts, uint32_t, ci) < end) {
      uint32_t c = g_array_index(cuts, uint32_t, ci);
      fgroup head = g;
      head.nblocks = c - g.start;
      g_array_append_val(ng, head);
      g.start = c;
      g.nblocks = end - c;
      while (ci < cuts->len && g_array_index(cuts, uint32_t, ci) <= c)
        ci++;
    }
    g_array_append_val(ng, g);
  }
  g_array_unref(r->groups);
  r->groups = ng;
  g_array_unref(cuts);
  r->dirty = TRUE;
  return TRUE;
}

gboolean sp_flow_plan_reconcile(sp_flow_plan *fp, GError **err)
{
  for (int32_t i = 0; i < fp->world; i++)
    if (!fp->ranks[i].added) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: rank %d has no program", i);
      return FALSE;
    }
  for (;;) {
    GArray *recs = g_array_new(FALSE, FALSE, sizeof(cutrec));
    for (int32_t i = 0; i < fp->world; i++)
      collect_cuts(&fp->ranks[i], i, recs);
    g_array_sort(recs, cutrec_cmp);
    GArray *reqs = g_array_new(FALSE, FALSE, sizeof(splitreq));
    const cutrec *c = (const cutrec *)(void *)recs->data;
    guint n = recs->len;
    for (guint i = 0; i < n;) {
      /* records of one (src, dst, end, off): side 0 and/or side 1 */
      guint j = i + 1;
      while (j < n && c[j].src == c[i].src && c[j].dst == c[i].dst && c[j].end == c[i].end &&
             c[j].off == c[i].off)
        j++;
      gboolean has0 = FALSE, has1 = FALSE;
      for (guint k = i; k < j; k++) {
        if (c[k].side) has1 = TRUE; else has0 = TRUE;
      }
      if (c[i].end) {
        if (!(has0 && has1)) {
          /* totals differ (or one side has no messages at all) */
          uint32_t other = 0;
          gboolean found = FALSE;
          for (guint k = 0; k < n; k++)
            if (c[k].end && c[k].src == c[i].src && c[k].dst == c[i].dst && c[k].side != c[i].side) {
              other = c[k].off;
              found = TRUE;
            }
          uint32_t sends = c[i].side ? other : c[i].off, recvs = c[i].side ? c[i].off : other;
          (void)found;
          g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                      "the programs do not match: rank %d sends %u messages to rank %d, which "
                      "receives %u from it",
                      c[i].src, sends, c[i].dst, recvs);
          g_array_unref(recs);
          g_array_unref(reqs);
          return FALSE;
        }
      } else if (!(has0 && has1)) {
        splitreq q = { .rank = has0 ? c[i].dst : c[i].src, .dir = has0 ? 1 : 0,
                       .peer = has0 ? c[i].src : c[i].dst, .off = c[i].off };
        g_array_append_val(reqs, q);
      }
      i = j;
    }
    g_array_unref(recs);
    if (reqs->len == 0) {
      g_array_unref(reqs);
      break;
    }
    g_array_sort(reqs, splitreq_cmp);
    const splitreq *q = (const splitreq *)(void *)reqs->data;
    gboolean changed = FALSE;
    for (guint i = 0; i < reqs->len;) {
      guint j = i + 1;
      while (j < reqs->len && q[j].rank == q[i].rank)
        j++;
      if (apply_splits(&fp->ranks[q[i].rank], q + i, j - i, &fp->unaligned))
        changed = TRUE;
      i = j;
    }
    g_array_unref(reqs);
    if (!changed) {
      /* a cut falls inside a block on the other end: only inside coalesced entries
       * (sp_flow_plan_unaligned: retry without coalescing) */
      g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                  "flow fidelity cannot align the message boundaries of these programs; "
                  "use --fidelity step");
      return FALSE;
    }
  }
  /* ranks split: remember their group starts for the refine pass */
  for (int32_t i = 0; i < fp->world; i++) {
    frank *r = &fp->ranks[i];
    if (!r->dirty)
      continue;
    r->forced = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    for (guint gi = 0; gi < r->groups->len; gi++)
      g_array_append_val(r->forced, g_array_index(r->groups, fgroup, gi).start);
  }
  return TRUE;
}

gboolean sp_flow_plan_needs(const sp_flow_plan *fp, int32_t rank)
{
  return rank >= 0 && rank < fp->world && fp->ranks[rank].dirty;
}

gboolean sp_flow_plan_refine(sp_flow_plan *fp, const sp_program *p, GError **err)
{
  if (p->rank < 0 || p->rank >= fp->world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: program rank %d outside the world", p->rank);
    return FALSE;
  }
  if (!fp->ranks[p->rank].dirty)
    return TRUE;
  sp_flow_sum *su = sp_flow_plan_begin(fp, p->rank, TRUE, err);
  if (su == NULL)
    return FALSE;
  sp_flow_sum_feed(su, (const sp_step *)(void *)p->steps->data, sp_program_len(p));
  return sp_flow_sum_end(su, err);
}

sp_program *sp_flow_plan_emit(const sp_flow_plan *fp, int32_t rank)
{
  g_return_val_if_fail(rank >= 0 && rank < fp->world, NULL);
  const frank *r = &fp->ranks[rank];
  g_return_val_if_fail(!r->dirty, NULL);
  sp_program *p = sp_program_new(rank);
  uint64_t maxb = 1;
  for (guint i = 0; r->bytes && i < r->bytes->len; i++)
    maxb = MAX(maxb, g_array_index(r->bytes, uint64_t, i));
  uint32_t buf = sp_program_add_buffer(p, maxb, "flow");
  if (r->prelude_s > 0.0) {
    sp_step m = { .kind = SP_STEP_COMPUTE, .tag = SP_SIM_FLOW_TAG, .peer = -1, .scale = r->prelude_s };
    sp_program_append(p, &m);
  }
  for (guint gi = 0; r->groups && gi < r->groups->len; gi++) {
    const fgroup *g = &g_array_index(r->groups, fgroup, gi);
    int32_t lat_peer = -1, pace_peer = -1;
    /* a pipeline's union: `chunks` of its blocks are the steps of the steady state, one
     * per chunk, while its links are all busy; the others are its fill and drain, each a
     * hop of one chunk over the link of its largest pacing message (SP_STEP_PIPE_PACE),
     * whose latency is also that of its merged steps */
    gboolean fill = !g->uniform && g->chunks > 0 && g->chunks < g->nblocks;
    uint64_t big = 0;
    for (guint i = 0; i < g->nent; i++) {
      const fent *e = &g_array_index(r->ents, fent, g->ent0 + i);
      sp_step s = { .kind = e->dir ? SP_STEP_RECV : SP_STEP_SEND, .op = g->op, .phase = g->phase,
                    .peer = e->peer, .tag = e->tag, .bytes = g_array_index(r->bytes, uint64_t, g->ent0 + i),
                    .rows = 1 };
      s.row_bytes = s.bytes;
      if (e->dir)
        s.dst = (sp_ref){ buf, 0 };
      else
        s.src = (sp_ref){ buf, 0 };
      sp_program_append(p, &s);
      if (lat_peer < 0 && !e->dir)
        lat_peer = e->peer;
      uint64_t each = fill && e->pace ? s.bytes / MAX(ent_msgs(g, e), 1u) : 0;
      if (each > big) {
        big = each;
        pace_peer = e->peer;
      }
    }
    fill = fill && pace_peer >= 0;
    if (fill)
      lat_peer = pace_peer;
    if (lat_peer < 0 && g->nent > 0)
      lat_peer = g_array_index(r->ents, fent, g->ent0).peer;
    sp_step w = { .kind = SP_STEP_WAIT, .op = g->op, .phase = g->phase };
    sp_program_append(p, &w);
    if (g->nblocks > 1 || g->local_s > 0.0) {
      sp_step m = { .kind = SP_STEP_COMPUTE, .op = g->op, .phase = g->phase, .tag = SP_SIM_FLOW_TAG,
                    .peer = lat_peer, .count = g->nblocks - 1, .scale = g->local_s };
      if (fill) {
        m.rows = g->nblocks - (uint32_t)g->chunks;
        m.row_bytes = big;
      }
      sp_program_append(p, &m);
    }
  }
  return p;
}

void sp_flow_plan_stats(const sp_flow_plan *fp, int32_t rank, uint32_t *blocks, uint32_t *groups)
{
  const frank *r = &fp->ranks[rank];
  if (blocks) *blocks = r->nblocks;
  if (groups) *groups = r->groups ? r->groups->len : 0;
}

static gboolean flow_transform_with(sp_flow_plan *fp, sp_program *const *progs, int32_t world,
                                    sp_program ***out, GError **err);

gboolean sp_flow_transform(sp_program *const *progs, int32_t world, sp_flow_cost_fn cost,
                           void *cost_ud, sp_program ***out, GError **err)
{
  if (world <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: world must be at least 1 (got %d)", world);
    return FALSE;
  }
  sp_flow_plan *fp = sp_flow_plan_new(world, cost, cost_ud);
  gboolean ok = flow_transform_with(fp, progs, world, out, err);
  if (!ok && sp_flow_plan_unaligned(fp)) {
    /* a peer splits messages that this rank posts in one block: do not coalesce */
    g_clear_error(err);
    sp_flow_plan_free(fp);
    fp = sp_flow_plan_new(world, cost, cost_ud);
    sp_flow_plan_set_coalesce(fp, FALSE);
    ok = flow_transform_with(fp, progs, world, out, err);
  }
  sp_flow_plan_free(fp);
  return ok;
}

static gboolean flow_transform_with(sp_flow_plan *fp, sp_program *const *progs, int32_t world,
                                    sp_program ***out, GError **err)
{
  gboolean ok = TRUE;
  for (int32_t r = 0; r < world && ok; r++) {
    if (progs[r] == NULL || progs[r]->rank != r) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "flow: program %d is missing or has rank %d", r,
                  progs[r] ? progs[r]->rank : -1);
      ok = FALSE;
    } else {
      ok = sp_flow_plan_add(fp, progs[r], err);
    }
  }
  ok = ok && sp_flow_plan_reconcile(fp, err);
  for (int32_t r = 0; r < world && ok; r++)
    if (sp_flow_plan_needs(fp, r))
      ok = sp_flow_plan_refine(fp, progs[r], err);
  if (ok && world > 0) {
    *out = g_new0(sp_program *, (gsize)world);
    for (int32_t r = 0; r < world; r++)
      (*out)[r] = sp_flow_plan_emit(fp, r);
  }
  return ok;
}
