/* load.c — read a model of the llama, qwen2 or gemma2 family out of a GGUF file: hyperparameters
 * from the `<arch>.*` keys (family defaults from family.c for what a file leaves out), weights by
 * tensor name with their shapes checked, llama's q/k rows un-permuted back to the Hugging Face
 * layout (llama.cpp's converter interleaves them for its RoPE; it leaves qwen2 and gemma2 alone),
 * and rotary frequencies with the file's scaling applied. Gemma's norm weights are stored as
 * 1 + w already, which is what the forward pass multiplies by. Linear weights stay in their
 * stored block format; a fused weight (phi3's attn_qkv, ffn_up) gives each part its rows in place.
 * Weights or scales that are NaN or infinite, and all-zero matrices, are found by weight_check.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/model.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"
#include "ptrain/util.h"
#include "ptrain/weight_check.h"

static pt_status get_dim(const gguf_file *f, const char *arch, const char *suffix, int *out)
{
    char key[128];
    uint32_t v = 0;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    TRY(gguf_get_u32(f, key, &v));
    if (v == 0 || v > (1u << 24))
        return ERR(PT_ERR_USER, "%s: %s = %u is not a plausible model dimension", shown_text(f->path).s, key, v);
    *out = (int)v;
    return PT_OK;
}

/* An optional `<arch>.suffix` u32 (0 when absent). */
static pt_status opt_u32(const gguf_file *f, const char *arch, const char *suffix, uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *out = 0;
    return gguf_opt_u32(f, key, out);
}

/* An optional `<arch>.suffix` f32 that must be finite and >= 0 (out keeps its value when absent). */
static pt_status opt_nonneg_f32(const gguf_file *f, const char *arch, const char *suffix, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    TRY(gguf_opt_f32(f, key, out));
    if (!(*out >= 0.0f) || isinf(*out))
        return ERR(PT_ERR_USER, "%s: %s = %g must be a finite number >= 0", shown_text(f->path).s, key, *out);
    return PT_OK;
}

static pt_status read_arch(const gguf_file *f, pt_model_config *c)
{
    gguf_str arch;
    TRY(gguf_get_str(f, "general.architecture", &arch));
    if (!arch_from_gguf(arch.data, arch.len, &c->arch))
        return ERR(PT_ERR_USER, "%s: architecture \"%s\" is not supported yet; supported: %s", shown_text(f->path).s,
                   shown_bytes(arch.data, arch.len).s, arch_list());
    uint32_t experts = 0;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_count", arch_name(c->arch));
    TRY(gguf_opt_u32(f, key, &experts));
    if (experts > 0 && !arch_info(c->arch)->moe && !arch_gguf_with_experts(c->arch, &c->arch))
        return ERR(PT_ERR_USER, "%s: %s = %u: a %s file with experts, which ptrain does not read; supported mixtures "
                   "of experts: llama's (Mixtral) and qwen3moe", shown_text(f->path).s, key, experts,
                   arch_name(c->arch));
    if (arch_info(c->arch)->not_yet) /* gemma4: Hugging Face directories only, for now */
        return ERR(PT_ERR_USER, "%s: a %s GGUF file; ptrain %s: use the model's Hugging Face directory",
                   shown_text(f->path).s, arch_name(c->arch), arch_info(c->arch)->not_yet);
    if (arch_info(c->arch)->gated_delta)
        return ERR(PT_ERR_USER, "%s: a %s GGUF file; ptrain reads Qwen3.5 from Hugging Face directories only, for "
                   "now: use the model's safetensors directory (ptrain quantizes it to NF4 on load)",
                   shown_text(f->path).s, arch_name(c->arch));
    return PT_OK;
}

/* A mixture of experts (llama.cpp's keys): expert_count experts, expert_used_count per token, each of
 * expert_feed_forward_length (qwen3moe; llama's experts: feed_forward_length), on every layer; the k weights
 * renormalised, as llama.cpp runs both families. */
static pt_status read_moe_keys(const gguf_file *f, pt_model_config *c)
{
    const char *a = arch_gguf_name(c->arch);
    uint32_t n = 0, k = 0, width = 0;
    TRY(opt_u32(f, a, "expert_count", &n));
    TRY(opt_u32(f, a, "expert_used_count", &k));
    TRY(opt_u32(f, a, "expert_feed_forward_length", &width));
    if (n == 0 || n > 4096 || k == 0 || k > n)
        return ERR(PT_ERR_USER, "%s: %s.expert_count = %u and %s.expert_used_count = %u; a mixture of experts needs "
                   "1 to 4096 experts and 1 to that many per token", shown_text(f->path).s, a, n, a, k);
    if (width > (1u << 26))
        return ERR(PT_ERR_USER, "%s: %s.expert_feed_forward_length = %u is not a plausible width", shown_text(f->path).s,
                   a, width);
    c->n_experts = (int)n, c->n_experts_used = (int)k;
    c->moe_ffn_dim = width ? (int)width : c->ffn_dim;
    c->moe_step = 1;
    c->moe_norm_topk = true;
    return PT_OK;
}

