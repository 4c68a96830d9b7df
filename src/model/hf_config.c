/* hf_config.c — a Hugging Face config.json as a pt_model_config.
 *
 * model_type (else architectures[0]) picks the family: llama and mistral load as llama, qwen2
 * adds q/k/v biases, gemma2 adds post-norms, tanh-GELU, sqrt(hidden) embedding scale, logit
 * soft-capping and sliding windows on even layers. Sizes, rope (rope_theta + rope_scaling, or
 * transformers 5's rope_parameters), norm epsilon, tied embeddings and a bitsandbytes
 * quantization_config are read and checked; transformers' defaults fill what a config may omit.
 * Each problem is one message: "config.json: KEY: expected ..., found ...". */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/jsonfile.h"
#include "ptrain/hf_model.h"
#include "ptrain/rope.h"

typedef struct {
    const char *name;   /* the file, for messages */
    const json_t *root; /* the object keys are read from */
    const char *prefix; /* its key in the file ("rope_scaling"), or NULL for the top level */
} cfg_src;

/* A JSON value as a message shows it: the string "x", the number 3, null, a list ... */
static void describe(const json_t *v, char *buf, size_t len)
{
    switch (json_typeof(v)) {
    case JSON_STRING: snprintf(buf, len, "the string \"%s\"", shown_text(json_string_value(v)).s); break;
    case JSON_INTEGER: snprintf(buf, len, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: snprintf(buf, len, "%g", json_real_value(v)); break;
    case JSON_TRUE: snprintf(buf, len, "true"); break;
    case JSON_FALSE: snprintf(buf, len, "false"); break;
    case JSON_NULL: snprintf(buf, len, "null"); break;
    case JSON_ARRAY: snprintf(buf, len, "a list"); break;
    default: snprintf(buf, len, "an object"); break;
    }
}

static pt_status bad(const cfg_src *c, const char *key, const char *expected, const json_t *v)
{
    char shown[sizeof(pt_shown) + 16];
    describe(v, shown, sizeof shown);
    return ERR(PT_ERR_USER, "%s: %s%s%s: expected %s, found %s", shown_text(c->name).s, c->prefix ? c->prefix : "",
               c->prefix ? "." : "", key, expected, shown);
}

static pt_status missing(const cfg_src *c, const char *key)
{
    return ERR(PT_ERR_USER,
               "%s: %s%s%s is missing; every config.json of this model family has it: is the file "
               "complete? (download the model again)",
               shown_text(c->name).s, c->prefix ? c->prefix : "", c->prefix ? "." : "", key);
}

/* root[key] when present and not null, else NULL (required: missing is an error). */
static pt_status value(const cfg_src *c, const char *key, bool required, const json_t **v)
{
    *v = json_object_get(c->root, key);
    if (*v && json_is_null(*v)) *v = NULL;
    if (!*v && required) return missing(c, key);
    return PT_OK;
}

static pt_status int_key(const cfg_src *c, const char *key, bool required, int64_t lo, int64_t hi, int *out)
{
    const json_t *v;
    TRY(value(c, key, required, &v));
    if (!v) return PT_OK;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char expected[80];
        snprintf(expected, sizeof expected, "an integer from %lld to %lld", (long long)lo, (long long)hi);
        return bad(c, key, expected, v);
    }
    *out = (int)json_integer_value(v);
    return PT_OK;
}

/* A number (integer or real) in (lo, hi]; absent or null leaves *out as it is. */
static pt_status num_key(const cfg_src *c, const char *key, double lo, double hi, double *out)
{
    const json_t *v;
    TRY(value(c, key, false, &v));
    if (!v) return PT_OK;
    if (!json_is_number(v) || !(json_number_value(v) > lo) || !(json_number_value(v) <= hi)) {
        char expected[80];
        snprintf(expected, sizeof expected, "a number above %g and at most %g", lo, hi);
        return bad(c, key, expected, v);
    }
    *out = json_number_value(v);
    return PT_OK;
}

static pt_status bool_key(const cfg_src *c, const char *key, bool *out)
{
    const json_t *v;
    TRY(value(c, key, false, &v));
    if (!v) return PT_OK;
    if (!json_is_boolean(v)) return bad(c, key, "true or false", v);
    *out = json_is_true(v);
    return PT_OK;
}

/* A string key; absent or null leaves out as it is. */
static pt_status str_key(const cfg_src *c, const char *key, char *out, size_t len)
{
    const json_t *v;
    TRY(value(c, key, false, &v));
    if (!v) return PT_OK;
    if (!json_is_string(v)) return bad(c, key, "a string", v);
    snprintf(out, len, "%s", json_string_value(v));
    return PT_OK;
}

/* ---- the family ---- */

static pt_status family(const cfg_src *c, hf_config *h, const pt_arch_hf_type **type)
{
    TRY(str_key(c, "model_type", h->model_type, sizeof h->model_type));
    const json_t *archs = json_object_get(c->root, "architectures");
    if (archs && !json_is_null(archs) && (!json_is_array(archs) || !json_is_string(json_array_get(archs, 0))))
        return bad(c, "architectures", "a list of class names such as [\"LlamaForCausalLM\"]", archs);
    if (json_is_array(archs)) snprintf(h->architecture, sizeof h->architecture, "%s", json_string_value(json_array_get(archs, 0)));
    if (!*h->model_type && !*h->architecture)
        return ERR(PT_ERR_USER, "%s: has neither model_type nor architectures: is this the config.json of a model?",
                   shown_text(c->name).s);
    if (arch_from_hf(h->model_type, h->architecture, &h->cfg.arch, type)) {
        if (!*h->model_type) snprintf(h->model_type, sizeof h->model_type, "%s", (*type)->model_type);
        return PT_OK;
    }
    return ERR(PT_ERR_USER, "%s: model_type \"%s\" (%s) is not supported; supported: %s", shown_text(c->name).s,
               *h->model_type ? shown_text(h->model_type).s : "not given",
               *h->architecture ? shown_text(h->architecture).s : "no architectures", arch_hf_list());
}

/* ---- sizes ---- */

static pt_status sizes(const cfg_src *c, pt_model_config *m)
{
    TRY(int_key(c, "num_hidden_layers", true, 1, 4096, &m->n_layers));
    TRY(int_key(c, "hidden_size", true, 1, 1 << 24, &m->dim));
    TRY(int_key(c, "intermediate_size", true, 1, 1 << 26, &m->ffn_dim));
    TRY(int_key(c, "num_attention_heads", true, 1, 4096, &m->n_heads));
    TRY(int_key(c, "vocab_size", true, 1, 1 << 24, &m->vocab));
    m->n_kv_heads = m->n_heads;
    TRY(int_key(c, "num_key_value_heads", false, 1, m->n_heads, &m->n_kv_heads));
    m->head_dim = 0;
    TRY(int_key(c, "head_dim", false, 2, 1024, &m->head_dim));
    if (!m->head_dim && m->dim % m->n_heads)
        return ERR(PT_ERR_USER, "%s: hidden_size %d is not a multiple of num_attention_heads %d and no head_dim is "
                   "given", shown_text(c->name).s, m->dim, m->n_heads);
    if (!m->head_dim) m->head_dim = m->dim / m->n_heads;
    if (m->n_heads % m->n_kv_heads || m->head_dim % 2 || m->head_dim > 1024)
        return ERR(PT_ERR_USER,
                   "%s: %d heads, %d key/value heads and head size %d do not fit together (heads must "
                   "be a multiple of key/value heads, the head size even and at most 1024)",
                   shown_text(c->name).s, m->n_heads, m->n_kv_heads, m->head_dim);
    m->ctx_len = 2048;
    TRY(int_key(c, "max_position_embeddings", false, 1, 1 << 30, &m->ctx_len));
    double eps = 1e-6;
    TRY(num_key(c, "rms_norm_eps", 1e-20, 1, &eps));
    m->norm_eps = (float)eps;
    return PT_OK;
}

