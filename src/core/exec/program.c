/* Per-rank programs: construction, validation and the host reference kernels. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "spsim/error.h"
#include "spsim/program.h"

static const char *const step_kind_names[SP_STEP_KIND_COUNT] = {
  [SP_STEP_SEND] = "send",     [SP_STEP_RECV] = "recv",   [SP_STEP_WAIT] = "wait",
  [SP_STEP_COPY] = "copy",     [SP_STEP_REDUCE] = "reduce", [SP_STEP_SCALE] = "scale",
  [SP_STEP_FILL] = "fill",     [SP_STEP_COMPUTE] = "compute",
};

const char *sp_step_kind_name(sp_step_kind k)
{
  return (unsigned)k < SP_STEP_KIND_COUNT ? step_kind_names[k] : "invalid";
}

static void buffer_clear(gpointer data)
{
  sp_buffer *b = data;
  g_free(b->name);
  b->name = NULL;
}

sp_program *sp_program_new(int32_t rank)
{
  sp_program *p = g_new0(sp_program, 1);
  p->rank = rank;
  p->bufs = g_array_new(FALSE, TRUE, sizeof(sp_buffer));
  g_array_set_clear_func(p->bufs, buffer_clear);
  p->steps = g_array_new(FALSE, TRUE, sizeof(sp_step));
  return p;
}

void sp_program_free(sp_program *p)
{
  if (p == NULL)
    return;
  g_array_unref(p->bufs);
  g_array_unref(p->steps);
  g_free(p);
}

uint32_t sp_program_add_buffer(sp_program *p, uint64_t bytes, const char *name)
{
  sp_buffer b = { .bytes = bytes, .name = g_strdup(name ? name : "") };
  g_array_append_val(p->bufs, b);
  return p->bufs->len - 1;
}

guint sp_program_append(sp_program *p, const sp_step *s)
{
  g_array_append_vals(p->steps, s, 1);
  return p->steps->len - 1;
}

/* ------------------------------------------------------------ validation */

/* A region of a step: rows x row_bytes with a stride, starting at ref.off. */
typedef struct {
  uint64_t rows, row_bytes, stride;
} region;

/* Normalise (bytes, rows, row_bytes, stride) into a region; FALSE when the
 * fields disagree (message in *why). */
static gboolean step_region(const sp_step *s, uint64_t stride, region *r, const char **why)
{
  if (s->rows <= 1) {
    if (s->row_bytes != 0 && s->row_bytes != s->bytes) {
      *why = "a contiguous region (rows <= 1) needs row_bytes == 0 or row_bytes == bytes";
      return FALSE;
    }
    r->rows = 1;
    r->row_bytes = s->bytes;
    r->stride = s->bytes;
    return TRUE;
  }
  uint64_t total;
  if (!g_uint64_checked_mul(&total, s->rows, s->row_bytes) || total != s->bytes) {
    *why = "a strided region needs bytes == rows * row_bytes";
    return FALSE;
  }
  r->rows = s->rows;
  r->row_bytes = s->row_bytes;
  r->stride = stride ? stride : s->row_bytes; /* stride 0: that side is packed */
  return TRUE;
}

/* End (exclusive) of a region starting at off; FALSE on overflow. */
static gboolean region_end(const region *r, uint64_t off, uint64_t *end)
{
  uint64_t span;
  if (r->row_bytes == 0) {
    *end = off;
    return TRUE;
  }
  return g_uint64_checked_mul(&span, r->rows - 1, r->stride) &&
         g_uint64_checked_add(&span, span, r->row_bytes) && g_uint64_checked_add(end, off, span);
}

