/* nccl-tests' conventions, table layout and log reader (spsim/nccltests.h). The
 * formats below are those of NVIDIA/nccl-tests src/util.cu (writeBenchmarkLine*,
 * writeResultHeader, writeResultFooter, getFloatStr) and src/common.cu
 * (setupArgs, TimeTest), version 2.19. Uses only the element types of base/. */
#include "config.h"
#include "spsim/nccltests.h"
#include "spsim/error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const programs[SP_COLL_COUNT] = {
  [SP_COLL_ALL_REDUCE] = "all_reduce_perf",
  [SP_COLL_ALL_GATHER] = "all_gather_perf",
  [SP_COLL_REDUCE_SCATTER] = "reduce_scatter_perf",
  [SP_COLL_ALL_TO_ALL] = "alltoall_perf",
  [SP_COLL_BROADCAST] = "broadcast_perf",
  [SP_COLL_REDUCE] = "reduce_perf",
  [SP_COLL_SEND_RECV] = "sendrecv_perf",
};

const char *sp_nt_program(sp_coll c)
{
  if ((int)c < 0 || c >= SP_COLL_COUNT) return NULL;
  return programs[c];
}

/* Lower-case @p s without '_', '-' and a trailing "_perf" / "perf". */
static char *squash(const char *s)
{
  GString *g = g_string_new(NULL);
  for (const char *p = s; *p; p++)
    if (*p != '_' && *p != '-') g_string_append_c(g, g_ascii_tolower(*p));
  if (g_str_has_suffix(g->str, "perf")) g_string_truncate(g, g->len - 4);
  return g_string_free(g, FALSE);
}

gboolean sp_nt_coll_parse(const char *s, sp_coll *out)
{
  static const struct { const char *key; sp_coll c; } names[] = {
    { "allreduce", SP_COLL_ALL_REDUCE }, { "allgather", SP_COLL_ALL_GATHER },
    { "reducescatter", SP_COLL_REDUCE_SCATTER }, { "alltoall", SP_COLL_ALL_TO_ALL },
    { "broadcast", SP_COLL_BROADCAST }, { "reduce", SP_COLL_REDUCE },
    { "sendrecv", SP_COLL_SEND_RECV },
  };
  if (s == NULL) return FALSE;
  g_autofree char *k = squash(s);
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    if (strcmp(k, names[i].key) == 0) {
      *out = names[i].c;
      return TRUE;
    }
  return FALSE;
}

/* nccl-tests' names (test_typenames in common.cu) of the types spsim has. */
static const char *const type_names[SP_DTYPE_COUNT] = {
  [SP_F32] = "float", [SP_F16] = "half", [SP_BF16] = "bfloat16",
  [SP_I32] = "int32", [SP_I64] = "int64", [SP_U8] = "uint8",
};

const char *sp_nt_type_name(sp_dtype t)
{
  if ((int)t < 0 || t >= SP_DTYPE_COUNT) return "?";
  return type_names[t];
}

gboolean sp_nt_type_parse(const char *s, sp_dtype *out, GError **err)
{
  if (s != NULL) {
    for (int t = 0; t < SP_DTYPE_COUNT; t++)
      if (g_ascii_strcasecmp(s, type_names[t]) == 0) {
        *out = (sp_dtype)t;
        return TRUE;
      }
    if (g_ascii_strcasecmp(s, "int") == 0) { /* nccl-tests before NCCL 2 */
      *out = SP_I32;
      return TRUE;
    }
    static const char *const absent[] = { "int8", "char", "uint32", "uint64", "double", "f8e4m3", "f8e5m2" };
    for (size_t i = 0; i < G_N_ELEMENTS(absent); i++)
      if (g_ascii_strcasecmp(s, absent[i]) == 0) {
        g_set_error(err, SP_ERROR, SP_ERROR_UNSUPPORTED,
                    "type '%s' is not one of spsim's (float, half, bfloat16, int32, int64, uint8)", s);
        return FALSE;
      }
  }
  return sp_dtype_parse(s, out, err);
}

/* Per-rank block of all-gather, reduce-scatter and all-to-all: a multiple of 16
 * bytes (the "& ~(16/eltSize - 1)" of their GetCollByteCount). */
