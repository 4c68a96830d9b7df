/* gguf_meta.c — the GGUF key/values llama.cpp needs for a Hugging Face model directory, written
 * the way llama.cpp's convert_hf_to_gguf.py writes them (see gguf_meta.h).
 *
 * Hyperparameters come from the parsed config.json (hf_config). The tokenizer is read twice:
 * through ptrain's own tokenizer (tokenizer_from_hf_dir), which checks the files are a tokenizer
 * ptrain runs and settles bos/eos, add_bos/add_eos and the chat template as transformers does;
 * and as raw JSON, for what the GGUF lists: every spelling by id (padded to vocab_size with
 * [PADn] like the converter), token types, merges (byte-level) or scores (SentencePiece).
 *
 * llama.cpp does not run a tokenizer.json's pre-tokenizer: it runs one of its own, picked by the
 * name in tokenizer.ggml.pre. The name is chosen here by matching the tokenizer.json's steps and
 * Split regex against the ones llama.cpp implements (ptrain's src/tokenizer/tok_impl.h holds the
 * same regexes); anything else is refused rather than exported to tokenize differently.
 * SentencePiece-style BPE (Metaspace, byte fallback) becomes llama.cpp's "llama" vocabulary: it
 * merges the adjacent pair whose merged token scores highest, so a token's score is minus the
 * rank of the first merge that makes it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/jsonfile.h"
#include "ptrain/gguf_meta.h"
#include "ptrain/model_io.h"
#include "ptrain/tokenizer.h"

/* llama.cpp's token types (llama_token_type) */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

#define SPM_SPACE "\xe2\x96\x81" /* ▁ */

/* The Split regexes llama.cpp knows by pre-tokenizer name (as in HF's tokenizer.json files). */
static const struct {
    const char *regex, *pre, *family;
} split_pres[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "llama-bpe", "Llama 3"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen2", "Qwen2"},
};
#define N_SPLIT_PRES (sizeof split_pres / sizeof split_pres[0])
#define KNOWN_PRES "gpt-2 (a ByteLevel step alone), smollm (individual Digits, then ByteLevel), llama-bpe " \
                   "(Llama 3's Split regex), qwen2 (Qwen2's Split regex)"

typedef struct {
    const char *dir;
    char tj_path[4200];     /* tokenizer.json, for messages */
    json_t *tj, *tc, *cj;   /* tokenizer.json; tokenizer_config.json, config.json (NULL when absent) */
    const json_t *vocab;    /* tj.model.vocab */
    pt_tokenizer *tok;      /* ptrain's reading of the same files */
    bool spm;               /* SentencePiece-style BPE (else byte-level) */
    size_t n;               /* vocab_size: the number of tokens written */
    const char **text;      /* n spellings */
    char **own;             /* n spellings made here (pads, respelled tokens), else NULL */
    int32_t *type;
    float *score;           /* SentencePiece only */
} meta_ctx;

/* ---- hyperparameters ---- */

static pt_status put_u32(gguf_writer *w, const char *arch, const char *suffix, int v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_w_u32(w, key, (uint32_t)v);
}

static pt_status put_f32(gguf_writer *w, const char *arch, const char *suffix, double v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_w_f32(w, key, (float)v);
}

static pt_status general(gguf_writer *w, const char *dir, const hf_config *hc, const char *name)
{
    TRY(gguf_w_str(w, "general.architecture", arch_gguf_name(hc->cfg.arch)));
    if (name && *name) return gguf_w_str(w, "general.name", name);
    char base[1024];
    snprintf(base, sizeof base, "%s", dir);
    size_t len = strlen(base);
    while (len > 1 && base[len - 1] == '/') base[--len] = '\0';
    const char *slash = strrchr(base, '/');
    return gguf_w_str(w, "general.name", slash && slash[1] ? slash + 1 : base);
}

static pt_status sizes(gguf_writer *w, const pt_model_config *c)
{
    const char *a = arch_gguf_name(c->arch);
    TRY(put_u32(w, a, "context_length", c->ctx_len));
    TRY(put_u32(w, a, "embedding_length", c->dim));
    TRY(put_u32(w, a, "block_count", c->n_layers));
    TRY(put_u32(w, a, "feed_forward_length", c->ffn_dim));
    TRY(put_u32(w, a, "attention.head_count", c->n_heads));
    TRY(put_u32(w, a, "attention.head_count_kv", c->n_kv_heads));
    TRY(put_u32(w, a, "attention.key_length", c->head_dim));
    TRY(put_u32(w, a, "attention.value_length", c->head_dim));
    TRY(put_f32(w, a, "attention.layer_norm_rms_epsilon", c->norm_eps));
    return put_u32(w, a, "vocab_size", c->vocab);
}

/* YaRN as llama.cpp's converter writes it: type, factor, original context, the betas when given, and
 * attn_factor when the attention factor is not the default 1 + 0.1 ln factor (llama.cpp multiplies the
 * two). truncate false has no key. */
