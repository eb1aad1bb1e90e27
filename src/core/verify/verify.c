/* Verification cases: a collective lowered for a world, with deterministic
 * inputs and expected outputs (see verify.h for the conventions). */
#define _DEFAULT_SOURCE /* sysconf(_SC_PHYS_PAGES) */
#include "config.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "coll_priv.h"
#include "spsim/coll.h"
#include "spsim/error.h"
#include "spsim/verify.h"

struct sp_case {
  sp_coll_spec spec;
  int32_t *ranks;          /* owned copy of spec.ranks */
  int32_t *member_of;      /* world -> group index or -1 */
  int32_t world;
  int32_t only;            /* the single built rank, or -1 for all */
  gboolean data;
  uint64_t out_bytes;
  sp_program **progs;      /* world entries, NULL when not built */
  void ***bufs;            /* world entries (data mode), NULL when not built */
  unsigned char **expected;/* world entries, members only */
};

static gboolean built(const sp_case *c, int32_t r)
{
  return r >= 0 && r < c->world && (c->only < 0 || c->only == r);
}

/* Inputs come from the pattern: what every rank's in buffer is filled with. */
typedef struct {
  const sp_coll_spec *spec;
} pattern_user;

static void get_pattern(void *user, int32_t member, uint64_t first, uint64_t count, void *dst)
{
  const pattern_user *u = user;
  if (count == 0)
    return;
  sp_fill_pattern(dst, count, u->spec->dtype, SP_CASE_SEED(u->spec->ranks[member]), first);
}

/* Data mode holds the in, out and expected buffers of every built member in
 * this process: refuse what the machine cannot hold, with the sizes, instead
 * of thrashing or failing inside malloc. (sp_coll_spec_validate has already
 * checked that each buffer's byte count fits in 64 bits.) */
static gboolean data_fits(const sp_coll_spec *spec, int32_t members, GError **err)
{
  uint64_t es = sp_dtype_size(spec->dtype), per = 0, all = 0;
  uint64_t in = sp_coll_in_count(spec) * es, out = sp_coll_out_count(spec) * es;
  if (!g_uint64_checked_mul(&per, out, 2) || !g_uint64_checked_add(&per, per, in) ||
      !g_uint64_checked_mul(&all, per, (uint64_t)members))
    all = UINT64_MAX;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
  if (all <= ram)
    return TRUE;
  g_autofree char *ram_s = g_format_size_full(ram, G_FORMAT_SIZE_IEC_UNITS);
  g_autofree char *all_s = g_format_size_full(all, G_FORMAT_SIZE_IEC_UNITS);
  g_autofree char *per_s = g_format_size_full(per, G_FORMAT_SIZE_IEC_UNITS);
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "%s of %" G_GUINT64_FORMAT " %s elements per rank needs %s of host memory to carry "
              "real bytes (%s per rank x %d rank%s), more than this machine's %s: use a smaller "
              "--count or --size (`spsim bench` predicts any size without data)",
              sp_coll_name(spec->coll), spec->count, sp_dtype_name(spec->dtype), all_s, per_s,
              members, members == 1 ? "" : "s", ram_s);
  return FALSE;
}

