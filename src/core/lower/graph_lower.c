/* Lowering of a graph to per-rank programs, the loopback data runner, cost stats. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/graph.h"
#include "graph_private.h"

/* An async collective whose WAIT and unpack steps are deferred. */
typedef struct {
  uint32_t node;
  GArray *tail;     /* sp_step: steps to emit once complete */
  gboolean waited;  /* a WAIT has been emitted since its posts */
} pending_t;

typedef struct {
  const sp_graph *g;
  sp_program *p;
  int32_t rank;
  GArray *pending;  /* pending_t */
  uint64_t *node_scratch; /* optional: scratch bytes added per node (indexed from first) */
  uint32_t first;
} lower_ctx;

static const sp_tensor *T(const lower_ctx *c, uint32_t t) { return sp_graph_tensor(c->g, t); }
static uint32_t S(const lower_ctx *c, uint32_t t) { return T(c, t)->storage; }

static void outer_inner(const sp_tensor *t, int dim, uint64_t *outer, uint64_t *inner)
{
  uint64_t o = 1, i = 1;
  for (int k = 0; k < dim; k++)
    o *= (uint64_t)t->shape[k];
  for (int k = dim + 1; k < t->ndim; k++)
    i *= (uint64_t)t->shape[k];
  *outer = o;
  *inner = i;
}

static void emit(lower_ctx *c, sp_step *s, uint32_t op)
{
  s->op = op;
  sp_program_append(c->p, s);
}

/* Strided copy: rows x row_bytes from (sbuf, soff, sstride) to (dbuf, doff, dstride). */
static void emit_copy(lower_ctx *c, uint32_t op, uint32_t dbuf, uint64_t doff, uint64_t dstride,
                      uint32_t sbuf, uint64_t soff, uint64_t sstride, uint64_t rows, uint64_t row_bytes)
{
  if (rows == 0 || row_bytes == 0)
    return;
  sp_step s = { 0 };
  s.kind = SP_STEP_COPY;
  s.dst.buf = dbuf;
  s.dst.off = doff;
  s.src.buf = sbuf;
  s.src.off = soff;
  s.rows = rows;
  s.row_bytes = row_bytes;
  s.bytes = rows * row_bytes;
  s.src_stride = rows > 1 ? sstride : row_bytes;
  s.dst_stride = rows > 1 ? dstride : row_bytes;
  emit(c, &s, op);
}

static void emit_wait(lower_ctx *c, uint32_t op)
{
  sp_step s = { 0 };
  s.kind = SP_STEP_WAIT;
  emit(c, &s, op);
  for (guint i = 0; i < c->pending->len; i++)
    g_array_index(c->pending, pending_t, i).waited = TRUE;
}

/* Complete pending entry i (WAIT if needed, then its tail). */
static void complete_pending(lower_ctx *c, guint i, uint32_t op)
{
  pending_t pe = g_array_index(c->pending, pending_t, i);
  if (!pe.waited)
    emit_wait(c, op);
  g_array_remove_index(c->pending, i);
  for (guint k = 0; k < pe.tail->len; k++)
    sp_program_append(c->p, &g_array_index(pe.tail, sp_step, k));
  g_array_unref(pe.tail);
}

static gboolean node_touches(const sp_node *n, const sp_graph *g, uint32_t storage, gboolean writes_only)
{
  for (int k = 0; k < n->nin && !writes_only; k++)
    if (n->in[k] != SP_NO_TENSOR && sp_graph_tensor(g, n->in[k])->storage == storage)
      return TRUE;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] != SP_NO_TENSOR && sp_graph_tensor(g, n->out[k])->storage == storage)
      return TRUE;
  return FALSE;
}

/* Before lowering node @p n: complete pending collectives whose output it touches.
 * A node none of whose tensors this rank holds touches none of its buffers (tensors
 * pooled on other ranks share a storage index, not this rank's bytes). */
