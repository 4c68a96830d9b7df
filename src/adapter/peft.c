/* peft.c — PEFT adapter directories (peft.h): adapter_config.json with the fields PEFT's
 * LoraConfig writes, and adapter_model.safetensors with one fp32 matrix per LoRA A and B under
 * PEFT's names. Reading accepts what PEFT itself writes (fp32, fp16 or bf16 matrices, target
 * modules as a list or a string, some layers left out) and refuses what ptrain cannot apply. A
 * reward model's adapter (adapter_info.score) is written as PEFT writes a SEQ_CLS LoRA: task_type
 * SEQ_CLS, modules_to_save ["classifier", "score"], and the score head's weight [1, dim] as
 * base_model.model.score.weight. */
#include "ptrain/jsonfile.h"
#include "ptrain/peft.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"
#include "ptrain/st_write.h"

/* The fields of adapter_config.json that are PEFT's selectors (pt_adapter.select). */
static const char *const select_keys[] = {"layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern",
                                          NULL};

/* A multimodal checkpoint's text model: PEFT names its modules base_model.model.model.language_model.* where
 * ptrain's own names (adapter_tensor_name, the checkpoints) have base_model.model.model.* */
#define PEFT_MODEL "base_model.model.model."
#define PEFT_TEXT "base_model.model.model.language_model."

/* ---- writing ---- */

/* PEFT's name of pair (layer, w)'s matrix which: adapter_tensor_name's, and for the experts (target_parameters) the
 * nesting depth[w] of its ParamWrapper (PEFT nests an experts target inside those listed after it on the same
 * module: ....experts.base_layer.); the router's (mlp.gate) is alone on its module. */
static void pair_name(const pt_adapter *l, int layer, int w, char which, const int depth[W_COUNT], char *out, size_t len)
{
    if (!model_slot_experts(w)) { /* the router's wrapper is alone on mlp.gate */
        adapter_tensor_name(l->arch, out, len, layer, w, which);
        return;
    }
    int n = snprintf(out, len, "base_model.model.model.layers.%d.mlp.experts", layer);
    for (int d = 0; d < depth[w] && n > 0 && (size_t)n < len; d++) n += snprintf(out + n, len - (size_t)n, ".base_layer");
    if (n > 0 && (size_t)n < len) snprintf(out + n, len - (size_t)n, ".lora_%c.weight", which);
}

/* The depths ptrain writes: gate_up_proj inside down_proj when both are adapted. */
static void write_depths(const pt_adapter *l, int depth[W_COUNT])
{
    memset(depth, 0, sizeof(int) * W_COUNT);
    depth[W_EXP_GATE_UP] = l->target[W_EXP_DOWN] ? 1 : 0;
}

/* An experts pair's count of experts (A is [E·r, in]); 1 for the others. */
static int64_t pair_experts(const adapter_pair *p) { return p->r > 0 ? p->a.shape[0] / p->r : 1; }

/* name as PEFT names it for l's model, in buf. */
static const char *peft_name(const pt_adapter *l, const char *name, char *buf, size_t len)
{
    if (!l->text_tower || strncmp(name, PEFT_MODEL, strlen(PEFT_MODEL))) return name;
    snprintf(buf, len, "%s%s", PEFT_TEXT, name + strlen(PEFT_MODEL));
    return buf;
}

/* The module names as a list; for a multimodal checkpoint's text model, one regular expression that names them
 * within model.language_model alone, as PEFT would otherwise adapt the vision tower's q_proj ... too. */
static json_t *target_list(const pt_adapter *l)
{
    json_t *list = json_array();
    char re[512] = "";
    for (int w = 0; w < W_COUNT; w++)
        if (l->target[w] && adapter_module_name(l->arch, w)) {
            json_array_append_new(list, json_string(adapter_module_name(l->arch, w)));
            snprintf(re + strlen(re), sizeof re - strlen(re), "%s%s", re[0] ? "|" : "", adapter_module_name(l->arch, w));
        }
    if (!l->text_tower) return json_array_size(list) ? list : (json_decref(list), json_null());
    json_decref(list);
    char full[600];
    snprintf(full, sizeof full, "model\\.language_model\\.layers\\.\\d+\\.(self_attn|linear_attn|mlp)\\.(%s)", re);
    return json_string(full);
}

