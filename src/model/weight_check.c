/* weight_check.c — NaN, infinity and all-zero weights found while a model loads (see
 * weight_check.h): one pass over each tensor's values, or over its block scales. Dense 16-bit
 * formats and the fp16 scales of GGUF blocks share one scanner (a value is not finite when its
 * exponent bits are all ones, zero when every bit but the sign is clear). The scans reduce with
 * `omp simd` and no early exit, so they run at memory speed; a chunk that holds a bad value is
 * scanned again to find it. */
#include "ptrain/weight_check.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ptrain/log.h"
#include "ptrain/quant.h"
#include "ptrain/quant_blocks.h"

/* Where the fp16 fields of a block sit: the scale d, and (when there is one) the min m/dmin. The
 * fields are read with memcpy at these offsets, as a GGUF tensor may start at an odd byte. */
typedef struct {
    int values, bytes, fields;
    int off[2];
} block_layout;

#define SCALE(block) {.fields = 1, .off = {offsetof(block, d), offsetof(block, d)}}
#define SCALE_MIN(block, min) {.fields = 2, .off = {offsetof(block, d), offsetof(block, min)}}

/* The fields of each dtype; values and bytes come from the dtype table (layout_of). */
static const block_layout fields16[PT_DTYPE_COUNT] = {
    [PT_F16] = {.fields = 1},         [PT_BF16] = {.fields = 1},
    [PT_Q8_0] = SCALE(block_q8_0),    [PT_Q4_0] = SCALE(block_q4_0),    [PT_Q4_1] = SCALE_MIN(block_q4_1, m),
    [PT_Q5_0] = SCALE(block_q5_0),    [PT_Q5_1] = SCALE_MIN(block_q5_1, m),
    [PT_Q2_K] = SCALE_MIN(block_q2_K, dmin), [PT_Q3_K] = SCALE(block_q3_K),
    [PT_Q4_K] = SCALE_MIN(block_q4_K, dmin), [PT_Q5_K] = SCALE_MIN(block_q5_K, dmin),
    [PT_Q6_K] = SCALE(block_q6_K),
};

/* The layout of dtype's blocks; false for a dtype without fp16 fields to scan (f32, NF4). */
static bool layout_of(pt_dtype dtype, block_layout *b)
{
    if ((unsigned)dtype >= PT_DTYPE_COUNT || fields16[dtype].fields == 0) return false;
    *b = fields16[dtype];
    b->values = (int)dtype_block_values(dtype);
    b->bytes = (int)dtype_size_bytes(dtype, b->values);
    return true;
}

/* The outcome of one scan: the first block (or element) holding a NaN or an infinity. */
typedef struct {
    int64_t bad;  /* -1: none */
    int field;    /* which field of that block (0: the scale, 1: the min) */
    double value; /* what it holds */
    bool zero;    /* every value is zero */
} scan;

/* Whether any of count blocks has a 16-bit field whose exponent bits (exp) are all ones; *any
 * gets the OR of every field's bits but the sign. Branch-free (a one-field layout reads its field
 * twice), so the compiler can vectorize it. */
static bool any_bad16(const uint8_t *p, int64_t count, const block_layout *b, uint16_t exp, uint16_t *any)
{
    uint16_t bits = 0;
    int bad = 0;
    if (b->bytes == 2) { /* dense F16/BF16: a plain array, which vectorizes best on its own */
#pragma omp simd reduction(| : bits, bad)
        for (int64_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            bits |= h & 0x7fff;
            bad |= (h & exp) == exp;
        }
        *any |= bits;
        return bad;
    }
    size_t stride = (size_t)b->bytes, o0 = (size_t)b->off[0], o1 = (size_t)b->off[b->fields - 1];
#pragma omp simd reduction(| : bits, bad)
    for (int64_t i = 0; i < count; i++) {
        uint16_t h0, h1;
        memcpy(&h0, p + (size_t)i * stride + o0, 2);
        memcpy(&h1, p + (size_t)i * stride + o1, 2);
        bits |= (h0 | h1) & 0x7fff;
        bad |= ((h0 & exp) == exp) | ((h1 & exp) == exp);
    }
    *any |= bits;
    return bad;
}

