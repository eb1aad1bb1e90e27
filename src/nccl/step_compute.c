/* The compute tasks of a step graph as CPU kernels: each task's GEMMs (the shapes of
 * sp_step_layer_kernels: forward T x N x K, data gradient T x K x N, weight gradient
 * K x N x T), its attention (causal, in query blocks, as single-precision GEMMs and a
 * softmax loop) and its element-wise kernels (a pass over host memory of the bytes the
 * kernel model charges), run with OpenBLAS on one thread per rank. */
#include "config.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "spsim/error.h"
#include "step_compute.h"

#ifdef SP_HAVE_CBLAS
#include <cblas.h>
#endif

/* ------------------------------------------------------------ the kernels of a task */

typedef struct {
  const char *label; /* the label of the graph's compute() call that issues it */
  sk_kernel k[4];
  int nk;
} item;

typedef struct {
  item it[64];
  int n;
} seqn;

static sk_kernel gemm(int64_t m, int64_t n, int64_t k)
{
  return (sk_kernel){ .kind = SK_GEMM, .m = m, .n = n, .k = k };
}

static sk_kernel elem(double bytes)
{
  return (sk_kernel){ .kind = SK_ELEM, .bytes = bytes };
}

static void push(seqn *s, const char *label, int nk, const sk_kernel *k)
{
  g_assert(s->n < (int)G_N_ELEMENTS(s->it));
  item *x = &s->it[s->n++];
  x->label = label;
  x->nk = nk;
  for (int i = 0; i < nk; i++) x->k[i] = k[i];
}

#define PUSH(s, label, ...)                                                                                           \
  do {                                                                                                                \
    sk_kernel ks_[] = { __VA_ARGS__ };                                                                                \
    push(s, label, (int)G_N_ELEMENTS(ks_), ks_);                                                                      \
  } while (0)

/* The shapes of one layer on one rank (sp_step_layer_kernels in step/step.c). */
typedef struct {
  int64_t T, h, d, qd, kvd, up, ffn, vocab, seq, cp;
  double heads_b;       /* micro-batch x heads / (tp sp) */
  double elem_fwd;      /* bytes of the layer's element-wise forward */
  double norms, act;    /* bytes of the two norms and of the MLP's activation (recompute=layernorm, mlp) */
  double loss, embed;   /* bytes */
  gboolean swiglu;
} shapes;

static gboolean shapes_of(const sp_step_ctx *c, const sp_layout *l, shapes *s, GError **err)
{
  const sp_model *m = c->model;
  /* byte counts: the kernel model's element-wise times at 1 byte/s and no launch cost */
  sp_step_ctx u = *c;
  u.hw.gpu.hbm_bw = 1.0;
  u.hw.gpu.hbm_eff = 0.0; /* all of the 1 byte/s: times are bytes */
  u.hw.gpu.launch = 0.0;
  u.hw.gpu.table = NULL;
  sp_layer_kernels lk;
  if (!sp_step_layer_kernels(&u, l, &lk, err)) return FALSE;
  s->T = (int64_t)l->mb * c->seq / ((int64_t)l->sp * l->cp);
  s->h = m->hidden;
  s->d = sp_model_head_dim(m);
  s->qd = m->heads / l->tp * s->d;
  s->kvd = (m->kv_heads % l->tp == 0 ? m->kv_heads / l->tp : 1) * s->d;
  s->swiglu = m->mlp == SP_MLP_SWIGLU;
  s->ffn = m->ffn / l->tp;
  s->up = (s->swiglu ? 2 : 1) * s->ffn;
  s->vocab = m->vocab / l->tp;
  s->seq = c->seq;
  s->cp = l->cp;
  s->heads_b = (double)l->mb * ((double)m->heads / ((double)l->tp * l->sp));
  s->elem_fwd = lk.elem_fwd;
  double e = sp_model_dtype_bytes(m), hs = (double)m->hidden / (l->tp_sp ? l->tp : 1);
  s->norms = 2.0 * 2.0 * e * (double)s->T * hs; /* rmod_kernels in step/step.c */
  s->act = e * (double)s->T * (double)(s->up + s->ffn);
  s->loss = lk.loss;
  s->embed = 2.0 * sp_step_local_tokens(l, c->seq) * (double)m->hidden * sp_model_dtype_bytes(m);
  return TRUE;
}

