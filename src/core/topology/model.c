/* Model configurations: JSON parsing, validation, parameter and FLOP formulas. */
#include "config.h"

#include <math.h>
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
  g_free(m->moe_mask);
  g_free(m->window_mask);
  g_free(m);
}

/* The most layers (and experts per layer) an MoE model may have: its layer mask and the
 * routing shares are allocated per entry, and no published model comes near (DeepSeek-V3:
 * 61 layers, 256 experts). */
#define SP_MODEL_MAX_MOE_LAYERS (1 << 20)
/* The widest head a model file may give: far above any published model (64 to 256), low
 * enough that heads x head_dim products of the step model stay far from overflow. */
#define SP_MODEL_MAX_HEAD_DIM (1 << 16)

/* Mixture-of-experts fields: all zero for a dense model. */
static gboolean validate_moe(const sp_model *m, GError **err)
{
  const char *n = m->name ? m->name : "?";
  if (m->experts <= 0) {
    if (m->topk != 0 || m->expert_ffn != 0 || m->shared_experts != 0 || m->shared_ffn != 0 || m->moe_mask != NULL ||
        m->capacity_factor != 0 || m->expert_groups != 0 || m->groups_per_token != 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': the mixture-of-experts keys need \"experts\" (the number "
                  "of routed experts per MoE layer)", n);
      return FALSE;
    }
    return TRUE;
  }
  if (m->experts > SP_MODEL_MAX_MOE_LAYERS) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': at most %d experts per layer (got %" G_GINT64_FORMAT ")", n,
                SP_MODEL_MAX_MOE_LAYERS, m->experts);
    return FALSE;
  }
  if (m->topk < 1 || m->topk > m->experts) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': experts_per_token must be between 1 and experts = %"
                G_GINT64_FORMAT " (got %" G_GINT64_FORMAT ")", n, m->experts, m->topk);
    return FALSE;
  }
  if (m->expert_ffn <= 0 || m->shared_experts < 0 || (m->shared_experts > 0 && m->shared_ffn <= 0)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': expert_ffn and shared_expert_ffn must be positive and "
                "shared_experts >= 0", n);
    return FALSE;
  }
  if (m->capacity_factor < 0 || !isfinite(m->capacity_factor)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': capacity_factor must be positive (leave it out for "
                "dropless routing)", n);
    return FALSE;
  }
  if ((m->expert_groups > 0) != (m->groups_per_token > 0) || m->expert_groups < 0 ||
      (m->expert_groups > 0 && (m->experts % m->expert_groups != 0 || m->groups_per_token > m->expert_groups ||
                                m->groups_per_token * (m->experts / m->expert_groups) < m->topk))) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': group-limited routing needs expert_groups dividing the %"
                G_GINT64_FORMAT " experts and groups_per_token between 1 and expert_groups, whose experts hold at "
                "least experts_per_token = %" G_GINT64_FORMAT " (got %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT ")",
                n, m->experts, m->topk, m->expert_groups, m->groups_per_token);
    return FALSE;
  }
  if (m->moe_mask == NULL || sp_model_moe_layers(m) == 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': no layer is an MoE layer (check moe_layers, "
                "first_dense_layers and moe_layer_freq)", n);
    return FALSE;
  }
  return TRUE;
}

/* Multi-head latent attention fields: all zero without MLA. */
static gboolean validate_mla(const sp_model *m, GError **err)
{
  const char *n = m->name ? m->name : "?";
  if (m->kv_lora_rank <= 0) {
    if (m->q_lora_rank != 0 || m->qk_nope_head_dim != 0 || m->qk_rope_head_dim != 0 || m->v_head_dim != 0) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': q_lora_rank, qk_nope_head_dim, qk_rope_head_dim and "
                  "v_head_dim describe multi-head latent attention and need kv_lora_rank", n);
      return FALSE;
    }
    return TRUE;
  }
  if (m->qk_nope_head_dim <= 0 || m->qk_rope_head_dim <= 0 || m->v_head_dim <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': multi-head latent attention (kv_lora_rank) needs "
                "qk_nope_head_dim, qk_rope_head_dim and v_head_dim, all positive", n);
    return FALSE;
  }
  if (m->kv_heads != m->heads) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': with multi-head latent attention every head has its "
                "own key and value: set kv_heads = heads (%" G_GINT64_FORMAT ")", n, m->heads);
    return FALSE;
  }
  return TRUE;
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
  if (m->head_dim < 0 || m->window < 0 || (m->window > 0) != (m->window_mask != NULL)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': head_dim and sliding_window must be positive",
                m->name ? m->name : "?");
    return FALSE;
  }
  if (m->head_dim > SP_MODEL_MAX_HEAD_DIM) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': head_dim %" G_GINT64_FORMAT " is out of range (at most %d; "
                "published models use 64 to 256)", m->name ? m->name : "?", m->head_dim, SP_MODEL_MAX_HEAD_DIM);
    return FALSE;
  }
  if (m->head_dim > 0 && m->kv_lora_rank > 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "model '%s': with multi-head latent attention the head widths are "
                "qk_nope_head_dim, qk_rope_head_dim and v_head_dim: drop head_dim", m->name ? m->name : "?");
    return FALSE;
  }
  if (m->head_dim == 0 && m->hidden % m->heads != 0) {
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
  if (!validate_moe(m, err) || !validate_mla(m, err)) return FALSE;
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
                                          "dtype", "mlp", "tied_embeddings", "elementwise", "loss", "sources",
                                          "experts", "experts_per_token", "expert_ffn", "shared_experts",
                                          "shared_expert_ffn", "moe_layers", "first_dense_layers",
                                          "moe_layer_freq", "capacity_factor", "router_dtype", "expert_groups",
                                          "groups_per_token",
                                          "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                          "qk_rope_head_dim", "v_head_dim", "head_dim", "sliding_window",
                                          "window_layers", NULL };

