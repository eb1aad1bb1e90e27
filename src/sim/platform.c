/* Platform reader (see platform.h): one GMarkup pass over a SimGrid platform file. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"
#include "spsim/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

const char *const sp_plat_known_props[] = { "gpu", "gpu_mem", "hbm_bw", "mem_bw", "node", "local_rank",
                                            "coll_latency", "local_latency", "comm_slowdown", "nvls", "sharp",
                                            "sharp_bw", "nccl_tuner", NULL };

typedef struct {
  sp_plat_desc *d;
  GPtrArray *stack;      /* element names */
  GArray *groups;        /* group index of each open element (-1: not a zone/cluster) */
  GArray *zone_counts;   /* hosts directly inside each open zone */
  GHashTable *node_sizes; /* hosts per innermost zone -> occurrences */
  int32_t gpn_prop;      /* gpus_per_node property (0: none, -1: malformed) */
  gboolean nvls_seen;    /* the first nvls property was read */
  gboolean sharp_seen;   /* the first sharp property was read */
  char *gpn_bad;         /* the malformed value */
  gboolean tuner_seen;   /* the first nccl_tuner property was read */
  char *tuner_bad;       /* an nccl_tuner value spsim does not know */
  gboolean saw_platform;
  gboolean in_first_host;
  int32_t zone_depth;
  GHashTable *unknown_ids; /* unknown host property names seen */
  GHashTable *node_ids;    /* distinct `node` property values */
  guint own_lo, own_hi;    /* hosts of the open <host> or <cluster>: its properties are theirs */
} reader;

static void link_free(gpointer p)
{
  sp_plat_link *l = p;
  g_free(l->bandwidth);
  g_free(l->latency);
  g_free(l);
}

static const char *attr(const char **names, const char **values, const char *key)
{
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], key) == 0)
      return values[i];
  return NULL;
}

/* A speed, memory or count with a decimal suffix (k, M, G, T, P, E; Ki, Mi, Gi, Ti
 * for bytes); units after the prefix ("f", "B") are ignored. NULL is no number. */
static double value_with_suffix(const char *s, gboolean bytes, gboolean *ok)
{
  *ok = FALSE;
  if (s == NULL) /* speed="" split at its commas has no first field */
    return 0;
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  *ok = end != s && v >= 0;
  if (!*ok)
    return 0;
  while (*end == ' ')
    end++;
  double mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = bytes && end[1] == 'i' ? 1024.0 : 1e3; break;
  case 'M': mul = bytes && end[1] == 'i' ? 1024.0 * 1024 : 1e6; break;
  case 'G': mul = bytes && end[1] == 'i' ? GIB : 1e9; break;
  case 'T': mul = bytes && end[1] == 'i' ? GIB * 1024 : 1e12; break;
  case 'P': mul = 1e15; break;
  case 'E': mul = 1e18; break;
  default: break;
  }
  if (!isfinite(v * mul)) { /* "1e400", "1e300E": not a usable number */
    *ok = FALSE;
    return 0;
  }
  return v * mul;
}

static int32_t current_group(const reader *r)
{
  for (guint i = r->groups->len; i > 0; i--)
    if (g_array_index(r->groups, int32_t, i - 1) >= 0)
      return g_array_index(r->groups, int32_t, i - 1);
  return -1;
}

static void add_host(reader *r, char *name, int32_t group)
{
  g_ptr_array_add(r->d->names, name);
  g_array_append_val(r->d->group, group);
  sp_plat_host h = { 0 };
  g_array_append_val(r->d->host, h);
}