/* Attention of the layer: whole (causal over the sequence) or cp blocks of a ring, each
 * a causal block of seq/cp queries and keys (the kernel model's time / cp). */
static void push_attention(seqn *q, const shapes *s, gboolean bwd)
{
  if (s->cp > 1) {
    for (int64_t j = 0; j < s->cp; j++)
      PUSH(q, bwd ? "attention block backward" : "attention block",
           (sk_kernel){ .kind = SK_ATTN, .bwd = bwd, .m = s->seq / s->cp, .n = s->seq / s->cp, .k = s->d,
                        .batch = s->heads_b });
  } else {
    PUSH(q, bwd ? "attention backward" : "attention",
         (sk_kernel){ .kind = SK_ATTN, .bwd = bwd, .m = s->seq, .n = s->seq, .k = s->d, .batch = s->heads_b });
  }
}

/* stepgraph.c's layer_fwd */
static void layer_fwd(seqn *q, const shapes *s)
{
  PUSH(q, "norm", elem(s->elem_fwd / 2));
  PUSH(q, "QKV", gemm(s->T, s->qd + 2 * s->kvd, s->h));
  push_attention(q, s, FALSE);
  PUSH(q, "output projection", gemm(s->T, s->h, s->qd));
  PUSH(q, "residual, norm", elem(s->elem_fwd / 2));
  PUSH(q, "MLP", gemm(s->T, s->up, s->h), gemm(s->T, s->h, s->ffn));
}

/* stepgraph.c's layer_bwd after its recomputation */
static void layer_bwd(seqn *q, const shapes *s)
{
  PUSH(q, "MLP down backward", gemm(s->T, s->ffn, s->h), gemm(s->ffn, s->h, s->T));
  PUSH(q, "MLP up backward", gemm(s->T, s->h, s->up));
  PUSH(q, "weight gradient", gemm(s->h, s->up, s->T));
  PUSH(q, "residual, norm backward", elem(s->elem_fwd));
  PUSH(q, "output projection backward", gemm(s->T, s->qd, s->h), gemm(s->qd, s->h, s->T));
  push_attention(q, s, TRUE);
  PUSH(q, "QKV backward", gemm(s->T, s->h, s->qd + 2 * s->kvd));
  PUSH(q, "weight gradient", gemm(s->h, s->qd + 2 * s->kvd, s->T));
  PUSH(q, "norm backward", elem(s->elem_fwd));
}

/* The sequence of compute() calls for a task's layer and phase. */
static void sequence_of(const sp_task *t, const shapes *s, const sp_layout *l, double opt_bytes, seqn *q)
{
  q->n = 0;
  if (t->phase == SP_PHASE_STEP) {
    PUSH(q, "optimizer step", elem(opt_bytes));
  } else if (t->layer < 0) {
    /* the embedding on the first model chunk, the output layer on the last */
    int32_t vpp = MAX(l->vpp, 1), vs = MAX(t->chunk, 0) * l->pp + t->stage;
    gboolean emb = vs == 0, head = vs == l->pp * vpp - 1;
    if (t->phase == SP_PHASE_FWD) {
      if (emb) PUSH(q, "embedding", elem(s->embed));
      if (head) PUSH(q, "output layer, loss", gemm(s->T, s->vocab, s->h), elem(s->loss));
    } else {
      /* the output layer's backward is a column-parallel GEMM (column_bwd in stepgraph.c):
       * data gradient, then the weight gradient, split from it by TP collectives */
      if (head) PUSH(q, "loss backward", elem(s->loss));
      if (head) PUSH(q, "output layer backward", gemm(s->T, s->h, s->vocab));
      if (head) PUSH(q, "weight gradient", gemm(s->h, s->vocab, s->T));
      if (emb) PUSH(q, "embedding backward", elem(s->embed));
    }
  } else if (t->phase == SP_PHASE_FWD) {
    layer_fwd(q, s);
  } else if (t->phase == SP_PHASE_BWD) {
    layer_bwd(q, s);
  } else if (l->ckpt == SP_CKPT_FULL) {
    layer_fwd(q, s);
  } else if (l->ckpt == SP_CKPT_OP) {
    PUSH(q, "recompute (op policy)", elem(s->elem_fwd), gemm(s->T, s->kvd, s->h), gemm(s->T, s->h, s->qd),
         s->swiglu ? gemm(s->T, s->ffn, s->h) : gemm(s->T, s->h, s->ffn));
  } else {
    /* ckpt=selective: stepgraph.c's layer_bwd_recompute, then the attention core */
    uint32_t rm = sp_layout_rmods(l);
    if ((rm & SP_RMOD_LAYERNORM) && (rm & SP_RMOD_MLP))
      PUSH(q, "recompute (modules)", elem(s->norms), gemm(s->T, s->up, s->h), elem(s->act), gemm(s->T, s->h, s->ffn));
    else if (rm & SP_RMOD_MLP)
      PUSH(q, "recompute (modules)", gemm(s->T, s->up, s->h), elem(s->act), gemm(s->T, s->h, s->ffn));
    else if (rm & SP_RMOD_LAYERNORM)
      PUSH(q, "recompute (modules)", elem(s->norms));
    if (rm & SP_RMOD_CORE_ATTN) push_attention(q, s, FALSE);
  }
}

