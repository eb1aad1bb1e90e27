/**
 * @file nccltests.h
 * @brief nccl-tests' conventions, text layout and logs: the sizes and element
 *        counts its binaries (all_reduce_perf, ...) derive from -b/-e/-i/-f, the
 *        names of their types and operations, the exact layout of their result
 *        table, and a reader of their output logs.
 *
 * Everything here follows NVIDIA/nccl-tests (src/common.cu and src/util.cu of
 * version 2.19; the table layout is unchanged since 2.13):
 * - a size S of the sweep gives count = S / element size elements; all-gather,
 *   reduce-scatter and all-to-all then take per rank
 *   base = (count / n) & ~(16 / element size - 1) elements (the *GetCollByteCount
 *   functions of all_gather.cu, reduce_scatter.cu, alltoall.cu: every block a
 *   multiple of 16 bytes);
 * - the row's "size" is max(send bytes, receive bytes) and its "count" the
 *   count passed to NCCL (paramcount): the message for all-reduce, broadcast,
 *   reduce and send-recv, one rank's block for all-gather, reduce-scatter and
 *   all-to-all. spsim's sp_coll_spec.count is that same number;
 * - sizes: from minbytes, times stepfactor when it is > 1, else plus stepbytes,
 *   while <= maxbytes (TimeTest in common.cu);
 * - a row is "%12li  %12li  %8s  %6s  %6s" (size, count, type, redop, root),
 *   then for out-of-place and in-place "  %7s  %6s  %6s  %6g" (time in us,
 *   algbw and busbw in GB/s = 1e9 B/s, #wrong) or "    N/A" instead of
 *   #wrong, each number through getFloatStr (2 decimals, fewer when it does
 *   not fit the width); the footer's average bus bandwidth is the mean of the
 *   busbw of every out-of-place and in-place result.
 *
 * The reader accepts any log these binaries print (one or several tests, with
 * the NCCL INFO lines and other text of a job around them): result rows are
 * the lines whose first two fields are whole numbers under a column header (or
 * with the 12 or 13 fields of that layout), the collective comes from the
 * "# Collective test starting: NAME" line, from a command line naming a
 * binary, or from the file name, and the ranks and their hosts come from the
 * "#  Rank N Group G Pid P on HOST device D ..." lines.
 */
#ifndef SPSIM_NCCLTESTS_H
#define SPSIM_NCCLTESTS_H

#include <glib.h>
#include <stdint.h>
#include "spsim/coll.h"
#include "spsim/dtype.h"

G_BEGIN_DECLS

/** nccl-tests' defaults (README, "Arguments"): -b and -e 32 MiB, -i 1 MiB, -n 20, -w 1. */
#define SP_NT_DEFAULT_MINBYTES ((uint64_t)32 << 20)
#define SP_NT_DEFAULT_MAXBYTES ((uint64_t)32 << 20)
#define SP_NT_DEFAULT_STEPBYTES ((uint64_t)1 << 20)
#define SP_NT_DEFAULT_ITERS 20
#define SP_NT_DEFAULT_WARMUP 1

/** Marks an absent #wrong ("N/A"). */
#define SP_NT_WRONG_NA INT64_C(-1)

/** One result row of a log. */
typedef struct {
  uint64_t size;       /**< bytes column */
  uint64_t count;      /**< elements column */
  char type[16];       /**< nccl-tests type name, e.g. "float" */
  char redop[16];      /**< "sum", "none", ... */
  int32_t root;        /**< -1 for collectives without a root */
  double time_us[2];   /**< [0] out-of-place, [1] in-place (0 when absent) */
  double algbw[2];     /**< GB/s */
  double busbw[2];     /**< GB/s */
  int64_t wrong[2];    /**< #wrong, #SP_NT_WRONG_NA when "N/A" */
} sp_nt_row;

/** A parsed nccl-tests log. */
typedef struct {
  char *name;          /**< the name it was read under (a file name) */
  gboolean has_coll;   /**< the log (or its name) names its collective */
  sp_coll coll;        /**< valid when has_coll */
  int32_t nthreads;    /**< "# nThread T nGpus G ..." line (0: absent) */
  int32_t ngpus;
  int32_t nranks;      /**< number of "#  Rank" lines (0: none) */
  GPtrArray *hosts;    /**< host name of rank r (nranks entries; empty without Rank lines) */
  GArray *rows;        /**< sp_nt_row, in log order */
  guint skipped_rows;  /**< lines shaped like result rows that could not be read (a field that
                            is not a number, a negative or infinite figure), left out of rows */
  guint first_skipped_line; /**< the first of them (1-based; 0: none) */
  char *tuner_plugin;  /**< the NCCL tuner plugin its NCCL_DEBUG=INFO lines say it loaded
                            ("TUNER/Plugin: Using NAME (vN)", NCCL's src/plugin/tuner/), or NULL */
} sp_nt_log;

