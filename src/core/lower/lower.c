/* Lowering of collectives into per-rank programs: the dispatcher (checks,
 * in-place snapshot, send-recv, n == 1, then the algorithm of the table below).
 * DIRECT lives in lower_direct.c, RING in lower_ring.c, TREE in lower_tree.c; the
 * step emitters they all use (sp_l_*) in lower_emit.c. Dependencies run one way:
 * this file -> the algorithm files -> lower_emit.c. */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

/* ------------------------------------------------------------ dispatcher */

static gboolean check_buf(const sp_program *prog, uint32_t b, uint64_t need, const char *what,
                          const sp_coll_spec *spec, GError **err)
{
  if (b >= prog->bufs->len) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s on rank %d: %s buffer index %u does not exist (the program has %u buffers); "
                "add it with sp_program_add_buffer first",
                sp_coll_name(spec->coll), prog->rank, what, b, prog->bufs->len);
    return FALSE;
  }
  uint64_t have = g_array_index(prog->bufs, sp_buffer, b).bytes;
  if (have < need) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s on rank %d: %s buffer %u has %" G_GUINT64_FORMAT " bytes but needs %"
                G_GUINT64_FORMAT " (%s elements by the buffer convention of coll.h)",
                sp_coll_name(spec->coll), prog->rank, what, b, have, need,
                sp_dtype_name(spec->dtype));
    return FALSE;
  }
  return TRUE;
}

/* The lowering of each algorithm (AUTO is resolved by sp_algo_choose before the
 * lookup). A new algorithm is one file defining its sp_lower_* (declared in
 * coll_priv.h) and one line here. */
static const sp_lower_fn lowerings[SP_ALGO_COUNT] = {
  [SP_ALGO_AUTO] = sp_lower_direct, /* never looked up (resolved first) */
  [SP_ALGO_RING] = sp_lower_ring,
  [SP_ALGO_DIRECT] = sp_lower_direct,
  [SP_ALGO_TREE] = sp_lower_tree,
  /* NVLS: DIRECT's programs; only the engine's pricing differs (coll.h) */
  [SP_ALGO_NVLS] = sp_lower_direct,
  [SP_ALGO_PAT] = sp_lower_pat,
  [SP_ALGO_NVLS_TREE] = sp_lower_hier,
  [SP_ALGO_COLLNET_DIRECT] = sp_lower_hier,
  [SP_ALGO_COLLNET_CHAIN] = sp_lower_hier,
};

/* The steps of a member (after the in-place snapshot). @algo is resolved and
 * valid (sp_coll_spec_validate, sp_algo_choose). */
static gboolean lower_member(sp_lctx *c, sp_algo algo, uint64_t in_bytes, GError **err)
{
  const sp_coll_spec *spec = c->spec;
  if (spec->coll == SP_COLL_SEND_RECV) {
    uint64_t b = spec->count * c->es;
    if (c->me == 0)
      sp_l_send(c, 1, 0, c->in, 0, b);
    else
      sp_l_recv(c, 0, 0, c->out, 0, b);
    sp_l_wait(c, 0);
    return TRUE;
  }
  if (spec->n == 1) {
    sp_l_copy(c, 0, c->out, 0, c->in, 0, in_bytes);
    return TRUE;
  }
  return lowerings[algo](c, err);
}

/* @p known: the member's index, the spec already validated by the caller (-1: neither). */
static gboolean lower_coll(sp_program *prog, const sp_coll_spec *spec, int32_t known, uint32_t in_buf,
                           uint32_t out_buf, gboolean comm_only, sp_step_sink sink,
                           void *sink_ud, GError **err)
{
  g_return_val_if_fail(prog != NULL, FALSE);
  if (known < 0 && !sp_coll_spec_validate(spec, err))
    return FALSE;
  sp_algo algo = sp_algo_choose(spec);
  if (!sp_coll_algo_supported(spec, algo, err))
    return FALSE;
  int32_t me = known >= 0 ? known : sp_coll_index_of(spec, prog->rank);
  if (me < 0)
    return TRUE; /* not a member: nothing to do */

  size_t es = sp_dtype_size(spec->dtype);
  uint64_t in_bytes = sp_coll_in_count(spec) * es, out_bytes = sp_coll_out_count(spec) * es;
  if (!check_buf(prog, in_buf, in_bytes, "input", spec, err) ||
      !check_buf(prog, out_buf, out_bytes, "output", spec, err))
    return FALSE;

  sp_lctx c = { .prog = prog, .spec = spec, .me = me, .n = spec->n, .es = es,
                .in = in_buf, .out = out_buf, .posted = 0, .used = prog->steps->len,
                .sink = sink, .sink_ud = sink_ud, .base = prog->steps->len,
                .comm_only = comm_only };

  if (in_buf == out_buf && spec->n > 1) {
    if (in_bytes != out_bytes) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s on rank %d: in and out are the same buffer %u but their sizes differ "
                  "(%" G_GUINT64_FORMAT " vs %" G_GUINT64_FORMAT " bytes); use separate buffers",
                  sp_coll_name(spec->coll), prog->rank, in_buf, in_bytes, out_bytes);
      return FALSE;
    }
    /* in place: snapshot the input so the algorithms can read it after writing out */
    if (in_bytes > 0) {
      uint32_t snap = sp_l_scratch(&c, in_bytes, "in");
      sp_l_copy(&c, 0, snap, 0, in_buf, 0, in_bytes);
      c.in = snap;
    }
  }

  gboolean ok = lower_member(&c, algo, in_bytes, err);
  if (ok)
    sp_l_flush(&c);
  /* drop the cleared steps grown ahead (streaming: all of them, back to base) */
  g_array_set_size(prog->steps, sink != NULL ? c.base : c.used);
  return ok;
}

gboolean sp_lower_coll(sp_program *prog, const sp_coll_spec *spec, uint32_t in_buf,
                       uint32_t out_buf, GError **err)
{
  return lower_coll(prog, spec, -1, in_buf, out_buf, FALSE, NULL, NULL, err);
}

gboolean sp_lower_coll_stream(sp_program *prog, const sp_coll_spec *spec, uint32_t in_buf,
                              uint32_t out_buf, gboolean comm_only, sp_step_sink sink,
                              void *sink_ud, GError **err)
{
  g_return_val_if_fail(sink != NULL, FALSE);
  return lower_coll(prog, spec, -1, in_buf, out_buf, comm_only, sink, sink_ud, err);
}

gboolean sp_lower_coll_stream_member(sp_program *prog, const sp_coll_spec *spec, int32_t me, uint32_t in_buf,
                                     uint32_t out_buf, gboolean comm_only, sp_step_sink sink, void *sink_ud,
                                     GError **err)
{
  g_return_val_if_fail(sink != NULL && me >= 0 && me < spec->n && spec->ranks[me] == prog->rank, FALSE);
  return lower_coll(prog, spec, me, in_buf, out_buf, comm_only, sink, sink_ud, err);
}