static gboolean is_wait(const sp_task *t)
{
  return t->kind == SP_TASK_COMPUTE && t->seconds == 0.0 && t->layer < 0 && t->phase != SP_PHASE_STEP &&
         g_str_has_prefix(t->what, "wait for ");
}

static gint64 key_of(const sp_task *t)
{
  return ((((gint64)t->mb * 64 + (t->chunk + 1)) * 1048576 + (t->layer + 1)) * 8) + t->phase;
}

static int find(const seqn *q, const char *label, int from)
{
  for (int i = from; i < q->n; i++)
    if (strcmp(q->it[i].label, label) == 0) return i;
  return -1;
}

gboolean sk_plan(const sp_stepgraph *g, const sp_step_ctx *c, const sp_layout *l, int32_t stage, GArray *kernels,
                 uint32_t **off, GError **err)
{
  shapes s;
  if (!shapes_of(c, l, &s, err)) return FALSE;
  sp_step_ctx u = *c;
  u.hw.gpu.hbm_bw = 1.0;
  u.hw.gpu.hbm_eff = 0.0;
  u.hw.gpu.launch = 0.0;
  double opt_bytes = sp_step_optimizer_time(&u, l, sp_step_stage_params(c->model, l, stage));
  const guint n = g->tasks->len;
  const sp_task *T = (const sp_task *)(void *)g->tasks->data;
  /* the next compute task of the same micro-batch, layer and phase on this stage */
  g_autofree guint *next = g_new(guint, n);
  g_autoptr(GHashTable) last = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autofree gint64 *keys = g_new0(gint64, n);
  for (guint i = n; i-- > 0;) {
    next[i] = G_MAXUINT;
    if (T[i].stage != stage || T[i].kind != SP_TASK_COMPUTE || is_wait(&T[i])) continue;
    keys[i] = key_of(&T[i]);
    gpointer v = g_hash_table_lookup(last, &keys[i]);
    if (v != NULL) next[i] = GPOINTER_TO_UINT(v) - 1;
    g_hash_table_insert(last, &keys[i], GUINT_TO_POINTER(i + 1));
  }
  /* pass 1: each task's range [p, e) of its sequence; a task whose key starts past the
   * sequence's first item had that prefix merged into the previous task of the same
   * layer and phase (the graph merges across micro-batches: the embedding of micro-batch
   * m + 1 into the output layer of micro-batch m, when nothing waits in between) */
  g_autoptr(GHashTable) cursor = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autoptr(GHashTable) last_lp = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autofree int *from_p = g_new0(int, n), *to_e = g_new0(int, n), *extra = g_new0(int, n);
  g_autofree gint64 *lp_keys = g_new0(gint64, n);
  g_autoptr(GHashTable) last_what = g_hash_table_new(g_int64_hash, g_int64_equal);
  seqn q;
  for (guint i = 0; i < n; i++) {
    if (T[i].stage != stage || T[i].kind != SP_TASK_COMPUTE || is_wait(&T[i])) continue;
    sequence_of(&T[i], &s, l, opt_bytes, &q);
    gboolean first = !g_hash_table_contains(cursor, &keys[i]);
    int from = GPOINTER_TO_INT(g_hash_table_lookup(cursor, &keys[i]));
    int p = find(&q, T[i].what, from);
    const char *prev_what = g_hash_table_lookup(last_what, &keys[i]);
    if (p < 0 && prev_what != NULL && strcmp(prev_what, T[i].what) == 0) {
      /* a further chunk of the kernel(s) the task before it holds (tpoverlap=1 splits a
       * GEMM under its TP transfers): that task runs them whole, this one nothing */
      from_p[i] = to_e[i] = 0;
      continue;
    }
    g_hash_table_insert(last_what, &keys[i], (gpointer)T[i].what);
    if (p < 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                  "the compute task '%s' (stage %d, layer %d, %s) is not a kernel spsim-run knows how to run; "
                  "use --dry-compute", T[i].what, T[i].stage, T[i].layer, sp_task_phase_name(T[i].phase));
      return FALSE;
    }
    lp_keys[i] = (gint64)(T[i].layer + 1) * 8 + T[i].phase;
    if (first && p > 0) {
      gpointer prev = g_hash_table_lookup(last_lp, &lp_keys[i]);
      if (prev == NULL) {
        g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                    "the compute task '%s' (stage %d, layer %d, %s) starts past the first kernel of its layer and "
                    "no earlier task holds the others; use --dry-compute", T[i].what, T[i].stage, T[i].layer,
                    sp_task_phase_name(T[i].phase));
        return FALSE;
      }
      extra[GPOINTER_TO_UINT(prev) - 1] = p;
    }
    int e = q.n;
    guint nx = next[i];
    while (nx != G_MAXUINT && strcmp(T[nx].what, T[i].what) == 0) nx = next[nx]; /* its chunks */
    if (nx != G_MAXUINT) {
      int f = find(&q, T[nx].what, p + 1);
      if (f > 0) e = f;
    }
    from_p[i] = p;
    to_e[i] = e;
    g_hash_table_insert(cursor, &keys[i], GINT_TO_POINTER(e));
    g_hash_table_insert(last_lp, &lp_keys[i], GUINT_TO_POINTER(i + 1));
  }
  /* pass 2: the kernels, task by task */
  *off = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < n; i++) {
    (*off)[i] = kernels->len;
    if (T[i].stage != stage || T[i].kind != SP_TASK_COMPUTE || is_wait(&T[i])) continue;
    sequence_of(&T[i], &s, l, opt_bytes, &q);
    for (int k = from_p[i]; k < to_e[i]; k++) g_array_append_vals(kernels, q.it[k].k, (guint)q.it[k].nk);
    for (int k = 0; k < extra[i]; k++) g_array_append_vals(kernels, q.it[k].k, (guint)q.it[k].nk);
  }
  (*off)[n] = kernels->len;
  return TRUE;
}

