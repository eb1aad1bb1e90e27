/* Data mode of the step graph: the calls of a reduced step counted by hand from
 * Megatron-LM's layer, run over the loopback transport and checked; a corrupted
 * output is found; the priced call of a collective (count, ring channels). */
#include "config.h"
#include <glib.h>
#include "spsim/error.h"
#include "spsim/exec.h"
#include "spsim/step_replay.h"
#include "step-fixture.h"

/* 8 layers, h 64, 4 heads, ffn 256 (GELU), vocab 1000 */
static sp_model model8(void)
{
  sp_model m = { .name = (char *)"tiny8", .layers = 8, .hidden = 64, .heads = 4, .kv_heads = 4, .ffn = 256,
                 .vocab = 1000, .dtype = SP_BF16, .mlp = SP_MLP_GELU };
  return m;
}

/* Reduce, build, replay over loopback; returns the replay (checked separately). */
static sp_step_replay *replay(const sp_model *m, int32_t world, const char *spec, sp_model *rm, sp_stepgraph **gout)
{
  sp_step_ctx c = fixture_ctx(m, world, 128, 64, NULL);
  sp_layout l = fixture_layout(spec, &c), rl;
  sp_step_ctx rc;
  GError *err = NULL;
  g_assert_true(sp_step_replay_reduce(&c, &l, rm, &rc, &rl, &err));
  g_assert_no_error(err);
  sp_stepgraph *g = sp_stepgraph_build(&rc, &rl, SP_SCHED_1F1B, &err);
  g_assert_no_error(err);
  sp_step_replay *r = sp_step_replay_new(g, world, 8, 16, &err);
  g_assert_no_error(err);
  g_assert_nonnull(r);
  g_assert_true(sp_loopback_run(sp_step_replay_programs(r), sp_step_replay_nranks(r), sp_step_replay_bufs(r), &err));
  g_assert_no_error(err);
  *gout = g;
  return r;
}

/* tp=2 (with SP), pp=2 on 4 ranks, reduced to one layer per stage and 2 micro-batches.
 * Per layer and micro-batch, Megatron's layer issues 4 TP collectives forward (all-gather
 * before QKV and before the MLP, reduce-scatter after the projection and after the MLP)
 * and 6 backward (the row-parallel GEMMs' 2 all-gathers of their output gradient, the
 * column-parallel GEMMs' 2 re-gathers of their input and 2 reduce-scatters of the data
 * gradient); per micro-batch the embedding adds 2 on the first stage (its reduce-scatter
 * and the backward all-gather) and the output layer 3 on the last (all-gather forward,
 * re-gather and reduce-scatter backward). 2 micro-batches: 2 x (10 + 2 + 10 + 3) = 50. Sends: activations forward and gradients backward per
 * micro-batch: 4. Ranks: the representatives 0 and 2 and their TP partners 1 and 3. */
