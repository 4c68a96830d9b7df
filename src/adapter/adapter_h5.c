/* adapter_h5.c — ptrain's own adapter file, adapter.h5 (docs/adapter-format.md): one dataset per
 * LoRA matrix, named as PEFT names it (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight,
 * [r, in]; lora_B [out, r]), plus root attributes for the LoRA settings and the base model. Built in
 * memory, written to a temporary file in the same directory and renamed into place (h5util.c), so
 * a crash never leaves a half-written adapter. */
#include "adapter_internal.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5util.h"
#include "ptrain/safefs.h"

#define ADAPTER_FORMAT "ptrain-lora"
#define ADAPTER_VERSION 3 /* 2: PEFT's selectors in the attribute "select" (written only then: plain adapters stay 1);
                           * 3: modules_to_save: the attribute "modules_to_save" and their weights as datasets under
                           * PEFT's names (written only then, so that an older ptrain refuses the file) */

/* One matrix between the file and the backend: written (reading false) or read, by its PEFT name. */
typedef struct {
    hid_t file;
    const char *path; /* for messages */
    pt_backend *be;
    bool reading;
} matrix_io;

static pt_status move_matrix(const matrix_io *io, const char *name, pt_tensor *t)
{
    float *host = malloc(t->nbytes);
    TRY_ALLOC(host);
    pt_status st = PT_OK;
    if (io->reading) {
        st = h5_read_f32(io->file, io->path, name, t->shape[0], t->shape[1], host);
        if (st == PT_OK) st = backend_upload(io->be, t, host, t->nbytes);
    } else {
        st = backend_download(io->be, t, host, t->nbytes);
        if (st == PT_OK) st = h5_write_f32(io->file, name, t->shape[0], t->shape[1], host, false);
    }
    free(host);
    return st;
}

/* Every A and B of the adapter, in layer order. */
static pt_status move_all(const matrix_io *io, const pt_adapter *l)
{
    char name[160];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(l, layer, w);
            if (!p) continue;
            adapter_tensor_name(l->arch, name, sizeof name, layer, w, 'A');
            TRY(move_matrix(io, name, &p->a));
            adapter_tensor_name(l->arch, name, sizeof name, layer, w, 'B');
            TRY(move_matrix(io, name, &p->b));
        }
    return PT_OK;
}

static pt_status write_all(hid_t file, const pt_adapter *l, const adapter_info *info)
{
    char targets[256], saved[64] = "";
    adapter_targets_text(l->arch, l->target, targets, sizeof targets);
    for (int i = 0; i < 2; i++)
        if (info->saved[i])
            snprintf(saved + strlen(saved), sizeof saved - strlen(saved), "%s%s", saved[0] ? "," : "",
                     info->saved_module[i]);
    if (h5_attr_str(file, "format", ADAPTER_FORMAT) < 0 ||
        h5_attr_f64(file, "format_version", saved[0] ? 3 : l->select ? 2 : 1) < 0 ||
        (saved[0] && h5_attr_str(file, "modules_to_save", saved) < 0) ||
        (l->select && h5_attr_str(file, "select", l->select) < 0) ||
        h5_attr_f64(file, "r", l->r) < 0 || h5_attr_f64(file, "lora_alpha", l->alpha) < 0 ||
        h5_attr_f64(file, "scale", l->scale) < 0 || h5_attr_f64(file, "lora_dropout", info->lora_dropout) < 0 ||
        h5_attr_f64(file, "use_rslora", info->use_rslora) < 0 || h5_attr_f64(file, "n_layers", l->n_layers) < 0 ||
        h5_attr_str(file, "target_modules", targets) < 0 ||
        h5_attr_str(file, "base_model", info->base_model ? info->base_model : "") < 0 ||
        h5_attr_str(file, "chat_template", info->chat_template ? info->chat_template : "") < 0 ||
        (info->best_step >= 0 && h5_attr_i64(file, "best_model_step", info->best_step) < 0))
        return ERR(PT_ERR_USER, "cannot write the adapter's attributes");
    matrix_io io = {file, NULL, l->be, false};
    TRY(move_all(&io, l));
    for (int i = 0; i < 2; i++)
        if (info->saved[i])
            TRY(h5_write_f32(file, info->saved_name[i], info->saved_rows, info->saved_cols, info->saved[i], false));
    return PT_OK;
}