double sk_flops(const sk_kernel *k)
{
  switch (k->kind) {
  case SK_GEMM: return 2.0 * (double)k->m * (double)k->n * (double)k->k;
  case SK_ATTN: /* causal: half of the 4 b a sq skv d of the full scores forward; 2.5 times that backward */
    return (k->bwd ? 2.5 : 1.0) * 2.0 * k->batch * (double)k->m * (double)k->n * (double)k->k;
  default: return 0.0;
  }
}

/* ------------------------------------------------------------ running them */

#define ATTN_BLOCK SK_ATTN_BLOCK
#define ELEM_FLOATS SK_ELEM_FLOATS
/* FLOPs between two polls of the communication: a few milliseconds at the tens of
 * GFLOP/s of one core (spsim platform local on this machine: 13-37 GFLOP/s per rank),
 * and GEMM pieces of at least POLL_MIN_ROWS rows: thinner pieces ran at half the rate
 * of the whole product (tiny's MLP GEMM in 38-row pieces: 12.8 against 23 GFLOP/s). */
#define POLL_FLOPS 1e8
#define POLL_MIN_ROWS 128

struct sk_buffers {
  float *a, *b, *c;        /* GEMM operands */
  float *q, *kk, *v, *o;   /* attention: sq x d, skv x d, skv x d, sq x d */
  float *s, *p;            /* attention scores of a block: ATTN_BLOCK x skv */
  float *x, *y;            /* element-wise arrays */
  size_t na, nb, nc, nq, nkv, ns;
};