/* A host's own GPU fact: a property of its <host> or <cluster>, or its speed. */
static void host_fact(reader *r, const char *id, const char *val)
{
  gboolean ok = FALSE;
  double v = 0;
  if (strcmp(id, "gpu_mem") == 0) {
    v = value_with_suffix(val, TRUE, &ok);
    v = v < 1e6 ? v * GIB : v; /* a bare small number is GiB */
  } else if (strcmp(id, "hbm_bw") == 0 || strcmp(id, "speed") == 0) {
    g_auto(GStrv) ps = g_strsplit(val, ",", 2); /* a speed may list pstates: the first */
    v = value_with_suffix(ps[0], FALSE, &ok);
  } else if (strcmp(id, "gpu") != 0) {
    return;
  }
  for (guint i = r->own_lo; i < r->own_hi; i++) {
    sp_plat_host *h = &g_array_index(r->d->host, sp_plat_host, i);
    if (strcmp(id, "gpu") == 0) {
      g_free(h->gpu);
      h->gpu = g_strdup(val);
    } else if (ok && v > 0) {
      *(strcmp(id, "gpu_mem") == 0 ? &h->gpu_mem : strcmp(id, "hbm_bw") == 0 ? &h->hbm_bw : &h->speed) = v;
    }
  }
}

/* Expand a radical "0-3,5,7-9" into names prefix<i>suffix. */
static gboolean expand_radical(reader *r, const char *prefix, const char *radical, const char *suffix,
                               int32_t group, GError **err)
{
  gchar **parts = g_strsplit(radical, ",", -1);
  gboolean ok = TRUE;
  for (int i = 0; parts[i] && ok; i++) {
    char *s = g_strstrip(parts[i]);
    char *end = NULL;
    errno = 0;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || errno) {
      ok = FALSE;
      break;
    }
    if (*end == '-') {
      char *s2 = end + 1;
      b = strtol(s2, &end, 10);
      if (end == s2 || errno) {
        ok = FALSE;
        break;
      }
    }
    if (*end != '\0' || b < a || b - a > 10000000) {
      ok = FALSE;
      break;
    }
    for (long v = a; v <= b; v++)
      add_host(r, g_strdup_printf("%s%ld%s", prefix, v, suffix), group);
  }
  g_strfreev(parts);
  if (!ok)
    g_set_error(err, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT,
                "radical '%s' is not a list of numbers and ranges like 0-7,9", radical);
  return ok;
}

/* A GPU fact from a property of the first host or of the top zone. */
static void gpu_fact(reader *r, const char *id, const char *val)
{
  if (strcmp(id, "gpu_mem") == 0 && r->d->gpu_mem == 0) {
    gboolean ok;
    double v = value_with_suffix(val, TRUE, &ok);
    if (ok && v > 0)
      r->d->gpu_mem = v < 1e6 ? v * GIB : v; /* a bare small number is GiB */
  } else if (strcmp(id, "hbm_bw") == 0 && r->d->hbm_bw == 0) {
    gboolean ok;
    double v = value_with_suffix(val, FALSE, &ok);
    if (ok && v > 0)
      r->d->hbm_bw = v;
  } else if (strcmp(id, "nvls") == 0 && !r->nvls_seen) {
    r->nvls_seen = TRUE;
    r->d->nvls = strcmp(val, "1") == 0 || g_ascii_strcasecmp(val, "true") == 0 ||
                 g_ascii_strcasecmp(val, "yes") == 0;
  } else if (strcmp(id, "sharp") == 0 && !r->sharp_seen) {
    r->sharp_seen = TRUE;
    r->d->sharp = strcmp(val, "1") == 0 || g_ascii_strcasecmp(val, "true") == 0 ||
                  g_ascii_strcasecmp(val, "yes") == 0;
  } else if (strcmp(id, "nccl_tuner") == 0 && !r->tuner_seen) {
    r->tuner_seen = TRUE;
    if (!sp_tuner_parse(val, &r->d->tuner))
      r->tuner_bad = g_strdup(val);
  } else if (strcmp(id, "sharp_bw") == 0 && r->d->sharp_bw == 0) {
    gboolean ok;
    double v = value_with_suffix(val, FALSE, &ok);
    if (ok && v > 0)
      r->d->sharp_bw = v;
  } else if ((strcmp(id, "local_gemm_flops") == 0 && r->d->local_gemm_flops == 0) ||
             (strcmp(id, "local_attn_flops") == 0 && r->d->local_attn_flops == 0) ||
             (strcmp(id, "local_attn_bwd_flops") == 0 && r->d->local_attn_bwd_flops == 0)) {
    gboolean ok;
    double v = value_with_suffix(val, FALSE, &ok);
    if (ok && v > 0)
      *(strcmp(id, "local_gemm_flops") == 0  ? &r->d->local_gemm_flops
        : strcmp(id, "local_attn_flops") == 0 ? &r->d->local_attn_flops
                                              : &r->d->local_attn_bwd_flops) = v;
  } else if (strcmp(id, "local_gemm_table") == 0 && r->d->local_gemm_table == NULL) {
    r->d->local_gemm_table = g_strdup(val);
  } else if (strcmp(id, "gpu") == 0 && r->d->gpu_model == NULL) {
    r->d->gpu_model = g_strdup(val);
  } else if (strcmp(id, "gpus_per_node") == 0 && r->gpn_prop == 0) {
    char *end = NULL;
    gint64 v = g_ascii_strtoll(val, &end, 10);
    /* -1: present but not a whole number >= 1 (refused once the file is read) */
    r->gpn_prop = end != val && *end == '\0' && v >= 1 && v <= G_MAXINT32 ? (int32_t)v : -1;
    if (r->gpn_prop < 0)
      r->gpn_bad = g_strdup(val);
  }
}

