/* PAT (NCCL 2.23+ "Parallel Aggregated Trees") for all-gather and reduce-scatter.
 *
 * Not NCCL's exact schedule: NCCL's PatAGAlgorithm / PatRSAlgorithm
 * (NVIDIA/nccl src/include/collectives.h, run by src/device/prims_simple.h)
 * aggregate several tree levels per chunk to bound buffer use. This lowering is
 * recursive doubling (all-gather) / recursive halving (reduce-scatter) with
 * PAT's step count, log2(p) exchanges over the power-of-two part p of n,
 * and PAT's message sizes (2^k blocks at step k of an all-gather, n/2^(k+1) at
 * step k of a reduce-scatter); a non-power-of-two n folds its first 2(n - p)
 * members in pairs before and after (one step each). It is the same schedule as
 * TREE's all-gather / reduce-scatter (lower_tree.c), so the reduction order of a
 * reduce-scatter is TREE's (PLAN_HALVING in reference.c). What differs from TREE
 * is the tuning: `auto` picks PAT with NCCL's constants where NCCL would (one GPU
 * per node, Simple protocol; tuning.c), on platforms whose nodes hold one GPU. */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"

gboolean sp_lower_pat(sp_lctx *c, GError **err)
{
  switch (c->spec->coll) {
  case SP_COLL_ALL_GATHER: sp_lower_tree_all_gather(c); return TRUE;
  case SP_COLL_REDUCE_SCATTER: sp_lower_tree_reduce_scatter(c); return TRUE;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                "%s has no pat algorithm (NCCL's PAT runs all-gather and reduce-scatter only): "
                "use ring, tree, direct or auto",
                sp_coll_name(c->spec->coll));
    return FALSE;
  }
}
