/* spm_proto.c — reading a SentencePiece tokenizer.model (spm_proto.h): protobuf's wire format
 * (varints, fixed 32/64-bit values, length-delimited strings and messages) walked field by field,
 * the fields of sentencepiece_model.proto that a tokenizer needs stored by a table per message,
 * every other field skipped. Nothing is trusted: a length that runs past its message, a varint
 * of more than 10 bytes, a group or an unknown wire type, a known field of the wrong wire type,
 * and a piece type or model type out of range are errors naming the file, the byte offset and
 * the field. No protobuf library: Debian has none for C that would be worth a dependency here. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm_proto.h"

#define SPM_MAX_PIECES (1 << 24)
#define SPM_MAX_FILE ((size_t)256 << 20) /* SentencePiece models are a few MB */

typedef struct {
    spm_model *m;
    const uint8_t *buf;
    size_t pos, end;  /* the message being read is buf[pos, end) */
    char where[48];   /* its name in messages: "trainer_spec", "pieces[3]" */
} pb_reader;

typedef struct {
    uint32_t num, wire;
    size_t key_at, at; /* offsets of the field's key and of its value */
    uint64_t v;        /* a varint or fixed value, or the length of a length-delimited one */
} pb_field;

enum { K_STR, K_I32, K_BOOL, K_F32, K_MSG };
typedef struct {
    uint32_t num;
    uint8_t kind;
    const char *name;
    size_t off; /* in the struct the message is read into */
} pb_spec;

static const pb_spec piece_fields[] = {
    {1, K_STR, "piece", offsetof(spm_piece, text)},
    {2, K_F32, "score", offsetof(spm_piece, score)},
    {3, K_I32, "type", offsetof(spm_piece, type)},
};
static const pb_spec trainer_fields[] = {
    {3, K_I32, "model_type", offsetof(spm_model, model_type)},
    {35, K_BOOL, "byte_fallback", offsetof(spm_model, byte_fallback)},
    {40, K_I32, "unk_id", offsetof(spm_model, unk_id)},
    {41, K_I32, "bos_id", offsetof(spm_model, bos_id)},
    {42, K_I32, "eos_id", offsetof(spm_model, eos_id)},
    {43, K_I32, "pad_id", offsetof(spm_model, pad_id)},
    {45, K_STR, "unk_piece", offsetof(spm_model, unk_piece)},
    {46, K_STR, "bos_piece", offsetof(spm_model, bos_piece)},
    {47, K_STR, "eos_piece", offsetof(spm_model, eos_piece)},
    {48, K_STR, "pad_piece", offsetof(spm_model, pad_piece)},
};
static const pb_spec model_fields[] = {
    {1, K_MSG, "pieces", 0},
    {2, K_MSG, "trainer_spec", 0},
    {3, K_MSG, "normalizer_spec", 0},
};
static const pb_spec normalizer_fields[] = {
    {1, K_STR, "name", offsetof(spm_model, norm_name)},
    {2, K_STR, "precompiled_charsmap", offsetof(spm_model, charsmap)},
    {3, K_BOOL, "add_dummy_prefix", offsetof(spm_model, add_dummy_prefix)},
    {4, K_BOOL, "remove_extra_whitespaces", offsetof(spm_model, remove_extra_whitespaces)},
    {5, K_BOOL, "escape_whitespaces", offsetof(spm_model, escape_whitespaces)},
};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

__attribute__((format(printf, 4, 5))) static pt_status pb_fail(const pb_reader *r, size_t at, const char *field,
                                                               const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char place[128];
    const char *msg_name = *r->where ? r->where : "ModelProto";
    snprintf(place, sizeof place, "%s%s%s", msg_name, *field ? "." : "", field);
    return ERR(PT_ERR_USER, "%s: byte %zu: %s: %s; the file is damaged or not a SentencePiece model: download the "
               "model's tokenizer.model again", shown_text(r->m->source).s, at, place, msg);
}

/* A varint at buf[*pos, end): 0, or 1 when it runs past end, or 2 when it is longer than 10 bytes. */
static int pb_varint(const uint8_t *buf, size_t *pos, size_t end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= end) return 1;
        uint8_t c = buf[(*pos)++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return 2;
}