/* Read an optional integer member >= @p lo; absent: *out = @p dflt. */
static gboolean get_opt_int(JsonObject *o, const char *key, int64_t lo, int64_t dflt, const char *what, int64_t *out,
                            GError **err)
{
  JsonNode *n = json_object_get_member(o, key);
  *out = dflt;
  if (n == NULL) return TRUE;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: field '%s' must be an integer", what, key);
    return FALSE;
  }
  *out = json_node_get_int(n);
  if (*out < lo) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: field '%s' must be >= %" G_GINT64_FORMAT " (got %" G_GINT64_FORMAT ")",
                what, key, lo, *out);
    return FALSE;
  }
  return TRUE;
}

/* A list of 0-based layer indices (@p key of a model file) into @p mask (layers entries). */
static gboolean parse_layer_list(JsonNode *ln, const char *key, int64_t layers, guint8 *mask, const char *what,
                                 GError **err)
{
  if (!JSON_NODE_HOLDS_ARRAY(ln)) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: field '%s' must be a list of 0-based layer indices", what, key);
    return FALSE;
  }
  JsonArray *a = json_node_get_array(ln);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    JsonNode *e = json_array_get_element(a, i);
    if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_INT64) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: %s[%u] must be an integer layer index", what, key, i);
      return FALSE;
    }
    int64_t v = json_node_get_int(e);
    if (v < 0 || v >= layers) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: %s[%u] = %" G_GINT64_FORMAT " is out of range: the "
                  "model has layers 0..%" G_GINT64_FORMAT, what, key, i, v, layers - 1);
      return FALSE;
    }
    mask[v] = 1;
  }
  return TRUE;
}

/* The MoE layer mask from moe_layers, or first_dense_layers and moe_layer_freq. */
static gboolean parse_moe_layers(JsonObject *o, sp_model *m, const char *what, GError **err)
{
  JsonNode *ln = json_object_get_member(o, "moe_layers");
  gboolean has_first = json_object_has_member(o, "first_dense_layers");
  gboolean has_freq = json_object_has_member(o, "moe_layer_freq");
  int64_t first = 0, freq = 1;
  if (!get_opt_int(o, "first_dense_layers", 0, 0, what, &first, err) ||
      !get_opt_int(o, "moe_layer_freq", 1, 1, what, &freq, err))
    return FALSE;
  if (m->experts <= 0) {
    if (ln != NULL || has_first || has_freq) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: moe_layers, first_dense_layers and moe_layer_freq need "
                  "\"experts\" (the number of routed experts per MoE layer)", what);
      return FALSE;
    }
    return TRUE;
  }
  if (m->layers > SP_MODEL_MAX_MOE_LAYERS) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: an MoE model has at most %d layers (got %" G_GINT64_FORMAT ")", what,
                SP_MODEL_MAX_MOE_LAYERS, m->layers);
    return FALSE;
  }
  m->moe_mask = g_new0(guint8, m->layers);
  if (ln != NULL) {
    if (has_first || has_freq) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: give either moe_layers (a list) or first_dense_layers and "
                  "moe_layer_freq, not both", what);
      return FALSE;
    }
    return parse_layer_list(ln, "moe_layers", m->layers, m->moe_mask, what, err);
  }
  if (first >= m->layers) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: first_dense_layers = %" G_GINT64_FORMAT " leaves no MoE layer "
                "among the %" G_GINT64_FORMAT " layers", what, first, m->layers);
    return FALSE;
  }
  for (int64_t i = first; i < m->layers; i++) m->moe_mask[i] = (i - first) % freq == 0;
  return TRUE;
}

