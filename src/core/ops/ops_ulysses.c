/* Ulysses sequence-parallel primitives and distributed attention as graph builders. */
#include "config.h"
#include <string.h>
#include "spsim/error.h"
#include "spsim/ops.h"
#include "ops_private.h"

#define BAD SP_OPS_BAD

static const sp_tensor *need_dim(sp_graph *g, uint32_t t, int dim, const char *what, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  if (!x) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: no tensor with id %u", what, t);
    return NULL;
  }
  if (dim < 0 || dim >= x->ndim) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "%s: dim %d is out of range for '%s' (%d dims)", what,
                dim, x->name, x->ndim);
    return NULL;
  }
  return x;
}

static gboolean need_groups(const sp_groups *gs, const char *what, GError **err)
{
  if (!gs || !gs->ranks || gs->n_groups < 1 || gs->group_size < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: empty group set", what);
    return FALSE;
  }
  return TRUE;
}

/* ---------------------------------------------------------------- all-to-all */

uint32_t sp_op_seq_all_to_all(sp_graph *g, const sp_groups *gs, uint32_t in, int scatter_dim,
                              int gather_dim, gboolean async, GError **err)
{
  if (!need_groups(gs, "all-to-all", err))
    return BAD;
  const sp_tensor *x = need_dim(g, in, scatter_dim, "all-to-all", err);
  if (!x || !need_dim(g, in, gather_dim, "all-to-all", err))
    return BAD;
  if (x->shape[scatter_dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "all-to-all: dim %d of '%s' has size %" G_GINT64_FORMAT
                " which does not divide by the sequence-parallel degree %d",
                scatter_dim, x->name, x->shape[scatter_dim], gs->group_size);
    return BAD;
  }
  int64_t shape[SP_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[scatter_dim] /= gs->group_size;
  shape[gather_dim] *= gs->group_size;
  char *suffix = g_strdup_printf("a2a%d%d", scatter_dim, gather_dim);
  uint32_t out = sp_ops_like(g, in, suffix, x->ndim, shape, x->kind, err);
  g_free(suffix);
  if (out == BAD)
    return BAD;
  uint32_t n = sp_graph_all_to_all(g, gs, in, out, scatter_dim, gather_dim,
                                   async ? SP_ALGO_DIRECT : SP_ALGO_AUTO, err);
  if (n == BAD)
    return BAD;
  sp_graph_node_set_async(g, n, async);
  return out;
}

gboolean sp_op_multi_all_to_all(sp_graph *g, const sp_groups *gs, int n, const uint32_t *ins,
                                const int *scatter_dims, const int *gather_dims, uint32_t *outs,
                                GError **err)
{
  if (n < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "multi-tensor all-to-all: no tensors");
    return FALSE;
  }
  /* post 0; then for each i: post i+1, complete i */
  outs[0] = sp_op_seq_all_to_all(g, gs, ins[0], scatter_dims[0], gather_dims[0], n > 1, err);
  if (outs[0] == BAD)
    return FALSE;
  for (int i = 0; i < n; i++) {
    if (i + 1 < n) {
      outs[i + 1] = sp_op_seq_all_to_all(g, gs, ins[i + 1], scatter_dims[i + 1], gather_dims[i + 1],
                                         TRUE, err);
      if (outs[i + 1] == BAD)
        return FALSE;
    }
    if (n > 1 && sp_graph_sync(g, outs[i], err) == BAD)
      return FALSE;
  }
  return TRUE;
}

/* ---------------------------------------------------------------- gather / split */

uint32_t sp_op_gather_fwd(sp_graph *g, const sp_groups *gs, uint32_t in, int dim, GError **err)
{
  if (!need_groups(gs, "gather", err))
    return BAD;
  const sp_tensor *x = need_dim(g, in, dim, "gather", err);
  if (!x)
    return BAD;
  uint32_t out = sp_ops_like_dim(g, in, "gathered", dim, x->shape[dim] * gs->group_size, err);
  if (out == BAD || sp_graph_all_gather(g, gs, in, out, dim, SP_ALGO_AUTO, err) == BAD)
    return BAD;
  return out;
}

uint32_t sp_op_split_fwd(sp_graph *g, const sp_groups *gs, uint32_t in, int dim, GError **err)
{
  if (!need_groups(gs, "split", err))
    return BAD;
  const sp_tensor *x = need_dim(g, in, dim, "split", err);
  if (!x)
    return BAD;
  if (x->shape[dim] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "split: the dimension to split (dim %d of '%s', size %" G_GINT64_FORMAT
                ") is not a multiple of the group size %d; cannot split it evenly (pad it to a multiple first)",
                dim, x->name, x->shape[dim], gs->group_size);
    return BAD;
  }
  uint32_t out = sp_ops_like_dim(g, in, "split", dim, x->shape[dim] / gs->group_size, err);
  if (out == BAD || sp_graph_split(g, gs, in, out, dim, err) == BAD)
    return BAD;
  return out;
}

