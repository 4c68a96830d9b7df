/* hf_meta.c — a Hugging Face model directory's metadata files made from a GGUF file (hf_meta.h).
 *
 * config.json: the family's class and sizes from pt_model_config; rope scaling from
 * <arch>.rope.scaling.* (linear) or, for Llama 3.1-style files, from the rope_freqs tensor when
 * it equals what Llama 3's rope_scaling parameters give. tokenizer.json: the tokenizer ptrain
 * builds from tokenizer.ggml.* (src/tokenizer/tok_gguf.c, tok_gguf_spm.c), written the way
 * `tokenizers` serializes it:
 *   - "gpt2": byte-level BPE with the file's merges and the pre-tokenizer tokenizer.ggml.pre
 *     names; tokens not spelled in the byte alphabet are respelled byte by byte (as transformers'
 *     GGUF loader does); control tokens are special added tokens, user-defined ones plain ones;
 *   - "llama": SentencePiece-style BPE with byte fallback, the merges recovered from the
 *     vocabulary and scores exactly as ptrain (and transformers) recover them, the normalizer
 *     Prepend("▁") + Replace(" ", "▁") of Llama 2's tokenizer.json (SentencePiece's dummy prefix;
 *     Gemma's and add_space_prefix false: the Replace alone) and the matching decoder.
 * A TemplateProcessing post-processor adds bos/eos when tokenizer.ggml.add_bos_token/_eos_ say
 * so (transformers 5 takes them from there, not from tokenizer_config.json). */
#include "ptrain/arch.h"
#include "ptrain/hf_meta.h"
#include "ptrain/tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/filewrite.h"
#include "ptrain/rope.h"

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

enum { TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4 };

typedef struct {
    const gguf_file *f;
    const pt_model_config *cfg;
    const gguf_kv *tokens, *types; /* types may be NULL */
    uint64_t n;
    char **spell;                  /* each token as tokenizer.json spells it */
    bool spm, gemma, prefix, byte_fallback, add_bos, add_eos;
    const char *const *pre_res; /* the byte-level pre-tokenizer's split regexes (tokenizer_gguf_pre) */
    bool pre_ignore_merges, pre_bytelevel_regex;
    int64_t bos, eos, unk, pad; /* -1: none */
    json_t *vocab;              /* spelling -> the last id so spelled */
} hf_src;

/* ---- UTF-8 and the byte-level alphabet ---- */

/* The code point at s (n > 0 bytes left) in *cp; its length, 0 when not valid UTF-8. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!k || k > n) return 0;
    uint32_t c = k == 1 ? s[0] : s[0] & (0x7fu >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3fu);
    }
    if (c < min[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return k;
}

static size_t utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), 2;
    out[0] = (char)(0xe0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3; /* the byte alphabet stops at U+0143 */
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the 68 others for U+0100.. */
static uint32_t byte_char(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    return 256 + (b <= 32 ? b : b <= 160 ? b - 127 + 33 : 67);
}

static bool in_byte_alphabet(uint32_t cp) { return cp < 256 ? byte_char(cp) == cp : cp < 256 + 68; }

static bool is_byte_spelled(const char *s, size_t len)
{
    uint32_t cp;
    for (size_t i = 0, k; i < len; i += k)
        if (!(k = utf8_next((const unsigned char *)s + i, len - i, &cp)) || !in_byte_alphabet(cp)) return false;
    return true;
}

/* Python's str.isspace, which transformers' Gemma respelling tests with. */
static bool py_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* ---- token spellings ---- */

/* A byte-level token: as stored when spelled in the byte alphabet, else each byte spelled. */
static char *spell_bytelevel(const char *s, size_t len)
{
    if (is_byte_spelled(s, len)) return strndup(s, len);
    char *out = malloc(2 * len + 1), *p = out;
    for (size_t i = 0; out && i < len; i++) p += utf8_put(byte_char((unsigned char)s[i]), p);
    if (out) *p = '\0';
    return out;
}

/* A SentencePiece token as stored, or for Gemma a token of white space with a space in it as one
 * "▁" per character (the files store those with real spaces). NULL *out: not valid UTF-8. */
static pt_status spell_spm(const hf_src *src, const char *s, size_t len, char **out)
{
    size_t chars = 0;
    bool spaces = src->gemma, space = false;
    uint32_t cp;
    for (size_t i = 0, k; i < len; i += k, chars++) {
        if (!(k = utf8_next((const unsigned char *)s + i, len - i, &cp)) || cp == 0) return *out = NULL, PT_OK;
        spaces &= py_space(cp);
        space |= cp == ' ';
    }
    if (!(spaces && space)) return *out = strndup(s, len), *out ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    *out = malloc(3 * chars + 1);
    TRY_ALLOC(*out);
    for (size_t i = 0; i < chars; i++) memcpy(*out + 3 * i, SPM_SPACE, 3);
    (*out)[3 * chars] = '\0';
    return PT_OK;
}