/* Mixture-of-experts and multi-head latent attention keys (all optional). */
static gboolean parse_moe_mla(JsonObject *o, sp_model *m, const char *what, GError **err)
{
  if (!get_opt_int(o, "experts", 1, 0, what, &m->experts, err) ||
      !get_opt_int(o, "experts_per_token", 1, 0, what, &m->topk, err) ||
      !get_opt_int(o, "expert_ffn", 1, 0, what, &m->expert_ffn, err) ||
      !get_opt_int(o, "shared_experts", 0, 0, what, &m->shared_experts, err) ||
      !get_opt_int(o, "shared_expert_ffn", 1, 0, what, &m->shared_ffn, err) ||
      !get_opt_int(o, "expert_groups", 1, 0, what, &m->expert_groups, err) ||
      !get_opt_int(o, "groups_per_token", 1, 0, what, &m->groups_per_token, err) ||
      !get_opt_int(o, "q_lora_rank", 1, 0, what, &m->q_lora_rank, err) ||
      !get_opt_int(o, "kv_lora_rank", 1, 0, what, &m->kv_lora_rank, err) ||
      !get_opt_int(o, "qk_nope_head_dim", 1, 0, what, &m->qk_nope_head_dim, err) ||
      !get_opt_int(o, "qk_rope_head_dim", 1, 0, what, &m->qk_rope_head_dim, err) ||
      !get_opt_int(o, "v_head_dim", 1, 0, what, &m->v_head_dim, err))
    return FALSE;
  if (m->experts > 0) {
    if (!json_object_has_member(o, "experts_per_token")) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: an MoE model (experts) needs experts_per_token (top-k)", what);
      return FALSE;
    }
    if (m->expert_ffn == 0) m->expert_ffn = m->ffn;
    if (m->shared_experts > 0 && m->shared_ffn == 0) m->shared_ffn = m->expert_ffn;
  }
  JsonNode *cn = json_object_get_member(o, "capacity_factor");
  if (cn != NULL) {
    GType t = JSON_NODE_HOLDS_VALUE(cn) ? json_node_get_value_type(cn) : G_TYPE_INVALID;
    if (t != G_TYPE_DOUBLE && t != G_TYPE_INT64) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: field 'capacity_factor' must be a number", what);
      return FALSE;
    }
    m->capacity_factor = json_node_get_double(cn);
    if (!(m->capacity_factor > 0)) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: capacity_factor must be > 0 (got %g; leave it out for dropless "
                  "routing)", what, m->capacity_factor);
      return FALSE;
    }
  }
  m->router_dtype = SP_F32;
  const char *rd = get_str(o, "router_dtype", NULL, what, err);
  if (rd == NULL && json_object_has_member(o, "router_dtype")) return FALSE;
  if (rd != NULL && !sp_dtype_parse(rd, &m->router_dtype, err)) return FALSE;
  if (rd != NULL && m->experts <= 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: router_dtype needs \"experts\"", what);
    return FALSE;
  }
  return parse_moe_layers(o, m, what, err);
}

/* head_dim, sliding_window and window_layers (all optional). */
static gboolean parse_window(JsonObject *o, sp_model *m, const char *what, GError **err)
{
  if (!get_opt_int(o, "head_dim", 1, 0, what, &m->head_dim, err) ||
      !get_opt_int(o, "sliding_window", 1, 0, what, &m->window, err))
    return FALSE;
  JsonNode *ln = json_object_get_member(o, "window_layers");
  if (m->window == 0) {
    if (ln != NULL) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: window_layers needs sliding_window (the keys a query sees)", what);
      return FALSE;
    }
    return TRUE;
  }
  if (m->layers > SP_MODEL_MAX_MOE_LAYERS) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: a sliding-window model has at most %d layers (got %" G_GINT64_FORMAT
                ")", what, SP_MODEL_MAX_MOE_LAYERS, m->layers);
    return FALSE;
  }
  m->window_mask = g_new0(guint8, m->layers);
  if (ln == NULL) {
    memset(m->window_mask, 1, (size_t)m->layers);
    return TRUE;
  }
  return parse_layer_list(ln, "window_layers", m->layers, m->window_mask, what, err);
}

/* The spsim key for a Hugging Face config.json key of a mixture-of-experts or MLA model
 * (transformers' MixtralConfig, Qwen2MoeConfig and DeepseekV3Config names), or NULL. */
