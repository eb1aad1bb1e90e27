/* Model configurations: JSON parsing, validation, parameter and FLOP formulas. */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "spsim/error.h"
#include "spsim/model.h"

void sp_model_free(sp_model *m)
{
  if (m == NULL) return;
  g_free(m->name);
  g_free(m->sources);
  g_free(m->ignored);
  g_free(m);
}

gboolean sp_model_validate(const sp_model *m, GError **err)
{
  const struct { const char *name; int64_t v; } f[] = {
    { "layers", m->layers }, { "hidden", m->hidden }, { "heads", m->heads },
    { "kv_heads", m->kv_heads }, { "ffn", m->ffn }, { "vocab", m->vocab },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(f); i++)
    if (f[i].v <= 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': %s must be a positive integer (got %" G_GINT64_FORMAT ")",
                  m->name ? m->name : "?", f[i].name, f[i].v);
      return FALSE;
    }
  if (m->hidden % m->heads != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': hidden (%" G_GINT64_FORMAT ") must be a multiple of heads (%" G_GINT64_FORMAT ")",
                m->name, m->hidden, m->heads);
    return FALSE;
  }
  if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': heads (%" G_GINT64_FORMAT ") must be a multiple of kv_heads (%" G_GINT64_FORMAT ")",
                m->name, m->heads, m->kv_heads);
    return FALSE;
  }
  if (m->elementwise == SP_ELEM_EAGER && m->mlp != SP_MLP_SWIGLU) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "model '%s': elementwise \"eager\" prices torchtitan's Llama block (RMSNorm, rotary, SwiGLU) and "
                "needs mlp \"swiglu\"", m->name ? m->name : "?");
    return FALSE;
  }
  if (m->dtype != SP_BF16 && m->dtype != SP_F16 && m->dtype != SP_F32) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': dtype must be bf16, f16 or f32 (got %s)",
                m->name, sp_dtype_name(m->dtype));
    return FALSE;
  }
  return TRUE;
}

/* Read a required positive integer member. */
static gboolean get_int(JsonObject *o, const char *key, const char *what, int64_t *out, GError **err)
{
  JsonNode *n = json_object_get_member(o, key);
  if (n == NULL) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: missing field '%s' (a model needs layers, hidden, heads, kv_heads, ffn, vocab)", what, key);
    return FALSE;
  }
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: field '%s' must be an integer", what, key);
    return FALSE;
  }
  *out = json_node_get_int(n);
  if (*out <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: field '%s' must be positive (got %" G_GINT64_FORMAT ")", what, key, *out);
    return FALSE;
  }
  return TRUE;
}

static const char *get_str(JsonObject *o, const char *key, const char *dflt, const char *what, GError **err)
{
  JsonNode *n = json_object_get_member(o, key);
  if (n == NULL) return dflt;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: field '%s' must be a string", what, key);
    return NULL;
  }
  return json_node_get_string(n);
}

/* The keys a model file may hold; anything else is a typo or a feature spsim does
 * not price (e.g. num_experts), never silently ignored. */
static const char *const known_keys[] = { "name", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                                          "dtype", "mlp", "tied_embeddings", "elementwise", "sources", NULL };

/* Unknown keys of @p o: an error in strict mode, else ", "-joined into *ignored. */
static gboolean check_keys(JsonObject *o, const char *what, sp_model_flags flags, char **ignored, GError **err)
{
  g_autoptr(GList) members = json_object_get_members(o);
  g_autoptr(GString) unknown = g_string_new(NULL);
  for (GList *l = members; l != NULL; l = l->next)
    if (!g_strv_contains(known_keys, l->data)) {
      if (!(flags & SP_MODEL_LENIENT)) {
        g_autofree char *list = g_strjoinv(", ", (char **)known_keys);
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "%s: unknown key '%s' (a model file knows %s; --lenient ignores unknown keys with a warning)",
                    what, (const char *)l->data, list);
        return FALSE;
      }
      g_string_append_printf(unknown, "%s%s", unknown->len ? ", " : "", (const char *)l->data);
    }
  *ignored = unknown->len ? g_strdup(unknown->str) : NULL;
  return TRUE;
}

sp_model *sp_model_parse(const char *json, gssize len, const char *what, GError **err)
{
  return sp_model_parse_flags(json, len, what, SP_MODEL_STRICT, err);
}