uint32_t sp_op_gather_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad_out, int dim,
                          sp_grad_scale scale, GError **err)
{
  uint32_t t = sp_op_split_fwd(g, gs, grad_out, dim, err);
  return t == BAD ? BAD : sp_ops_grad_scale(g, t, gs->group_size, scale, err);
}

uint32_t sp_op_split_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad_out, int dim,
                         sp_grad_scale scale, GError **err)
{
  uint32_t t = sp_op_gather_fwd(g, gs, grad_out, dim, err);
  return t == BAD ? BAD : sp_ops_grad_scale(g, t, gs->group_size, scale, err);
}

/* ---------------------------------------------------------------- slice-and-pad */

gboolean sp_op_slice_and_pad(sp_graph *g, const sp_groups *gs, uint32_t ids, uint32_t pos,
                             uint32_t *ids_out, uint32_t *pos_out, int64_t *pad, GError **err)
{
  if (!need_groups(gs, "slice-and-pad", err))
    return FALSE;
  const sp_tensor *ti = sp_graph_tensor(g, ids);
  if (!ti || ti->ndim != 2) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "slice-and-pad: input_ids must be [bsz, seqlen]");
    return FALSE;
  }
  const int64_t S = ti->shape[1];
  if (pos != SP_NO_TENSOR) {
    const sp_tensor *tp = sp_graph_tensor(g, pos);
    if (!tp || tp->ndim != 2 || tp->shape[0] != 1) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                  "slice-and-pad: position_ids must be [1, seqlen] (packed sequences, batch size 1)");
      return FALSE;
    }
    if (tp->shape[1] != S) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                  "slice-and-pad: input_ids have %" G_GINT64_FORMAT " tokens but position_ids %" G_GINT64_FORMAT,
                  S, tp->shape[1]);
      return FALSE;
    }
  }
  const int32_t P = gs->group_size;
  const int64_t p = (P - S % P) % P;
  uint32_t padded = ids;
  *pos_out = pos;
  if (p > 0) {
    padded = sp_ops_like_dim(g, ids, "padded", 1, S + p, err);
    if (padded == BAD || sp_graph_pad(g, ids, padded, 1, err) == BAD)
      return FALSE;
    if (pos != SP_NO_TENSOR) {
      int64_t shp[2] = { 1, p };
      const sp_tensor *tp = sp_graph_tensor(g, pos);
      char *nm = g_strdup_printf("%s.padpos", tp->name);
      uint32_t extra = sp_graph_tensor_new(g, nm, tp->dtype, 2, shp, tp->kind, SP_INIT_IOTA, err);
      g_free(nm);
      if (extra == BAD)
        return FALSE;
      if (tp->on) {
        GArray *rk = g_array_new(FALSE, FALSE, sizeof(int32_t));
        for (int32_t r = 0; r < sp_graph_world(g); r++)
          if (tp->on[r])
            g_array_append_val(rk, r);
        sp_graph_tensor_place(g, extra, (const int32_t *)rk->data, (int32_t)rk->len, NULL);
        g_array_unref(rk);
      }
      uint32_t cat[2] = { pos, extra };
      *pos_out = sp_ops_like_dim(g, pos, "padded", 1, S + p, err);
      if (*pos_out == BAD || sp_graph_concat(g, cat, 2, *pos_out, 1, err) == BAD)
        return FALSE;
    }
  }
  *ids_out = sp_op_split_fwd(g, gs, padded, 1, err);
  if (pad)
    *pad = p;
  return *ids_out != BAD;
}

uint32_t sp_op_gather_and_unpad(sp_graph *g, const sp_groups *gs, uint32_t in, int dim, int64_t pad,
                                int unpad_dim, GError **err)
{
  uint32_t full = sp_op_gather_fwd(g, gs, in, dim, err);
  if (full == BAD || pad == 0)
    return full;
  const sp_tensor *x = need_dim(g, full, unpad_dim, "gather-and-unpad", err);
  if (!x)
    return BAD;
  if (pad < 0 || pad >= x->shape[unpad_dim]) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "gather-and-unpad: padding %" G_GINT64_FORMAT " must be in [0, %" G_GINT64_FORMAT ")",
                pad, x->shape[unpad_dim]);
    return BAD;
  }
  int64_t keep = x->shape[unpad_dim] - pad;
  uint32_t out = sp_ops_like_dim(g, full, "unpad", unpad_dim, keep, err);
  if (out == BAD || sp_graph_slice(g, full, out, unpad_dim, 0, keep, err) == BAD)
    return BAD;
  return out;
}

