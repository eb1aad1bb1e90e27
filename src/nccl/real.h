/* Internal API of the real backend (src/nccl): the MPI host transport, the
 * bounded waits every MPI call of spsim-run goes through, and (when built with
 * CUDA) the CUDA + NCCL transports. Only src/nccl includes MPI, CUDA or NCCL. */
#ifndef SPSIM_NCCL_REAL_H
#define SPSIM_NCCL_REAL_H

#include <glib.h>
#include <mpi.h>
#include <stdint.h>

#include "spsim/coll.h"
#include "spsim/transport.h"

G_BEGIN_DECLS

/* ------------------------------------------------------------ bounded MPI waits */

/**
 * Wait for @p n requests, polling MPI_Testall until @p deadline (MPI_Wtime
 * seconds). On timeout: SP_ERROR_TRANSPORT "rank R: timed out after T s waiting
 * for WHAT" where WHAT comes from @p describe(user, index of the first pending
 * request) or @p what when @p describe is NULL. @p yield: sched_yield between
 * polls (oversubscribed nodes).
 */
gboolean sp_mpi_wait_bounded(int n, MPI_Request *reqs, double timeout, gboolean yield, int rank,
                             const char *what, char *(*describe)(void *user, int index),
                             void *user, GError **err);

/**
 * Whether the MPI library's progress engine already yields the processor when a
 * poll finds nothing to do (Open MPI's mpi_yield_when_idle, on by itself on an
 * oversubscribed node), read through the MPI tool interface; FALSE when the
 * library has no such variable. Then a sched_yield of ours per poll only halves
 * the polling rate.
 */
gboolean sp_mpi_progress_yields(void);

/** Turn an MPI error code into a GError naming the call. */
gboolean sp_mpi_check(int rc, const char *call, int rank, GError **err);

/* ------------------------------------------------------------ MPI host transport */

/** Host transport over MPI point-to-point on @p comm. */
typedef struct sp_mpi_transport sp_mpi_transport;

/**
 * Create the MPI host transport; collective over @p comm (the ranks agree on how
 * messages are cut). @p timeout: seconds a wait_all may take before it fails
 * naming the peer it waits for; @p yield: sched_yield while polling. Messages
 * are split into pieces of at most 1 GiB, small ones into pieces under the
 * library's shared-memory eager limit when it can be read (MPI tool interface);
 * tags are mapped into [0, MPI_TAG_UB].
 */
sp_mpi_transport *sp_mpi_transport_new(MPI_Comm comm, double timeout, gboolean yield,
                                       GError **err);
void sp_mpi_transport_free(sp_mpi_transport *t);
/** The transport table + ctx for sp_exec_run. */
sp_transport sp_mpi_transport_get(sp_mpi_transport *t);

/* ------------------------------------------------------------ MPI native collectives */

/**
 * Run @p spec with the MPI library's own collective on host buffers in/out
 * (sizes by the coll.h convention), on @p comm whose ranks are the global
 * ranks. Group = every rank in order (send-recv: the spec's two members).
 * f16/bf16 and AVG use a user-defined MPI_Op with spsim's host arithmetic.
 */
gboolean sp_mpi_native_coll(const sp_coll_spec *spec, MPI_Comm comm, const void *in, void *out,
                            double timeout, gboolean yield, GError **err);
/**
 * The native calls block (the library's tuned algorithms); a SIGALRM watchdog
 * ends the process (exit 4, naming the call) when one makes no progress for
 * @p timeout. Call this when the native calls are over.
 */
void sp_mpi_native_disarm(void);

#ifdef SP_HAVE_CUDA
/* ------------------------------------------------------------ CUDA transports */

/** Device-side state of one rank: device, stream, optional NCCL communicator. */
typedef struct sp_cuda_ctx sp_cuda_ctx;

/**
 * Select the GPU (local rank modulo the device count), create a stream and,
 * when @p with_nccl, the NCCL communicator of @p comm (rank 0's unique id
 * broadcast over MPI; non-blocking communicator, so every wait is bounded by
 * @p timeout). NCCL needs one GPU per local rank: with fewer GPUs it fails
 * with a message pointing at --transport cuda-mpi.
 */
sp_cuda_ctx *sp_cuda_ctx_new(MPI_Comm comm, gboolean with_nccl, double timeout, gboolean yield,
                             GError **err);
void sp_cuda_ctx_free(sp_cuda_ctx *c);
/** @return a description of the device ("GPU 0: NVIDIA H100 ..."). */
const char *sp_cuda_ctx_device(const sp_cuda_ctx *c);

/** Allocate device copies of @p nb host buffers (sizes @p bytes), copy @p host in. */
gboolean sp_cuda_bufs_new(sp_cuda_ctx *c, guint nb, const uint64_t *bytes, void *const *host,
                          void ***dev_out, GError **err);
/** Copy @p bytes of device buffer @p dev back to @p host. */
gboolean sp_cuda_download(sp_cuda_ctx *c, void *host, const void *dev, uint64_t bytes, GError **err);
/** Copy @p bytes of host memory @p host into device buffer @p dev, after the stream's work. */
gboolean sp_cuda_upload(sp_cuda_ctx *c, void *dev, const void *host, uint64_t bytes, GError **err);
void sp_cuda_bufs_free(sp_cuda_ctx *c, guint nb, void **dev);

/** NCCL transport: ncclSend/ncclRecv in a group per WAIT, CUDA kernels for local steps. */
sp_transport sp_nccl_transport_get(sp_cuda_ctx *c);
/** CUDA buffers and kernels, messages staged through host memory over the MPI transport. */
sp_transport sp_cuda_mpi_transport_get(sp_cuda_ctx *c, sp_mpi_transport *mpi);
/** Wall clock of the device: synchronises the stream, then MPI_Wtime. */
double sp_cuda_clock(sp_cuda_ctx *c);

/** NCCL's own collective on device buffers (ncclAllReduce, ...). */
gboolean sp_nccl_native_coll(sp_cuda_ctx *c, const sp_coll_spec *spec, const void *in, void *out,
                             GError **err);
#endif

G_END_DECLS

#endif
