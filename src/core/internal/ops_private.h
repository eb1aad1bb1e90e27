/* Helpers shared by the operation builders, defined in ops/ops_common.c (not installed). */
#ifndef SPSIM_OPS_PRIVATE_H
#define SPSIM_OPS_PRIVATE_H

#include "spsim/ops.h"

#define SP_OPS_BAD UINT32_MAX

/* New tensor with @p ref's dtype and placement, named "<ref>.<suffix>". */
uint32_t sp_ops_like(sp_graph *g, uint32_t ref, const char *suffix, int ndim, const int64_t *shape,
                     sp_tensor_kind kind, GError **err);
/* Same, with @p ref's shape with dim @p dim set to @p size (dim -1: unchanged). */
uint32_t sp_ops_like_dim(sp_graph *g, uint32_t ref, const char *suffix, int dim, int64_t size,
                         GError **err);
/* In-place gradient scaling by P (UP: x P, DOWN: / P); returns @p t or SP_OPS_BAD. */
uint32_t sp_ops_grad_scale(sp_graph *g, uint32_t t, int32_t P, sp_grad_scale s, GError **err);

/* @p out = the concatenation along dim 0 of the @p n tensors @p ins, in parts of at
 * most SP_NODE_MAX_IO inputs (any n >= 1). */
gboolean sp_ops_concat_parts(sp_graph *g, const uint32_t *ins, int64_t n, uint32_t out, GError **err);

/* Dropless MoE (ops_moe_dropless.c): copy the build-time counts into @p st and
 * return the largest per-(rank, expert) count, the rows of every dispatch block
 * (0 on error). */
int64_t sp_ops_moe_dropless_setup(sp_moe_layer *st, const sp_groups *gs, GError **err);
/* A MoE layer's exchange over its ep group of @p in into a new tensor named @p nm:
 * the dispatch direction [E, C, H] -> [E/ep, ep C, H], or (@p back) the combine
 * direction [E/ep, ep C, H] -> [E, C, H]. An even all-to-all of the capacity slots,
 * or, dropless, exactly each (source, expert) count's rows as send-recvs. */
uint32_t sp_ops_moe_exchange(sp_graph *g, const sp_moe_layer *st, uint32_t in, gboolean back, const char *nm,
                             GError **err);
/* Dropless experts on exactly their tokens (ops_moe_dropless.c). Arrays indexed
 * [k E/ep + l] for the k-th rank of the layer's group set and local expert l.
 * compact: the received rows of slab l ([etp ep C, H], @p slab[l]) of each rank into
 * one [N, H] tensor on that rank (SP_OPS_BAD where N = 0). expand: the reverse, into
 * a new padded [E/ep, etp ep C, H] tensor (zeros after each block's rows). stack: the
 * per-rank [a, b] pieces (zeros where SP_OPS_BAD) into a new [E/ep, a, b] gradient
 * placed like @p ref. */
gboolean sp_ops_moe_compact(sp_graph *g, const sp_moe_layer *st, const uint32_t *slab, const char *nm,
                            uint32_t *exact, GError **err);
uint32_t sp_ops_moe_expand(sp_graph *g, const sp_moe_layer *st, const uint32_t *exact, const char *nm,
                           GError **err);
uint32_t sp_ops_moe_stack(sp_graph *g, const sp_moe_layer *st, const uint32_t *per, uint32_t ref, int64_t a,
                          int64_t b, const char *nm, GError **err);

#endif