/* Layers, widths, heads and the head size (key_length, which value_length must equal). */
static pt_status read_dims(const gguf_file *f, pt_model_config *c)
{
    TRY(get_dim(f, arch_gguf_name(c->arch), "block_count", &c->n_layers));
    TRY(get_dim(f, arch_gguf_name(c->arch), "embedding_length", &c->dim));
    TRY(get_dim(f, arch_gguf_name(c->arch), "feed_forward_length", &c->ffn_dim));
    TRY(get_dim(f, arch_gguf_name(c->arch), "attention.head_count", &c->n_heads));
    uint32_t u;
    TRY(opt_u32(f, arch_gguf_name(c->arch), "attention.head_count_kv", &u));
    c->n_kv_heads = u ? (int)u : c->n_heads;
    TRY(opt_u32(f, arch_gguf_name(c->arch), "attention.key_length", &u));
    c->head_dim = u ? (int)u : c->dim / c->n_heads;
    if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads || c->head_dim <= 0 ||
        c->head_dim % 2 || c->head_dim > 1024)
        return ERR(PT_ERR_USER, "%s: %d heads, %d kv heads and head size %d do not fit together", shown_text(f->path).s,
                   c->n_heads, c->n_kv_heads, c->head_dim);
    TRY(opt_u32(f, arch_gguf_name(c->arch), "attention.value_length", &u));
    if (u && u != (uint32_t)c->head_dim)
        return ERR(PT_ERR_USER, "%s: %s.attention.value_length = %u differs from the key length %d; ptrain "
                   "needs values and keys of one head size", shown_text(f->path).s, arch_gguf_name(c->arch), u, c->head_dim);
    TRY(opt_u32(f, arch_gguf_name(c->arch), "context_length", &u));
    c->ctx_len = u ? (int)u : 2048;
    return PT_OK;
}

/* What gemma2 and gemma3 files say about their features (llama.cpp's defaults otherwise; gemma3's
 * local layers, five of six, on rope base 10000 unscaled, are not keys). */
static pt_status read_gemma2_keys(const gguf_file *f, pt_model_config *c)
{
    uint32_t u;
    TRY(opt_u32(f, arch_gguf_name(c->arch), "attention.sliding_window", &u));
    if (u > (1u << 30))
        return ERR(PT_ERR_USER, "%s: %s.attention.sliding_window = %u is not a plausible window", shown_text(f->path).s,
                   arch_gguf_name(c->arch), u);
    if (u) c->sliding_window = (int)u;
    TRY(opt_nonneg_f32(f, arch_gguf_name(c->arch), "attn_logit_softcapping", &c->attn_softcap));
    return opt_nonneg_f32(f, arch_gguf_name(c->arch), "final_logit_softcapping", &c->final_softcap);
}

/* Granite's multipliers (llama.cpp's converter writes all four; absent: 1, and 1/sqrt(head size)
 * for the scores, as llama.cpp does). */
static pt_status read_granite_keys(const gguf_file *f, pt_model_config *c)
{
    TRY(opt_nonneg_f32(f, arch_gguf_name(c->arch), "embedding_scale", &c->embed_scale));
    TRY(opt_nonneg_f32(f, arch_gguf_name(c->arch), "attention.scale", &c->attn_scale));
    TRY(opt_nonneg_f32(f, arch_gguf_name(c->arch), "residual_scale", &c->residual_scale));
    return opt_nonneg_f32(f, arch_gguf_name(c->arch), "logit_scale", &c->logit_scale);
}

/* Phi-3's partial rotary embedding (rope.dimension_count below the head size), its sliding window on every
 * layer when the file has one, and LongRoPE's attention factor and original context (rope_factors_short.weight
 * divides the frequencies: rope_frequencies). */
static pt_status read_phi3_keys(const gguf_file *f, pt_model_config *c)
{
    uint32_t u;
    TRY(opt_u32(f, arch_gguf_name(c->arch), "rope.dimension_count", &u));
    if (u && (u % 2 || u > (uint32_t)c->head_dim))
        return ERR(PT_ERR_USER, "%s: phi3.rope.dimension_count = %u; it must be even and at most the head size %d",
                   shown_text(f->path).s, u, c->head_dim);
    c->rope_dim = u && u < (uint32_t)c->head_dim ? (int)u : 0;
    TRY(opt_u32(f, arch_gguf_name(c->arch), "attention.sliding_window", &u));
    if (u > (1u << 30))
        return ERR(PT_ERR_USER, "%s: phi3.attention.sliding_window = %u is not a plausible window",
                   shown_text(f->path).s, u);
    c->sliding_window = (int)u;
    c->sliding_pattern = 1;
    if (!gguf_find_tensor(f, "rope_factors_short.weight")) return PT_OK;
    float attn = 1.0f;
    TRY(opt_nonneg_f32(f, arch_gguf_name(c->arch), "rope.scaling.attn_factor", &attn));
    TRY(opt_u32(f, arch_gguf_name(c->arch), "rope.scaling.original_context_length", &u));
    c->rope_mscale = attn > 0.0f ? attn : 1.0f;
    c->rope_short_max = u ? (int)u : c->ctx_len;
    return PT_OK;
}