static gboolean check_ref(const sp_program *p, guint i, const sp_step *s, const char *side,
                          sp_ref ref, const region *r, GError **err)
{
  const char *kn = sp_step_kind_name(s->kind);
  if (ref.buf >= p->bufs->len) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d step %u (%s): %s buffer index %u is out of range (the program has %u "
                "buffers); add the buffer with sp_program_add_buffer first",
                p->rank, i, kn, side, ref.buf, p->bufs->len);
    return FALSE;
  }
  const sp_buffer *b = &g_array_index(p->bufs, sp_buffer, ref.buf);
  uint64_t end;
  if (!region_end(r, ref.off, &end) || end > b->bytes || ref.off > b->bytes) {
    if (r->rows > 1)
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "rank %d step %u (%s): %s region of %" G_GUINT64_FORMAT " rows x %" G_GUINT64_FORMAT
                  " bytes, stride %" G_GUINT64_FORMAT ", at offset %" G_GUINT64_FORMAT
                  " overruns buffer %u '%s' of %" G_GUINT64_FORMAT
                  " bytes (last row ends at off + (rows-1)*stride + row_bytes)",
                  p->rank, i, kn, side, r->rows, r->row_bytes, r->stride, ref.off, ref.buf,
                  b->name, b->bytes);
    else
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "rank %d step %u (%s): %s range [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                  ") is outside buffer %u '%s' of %" G_GUINT64_FORMAT " bytes",
                  p->rank, i, kn, side, ref.off, ref.off + r->row_bytes, ref.buf, b->name,
                  b->bytes);
    return FALSE;
  }
  return TRUE;
}

/* TRUE when the byte extents [a, a_end) and [b, b_end) of one buffer intersect. */
static gboolean extents_overlap(uint64_t a, uint64_t a_end, uint64_t b, uint64_t b_end)
{
  return a < b_end && b < a_end;
}

/* Whether a COPY may run: contiguous copies may overlap (memmove); strided
 * copies must not overlap within one buffer. */
static gboolean copy_overlap_ok(const sp_step *s, const region *sr, const region *dr)
{
  if (s->src.buf != s->dst.buf || s->bytes == 0)
    return TRUE;
  if (sr->rows == 1 && dr->rows == 1)
    return TRUE;
  uint64_t se, de;
  if (!region_end(sr, s->src.off, &se) || !region_end(dr, s->dst.off, &de))
    return FALSE;
  return !extents_overlap(s->src.off, se, s->dst.off, de);
}

static gboolean check_elems(const sp_program *p, guint i, const sp_step *s, GError **err)
{
  const char *kn = sp_step_kind_name(s->kind);
  if ((unsigned)s->dtype >= SP_DTYPE_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d step %u (%s): invalid dtype %d",
                p->rank, i, kn, (int)s->dtype);
    return FALSE;
  }
  uint64_t nbytes;
  if (!g_uint64_checked_mul(&nbytes, s->count, sp_dtype_size(s->dtype))) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d step %u (%s): count %" G_GUINT64_FORMAT
                " overflows", p->rank, i, kn, s->count);
    return FALSE;
  }
  if (s->bytes != 0 && s->bytes != nbytes) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d step %u (%s): bytes %" G_GUINT64_FORMAT " disagree with count %"
                G_GUINT64_FORMAT " x %s (%zu bytes) = %" G_GUINT64_FORMAT
                "; set bytes to 0 or to count * element size",
                p->rank, i, kn, s->bytes, s->count, sp_dtype_name(s->dtype),
                sp_dtype_size(s->dtype), nbytes);
    return FALSE;
  }
  region r = { 1, nbytes, nbytes };
  if (!check_ref(p, i, s, "dst", s->dst, &r, err))
    return FALSE;
  if (s->kind == SP_STEP_REDUCE) {
    if ((unsigned)s->redop >= SP_REDOP_COUNT) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d step %u (reduce): invalid operator %d",
                  p->rank, i, (int)s->redop);
      return FALSE;
    }
    if (!check_ref(p, i, s, "src", s->src, &r, err))
      return FALSE;
  } else { /* SCALE */
    gboolean is_int = s->dtype == SP_I32 || s->dtype == SP_I64 || s->dtype == SP_U8;
    if (!isfinite(s->scale) || (s->divide && s->scale == 0.0)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "rank %d step %u (scale): factor %g is not usable%s; use a finite, non-zero value",
                  p->rank, i, s->scale, s->divide ? " as a divisor" : "");
      return FALSE;
    }
    if (is_int && (s->scale != trunc(s->scale) || fabs(s->scale) > 9.0e18)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "rank %d step %u (scale): %s elements can only be scaled by an integer factor, "
                  "not %g",
                  p->rank, i, sp_dtype_name(s->dtype), s->scale);
      return FALSE;
    }
  }
  return TRUE;
}

