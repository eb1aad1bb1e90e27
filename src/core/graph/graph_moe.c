/* Mixture-of-experts kernel nodes of the graph IR (SP_NODE_MOE): their builder with
 * its shape checks, and their execution on the host with the deterministic f32
 * kernels of kernels_moe.c (spsim/kernels.h). */
#include "config.h"
#include "spsim/error.h"
#include "spsim/graph.h"
#include "spsim/kernels.h"
#include "graph_build.h"

#define BAD UINT32_MAX

static const char *const moe_names[SP_MOE_KERNEL_COUNT] = {
  "moe-route", "moe-permute", "moe-unpermute", "moe-unpermute-bwd", "moe-permute-bwd", "moe-route-bwd",
  "moe-relu", "moe-relu-bwd",
};
/* inputs and outputs of each kernel, in the order of sp_moe_kernel */
static const int moe_nin[SP_MOE_KERNEL_COUNT] = { 1, 2, 2, 3, 2, 3, 1, 2 };
static const int moe_nout[SP_MOE_KERNEL_COUNT] = { 3, 1, 1, 2, 1, 1, 1, 1 };

/* The dimensions of a MoE node: T tokens, E experts, H hidden, N elements (relu). */
typedef struct {
  int64_t T, E, H, N;
} moe_dims;

static int64_t numel(const sp_graph *g, uint32_t t)
{
  return (int64_t)sp_tensor_numel(sp_graph_tensor(g, t));
}

static int64_t last_dim(const sp_graph *g, uint32_t t)
{
  const sp_tensor *x = sp_graph_tensor(g, t);
  return x->shape[x->ndim - 1];
}

/* Dimensions of kernel @p w with inputs @p in and outputs @p out; FALSE when the
 * shapes disagree with sp_moe_kernel's table. */
static gboolean moe_shapes(const sp_graph *g, sp_moe_kernel w, const uint32_t *in, const uint32_t *out, int64_t K,
                           int64_t C, moe_dims *d)
{
  const int64_t R = 3 * K; /* route elements per token */
  switch (w) {
  case SP_MOE_ROUTE:
    d->E = last_dim(g, in[0]);
    d->T = numel(g, in[0]) / d->E;
    return numel(g, out[0]) == d->T * R && numel(g, out[1]) == d->T * d->E && numel(g, out[2]) == d->E &&
           K <= d->E;
  case SP_MOE_PERMUTE:
    d->H = last_dim(g, in[0]);
    d->T = numel(g, in[0]) / d->H;
    d->E = numel(g, out[0]) / (C * d->H);
    return numel(g, in[1]) == d->T * R && numel(g, out[0]) == d->E * C * d->H;
  case SP_MOE_UNPERMUTE:
  case SP_MOE_PERMUTE_BWD:
    d->H = last_dim(g, out[0]);
    d->T = numel(g, out[0]) / d->H;
    d->E = numel(g, in[0]) / (C * d->H);
    return numel(g, in[1]) == d->T * R && numel(g, in[0]) == d->E * C * d->H;
  case SP_MOE_UNPERMUTE_BWD:
    d->H = last_dim(g, in[0]);
    d->T = numel(g, in[0]) / d->H;
    d->E = numel(g, in[1]) / (C * d->H);
    return numel(g, in[1]) == d->E * C * d->H && numel(g, in[2]) == d->T * R &&
           numel(g, out[0]) == numel(g, in[1]) && numel(g, out[1]) == d->T * K;
  case SP_MOE_ROUTE_BWD:
    d->E = last_dim(g, in[0]);
    d->T = numel(g, in[0]) / d->E;
    return numel(g, in[1]) == d->T * R && numel(g, in[2]) == d->T * K && numel(g, out[0]) == d->T * d->E;
  case SP_MOE_RELU:
    d->N = numel(g, in[0]);
    return numel(g, out[0]) == d->N;
  case SP_MOE_RELU_BWD:
    d->N = numel(g, in[0]);
    return numel(g, in[1]) == d->N && numel(g, out[0]) == d->N;
  default:
    return FALSE;
  }
}