static void r_start(GMarkupParseContext *ctx, const char *el, const char **an, const char **av,
                    gpointer ud, GError **err)
{
  (void)ctx;
  reader *r = ud;
  if (r->stack->len == 0) {
    if (strcmp(el, "platform") != 0) {
      g_set_error(err, G_MARKUP_ERROR, G_MARKUP_ERROR_INVALID_CONTENT,
                  "the root element is <%s>, a SimGrid platform starts with <platform>", el);
      return;
    }
    r->saw_platform = TRUE;
  }
  const char *parent = r->stack->len ? g_ptr_array_index(r->stack, r->stack->len - 1) : "";
  int32_t group = -1;
  if (strcmp(el, "zone") == 0 || strcmp(el, "AS") == 0) {
    group = r->d->ngroups++;
    r->zone_depth++;
    int32_t z = 0;
    g_array_append_val(r->zone_counts, z);
  } else if (strcmp(el, "host") == 0 || strcmp(el, "peer") == 0) {
    const char *id = attr(an, av, "id");
    if (!id) {
      g_set_error(err, G_MARKUP_ERROR, G_MARKUP_ERROR_MISSING_ATTRIBUTE, "<%s> without an id", el);
      return;
    }
    gboolean first = r->d->names->len == 0;
    add_host(r, g_strdup(id), current_group(r));
    r->own_lo = r->d->names->len - 1;
    r->own_hi = r->d->names->len;
    if (attr(an, av, "speed") != NULL) host_fact(r, "speed", attr(an, av, "speed"));
    if (strcmp(el, "host") == 0) {
      r->d->host_elems++;
      if (r->zone_counts->len > 0)
        g_array_index(r->zone_counts, int32_t, r->zone_counts->len - 1)++;
      const char *sp = attr(an, av, "speed");
      if (first) {
        r->in_first_host = TRUE;
        if (sp != NULL) {
          gboolean ok;
          g_auto(GStrv) ps = g_strsplit(sp, ",", 2);
          r->d->speed = value_with_suffix(ps[0], FALSE, &ok);
        }
      }
    }
  } else if (strcmp(el, "cluster") == 0 || strcmp(el, "cabinet") == 0) {
    const char *prefix = attr(an, av, "prefix"), *radical = attr(an, av, "radical"),
               *suffix = attr(an, av, "suffix");
    if (!radical) {
      g_set_error(err, G_MARKUP_ERROR, G_MARKUP_ERROR_MISSING_ATTRIBUTE, "<%s> without a radical", el);
      return;
    }
    group = r->d->ngroups++;
    r->own_lo = r->d->names->len;
    if (!expand_radical(r, prefix ? prefix : "", radical, suffix ? suffix : "", group, err))
      return;
    r->own_hi = r->d->names->len;
    if (attr(an, av, "speed") != NULL) host_fact(r, "speed", attr(an, av, "speed"));
    const char *sp = attr(an, av, "speed");
    if (sp != NULL && r->d->speed == 0) {
      gboolean ok;
      r->d->speed = value_with_suffix(sp, FALSE, &ok);
    }
  } else if (strcmp(el, "link") == 0) {
    const char *id = attr(an, av, "id");
    if (id != NULL) {
      sp_plat_link *l = g_new0(sp_plat_link, 1);
      l->bandwidth = g_strdup(attr(an, av, "bandwidth"));
      l->latency = g_strdup(attr(an, av, "latency"));
      g_hash_table_replace(r->d->links, g_strdup(id), l);
    }
  } else if (strcmp(el, "prop") == 0) {
    const char *id = attr(an, av, "id"), *value = attr(an, av, "value");
    if (strcmp(parent, "config") == 0) {
      if (!id || !value) {
        g_set_error(err, G_MARKUP_ERROR, G_MARKUP_ERROR_MISSING_ATTRIBUTE,
                    "<config><prop> needs id and value");
        return;
      }
      g_ptr_array_add(r->d->cfg, g_strdup_printf("--cfg=%s:%s", id, value));
    } else if (id && value) {
      if (r->in_first_host || r->zone_depth <= 1)
        gpu_fact(r, id, value);
      if (strcmp(parent, "host") == 0 || strcmp(parent, "cluster") == 0)
        host_fact(r, id, value);
      if (strcmp(parent, "host") == 0 && strcmp(id, "node") == 0)
        g_hash_table_add(r->node_ids, g_strdup(value));
      if (r->in_first_host && strcmp(id, "coll_latency") == 0 && r->d->coll_latency == 0)
        r->d->coll_latency = sp_plat_parse_unit(value, TRUE);
      if (r->in_first_host && strcmp(id, "mem_bw") == 0)
        r->d->mem_bw = TRUE;
      if ((strcmp(parent, "host") == 0 || strcmp(parent, "cluster") == 0) &&
          !g_strv_contains(sp_plat_known_props, id) && !g_hash_table_contains(r->unknown_ids, id) &&
          !(strcmp(parent, "cluster") == 0 && strcmp(id, "gpus_per_node") == 0)) {
        g_hash_table_add(r->unknown_ids, g_strdup(id));
        const char *host = r->d->names->len ? g_ptr_array_index(r->d->names, r->d->names->len - 1) : "?";
        g_ptr_array_add(r->d->unknown, g_strdup_printf("'%s' (first in <%s> '%s')", id, parent, host));
      }
    }
  }
  g_ptr_array_add(r->stack, g_strdup(el));
  g_array_append_val(r->groups, group);
}

