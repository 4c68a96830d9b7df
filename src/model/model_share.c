/* model_share.c — a model as one block of host memory that several processes bind to
 * (model_share.h): the image backend the loader writes into, the upper bound of a model's image,
 * and the description that carries a loaded model's shape and tensor offsets to the other ranks. */
#include "ptrain/model_share.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/gguf.h"
#include "ptrain/safetensors.h"

#define IMAGE_ALIGN 64                 /* vector loads */
#define IMAGE_PAGE_ALIGN 4096          /* large tensors start on a page */
#define DESC_MAGIC 0x50544d49u         /* "PTMI" */

/* ---- the image backend: allocation from the block, uploads and downloads as copies ---- */

static pt_status image_alloc(pt_backend *be, pt_tensor *t)
{
    weight_image *im = be->ctx;
    size_t align = t->nbytes >= ((size_t)1 << 20) ? IMAGE_PAGE_ALIGN : IMAGE_ALIGN;
    size_t at = (im->used + align - 1) / align * align;
    if (at + t->nbytes > im->cap)
        return ERR(PT_ERR_INTERNAL, "the shared weight image of %zu bytes is full (%zu more needed): its bound is "
                   "wrong", im->cap, at + t->nbytes - im->cap);
    t->data = t->nbytes ? im->base + at : NULL;
    im->used = at + t->nbytes;
    return PT_OK;
}

static void image_release(pt_backend *be, pt_tensor *t)
{
    (void)be;
    t->data = NULL; /* the block is freed as a whole */
}

static pt_status image_upload(pt_backend *be, pt_tensor *dst, const void *host, size_t n)
{
    (void)be;
    memcpy(dst->data, host, n);
    return PT_OK;
}

static pt_status image_download(pt_backend *be, const pt_tensor *src, void *host, size_t n)
{
    (void)be;
    memcpy(host, src->data, n);
    return PT_OK;
}

void weight_image_open(weight_image *im, void *base, size_t cap)
{
    memset(im, 0, sizeof *im);
    im->ops.name = "weight image";
    im->ops.alloc = image_alloc;
    im->ops.release = image_release;
    im->ops.upload = image_upload;
    im->ops.download = image_download;
    im->be.ops = &im->ops;
    im->be.ctx = im;
    im->be.device = -1;
    im->base = base;
    im->cap = cap;
}

/* ---- the bound ---- */

static size_t slack(uint64_t n_tensors, uint64_t vector_values)
{
    return (size_t)(n_tensors * IMAGE_PAGE_ALIGN + vector_values * sizeof(float)) + ((size_t)1 << 20);
}

static pt_status gguf_bound(const char *path, size_t *bytes)
{
    gguf_file f;
    TRY(gguf_open(path, &f));
    uint64_t vectors = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++)
        if (f.tensors[i].n_dims == 1) vectors += f.tensors[i].dims[0];
    *bytes = f.size + slack(f.n_tensors, vectors);
    gguf_close(&f);
    return PT_OK;
}

static pt_status hf_bound(const char *path, size_t *bytes)
{
    st_set s;
    TRY(st_set_open(path, &s));
    size_t files = 0;
    uint64_t vectors = 0, parts = 0; /* a fused 3-D expert tensor becomes two weights per expert */
    for (int i = 0; i < s.n_files; i++) files += s.files[i].size;
    for (size_t i = 0; i < s.n_entries; i++) {
        if (s.entries[i].tensor->ndim == 1) vectors += (uint64_t)s.entries[i].tensor->shape[0];
        if (s.entries[i].tensor->ndim == 3) parts += 2 * (uint64_t)s.entries[i].tensor->shape[0];
    }
    *bytes = files + slack(s.n_entries + parts, vectors);
    st_set_close(&s);
    return PT_OK;
}

pt_status model_image_bound(const char *path, pt_model_format fmt, size_t *bytes)
{
    if (fmt == PT_MODEL_GGUF) return gguf_bound(path, bytes);
    char dir[4096];
    struct stat sb;
    bool single = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && strstr(path, ".safetensors");
    if (!single) model_hf_dir(path, dir, sizeof dir);
    return hf_bound(single ? path : dir, bytes);
}

/* ---- the description ---- */

typedef struct {
    uint32_t magic, n_tensors, n_freq, tied;
    pt_model_config cfg;
    uint64_t weight_bytes;
} desc_head;

typedef struct {
    int32_t dtype, ndim;
    int64_t shape[4];
    uint64_t nbytes;
    uint64_t offset; /* in the block; UINT64_MAX: no memory (a slot the family does not use) */
} desc_tensor;

/* Every tensor of m in a fixed order: the embedding, the final norm, the lm_head (unless tied),
 * then each layer's W_COUNT slots, its router and n_experts * X_COUNT experts (none on a dense layer:
 * empty entries), and with moe_bias (gpt-oss) the router's bias and the X_COUNT expert biases. */
static int expert_tensors(const pt_model_config *c) { return c->n_experts > 0 ? 1 + c->n_experts * X_COUNT : 0; }
static int layer_tensors(const pt_model_config *c) { return W_COUNT + expert_tensors(c) + (c->moe_bias ? 1 + X_COUNT : 0); }
static int tensor_count(const pt_model_config *c) { return 3 + c->n_layers * layer_tensors(c); }