/* OLMo 3 in llama.cpp's olmo2 architecture: attention.sliding_window, when above 0, puts a window on every layer
 * but every 4th (llama.cpp fixes the period; the converter's sliding_window_pattern is not read), the windowed
 * layers on the same base unscaled. */
static pt_status read_olmo3_keys(const gguf_file *f, pt_model_config *c)
{
    uint32_t u = 0;
    TRY(opt_u32(f, arch_gguf_name(c->arch), "attention.sliding_window", &u));
    if (u > (1u << 30))
        return ERR(PT_ERR_USER, "%s: olmo2.attention.sliding_window = %u is not a plausible window",
                   shown_text(f->path).s, u);
    if (!u) return PT_OK;
    c->sliding_window = (int)u;
    c->sliding_period = 4;
    c->rope_theta_local = c->rope_theta;
    return PT_OK;
}

/* YaRN as llama.cpp's converter writes it (<arch>.rope.scaling.type "yarn", .factor,
 * .original_context_length, optional .yarn_beta_fast/.yarn_beta_slow and .attn_factor), in transformers'
 * terms: cos and sin times attn_factor (1 when absent) x (1 + 0.1 ln factor), as llama.cpp runs it; or, in a
 * mistral3 file with .yarn_log_multiplier m (Ministral 3's mscale_all_dim), times (1 + 0.1 ln factor) /
 * (1 + 0.1 m ln factor), which llama.cpp computes for it as transformers does with mscale 1. s->type stays
 * PT_ROPE_DEFAULT for any other scaling (linear: rope_frequencies). */
static pt_status gguf_yarn(const gguf_file *f, const pt_model_config *c, pt_rope_scaling *s)
{
    const char *a = arch_gguf_name(c->arch);
    char key[128];
    gguf_str type = {"none", 4};
    memset(s, 0, sizeof *s);
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    TRY(gguf_opt_str(f, key, &type));
    if (!gguf_str_eq(type, "yarn")) return PT_OK;
    if (c->arch == PT_ARCH_GEMMA2 || c->arch == PT_ARCH_GEMMA3)
        return ERR(PT_ERR_USER, "%s: %s \"yarn\" on a %s model; ptrain runs yarn for llama-like families only",
                   shown_text(f->path).s, key, a);
    float factor = 0.0f, fast = 0.0f, slow = 0.0f, attn = 0.0f, log_mul = 0.0f;
    uint32_t orig = 0;
    TRY(opt_nonneg_f32(f, a, "rope.scaling.factor", &factor));
    TRY(opt_nonneg_f32(f, a, "rope.scaling.yarn_beta_fast", &fast));
    TRY(opt_nonneg_f32(f, a, "rope.scaling.yarn_beta_slow", &slow));
    TRY(opt_nonneg_f32(f, a, "rope.scaling.attn_factor", &attn));
    TRY(opt_u32(f, a, "rope.scaling.original_context_length", &orig));
    bool mistral3 = arch_info(c->arch)->gguf_q_temperature;
    if (mistral3) TRY(opt_nonneg_f32(f, a, "rope.scaling.yarn_log_multiplier", &log_mul));
    const char *extra[] = {"yarn_log_multiplier", "yarn_ext_factor", "yarn_attn_factor"};
    for (int i = mistral3; i < 3; i++) {
        snprintf(key, sizeof key, "%s.rope.scaling.%s", a, extra[i]);
        if (gguf_find(f, key))
            return ERR(PT_ERR_USER, "%s: %s: ptrain runs YaRN as transformers' rope_type yarn (factor, "
                       "original_context_length, yarn_beta_fast/slow, attn_factor) and not this variant; use the "
                       "model's Hugging Face directory", shown_text(f->path).s, key);
    }
    if (!(factor > 0.0f))
        return ERR(PT_ERR_USER, "%s: rope scaling yarn without a positive %s.rope.scaling.factor", shown_text(f->path).s,
                   a);
    *s = (pt_rope_scaling){.type = PT_ROPE_YARN, .factor = factor, .beta_fast = fast, .beta_slow = slow,
                           .original_max_position_embeddings = orig ? orig : (double)c->ctx_len};
    s->attention_factor = log_mul > 0.0f ? rope_yarn_attention(factor, 1.0, log_mul)
                                         : (attn > 0.0f ? attn : 1.0) * rope_yarn_attention(factor, 0.0, 0.0);
    return PT_OK;
}

