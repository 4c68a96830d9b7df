/* gguf_methods.c — the quantization methods a merged GGUF can be written with, by the names users
 * write in quantization_method and `ptrain export --gguf` (llama.cpp's quantize names, and the
 * peer's not_quantized / fast_quantized / quantized), and the GGUF types each gives the base
 * tensors, the output and the layers llama.cpp keeps at more bits. Beside the GGUF reader, below
 * the config, so that the config check (and its fuzzer) knows the names without the exporter. */
#include <stddef.h>
#include <string.h>

#include "ptrain/gguf_methods.h"

static const gguf_method methods[] = {
    {"f32", GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, 0},
    {"f16", GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F16, 1},
    {"not_quantized", GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F16, 1},
    {"bf16", GGML_TYPE_BF16, GGML_TYPE_BF16, GGML_TYPE_BF16, 32},
    {"q8_0", GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 7},
    {"fast_quantized", GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 7},
    {"q4_0", GGML_TYPE_Q4_0, GGML_TYPE_Q6_K, GGML_TYPE_Q4_0, 2},
    {"q4_1", GGML_TYPE_Q4_1, GGML_TYPE_Q6_K, GGML_TYPE_Q4_1, 3},
    {"q5_0", GGML_TYPE_Q5_0, GGML_TYPE_Q6_K, GGML_TYPE_Q5_0, 8},
    {"q5_1", GGML_TYPE_Q5_1, GGML_TYPE_Q6_K, GGML_TYPE_Q5_1, 9},
    {"q4_k_s", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, 14},
    {"q4_k_m", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 15},
    {"quantized", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 15},
    {"q4_k", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 15},
    {"q5_k_s", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K, 16},
    {"q5_k_m", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 17},
    {"q5_k", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 17},
    {"q6_k", GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 18},
};

const gguf_method *gguf_method_find(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, name)) return &methods[i];
    return NULL;
}

bool gguf_method_known(const char *name) { return gguf_method_find(name) != NULL; }

const char *gguf_method_list(void)
{
    return "f32, f16 (not_quantized), bf16, q8_0 (fast_quantized), q4_0, q4_1, q5_0, q5_1, q4_k_s, q4_k_m "
           "(quantized), q5_k_s, q5_k_m, q6_k";
}
