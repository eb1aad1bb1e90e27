/* NCCL's double binary tree (spsim/dbtree.h) against trees written out by hand
 * from NVIDIA/nccl src/graph/trees.cc (ncclGetBtree, ncclGetDtree): the pictures
 * of its comments and the rules it states (parent of x with lowest bit b:
 * (x ^ b) | 2b, or x ^ b out of range; children x - b/2 and x + b/2, the latter
 * moved down while out of range; tree 1 mirrored for even N, shifted for odd). */
#include "config.h"

#include <glib.h>

#include "spsim/coll.h"
#include "spsim/dbtree.h"

/* expected links: {parent, child0, child1} per node */
static void check_tree(int32_t n, int32_t t, const int32_t (*want)[3], int32_t root)
{
  g_assert_cmpint(sp_dbtree_root(n, t), ==, root);
  for (int32_t x = 0; x < n; x++) {
    int32_t p, c0, c1;
    sp_dbtree(n, t, x, &p, &c0, &c1);
    g_assert_cmpint(p, ==, want[x][0]);
    g_assert_cmpint(c0, ==, want[x][1]);
    g_assert_cmpint(c1, ==, want[x][2]);
  }
}

static void test_four(void)
{
  /* tree 0: 0 -> 2 -> {1, 3} */
  static const int32_t t0[4][3] = { { -1, -1, 2 }, { 2, -1, -1 }, { 0, 1, 3 }, { 2, -1, -1 } };
  /* tree 1, mirrored (x -> 3 - x): 3 -> 1 -> {2, 0} */
  static const int32_t t1[4][3] = { { 1, -1, -1 }, { 3, 2, 0 }, { 1, -1, -1 }, { -1, -1, 1 } };
  check_tree(4, 0, t0, 0);
  check_tree(4, 1, t1, 3);
}

static void test_five(void)
{
  /* tree 0: 0 -> 4 -> 2 -> {1, 3} (4's second child 6 and then 5 are out of range) */
  static const int32_t t0[5][3] = { { -1, -1, 4 }, { 2, -1, -1 }, { 4, 1, 3 }, { 2, -1, -1 },
                                    { 0, 2, -1 } };
  /* tree 1, shifted (x -> x + 1 mod 5): 1 -> 0 -> 3 -> {2, 4} */
  static const int32_t t1[5][3] = { { 1, 3, -1 }, { -1, -1, 0 }, { 3, -1, -1 }, { 0, 2, 4 },
                                    { 3, -1, -1 } };
  check_tree(5, 0, t0, 0);
  check_tree(5, 1, t1, 1);
}

static void test_fourteen(void)
{
  /* the picture of trees.cc (14 ranks): 0 -> 8; 8 -> {4, 12}; 4 -> {2, 6}; 12 -> {10, 13};
   * 2 -> {1, 3}; 6 -> {5, 7}; 10 -> {9, 11}; 13's parent is 12 (xx01 -> xx00 when
   * xx10 = 14 is out of range) */
  int32_t p, c0, c1;
  sp_dbtree(14, 0, 0, &p, &c0, &c1);
  g_assert_cmpint(c1, ==, 8);
  sp_dbtree(14, 0, 8, &p, &c0, &c1);
  g_assert_cmpint(p, ==, 0);
  g_assert_cmpint(c0, ==, 4);
  g_assert_cmpint(c1, ==, 12);
  sp_dbtree(14, 0, 12, &p, &c0, &c1);
  g_assert_cmpint(c0, ==, 10);
  g_assert_cmpint(c1, ==, 13);
  sp_dbtree(14, 0, 13, &p, &c0, &c1);
  g_assert_cmpint(p, ==, 12);
  /* every node but the root has a parent that lists it, in both trees, 1 .. 40 nodes */
  for (int32_t n = 1; n <= 40; n++)
    for (int32_t t = 0; t < 2; t++) {
      int32_t roots = 0;
      for (int32_t x = 0; x < n; x++) {
        sp_dbtree(n, t, x, &p, &c0, &c1);
        if (p < 0) {
          roots++;
          g_assert_cmpint(x, ==, sp_dbtree_root(n, t));
          continue;
        }
        int32_t q, d0, d1;
        sp_dbtree(n, t, p, &q, &d0, &d1);
        g_assert_true(d0 == x || d1 == x);
      }
      g_assert_cmpint(roots, ==, 1);
    }
}

/* 4 nodes of 2 members (8 members, B = 2): 4 instances; instance 0 = tree 0 with every
 * chain starting at local 0: members 0 -> 1 (chain) and 0 -> 4 (node 2's head);
 * 4 -> 5, 4 -> 2, 4 -> 6; instance 3 = tree 1 from local 1: the root is node 3's
 * member 7 */
static void test_members(void)
{
  sp_dbtree_place pl;
  g_assert_cmpint(sp_dbtree_block(8, 2), ==, 2);
  g_assert_cmpint(sp_dbtree_block(8, 3), ==, 1); /* 3 does not divide 8 */
  g_assert_cmpint(sp_dbtree_instances(8, 2), ==, 4);
  g_assert_cmpint(sp_dbtree_instances(8, 1), ==, 2);
  sp_dbtree_place_of(8, 2, 0, 0, &pl);
  g_assert_cmpint(pl.parent, ==, -1);
  g_assert_cmpint(pl.child[0], ==, 1);
  g_assert_cmpint(pl.child[1], ==, -1);
  g_assert_cmpint(pl.child[2], ==, 4);
  g_assert_cmpint(pl.depth, ==, 0);
  sp_dbtree_place_of(8, 2, 0, 4, &pl);
  g_assert_cmpint(pl.parent, ==, 0);
  g_assert_cmpint(pl.child[0], ==, 5);
  g_assert_cmpint(pl.child[1], ==, 2);
  g_assert_cmpint(pl.child[2], ==, 6);
  g_assert_cmpint(pl.depth, ==, 1);
  sp_dbtree_place_of(8, 2, 0, 3, &pl); /* node 1's tail: 1 -> 2 (head) -> 3 */
  g_assert_cmpint(pl.parent, ==, 2);
  g_assert_cmpint(pl.depth, ==, 3);
  g_assert_cmpint(sp_dbtree_depth_max(8, 2, 0), ==, 3);
  g_assert_cmpint(sp_dbtree_root_member(8, 2, 0), ==, 0);
  g_assert_cmpint(sp_dbtree_root_member(8, 2, 3), ==, 7);
  sp_dbtree_place_of(8, 2, 3, 6, &pl); /* instance 3: node 3's chain 7 -> 6 */
  g_assert_cmpint(pl.parent, ==, 7);
  g_assert_cmpint(pl.child[0], ==, -1);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dbtree/four-nodes", test_four);
  g_test_add_func("/dbtree/five-nodes", test_five);
  g_test_add_func("/dbtree/fourteen-and-closure", test_fourteen);
  g_test_add_func("/dbtree/members", test_members);
  return g_test_run();
}
