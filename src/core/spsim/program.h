/**
 * @file program.h
 * @brief Per-rank programs: what lowering produces and what every engine runs.
 *
 * A program is an ordered list of steps over a table of byte buffers owned by one
 * rank. Communication is posted non-blocking (SEND, RECV) and completed by WAIT,
 * which waits for everything posted since the previous WAIT (the shape of an
 * ncclGroupStart/End block, of MPI_Isend/Irecv + MPI_Waitall, of SimGrid async
 * comms + wait_all). Local steps run in program order after the preceding WAIT.
 * Messages between one (src, dst, tag) triple are matched in posting order.
 */
#ifndef SPSIM_PROGRAM_H
#define SPSIM_PROGRAM_H

#include <glib.h>
#include <stdint.h>
#include "spsim/dtype.h"

G_BEGIN_DECLS

/** Kinds of steps. */
typedef enum {
  SP_STEP_SEND = 0, /**< post send of src[0 .. bytes) to peer (strided when rows > 1) */
  SP_STEP_RECV,     /**< post receive into dst[0 .. bytes) from peer (strided when rows > 1) */
  SP_STEP_WAIT,     /**< complete every send/recv posted since the last WAIT */
  SP_STEP_COPY,     /**< dst <- src, rows x row_bytes with strides */
  SP_STEP_REDUCE,   /**< dst <- dst op src over count elements (half types in f32, RNE) */
  SP_STEP_SCALE,    /**< dst <- dst / scale (divide) or dst * scale, count elements */
  SP_STEP_FILL,     /**< dst <- bytes copies of fill_byte (padding) */
  SP_STEP_COMPUTE,  /**< charge flops and bytes of compute; changes no data */
  SP_STEP_KIND_COUNT
} sp_step_kind;

/** A location in a rank's buffer table. */
typedef struct {
  uint32_t buf;  /**< buffer index in the program */
  uint64_t off;  /**< byte offset inside the buffer */
} sp_ref;

/**
 * One step. Unused fields are zero. For SEND/RECV/COPY, @c rows > 1 describes
 * a strided region: row r covers [off + r*stride, off + r*stride + row_bytes);
 * @c bytes is always rows * row_bytes. rows == 0 is read as 1 (contiguous).
 */
typedef struct {
  sp_step_kind kind;
  uint32_t op;          /**< graph node (or collective) id, for traces and summaries */
  uint32_t phase;       /**< phase index inside the op (ring step, tree level, ...) */
  int32_t peer;         /**< global rank of the peer (SEND/RECV) */
  int32_t tag;          /**< message tag (SEND/RECV) */
  sp_ref dst;           /**< RECV, COPY, REDUCE, SCALE, FILL */
  sp_ref src;           /**< SEND, COPY, REDUCE */
  uint64_t bytes;       /**< payload bytes (SEND/RECV/COPY/FILL), total */
  uint64_t rows;        /**< strided regions: number of rows (0 or 1: contiguous) */
  uint64_t row_bytes;   /**< strided regions: bytes per row */
  uint64_t src_stride;  /**< byte stride between rows on the src side (SEND, COPY) */
  uint64_t dst_stride;  /**< byte stride between rows on the dst side (RECV, COPY) */
  uint64_t count;       /**< elements (REDUCE, SCALE); SEND/RECV with #SP_STEP_PIPELINED: the pipeline's chunks */
  sp_dtype dtype;       /**< element type (REDUCE, SCALE) */
  sp_redop redop;       /**< REDUCE operator */
  gboolean divide;      /**< SCALE: divide by @c scale instead of multiplying */
  double scale;         /**< SCALE factor or divisor */
  uint8_t fill_byte;    /**< FILL value */
  uint8_t flags;        /**< SEND/RECV: #SP_STEP_PIPELINED, #SP_STEP_PIPE_PACE or 0 */
  double flops;         /**< COMPUTE: floating point operations */
} sp_step;

/**
 * A SEND/RECV of a lock-step pipeline (the NVLS-tree all-reduce):
 * chunk after chunk moves along fixed links, so a cost-mode engine may price the
 * op's blocks as the links' concurrent flows plus the pipeline's fill and drain
 * (src/sim/flow.h); the post's @c count is the number of chunks (the steps of the
 * steady state). Data mode ignores both.
 */
#define SP_STEP_PIPELINED 1u
/** With #SP_STEP_PIPELINED: a post on the pipeline's slowest hop (across nodes), whose
 *  chunk time paces the fill and drain. */
#define SP_STEP_PIPE_PACE 2u

/** A buffer of a rank program. */
typedef struct {
  uint64_t bytes;  /**< size in bytes */
  char *name;      /**< e.g. "in", "out", "scratch3" (owned) */
} sp_buffer;

/** One rank's program. */
typedef struct {
  int32_t rank;     /**< global rank that runs it */
  GArray *bufs;     /**< of sp_buffer */
  GArray *steps;    /**< of sp_step */
} sp_program;

/** Create an empty program for @p rank. */
sp_program *sp_program_new(int32_t rank);
/** Free a program and its buffers' names. NULL is accepted. */
void sp_program_free(sp_program *p);
/** Add a buffer of @p bytes named @p name; @return its index. */
uint32_t sp_program_add_buffer(sp_program *p, uint64_t bytes, const char *name);
/** Append a copy of @p s; @return its index. */
guint sp_program_append(sp_program *p, const sp_step *s);
/** @return step @p i. */
static inline const sp_step *sp_program_step(const sp_program *p, guint i)
{
  return &g_array_index(p->steps, sp_step, i);
}
/** @return the number of steps. */
static inline guint sp_program_len(const sp_program *p) { return p->steps->len; }
/** @return the canonical name of a step kind ("send", "recv", ...). */
const char *sp_step_kind_name(sp_step_kind k);

/**
 * Check that every reference of every step lies inside its buffer and that
 * sends/recvs name a peer in [0, world) other than the rank itself.
 */
gboolean sp_program_validate(const sp_program *p, int32_t world, GError **err);

/**
 * Run one local step (COPY, REDUCE, SCALE, FILL; COMPUTE is a no-op) on host
 * memory; @p bufs holds the program's buffers by index. This is the reference
 * CPU kernel every other engine must match bitwise.
 */
gboolean sp_step_run_host(const sp_step *s, void *const *bufs, GError **err);

/** Gather a strided region (rows, row_bytes, stride) into contiguous @p out. */
void sp_pack_host(void *out, const void *base, uint64_t rows, uint64_t row_bytes, uint64_t stride);
/** Scatter contiguous @p in into a strided region. */
void sp_unpack_host(void *base, const void *in, uint64_t rows, uint64_t row_bytes, uint64_t stride);

G_END_DECLS

#endif