/* llama.cpp's mistral3: the query temperature's beta (attention.temperature_scale), its steps every
 * rope.scaling.original_context_length positions (transformers' original_max_position_embeddings). */
static pt_status read_q_temperature(const gguf_file *f, pt_model_config *c)
{
    const char *a = arch_name(c->arch);
    uint32_t period = 0;
    TRY(opt_nonneg_f32(f, a, "attention.temperature_scale", &c->q_temp_beta));
    TRY(opt_u32(f, a, "rope.scaling.original_context_length", &period));
    if (c->q_temp_beta != 0.0f && (period == 0 || period > (1u << 30)))
        return ERR(PT_ERR_USER, "%s: %s.attention.temperature_scale without a plausible %s.rope.scaling."
                   "original_context_length (%u), the positions per step of the query temperature",
                   shown_text(f->path).s, a, a, period);
    c->q_temp_period = c->q_temp_beta != 0.0f ? (int)period : 0;
    return PT_OK;
}

pt_status model_config_from_gguf(const gguf_file *f, pt_model_config *c)
{
    memset(c, 0, sizeof *c);
    TRY(read_arch(f, c));
    TRY(read_dims(f, c));
    char key[128];
    c->norm_eps = 1e-5f;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch_gguf_name(c->arch));
    TRY(gguf_opt_f32(f, key, &c->norm_eps));
    c->rope_theta = 10000.0f;
    snprintf(key, sizeof key, "%s.rope.freq_base", arch_gguf_name(c->arch));
    TRY(gguf_opt_f32(f, key, &c->rope_theta));
    const gguf_kv *tokens = gguf_find(f, "tokenizer.ggml.tokens");
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    if (!embd)
        return ERR(PT_ERR_USER, "%s: no token_embd.weight tensor; is this a complete model?", shown_text(f->path).s);
    c->vocab = (int)embd->dims[1];
    if (tokens && tokens->count != (uint64_t)c->vocab && tokens->count > (uint64_t)c->vocab)
        return ERR(PT_ERR_USER, "%s: the tokenizer has %llu tokens but the embedding only %d rows",
                   shown_text(f->path).s, (unsigned long long)tokens->count, c->vocab);
    c->tied_embeddings = gguf_find_tensor(f, "output.weight") == NULL;
    model_family_defaults(c);
    if (c->arch == PT_ARCH_GEMMA2 || c->arch == PT_ARCH_GEMMA3) TRY(read_gemma2_keys(f, c));
    if (c->arch == PT_ARCH_GRANITE) TRY(read_granite_keys(f, c));
    if (c->arch == PT_ARCH_PHI3) TRY(read_phi3_keys(f, c));
    if (arch_info(c->arch)->moe) TRY(read_moe_keys(f, c));
    if (arch_info(c->arch)->gguf_q_temperature) TRY(read_q_temperature(f, c));
    if (c->arch == PT_ARCH_OLMO2) TRY(read_olmo3_keys(f, c));
    pt_rope_scaling yarn;
    TRY(gguf_yarn(f, c, &yarn));
    if (yarn.type == PT_ROPE_YARN) c->rope_mscale = (float)yarn.attention_factor;
    return PT_OK;
}

/* Copy rows of src into t (already described), optionally un-permuting llama.cpp's q/k order:
 * GGUF row h*hd + 2i + s holds HF row h*hd + s*hd/2 + i. */
static pt_status upload_rows(pt_backend *be, pt_tensor *t, const gguf_tensor *src, int permute_heads)
{
    TRY(backend_alloc(be, t));
    if (!permute_heads) return backend_upload(be, t, src->data, t->nbytes);
    int64_t rows = t->shape[0], hd = rows / permute_heads, half = hd / 2;
    size_t row_bytes = t->nbytes / (size_t)rows;
    char *host = malloc(t->nbytes);
    TRY_ALLOC(host);
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / hd, within = r % hd, i = within / 2, s = within % 2;
        memcpy(host + (size_t)(h * hd + s * half + i) * row_bytes, (const char *)src->data + (size_t)r * row_bytes,
               row_bytes);
    }
    pt_status st = backend_upload(be, t, host, t->nbytes);
    free(host);
    return st;
}