static pt_status rope_yarn(gguf_writer *w, const hf_config *hc)
{
    const pt_rope_scaling *s = &hc->rope;
    const char *a = arch_gguf_name(hc->cfg.arch);
    if (s->no_truncate)
        return ERR(PT_ERR_USER, "rope scaling yarn with truncate false: llama.cpp's YaRN always rounds the ramp's "
                   "ends, so this model cannot be exported to GGUF as it runs; export the merged Hugging Face model");
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    TRY(gguf_w_str(w, key, "yarn"));
    TRY(put_f32(w, a, "rope.scaling.factor", s->factor));
    TRY(put_u32(w, a, "rope.scaling.original_context_length", (int)s->original_max_position_embeddings));
    if (s->beta_fast > 0) TRY(put_f32(w, a, "rope.scaling.yarn_beta_fast", s->beta_fast));
    if (s->beta_slow > 0) TRY(put_f32(w, a, "rope.scaling.yarn_beta_slow", s->beta_slow));
    if (arch_info(hc->cfg.arch)->gguf_q_temperature && s->mscale_all_dim > 0) { /* llama.cpp's mistral3 */
        double want = rope_yarn_attention(s->factor, 1.0, s->mscale_all_dim);
        if (fabs(s->attention_factor - want) > 1e-7 * want)
            return ERR(PT_ERR_USER, "rope scaling yarn with attention factor %g: llama.cpp's mistral3 derives it "
                       "from yarn_log_multiplier (mscale_all_dim %g) as %g, taking mscale as 1; export the merged "
                       "Hugging Face model", s->attention_factor, s->mscale_all_dim, want);
        return put_f32(w, a, "rope.scaling.yarn_log_multiplier", s->mscale_all_dim);
    }
    double attn = s->attention_factor / rope_yarn_attention(s->factor, 0.0, 0.0);
    return fabs(attn - 1.0) > 1e-7 ? put_f32(w, a, "rope.scaling.attn_factor", attn) : PT_OK;
}

/* Llama 3's scaling is not a key: llama.cpp reads it from the rope_freqs.weight tensor. The rotated
 * values of a head: all, or phi3's partial_rotary_factor of them. */
static pt_status rope(gguf_writer *w, const hf_config *hc)
{
    const char *a = arch_gguf_name(hc->cfg.arch);
    bool q_temp = arch_info(hc->cfg.arch)->gguf_q_temperature;
    if (hc->cfg.q_temp_beta != 0.0f && !q_temp)
        return ERR(PT_ERR_USER, "Ministral 3's query temperature (llama_4_scaling_beta %g) has no key in the %s "
                   "architecture: export the merged Hugging Face model (--hf) instead", hc->cfg.q_temp_beta, a);
    if (hc->cfg.q_temp_beta != 0.0f && !(hc->rope.type == PT_ROPE_YARN &&
                                         (int)hc->rope.original_max_position_embeddings == hc->cfg.q_temp_period))
        return ERR(PT_ERR_USER, "a query temperature over %d positions without YaRN over as many: llama.cpp's %s "
                   "takes the temperature's period from rope.scaling.original_context_length; export the merged "
                   "Hugging Face model (--hf) instead", hc->cfg.q_temp_period, a);
    if (hc->cfg.q_temp_beta != 0.0f) TRY(put_f32(w, a, "attention.temperature_scale", hc->cfg.q_temp_beta));
    TRY(put_f32(w, a, "rope.freq_base", hc->rope_theta));
    TRY(put_u32(w, a, "rope.dimension_count", model_rope_dim(&hc->cfg)));
    if (hc->rope.type == PT_ROPE_LONGROPE) { /* phi3: the factors are tensors (merged_gguf.c) */
        TRY(put_f32(w, a, "rope.scaling.attn_factor", model_rope_mscale(&hc->cfg)));
        return put_u32(w, a, "rope.scaling.original_context_length", hc->cfg.rope_short_max);
    }
    if (hc->rope.type == PT_ROPE_YARN) return rope_yarn(w, hc);
    if (hc->rope.type != PT_ROPE_LINEAR) return PT_OK;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    TRY(gguf_w_str(w, key, "linear"));
    return put_f32(w, a, "rope.scaling.factor", hc->rope.factor);
}

/* llama.cpp's gemma2 scales scores by 1/sqrt(head size), or 1/sqrt(dim/heads) for the 46-layer
 * 27B: no key sets it, so another query_pre_attn_scalar cannot be exported. */
static pt_status gemma2_scale(const char *dir, const pt_model_config *c)
{
    double size = c->n_layers == 46 ? (double)c->dim / c->n_heads : (double)c->head_dim;
    double want = 1.0 / sqrt(size), scalar = 1.0 / ((double)c->attn_scale * c->attn_scale);
    if (fabs(c->attn_scale - want) <= 1e-6 * want) return PT_OK;
    return ERR(PT_ERR_USER, "%s/config.json: query_pre_attn_scalar %g; llama.cpp's gemma2 scales attention by "
               "1/sqrt(%g) and no GGUF key changes it, so the model cannot be exported to GGUF as it runs in "
               "transformers", shown_text(dir).s, scalar, size);
}