static pt_status spell_tokens(hf_src *s)
{
    s->spell = calloc(s->n, sizeof *s->spell);
    s->vocab = json_object();
    if (!s->spell || !s->vocab) return ERR(PT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < s->n; i++) {
        gguf_str t = gguf_array_str(s->tokens, i);
        if (s->spm) TRY(spell_spm(s, t.data, t.len, &s->spell[i]));
        else if (!(s->spell[i] = spell_bytelevel(t.data, t.len))) return ERR(PT_ERR_NOMEM, "out of memory");
        if (!s->spell[i])
            return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens[%llu] is not valid UTF-8 (or holds a NUL): a "
                       "tokenizer.json cannot spell it", shown_text(s->f->path).s, (unsigned long long)i);
        if (json_object_set_new(s->vocab, s->spell[i], json_integer((json_int_t)i)))
            return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* ---- what the GGUF says about its tokenizer ---- */

static pt_status src_id(const hf_src *s, const char *key, int64_t *id)
{
    uint32_t v = UINT32_MAX;
    *id = -1;
    TRY(gguf_opt_u32(s->f, key, &v));
    if (v == UINT32_MAX) return PT_OK;
    if (v >= s->n)
        return ERR(PT_ERR_USER, "%s: %s: id %u is not a token (%llu tokens)", shown_text(s->f->path).s,
                   shown_text(key).s, v, (unsigned long long)s->n);
    *id = v;
    return PT_OK;
}

static int64_t token_type(const hf_src *s, uint64_t i) { return s->types ? gguf_array_int(s->types, i) : 1; }

static pt_status src_ids(hf_src *s)
{
    TRY(src_id(s, "tokenizer.ggml.bos_token_id", &s->bos));
    TRY(src_id(s, "tokenizer.ggml.eos_token_id", &s->eos));
    TRY(src_id(s, "tokenizer.ggml.unknown_token_id", &s->unk));
    TRY(src_id(s, "tokenizer.ggml.padding_token_id", &s->pad));
    for (uint64_t i = 0; s->spm && s->unk < 0 && i < s->n; i++)
        if (token_type(s, i) == TT_UNKNOWN) s->unk = (int64_t)i;
    s->add_bos = s->spm; /* llama.cpp's default for SentencePiece vocabularies */
    TRY(gguf_opt_bool(s->f, "tokenizer.ggml.add_bos_token", &s->add_bos));
    return gguf_opt_bool(s->f, "tokenizer.ggml.add_eos_token", &s->add_eos);
}

static pt_status src_kind(hf_src *s)
{
    gguf_str model, arch = {"", 0};
    TRY(gguf_get_str(s->f, "tokenizer.ggml.model", &model));
    if (!gguf_str_eq(model, "gpt2") && !gguf_str_eq(model, "llama"))
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.model \"%s\": exporting it as a tokenizer.json is not supported "
                   "(supported: \"gpt2\", byte-level BPE, and \"llama\", SentencePiece BPE)", shown_text(s->f->path).s,
                   shown_bytes(model.data, model.len).s);
    s->spm = gguf_str_eq(model, "llama");
    TRY(gguf_opt_str(s->f, "general.architecture", &arch));
    s->gemma = arch_gguf_gemma_line(arch.data, arch.len);
    s->prefix = s->spm && !s->gemma;
    TRY(gguf_opt_bool(s->f, "tokenizer.ggml.add_space_prefix", &s->prefix));
    s->prefix &= s->spm && !s->gemma;
    return PT_OK;
}

/* The pre-tokenizer tokenizer.ggml.pre names, as ptrain's GGUF loader builds it; "default" (and no
 * key) is GPT-2's byte-level split, as transformers reads such files. */
static pt_status src_pre(hf_src *s)
{
    static const char *const none[] = {NULL};
    gguf_str pre = {"default", 7};
    TRY(gguf_opt_str(s->f, "tokenizer.ggml.pre", &pre));
    if (gguf_str_eq(pre, "default")) {
        s->pre_res = none;
        s->pre_bytelevel_regex = true;
        return PT_OK;
    }
    if (tokenizer_gguf_pre(pre.data, pre.len, &s->pre_res, &s->pre_ignore_merges, &s->pre_bytelevel_regex))
        return PT_OK;
    return ERR(PT_ERR_USER, "%s: tokenizer.ggml.pre \"%s\": exporting this pre-tokenizer is not supported (ptrain's "
               "tokenizer does not read it: the names it reads are in docs/models.md)", shown_text(s->f->path).s,
               shown_bytes(pre.data, pre.len).s);
}

static pt_status src_tokens(hf_src *s)
{
    const char *key = "tokenizer.ggml.token_type";
    TRY(gguf_get_array(s->f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &s->tokens));
    s->n = s->tokens->count;
    if (s->n == 0 || s->n >= INT32_MAX)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: %llu tokens", shown_text(s->f->path).s,
                   (unsigned long long)s->n);
    if (gguf_find(s->f, key)) TRY(gguf_get_array(s->f, key, GGUF_TYPE_I32, &s->types));
    if (s->types && s->types->count != s->n)
        return ERR(PT_ERR_USER, "%s: %s: %llu entries for %llu tokens", shown_text(s->f->path).s, shown_text(key).s,
                   (unsigned long long)s->types->count, (unsigned long long)s->n);
    return spell_tokens(s);
}

