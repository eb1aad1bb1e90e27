/* Collectives: names, validation, buffer sizes, the AUTO policy, bus bandwidth. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

static const char *const coll_names[SP_COLL_COUNT] = {
  [SP_COLL_ALL_REDUCE] = "all-reduce",         [SP_COLL_ALL_GATHER] = "all-gather",
  [SP_COLL_REDUCE_SCATTER] = "reduce-scatter", [SP_COLL_ALL_TO_ALL] = "all-to-all",
  [SP_COLL_BROADCAST] = "broadcast",           [SP_COLL_REDUCE] = "reduce",
  [SP_COLL_SEND_RECV] = "send-recv",
};

static const struct {
  const char *alias;
  sp_coll c;
} coll_aliases[] = {
  { "allreduce", SP_COLL_ALL_REDUCE },   { "all_reduce", SP_COLL_ALL_REDUCE },
  { "allgather", SP_COLL_ALL_GATHER },   { "all_gather", SP_COLL_ALL_GATHER },
  { "reducescatter", SP_COLL_REDUCE_SCATTER }, { "reduce_scatter", SP_COLL_REDUCE_SCATTER },
  { "alltoall", SP_COLL_ALL_TO_ALL },    { "all_to_all", SP_COLL_ALL_TO_ALL },
  { "bcast", SP_COLL_BROADCAST },        { "sendrecv", SP_COLL_SEND_RECV },
  { "send_recv", SP_COLL_SEND_RECV },    { "p2p", SP_COLL_SEND_RECV },
};

static const char *const algo_names[SP_ALGO_COUNT] = {
  [SP_ALGO_AUTO] = "auto", [SP_ALGO_RING] = "ring", [SP_ALGO_DIRECT] = "direct",
  [SP_ALGO_TREE] = "tree", [SP_ALGO_NVLS] = "nvls", [SP_ALGO_PAT] = "pat",
  [SP_ALGO_NVLS_TREE] = "nvls-tree", [SP_ALGO_COLLNET_DIRECT] = "collnet-direct",
  [SP_ALGO_COLLNET_CHAIN] = "collnet-chain",
};

static const char *const proto_names[SP_PROTO_COUNT] = {
  [SP_PROTO_AUTO] = "auto", [SP_PROTO_LL] = "LL", [SP_PROTO_LL128] = "LL128",
  [SP_PROTO_SIMPLE] = "Simple",
};

const char *sp_coll_name(sp_coll c)
{
  return (unsigned)c < SP_COLL_COUNT ? coll_names[c] : "invalid";
}

const char *sp_coll_semantics(sp_coll c)
{
  static const char *const what[SP_COLL_COUNT] = {
    [SP_COLL_ALL_REDUCE] = "every rank's out = op over the ranks of in",
    [SP_COLL_ALL_GATHER] = "out block j = in of group member j",
    [SP_COLL_REDUCE_SCATTER] = "out = block (my index) of op over the ranks",
    [SP_COLL_ALL_TO_ALL] = "out block j = in block (my index) of member j",
    [SP_COLL_BROADCAST] = "out = in of the root",
    [SP_COLL_REDUCE] = "the root's out = op over the ranks",
    [SP_COLL_SEND_RECV] = "the last rank's out = rank 0's in",
  };
  return (unsigned)c < SP_COLL_COUNT ? what[c] : "invalid";
}

gboolean sp_coll_parse(const char *s, sp_coll *out, GError **err)
{
  if (s != NULL) {
    for (int i = 0; i < SP_COLL_COUNT; i++)
      if (g_ascii_strcasecmp(s, coll_names[i]) == 0) {
        *out = (sp_coll)i;
        return TRUE;
      }
    for (size_t i = 0; i < G_N_ELEMENTS(coll_aliases); i++)
      if (g_ascii_strcasecmp(s, coll_aliases[i].alias) == 0) {
        *out = coll_aliases[i].c;
        return TRUE;
      }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "unknown collective '%s': use one of all-reduce, all-gather, reduce-scatter, "
              "all-to-all, broadcast, reduce, send-recv",
              s ? s : "(null)");
  return FALSE;
}

const char *sp_algo_name(sp_algo a)
{
  return (unsigned)a < SP_ALGO_COUNT ? algo_names[a] : "invalid";
}

gboolean sp_algo_parse(const char *s, sp_algo *out, GError **err)
{
  if (s != NULL) {
    for (int i = 0; i < SP_ALGO_COUNT; i++)
      if (g_ascii_strcasecmp(s, algo_names[i]) == 0) {
        *out = (sp_algo)i;
        return TRUE;
      }
    if (g_ascii_strcasecmp(s, "pairwise") == 0 || g_ascii_strcasecmp(s, "flat") == 0) {
      *out = SP_ALGO_DIRECT;
      return TRUE;
    }
    /* NCCL_ALGO's spellings (NVLSTree, CollNetDirect, CollNetChain: ncclAlgoStr, NVIDIA/nccl src/init.cc) */
    static const struct {
      const char *name;
      sp_algo a;
    } nccl_names[] = { { "nvlstree", SP_ALGO_NVLS_TREE },
                       { "collnetdirect", SP_ALGO_COLLNET_DIRECT },
                       { "collnetchain", SP_ALGO_COLLNET_CHAIN },
                       { "collnet", SP_ALGO_COLLNET_DIRECT } };
    for (gsize i = 0; i < G_N_ELEMENTS(nccl_names); i++)
      if (g_ascii_strcasecmp(s, nccl_names[i].name) == 0) {
        *out = nccl_names[i].a;
        return TRUE;
      }
  }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "unknown algorithm '%s': use one of auto, ring, direct, tree, nvls, pat, nvls-tree, "
              "collnet-direct, collnet-chain", s ? s : "(null)");
  return FALSE;
}