static const char *hf_hint(const char *key)
{
  static const char *const map[][2] = {
    { "num_experts", "experts" }, { "num_local_experts", "experts" }, { "n_routed_experts", "experts" },
    { "num_experts_per_tok", "experts_per_token" }, { "top_k", "experts_per_token" },
    { "moe_intermediate_size", "expert_ffn" }, { "n_shared_experts", "shared_experts" },
    { "shared_expert_intermediate_size", "shared_expert_ffn (per shared expert)" },
    { "n_group", "expert_groups" }, { "topk_group", "groups_per_token" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS(map); i++)
    if (strcmp(key, map[i][0]) == 0) return map[i][1];
  return NULL;
}

/* Unknown keys of @p o: an error in strict mode, else ", "-joined into *ignored. */
static gboolean check_keys(JsonObject *o, const char *what, sp_model_flags flags, char **ignored, GError **err)
{
  g_autoptr(GList) members = json_object_get_members(o);
  g_autoptr(GString) unknown = g_string_new(NULL);
  for (GList *l = members; l != NULL; l = l->next)
    if (!g_strv_contains(known_keys, l->data)) {
      if (!(flags & SP_MODEL_LENIENT)) {
        g_autofree char *list = g_strjoinv(", ", (char **)known_keys);
        const char *hint = hf_hint(l->data);
        g_autofree char *h = hint ? g_strdup_printf("; for '%s' write '%s'", (const char *)l->data, hint) : g_strdup("");
        g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                    "%s: unknown key '%s' (a model file knows %s%s; --lenient ignores unknown keys with a warning)",
                    what, (const char *)l->data, list, h);
        return FALSE;
      }
      g_string_append_printf(unknown, "%s%s", unknown->len ? ", " : "", (const char *)l->data);
    }
  *ignored = unknown->len ? g_strdup(unknown->str) : NULL;
  return TRUE;
}

/* ---------- Hugging Face config.json ---------- */

/* An integer member of a config.json, or @p dflt when absent or null. */
static gboolean hf_int(JsonObject *o, const char *key, int64_t dflt, const char *what, int64_t *out, GError **err)
{
  JsonNode *n = json_object_get_member(o, key);
  *out = dflt;
  if (n == NULL || JSON_NODE_HOLDS_NULL(n)) return TRUE;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64) {
    g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: config.json field '%s' must be an integer", what, key);
    return FALSE;
  }
  *out = json_node_get_int(n);
  return TRUE;
}

/* The first of @p keys present (NULL-terminated), as hf_int. */
static gboolean hf_int_any(JsonObject *o, const char *const *keys, int64_t dflt, const char *what, int64_t *out,
                           GError **err)
{
  for (size_t i = 0; keys[i] != NULL; i++)
    if (json_object_has_member(o, keys[i])) return hf_int(o, keys[i], dflt, what, out, err);
  *out = dflt;
  return TRUE;
}

/* Element @p i of @p a when it is a string, else NULL (json_array_get_string_element
 * asserts on an object or a list). */
static const char *array_string(JsonArray *a, guint i)
{
  JsonNode *n = json_array_get_element(a, i);
  return n != NULL && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING ? json_node_get_string(n)
                                                                                               : NULL;
}

/* The sliding window of a Hugging Face config.json: sliding_window over the layers whose
 * layer_types entry is "sliding_attention" (gpt-oss, Gemma 3), without layer_types over
 * Gemma 2's even layers, all but every sliding_window_pattern-th (Gemma 3) or every layer
 * (Mistral), and none when use_sliding_window is false (Qwen2, Qwen3 keep a
 * sliding_window value they do not use). */
static gboolean hf_window(JsonObject *o, sp_model *m, const char *what, GError **err)
{
  int64_t w = 0;
  if (!hf_int(o, "sliding_window", 0, what, &w, err)) return FALSE;
  if (w < 0) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: config.json field 'sliding_window' must be positive or null (got %"
                G_GINT64_FORMAT ")", what, w);
    return FALSE;
  }
  JsonNode *un = json_object_get_member(o, "use_sliding_window");
  if (un != NULL && JSON_NODE_HOLDS_VALUE(un) && json_node_get_value_type(un) == G_TYPE_BOOLEAN &&
      !json_node_get_boolean(un))
    w = 0;
  JsonNode *tn = json_object_get_member(o, "layer_types");
  if (w <= 0 || m->layers <= 0 || m->layers > SP_MODEL_MAX_MOE_LAYERS) return TRUE;
  if (tn != NULL && !JSON_NODE_HOLDS_NULL(tn)) {
    JsonArray *a = JSON_NODE_HOLDS_ARRAY(tn) ? json_node_get_array(tn) : NULL;
    if (a == NULL || json_array_get_length(a) != (guint)m->layers) {
      g_set_error(err, SP_ERROR, SP_ERROR_PARSE, "%s: config.json field 'layer_types' must list one type per layer "
                  "(%" G_GINT64_FORMAT ")", what, m->layers);
      return FALSE;
    }
    guint8 *mask = g_new0(guint8, m->layers);
    int64_t n = 0;
    for (guint i = 0; i < json_array_get_length(a); i++) {
      const char *t = array_string(a, i);
      mask[i] = t != NULL && strcmp(t, "sliding_attention") == 0;
      n += mask[i];
    }
    if (n == 0) {
      g_free(mask);
      return TRUE;
    }
    m->window_mask = mask;
  } else {
    /* without layer_types: Gemma 2 windows the even layers (Gemma2DecoderLayer: is_sliding =
     * not layer_idx % 2), Gemma 3 all but every sliding_window_pattern-th (Gemma3DecoderLayer:
     * is_sliding = (layer_idx + 1) % pattern != 0), Mistral every layer */
    int64_t pattern = 0;
    const char *type = get_str(o, "model_type", "", what, err);
    if (type == NULL || !hf_int(o, "sliding_window_pattern", 0, what, &pattern, err)) return FALSE;
    m->window_mask = g_new0(guint8, m->layers);
    for (int64_t i = 0; i < m->layers; i++)
      m->window_mask[i] = strcmp(type, "gemma2") == 0 ? i % 2 == 0 : pattern > 0 ? (i + 1) % pattern != 0 : 1;
  }
  m->window = w;
  return TRUE;
}