/* A projection stored in 8, 16 or 32 bits becomes NF4: dequantize (in HF row order), quantize. */
static pt_status upload_nf4(pt_backend *be, pt_tensor *t, const gguf_tensor *g, int permute_heads, double *quantize_s)
{
    int64_t rows = t->shape[0], cols = t->shape[1];
    pt_tensor stored = *t;
    float *dense = malloc(sizeof(float) * (size_t)(rows * cols));
    void *packed = NULL;
    TRY_ALLOC(dense);
    pt_status st = PT_OK;
    /* un-permute rows while dequantizing, exactly as upload_rows does for stored bytes */
    int64_t hd = permute_heads ? rows / permute_heads : 1, half = hd / 2;
    size_t row_bytes = dtype_size_bytes(g->dtype, cols);
    for (int64_t r = 0; r < rows && st == PT_OK; r++) {
        int64_t dst = r;
        if (permute_heads) dst = (r / hd) * hd + (r % hd % 2) * half + (r % hd) / 2;
        st = quant_dequantize_row(g->dtype, (const char *)g->data + (size_t)r * row_bytes, dense + dst * cols, cols);
    }
    *t = tensor_make(PT_NF4, 2, stored.shape);
    if (st == PT_OK && !(packed = malloc(t->nbytes))) st = ERR(PT_ERR_NOMEM, "out of memory");
    double t0 = util_now();
    if (st == PT_OK) st = nf4_quantize(dense, rows, cols, packed);
    if (quantize_s) *quantize_s += util_now() - t0;
    free(dense);
    if (st == PT_OK) st = backend_alloc(be, t);
    if (st == PT_OK) st = backend_upload(be, t, packed, t->nbytes);
    free(packed);
    return st;
}

static bool is_8_to_32_bit(pt_dtype d) { return d == PT_F32 || d == PT_F16 || d == PT_BF16 || d == PT_Q8_0; }

/* A projection [rows, cols] of g's bytes: NF4 under load_in_4bit when stored in 8-32 bits (whole 64-blocks), else
 * as stored (the GGUF 4-bit formats stay in their format). */
static pt_status upload_matrix(pt_backend *be, const gguf_tensor *g, int64_t rows, int64_t cols, int permute_heads,
                               const pt_load_options *lo, pt_tensor *t)
{
    int64_t shape[2] = {rows, cols};
    *t = tensor_make(g->dtype, 2, shape);
    if (lo && lo->load_in_4bit && is_8_to_32_bit(g->dtype) && cols % 64 == 0)
        return upload_nf4(be, t, g, permute_heads, lo->quantize_s);
    return upload_rows(be, t, g, permute_heads);
}

/* Find tensor `name`, check it is [rows_all, cols] (PyTorch order), and load its rows [row0, row0 + rows) (all,
 * or a part of a fused weight: phi3's attn_qkv, ffn_up). Norm vectors (rows == 0) are converted to f32;
 * projections (nf4 true) become NF4 when stored in 8-32 bits. */
static pt_status load_tensor_rows(const gguf_file *f, pt_backend *be, const char *name, int64_t row0, int64_t rows,
                                  int64_t rows_all, int64_t cols, int permute_heads, const pt_load_options *lo,
                                  pt_tensor *t)
{
    const gguf_tensor *g = gguf_find_tensor(f, name);
    if (!g)
        return ERR(PT_ERR_USER, "%s: tensor %s is missing; is this a complete model file?", shown_text(f->path).s,
                   name);
    bool vec = rows == 0;
    uint64_t want1 = vec ? 1 : (uint64_t)rows_all;
    if (g->dims[0] != (uint64_t)cols || (g->n_dims > 1 ? g->dims[1] : 1) != want1 || g->n_dims > 2)
        return ERR(PT_ERR_USER, "%s: tensor %s has shape [%llu, %llu], expected [%lld, %lld] for this model",
                   shown_text(f->path).s, name, (unsigned long long)(g->n_dims > 1 ? g->dims[1] : 1),
                   (unsigned long long)g->dims[0], (long long)want1, (long long)cols);
    if (g->dtype == PT_DTYPE_COUNT)
        return ERR(PT_ERR_USER, "%s: tensor %s has ggml type %u, which ptrain cannot read yet", shown_text(f->path).s,
                   name, g->ggml_type);
    gguf_tensor part;
    if (!vec && rows != rows_all) { /* the part's rows, in place in the mapping */
        size_t row_bytes = dtype_size_bytes(g->dtype, cols);
        part = *g;
        part.dims[1] = (uint64_t)rows;
        part.data = (const char *)g->data + (size_t)row0 * row_bytes;
        part.nbytes = (size_t)rows * row_bytes;
        g = &part;
    }
    int64_t shape[2] = {vec ? cols : rows, cols};
    if (!vec) return upload_matrix(be, g, rows, cols, permute_heads, lo, t);
    *t = tensor_make(PT_F32, 1, shape);
    float *host = malloc(sizeof(float) * (size_t)cols);
    TRY_ALLOC(host);
    pt_status st = quant_dequantize_row(g->dtype, g->data, host, cols);
    if (st == PT_OK) st = backend_alloc(be, t);
    if (st == PT_OK) st = backend_upload(be, t, host, t->nbytes);
    free(host);
    return st;
}

/* The shape of each weight of a layer ([rows, cols]; rows 0: a vector of cols); where it lives in
 * the file and whether its rows are permuted is model_gguf_tensor_name's (family.c). */
