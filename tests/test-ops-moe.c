/* Mixture-of-experts operations against hand-derived cases: the router's top-k with
 * its tie rule and both drop policies at capacity 1 and 2, the capacity formula,
 * the per-expert counts the dispatch all-to-all exchanges, a token dropped by every
 * expert, the layer's output in closed form for diagonal experts, the single-device
 * reference catching a wrong element, the backward against central differences of
 * the loss, the refusal of bad configurations, and the all-to-all-v's blocks,
 * messages and single wait. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

/* logits of 4 tokens over 4 experts (rows), chosen for their ties:
 * t0 [2 1 1 0]: e0, then e1 and e2 tie: e1 (lower index) wins
 * t1 [0 3 3 0]: e1 and e2 tie for the top: e1 first, then e2
 * t2 [1 0 0 2]: e3, then e0
 * t3 [0 0 0 0]: all equal: e0, e1 */
static const float LOGITS[16] = { 2, 1, 1, 0, 0, 3, 3, 0, 1, 0, 0, 2, 0, 0, 0, 0 };

/* softmax of row t of LOGITS at expert e, in double */
static double prob(int t, int e)
{
  double s = 0;
  for (int j = 0; j < 4; j++)
    s += exp((double)LOGITS[t * 4 + j]);
  return exp((double)LOGITS[t * 4 + e]) / s;
}

/* expected (expert, slot) of each token's two choices; slot -1: dropped */
static void check_route(const float *route, const int want[4][2][2])
{
  for (int t = 0; t < 4; t++)
    for (int k = 0; k < 2; k++) {
      const float *r = route + (t * 2 + k) * 3;
      g_assert_cmpfloat(r[0], ==, (float)want[t][k][0]);
      g_assert_cmpfloat(r[1], ==, (float)want[t][k][1]);
      double p = want[t][k][1] >= 0 ? prob(t, want[t][k][0]) : 0.0;
      g_assert_cmpfloat(fabs(r[2] - p), <=, 1e-6);
    }
}

static void test_route_ties_and_capacity(void)
{
  float route[24], scores[16], counts[4];
  /* capacity 2: e0 is chosen by t0, t2, t3 and e1 by t0, t1, t3; e2 by t1, e3 by t2 */
  sp_kernel_moe_route_f32(LOGITS, 4, 4, 2, 2, SP_MOE_DROP_POSITION, route, scores, counts);
  /* position: e0 keeps t0, t2 (t3 dropped), e1 keeps t0, t1 (t3 dropped): t3 loses both */
  const int pos2[4][2][2] = { { { 0, 0 }, { 1, 0 } }, { { 1, 1 }, { 2, 0 } }, { { 3, 0 }, { 0, 1 } },
                              { { 0, -1 }, { 1, -1 } } };
  check_route(route, pos2);
  const float c2[4] = { 2, 2, 1, 1 };
  g_assert_cmpmem(counts, sizeof counts, c2, sizeof c2);
  for (int i = 0; i < 16; i++)
    g_assert_cmpfloat(fabs(scores[i] - prob(i / 4, i % 4)), <=, 1e-6);
  /* probs: e0's probabilities t0 0.534, t2 0.225, t3 0.25: keeps t0, t3 (slots in
   * token order); e1's t0 0.197, t1 0.476, t3 0.25: keeps t1, t3 and drops t0 */
  sp_kernel_moe_route_f32(LOGITS, 4, 4, 2, 2, SP_MOE_DROP_PROBS, route, scores, counts);
  const int prb2[4][2][2] = { { { 0, 0 }, { 1, -1 } }, { { 1, 0 }, { 2, 0 } }, { { 3, 0 }, { 0, -1 } },
                              { { 0, 1 }, { 1, 1 } } };
  check_route(route, prb2);
  g_assert_cmpmem(counts, sizeof counts, c2, sizeof c2);
  /* capacity 1, position: every expert keeps its first token */
  sp_kernel_moe_route_f32(LOGITS, 4, 4, 2, 1, SP_MOE_DROP_POSITION, route, scores, counts);
  const int pos1[4][2][2] = { { { 0, 0 }, { 1, 0 } }, { { 1, -1 }, { 2, 0 } }, { { 3, 0 }, { 0, -1 } },
                              { { 0, -1 }, { 1, -1 } } };
  check_route(route, pos1);
  const float c1[4] = { 1, 1, 1, 1 };
  g_assert_cmpmem(counts, sizeof counts, c1, sizeof c1);
  /* capacity 1, probs: e0 keeps t0, e1 keeps t1 */
  sp_kernel_moe_route_f32(LOGITS, 4, 4, 2, 1, SP_MOE_DROP_PROBS, route, scores, counts);
  const int prb1[4][2][2] = { { { 0, 0 }, { 1, -1 } }, { { 1, 0 }, { 2, 0 } }, { { 3, 0 }, { 0, -1 } },
                              { { 0, -1 }, { 1, -1 } } };
  check_route(route, prb1);
}