/* ---- rope ---- */

static pt_status rope_type_of(const cfg_src *r, pt_rope_type *t)
{
    char type[32] = "default";
    const char *key = json_object_get(r->root, "rope_type") ? "rope_type" : "type";
    TRY(str_key(r, key, type, sizeof type));
    if (!strcmp(type, "default")) *t = PT_ROPE_DEFAULT;
    else if (!strcmp(type, "linear")) *t = PT_ROPE_LINEAR;
    else if (!strcmp(type, "llama3")) *t = PT_ROPE_LLAMA3;
    else if (!strcmp(type, "longrope") || !strcmp(type, "su")) *t = PT_ROPE_LONGROPE; /* phi3 only: parse_root */
    else if (!strcmp(type, "yarn")) *t = PT_ROPE_YARN;
    else
        return ERR(PT_ERR_USER, "%s: %s.%s \"%s\" is not supported; supported: default, linear, llama3, yarn (and "
                   "longrope for phi3)",
                   shown_text(r->name).s, r->prefix, key, shown_text(type).s);
    return PT_OK;
}

/* LongRoPE's short_factor or long_factor: a list of positive numbers, at most ROPE_MAX_FACTORS (its length
 * checked against the rotated width in phi3()). */
static pt_status factor_list(const cfg_src *r, const char *key, float *out, int *n)
{
    const json_t *v;
    TRY(value(r, key, true, &v));
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > ROPE_MAX_FACTORS)
        return bad(r, key, "a list of 1 to 512 positive numbers (one per rotated pair of a head)", v);
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_number(x) || !(json_number_value(x) > 1e-9) || !(json_number_value(x) < 1e9))
            return bad(r, key, "a list of positive numbers (each above 1e-9 and below 1e9)", x);
        out[i] = (float)json_number_value(x);
    }
    *n = (int)json_array_size(v);
    return PT_OK;
}

/* LongRoPE (Phi-3.5-mini, Phi-4-mini): both factor lists of one length; factor, attention_factor and
 * original_max_position_embeddings when given (phi3() fills in transformers' defaults). */
static pt_status longrope(const cfg_src *r, pt_rope_scaling *s)
{
    int n_long = 0;
    TRY(factor_list(r, "short_factor", s->short_factor, &s->n_factors));
    TRY(factor_list(r, "long_factor", s->long_factor, &n_long));
    if (n_long != s->n_factors)
        return ERR(PT_ERR_USER, "%s: %s: short_factor has %d values and long_factor %d; they must be as long",
                   shown_text(r->name).s, r->prefix, s->n_factors, n_long);
    s->factor = s->attention_factor = s->original_max_position_embeddings = 0;
    TRY(num_key(r, "factor", 0, 1e9, &s->factor));
    TRY(num_key(r, "attention_factor", 0, 1e9, &s->attention_factor));
    return num_key(r, "original_max_position_embeddings", 0, 1 << 30, &s->original_max_position_embeddings);
}

/* YaRN's keys as given (0 where absent: yarn_setup fills in transformers' defaults once the sizes are known). */
static pt_status yarn_keys(const cfg_src *r, pt_rope_scaling *s)
{
    bool truncate = true;
    s->factor = s->attention_factor = s->original_max_position_embeddings = s->beta_fast = s->beta_slow = 0;
    TRY(num_key(r, "factor", 0, 1e9, &s->factor));
    TRY(num_key(r, "attention_factor", 1e-9, 1e9, &s->attention_factor));
    TRY(num_key(r, "original_max_position_embeddings", 0, 1 << 30, &s->original_max_position_embeddings));
    TRY(num_key(r, "beta_fast", 0, 1e9, &s->beta_fast));
    TRY(num_key(r, "beta_slow", 0, 1e9, &s->beta_slow));
    TRY(num_key(r, "mscale", 0, 1e9, &s->mscale));
    TRY(num_key(r, "mscale_all_dim", 0, 1e9, &s->mscale_all_dim));
    TRY(bool_key(r, "truncate", &truncate));
    s->no_truncate = !truncate;
    return PT_OK;
}

/* rope_scaling (older configs) or rope_parameters (transformers 5), in r: type and parameters. */
static pt_status rope_scaling(const cfg_src *r, pt_rope_scaling *s)
{
    TRY(rope_type_of(r, &s->type));
    if (s->type == PT_ROPE_DEFAULT) return PT_OK;
    if (s->type == PT_ROPE_LONGROPE) return longrope(r, s);
    if (s->type == PT_ROPE_YARN) return yarn_keys(r, s);
    const char *names[] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    double *dst[] = {&s->factor, &s->low_freq_factor, &s->high_freq_factor, &s->original_max_position_embeddings};
    int need = s->type == PT_ROPE_LLAMA3 ? 4 : 1;
    for (int i = 0; i < need; i++) {
        *dst[i] = -1;
        TRY(num_key(r, names[i], 0, 1e12, dst[i]));
        if (*dst[i] < 0) return missing(r, names[i]);
    }
    if (s->type == PT_ROPE_LLAMA3 && !(s->high_freq_factor > s->low_freq_factor))
        return ERR(PT_ERR_USER, "%s: %s: high_freq_factor (%g) must be above low_freq_factor (%g)",
                   shown_text(r->name).s, r->prefix, s->high_freq_factor, s->low_freq_factor);
    return PT_OK;
}

static pt_status rope(const cfg_src *c, hf_config *h)
{
    h->rope_theta = 10000.0;
    const json_t *params = json_object_get(c->root, "rope_parameters");
    const char *where = params && !json_is_null(params) ? "rope_parameters" : "rope_scaling";
    const json_t *obj = json_object_get(c->root, where);
    cfg_src r = {c->name, obj, where};
    if (obj && !json_is_null(obj) && !json_is_object(obj))
        return bad(c, where, "an object such as {\"rope_type\": \"llama3\", ...}", obj);
    if (!strcmp(where, "rope_parameters")) TRY(num_key(&r, "rope_theta", 1, 1e15, &h->rope_theta));
    else TRY(num_key(c, "rope_theta", 1, 1e15, &h->rope_theta));
    if (json_is_object(obj)) TRY(rope_scaling(&r, &h->rope));
    h->cfg.rope_theta = (float)h->rope_theta;
    return PT_OK;
}

/* ---- what each family adds ---- */

static pt_status activation(const cfg_src *c, const char *key, const char *want, pt_activation act, pt_model_config *m)
{
    char name[40] = "";
    TRY(str_key(c, key, name, sizeof name));
    if (!*name) snprintf(name, sizeof name, "%s", want);
    bool tanh_gelu = !strcmp(name, "gelu_pytorch_tanh") || !strcmp(name, "gelu_new");
    if (strcmp(name, want) && !(act == PT_ACT_GELU_TANH && tanh_gelu))
        return ERR(PT_ERR_USER, "%s: %s \"%s\" is not supported for %s models; supported: %s", shown_text(c->name).s,
                   key, shown_text(name).s, arch_name(m->arch), want);
    m->act = act;
    return PT_OK;
}

/* ---- layer_types ---- */

/* The one form of layer_types ptrain runs: every P-th layer "full_attention", the others rule->other
 * ("sliding_attention"; Qwen3.5's "linear_attention"), P the first full layer's number (n_layers + 1: none
 * full), and with rule->last_full the last layer full whatever P says (Gemma 4). rule->fixed > 0: P must be
 * it (Gemma 2's alternation: 2). Absent or null leaves *period as it is; any other list is refused naming the
 * family's pattern (rule->family). */