static char *config_json(const pt_adapter *l, const adapter_info *info)
{
    const char *base = info->base_name && info->base_name[0] ? info->base_name : info->base_model;
    json_t *c = json_object();
    json_object_set_new(c, "peft_type", json_string("LORA"));
    json_object_set_new(c, "task_type", json_string(info->score ? "SEQ_CLS" : "CAUSAL_LM"));
    json_object_set_new(c, "base_model_name_or_path", base ? json_string(base) : json_null());
    json_object_set_new(c, "r", json_integer(l->r));
    json_object_set_new(c, "lora_alpha", json_real(l->alpha));
    json_object_set_new(c, "lora_dropout", json_real(info->lora_dropout));
    json_object_set_new(c, "target_modules", target_list(l));
    json_t *params = json_array(); /* target_parameters: gate_up_proj first (PEFT nests it innermost) */
    for (int w = W_EXP_GATE_UP; w <= W_ROUTER; w++)
        if (l->target[w]) json_array_append_new(params, json_string(adapter_param_target(w)));
    json_object_set_new(c, "target_parameters", json_array_size(params) ? params : (json_decref(params), json_null()));
    json_object_set_new(c, "use_rslora", json_boolean(info->use_rslora || l->rslora));
    json_object_set_new(c, "use_dora", json_boolean(l->dora));
    json_object_set_new(c, "bias", json_string("none"));
    json_object_set_new(c, "fan_in_fan_out", json_false());
    json_object_set_new(c, "inference_mode", json_true());
    char decomp[32];
    json_object_set_new(c, "init_lora_weights", l->init == ADAPTER_INIT_GAUSSIAN       ? json_string("gaussian")
                                                : adapter_decomp_text(l, decomp, sizeof decomp) ? json_string(decomp)
                                                : json_boolean(l->init != ADAPTER_INIT_FALSE));
    if (info->score) { /* what PEFT 0.21 writes for task_type SEQ_CLS */
        json_t *m = json_array();
        json_array_append_new(m, json_string("classifier"));
        json_array_append_new(m, json_string("score"));
        json_object_set_new(c, "modules_to_save", m);
    } else if (info->saved[0] || info->saved[1]) { /* modules_to_save as the config gave them */
        json_t *m = json_array();
        for (int i = 0; i < 2; i++)
            if (info->saved[i]) json_array_append_new(m, json_string(info->saved_module[i]));
        json_object_set_new(c, "modules_to_save", m);
    } else
        json_object_set_new(c, "modules_to_save", json_null());
    json_object_set_new(c, "layers_to_transform", json_null());
    json_object_set_new(c, "layers_pattern", json_null());
    json_object_set_new(c, "rank_pattern", json_object());
    json_object_set_new(c, "alpha_pattern", json_object());
    json_t *sel = l->select ? json_loads(l->select, 0, NULL) : NULL; /* PEFT's selectors, as given */
    for (const char *const *k = select_keys; sel && *k; k++)
        if (json_object_get(sel, *k)) json_object_set(c, *k, json_object_get(sel, *k));
    json_decref(sel);
    json_object_set_new(c, "revision", json_null());
    char *text = json_dumps(c, JSON_INDENT(2));
    json_decref(c);
    return text;
}

#define SCORE_NAME "base_model.model.score.weight" /* PEFT's name of a saved modules_to_save score */

