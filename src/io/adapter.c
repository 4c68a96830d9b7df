/* adapter.c — the HDF5 adapter file. One dataset per LoRA matrix, named as PEFT names it
 * (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight, [r, in]; lora_B [out, r]),
 * plus root attributes for the LoRA settings and the base model. Written to a temporary file in
 * the same directory and renamed into place, so a crash never leaves a half-written adapter. */
#include "ptrain/adapter.h"

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

static void tensor_name(char *out, size_t len, int layer, int w, char which)
{
    const char *block = w == W_GATE || w == W_UP || w == W_DOWN ? "mlp" : "self_attn";
    snprintf(out, len, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", layer, block, lora_module_name(w),
             which);
}

static herr_t attr_string(hid_t loc, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, strlen(value) + 1);
    hid_t attr = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, type, value);
    if (attr >= 0) H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

static herr_t attr_double(hid_t loc, const char *name, double value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(loc, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, H5T_NATIVE_DOUBLE, &value);
    if (attr >= 0) H5Aclose(attr);
    H5Sclose(space);
    return rc;
}

static pt_status write_matrix(hid_t file, const char *name, pt_backend *be, const pt_tensor *t)
{
    float *host = malloc(t->nbytes);
    TRY_ALLOC(host);
    pt_status st = backend_download(be, t, host, t->nbytes);
    hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t set = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (st == PT_OK && (set < 0 || H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host) < 0))
        st = ERR(PT_ERR_USER, "cannot write %s to the adapter file", name);
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    free(host);
    return st;
}

static pt_status write_all(hid_t file, const pt_lora *l, const adapter_info *info)
{
    char targets[256] = "";
    for (int w = 0; w < W_COUNT; w++)
        if (l->target[w]) snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s",
                                   targets[0] ? "," : "", lora_module_name(w));
    if (attr_string(file, "format", ADAPTER_FORMAT) < 0 || attr_double(file, "format_version", ADAPTER_VERSION) < 0 ||
        attr_double(file, "r", l->r) < 0 || attr_double(file, "lora_alpha", l->alpha) < 0 ||
        attr_double(file, "scale", l->scale) < 0 || attr_double(file, "lora_dropout", info->lora_dropout) < 0 ||
        attr_double(file, "use_rslora", info->use_rslora) < 0 || attr_double(file, "n_layers", l->n_layers) < 0 ||
        attr_string(file, "target_modules", targets) < 0 ||
        attr_string(file, "base_model", info->base_model ? info->base_model : "") < 0 ||
        attr_string(file, "chat_template", info->chat_template ? info->chat_template : "") < 0)
        return ERR(PT_ERR_USER, "cannot write the adapter's attributes");
    char name[160];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            if (!p) continue;
            tensor_name(name, sizeof name, layer, w, 'A');
            TRY(write_matrix(file, name, l->be, &p->a));
            tensor_name(name, sizeof name, layer, w, 'B');
            TRY(write_matrix(file, name, l->be, &p->b));
        }
    return PT_OK;
}

static pt_status fsync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0) return ERR(PT_ERR_USER, "cannot open %s to sync it: %s", path, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0) return ERR(PT_ERR_USER, "cannot sync %s: %s", path, strerror(errno));
    return PT_OK;
}

pt_status adapter_save(const char *dir, const pt_lora *l, const adapter_info *info)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ERR(PT_ERR_USER, "cannot create the adapter directory %s: %s", dir, strerror(errno));
    char tmp[4096], final[4096];
    snprintf(final, sizeof final, "%s/adapter.h5", dir);
    snprintf(tmp, sizeof tmp, "%s/.adapter.h5.tmp.%d", dir, (int)getpid());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return ERR(PT_ERR_USER, "cannot create %s (is the directory writable?)", tmp);
    pt_status st = write_all(file, l, info);
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 && st == PT_OK) st = ERR(PT_ERR_USER, "cannot flush %s", tmp);
    H5Fclose(file);
    if (st == PT_OK) st = fsync_path(tmp, O_RDONLY);
    if (st == PT_OK && rename(tmp, final) != 0)
        st = ERR(PT_ERR_USER, "cannot move %s to %s: %s", tmp, final, strerror(errno));
    if (st != PT_OK) {
        unlink(tmp);
        return st;
    }
    return fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

static pt_status read_attr_double(hid_t file, const char *path, const char *name, double *out)
{
    hid_t attr = H5Aexists(file, name) > 0 ? H5Aopen(file, name, H5P_DEFAULT) : -1;
    herr_t rc = attr < 0 ? -1 : H5Aread(attr, H5T_NATIVE_DOUBLE, out);
    if (attr >= 0) H5Aclose(attr);
    if (rc < 0) return ERR(PT_ERR_USER, "%s: attribute %s is missing or not a number; is this a ptrain adapter?", path, name);
    return PT_OK;
}