static void sync_for(lower_ctx *c, const sp_node *n, uint32_t op)
{
  gboolean here = n->kind == SP_NODE_COMPUTE && n->nout == 0;
  for (int k = 0; !here && k < n->nin; k++)
    here = n->in[k] != SP_NO_TENSOR && sp_graph_tensor_on(c->g, n->in[k], c->rank);
  for (int k = 0; !here && k < n->nout; k++)
    here = n->out[k] != SP_NO_TENSOR && sp_graph_tensor_on(c->g, n->out[k], c->rank);
  if (!here)
    return;
  for (guint i = 0; i < c->pending->len;) {
    const sp_node *pn = sp_graph_node(c->g, g_array_index(c->pending, pending_t, i).node);
    /* the receive buffer may not be read or written, the send buffer not written */
    if (node_touches(n, c->g, S(c, pn->out[0]), FALSE) || node_touches(n, c->g, S(c, pn->in[0]), TRUE) ||
        (n->kind == SP_NODE_SYNC && n->in[0] == pn->out[0]))
      complete_pending(c, i, op);
    else
      i++;
  }
}

static uint32_t add_scratch(lower_ctx *c, uint64_t bytes, uint32_t op, const char *what)
{
  char *name = g_strdup_printf("n%u.%s", op, what);
  uint32_t b = sp_program_add_buffer(c->p, bytes, name);
  g_free(name);
  return b;
}

/* Byte extent [lo, hi) of a (possibly strided) region. */
static void extent(const sp_step *s, gboolean dst, uint64_t *lo, uint64_t *hi)
{
  uint64_t rows = s->rows > 1 ? s->rows : 1;
  uint64_t row = s->rows > 1 ? s->row_bytes : s->bytes;
  uint64_t stride = dst ? s->dst_stride : s->src_stride;
  *lo = dst ? s->dst.off : s->src.off;
  *hi = *lo + (rows - 1) * stride + row;
}

/*
 * Can the schedule in [start, wlast] post everything before one WAIT? Only when no
 * local step sits between its WAITs and no post of a later phase touches a region a
 * receive of an earlier phase writes (or a receive overwrites an earlier send's region).
 */
static gboolean deferrable(const sp_program *p, guint start, guint wlast)
{
  guint first_wait = wlast;
  for (guint k = start; k <= wlast; k++)
    if (sp_program_step(p, k)->kind == SP_STEP_WAIT) {
      first_wait = k;
      break;
    }
  for (guint k = first_wait; k <= wlast; k++) {
    sp_step_kind kd = sp_program_step(p, k)->kind;
    if (kd != SP_STEP_SEND && kd != SP_STEP_RECV && kd != SP_STEP_WAIT)
      return FALSE;
  }
  for (guint k = first_wait; k <= wlast; k++) {
    const sp_step *b = sp_program_step(p, k);
    if (b->kind != SP_STEP_SEND && b->kind != SP_STEP_RECV)
      continue;
    /* phase of b starts after the last WAIT before it */
    guint phase_start = k;
    while (phase_start > start && sp_program_step(p, phase_start - 1)->kind != SP_STEP_WAIT)
      phase_start--;
    for (guint j = start; j < phase_start; j++) {
      const sp_step *a = sp_program_step(p, j);
      if (a->kind != SP_STEP_RECV && !(a->kind == SP_STEP_SEND && b->kind == SP_STEP_RECV))
        continue;
      uint64_t alo, ahi, blo, bhi;
      gboolean adst = a->kind == SP_STEP_RECV, bdst = b->kind == SP_STEP_RECV;
      uint32_t abuf = adst ? a->dst.buf : a->src.buf, bbuf = bdst ? b->dst.buf : b->src.buf;
      if (abuf != bbuf)
        continue;
      extent(a, adst, &alo, &ahi);
      extent(b, bdst, &blo, &bhi);
      if (alo < bhi && blo < ahi)
        return FALSE;
    }
  }
  return TRUE;
}