static void r_end(GMarkupParseContext *ctx, const char *el, gpointer ud, GError **err)
{
  (void)ctx; (void)err;
  reader *r = ud;
  g_ptr_array_remove_index(r->stack, r->stack->len - 1);
  g_array_set_size(r->groups, r->groups->len - 1);
  if ((strcmp(el, "zone") == 0 || strcmp(el, "AS") == 0) && r->zone_counts->len > 0) {
    int32_t n = g_array_index(r->zone_counts, int32_t, r->zone_counts->len - 1);
    g_array_set_size(r->zone_counts, r->zone_counts->len - 1);
    r->zone_depth--;
    if (n > 0) {
      gpointer old = g_hash_table_lookup(r->node_sizes, GINT_TO_POINTER(n));
      g_hash_table_insert(r->node_sizes, GINT_TO_POINTER(n), GINT_TO_POINTER(GPOINTER_TO_INT(old) + 1));
    }
  } else if (strcmp(el, "host") == 0) {
    r->in_first_host = FALSE;
  }
  if (strcmp(el, "host") == 0 || strcmp(el, "peer") == 0 || strcmp(el, "cluster") == 0 || strcmp(el, "cabinet") == 0)
    r->own_lo = r->own_hi = 0;
}

static void r_passthrough(GMarkupParseContext *ctx, const char *text, gsize len, gpointer ud, GError **err)
{
  (void)ctx; (void)err;
  reader *r = ud;
  if (len >= 9 && g_ascii_strncasecmp(text, "<!DOCTYPE", 9) == 0)
    r->d->has_doctype = TRUE;
}

