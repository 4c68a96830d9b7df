/* jsonfile.h — JSON files as Hugging Face writes them. transformers writes integers beyond int64
 * (a tokenizer without a length limit gets "model_max_length": 1000000000000000019884624838656),
 * which jansson refuses ("too big integer"); these loaders read such numbers as reals, every other
 * value as jansson does. Used for every JSON file ptrain reads from a model directory. */
#ifndef PTRAIN_JSONFILE_H
#define PTRAIN_JSONFILE_H

#include <jansson.h>
#include <stddef.h>

/* The largest JSON file ptrain reads: 4 times the largest tokenizer.json on the Hub (Gemma 3's,
 * 33 MB); a config.json is kilobytes. Nesting is bounded by jansson (JSON_PARSER_MAX_DEPTH, 2048). */
#define JSONFILE_MAX_BYTES ((size_t)128 << 20)

json_t *jsonfile_loadb(const char *text, size_t len, size_t flags, json_error_t *e);
/* The file at path; one larger than JSONFILE_MAX_BYTES is refused without reading it (NULL, e->text
 * "the file is larger than 128 MiB, the most ptrain reads of one JSON file", line -1). */
json_t *jsonfile_load(const char *path, size_t flags, json_error_t *e);

#endif