static gboolean lower_coll(lower_ctx *c, uint32_t ni, const sp_node *n, GError **err)
{
  const int32_t *grp = NULL;
  int32_t me = sp_node_group_index(n, c->rank, &grp);
  if (me < 0)
    return TRUE;
  const sp_tensor *a = T(c, n->in[0]), *b = T(c, n->out[0]);
  const int32_t P = n->gsize;
  const uint64_t es = sp_dtype_size(a->dtype);
  sp_coll_spec spec = { 0 };
  spec.algo = n->algo;
  spec.dtype = a->dtype;
  spec.redop = n->redop;
  spec.ranks = grp;
  spec.n = P;
  spec.root = n->root;
  spec.op_id = ni;
  spec.tag = (int32_t)(ni * SP_NODE_TAG_SPAN);
  uint32_t ib = S(c, n->in[0]), ob = S(c, n->out[0]);
  GArray *unpack = g_array_new(FALSE, TRUE, sizeof(sp_step));
  guint start;
  gboolean ok = TRUE;

  switch (n->kind) {
  case SP_NODE_SHIFT: {
    start = sp_program_len(c->p);
    const uint64_t bytes = sp_tensor_bytes(a);
    if (P == 1) {
      emit_copy(c, ni, ob, 0, 0, ib, 0, 0, 1, bytes);
      break;
    }
    sp_step s = { 0 };
    s.kind = SP_STEP_SEND;
    s.peer = grp[(me + 1) % P];
    s.tag = spec.tag;
    s.src.buf = ib;
    s.bytes = s.row_bytes = bytes;
    s.rows = 1;
    emit(c, &s, ni);
    sp_step r = { 0 };
    r.kind = SP_STEP_RECV;
    r.peer = grp[(me + P - 1) % P];
    r.tag = spec.tag;
    r.dst.buf = ob;
    r.bytes = r.row_bytes = bytes;
    r.rows = 1;
    emit(c, &r, ni);
    sp_step w = { 0 };
    w.kind = SP_STEP_WAIT;
    emit(c, &w, ni);
    break;
  }
  case SP_NODE_ALL_REDUCE:
  case SP_NODE_BROADCAST:
  case SP_NODE_REDUCE:
  case SP_NODE_SEND_RECV:
    spec.coll = n->kind == SP_NODE_ALL_REDUCE ? SP_COLL_ALL_REDUCE
                : n->kind == SP_NODE_BROADCAST ? SP_COLL_BROADCAST
                : n->kind == SP_NODE_REDUCE    ? SP_COLL_REDUCE
                                               : SP_COLL_SEND_RECV;
    spec.count = sp_tensor_numel(a);
    if (n->kind == SP_NODE_SEND_RECV) {
      /* the sender does not hold out and the receiver not in */
      if (me == 0)
        ob = ib;
      else
        ib = ob;
    }
    start = sp_program_len(c->p);
    ok = sp_lower_coll(c->p, &spec, ib, ob, err);
    break;
  case SP_NODE_ALL_GATHER: {
    uint64_t outer, inner;
    outer_inner(a, n->dim, &outer, &inner);
    spec.coll = SP_COLL_ALL_GATHER;
    spec.count = sp_tensor_numel(a);
    start = sp_program_len(c->p);
    if (outer == 1) {
      ok = sp_lower_coll(c->p, &spec, ib, ob, err);
    } else {
      uint32_t flat = add_scratch(c, (uint64_t)P * spec.count * es, ni, "gathered");
      ok = sp_lower_coll(c->p, &spec, ib, flat, err);
      uint64_t row = (uint64_t)a->shape[n->dim] * inner * es;
      for (int32_t j = 0; j < P; j++) {
        sp_step s = { 0 };
        s.kind = SP_STEP_COPY;
        s.op = ni;
        s.dst.buf = ob;
        s.dst.off = (uint64_t)j * row;
        s.src.buf = flat;
        s.src.off = (uint64_t)j * spec.count * es;
        s.rows = outer;
        s.row_bytes = row;
        s.bytes = outer * row;
        s.src_stride = row;
        s.dst_stride = (uint64_t)P * row;
        g_array_append_val(unpack, s);
      }
    }
    break;
  }
  case SP_NODE_REDUCE_SCATTER: {
    uint64_t outer, inner;
    outer_inner(a, n->dim, &outer, &inner);
    spec.coll = SP_COLL_REDUCE_SCATTER;
    spec.count = sp_tensor_numel(b);
    uint32_t src = ib;
    if (outer != 1) {
      src = add_scratch(c, (uint64_t)P * spec.count * es, ni, "packed");
      uint64_t row = (uint64_t)b->shape[n->dim] * inner * es;
      for (int32_t j = 0; j < P; j++)
        emit_copy(c, ni, src, (uint64_t)j * spec.count * es, row, ib, (uint64_t)j * row,
                  (uint64_t)a->shape[n->dim] * inner * es, outer, row);
    }
    start = sp_program_len(c->p);
    ok = sp_lower_coll(c->p, &spec, src, ob, err);
    break;
  }
  case SP_NODE_ALL_TO_ALL: {
    const int s = n->dim2, gd = n->dim;
    uint64_t so, si, go, gi;
    outer_inner(a, s, &so, &si);
    int64_t blk[SP_MAX_DIMS];
    memcpy(blk, a->shape, sizeof blk);
    blk[s] /= P;
    sp_tensor bt = *a;
    memcpy(bt.shape, blk, sizeof blk);
    outer_inner(&bt, gd, &go, &gi);
    spec.coll = SP_COLL_ALL_TO_ALL;
    spec.count = sp_tensor_numel(a) / (uint64_t)P;
    uint32_t src = ib, dst = ob;
    if (so != 1) {
      src = add_scratch(c, (uint64_t)P * spec.count * es, ni, "a2a-send");
      uint64_t row = (uint64_t)blk[s] * si * es;
      for (int32_t j = 0; j < P; j++)
        emit_copy(c, ni, src, (uint64_t)j * spec.count * es, row, ib, (uint64_t)j * row,
                  (uint64_t)a->shape[s] * si * es, so, row);
    }
    if (go != 1)
      dst = add_scratch(c, (uint64_t)P * spec.count * es, ni, "a2a-recv");
    start = sp_program_len(c->p);
    ok = sp_lower_coll(c->p, &spec, src, dst, err);
    if (go != 1) {
      uint64_t row = (uint64_t)blk[gd] * gi * es;
      for (int32_t j = 0; j < P; j++) {
        sp_step st = { 0 };
        st.kind = SP_STEP_COPY;
        st.op = ni;
        st.dst.buf = ob;
        st.dst.off = (uint64_t)j * row;
        st.src.buf = dst;
        st.src.off = (uint64_t)j * spec.count * es;
        st.rows = go;
        st.row_bytes = row;
        st.bytes = go * row;
        st.src_stride = row;
        st.dst_stride = (uint64_t)P * row;
        g_array_append_val(unpack, st);
      }
    }
    break;
  }
  default:
    g_array_unref(unpack);
    return TRUE;
  }
  if (!ok) {
    g_array_unref(unpack);
    return FALSE;
  }
  /* sp_lower_coll's steps are [start, end) */
  guint end = sp_program_len(c->p), nwait = 0, wpos = 0;
  for (guint k = start; k < end; k++) {
    g_array_index(c->p->steps, sp_step, k).op = ni;
    if (sp_program_step(c->p, k)->kind == SP_STEP_WAIT) {
      nwait++;
      wpos = k;
    }
  }
  if (n->async && nwait >= 1 && deferrable(c->p, start, wpos)) {
    pending_t pe = { ni, g_array_new(FALSE, TRUE, sizeof(sp_step)), FALSE };
    for (guint k = wpos + 1; k < end; k++)
      g_array_append_val(pe.tail, g_array_index(c->p->steps, sp_step, k));
    g_array_append_vals(pe.tail, unpack->data, unpack->len);
    g_array_set_size(c->p->steps, wpos);
    /* drop the pacing WAITs: every post of the schedule goes out at once */
    for (guint k = wpos; k-- > start;)
      if (sp_program_step(c->p, k)->kind == SP_STEP_WAIT)
        g_array_remove_index(c->p->steps, k);
    g_array_append_val(c->pending, pe);
  } else {
    if (nwait > 0)
      for (guint i = 0; i < c->pending->len; i++)
        g_array_index(c->pending, pending_t, i).waited = TRUE;
    for (guint k = 0; k < unpack->len; k++)
      sp_program_append(c->p, &g_array_index(unpack, sp_step, k));
  }
  g_array_unref(unpack);
  return TRUE;
}