/* The MLP of a config.json: gated (three matrices) or plain (two), by the family's
 * transformers modeling code: LlamaMLP, MistralMLP, Qwen2MLP, Qwen3MoeMLP, GemmaMLP,
 * DeepseekV3MLP, GptOssExperts and their kin have gate and up projections; GPTNeoXMLP,
 * FalconMLP, Starcoder2MLP, PhiMLP, OPT's fc1/fc2 and GPTBigCodeMLP have one up
 * projection. Outside these families a SiLU (swish) MLP is taken as gated, as in the
 * Llama lineage, and any other activation is not guessed. */
static gboolean hf_mlp(const char *type, const char *act, sp_mlp *out)
{
  static const char *const gated[] = { "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
                                       "gemma2", "gemma3", "gemma3_text", "deepseek_v2", "deepseek_v3", "gpt_oss",
                                       "olmo", "olmo2", "phi3", "granite", "granitemoe", "internlm2", "cohere", NULL };
  static const char *const plain[] = { "gpt_neox", "falcon", "starcoder2", "phi", "opt", "gpt_bigcode", "gptj",
                                       "codegen", NULL };
  if (g_strv_contains(gated, type)) *out = SP_MLP_SWIGLU;
  else if (g_strv_contains(plain, type)) *out = SP_MLP_GELU;
  else if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0) *out = SP_MLP_SWIGLU;
  else return FALSE;
  return TRUE;
}

/* A model from a Hugging Face transformers config.json (LlamaConfig, MistralConfig,
 * MixtralConfig, Qwen2MoeConfig and DeepseekV3Config key names); keys that do not change
 * the price (rope_theta, max_position_embeddings, ...) are not read. */