/* llama.cpp's gemma2 always soft-caps and always has local layers: a config that turns either
 * off cannot be said in its keys. */
static pt_status gemma2(gguf_writer *w, const char *dir, const pt_model_config *c)
{
    TRY(gemma2_scale(dir, c));
    if (c->attn_softcap <= 0 || c->final_softcap <= 0 || c->sliding_window <= 0)
        return ERR(PT_ERR_USER, "%s/config.json: %s is null; llama.cpp's gemma2 always uses it, so the model "
                   "cannot be exported to GGUF as it runs in transformers", shown_text(dir).s,
                   c->sliding_window <= 0 ? "sliding_window"
                   : c->attn_softcap <= 0 ? "attn_logit_softcapping" : "final_logit_softcapping");
    const char *a = arch_gguf_name(c->arch);
    TRY(put_u32(w, a, "attention.sliding_window", c->sliding_window));
    TRY(put_f32(w, a, "attn_logit_softcapping", c->attn_softcap));
    return put_f32(w, a, "final_logit_softcapping", c->final_softcap);
}

/* llama.cpp's smollm3 leaves RoPE out on every 4th layer and no key says otherwise. */
static pt_status smollm3(const char *dir, const pt_model_config *c)
{
    if (c->nope_period == 4) return PT_OK;
    char what[64];
    if (c->nope_period > 0) snprintf(what, sizeof what, "on layers l with (l + 1) %% %d == 0", c->nope_period);
    else snprintf(what, sizeof what, "on no layer");
    return ERR(PT_ERR_USER, "%s/config.json: no_rope_layers leaves RoPE out %s; llama.cpp's smollm3 leaves it out "
               "on every 4th layer and no GGUF key changes it, so the model cannot be exported to GGUF as it runs in "
               "transformers", shown_text(dir).s, what);
}

/* Granite's multipliers under llama.cpp's names; Granite 4.0 without RoPE (position_embedding_type other than
 * "rope") has no form in llama.cpp's granite, which rotates every layer. */
static pt_status granite(gguf_writer *w, const char *dir, const pt_model_config *c)
{
    const char *a = arch_gguf_name(c->arch);
    if (c->nope_period > 0)
        return ERR(PT_ERR_USER, "%s/config.json: position_embedding_type is not \"rope\", so no layer rotates q and k; "
                   "llama.cpp's granite rotates them on every layer and no GGUF key changes it, so the model cannot be "
                   "exported to GGUF as it runs in transformers", shown_text(dir).s);
    TRY(put_f32(w, a, "embedding_scale", c->embed_scale));
    TRY(put_f32(w, a, "attention.scale", c->attn_scale));
    TRY(put_f32(w, a, "residual_scale", c->residual_scale));
    return put_f32(w, a, "logit_scale", c->logit_scale);
}

/* llama.cpp's gemma3: scale 1/sqrt(head size) (1/sqrt(dim/heads) for the 62-layer 27B), no soft-caps,
 * every sixth layer global, local layers on rope base 10000 unscaled; only the window is a key. */
static pt_status gemma3(gguf_writer *w, const char *dir, const pt_model_config *c)
{
    double size = c->n_layers == 62 ? (double)c->dim / c->n_heads : (double)c->head_dim;
    double want = 1.0 / sqrt(size), scalar = 1.0 / ((double)c->attn_scale * c->attn_scale);
    const char *why = fabs(c->attn_scale - want) > 1e-6 * want ? "query_pre_attn_scalar"
                      : c->attn_softcap > 0 || c->final_softcap > 0 ? "a logit soft-cap"
                      : c->sliding_window <= 0 || c->sliding_period != 6 ? "the sliding window or layer_types"
                      : c->rope_theta_local != 10000.0f ? "rope_local_base_freq" : NULL;
    if (why)
        return ERR(PT_ERR_USER, "%s/config.json: %s (query_pre_attn_scalar %g, soft-caps %g / %g, window %d on 5 "
                   "of every %d layers, local rope base %g) differs from what llama.cpp's gemma3 fixes (scalar %g, "
                   "no soft-caps, a window on 5 of every 6 layers, local base 10000), so the model cannot be "
                   "exported to GGUF as it runs in transformers", shown_text(dir).s, why, scalar, c->attn_softcap,
                   c->final_softcap, c->sliding_window, c->sliding_period, c->rope_theta_local, size);
    return put_u32(w, arch_gguf_name(c->arch), "attention.sliding_window", c->sliding_window);
}

/* OLMo 3 as llama.cpp's olmo2 runs it when the window key is there: a window on every layer but every 4th, those
 * layers on the same base unscaled; only the window is a key (the converter's sliding_window_pattern is not read). */