static sp_case *case_new(const sp_coll_spec *spec, int32_t world, int32_t only, gboolean with_data,
                         GError **err)
{
  if (!sp_coll_spec_validate(spec, err))
    return NULL;
  if (world < 1) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "world of %d ranks: it needs at least one", world);
    return NULL;
  }
  for (int32_t i = 0; i < spec->n; i++)
    if (spec->ranks[i] >= world) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "%s: member %d is rank %d, outside the world of %d ranks; use a larger world "
                  "or ranks in [0, %d)",
                  sp_coll_name(spec->coll), i, spec->ranks[i], world, world);
      return NULL;
    }
  if (only >= world) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d is outside the world of %d ranks", only,
                world);
    return NULL;
  }
  if (with_data && !data_fits(spec, only >= 0 ? 1 : spec->n, err))
    return NULL;

  sp_case *c = g_new0(sp_case, 1);
  c->spec = *spec;
  c->ranks = g_memdup2(spec->ranks, sizeof(int32_t) * (size_t)spec->n);
  c->spec.ranks = c->ranks;
  c->world = world;
  c->only = only;
  c->data = with_data;
  c->out_bytes = sp_coll_out_count(spec) * sp_dtype_size(spec->dtype);
  c->member_of = g_new(int32_t, world);
  for (int32_t r = 0; r < world; r++)
    c->member_of[r] = -1;
  for (int32_t i = 0; i < spec->n; i++)
    c->member_of[spec->ranks[i]] = i;
  c->progs = g_new0(sp_program *, world);
  if (with_data) {
    c->bufs = g_new0(void **, world);
    c->expected = g_new0(unsigned char *, world);
  }

  size_t es = sp_dtype_size(spec->dtype);
  uint64_t in_bytes = sp_coll_in_count(spec) * es;
  pattern_user pu = { &c->spec };
  int32_t done_ar = -1; /* first rank whose all-reduce result is computed */
  for (int32_t r = 0; r < world; r++) {
    if (!built(c, r))
      continue;
    sp_program *p = sp_program_new(r);
    c->progs[r] = p;
    int32_t m = c->member_of[r];
    if (m >= 0) {
      uint32_t in = sp_program_add_buffer(p, in_bytes, "in");
      uint32_t out = sp_program_add_buffer(p, c->out_bytes, "out");
      if (!sp_lower_coll(p, &c->spec, in, out, err) || !sp_program_validate(p, world, err)) {
        sp_case_free(c);
        return NULL;
      }
    }
    if (!with_data)
      continue;
    guint nb = p->bufs->len;
    c->bufs[r] = g_new0(void *, nb ? nb : 1);
    for (guint b = 0; b < nb; b++) {
      uint64_t bytes = g_array_index(p->bufs, sp_buffer, b).bytes;
      c->bufs[r][b] = g_malloc0(bytes ? bytes : 1);
    }
    if (m >= 0) {
      sp_fill_pattern(c->bufs[r][0], sp_coll_in_count(spec), spec->dtype, SP_CASE_SEED(r), 0);
      c->expected[r] = g_malloc0(c->out_bytes ? c->out_bytes : 1);
      if (spec->coll == SP_COLL_ALL_REDUCE && done_ar >= 0) {
        /* every member of an all-reduce gets the same bits: compute once */
        memcpy(c->expected[r], c->expected[done_ar], c->out_bytes);
        continue;
      }
      done_ar = r;
      gboolean written;
      if (!sp_coll_reference_member(&c->spec, get_pattern, &pu, m, c->expected[r], &written, err)) {
        sp_case_free(c);
        return NULL;
      }
    }
  }
  return c;
}

sp_case *sp_case_new_coll(const sp_coll_spec *spec, int32_t world, gboolean with_data, GError **err)
{
  return case_new(spec, world, -1, with_data, err);
}

sp_case *sp_case_new_coll_rank(const sp_coll_spec *spec, int32_t world, int32_t rank,
                               gboolean with_data, GError **err)
{
  if (rank < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "rank %d: ranks are >= 0", rank);
    return NULL;
  }
  return case_new(spec, world, rank, with_data, err);
}

void sp_case_free(sp_case *c)
{
  if (c == NULL)
    return;
  for (int32_t r = 0; r < c->world; r++) {
    if (c->bufs && c->bufs[r]) {
      guint nb = c->progs[r] ? c->progs[r]->bufs->len : 0;
      for (guint b = 0; b < nb; b++)
        g_free(c->bufs[r][b]);
      g_free(c->bufs[r]);
    }
    if (c->expected)
      g_free(c->expected[r]);
    sp_program_free(c->progs[r]);
  }
  g_free(c->bufs);
  g_free(c->expected);
  g_free(c->progs);
  g_free(c->member_of);
  g_free(c->ranks);
  g_free(c);
}

int32_t sp_case_world(const sp_case *c)
{
  return c->world;
}

const sp_coll_spec *sp_case_spec(const sp_case *c)
{
  return &c->spec;
}

sp_program *sp_case_program(const sp_case *c, int32_t rank)
{
  return built(c, rank) ? c->progs[rank] : NULL;
}

sp_program *const *sp_case_programs(const sp_case *c)
{
  return c->progs;
}

void *const *sp_case_bufs(const sp_case *c, int32_t rank)
{
  return c->bufs && built(c, rank) ? c->bufs[rank] : NULL;
}

void **const *sp_case_all_bufs(const sp_case *c)
{
  return c->bufs;
}

const void *sp_case_expected(const sp_case *c, int32_t rank)
{
  if (!c->expected || !built(c, rank) || c->member_of[rank] < 0)
    return NULL;
  return c->expected[rank];
}

uint64_t sp_case_out_bytes(const sp_case *c)
{
  return c->out_bytes;
}

int32_t sp_case_member(const sp_case *c, int32_t rank)
{
  return rank >= 0 && rank < c->world ? c->member_of[rank] : -1;
}