/* Byte fallback needs every <0xXX> token; a vocabulary with some has all 256. */
static pt_status src_byte_fallback(hf_src *s)
{
    int have = 0;
    for (int b = 0; s->spm && b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        have += json_object_get(s->vocab, name) != NULL;
    }
    if (have > 0 && have < 256)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: only %d of the byte tokens <0x00> to <0xFF> (byte "
                   "fallback needs all 256)", shown_text(s->f->path).s, have);
    s->byte_fallback = have == 256;
    return PT_OK;
}

static pt_status src_init(hf_src *s)
{
    TRY(src_kind(s));
    if (!s->spm) TRY(src_pre(s));
    TRY(src_tokens(s));
    TRY(src_ids(s));
    return src_byte_fallback(s);
}

static void src_free(hf_src *s)
{
    for (uint64_t i = 0; s->spell && i < s->n; i++) free(s->spell[i]);
    free(s->spell);
    json_decref(s->vocab);
}

/* ---- small JSON helpers ---- */

/* A float32 as the shortest decimal that reads back as the same float (1e-05, not 9.99999974e-06). */
static json_t *jreal(float v)
{
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return json_real(strtod(buf, NULL));
}

static json_t *jid(int64_t id) { return id < 0 ? json_null() : json_integer((json_int_t)id); }

static json_t *jtoken(const hf_src *s, int64_t id) { return id < 0 ? json_null() : json_string(s->spell[id]); }

/* json_pack's result, or an out-of-memory error. */
static pt_status packed(json_t *j, json_t **out)
{
    *out = j;
    return j ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
}

/* Add the keys of extra (consumed) to o. */
static pt_status merge_into(json_t *o, json_t *extra)
{
    int rc = extra ? json_object_update(o, extra) : -1;
    json_decref(extra);
    return rc ? ERR(PT_ERR_NOMEM, "out of memory") : PT_OK;
}

/* ---- config.json ---- */

/* Llama 3's rope_scaling whose factors equal the rope_freqs tensor (Llama 3.1/3.2 use factor 8 or
 * 32, low 1, high 4, original context 8192). */
static pt_status rope_llama3(const hf_src *s, const gguf_tensor *t, json_t **out)
{
    const pt_model_config *c = s->cfg;
    int half = c->head_dim / 2;
    if (t->dtype != PT_F32 || t->n_dims != 1 || t->dims[0] != (uint64_t)half)
        return ERR(PT_ERR_USER, "%s: rope_freqs.weight must be %d f32 values", shown_text(s->f->path).s, half);
    const float *fac = t->data;
    float top = 1.0f, base[512], scaled[512];
    for (int i = 0; i < half; i++) top = fac[i] > top ? fac[i] : top;
    pt_rope_scaling sc = {.type = PT_ROPE_LLAMA3, .factor = top, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                          .original_max_position_embeddings = 8192.0};
    TRY(rope_inv_freq(c->rope_theta, c->head_dim, NULL, base));
    TRY(rope_inv_freq(c->rope_theta, c->head_dim, &sc, scaled));
    for (int i = 0; i < half; i++)
        if (fabs(base[i] / scaled[i] - fac[i]) > 1e-4 * fac[i])
            return ERR(PT_ERR_USER, "%s: the rope_freqs.weight tensor (per-frequency rope scaling) is not Llama 3's "
                       "rope_scaling with factor %g, low_freq_factor 1, high_freq_factor 4 and "
                       "original_max_position_embeddings 8192 (frequency %d: %g, expected %g); exporting other "
                       "rope_freqs to a Hugging Face config.json is not supported yet",
                       shown_text(s->f->path).s, top, i, fac[i], base[i] / scaled[i]);
    return packed(json_pack("{s:s, s:o, s:f, s:f, s:i}", "rope_type", "llama3", "factor", jreal(top),
                            "low_freq_factor", 1.0, "high_freq_factor", 4.0, "original_max_position_embeddings", 8192),
                  out);
}

/* <arch>.rope.scaling.type: none, or linear with its factor. */
static pt_status rope_keys(const hf_src *s, json_t **out)
{
    char key[128];
    gguf_str type = {"none", 4};
    float factor = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch_name(s->cfg->arch));
    TRY(gguf_opt_str(s->f, key, &type));
    if (gguf_str_eq(type, "none")) return PT_OK;
    if (!gguf_str_eq(type, "linear"))
        return ERR(PT_ERR_USER, "%s: %s \"%s\": exporting this rope scaling to config.json is not supported (ptrain exports "
                   "linear scaling and Llama 3's rope_freqs)", shown_text(s->f->path).s, shown_text(key).s,
                   shown_bytes(type.data, type.len).s);
    snprintf(key, sizeof key, "%s.rope.scaling.factor", arch_name(s->cfg->arch));
    TRY(gguf_opt_f32(s->f, key, &factor));
    if (!(factor > 0.0f) || factor == 1.0f) return PT_OK; /* ptrain applies no scaling either */
    return packed(json_pack("{s:s, s:o}", "rope_type", "linear", "factor", jreal(factor)), out);
}