static void test_capacity(void)
{
  sp_moe_cfg c = { .experts = 4, .topk = 2, .ep = 1, .etp = 1, .tokens = 4, .hidden = 4, .ffn = 4,
                   .capacity_factor = 1.0 };
  /* ceil(T K / E x factor), at most T */
  g_assert_cmpint(sp_moe_capacity(&c), ==, 2);
  c.capacity_factor = 0.5;
  g_assert_cmpint(sp_moe_capacity(&c), ==, 1);
  c.capacity_factor = 1.25; /* ceil(2.5) */
  g_assert_cmpint(sp_moe_capacity(&c), ==, 3);
  c.capacity_factor = 10;
  g_assert_cmpint(sp_moe_capacity(&c), ==, 4);
  c = (sp_moe_cfg){ .experts = 3, .topk = 1, .tokens = 5, .capacity_factor = 1.0 }; /* ceil(5 / 3) */
  g_assert_cmpint(sp_moe_capacity(&c), ==, 2);
}

static void expect_refused(sp_moe_cfg c, int32_t P, const char *part)
{
  GError *err = NULL;
  g_assert_false(sp_moe_cfg_check(&c, P, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, part));
  g_assert_null(strchr(err->message, '\n'));
  g_error_free(err);
}

static void test_bad_config(void)
{
  const sp_moe_cfg ok = { .experts = 8, .topk = 2, .ep = 4, .etp = 2, .tokens = 4, .hidden = 4, .ffn = 4,
                          .capacity_factor = 1.0 };
  GError *err = NULL;
  g_assert_true(sp_moe_cfg_check(&ok, 16, &err));
  g_assert_no_error(err);
  sp_moe_cfg c = ok;
  c.topk = 9;
  expect_refused(c, 16, "top-k (9) must be between 1 and the number of experts (8)");
  c = ok;
  c.ep = 3;
  expect_refused(c, 12, "ep (3) must divide the number of experts (8)");
  expect_refused(ok, 12, "the ranks (12) must be divisible by ep x etp (4 x 2)");
  c = ok;
  c.capacity_factor = 0;
  expect_refused(c, 16, "capacity factor (0) must be > 0");
  c.capacity_factor = -1;
  expect_refused(c, 16, "capacity factor (-1) must be > 0");
  c.capacity_factor = NAN;
  expect_refused(c, 16, "must be > 0");
  c = ok;
  c.etp = 3;
  expect_refused(c, 24, "etp (3) must divide the expert FFN size (4)");
  /* the builder refuses the same before adding anything */
  int32_t ranks[12];
  for (int i = 0; i < 12; i++)
    ranks[i] = i;
  sp_groups gs = sp_groups_one(ranks, 12);
  sp_graph *g = sp_graph_new(12);
  sp_moe_layer st;
  g_assert_false(sp_op_moe_layer(g, &gs, &ok, 0, 0, 0, 0, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_cmpuint(sp_graph_n_nodes(g), ==, 0);
  g_clear_error(&err);
  sp_moe_layer_clear(&st);
  sp_graph_free(g);
}

/* Two ranks, ep 2 (rank 0 holds experts 0, 1; rank 1 experts 2, 3), x a unit vector
 * per token so that logits = rows of wr: rank 0's tokens are e_0..e_3 (the rows of
 * LOGITS), rank 1's all e_1 (every token [0 3 3 0]: experts 1, 2). Expert e is
 * diagonal: W1 = (e + 1) I, W2 = I, so a kept token's expert output is (e + 1) x. */
typedef struct {
  sp_graph *g;
  sp_moe_layer st;
  uint32_t x, wr, w1, w2, dy, dx, dwr, dw1, dw2;
  sp_graph_data *ref, *run;
} layer_case;

static void layer_case_new_dl(layer_case *lc, double factor, sp_moe_drop drop, gboolean bwd, const int64_t *dropless)
{
  static int32_t ranks[2] = { 0, 1 };
  sp_groups gs = sp_groups_one(ranks, 2);
  sp_moe_cfg c = { .experts = 4, .topk = 2, .ep = 2, .etp = 1, .tokens = 4, .hidden = 4, .ffn = 4,
                   .capacity_factor = factor, .drop = drop, .algo = SP_ALGO_AUTO, .dropless = dropless != NULL,
                   .dropless_counts = dropless };
  GError *err = NULL;
  lc->g = sp_graph_new(2);
  int64_t sx[2] = { 4, 4 }, s1[3] = { 2, 4, 4 };
  lc->x = sp_graph_tensor_new(lc->g, "x", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  lc->dy = sp_graph_tensor_new(lc->g, "dy", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  lc->wr = sp_graph_tensor_new(lc->g, "wr", SP_F32, 2, sx, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  lc->w1 = sp_graph_tensor_new(lc->g, "w1", SP_F32, 3, s1, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  lc->w2 = sp_graph_tensor_new(lc->g, "w2", SP_F32, 3, s1, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  g_assert_no_error(err);
  g_assert_true(sp_op_moe_layer(lc->g, &gs, &c, lc->x, lc->wr, lc->w1, lc->w2, &lc->st, &err));
  g_assert_no_error(err);
  lc->dx = lc->dwr = lc->dw1 = lc->dw2 = SP_NO_TENSOR;
  if (bwd) {
    g_assert_true(sp_op_moe_layer_bwd(lc->g, &lc->st, lc->dy, &lc->dx, &lc->dwr, &lc->dw1, &lc->dw2, &err));
    g_assert_no_error(err);
  }
  lc->ref = sp_graph_data_new(lc->g);
  sp_graph_data_fill_inputs(lc->ref, 7);
  for (int32_t r = 0; r < 2; r++) {
    float *x = sp_graph_data_get(lc->ref, lc->x, r), *w1 = sp_graph_data_get(lc->ref, lc->w1, r);
    float *w2 = sp_graph_data_get(lc->ref, lc->w2, r);
    memset(x, 0, 16 * sizeof(float));
    for (int t = 0; t < 4; t++)
      x[t * 4 + (r == 0 ? t : 1)] = 1.0f;
    memcpy(sp_graph_data_get(lc->ref, lc->wr, r), LOGITS, sizeof LOGITS);
    memset(w1, 0, 32 * sizeof(float));
    memset(w2, 0, 32 * sizeof(float));
    for (int l = 0; l < 2; l++)
      for (int i = 0; i < 4; i++) {
        w1[(l * 4 + i) * 4 + i] = (float)(2 * r + l + 1);
        w2[(l * 4 + i) * 4 + i] = 1.0f;
      }
  }
  lc->run = sp_graph_data_new(lc->g);
  sp_graph_data_copy(lc->run, lc->ref);
  g_assert_true(sp_graph_reference(lc->g, lc->ref, &err));
  g_assert_true(sp_graph_run_loopback(lc->g, lc->run, &err));
  g_assert_no_error(err);
}

static void layer_case_new(layer_case *lc, double factor, sp_moe_drop drop, gboolean bwd)
{
  layer_case_new_dl(lc, factor, drop, bwd, NULL);
}

static void layer_case_free(layer_case *lc)
{
  sp_graph_data_free(lc->ref);
  sp_graph_data_free(lc->run);
  sp_moe_layer_clear(&lc->st);
  sp_graph_free(lc->g);
}

static void test_layer_counts_and_output(void)
{
  layer_case lc;
  layer_case_new(&lc, 1.0, SP_MOE_DROP_POSITION, FALSE); /* C = ceil(4 x 2 / 4) = 2 */
  g_assert_cmpint(lc.st.capacity, ==, 2);
  /* kept counts: rank 0 [2 2 1 1] (test_route_ties_and_capacity), rank 1 [0 2 2 0]
   * (4 tokens for experts 1 and 2, 2 kept each). Exchanged over ep: row j = member
   * j's counts for my experts. */
  const float rc0[4] = { 2, 2, 0, 2 }, rc1[4] = { 1, 1, 2, 0 };
  for (int m = 0; m < 2; m++) {
    sp_graph_data *d = m ? lc.run : lc.ref;
    g_assert_cmpmem(sp_graph_data_get(d, lc.st.recv_counts, 0), 16, rc0, 16);
    g_assert_cmpmem(sp_graph_data_get(d, lc.st.recv_counts, 1), 16, rc1, 16);
    const float *y0 = sp_graph_data_get(d, lc.st.y, 0), *y1 = sp_graph_data_get(d, lc.st.y, 1);
    /* rank 0: t0 kept by e0 and e1: y = (p00 x 1 + p01 x 2) e_0 */
    g_assert_cmpfloat(fabs(y0[0] - (prob(0, 0) + 2 * prob(0, 1))), <=, 1e-6);
    /* t1 kept by e1 (slot 1) and e2: (2 p11 + 3 p12) e_1; t2 by e3 and e0: (4 p23 + p20) e_2 */
    g_assert_cmpfloat(fabs(y0[5] - (2 * prob(1, 1) + 3 * prob(1, 2))), <=, 1e-6);
    g_assert_cmpfloat(fabs(y0[10] - (4 * prob(2, 3) + prob(2, 0))), <=, 1e-6);
    /* t3 dropped by both of its experts: exactly zero */
    for (int h = 0; h < 4; h++)
      g_assert_cmpfloat(y0[12 + h], ==, 0.0f);
    /* rank 1: tokens 0 and 1 kept by e1 and e2 ((2 p11 + 3 p12) e_1), 2 and 3 dropped */
    for (int t = 0; t < 4; t++)
      for (int h = 0; h < 4; h++) {
        double want = t < 2 && h == 1 ? 2 * prob(1, 1) + 3 * prob(1, 2) : 0.0;
        g_assert_cmpfloat(fabs(y1[t * 4 + h] - want), <=, 1e-6);
      }
  }
  /* the run equals the reference bitwise, and the single-device reference agrees */
  GError *err = NULL;
  g_assert_true(sp_graph_data_compare(lc.g, lc.run, lc.ref, lc.st.y, 0, &err));
  g_assert_true(sp_moe_reference_check(lc.g, lc.run, &lc.st, SP_NO_TENSOR, SP_NO_TENSOR, SP_NO_TENSOR,
                                       SP_NO_TENSOR, SP_NO_TENSOR, 0, 0, &err));
  g_assert_no_error(err);
  /* one wrong element on rank 1 is found and named */
  float *y1 = sp_graph_data_get(lc.run, lc.st.y, 1);
  y1[5] += 0.5f;
  g_assert_false(sp_moe_reference_check(lc.g, lc.run, &lc.st, SP_NO_TENSOR, SP_NO_TENSOR, SP_NO_TENSOR,
                                        SP_NO_TENSOR, SP_NO_TENSOR, 0, 0, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_MISMATCH);
  g_assert_nonnull(strstr(err->message, "y differs on rank 1 at element 5"));
  g_error_free(err);
  layer_case_free(&lc);
}

/* capacity 1 (factor 0.5), probs: rank 1's four identical tokens keep one each of
 * experts 1 and 2 (equal probabilities: the first token), so only token 0 is kept */
static void test_layer_capacity_one(void)
{
  layer_case lc;
  layer_case_new(&lc, 0.5, SP_MOE_DROP_PROBS, FALSE);
  g_assert_cmpint(lc.st.capacity, ==, 1);
  const float rc0[4] = { 1, 1, 0, 1 }, rc1[4] = { 1, 1, 1, 0 };
  g_assert_cmpmem(sp_graph_data_get(lc.run, lc.st.recv_counts, 0), 16, rc0, 16);
  g_assert_cmpmem(sp_graph_data_get(lc.run, lc.st.recv_counts, 1), 16, rc1, 16);
  const float *y1 = sp_graph_data_get(lc.run, lc.st.y, 1);
  g_assert_cmpfloat(fabs(y1[1] - (2 * prob(1, 1) + 3 * prob(1, 2))), <=, 1e-6);
  for (int i = 4; i < 16; i++)
    g_assert_cmpfloat(y1[i], ==, 0.0f);
  layer_case_free(&lc);
}

/* Backward of the diagonal case: a token's gradient through expert e is
 * p (e + 1) dy on the coordinates where (e + 1) x > 0 (relu), plus the router's
 * share; with x = e_t the expert share of dx on rank 1's token 0 is
 * (2 p11 + 3 p12) dy[1] at coordinate 1 only. dw2 of expert e sums act^T (p dy). */
static void test_layer_backward(void)
{
  layer_case lc;
  layer_case_new(&lc, 1.0, SP_MOE_DROP_POSITION, TRUE);
  GError *err = NULL;
  g_assert_true(sp_moe_reference_check(lc.g, lc.run, &lc.st, lc.dy, lc.dx, lc.dwr, lc.dw1, lc.dw2, 0, 1e-5,
                                       &err));
  g_assert_no_error(err);
  /* dx of rank 1's dropped token 3 has only the router's share, which is 0: every
   * kept probability's gradient is zero for a token with no kept expert */
  const float *dx1 = sp_graph_data_get(lc.run, lc.dx, 1);
  for (int h = 0; h < 4; h++)
    g_assert_cmpfloat(dx1[12 + h], ==, 0.0f);
  /* dw2 of expert 2 (rank 1, local 0) at (1, 1): tokens reaching it with x = e_1:
   * rank 0's t1 and rank 1's t0, t1; act = 3 e_1, gradient p12 dy[1] each */
  const float *dyr0 = sp_graph_data_get(lc.run, lc.dy, 0), *dyr1 = sp_graph_data_get(lc.run, lc.dy, 1);
  double want = 3 * prob(1, 2) * ((double)dyr0[4 + 1] + (double)dyr1[1] + (double)dyr1[4 + 1]);
  const float *g2 = sp_graph_data_get(lc.run, lc.dw2, 1);
  g_assert_cmpfloat(fabs(g2[1 * 4 + 1] - want), <=, 1e-5 * fmax(1, fabs(want)));
  layer_case_free(&lc);
}

/* Dropless on the two-rank case: every routed pair kept. Counts from the router rule
 * (LOGITS' comment): rank 0 routes e0 t0 t2 t3, e1 t0 t1 t3, e2 t1, e3 t2 = [3 3 1 1];
 * rank 1's four tokens all go to e1 and e2 = [0 4 4 0]. So rank 0 sends member 1
 * (experts 2, 3) 2 rows, not the even share T K / ep = 4; rank 1 sends member 0 4 rows
 * of e1 and none of e0 (member 0 receives no token of rank 1 for expert 0). */
static void test_layer_dropless(void)
{
  static const int64_t hand[8] = { 3, 3, 1, 1, 0, 4, 4, 0 };
  layer_case lc;
  layer_case_new_dl(&lc, 1.0, SP_MOE_DROP_PROBS, TRUE, hand);
  /* the host router on the case's inputs gives the hand counts */
  for (int32_t r = 0; r < 2; r++) {
    int64_t got[4];
    sp_moe_route_counts(&lc.st.cfg, sp_graph_data_get(lc.ref, lc.x, r), sp_graph_data_get(lc.ref, lc.wr, r), got);
    g_assert_cmpmem(got, sizeof got, hand + 4 * r, sizeof got);
  }
  g_assert_cmpint(lc.st.capacity, ==, 4); /* the largest count: every block's rows */
  const float rc0[4] = { 3, 3, 0, 4 }, rc1[4] = { 1, 1, 4, 0 };
  g_assert_cmpmem(sp_graph_data_get(lc.run, lc.st.recv_counts, 0), 16, rc0, 16);
  g_assert_cmpmem(sp_graph_data_get(lc.run, lc.st.recv_counts, 1), 16, rc1, 16);
  /* y in closed form: rank 0's t3 is kept now by e0 and e1 (p = 1/4 each): 3/4 e_3;
   * rank 1's four tokens are all (2 p11 + 3 p12) e_1 */
  const float *y0 = sp_graph_data_get(lc.run, lc.st.y, 0), *y1 = sp_graph_data_get(lc.run, lc.st.y, 1);
  g_assert_cmpfloat(fabs(y0[0] - (prob(0, 0) + 2 * prob(0, 1))), <=, 1e-6);
  g_assert_cmpfloat(fabs(y0[10] - (4 * prob(2, 3) + prob(2, 0))), <=, 1e-6);
  g_assert_cmpfloat(fabs(y0[15] - 0.75), <=, 1e-6);
  for (int t = 0; t < 4; t++)
    for (int h = 0; h < 4; h++) {
      double want = h == 1 ? 2 * prob(1, 1) + 3 * prob(1, 2) : 0.0;
      g_assert_cmpfloat(fabs(y1[t * 4 + h] - want), <=, 1e-6);
    }
  GError *err = NULL;
  for (int i = 0; i < 5; i++) {
    uint32_t t = i == 0 ? lc.st.y : i == 1 ? lc.dx : i == 2 ? lc.dwr : i == 3 ? lc.dw1 : lc.dw2;
    g_assert_true(sp_graph_data_compare(lc.g, lc.run, lc.ref, t, 0, &err));
  }
  g_assert_true(sp_moe_reference_check(lc.g, lc.run, &lc.st, lc.dy, lc.dx, lc.dwr, lc.dw1, lc.dw2, 0, 1e-5,
                                       &err));
  g_assert_no_error(err);
  /* the messages carry exactly the counts: dispatch rank 0 -> 1: e2 + e3 = 2 rows,
   * 1 -> 0: e0 + e1 = 4 rows; the combine sends them back */
  static const struct { const char *name; int64_t rows; } msgs[] = {
    { "x.dispatch.dl0_0_1", 2 }, { "x.dispatch.dl0_1_0", 4 },
    { "x.expert_out.dl0_1_0", 2 }, { "x.expert_out.dl0_0_1", 4 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(msgs); i++) {
    uint32_t t = sp_graph_find_tensor(lc.g, msgs[i].name);
    g_assert_cmpuint(t, !=, SP_NO_TENSOR);
    g_assert_cmpint(sp_graph_tensor(lc.g, t)->shape[0], ==, msgs[i].rows);
    g_assert_cmpint(sp_graph_tensor(lc.g, t)->shape[1], ==, 4);
  }
  /* each expert computes on exactly its tokens: rank 0's e0 3 + 0 rows, e1 3 + 4; rank
   * 1's e2 1 + 4, e3 1 + 0 */
  static const struct { const char *name; int64_t rows; } exact[] = {
    { "x.tok0.r0", 3 }, { "x.tok1.r0", 7 }, { "x.tok0.r1", 5 }, { "x.tok1.r1", 1 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(exact); i++) {
    uint32_t t = sp_graph_find_tensor(lc.g, exact[i].name);
    g_assert_cmpuint(t, !=, SP_NO_TENSOR);
    g_assert_cmpint(sp_graph_tensor(lc.g, t)->shape[0], ==, exact[i].rows);
  }
  /* rank 0's block (l, member i) is number 2 l + i: none for rank 1's expert 0 (its
   * zero count, block 1), one for its expert 1 (block 3) */
  g_assert_cmpuint(sp_graph_find_tensor(lc.g, "x.dispatch.dl0_1_0.chunk1"), ==, SP_NO_TENSOR);
  g_assert_cmpuint(sp_graph_find_tensor(lc.g, "x.dispatch.dl0_1_0.chunk3"), !=, SP_NO_TENSOR);
  layer_case_free(&lc);
  /* counts that do not sum to tokens x topk are refused */
  static const int64_t bad[8] = { 3, 3, 1, 0, 0, 4, 4, 0 };
  int32_t ranks[2] = { 0, 1 };
  sp_groups gs = sp_groups_one(ranks, 2);
  sp_moe_cfg c = { .experts = 4, .topk = 2, .ep = 2, .etp = 1, .tokens = 4, .hidden = 4, .ffn = 4,
                   .capacity_factor = 1, .dropless = 1, .dropless_counts = bad };
  sp_graph *g = sp_graph_new(2);
  int64_t sx[2] = { 4, 4 }, s1[3] = { 2, 4, 4 };
  uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  uint32_t wr = sp_graph_tensor_new(g, "wr", SP_F32, 2, sx, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  uint32_t w1 = sp_graph_tensor_new(g, "w1", SP_F32, 3, s1, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  sp_moe_layer st;
  g_assert_false(sp_op_moe_layer(g, &gs, &c, x, wr, w1, w1, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "dropless counts of rank 0 sum to 7, not tokens x topk = 8"));
  g_clear_error(&err);
  sp_moe_layer_clear(&st);
  c.dropless_counts = NULL;
  g_assert_false(sp_op_moe_layer(g, &gs, &c, x, wr, w1, w1, &st, &err));
  g_assert_nonnull(strstr(err->message, "needs the router's per-rank counts at build time"));
  g_clear_error(&err);
  sp_moe_layer_clear(&st);
  sp_graph_free(g);
}

/* The options: dropless=1 parsed; with capacity= refused in one line naming both */
static void test_dropless_options(void)
{
  sp_moe_cfg c = { .capacity_factor = 1 };
  GError *err = NULL;
  g_assert_true(sp_moe_cfg_parse("experts=8,dropless=1", &c, &err));
  g_assert_no_error(err);
  g_assert_cmpint(c.dropless, ==, 1);
  g_assert_true(sp_moe_cfg_parse("dropless=0", &c, &err));
  g_assert_cmpint(c.dropless, ==, 0);
  g_assert_false(sp_moe_cfg_parse("dropless=1,capacity=2", &c, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "dropless=1 keeps every routed token and has no capacity"));
  g_assert_null(strchr(err->message, '\n'));
  g_clear_error(&err);
  g_assert_false(sp_moe_cfg_parse("capacity=2,dropless=1", &c, &err));
  g_clear_error(&err);
  g_assert_false(sp_moe_cfg_parse("dropless=yes", &c, &err));
  g_assert_nonnull(strstr(err->message, "dropless 'yes' must be 0 or 1"));
  g_clear_error(&err);
}

/* One rank, no expert over capacity (factor 4): the loss L = sum(y * dy) as a
 * function of one element of x, wr, w1 or w2, by central differences in double over
 * f32 runs of the graph's reference; the backward's gradients must match them (an
 * independent check of the router's softmax backward, the permutation's and the
 * expert FFN's). The inputs are fixed by hand; central differences hold only while
 * the routing and the relu do not change under +-eps, which these values keep (a
 * change would show as a mismatch, not pass). Leaving out the softmax backward's
 * dot term misses by 0.046 against the 0.002 allowed. */
typedef struct {
  sp_graph *g;
  sp_moe_layer st;
  uint32_t x, wr, w1, w2, dy, dx, dwr, dw1, dw2;
  sp_graph_data *base;
} fd_case;

static const float FD_X[6] = { 0.5f, -0.25f, 1.0f, 0.75f, 0.5f, -1.0f };   /* [2, 3] */
static const float FD_WR[12] = { 1.0f, 0.2f, -0.6f, 0.3f, -0.5f, 0.9f, 0.1f, 0.4f, 0.3f, -0.2f, 0.8f, -1.0f };

static double fd_loss(fd_case *f, uint32_t t, int64_t i, float delta)
{
  sp_graph_data *d = sp_graph_data_new(f->g);
  sp_graph_data_copy(d, f->base);
  float *p = sp_graph_data_get(d, t, 0);
  p[i] += delta;
  GError *err = NULL;
  g_assert_true(sp_graph_reference(f->g, d, &err));
  const float *y = sp_graph_data_get(d, f->st.y, 0), *dy = sp_graph_data_get(d, f->dy, 0);
  double L = 0;
  for (int j = 0; j < 6; j++)
    L += (double)y[j] * dy[j];
  sp_graph_data_free(d);
  return L;
}

static void test_backward_finite_differences(void)
{
  static int32_t rank0 = 0;
  sp_groups gs = sp_groups_one(&rank0, 1);
  sp_moe_cfg c = { .experts = 4, .topk = 2, .ep = 1, .etp = 1, .tokens = 2, .hidden = 3, .ffn = 2,
                   .capacity_factor = 4.0, .drop = SP_MOE_DROP_PROBS, .algo = SP_ALGO_AUTO };
  fd_case f;
  GError *err = NULL;
  f.g = sp_graph_new(1);
  int64_t sx[2] = { 2, 3 }, sr[2] = { 3, 4 }, s1[3] = { 4, 3, 2 }, s2[3] = { 4, 2, 3 };
  f.x = sp_graph_tensor_new(f.g, "x", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  f.dy = sp_graph_tensor_new(f.g, "dy", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  f.wr = sp_graph_tensor_new(f.g, "wr", SP_F32, 2, sr, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  f.w1 = sp_graph_tensor_new(f.g, "w1", SP_F32, 3, s1, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  f.w2 = sp_graph_tensor_new(f.g, "w2", SP_F32, 3, s2, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  g_assert_true(sp_op_moe_layer(f.g, &gs, &c, f.x, f.wr, f.w1, f.w2, &f.st, &err));
  g_assert_true(sp_op_moe_layer_bwd(f.g, &f.st, f.dy, &f.dx, &f.dwr, &f.dw1, &f.dw2, &err));
  g_assert_no_error(err);
  f.base = sp_graph_data_new(f.g);
  memcpy(sp_graph_data_get(f.base, f.x, 0), FD_X, sizeof FD_X);
  memcpy(sp_graph_data_get(f.base, f.wr, 0), FD_WR, sizeof FD_WR);
  float *w1 = sp_graph_data_get(f.base, f.w1, 0), *w2 = sp_graph_data_get(f.base, f.w2, 0);
  float *dy = sp_graph_data_get(f.base, f.dy, 0);
  for (int i = 0; i < 24; i++) {
    w1[i] = (float)((i % 3 == 1 ? -0.2 : 0.4) + 0.05 * (i / 6));
    w2[i] = (float)(0.5 * ((i * 7) % 5) - 1.0);
  }
  for (int i = 0; i < 6; i++)
    dy[i] = (float)(0.75 * (i % 4) - 1.0);
  sp_graph_data *ref = sp_graph_data_new(f.g);
  sp_graph_data_copy(ref, f.base);
  g_assert_true(sp_graph_reference(f.g, ref, &err));
  const struct { uint32_t in, grad; int64_t n; } checks[4] = {
    { f.x, f.dx, 6 }, { f.wr, f.dwr, 12 }, { f.w1, f.dw1, 24 }, { f.w2, f.dw2, 24 } };
  const float eps = 1.0f / 64;
  for (int k = 0; k < 4; k++) {
    const float *grad = sp_graph_data_get(ref, checks[k].grad, 0);
    for (int64_t i = 0; i < checks[k].n; i++) {
      double num = (fd_loss(&f, checks[k].in, i, eps) - fd_loss(&f, checks[k].in, i, -eps)) / (2.0 * eps);
      /* f32 runs: the loss carries about 1e-7 relative rounding, divided by 2 eps */
      g_assert_cmpfloat(fabs(num - grad[i]), <=, 2e-3 * fmax(1.0, fabs(num)));
    }
  }
  sp_graph_data_free(ref);
  sp_graph_data_free(f.base);
  sp_moe_layer_clear(&f.st);
  sp_graph_free(f.g);
}

/* All-to-all-v on 3 ranks, blocks of cap 2 rows of 1 column, counts (row: sender,
 * column: receiver) [[1 0 2] [2 1 0] [0 2 2]]; rank i's block j holds 100 i + 10 j + r
 * + 1 in row r. Receiver j's block i: the first counts[i][j] of those, zeros after. */
static void test_all_to_all_v(void)
{
  static const int64_t counts[9] = { 1, 0, 2, 2, 1, 0, 0, 2, 2 };
  static const float want[3][6] = { { 1, 0, 101, 102, 0, 0 }, { 0, 0, 111, 0, 211, 212 }, { 21, 22, 0, 0, 221, 222 } };
  int32_t ranks[3] = { 0, 1, 2 };
  sp_groups gs = sp_groups_one(ranks, 3);
  sp_graph *g = sp_graph_new(3);
  GError *err = NULL;
  int64_t s[2] = { 6, 1 };
  uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, s, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  uint32_t y = sp_op_all_to_all_v(g, &gs, x, counts, 2, &err);
  g_assert_no_error(err);
  sp_graph_data *ref = sp_graph_data_new(g), *run = sp_graph_data_new(g);
  for (int32_t r = 0; r < 3; r++) {
    float *p = sp_graph_data_get(ref, x, r);
    for (int j = 0; j < 3; j++)
      for (int row = 0; row < 2; row++)
        p[j * 2 + row] = (float)(100 * r + 10 * j + row + 1);
  }
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
  for (int32_t r = 0; r < 3; r++) {
    g_assert_cmpmem(sp_graph_data_get(ref, y, r), 24, want[r], 24);
    g_assert_cmpmem(sp_graph_data_get(run, y, r), 24, want[r], 24);
  }
  /* one message per pair with rows: rank 0 sends 2 rows to rank 2, rank 1 2 rows to
   * rank 0, rank 2 2 rows to rank 1 (8 bytes each); none for a zero count */
  for (int32_t r = 0; r < 3; r++) {
    sp_graph_stats st;
    g_assert_true(sp_graph_rank_stats(g, r, 8, 0, UINT32_MAX, &st, &err));
    g_assert_cmpuint(st.msgs, ==, 1);
    g_assert_cmpuint(st.bytes_sent, ==, 8);
  }
  /* every message is posted before the one wait of the rank's program */
  sp_program *p = sp_graph_lower(g, 1, &err);
  guint waits = 0;
  for (guint i = 0; i < sp_program_len(p); i++)
    waits += sp_program_step(p, i)->kind == SP_STEP_WAIT;
  g_assert_cmpuint(waits, ==, 1);
  sp_program_free(p);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  /* a count above the block size is refused */
  static const int64_t bad[9] = { 1, 0, 3, 2, 1, 0, 0, 2, 2 };
  g_assert_true(sp_op_all_to_all_v(g, &gs, x, bad, 2, &err) == SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_assert_nonnull(strstr(err->message, "count 3 from member 0 to member 2 is outside [0, 2]"));
  g_clear_error(&err);
  sp_graph_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/moe/route-ties-capacity", test_route_ties_and_capacity);
  g_test_add_func("/moe/capacity", test_capacity);
  g_test_add_func("/moe/bad-config", test_bad_config);
  g_test_add_func("/moe/layer-counts-output", test_layer_counts_and_output);
  g_test_add_func("/moe/layer-capacity-one", test_layer_capacity_one);
  g_test_add_func("/moe/layer-backward", test_layer_backward);
  g_test_add_func("/moe/backward-finite-differences", test_backward_finite_differences);
  g_test_add_func("/moe/all-to-all-v", test_all_to_all_v);
  g_test_add_func("/moe/layer-dropless", test_layer_dropless);
  g_test_add_func("/moe/dropless-options", test_dropless_options);
  return g_test_run();
}