uint32_t sp_op_gather_and_unpad_bwd(sp_graph *g, const sp_groups *gs, uint32_t grad_out, int dim,
                                    int64_t pad, int unpad_dim, sp_grad_scale scale, GError **err)
{
  uint32_t t = grad_out;
  if (pad > 0) {
    const sp_tensor *x = need_dim(g, grad_out, unpad_dim, "gather-and-unpad backward", err);
    if (!x)
      return BAD;
    t = sp_ops_like_dim(g, grad_out, "pad", unpad_dim, x->shape[unpad_dim] + pad, err);
    if (t == BAD || sp_graph_pad(g, grad_out, t, unpad_dim, err) == BAD)
      return BAD;
  }
  return sp_op_gather_bwd(g, gs, t, dim, scale, err);
}

/* ---------------------------------------------------------------- SP data */

uint32_t sp_op_sp_data_pre(sp_graph *g, const sp_groups *gs, uint32_t list, GError **err)
{
  return sp_op_gather_fwd(g, gs, list, 0, err);
}

uint32_t sp_op_sp_data_post(sp_graph *g, const sp_groups *gs, uint32_t list, GError **err)
{
  if (!need_groups(gs, "SP data post-processing", err))
    return BAD;
  const sp_tensor *x = need_dim(g, list, 0, "SP data post-processing", err);
  if (!x)
    return BAD;
  if (x->shape[0] % gs->group_size != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "SP data post-processing: the list has %" G_GINT64_FORMAT
                " items, not divisible by the sequence-parallel size %d", x->shape[0], gs->group_size);
    return BAD;
  }
  return sp_op_split_fwd(g, gs, list, 0, err);
}

/* ---------------------------------------------------------------- attention */

static uint32_t repeat_heads(sp_graph *g, uint32_t t, int hd, int32_t rep, GError **err)
{
  if (rep == 1)
    return t;
  const sp_tensor *x = sp_graph_tensor(g, t);
  uint32_t out = sp_ops_like_dim(g, t, "kvrep", hd, x->shape[hd] * rep, err);
  if (out == BAD || sp_graph_repeat(g, t, out, hd, rep, err) == BAD)
    return BAD;
  return out;
}

static uint32_t unrepeat_heads(sp_graph *g, uint32_t t, int hd, int32_t rep, GError **err)
{
  if (rep == 1)
    return t;
  const sp_tensor *x = sp_graph_tensor(g, t);
  uint32_t out = sp_ops_like_dim(g, t, "kvsum", hd, x->shape[hd] / rep, err);
  if (out == BAD || sp_graph_repeat_sum(g, t, out, hd, rep, err) == BAD)
    return BAD;
  return out;
}

/* Slice @p t along @p dim at @p idx (len 1), dropping that dim. */
static uint32_t unpack_one(sp_graph *g, uint32_t t, int dim, int idx, const char *nm, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  int64_t shape[SP_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != dim)
      shape[nd++] = x->shape[i];
  uint32_t out = sp_ops_like(g, t, nm, nd, shape, x->kind, err);
  if (out == BAD || sp_graph_slice(g, t, out, dim, idx, 1, err) == BAD)
    return BAD;
  return out;
}

/* Check heads and decide KV replication. */
static gboolean attn_heads(int64_t H, int64_t KV, int32_t P, int32_t *rep, GError **err)
{
  if (H % P != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                "Ulysses attention: %" G_GINT64_FORMAT " attention heads do not divide by the sequence-parallel "
                "degree %d; use a degree that divides the head count (Ulysses SP is capped by heads)",
                H, P);
    return FALSE;
  }
  if (KV < 1 || H % KV != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE,
                "Ulysses attention: %" G_GINT64_FORMAT " query heads are not a multiple of %" G_GINT64_FORMAT
                " KV heads", H, KV);
    return FALSE;
  }
  if (KV % P == 0) {
    *rep = 1;
  } else if (P % KV == 0) {
    *rep = (int32_t)(P / KV);
  } else {
    g_set_error(err, SP_ERROR, SP_ERROR_LAYOUT,
                "Ulysses attention: %" G_GINT64_FORMAT " KV heads and degree %d: KV heads must divide by the "
                "degree, or the degree by the KV heads (then KV heads are replicated)",
                KV, P);
    return FALSE;
  }
  return TRUE;
}

