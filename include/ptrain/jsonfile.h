/* jsonfile.h — JSON files as Hugging Face writes them. transformers writes integers beyond int64
 * (a tokenizer without a length limit gets "model_max_length": 1000000000000000019884624838656),
 * which jansson refuses ("too big integer"); these loaders read such numbers as reals, every other
 * value as jansson does. Used for every JSON file ptrain reads from a model directory. */
#ifndef PTRAIN_JSONFILE_H
#define PTRAIN_JSONFILE_H

#include <jansson.h>
#include <stddef.h>

json_t *jsonfile_loadb(const char *text, size_t len, size_t flags, json_error_t *e);
json_t *jsonfile_load(const char *path, size_t flags, json_error_t *e);

#endif
