/* Data mode of the step graph (see spsim/step_replay.h): the graph's communication
 * tasks as per-rank programs with real bytes and expected results. */
#include "config.h"

#include <string.h>

#include "spsim/coll.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/step_replay.h"
#include "spsim/verify.h"

/* One member of one call: its local rank and buffers, and where its expected output is. */
typedef struct {
  int32_t local;
  uint32_t in, out;
  uint64_t out_bytes;
  uint8_t *expected;
} member;

/* One call: the task it replays and its members. */
typedef struct {
  uint32_t task;
  const char *what;
  guint first, n; /* members[first .. first + n) */
} call;

struct sp_step_replay {
  int32_t n;            /* local ranks */
  int32_t *global;      /* local -> global, increasing */
  sp_program **progs;
  void ***bufs;
  GArray *calls;        /* of call */
  GArray *members;      /* of member */
  guint colls, sends;
};

int32_t sp_step_replay_nranks(const sp_step_replay *r) { return r->n; }
const int32_t *sp_step_replay_ranks(const sp_step_replay *r) { return r->global; }
sp_program *const *sp_step_replay_programs(const sp_step_replay *r) { return r->progs; }
void **const *sp_step_replay_bufs(const sp_step_replay *r) { return (void **const *)r->bufs; }

void sp_step_replay_counts(const sp_step_replay *r, guint *colls, guint *sends)
{
  *colls = r->colls;
  *sends = r->sends;
}

void sp_step_replay_free(sp_step_replay *r)
{
  if (r == NULL) return;
  for (int32_t i = 0; i < r->n; i++) {
    if (r->bufs != NULL && r->bufs[i] != NULL) {
      for (guint b = 0; b < r->progs[i]->bufs->len; b++) g_free(r->bufs[i][b]);
      g_free(r->bufs[i]);
    }
    if (r->progs != NULL) sp_program_free(r->progs[i]);
  }
  if (r->members != NULL)
    for (guint i = 0; i < r->members->len; i++) g_free(g_array_index(r->members, member, i).expected);
  g_free(r->bufs);
  g_free(r->progs);
  g_free(r->global);
  if (r->calls) g_array_free(r->calls, TRUE);
  if (r->members) g_array_free(r->members, TRUE);
  g_free(r);
}

gboolean sp_step_replay_reduce(const sp_step_ctx *c, const sp_layout *l, sp_model *m, sp_step_ctx *rc,
                               sp_layout *rl, GError **err)
{
  *m = *c->model;
  int32_t v = sp_layout_vpp(l);
  if (l->pp_first <= 0 && l->pp_last <= 0) m->layers = (int64_t)l->pp * v;
  *rc = *c;
  rc->model = m;
  /* one group of the interleaved schedule (pp micro-batches, or vppgroup's) */
  rc->global_batch = (int64_t)l->dp * l->mb * (l->pp > 1 ? sp_layout_vpp_group(l) : 2);
  *rl = *l;
  sp_layout_ctx lc = { .model = m, .world = c->world, .gpus_per_node = c->gpus_per_node, .seq = c->seq,
                       .global_batch = rc->global_batch, .mb = l->mb };
  if (sp_layout_check(rl, &lc, err) != SP_SKIP_NONE) {
    g_prefix_error(err, "the step reduced to %" G_GINT64_FORMAT " layers and %" G_GINT64_FORMAT " sequences: ",
                   m->layers, rc->global_batch);
    return FALSE;
  }
  return TRUE;
}

/* Global ranks of task @p t's call, in group order; n of them. */
static int32_t call_ranks(const sp_stepgraph *g, const sp_task *t, const sp_comm *c, int32_t *out)
{
  int32_t rep = t->stage * g->ranks_per_stage;
  if (t->kind == SP_TASK_SEND) {
    out[0] = rep;
    out[1] = t->peer * g->ranks_per_stage;
    return 2;
  }
  int32_t n = c->coll == SP_COLL_SEND_RECV ? 2 : c->n;
  for (int32_t i = 0; i < n; i++) out[i] = rep + i * c->stride;
  return n;
}

/* The call of @p c as priced, at most @p max_elems elements per block, on local ranks @p loc. */
static void call_spec(const sp_comm *c, int32_t gpus_per_node, uint64_t max_elems, const int32_t *loc, sp_coll_spec *spec)
{
  sp_comm_coll_spec(c, gpus_per_node, c->bytes, spec);
  spec->ranks = loc;
  spec->count = MIN(spec->count, max_elems);
}