static pt_status olmo3(gguf_writer *w, const char *dir, const pt_model_config *c)
{
    if (c->sliding_period == 4 && c->rope_theta_local == c->rope_theta)
        return put_u32(w, arch_gguf_name(c->arch), "attention.sliding_window", c->sliding_window);
    return ERR(PT_ERR_USER, "%s/config.json: full attention on every %d-th layer and the sliding layers on rope base %g "
               "(the full ones %g): llama.cpp's olmo2 fixes every 4th layer and one base, and no GGUF key changes "
               "them, so the model cannot be exported to GGUF as it runs in transformers", shown_text(dir).s,
               c->sliding_period, c->rope_theta_local, c->rope_theta);
}

static pt_status hparams(gguf_writer *w, const char *dir, const hf_config *hc, const char *name)
{
    TRY(general(w, dir, hc, name));
    TRY(sizes(w, &hc->cfg));
    TRY(rope(w, hc));
    if (hc->cfg.arch == PT_ARCH_SMOLLM3) TRY(smollm3(dir, &hc->cfg));
    if (arch_info(hc->cfg.arch)->multipliers) TRY(granite(w, dir, &hc->cfg));
    if (hc->cfg.arch == PT_ARCH_PHI3 && hc->cfg.sliding_window > 0) /* phi3's window, on every layer */
        TRY(put_u32(w, arch_gguf_name(hc->cfg.arch), "attention.sliding_window", hc->cfg.sliding_window));
    if (hc->cfg.arch == PT_ARCH_OLMO2 && hc->cfg.sliding_window > 0) TRY(olmo3(w, dir, &hc->cfg));
    if (hc->cfg.arch == PT_ARCH_GEMMA3) return gemma3(w, dir, &hc->cfg);
    return hc->cfg.arch == PT_ARCH_GEMMA2 ? gemma2(w, dir, &hc->cfg) : PT_OK;
}

/* ---- the files ---- */

/* dir/file as a JSON object into *out; NULL when the file is absent, except tokenizer.json, which
 * must be there. flags: JSON_DECODE_INT_AS_REAL for files whose integers are not read
 * (tokenizer_config.json's model_max_length is often 10^30, beyond jansson's integers). */
static pt_status json_file(const char *dir, const char *file, size_t flags, json_t **out)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    *out = NULL;
    if (strcmp(file, "tokenizer.json") && access(path, F_OK) != 0) return PT_OK;
    json_error_t e;
    *out = jsonfile_load(path, flags, &e);
    if (!*out)
        return ERR(PT_ERR_USER, "%s: does not parse as JSON: %s (line %d, column %d)", shown_text(path).s, e.text,
                   e.line, e.column);
    if (json_is_object(*out)) return PT_OK;
    json_decref(*out);
    *out = NULL;
    return ERR(PT_ERR_USER, "%s: expected a JSON object", shown_text(path).s);
}

static pt_status ctx_open(meta_ctx *m, const char *dir, const hf_config *hc)
{
    m->dir = dir;
    snprintf(m->tj_path, sizeof m->tj_path, "%s/tokenizer.json", dir);
    TRY(tokenizer_from_hf_dir(dir, &m->tok));
    m->spm = strcmp(tokenizer_kind(m->tok), "byte-level BPE") != 0;
    TRY(json_file(dir, "tokenizer.json", 0, &m->tj));
    TRY(json_file(dir, "tokenizer_config.json", JSON_DECODE_INT_AS_REAL, &m->tc));
    TRY(json_file(dir, "config.json", 0, &m->cj));
    m->vocab = json_object_get(json_object_get(m->tj, "model"), "vocab");
    m->n = (size_t)hc->cfg.vocab;
    m->text = calloc(m->n, sizeof *m->text);
    m->own = calloc(m->n, sizeof *m->own);
    m->type = calloc(m->n, sizeof *m->type);
    m->score = m->spm ? calloc(m->n, sizeof *m->score) : NULL;
    if (!m->text || !m->own || !m->type || (m->spm && !m->score)) return ERR(PT_ERR_NOMEM, "out of memory");
    return PT_OK;
}

static void ctx_free(meta_ctx *m)
{
    for (size_t i = 0; m->own && i < m->n; i++) free(m->own[i]);
    free(m->own);
    free(m->text);
    free(m->type);
    free(m->score);
    json_decref(m->tj);
    json_decref(m->tc);
    json_decref(m->cj);
    tokenizer_free(m->tok);
}

/* ---- the pre-tokenizer (byte-level) ---- */

typedef struct {
    int n_split, n_digits, n_bytelevel, n_other;
    const char *regex;      /* the Split's pattern.Regex (NULL: a String pattern) */
    const char *other;      /* the first step of another type */
    bool isolated, digits_individual, bl_regex, bl_prefix;
} pre_steps;