gboolean sp_case_check(const sp_case *c, int32_t *bad_rank, uint64_t *bad_offset, GError **err)
{
  if (!c->data) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "this case was built in cost mode (no data); build it with with_data to check");
    return FALSE;
  }
  size_t es = sp_dtype_size(c->spec.dtype);
  for (int32_t r = 0; r < c->world; r++) {
    if (!built(c, r) || c->member_of[r] < 0)
      continue;
    const unsigned char *got = c->bufs[r][1], *exp = c->expected[r];
    for (uint64_t b = 0; b < c->out_bytes; b++) {
      if (got[b] == exp[b])
        continue;
      if (bad_rank)
        *bad_rank = r;
      if (bad_offset)
        *bad_offset = b;
      uint64_t e = b / es;
      GString *g = g_string_new(NULL), *x = g_string_new(NULL);
      for (size_t k = 0; k < es; k++) { /* element bytes, little-endian memory order */
        g_string_append_printf(g, "%02x", got[e * es + k]);
        g_string_append_printf(x, "%02x", exp[e * es + k]);
      }
      g_set_error(err, SP_ERROR, SP_ERROR_MISMATCH,
                  "%s (%s, %s, %s, n=%d, count=%" G_GUINT64_FORMAT "): rank %d (member %d) out "
                  "differs from the reference at byte %" G_GUINT64_FORMAT " (element %"
                  G_GUINT64_FORMAT "): got bytes %s, expected %s",
                  sp_coll_name(c->spec.coll), sp_algo_name(sp_algo_choose(&c->spec)),
                  sp_dtype_name(c->spec.dtype), sp_redop_name(c->spec.redop), c->spec.n,
                  c->spec.count, r, c->member_of[r], b, e, g->str, x->str);
      g_string_free(g, TRUE);
      g_string_free(x, TRUE);
      return FALSE;
    }
  }
  return TRUE;
}

uint64_t sp_case_checksum(const sp_case *c, int32_t rank)
{
  if (!c->data || !built(c, rank) || c->member_of[rank] < 0)
    return 0;
  return sp_checksum(0, c->bufs[rank][1], c->out_bytes);
}

uint64_t sp_case_expected_checksum(const sp_case *c, int32_t rank)
{
  const void *e = sp_case_expected(c, rank);
  return e ? sp_checksum(0, e, c->out_bytes) : 0;
}

uint64_t sp_checksum_combine(const uint64_t *sums, size_t count)
{
  uint64_t h = 0;
  for (size_t i = 0; i < count; i++) {
    unsigned char le[8];
    for (int k = 0; k < 8; k++)
      le[k] = (unsigned char)(sums[i] >> (8 * k));
    h = sp_checksum(h, le, 8);
  }
  return h ? h : sp_checksum(0, NULL, 0);
}

/* Built members in increasing rank order, with their checksums. */
static size_t collect(const sp_case *c, int32_t *ranks, uint64_t *sums)
{
  size_t k = 0;
  for (int32_t r = 0; r < c->world; r++)
    if (built(c, r) && c->member_of[r] >= 0) {
      ranks[k] = r;
      sums[k] = sp_case_checksum(c, r);
      k++;
    }
  return k;
}

uint64_t sp_case_checksum_all(const sp_case *c)
{
  int32_t *ranks = g_new(int32_t, c->spec.n);
  uint64_t *sums = g_new(uint64_t, c->spec.n);
  size_t k = collect(c, ranks, sums);
  uint64_t h = sp_checksum_combine(sums, k);
  g_free(ranks);
  g_free(sums);
  return h;
}

void sp_checksum_print_lines(FILE *out, const int32_t *ranks, const uint64_t *sums, size_t count)
{
  for (size_t i = 0; i < count; i++)
    fprintf(out, "checksum rank=%" PRId32 " 0x%016" PRIx64 "\n", ranks[i], sums[i]);
  fprintf(out, "checksum all=0x%016" PRIx64 "\n", sp_checksum_combine(sums, count));
}

void sp_case_print_checksums(const sp_case *c, FILE *out)
{
  int32_t *ranks = g_new(int32_t, c->spec.n);
  uint64_t *sums = g_new(uint64_t, c->spec.n);
  size_t k = collect(c, ranks, sums);
  sp_checksum_print_lines(out, ranks, sums, k);
  g_free(ranks);
  g_free(sums);
}

int32_t *sp_group_range(int32_t first, int32_t stride, int32_t n)
{
  int32_t *g = g_new(int32_t, n > 0 ? n : 1);
  for (int32_t i = 0; i < n; i++)
    g[i] = first + i * stride;
  return g;
}
