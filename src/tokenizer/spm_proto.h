/* spm_proto.h — a SentencePiece model file (tokenizer.model: the ModelProto of
 * sentencepiece_model.proto in protobuf's wire format), read without a protobuf library into a
 * plain struct: the pieces (text, score, type), the trainer settings a tokenizer needs (model
 * type, byte fallback, the unk/bos/eos/pad ids and pieces) and the normalizer's (rule name,
 * precompiled charsmap, dummy prefix, whitespace handling). Fields not listed here are skipped.
 * Older Llama 2 and Mistral repositories ship only this file; the tokenizer (spm_model.c) builds
 * from it what transformers converts it to. */
#ifndef PTRAIN_SPM_PROTO_H
#define PTRAIN_SPM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

/* SentencePiece.Type and TrainerSpec.ModelType, as numbered in sentencepiece_model.proto */
enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER_DEFINED = 4, SPM_UNUSED = 5, SPM_BYTE = 6 };
enum { SPM_UNIGRAM = 1, SPM_BPE = 2, SPM_WORD = 3, SPM_CHAR = 4 };

typedef struct {
    const char *p; /* into the file's bytes (or a default's static text); not NUL-terminated */
    size_t len;
} spm_str;

typedef struct {
    spm_str text;
    float score;
    int32_t type; /* SPM_NORMAL .. SPM_BYTE */
} spm_piece;

typedef struct {
    char *source;  /* the file's name, for messages */
    uint8_t *data; /* the file's bytes, when spm_model_read read them (NULL for spm_model_parse) */
    spm_piece *pieces;
    size_t n_pieces;
    int32_t model_type; /* SPM_UNIGRAM .. SPM_CHAR; protobuf's default is SPM_UNIGRAM */
    bool byte_fallback;
    int32_t unk_id, bos_id, eos_id, pad_id;     /* -1: none (defaults 0, 1, 2, -1) */
    spm_str unk_piece, bos_piece, eos_piece, pad_piece; /* defaults <unk> <s> </s> <pad> */
    spm_str norm_name, charsmap;                /* the normalizer's rule name and precompiled_charsmap */
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces; /* default true */
} spm_model;

/* Read and parse the file at path. Errors name the file, the byte offset and the field. */
pt_status spm_model_read(const char *path, spm_model *out);
/* Parse size bytes at data (kept by the caller while out is used); source names it in errors. */
pt_status spm_model_parse(const char *source, const uint8_t *data, size_t size, spm_model *out);
void spm_model_free(spm_model *m);

#endif