static pt_status declare_tensors(st_writer *w, const pt_adapter *l, const adapter_info *info)
{
    char name[160], text[200];
    int depth[W_COUNT];
    write_depths(l, depth);
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int k = 0; k < W_COUNT; k++) {
            const adapter_pair *p = adapter_at(l, layer, k);
            if (!p) continue;
            int64_t e = pair_experts(p), b_shape[2] = {p->b.shape[0] / e, p->b.shape[1] * e}; /* PEFT's [out, E·r] */
            pair_name(l, layer, k, 'A', depth, name, sizeof name);
            TRY(st_w_tensor(w, peft_name(l, name, text, sizeof text), ST_F32, 2, p->a.shape));
            pair_name(l, layer, k, 'B', depth, name, sizeof name);
            TRY(st_w_tensor(w, peft_name(l, name, text, sizeof text), ST_F32, 2, b_shape));
            if (!l->dora) continue;
            adapter_tensor_name(l->arch, name, sizeof name, layer, k, 'M'); /* PEFT's 1-d [out] */
            TRY(st_w_tensor(w, peft_name(l, name, text, sizeof text), ST_F32, 1, p->b.shape));
        }
    int64_t shape[2] = {1, info->score_dim}, full[2] = {info->saved_rows, info->saved_cols};
    for (int i = 0; i < 2; i++) /* modules_to_save: the trained weights, fp32, under PEFT's names */
        if (info->saved[i]) TRY(st_w_tensor(w, peft_name(l, info->saved_name[i], text, sizeof text), ST_F32, 2, full));
    return info->score ? st_w_tensor(w, SCORE_NAME, ST_F32, 2, shape) : PT_OK;
}

/* t of l's pair of slot `slot`; its B and magnitudes (order) in PEFT's row order (qwen35's q_proj:
 * adapter_peft_order), an experts pair's B (experts > 1: [E·out, r]) in PEFT's [out, E·r] */
static pt_status stream_matrix(st_writer *w, const pt_adapter *l, int slot, bool order, const pt_tensor *t,
                               int64_t experts)
{
    float *host = malloc(t->nbytes), *peft = experts > 1 ? malloc(t->nbytes) : NULL;
    if (!host || (experts > 1 && !peft)) return free(host), free(peft), ERR(PT_ERR_NOMEM, "out of memory");
    pt_status st = backend_download(l->be, t, host, t->nbytes);
    if (st == PT_OK && order) st = adapter_peft_order(l, slot, host, t->shape[0], t->ndim > 1 ? t->shape[1] : 1, true);
    if (st == PT_OK && experts > 1)
        adapter_experts_b(host, peft, t->shape[0] / experts, (int)t->shape[1], (int)experts, true);
    if (st == PT_OK) st = st_w_data(w, experts > 1 ? peft : host, t->nbytes);
    free(host), free(peft);
    return st;
}

/* the magnitudes read with the adapter (host), in PEFT's row order */
static pt_status stream_mag(st_writer *w, const pt_adapter *l, int slot, const adapter_pair *p)
{
    size_t n = sizeof(float) * (size_t)p->b.shape[0];
    float *host = malloc(n);
    TRY_ALLOC(host);
    memcpy(host, p->mag, n);
    pt_status st = adapter_peft_order(l, slot, host, p->b.shape[0], 1, true);
    if (st == PT_OK) st = st_w_data(w, host, n);
    free(host);
    return st;
}

static pt_status write_tensors(const char *path, const pt_adapter *l, const adapter_info *info)
{
    st_writer w;
    st_writer_init(&w);
    pt_status st = st_w_meta(&w, "format", "pt");
    if (st == PT_OK) st = declare_tensors(&w, l, info);
    if (st == PT_OK) st = st_w_begin(&w, path);
    for (adapter_pair *p = adapter_next(l, NULL); p && st == PT_OK; p = adapter_next(l, p)) {
        int slot = (int)((p - l->pairs) % W_COUNT);
        st = stream_matrix(&w, l, slot, false, &p->a, 1);
        if (st == PT_OK) st = stream_matrix(&w, l, slot, true, &p->b, pair_experts(p));
        if (st == PT_OK && l->dora) /* DoRA: the trained magnitudes on the backend, else those read */
            st = p->dmag.data ? stream_matrix(&w, l, slot, true, &p->dmag, 1)
                              : p->mag ? stream_mag(&w, l, slot, p)
                                       : ERR(PT_ERR_INTERNAL, "peft_save: a DoRA pair without magnitudes");
    }
    for (int i = 0; i < 2 && st == PT_OK; i++)
        if (info->saved[i])
            st = st_w_data(&w, info->saved[i], sizeof(float) * (size_t)(info->saved_rows * info->saved_cols));
    if (st == PT_OK && info->score) st = st_w_data(&w, info->score, sizeof(float) * (size_t)info->score_dim);
    if (st == PT_OK) st = st_w_finish(&w);
    st_writer_free(&w);
    return st;
}