typedef struct {
    const char *other, *family;
    int fixed;
    bool last_full;
} layer_rule;

static bool layer_full(const layer_rule *r, int period, int n_layers, int l)
{
    return (l + 1) % period == 0 || (r->last_full && l == n_layers - 1);
}

static pt_status layer_types(const cfg_src *c, int n_layers, const layer_rule *r, int *period)
{
    const json_t *types = json_object_get(c->root, "layer_types");
    if (!types || json_is_null(types)) return PT_OK;
    int p = 0;
    for (int l = 0; json_is_array(types) && !p && l < (int)json_array_size(types); l++) {
        const char *t = json_string_value(json_array_get(types, (size_t)l));
        if (t && !strcmp(t, "full_attention")) p = l + 1;
    }
    if (!p) p = n_layers + 1; /* no full layer */
    bool ok = json_is_array(types) && json_array_size(types) == (size_t)n_layers && (!r->fixed || p == r->fixed);
    for (int l = 0; ok && l < n_layers; l++) {
        const char *t = json_string_value(json_array_get(types, (size_t)l));
        ok = t && !strcmp(t, layer_full(r, p, n_layers, l) ? "full_attention" : r->other);
    }
    if (ok) *period = p;
    if (ok) return PT_OK;
    return ERR(PT_ERR_USER, "%s: layer_types must list %d layers, \"%s\" but for every P-th%s \"full_attention\" (%s)",
               shown_text(c->name).s, n_layers, r->other, r->last_full ? " and the last" : "", r->family);
}

static pt_status llama_like(const cfg_src *c, const pt_arch_hf_type *type, pt_model_config *m)
{
    bool attn_bias = false, mlp_bias = false, sliding = false;
    TRY(bool_key(c, "attention_bias", &attn_bias));
    TRY(bool_key(c, "mlp_bias", &mlp_bias));
    m->qkv_bias = arch_info(m->arch)->qkv_bias;
    if ((attn_bias && !m->qkv_bias) || mlp_bias)
        return ERR(PT_ERR_USER, "%s: %s is true; ptrain's %s models have no %s biases", shown_text(c->name).s,
                   mlp_bias ? "mlp_bias" : "attention_bias", arch_name(m->arch), mlp_bias ? "MLP" : "attention");
    TRY(activation(c, "hidden_act", "silu", PT_ACT_SILU, m));
    m->qk_norm = arch_info(m->arch)->qk_norm;
    if (m->qkv_bias || m->qk_norm) TRY(bool_key(c, "use_sliding_window", &sliding)); /* the Qwen line's key */
    if (sliding)
        return ERR(PT_ERR_USER, "%s: use_sliding_window is true; ptrain runs %s with full attention on every "
                   "layer only", shown_text(c->name).s, m->qk_norm ? "Qwen3" : "Qwen2");
    if (type->sliding_window) TRY(int_key(c, "sliding_window", false, 1, 1 << 30, &m->sliding_window));
    m->sliding_pattern = 1;
    return PT_OK;
}

static pt_status gemma2(const cfg_src *c, pt_model_config *m)
{
    TRY(activation(c, json_object_get(c->root, "hidden_activation") ? "hidden_activation" : "hidden_act",
                   "gelu_pytorch_tanh", PT_ACT_GELU_TANH, m));
    double scalar = 256, attn_cap = 50, final_cap = 30;
    TRY(num_key(c, "query_pre_attn_scalar", 0.01, 1e9, &scalar));
    TRY(num_key(c, "attn_logit_softcapping", 1e-9, 1e9, &attn_cap));
    TRY(num_key(c, "final_logit_softcapping", 1e-9, 1e9, &final_cap));
    /* a null soft-cap switches it off */
    m->attn_softcap = json_is_null(json_object_get(c->root, "attn_logit_softcapping")) ? 0.0f : (float)attn_cap;
    m->final_softcap = json_is_null(json_object_get(c->root, "final_logit_softcapping")) ? 0.0f : (float)final_cap;
    m->attn_scale = (float)(1.0 / sqrt(scalar));
    m->embed_scale = sqrtf((float)m->dim);
    m->post_norms = true;
    m->sliding_window = 4096;
    if (json_is_null(json_object_get(c->root, "sliding_window"))) m->sliding_window = 0;
    TRY(int_key(c, "sliding_window", false, 1, 1 << 30, &m->sliding_window));
    m->sliding_pattern = 2;
    int period = 2;
    return layer_types(c, m->n_layers, &(layer_rule){"sliding_attention", "Gemma 2: P = 2, sliding on even layers",
                                                     2, false}, &period);
}

/* SmolLM3's no_rope_layers (1: the layer uses RoPE, 0: it does not), or no_rope_layer_interval
 * when the list is absent: ptrain runs (as llama.cpp does) a NoPE layer every n-th layer, so
 * the list must be of that form (or all 1: RoPE everywhere). */
static pt_status smollm3(const cfg_src *c, pt_model_config *m)
{
    bool sliding = false;
    TRY(bool_key(c, "use_sliding_window", &sliding));
    if (sliding)
        return ERR(PT_ERR_USER, "%s: use_sliding_window is true; ptrain runs SmolLM3 with full attention on every "
                   "layer only", shown_text(c->name).s);
    m->sliding_window = 0;
    m->nope_period = 4;
    TRY(int_key(c, "no_rope_layer_interval", false, 1, 4096, &m->nope_period));
    const json_t *list = json_object_get(c->root, "no_rope_layers");
    if (!list || json_is_null(list)) return PT_OK;
    if (!json_is_array(list) || json_array_size(list) != (size_t)m->n_layers)
        return ERR(PT_ERR_USER, "%s: no_rope_layers: expected a list of %d values 0 or 1 (one per layer)",
                   shown_text(c->name).s, m->n_layers);
    int period = 0; /* the first layer without RoPE gives the period */
    for (int l = 0; l < m->n_layers && !period; l++)
        if (json_integer_value(json_array_get(list, (size_t)l)) == 0) period = l + 1;
    for (int l = 0; l < m->n_layers; l++) {
        const json_t *v = json_array_get(list, (size_t)l);
        bool rope = period == 0 || (l + 1) % period != 0;
        if (!json_is_integer(v) || json_integer_value(v) != (rope ? 1 : 0))
            return ERR(PT_ERR_USER, "%s: no_rope_layers[%d]: ptrain (as llama.cpp) runs a layer without RoPE every "
                       "n-th layer (SmolLM3: 1, 1, 1, 0, ...); this list is not of that form", shown_text(c->name).s, l);
    }
    m->nope_period = period;
    return PT_OK;
}

/* Granite's four multipliers; attention_multiplier replaces 1/sqrt(head_dim) (transformers' default
 * is 1), logits are divided by logits_scaling. */
static pt_status granite(const cfg_src *c, pt_model_config *m)
{
    double embed = 1, attn = 1, resid = 1, logits = 1;
    /* above 1e-9, so each stays a positive float (1e-50 would round to 0) */
    TRY(num_key(c, "embedding_multiplier", 1e-9, 1e9, &embed));
    TRY(num_key(c, "attention_multiplier", 1e-9, 1e9, &attn));
    TRY(num_key(c, "residual_multiplier", 1e-9, 1e9, &resid));
    TRY(num_key(c, "logits_scaling", 1e-9, 1e9, &logits));
    m->embed_scale = (float)embed;
    m->attn_scale = (float)attn;
    m->residual_scale = (float)resid;
    m->logit_scale = (float)logits;
    return PT_OK;
}

/* Granite 4.0's layer_types (older files: layers_block_type): every layer attention ("attention", transformers 5's
 * "full_attention"); a Mamba layer ("mamba", "linear_attention") or a list left out (transformers then makes every
 * layer Mamba) is a hybrid, refused by name. */