gboolean sp_program_validate(const sp_program *p, int32_t world, GError **err)
{
  g_return_val_if_fail(p != NULL, FALSE);
  if (world <= 0 || p->rank < 0 || p->rank >= world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "program rank %d is outside the world of %d ranks", p->rank, world);
    return FALSE;
  }
  gint64 open_post = -1; /* first SEND/RECV not yet completed by a WAIT */
  for (guint i = 0; i < p->steps->len; i++) {
    const sp_step *s = sp_program_step(p, i);
    const char *kn = sp_step_kind_name(s->kind);
    const char *why = NULL;
    region sr, dr;
    switch (s->kind) {
    case SP_STEP_SEND:
    case SP_STEP_RECV: {
      gboolean send = s->kind == SP_STEP_SEND;
      if (s->peer < 0 || s->peer >= world || s->peer == p->rank) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "rank %d step %u (%s): peer %d is %s; peers must be other ranks in [0, %d)",
                    p->rank, i, kn, s->peer, s->peer == p->rank ? "the rank itself" : "out of range",
                    world);
        return FALSE;
      }
      if (!step_region(s, send ? s->src_stride : s->dst_stride, send ? &sr : &dr, &why)) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d step %u (%s): %s", p->rank, i, kn,
                    why);
        return FALSE;
      }
      if (!send && dr.rows > 1 && dr.stride < dr.row_bytes) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "rank %d step %u (recv): dst stride %" G_GUINT64_FORMAT
                    " is smaller than row_bytes %" G_GUINT64_FORMAT ", so received rows overlap",
                    p->rank, i, dr.stride, dr.row_bytes);
        return FALSE;
      }
      if (!check_ref(p, i, s, send ? "src" : "dst", send ? s->src : s->dst, send ? &sr : &dr, err))
        return FALSE;
      if (open_post < 0)
        open_post = i;
      break;
    }
    case SP_STEP_WAIT: open_post = -1; break;
    case SP_STEP_COPY:
      if (!step_region(s, s->src_stride, &sr, &why) || !step_region(s, s->dst_stride, &dr, &why)) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d step %u (copy): %s", p->rank, i, why);
        return FALSE;
      }
      if (dr.rows > 1 && dr.stride < dr.row_bytes) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "rank %d step %u (copy): dst stride %" G_GUINT64_FORMAT
                    " is smaller than row_bytes %" G_GUINT64_FORMAT ", so written rows overlap",
                    p->rank, i, dr.stride, dr.row_bytes);
        return FALSE;
      }
      if (!check_ref(p, i, s, "src", s->src, &sr, err) ||
          !check_ref(p, i, s, "dst", s->dst, &dr, err))
        return FALSE;
      if (!copy_overlap_ok(s, &sr, &dr)) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "rank %d step %u (copy): strided src and dst overlap inside buffer %u; copy "
                    "through a scratch buffer",
                    p->rank, i, s->dst.buf);
        return FALSE;
      }
      break;
    case SP_STEP_REDUCE:
    case SP_STEP_SCALE:
      if (!check_elems(p, i, s, err))
        return FALSE;
      break;
    case SP_STEP_FILL: {
      region r = { 1, s->bytes, s->bytes };
      if (!check_ref(p, i, s, "dst", s->dst, &r, err))
        return FALSE;
      break;
    }
    case SP_STEP_COMPUTE:
      if (!(s->flops >= 0.0) || !isfinite(s->flops)) {
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "rank %d step %u (compute): flops %g must be finite and >= 0", p->rank, i,
                    s->flops);
        return FALSE;
      }
      break;
    default:
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d step %u: invalid step kind %d",
                  p->rank, i, (int)s->kind);
      return FALSE;
    }
  }
  if (open_post >= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "rank %d step %" G_GINT64_FORMAT " (%s): posted after the last wait and never "
                "completed; append a WAIT step",
                p->rank, open_post, sp_step_kind_name(sp_program_step(p, (guint)open_post)->kind));
    return FALSE;
  }
  return TRUE;
}

/* ------------------------------------------------------------ host kernels */