static void pre_step(const json_t *node, pre_steps *s, int depth)
{
    const char *type = json_string_value(json_object_get(node, "type"));
    size_t i;
    const json_t *sub;
    if (!type || depth > 8) return;
    if (!strcmp(type, "Sequence")) {
        json_array_foreach(json_object_get(node, "pretokenizers"), i, sub) pre_step(sub, s, depth + 1);
    } else if (!strcmp(type, "Split")) {
        s->n_split++;
        s->regex = json_string_value(json_object_get(json_object_get(node, "pattern"), "Regex"));
        const char *bh = json_string_value(json_object_get(node, "behavior"));
        s->isolated = bh && !strcmp(bh, "Isolated") && !json_is_true(json_object_get(node, "invert"));
    } else if (!strcmp(type, "Digits")) {
        s->n_digits++;
        s->digits_individual = json_is_true(json_object_get(node, "individual_digits"));
    } else if (!strcmp(type, "ByteLevel")) {
        s->n_bytelevel++;
        s->bl_regex = !json_is_false(json_object_get(node, "use_regex"));
        s->bl_prefix = !json_is_false(json_object_get(node, "add_prefix_space"));
    } else if (!s->n_other++) {
        s->other = type;
    }
}

static pt_status unknown_split(const meta_ctx *m, const pre_steps *s)
{
    if (!s->regex || !s->isolated)
        return ERR(PT_ERR_USER, "%s: pre_tokenizer: a Split that is not an Isolated, non-inverted Regex is not one "
                   "llama.cpp knows; it knows: " KNOWN_PRES, shown_text(m->tj_path).s);
    return ERR(PT_ERR_USER,
               "%s: pre_tokenizer: the Split regex \"%s\" is not one llama.cpp knows by name, so a GGUF "
               "could not tell llama.cpp to split text this way; it knows: " KNOWN_PRES,
               shown_text(m->tj_path).s, shown_text(s->regex).s);
}

static pt_status pre_match(const meta_ctx *m, const pre_steps *s, const char **pre)
{
    if (s->n_split == 0 && s->n_digits == 0 && s->bl_regex) return *pre = "gpt-2", PT_OK;
    if (s->n_split == 0 && s->n_digits == 1 && s->digits_individual && s->bl_regex) return *pre = "smollm", PT_OK;
    if (s->n_split == 1 && s->n_digits == 0 && !s->bl_regex) {
        for (size_t i = 0; s->regex && s->isolated && i < N_SPLIT_PRES; i++)
            if (!strcmp(s->regex, split_pres[i].regex)) return *pre = split_pres[i].pre, PT_OK;
        return unknown_split(m, s);
    }
    return ERR(PT_ERR_USER,
               "%s: pre_tokenizer: %d Split, %d Digits%s and a ByteLevel step (use_regex %s) are not a "
               "pre-tokenizer llama.cpp knows; it knows: " KNOWN_PRES,
               shown_text(m->tj_path).s, s->n_split, s->n_digits,
               s->n_digits && !s->digits_individual ? " (not individual)" : "", s->bl_regex ? "true" : "false");
}

/* The normalizer llama.cpp's byte-level tokenizers skip: none, or NFC (Qwen2's; text that is
 * already NFC, as nearly all is, tokenizes the same). */
static pt_status byte_level_normalizer(const meta_ctx *m)
{
    const json_t *n = json_object_get(m->tj, "normalizer");
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!n || json_is_null(n) || (type && !strcmp(type, "NFC"))) return PT_OK;
    return ERR(PT_ERR_USER, "%s: normalizer: a %s normalizer; llama.cpp's byte-level tokenizers normalize nothing, so "
               "the GGUF would tokenize differently", shown_text(m->tj_path).s, type ? shown_text(type).s : "?");
}

static pt_status byte_level_pre(const meta_ctx *m, const char **pre)
{
    pre_steps s = {0};
    pre_step(json_object_get(m->tj, "pre_tokenizer"), &s, 0);
    if (s.n_other)
        return ERR(PT_ERR_USER, "%s: pre_tokenizer: a %s step is not part of any pre-tokenizer llama.cpp knows; it "
                   "knows: " KNOWN_PRES, shown_text(m->tj_path).s, shown_text(s.other).s);
    if (s.n_bytelevel != 1)
        return ERR(PT_ERR_USER, "%s: pre_tokenizer: %d ByteLevel steps; byte-level tokenizers have one, last",
                   shown_text(m->tj_path).s, s.n_bytelevel);
    if (s.bl_prefix)
        return ERR(PT_ERR_USER, "%s: pre_tokenizer: ByteLevel.add_prefix_space is true; llama.cpp's byte-level "
                   "tokenizers never add a space before the text, so the GGUF would tokenize differently",
                   shown_text(m->tj_path).s);
    TRY(byte_level_normalizer(m));
    return pre_match(m, &s, pre);
}

/* ---- the pre-tokenizer (SentencePiece) ---- */

static bool is_type(const json_t *node, const char *type)
{
    const char *t = json_string_value(json_object_get(node, "type"));
    return t && !strcmp(t, type);
}

static bool is_marker(const json_t *s)
{
    return json_is_string(s) && !strcmp(json_string_value(s), SPM_SPACE);
}

