/* Ulysses primitives and distributed attention: hand-derived expectations and
 * single-device attention on the whole tensor, reference and loopback execution. */
#include "config.h"
#include <math.h>
#include <string.h>
#include "spsim/spsim.h"

static int32_t *iota_ranks(int32_t n)
{
  int32_t *r = g_new(int32_t, n);
  for (int32_t i = 0; i < n; i++)
    r[i] = i;
  return r;
}

static uint32_t tensor(sp_graph *g, const char *name, sp_dtype dt, int nd, const int64_t *shape)
{
  GError *err = NULL;
  uint32_t t = sp_graph_tensor_new(g, name, dt, nd, shape, SP_TENSOR_ACTIVATION, SP_INIT_INPUT, &err);
  g_assert_no_error(err);
  return t;
}

/* Reference into @p ref, loopback into a copy; returns the copy. */
static sp_graph_data *run_both(sp_graph *g, sp_graph_data *ref)
{
  GError *err = NULL;
  sp_graph_data *run = sp_graph_data_new(g);
  sp_graph_data_copy(run, ref);
  g_assert_true(sp_graph_reference(g, ref, &err));
  g_assert_no_error(err);
  g_assert_true(sp_graph_run_loopback(g, run, &err));
  g_assert_no_error(err);
  return run;
}

/* ------------------------------------------------------------ gather / split with scaling */

static void test_gather_split_scale(void)
{
  static const sp_grad_scale modes[3] = { SP_GRAD_SCALE_NONE, SP_GRAD_SCALE_UP, SP_GRAD_SCALE_DOWN };
  for (int32_t P = 1; P <= 6; P++)
    for (int m = 0; m < 3; m++) {
      int32_t *ranks = iota_ranks(P);
      sp_groups gs = sp_groups_one(ranks, P);
      sp_graph *g = sp_graph_new(P);
      GError *err = NULL;
      int64_t sx[2] = { 2, 3 }, sg[2] = { 2, 3 * P }, sw[2] = { 2, 2 * P };
      uint32_t x = tensor(g, "x", SP_F32, 2, sx), gy = tensor(g, "gy", SP_F32, 2, sg);
      uint32_t w = tensor(g, "w", SP_F32, 2, sw), gw;
      uint32_t y = sp_op_gather_fwd(g, &gs, x, 1, &err);
      uint32_t gx = sp_op_gather_bwd(g, &gs, gy, 1, modes[m], &err);
      uint32_t ws = sp_op_split_fwd(g, &gs, w, 1, &err);
      gw = tensor(g, "gws", SP_F32, 2, (int64_t[]){ 2, 2 });
      uint32_t gwf = sp_op_split_bwd(g, &gs, gw, 1, modes[m], &err);
      g_assert_no_error(err);
      sp_graph_data *ref = sp_graph_data_new(g);
      for (int32_t r = 0; r < P; r++) {
        float *px = sp_graph_data_get(ref, x, r), *pg = sp_graph_data_get(ref, gy, r);
        float *pw = sp_graph_data_get(ref, w, r), *pgw = sp_graph_data_get(ref, gw, r);
        for (int i = 0; i < 6; i++)
          px[i] = (float)(r * 10 + i);
        for (int i = 0; i < 6 * P; i++)
          pg[i] = (float)(6 * i); /* same gradient on every rank (replicated), / P exact for P | 6 */
        for (int i = 0; i < 4 * P; i++)
          pw[i] = (float)i;
        for (int i = 0; i < 4; i++)
          pgw[i] = (float)(r * 12 + 6 * i);
      }
      sp_graph_data *run = run_both(g, ref);
      double f = modes[m] == SP_GRAD_SCALE_UP ? P : modes[m] == SP_GRAD_SCALE_DOWN ? 1.0 / P : 1.0;
      for (int32_t r = 0; r < P; r++)
        for (int k = 0; k < 2; k++) {
          sp_graph_data *d = k ? run : ref;
          const float *py = sp_graph_data_get(d, y, r), *pgx = sp_graph_data_get(d, gx, r);
          const float *pws = sp_graph_data_get(d, ws, r), *pgwf = sp_graph_data_get(d, gwf, r);
          for (int a = 0; a < 2; a++) {
            for (int b = 0; b < 3 * P; b++) /* gathered: block b/3 from rank b/3 */
              g_assert_cmpfloat(py[a * 3 * P + b], ==, (float)((b / 3) * 10 + a * 3 + b % 3));
            for (int b = 0; b < 3; b++) /* own slice of the gradient, scaled */
              g_assert_cmpfloat_with_epsilon(pgx[a * 3 + b], 6.0 * (a * 3 * P + r * 3 + b) * f, 1e-4);
            for (int b = 0; b < 2; b++)
              g_assert_cmpfloat(pws[a * 2 + b], ==, (float)(a * 2 * P + r * 2 + b));
            for (int b = 0; b < 2 * P; b++)
              g_assert_cmpfloat_with_epsilon(pgwf[a * 2 * P + b], ((b / 2) * 12 + 6 * (a * 2 + b % 2)) * f, 1e-4);
          }
        }
      sp_graph_data_free(ref);
      sp_graph_data_free(run);
      sp_graph_free(g);
      g_free(ranks);
    }
}