pt_status peft_save(const char *dir, const pt_adapter *l, const adapter_info *info)
{
    TRY(safefs_mkdirs(dir));
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    TRY(write_tensors(path, l, info));
    char *json = config_json(l, info);
    TRY_ALLOC(json);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    pt_status st = fw_write_file(path, json, strlen(json));
    free(json);
    return st;
}

/* ---- reading ---- */

bool peft_is_adapter_dir(const char *dir)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

typedef struct {
    int r;
    double alpha;
    bool rslora;
    bool dora;    /* use_dora: the pairs' lora_magnitude_vector are read too */
    char *select; /* the selectors as one JSON object (adapter_select.c), NULL: none set */
    bool param[W_COUNT]; /* target_parameters: the experts' slots it names */
    int depth[W_COUNT];  /* and how deep PEFT nests each one's ParamWrapper (pair_name) */
} peft_settings;

/* target_parameters into s: the experts' entries nested as PEFT nests them (each inside the ParamWrappers of the
 * experts' entries after it), the router's alone on its module; an entry that names nothing ptrain adapts is
 * refused. */
static pt_status parse_params(const char *path, const json_t *c, peft_settings *s)
{
    const json_t *list = json_object_get(c, "target_parameters"), *item;
    if (!list || json_is_null(list)) return PT_OK;
    if (!json_is_array(list))
        return ERR(PT_ERR_USER, "%s: target_parameters: expected a list of parameter names", shown_text(path).s);
    size_t i;
    int at[W_COUNT] = {0};
    json_array_foreach(list, i, item) {
        bool one[W_COUNT] = {0};
        if (!json_is_string(item) || !adapter_param_slot(json_string_value(item), one))
            return ERR(PT_ERR_USER, "%s: target_parameters names %s; ptrain reads adapters on the experts' "
                       "mlp.experts.gate_up_proj and mlp.experts.down_proj and the router's mlp.gate.weight",
                       shown_text(path).s, json_is_string(item) ? shown_text(json_string_value(item)).s : "a non-string");
        for (int w = 0; w < W_COUNT; w++)
            if (one[w]) s->param[w] = true, at[w] = (int)i;
    }
    for (int w = W_EXP_GATE_UP; w <= W_EXP_DOWN; w++)
        for (int v = W_EXP_GATE_UP; v <= W_EXP_DOWN; v++)
            s->depth[w] += s->param[w] && s->param[v] && at[v] > at[w];
    return PT_OK;
}

/* A key whose presence with a non-empty value means something ptrain cannot apply. */
static pt_status refuse_if_set(const char *path, const json_t *c, const char *key, const char *why)
{
    const json_t *v = json_object_get(c, key);
    bool set = v && !json_is_null(v) && !json_is_false(v) &&
               !((json_is_object(v) && json_object_size(v) == 0) || (json_is_array(v) && json_array_size(v) == 0));
    if (set) return ERR(PT_ERR_USER, "%s: %s is set; %s", shown_text(path).s, shown_text(key).s, why);
    return PT_OK;
}