/* The normalizer step of type (at the top or in a Sequence), or NULL. */
static const json_t *norm_step(const json_t *n, const char *type)
{
    if (is_type(n, type)) return n;
    size_t i;
    const json_t *sub;
    if (is_type(n, "Sequence"))
        json_array_foreach(json_object_get(n, "normalizers"), i, sub) if (is_type(sub, type)) return sub;
    return NULL;
}

/* llama.cpp's SentencePiece tokenizer turns spaces into ▁ and, with add_space_prefix, puts one
 * before the text (and after each special token). The tokenizer.json says so with a Metaspace
 * pre-tokenizer (prepend_scheme first/always, or never), or with normalizers Prepend("▁") and
 * Replace(" ", "▁") (Llama 2's legacy files; Gemma's have Replace alone). */
static pt_status spm_prefix(const meta_ctx *m, bool *prefix)
{
    const json_t *pre = json_object_get(m->tj, "pre_tokenizer"), *norm = json_object_get(m->tj, "normalizer");
    const json_t *prep = norm_step(norm, "Prepend"), *repl = norm_step(norm, "Replace");
    const char *scheme = json_string_value(json_object_get(pre, "prepend_scheme"));
    if (is_type(pre, "Metaspace")) {
        if (!json_is_false(json_object_get(pre, "split")))
            return ERR(PT_ERR_USER,
                       "%s: pre_tokenizer: Metaspace with split true (the default); llama.cpp's "
                       "SentencePiece tokenizer merges across ▁, so the GGUF would tokenize differently",
                       shown_text(m->tj_path).s);
        *prefix = scheme ? strcmp(scheme, "never") != 0 : !json_is_false(json_object_get(pre, "add_prefix_space"));
        return PT_OK;
    }
    bool spaces = is_marker(json_object_get(repl, "content")), prepends = prep != NULL;
    if ((!pre || json_is_null(pre)) && spaces && (!prepends || is_marker(json_object_get(prep, "prepend")))) {
        *prefix = prepends;
        return PT_OK;
    }
    return ERR(PT_ERR_USER,
               "%s: a SentencePiece-style tokenizer without a Metaspace pre-tokenizer or a Replace(\" \", "
               "\"▁\") normalizer is not one llama.cpp's SentencePiece tokenizer reproduces",
               shown_text(m->tj_path).s);
}

/* ---- tokens ---- */

/* Added tokens the converter types as control though not marked special (<|...|> and others). */
static bool looks_special(const char *s)
{
    static const char *const exact[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
    size_t n = strlen(s);
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(s, exact[i])) return true;
    if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(s, "<\xef\xbd\x9c", 4) && !strcmp(s + n - 4, "\xef\xbd\x9c>")) return true; /* <｜ ｜> */
    return n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>';
}

static pt_status check_id(const meta_ctx *m, json_int_t id, const char *what, const char *text)
{
    if (id >= 0 && (size_t)id < m->n) return PT_OK;
    return ERR(PT_ERR_USER,
               "%s: %s \"%s\" has id %lld, but the model's vocab_size (config.json) is %zu: the "
               "embedding has no row for it",
               shown_text(m->tj_path).s, what, text ? shown_text(text).s : "?", (long long)id, m->n);
}

static bool is_byte_token(const char *s)
{
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && strchr(hex, s[3]) && strchr(hex, s[4]) && s[5] == '>';
}

static pt_status vocab_tokens(meta_ctx *m)
{
    const char *key;
    const json_t *v;
    const char *unk = json_string_value(json_object_get(json_object_get(m->tj, "model"), "unk_token"));
    json_object_foreach((json_t *)m->vocab, key, v) {
        json_int_t id = json_integer_value(v);
        TRY(check_id(m, id, "token", key));
        m->text[id] = key;
        m->type[id] = TT_NORMAL;
        if (m->spm && is_byte_token(key)) m->type[id] = TT_BYTE;
        if (m->spm && unk && !strcmp(key, unk)) m->type[id] = TT_UNKNOWN;
    }
    return PT_OK;
}

/* s with every ▁ made a space (a user-defined SentencePiece token, matched in raw text). */
static char *unmark_spaces(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out) return NULL;
    while (*s)
        if (!strncmp(s, SPM_SPACE, 3)) *o++ = ' ', s += 3;
        else *o++ = *s++;
    *o = '\0';
    return out;
}

/* single_word, lstrip and rstrip change how text around the token splits; a GGUF cannot say them. */
static pt_status added_flags(const meta_ctx *m, const json_t *a, const char *s)
{
    static const char *const flags[] = {"single_word", "lstrip", "rstrip"};
    for (int f = 0; f < 3; f++)
        if (json_is_true(json_object_get(a, flags[f])))
            return ERR(PT_ERR_USER,
                       "%s: added token \"%s\" has %s true; llama.cpp cannot be told so in a GGUF and "
                       "would split the text around it differently",
                       shown_text(m->tj_path).s, shown_text(s).s, flags[f]);
    return PT_OK;
}

