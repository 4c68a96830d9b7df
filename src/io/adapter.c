/* adapter.c — the HDF5 adapter file, and the front door for reading any adapter (adapter.h5, a
 * PEFT directory, adapter.gguf, or the adapters inside a training checkpoint). One dataset per LoRA matrix, named as PEFT names it
 * (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight, [r, in]; lora_B [out, r]),
 * plus root attributes for the LoRA settings and the base model. Built in memory, written to a
 * temporary file in the same directory and renamed into place (h5util.c), so a crash never leaves
 * a half-written adapter. */
#include "ptrain/adapter.h"

#include "h5util.h"
#include "ptrain/checkpoint.h"
#include "ptrain/export.h"
#include "ptrain/resume.h"
#include "ptrain/peft.h"
#include "ptrain/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ADAPTER_FORMAT "ptrain-lora"
#define ADAPTER_VERSION 1

void adapter_tensor_name(char *out, size_t len, int layer, int w, char which)
{
    const char *block = w == W_GATE || w == W_UP || w == W_DOWN ? "mlp" : "self_attn";
    snprintf(out, len, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", layer, block, lora_module_name(w),
             which);
}

static pt_status write_matrix(hid_t file, const char *name, pt_backend *be, const pt_tensor *t)
{
    float *host = malloc(t->nbytes);
    TRY_ALLOC(host);
    pt_status st = backend_download(be, t, host, t->nbytes);
    if (st == PT_OK) st = h5_write_f32(file, name, t->shape[0], t->shape[1], host, false);
    free(host);
    return st;
}

static pt_status write_all(hid_t file, const pt_lora *l, const adapter_info *info)
{
    char targets[256] = "";
    for (int w = 0; w < W_COUNT; w++)
        if (l->target[w]) snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s",
                                   targets[0] ? "," : "", lora_module_name(w));
    if (h5_attr_str(file, "format", ADAPTER_FORMAT) < 0 || h5_attr_f64(file, "format_version", ADAPTER_VERSION) < 0 ||
        h5_attr_f64(file, "r", l->r) < 0 || h5_attr_f64(file, "lora_alpha", l->alpha) < 0 ||
        h5_attr_f64(file, "scale", l->scale) < 0 || h5_attr_f64(file, "lora_dropout", info->lora_dropout) < 0 ||
        h5_attr_f64(file, "use_rslora", info->use_rslora) < 0 || h5_attr_f64(file, "n_layers", l->n_layers) < 0 ||
        h5_attr_str(file, "target_modules", targets) < 0 ||
        h5_attr_str(file, "base_model", info->base_model ? info->base_model : "") < 0 ||
        h5_attr_str(file, "chat_template", info->chat_template ? info->chat_template : "") < 0 ||
        (info->best_step >= 0 && h5_attr_i64(file, "best_model_step", info->best_step) < 0))
        return ERR(PT_ERR_USER, "cannot write the adapter's attributes");
    char name[160];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            if (!p) continue;
            adapter_tensor_name(name, sizeof name, layer, w, 'A');
            TRY(write_matrix(file, name, l->be, &p->a));
            adapter_tensor_name(name, sizeof name, layer, w, 'B');
            TRY(write_matrix(file, name, l->be, &p->b));
        }
    return PT_OK;
}

pt_status adapter_save(const char *dir, const pt_lora *l, const adapter_info *info)
{
    TRY(safefs_mkdirs(dir));
    char final[4096];
    snprintf(final, sizeof final, "%s/adapter.h5", dir);
    h5_memfile m;
    TRY(h5_memfile_create(&m, 0, sizeof(float) * (size_t)lora_param_count(l) + ((size_t)1 << 20)));
    pt_status st = write_all(m.file, l, info);
    if (st == PT_OK) st = h5_memfile_commit(&m, final, 0, NULL, NULL, false);
    else h5_memfile_discard(&m);
    return st;
}

static pt_status read_matrix(hid_t file, const char *path, const char *name, pt_backend *be, pt_tensor *t)
{
    float *host = malloc(t->nbytes);
    TRY_ALLOC(host);
    pt_status st = h5_read_f32(file, path, name, t->shape[0], t->shape[1], host);
    if (st == PT_OK) st = backend_upload(be, t, host, t->nbytes);
    free(host);
    return st;
}

