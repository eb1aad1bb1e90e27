/* The executor: walks one rank's program over a transport, resumably.
 *
 * SEND/RECV are posted to the transport; WAIT calls wait_all (a PENDING answer
 * leaves the executor on the same WAIT, and the next resume calls wait_all
 * again); local steps go to transport->local, or to sp_step_run_host when the
 * transport has none and buffers exist (in cost mode without a local op they
 * are skipped); in data mode a COMPUTE step then goes to the compute hook when one
 * is set (sp_exec_set_compute_hook: data kernels of graph cases). Traces get one event per communication block (first post up to
 * the completion of its WAIT) and one per local step.
 */
#include "config.h"

#include "spsim/error.h"
#include "spsim/exec.h"

struct sp_exec {
  const sp_program *p;
  const sp_transport *t;
  void *const *bufs;
  sp_trace *trace;
  guint pc;            /* next step to run */
  gboolean checked;    /* program validated */
  gboolean failed;     /* an error happened: resume keeps failing */
  /* the open communication block */
  gboolean in_block;
  double block_start;
  uint64_t block_bytes;
  uint32_t block_op, block_phase;
  /* data kernels of COMPUTE steps (data mode only) */
  sp_exec_compute_fn compute;
  void *compute_ud;
};

sp_exec *sp_exec_new(const sp_program *p, const sp_transport *t, void *const *bufs, sp_trace *trace)
{
  g_return_val_if_fail(p != NULL && t != NULL && t->ops != NULL, NULL);
  sp_exec *e = g_new0(sp_exec, 1);
  e->p = p;
  e->t = t;
  e->bufs = bufs;
  e->trace = trace;
  return e;
}

void sp_exec_set_compute_hook(sp_exec *e, sp_exec_compute_fn fn, void *ud)
{
  g_return_if_fail(e != NULL);
  e->compute = fn;
  e->compute_ud = ud;
}

void sp_exec_free(sp_exec *e)
{
  g_free(e);
}

static double exec_clock(const sp_exec *e)
{
  return e->t->ops->clock ? e->t->ops->clock(e->t->ctx) : 0.0;
}

/* Region of a SEND/RECV: contiguous -> (1, bytes, bytes); stride 0 -> packed. */
static void comm_region(const sp_step *s, uint64_t *rows, uint64_t *row_bytes, uint64_t *stride)
{
  uint64_t st = s->kind == SP_STEP_SEND ? s->src_stride : s->dst_stride;
  if (s->rows <= 1) {
    *rows = 1;
    *row_bytes = s->bytes;
    *stride = s->bytes;
  } else {
    *rows = s->rows;
    *row_bytes = s->row_bytes;
    *stride = st ? st : s->row_bytes;
  }
}

/* Bytes a local step touches, for traces. */
static uint64_t local_bytes(const sp_step *s)
{
  switch (s->kind) {
  case SP_STEP_REDUCE:
  case SP_STEP_SCALE: return s->count * sp_dtype_size(s->dtype);
  default: return s->bytes;
  }
}

static sp_wait_status exec_fail(sp_exec *e, GError **err, GError *local)
{
  e->failed = TRUE;
  if (local == NULL)
    local = g_error_new(SP_ERROR, SP_ERROR_TRANSPORT,
                        "rank %d step %u: transport '%s' failed without saying why", e->p->rank,
                        e->pc, e->t->ops->name ? e->t->ops->name : "?");
  g_propagate_error(err, local);
  return SP_WAIT_ERROR;
}