sp_model *sp_model_parse_flags(const char *json, gssize len, const char *what, sp_model_flags flags, GError **err)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  GError *jerr = NULL;
  if (!json_parser_load_from_data(parser, json, len, &jerr)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: not valid JSON: %s", what, jerr->message);
    g_error_free(jerr);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: a model file must hold one JSON object", what);
    return NULL;
  }
  JsonObject *o = json_node_get_object(root);
  sp_model *m = g_new0(sp_model, 1);
  if (!check_keys(o, what, flags, &m->ignored, err)) goto fail;
  const char *name = get_str(o, "name", what, what, err);
  if (name == NULL) goto fail;
  m->name = g_strdup(name);
  if (!get_int(o, "layers", what, &m->layers, err) || !get_int(o, "hidden", what, &m->hidden, err) ||
      !get_int(o, "heads", what, &m->heads, err) || !get_int(o, "kv_heads", what, &m->kv_heads, err) ||
      !get_int(o, "ffn", what, &m->ffn, err) || !get_int(o, "vocab", what, &m->vocab, err))
    goto fail;
  const char *dt = get_str(o, "dtype", "bf16", what, err);
  if (dt == NULL) goto fail;
  if (!sp_dtype_parse(dt, &m->dtype, err)) goto fail;
  const char *mlp = get_str(o, "mlp", "swiglu", what, err);
  if (mlp == NULL) goto fail;
  if (strcmp(mlp, "swiglu") == 0) m->mlp = SP_MLP_SWIGLU;
  else if (strcmp(mlp, "gelu") == 0) m->mlp = SP_MLP_GELU;
  else {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: mlp must be \"swiglu\" or \"gelu\" (got \"%s\")", what, mlp);
    goto fail;
  }
  JsonNode *tn = json_object_get_member(o, "tied_embeddings");
  if (tn != NULL) {
    if (!JSON_NODE_HOLDS_VALUE(tn) || json_node_get_value_type(tn) != G_TYPE_BOOLEAN) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: field 'tied_embeddings' must be true or false", what);
      goto fail;
    }
    m->tied_embeddings = json_node_get_boolean(tn);
  }
  const char *ew = get_str(o, "elementwise", "fused", what, err);
  if (ew == NULL) goto fail;
  if (strcmp(ew, "fused") == 0) m->elementwise = SP_ELEM_FUSED;
  else if (strcmp(ew, "eager") == 0) m->elementwise = SP_ELEM_EAGER;
  else {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: elementwise must be \"fused\" or \"eager\" (got \"%s\")", what, ew);
    goto fail;
  }
  JsonNode *sn = json_object_get_member(o, "sources");
  GString *src = g_string_new("");
  if (sn != NULL && JSON_NODE_HOLDS_ARRAY(sn)) {
    JsonArray *a = json_node_get_array(sn);
    for (guint i = 0; i < json_array_get_length(a); i++) {
      const char *s = json_array_get_string_element(a, i);
      if (s == NULL) continue;
      if (src->len) g_string_append(src, "; ");
      g_string_append(src, s);
    }
  } else if (sn != NULL && JSON_NODE_HOLDS_VALUE(sn) && json_node_get_value_type(sn) == G_TYPE_STRING) {
    g_string_append(src, json_node_get_string(sn));
  }
  m->sources = g_string_free(src, FALSE);
  if (!sp_model_validate(m, err)) goto fail;
  return m;
fail:
  sp_model_free(m);
  return NULL;
}

static sp_model *load_file(const char *path, sp_model_flags flags, GError **err)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *ferr = NULL;
  if (!g_file_get_contents(path, &text, &len, &ferr)) {
    g_set_error(err, SP_ERROR, SP_ERROR_IO, "cannot read model file: %s", ferr->message);
    g_error_free(ferr);
    return NULL;
  }
  return sp_model_parse_flags(text, (gssize)len, path, flags, err);
}

sp_model *sp_model_load_file(const char *path, GError **err)
{
  return load_file(path, SP_MODEL_STRICT, err);
}