static void test_tp_pp_counts(void)
{
  sp_model m = model8(), rm;
  sp_stepgraph *g = NULL;
  g_autoptr(sp_step_replay) r = replay(&m, 4, "tp=2,pp=2", &rm, &g);
  g_assert_cmpint(rm.layers, ==, 2);
  g_assert_cmpint(g->microbatches, ==, 2);
  guint colls, sends;
  sp_step_replay_counts(r, &colls, &sends);
  g_assert_cmpuint(colls, ==, 50);
  g_assert_cmpuint(sends, ==, 4);
  g_assert_cmpint(sp_step_replay_nranks(r), ==, 4);
  const int32_t *ranks = sp_step_replay_ranks(r);
  for (int32_t i = 0; i < 4; i++) g_assert_cmpint(ranks[i], ==, i);
  int32_t bad = -1;
  guint call = 0;
  uint64_t off = 0;
  GError *err = NULL;
  g_assert_true(sp_step_replay_check(r, &bad, &call, &off, &err));
  g_assert_no_error(err);
  /* each rank alone: every one of the 4 takes part in a TP collective, so has outputs */
  uint64_t sums[4];
  for (int32_t i = 0; i < 4; i++) {
    g_assert_true(sp_step_replay_has_outputs(r, i));
    g_assert_true(sp_step_replay_check_rank(r, i, &call, &off, &err));
    g_assert_no_error(err);
    sums[i] = sp_step_replay_checksum(r, i);
  }
  g_assert_false(sp_step_replay_has_outputs(r, 4));
  g_assert_false(sp_step_replay_check_rank(r, 4, &call, &off, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_INVALID);
  g_clear_error(&err);
  /* a flipped byte on rank 3 is found on rank 3 */
  g_assert_true(sp_step_replay_corrupt(r, 3));
  g_assert_false(sp_step_replay_check(r, &bad, &call, &off, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_MISMATCH);
  g_clear_error(&err);
  g_assert_cmpint(bad, ==, 3);
  /* ... by rank 3's own check, at its first output's first byte, and by no other rank's */
  g_assert_false(sp_step_replay_check_rank(r, 3, &call, &off, &err));
  g_assert_error(err, SP_ERROR, SP_ERROR_MISMATCH);
  g_clear_error(&err);
  g_assert_cmpuint(off, ==, 0);
  for (int32_t i = 0; i < 3; i++) {
    g_assert_true(sp_step_replay_check_rank(r, i, NULL, NULL, &err));
    g_assert_cmpuint(sp_step_replay_checksum(r, i), ==, sums[i]);
  }
  g_assert_cmpuint(sp_step_replay_checksum(r, 3), !=, sums[3]);
  g_assert_false(sp_step_replay_corrupt(r, 9)); /* not a rank of the replay */
  sp_stepgraph_free(g);
}

/* Data parallelism alone (dp=2): one layer, 2 micro-batches, the 178k parameters of the
 * reduced model in one 40M-parameter bucket: one all-reduce and no sends, on ranks 0, 1. */
static void test_dp_counts(void)
{
  sp_model m = model8(), rm;
  sp_stepgraph *g = NULL;
  g_autoptr(sp_step_replay) r = replay(&m, 2, "dp=2", &rm, &g);
  g_assert_cmpint(rm.layers, ==, 1);
  g_assert_cmpint(g->microbatches, ==, 2);
  guint colls, sends;
  sp_step_replay_counts(r, &colls, &sends);
  g_assert_cmpuint(colls, ==, 1);
  g_assert_cmpuint(sends, ==, 0);
  g_assert_cmpint(sp_step_replay_nranks(r), ==, 2);
  int32_t bad;
  guint call;
  uint64_t off;
  g_assert_true(sp_step_replay_check(r, &bad, &call, &off, NULL));
  sp_stepgraph_free(g);
}

/* One GPU: no collective and no send, so no rank takes part; the replay is empty and
 * its check passes. */
static void test_no_comm(void)
{
  sp_model m = model8(), rm;
  sp_step_ctx c = fixture_ctx(&m, 1, 128, 64, NULL);
  sp_layout l = fixture_layout("dp=1", &c), rl;
  sp_step_ctx rc;
  GError *err = NULL;
  g_assert_true(sp_step_replay_reduce(&c, &l, &rm, &rc, &rl, &err));
  g_autoptr(sp_stepgraph) g = sp_stepgraph_build(&rc, &rl, SP_SCHED_1F1B, &err);
  g_assert_no_error(err);
  g_autoptr(sp_step_replay) r = sp_step_replay_new(g, 1, 8, 16, &err);
  g_assert_no_error(err);
  guint colls, sends;
  sp_step_replay_counts(r, &colls, &sends);
  g_assert_cmpuint(colls + sends, ==, 0);
  g_assert_cmpint(sp_step_replay_nranks(r), ==, 0);
  g_assert_false(sp_step_replay_has_outputs(r, 0));
  g_assert_cmpuint(sp_step_replay_checksum(r, 0), ==, 0);
  int32_t bad = -1;
  guint call;
  uint64_t off;
  g_assert_true(sp_step_replay_check(r, &bad, &call, &off, &err));
}

/* The call as priced: counts per member in BF16 and NCCL's ring channels per node. */
static void test_coll_spec(void)
{
  sp_coll_spec s;
  /* all-gather of a 16 MiB array over 8 GPUs of one node: 8 Mi elements in 8 blocks; one ring */
  sp_comm ag = { .kind = SP_COMM_TP, .coll = SP_COLL_ALL_GATHER, .n = 8, .stride = 1, .bytes = 16u << 20 };
  sp_comm_coll_spec(&ag, 8, ag.bytes, &s);
  g_assert_cmpuint(s.count, ==, (8u << 20) / 8);
  g_assert_cmpint(s.channels, ==, 1);
  /* all-reduce over 16 ranks 4 apart on 8-GPU nodes: 2 members per node, 2 channels rotated by 2 */
  sp_comm ar = { .kind = SP_COMM_DP, .coll = SP_COLL_ALL_REDUCE, .n = 16, .stride = 4, .bytes = 1000 };
  sp_comm_coll_spec(&ar, 8, ar.bytes, &s);
  g_assert_cmpuint(s.count, ==, 500);
  g_assert_cmpint(s.channels, ==, 2);
  g_assert_cmpint(s.channel_block, ==, 2);
  /* one member per node: one ring; a send-recv pair has 2 members */
  ar.stride = 8;
  sp_comm_coll_spec(&ar, 8, ar.bytes, &s);
  g_assert_cmpint(s.channels, ==, 1);
  sp_comm pp = { .kind = SP_COMM_PP, .coll = SP_COLL_SEND_RECV, .n = 2, .stride = 64, .bytes = 7 };
  sp_comm_coll_spec(&pp, 8, pp.bytes, &s);
  g_assert_cmpint(s.n, ==, 2);
  g_assert_cmpuint(s.count, ==, 4);
}

/* The reduced step: pp x vpp layers (one per chunk) and pp micro-batches per replica,
 * two without pipelining; the layout itself unchanged. */
static void test_reduce(void)
{
  sp_model m = model8(), rm;
  const struct { const char *spec; int32_t world; int64_t layers, batch; } cases[] = {
    { "pp=2,vpp=2", 2, 4, 2 },       /* 1 replica x mb 1 x 2 micro-batches */
    { "dp=2,mb=2", 2, 1, 8 },        /* 2 replicas x mb 2 x 2 micro-batches */
    { "tp=2,pp=2,dp=2", 8, 2, 4 },
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    sp_step_ctx c = fixture_ctx(&m, cases[k].world, 128, 64, NULL), rc;
    sp_layout l = fixture_layout(cases[k].spec, &c), rl;
    GError *err = NULL;
    g_assert_true(sp_step_replay_reduce(&c, &l, &rm, &rc, &rl, &err));
    g_assert_no_error(err);
    g_assert_cmpint(rm.layers, ==, cases[k].layers);
    g_assert_cmpint(rc.global_batch, ==, cases[k].batch);
    g_assert_cmpint(rl.tp, ==, l.tp);
    g_assert_cmpint(rl.pp, ==, l.pp);
    g_assert_cmpint(rl.vpp, ==, l.vpp);
    g_assert_cmpint(rl.dp, ==, l.dp);
    g_assert_cmpint(rl.mb, ==, l.mb);
    g_assert_true(rc.model == &rm);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/step-replay/tp-pp-counts", test_tp_pp_counts);
  g_test_add_func("/step-replay/dp-counts", test_dp_counts);
  g_test_add_func("/step-replay/no-comm", test_no_comm);
  g_test_add_func("/step-replay/coll-spec", test_coll_spec);
  g_test_add_func("/step-replay/reduce", test_reduce);
  return g_test_run();
}
