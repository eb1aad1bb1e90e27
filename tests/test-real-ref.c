/* Helper of tests/test-real-identity.sh (not a test by itself): the checksum
 * lines of one collective computed in process, over the loopback transport,
 * with the canonical spsim verify conventions (verify.h). Used as the
 * reference while `spsim verify` (SimGrid) is not available.
 *   test-real-ref OP DTYPE COUNT WORLD [ALGO] */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "spsim/coll.h"
#include "spsim/exec.h"
#include "spsim/verify.h"

int main(int argc, char **argv)
{
  if (argc < 5) {
    fprintf(stderr, "usage: test-real-ref OP DTYPE COUNT WORLD [ALGO]\n");
    return 2;
  }
  GError *err = NULL;
  sp_coll_spec spec = { 0 };
  int32_t world = atoi(argv[4]);
  if (!sp_coll_parse(argv[1], &spec.coll, &err) || !sp_dtype_parse(argv[2], &spec.dtype, &err) ||
      (argc > 5 && !sp_algo_parse(argv[5], &spec.algo, &err))) {
    fprintf(stderr, "test-real-ref: %s\n", err->message);
    return 2;
  }
  spec.count = g_ascii_strtoull(argv[3], NULL, 10);
  /* the group of spsim-run and spsim bench: every rank; send-recv 0 -> last */
  int32_t pair[2] = { 0, world - 1 };
  int32_t *all = sp_group_range(0, 1, world);
  spec.ranks = spec.coll == SP_COLL_SEND_RECV ? pair : all;
  spec.n = spec.coll == SP_COLL_SEND_RECV ? 2 : world;
  sp_case *c = sp_case_new_coll(&spec, world, TRUE, &err);
  int rc = 0;
  if (c == NULL || !sp_loopback_run(sp_case_programs(c), world, sp_case_all_bufs(c), &err) ||
      !sp_case_check(c, NULL, NULL, &err)) {
    fprintf(stderr, "test-real-ref: %s\n", err->message);
    rc = 1;
  } else {
    sp_case_print_checksums(c, stdout);
  }
  sp_case_free(c);
  g_free(all);
  g_clear_error(&err);
  return rc;
}
