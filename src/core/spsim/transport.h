/**
 * @file transport.h
 * @brief The interface each engine implements to run per-rank programs:
 *        src/sim (SimGrid actors), src/nccl (MPI host memory, NCCL + CUDA) and the
 *        in-process loopback of src/core used by tests.
 *
 * In cost mode buffers are NULL: transports move sizes only and charge time.
 */
#ifndef SPSIM_TRANSPORT_H
#define SPSIM_TRANSPORT_H

#include <glib.h>
#include <stdint.h>
#include "spsim/program.h"

G_BEGIN_DECLS

/** Outcome of a wait. */
typedef enum {
  SP_WAIT_DONE = 0,  /**< everything posted has completed */
  SP_WAIT_PENDING,   /**< not yet (only transports that cannot block, e.g. loopback) */
  SP_WAIT_ERROR      /**< failed; the GError says why */
} sp_wait_status;

/** Function table of a transport. Every function receives the transport's ctx. */
typedef struct {
  const char *name;
  /** Post a non-blocking send. @p data is NULL in cost mode. The region is
   *  described by (rows, row_bytes, stride); rows == 1 for contiguous. */
  gboolean (*post_send)(void *ctx, int32_t peer, int32_t tag, const void *data,
                        uint64_t rows, uint64_t row_bytes, uint64_t stride, GError **err);
  /** Post a non-blocking receive into a (possibly strided) region. */
  gboolean (*post_recv)(void *ctx, int32_t peer, int32_t tag, void *data,
                        uint64_t rows, uint64_t row_bytes, uint64_t stride, GError **err);
  /** Wait for every posted operation. Calling it again after PENDING is allowed. */
  sp_wait_status (*wait_all)(void *ctx, GError **err);
  /** Run (data mode) and/or charge (cost mode) one local step. NULL: the executor
   *  runs sp_step_run_host() when buffers exist and charges nothing. */
  gboolean (*local)(void *ctx, const sp_step *s, void *const *bufs, GError **err);
  /** Current time in seconds (simulated or wall). NULL: 0. */
  double (*clock)(void *ctx);
} sp_transport_ops;

/** A transport instance: its table and its state. */
typedef struct {
  const sp_transport_ops *ops;
  void *ctx;
} sp_transport;

G_END_DECLS

#endif