const char *sp_proto_name(sp_proto p)
{
  return (unsigned)p < SP_PROTO_COUNT ? proto_names[p] : "invalid";
}

gboolean sp_proto_parse(const char *s, sp_proto *out, GError **err)
{
  if (s != NULL)
    for (int i = 0; i < SP_PROTO_COUNT; i++)
      if (g_ascii_strcasecmp(s, proto_names[i]) == 0) {
        *out = (sp_proto)i;
        return TRUE;
      }
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "unknown protocol '%s': use one of auto, ll, ll128, simple", s ? s : "(null)");
  return FALSE;
}

static int cmp_i32(const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static gboolean is_reducing(sp_coll c)
{
  return c == SP_COLL_ALL_REDUCE || c == SP_COLL_REDUCE_SCATTER || c == SP_COLL_REDUCE;
}

static uint64_t in_mult(const sp_coll_spec *s)
{
  return (s->coll == SP_COLL_REDUCE_SCATTER || s->coll == SP_COLL_ALL_TO_ALL) ? (uint64_t)s->n : 1u;
}

static uint64_t out_mult(const sp_coll_spec *s)
{
  return (s->coll == SP_COLL_ALL_GATHER || s->coll == SP_COLL_ALL_TO_ALL) ? (uint64_t)s->n : 1u;
}

uint64_t sp_coll_in_count(const sp_coll_spec *spec)
{
  return spec->count * in_mult(spec);
}

uint64_t sp_coll_out_count(const sp_coll_spec *spec)
{
  return spec->count * out_mult(spec);
}

gboolean sp_coll_spec_validate(const sp_coll_spec *spec, GError **err)
{
  if (spec == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "no collective given (spec is NULL)");
    return FALSE;
  }
  if ((unsigned)spec->coll >= SP_COLL_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "invalid collective %d: use one of the sp_coll values", (int)spec->coll);
    return FALSE;
  }
  const char *cn = sp_coll_name(spec->coll);
  if ((unsigned)spec->algo >= SP_ALGO_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: invalid algorithm %d: use auto, ring, direct, tree or nvls", cn, (int)spec->algo);
    return FALSE;
  }
  if ((unsigned)spec->proto >= SP_PROTO_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: invalid protocol %d: use auto, LL, LL128 or Simple", cn, (int)spec->proto);
    return FALSE;
  }
  if ((unsigned)spec->dtype >= SP_DTYPE_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: invalid dtype %d: use f32, f16, bf16, i32, i64 or u8", cn, (int)spec->dtype);
    return FALSE;
  }
  if (is_reducing(spec->coll) && (unsigned)spec->redop >= SP_REDOP_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: invalid reduction operator %d: use sum, avg, max or min", cn, (int)spec->redop);
    return FALSE;
  }
  if (spec->n < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: group size %d: a group needs at least one member", cn, spec->n);
    return FALSE;
  }
  if (spec->n > (1 << 30)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: group size %d is larger than the supported 2^30 members", cn, spec->n);
    return FALSE;
  }
  if (spec->ranks == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: no member ranks given: set spec->ranks to the %d global ranks of the group",
                cn, spec->n);
    return FALSE;
  }
  /* distinct, non-negative ranks: sort a copy */
  int32_t *sorted = g_new(int32_t, spec->n);
  memcpy(sorted, spec->ranks, sizeof(int32_t) * (size_t)spec->n);
  for (int32_t i = 0; i < spec->n; i++)
    if (sorted[i] < 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s: member %d has negative rank %d: ranks must be >= 0", cn, i, sorted[i]);
      g_free(sorted);
      return FALSE;
    }
  qsort(sorted, (size_t)spec->n, sizeof(int32_t), cmp_i32);
  for (int32_t i = 1; i < spec->n; i++)
    if (sorted[i] == sorted[i - 1]) {
      int32_t dup = sorted[i], first = -1, second = -1;
      for (int32_t j = 0; j < spec->n; j++)
        if (spec->ranks[j] == dup) {
          if (first < 0)
            first = j;
          else if (second < 0)
            second = j;
        }
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s: rank %d appears twice in the group (members %d and %d): every member "
                  "must be a distinct rank",
                  cn, dup, first, second);
      g_free(sorted);
      return FALSE;
    }
  g_free(sorted);
  if ((spec->coll == SP_COLL_BROADCAST || spec->coll == SP_COLL_REDUCE) &&
      (spec->root < 0 || spec->root >= spec->n)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: root %d is not a group index: the root is the position of the root rank in "
                "the group, in [0, %d)",
                cn, spec->root, spec->n);
    return FALSE;
  }
  if (spec->coll == SP_COLL_SEND_RECV && spec->n != 2) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "send-recv: the group has %d members; a send-recv needs exactly 2 (member 0 "
                "sends, member 1 receives)",
                spec->n);
    return FALSE;
  }
  /* the largest buffer (n * count elements) must fit in bytes, on this host too */
  uint64_t elems, bytes;
  if (!g_uint64_checked_mul(&elems, spec->count, (uint64_t)spec->n) ||
      !g_uint64_checked_mul(&bytes, elems, sp_dtype_size(spec->dtype)) ||
      bytes > (uint64_t)G_MAXSIZE / 4) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: count %" G_GUINT64_FORMAT " of %s on %d members overflows the buffer sizes; "
                "use a smaller count",
                cn, spec->count, sp_dtype_name(spec->dtype), spec->n);
    return FALSE;
  }
  if (spec->channels < 0 || spec->channels > SP_MAX_CHANNELS) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: %d channels: use 0 or 1 for one ring, at most %d", cn, spec->channels,
                SP_MAX_CHANNELS);
    return FALSE;
  }
  if (spec->channel_block < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: channel block %d is negative: it is the number of members per node "
                "(0 or 1: no rotation)",
                cn, spec->channel_block);
    return FALSE;
  }
  if (spec->tag < 0 || spec->tag > G_MAXINT32 - 1024) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: base tag %d out of range: a collective uses tags [tag, tag + 1024), so tag "
                "must be in [0, %d]",
                cn, spec->tag, G_MAXINT32 - 1024);
    return FALSE;
  }
  return TRUE;
}

