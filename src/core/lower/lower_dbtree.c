/* TREE all-reduce: NCCL's double binary tree (spsim/dbtree.h; NVIDIA/nccl
 * src/graph/trees.cc for the trees, src/device/all_reduce.h runTreeUpDown for the
 * schedule): 2 x B tree instances, each on its segment of the vector, pipelined in
 * chunks; up the tree every member reduces its children's partial sums into its
 * own and passes the sum to its parent, the root holds the total, and down the
 * tree every member receives the total from its parent and passes it on.
 *
 * Schedule of instance k, chunk x, H its largest depth: a member at depth d
 * receives chunk x from all its children at step x + H - d - 1 and reduces them in
 * the order chain child, child node 0, child node 1 (the order the reference
 * follows); it sends the sum to its parent at step x + H - d; the total comes down
 * to it at step x + H + d - 1 and goes on to its children at step x + H + d. So
 * every link carries each chunk once up and once down, in lock step. */
#include "config.h"

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/dbtree.h"

typedef struct {
  sp_dbtree_place pl;
  int32_t H;                 /* largest depth */
  uint64_t off, len, C, ce;  /* the instance's segment (elements), its chunks and their size */
  uint32_t R[3];             /* scratch of one chunk per child */
} inst;

static void chunk(const inst *I, uint64_t x, uint64_t *off, uint64_t *len)
{
  uint64_t ce = I->ce;
  *off = I->off + x * ce;
  uint64_t rest = I->len - x * ce;
  *len = rest < ce ? rest : ce;
}

void sp_lower_dbtree_allreduce(sp_lctx *c)
{
  const sp_coll_spec *sp = c->spec;
  int32_t n = c->n, me = c->me;
  size_t es = c->es;
  uint64_t cnt = sp->count, ce = sp_l_chunk_elems(sp);
  if (cnt == 0)
    return;
  int32_t B = sp_dbtree_block(n, sp->channel_block), K = sp_dbtree_instances(n, B);
  inst *I = g_new0(inst, K);
  int64_t T = 0;
  sp_l_copy(c, 0, c->out, 0, c->in, 0, cnt * es);
  for (int32_t k = 0; k < K; k++) {
    I[k].off = sp_seg_off(cnt, K, k);
    I[k].len = sp_seg_len(cnt, K, k);
    if (I[k].len == 0)
      continue;
    sp_dbtree_place_of(n, B, k, me, &I[k].pl);
    I[k].H = sp_dbtree_depth_max(n, B, k);
    I[k].ce = ce;
    I[k].C = (I[k].len + ce - 1) / ce;
    for (int j = 0; j < 3; j++)
      if (I[k].pl.child[j] >= 0)
        I[k].R[j] = sp_l_scratch(c, MIN(I[k].ce, I[k].len) * es, "tree");
    int64_t end = (int64_t)I[k].C + 2 * I[k].H + 1;
    T = end > T ? end : T;
  }
  for (int64_t t = 0; t < T; t++) {
    uint32_t ph = (uint32_t)t;
    for (int32_t k = 0; k < K; k++) {
      const inst *J = &I[k];
      if (J->C == 0)
        continue;
      int64_t d = J->pl.depth, H = J->H;
      uint64_t off, len;
      int64_t x = t - (H - d - 1); /* up: children's chunk x */
      if (x >= 0 && x < (int64_t)J->C) {
        chunk(J, (uint64_t)x, &off, &len);
        for (int j = 0; j < 3; j++)
          if (J->pl.child[j] >= 0)
            sp_l_recv(c, J->pl.child[j], ph, J->R[j], 0, len * es);
      }
      x = t - (H - d); /* up: my sum of chunk x to the parent */
      if (J->pl.parent >= 0 && x >= 0 && x < (int64_t)J->C) {
        chunk(J, (uint64_t)x, &off, &len);
        sp_l_send(c, J->pl.parent, ph, c->out, off * es, len * es);
      }
      x = t - (H + d - 1); /* down: the total of chunk x from the parent */
      if (J->pl.parent >= 0 && x >= 0 && x < (int64_t)J->C) {
        chunk(J, (uint64_t)x, &off, &len);
        sp_l_recv(c, J->pl.parent, ph, c->out, off * es, len * es);
      }
      x = t - (H + d); /* down: the total of chunk x to the children */
      if (x >= 0 && x < (int64_t)J->C) {
        chunk(J, (uint64_t)x, &off, &len);
        for (int j = 0; j < 3; j++)
          if (J->pl.child[j] >= 0)
            sp_l_send(c, J->pl.child[j], ph, c->out, off * es, len * es);
      }
    }
    sp_l_wait(c, ph);
    for (int32_t k = 0; k < K; k++) { /* the children's sums, in order; the root averages */
      const inst *J = &I[k];
      int64_t x = t - (J->H - J->pl.depth - 1);
      if (J->C == 0 || x < 0 || x >= (int64_t)J->C)
        continue;
      uint64_t off, len;
      chunk(J, (uint64_t)x, &off, &len);
      gboolean any = FALSE;
      for (int j = 0; j < 3; j++)
        if (J->pl.child[j] >= 0) {
          sp_l_reduce(c, ph, c->out, off * es, J->R[j], 0, len);
          any = TRUE;
        }
      if (any && J->pl.parent < 0)
        sp_l_avg(c, ph, c->out, off * es, len);
    }
  }
  g_free(I);
}