/* The tasks in an order that runs each after its dependencies and after the task
 * before it on its (stage, stream), earliest ready first (Kahn); NULL on a cycle. */
static uint32_t *topo_order(const sp_stepgraph *g)
{
  guint n = g->tasks->len;
  const sp_task *T = (const sp_task *)g->tasks->data;
  g_autofree uint32_t *off = NULL, *succ = NULL;
  sp_stepgraph_successors(g, &off, &succ);
  g_autofree uint32_t *indeg = g_new0(uint32_t, n + 1);
  g_autofree uint32_t *next = g_new(uint32_t, n + 1);   /* next task on the same (stage, stream) */
  g_autofree uint32_t *last = g_new(uint32_t, (gsize)g->stages * SP_STREAM_COUNT + 1);
  for (gsize q = 0; q < (gsize)g->stages * SP_STREAM_COUNT; q++) last[q] = G_MAXUINT32;
  for (guint i = 0; i < n; i++) {
    next[i] = G_MAXUINT32;
    gsize q = (gsize)T[i].stage * SP_STREAM_COUNT + T[i].stream;
    if (last[q] != G_MAXUINT32) {
      next[last[q]] = i;
      indeg[i]++;
    }
    last[q] = i;
    indeg[i] += T[i].ndeps;
  }
  uint32_t *order = g_new(uint32_t, n + 1);
  guint head = 0, tail = 0;
  for (guint i = 0; i < n; i++)
    if (indeg[i] == 0) order[tail++] = i;
  while (head < tail) {
    uint32_t t = order[head++];
    for (uint32_t k = off[t]; k < off[t + 1]; k++)
      if (--indeg[succ[k]] == 0) order[tail++] = succ[k];
    if (next[t] != G_MAXUINT32 && --indeg[next[t]] == 0) order[tail++] = next[t];
  }
  if (tail != n) {
    g_free(order);
    return NULL;
  }
  return order;
}

