/* Step emitters of the collective lowerings: the sp_l_* helpers (coll_priv.h)
 * that the algorithm files (lower_direct.c, lower_ring.c, lower_tree.c) call
 * to append steps to a member's program, and the batching of a streaming
 * lowering. They call nothing of the lowering files: the dispatcher (lower.c)
 * uses the algorithms, the algorithms use these. */
#include "config.h"

#include <string.h>

#include "coll_priv.h"
#include "spsim/coll.h"

static int32_t tag_of(const sp_lctx *c, uint32_t phase)
{
  return c->spec->tag + (int32_t)(phase % 1024u);
}

/* Steps a streaming lowering batches before handing them to its sink: small
 * enough for the batch to stay in cache. */
#define STREAM_BATCH 256u

/* Hand the steps emitted since the last flush to the sink (streaming only), then
 * clear them for reuse: emit hands out zeroed steps (one memset of the batch is
 * much cheaper than clearing step by step). */
void sp_l_flush(sp_lctx *c)
{
  if (c->sink == NULL || c->used == c->base)
    return;
  sp_step *batch = &g_array_index(c->prog->steps, sp_step, c->base);
  c->sink(c->sink_ud, c->prog, batch, c->used - c->base);
  memset(batch, 0, (c->used - c->base) * sizeof *batch);
  c->used = c->base;
}

/* A zeroed step appended to the program, to fill in place: lowerings emit
 * millions of steps at scale, so the steps array (which clears new elements)
 * grows ahead by blocks of its length, 16 to 256 steps (small programs keep a
 * small capacity), and sp_lower_coll cuts it back to c->used. A streaming
 * lowering flushes full batches first and reuses their (cleared) slots.
 * emit_slow grows or flushes; emit is the inlined common case. */
static G_GNUC_NO_INLINE sp_step *emit_slow(sp_lctx *c)
{
  GArray *steps = c->prog->steps;
  if (c->sink != NULL && c->used - c->base >= STREAM_BATCH)
    sp_l_flush(c);
  if (c->used == steps->len)
    g_array_set_size(steps, steps->len + CLAMP(steps->len, 16u, 256u));
  return &g_array_index(steps, sp_step, c->used++);
}

static inline sp_step *emit(sp_lctx *c)
{
  GArray *steps = c->prog->steps;
  if (G_LIKELY(c->used < steps->len && (c->sink == NULL || c->used - c->base < STREAM_BATCH)))
    return &g_array_index(steps, sp_step, c->used++);
  return emit_slow(c);
}

static void comm(sp_lctx *c, sp_step_kind kind, int32_t member, uint32_t phase, uint32_t buf,
                 uint64_t off, uint64_t bytes)
{
  if (bytes == 0)
    return;
  sp_step *s = emit(c);
  s->kind = kind;
  s->op = c->spec->op_id;
  s->phase = phase;
  s->peer = c->spec->ranks[member];
  s->tag = tag_of(c, phase);
  s->bytes = bytes;
  s->rows = 1;
  s->row_bytes = bytes;
  if (c->pipelined) {
    s->flags = SP_STEP_PIPELINED | (c->pipe_pace ? SP_STEP_PIPE_PACE : 0u);
    s->count = c->pipe_chunks;
  }
  if (kind == SP_STEP_SEND)
    s->src = (sp_ref){ buf, off };
  else
    s->dst = (sp_ref){ buf, off };
  c->posted++;
}

void sp_l_send(sp_lctx *c, int32_t member, uint32_t phase, uint32_t buf, uint64_t off, uint64_t bytes)
{
  comm(c, SP_STEP_SEND, member, phase, buf, off, bytes);
}

void sp_l_recv(sp_lctx *c, int32_t member, uint32_t phase, uint32_t buf, uint64_t off, uint64_t bytes)
{
  comm(c, SP_STEP_RECV, member, phase, buf, off, bytes);
}

void sp_l_wait(sp_lctx *c, uint32_t phase)
{
  if (c->posted == 0)
    return;
  sp_step *s = emit(c);
  s->kind = SP_STEP_WAIT;
  s->op = c->spec->op_id;
  s->phase = phase;
  c->posted = 0;
}

void sp_l_copy(sp_lctx *c, uint32_t phase, uint32_t dbuf, uint64_t doff, uint32_t sbuf, uint64_t soff,
               uint64_t bytes)
{
  if (bytes == 0 || (dbuf == sbuf && doff == soff) || c->comm_only)
    return;
  sp_step *s = emit(c);
  s->kind = SP_STEP_COPY;
  s->op = c->spec->op_id;
  s->phase = phase;
  s->dst = (sp_ref){ dbuf, doff };
  s->src = (sp_ref){ sbuf, soff };
  s->bytes = bytes;
  s->rows = 1;
  s->row_bytes = bytes;
}

void sp_l_reduce(sp_lctx *c, uint32_t phase, uint32_t dbuf, uint64_t doff, uint32_t sbuf, uint64_t soff,
                 uint64_t elems)
{
  if (elems == 0 || c->comm_only)
    return;
  sp_step *s = emit(c);
  s->kind = SP_STEP_REDUCE;
  s->op = c->spec->op_id;
  s->phase = phase;
  s->dst = (sp_ref){ dbuf, doff };
  s->src = (sp_ref){ sbuf, soff };
  s->count = elems;
  s->bytes = elems * c->es;
  s->dtype = c->spec->dtype;
  s->redop = c->spec->redop;
}

void sp_l_avg(sp_lctx *c, uint32_t phase, uint32_t buf, uint64_t off, uint64_t elems)
{
  if (elems == 0 || c->spec->redop != SP_RED_AVG || c->n == 1 || c->comm_only)
    return;
  sp_step *s = emit(c);
  s->kind = SP_STEP_SCALE;
  s->op = c->spec->op_id;
  s->phase = phase;
  s->dst = (sp_ref){ buf, off };
  s->count = elems;
  s->bytes = elems * c->es;
  s->dtype = c->spec->dtype;
  s->divide = TRUE;
  s->scale = (double)c->n;
}

uint32_t sp_l_scratch(sp_lctx *c, uint64_t bytes, const char *what)
{
  char *name = g_strdup_printf("coll%u.%s", c->spec->op_id, what);
  uint32_t b = sp_program_add_buffer(c->prog, bytes, name);
  g_free(name);
  return b;
}

uint64_t sp_l_chunk_elems(const sp_coll_spec *spec)
{
  uint64_t cb = spec->chunk_bytes ? spec->chunk_bytes : SP_RING_DEFAULT_CHUNK_BYTES;
  uint64_t ce = cb / sp_dtype_size(spec->dtype);
  return ce ? ce : 1;
}
