/* gguf_methods.h — the quantization methods a merged GGUF can be written with (quantization_method,
 * `ptrain export --gguf`), and the GGUF types each gives the tensors (src/model/gguf_methods.c). */
#ifndef PTRAIN_GGUF_METHODS_H
#define PTRAIN_GGUF_METHODS_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/gguf.h"

typedef struct {
    const char *name;  /* as users write it (quantization_method) */
    uint32_t base;     /* the type of most 2-d tensors */
    uint32_t output;   /* output.weight (token_embd when tied) */
    uint32_t more;     /* attn_v / ffn_down of the layers llama.cpp gives more bits */
    uint32_t ftype;    /* general.file_type (llama_ftype) */
} gguf_method;

/* The method named name (as users write it), or NULL. */
const gguf_method *gguf_method_find(const char *name);
bool gguf_method_known(const char *name);
/* Their names, for messages. */
const char *gguf_method_list(void);

#endif