/* A rope_factors_* tensor of the file as a JSON list (rope.dimension_count / 2 f32 values). */
static pt_status factor_list(const hf_src *s, const gguf_tensor *t, json_t **out)
{
    int pairs = model_rope_dim(s->cfg) / 2;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 63 ? t->name.len : 63), t->name.data);
    if (t->dtype != PT_F32 || t->n_dims != 1 || t->dims[0] != (uint64_t)pairs)
        return ERR(PT_ERR_USER, "%s: %s must be %d f32 values", shown_text(s->f->path).s, name, pairs);
    json_t *a = json_array();
    for (int i = 0; a && i < pairs; i++)
        if (json_array_append_new(a, jreal(((const float *)t->data)[i])))
            return json_decref(a), ERR(PT_ERR_NOMEM, "out of memory");
    return packed(a, out);
}

/* Phi-3's LongRoPE from its factor tensors, attention factor and original context (transformers' names). */
static pt_status rope_longrope(const hf_src *s, const gguf_tensor *lf, const gguf_tensor *sf, json_t **out)
{
    json_t *l = NULL, *sh = NULL;
    TRY(factor_list(s, lf, &l));
    pt_status st = factor_list(s, sf, &sh);
    if (st != PT_OK) return json_decref(l), st;
    return packed(json_pack("{s:s, s:o, s:o, s:o, s:i}", "type", "longrope", "long_factor", l, "short_factor", sh,
                            "attention_factor", jreal(model_rope_mscale(s->cfg)), "original_max_position_embeddings",
                            s->cfg->rope_short_max), out);
}

/* rope_scaling: null, linear, llama3 or (phi3) longrope. */
static pt_status rope_scaling(const hf_src *s, json_t **out)
{
    *out = NULL;
    const gguf_tensor *lf = gguf_find_tensor(s->f, "rope_factors_long.weight");
    const gguf_tensor *sf = gguf_find_tensor(s->f, "rope_factors_short.weight");
    if (sf && !lf)
        return ERR(PT_ERR_USER, "%s: rope_factors_short.weight without rope_factors_long.weight: LongRoPE needs both",
                   shown_text(s->f->path).s);
    if (sf) return rope_longrope(s, lf, sf, out);
    const gguf_tensor *freqs = gguf_find_tensor(s->f, "rope_freqs.weight");
    TRY(rope_keys(s, out));
    if (freqs && *out) {
        json_decref(*out);
        return ERR(PT_ERR_USER, "%s: both a rope_freqs tensor and linear rope scaling: not supported",
                   shown_text(s->f->path).s);
    }
    if (freqs) TRY(rope_llama3(s, freqs, out));
    if (!*out) *out = json_null();
    return PT_OK;
}

static json_t *config_common(const hf_src *s, const char *cls, const char *type, const char *dtype)
{
    const pt_model_config *c = s->cfg;
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:o, s:i, s:i, s:b, s:o, s:o, s:s, s:b}",
                     "architectures", cls, "model_type", type, "hidden_size", c->dim, "intermediate_size", c->ffn_dim,
                     "num_hidden_layers", c->n_layers, "num_attention_heads", c->n_heads, "num_key_value_heads",
                     c->n_kv_heads, "head_dim", c->head_dim, "rms_norm_eps", jreal(c->norm_eps), "rope_theta",
                     jreal(c->rope_theta), "max_position_embeddings", c->ctx_len, "vocab_size", c->vocab,
                     "tie_word_embeddings", c->tied_embeddings, "bos_token_id", jid(s->bos), "eos_token_id",
                     jid(s->eos), "torch_dtype", dtype, "use_cache", 1);
}

/* Gemma 2's attention scalar: query_pre_attn_scalar = 1/scale^2 (an integer in every release). */
static json_t *gemma2_scalar(const pt_model_config *c)
{
    double v = 1.0 / ((double)c->attn_scale * c->attn_scale);
    return fabs(v - round(v)) < 1e-3 * v ? json_integer((json_int_t)llround(v)) : json_real(v);
}

static json_t *gemma2_layers(const pt_model_config *c)
{
    json_t *a = json_array();
    for (int l = 0; a && l < c->n_layers; l++)
        if (json_array_append_new(a, json_string(model_layer_window(c, l) ? "sliding_attention" : "full_attention")))
            return json_decref(a), NULL;
    return a;
}