static const sp_tensor *need4(sp_graph *g, uint32_t t, int nd, const char *what, GError **err)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  if (!x || x->ndim != nd) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "Ulysses attention: %s must be a %d-D tensor", what, nd);
    return NULL;
  }
  return x;
}

/* a2a of n tensors, overlapped or one after another. */
static gboolean a2a_n(sp_graph *g, const sp_groups *gs, int n, const uint32_t *ins, const int *sc,
                      const int *ga, gboolean overlap, uint32_t *outs, GError **err)
{
  if (overlap)
    return sp_op_multi_all_to_all(g, gs, n, ins, sc, ga, outs, err);
  for (int i = 0; i < n; i++)
    if ((outs[i] = sp_op_seq_all_to_all(g, gs, ins[i], sc[i], ga[i], FALSE, err)) == BAD)
      return FALSE;
  return TRUE;
}

gboolean sp_op_ulysses_attention(sp_graph *g, const sp_groups *gs, sp_qkv_pack pack,
                                 sp_attn_layout layout, uint32_t q, uint32_t k, uint32_t v,
                                 gboolean overlap, sp_ulysses_attn *st, GError **err)
{
  if (!need_groups(gs, "Ulysses attention", err))
    return FALSE;
  memset(st, 0, sizeof *st);
  st->pack = pack;
  st->layout = layout;
  st->P = gs->group_size;
  st->overlap = overlap;
  st->in[0] = q;
  st->in[1] = k;
  st->in[2] = v;
  const int sd = layout == SP_LAYOUT_SBHD ? 0 : 1;
  const int32_t P = gs->group_size;
  switch (pack) {
  case SP_QKV_SEPARATE: {
    const sp_tensor *tq = need4(g, q, 4, "q", err), *tk = tq ? need4(g, k, 4, "k", err) : NULL;
    if (!tk || !need4(g, v, 4, "v", err))
      return FALSE;
    if (!attn_heads(tq->shape[2], tk->shape[2], P, &st->kv_repeat, err))
      return FALSE;
    uint32_t kr = repeat_heads(g, k, 2, st->kv_repeat, err);
    uint32_t vr = kr == BAD ? BAD : repeat_heads(g, v, 2, st->kv_repeat, err);
    if (vr == BAD)
      return FALSE;
    uint32_t ins[3] = { q, kr, vr }, outs[3];
    int sc[3] = { 2, 2, 2 }, ga[3] = { sd, sd, sd };
    if (!a2a_n(g, gs, 3, ins, sc, ga, overlap, outs, err))
      return FALSE;
    st->ql = outs[0];
    st->kl = outs[1];
    st->vl = outs[2];
    break;
  }
  case SP_QKV_PACKED: {
    const sp_tensor *t = need4(g, q, 5, "packed qkv", err);
    if (!t)
      return FALSE;
    if (t->shape[2] != 3) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "Ulysses attention: packed qkv needs 3 at dim 2");
      return FALSE;
    }
    if (!attn_heads(t->shape[3], t->shape[3], P, &st->kv_repeat, err))
      return FALSE;
    uint32_t l = sp_op_seq_all_to_all(g, gs, q, 3, sd, FALSE, err);
    if (l == BAD || (st->ql = unpack_one(g, l, 2, 0, "q", err)) == BAD ||
        (st->kl = unpack_one(g, l, 2, 1, "k", err)) == BAD || (st->vl = unpack_one(g, l, 2, 2, "v", err)) == BAD)
      return FALSE;
    break;
  }
  case SP_QKV_KV_PACKED: {
    const sp_tensor *tq = need4(g, q, 4, "q", err), *tkv = tq ? need4(g, k, 5, "packed kv", err) : NULL;
    if (!tkv)
      return FALSE;
    if (tkv->shape[2] != 2) {
      g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "Ulysses attention: packed kv needs 2 at dim 2");
      return FALSE;
    }
    if (!attn_heads(tq->shape[2], tkv->shape[3], P, &st->kv_repeat, err))
      return FALSE;
    uint32_t kvr = repeat_heads(g, k, 3, st->kv_repeat, err);
    if (kvr == BAD)
      return FALSE;
    uint32_t ins[2] = { q, kvr }, outs[2];
    int sc[2] = { 2, 3 }, ga[2] = { sd, sd };
    if (!a2a_n(g, gs, 2, ins, sc, ga, overlap, outs, err))
      return FALSE;
    st->ql = outs[0];
    if ((st->kl = unpack_one(g, outs[1], 2, 0, "k", err)) == BAD ||
        (st->vl = unpack_one(g, outs[1], 2, 1, "v", err)) == BAD)
      return FALSE;
    break;
  }
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "Ulysses attention: unknown packing %d", pack);
    return FALSE;
  }
  st->outl = sp_ops_like(g, st->ql, "attn", 4, sp_graph_tensor(g, st->ql)->shape, SP_TENSOR_ACTIVATION, err);
  if (st->outl == BAD || sp_graph_attention(g, layout, st->ql, st->kl, st->vl, st->outl, err) == BAD)
    return FALSE;
  st->out = sp_op_seq_all_to_all(g, gs, st->outl, sd, 2, FALSE, err);
  return st->out != BAD;
}