sp_wait_status sp_exec_resume(sp_exec *e, GError **err)
{
  const sp_transport_ops *ops = e->t->ops;
  void *ctx = e->t->ctx;
  GError *local = NULL;

  if (e->failed) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d: the run already failed at step %u; start a new one", e->p->rank, e->pc);
    return SP_WAIT_ERROR;
  }
  if (!e->checked) {
    /* every reference in bounds; peers are range-checked by the transport */
    if (!sp_program_validate(e->p, G_MAXINT32, &local))
      return exec_fail(e, err, local);
    if (e->bufs != NULL)
      for (guint b = 0; b < e->p->bufs->len; b++)
        if (e->bufs[b] == NULL && g_array_index(e->p->bufs, sp_buffer, b).bytes > 0) {
          local = g_error_new(SP_ERROR, SP_ERROR_INVALID,
                              "rank %d: buffer %u '%s' has no memory; allocate every buffer "
                              "(or pass NULL buffers for cost mode)",
                              e->p->rank, b, g_array_index(e->p->bufs, sp_buffer, b).name);
          return exec_fail(e, err, local);
        }
    e->checked = TRUE;
  }

  while (e->pc < sp_program_len(e->p)) {
    const sp_step *s = sp_program_step(e->p, e->pc);
    switch (s->kind) {
    case SP_STEP_SEND:
    case SP_STEP_RECV: {
      uint64_t rows, row_bytes, stride;
      comm_region(s, &rows, &row_bytes, &stride);
      if (!e->in_block) {
        e->in_block = TRUE;
        e->block_start = exec_clock(e);
        e->block_bytes = 0;
        e->block_op = s->op;
        e->block_phase = s->phase;
      }
      gboolean ok;
      if (s->kind == SP_STEP_SEND) {
        const void *data = e->bufs ? (const char *)e->bufs[s->src.buf] + s->src.off : NULL;
        ok = ops->post_send(ctx, s->peer, s->tag, data, rows, row_bytes, stride, &local);
        e->block_bytes += s->bytes;
      } else {
        void *data = e->bufs ? (char *)e->bufs[s->dst.buf] + s->dst.off : NULL;
        ok = ops->post_recv(ctx, s->peer, s->tag, data, rows, row_bytes, stride, &local);
      }
      if (!ok)
        return exec_fail(e, err, local);
      break;
    }
    case SP_STEP_WAIT:
      if (e->in_block) {
        sp_wait_status st = ops->wait_all(ctx, &local);
        if (st == SP_WAIT_PENDING)
          return SP_WAIT_PENDING; /* stay on this WAIT */
        if (st != SP_WAIT_DONE)
          return exec_fail(e, err, local);
        if (e->trace) {
          sp_trace_event ev = { .rank = e->p->rank, .op = e->block_op, .phase = e->block_phase,
                                .kind = SP_STEP_WAIT, .start = e->block_start,
                                .end = exec_clock(e), .bytes = e->block_bytes };
          sp_trace_add(e->trace, &ev);
        }
        e->in_block = FALSE;
      }
      break;
    default: {
      double start = e->trace ? exec_clock(e) : 0.0;
      gboolean ok = TRUE;
      if (ops->local)
        ok = ops->local(ctx, s, e->bufs, &local);
      else if (e->bufs)
        ok = sp_step_run_host(s, e->bufs, &local);
      if (ok && e->compute && e->bufs && s->kind == SP_STEP_COMPUTE)
        ok = e->compute(e->compute_ud, e->p->rank, s, e->bufs, &local);
      if (!ok) {
        if (local)
          g_prefix_error(&local, "rank %d step %u: ", e->p->rank, e->pc);
        return exec_fail(e, err, local);
      }
      if (e->trace) {
        sp_trace_event ev = { .rank = e->p->rank, .op = s->op, .phase = s->phase, .kind = s->kind,
                              .start = start, .end = exec_clock(e), .bytes = local_bytes(s) };
        sp_trace_add(e->trace, &ev);
      }
      break;
    }
    }
    e->pc++;
  }
  return SP_WAIT_DONE;
}

gboolean sp_exec_run(const sp_program *p, const sp_transport *t, void *const *bufs,
                     sp_trace *trace, GError **err)
{
  return sp_exec_run_compute(p, t, bufs, trace, NULL, NULL, err);
}

gboolean sp_exec_run_compute(const sp_program *p, const sp_transport *t, void *const *bufs,
                             sp_trace *trace, sp_exec_compute_fn fn, void *ud, GError **err)
{
  sp_exec *e = sp_exec_new(p, t, bufs, trace);
  if (e == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "sp_exec_run: NULL program or transport");
    return FALSE;
  }
  sp_exec_set_compute_hook(e, fn, ud);
  sp_wait_status st = sp_exec_resume(e, err);
  if (st == SP_WAIT_PENDING)
    g_set_error(err, SP_ERROR, SP_ERROR_TRANSPORT,
                "rank %d step %u: transport '%s' returned PENDING, but sp_exec_run needs a "
                "transport that can block (transport cannot block); drive it with sp_exec_resume "
                "or sp_loopback_run",
                p->rank, e->pc, t->ops->name ? t->ops->name : "?");
  sp_exec_free(e);
  return st == SP_WAIT_DONE;
}