static pt_status load_tensor(const gguf_file *f, pt_backend *be, const char *name, int64_t rows, int64_t cols,
                             int permute_heads, const pt_load_options *lo, pt_tensor *t)
{
    return load_tensor_rows(f, be, name, 0, rows, rows, cols, permute_heads, lo, t);
}

static void layer_shapes(const pt_model_config *c, int64_t shape[W_COUNT][2])
{
    int64_t qw = (int64_t)c->n_heads * c->head_dim, kw = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t s[W_COUNT][2] = {
        [W_ATTN_NORM] = {0, c->dim}, [W_Q] = {qw, c->dim},   [W_K] = {kw, c->dim},       [W_V] = {kw, c->dim},
        [W_O] = {c->dim, qw},        [W_FFN_NORM] = {0, c->dim}, [W_GATE] = {c->ffn_dim, c->dim},
        [W_UP] = {c->ffn_dim, c->dim}, [W_DOWN] = {c->dim, c->ffn_dim}, [W_Q_BIAS] = {0, qw}, [W_K_BIAS] = {0, kw},
        [W_V_BIAS] = {0, kw},        [W_POST_ATTN_NORM] = {0, c->dim}, [W_POST_FFN_NORM] = {0, c->dim},
        [W_Q_NORM] = {0, model_qk_norm_width(c, W_Q_NORM)}, [W_K_NORM] = {0, model_qk_norm_width(c, W_K_NORM)},
    };
    memcpy(shape, s, sizeof s);
}

/* Expert e's weight of a role (gate, up, down) [rows, cols]: its rows of llama.cpp's 3-D blk.L.ffn_<role>_exps.weight
 * ({cols, rows, experts}). The older files' one tensor per expert (blk.L.ffn_<role>.E.weight) llama.cpp no longer
 * loads; they are refused by name. */
static pt_status load_expert(const gguf_file *f, pt_backend *be, const pt_model_config *c, int l, const char *role,
                             int e, int64_t rows, int64_t cols, const pt_load_options *lo, pt_tensor *t)
{
    char name[96], split[96];
    snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", l, role);
    snprintf(split, sizeof split, "blk.%d.ffn_%s.0.weight", l, role);
    const gguf_tensor *g = gguf_find_tensor(f, name);
    if (!g && gguf_find_tensor(f, split))
        return ERR(PT_ERR_USER, "%s: the experts are stored one tensor each (%s), the form of older converters that "
                   "llama.cpp no longer loads; convert the model again with a current convert_hf_to_gguf.py",
                   shown_text(f->path).s, split);
    if (!g)
        return ERR(PT_ERR_USER, "%s: tensor %s is missing; is this a complete model file?", shown_text(f->path).s,
                   name);
    if (g->n_dims != 3 || g->dims[0] != (uint64_t)cols || g->dims[1] != (uint64_t)rows ||
        g->dims[2] != (uint64_t)c->n_experts)
        return ERR(PT_ERR_USER, "%s: tensor %s has %u dimensions {%llu, %llu, %llu}, expected {%lld, %lld, %d} for this "
                   "model (hidden size, expert width, experts)", shown_text(f->path).s, name, g->n_dims,
                   (unsigned long long)g->dims[0], (unsigned long long)(g->n_dims > 1 ? g->dims[1] : 1),
                   (unsigned long long)(g->n_dims > 2 ? g->dims[2] : 1), (long long)cols, (long long)rows, c->n_experts);
    if (g->dtype == PT_DTYPE_COUNT)
        return ERR(PT_ERR_USER, "%s: tensor %s has ggml type %u, which ptrain cannot read yet", shown_text(f->path).s,
                   name, g->ggml_type);
    gguf_tensor part = *g; /* the expert's rows, in place in the mapping */
    size_t bytes = (size_t)rows * dtype_size_bytes(g->dtype, cols);
    part.n_dims = 2, part.dims[2] = 1;
    part.data = (const char *)g->data + (size_t)e * bytes;
    part.nbytes = bytes;
    return upload_matrix(be, &part, rows, cols, 0, lo, t);
}

/* A sparse layer's router blk.L.ffn_gate_inp.weight (as stored) and its experts. */
static pt_status load_experts(const gguf_file *f, pt_backend *be, const pt_model_config *c, int l,
                              const pt_load_options *lo, pt_layer_weights *w)
{
    static const pt_load_options as_stored = {0};
    static const char *const role[X_COUNT] = {[X_GATE] = "gate", [X_UP] = "up", [X_DOWN] = "down"};
    char name[96];
    int64_t d = c->dim, width = c->moe_ffn_dim;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
    TRY(load_tensor(f, be, name, c->n_experts, d, 0, &as_stored, &w->router));
    w->experts = calloc((size_t)c->n_experts * X_COUNT, sizeof *w->experts);
    TRY_ALLOC(w->experts);
    for (int e = 0; e < c->n_experts; e++)
        for (int x = 0; x < X_COUNT; x++)
            TRY(load_expert(f, be, c, l, role[x], e, x == X_DOWN ? d : width, x == X_DOWN ? width : d, lo,
                            &w->experts[(size_t)e * X_COUNT + (size_t)x]));
    return PT_OK;
}