void sk_sizes(const GArray *kernels, size_t *na, size_t *nb, size_t *nc, size_t *nq, size_t *nkv, size_t *ns)
{
  *na = *nb = *nc = *nq = *nkv = *ns = 1;
  for (guint i = 0; i < kernels->len; i++) {
    const sk_kernel *k = &g_array_index(kernels, sk_kernel, i);
    if (k->kind == SK_GEMM) {
      *na = MAX(*na, (size_t)(k->m * k->k));
      *nb = MAX(*nb, (size_t)(k->k * k->n));
      *nc = MAX(*nc, (size_t)(k->m * k->n));
    } else if (k->kind == SK_ATTN) {
      *nq = MAX(*nq, (size_t)(k->m * k->k));
      *nkv = MAX(*nkv, (size_t)(k->n * k->k));
      *ns = MAX(*ns, (size_t)(ATTN_BLOCK * k->n));
      /* the backward's dQ, dV and dK go to the GEMM scratch */
      *na = MAX(*na, (size_t)(k->n * k->k));
      *nc = MAX(*nc, (size_t)(k->n * k->k));
    }
  }
}

double sk_buffers_bytes(const GArray *kernels)
{
  size_t na, nb, nc, nq, nkv, ns;
  sk_sizes(kernels, &na, &nb, &nc, &nq, &nkv, &ns);
  return 4.0 * ((double)na + nb + nc + 2.0 * nq + 2.0 * nkv + 2.0 * ns + 2.0 * ELEM_FLOATS);
}

float sk_fill_value(size_t i)
{
  return (float)((i * 2654435761u) % 1000u) * 1e-4f - 0.05f;
}

static float *filled(size_t n)
{
  float *p = g_new(float, n);
  for (size_t i = 0; i < n; i++) p[i] = sk_fill_value(i);
  return p;
}

sk_buffers *sk_buffers_new(const GArray *kernels)
{
  sk_buffers *b = g_new0(sk_buffers, 1);
  sk_sizes(kernels, &b->na, &b->nb, &b->nc, &b->nq, &b->nkv, &b->ns);
  b->a = filled(b->na);
  b->b = filled(b->nb);
  b->c = filled(b->nc);
  b->q = filled(b->nq);
  b->o = filled(b->nq);
  b->kk = filled(b->nkv);
  b->v = filled(b->nkv);
  b->s = filled(b->ns);
  b->p = filled(b->ns);
  b->x = filled(ELEM_FLOATS);
  b->y = filled(ELEM_FLOATS);
  return b;
}

void sk_buffers_free(sk_buffers *b)
{
  if (b == NULL) return;
  float *all[] = { b->a, b->b, b->c, b->q, b->kk, b->v, b->o, b->s, b->p, b->x, b->y };
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++) g_free(all[i]);
  g_free(b);
}

void sk_init(void)
{
#ifdef SP_HAVE_CBLAS
  /* one thread per rank: each rank stands for one GPU, and the ranks of a step share
   * the cores (OpenBLAS' own threads would oversubscribe them and spin) */
  openblas_set_num_threads(1);
#endif
}

gboolean sk_available(void)
{
#ifdef SP_HAVE_CBLAS
  return TRUE;
#else
  return FALSE;
#endif
}