static json_t *config_gemma2(const pt_model_config *c)
{
    json_t *attn = c->attn_softcap > 0 ? jreal(c->attn_softcap) : json_null();
    json_t *final = c->final_softcap > 0 ? jreal(c->final_softcap) : json_null();
    json_t *window = c->sliding_window > 0 ? json_integer(c->sliding_window) : json_null();
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:b}", "hidden_act", "gelu_pytorch_tanh", "hidden_activation",
                     "gelu_pytorch_tanh", "query_pre_attn_scalar", gemma2_scalar(c), "attn_logit_softcapping", attn,
                     "final_logit_softcapping", final, "sliding_window", window, "layer_types", gemma2_layers(c),
                     "attention_bias", 0);
}

/* SmolLM3's no_rope_layers: 1 where a layer uses RoPE; its pad token (transformers' default, 128004,
 * is outside a smaller vocabulary). */
static json_t *config_smollm3(const hf_src *s)
{
    const pt_model_config *c = s->cfg;
    json_t *a = json_array();
    for (int l = 0; a && l < c->n_layers; l++)
        if (json_array_append_new(a, json_integer(model_layer_rope(c, l) ? 1 : 0))) return json_decref(a), NULL;
    return json_pack("{s:o, s:i, s:b, s:o}", "no_rope_layers", a, "no_rope_layer_interval",
                     c->nope_period > 0 ? c->nope_period : 4, "use_sliding_window", 0, "pad_token_id", jid(s->pad));
}

/* Granite's multipliers (a file without them: llama.cpp's 1 and 1/sqrt(head size)). */
static json_t *config_granite(const pt_model_config *c)
{
    double one = 1.0;
    return json_pack("{s:o, s:o, s:o, s:o}", "embedding_multiplier", jreal(c->embed_scale > 0 ? c->embed_scale : one),
                     "attention_multiplier", jreal(c->attn_scale > 0 ? c->attn_scale : 1.0 / sqrt(c->head_dim)),
                     "residual_multiplier", jreal(c->residual_scale > 0 ? c->residual_scale : one),
                     "logits_scaling", jreal(c->logit_scale > 0 ? c->logit_scale : one));
}

/* Gemma 3 as llama.cpp runs a gemma3 file: every sixth layer global, local layers on base 10000;
 * rope_scaling (the global layers') is config_json's. */
static json_t *config_gemma3(const pt_model_config *c)
{
    json_t *window = c->sliding_window > 0 ? json_integer(c->sliding_window) : json_null();
    return json_pack("{s:s, s:o, s:n, s:n, s:o, s:o, s:o, s:b}", "hidden_activation", "gelu_pytorch_tanh",
                     "query_pre_attn_scalar", gemma2_scalar(c), "attn_logit_softcapping", "final_logit_softcapping",
                     "sliding_window", window, "layer_types", gemma2_layers(c), "rope_local_base_freq",
                     jreal(c->rope_theta_local > 0 ? c->rope_theta_local : 10000.0f), "attention_bias", 0);
}

/* Phi-3's partial rotary factor (rope.dimension_count of the head size), its window on every layer and the file's
 * pad token (Phi3Config's default, 32000, is outside a smaller vocabulary). */
static json_t *config_phi3(const hf_src *s)
{
    const pt_model_config *c = s->cfg;
    json_t *window = c->sliding_window > 0 ? json_integer(c->sliding_window) : json_null();
    return json_pack("{s:o, s:o, s:i, s:o}", "partial_rotary_factor",
                     json_real((double)model_rope_dim(c) / (double)c->head_dim), "sliding_window", window,
                     "original_max_position_embeddings", c->rope_short_max > 0 ? c->rope_short_max : c->ctx_len,
                     "pad_token_id", jid(s->pad));
}

/* OLMo 3 (an olmo2 file with a window): its layer_types and transformers 5's rope per layer type, the full layers'
 * with the scaling (rope, when an object), the sliding ones' on their base unscaled. */
static json_t *config_olmo3(const pt_model_config *c, const json_t *rope)
{
    json_t *full = json_is_object(rope) ? json_deep_copy(rope) : json_pack("{s:s}", "rope_type", "default");
    if (!full || json_object_set_new(full, "rope_theta", jreal(c->rope_theta))) return json_decref(full), NULL;
    return json_pack("{s:i, s:o, s:{s:o, s:{s:s, s:o}}}", "sliding_window", c->sliding_window, "layer_types",
                     gemma2_layers(c), "rope_parameters", "full_attention", full, "sliding_attention", "rope_type",
                     "default", "rope_theta", jreal(c->rope_theta_local));
}

