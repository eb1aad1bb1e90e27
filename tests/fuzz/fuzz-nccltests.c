/* Fuzz harness: nccl-tests logs (sp_nt_log_parse on arbitrary text, as spsim calibrate
 * reads them), then what calibrate derives from a log: its nodes, the GPU count its
 * sizes and counts imply, each row's type and the bytes of its count. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "spsim/dtype.h"
#include "spsim/error.h"
#include "spsim/nccltests.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  fuzz_setup();
  if (size > (1u << 20))
    return 0;
  GError *err = NULL;
  sp_nt_log *log = sp_nt_log_parse((const char *)data, (gssize)size, "fuzz.log", &err);
  if (log == NULL) {
    FUZZ_EXPECT_ERROR(err);
    g_error_free(err);
    return 0;
  }
  FUZZ_ASSERT(err == NULL, "error set on success");
  FUZZ_ASSERT(log->rows->len > 0, "a log without a result row");
  FUZZ_ASSERT(log->skipped_rows == 0 || log->first_skipped_line >= 1, "skipped rows without a line");
  FUZZ_ASSERT(!log->has_coll || (unsigned)log->coll < SP_COLL_COUNT, "collective %d", (int)log->coll);
  for (guint i = 0; i < log->rows->len; i++) {
    const sp_nt_row *r = &g_array_index(log->rows, sp_nt_row, i);
    FUZZ_ASSERT(memchr(r->type, '\0', sizeof r->type) && memchr(r->redop, '\0', sizeof r->redop), "row %u: field unterminated", i);
    for (int s = 0; s < 2; s++)
      FUZZ_ASSERT(isfinite(r->time_us[s]) && r->time_us[s] >= 0 && isfinite(r->algbw[s]) && r->algbw[s] >= 0 &&
                    isfinite(r->busbw[s]) && r->busbw[s] >= 0 && r->wrong[s] >= SP_NT_WRONG_NA,
                  "row %u: figure out of range", i);
    sp_dtype t;
    if (sp_nt_type_parse(r->type, &t, &err)) {
      /* calibrate prices count elements on n ranks: sp_nt_bytes must not trap */
      for (int32_t n = 1; n <= 16; n *= 4)
        if (log->has_coll) (void)sp_nt_bytes(log->coll, r->count, n, sp_dtype_size(t));
    } else {
      FUZZ_EXPECT_ERROR(err);
      g_clear_error(&err);
    }
  }
  for (int k = 0; k < SP_COLL_COUNT; k++) {
    int32_t n = sp_nt_log_ranks_from_rows(log, (sp_coll)k);
    FUZZ_ASSERT(n >= 0, "ranks from rows %d", n);
  }
  int32_t nodes = 0, *node_of = NULL, *local_of = NULL;
  if (sp_nt_log_nodes(log, &nodes, &node_of, &local_of)) {
    FUZZ_ASSERT(log->nranks > 0 && nodes >= 1 && nodes <= log->nranks, "%d nodes of %d ranks", nodes, log->nranks);
    for (int32_t r = 0; r < log->nranks; r++)
      FUZZ_ASSERT(node_of[r] >= 0 && node_of[r] < nodes && local_of[r] >= 0 && local_of[r] < log->nranks,
                  "rank %d: node %d, local %d", r, node_of[r], local_of[r]);
    g_free(node_of);
    g_free(local_of);
  } else {
    FUZZ_ASSERT(log->nranks == 0, "%d ranks without nodes", log->nranks);
  }
  sp_nt_log_free(log);
  return 0;
}