static pt_status load_layer(const gguf_file *f, pt_backend *be, const pt_model_config *c, int l, const pt_load_options *lo,
                            pt_layer_weights *w)
{
    char name[96];
    int64_t shape[W_COUNT][2];
    layer_shapes(c, shape);
    bool sparse = model_layer_moe(c, l);
    if (sparse) TRY(load_experts(f, be, c, l, lo, w));
    for (int i = 0; i < W_COUNT; i++) {
        int permute;
        if (sparse && (i == W_GATE || i == W_UP || i == W_DOWN)) continue; /* the experts instead */
        if (!model_gguf_tensor_name(c, l, i, name, sizeof name, &permute)) continue; /* a slot this family does not use */
        int lead;
        int64_t row0 = 0, rows_all = shape[i][0];
        model_fused_part(c, i, &lead, &row0, &rows_all);
        TRY(load_tensor_rows(f, be, name, row0, shape[i][0], rows_all, shape[i][1], permute, lo, &w->w[i]));
    }
    return PT_OK;
}

pt_status model_rope_freqs(pt_model *m, double theta, const pt_rope_scaling *s)
{
    const pt_model_config *c = &m->cfg;
    int gdim = c->head_dim_full > 0 ? c->head_dim_full : c->head_dim, half = gdim / 2;
    m->inv_freq = malloc(sizeof(float) * (size_t)model_freq_count(c));
    TRY_ALLOC(m->inv_freq);
    TRY(rope_inv_freq(theta, c->head_dim_full > 0 ? gdim : model_rope_dim(c), s, m->inv_freq));
    for (int i = c->rope_pairs_full; c->rope_pairs_full > 0 && i < half; i++) m->inv_freq[i] = 0.0f; /* proportional */
    if (c->rope_theta_local > 0.0f) TRY(rope_inv_freq(c->rope_theta_local, c->head_dim, NULL, m->inv_freq + half));
    if (c->rope_short_max <= 0) return PT_OK; /* LongRoPE's long set after the others */
    float *lf = m->inv_freq + model_freq_count(c) - c->head_dim / 2;
    if (s && s->type == PT_ROPE_LONGROPE) return rope_inv_freq_long(theta, model_rope_dim(c), s, lf);
    return rope_inv_freq(theta, model_rope_dim(c), NULL, lf); /* GGUF: rope_frequencies divides */
}

/* LongRoPE's rope_factors_short/long.weight (pairs f32 values, one per rotated pair) dividing freq */
static pt_status divide_by_factors(const gguf_file *f, const char *name, int pairs, float *freq)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t || t->dtype != PT_F32 || t->n_dims != 1 || t->dims[0] != (uint64_t)pairs)
        return ERR(PT_ERR_USER, "%s: LongRoPE needs %s of %d f32 values (one per rotated pair)", shown_text(f->path).s,
                   name, pairs);
    for (int i = 0; i < pairs; i++) {
        float v = ((const float *)t->data)[i];
        if (!(v > 0.0f) || isinf(v))
            return ERR(PT_ERR_USER, "%s: %s[%d] = %g must be a positive number", shown_text(f->path).s, name, i, v);
        freq[i] /= v;
    }
    return PT_OK;
}

/* theta^(-2i/d), YaRN's (gguf_yarn), divided by per-frequency factors (rope_freqs, Llama 3.1) or a linear factor; the
 * local layers' (gemma3) from their own base, unscaled, as llama.cpp runs them. */
static pt_status rope_frequencies(const gguf_file *f, pt_model *m)
{
    int half = m->cfg.head_dim / 2;
    pt_rope_scaling yarn;
    TRY(gguf_yarn(f, &m->cfg, &yarn));
    TRY(model_rope_freqs(m, m->cfg.rope_theta, yarn.type == PT_ROPE_YARN ? &yarn : NULL));
    if (m->cfg.rope_short_max > 0) { /* phi3's LongRoPE: short factors, and the long set after the others */
        TRY(divide_by_factors(f, "rope_factors_short.weight", model_rope_dim(&m->cfg) / 2, m->inv_freq));
        TRY(divide_by_factors(f, "rope_factors_long.weight", model_rope_dim(&m->cfg) / 2,
                              m->inv_freq + model_freq_count(&m->cfg) - half));
    }
    const gguf_tensor *factors = gguf_find_tensor(f, "rope_freqs.weight");
    if (factors) {
        if (factors->dtype != PT_F32 || factors->dims[0] != (uint64_t)half)
            return ERR(PT_ERR_USER, "%s: rope_freqs.weight must be %d f32 values", shown_text(f->path).s, half);
        for (int i = 0; i < half; i++) m->inv_freq[i] /= ((const float *)factors->data)[i];
    }
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch_gguf_name(m->cfg.arch));
    const gguf_kv *type = gguf_find(f, key);
    gguf_str s;
    if (type && gguf_get_str(f, key, &s) == PT_OK && gguf_str_eq(s, "linear")) {
        float factor = 1.0f;
        snprintf(key, sizeof key, "%s.rope.scaling.factor", arch_gguf_name(m->cfg.arch));
        TRY(gguf_opt_f32(f, key, &factor));
        for (int i = 0; i < half && factor > 0; i++) m->inv_freq[i] /= factor;
    }
    return PT_OK;
}