uint32_t sp_graph_moe(sp_graph *g, sp_moe_kernel which, const uint32_t *ins, int nin, const uint32_t *outs,
                      int nout, int64_t topk, int64_t capacity, int drop, GError **err)
{
  if ((unsigned)which >= SP_MOE_KERNEL_COUNT || nin != moe_nin[which] || nout != moe_nout[which]) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "moe kernel: unknown kernel %d or wrong number of tensors",
                (int)which);
    return BAD;
  }
  const char *nm = moe_names[which];
  for (int i = 0; i < nin + nout; i++) {
    const sp_tensor *t = sp_g_tensor(g, i < nin ? ins[i] : outs[i - nin], err);
    if (!t)
      return BAD;
    if (t->dtype != SP_F32) {
      g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED, "%s: data kernels run in f32; '%s' is %s", nm, t->name,
                  sp_dtype_name(t->dtype));
      return BAD;
    }
  }
  if (topk < 1 || capacity < 1 || (drop != SP_MOE_DROP_PROBS && drop != SP_MOE_DROP_POSITION)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: top-k (%" G_GINT64_FORMAT ") and capacity (%" G_GINT64_FORMAT
                ") must be at least 1 and the drop policy probs or position", nm, topk, capacity);
    return BAD;
  }
  moe_dims d = { 0 };
  if (!moe_shapes(g, which, ins, outs, topk, capacity, &d)) {
    sp_g_shape_err(err, nm, sp_graph_tensor(g, ins[0]), sp_graph_tensor(g, outs[0]),
                   "shapes as listed in sp_moe_kernel (route [T, K, 3], dispatch [E, C, H])");
    return BAD;
  }
  for (int o = 0; o < nout; o++)
    if (!sp_g_local_holders(g, ins, nin, outs[o], nm, err))
      return BAD;
  sp_node *n = sp_g_local_node(SP_NODE_MOE, ins, nin, outs[0]);
  for (int o = 1; o < nout; o++)
    n->out[o] = outs[o];
  n->nout = nout;
  n->repeat = (int32_t)which;
  n->start = topk;
  n->len = capacity;
  n->dim = drop;
  /* FLOPs counted from the kernels' loops: softmax about 4 per score (max, exp,
   * sum, divide), a weighted row 2 per element, a relu 1 per element */
  n->flops = which == SP_MOE_ROUTE || which == SP_MOE_ROUTE_BWD ? 4.0 * (double)(d.T * d.E)
             : which == SP_MOE_RELU || which == SP_MOE_RELU_BWD ? (double)d.N
                                                                 : 2.0 * (double)(d.T * topk * d.H);
  char *name = g_strdup_printf("%s:%s", nm, sp_graph_tensor(g, outs[0])->name);
  n->name = name;
  return sp_g_node_push(g, n);
}

gboolean sp_g_moe_host(const sp_graph *g, const sp_node *n, void *const *bufs, GError **err)
{
  const sp_moe_kernel w = (sp_moe_kernel)n->repeat;
  const int64_t K = n->start, C = n->len;
  moe_dims d = { 0 };
  if (!moe_shapes(g, w, n->in, n->out, K, C, &d)) {
    g_set_error(err, SP_ERROR, SP_ERROR_SHAPE, "moe kernel node '%s': inconsistent shapes", n->name);
    return FALSE;
  }
#define B(t) ((float *)bufs[sp_graph_tensor(g, (t))->storage])
  switch (w) {
  case SP_MOE_ROUTE:
    sp_kernel_moe_route_f32(B(n->in[0]), d.T, d.E, K, C, n->dim, B(n->out[0]), B(n->out[1]), B(n->out[2]));
    break;
  case SP_MOE_PERMUTE:
    sp_kernel_moe_permute_f32(B(n->in[0]), B(n->in[1]), d.T, K, d.E, C, d.H, B(n->out[0]));
    break;
  case SP_MOE_UNPERMUTE:
    sp_kernel_moe_unpermute_f32(B(n->in[0]), B(n->in[1]), d.T, K, C, d.H, B(n->out[0]));
    break;
  case SP_MOE_UNPERMUTE_BWD:
    sp_kernel_moe_unpermute_bwd_f32(B(n->in[0]), B(n->in[1]), B(n->in[2]), d.T, K, d.E, C, d.H, B(n->out[0]),
                                    B(n->out[1]));
    break;
  case SP_MOE_PERMUTE_BWD:
    sp_kernel_moe_permute_bwd_f32(B(n->in[0]), B(n->in[1]), d.T, K, C, d.H, B(n->out[0]));
    break;
  case SP_MOE_ROUTE_BWD:
    sp_kernel_moe_route_bwd_f32(B(n->in[0]), B(n->in[1]), B(n->in[2]), d.T, d.E, K, B(n->out[0]));
    break;
  case SP_MOE_RELU:
    sp_kernel_relu_f32(B(n->in[0]), d.N, B(n->out[0]));
    break;
  case SP_MOE_RELU_BWD:
    sp_kernel_relu_bwd_f32(B(n->in[0]), B(n->in[1]), d.N, B(n->out[0]));
    break;
  default:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "moe kernel node '%s': unknown kernel", n->name);
    return FALSE;
  }
#undef B
  return TRUE;
}