/* count blocks of b->bytes bytes, each with the 16-bit fields at b->off[]; exp: the exponent mask.
 * Chunks are scanned without branches; a chunk with a bad value is scanned again to find it. */
static void scan16(const uint8_t *p, int64_t count, const block_layout *b, uint16_t exp, bool bf16, scan *s)
{
    const int64_t chunk = 4096;
    uint16_t any = 0;
    *s = (scan){.bad = -1};
    for (int64_t c0 = 0; c0 < count; c0 += chunk) {
        int64_t n = count - c0 < chunk ? count - c0 : chunk;
        if (!any_bad16(p + c0 * b->bytes, n, b, exp, &any)) continue;
        for (int64_t i = c0; i < c0 + n; i++)
            for (int k = 0; k < b->fields; k++) {
                uint16_t h;
                memcpy(&h, p + i * b->bytes + b->off[k], 2);
                if ((h & exp) != exp) continue;
                *s = (scan){i, k, bf16 ? quant_bf16_to_f32(h) : quant_f16_to_f32(h), false};
                return;
            }
    }
    s->zero = any == 0;
}

/* The same for n fp32 values. */
static void scan32(const uint8_t *p, int64_t n, scan *s)
{
    const int64_t chunk = 4096;
    uint32_t any = 0;
    *s = (scan){.bad = -1};
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        int64_t m = n - c0 < chunk ? n - c0 : chunk;
        int bad = 0;
#pragma omp simd reduction(| : any, bad)
        for (int64_t i = c0; i < c0 + m; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            any |= u & 0x7fffffffu;
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        for (int64_t i = c0; bad && i < c0 + m; i++) {
            float f;
            memcpy(&f, p + 4 * i, 4);
            if (isfinite(f)) continue;
            *s = (scan){i, 0, f, false};
            return;
        }
    }
    s->zero = any == 0;
}

static void scan64(const uint8_t *p, int64_t n, scan *s)
{
    bool any = false;
    *s = (scan){.bad = -1};
    for (int64_t i = 0; i < n; i++) {
        double d;
        memcpy(&d, p + 8 * i, 8);
        any |= d != 0.0;
        if (isfinite(d)) continue;
        *s = (scan){i, 0, d, false};
        return;
    }
    s->zero = !any;
}

static const char *number(double x)
{
    return isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf";
}

static const char fix[] = "the file is damaged (an interrupted download, a broken conversion or a bad disk): "
                          "download or convert the model again";

static pt_status bad_value(const char *file, const char *tensor, const char *type, const scan *s, int values,
                           int64_t cols)
{
    if (values == 1) {
        if (cols <= 0)
            return ERR(PT_ERR_USER, "%s: tensor %s (%s) holds %s at element %lld: %s", shown_text(file).s,
                       shown_text(tensor).s, type, number(s->value), (long long)s->bad, fix);
        return ERR(PT_ERR_USER, "%s: tensor %s (%s) holds %s at element %lld (row %lld, column %lld): %s",
                   shown_text(file).s, shown_text(tensor).s, type, number(s->value), (long long)s->bad,
                   (long long)(s->bad / cols), (long long)(s->bad % cols), fix);
    }
    int64_t first = s->bad * values;
    return ERR(PT_ERR_USER,
               "%s: tensor %s (%s) holds %s in the fp16 %s of block %lld (its values %lld to %lld, row "
               "%lld): %s",
               shown_text(file).s, shown_text(tensor).s, type, number(s->value), s->field ? "min" : "scale",
               (long long)s->bad, (long long)first, (long long)(first + values - 1),
               (long long)(cols > 0 ? first / cols : 0), fix);
}