static sp_model *parse_hf(JsonObject *o, const char *what, GError **err)
{
  sp_model *m = g_new0(sp_model, 1);
  static const char *const experts_keys[] = { "num_local_experts", "n_routed_experts", "num_experts", NULL };
  static const char *const freq_keys[] = { "moe_layer_freq", "decoder_sparse_step", NULL };
  int64_t first = 0, freq = 1, shared_inter = 0, head_dim = 0;
  if (!hf_int(o, "num_hidden_layers", 0, what, &m->layers, err) || !hf_int(o, "hidden_size", 0, what, &m->hidden, err) ||
      !hf_int(o, "num_attention_heads", 0, what, &m->heads, err) ||
      !hf_int(o, "num_key_value_heads", m->heads, what, &m->kv_heads, err) ||
      !hf_int(o, "intermediate_size", 0, what, &m->ffn, err) || !hf_int(o, "vocab_size", 0, what, &m->vocab, err) ||
      !hf_int_any(o, experts_keys, 0, what, &m->experts, err) ||
      !hf_int(o, "num_experts_per_tok", 0, what, &m->topk, err) ||
      !hf_int(o, "moe_intermediate_size", 0, what, &m->expert_ffn, err) ||
      !hf_int(o, "n_shared_experts", 0, what, &m->shared_experts, err) ||
      !hf_int(o, "shared_expert_intermediate_size", 0, what, &shared_inter, err) ||
      !hf_int(o, "first_k_dense_replace", 0, what, &first, err) || !hf_int_any(o, freq_keys, 1, what, &freq, err) ||
      !hf_int(o, "n_group", 0, what, &m->expert_groups, err) || !hf_int(o, "topk_group", 0, what, &m->groups_per_token, err) ||
      !hf_int(o, "q_lora_rank", 0, what, &m->q_lora_rank, err) || !hf_int(o, "kv_lora_rank", 0, what, &m->kv_lora_rank, err) ||
      !hf_int(o, "qk_nope_head_dim", 0, what, &m->qk_nope_head_dim, err) ||
      !hf_int(o, "qk_rope_head_dim", 0, what, &m->qk_rope_head_dim, err) ||
      !hf_int(o, "v_head_dim", 0, what, &m->v_head_dim, err) || !hf_int(o, "head_dim", 0, what, &head_dim, err))
    goto fail;
  const char *name = get_str(o, "_name_or_path", NULL, what, err);
  if (name == NULL && json_object_has_member(o, "_name_or_path")) goto fail;
  if (name == NULL || *name == '\0') name = get_str(o, "model_type", what, what, err);
  if (name == NULL) goto fail;
  m->name = g_strdup(name);
  m->dtype = SP_BF16;
  const char *td = get_str(o, "torch_dtype", "bfloat16", what, err);
  if (td == NULL) goto fail;
  if (strcmp(td, "float16") == 0) m->dtype = SP_F16;
  else if (strcmp(td, "float32") == 0) m->dtype = SP_F32;
  const char *act = get_str(o, "hidden_act", NULL, what, err);
  if (act == NULL && json_object_has_member(o, "hidden_act")) goto fail;
  if (act == NULL) act = get_str(o, "hidden_activation", "silu", what, err); /* Gemma 2 and 3 */
  if (act == NULL) goto fail;
  const char *type = get_str(o, "model_type", "", what, err);
  if (type == NULL) goto fail;
  if (!hf_mlp(type, act, &m->mlp)) {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: model_type '%s' with hidden_act '%s': spsim cannot tell a gated "
                "MLP (gate, up and down: three matrices, as Gemma's GeGLU) from a plain one (two); write a model file "
                "with \"mlp\": \"swiglu\" (gated) or \"gelu\" (plain)", what, type, act);
    goto fail;
  }
  JsonNode *tn = json_object_get_member(o, "tie_word_embeddings");
  m->tied_embeddings = tn != NULL && JSON_NODE_HOLDS_VALUE(tn) && json_node_get_value_type(tn) == G_TYPE_BOOLEAN &&
                       json_node_get_boolean(tn);
  /* head_dim sets the width of Q, K and V heads (Qwen3, Gemma, gpt-oss); MLA has its own widths */
  if (m->kv_lora_rank == 0 && head_dim != 0 &&
      !(m->heads > 0 && m->hidden % m->heads == 0 && head_dim == m->hidden / m->heads))
    m->head_dim = head_dim; /* validated below: positive and in range */
  if (!hf_window(o, m, what, err)) goto fail;
  if (m->experts > 0) {
    if (m->expert_ffn == 0) m->expert_ffn = m->ffn;
    if (shared_inter > 0 && m->shared_experts == 0) { /* Qwen2-MoE: one shared MLP of that size */
      m->shared_experts = 1;
      m->shared_ffn = shared_inter;
    } else if (m->shared_experts > 0) m->shared_ffn = m->expert_ffn; /* DeepSeek: shared experts of expert size */
    if (m->layers > SP_MODEL_MAX_MOE_LAYERS) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: an MoE model has at most %d layers (got %" G_GINT64_FORMAT ")", what,
                  SP_MODEL_MAX_MOE_LAYERS, m->layers);
      goto fail;
    }
    if (first >= m->layers || first < 0 || freq < 1) {
      g_set_error(err, SP_ERROR, SP_ERROR_INVALID, "%s: first_k_dense_replace %" G_GINT64_FORMAT " or the MoE layer "
                  "frequency %" G_GINT64_FORMAT " leaves no MoE layer", what, first, freq);
      goto fail;
    }
    m->moe_mask = g_new0(guint8, m->layers);
    for (int64_t i = first; i < m->layers; i++) m->moe_mask[i] = (i - first) % freq == 0;
    m->router_dtype = SP_F32;
    if (m->expert_groups <= 1 || m->groups_per_token <= 0 || m->groups_per_token >= m->expert_groups)
      m->expert_groups = m->groups_per_token = 0; /* one group, or every group: no limit */
  } else {
    m->topk = 0;
    m->expert_ffn = m->shared_experts = 0;
    m->expert_groups = m->groups_per_token = 0;
  }
  m->sources = g_strdup_printf("Hugging Face config.json: %s", what);
  if (!sp_model_validate(m, err)) goto fail;
  return m;