static gboolean lower_local(lower_ctx *c, uint32_t ni, const sp_node *n, GError **err)
{
  if (n->kind == SP_NODE_SYNC)
    return TRUE; /* handled by sync_for */
  if (n->kind == SP_NODE_COMPUTE || sp_node_is_kernel(n)) {
    if (n->nout > 0 && !sp_graph_tensor_on(c->g, n->out[0], c->rank))
      return TRUE;
    sp_step s = { 0 };
    s.kind = SP_STEP_COMPUTE;
    s.flops = sp_graph_node_flops(c->g, ni, c->rank);
    s.bytes = n->bytes;
    if (sp_node_is_kernel(n)) {
      s.bytes = 0;
      for (int k = 0; k < n->nin; k++)
        s.bytes += sp_tensor_bytes(T(c, n->in[k]));
      for (int k = 0; k < n->nout; k++)
        s.bytes += sp_tensor_bytes(T(c, n->out[k]));
    }
    emit(c, &s, ni);
    return TRUE;
  }
  if (!sp_graph_tensor_on(c->g, n->out[0], c->rank))
    return TRUE;
  const sp_tensor *b = T(c, n->out[0]), *a = T(c, n->in[0]);
  const uint64_t es = sp_dtype_size(b->dtype), nb = sp_tensor_numel(b);
  const uint32_t ob = S(c, n->out[0]), ib = S(c, n->in[0]);
  gboolean inplace_ok = n->kind == SP_NODE_SCALE || n->kind == SP_NODE_ADD;
  for (int k = 0; k < n->nin; k++)
    if (S(c, n->in[k]) == ob && !(inplace_ok && k == 0)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "node '%s': output '%s' shares storage with its input '%s'; use another buffer",
                  n->name, b->name, T(c, n->in[k])->name);
      return FALSE;
    }
  uint64_t outer, inner;
  switch (n->kind) {
  case SP_NODE_COPY:
    emit_copy(c, ni, ob, 0, 0, ib, 0, 0, 1, nb * es);
    break;
  case SP_NODE_SLICE:
  case SP_NODE_SPLIT: {
    int64_t st = n->start;
    if (n->kind == SP_NODE_SPLIT) {
      int32_t gi = sp_node_group_index(n, c->rank, NULL);
      if (gi < 0)
        return TRUE;
      st = gi * n->len;
    }
    outer_inner(a, n->dim, &outer, &inner);
    uint64_t row = (uint64_t)n->len * inner * es;
    emit_copy(c, ni, ob, 0, row, ib, (uint64_t)st * inner * es, (uint64_t)a->shape[n->dim] * inner * es,
              outer, row);
    break;
  }
  case SP_NODE_PAD: {
    sp_step f = { 0 };
    f.kind = SP_STEP_FILL;
    f.dst.buf = ob;
    f.bytes = nb * es;
    f.fill_byte = 0;
    emit(c, &f, ni);
    outer_inner(a, n->dim, &outer, &inner);
    uint64_t row = (uint64_t)a->shape[n->dim] * inner * es;
    emit_copy(c, ni, ob, 0, (uint64_t)b->shape[n->dim] * inner * es, ib, 0, row, outer, row);
    break;
  }
  case SP_NODE_CONCAT: {
    outer_inner(b, n->dim, &outer, &inner);
    uint64_t pos = 0;
    for (int k = 0; k < n->nin; k++) {
      uint64_t len = sp_tensor_numel(T(c, n->in[k])) / (outer * inner);
      uint64_t row = len * inner * es;
      emit_copy(c, ni, ob, pos * inner * es, (uint64_t)b->shape[n->dim] * inner * es, S(c, n->in[k]), 0,
                row, outer, row);
      pos += len;
    }
    break;
  }
  case SP_NODE_REPEAT: {
    outer_inner(b, n->dim, &outer, &inner);
    uint64_t row = inner * es;
    for (int64_t e = 0; e < b->shape[n->dim]; e++)
      emit_copy(c, ni, ob, (uint64_t)e * row, (uint64_t)b->shape[n->dim] * row, ib,
                (uint64_t)(e / n->repeat) * row, (uint64_t)a->shape[n->dim] * row, outer, row);
    break;
  }
  case SP_NODE_REPEAT_SUM: {
    outer_inner(b, n->dim, &outer, &inner);
    uint64_t row = inner * es, cnt = outer * inner;
    uint32_t acc = add_scratch(c, cnt * es, ni, "acc"), tmp = add_scratch(c, cnt * es, ni, "tmp");
    for (int64_t h = 0; h < b->shape[n->dim]; h++) {
      for (int32_t t = 0; t < n->repeat; t++) {
        emit_copy(c, ni, t == 0 ? acc : tmp, 0, row, ib, (uint64_t)(h * n->repeat + t) * row,
                  (uint64_t)a->shape[n->dim] * row, outer, row);
        if (t > 0) {
          sp_step r = { 0 };
          r.kind = SP_STEP_REDUCE;
          r.dst.buf = acc;
          r.src.buf = tmp;
          r.count = cnt;
          r.dtype = b->dtype;
          r.redop = SP_RED_SUM;
          emit(c, &r, ni);
        }
      }
      emit_copy(c, ni, ob, (uint64_t)h * row, (uint64_t)b->shape[n->dim] * row, acc, 0, row, outer, row);
    }
    break;
  }
  case SP_NODE_ADD: {
    if (ib != ob)
      emit_copy(c, ni, ob, 0, 0, ib, 0, 0, 1, nb * es);
    sp_step r = { 0 };
    r.kind = SP_STEP_REDUCE;
    r.dst.buf = ob;
    r.src.buf = S(c, n->in[1]);
    r.count = nb;
    r.dtype = b->dtype;
    r.redop = n->redop;
    emit(c, &r, ni);
    break;
  }
  case SP_NODE_SCALE: {
    if (ib != ob)
      emit_copy(c, ni, ob, 0, 0, ib, 0, 0, 1, nb * es);
    sp_step r = { 0 };
    r.kind = SP_STEP_SCALE;
    r.dst.buf = ob;
    r.count = nb;
    r.dtype = b->dtype;
    r.scale = n->scale;
    r.divide = n->divide;
    emit(c, &r, ni);
    break;
  }
  default:
    break;
  }
  return TRUE;
}