static pt_status granite4_layers(const cfg_src *c, int n_layers)
{
    const char *key = json_object_get(c->root, "layer_types") ? "layer_types" : "layers_block_type";
    const json_t *types = json_object_get(c->root, key);
    if (!types || json_is_null(types))
        return ERR(PT_ERR_USER, "%s: has no layer_types, which makes every layer of a granitemoehybrid model a Mamba-2 "
                   "layer; ptrain runs the attention-only Granite 4.0 models only (layer_types all \"attention\")",
                   shown_text(c->name).s);
    if (!json_is_array(types) || json_array_size(types) != (size_t)n_layers) {
        char expected[96];
        snprintf(expected, sizeof expected, "a list of %d layer types, all \"attention\"", n_layers);
        return bad(c, key, expected, types);
    }
    for (int l = 0; l < n_layers; l++) {
        const char *t = json_string_value(json_array_get(types, (size_t)l));
        if (t && (!strcmp(t, "attention") || !strcmp(t, "full_attention"))) continue;
        bool mamba = t && (!strcmp(t, "mamba") || !strcmp(t, "linear_attention"));
        return ERR(PT_ERR_USER, "%s: %s[%d] is %s%s%s: %s; ptrain runs the attention-only Granite 4.0 models only "
                   "(every layer \"attention\", num_local_experts 0: granite-4.0-micro and its like)",
                   shown_text(c->name).s, key, l, t ? "\"" : "", t ? shown_text(t).s : "not a string", t ? "\"" : "",
                   mamba ? "a Mamba-2 layer of a hybrid Granite 4.0 model (granite-4.0-h-*), which ptrain does not run"
                         : "not a layer type of Granite 4.0");
    }
    return PT_OK;
}

/* Granite 4.0 (granitemoehybrid) as ptrain runs it: attention on every layer, no experts (num_local_experts 0;
 * transformers' default when absent is 8), the shared MLP's width (shared_intermediate_size, default 1024; the
 * gate and up rows of input_linear), and RoPE only with position_embedding_type "rope" (absent, null or "nope":
 * no layer rotates, as transformers). */
static pt_status granite4(const cfg_src *c, pt_model_config *m)
{
    int experts = 8;
    TRY(int_key(c, "num_local_experts", false, 0, 1 << 20, &experts));
    if (experts > 0)
        return ERR(PT_ERR_USER, "%s: num_local_experts is %d%s: a Granite 4.0 mixture of experts, which ptrain does not "
                   "run; it runs the dense attention-only Granite 4.0 models (num_local_experts 0)",
                   shown_text(c->name).s, experts, json_object_get(c->root, "num_local_experts") ? ""
                   : " (transformers' default: the file does not give it)");
    TRY(granite4_layers(c, m->n_layers));
    m->ffn_dim = 1024;
    TRY(int_key(c, arch_info(m->arch)->ffn_width_key, false, 1, 1 << 26, &m->ffn_dim));
    char pos[16] = "nope";
    TRY(str_key(c, "position_embedding_type", pos, sizeof pos));
    if (strcmp(pos, "rope") && strcmp(pos, "nope"))
        return bad(c, "position_embedding_type", "\"rope\", \"nope\" or null", json_object_get(c->root,
                   "position_embedding_type"));
    m->nope_period = strcmp(pos, "rope") ? 1 : 0; /* 1: no layer rotates */
    return PT_OK;
}

/* partial_rotary_factor (Phi-4-mini: 0.75, 96 of 128 values of each head rotate; Qwen3.5: 0.25), factor
 * when absent: at the top level, or in rope_parameters (transformers 5); rope_dim as transformers computes
 * it, int(head_dim * factor). */
static pt_status partial_rotary(const cfg_src *c, double factor, pt_model_config *m)
{
    const json_t *params = json_object_get(c->root, "rope_parameters");
    cfg_src r = {c->name, params, "rope_parameters"};
    TRY(num_key(c, "partial_rotary_factor", 0, 1, &factor));
    if (json_is_object(params)) TRY(num_key(&r, "partial_rotary_factor", 0, 1, &factor));
    int rd = (int)(m->head_dim * factor);
    if (rd < 2 || rd % 2)
        return ERR(PT_ERR_USER, "%s: partial_rotary_factor %g of head size %d rotates %d values; ptrain needs an even "
                   "number, at least 2", shown_text(c->name).s, factor, m->head_dim, rd);
    m->rope_dim = rd == m->head_dim ? 0 : rd;
    return PT_OK;
}

static pt_status phi3(const cfg_src *c, pt_model_config *m) { return partial_rotary(c, 1.0, m); }

/* LongRoPE as transformers' _compute_longrope_parameters sets it up: original_max_position_embeddings from
 * the scaling or the top level, factor max / original positions unless given, attention factor
 * sqrt(1 + ln(factor) / ln(original)) (1 when factor <= 1) unless given; a pass reaching the original
 * positions runs the long factors (model_layer_freq), the others the short ones. */
static pt_status phi3_longrope(const cfg_src *c, hf_config *h)
{
    pt_rope_scaling *s = &h->rope;
    pt_model_config *m = &h->cfg;
    int rd = m->rope_dim > 0 ? m->rope_dim : m->head_dim;
    if (s->n_factors != rd / 2)
        return ERR(PT_ERR_USER, "%s: rope scaling (longrope): short_factor and long_factor have %d values; the %d "
                   "rotated values of a head need %d", shown_text(c->name).s, s->n_factors, rd, rd / 2);
    if (!(s->original_max_position_embeddings > 0)) {
        int orig = 0;
        TRY(int_key(c, "original_max_position_embeddings", false, 1, 1 << 30, &orig));
        if (!orig)
            return ERR(PT_ERR_USER, "%s: rope scaling (longrope) without original_max_position_embeddings (in the "
                       "scaling or at the top level)", shown_text(c->name).s);
        s->original_max_position_embeddings = orig;
    }
    double orig = s->original_max_position_embeddings;
    if (!(s->factor > 0)) s->factor = (double)m->ctx_len / orig;
    if (!(s->attention_factor > 0))
        s->attention_factor = s->factor <= 1.0 || orig <= 1.0 ? 1.0 : sqrt(1.0 + log(s->factor) / log(orig));
    m->rope_mscale = (float)s->attention_factor;
    m->rope_short_max = (int)orig;
    return PT_OK;
}

/* YaRN as transformers' standardize_rope_params and _compute_yarn_parameters set it up:
 * original_max_position_embeddings from the top level, else the scaling, else max_position_embeddings;
 * factor max / original positions unless given; the attention factor (cos and sin times it, on every
 * layer) rope_yarn_attention's unless given. Gemma 3 is refused: its local layers run unscaled. */
static pt_status yarn_setup(const cfg_src *c, hf_config *h)
{
    pt_rope_scaling *s = &h->rope;
    pt_model_config *m = &h->cfg;
    if (m->arch == PT_ARCH_GEMMA3 || m->arch == PT_ARCH_GEMMA2)
        return ERR(PT_ERR_USER, "%s: rope scaling yarn on a %s model; ptrain runs yarn for llama-like families "
                   "(llama, mistral, qwen2, qwen3, ...), whose every layer shares one rotary embedding",
                   shown_text(c->name).s, arch_name(m->arch));
    int top = 0;
    TRY(int_key(c, "original_max_position_embeddings", false, 1, 1 << 30, &top));
    if (top) s->original_max_position_embeddings = top;
    if (!(s->original_max_position_embeddings > 0)) s->original_max_position_embeddings = m->ctx_len;
    if (!(s->factor > 0)) s->factor = (double)m->ctx_len / s->original_max_position_embeddings;
    if (!(s->attention_factor > 0)) s->attention_factor = rope_yarn_attention(s->factor, s->mscale, s->mscale_all_dim);
    m->rope_mscale = (float)s->attention_factor;
    return PT_OK;
}