/* The most common number of hosts per innermost zone is the node size. */
static int32_t node_size(const reader *r, int32_t hosts)
{
  GHashTableIter it;
  gpointer k, v;
  int best = 0, bestc = 0;
  g_hash_table_iter_init(&it, r->node_sizes);
  while (g_hash_table_iter_next(&it, &k, &v))
    if (GPOINTER_TO_INT(v) > bestc || (GPOINTER_TO_INT(v) == bestc && GPOINTER_TO_INT(k) < best)) {
      best = GPOINTER_TO_INT(k);
      bestc = GPOINTER_TO_INT(v);
    }
  return bestc >= 2 && best < hosts ? best : 0;
}

sp_plat_desc *sp_plat_read(const char *path, GError **err)
{
  char *text = NULL;
  gsize len = 0;
  GError *e = NULL;
  if (!g_file_get_contents(path, &text, &len, &e)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot read platform '%s': %s", path, e->message);
    g_error_free(e);
    return NULL;
  }
  /* GMarkup reads UTF-8 only; checking first also keeps invalid bytes away from
   * GMarkup's passthrough path, where GLib 2.74 sets its error twice */
  const char *bad = NULL;
  if (!g_utf8_validate(text, (gssize)len, &bad)) {
    int line = 1;
    for (const char *c = text; c < bad; c++)
      line += *c == '\n';
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "platform '%s' is not valid XML (line %d): %s at byte %" G_GSIZE_FORMAT
                " (the file must be UTF-8 text)", path, line,
                *bad == '\0' ? "a NUL byte" : "a byte that is not UTF-8", (gsize)(bad - text));
    g_free(text);
    return NULL;
  }
  sp_plat_desc *d = g_new0(sp_plat_desc, 1);
  d->path = g_strdup(path);
  d->names = g_ptr_array_new_with_free_func(g_free);
  d->group = g_array_new(FALSE, FALSE, sizeof(int32_t));
  d->cfg = g_ptr_array_new_with_free_func(g_free);
  d->unknown = g_ptr_array_new_with_free_func(g_free);
  d->links = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, link_free);
  d->host = g_array_new(FALSE, FALSE, sizeof(sp_plat_host));
  reader r = { .d = d, .stack = g_ptr_array_new_with_free_func(g_free),
               .groups = g_array_new(FALSE, FALSE, sizeof(int32_t)),
               .zone_counts = g_array_new(FALSE, FALSE, sizeof(int32_t)),
               .node_sizes = g_hash_table_new(g_direct_hash, g_direct_equal),
               .unknown_ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
               .node_ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL) };
  GMarkupParser parser = { r_start, r_end, NULL, r_passthrough, NULL };
  GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, &r, NULL);
  gboolean ok = g_markup_parse_context_parse(ctx, text, (gssize)len, &e) &&
                g_markup_parse_context_end_parse(ctx, &e);
  if (!ok) {
    int line = 0, col = 0;
    g_markup_parse_context_get_position(ctx, &line, &col);
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "platform '%s' is not valid XML (line %d): %s", path, line,
                e->message);
    g_error_free(e);
  } else if (!r.saw_platform) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "platform '%s' has no <platform> element", path);
    ok = FALSE;
  } else if (d->names->len == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "platform '%s' declares no host; add <host> or <cluster> elements", path);
    ok = FALSE;
  }
  if (ok && r.gpn_prop < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "platform '%s': property gpus_per_node must be a whole number >= 1 (got '%s')", path, r.gpn_bad);
    ok = FALSE;
  }
  if (ok && r.tuner_bad != NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE,
                "platform '%s': property nccl_tuner '%s' is not a tuner plugin spsim knows (%s; none is "
                "NCCL's own model)", path, r.tuner_bad, sp_tuner_list());
    ok = FALSE;
  }
  if (ok) {
    d->gpus_per_node = r.gpn_prop > 0 ? r.gpn_prop : node_size(&r, (int32_t)d->names->len);
    d->nodes = (int32_t)g_hash_table_size(r.node_ids);
    /* what a host does not say, the file's facts say (top zone, first host) */
    for (guint i = 0; i < d->host->len; i++) {
      sp_plat_host *h = &g_array_index(d->host, sp_plat_host, i);
      if (h->speed == 0) h->speed = d->speed;
      if (h->gpu_mem == 0) h->gpu_mem = d->gpu_mem;
      if (h->hbm_bw == 0) h->hbm_bw = d->hbm_bw;
      if (h->gpu == NULL && d->gpu_model != NULL) h->gpu = g_strdup(d->gpu_model);
    }
  }
  g_free(r.gpn_bad);
  g_free(r.tuner_bad);
  g_markup_parse_context_free(ctx);
  g_ptr_array_unref(r.stack);
  g_array_unref(r.groups);
  g_array_unref(r.zone_counts);
  g_hash_table_unref(r.node_sizes);
  g_hash_table_unref(r.unknown_ids);
  g_hash_table_unref(r.node_ids);
  g_free(text);
  if (!ok) {
    sp_plat_desc_free(d);
    return NULL;
  }
  return d;
}