static pt_status config_json(const hf_src *s, const char *dtype, json_t **out)
{
    bool olmo3 = s->cfg->arch == PT_ARCH_OLMO2 && s->cfg->sliding_window > 0;
    const pt_arch_hf_type *type = &arch_info(s->cfg->arch)->hf[olmo3 ? 1 : 0];
    bool qwen2 = s->cfg->arch == PT_ARCH_QWEN2, gemma2 = s->cfg->arch == PT_ARCH_GEMMA2;
    bool gemma3 = s->cfg->arch == PT_ARCH_GEMMA3;
    json_t *rope;
    TRY(rope_scaling(s, &rope));
    pt_status st = packed(config_common(s, type->class_name, type->model_type, dtype), out);
    if (st == PT_OK && json_object_set_new(*out, "rope_scaling", rope)) st = ERR(PT_ERR_NOMEM, "out of memory");
    else if (st != PT_OK) json_decref(rope);
    if (st == PT_OK && gemma2) st = merge_into(*out, config_gemma2(s->cfg));
    if (st == PT_OK && qwen2) st = merge_into(*out, json_pack("{s:s, s:b}", "hidden_act", "silu", "use_sliding_window", 0));
    if (st == PT_OK && gemma3) st = merge_into(*out, config_gemma3(s->cfg));
    if (st == PT_OK && !qwen2 && !gemma2 && !gemma3)
        st = merge_into(*out, json_pack("{s:s, s:b, s:b}", "hidden_act", "silu", "attention_bias", 0, "mlp_bias", 0));
    if (st == PT_OK && s->cfg->arch == PT_ARCH_SMOLLM3) st = merge_into(*out, config_smollm3(s));
    if (st == PT_OK && s->cfg->arch == PT_ARCH_GRANITE) st = merge_into(*out, config_granite(s->cfg));
    if (st == PT_OK && s->cfg->arch == PT_ARCH_PHI3) st = merge_into(*out, config_phi3(s));
    if (st == PT_OK && olmo3) st = merge_into(*out, config_olmo3(s->cfg, json_object_get(*out, "rope_scaling")));
    return st;
}

/* ---- tokenizer.json: merges ---- */

/* The file's merges ("left right") as [left, right] pairs. */
static pt_status merges_gpt2(const hf_src *s, json_t **out)
{
    const gguf_kv *m;
    TRY(gguf_get_array(s->f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &m));
    TRY(packed(json_array(), out));
    for (uint64_t i = 0; i < m->count; i++) {
        gguf_str g = gguf_array_str(m, i);
        const char *sp = memchr(g.data, ' ', g.len);
        if (!sp || sp == g.data || sp + 1 == g.data + g.len || memchr(sp + 1, ' ', (size_t)(g.data + g.len - sp - 1)))
            return ERR(PT_ERR_USER, "%s: tokenizer.ggml.merges[%llu]: expected \"left right\"",
                       shown_text(s->f->path).s, (unsigned long long)i);
        json_t *pair = json_pack("[s%, s%]", g.data, (size_t)(sp - g.data), sp + 1, (size_t)(g.data + g.len - sp - 1));
        if (json_array_append_new(*out, pair)) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* A SentencePiece vocabulary's merges, as ptrain's tokenizer rebuilds them from the scores (the
 * way transformers does; Gemma by file order), as [left, right] spellings. */
static pt_status merges_spm(const hf_src *s, json_t **out)
{
    pt_tokenizer *tok = NULL;
    int32_t *pairs = NULL;
    size_t n = 0;
    pt_status st = tokenizer_from_gguf(s->f, &tok);
    if (st == PT_OK) st = tokenizer_merge_pairs(tok, &pairs, &n);
    if (st == PT_OK) st = packed(json_array(), out);
    for (size_t i = 0; st == PT_OK && i < n; i++)
        if ((uint64_t)pairs[2 * i] >= s->n || (uint64_t)pairs[2 * i + 1] >= s->n ||
            json_array_append_new(*out, json_pack("[s, s]", s->spell[pairs[2 * i]], s->spell[pairs[2 * i + 1]])))
            st = ERR(PT_ERR_NOMEM, "out of memory");
    free(pairs);
    tokenizer_free(tok);
    return st;
}

/* ---- tokenizer.json: the pipeline ---- */

static json_t *bytelevel_step(bool use_regex)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                     "use_regex", use_regex);
}

static json_t *split_step(const char *regex)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", regex, "behavior", "Isolated",
                     "invert", 0);
}

/* Byte-level: a Split per regex, then ByteLevel (GPT-2's own form when there are no regexes; the
 * Digits step of StarCoder's and SmolLM2's files for a lone \p{N}). */