/* Ministral 3's query temperature: llama_4_scaling_beta of the rope parameters over their
 * original_max_position_embeddings (as yarn_setup resolved it, transformers' standardize_rope_params). */
static pt_status q_temperature(const cfg_src *c, hf_config *h)
{
    const json_t *params = json_object_get(c->root, "rope_parameters");
    const char *where = json_is_object(params) ? "rope_parameters" : "rope_scaling";
    cfg_src r = {c->name, json_object_get(c->root, where), where};
    double beta = 0, period = h->rope.original_max_position_embeddings;
    if (!json_is_object(r.root)) return PT_OK;
    TRY(num_key(&r, "llama_4_scaling_beta", 0, 1e3, &beta));
    if (beta == 0) return PT_OK;
    if (!(period > 0)) TRY(num_key(&r, "original_max_position_embeddings", 0, 1 << 30, &period));
    if (!(period >= 1))
        return ERR(PT_ERR_USER, "%s: %s.llama_4_scaling_beta without original_max_position_embeddings (the "
                   "positions per step of the query temperature)", shown_text(c->name).s, where);
    h->cfg.q_temp_beta = (float)beta;
    h->cfg.q_temp_period = (int)period;
    return PT_OK;
}

/* The rope of a family with one per layer type (Gemma 3, OLMo 3): the full-attention layers on rope_theta with its
 * scaling, the sliding ones on their own base unscaled. transformers 5 writes them as rope_parameters.full_attention
 * and .sliding_attention, each base defaulting to the family's (d); older configs have rope_theta and rope_scaling
 * at the top level for the full layers and the sliding layers' base under d->local_key (Gemma 3's
 * rope_local_base_freq; OLMo 3 has none: transformers 5 gives them its default base whatever rope_theta says). */
typedef struct {
    double full_theta, local_theta;
    const char *local_key, *family;
} typed_rope_defaults;

static pt_status typed_rope(const cfg_src *c, hf_config *h, const typed_rope_defaults *d)
{
    double local = d->local_theta;
    const json_t *params = json_object_get(c->root, "rope_parameters");
    const json_t *full = json_is_object(params) ? json_object_get(params, "full_attention") : NULL;
    if (json_is_object(full)) {
        cfg_src f = {c->name, full, "rope_parameters.full_attention"};
        h->rope_theta = d->full_theta;
        memset(&h->rope, 0, sizeof h->rope);
        TRY(num_key(&f, "rope_theta", 1, 1e15, &h->rope_theta));
        TRY(rope_scaling(&f, &h->rope));
        const json_t *slide = json_object_get(params, "sliding_attention");
        if (json_is_object(slide)) {
            cfg_src sl = {c->name, slide, "rope_parameters.sliding_attention"};
            pt_rope_scaling none = {0};
            TRY(num_key(&sl, "rope_theta", 1, 1e15, &local));
            TRY(rope_scaling(&sl, &none));
            if (none.type != PT_ROPE_DEFAULT)
                return ERR(PT_ERR_USER, "%s: rope_parameters.sliding_attention: rope_type \"%s\"; ptrain (and "
                           "llama.cpp) run %s's local layers unscaled", shown_text(c->name).s,
                           rope_type_name(none.type), d->family);
        }
    } else {
        if (!json_object_get(c->root, "rope_theta") && !json_is_object(params)) h->rope_theta = d->full_theta;
        if (d->local_key) TRY(num_key(c, d->local_key, 1, 1e15, &local));
    }
    h->cfg.rope_theta = (float)h->rope_theta;
    h->cfg.rope_theta_local = (float)local;
    return PT_OK;
}

static pt_status gemma3(const cfg_src *c, hf_config *h)
{
    pt_model_config *m = &h->cfg;
    TRY(activation(c, json_object_get(c->root, "hidden_activation") ? "hidden_activation" : "hidden_act",
                   "gelu_pytorch_tanh", PT_ACT_GELU_TANH, m));
    double scalar = 256, attn_cap = 0, final_cap = 0;
    bool bidirectional = false, attn_bias = false;
    TRY(num_key(c, "query_pre_attn_scalar", 0.01, 1e9, &scalar));
    TRY(num_key(c, "attn_logit_softcapping", 1e-9, 1e9, &attn_cap));
    TRY(num_key(c, "final_logit_softcapping", 1e-9, 1e9, &final_cap));
    TRY(bool_key(c, "use_bidirectional_attention", &bidirectional));
    TRY(bool_key(c, "attention_bias", &attn_bias));
    if (bidirectional || attn_bias)
        return ERR(PT_ERR_USER, "%s: %s is true; ptrain runs Gemma 3 as released (causal, no attention biases)",
                   shown_text(c->name).s, bidirectional ? "use_bidirectional_attention" : "attention_bias");
    m->attn_softcap = (float)attn_cap;
    m->final_softcap = (float)final_cap;
    m->attn_scale = (float)(1.0 / sqrt(scalar));
    m->embed_scale = sqrtf((float)m->dim);
    m->post_norms = m->qk_norm = true;
    m->sliding_window = 4096;
    if (json_is_null(json_object_get(c->root, "sliding_window"))) m->sliding_window = 0;
    TRY(int_key(c, "sliding_window", false, 1, 1 << 30, &m->sliding_window));
    m->sliding_period = 6; /* older configs: sliding_window_pattern */
    TRY(int_key(c, "sliding_window_pattern", false, 1, 1 << 20, &m->sliding_period));
    TRY(typed_rope(c, h, &(typed_rope_defaults){1e6, 1e4, "rope_local_base_freq", "Gemma 3"}));
    return layer_types(c, m->n_layers, &(layer_rule){"sliding_attention", "Gemma 3: P = 6", 0, false},
                       &m->sliding_period);
}

/* OLMo 3: OLMo 2's block with a window (sliding_window, 4096 when absent) on every layer but every P-th
 * (layer_types, else type->sliding_period: 4) and the rope per layer type (typed_rope; base 500000). */
static pt_status olmo3(const cfg_src *c, const pt_arch_hf_type *type, hf_config *h)
{
    pt_model_config *m = &h->cfg;
    if (json_is_null(json_object_get(c->root, "sliding_window")))
        return ERR(PT_ERR_USER, "%s: sliding_window is null; ptrain runs OLMo 3's sliding_attention layers with a "
                   "window (4096 in every release): give it", shown_text(c->name).s);
    m->sliding_window = 4096;
    TRY(int_key(c, "sliding_window", false, 1, 1 << 30, &m->sliding_window));
    m->sliding_period = type->sliding_period;
    TRY(layer_types(c, m->n_layers, &(layer_rule){"sliding_attention", "OLMo 3: P = 4", 0, false}, &m->sliding_period));
    return typed_rope(c, h, &(typed_rope_defaults){500000.0, 500000.0, NULL, "OLMo 3"});
}

/* The global layers' head size and key/value heads: per_layer_config (as transformers 5 writes it: the same
 * override on every global layer, none on the local ones), else global_head_dim (512) and, with
 * attention_k_eq_v, num_global_key_value_heads. */