static pt_status read_attr_string(hid_t file, const char *path, const char *name, char *out, size_t len)
{
    hid_t attr = H5Aexists(file, name) > 0 ? H5Aopen(file, name, H5P_DEFAULT) : -1;
    hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
    herr_t rc = -1;
    if (type >= 0 && H5Tget_class(type) == H5T_STRING && !H5Tis_variable_str(type) && H5Tget_size(type) <= len)
        rc = H5Aread(attr, type, out);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    if (rc < 0) return ERR(PT_ERR_USER, "%s: attribute %s is missing or not a short string", path, name);
    out[len - 1] = '\0';
    return PT_OK;
}

static pt_status read_matrix(hid_t file, const char *path, const char *name, pt_backend *be, pt_tensor *t)
{
    hid_t set = H5Lexists(file, name, H5P_DEFAULT) > 0 ? H5Dopen2(file, name, H5P_DEFAULT) : -1;
    if (set < 0) return ERR(PT_ERR_USER, "%s: tensor %s is missing", path, name);
    hid_t space = H5Dget_space(set);
    hsize_t dims[2] = {0, 0};
    int nd = H5Sget_simple_extent_ndims(space);
    if (nd == 2) H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    pt_status st = PT_OK;
    if (nd != 2 || dims[0] != (hsize_t)t->shape[0] || dims[1] != (hsize_t)t->shape[1])
        st = ERR(PT_ERR_USER, "%s: tensor %s is [%llu, %llu], the model needs [%lld, %lld]; was the adapter "
                 "trained on another model?", path, name, (unsigned long long)dims[0], (unsigned long long)dims[1],
                 (long long)t->shape[0], (long long)t->shape[1]);
    float *host = st == PT_OK ? malloc(t->nbytes) : NULL;
    if (st == PT_OK && !host) st = ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK && H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host) < 0)
        st = ERR(PT_ERR_USER, "%s: cannot read tensor %s (the file may be damaged)", path, name);
    if (st == PT_OK) st = backend_upload(be, t, host, t->nbytes);
    free(host);
    H5Dclose(set);
    return st;
}

static pt_status read_all(hid_t file, const char *path, const pt_model *m, pt_lora *l)
{
    char format[64], targets[256];
    double version, r, alpha, scale, layers;
    TRY(read_attr_string(file, path, "format", format, sizeof format));
    if (strcmp(format, ADAPTER_FORMAT)) return ERR(PT_ERR_USER, "%s: format \"%s\" is not a ptrain adapter", path, format);
    TRY(read_attr_double(file, path, "format_version", &version));
    if (version > ADAPTER_VERSION)
        return ERR(PT_ERR_USER, "%s: adapter format version %g is newer than this ptrain reads (%d)", path, version,
                   ADAPTER_VERSION);
    TRY(read_attr_double(file, path, "r", &r));
    TRY(read_attr_double(file, path, "lora_alpha", &alpha));
    TRY(read_attr_double(file, path, "scale", &scale));
    TRY(read_attr_double(file, path, "n_layers", &layers));
    TRY(read_attr_string(file, path, "target_modules", targets, sizeof targets));
    if ((int)layers != m->cfg.n_layers)
        return ERR(PT_ERR_USER, "%s: the adapter has %g layers, the model %d; was it trained on another model?", path,
                   layers, m->cfg.n_layers);
    if (r < 1 || r > 4096) return ERR(PT_ERR_USER, "%s: rank r = %g is not plausible", path, r);
    bool target[W_COUNT] = {0};
    for (int w = 0; w < W_COUNT; w++)
        if (lora_module_name(w) && strstr(targets, lora_module_name(w))) target[w] = true;
    TRY(lora_create(l, m, (int)r, (float)alpha, false, target, 0));
    l->scale = (float)scale;
    char name[160];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            if (!p) continue;
            tensor_name(name, sizeof name, layer, w, 'A');
            TRY(read_matrix(file, path, name, l->be, &p->a));
            tensor_name(name, sizeof name, layer, w, 'B');
            TRY(read_matrix(file, path, name, l->be, &p->b));
        }
    return PT_OK;
}

pt_status adapter_load(const char *path, const pt_model *m, pt_lora *l)
{
    char file_path[4096];
    struct stat sb;
    memset(l, 0, sizeof *l);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(file_path, sizeof file_path, "%s/adapter.h5", path);
    else
        snprintf(file_path, sizeof file_path, "%s", path);
    if (stat(file_path, &sb) != 0)
        return ERR(PT_ERR_USER, "adapter %s not found: %s (give the final_model_dir of a ptrain run)", file_path,
                   strerror(errno));
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