static int cmp_i32(const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static int32_t local_of(const sp_step_replay *r, int32_t global)
{
  const int32_t *p = bsearch(&global, r->global, (size_t)r->n, sizeof(int32_t), cmp_i32);
  return p ? (int32_t)(p - r->global) : -1;
}

static gboolean is_call(const sp_stepgraph *g, const sp_task *t)
{
  if (t->kind == SP_TASK_SEND) return TRUE;
  if (t->kind != SP_TASK_COLL || t->comm < 0) return FALSE;
  const sp_comm *c = &g_array_index(g->comms, sp_comm, t->comm);
  return c->n >= 2 && c->bytes > 0;
}

sp_step_replay *sp_step_replay_new(const sp_stepgraph *g, int32_t world, int32_t gpus_per_node,
                                   uint64_t max_elems, GError **err)
{
  const sp_task *T = (const sp_task *)g->tasks->data;
  guint nt = g->tasks->len;
  if (max_elems < 1) max_elems = 1;
  /* the ranks: every member of every call, deduplicated */
  GArray *all = g_array_new(FALSE, FALSE, sizeof(int32_t));
  int32_t *grp = NULL;
  int32_t grp_cap = 0;
  guint ncalls = 0;
  g_autofree uint32_t *order = topo_order(g);
  if (order == NULL) {
    g_array_free(all, TRUE);
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "step graph: its dependencies form a cycle");
    return NULL;
  }
  for (guint i = 0; i < nt; i++) {
    if (!is_call(g, &T[i])) continue;
    const sp_comm *c = &g_array_index(g->comms, sp_comm, T[i].comm);
    if (c->n + 2 > grp_cap) {
      grp_cap = c->n + 2;
      grp = g_renew(int32_t, grp, grp_cap);
    }
    int32_t n = call_ranks(g, &T[i], c, grp);
    for (int32_t k = 0; k < n; k++)
      if (grp[k] < 0 || grp[k] >= world) {
        g_array_free(all, TRUE);
        g_free(grp);
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "step graph: task %u (%s) reaches rank %d of a %d-rank world", i,
                    T[i].what, grp[k], world);
        return NULL;
      }
    g_array_append_vals(all, grp, (guint)n);
    ncalls++;
  }
  if (ncalls >= (guint)(G_MAXINT32 / 1024 - 1)) {
    g_array_free(all, TRUE);
    g_free(grp);
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "step graph: %u communication tasks are more than data mode can tag", ncalls);
    return NULL;
  }
  g_array_sort(all, cmp_i32);
  guint u = 0;
  for (guint i = 0; i < all->len; i++)
    if (u == 0 || g_array_index(all, int32_t, i) != g_array_index(all, int32_t, u - 1))
      g_array_index(all, int32_t, u++) = g_array_index(all, int32_t, i);

  sp_step_replay *r = g_new0(sp_step_replay, 1);
  r->n = (int32_t)u;
  r->global = g_new(int32_t, MAX(u, 1));
  if (u > 0) memcpy(r->global, all->data, u * sizeof(int32_t)); /* none: a step without communication */
  g_array_free(all, TRUE);
  r->progs = g_new0(sp_program *, MAX(u, 1));
  for (int32_t i = 0; i < r->n; i++) r->progs[i] = sp_program_new(i);
  r->calls = g_array_new(FALSE, FALSE, sizeof(call));
  r->members = g_array_new(FALSE, FALSE, sizeof(member));

  /* the calls, in task order, lowered on the local ranks */
  int32_t *loc = g_new(int32_t, MAX(grp_cap, 1));
  uint64_t total = 0;
  gboolean ok = TRUE;
  for (guint oi = 0; oi < nt && ok; oi++) {
    guint i = order[oi];
    if (!is_call(g, &T[i])) continue;
    const sp_comm *c = &g_array_index(g->comms, sp_comm, T[i].comm);
    int32_t n = call_ranks(g, &T[i], c, grp);
    for (int32_t k = 0; k < n; k++) loc[k] = local_of(r, grp[k]);
    sp_coll_spec spec;
    call_spec(c, gpus_per_node, max_elems, loc, &spec);
    spec.op_id = r->calls->len;
    spec.tag = (int32_t)(r->calls->len * 1024u);
    call cl = { .task = i, .what = T[i].what, .first = r->members->len, .n = (guint)n };
    size_t es = sp_dtype_size(spec.dtype);
    for (int32_t k = 0; k < n && ok; k++) {
      sp_program *p = r->progs[loc[k]];
      member mb = { .local = loc[k] };
      mb.in = sp_program_add_buffer(p, sp_coll_in_count(&spec) * es, "in");
      mb.out = sp_program_add_buffer(p, sp_coll_out_count(&spec) * es, "out");
      mb.out_bytes = sp_coll_out_count(&spec) * es;
      ok = sp_lower_coll(p, &spec, mb.in, mb.out, err);
      total += (sp_coll_in_count(&spec) + 2 * sp_coll_out_count(&spec)) * es;
      g_array_append_val(r->members, mb);
    }
    if (ok && total > SP_STEP_REPLAY_MAX_BYTES) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "the step's data-mode replay needs more than %" G_GUINT64_FORMAT " MiB of buffers at %" G_GUINT64_FORMAT
                  " elements per block", SP_STEP_REPLAY_MAX_BYTES >> 20, max_elems);
      ok = FALSE;
    }
    if (!ok) break;
    g_array_append_val(r->calls, cl);
    if (T[i].kind == SP_TASK_SEND) r->sends++;
    else r->colls++;
  }
  if (!ok) {
    g_prefix_error(err, "step graph replay: ");
    g_free(loc);
    g_free(grp);
    sp_step_replay_free(r);
    return NULL;
  }

  /* buffers (scratch included), zeroed; then the inputs and the expected outputs */
  r->bufs = g_new0(void **, MAX(u, 1));
  for (int32_t i = 0; i < r->n; i++) {
    GArray *bs = r->progs[i]->bufs;
    r->bufs[i] = g_new0(void *, MAX(bs->len, 1));
    for (guint b = 0; b < bs->len; b++) r->bufs[i][b] = g_malloc0(MAX(g_array_index(bs, sp_buffer, b).bytes, 1));
  }
  const void **ins = g_new(const void *, MAX(grp_cap, 1));
  void **outs = g_new(void *, MAX(grp_cap, 1));
  for (guint k = 0; k < r->calls->len && ok; k++) {
    const call *cl = &g_array_index(r->calls, call, k);
    const sp_task *t = &T[cl->task];
    const sp_comm *c = &g_array_index(g->comms, sp_comm, t->comm);
    int32_t n = call_ranks(g, t, c, grp);
    for (int32_t j = 0; j < n; j++) loc[j] = local_of(r, grp[j]);
    sp_coll_spec spec;
    call_spec(c, gpus_per_node, max_elems, loc, &spec);
    uint64_t inc = sp_coll_in_count(&spec);
    for (guint j = 0; j < cl->n; j++) {
      member *mb = &g_array_index(r->members, member, cl->first + j);
      void *in = r->bufs[mb->local][mb->in];
      sp_fill_pattern(in, inc, spec.dtype, SP_CASE_SEED(grp[j]) ^ ((uint64_t)(k + 1) * 0x9E3779B97F4A7C15ull), 0);
      mb->expected = g_malloc0(MAX(mb->out_bytes, 1));
      ins[j] = in;
      outs[j] = mb->expected;
    }
    ok = sp_coll_reference(&spec, ins, outs, err);
  }
  g_free(ins);
  g_free(outs);
  g_free(loc);
  g_free(grp);
  if (!ok) {
    g_prefix_error(err, "step graph replay: ");
    sp_step_replay_free(r);
    return NULL;
  }
  return r;
}