static pt_status check_unsupported(const char *path, const json_t *c)
{
    const json_t *mods = json_object_get(c, "modules_to_save"), *item, *task = json_object_get(c, "task_type");
    bool seq_cls = json_is_string(task) && !strcmp(json_string_value(task), "SEQ_CLS"); /* a reward model's */
    size_t k;
    if (json_is_array(mods))
        json_array_foreach(mods, k, item) {
            const char *name = json_is_string(item) ? json_string_value(item) : "";
            if (seq_cls && (!strcmp(name, "classifier") || !strcmp(name, "score"))) continue; /* peft_read_score */
            if (strcmp(name, adapter_saved_module(ADAPTER_SAVED_EMBED)) && strcmp(name, adapter_saved_module(ADAPTER_SAVED_HEAD)))
                return ERR(PT_ERR_USER, "%s: modules_to_save names %s; ptrain reads embed_tokens and lm_head trained in "
                           "full, no other module", shown_text(path).s, json_is_string(item) ? shown_text(name).s : "a non-string");
        }
    else
        TRY(refuse_if_set(path, c, "modules_to_save", "ptrain reads a list of embed_tokens and lm_head there"));
    TRY(refuse_if_set(path, c, "fan_in_fan_out", "ptrain's models store weights as [out, in]"));
    const json_t *init = json_object_get(c, "init_lora_weights");
    const char *iv = json_is_string(init) ? json_string_value(init) : "";
    if (!strncmp(iv, "pissa", 5) || !strcmp(iv, "olora") || !strcmp(iv, "corda") || !strcmp(iv, "lora_ga"))
        return ERR(PT_ERR_USER, "%s: init_lora_weights is \"%s\": the adapter belongs to a base PEFT changed (W - "
                   "scale·BA), not to the original one ptrain loads; save it with PEFT's save_pretrained(..., "
                   "path_initial_model_for_weight_conversion=...) to get an adapter of the original base (ptrain's "
                   "own runs write that one beside residual_adapter/)",
                   shown_text(path).s, shown_text(iv).s);
    const json_t *bias = json_object_get(c, "bias");
    if (bias && json_is_string(bias) && strcmp(json_string_value(bias), "none"))
        return ERR(PT_ERR_USER, "%s: bias is \"%s\"; ptrain's adapters carry no bias (\"none\")", shown_text(path).s,
                   shown_text(json_string_value(bias)).s);
    return PT_OK;
}

