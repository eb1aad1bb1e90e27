/* Shared by the step-model tests: a context on an ideal GPU for hand computations, and
 * a checked layout. */
#ifndef SPSIM_TEST_STEP_FIXTURE_H
#define SPSIM_TEST_STEP_FIXTURE_H

#include <glib.h>
#include "spsim/step.h"

/* An ideal GPU: 1 TFLOP/s on every GEMM (1 x 1 tiles on one SM: no quantisation) and in
 * attention, no memory term, no launch cost, so that element-wise kernels, the
 * embedding and the optimizer take no time. */
static inline sp_step_ctx fixture_ctx(const sp_model *m, int32_t world, int64_t seq, int64_t gb, sp_comm_price_fn price)
{
  sp_step_ctx c = { .model = m, .seq = seq, .global_batch = gb, .world = world, .gpus_per_node = 8, .price = price };
  sp_step_hw_init(&c.hw);
  c.hw.gpu = (sp_kernel_gpu){ .peak_flops = 1e12, .hbm_bw = 0, .sms = 1, .tile_m = 1, .tile_n = 1, .gemm_eff = 1.0,
                              .attn_fwd_eff = 1.0, .attn_bwd_eff = 1.0, .launch = 0 };
  return c;
}

/* @p spec parsed and checked against @p c (it must be valid). */
static inline sp_layout fixture_layout(const char *spec, const sp_step_ctx *c)
{
  sp_layout l;
  GError *err = NULL;
  g_assert_true(sp_layout_parse(spec, &l, &err));
  sp_layout_ctx lc = { .model = c->model, .world = c->world, .gpus_per_node = 8, .seq = c->seq,
                       .global_batch = c->global_batch, .mb = 1 };
  g_assert_cmpint(sp_layout_check(&l, &lc, &err), ==, SP_SKIP_NONE);
  g_assert_no_error(err);
  return l;
}

#endif