gboolean sp_step_replay_corrupt(sp_step_replay *r, int32_t rank)
{
  int32_t l = local_of(r, rank);
  if (l < 0) return FALSE;
  for (guint i = 0; i < r->members->len; i++) {
    const member *mb = &g_array_index(r->members, member, i);
    if (mb->local == l && mb->out_bytes > 0) {
      ((uint8_t *)r->bufs[l][mb->out])[0] ^= 0x5a;
      return TRUE;
    }
  }
  return FALSE;
}

gboolean sp_step_replay_check(const sp_step_replay *r, int32_t *bad_rank, guint *bad_call, uint64_t *bad_offset,
                              GError **err)
{
  for (guint k = 0; k < r->calls->len; k++) {
    const call *cl = &g_array_index(r->calls, call, k);
    for (guint j = 0; j < cl->n; j++) {
      const member *mb = &g_array_index(r->members, member, cl->first + j);
      const uint8_t *got = r->bufs[mb->local][mb->out];
      for (uint64_t o = 0; o < mb->out_bytes; o++)
        if (got[o] != mb->expected[o]) {
          *bad_rank = r->global[mb->local];
          *bad_call = k;
          *bad_offset = o;
          g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                      "call %u (task %u, %s): rank %d differs from the reference at byte %" G_GUINT64_FORMAT, k, cl->task,
                      cl->what ? cl->what : "?", r->global[mb->local], o);
          return FALSE;
        }
    }
  }
  return TRUE;
}

gboolean sp_step_replay_check_rank(const sp_step_replay *r, int32_t local, guint *bad_call, uint64_t *bad_offset,
                                   GError **err)
{
  if (local < 0 || local >= r->n) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "local rank %d is not one of the replay's %d ranks (0..%d)", local, r->n,
                r->n - 1);
    return FALSE;
  }
  for (guint k = 0; k < r->calls->len; k++) {
    const call *cl = &g_array_index(r->calls, call, k);
    for (guint j = 0; j < cl->n; j++) {
      const member *mb = &g_array_index(r->members, member, cl->first + j);
      if (mb->local != local) continue;
      const uint8_t *got = r->bufs[local][mb->out];
      for (uint64_t o = 0; o < mb->out_bytes; o++)
        if (got[o] != mb->expected[o]) {
          if (bad_call) *bad_call = k;
          if (bad_offset) *bad_offset = o;
          g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                      "call %u (task %u, %s): rank %d differs from the reference at byte %" G_GUINT64_FORMAT, k, cl->task,
                      cl->what ? cl->what : "?", r->global[local], o);
          return FALSE;
        }
    }
  }
  return TRUE;
}

gboolean sp_step_replay_has_outputs(const sp_step_replay *r, int32_t local)
{
  if (local < 0 || local >= r->n) return FALSE;
  for (guint i = 0; i < r->members->len; i++) {
    const member *mb = &g_array_index(r->members, member, i);
    if (mb->local == local && mb->out_bytes > 0) return TRUE;
  }
  return FALSE;
}

uint64_t sp_step_replay_checksum(const sp_step_replay *r, int32_t local)
{
  if (!sp_step_replay_has_outputs(r, local)) return 0;
  uint64_t h = 0;
  for (guint k = 0; k < r->calls->len; k++) {
    const call *cl = &g_array_index(r->calls, call, k);
    for (guint j = 0; j < cl->n; j++) {
      const member *mb = &g_array_index(r->members, member, cl->first + j);
      if (mb->local == local && mb->out_bytes > 0) h = sp_checksum(h, r->bufs[local][mb->out], mb->out_bytes);
    }
  }
  return h;
}