static pt_status gemma4_heads(const cfg_src *c, pt_model_config *m)
{
    const json_t *per = json_object_get(c->root, "per_layer_config");
    m->head_dim_full = 512;
    if (!per || json_is_null(per)) {
        TRY(int_key(c, "global_head_dim", false, 2, 1024, &m->head_dim_full));
        if (m->k_eq_v) TRY(int_key(c, "num_global_key_value_heads", false, 1, m->n_heads, &m->n_kv_heads_full));
    } else {
        if (!json_is_object(per)) return bad(c, "per_layer_config", "an object of layer overrides", per);
        bool first = true;
        for (int l = 0; l < m->n_layers; l++) {
            char key[16];
            snprintf(key, sizeof key, "%d", l);
            const json_t *o = json_object_get(per, key);
            bool global = model_layer_window(m, l) == 0;
            if (!o && !global) continue;
            cfg_src lc = {c->name, o, "per_layer_config"};
            int hd = m->head_dim, kvh = m->n_kv_heads;
            if (o && !json_is_object(o)) return bad(c, "per_layer_config", "an object per layer", o);
            if (o) TRY(int_key(&lc, "head_dim", false, 2, 1024, &hd));
            if (o) TRY(int_key(&lc, "num_key_value_heads", false, 1, m->n_heads, &kvh));
            bool same = global && (first || (hd == m->head_dim_full && kvh == m->n_kv_heads_full)) &&
                        (!o || json_object_size(o) <= 2);
            if (!same)
                return ERR(PT_ERR_USER, "%s: per_layer_config[\"%d\"]: ptrain runs one head size and key/value head "
                           "count for all global layers and the top-level ones for the sliding layers; this config "
                           "gives layer %d its own", shown_text(c->name).s, l, l);
            m->head_dim_full = hd, m->n_kv_heads_full = kvh, first = false;
        }
    }
    if (m->head_dim_full % 2 || m->n_heads % (m->n_kv_heads_full ? m->n_kv_heads_full : m->n_kv_heads))
        return ERR(PT_ERR_USER, "%s: the global layers' head size %d and %d key/value heads do not fit %d heads (the "
                   "head size must be even, the heads a multiple of the key/value heads)", shown_text(c->name).s,
                   m->head_dim_full, m->n_kv_heads_full, m->n_heads);
    return PT_OK;
}

/* rope_parameters.sliding_attention (default, base 10000) and .full_attention ("proportional": the first
 * int(partial_rotary_factor * head / 2) pairs turn by base^(-2i/head), divided by factor; or default). */
static pt_status gemma4_rope(const cfg_src *c, hf_config *h)
{
    pt_model_config *m = &h->cfg;
    double local = 10000.0, partial = 0.25, factor = 1.0;
    char type[32] = "proportional";
    h->rope_theta = 1e6;
    memset(&h->rope, 0, sizeof h->rope);
    const json_t *params = json_object_get(c->root, "rope_parameters");
    if (params && !json_is_null(params) && !json_is_object(params))
        return bad(c, "rope_parameters", "an object with full_attention and sliding_attention", params);
    const json_t *full = json_is_object(params) ? json_object_get(params, "full_attention") : NULL;
    const json_t *slide = json_is_object(params) ? json_object_get(params, "sliding_attention") : NULL;
    if (json_is_object(full)) {
        cfg_src f = {c->name, full, "rope_parameters.full_attention"};
        TRY(str_key(&f, "rope_type", type, sizeof type));
        TRY(num_key(&f, "rope_theta", 1, 1e15, &h->rope_theta));
        TRY(num_key(&f, "partial_rotary_factor", 0, 1, &partial));
        TRY(num_key(&f, "factor", 0, 1e9, &factor));
        if (strcmp(type, "proportional") && strcmp(type, "default"))
            return ERR(PT_ERR_USER, "%s: rope_parameters.full_attention.rope_type \"%s\" is not supported for Gemma 4; "
                       "supported: proportional, default", shown_text(c->name).s, shown_text(type).s);
        if (!strcmp(type, "default")) partial = 1.0, factor = 1.0;
    }
    if (json_is_object(slide)) {
        cfg_src sl = {c->name, slide, "rope_parameters.sliding_attention"};
        char st[32] = "default";
        TRY(str_key(&sl, "rope_type", st, sizeof st));
        TRY(num_key(&sl, "rope_theta", 1, 1e15, &local));
        if (strcmp(st, "default"))
            return ERR(PT_ERR_USER, "%s: rope_parameters.sliding_attention.rope_type \"%s\": ptrain runs Gemma 4's "
                       "sliding layers with the default rope only", shown_text(c->name).s, shown_text(st).s);
    }
    int pairs = (int)floor(partial * m->head_dim_full / 2.0);
    if (pairs < 1)
        return ERR(PT_ERR_USER, "%s: rope_parameters.full_attention.partial_rotary_factor %g turns no pair of the %d "
                   "values of a global head", shown_text(c->name).s, partial, m->head_dim_full);
    m->rope_pairs_full = pairs == m->head_dim_full / 2 ? 0 : pairs;
    if (factor != 1.0) h->rope.type = PT_ROPE_LINEAR, h->rope.factor = factor;
    m->rope_theta = (float)h->rope_theta;
    m->rope_theta_local = (float)local;
    return PT_OK;
}

/* The switches of Gemma 4 a text model may not use (MoE, bidirectional attention, biases, the double-wide MLP
 * of the shared layers) are refused by name. */
static pt_status gemma4_refusals(const cfg_src *c, const pt_model_config *m)
{
    bool moe = false, bias = false, wide = false;
    TRY(bool_key(c, "enable_moe_block", &moe));
    TRY(bool_key(c, "attention_bias", &bias));
    TRY(bool_key(c, "use_double_wide_mlp", &wide));
    const json_t *bidi = json_object_get(c->root, "use_bidirectional_attention");
    const char *what = moe ? "enable_moe_block is true" : bias ? "attention_bias is true"
                     : wide && m->kv_shared > 0 ? "use_double_wide_mlp is true"
                     /* "vision": bidirectional among an image's tokens only; text alone attends causally */
                     : bidi && !json_is_null(bidi) && !(json_is_string(bidi) && !strcmp(json_string_value(bidi), "vision"))
                     ? "use_bidirectional_attention is set (not \"vision\")" : NULL;
    if (!what) return PT_OK;
    return ERR(PT_ERR_USER, "%s: %s; ptrain runs Gemma 4 text models with causal attention, no biases, the dense MLP "
               "of intermediate_size on every layer and no MoE block (yet)", shown_text(c->name).s, what);
}

static pt_status gemma4(const cfg_src *c, hf_config *h)
{
    pt_model_config *m = &h->cfg;
    model_family_defaults(m);
    TRY(activation(c, json_object_get(c->root, "hidden_activation") ? "hidden_activation" : "hidden_act",
                   "gelu_pytorch_tanh", PT_ACT_GELU_TANH, m));
    double final_cap = 0;
    TRY(num_key(c, "final_logit_softcapping", 1e-9, 1e9, &final_cap));
    m->final_softcap = (float)final_cap;
    TRY(int_key(c, "sliding_window", false, 1, 1 << 30, &m->sliding_window));
    TRY(bool_key(c, "attention_k_eq_v", &m->k_eq_v));
    TRY(int_key(c, "num_kv_shared_layers", false, 0, m->n_layers - 1, &m->kv_shared));
    m->ple_dim = 256, m->ple_vocab = 262144;
    if (json_is_null(json_object_get(c->root, "hidden_size_per_layer_input"))) m->ple_dim = 0;
    TRY(int_key(c, "hidden_size_per_layer_input", false, 0, 1 << 16, &m->ple_dim));
    TRY(int_key(c, "vocab_size_per_layer_input", false, 1, 1 << 24, &m->ple_vocab));
    if (m->ple_dim > 0 && m->ple_vocab < m->vocab)
        return ERR(PT_ERR_USER, "%s: vocab_size_per_layer_input %d is below vocab_size %d: the per-layer embeddings "
                   "must cover every token", shown_text(c->name).s, m->ple_vocab, m->vocab);
    TRY(gemma4_refusals(c, m));
    m->sliding_period = 6;
    TRY(layer_types(c, m->n_layers, &(layer_rule){"sliding_attention", "Gemma 4: P = 5 or 6", 0, true},
                    &m->sliding_period));
    TRY(gemma4_heads(c, m));
    TRY(gemma4_rope(c, h));
    int first = m->n_layers - m->kv_shared;
    for (int l = first; l < m->n_layers && m->kv_shared > 0; l++)
        if (model_kv_source(m, l) == l)
            return ERR(PT_ERR_USER, "%s: num_kv_shared_layers %d: layer %d is %s and no layer before the shared ones "
                       "is, so none computes the keys it would reuse", shown_text(c->name).s, m->kv_shared, l,
                       model_layer_window(m, l) ? "sliding" : "global");
    return PT_OK;
}

