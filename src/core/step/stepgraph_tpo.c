/* Step graph: the chunks of Megatron-LM's --tp-comm-overlap (tpoverlap=1). */
#include "config.h"

#include <math.h>

#include "stepgraph_private.h"

/* ---------- tpoverlap=1: Megatron-LM's --tp-comm-overlap (step_tpoverlap.c has the sources) ---------- */

/* A column-parallel GEMM behind its input's all-gather as a ring exchange: the held
 * shard's GEMM chunk first, each of the tp - 1 steps passing a shard on while the GEMM of
 * the one before runs; each chunk waits for its shard. Plain: gather, then GEMM. */
void sg_tpo_ag_gemm(sb *b, double gemm, const char *what)
{
  if (b->tpo_shard < 0) {
    sg_coll_block(b, SP_STREAM_TP, b->tp_ag);
    sg_compute(b, gemm, what);
    return;
  }
  int32_t n = b->l->tp;
  uint32_t prev = b->chain, xfer = SG_NONE;
  for (int32_t j = 0; j < n; j++) {
    uint32_t x = j + 1 < n ? sg_coll_async(b, SP_STREAM_TP, b->tpo_shard, prev) : SG_NONE;
    prev = x;
    sg_need(b, xfer);
    sg_compute(b, gemm / n, what);
    xfer = x;
  }
}

/* A row-parallel GEMM in chunks, each chunk's reduce-scatter under the next chunk's GEMM
 * (Transformer Engine's pipelined split); the data path waits for the last. Plain: GEMM,
 * then the collective @p plain (reduce-scatter, or all-reduce without sequence parallelism). */
void sg_tpo_gemm_rs(sb *b, int32_t plain, double gemm, const char *what)
{
  if (b->tpo_rs < 0) {
    sg_compute(b, gemm, what);
    sg_coll_block(b, SP_STREAM_TP, plain);
    return;
  }
  int32_t k = sp_step_tpo_rs_splits();
  for (int32_t j = 0; j + 1 < k; j++) {
    sg_compute(b, gemm / k, what);
    sg_coll_async(b, SP_STREAM_TP, b->tpo_rs, b->chain);
  }
  sg_compute(b, gemm / k, what);
  sg_coll_block(b, SP_STREAM_TP, b->tpo_rs);
}