void sp_pack_host(void *out, const void *base, uint64_t rows, uint64_t row_bytes, uint64_t stride)
{
  unsigned char *o = out;
  const unsigned char *b = base;
  if (row_bytes == 0)
    return;
  if (rows <= 1) {
    memcpy(o, b, row_bytes);
    return;
  }
  for (uint64_t r = 0; r < rows; r++)
    memcpy(o + r * row_bytes, b + r * stride, row_bytes);
}

void sp_unpack_host(void *base, const void *in, uint64_t rows, uint64_t row_bytes, uint64_t stride)
{
  unsigned char *b = base;
  const unsigned char *in_ = in;
  if (row_bytes == 0)
    return;
  if (rows <= 1) {
    memcpy(b, in_, row_bytes);
    return;
  }
  for (uint64_t r = 0; r < rows; r++)
    memcpy(b + r * stride, in_ + r * row_bytes, row_bytes);
}

static gboolean need_buf(void *const *bufs, sp_ref ref, const sp_step *s, GError **err)
{
  if (bufs[ref.buf] == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s step: buffer %u has no memory (NULL); allocate every buffer of the program "
                "before running it in data mode",
                sp_step_kind_name(s->kind), ref.buf);
    return FALSE;
  }
  return TRUE;
}

gboolean sp_step_run_host(const sp_step *s, void *const *bufs, GError **err)
{
  const char *why = NULL;
  switch (s->kind) {
  case SP_STEP_SEND:
  case SP_STEP_RECV:
  case SP_STEP_WAIT:
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s is not a local step: run it through a transport (sp_exec_*)",
                sp_step_kind_name(s->kind));
    return FALSE;
  case SP_STEP_COMPUTE: return TRUE;
  default: break;
  }
  if ((unsigned)s->kind >= SP_STEP_KIND_COUNT) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "invalid step kind %d", (int)s->kind);
    return FALSE;
  }
  if (bufs == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s step needs buffers; sp_step_run_host cannot run in cost mode",
                sp_step_kind_name(s->kind));
    return FALSE;
  }
  if (!need_buf(bufs, s->dst, s, err))
    return FALSE;
  unsigned char *dst = (unsigned char *)bufs[s->dst.buf] + s->dst.off;

  switch (s->kind) {
  case SP_STEP_COPY: {
    region sr, dr;
    if (!step_region(s, s->src_stride, &sr, &why) || !step_region(s, s->dst_stride, &dr, &why)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "copy step: %s", why);
      return FALSE;
    }
    if (!need_buf(bufs, s->src, s, err))
      return FALSE;
    const unsigned char *src = (const unsigned char *)bufs[s->src.buf] + s->src.off;
    if (s->bytes == 0)
      return TRUE;
    if (sr.rows == 1 && dr.rows == 1) {
      memmove(dst, src, s->bytes); /* contiguous overlap is well defined */
      return TRUE;
    }
    if (!copy_overlap_ok(s, &sr, &dr)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "copy step: strided src and dst overlap inside buffer %u; copy through a "
                  "scratch buffer",
                  s->dst.buf);
      return FALSE;
    }
    for (uint64_t r = 0; r < sr.rows; r++)
      memcpy(dst + r * dr.stride, src + r * sr.stride, sr.row_bytes);
    return TRUE;
  }
  case SP_STEP_REDUCE:
    if ((unsigned)s->dtype >= SP_DTYPE_COUNT || (unsigned)s->redop >= SP_REDOP_COUNT) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "reduce step: invalid dtype or operator");
      return FALSE;
    }
    if (!need_buf(bufs, s->src, s, err))
      return FALSE;
    sp_reduce_host(dst, (const unsigned char *)bufs[s->src.buf] + s->src.off, s->count, s->dtype,
                   s->redop);
    return TRUE;
  case SP_STEP_SCALE:
    if ((unsigned)s->dtype >= SP_DTYPE_COUNT) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "scale step: invalid dtype %d", (int)s->dtype);
      return FALSE;
    }
    sp_scale_host(dst, s->count, s->dtype, s->scale, s->divide);
    return TRUE;
  case SP_STEP_FILL:
    memset(dst, s->fill_byte, s->bytes);
    return TRUE;
  default: return TRUE;
  }
}