static json_t *pre_tokenizer(const hf_src *s)
{
    if (s->spm) return json_null();
    if (!s->pre_res[0]) return bytelevel_step(s->pre_bytelevel_regex);
    json_t *steps = json_array();
    if (s->pre_res[1] == NULL && strcmp(s->pre_res[0], "\\p{N}") == 0) {
        if (json_array_append_new(steps, json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", 1)))
            return json_decref(steps), NULL;
    } else {
        for (const char *const *re = s->pre_res; steps && *re; re++)
            if (json_array_append_new(steps, split_step(*re))) return json_decref(steps), NULL;
    }
    if (!steps || json_array_append_new(steps, bytelevel_step(s->pre_bytelevel_regex)))
        return json_decref(steps), NULL;
    return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", steps);
}

/* SentencePiece: spaces become "▁", and with the dummy prefix a "▁" goes before each text between
 * special tokens (Llama 2's own normalizer; Metaspace "first" would drop it before a leading
 * space). */
static json_t *normalizer(const hf_src *s)
{
    if (!s->spm) return json_null();
    json_t *replace = json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ", "content", SPM_SPACE);
    if (!s->prefix || !replace) return replace;
    return json_pack("{s:s, s:[{s:s, s:s}, o]}", "type", "Sequence", "normalizers", "type", "Prepend", "prepend",
                     SPM_SPACE, replace);
}

static json_t *decoder(const hf_src *s)
{
    if (!s->spm) return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1,
                                  "use_regex", 1);
    json_t *steps = json_pack("[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]", "type", "Replace", "pattern", "String", SPM_SPACE,
                              "content", " ", "type", "ByteFallback", "type", "Fuse");
    if (steps && s->prefix &&
        json_array_append_new(steps, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1,
                                               "stop", 0)))
        return json_decref(steps), NULL;
    return json_pack("{s:s, s:o}", "type", "Sequence", "decoders", steps);
}

/* One item of a TemplateProcessing template. */
static json_t *tp_item(const char *special, const char *seq, int type_id)
{
    if (special) return json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", special, "type_id", type_id);
    return json_pack("{s:{s:s, s:i}}", "Sequence", "id", seq, "type_id", type_id);
}

/* bos before and/or eos after each sequence, as the file asks. */
static json_t *tp_template(const hf_src *s, bool pair)
{
    const char *bos = s->add_bos && s->bos >= 0 ? s->spell[s->bos] : NULL;
    const char *eos = s->add_eos && s->eos >= 0 ? s->spell[s->eos] : NULL;
    json_t *a = json_array();
    for (int k = 0; a && k < (pair ? 2 : 1); k++) {
        int bad = bos ? json_array_append_new(a, tp_item(bos, NULL, k)) : 0;
        bad |= json_array_append_new(a, tp_item(NULL, k ? "B" : "A", k));
        bad |= eos ? json_array_append_new(a, tp_item(eos, NULL, k)) : 0;
        if (bad) return json_decref(a), NULL;
    }
    return a;
}

static json_t *post_processor(const hf_src *s)
{
    bool bos = s->add_bos && s->bos >= 0, eos = s->add_eos && s->eos >= 0;
    if (!bos && !eos) return json_null();
    json_t *special = json_object();
    for (int k = 0; k < 2 && special; k++) {
        int64_t id = k ? s->eos : s->bos;
        if (!(k ? eos : bos)) continue;
        const char *t = s->spell[id];
        if (json_object_set_new(special, t, json_pack("{s:s, s:[I], s:[s]}", "id", t, "ids", (json_int_t)id, "tokens", t)))
            return json_decref(special), NULL;
    }
    return json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", tp_template(s, false), "pair",
                     tp_template(s, true), "special_tokens", special);
}

/* ---- tokenizer.json: added tokens ---- */

/* Whether token i is an added token, and *special whether a special one (as ptrain adds them). */
static bool is_added(const hf_src *s, uint64_t i, bool *special)
{
    int64_t type = token_type(s, i);
    gguf_str t = gguf_array_str(s->tokens, i);
    if (!s->spm) {
        *special = type == TT_CONTROL;
        return t.len && (type == TT_USER_DEFINED || (type == TT_CONTROL && is_byte_spelled(t.data, t.len)));
    }
    int64_t id = (int64_t)i;
    *special = type == TT_CONTROL || id == s->bos || id == s->eos || id == s->unk || id == s->pad;
    return *special || type == TT_USER_DEFINED;
}

static json_t *added_token(const hf_src *s, uint64_t i, bool special)
{
    gguf_str t = gguf_array_str(s->tokens, i);
    json_t *content = s->spm ? json_string(s->spell[i]) : json_stringn(t.data, t.len);
    return json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i, "content", content, "single_word", 0,
                     "lstrip", 0, "rstrip", 0, "normalized", 0, "special", special);
}

static pt_status added_tokens(const hf_src *s, json_t **out)
{
    TRY(packed(json_array(), out));
    for (uint64_t i = 0; i < s->n; i++) {
        bool special;
        if (!is_added(s, i, &special)) continue;
        json_t *a = added_token(s, i, special);
        if (!a && !s->spm)
            return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens[%llu]: an added token that is not valid UTF-8",
                       shown_text(s->f->path).s, (unsigned long long)i);
        if (json_array_append_new(*out, a)) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

static json_t *bpe_model(const hf_src *s, json_t *merges)
{
    json_t *unk = s->spm ? jtoken(s, s->unk) : json_null();
    return json_pack("{s:s, s:n, s:o, s:n, s:n, s:b, s:b, s:b, s:O, s:o}", "type", "BPE", "dropout", "unk_token", unk,
                     "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", s->spm, "byte_fallback",
                     s->byte_fallback, "ignore_merges", !s->spm && s->pre_ignore_merges, "vocab", s->vocab, "merges",
                     merges);
}

static pt_status tokenizer_json(const hf_src *s, json_t **out)
{
    json_t *merges = NULL, *added = NULL;
    pt_status st = s->spm ? merges_spm(s, &merges) : merges_gpt2(s, &merges);
    if (st == PT_OK) st = added_tokens(s, &added);
    if (st != PT_OK) {
        json_decref(merges);
        json_decref(added);
        return st;
    }
    return packed(json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation", "padding",
                            "added_tokens", added, "normalizer", normalizer(s), "pre_tokenizer", pre_tokenizer(s),
                            "post_processor", post_processor(s), "decoder", decoder(s), "model",
                            bpe_model(s, merges)),
                  out);
}