/* Count a matrix, zero or not, by its role. */
static void tally_zero(weight_tally *t, const char *tensor, weight_role role, bool zero)
{
    if (role == WEIGHT_VECTOR) return;
    if (role == WEIGHT_EMBEDDING) {
        if (zero && !t->zero_embedding[0]) snprintf(t->zero_embedding, sizeof t->zero_embedding, "%s", tensor);
        return;
    }
    t->projections++;
    if (zero && t->zero_projections < WEIGHT_ZERO_NAMED)
        snprintf(t->zero_names[t->zero_projections], sizeof t->zero_names[0], "%s", tensor);
    t->zero_projections += zero;
}

void weight_tally_init(weight_tally *t, const char *model, int vocab)
{
    memset(t, 0, sizeof *t);
    t->model = model;
    t->vocab = vocab;
}

pt_status weight_check(weight_tally *t, const char *file, const char *tensor, weight_role role, pt_dtype dtype,
                       const void *data, int64_t n, int64_t cols)
{
    scan s;
    block_layout b = {.values = 1};
    if (dtype == PT_F32) scan32(data, n, &s);
    else if (layout_of(dtype, &b) && n % b.values == 0)
        scan16(data, n / b.values, &b, dtype == PT_BF16 ? 0x7f80 : 0x7c00, dtype == PT_BF16, &s);
    else
        return PT_OK; /* NF4 and unknown types: nothing to scan here */
    if (s.bad >= 0) return bad_value(file, tensor, dtype_name(dtype), &s, b.values, cols);
    tally_zero(t, tensor, role, s.zero);
    return PT_OK;
}

pt_status weight_check_st(weight_tally *t, const char *file, const char *tensor, weight_role role, st_dtype dtype,
                          const void *data, int64_t n, int64_t cols)
{
    if (dtype == ST_F32) return weight_check(t, file, tensor, role, PT_F32, data, n, cols);
    if (dtype == ST_F16) return weight_check(t, file, tensor, role, PT_F16, data, n, cols);
    if (dtype == ST_BF16) return weight_check(t, file, tensor, role, PT_BF16, data, n, cols);
    if (dtype != ST_F64) return PT_OK;
    scan s;
    scan64(data, n, &s);
    if (s.bad >= 0) return bad_value(file, tensor, "F64", &s, 1, cols);
    tally_zero(t, tensor, role, s.zero);
    return PT_OK;
}

/* An fp32 part of an NF4 weight (quant_map, absmax, ...): every value must be finite. */
static pt_status nf4_part(const char *file, const char *tensor, const char *part, const float *v, int64_t n,
                          bool *zero)
{
    scan s;
    scan32((const uint8_t *)v, n, &s);
    if (s.bad >= 0)
        return ERR(PT_ERR_USER, "%s: %s.%s[%lld] is %s (bitsandbytes NF4): %s", shown_text(file).s,
                   shown_text(tensor).s, part, (long long)s.bad, number(s.value), fix);
    if (zero) *zero = s.zero;
    return PT_OK;
}

pt_status weight_check_nf4(weight_tally *t, const char *file, const char *tensor, const weight_nf4 *w)
{
    bool zero_map, zero_abs = true;
    TRY(nf4_part(file, tensor, "quant_map", w->qmap, 16, &zero_map));
    if (!w->codes) {
        TRY(nf4_part(file, tensor, "absmax", w->nabs, w->nblocks, &zero_abs));
    } else {
        int64_t groups = (w->nblocks + w->nested_blocksize - 1) / w->nested_blocksize;
        TRY(nf4_part(file, tensor, "nested_quant_map", w->nmap, 256, NULL));
        TRY(nf4_part(file, tensor, "nested_absmax", w->nabs, groups, NULL));
        for (int64_t b = 0; b < w->nblocks && zero_abs; b++) /* as bitsandbytes dequantizes absmax */
            zero_abs = w->nmap[w->codes[b]] * w->nabs[b / w->nested_blocksize] + w->offset == 0.0f;
    }
    tally_zero(t, tensor, WEIGHT_PROJECTION, zero_map || zero_abs);
    return PT_OK;
}