static pt_status pb_value(pb_reader *r, pb_field *f, const char *label)
{
    static const size_t fixed[8] = {0, 8, 0, 0, 0, 4, 0, 0};
    if (f->wire == 3 || f->wire == 4)
        return pb_fail(r, f->key_at, label, "a group (wire type %u), which SentencePiece models do not use", f->wire);
    if (f->wire > 5) return pb_fail(r, f->key_at, label, "wire type %u does not exist", f->wire);
    if (f->wire == 0 || f->wire == 2) {
        int rc = pb_varint(r->buf, &r->pos, r->end, &f->v);
        if (rc) return pb_fail(r, f->at, label, rc == 1 ? "the value is cut off" : "a varint longer than 10 bytes");
    }
    if (f->wire == 2) {
        if (f->v > r->end - r->pos)
            return pb_fail(r, f->at, label, "a length of %llu bytes runs past the end of its message (%zu bytes left)",
                           (unsigned long long)f->v, r->end - r->pos);
        f->at = r->pos;
        r->pos += (size_t)f->v;
    } else if (fixed[f->wire]) {
        if (fixed[f->wire] > r->end - r->pos) return pb_fail(r, f->at, label, "the value is cut off");
        f->v = 0;
        for (size_t i = fixed[f->wire]; i-- > 0;) f->v = f->v << 8 | r->buf[r->pos + i];
        r->pos += fixed[f->wire];
    }
    return PT_OK;
}

static const pb_spec *pb_find(const pb_spec *specs, size_t n, uint32_t num)
{
    for (size_t i = 0; i < n; i++)
        if (specs[i].num == num) return &specs[i];
    return NULL;
}

/* The next field of the message (whose fields specs names) into *f; *done when it has no more. */
static pt_status pb_next(pb_reader *r, pb_field *f, bool *done, const pb_spec *specs, size_t n)
{
    *done = r->pos >= r->end;
    if (*done) return PT_OK;
    uint64_t key;
    f->key_at = r->pos;
    int rc = pb_varint(r->buf, &r->pos, r->end, &key);
    if (rc) return pb_fail(r, f->key_at, "", rc == 1 ? "a field key is cut off" : "a field key longer than 10 bytes");
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return pb_fail(r, f->key_at, "", "field number %llu is not valid", (unsigned long long)(key >> 3));
    f->num = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    f->at = r->pos;
    char label[40];
    const pb_spec *known = pb_find(specs, n, f->num);
    if (known) snprintf(label, sizeof label, "%s", known->name);
    else snprintf(label, sizeof label, "field %u", f->num);
    return pb_value(r, f, label);
}

/* Store a known field's value into base per s. */
static pt_status pb_store(pb_reader *r, const pb_spec *s, const pb_field *f, void *base)
{
    static const uint32_t wire_of[] = {2, 0, 0, 5, 2};
    static const char *const what[] = {"a string", "an integer", "a boolean", "a float", "a message"};
    if (f->wire != wire_of[s->kind])
        return pb_fail(r, f->key_at, s->name, "expected %s (wire type %u), found wire type %u", what[s->kind],
                       wire_of[s->kind], f->wire);
    if (s->kind == K_MSG) return PT_OK; /* the caller reads it */
    char *dst = (char *)base + s->off;
    if (s->kind == K_STR) *(spm_str *)dst = (spm_str){(const char *)r->buf + f->at, (size_t)f->v};
    else if (s->kind == K_I32) *(int32_t *)dst = (int32_t)(uint32_t)f->v; /* int32: the low 32 bits */
    else if (s->kind == K_BOOL) *(bool *)dst = f->v != 0;
    else {
        uint32_t bits = (uint32_t)f->v;
        memcpy(dst, &bits, 4);
    }
    return PT_OK;
}

/* A message's fields per specs into base (unknown fields skipped). */
static pt_status pb_message(pb_reader *r, const pb_spec *specs, size_t n, void *base)
{
    for (;;) {
        pb_field f;
        bool done;
        TRY(pb_next(r, &f, &done, specs, n));
        if (done) return PT_OK;
        const pb_spec *s = pb_find(specs, n, f.num);
        if (s) TRY(pb_store(r, s, &f, base));
    }
}

/* A reader of the message f holds, named name (name[index] unless index is SIZE_MAX). */
static pb_reader pb_sub(const pb_reader *r, const pb_field *f, const char *name, size_t index)
{
    pb_reader sub = {r->m, r->buf, f->at, f->at + (size_t)f->v, ""};
    if (index == SIZE_MAX) snprintf(sub.where, sizeof sub.where, "%s", name);
    else snprintf(sub.where, sizeof sub.where, "%s[%zu]", name, index);
    return sub;
}

