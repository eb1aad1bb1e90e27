/**
 * @file exec.h
 * @brief The executor walks one rank's program over a transport; the loopback
 *        runs a whole world in process (tests, reference runs); traces record
 *        what each rank did and when.
 */
#ifndef SPSIM_EXEC_H
#define SPSIM_EXEC_H

#include <glib.h>
#include <stdint.h>
#include "spsim/program.h"
#include "spsim/transport.h"

G_BEGIN_DECLS

/** One timeline event: a communication block (posts up to their WAIT) or a local step. */
typedef struct {
  int32_t rank;
  uint32_t op;
  uint32_t phase;
  sp_step_kind kind;  /**< SP_STEP_WAIT stands for a communication block */
  double start;       /**< seconds, transport clock */
  double end;
  uint64_t bytes;     /**< bytes sent (communication) or touched (local) */
} sp_trace_event;

/** A timeline of many ranks. */
typedef struct sp_trace sp_trace;

sp_trace *sp_trace_new(void);
void sp_trace_free(sp_trace *t);
void sp_trace_add(sp_trace *t, const sp_trace_event *ev);
/** Give op id @p op a display name (copied). */
void sp_trace_set_op_name(sp_trace *t, uint32_t op, const char *name);
guint sp_trace_len(const sp_trace *t);
const sp_trace_event *sp_trace_get(const sp_trace *t, guint i);
/** Write the timeline as Chrome trace JSON (opens in Perfetto), events sorted by (rank, start);
 * @p path "-" is standard output. */
gboolean sp_trace_write_chrome(const sp_trace *t, const char *path, GError **err);

/** A resumable run of one program. */
typedef struct sp_exec sp_exec;

/** Start running @p p over @p t. @p bufs is NULL in cost mode. @p trace may be NULL. */
sp_exec *sp_exec_new(const sp_program *p, const sp_transport *t, void *const *bufs, sp_trace *trace);
/** Run until the program ends (DONE), the transport cannot progress (PENDING) or an error. */
sp_wait_status sp_exec_resume(sp_exec *e, GError **err);
void sp_exec_free(sp_exec *e);
/** Run a whole program on a blocking transport. */
gboolean sp_exec_run(const sp_program *p, const sp_transport *t, void *const *bufs,
                     sp_trace *trace, GError **err);

/**
 * Data kernel of a COMPUTE step (e.g. sp_graph_case_compute): called with the
 * rank's buffers after the transport's local op (or sp_step_run_host) for every
 * COMPUTE step of a data-mode run (never in cost mode).
 */
typedef gboolean (*sp_exec_compute_fn)(void *ud, int32_t rank, const sp_step *s,
                                       void *const *bufs, GError **err);
/** Set (or clear, @p fn NULL) the COMPUTE hook of @p e; default none. */
void sp_exec_set_compute_hook(sp_exec *e, sp_exec_compute_fn fn, void *ud);
/** sp_exec_run with a COMPUTE hook (@p fn may be NULL). */
gboolean sp_exec_run_compute(const sp_program *p, const sp_transport *t, void *const *bufs,
                             sp_trace *trace, sp_exec_compute_fn fn, void *ud, GError **err);

/**
 * Run the programs of ranks 0..world-1 in process over a loopback transport
 * (buffered sends, in-order matching per (src, dst, tag)). @p bufs[r] is rank r's
 * buffer array, or @p bufs is NULL for cost mode. A schedule that cannot progress
 * is reported as a deadlock naming the blocked ranks.
 */
gboolean sp_loopback_run(sp_program *const *progs, int32_t world, void **const *bufs, GError **err);

G_END_DECLS

#endif