/* ------------------------------------------------------------ slice-and-pad, unpad */

static void check_slice_pad(int64_t S, int32_t P, const int64_t *want_pos, int64_t want_pad)
{
  int32_t *ranks = iota_ranks(P);
  sp_groups gs = sp_groups_one(ranks, P);
  sp_graph *g = sp_graph_new(P);
  int64_t s[2] = { 2, S }, sp[2] = { 1, S };
  uint32_t ids = tensor(g, "ids", SP_I64, 2, s), pos = tensor(g, "pos", SP_I64, 2, sp);
  uint32_t ido, poso;
  int64_t pad = -1;
  GError *err = NULL;
  g_assert_true(sp_op_slice_and_pad(g, &gs, ids, pos, &ido, &poso, &pad, &err));
  g_assert_no_error(err);
  g_assert_cmpint(pad, ==, want_pad);
  const int64_t L = (S + pad) / P;
  g_assert_cmpint(sp_graph_tensor(g, ido)->shape[1], ==, L);
  g_assert_cmpint(sp_graph_tensor(g, poso)->shape[1], ==, S + pad);
  /* gather-and-unpad brings the ids back to [2, S]; its backward gives each rank its slice */
  uint32_t back = sp_op_gather_and_unpad(g, &gs, ido, 1, pad, 1, &err);
  g_assert_no_error(err);
  g_assert_cmpint(sp_graph_tensor(g, back)->shape[1], ==, S);
  uint32_t gb = sp_op_gather_and_unpad_bwd(g, &gs, back, 1, pad, 1, SP_GRAD_SCALE_NONE, &err);
  g_assert_no_error(err);
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < P; r++) {
    int64_t *pi = sp_graph_data_get(ref, ids, r), *pp = sp_graph_data_get(ref, pos, r);
    for (int64_t i = 0; i < 2 * S; i++)
      pi[i] = 11 + i;
    for (int64_t i = 0; i < S; i++)
      pp[i] = i;
  }
  sp_graph_data *run = run_both(g, ref);
  for (int32_t r = 0; r < P; r++)
    for (int k = 0; k < 2; k++) {
      sp_graph_data *d = k ? run : ref;
      const int64_t *o = sp_graph_data_get(d, ido, r), *po = sp_graph_data_get(d, poso, r);
      const int64_t *b = sp_graph_data_get(d, back, r), *gbp = sp_graph_data_get(d, gb, r);
      for (int row = 0; row < 2; row++)
        for (int64_t j = 0; j < L; j++) {
          int64_t col = r * L + j;
          int64_t want = col < S ? 11 + row * S + col : 0; /* padded ids are 0 */
          g_assert_cmpint(o[row * L + j], ==, want);
          g_assert_cmpint(gbp[row * L + j], ==, want);
        }
      for (int64_t j = 0; j < S + pad; j++)
        g_assert_cmpint(po[j], ==, want_pos[j]);
      for (int64_t i = 0; i < 2 * S; i++)
        g_assert_cmpint(b[i], ==, 11 + i);
    }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
  g_free(ranks);
}

