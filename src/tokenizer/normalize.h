/* normalize.h — the Unicode normalizers of Hugging Face `tokenizers` that need tables: NFC, NFD,
 * NFKC and NFKD (utf8proc), and "Precompiled", SentencePiece's normalization rules compiled into
 * a precompiled_charsmap (a double-array trie of UTF-8 keys and a blob of NUL-terminated
 * replacements), applied as tokenizers applies it: grapheme by grapheme, then character by
 * character. Also the base64 that tokenizer.json stores the charsmap in. Inputs are valid UTF-8;
 * outputs are malloc'd and NUL-terminated. */
#ifndef PTRAIN_NORMALIZE_H
#define PTRAIN_NORMALIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

typedef enum { UNORM_NFC, UNORM_NFD, UNORM_NFKC, UNORM_NFKD } unorm_form;

/* The form a tokenizer.json normalizer type names ("NFC", "NFD", "NFKC", "NFKD"); false if none. */
bool unorm_from_name(const char *name, unorm_form *out);
/* s[0, len) in the form into *out / *out_len. */
pt_status unorm_apply(unorm_form form, const char *s, size_t len, char **out, size_t *out_len);

typedef struct charsmap charsmap;

/* A charsmap from its bytes (copied): a little-endian uint32 trie size in bytes, the trie's
 * uint32 units, then the replacements (UTF-8). Errors name source and where. */
pt_status charsmap_load(const char *source, const char *where, const uint8_t *blob, size_t len, charsmap **out);
/* s[0, len) normalized by the charsmap into *out / *out_len. */
pt_status charsmap_apply(const charsmap *m, const char *s, size_t len, char **out, size_t *out_len);
/* The same, also mapping each output byte to an original offset as tokenizers' alignments do:
 * al gives the input bytes' (al[i]: the original start of byte i), *out_al (malloc'd, may be
 * NULL when the output is empty) the output's. */
pt_status charsmap_apply_aligned(const charsmap *m, const char *s, size_t len, const uint32_t *al, char **out,
                                 size_t *out_len, uint32_t **out_al);
void charsmap_free(charsmap *m);

/* Standard base64 (with its padding, as tokenizers writes it) into *out (malloc'd) / *out_len. */
pt_status base64_decode(const char *source, const char *where, const char *s, size_t len, uint8_t **out,
                        size_t *out_len);

#endif