static pt_status added_one(meta_ctx *m, const json_t *a)
{
    json_int_t id = json_integer_value(json_object_get(a, "id"));
    const char *s = json_string_value(json_object_get(a, "content"));
    TRY(check_id(m, id, "added token", s));
    if (!s) return ERR(PT_ERR_USER, "%s: added token %lld has no content", shown_text(m->tj_path).s, (long long)id);
    TRY(added_flags(m, a, s));
    bool special = json_is_true(json_object_get(a, "special")) || looks_special(s);
    m->text[id] = s;
    if (m->type[id] == TT_UNKNOWN) return PT_OK;
    m->type[id] = special ? TT_CONTROL : TT_USER;
    if (special || !m->spm || json_is_false(json_object_get(a, "normalized")) || !strstr(s, SPM_SPACE)) return PT_OK;
    free(m->own[id]);
    m->text[id] = m->own[id] = unmark_spaces(s);
    TRY_ALLOC(m->own[id]);
    return PT_OK;
}

static pt_status added_tokens(meta_ctx *m)
{
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(m->tj, "added_tokens"), i, a) TRY(added_one(m, a));
    return PT_OK;
}

/* Ids no token has: [PADn], unused, as the converter fills them. */
static pt_status pad_tokens(meta_ctx *m)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->text[i]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%zu]", i);
        m->text[i] = m->own[i] = strdup(pad);
        TRY_ALLOC(m->own[i]);
        m->type[i] = TT_UNUSED;
    }
    return PT_OK;
}

static int by_text(const void *a, const void *b, void *text)
{
    const char *const *t = text;
    return strcmp(t[*(const uint32_t *)a], t[*(const uint32_t *)b]);
}

/* llama.cpp maps spellings to ids and aborts when two ids share one. */
static pt_status unique_tokens(const meta_ctx *m)
{
    uint32_t *idx = malloc(m->n * sizeof *idx);
    TRY_ALLOC(idx);
    for (size_t i = 0; i < m->n; i++) idx[i] = (uint32_t)i;
    qsort_r(idx, m->n, sizeof *idx, by_text, (void *)m->text);
    for (size_t i = 1; i < m->n; i++)
        if (!strcmp(m->text[idx[i - 1]], m->text[idx[i]])) {
            pt_status st = ERR(PT_ERR_USER, "%s: tokens %u and %u are both spelled \"%s\"; llama.cpp needs one id per "
                               "spelling", shown_text(m->tj_path).s, idx[i - 1], idx[i], shown_text(m->text[idx[i]]).s);
            free(idx);
            return st;
        }
    free(idx);
    return PT_OK;
}

static pt_status token_list(meta_ctx *m)
{
    TRY(vocab_tokens(m));
    TRY(added_tokens(m));
    TRY(pad_tokens(m));
    return unique_tokens(m);
}

/* ---- merges (byte-level) and scores (SentencePiece) ---- */

/* "left right"; a space inside a half (tokenizers' list form allows it) becomes Ġ, as the
 * converter writes it. */
static char *merge_text(const json_t *mg)
{
    if (json_is_string(mg)) return strdup(json_string_value(mg));
    const char *half[2] = {json_string_value(json_array_get(mg, 0)), json_string_value(json_array_get(mg, 1))};
    if (!half[0] || !half[1]) return NULL;
    char *out = malloc(2 * (strlen(half[0]) + strlen(half[1])) + 2), *o = out;
    for (int h = 0; out && h < 2; h++) {
        for (const char *s = half[h]; *s; s++)
            if (*s == ' ') *o++ = '\xc4', *o++ = '\xa0';
            else *o++ = *s;
        *o++ = h ? '\0' : ' ';
    }
    return out;
}

static pt_status merges(gguf_writer *w, const meta_ctx *m)
{
    const json_t *list = json_object_get(json_object_get(m->tj, "model"), "merges");
    size_t n = json_array_size(list);
    char **out = calloc(n ? n : 1, sizeof *out);
    TRY_ALLOC(out);
    pt_status st = PT_OK;
    for (size_t i = 0; i < n && st == PT_OK; i++)
        if (!(out[i] = merge_text(json_array_get(list, i))))
            st = ERR(PT_ERR_USER, "%s: model.merges[%zu]: expected \"left right\" or [\"left\", \"right\"]",
                     shown_text(m->tj_path).s, i);
    if (st == PT_OK) st = gguf_w_str_array(w, "tokenizer.ggml.merges", (const char *const *)out, n);
    for (size_t i = 0; i < n; i++) free(out[i]);
    free(out);
    return st;
}

/* The id of the token merge i makes, or -1. */
static json_int_t merge_result(const meta_ctx *m, const json_t *mg)
{
    char *t = merge_text(mg);
    if (!t) return -1;
    char *sp = strchr(t, ' ');
    if (sp) memmove(sp, sp + 1, strlen(sp));
    const json_t *id = json_object_get(m->vocab, t);
    free(t);
    return id ? json_integer_value(id) : -1;
}

