/* gguf_meta_main.c — test driver for gguf_meta_from_hf: writes the metadata of the Hugging Face
 * model directory DIR (config.json + tokenizer files) as a GGUF file with no tensors, which
 * llama.cpp can load with vocab_only (tests/export/gguf_meta_check.py compares its tokenization
 * with transformers').
 *   usage: gguf_meta_main DIR OUT.gguf [NAME]
 * Exit status 0, or the pt_status of the failure with its message on stderr. */
#include <stdio.h>

#include "ptrain/gguf_meta.h"

static pt_status write_meta(const char *dir, const char *out, const char *name)
{
    char path[4200];
    hf_config hc;
    snprintf(path, sizeof path, "%s/config.json", dir);
    TRY(hf_config_read(path, &hc));
    gguf_writer *w = NULL;
    TRY(gguf_writer_new(&w));
    pt_status st = gguf_meta_from_hf(w, dir, &hc, name);
    if (st == PT_OK) st = gguf_w_u32(w, "general.file_type", 0); /* the caller's key: all f32 */
    if (st == PT_OK) st = gguf_w_begin(w, out);
    if (st == PT_OK) st = gguf_w_finish(w);
    gguf_writer_free(w);
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s DIR OUT.gguf [NAME]\n", argv[0]);
        return PT_ERR_USAGE;
    }
    pt_status st = write_meta(argv[1], argv[2], argc == 4 ? argv[3] : NULL);
    if (st != PT_OK) fprintf(stderr, "error: %s\n", err_message());
    return (int)st;
}