/* Qwen3.5: the Gated DeltaNet's heads and conv kernel, the full layers' partial rotary (0.25 by default, at the
 * top level or in rope_parameters) and output gate. */
static pt_status qwen35(const cfg_src *c, pt_model_config *m)
{
    m->lin_k_heads = 16, m->lin_v_heads = 32, m->lin_k_dim = m->lin_v_dim = 128, m->lin_conv = 4;
    TRY(int_key(c, "linear_num_key_heads", false, 1, 4096, &m->lin_k_heads));
    TRY(int_key(c, "linear_num_value_heads", false, 1, 4096, &m->lin_v_heads));
    TRY(int_key(c, "linear_key_head_dim", false, 1, PT_DELTA_MAX_DIM, &m->lin_k_dim));
    TRY(int_key(c, "linear_value_head_dim", false, 1, PT_DELTA_MAX_DIM, &m->lin_v_dim));
    TRY(int_key(c, "linear_conv_kernel_dim", false, 1, 64, &m->lin_conv));
    if (m->lin_v_heads % m->lin_k_heads)
        return ERR(PT_ERR_USER, "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d",
                   shown_text(c->name).s, m->lin_v_heads, m->lin_k_heads);
    TRY(partial_rotary(c, 0.25, m));
    m->attn_gate = m->qk_norm = true;
    m->full_period = 4; /* layer_types, else full_attention_interval */
    if (!json_object_get(c->root, "layer_types") || json_is_null(json_object_get(c->root, "layer_types")))
        return int_key(c, "full_attention_interval", false, 1, 1 << 20, &m->full_period);
    return layer_types(c, m->n_layers, &(layer_rule){"linear_attention", "Qwen3.5: P = 4", 0, false}, &m->full_period);
}

/* ---- quantization_config ---- */

static pt_status quantization(const cfg_src *c, hf_config *h)
{
    const json_t *q = json_object_get(c->root, "quantization_config");
    if (!q || json_is_null(q)) return PT_OK;
    if (!json_is_object(q)) return bad(c, "quantization_config", "an object", q);
    cfg_src qc = {c->name, q, "quantization_config"};
    char method[32] = "bitsandbytes", type[16] = "nf4", storage[16] = "uint8";
    bool in4 = false, in8 = false;
    TRY(str_key(&qc, "quant_method", method, sizeof method));
    if (!strcmp(method, "mxfp4") && arch_info(h->cfg.arch)->gptoss_moe) { /* the experts only: load_hf.c reads them */
        h->mxfp4 = true;
        return PT_OK;
    }
    if (strcmp(method, "bitsandbytes"))
        return ERR(PT_ERR_USER,
                   "%s: quantization_config.quant_method \"%s\" is not supported; ptrain reads "
                   "bitsandbytes 4-bit (NF4) checkpoints, gpt-oss's mxfp4 ones and unquantized F32/F16/BF16 ones",
                   shown_text(c->name).s, shown_text(method).s);
    TRY(bool_key(&qc, "load_in_4bit", &in4));
    TRY(bool_key(&qc, "load_in_8bit", &in8));
    TRY(str_key(&qc, "bnb_4bit_quant_type", type, sizeof type));
    TRY(str_key(&qc, "bnb_4bit_quant_storage", storage, sizeof storage));
    TRY(bool_key(&qc, "bnb_4bit_use_double_quant", &h->bnb_double_quant));
    if (in8 || !in4)
        return ERR(PT_ERR_USER,
                   "%s: a bitsandbytes %s checkpoint; ptrain reads bitsandbytes 4-bit (NF4) ones: use "
                   "the unquantized model (ptrain quantizes it to NF4 on load)",
                   shown_text(c->name).s, in8 ? "8-bit" : "non-4-bit");
    if (strcmp(type, "nf4") || strcmp(storage, "uint8"))
        return ERR(PT_ERR_USER,
                   "%s: quantization_config: bnb_4bit_quant_type \"%s\" with storage %s is not "
                   "supported; ptrain reads NF4 stored as uint8",
                   shown_text(c->name).s, shown_text(type).s, shown_text(storage).s);
    h->bnb_4bit = true;
    return PT_OK;
}

/* mlp_only_layers: layer indices below n_layers (and 256) that keep a dense MLP. */
static pt_status mlp_only_layers(const cfg_src *c, pt_model_config *m)
{
    const json_t *list = json_object_get(c->root, "mlp_only_layers");
    if (!list || json_is_null(list)) return PT_OK;
    int top = m->n_layers < 256 ? m->n_layers : 256;
    if (!json_is_array(list)) return bad(c, "mlp_only_layers", "a list of layer indices", list);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= top) {
            char expected[96];
            snprintf(expected, sizeof expected, "a list of layer indices from 0 to %d", top - 1);
            return bad(c, "mlp_only_layers", expected, list);
        }
        int l = (int)json_integer_value(v);
        m->mlp_only[l / 64] |= (uint64_t)1 << (l % 64);
    }
    return PT_OK;
}

/* The experts (Qwen3-MoE, Mixtral): num_experts (config.json may write it as num_local_experts), the top-k,
 * each expert's width (the family's key), which layers are sparse (Mixtral: all), and whether the k weights
 * are renormalised (Mixtral: always; Qwen3-MoE: norm_topk_prob). */
static pt_status moe(const cfg_src *c, pt_model_config *m)
{
    const pt_arch_info *a = arch_info(m->arch);
    const char *n_key = json_object_get(c->root, "num_experts") ? "num_experts" : "num_local_experts";
    TRY(int_key(c, n_key, true, 1, 4096, &m->n_experts));
    TRY(int_key(c, "num_experts_per_tok", true, 1, m->n_experts, &m->n_experts_used));
    TRY(int_key(c, a->moe_width_key, true, 1, 1 << 26, &m->moe_ffn_dim));
    m->moe_step = 1;
    m->moe_norm_topk = a->moe_renormalise; /* else false: transformers' Qwen3MoeConfig default */
    if (a->moe_renormalise) return PT_OK;
    TRY(int_key(c, "decoder_sparse_step", false, 1, 4096, &m->moe_step));
    TRY(bool_key(c, "norm_topk_prob", &m->moe_norm_topk));
    return mlp_only_layers(c, m);
}

/* gpt-oss: a window (sliding_window, 128 when absent, null: none) on the even layers (layer_types: P = 2), sinks and
 * o_proj's bias (attention_bias), the experts' clamped SwiGLU (swiglu_limit 7, swiglu_alpha 1.702), and without
 * rope parameters transformers' GptOssConfig defaults: YaRN with factor 32 over 4096 positions, base 150000. */