static void test_slice_and_pad(void)
{
  /* S = 5, P = 2: pad 1, positions [0..4, 0]; rank 0 ids [11 12 13], rank 1 [14 15 0] */
  static const int64_t p52[] = { 0, 1, 2, 3, 4, 0 }, p43[] = { 0, 1, 2, 3, 0, 1 },
                       p63[] = { 0, 1, 2, 3, 4, 5 }, p76[] = { 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4 };
  check_slice_pad(5, 2, p52, 1);
  check_slice_pad(4, 3, p43, 2);
  check_slice_pad(6, 3, p63, 0);
  check_slice_pad(7, 6, p76, 5);
  check_slice_pad(5, 1, p52, 0);
  /* errors: position_ids with batch 2, length mismatch */
  int32_t ranks[2] = { 0, 1 };
  sp_groups gs = sp_groups_one(ranks, 2);
  sp_graph *g = sp_graph_new(2);
  uint32_t ids = tensor(g, "ids", SP_I64, 2, (int64_t[]){ 1, 5 });
  uint32_t pos2 = tensor(g, "pos2", SP_I64, 2, (int64_t[]){ 2, 5 });
  uint32_t pos4 = tensor(g, "pos4", SP_I64, 2, (int64_t[]){ 1, 4 });
  uint32_t a, b;
  GError *err = NULL;
  g_assert_false(sp_op_slice_and_pad(g, &gs, ids, pos2, &a, &b, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  g_assert_false(sp_op_slice_and_pad(g, &gs, ids, pos4, &a, &b, NULL, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_clear_error(&err);
  sp_graph_free(g);
}

/* ------------------------------------------------------------ SP data pre/post */

static void test_sp_data(void)
{
  const int32_t P = 3;
  int32_t ranks[3] = { 0, 1, 2 };
  sp_groups gs = sp_groups_one(ranks, P);
  sp_graph *g = sp_graph_new(P);
  uint32_t list = tensor(g, "list", SP_U8, 2, (int64_t[]){ 2, 4 });
  uint32_t big = tensor(g, "big", SP_U8, 2, (int64_t[]){ 6, 4 }), odd = tensor(g, "odd", SP_U8, 2, (int64_t[]){ 5, 4 });
  GError *err = NULL;
  uint32_t all = sp_op_sp_data_pre(g, &gs, list, &err);
  uint32_t mine = sp_op_sp_data_post(g, &gs, big, &err);
  g_assert_no_error(err);
  g_assert_cmpuint(sp_op_sp_data_post(g, &gs, odd, &err), ==, SP_NO_TENSOR);
  g_assert_error(err, SP_ERROR, SP_ERROR_SHAPE);
  g_assert_nonnull(strstr(err->message, "not divisible"));
  g_clear_error(&err);
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < P; r++) {
    uint8_t *l = sp_graph_data_get(ref, list, r), *bg = sp_graph_data_get(ref, big, r);
    for (int i = 0; i < 8; i++)
      l[i] = (uint8_t)(r * 8 + i); /* items 2r, 2r+1 */
    for (int i = 0; i < 24; i++)
      bg[i] = (uint8_t)(100 + i);
  }
  sp_graph_data *run = run_both(g, ref);
  for (int32_t r = 0; r < P; r++)
    for (int k = 0; k < 2; k++) {
      sp_graph_data *d = k ? run : ref;
      const uint8_t *a = sp_graph_data_get(d, all, r), *m = sp_graph_data_get(d, mine, r);
      for (int i = 0; i < 24; i++)
        g_assert_cmpint(a[i], ==, i); /* rank order, flattened */
      for (int i = 0; i < 8; i++)
        g_assert_cmpint(m[i], ==, 100 + r * 8 + i);
    }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

/* ------------------------------------------------------------ attention */

typedef struct {
  int32_t P;
  int64_t H, KV;
  sp_qkv_pack pack;
  gboolean seq_first;
  gboolean overlap;
} attn_case;

/* Copy the seq slice [s0, s0 + Sl) of a global [B,S,H,D] (or [S,B,H,D]) tensor, with an
 * optional extra pack dim (npack > 0: [B,S,npack,H,D]) built from npack tensors. */
static void slice_seq(gboolean sf, int64_t B, int64_t S, int64_t H, int64_t D, const float *const *src,
                      int npack, int64_t s0, int64_t Sl, float *dst)
{
  int np = npack ? npack : 1;
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < Sl; s++)
      for (int k = 0; k < np; k++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t c = 0; c < D; c++) {
            int64_t o = sf ? (((s * B + b) * np + k) * H + h) * D + c : (((b * Sl + s) * np + k) * H + h) * D + c;
            dst[o] = src[k][sp_attn_index(sf, B, S, H, D, b, s0 + s, h, c)];
          }
}

static void run_attn_case(const attn_case *ac)
{
  const int32_t P = ac->P;
  const int64_t B = 2, S = 12, D = 4, Sl = S / P, H = ac->H, KV = ac->KV;
  const gboolean sf = ac->seq_first;
  const sp_attn_layout lay = sf ? SP_LAYOUT_SBHD : SP_LAYOUT_BSHD;
  int32_t *ranks = iota_ranks(P);
  sp_groups gs = sp_groups_one(ranks, P);
  sp_graph *g = sp_graph_new(P);
  GError *err = NULL;
  int64_t sq[4] = { B, Sl, H, D }, skv[4] = { B, Sl, KV, D };
  if (sf) {
    sq[0] = skv[0] = Sl;
    sq[1] = skv[1] = B;
  }
  uint32_t q = SP_NO_TENSOR, k = SP_NO_TENSOR, v = SP_NO_TENSOR;
  int64_t sp5[5] = { sq[0], sq[1], 3, H, D }, skv5[5] = { sq[0], sq[1], 2, KV, D };
  if (ac->pack == SP_QKV_SEPARATE) {
    q = tensor(g, "q", SP_F32, 4, sq);
    k = tensor(g, "k", SP_F32, 4, skv);
    v = tensor(g, "v", SP_F32, 4, skv);
  } else if (ac->pack == SP_QKV_PACKED) {
    q = tensor(g, "qkv", SP_F32, 5, sp5);
  } else {
    q = tensor(g, "q", SP_F32, 4, sq);
    k = tensor(g, "kv", SP_F32, 5, skv5);
  }
  uint32_t dout = tensor(g, "dout", SP_F32, 4, sq);
  sp_ulysses_attn st;
  g_assert_true(sp_op_ulysses_attention(g, &gs, ac->pack, lay, q, k, v, ac->overlap, &st, &err));
  g_assert_no_error(err);
  uint32_t grads[3];
  g_assert_true(sp_op_ulysses_attention_bwd(g, &gs, &st, dout, grads, &err));
  g_assert_no_error(err);
  g_assert_cmpint(st.kv_repeat, ==, KV % P == 0 ? 1 : P / KV);

  /* global tensors and the single-device result */
  const uint64_t nq = (uint64_t)(B * S * H * D), nkv = (uint64_t)(B * S * KV * D);
  float *gq = g_new(float, nq), *gk = g_new(float, nkv), *gv = g_new(float, nkv), *gdo = g_new(float, nq);
  sp_fill_pattern(gq, nq, SP_F32, 1, 0);
  sp_fill_pattern(gk, nkv, SP_F32, 2, 0);
  sp_fill_pattern(gv, nkv, SP_F32, 3, 0);
  sp_fill_pattern(gdo, nq, SP_F32, 4, 0);
  float *go = g_new(float, nq), *gdq = g_new(float, nq), *gdk = g_new(float, nkv), *gdv = g_new(float, nkv);
  sp_kernel_attention_f32(sf, B, S, H, KV, D, gq, gk, gv, go);
  sp_kernel_attention_bwd_f32(sf, B, S, H, KV, D, gq, gk, gv, gdo, gdq, gdk, gdv);

  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < P; r++) {
    const float *qs[1] = { gq }, *ks[1] = { gk }, *vs[1] = { gv }, *dos[1] = { gdo };
    const float *qkv3[3] = { gq, gk, gv }, *kv2[2] = { gk, gv };
    slice_seq(sf, B, S, H, D, dos, 0, r * Sl, Sl, sp_graph_data_get(ref, dout, r));
    if (ac->pack == SP_QKV_SEPARATE) {
      slice_seq(sf, B, S, H, D, qs, 0, r * Sl, Sl, sp_graph_data_get(ref, q, r));
      slice_seq(sf, B, S, KV, D, ks, 0, r * Sl, Sl, sp_graph_data_get(ref, k, r));
      slice_seq(sf, B, S, KV, D, vs, 0, r * Sl, Sl, sp_graph_data_get(ref, v, r));
    } else if (ac->pack == SP_QKV_PACKED) {
      slice_seq(sf, B, S, H, D, qkv3, 3, r * Sl, Sl, sp_graph_data_get(ref, q, r));
    } else {
      slice_seq(sf, B, S, H, D, qs, 0, r * Sl, Sl, sp_graph_data_get(ref, q, r));
      slice_seq(sf, B, S, KV, D, kv2, 2, r * Sl, Sl, sp_graph_data_get(ref, k, r));
    }
  }
  sp_graph_data *run = run_both(g, ref);
  /* expected per-rank slices */
  float *eo = g_new(float, nq / P), *edq = g_new(float, nq / P), *edk = g_new(float, nkv / P * 2),
        *edv = g_new(float, nkv / P), *epk = g_new(float, nq / P * 3);
  /* dk / dv are bitwise when every kv head's q-head group stays on one rank in the same order */
  const double tol = st.kv_repeat > 1 ? 2e-5 : 0.0;
  for (int32_t r = 0; r < P; r++)
    for (int m = 0; m < 2; m++) {
      sp_graph_data *d = m ? run : ref;
      const float *o1[1] = { go }, *dq1[1] = { gdq }, *dk1[1] = { gdk }, *dv1[1] = { gdv };
      slice_seq(sf, B, S, H, D, o1, 0, r * Sl, Sl, eo);
      g_assert_cmpmem(sp_graph_data_get(d, st.out, r), nq / P * 4, eo, nq / P * 4);
      if (ac->pack == SP_QKV_PACKED) {
        const float *all3[3] = { gdq, gdk, gdv };
        slice_seq(sf, B, S, H, D, all3, 3, r * Sl, Sl, epk);
        g_assert_cmpmem(sp_graph_data_get(d, grads[0], r), nq / P * 12, epk, nq / P * 12);
        continue;
      }
      slice_seq(sf, B, S, H, D, dq1, 0, r * Sl, Sl, edq);
      g_assert_cmpmem(sp_graph_data_get(d, grads[0], r), nq / P * 4, edq, nq / P * 4);
      const float *got_k, *got_v;
      uint64_t n = nkv / P;
      if (ac->pack == SP_QKV_SEPARATE) {
        slice_seq(sf, B, S, KV, D, dk1, 0, r * Sl, Sl, edk);
        slice_seq(sf, B, S, KV, D, dv1, 0, r * Sl, Sl, edv);
        got_k = sp_graph_data_get(d, grads[1], r);
        got_v = sp_graph_data_get(d, grads[2], r);
        for (uint64_t i = 0; i < n; i++) {
          g_assert_cmpfloat(fabs(got_k[i] - edk[i]), <=, tol * fmax(1.0, fabs(edk[i])));
          g_assert_cmpfloat(fabs(got_v[i] - edv[i]), <=, tol * fmax(1.0, fabs(edv[i])));
        }
      } else {
        const float *kv2[2] = { gdk, gdv };
        slice_seq(sf, B, S, KV, D, kv2, 2, r * Sl, Sl, edk);
        got_k = sp_graph_data_get(d, grads[1], r);
        for (uint64_t i = 0; i < 2 * n; i++)
          g_assert_cmpfloat(fabs(got_k[i] - edk[i]), <=, tol * fmax(1.0, fabs(edk[i])));
      }
    }
  /* bytes: forward and backward each move q, k, v (replicated kv counts P heads) and the
   * output through direct all-to-alls: (P-1)/P of every tensor a rank holds */
  sp_graph_stats stt;
  g_assert_true(sp_graph_rank_stats(g, 0, 1, 0, UINT32_MAX, &stt, &err));
  const double kvh = (double)(KV * st.kv_repeat);
  const double per = (double)(B * Sl * D * 4) * (P - 1) / P;
  g_assert_cmpfloat((double)stt.bytes_sent, ==, 2.0 * per * (2 * H + 2 * kvh));
  g_assert_cmpuint(stt.bytes_intra, ==, 0);
  const double fl = (double)B * (H / P) * D * 2.0 * S * (S + 1);
  g_assert_cmpfloat(stt.flops, ==, fl * 3.5); /* forward 4 d, backward 10 d per pair */
  g_free(eo); g_free(edq); g_free(edk); g_free(edv); g_free(epk);
  g_free(gq); g_free(gk); g_free(gv); g_free(gdo); g_free(go); g_free(gdq); g_free(gdk); g_free(gdv);
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
  g_free(ranks);
}

static void test_attention(void)
{
  static const attn_case cases[] = {
    { 1, 12, 12, SP_QKV_SEPARATE, FALSE, FALSE },
    { 2, 12, 12, SP_QKV_SEPARATE, FALSE, FALSE },
    { 3, 12, 12, SP_QKV_SEPARATE, TRUE, TRUE },
    { 4, 12, 4, SP_QKV_SEPARATE, FALSE, TRUE },   /* GQA, kv heads divide */
    { 6, 12, 6, SP_QKV_SEPARATE, TRUE, FALSE },
    { 4, 12, 2, SP_QKV_SEPARATE, FALSE, FALSE },  /* replicate kv x2 */
    { 6, 12, 2, SP_QKV_SEPARATE, TRUE, TRUE },    /* replicate kv x3 */
    { 3, 12, 1, SP_QKV_SEPARATE, FALSE, TRUE },   /* MQA, replicate x3 */
    { 2, 12, 12, SP_QKV_PACKED, FALSE, FALSE },
    { 3, 6, 6, SP_QKV_PACKED, TRUE, FALSE },
    { 6, 12, 12, SP_QKV_PACKED, FALSE, FALSE },
    { 2, 12, 4, SP_QKV_KV_PACKED, FALSE, TRUE },
    { 4, 12, 2, SP_QKV_KV_PACKED, TRUE, FALSE },  /* replicate inside packed kv */
    { 3, 12, 3, SP_QKV_KV_PACKED, TRUE, TRUE },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++)
    run_attn_case(&cases[i]);
}

/* KV replication by hand: P = 2, H = 2 q heads, 1 kv head, S = 2, D = 1, q = k = 0 (uniform
 * softmax), v = (1, 3), dout = 1: out = (1, 2); each q head adds dv = (1 + 1/2, 1/2), so the
 * summed replicas give dv = (3, 1) and dk = 0. */
static void test_kv_replication_by_hand(void)
{
  int32_t ranks[2] = { 0, 1 };
  sp_groups gs = sp_groups_one(ranks, 2);
  sp_graph *g = sp_graph_new(2);
  int64_t sq[4] = { 1, 1, 2, 1 }, skv[4] = { 1, 1, 1, 1 };
  uint32_t q = tensor(g, "q", SP_F32, 4, sq), k = tensor(g, "k", SP_F32, 4, skv);
  uint32_t v = tensor(g, "v", SP_F32, 4, skv), dout = tensor(g, "dout", SP_F32, 4, sq);
  sp_ulysses_attn st;
  uint32_t grads[3];
  GError *err = NULL;
  g_assert_true(sp_op_ulysses_attention(g, &gs, SP_QKV_SEPARATE, SP_LAYOUT_BSHD, q, k, v, FALSE, &st, &err));
  g_assert_true(sp_op_ulysses_attention_bwd(g, &gs, &st, dout, grads, &err));
  g_assert_no_error(err);
  g_assert_cmpint(st.kv_repeat, ==, 2);
  sp_graph_data *ref = sp_graph_data_new(g);
  for (int32_t r = 0; r < 2; r++) {
    ((float *)sp_graph_data_get(ref, v, r))[0] = r ? 3.0f : 1.0f;
    float *pd = sp_graph_data_get(ref, dout, r);
    pd[0] = pd[1] = 1.0f;
  }
  sp_graph_data *run = run_both(g, ref);
  for (int m = 0; m < 2; m++) {
    sp_graph_data *d = m ? run : ref;
    for (int32_t r = 0; r < 2; r++) {
      const float *o = sp_graph_data_get(d, st.out, r);
      g_assert_cmpfloat(o[0], ==, r ? 2.0f : 1.0f);
      g_assert_cmpfloat(o[1], ==, r ? 2.0f : 1.0f);
      g_assert_cmpfloat(((float *)sp_graph_data_get(d, grads[2], r))[0], ==, r ? 1.0f : 3.0f);
      g_assert_cmpfloat(((float *)sp_graph_data_get(d, grads[1], r))[0], ==, 0.0f);
    }
  }
  sp_graph_data_free(ref);
  sp_graph_data_free(run);
  sp_graph_free(g);
}

static void test_attention_errors(void)
{
  GError *err = NULL;
  sp_ulysses_attn st;
  /* 12 heads on 5 ranks */
  int32_t *r5 = iota_ranks(5);
  sp_groups g5 = sp_groups_one(r5, 5);
  sp_graph *g = sp_graph_new(5);
  int64_t s[4] = { 1, 2, 12, 4 };
  uint32_t q = tensor(g, "q", SP_F32, 4, s), k = tensor(g, "k", SP_F32, 4, s), v = tensor(g, "v", SP_F32, 4, s);
  g_assert_false(sp_op_ulysses_attention(g, &g5, SP_QKV_SEPARATE, SP_LAYOUT_BSHD, q, k, v, FALSE, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_assert_nonnull(strstr(err->message, "heads do not divide"));
  g_clear_error(&err);
  sp_graph_free(g);
  g_free(r5);
  /* 4 kv heads on 6 ranks: neither divides the other */
  int32_t *r6 = iota_ranks(6);
  sp_groups g6 = sp_groups_one(r6, 6);
  g = sp_graph_new(6);
  int64_t skv[4] = { 1, 2, 4, 4 };
  q = tensor(g, "q", SP_F32, 4, s);
  k = tensor(g, "k", SP_F32, 4, skv);
  v = tensor(g, "v", SP_F32, 4, skv);
  g_assert_false(sp_op_ulysses_attention(g, &g6, SP_QKV_SEPARATE, SP_LAYOUT_BSHD, q, k, v, FALSE, &st, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_LAYOUT);
  g_assert_nonnull(strstr(err->message, "KV heads"));
  g_clear_error(&err);
  sp_graph_free(g);
  g_free(r6);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ops/ulysses/gather-split-scale", test_gather_split_scale);
  g_test_add_func("/ops/ulysses/slice-and-pad", test_slice_and_pad);
  g_test_add_func("/ops/ulysses/sp-data", test_sp_data);
  g_test_add_func("/ops/ulysses/attention", test_attention);
  g_test_add_func("/ops/ulysses/kv-replication-by-hand", test_kv_replication_by_hand);
  g_test_add_func("/ops/ulysses/attention-errors", test_attention_errors);
  return g_test_run();
}
