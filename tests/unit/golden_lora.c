/* golden_lora.c — reading a PEFT/TRL golden's LoRA tensors for the unit tests (see golden_lora.h). */
#include "golden_lora.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptrain/adapter.h"

const char *golden_srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s ? s : "..";
}

float *golden_read_f32(const char *dir, const char *name, size_t *count)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/%s", golden_srcdir(), dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)bytes);
    assert_non_null(v);
    assert_int_equal(fread(v, 1, (size_t)bytes, f), (size_t)bytes);
    fclose(f);
    *count = (size_t)bytes / sizeof(float);
    return v;
}

int golden_module_index(const char *name)
{
    for (int w = 0; w < W_COUNT; w++)
        if (adapter_module_name(PT_ARCH_LLAMA, w) && !strcmp(adapter_module_name(PT_ARCH_LLAMA, w), name)) return w;
    return -1;
}

void golden_for_each_tensor(pt_backend *be, pt_lora *l, json_t *manifest, golden_tensor_fn fn, void *arg)
{
    size_t i, offset = 0;
    json_t *t;
    json_array_foreach(json_object_get(manifest, "tensors"), i, t) {
        int layer = (int)json_integer_value(json_object_get(t, "layer"));
        int w = golden_module_index(json_string_value(json_object_get(t, "module")));
        bool is_a = json_string_value(json_object_get(t, "which"))[0] == 'A';
        adapter_pair *p = adapter_at(&l->ad, layer, w);
        lora_pair *s = lora_at(l, layer, w);
        assert_non_null(p);
        fn(be, is_a ? &p->a : &p->b, is_a ? &s->grad_a : &s->grad_b, offset, arg);
        offset += (size_t)tensor_numel(is_a ? &p->a : &p->b);
    }
}

void golden_set_values(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg)
{
    (void)grad;
    assert_int_equal(backend_upload(be, t, (float *)arg + offset, t->nbytes), PT_OK);
}

void golden_compare_tensor(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg)
{
    golden_compare *c = arg;
    pt_tensor *src = c->grads ? grad : t;
    float *got = malloc(src->nbytes);
    assert_non_null(got);
    assert_int_equal(backend_download(be, src, got, src->nbytes), PT_OK);
    double diff = 0, scale = 1e-30;
    for (int64_t i = 0; i < tensor_numel(src); i++) {
        diff = fmax(diff, fabs((double)got[i] - c->ref[offset + (size_t)i]));
        scale = fmax(scale, fabs((double)c->ref[offset + (size_t)i]));
    }
    c->worst = fmax(c->worst, diff / scale);
    free(got);
}

void golden_collect_grads(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg)
{
    (void)t;
    assert_int_equal(backend_download(be, grad, (float *)arg + offset, grad->nbytes), PT_OK);
}

size_t golden_dora_magnitudes(pt_backend *be, pt_lora *l, int n_layers, const float *v, size_t at, size_t n,
                              double *worst)
{
    static const char *const order[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    double diff = 0, scale = 1e-30;
    for (int layer = 0; layer < n_layers; layer++)
        for (int k = 0; k < 7; k++) {
            int w = golden_module_index(order[k]);
            lora_pair *s = lora_at(l, layer, w);
            size_t rows = (size_t)adapter_at(&l->ad, layer, w)->b.shape[0];
            assert_true(at + rows <= n);
            if (!worst) {
                assert_int_equal(adapter_dora_set(&l->ad, layer, w, v + at), PT_OK);
                at += rows;
                continue;
            }
            float *got = malloc(s->grad_m.nbytes);
            assert_non_null(got);
            assert_int_equal(backend_download(be, &s->grad_m, got, s->grad_m.nbytes), PT_OK);
            for (size_t i = 0; i < rows; i++, at++)
                diff = fmax(diff, fabs((double)got[i] - v[at])), scale = fmax(scale, fabs((double)v[at]));
            free(got);
        }
    if (worst) *worst = diff / scale;
    return at;
}