pt_status weight_verdict(const weight_tally *t)
{
    double uniform = log((double)(t->vocab > 1 ? t->vocab : 2));
    if (t->zero_embedding[0])
        return ERR(PT_ERR_USER,
                   "%s: tensor %s is all zeros: every input would give the same output and training "
                   "would stay at loss = ln(vocab) = %.4f; %s",
                   shown_text(t->model).s, shown_text(t->zero_embedding).s, uniform, fix);
    if (t->projections > 0 && t->zero_projections == t->projections)
        return ERR(PT_ERR_USER,
                   "%s: every projection matrix (%d, e.g. %s) is all zeros: the model is a placeholder or "
                   "damaged and would train at about loss = ln(vocab) = %.4f; %s",
                   shown_text(t->model).s, t->projections, shown_text(t->zero_names[0]).s, uniform, fix);
    for (int i = 0; i < t->zero_projections && i < WEIGHT_ZERO_NAMED; i++)
        log_warn("%s: tensor %s is all zeros: that projection contributes nothing (its LoRA adapter still trains); "
                 "is the file damaged?", shown_text(t->model).s, shown_text(t->zero_names[i]).s);
    if (t->zero_projections > WEIGHT_ZERO_NAMED)
        log_warn("%s: %d more projection matrices are all zeros", shown_text(t->model).s,
                 t->zero_projections - WEIGHT_ZERO_NAMED);
    return PT_OK;
}

/* ---- GGUF ---- */

static pt_status check_named(weight_tally *t, const gguf_file *f, const char *name, weight_role role)
{
    const gguf_tensor *g = gguf_find_tensor(f, name);
    if (!g || g->dtype == PT_DTYPE_COUNT) return PT_OK; /* the loader reports what it cannot use */
    int64_t n = 1;
    for (uint32_t i = 0; i < g->n_dims; i++) n *= (int64_t)g->dims[i];
    if (dtype_size_bytes(g->dtype, n) != g->nbytes) return PT_OK;
    return weight_check(t, f->path, name, role, g->dtype, g->data, n, g->n_dims > 1 ? (int64_t)g->dims[0] : 0);
}

pt_status weight_check_gguf(const gguf_file *f, const pt_model_config *c, weight_tally *t)
{
    weight_tally_init(t, f->path, c->vocab);
    TRY(check_named(t, f, "token_embd.weight", WEIGHT_EMBEDDING));
    TRY(check_named(t, f, "output.weight", WEIGHT_EMBEDDING));
    TRY(check_named(t, f, "output_norm.weight", WEIGHT_VECTOR));
    TRY(check_named(t, f, "rope_freqs.weight", WEIGHT_VECTOR));
    for (int l = 0; l < c->n_layers; l++)
        for (int slot = 0; slot < W_COUNT; slot++) {
            char name[96];
            int lead;
            int64_t row0, all;
            if (!model_gguf_tensor_name(c, l, slot, name, sizeof name, NULL)) continue;
            if (model_fused_part(c, slot, &lead, &row0, &all) && lead != slot) continue; /* a fused weight once */
            bool matrix = slot == W_Q || slot == W_K || slot == W_V || slot == W_O || slot == W_GATE ||
                          slot == W_UP || slot == W_DOWN;
            TRY(check_named(t, f, name, matrix ? WEIGHT_PROJECTION : WEIGHT_VECTOR));
        }
    static const char *const experts[] = {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int l = 0; l < c->n_layers; l++) /* a mixture of experts' router and experts (llama.cpp's 3-D tensors) */
        for (size_t i = 0; model_layer_moe(c, l) && i < sizeof experts / sizeof experts[0]; i++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, experts[i]);
            TRY(check_named(t, f, name, WEIGHT_PROJECTION));
        }
    return PT_OK;
}
