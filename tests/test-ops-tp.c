/* Megatron tensor parallelism: column -> row parallel linear equals one matmul chain on
 * the whole tensors (to a stated tolerance: the row-parallel sum runs in another order),
 * backward shards equal the single-device gradients, bytes and FLOPs match closed forms. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

#define TOL 1e-5

static void expect_close(const float *got, const float *want, uint64_t n)
{
  for (uint64_t i = 0; i < n; i++)
    g_assert_cmpfloat(fabs(got[i] - want[i]), <=, TOL * fmax(1.0, fabs(want[i])));
}

/* columns [c0, c0 + nc) of a row-major [rows, cols] matrix */
static void cols(const float *m, int64_t rows, int64_t ncols, int64_t c0, int64_t nc, float *out)
{
  for (int64_t r = 0; r < rows; r++)
    memcpy(out + r * nc, m + r * ncols + c0, sizeof(float) * (size_t)nc);
}

static void check_tp(int32_t P, gboolean sp)
{
  const int64_t T = 12, h = 4, f = 12, Tl = sp ? T / P : T, fl = f / P;
  int32_t *ranks = g_new(int32_t, P);
  for (int32_t i = 0; i < P; i++)
    ranks[i] = i;
  sp_groups gs = sp_groups_one(ranks, P);
  sp_graph *g = sp_graph_new(P);
  GError *err = NULL;
  int64_t sx[2] = { Tl, h }, s1[2] = { h, fl }, s2[2] = { fl, h };
  uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  uint32_t dz = sp_graph_tensor_new(g, "dz", SP_F32, 2, sx, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  uint32_t w1 = sp_graph_tensor_new(g, "w1", SP_F32, 2, s1, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  uint32_t w2 = sp_graph_tensor_new(g, "w2", SP_F32, 2, s2, SP_TENSOR_WEIGHT, SP_INIT_INPUT, &err);
  g_assert_no_error(err);
  sp_tp_mlp st;
  uint32_t dx, dw1, dw2;
  g_assert_true(sp_op_tp_mlp(g, &gs, x, w1, w2, sp, SP_ALGO_RING, &st, &err));
  g_assert_true(sp_op_tp_mlp_bwd(g, &gs, &st, dz, &dx, &dw1, &dw2, &err));
  g_assert_no_error(err);

  float *X = g_new(float, T * h), *W1 = g_new(float, h * f), *W2 = g_new(float, f * h), *DZ = g_new(float, T * h);
  sp_fill_pattern(X, T * h, SP_F32, 11, 0);
  sp_fill_pattern(W1, h * f, SP_F32, 12, 0);
  sp_fill_pattern(W2, f * h, SP_F32, 13, 0);
  sp_fill_pattern(DZ, T * h, SP_F32, 14, 0);
  float *Y = g_new(float, T * f), *Z = g_new(float, T * h), *DY = g_new(float, T * f), *DX = g_new(float, T * h);
  float *DW1 = g_new(float, h * f), *DW2 = g_new(float, f * h), *tmp = g_new(float, T * f);
  sp_kernel_matmul_f32(X, FALSE, W1, FALSE, Y, T, f, h);
  sp_kernel_matmul_f32(Y, FALSE, W2, FALSE, Z, T, h, f);
  sp_kernel_matmul_f32(DZ, FALSE, W2, TRUE, DY, T, f, h);
  sp_kernel_matmul_f32(DY, FALSE, W1, TRUE, DX, T, h, f);
  sp_kernel_matmul_f32(X, TRUE, DY, FALSE, DW1, h, f, T);
  sp_kernel_matmul_f32(Y, TRUE, DZ, FALSE, DW2, f, h, T);

  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < P; r++) {
    int64_t t0 = sp ? r * Tl : 0;
    memcpy(sp_graph_data_get(ref, x, r), X + t0 * h, sizeof(float) * (size_t)(Tl * h));
    memcpy(sp_graph_data_get(ref, dz, r), DZ + t0 * h, sizeof(float) * (size_t)(Tl * h));
    cols(W1, h, f, r * fl, fl, sp_graph_data_get(ref, w1, r));
    memcpy(sp_graph_data_get(ref, w2, r), W2 + r * fl * h, sizeof(float) * (size_t)(fl * h));
  }
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
  for (int m = 0; m < 2; m++)
    for (int32_t r = 0; r < P; r++) {
      sp_graph_data *d = m ? run : ref;
      int64_t t0 = sp ? r * Tl : 0;
      expect_close(sp_graph_data_get(d, st.z, r), Z + t0 * h, Tl * h);
      expect_close(sp_graph_data_get(d, dx, r), DX + t0 * h, Tl * h);
      cols(DW1, h, f, r * fl, fl, tmp);
      expect_close(sp_graph_data_get(d, dw1, r), tmp, h * fl);
      expect_close(sp_graph_data_get(d, dw2, r), DW2 + r * fl * h, fl * h);
    }
  /* closed forms: ring all-reduce sends 2(P-1)/P N per rank, ring all-gather and
   * reduce-scatter (P-1)/P N each: 4 (P-1)/P N in total either way (N = T h 4 bytes) */
  sp_graph_stats s;
  g_assert_true(sp_graph_rank_stats(g, 0, P, 0, UINT32_MAX, &s, &err));
  g_assert_cmpuint(s.bytes_sent, ==, (uint64_t)(4 * (P - 1) * T * h * 4 / P));
  g_assert_cmpuint(s.bytes_inter, ==, 0);
  g_assert_cmpfloat(s.flops, ==, 3.0 * 2 * 2.0 * T * h * fl); /* fwd 2 matmuls, bwd 4 */
  g_assert_cmpuint(s.mem_kind[SP_TENSOR_WEIGHT], ==, (uint64_t)(2 * h * fl * 4));
  g_free(X); g_free(W1); g_free(W2); g_free(DZ); g_free(Y); g_free(Z); g_free(DY); g_free(DX);
  g_free(DW1); g_free(DW2); g_free(tmp);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
  g_free(ranks);
}

static void test_tp(void)
{
  for (int32_t P = 1; P <= 6; P++)
    if (12 % P == 0) {
      check_tp(P, FALSE);
      check_tp(P, TRUE);
    }
}

static void test_tp_errors(void)
{
  int32_t ranks[2] = { 0, 1 };
  sp_groups gs = sp_groups_one(ranks, 2);
  sp_graph *g = sp_graph_new(2);
  GError *err = NULL;
  int64_t sx[2] = { 4, 4 }, s1[2] = { 4, 3 }, s2[2] = { 2, 4 };
  uint32_t x = sp_graph_tensor_new(g, "x", SP_F32, 2, sx, 0, SP_INIT_INPUT, &err);
  uint32_t w1 = sp_graph_tensor_new(g, "w1", SP_F32, 2, s1, 0, SP_INIT_INPUT, &err);
  uint32_t w2 = sp_graph_tensor_new(g, "w2", SP_F32, 2, s2, 0, SP_INIT_INPUT, &err);
  sp_tp_mlp st;
  g_assert_false(sp_op_tp_mlp(g, &gs, x, w1, w2, FALSE, SP_ALGO_AUTO, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  sp_graph_free(g);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ops/tp/column-row", test_tp);
  g_test_add_func("/ops/tp/errors", test_tp_errors);
  return g_test_run();
}