static sp_program *lower_range(const sp_graph *g, int32_t rank, uint32_t first, uint32_t last,
                               uint64_t *node_scratch, GError **err)
{
  if (rank < 0 || rank >= g->world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d is outside the world of %d", rank, g->world);
    return NULL;
  }
  if (last > g->nodes->len)
    last = g->nodes->len;
  lower_ctx c = { g, sp_program_new(rank), rank, g_array_new(FALSE, FALSE, sizeof(pending_t)),
                  node_scratch, first };
  for (guint s = 0; s < g->storage->len; s++) {
    GArray *members = g_ptr_array_index(g->storage, s);
    const char *nm = members->len ? sp_graph_tensor(g, g_array_index(members, uint32_t, 0))->name : "unused";
    sp_program_add_buffer(c.p, sp_graph_storage_bytes(g, s, rank), nm);
  }
  gboolean ok = TRUE;
  for (uint32_t ni = first; ok && ni < last; ni++) {
    const sp_node *n = sp_graph_node(g, ni);
    guint nb0 = c.p->bufs->len;
    sync_for(&c, n, ni);
    if (sp_node_kind_is_coll(n->kind))
      ok = lower_coll(&c, ni, n, err);
    else
      ok = lower_local(&c, ni, n, err);
    if (node_scratch) {
      uint64_t sb = 0;
      for (guint b = nb0; b < c.p->bufs->len; b++)
        sb += g_array_index(c.p->bufs, sp_buffer, b).bytes;
      node_scratch[ni - first] = sb;
    }
  }
  while (ok && c.pending->len)
    complete_pending(&c, 0, last ? last - 1 : 0);
  for (guint i = 0; i < c.pending->len; i++)
    g_array_unref(g_array_index(c.pending, pending_t, i).tail);
  g_array_unref(c.pending);
  if (!ok) {
    sp_program_free(c.p);
    return NULL;
  }
  return c.p;
}

