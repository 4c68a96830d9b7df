/* hf_names.c — the names of a text model's tensors in a Hugging Face checkpoint. A plain checkpoint names them
 * model.* and lm_head.weight; a multimodal one (pt_model_config.text_tower) puts the text model under
 * model.language_model.* (transformers 5's modules, lm_head.weight beside) or language_model.model.* with
 * language_model.lm_head.weight (the files transformers 4.x saved, and 5.x still saves for the llava line). The
 * exporters that copy or convert a checkpoint's tensors go through these two maps (model.* is "own"). */
#include <stdio.h>
#include <string.h>

#include "ptrain/hf_model.h"

static const char *const text_pre[2] = {"model.language_model.", "language_model.model."};
static const char *const text_head[2] = {"lm_head.weight", "language_model.lm_head.weight"};

const st_tensor *hf_text_find(const st_set *s, const pt_model_config *c, const char *own, const st_file **f)
{
    const st_tensor *t = st_set_find(s, own, f);
    if (t || !c->text_tower) return t;
    char name[256];
    for (int i = 0; i < 2 && !t; i++) {
        if (!strcmp(own, "lm_head.weight")) snprintf(name, sizeof name, "%s", text_head[i]);
        else if (!strncmp(own, "model.", 6)) snprintf(name, sizeof name, "%s%s", text_pre[i], own + 6);
        else return NULL;
        t = st_set_find(s, name, f);
    }
    return t;
}

bool hf_text_own_name(const pt_model_config *c, const char *name, char *buf, size_t len)
{
    if (!c->text_tower) {
        snprintf(buf, len, "%s", name);
        return true;
    }
    for (int i = 0; i < 2; i++) {
        if (!strcmp(name, text_head[i])) {
            snprintf(buf, len, "lm_head.weight");
            return true;
        }
        if (!strncmp(name, text_pre[i], strlen(text_pre[i]))) {
            snprintf(buf, len, "model.%s", name + strlen(text_pre[i]));
            return true;
        }
    }
    return false;
}