/* modules_to_save (version 3): each module the attribute names, from its dataset, onto the backend. */
static pt_status read_saved(hid_t file, const char *path, const pt_model *m, pt_adapter *l)
{
    if (!h5_has_attr(file, "modules_to_save")) return PT_OK;
    char saved[64];
    TRY(h5_get_str(file, path, "modules_to_save", saved, sizeof saved));
    for (int i = 0; i < 2; i++) {
        if (!strstr(saved, adapter_saved_module(i))) continue;
        int64_t shape[2] = {m->tok_embd.shape[0], m->tok_embd.shape[1]};
        float *host = malloc(sizeof(float) * (size_t)(shape[0] * shape[1]));
        TRY_ALLOC(host);
        l->saved[i] = tensor_make(PT_F32, 2, shape);
        pt_status st = h5_read_f32(file, path, adapter_saved_tensor(i), shape[0], shape[1], host);
        if (st == PT_OK) st = backend_alloc(l->be, &l->saved[i]);
        if (st == PT_OK) st = backend_upload(l->be, &l->saved[i], host, l->saved[i].nbytes);
        free(host);
        TRY(st);
    }
    return PT_OK;
}

pt_status adapter_save(const char *dir, const pt_adapter *l, const adapter_info *info)
{
    if (l->dora)
        return ERR(PT_ERR_USER, "%s: a DoRA adapter (use_dora) has magnitudes, which adapter.h5 does not hold; "
                   "save it in PEFT's format (peft_save)", shown_text(dir).s);
    TRY(safefs_mkdirs(dir));
    char final[4096];
    snprintf(final, sizeof final, "%s/adapter.h5", dir);
    h5_memfile m;
    size_t saved = sizeof(float) * (size_t)(info->saved_rows * info->saved_cols) * (size_t)(!!info->saved[0] + !!info->saved[1]);
    TRY(h5_memfile_create(&m, 0, sizeof(float) * (size_t)adapter_param_count(l) + saved + ((size_t)1 << 20)));
    pt_status st = write_all(m.file, l, info);
    if (st == PT_OK) st = h5_memfile_commit(&m, final, 0, NULL, NULL, false);
    else h5_memfile_discard(&m);
    return st;
}

static pt_status read_all(hid_t file, const char *path, const pt_model *m, pt_adapter *l)
{
    char format[64], targets[256];
    double version, r, alpha, scale, layers;
    TRY(h5_get_str(file, path, "format", format, sizeof format));
    if (strcmp(format, ADAPTER_FORMAT))
        return ERR(PT_ERR_USER, "%s: format \"%s\" is not a ptrain adapter", shown_text(path).s, shown_text(format).s);
    TRY(h5_get_f64(file, path, "format_version", &version));
    if (version > ADAPTER_VERSION)
        return ERR(PT_ERR_USER, "%s: adapter format version %g is newer than this ptrain reads (%d)",
                   shown_text(path).s, version, ADAPTER_VERSION);
    TRY(h5_get_f64(file, path, "r", &r));
    TRY(h5_get_f64(file, path, "lora_alpha", &alpha));
    TRY(h5_get_f64(file, path, "scale", &scale));
    TRY(h5_get_f64(file, path, "n_layers", &layers));
    TRY(h5_get_str(file, path, "target_modules", targets, sizeof targets));
    if ((int)layers != m->cfg.n_layers)
        return ERR(PT_ERR_USER, "%s: the adapter has %g layers, the model %d; was it trained on another model?",
                   shown_text(path).s, layers, m->cfg.n_layers);
    if (r < 1 || r > 4096) return ERR(PT_ERR_USER, "%s: rank r = %g is not plausible", shown_text(path).s, r);
    bool target[W_COUNT];
    adapter_targets_parse(m->cfg.arch, targets, target);
    char select[4096] = "";
    double rslora = 0;
    if (h5_has_attr(file, "select")) TRY(h5_get_str(file, path, "select", select, sizeof select));
    if (h5_has_attr(file, "use_rslora")) TRY(h5_get_f64(file, path, "use_rslora", &rslora));
    TRY(adapter_create_select(l, m, (int)r, (float)alpha, rslora != 0, target, select[0] ? select : NULL,
                              shown_text(path).s, NULL));
    if (!select[0]) /* one scale everywhere: the one trained with */
        for (adapter_pair *p = adapter_next(l, NULL); p; p = adapter_next(l, p)) p->scale = (float)scale;
    l->scale = (float)scale;
    matrix_io io = {file, path, l->be, true};
    TRY(move_all(&io, l));
    return read_saved(file, path, m, l);
}

pt_status adapter_h5_load(const char *file_path, const pt_model *m, pt_adapter *l)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(file_path) <= 0)
        return ERR(PT_ERR_USER, "%s is not an HDF5 file; is it a ptrain adapter?", shown_text(file_path).s);
    hid_t file = H5Fopen(file_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return ERR(PT_ERR_USER, "cannot open adapter %s (damaged, or locked: try HDF5_USE_FILE_LOCKING=FALSE)",
                   shown_text(file_path).s);
    pt_status st = read_all(file, file_path, m, l);
    H5Fclose(file);
    if (st != PT_OK) adapter_free(l);
    return st;
}