sp_program *sp_graph_lower_range(const sp_graph *g, int32_t rank, uint32_t first, uint32_t last,
                                 GError **err)
{
  return lower_range(g, rank, first, last, NULL, err);
}

sp_program *sp_graph_lower(const sp_graph *g, int32_t rank, GError **err)
{
  return lower_range(g, rank, 0, g->nodes->len, NULL, err);
}

/* ---------------------------------------------------------------- loopback runner */

static gboolean run_segment(const sp_graph *g, sp_graph_data *d, uint32_t first, uint32_t last,
                            GError **err)
{
  const int32_t W = g->world;
  sp_program **progs = g_new0(sp_program *, W);
  void ***bufs = g_new0(void **, W);
  gboolean ok = TRUE, any = FALSE;
  for (int32_t r = 0; ok && r < W; r++) {
    progs[r] = sp_graph_lower_range(g, r, first, last, err);
    if (!progs[r]) {
      ok = FALSE;
      break;
    }
    any = any || sp_program_len(progs[r]) > 0;
    guint nb = progs[r]->bufs->len;
    bufs[r] = g_new0(void *, nb ? nb : 1);
    for (guint b = 0; b < nb; b++)
      bufs[r][b] = b < d->nstor ? d->buf[r][b]
                                : g_malloc0(MAX(1, g_array_index(progs[r]->bufs, sp_buffer, b).bytes));
  }
  if (ok && any)
    ok = sp_loopback_run(progs, W, bufs, err);
  for (int32_t r = 0; r < W; r++) {
    if (progs[r] && bufs[r])
      for (guint b = d->nstor; b < progs[r]->bufs->len; b++)
        g_free(bufs[r][b]);
    g_free(bufs[r]);
    sp_program_free(progs[r]);
  }
  g_free(bufs);
  g_free(progs);
  return ok;
}