#ifdef SP_HAVE_CBLAS
/* C[m,n] = A[m,k] B[k,n] (row-major), transposes as asked. */
static void mm(gboolean ta, gboolean tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c)
{
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, 1.0f, a, (blasint)(ta ? m : k), b, (blasint)(tb ? k : n), 0.0f, c, (blasint)n);
}

static void run_gemm(sk_buffers *b, const sk_kernel *k, void (*poll)(void *), void *user)
{
  /* rows in pieces of about POLL_FLOPS, at least POLL_MIN_ROWS */
  int64_t rows = MAX((int64_t)POLL_MIN_ROWS, (int64_t)(POLL_FLOPS / (2.0 * (double)k->n * (double)k->k)));
  for (int64_t r = 0; r < k->m; r += rows) {
    int64_t mr = MIN(rows, k->m - r);
    mm(FALSE, FALSE, mr, k->n, k->k, b->a + r * k->k, b->b, b->c + r * k->n);
    if (poll) poll(user);
  }
}

/* Row-wise softmax of s (rows x cols) into p. */
static void softmax(const float *s, float *p, int64_t rows, int64_t cols)
{
  for (int64_t i = 0; i < rows; i++) {
    const float *x = s + i * cols;
    float *y = p + i * cols, mx = x[0], sum = 0;
    for (int64_t j = 1; j < cols; j++) mx = MAX(mx, x[j]);
    for (int64_t j = 0; j < cols; j++) sum += (y[j] = expf(x[j] - mx));
    for (int64_t j = 0; j < cols; j++) y[j] /= sum;
  }
}

/* Causal attention of one head in query blocks: block i sees the keys up to its end
 * (scaled when sq != skv). Forward: S = Q K^T, softmax, O = P V. Backward: S again,
 * dP = dO V^T, dV = P^T dO, dS (element-wise), dQ = dS K, dK = dS^T Q: five products. */
static void run_attn(sk_buffers *b, const sk_kernel *k, void (*poll)(void *), void *user)
{
  const int64_t sq = k->m, skv = k->n, d = k->k;
  const int64_t heads = (int64_t)ceil(k->batch);
  for (int64_t h = 0; h < heads; h++) {
    for (int64_t r = 0; r < sq; r += ATTN_BLOCK) {
      int64_t br = MIN((int64_t)ATTN_BLOCK, sq - r);
      int64_t kend = MAX((int64_t)1, MIN(skv, (r + br) * skv / sq));
      const float *qb = b->q + r * d;
      mm(FALSE, TRUE, br, kend, d, qb, b->kk, b->s);
      softmax(b->s, b->p, br, kend);
      if (!k->bwd) {
        mm(FALSE, FALSE, br, d, kend, b->p, b->v, b->o + r * d);
      } else {
        const float *dob = b->o + r * d;
        mm(FALSE, TRUE, br, kend, d, dob, b->v, b->s);             /* dP */
        mm(TRUE, FALSE, kend, d, br, b->p, dob, b->c);             /* dV (into scratch) */
        for (int64_t i = 0; i < br * kend; i++) b->s[i] *= b->p[i]; /* dS */
        mm(FALSE, FALSE, br, d, kend, b->s, b->kk, b->a);          /* dQ */
        mm(TRUE, FALSE, kend, d, br, b->s, qb, b->c);              /* dK */
      }
      if (poll) poll(user);
    }
  }
}

static void run_elem(sk_buffers *b, const sk_kernel *k, void (*poll)(void *), void *user)
{
  /* y = a x + y: reads 8 and writes 4 bytes per element */
  double left = k->bytes / 12.0;
  while (left >= 1.0) {
    size_t n = (size_t)MIN(left, (double)ELEM_FLOATS);
    for (size_t i = 0; i < n; i++) b->y[i] = 0.5f * b->x[i] + 0.25f * b->y[i];
    left -= (double)n;
    if (poll) poll(user);
  }
}
#endif

void sk_run(sk_buffers *b, const sk_kernel *k, void (*poll)(void *user), void *user)
{
#ifdef SP_HAVE_CBLAS
  switch (k->kind) {
  case SK_GEMM: run_gemm(b, k, poll, user); break;
  case SK_ATTN: run_attn(b, k, poll, user); break;
  default: run_elem(b, k, poll, user); break;
  }
#else
  (void)b;
  (void)k;
  (void)poll;
  (void)user;
#endif
}

