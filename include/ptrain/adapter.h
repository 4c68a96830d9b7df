/* adapter.h — LoRA adapters on disk as HDF5 (docs/adapter-format.md): rank 0 writes the final
 * adapter to final_model_dir/adapter.h5 atomically (temp file in the same directory, flush, fsync,
 * rename, fsync of the directory), and `ptrain generate --adapter DIR` reads it back. */
#ifndef PTRAIN_ADAPTER_H
#define PTRAIN_ADAPTER_H

#include "ptrain/lora.h"

typedef struct {
    const char *base_model;    /* the model file the adapter was trained on */
    const char *base_name;     /* the model as the config names it (HF id or path); may be NULL */
    const char *chat_template; /* template name used for training, or NULL */
    double lora_dropout;
    bool use_rslora;
    int64_t best_step; /* load_best_model_at_end: the step whose checkpoint this is; -1: the last */
} adapter_info;

/* The PEFT name of layer's projection w, matrix which ('A' or 'B'):
 * base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight */
void adapter_tensor_name(char *out, size_t len, int layer, int w, char which);
/* Write l into dir/adapter.h5 (dir is created if missing). */
pt_status adapter_save(const char *dir, const pt_lora *l, const adapter_info *info);
/* Read an adapter onto model m; shapes must match m. path is a ptrain adapter (dir/adapter.h5, or
 * the .h5 itself), a PEFT adapter directory (adapter_config.json + adapter_model.safetensors;
 * peft.h), a llama.cpp adapter (.gguf; export.h), or a training checkpoint (checkpoint-N.h5: its
 * adapters). A directory is read from adapter.h5, else its PEFT files, else adapter.gguf. The
 * adapters carry no gradients or optimizer state (lora_create_frozen). */
pt_status adapter_load(const char *path, const pt_model *m, pt_lora *l);

#endif