gboolean sp_op_ulysses_attention_bwd(sp_graph *g, const sp_groups *gs, const sp_ulysses_attn *st,
                                     uint32_t dout, uint32_t grads[3], GError **err)
{
  const int sd = st->layout == SP_LAYOUT_SBHD ? 0 : 1;
  grads[0] = grads[1] = grads[2] = SP_NO_TENSOR;
  if (!need_groups(gs, "Ulysses attention backward", err))
    return FALSE;
  if (gs->group_size != st->P) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "Ulysses attention backward: group size %d, forward had %d",
                gs->group_size, st->P);
    return FALSE;
  }
  uint32_t dl = sp_op_seq_all_to_all(g, gs, dout, 2, sd, FALSE, err);
  if (dl == BAD)
    return FALSE;
  uint32_t dq = sp_ops_like(g, st->ql, "grad", 4, sp_graph_tensor(g, st->ql)->shape, SP_TENSOR_ACTIVATION, err);
  uint32_t dk = dq == BAD ? BAD : sp_ops_like(g, st->kl, "grad", 4, sp_graph_tensor(g, st->kl)->shape,
                                             SP_TENSOR_ACTIVATION, err);
  uint32_t dv = dk == BAD ? BAD : sp_ops_like(g, st->vl, "grad", 4, sp_graph_tensor(g, st->vl)->shape,
                                             SP_TENSOR_ACTIVATION, err);
  if (dv == BAD ||
      sp_graph_attention_bwd(g, st->layout, st->ql, st->kl, st->vl, dl, dq, dk, dv, err) == BAD)
    return FALSE;
  switch (st->pack) {
  case SP_QKV_SEPARATE: {
    uint32_t ins[3] = { dq, dk, dv }, outs[3];
    int sc[3] = { sd, sd, sd }, ga[3] = { 2, 2, 2 };
    if (!a2a_n(g, gs, 3, ins, sc, ga, st->overlap, outs, err))
      return FALSE;
    grads[0] = outs[0];
    grads[1] = unrepeat_heads(g, outs[1], 2, st->kv_repeat, err);
    grads[2] = grads[1] == BAD ? BAD : unrepeat_heads(g, outs[2], 2, st->kv_repeat, err);
    return grads[2] != BAD;
  }
  case SP_QKV_PACKED: {
    const sp_tensor *x = sp_graph_tensor(g, dq);
    int64_t shape[5];
    for (int i = 0, j = 0; i < 5; i++)
      shape[i] = i == 2 ? 3 : x->shape[j++];
    uint32_t cat = sp_ops_like(g, dq, "dqkv", 5, shape, SP_TENSOR_ACTIVATION, err);
    uint32_t ins[3] = { dq, dk, dv };
    if (cat == BAD || sp_graph_concat(g, ins, 3, cat, 2, err) == BAD)
      return FALSE;
    grads[0] = sp_op_seq_all_to_all(g, gs, cat, sd, 3, FALSE, err);
    return grads[0] != BAD;
  }
  case SP_QKV_KV_PACKED: {
    const sp_tensor *x = sp_graph_tensor(g, dk);
    int64_t shape[5];
    for (int i = 0, j = 0; i < 5; i++)
      shape[i] = i == 2 ? 2 : x->shape[j++];
    uint32_t cat = sp_ops_like(g, dk, "dkv", 5, shape, SP_TENSOR_ACTIVATION, err);
    uint32_t kvin[2] = { dk, dv };
    if (cat == BAD || sp_graph_concat(g, kvin, 2, cat, 2, err) == BAD)
      return FALSE;
    uint32_t ins[2] = { dq, cat }, outs[2];
    int sc[2] = { sd, sd }, ga[2] = { 2, 3 };
    if (!a2a_n(g, gs, 2, ins, sc, ga, st->overlap, outs, err))
      return FALSE;
    grads[0] = outs[0];
    grads[1] = unrepeat_heads(g, outs[1], 3, st->kv_repeat, err);
    return grads[1] != BAD;
  }
  default:
    return FALSE;
  }
}