static pt_status parse_config(const char *path, const json_t *c, peft_settings *s)
{
    const json_t *type = json_object_get(c, "peft_type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "LORA"))
        return ERR(PT_ERR_USER, "%s: peft_type is %s; ptrain reads LoRA adapters (\"LORA\")", shown_text(path).s,
                   json_is_string(type) ? shown_text(json_string_value(type)).s : "missing");
    const json_t *r = json_object_get(c, "r"), *alpha = json_object_get(c, "lora_alpha");
    if (!json_is_integer(r) || json_integer_value(r) < 1 || json_integer_value(r) > 4096)
        return ERR(PT_ERR_USER, "%s: r must be an integer from 1 to 4096", shown_text(path).s);
    if (!json_is_number(alpha)) return ERR(PT_ERR_USER, "%s: lora_alpha must be a number", shown_text(path).s);
    s->r = (int)json_integer_value(r);
    s->alpha = json_number_value(alpha);
    s->rslora = json_is_true(json_object_get(c, "use_rslora"));
    s->dora = json_is_true(json_object_get(c, "use_dora"));
    TRY(check_unsupported(path, c));
    TRY(parse_params(path, c, s));
    json_t *sel = json_object();
    bool any = false;
    for (const char *const *k = select_keys; *k; k++) {
        json_t *v = json_object_get(c, *k);
        if (!v || json_is_null(v)) continue;
        json_object_set(sel, *k, v);
        any |= !((json_is_object(v) && !json_object_size(v)) || (json_is_array(v) && !json_array_size(v)) ||
                 (json_is_string(v) && !json_string_length(v)));
    }
    if (any) s->select = json_dumps(sel, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(sel);
    return !any || s->select ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
}

static pt_status read_config(const char *dir, peft_settings *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    json_error_t e;
    json_t *c = jsonfile_load(path, 0, &e);
    if (!c) return ERR(PT_ERR_USER, "%s: line %d, column %d: %s", shown_text(path).s, e.line, e.column, e.text);
    pt_status st =
        json_is_object(c) ? parse_config(path, c, s) : ERR(PT_ERR_USER, "%s: not a JSON object", shown_text(path).s);
    json_decref(c);
    return st;
}

/* A name of PEFT's for a multimodal checkpoint's text model (base_model.model.model.language_model.*) as ptrain's
 * own (base_model.model.model.*), in buf; other names as they are. */
static const char *own_name(const char *name, char *buf, size_t len)
{
    if (strncmp(name, PEFT_TEXT, strlen(PEFT_TEXT))) return name;
    snprintf(buf, len, "%s%s", PEFT_MODEL, name + strlen(PEFT_TEXT));
    return buf;
}

/* base_model.model.model.layers.N.{self_attn,mlp}.X.lora_{A,B}[.default].weight -> layer, slot, 'A'/'B';
 * ...X.lora_magnitude_vector (DoRA) -> 'M'. False for any other name. */
static bool parse_name(pt_arch a, const peft_settings *s, const char *name, int n_layers, int *layer, int *slot,
                       char *which)
{
    char own[256];
    name = own_name(name, own, sizeof own);
    const char *prefix = "base_model.model.model.layers.";
    if (strncmp(name, prefix, strlen(prefix))) return false;
    char *end;
    long l = strtol(name + strlen(prefix), &end, 10);
    if (end == name + strlen(prefix) || *end != '.' || l < 0 || l >= n_layers) return false;
    pt_adapter named = {.arch = a};
    for (int w = W_EXP_GATE_UP; w <= W_ROUTER; w++) /* the experts and the router (target_parameters) */
        for (int ab = 0; ab < 2 && s->param[w]; ab++) {
            char want[192];
            pair_name(&named, (int)l, w, ab ? 'B' : 'A', s->depth, want, sizeof want);
            if (!strcmp(name, want)) {
                *layer = (int)l, *slot = w, *which = ab ? 'B' : 'A';
                return true;
            }
        }
    for (int w = 0; w < W_COUNT; w++) {
        char want[160];
        if (!adapter_module_name(a, w)) continue;
        for (int ab = 0; ab < 2; ab++)
            for (int dflt = 0; dflt < 2; dflt++) {
                adapter_tensor_name(a, want, sizeof want, (int)l, w, ab ? 'B' : 'A');
                if (dflt) { /* ...lora_A.default.weight, as some versions name it */
                    char *dot = strrchr(want, '.');
                    memmove(dot + 8, dot, strlen(dot) + 1);
                    memcpy(dot, ".default", 8);
                }
                if (!strcmp(name, want)) {
                    *layer = (int)l, *slot = w, *which = ab ? 'B' : 'A';
                    return true;
                }
            }
        char mag[192];
        adapter_tensor_name(a, mag, sizeof mag, (int)l, w, 'A');
        char *at = strstr(mag, ".lora_A.weight");
        if (at) snprintf(at, sizeof mag - (size_t)(at - mag), ".lora_magnitude_vector");
        if (at && !strcmp(name, mag)) {
            *layer = (int)l, *slot = w, *which = 'M';
            return true;
        }
    }
    return false;
}

/* Which of modules_to_save's tensors name is (ADAPTER_SAVED_EMBED or _HEAD), or -1. */
static int saved_index(const char *name)
{
    char own[256];
    name = own_name(name, own, sizeof own);
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, adapter_saved_tensor(i))) return i;
    return -1;
}

static pt_status find_targets(const st_file *f, const pt_model *m, const peft_settings *s, bool target[W_COUNT])
{
    memset(target, 0, sizeof(bool) * W_COUNT);
    for (size_t i = 0; i < f->n_tensors; i++) {
        int layer, slot;
        char which;
        if (saved_index(f->tensors[i].name) >= 0) continue; /* modules_to_save: load_saved */
        if (!strcmp(f->tensors[i].name, SCORE_NAME)) continue; /* a reward model's score: peft_read_score */
        if (parse_name(m->cfg.arch, s, f->tensors[i].name, m->cfg.n_layers, &layer, &slot, &which) && which == 'M')
            continue; /* DoRA's magnitudes: with their pair */
        if (!parse_name(m->cfg.arch, s, f->tensors[i].name, m->cfg.n_layers, &layer, &slot, &which))
            return ERR(PT_ERR_USER, "%s: tensor %s is not the LoRA A or B of a projection of this %d-layer %s model "
                       "(%s of base_model.model.model.layers.N); was the adapter trained on another model?",
                       shown_text(f->path).s, shown_text(f->tensors[i].name).s, m->cfg.n_layers,
                       arch_name(m->cfg.arch), arch_info(m->cfg.arch)->fused ? "qkv/o_proj, gate_up/down_proj"
                       : m->cfg.full_period > 0 ? "q/k/v/o_proj, linear_attn's in_proj_qkv/z/b/a and out_proj, gate/up/down_proj"
                                                : "q/k/v/o_proj, gate/up/down_proj");
        target[slot] = true;
    }
    return PT_OK;
}

