/* golden_lora.h — the unit tests' view of a PEFT/TRL golden's LoRA tensors: a float file under
 * tests/data/DIR, and the golden's manifest walked in file order (layer, module, A or B), each
 * tensor set from the file or compared with it (values or gradients). test_train, test_dpo and
 * test_grpo read their goldens this way; one copy keeps their walks the same. */
#ifndef PTRAIN_TEST_GOLDEN_LORA_H
#define PTRAIN_TEST_GOLDEN_LORA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "ptrain/backend.h"
#include "ptrain/lora.h"

/* The source root: $PTRAIN_SRCDIR, else .. (make check runs the tests in the build directory). */
const char *golden_srcdir(void);

/* The Llama weight index (W_*) of a PEFT module name, or -1. */
int golden_module_index(const char *name);

/* tests/data/DIR/NAME (under $PTRAIN_SRCDIR, else ..) read whole as floats; *count of them. */
float *golden_read_f32(const char *dir, const char *name, size_t *count);

/* Called for each of the manifest's tensors: the tensor, its gradient, its offset (in floats)
 * into the golden's float files. */
typedef void (*golden_tensor_fn)(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg);

/* Walk manifest["tensors"] (Llama module names) over the adapter l in file order. */
void golden_for_each_tensor(pt_backend *be, pt_lora *l, json_t *manifest, golden_tensor_fn fn, void *arg);

/* golden_tensor_fn: upload the floats at (float *)arg + offset into the tensor. */
void golden_set_values(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg);

/* golden_tensor_fn with a golden_compare as arg: worst becomes the largest, over the tensors, of
 * max |got - ref| / max |ref| (a zero reference must be met exactly); got is the gradient when
 * grads is set, else the tensor's values. */
typedef struct {
    const float *ref;
    bool grads;
    double worst;
} golden_compare;
void golden_compare_tensor(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg);

/* golden_tensor_fn: download the gradient to (float *)arg + offset. */
void golden_collect_grads(pt_backend *be, pt_tensor *t, pt_tensor *grad, size_t offset, void *arg);

/* The DoRA magnitudes of the Llama modules in layer and module order (q, k, v, o, gate, up, down;
 * make_dora_pref_goldens.py's order): set from v + at (worst NULL), or their gradients compared
 * with v + at, *worst the max relative error; returns the offset where they end (at most n). */
size_t golden_dora_magnitudes(pt_backend *be, pt_lora *l, int n_layers, const float *v, size_t at, size_t n,
                              double *worst);

#endif