fail:
  sp_model_free(m);
  return NULL;
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
  if (json_object_has_member(o, "num_hidden_layers")) return parse_hf(o, what, err);
  sp_model *m = g_new0(sp_model, 1);
  if (!check_keys(o, what, flags, &m->ignored, err)) goto fail;
  const char *name = get_str(o, "name", what, what, err);
  if (name == NULL) goto fail;
  m->name = g_strdup(name);
  if (!get_int(o, "layers", what, &m->layers, err) || !get_int(o, "hidden", what, &m->hidden, err) ||
      !get_int(o, "heads", what, &m->heads, err) || !get_int(o, "kv_heads", what, &m->kv_heads, err) ||
      !get_int(o, "ffn", what, &m->ffn, err) || !get_int(o, "vocab", what, &m->vocab, err))
    goto fail;
  if (!parse_moe_mla(o, m, what, err) || !parse_window(o, m, what, err)) goto fail;
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
  const char *ls = get_str(o, "loss", "unfused", what, err);
  if (ls == NULL) goto fail;
  if (strcmp(ls, "unfused") == 0) m->loss = SP_LOSS_UNFUSED;
  else if (strcmp(ls, "fused") == 0) m->loss = SP_LOSS_FUSED;
  else {
    g_set_error(err, SP_ERROR, SP_ERROR_INVALID,
                "%s: loss must be \"unfused\" (PyTorch kernels in fp32, Megatron-LM and torchtitan) or \"fused\" "
                "(one kernel each way, flash-attn's cross entropy as llm-foundry uses it) (got \"%s\")",
                what, ls);
    goto fail;
  }
  JsonNode *sn = json_object_get_member(o, "sources");
  GString *src = g_string_new("");
  if (sn != NULL && JSON_NODE_HOLDS_ARRAY(sn)) {
    JsonArray *a = json_node_get_array(sn);
    for (guint i = 0; i < json_array_get_length(a); i++) {
      const char *s = array_string(a, i);
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

int64_t sp_model_head_dim(const sp_model *m) { return m->head_dim > 0 ? m->head_dim : m->hidden / m->heads; }

double sp_model_attn_width(const sp_model *m)
{
  return (double)m->heads * (double)(sp_model_qk_head_dim(m) + sp_model_v_head_dim(m)) / 2.0;
}

gboolean sp_model_layer_is_windowed(const sp_model *m, int64_t i)
{
  return m->window > 0 && m->window_mask != NULL && i >= 0 && i < m->layers && m->window_mask[i] != 0;
}

double sp_model_attn_causal_fraction(const sp_model *m, int64_t seq)
{
  if (m->window <= 0 || m->window_mask == NULL || seq <= m->window || seq <= 0) return 1.0;
  /* pairs counted as the kernel model counts causal attention, s^2 / 2 (the masked
   * triangle of blocks): a window keeps w^2 / 2 over the first w queries, then w each */
  double s = (double)seq, w = (double)m->window;
  double full = s * s / 2.0, win = w * w / 2.0 + (s - w) * w;
  int64_t nw = 0;
  for (int64_t i = 0; i < m->layers; i++) nw += m->window_mask[i] != 0;
  double L = (double)m->layers;
  return ((L - (double)nw) * full + (double)nw * win) / (L * full);
}

double sp_model_dtype_bytes(const sp_model *m) { return (double)sp_dtype_size(m->dtype); }

gboolean sp_model_is_moe(const sp_model *m) { return m->experts > 0 && m->moe_mask != NULL; }

gboolean sp_model_layer_is_moe(const sp_model *m, int64_t i)
{
  return sp_model_is_moe(m) && i >= 0 && i < m->layers && m->moe_mask[i] != 0;
}

int64_t sp_model_moe_layers(const sp_model *m)
{
  int64_t n = 0;
  for (int64_t i = 0; m->moe_mask != NULL && i < m->layers; i++) n += m->moe_mask[i] != 0;
  return m->experts > 0 ? n : 0;
}

gboolean sp_model_is_mla(const sp_model *m) { return m->kv_lora_rank > 0; }

int64_t sp_model_qk_head_dim(const sp_model *m)
{
  return sp_model_is_mla(m) ? m->qk_nope_head_dim + m->qk_rope_head_dim : sp_model_head_dim(m);
}

int64_t sp_model_v_head_dim(const sp_model *m) { return sp_model_is_mla(m) ? m->v_head_dim : sp_model_head_dim(m); }

double sp_model_attn_matmul_params(const sp_model *m)
{
  double h = (double)m->hidden, a = (double)m->heads;
  if (!sp_model_is_mla(m)) {
    double kv = (double)(m->kv_heads * sp_model_head_dim(m)), q = a * (double)sp_model_head_dim(m);
    return h * (q + 2.0 * kv) + q * h;
  }
  /* DeepSeek-V2 (arXiv 2405.04434) sec. 2.1.2-2.1.3, eqs. 9-14 and 37-40: W^DQ, W^UQ and
   * W^QR (h -> d_c' -> heads x (nope + rope)), W^DKV with W^KR (h -> d_c + rope, the rope
   * key shared by every head), W^UK and W^UV (d_c -> heads x (nope + v)), W^O (heads x v -> h);
   * deepseek-ai/DeepSeek-V3 inference/model.py class MLA holds the same wq_a, wq_b, wkv_a,
   * wkv_b, wo. */
  double qk = (double)sp_model_qk_head_dim(m), v = (double)m->v_head_dim, c = (double)m->kv_lora_rank;
  double q = m->q_lora_rank > 0 ? h * (double)m->q_lora_rank + (double)m->q_lora_rank * a * qk : h * a * qk;
  double kv = h * (c + (double)m->qk_rope_head_dim) + c * a * ((double)m->qk_nope_head_dim + v);
  return q + kv + a * v * h;
}

double sp_model_attn_norm_params(const sp_model *m)
{
  /* the RMSNorms after the two down-projections (DeepSeek-V3 inference/model.py q_norm, kv_norm) */
  return sp_model_is_mla(m) ? (double)m->q_lora_rank + (double)m->kv_lora_rank : 0.0;
}

double sp_model_mlp_params(const sp_model *m, int64_t ffn)
{
  return (m->mlp == SP_MLP_SWIGLU ? 3.0 : 2.0) * (double)m->hidden * (double)ffn;
}

double sp_model_dense_mlp_params(const sp_model *m) { return sp_model_mlp_params(m, m->ffn); }

double sp_model_router_params(const sp_model *m) { return (double)m->hidden * (double)m->experts; }

double sp_model_routed_expert_params(const sp_model *m)
{
  return (double)m->experts * sp_model_mlp_params(m, m->expert_ffn);
}

double sp_model_shared_expert_params(const sp_model *m)
{
  return (double)m->shared_experts * sp_model_mlp_params(m, m->shared_ffn);
}

/* MLP weights of the MoE layers a token multiplies with: router, shared and topk experts. */
static double moe_active_mlp(const sp_model *m)
{
  return sp_model_router_params(m) + sp_model_shared_expert_params(m) + (double)m->topk * sp_model_mlp_params(m, m->expert_ffn);
}

double sp_model_layer_matmul_params(const sp_model *m)
{
  double attn = sp_model_attn_matmul_params(m);
  if (!sp_model_is_moe(m)) return attn + sp_model_dense_mlp_params(m);
  double nm = (double)sp_model_moe_layers(m), L = (double)m->layers;
  return attn + ((L - nm) * sp_model_dense_mlp_params(m) + nm * moe_active_mlp(m)) / L;
}

double sp_model_layer_params(const sp_model *m)
{
  double attn = sp_model_attn_matmul_params(m) + sp_model_attn_norm_params(m) + 2.0 * (double)m->hidden;
  if (!sp_model_is_moe(m)) return attn + sp_model_dense_mlp_params(m);
  double nm = (double)sp_model_moe_layers(m), L = (double)m->layers;
  double moe = sp_model_router_params(m) + sp_model_shared_expert_params(m) + sp_model_routed_expert_params(m);
  return attn + ((L - nm) * sp_model_dense_mlp_params(m) + nm * moe) / L;
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

double sp_model_active_params(const sp_model *m)
{
  double L = (double)m->layers;
  double attn = sp_model_attn_matmul_params(m) + sp_model_attn_norm_params(m) + 2.0 * (double)m->hidden;
  return L * (attn + sp_model_layer_matmul_params(m) - sp_model_attn_matmul_params(m)) +
         sp_model_embedding_params(m) + (double)m->hidden;
}

double sp_model_layer_fwd_matmul_flops(const sp_model *m, double tokens)
{
  return 2.0 * tokens * sp_model_layer_matmul_params(m);
}

double sp_model_layer_fwd_attn_flops(const sp_model *m, double tokens, double seq, gboolean causal)
{
  /* scores Q K^T over heads x qk columns and the weighted sum over heads x v columns:
   * 2 tokens seq heads (qk + v), which is 4 tokens seq h when qk = v = h / heads */
  double f = 4.0 * tokens * seq * sp_model_attn_width(m);
  return causal ? f / 2.0 * sp_model_attn_causal_fraction(m, (int64_t)seq) : f;
}

double sp_model_head_fwd_flops(const sp_model *m, double tokens)
{
  return 2.0 * tokens * (double)m->vocab * (double)m->hidden;
}

double sp_model_train_flops_per_token(const sp_model *m, double seq)
{
  double n = (double)m->layers * sp_model_layer_matmul_params(m) + (double)m->vocab * (double)m->hidden;
  /* 3 x the forward's 2 seq heads (qk + v) per token and layer: 12 L h seq when qk = v = h / heads */
  return 6.0 * n + 12.0 * (double)m->layers * sp_model_attn_width(m) * seq;
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