sp_algo sp_algo_choose(const sp_coll_spec *spec)
{
  if (spec->algo != SP_ALGO_AUTO)
    return spec->algo;
  switch (spec->coll) {
  case SP_COLL_ALL_REDUCE: {
    uint64_t bytes = spec->count * sp_dtype_size(spec->dtype);
    return bytes < SP_TREE_MAX_BYTES ? SP_ALGO_TREE : SP_ALGO_RING;
  }
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER: return SP_ALGO_RING;
  case SP_COLL_BROADCAST:
  case SP_COLL_REDUCE: return SP_ALGO_RING;
  case SP_COLL_ALL_TO_ALL:
  case SP_COLL_SEND_RECV:
  default: return SP_ALGO_DIRECT;
  }
}

gboolean sp_coll_algo_supported(const sp_coll_spec *spec, sp_algo algo, GError **err)
{
  if (spec->n == 1 || spec->coll == SP_COLL_SEND_RECV)
    return TRUE; /* a local copy / one message under every algorithm */
  if (spec->coll == SP_COLL_ALL_TO_ALL && algo != SP_ALGO_DIRECT) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "all-to-all has no %s algorithm: use direct (a message per pair) or auto",
                sp_algo_name(algo));
    return FALSE;
  }
  if (algo == SP_ALGO_NVLS && spec->coll != SP_COLL_ALL_REDUCE &&
      spec->coll != SP_COLL_ALL_GATHER && spec->coll != SP_COLL_REDUCE_SCATTER) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no nvls algorithm (NVLink SHARP runs all-reduce, all-gather and "
                "reduce-scatter): use ring, tree, direct or auto",
                sp_coll_name(spec->coll));
    return FALSE;
  }
  if ((algo == SP_ALGO_NVLS_TREE || algo == SP_ALGO_COLLNET_DIRECT ||
       algo == SP_ALGO_COLLNET_CHAIN) && spec->coll != SP_COLL_ALL_REDUCE) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no %s algorithm (spsim runs it for all-reduce only): use ring, tree, "
                "direct, nvls, pat or auto",
                sp_coll_name(spec->coll), sp_algo_name(algo));
    return FALSE;
  }
  if (algo == SP_ALGO_PAT && spec->coll != SP_COLL_ALL_GATHER &&
      spec->coll != SP_COLL_REDUCE_SCATTER) {
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no pat algorithm (NCCL's PAT runs all-gather and reduce-scatter only): "
                "use ring, tree, direct or auto",
                sp_coll_name(spec->coll));
    return FALSE;
  }
  return TRUE;
}

int32_t sp_coll_index_of(const sp_coll_spec *spec, int32_t rank)
{
  for (int32_t i = 0; i < spec->n; i++)
    if (spec->ranks[i] == rank)
      return i;
  return -1;
}

double sp_coll_busbw_factor(sp_coll c, int32_t n)
{
  if (n < 1)
    return 0.0;
  switch (c) {
  case SP_COLL_ALL_REDUCE: return 2.0 * (double)(n - 1) / (double)n;
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL: return (double)(n - 1) / (double)n;
  case SP_COLL_BROADCAST:
  case SP_COLL_REDUCE:
  case SP_COLL_SEND_RECV: return 1.0;
  default: return 0.0;
  }
}
