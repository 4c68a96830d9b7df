/* adapter_load.c — the front door for reading any adapter: adapter.h5, a PEFT directory,
 * adapter.gguf, or the adapters inside a training checkpoint, told apart by what the path is. */
#include "adapter_internal.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint_internal.h"
#include "ptrain/peft.h"

/* The adapter of a training checkpoint (checkpoint-N.h5): its LoRA settings from the metadata, its
 * matrices from the params group (the optimizer's moments are left in the file). */
static pt_status ckpt_settings(const char *path, const pt_model *m, pt_adapter *l)
{
    ckpt_state meta = {0};
    TRY(ckpt_verify(path));
    TRY(ckpt_read_meta(path, &meta));
    bool target[W_COUNT];
    adapter_targets_parse(m->cfg.arch, meta.target_modules, target);
    pt_status st = PT_OK;
    if (meta.lora_init[0])
        st = ERR(PT_ERR_USER, "%s: the checkpoint's adapters were trained with init_lora_weights %s, on the residual "
                 "base (the weights minus their start), not on the model as loaded; resume training from it, or use "
                 "the final directory's adapter (converted for the original model)", shown_text(path).s,
                 shown_text(meta.lora_init).s);
    if (st == PT_OK && meta.lora_layers != m->cfg.n_layers)
        st = ERR(PT_ERR_USER, "%s: the checkpoint's adapters have %lld layers, the model %d; was it trained on another "
                 "model?", shown_text(path).s, (long long)meta.lora_layers, m->cfg.n_layers);
    if (st == PT_OK)
        st = adapter_create_select(l, m, (int)meta.lora_r, (float)meta.lora_alpha, meta.use_rslora, target,
                                   meta.lora_select[0] ? meta.lora_select : NULL, shown_text(path).s, NULL);
    for (adapter_pair *p = adapter_next(l, NULL); st == PT_OK && meta.use_dora && p; p = adapter_next(l, p))
        if (!(p->mag = calloc((size_t)p->b.shape[0], sizeof(float)))) st = ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) l->dora = meta.use_dora; /* DoRA: the layout has each pair's magnitudes after A and B */
    else if (l->pairs) adapter_free(l);
    ckpt_state_free(&meta);
    return st;
}

/* Which of modules_to_save's weights the checkpoint holds (after the adapters; train_ckpt.c). */
static void ckpt_saved(const char *path, bool has[2])
{
    has[0] = has[1] = false;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    for (int i = 0; i < 2 && file >= 0; i++) {
        char name[192];
        snprintf(name, sizeof name, "%s/%s", CKPT_PARAMS, adapter_saved_tensor(i));
        has[i] = H5Lexists(file, CKPT_PARAMS, H5P_DEFAULT) > 0 && H5Lexists(file, name, H5P_DEFAULT) > 0;
    }
    if (file >= 0) H5Fclose(file);
}

static pt_status ckpt_load(const char *path, const pt_model *m, pt_adapter *l)
{
    TRY(ckpt_settings(path, m, l));
    ckpt_layout lay;
    ckpt_state s = {0};
    bool has[2];
    ckpt_saved(path, has);
    pt_status st = adapter_layout(l, &lay);
    int64_t at[2] = {-1, -1}, rows = m->tok_embd.shape[0], cols = m->tok_embd.shape[1];
    for (int i = 0; i < 2 && st == PT_OK; i++) { /* modules_to_save: read with the matrices */
        if (!has[i]) continue;
        ckpt_entry *e = realloc(lay.e, sizeof *e * (size_t)(lay.n + 1));
        if (!e) {
            st = ERR(PT_ERR_NOMEM, "out of memory");
            break;
        }
        lay.e = e, e += lay.n++;
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", adapter_saved_tensor(i));
        e->rows = rows, e->cols = cols, e->offset = at[i] = lay.total;
        lay.total += rows * cols;
    }
    if (st == PT_OK) st = ckpt_read(path, &lay, &s);
    for (int i = 0; i < 2 && st == PT_OK; i++) {
        if (at[i] < 0) continue;
        int64_t shape[2] = {rows, cols};
        l->saved[i] = tensor_make(PT_F32, 2, shape);
        st = backend_alloc(l->be, &l->saved[i]);
        if (st == PT_OK) st = backend_upload(l->be, &l->saved[i], s.params + at[i], l->saved[i].nbytes);
    }
    adapter_pair *p = NULL;
    int per = l->dora ? 3 : 2;
    for (int i = 0; st == PT_OK && i < lay.n - has[0] - has[1]; i++) {
        const ckpt_entry *e = &lay.e[i];
        p = i % per == 0 ? adapter_next(l, p) : p;
        if (i % per == 2) { /* DoRA's magnitudes, on the host until first used (adapter_dora_part) */
            memcpy(p->mag, s.params + e->offset, sizeof(float) * (size_t)p->b.shape[0]);
            continue;
        }
        pt_tensor *t = i % per ? &p->b : &p->a;
        st = backend_upload(l->be, t, s.params + e->offset, t->nbytes);
    }
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
    if (st != PT_OK) adapter_free(l);
    return st;
}

/* adapter_gguf_load, but a qwen35 model's llama.cpp adapter is refused: its GGUF names are not built */
static pt_status gguf_load(const char *path, const pt_model *m, pt_adapter *l)
{
    TRY(model_refuse_gated_delta(&m->cfg, "a llama.cpp adapter (.gguf)"));
    TRY(arch_check_supported(m->cfg.arch, "a llama.cpp adapter (.gguf)")); /* gemma4 */
    return adapter_gguf_load(path, m, l);
}

pt_status adapter_load(const char *path, const pt_model *m, pt_adapter *l)
{
    char file_path[4096];
    struct stat sb;
    memset(l, 0, sizeof *l);
    bool is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (is_dir)
        snprintf(file_path, sizeof file_path, "%s/adapter.h5", path);
    else
        snprintf(file_path, sizeof file_path, "%s", path);
    if (is_dir && stat(file_path, &sb) != 0 && peft_is_adapter_dir(path)) return peft_load(path, m, l);
    if (is_dir && stat(file_path, &sb) != 0) { /* only a llama.cpp adapter? */
        char gguf[4200];
        snprintf(gguf, sizeof gguf, "%s/adapter.gguf", path);
        if (stat(gguf, &sb) == 0) return gguf_load(gguf, m, l);
    }
    const char *leaf = strrchr(file_path, '/') ? strrchr(file_path, '/') + 1 : file_path;
    size_t leaf_len = strlen(leaf);
    if (leaf_len > 5 && !strcmp(leaf + leaf_len - 5, ".gguf")) return gguf_load(file_path, m, l);
    if (ckpt_is_checkpoint(file_path)) return ckpt_load(file_path, m, l);
    if (!strcmp(leaf, "adapter_config.json") || !strcmp(leaf, "adapter_model.safetensors")) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", (int)(leaf - file_path > 1 ? leaf - file_path - 1 : leaf - file_path), file_path);
        return peft_load(dir[0] ? dir : ".", m, l);
    }
    if (stat(file_path, &sb) != 0)
        return ERR(PT_ERR_USER, "adapter %s not found: %s (give the final_model_dir of a ptrain run, or a PEFT "
                   "adapter directory)", shown_text(file_path).s, strerror(errno));
    return adapter_h5_load(file_path, m, l);
}