/* ---- the small files ---- */

/* bos/eos (and unk/pad when the file has them) into o, as their texts. */
static pt_status special_texts(const hf_src *s, json_t *o)
{
    const char *keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    int64_t ids[] = {s->bos, s->eos, s->unk, s->pad};
    for (int k = 0; k < 4; k++)
        if ((ids[k] >= 0 || k < 2) && json_object_set_new(o, keys[k], jtoken(s, ids[k])))
            return ERR(PT_ERR_NOMEM, "out of memory");
    return PT_OK;
}

static pt_status tokenizer_config_json(const hf_src *s, json_t **out)
{
    gguf_str tmpl = {NULL, 0};
    TRY(gguf_opt_str(s->f, "tokenizer.chat_template", &tmpl));
    TRY(packed(json_pack("{s:b, s:b}", "add_bos_token", s->add_bos, "add_eos_token", s->add_eos), out));
    TRY(special_texts(s, *out));
    TRY(merge_into(*out, json_pack("{s:b, s:i, s:s}", "clean_up_tokenization_spaces", 0, "model_max_length",
                                   s->cfg->ctx_len, "tokenizer_class", "PreTrainedTokenizerFast")));
    if (tmpl.data && json_object_set_new(*out, "chat_template", json_stringn(tmpl.data, tmpl.len)))
        return ERR(PT_ERR_USER, "%s: tokenizer.chat_template is not valid UTF-8", shown_text(s->f->path).s);
    return PT_OK;
}

static pt_status special_map_json(const hf_src *s, json_t **out)
{
    TRY(packed(json_object(), out));
    return special_texts(s, *out);
}

static pt_status generation_json(const hf_src *s, json_t **out)
{
    return packed(json_pack("{s:o, s:o}", "bos_token_id", jid(s->bos), "eos_token_id", jid(s->eos)), out);
}

/* ---- writing ---- */

enum { F_CONFIG, F_GENERATION, F_TOKENIZER, F_TOKENIZER_CONFIG, F_SPECIAL_MAP, N_FILES };

static const char *const file_names[N_FILES] = {"config.json", "generation_config.json", "tokenizer.json",
                                                "tokenizer_config.json", "special_tokens_map.json"};

static pt_status write_json(const char *dir, const char *name, const json_t *j)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return ERR(PT_ERR_USER, "%s: the output directory's name is too long", shown_text(dir).s);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    TRY_ALLOC(text);
    size_t n = strlen(text);
    char *grown = realloc(text, n + 2);
    if (!grown) free(text);
    TRY_ALLOC(grown);
    grown[n] = '\n';
    pt_status st = fw_write_file(path, grown, n + 1);
    free(grown);
    return st;
}

static pt_status build_all(const hf_src *s, const char *dtype, json_t *files[N_FILES])
{
    TRY(config_json(s, dtype, &files[F_CONFIG]));
    TRY(generation_json(s, &files[F_GENERATION]));
    TRY(tokenizer_json(s, &files[F_TOKENIZER]));
    TRY(tokenizer_config_json(s, &files[F_TOKENIZER_CONFIG]));
    return special_map_json(s, &files[F_SPECIAL_MAP]);
}

pt_status hf_meta_from_gguf(const gguf_file *f, const pt_model_config *cfg, const char *dir, const char *torch_dtype)
{
    if (!torch_dtype || (strcmp(torch_dtype, "bfloat16") && strcmp(torch_dtype, "float16") && strcmp(torch_dtype, "float32")))
        return ERR(PT_ERR_USER, "torch_dtype \"%s\": expected bfloat16, float16 or float32",
                   torch_dtype ? shown_text(torch_dtype).s : "(none)");
    hf_src s = {.f = f, .cfg = cfg, .bos = -1, .eos = -1, .unk = -1, .pad = -1};
    json_t *files[N_FILES] = {0};
    pt_status st = src_init(&s);
    if (st == PT_OK) st = build_all(&s, torch_dtype, files);
    for (int i = 0; i < N_FILES && st == PT_OK; i++) st = write_json(dir, file_names[i], files[i]);
    for (int i = 0; i < N_FILES; i++) json_decref(files[i]);
    src_free(&s);
    return st;
}