pt_status model_from_gguf(const gguf_file *f, pt_backend *be, const pt_load_options *opts, pt_model *m)
{
    pt_load_options dflt = {.load_in_4bit = true}, as_stored = {0};
    const pt_load_options *lo = opts ? opts : &dflt;
    memset(m, 0, sizeof *m);
    m->be = be;
    TRY(model_config_from_gguf(f, &m->cfg));
    pt_model_config *c = &m->cfg;
    weight_tally tally; /* NaN and infinity before anything is converted; all-zero matrices once it loaded */
    TRY(weight_check_gguf(f, c, &tally));
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    TRY_ALLOC(m->layers);
    /* embeddings and the lm_head stay as stored, as QLoRA keeps them out of 4-bit */
    pt_status st = load_tensor(f, be, "token_embd.weight", c->vocab, c->dim, 0, &as_stored, &m->tok_embd);
    if (st == PT_OK) st = load_tensor(f, be, "output_norm.weight", 0, c->dim, 0, &as_stored, &m->out_norm);
    if (st == PT_OK && !c->tied_embeddings)
        st = load_tensor(f, be, "output.weight", c->vocab, c->dim, 0, &as_stored, &m->output);
    if (st == PT_OK && c->tied_embeddings) m->output = m->tok_embd;
    for (int l = 0; l < c->n_layers && st == PT_OK; l++) st = load_layer(f, be, c, l, lo, &m->layers[l]);
    if (st == PT_OK) st = rope_frequencies(f, m);
    if (st == PT_OK) st = weight_verdict(&tally);
    if (st != PT_OK) {
        model_free(m);
        return st;
    }
    m->weight_bytes = m->tok_embd.nbytes + m->out_norm.nbytes + (c->tied_embeddings ? 0 : m->output.nbytes);
    m->weight_bytes += model_expert_bytes(m);
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < W_COUNT; i++) m->weight_bytes += m->layers[l].w[i].nbytes;
    return PT_OK;
}

size_t model_expert_bytes(const pt_model *m)
{
    size_t bytes = 0;
    for (int l = 0; m->layers && l < m->cfg.n_layers; l++) {
        const pt_layer_weights *w = &m->layers[l];
        bytes += w->router.nbytes + w->router_bias.nbytes;
        for (int i = 0; w->experts && i < m->cfg.n_experts * X_COUNT; i++) bytes += w->experts[i].nbytes;
        for (int x = 0; x < X_COUNT; x++) bytes += w->expert_bias[x].nbytes;
    }
    return bytes;
}

/* A sparse layer's router and experts (nothing for a dense one). */
static void experts_free(pt_model *m, pt_layer_weights *w)
{
    if (!m->borrowed) backend_release(m->be, &w->router);
    if (!m->borrowed) backend_release(m->be, &w->router_bias);
    for (int x = 0; x < X_COUNT && !m->borrowed; x++) backend_release(m->be, &w->expert_bias[x]);
    for (int i = 0; w->experts && !m->borrowed && i < m->cfg.n_experts * X_COUNT; i++)
        backend_release(m->be, &w->experts[i]);
    free(w->experts);
    w->experts = NULL;
}

void model_free(pt_model *m)
{
    if (!m->be) return;
    for (int l = 0; m->layers && l < m->cfg.n_layers; l++) experts_free(m, &m->layers[l]);
    for (int l = 0; m->layers && l < m->cfg.n_layers && !m->borrowed; l++)
        for (int i = 0; i < W_COUNT; i++) backend_release(m->be, &m->layers[l].w[i]);
    if (!m->borrowed) {
        if (!m->cfg.tied_embeddings) backend_release(m->be, &m->output);
        backend_release(m->be, &m->tok_embd);
        backend_release(m->be, &m->out_norm);
        backend_release(m->be, &m->ple_norm);
        backend_release(m->be, &m->ones);
    }
    free(m->layer_scalar);
    free(m->layers);
    free(m->inv_freq);
    memset(m, 0, sizeof *m);
}