/* ------------------------------------------------------------ measuring */

static double now(void)
{
  return (double)g_get_monotonic_time() * 1e-6;
}

/* Seconds of processor time this thread has used (OpenBLAS runs on it: one thread). */
static double cpu_now(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return now();
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double sk_measure_gemm(int64_t m, int64_t n, int64_t k, double secs, gboolean cpu_time, double *cpu_rate)
{
#ifdef SP_HAVE_CBLAS
  g_autoptr(GArray) ks = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
  sk_kernel g = gemm(m, n, k);
  g_array_append_val(ks, g);
  sk_buffers *b = sk_buffers_new(ks);
  mm(FALSE, FALSE, m, n, k, b->a, b->b, b->c); /* warm-up */
  double t0 = now(), c0 = cpu_now(), t = 0, c = 0;
  long reps = 0;
  do {
    mm(FALSE, FALSE, m, n, k, b->a, b->b, b->c);
    reps++;
    t = now() - t0;
    c = cpu_now() - c0;
  } while ((cpu_time ? c : t) < secs);
  sk_buffers_free(b);
  if (cpu_rate) *cpu_rate = (double)reps * sk_flops(&g) / MAX(c, 1e-9);
  return (double)reps * sk_flops(&g) / t;
#else
  (void)m;
  (void)n;
  (void)k;
  (void)secs;
  (void)cpu_time;
  if (cpu_rate) *cpu_rate = 0.0;
  return 0.0;
#endif
}

double sk_measure_membw(double secs)
{
#ifdef SP_HAVE_CBLAS
  g_autoptr(GArray) ks = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
  sk_buffers *b = sk_buffers_new(ks);
  sk_kernel e = elem(12.0 * ELEM_FLOATS);
  run_elem(b, &e, NULL, NULL);
  double t0 = now(), t = 0;
  long reps = 0;
  do {
    run_elem(b, &e, NULL, NULL);
    reps++;
    t = now() - t0;
  } while (t < secs);
  sk_buffers_free(b);
  return (double)reps * e.bytes / t;
#else
  (void)secs;
  return 0.0;
#endif
}

double sk_measure_attn(int64_t seq, int64_t d, gboolean bwd, double secs)
{
#ifdef SP_HAVE_CBLAS
  g_autoptr(GArray) ks = g_array_new(FALSE, FALSE, sizeof(sk_kernel));
  sk_kernel a = { .kind = SK_ATTN, .bwd = bwd, .m = seq, .n = seq, .k = d, .batch = 1 };
  g_array_append_val(ks, a);
  sk_buffers *b = sk_buffers_new(ks);
  run_attn(b, &a, NULL, NULL);
  double t0 = now(), t = 0;
  long reps = 0;
  do {
    run_attn(b, &a, NULL, NULL);
    reps++;
    t = now() - t0;
  } while (t < secs);
  sk_buffers_free(b);
  return (double)reps * sk_flops(&a) / t;
#else
  (void)seq;
  (void)d;
  (void)bwd;
  (void)secs;
  return 0.0;
#endif
}

#ifndef SP_HAVE_CUBLAS
gboolean sk_gpu_available(void)
{
  return FALSE;
}

sk_gpu *sk_gpu_new(const GArray *kernels, GError **err)
{
  (void)kernels;
  g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "--device cuda: this spsim-run was built without CUDA and "
              "cuBLAS (configure --with-cuda=DIR with libcublas); use --device cpu");
  return NULL;
}

void sk_gpu_free(sk_gpu *g)
{
  (void)g;
}

const char *sk_gpu_name(const sk_gpu *g)
{
  (void)g;
  return "";
}

gboolean sk_gpu_run(sk_gpu *g, const sk_kernel *k, void (*poll)(void *user), void *user, GError **err)
{
  (void)g;
  (void)k;
  (void)poll;
  (void)user;
  g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "--device cuda: not built with cuBLAS");
  return FALSE;
}
#endif