/* Minus the rank of the first merge making each token; tokens no merge makes rank below all. */
static void spm_scores(meta_ctx *m)
{
    const json_t *list = json_object_get(json_object_get(m->tj, "model"), "merges");
    size_t n = json_array_size(list);
    for (size_t i = 0; i < m->n; i++) m->score[i] = -(float)n - 1.0f;
    for (size_t i = n; i-- > 0;) {
        json_int_t id = merge_result(m, json_array_get(list, i));
        if (id >= 0 && (size_t)id < m->n) m->score[id] = -(float)i;
    }
}

/* ---- the tokenizer keys ---- */

/* The id of the token spelled text (an added token first, as the converter looks), or -1. */
static int32_t id_of(const meta_ctx *m, const char *text)
{
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(m->tj, "added_tokens"), i, a) {
        const char *s = json_string_value(json_object_get(a, "content"));
        if (s && !strcmp(s, text)) return (int32_t)json_integer_value(json_object_get(a, "id"));
    }
    const json_t *id = json_object_get(m->vocab, text);
    return id ? (int32_t)json_integer_value(id) : -1;
}

/* A special token: known (>= 0) already, else tokenizer_config.json's <role>_token, else
 * config.json's <role>_token_id. */
static int32_t special_id(const meta_ctx *m, const char *role, int32_t known)
{
    char key[32];
    snprintf(key, sizeof key, "%s_token", role);
    const json_t *v = json_object_get(m->tc, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (known < 0 && json_is_string(v)) known = id_of(m, json_string_value(v));
    snprintf(key, sizeof key, "%s_token_id", role);
    v = json_object_get(m->cj, key);
    if (known < 0 && json_is_integer(v)) known = (int32_t)json_integer_value(v);
    return known >= 0 && (size_t)known < m->n ? known : -1;
}

static pt_status special_ids(gguf_writer *w, const meta_ctx *m)
{
    static const char *const roles[] = {"bos", "eos", "unk", "pad"};
    static const char *const keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    int32_t known[] = {tokenizer_bos(m->tok), tokenizer_eos(m->tok), tokenizer_unk(m->tok), tokenizer_pad(m->tok)};
    for (int r = 0; r < 4; r++) {
        int32_t id = special_id(m, roles[r], known[r]);
        if (id >= 0) TRY(gguf_w_u32(w, keys[r], (uint32_t)id));
        if (id < 0 && r < 2 && (r ? tokenizer_adds_eos(m->tok) : tokenizer_adds_bos(m->tok)))
            return ERR(PT_ERR_USER, "%s: the post-processor adds a %s token, but neither tokenizer_config.json nor "
                       "config.json names one", shown_text(m->tj_path).s, roles[r]);
    }
    /* always written: llama.cpp's defaults differ by pre-tokenizer (llama-bpe adds bos) */
    TRY(gguf_w_bool(w, "tokenizer.ggml.add_bos_token", tokenizer_adds_bos(m->tok)));
    return gguf_w_bool(w, "tokenizer.ggml.add_eos_token", tokenizer_adds_eos(m->tok));
}

static pt_status vocab_kind(gguf_writer *w, meta_ctx *m)
{
    if (!m->spm) {
        const char *pre = NULL;
        TRY(byte_level_pre(m, &pre));
        TRY(gguf_w_str(w, "tokenizer.ggml.model", "gpt2"));
        return gguf_w_str(w, "tokenizer.ggml.pre", pre);
    }
    bool prefix = true;
    TRY(spm_prefix(m, &prefix));
    TRY(gguf_w_str(w, "tokenizer.ggml.model", "llama"));
    TRY(gguf_w_str(w, "tokenizer.ggml.pre", "default"));
    return gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
}

static pt_status tokenizer_keys(gguf_writer *w, meta_ctx *m)
{
    TRY(vocab_kind(w, m));
    TRY(token_list(m));
    TRY(gguf_w_str_array(w, "tokenizer.ggml.tokens", m->text, m->n));
    if (m->spm) spm_scores(m);
    if (m->spm) TRY(gguf_w_f32_array(w, "tokenizer.ggml.scores", m->score, m->n));
    TRY(gguf_w_i32_array(w, "tokenizer.ggml.token_type", m->type, m->n));
    if (!m->spm) TRY(merges(w, m));
    TRY(special_ids(w, m));
    const char *tmpl = tokenizer_chat_template(m->tok);
    return tmpl ? gguf_w_str(w, "tokenizer.chat_template", tmpl) : PT_OK;
}

pt_status gguf_meta_from_hf(gguf_writer *w, const char *dir, const hf_config *hc, const char *name)
{
    TRY(hparams(w, dir, hc, name));
    meta_ctx m = {0};
    pt_status st = ctx_open(&m, dir, hc);
    if (st == PT_OK) st = tokenizer_keys(w, &m);
    ctx_free(&m);
    return st;
}