static pt_status gptoss(const cfg_src *c, hf_config *h)
{
    pt_model_config *m = &h->cfg;
    bool attn_bias = true;
    TRY(bool_key(c, "attention_bias", &attn_bias));
    if (!attn_bias)
        return ERR(PT_ERR_USER, "%s: attention_bias is false; ptrain runs gpt-oss with its q/k/v/o biases (every "
                   "published gpt-oss model has them)", shown_text(c->name).s);
    m->o_bias = m->attn_sinks = m->moe_bias = true;
    double limit = 7.0, alpha = 1.702;
    TRY(num_key(c, "swiglu_limit", 0, 1e9, &limit));
    TRY(num_key(c, "swiglu_alpha", 0, 1e9, &alpha));
    m->swiglu_limit = (float)limit, m->swiglu_alpha = (float)alpha;
    m->sliding_window = 128;
    if (json_is_null(json_object_get(c->root, "sliding_window"))) m->sliding_window = 0;
    TRY(int_key(c, "sliding_window", false, 1, 1 << 30, &m->sliding_window));
    m->sliding_period = 2;
    TRY(layer_types(c, m->n_layers, &(layer_rule){"sliding_attention", "gpt-oss: P = 2, sliding on even layers", 2,
                                                  false}, &m->sliding_period));
    bool given = json_is_object(json_object_get(c->root, "rope_parameters")) ||
                 json_is_object(json_object_get(c->root, "rope_scaling"));
    if (!given) h->rope = (pt_rope_scaling){.type = PT_ROPE_YARN, .factor = 32, .beta_fast = 32, .beta_slow = 1,
                                            .original_max_position_embeddings = 4096, .no_truncate = true};
    if (!given && !json_object_get(c->root, "rope_theta")) h->rope_theta = 150000.0, m->rope_theta = 150000.0f;
    return PT_OK;
}

/* A multimodal checkpoint's text_config: the object the text model's settings are read from, and the type its
 * model_type names, whose family the model is, as transformers builds the text model from text_config (the
 * wrapper's own when it names none: Mistral3Config's default text model is mistral). */
static pt_status text_config(const cfg_src *top, hf_config *h, cfg_src *text, const pt_arch_hf_type **type)
{
    const json_t *t = json_object_get(top->root, "text_config");
    if (!json_is_object(t)) return t ? bad(top, "text_config", "an object", t) : missing(top, "text_config");
    json_t *merged = (*type)->text_defaults ? json_loads((*type)->text_defaults, 0, NULL) : json_object();
    TRY_ALLOC(merged); /* the defaults, and the file's keys over them; rope_parameters carry their own theta */
    if (json_object_get(t, "rope_parameters")) json_object_del(merged, "rope_theta");
    if (json_object_update(merged, (json_t *)t)) {
        json_decref(merged);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    /* kept under a key no config.json has, so that it is freed with the file's root */
    if (json_object_set_new((json_t *)top->root, " text_config with defaults", merged))
        return ERR(PT_ERR_NOMEM, "out of memory");
    *text = (cfg_src){top->name, merged, "text_config"};
    char inner[32] = "";
    TRY(str_key(text, "model_type", inner, sizeof inner));
    pt_arch arch;
    const pt_arch_hf_type *it = NULL;
    if (!*inner) return PT_OK;
    if (!arch_from_hf(inner, NULL, &arch, &it) || it->text_tower)
        return ERR(PT_ERR_USER, "%s: text_config.model_type \"%s\" is not a text model ptrain runs (in a %s "
                   "checkpoint); supported: %s", shown_text(top->name).s, shown_text(inner).s,
                   shown_text(h->model_type).s, arch_hf_list());
    h->cfg.arch = arch;
    *type = it;
    return PT_OK;
}

static pt_status parse_root(const cfg_src *top, hf_config *h)
{
    const pt_arch_hf_type *type = NULL, *wrapper;
    TRY(family(top, h, &type));
    pt_model_config *m = &h->cfg;
    cfg_src text = *top;
    const cfg_src *c = &text;
    wrapper = type;
    h->text_tower = m->text_tower = type->text_tower;
    if (h->text_tower) TRY(text_config(top, h, &text, &type));
    TRY(sizes(c, m));
    TRY(rope(c, h));
    m->tied_embeddings = wrapper->tied;
    TRY(bool_key(c, "tie_word_embeddings", &m->tied_embeddings));
    if (h->text_tower) TRY(bool_key(top, "tie_word_embeddings", &m->tied_embeddings)); /* the model's own */
    m->embed_scale = 1.0f;
    m->attn_scale = 1.0f / sqrtf((float)m->head_dim);
    if (m->arch == PT_ARCH_GEMMA2) TRY(gemma2(c, m));
    else if (m->arch == PT_ARCH_GEMMA3) TRY(gemma3(c, h));
    else if (m->arch == PT_ARCH_GEMMA4) TRY(gemma4(c, h));
    else TRY(llama_like(c, type, m));
    if (m->arch == PT_ARCH_SMOLLM3) TRY(smollm3(c, m));
    if (arch_info(m->arch)->multipliers) TRY(granite(c, m));
    if (m->arch == PT_ARCH_GRANITE4) TRY(granite4(c, m));
    if (m->arch == PT_ARCH_PHI3) TRY(phi3(c, m));
    if (type->sliding_period) TRY(olmo3(c, type, h));
    if (arch_info(m->arch)->moe) TRY(moe(c, m));
    if (arch_info(m->arch)->gptoss_moe) TRY(gptoss(c, h));
    if (arch_info(m->arch)->gated_delta) TRY(qwen35(c, m));
    if (h->rope.type == PT_ROPE_LONGROPE && m->arch != PT_ARCH_PHI3)
        return ERR(PT_ERR_USER, "%s: rope scaling longrope is Phi-3's; ptrain runs it for phi3 models only, not %s",
                   shown_text(c->name).s, arch_name(m->arch));
    if (h->rope.type == PT_ROPE_LONGROPE) TRY(phi3_longrope(c, h));
    if (h->rope.type == PT_ROPE_YARN) TRY(yarn_setup(c, h));
    if (type->q_temperature) TRY(q_temperature(c, h));
    if (arch_info(m->arch)->no_pre_norms) m->post_norms = m->no_pre_norms = true; /* olmo2 */
    m->qk_norm_full = arch_info(m->arch)->qk_norm_full;
    TRY(str_key(top, json_object_get(top->root, "dtype") ? "dtype" : "torch_dtype", h->torch_dtype, sizeof h->torch_dtype));
    return quantization(top, h);
}

pt_status hf_config_parse(const char *name, const char *text, size_t len, hf_config *out)
{
    memset(out, 0, sizeof *out);
    json_error_t e;
    json_t *root = jsonfile_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!root)
        return ERR(PT_ERR_USER, "%s: does not parse as JSON: %s (line %d, column %d); download the model again",
                   shown_text(name).s, e.text, e.line, e.column);
    cfg_src c = {name, root, NULL};
    pt_status st = json_is_object(root)
                       ? parse_root(&c, out)
                       : ERR(PT_ERR_USER, "%s: expected a JSON object of model settings", shown_text(name).s);
    json_decref(root);
    if (st != PT_OK) memset(out, 0, sizeof *out);
    return st;
}

pt_status hf_config_read(const char *path, hf_config *out)
{
    enum { MAX_CONFIG = 16 << 20 };
    FILE *f = fopen(path, "rb");
    if (!f) return ERR(PT_ERR_USER, "%s: cannot open it: %s; a Hugging Face model directory has a config.json",
                       shown_text(path).s, strerror(errno));
    char *text = malloc(MAX_CONFIG + 1);
    size_t n = text ? fread(text, 1, MAX_CONFIG + 1, f) : 0;
    fclose(f);
    TRY_ALLOC(text);
    pt_status st = n > MAX_CONFIG
                       ? ERR(PT_ERR_USER, "%s: larger than 16 MB: not a model's config.json", shown_text(path).s)
                       : hf_config_parse(path, text, n, out);
    free(text);
    return st;
}