static pt_status pb_piece(pb_reader *r, const pb_field *f)
{
    spm_model *m = r->m;
    if (m->n_pieces >= SPM_MAX_PIECES) return pb_fail(r, f->key_at, "pieces", "more than %d pieces", SPM_MAX_PIECES);
    size_t n = m->n_pieces;
    if (n == 0 || (n >= 1024 && (n & (n - 1)) == 0)) { /* room for 1024, then doubled at each power of two */
        spm_piece *grown = realloc(m->pieces, (n ? 2 * n : 1024) * sizeof *grown);
        TRY_ALLOC(grown);
        m->pieces = grown;
    }
    spm_piece *p = &m->pieces[m->n_pieces];
    *p = (spm_piece){{"", 0}, 0.0f, SPM_NORMAL};
    pb_reader sub = pb_sub(r, f, "pieces", m->n_pieces);
    TRY(pb_message(&sub, piece_fields, N_OF(piece_fields), p));
    if (p->type < SPM_NORMAL || p->type > SPM_BYTE)
        return pb_fail(&sub, f->at, "type", "%d is not a piece type (1 normal, 2 unknown, 3 control, 4 user-defined, "
                       "5 unused, 6 byte)", p->type);
    m->n_pieces++;
    return PT_OK;
}

/* One top-level field of the ModelProto. */
static pt_status pb_model_field(pb_reader *r, const pb_field *f)
{
    const pb_spec *s = pb_find(model_fields, N_OF(model_fields), f->num);
    if (!s) return PT_OK;
    TRY(pb_store(r, s, f, NULL));
    if (f->num == 1) return pb_piece(r, f);
    pb_reader sub = pb_sub(r, f, s->name, SIZE_MAX);
    if (f->num == 3) return pb_message(&sub, normalizer_fields, N_OF(normalizer_fields), r->m);
    TRY(pb_message(&sub, trainer_fields, N_OF(trainer_fields), r->m));
    if (r->m->model_type < SPM_UNIGRAM || r->m->model_type > SPM_CHAR)
        return pb_fail(&sub, f->at, "model_type", "%d is not a model type (1 unigram, 2 BPE, 3 word, 4 char)",
                       r->m->model_type);
    return PT_OK;
}

static void spm_defaults(spm_model *m, const char *source)
{
    *m = (spm_model){0};
    m->source = strdup(source);
    m->model_type = SPM_UNIGRAM;
    m->unk_id = 0, m->bos_id = 1, m->eos_id = 2, m->pad_id = -1;
    m->unk_piece = (spm_str){"<unk>", 5};
    m->bos_piece = (spm_str){"<s>", 3};
    m->eos_piece = (spm_str){"</s>", 4};
    m->pad_piece = (spm_str){"<pad>", 5};
    m->add_dummy_prefix = m->remove_extra_whitespaces = m->escape_whitespaces = true;
}

pt_status spm_model_parse(const char *source, const uint8_t *data, size_t size, spm_model *out)
{
    spm_defaults(out, source);
    TRY_ALLOC(out->source);
    pb_reader r = {out, data, 0, size, ""};
    pt_status rc = PT_OK;
    for (bool done = false; rc == PT_OK && !done;) {
        pb_field f;
        rc = pb_next(&r, &f, &done, model_fields, N_OF(model_fields));
        if (rc == PT_OK && !done) rc = pb_model_field(&r, &f);
    }
    if (rc == PT_OK && out->n_pieces == 0)
        rc = pb_fail(&r, size, "pieces", "the file has no pieces (%zu bytes read)", size);
    if (rc != PT_OK) spm_model_free(out);
    return rc;
}

static pt_status spm_slurp(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ERR(PT_ERR_USER, "%s: cannot open: %s", shown_text(path).s, strerror(errno));
    uint8_t *buf = malloc(SPM_MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, SPM_MAX_FILE + 1, f) : 0;
    bool bad = buf && ferror(f);
    fclose(f);
    if (!buf) return ERR(PT_ERR_NOMEM, "out of memory");
    if (bad || n > SPM_MAX_FILE) {
        free(buf);
        return bad ? ERR(PT_ERR_USER, "%s: cannot read: %s", shown_text(path).s, strerror(errno ? errno : EIO))
                   : ERR(PT_ERR_USER, "%s: larger than 256 MiB, which no SentencePiece model is", shown_text(path).s);
    }
    uint8_t *shrunk = realloc(buf, n ? n : 1);
    *data = shrunk ? shrunk : buf;
    *size = n;
    return PT_OK;
}

pt_status spm_model_read(const char *path, spm_model *out)
{
    uint8_t *data = NULL;
    size_t size = 0;
    *out = (spm_model){0};
    TRY(spm_slurp(path, &data, &size));
    pt_status rc = spm_model_parse(path, data, size, out);
    if (rc != PT_OK) {
        free(data);
        return rc;
    }
    out->data = data;
    return PT_OK;
}

void spm_model_free(spm_model *m)
{
    free(m->pieces);
    free(m->source);
    free(m->data);
    *m = (spm_model){0};
}
