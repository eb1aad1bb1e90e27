/* Whole-world verification cases (sp_graph_case, spsim/ops.h): the outputs a case
 * compares, its inputs, and the building of a case, shared by the operation cases
 * (ops_verify.c) and the checks of a layout (layout_check.c); the cases themselves
 * are in graph_case.c. Private to src/core/verify/, not installed. */
#ifndef SPSIM_GRAPH_CASE_H
#define SPSIM_GRAPH_CASE_H

#include "spsim/ops.h"
#include "ops_private.h"

#define MAX_OUTS 8
/* The seed every verification case fills its inputs with (sp_graph_data_fill_inputs);
 * builders that need the inputs at build time (a dropless MoE layer) use it too. */
#define CASE_INPUT_SEED 20240601

/* The output tensors a case compares, with their relative tolerances (0: bitwise). */
typedef struct {
  uint32_t t[MAX_OUTS];
  double tol[MAX_OUTS];
  int n;
  /* an optional further check of the reference's data against an independent
   * computation (a single-device reference), run once the reference is computed;
   * whole_ud is g_free'd with the case (after whole_clear, when set) */
  gboolean (*whole)(const sp_graph *g, sp_graph_data *ref, void *ud, GError **err);
  void *whole_ud;
  void (*whole_clear)(void *ud);
} outs_t;

/* Runs the case's further check (if any) on the reference data @p ref. */
static inline gboolean outs_whole(const outs_t *o, const sp_graph *g, sp_graph_data *ref, GError **err)
{
  return !o->whole || o->whole(g, ref, o->whole_ud, err);
}

/* Frees the further check's data. */
static inline void outs_clear(outs_t *o)
{
  if (o->whole_clear && o->whole_ud)
    o->whole_clear(o->whole_ud);
  g_clear_pointer(&o->whole_ud, g_free);
}

static inline void add_out(outs_t *o, uint32_t t, double tol)
{
  if (o->n < MAX_OUTS && t != SP_OPS_BAD) {
    o->t[o->n] = t;
    o->tol[o->n] = tol;
    o->n++;
  }
}

/* An input activation of the case, filled with the deterministic input pattern. */
static inline uint32_t input(sp_graph *g, const char *name, sp_dtype dt, int nd, const int64_t *shape,
                             GError **err)
{
  return sp_graph_tensor_new(g, name, dt, nd, shape, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, err);
}

#define CHK_HEAD_DIM 4

/* q [1, s, H, d], k and v [1, s, KV, d] per rank */
static inline gboolean qkv_inputs(sp_graph *g, int64_t s, int64_t H, int64_t KV, uint32_t *q, uint32_t *k,
                                  uint32_t *v, GError **err)
{
  int64_t sq[4] = { 1, s, H, CHK_HEAD_DIM }, skv[4] = { 1, s, KV, CHK_HEAD_DIM };
  *q = input(g, "q", SP_F32, 4, sq, err);
  *k = *q == SP_OPS_BAD ? SP_OPS_BAD : input(g, "k", SP_F32, 4, skv, err);
  *v = *k == SP_OPS_BAD ? SP_OPS_BAD : input(g, "v", SP_F32, 4, skv, err);
  return *v != SP_OPS_BAD;
}

/* Builds the graph of a case and names its outputs in @p o. */
typedef gboolean (*case_build_fn)(sp_graph *g, const void *ud, outs_t *o, GError **err);

/* Build a case on @p world ranks with @p build, fill the inputs, compute the reference and
 * lower every rank's program with its buffers (storage first, then scratch). */
sp_graph_case *sp_vc_case_new(int32_t world, case_build_fn build, const void *ud, GError **err);

#endif