static gint cmp_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char **sp_model_list(const char *const *dirs)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  for (size_t i = 0; dirs != NULL && dirs[i] != NULL; i++) {
    GDir *d = g_dir_open(dirs[i], 0, NULL);
    if (d == NULL) continue;
    const char *f;
    while ((f = g_dir_read_name(d)) != NULL) {
      if (!g_str_has_suffix(f, ".json")) continue;
      char *n = g_strndup(f, strlen(f) - 5);
      gboolean dup = FALSE;
      for (guint j = 0; j < names->len; j++)
        if (strcmp(g_ptr_array_index(names, j), n) == 0) dup = TRUE;
      if (dup) g_free(n);
      else g_ptr_array_add(names, n);
    }
    g_dir_close(d);
  }
  g_ptr_array_sort(names, cmp_names);
  char **out = g_new0(char *, names->len + 1);
  for (guint j = 0; j < names->len; j++) out[j] = g_strdup(g_ptr_array_index(names, j));
  return out;
}

sp_model *sp_model_find(const char *name_or_file, const char *const *dirs, GError **err)
{
  return sp_model_find_flags(name_or_file, dirs, SP_MODEL_STRICT, err);
}

sp_model *sp_model_find_flags(const char *name_or_file, const char *const *dirs, sp_model_flags flags,
                              GError **err)
{
  if (name_or_file == NULL || *name_or_file == '\0') {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "empty model name");
    return NULL;
  }
  if (strchr(name_or_file, '/') != NULL || g_str_has_suffix(name_or_file, ".json"))
    return load_file(name_or_file, flags, err);
  for (size_t i = 0; dirs != NULL && dirs[i] != NULL; i++) {
    g_autofree char *file = g_strdup_printf("%s.json", name_or_file);
    g_autofree char *path = g_build_filename(dirs[i], file, NULL);
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR)) return load_file(path, flags, err);
  }
  g_auto(GStrv) known = sp_model_list(dirs);
  g_autofree char *list = g_strjoinv(", ", known);
  g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "unknown model '%s' (known models: %s; or give a FILE.json)",
              name_or_file, *list ? list : "none found, set SPSIM_MODELS_DIR");
  return NULL;
}

int64_t sp_model_head_dim(const sp_model *m) { return m->hidden / m->heads; }

double sp_model_dtype_bytes(const sp_model *m) { return (double)sp_dtype_size(m->dtype); }

double sp_model_layer_matmul_params(const sp_model *m)
{
  double h = (double)m->hidden, kv = (double)(m->kv_heads * sp_model_head_dim(m)), f = (double)m->ffn;
  double attn = h * (h + 2.0 * kv) + h * h;
  double mlp = (m->mlp == SP_MLP_SWIGLU ? 3.0 : 2.0) * h * f;
  return attn + mlp;
}

double sp_model_layer_params(const sp_model *m)
{
  return sp_model_layer_matmul_params(m) + 2.0 * (double)m->hidden;
}

double sp_model_embedding_params(const sp_model *m)
{
  double e = (double)m->vocab * (double)m->hidden;
  return m->tied_embeddings ? e : 2.0 * e;
}

double sp_model_params(const sp_model *m)
{
  return (double)m->layers * sp_model_layer_params(m) + sp_model_embedding_params(m) + (double)m->hidden;
}

double sp_model_layer_fwd_matmul_flops(const sp_model *m, double tokens)
{
  return 2.0 * tokens * sp_model_layer_matmul_params(m);
}

double sp_model_layer_fwd_attn_flops(const sp_model *m, double tokens, double seq, gboolean causal)
{
  double f = 4.0 * tokens * seq * (double)m->hidden;
  return causal ? f / 2.0 : f;
}

double sp_model_head_fwd_flops(const sp_model *m, double tokens)
{
  return 2.0 * tokens * (double)m->vocab * (double)m->hidden;
}

double sp_model_train_flops_per_token(const sp_model *m, double seq)
{
  double n = (double)m->layers * sp_model_layer_matmul_params(m) + (double)m->vocab * (double)m->hidden;
  return 6.0 * n + 12.0 * (double)m->layers * (double)m->hidden * seq;
}

char **sp_model_search_dirs(const char *src_dir, const char *installed_dir)
{
  GPtrArray *a = g_ptr_array_new();
  const char *env = g_getenv("SPSIM_MODELS_DIR");
  if (env && *env) g_ptr_array_add(a, g_strdup(env));
  if (src_dir) g_ptr_array_add(a, g_strdup(src_dir));
  if (installed_dir) g_ptr_array_add(a, g_strdup(installed_dir));
  const char *src = g_getenv("SPSIM_SRCDIR");
  if (src && *src) g_ptr_array_add(a, g_build_filename(src, "models", NULL));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}