static uint64_t block16(uint64_t count, int32_t n, size_t esize)
{
  uint64_t base = count / (uint64_t)(n > 0 ? n : 1);
  if (esize > 0 && esize < 16) base &= ~(uint64_t)(16 / esize - 1);
  return base;
}

uint64_t sp_nt_count(sp_coll c, uint64_t bytes, int32_t n, size_t esize)
{
  if (esize == 0) return 0;
  uint64_t count = bytes / esize;
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL:
    return block16(count, n, esize);
  default:
    return count;
  }
}

uint64_t sp_nt_bytes(sp_coll c, uint64_t count, int32_t n, size_t esize)
{
  switch (c) {
  case SP_COLL_ALL_GATHER:
  case SP_COLL_REDUCE_SCATTER:
  case SP_COLL_ALL_TO_ALL:
    return count * esize * (uint64_t)n;
  default:
    return count * esize;
  }
}

GArray *sp_nt_sizes(uint64_t min, uint64_t max, uint64_t step, uint64_t factor, guint limit,
                    GError **err)
{
  if (min == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "the smallest size is 0 (sizes must be >= 1 byte)");
    return NULL;
  }
  if (min > max) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "min size %" G_GUINT64_FORMAT " is larger than max size %" G_GUINT64_FORMAT,
                (guint64)min, (guint64)max);
    return NULL;
  }
  if (factor <= 1 && step == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "the step is 0 bytes and there is no step factor");
    return NULL;
  }
  GArray *a = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  for (uint64_t s = min; s <= max;) {
    if (a->len >= limit) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                  "more than %u sizes from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
                  " (use a step factor, e.g. -f 2)", limit, (guint64)min, (guint64)max);
      g_array_unref(a);
      return NULL;
    }
    g_array_append_val(a, s);
    if (factor > 1) {
      if (s > G_MAXUINT64 / factor) break;
      s *= factor;
    } else {
      if (s > G_MAXUINT64 - step) break;
      s += step;
    }
  }
  return a;
}