static pt_status read_all(hid_t file, const char *path, const pt_model *m, pt_lora *l)
{
    char format[64], targets[256];
    double version, r, alpha, scale, layers;
    TRY(h5_get_str(file, path, "format", format, sizeof format));
    if (strcmp(format, ADAPTER_FORMAT)) return ERR(PT_ERR_USER, "%s: format \"%s\" is not a ptrain adapter", path, format);
    TRY(h5_get_f64(file, path, "format_version", &version));
    if (version > ADAPTER_VERSION)
        return ERR(PT_ERR_USER, "%s: adapter format version %g is newer than this ptrain reads (%d)", path, version,
                   ADAPTER_VERSION);
    TRY(h5_get_f64(file, path, "r", &r));
    TRY(h5_get_f64(file, path, "lora_alpha", &alpha));
    TRY(h5_get_f64(file, path, "scale", &scale));
    TRY(h5_get_f64(file, path, "n_layers", &layers));
    TRY(h5_get_str(file, path, "target_modules", targets, sizeof targets));
    if ((int)layers != m->cfg.n_layers)
        return ERR(PT_ERR_USER, "%s: the adapter has %g layers, the model %d; was it trained on another model?", path,
                   layers, m->cfg.n_layers);
    if (r < 1 || r > 4096) return ERR(PT_ERR_USER, "%s: rank r = %g is not plausible", path, r);
    bool target[W_COUNT] = {0};
    for (int w = 0; w < W_COUNT; w++)
        if (lora_module_name(w) && strstr(targets, lora_module_name(w))) target[w] = true;
    TRY(lora_create_frozen(l, m, (int)r, (float)alpha, false, target));
    l->scale = (float)scale;
    char name[160];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            if (!p) continue;
            adapter_tensor_name(name, sizeof name, layer, w, 'A');
            TRY(read_matrix(file, path, name, l->be, &p->a));
            adapter_tensor_name(name, sizeof name, layer, w, 'B');
            TRY(read_matrix(file, path, name, l->be, &p->b));
        }
    return PT_OK;
}

/* The adapter of a training checkpoint (checkpoint-N.h5): its LoRA settings from the metadata, its
 * matrices from the params group (the optimizer's moments are left in the file). */
static pt_status ckpt_settings(const char *path, const pt_model *m, pt_lora *l)
{
    ckpt_state meta = {0};
    TRY(ckpt_verify(path));
    TRY(ckpt_read_meta(path, &meta));
    bool target[W_COUNT] = {0};
    for (int w = 0; w < W_COUNT; w++)
        if (lora_module_name(w) && strstr(meta.target_modules, lora_module_name(w))) target[w] = true;
    pt_status st = PT_OK;
    if (meta.lora_layers != m->cfg.n_layers)
        st = ERR(PT_ERR_USER, "%s: the checkpoint's adapters have %lld layers, the model %d; was it trained on another "
                 "model?", path, (long long)meta.lora_layers, m->cfg.n_layers);
    if (st == PT_OK)
        st = lora_create_frozen(l, m, (int)meta.lora_r, (float)meta.lora_alpha, meta.use_rslora, target);
    ckpt_state_free(&meta);
    return st;
}

static pt_status ckpt_load(const char *path, const pt_model *m, pt_lora *l)
{
    TRY(ckpt_settings(path, m, l));
    ckpt_layout lay;
    ckpt_state s = {0};
    pt_status st = lora_layout(l, &lay);
    if (st == PT_OK) st = ckpt_read(path, &lay, &s);
    lora_pair *p = NULL;
    for (int i = 0; st == PT_OK && i < lay.n; i++) {
        const ckpt_entry *e = &lay.e[i];
        p = i % 2 == 0 ? lora_next(l, p) : p;
        pt_tensor *t = i % 2 ? &p->b : &p->a;
        st = backend_upload(l->be, t, s.params + e->offset, t->nbytes);
    }
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
    if (st != PT_OK) lora_free(l);
    return st;
}

pt_status adapter_load(const char *path, const pt_model *m, pt_lora *l)
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
        if (stat(gguf, &sb) == 0) return gguf_adapter_load(gguf, m, l);
    }
    const char *leaf = strrchr(file_path, '/') ? strrchr(file_path, '/') + 1 : file_path;
    size_t leaf_len = strlen(leaf);
    if (leaf_len > 5 && !strcmp(leaf + leaf_len - 5, ".gguf")) return gguf_adapter_load(file_path, m, l);
    if (ckpt_is_checkpoint(file_path)) return ckpt_load(file_path, m, l);
    if (!strcmp(leaf, "adapter_config.json") || !strcmp(leaf, "adapter_model.safetensors")) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", (int)(leaf - file_path > 1 ? leaf - file_path - 1 : leaf - file_path), file_path);
        return peft_load(dir[0] ? dir : ".", m, l);
    }
    if (stat(file_path, &sb) != 0)
        return ERR(PT_ERR_USER, "adapter %s not found: %s (give the final_model_dir of a ptrain run, or a PEFT "
                   "adapter directory)", file_path, strerror(errno));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(file_path) <= 0)
        return ERR(PT_ERR_USER, "%s is not an HDF5 file; is it a ptrain adapter?", file_path);
    hid_t file = H5Fopen(file_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return ERR(PT_ERR_USER, "cannot open adapter %s (damaged, or locked: try HDF5_USE_FILE_LOCKING=FALSE)", file_path);
    pt_status st = read_all(file, file_path, m, l);
    H5Fclose(file);
    if (st != PT_OK) lora_free(l);
    return st;
}
