/* NCCL's double binary tree (spsim/dbtree.h): the trees of src/graph/trees.cc of
 * NVIDIA/nccl and the member tree of a TREE all-reduce, shared by its lowering
 * (lower/lower_dbtree.c) and its reference (graph/reference.c). */
#include "config.h"

#include "spsim/coll.h"
#include "spsim/dbtree.h"

void sp_btree(int32_t n, int32_t node, int32_t *parent, int32_t *child0, int32_t *child1)
{
  *parent = *child0 = *child1 = -1;
  if (n <= 1 || node < 0 || node >= n)
    return;
  int32_t bit = 1;
  while (bit < n && !(bit & node))
    bit <<= 1;
  if (node == 0) { /* the root: one child, the top of the rest */
    *child1 = bit >> 1;
    return;
  }
  int32_t up = (node ^ bit) | (bit << 1);
  *parent = up >= n ? (node ^ bit) : up;
  int32_t low = bit >> 1;
  if (low == 0)
    return; /* odd: a leaf */
  *child0 = node - low;
  int32_t d1 = node + low;
  while (d1 >= n) { /* out of range: the nearest lower bit that fits */
    low >>= 1;
    d1 = low == 0 ? -1 : node + low;
  }
  *child1 = d1;
}

void sp_dbtree(int32_t n, int32_t t, int32_t node, int32_t *parent, int32_t *child0,
               int32_t *child1)
{
  if (t == 0 || n <= 1) {
    sp_btree(n, node, parent, child0, child1);
    return;
  }
  int32_t u, a, b;
  if (n % 2 == 1) { /* shifted by one */
    sp_btree(n, (node - 1 + n) % n, &u, &a, &b);
    *parent = u < 0 ? -1 : (u + 1) % n;
    *child0 = a < 0 ? -1 : (a + 1) % n;
    *child1 = b < 0 ? -1 : (b + 1) % n;
  } else { /* mirrored */
    sp_btree(n, n - 1 - node, &u, &a, &b);
    *parent = u < 0 ? -1 : n - 1 - u;
    *child0 = a < 0 ? -1 : n - 1 - a;
    *child1 = b < 0 ? -1 : n - 1 - b;
  }
}

int32_t sp_dbtree_root(int32_t n, int32_t t)
{
  if (t == 0 || n <= 1)
    return 0;
  return n % 2 == 1 ? 1 : n - 1;
}

int32_t sp_dbtree_block(int32_t n, int32_t channel_block)
{
  return channel_block >= 1 && n % channel_block == 0 ? channel_block : 1;
}

int32_t sp_dbtree_instances(int32_t n, int32_t block)
{
  (void)n;
  int32_t k = 2 * (block < 1 ? 1 : block);
  return k > SP_MAX_CHANNELS ? SP_MAX_CHANNELS : k;
}

/* depth of node x in tree t (hops to the root) */
static int32_t node_depth(int32_t N, int32_t t, int32_t x)
{
  int32_t d = 0, p, c0, c1;
  for (;;) {
    sp_dbtree(N, t, x, &p, &c0, &c1);
    if (p < 0)
      return d;
    x = p;
    d++;
  }
}

void sp_dbtree_place_of(int32_t n, int32_t block, int32_t k, int32_t m, sp_dbtree_place *out)
{
  int32_t B = sp_dbtree_block(n, block), N = n / B, t = k % 2, head = (k / 2) % B;
  int32_t node = m / B, l = m % B, pos = (l - head + B) % B;
  int32_t p, c0, c1;
  sp_dbtree(N, t, node, &p, &c0, &c1);
  out->child[0] = pos + 1 < B ? node * B + (l + 1) % B : -1;
  out->child[1] = out->child[2] = -1;
  if (pos > 0) {
    out->parent = node * B + (l - 1 + B) % B;
  } else {
    out->parent = p < 0 ? -1 : p * B + head;
    out->child[1] = c0 < 0 ? -1 : c0 * B + head;
    out->child[2] = c1 < 0 ? -1 : c1 * B + head;
  }
  out->depth = node_depth(N, t, node) + pos;
}

int32_t sp_dbtree_root_member(int32_t n, int32_t block, int32_t k)
{
  int32_t B = sp_dbtree_block(n, block);
  return sp_dbtree_root(n / B, k % 2) * B + (k / 2) % B;
}

/* The deepest node of tree @p t over @p N nodes: a walk over every node (N log N). */
static int32_t depth_max(int32_t N, int32_t t)
{
  int32_t d = 0;
  for (int32_t x = 0; x < N; x++) {
    int32_t dx = node_depth(N, t, x);
    d = dx > d ? dx : d;
  }
  return d;
}

int32_t sp_dbtree_depth_max(int32_t n, int32_t block, int32_t k)
{
  /* every member of a group asks the same question: the last answers of this thread
   * are kept (without them a group of n members costs n^2 log n) */
  static _Thread_local struct { int32_t N, t, d; } memo[4];
  static _Thread_local unsigned next;
  int32_t B = sp_dbtree_block(n, block), N = n / B, t = k % 2;
  for (unsigned i = 0; i < G_N_ELEMENTS(memo); i++)
    if (memo[i].N == N && memo[i].t == t && N > 0)
      return memo[i].d + B - 1;
  int32_t d = depth_max(N, t);
  memo[next % G_N_ELEMENTS(memo)].N = N;
  memo[next % G_N_ELEMENTS(memo)].t = t;
  memo[next % G_N_ELEMENTS(memo)].d = d;
  next++;
  return d + B - 1;
}
