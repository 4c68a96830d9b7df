/* resolve.c — from a model name to a path: an existing file or directory as given; a bare name
 * in $PTRAIN_MODELS, ./models and the installed models directory; an HF id "org/name" in the
 * local Hugging Face cache (the lookup shared with datasets, src/model/hfcache.c). Nothing is ever
 * downloaded: a miss says where ptrain looked and which command fetches the model. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/hfcache.h"
#include "ptrain/model_io.h"

#ifndef PTRAIN_DATADIR
#define PTRAIN_DATADIR "/usr/local/share/ptrain"
#endif

static bool exists(const char *path, bool *dir)
{
    struct stat st;
    if (stat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return false;
    *dir = S_ISDIR(st.st_mode);
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A file name, not an HF id, even with one slash in it ("models/x.gguf"). */
static bool looks_like_file(const char *name)
{
    return ends_with(name, ".gguf") || ends_with(name, ".safetensors") || ends_with(name, ".json") ||
           ends_with(name, ".bin") || name[0] == '~';
}

static pt_status found(const char *path, bool dir, char *out, size_t len, pt_model_format *fmt)
{
    if (strlen(path) >= len)
        return ERR(PT_ERR_USER, "%s: the path is too long (%zu bytes at most)", shown_text(path).s, len - 1);
    snprintf(out, len, "%s", path);
    bool hf = dir || ends_with(path, ".safetensors") || ends_with(path, "/config.json") || !strcmp(path, "config.json");
    *fmt = hf ? PT_MODEL_HF : PT_MODEL_GGUF;
    return PT_OK;
}

/* name in the models directories: $PTRAIN_MODELS, ./models, the installed share/ptrain/models. */
static bool in_model_dirs(const char *name, char *out, size_t len, pt_model_format *fmt)
{
    const char *dirs[] = {getenv("PTRAIN_MODELS"), "models", PTRAIN_DATADIR "/models"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (!dirs[i] || !*dirs[i]) continue;
        char path[4096];
        bool dir;
        snprintf(path, sizeof path, "%s/%s", dirs[i], name);
        if (exists(path, &dir) && found(path, dir, out, len, fmt) == PT_OK) return true;
    }
    return false;
}

pt_status model_resolve(const char *name, const char *revision, char *out, size_t len, pt_model_format *fmt)
{
    bool dir;
    if (!name || !*name) return ERR(PT_ERR_USER, "no model given: name a .gguf file, a model directory or an HF id");
    if (exists(name, &dir)) return found(name, dir, out, len, fmt);
    if (!strchr(name, '/') && in_model_dirs(name, out, len, fmt)) return PT_OK;
    if (hfcache_is_repo_id(name) && !looks_like_file(name)) {
        char *snap = NULL;
        TRY(hfcache_snapshot("model", name, revision, &snap));
        pt_status st = found(snap, true, out, len, fmt);
        free(snap);
        return st;
    }
    return ERR(PT_ERR_USER, "model %s not found (looked for the file or directory itself, then in $PTRAIN_MODELS, "
               "./models and %s/models; an HF id org/name is looked up in the Hugging Face cache); fetch the default "
               "model with share/scripts/fetch-model.sh", shown_text(name).s, PTRAIN_DATADIR);
}

void model_hf_dir(const char *path, char *dir, size_t len)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, len, "%s", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, len, ".");
    else if (slash == path) snprintf(dir, len, "/");
    else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}