/* dst from t; with l, a B of slot in PEFT's row order, reordered into ptrain's (adapter_peft_order) */
static pt_status load_matrix(const st_file *f, const st_tensor *t, pt_backend *be, pt_tensor *dst, const pt_adapter *l,
                             int slot)
{
    if (t->ndim != 2 || t->shape[0] != dst->shape[0] || t->shape[1] != dst->shape[1]) {
        char got[96];
        return ERR(PT_ERR_USER,
                   "%s: tensor %s is %s; this model needs [%lld, %lld] (another base model, or another r?)",
                   shown_text(f->path).s, shown_text(t->name).s, st_describe(t, got, sizeof got),
                   (long long)dst->shape[0], (long long)dst->shape[1]);
    }
    float *host = malloc(dst->nbytes);
    TRY_ALLOC(host);
    pt_status st = st_read_f32(t, f->path, 0, st_numel(t), host);
    if (st == PT_OK && l) st = adapter_peft_order(l, slot, host, dst->shape[0], dst->shape[1], false);
    if (st == PT_OK) st = backend_upload(be, dst, host, dst->nbytes);
    free(host);
    return st;
}

/* DoRA: a pair's lora_magnitude_vector, one value per output row, kept on the host (merge.c reads it). */
static pt_status load_magnitude(const st_file *f, const st_tensor *t, const pt_adapter *l, int slot, adapter_pair *p)
{
    int64_t out = p->b.shape[0];
    if (t->ndim != 1 || t->shape[0] != out) {
        char got[96];
        return ERR(PT_ERR_USER, "%s: tensor %s is %s; this model needs [%lld]", shown_text(f->path).s,
                   shown_text(t->name).s, st_describe(t, got, sizeof got), (long long)out);
    }
    free(p->mag);
    p->mag = malloc(sizeof(float) * (size_t)out);
    TRY_ALLOC(p->mag);
    TRY(st_read_f32(t, f->path, 0, out, p->mag));
    return adapter_peft_order(l, slot, p->mag, out, 1, false);
}

/* An experts pair's B: PEFT's [out, E·r] into ptrain's [E·out, r]. */
static pt_status load_experts_b(const st_file *f, const st_tensor *t, pt_backend *be, pt_tensor *dst, int64_t experts)
{
    int64_t out = dst->shape[0] / experts, r = dst->shape[1];
    int64_t shape[2] = {out, experts * r};
    pt_tensor peft = tensor_make(PT_F32, 2, shape);
    float *host = malloc(peft.nbytes), *ours = malloc(peft.nbytes);
    if (!host || !ours) return free(host), free(ours), ERR(PT_ERR_NOMEM, "out of memory");
    pt_status st = PT_OK;
    if (t->ndim != 2 || t->shape[0] != out || t->shape[1] != experts * r) {
        char got[96];
        st = ERR(PT_ERR_USER, "%s: tensor %s is %s; this model needs [%lld, %lld] (another base model, or another r?)",
                 shown_text(f->path).s, shown_text(t->name).s, st_describe(t, got, sizeof got), (long long)out,
                 (long long)(experts * r));
    }
    if (st == PT_OK) st = st_read_f32(t, f->path, 0, st_numel(t), host);
    if (st == PT_OK) adapter_experts_b(host, ours, out, (int)r, (int)experts, false);
    if (st == PT_OK) st = backend_upload(be, dst, ours, dst->nbytes);
    free(host), free(ours);
    return st;
}