gboolean sp_graph_run_loopback(const sp_graph *g, sp_graph_data *d, GError **err)
{
  uint32_t first = 0;
  for (uint32_t ni = 0; ni <= g->nodes->len; ni++) {
    const sp_node *n = ni < g->nodes->len ? sp_graph_node(g, ni) : NULL;
    if (n && !sp_node_is_kernel(n))
      continue;
    if (ni > first && !run_segment(g, d, first, ni, err))
      return FALSE;
    if (n)
      for (int32_t r = 0; r < g->world; r++)
        if (sp_graph_tensor_on(g, n->out[0], r) && !sp_graph_kernel_host(g, ni, r, d->buf[r], err))
          return FALSE;
    first = ni + 1;
  }
  return TRUE;
}

/* ---------------------------------------------------------------- stats */

gboolean sp_graph_rank_stats(const sp_graph *g, int32_t rank, int32_t ranks_per_node, uint32_t first,
                             uint32_t last, sp_graph_stats *st, GError **err)
{
  memset(st, 0, sizeof *st);
  if (last > g->nodes->len)
    last = g->nodes->len;
  if (first > last)
    first = last;
  if (ranks_per_node < 1)
    ranks_per_node = 1;
  const uint32_t nn = last - first;
  uint64_t *scratch = g_new0(uint64_t, nn + 1);
  sp_program *p = lower_range(g, rank, first, last, scratch, err);
  if (!p) {
    g_free(scratch);
    return FALSE;
  }
  for (guint i = 0; i < sp_program_len(p); i++) {
    const sp_step *s = sp_program_step(p, i);
    if (s->kind == SP_STEP_SEND) {
      st->bytes_sent += s->bytes;
      st->msgs++;
      if (s->peer / ranks_per_node == rank / ranks_per_node)
        st->bytes_intra += s->bytes;
      else
        st->bytes_inter += s->bytes;
    }
  }
  sp_program_free(p);
  for (uint32_t ni = first; ni < last; ni++) {
    st->flops += sp_graph_node_flops(g, ni, rank);
    if (scratch[ni - first] > st->mem_scratch_max)
      st->mem_scratch_max = scratch[ni - first];
  }
  /* liveness of storages over the node range */
  const guint ns = g->storage->len;
  int64_t *lo = g_new(int64_t, ns), *hi = g_new(int64_t, ns);
  for (guint s = 0; s < ns; s++) {
    lo[s] = INT64_MAX;
    hi[s] = -1;
    uint64_t bytes = sp_graph_storage_bytes(g, s, rank);
    GArray *mem = g_ptr_array_index(g->storage, s);
    if (!bytes || !mem->len)
      continue;
    const sp_tensor *t0 = sp_graph_tensor(g, g_array_index(mem, uint32_t, 0));
    st->mem_kind[t0->kind] += bytes;
    st->mem_storage += bytes;
    for (guint k = 0; k < mem->len; k++) {
      const sp_tensor *t = sp_graph_tensor(g, g_array_index(mem, uint32_t, k));
      if (t->init != SP_INIT_NONE || t->persistent)
        lo[s] = first;
      if (t->persistent)
        hi[s] = (int64_t)last - 1;
    }
  }
  for (uint32_t ni = first; ni < last; ni++) {
    const sp_node *n = sp_graph_node(g, ni);
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] != SP_NO_TENSOR) {
        uint32_t s = sp_graph_tensor(g, n->out[k])->storage;
        if (lo[s] > ni)
          lo[s] = ni;
        if (hi[s] < ni)
          hi[s] = ni;
      }
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] != SP_NO_TENSOR) {
        uint32_t s = sp_graph_tensor(g, n->in[k])->storage;
        if (lo[s] > ni)
          lo[s] = ni;
        if (hi[s] < ni)
          hi[s] = ni;
      }
  }
  uint64_t *sbytes = g_new(uint64_t, ns ? ns : 1);
  for (guint s = 0; s < ns; s++)
    sbytes[s] = sp_graph_storage_bytes(g, s, rank);
  for (uint32_t ni = first; ni < last; ni++) {
    uint64_t live = scratch[ni - first];
    for (guint s = 0; s < ns; s++)
      if (lo[s] <= ni && (int64_t)ni <= hi[s])
        live += sbytes[s];
    if (live > st->mem_peak)
      st->mem_peak = live;
  }
  g_free(sbytes);
  g_free(lo);
  g_free(hi);
  g_free(scratch);
  return TRUE;
}