static pt_tensor *tensor_at(pt_model *m, int i)
{
    static pt_tensor none; /* a dense layer's experts: no memory (bind writes {0} here) */
    if (i == 0) return &m->tok_embd;
    if (i == 1) return &m->out_norm;
    if (i == 2) return &m->output;
    i -= 3;
    pt_layer_weights *w = &m->layers[i / layer_tensors(&m->cfg)];
    int j = i % layer_tensors(&m->cfg);
    if (j < W_COUNT) return &w->w[j];
    if (j == W_COUNT) return &w->router;
    int b = j - W_COUNT - expert_tensors(&m->cfg); /* the biases (moe_bias) */
    if (b == 0) return &w->router_bias;
    if (b > 0) return &w->expert_bias[b - 1];
    none = (pt_tensor){0};
    return w->experts ? &w->experts[j - W_COUNT - 1] : &none;
}

pt_status model_describe(const pt_model *m, const void *base, void **out, size_t *n)
{
    const pt_model_config *c = &m->cfg;
    int count = tensor_count(c), half = model_freq_count(c); /* every frequency kept */
    *n = sizeof(desc_head) + (size_t)count * sizeof(desc_tensor) + (size_t)half * sizeof(float);
    unsigned char *p = calloc(1, *n);
    TRY_ALLOC(p);
    desc_head h = {DESC_MAGIC, (uint32_t)count, (uint32_t)half, c->tied_embeddings, *c, m->weight_bytes};
    memcpy(p, &h, sizeof h);
    desc_tensor *d = (desc_tensor *)(p + sizeof h);
    for (int i = 0; i < count; i++) {
        const pt_tensor *t = tensor_at((pt_model *)m, i);
        d[i] = (desc_tensor){t->dtype, t->ndim, {t->shape[0], t->shape[1], t->shape[2], t->shape[3]}, t->nbytes,
                             t->data ? (uint64_t)((const unsigned char *)t->data - (const unsigned char *)base)
                                     : UINT64_MAX};
    }
    memcpy(p + sizeof h + (size_t)count * sizeof(desc_tensor), m->inv_freq, (size_t)half * sizeof(float));
    *out = p;
    return PT_OK;
}

/* One tensor of the description: in place, or uploaded to be. */
static pt_status bind_tensor(const desc_tensor *d, const void *base, pt_backend *be, bool in_place, pt_tensor *t)
{
    *t = tensor_make((pt_dtype)d->dtype, d->ndim, d->shape);
    if (d->offset == UINT64_MAX) {
        *t = (pt_tensor){0};
        return PT_OK;
    }
    const unsigned char *src = (const unsigned char *)base + d->offset;
    if (in_place) {
        t->data = (void *)src;
        return PT_OK;
    }
    TRY(backend_alloc(be, t));
    return backend_upload(be, t, src, t->nbytes);
}

static pt_status check_desc(const void *desc, size_t n, const desc_head *h)
{
    if (n < sizeof *h || h->magic != DESC_MAGIC || (int)h->n_tensors != tensor_count(&h->cfg) ||
        n != sizeof *h + h->n_tensors * sizeof(desc_tensor) + h->n_freq * sizeof(float))
        return ERR(PT_ERR_INTERNAL, "the shared model's description (%zu bytes) does not read back", n);
    (void)desc;
    return PT_OK;
}

pt_status model_bind(const void *desc, size_t n, const void *base, pt_backend *be, bool in_place, pt_model *m)
{
    desc_head h;
    memset(m, 0, sizeof *m);
    if (n >= sizeof h) memcpy(&h, desc, sizeof h);
    TRY(check_desc(desc, n, &h));
    m->cfg = h.cfg;
    m->be = be;
    m->borrowed = in_place;
    m->weight_bytes = (size_t)h.weight_bytes;
    m->layers = calloc((size_t)h.cfg.n_layers, sizeof *m->layers);
    m->inv_freq = malloc(sizeof(float) * (h.n_freq ? h.n_freq : 1));
    TRY_ALLOC(m->layers && m->inv_freq ? m->layers : NULL);
    const desc_tensor *d = (const desc_tensor *)((const unsigned char *)desc + sizeof h);
    memcpy(m->inv_freq, d + h.n_tensors, sizeof(float) * h.n_freq);
    pt_status st = PT_OK;
    for (int l = 0; l < h.cfg.n_layers && st == PT_OK; l++)
        if (model_layer_moe(&h.cfg, l)) {
            m->layers[l].experts = calloc((size_t)h.cfg.n_experts * X_COUNT, sizeof(pt_tensor));
            if (!m->layers[l].experts) st = ERR(PT_ERR_NOMEM, "out of memory");
        }
    for (int i = 0; i < (int)h.n_tensors && st == PT_OK; i++)
        if (!(i == 2 && h.tied)) st = bind_tensor(&d[i], base, be, in_place, tensor_at(m, i));
    if (st == PT_OK && h.tied) m->output = m->tok_embd;
    if (st != PT_OK) model_free(m);
    return st;
}