static pt_status load_tensors(const st_file *f, const peft_settings *s, pt_adapter *l)
{
    for (size_t i = 0; i < f->n_tensors; i++) {
        int layer, slot;
        char which;
        if (saved_index(f->tensors[i].name) >= 0 || !strcmp(f->tensors[i].name, SCORE_NAME)) continue;
        parse_name(l->arch, s, f->tensors[i].name, l->n_layers, &layer, &slot, &which);
        adapter_pair *p = adapter_at(l, layer, slot);
        if (!p)
            return ERR(PT_ERR_USER, "%s: tensor %s is for a layer that layers_to_transform of adapter_config.json "
                       "leaves out; is the config of another adapter?", shown_text(f->path).s,
                       shown_text(f->tensors[i].name).s);
        if (which == 'M') {
            TRY(load_magnitude(f, &f->tensors[i], l, slot, p));
            continue;
        }
        if (which == 'B' && pair_experts(p) > 1)
            TRY(load_experts_b(f, &f->tensors[i], l->be, &p->b, pair_experts(p)));
        else
            TRY(load_matrix(f, &f->tensors[i], l->be, which == 'A' ? &p->a : &p->b, which == 'A' ? NULL : l, slot));
    }
    return PT_OK;
}

/* modules_to_save's tensors into l->saved, in f32 whatever dtype the file has; shapes as the model's. */
static pt_status load_saved(const st_file *f, const pt_model *m, pt_adapter *l)
{
    for (size_t i = 0; i < f->n_tensors; i++) {
        int k = saved_index(f->tensors[i].name);
        if (k < 0) continue;
        int64_t shape[2] = {m->tok_embd.shape[0], m->tok_embd.shape[1]};
        l->saved[k] = tensor_make(PT_F32, 2, shape);
        TRY(backend_alloc(l->be, &l->saved[k]));
        TRY(load_matrix(f, &f->tensors[i], l->be, &l->saved[k], NULL, 0));
    }
    return PT_OK;
}

pt_status peft_read_score(const char *dir, int64_t dim, float **score)
{
    *score = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (access(path, R_OK) != 0) return PT_OK;
    st_file f;
    TRY(st_open(path, &f));
    const st_tensor *t = st_find(&f, SCORE_NAME);
    pt_status st = PT_OK;
    if (t && (st_numel(t) != dim || t->ndim != 2 || t->shape[0] != 1)) {
        char got[96];
        st = ERR(PT_ERR_USER, "%s: %s is %s; this model's score head is [1, %lld] (an adapter of another base model?)",
                 shown_text(path).s, SCORE_NAME, st_describe(t, got, sizeof got), (long long)dim);
    } else if (t) {
        *score = malloc(sizeof(float) * (size_t)dim);
        st = *score ? st_read_f32(t, f.path, 0, dim, *score) : ERR(PT_ERR_NOMEM, "out of memory");
        if (st != PT_OK) free(*score), *score = NULL;
    }
    st_close(&f);
    return st;
}

pt_status peft_load(const char *dir, const pt_model *m, pt_adapter *l)
{
    memset(l, 0, sizeof *l);
    peft_settings s = {0};
    TRY(read_config(dir, &s));
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    st_file f;
    pt_status st = st_open(path, &f);
    if (st != PT_OK) {
        free(s.select);
        return st;
    }
    bool target[W_COUNT];
    st = find_targets(&f, m, &s, target);
    if (st == PT_OK && f.n_tensors == 0) st = ERR(PT_ERR_USER, "%s holds no tensors", shown_text(path).s);
    /* layers the file leaves out keep B = 0: no change to the model there */
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    if (st == PT_OK)
        st = adapter_create_select(l, m, s.r, (float)s.alpha, s.rslora, target, s.select, shown_text(path).s, NULL);
    if (st == PT_OK) st = load_tensors(&f, &s, l);
    if (st == PT_OK) st = load_saved(&f, m, l);
    l->dora = s.dora;
    for (adapter_pair *p = adapter_next(l, NULL); st == PT_OK && s.dora && p; p = adapter_next(l, p))
        if (!p->mag)
            st = ERR(PT_ERR_USER, "%s: use_dora is set but a projection has no lora_magnitude_vector; is the file of "
                     "another adapter?", shown_text(path).s);
    free(s.select);
    st_close(&f);
    if (st != PT_OK) adapter_free(l);
    return st;
}