void sp_nt_format_float(char *buf, int width, double v)
{
  size_t n = (size_t)width + 1;
  if (snprintf(buf, n, "%*.2f", width, v) <= width) return;
  if (snprintf(buf, n, "%*.1f", width, v) <= width) return;
  if (snprintf(buf, n, "%*.0f", width, v) <= width) return;
  snprintf(buf, n, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

void sp_nt_append_columns(GString *s)
{
  g_string_append_printf(s, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
                         "", "", "", "", "");
  g_string_append_printf(s, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
                         "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                         "busbw", "#wrong", 0, "");
  g_string_append_printf(s, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
                         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
                         0, "");
}

void sp_nt_append_row(GString *s, const sp_nt_row *r)
{
  char root[16];
  snprintf(root, sizeof root, "%6i", (int)r->root);
  g_string_append_printf(s, "%12" G_GUINT64_FORMAT "  %12" G_GUINT64_FORMAT "  %8s  %6s  %6s", (guint64)r->size,
                         (guint64)r->count, r->type, r->redop, root);
  for (int k = 0; k < 2; k++) {
    char t[8], a[7], b[7];
    sp_nt_format_float(t, 7, r->time_us[k]);
    sp_nt_format_float(a, 6, r->algbw[k]);
    sp_nt_format_float(b, 6, r->busbw[k]);
    if (r->wrong[k] == SP_NT_WRONG_NA)
      g_string_append_printf(s, "  %7s  %6s  %6s    N/A", t, a, b);
    else
      g_string_append_printf(s, "  %7s  %6s  %6s  %6g", t, a, b, (double)r->wrong[k]);
  }
  g_string_append_c(s, '\n');
}

void sp_nt_append_footer(GString *s, int64_t errors, double avg_busbw, const char *program)
{
  g_string_append_printf(s, "# %-20s : %d %s\n", "Out of bounds values", (int)errors, errors ? "FAILED" : "OK");
  g_string_append_printf(s, "# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw, "");
  g_string_append(s, "#\n");
  g_string_append_printf(s, "# Collective test concluded: %s\n", program);
}

/* ---- reader ------------------------------------------------------------------ */

static gboolean parse_u64(const char *s, uint64_t *out)
{
  if (s == NULL || !g_ascii_isdigit(s[0])) return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return FALSE;
  *out = v;
  return TRUE;
}

static gboolean parse_i32(const char *s, int32_t *out)
{
  char *end = NULL;
  errno = 0;
  gint64 v = g_ascii_strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < INT32_MIN || v > INT32_MAX) return FALSE;
  *out = (int32_t)v;
  return TRUE;
}

/* A figure of the table: finite and not negative (nccl-tests prints neither "inf", "nan"
 * nor a sign; an infinite time would price a link at NaN bytes per second). */
static gboolean parse_double(const char *s, double *out)
{
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || v < 0) return FALSE;
  *out = v;
  return TRUE;
}

static gboolean parse_wrong(const char *s, int64_t *out)
{
  if (strcmp(s, "N/A") == 0) {
    *out = SP_NT_WRONG_NA;
    return TRUE;
  }
  double v;
  if (!parse_double(s, &v) || v < 0 || v > 9.2e18) return FALSE;
  *out = (int64_t)v;
  return TRUE;
}

/* Column positions of a table (fields of a row, 0-based); -1 when absent. */
typedef struct {
  int size, count, type, redop, root;
  int time[2], algbw[2], busbw[2], wrong[2];
  int nfields; /* fields of a full row */
} columns;

/* The layout of nccl-tests >= 2.10 (with root), or without root when @p root is FALSE. */
static void default_columns(columns *c, gboolean root)
{
  int k = root ? 5 : 4;
  *c = (columns){ .size = 0, .count = 1, .type = 2, .redop = 3, .root = root ? 4 : -1 };
  for (int side = 0; side < 2; side++) {
    c->time[side] = k++;
    c->algbw[side] = k++;
    c->busbw[side] = k++;
    c->wrong[side] = k++;
  }
  c->nfields = k;
}

/* A column header "# size count type redop root time algbw busbw #wrong time ...":
 * the position of every name (per-iteration columns and timestamps included). */
static gboolean header_columns(char **tok, columns *c)
{
  int n = (int)g_strv_length(tok);
  gboolean has_size = FALSE, has_busbw = FALSE;
  for (int i = 0; i < n; i++) {
    if (strcmp(tok[i], "size") == 0) has_size = TRUE;
    if (strcmp(tok[i], "busbw") == 0) has_busbw = TRUE;
  }
  if (!has_size || !has_busbw) return FALSE;
  *c = (columns){ .size = -1, .count = -1, .type = -1, .redop = -1, .root = -1,
                  .time = { -1, -1 }, .algbw = { -1, -1 }, .busbw = { -1, -1 }, .wrong = { -1, -1 } };
  int side = -1;
  for (int i = 0; i < n; i++) {
    const char *t = tok[i];
    if (strcmp(t, "size") == 0) c->size = i;
    else if (strcmp(t, "count") == 0) c->count = i;
    else if (strcmp(t, "type") == 0) c->type = i;
    else if (strcmp(t, "redop") == 0) c->redop = i;
    else if (strcmp(t, "root") == 0) c->root = i;
    else if (strcmp(t, "time") == 0 || strcmp(t, "cputime") == 0) {
      if (++side > 1) break;
      c->time[side] = i;
    } else if (side >= 0 && strcmp(t, "algbw") == 0) c->algbw[side] = i;
    else if (side >= 0 && strcmp(t, "busbw") == 0) c->busbw[side] = i;
    else if (side >= 0 && (strcmp(t, "#wrong") == 0 || strcmp(t, "error") == 0)) c->wrong[side] = i;
  }
  if (c->size != 0 || c->count != 1 || c->time[0] < 0 || c->busbw[0] < 0 || c->algbw[0] < 0) return FALSE;
  /* a second side (in-place) is read only when its time, algbw and busbw are all named
   * (a header cut short may name its time alone) */
  if (c->time[1] >= 0 && (c->algbw[1] < 0 || c->busbw[1] < 0)) c->time[1] = c->algbw[1] = c->busbw[1] = c->wrong[1] = -1;
  /* a row has at least every field the header names */
  const int used[] = { c->size,     c->count,    c->type,     c->redop,    c->root,  c->time[0], c->algbw[0],
                       c->busbw[0], c->wrong[0], c->time[1],  c->algbw[1], c->busbw[1], c->wrong[1] };
  c->nfields = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(used); i++) c->nfields = MAX(c->nfields, used[i] + 1);
  return TRUE;
}

static char **fields(const char *line)
{
  char **raw = g_strsplit_set(line, " \t", -1);
  GPtrArray *a = g_ptr_array_new();
  for (char **p = raw; *p; p++)
    if (**p) g_ptr_array_add(a, g_strdup(*p));
  g_ptr_array_add(a, NULL);
  g_strfreev(raw);
  return (char **)g_ptr_array_free(a, FALSE);
}

/* A row under layout @p c, or FALSE when @p tok is not one. */
static gboolean parse_row(char **tok, const columns *c, sp_nt_row *r)
{
  int n = (int)g_strv_length(tok);
  if (n < c->nfields) return FALSE;
  memset(r, 0, sizeof *r);
  if (!parse_u64(tok[c->size], &r->size) || !parse_u64(tok[c->count], &r->count)) return FALSE;
  g_strlcpy(r->type, c->type >= 0 ? tok[c->type] : "float", sizeof r->type);
  g_strlcpy(r->redop, c->redop >= 0 ? tok[c->redop] : "none", sizeof r->redop);
  r->root = -1;
  if (c->root >= 0 && !parse_i32(tok[c->root], &r->root)) return FALSE;
  for (int s = 0; s < 2; s++) {
    r->wrong[s] = SP_NT_WRONG_NA;
    if (c->time[s] < 0) continue;
    if (!parse_double(tok[c->time[s]], &r->time_us[s]) || !parse_double(tok[c->algbw[s]], &r->algbw[s]) ||
        !parse_double(tok[c->busbw[s]], &r->busbw[s]))
      return FALSE;
    if (c->wrong[s] >= 0 && !parse_wrong(tok[c->wrong[s]], &r->wrong[s])) return FALSE;
  }
  return r->time_us[0] >= 0;
}

/* A line that has a result row's shape, its first two fields whole numbers and (under
 * @p c, or in the default layouts) a row's field count or more, yet parse_row refused. */
static gboolean row_like(char **tok, const columns *c)
{
  uint64_t size, count;
  if (tok[0] == NULL || tok[1] == NULL || !parse_u64(tok[0], &size) || !parse_u64(tok[1], &count)) return FALSE;
  int n = (int)g_strv_length(tok);
  return c != NULL ? n >= c->nfields : n >= 12;
}

/* "#  Rank  3 Group  0 Pid 1234 on host-a device  3 [0000:1b:00] NVIDIA H100": the
 * rank and its host (older versions have no Group, "on" comes before the host). */
static gboolean rank_line(char **tok, int32_t *rank, const char **host)
{
  int n = (int)g_strv_length(tok);
  if (n < 2 || strcmp(tok[0], "Rank") != 0 || !parse_i32(tok[1], rank) || *rank < 0) return FALSE;
  for (int i = 2; i + 1 < n; i++)
    if (strcmp(tok[i], "on") == 0) {
      *host = tok[i + 1];
      return TRUE;
    }
  return FALSE;
}

/* The first binary name (X_perf, X_perf_mpi, ...) in @p line, as a collective. */
static gboolean program_in(const char *line, sp_coll *c)
{
  for (int k = 0; k < SP_COLL_COUNT; k++) {
    const char *p = line;
    size_t len = strlen(programs[k]);
    while ((p = strstr(p, programs[k])) != NULL) {
      /* a whole word: "reduce_perf" inside "all_reduce_perf" is not reduce */
      gboolean start = p == line || !(g_ascii_isalnum(p[-1]) || p[-1] == '_');
      if (start) {
        *c = (sp_coll)k;
        return TRUE;
      }
      p += len;
    }
  }
  return FALSE;
}

void sp_nt_log_free(sp_nt_log *log)
{
  if (log == NULL) return;
  g_free(log->name);
  g_free(log->tuner_plugin);
  if (log->hosts) g_ptr_array_unref(log->hosts);
  if (log->rows) g_array_unref(log->rows);
  g_free(log);
}

sp_nt_log *sp_nt_log_parse(const char *text, gssize len, const char *name, GError **err)
{
  if (name == NULL) name = "(log)";
  if (text == NULL) text = "";
  g_autofree char *copy = len < 0 ? g_strdup(text) : g_strndup(text, (gsize)len);
  sp_nt_log *log = g_new0(sp_nt_log, 1);
  log->name = g_strdup(name);
  log->hosts = g_ptr_array_new_with_free_func(g_free);
  log->rows = g_array_new(FALSE, FALSE, sizeof(sp_nt_row));
  GHashTable *rank_host = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  columns cols;
  gboolean have_cols = FALSE, started = FALSE, named = FALSE;
  sp_coll started_coll = SP_COLL_ALL_REDUCE, named_coll = SP_COLL_ALL_REDUCE;
  int32_t max_rank = -1;
  GError *e = NULL;
  char **lines = g_strsplit(copy, "\n", -1);
  for (guint li = 0; lines[li] != NULL && e == NULL; li++) {
    char *line = lines[li];
    g_strchomp(line); /* also drops a '\r' */
    const char *body = line;
    while (*body == ' ' || *body == '\t') body++;
    if (*body == '#') {
      const char *h = body + 1;
      char **tok = fields(h);
      const char *st = strstr(h, "Collective test starting:");
      if (st != NULL) {
        sp_coll c;
        g_autofree char *prog = g_strstrip(g_strdup(st + strlen("Collective test starting:")));
        if (program_in(prog, &c) || sp_nt_coll_parse(prog, &c)) {
          if (started && c != started_coll)
            e = g_error_new(SP_ERROR, SP_ERROR_PARSE,
                            "%s: holds the results of several collectives (%s and %s): give each its own file",
                            name, programs[started_coll], programs[c]);
          started = TRUE;
          started_coll = c;
        }
      } else if (tok[0] != NULL && strcmp(tok[0], "nThread") == 0) {
        for (int i = 0; tok[i] != NULL && tok[i + 1] != NULL; i++) {
          if (strcmp(tok[i], "nThread") == 0) parse_i32(tok[i + 1], &log->nthreads);
          if (strcmp(tok[i], "nGpus") == 0) parse_i32(tok[i + 1], &log->ngpus);
        }
      } else if (tok[0] != NULL && strcmp(tok[0], "Rank") == 0) {
        int32_t r;
        const char *host = NULL;
        if (!rank_line(tok, &r, &host) || r > 1 << 24) {
          e = g_error_new(SP_ERROR, SP_ERROR_PARSE, "%s:%u: cannot read this Rank line: '%s'", name, li + 1, body);
        } else {
          gpointer old = g_hash_table_lookup(rank_host, GINT_TO_POINTER(r));
          if (old != NULL && strcmp(old, host) != 0)
            e = g_error_new(SP_ERROR, SP_ERROR_PARSE, "%s:%u: rank %d is on '%s' here and on '%s' before",
                            name, li + 1, r, host, (const char *)old);
          else if (old == NULL)
            g_hash_table_insert(rank_host, GINT_TO_POINTER(r), g_strdup(host));
          max_rank = MAX(max_rank, r);
        }
      } else if (!have_cols || strstr(h, "size") != NULL) {
        columns c;
        if (header_columns(tok, &c)) {
          cols = c;
          have_cols = TRUE;
        }
      }
      g_strfreev(tok);
      continue;
    }
    char **tok = fields(body);
    sp_nt_row r;
    gboolean ok = FALSE;
    if (tok[0] != NULL && tok[1] != NULL && g_ascii_isdigit(tok[0][0]) && g_ascii_isdigit(tok[1][0])) {
      if (have_cols) {
        ok = parse_row(tok, &cols, &r);
      } else {
        columns c;
        default_columns(&c, g_strv_length(tok) != 12);
        ok = parse_row(tok, &c, &r);
      }
    }
    const char *tp = ok ? NULL : strstr(body, "TUNER/Plugin: Using ");
    if (ok) {
      g_array_append_val(log->rows, r);
    } else if (row_like(tok, have_cols ? &cols : NULL)) {
      if (log->skipped_rows++ == 0) log->first_skipped_line = li + 1;
    } else if (tp != NULL && log->tuner_plugin == NULL) {
      /* NCCL_DEBUG=INFO: "... NCCL INFO TUNER/Plugin: Using nccl_ofi_tuner (v3)" */
      tp += strlen("TUNER/Plugin: Using ");
      size_t n = strcspn(tp, " \t(");
      if (n > 0 && n < 128) log->tuner_plugin = g_utf8_make_valid(tp, (gssize)n);
    } else if (!named && program_in(body, &named_coll)) {
      named = TRUE;
    }
    g_strfreev(tok);
  }
  g_strfreev(lines);
  if (e == NULL && log->rows->len == 0)
    e = g_error_new(SP_ERROR, SP_ERROR_PARSE,
                    "%s: not nccl-tests output: no result row (lines 'SIZE COUNT TYPE REDOP ROOT TIME ALGBW "
                    "BUSBW #WRONG ...' under '#  size count type ...')", name);
  if (e == NULL && max_rank >= 0) {
    for (int32_t r = 0; r <= max_rank && e == NULL; r++) {
      const char *h = g_hash_table_lookup(rank_host, GINT_TO_POINTER(r));
      if (h == NULL)
        e = g_error_new(SP_ERROR, SP_ERROR_PARSE, "%s: the Rank lines skip rank %d (ranks 0 to %d expected)",
                        name, r, max_rank);
      else
        g_ptr_array_add(log->hosts, g_strdup(h));
    }
    log->nranks = max_rank + 1;
  }
  g_hash_table_unref(rank_host);
  if (e != NULL) {
    g_propagate_error(err, e);
    sp_nt_log_free(log);
    return NULL;
  }
  if (started) {
    log->has_coll = TRUE;
    log->coll = started_coll;
  } else if (named) {
    log->has_coll = TRUE;
    log->coll = named_coll;
  } else {
    g_autofree char *base = g_path_get_basename(name);
    log->has_coll = program_in(base, &log->coll);
  }
  return log;
}

sp_nt_log *sp_nt_log_read(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *e = NULL;
  if (!g_file_get_contents(path, &text, &len, &e)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot read '%s': %s", path, e->message);
    g_error_free(e);
    return NULL;
  }
  if (memchr(text, '\0', len) != NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: not nccl-tests output (a binary file)", path);
    return NULL;
  }
  return sp_nt_log_parse(text, (gssize)len, path, err);
}

gboolean sp_nt_log_nodes(const sp_nt_log *log, int32_t *nodes, int32_t **node_of, int32_t **local_of)
{
  if (log->nranks <= 0 || log->hosts->len != (guint)log->nranks) return FALSE;
  GHashTable *idx = g_hash_table_new(g_str_hash, g_str_equal);
  GArray *per = g_array_new(FALSE, TRUE, sizeof(int32_t));
  int32_t *no = g_new(int32_t, log->nranks);
  int32_t *lo = g_new(int32_t, log->nranks);
  for (int32_t r = 0; r < log->nranks; r++) {
    const char *h = g_ptr_array_index(log->hosts, r);
    gpointer v;
    int32_t k;
    if (g_hash_table_lookup_extended(idx, h, NULL, &v)) {
      k = GPOINTER_TO_INT(v);
    } else {
      k = (int32_t)g_hash_table_size(idx);
      g_hash_table_insert(idx, (gpointer)h, GINT_TO_POINTER(k));
      int32_t zero = 0;
      g_array_append_val(per, zero);
    }
    no[r] = k;
    lo[r] = g_array_index(per, int32_t, k)++;
  }
  *nodes = (int32_t)g_hash_table_size(idx);
  *node_of = no;
  if (local_of) *local_of = lo;
  else g_free(lo);
  g_array_unref(per);
  g_hash_table_unref(idx);
  return TRUE;
}

int32_t sp_nt_log_ranks_from_rows(const sp_nt_log *log, sp_coll c)
{
  if (c != SP_COLL_ALL_GATHER && c != SP_COLL_REDUCE_SCATTER && c != SP_COLL_ALL_TO_ALL) return 0;
  int64_t n = 0;
  for (guint i = 0; i < log->rows->len; i++) {
    const sp_nt_row *r = &g_array_index(log->rows, sp_nt_row, i);
    sp_dtype t;
    if (r->count == 0 || !sp_nt_type_parse(r->type, &t, NULL)) continue;
    uint64_t per;
    if (!g_uint64_checked_mul(&per, r->count, sp_dtype_size(t))) return 0; /* more than 2^64 bytes */
    if (r->size % per != 0) return 0;
    int64_t k = (int64_t)(r->size / per);
    if (n != 0 && k != n) return 0;
    n = k;
  }
  return n > 0 && n <= G_MAXINT32 ? (int32_t)n : 0;
}
