/* Helper of tests/test-real-step.sh (not a test by itself): the checksum lines of
 * a step's data-mode replay built as the what-if's --verify builds it (the reduced
 * step graph, 16 elements per block), run in process over the loopback transport,
 * or with PLATFORM.xml on SimGrid as --verify runs it (sp_whatif_engine_replay):
 * the references of `spsim-run --step --checksum`.
 *   test-real-step-ref MODEL.json LAYOUT WORLD GPUS-PER-NODE SEQ GLOBAL-BATCH [PLATFORM.xml] */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "spsim/exec.h"
#include "spsim/layout.h"
#include "spsim/model.h"
#include "spsim/step.h"
#include "spsim/step_replay.h"
#include "spsim/stepgraph.h"
#include "spsim/verify.h"
#include "sim.h"
#include "whatif_sim.h"

int main(int argc, char **argv)
{
  if (argc != 7 && argc != 8) {
    fprintf(stderr, "usage: test-real-step-ref MODEL.json LAYOUT WORLD GPUS-PER-NODE SEQ GLOBAL-BATCH [PLATFORM.xml]\n");
    return 2;
  }
  GError *err = NULL;
  sp_model *m = sp_model_load_file(argv[1], &err);
  sp_layout l, rl;
  sp_step_ctx c = { .model = m, .world = atoi(argv[3]), .gpus_per_node = atoi(argv[4]),
                    .seq = g_ascii_strtoll(argv[5], NULL, 10), .global_batch = g_ascii_strtoll(argv[6], NULL, 10) };
  sp_step_hw_init(&c.hw);
  sp_layout_ctx lc = { .model = m, .world = c.world, .gpus_per_node = c.gpus_per_node, .seq = c.seq,
                       .global_batch = c.global_batch };
  sp_model rm;
  sp_step_ctx rc;
  sp_stepgraph *g = NULL;
  sp_step_replay *r = NULL;
  if (m == NULL || !sp_layout_parse(argv[2], &l, &err) || sp_layout_check(&l, &lc, &err) != SP_SKIP_NONE ||
      !sp_step_replay_reduce(&c, &l, &rm, &rc, &rl, &err) || !(g = sp_stepgraph_build(&rc, &rl, SP_SCHED_1F1B, &err)) ||
      !(r = sp_step_replay_new(g, c.world, c.gpus_per_node, 16, &err))) {
    fprintf(stderr, "test-real-step-ref: %s\n", err ? err->message : "?");
    return 2;
  }
  double seconds = 0;
  if (argc == 8 ? !sp_sim_init(argv[7], &err) || !sp_whatif_engine_replay(r, &seconds, &err)
                : !sp_loopback_run(sp_step_replay_programs(r), sp_step_replay_nranks(r), sp_step_replay_bufs(r), &err)) {
    fprintf(stderr, "test-real-step-ref: %s\n", err ? err->message : "?");
    return 2;
  }
  int32_t n = sp_step_replay_nranks(r), k = 0;
  g_autofree int32_t *ranks = g_new(int32_t, n);
  g_autofree uint64_t *sums = g_new(uint64_t, n);
  for (int32_t i = 0; i < n; i++)
    if (sp_step_replay_has_outputs(r, i)) {
      if (!sp_step_replay_check_rank(r, i, NULL, NULL, &err)) {
        fprintf(stderr, "test-real-step-ref: %s\n", err->message);
        return 1;
      }
      ranks[k] = i;
      sums[k++] = sp_step_replay_checksum(r, i);
    }
  sp_checksum_print_lines(stdout, ranks, sums, (size_t)k);
  sp_step_replay_free(r);
  sp_stepgraph_free(g);
  sp_model_free(m);
  return 0;
}