void sp_plat_desc_free(sp_plat_desc *d)
{
  if (d == NULL)
    return;
  g_free(d->path);
  g_ptr_array_unref(d->names);
  g_array_unref(d->group);
  g_ptr_array_unref(d->cfg);
  g_ptr_array_unref(d->unknown);
  g_hash_table_unref(d->links);
  for (guint i = 0; d->host != NULL && i < d->host->len; i++) g_free(g_array_index(d->host, sp_plat_host, i).gpu);
  if (d->host != NULL) g_array_unref(d->host);
  g_free(d->gpu_model);
  g_free(d->local_gemm_table);
  g_free(d);
}

double sp_plat_parse_unit(const char *s, gboolean time)
{
  if (!s)
    return 0.0;
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || !isfinite(v) || v < 0)
    return 0.0;
  while (*end == ' ')
    end++;
  static const struct { const char *u; double f; } bw[] = {
    { "", 1 }, { "Bps", 1 }, { "kBps", 1e3 }, { "KBps", 1e3 }, { "MBps", 1e6 }, { "GBps", 1e9 },
    { "TBps", 1e12 }, { "KiBps", 1024.0 }, { "MiBps", 1048576.0 }, { "GiBps", 1073741824.0 },
    { "TiBps", 1099511627776.0 } };
  static const struct { const char *u; double f; } tm[] = {
    { "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 }, { "ns", 1e-9 } };
  double f = 0;
  if (time) {
    for (gsize i = 0; i < G_N_ELEMENTS(tm); i++)
      if (strcmp(end, tm[i].u) == 0)
        f = tm[i].f;
  } else {
    for (gsize i = 0; i < G_N_ELEMENTS(bw); i++)
      if (strcmp(end, bw[i].u) == 0)
        f = bw[i].f;
  }
  return isfinite(v * f) ? v * f : 0.0; /* "1e300TBps" overflows: malformed */
}

int32_t sp_plat_gpus_per_node(const sp_plat_desc *d, int32_t flag, GError **err)
{
  if (flag > 0)
    return flag;
  if (d != NULL && d->gpus_per_node > 0)
    return d->gpus_per_node;
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
              "platform '%s' does not say how many GPUs share a node: add <prop id=\"gpus_per_node\" "
              "value=\"8\"/> to its top zone or <cluster>, or pass --gpus-per-node",
              d != NULL && d->path != NULL ? d->path : "?");
  return 0;
}