/** @return the binary of @p c ("all_reduce_perf", ..., "sendrecv_perf"), NULL when out of range. */
const char *sp_nt_program(sp_coll c);
/**
 * Parse a collective written the nccl-tests way or spsim's: "all_reduce_perf",
 * "all_reduce", "allreduce", "all-reduce" (likewise all_gather, reduce_scatter,
 * alltoall / all_to_all, broadcast, reduce, sendrecv / send_recv).
 */
gboolean sp_nt_coll_parse(const char *s, sp_coll *out);
/** @return nccl-tests' name of @p t ("float", "half", "bfloat16", "int32", "int64", "uint8"). */
const char *sp_nt_type_name(sp_dtype t);
/** Parse an nccl-tests type name (also "int", "char" for int8 is refused) or an spsim one. */
gboolean sp_nt_type_parse(const char *s, sp_dtype *out, GError **err);

/** Elements passed to NCCL for a sweep size of @p bytes on @p n ranks (see above). */
uint64_t sp_nt_count(sp_coll c, uint64_t bytes, int32_t n, size_t esize);
/** The row's size column for @p count elements on @p n ranks. */
uint64_t sp_nt_bytes(sp_coll c, uint64_t count, int32_t n, size_t esize);

/**
 * The sizes of a sweep: min, then times @p factor (when > 1) or plus @p step,
 * while <= max. Errors (SP_ERROR_INVALID): min 0, min > max, factor <= 1 and
 * step 0, more than @p limit sizes. @return a new array of uint64_t.
 */
GArray *sp_nt_sizes(uint64_t min, uint64_t max, uint64_t step, uint64_t factor, guint limit,
                    GError **err);

/** nccl-tests' getFloatStr: @p v in @p width characters (buf holds width + 1). */
void sp_nt_format_float(char *buf, int width, double v);

/** Append the three column header lines of the table (after a "#" line). */
void sp_nt_append_columns(GString *s);
/** Append one row in the table's layout. */
void sp_nt_append_row(GString *s, const sp_nt_row *r);
/**
 * Append the footer: "# Out of bounds values : E OK|FAILED", "# Avg bus
 * bandwidth    : BW ", "#", "# Collective test concluded: PROGRAM".
 */
void sp_nt_append_footer(GString *s, int64_t errors, double avg_busbw, const char *program);

/**
 * Read an nccl-tests log from @p text (@p len bytes, or -1 for NUL-terminated);
 * @p name names it in messages and may name its collective (a file called
 * all_gather_perf.log). A text without a single result row is SP_ERROR_PARSE
 * ("NAME: not nccl-tests output: ..."); so is a Rank line that cannot be read.
 * @return a new log (sp_nt_log_free), or NULL.
 */
sp_nt_log *sp_nt_log_parse(const char *text, gssize len, const char *name, GError **err);
/** sp_nt_log_parse on the contents of file @p path (SP_ERROR_IO when unreadable). */
sp_nt_log *sp_nt_log_read(const char *path, GError **err);
/** Free @p log (NULL is fine). */
void sp_nt_log_free(sp_nt_log *log);

/**
 * Nodes of a log: *nodes receives the distinct hosts of its Rank lines (in order
 * of first appearance) and node_of[r] (an array of nranks, g_free it) the node
 * of rank r; local_of[r] (may be NULL) its index among its node's ranks.
 * @return FALSE when the log has no Rank lines.
 */
gboolean sp_nt_log_nodes(const sp_nt_log *log, int32_t *nodes, int32_t **node_of,
                         int32_t **local_of);

/**
 * The ranks a log's rows imply for collective @p c: all-gather, reduce-scatter and
 * all-to-all rows have size = count x ranks x element size. 0 when @p c is another
 * collective, when no row tells (no count, a type nccl-tests does not name) or when the
 * rows disagree or imply no whole number of ranks.
 */
int32_t sp_nt_log_ranks_from_rows(const sp_nt_log *log, sp_coll c);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(sp_nt_log, sp_nt_log_free)

G_END_DECLS

#endif
