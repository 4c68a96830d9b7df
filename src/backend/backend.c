/* backend.c — choosing a backend and the checked front doors to its operations. Each front door
 * validates what every backend would otherwise re-check (shapes, dtypes, a missing op), so the
 * backends themselves stay short. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ptrain/backend.h"
#include "ptrain/nf4.h"
#include "ptrain/quant_blocks.h"
#include "ptrain/util.h"

#include <math.h>
#include <string.h>

#define DTYPE_ROW(dtype, ggml_type, name, values, block) [dtype] = {name, values, sizeof(block)},
#define DTYPE_ONE(dtype, ggml_type, name, values, block) +1

/* Every pt_dtype: the formats of quant_blocks.h's list, and NF4. */
static const struct {
    const char *name;
    int block;     /* values per block */
    size_t bytes;  /* bytes per block */
} dtype_info[PT_DTYPE_COUNT] = {
    QUANT_FORMATS(DTYPE_ROW)
    [PT_NF4] = {"nf4", NF4_BLOCK, NF4_BLOCK / 2}, /* the codes; the scales are counted by nf4_bytes */
};
/* A pt_dtype added without its row would have none (a NULL name); -Woverride-init catches a row
 * given twice. */
_Static_assert(QUANT_FORMATS(DTYPE_ONE) + 1 == PT_DTYPE_COUNT,
               "every pt_dtype but PT_NF4 needs its entry in QUANT_FORMATS (quant_blocks.h)");

const char *dtype_name(pt_dtype dtype)
{
    return (unsigned)dtype < PT_DTYPE_COUNT ? dtype_info[dtype].name : "invalid";
}

size_t dtype_size_bytes(pt_dtype dtype, int64_t nelem)
{
    if ((unsigned)dtype >= PT_DTYPE_COUNT || nelem < 0 || nelem % dtype_info[dtype].block) return 0;
    return (size_t)(nelem / dtype_info[dtype].block) * dtype_info[dtype].bytes;
}

int64_t dtype_block_values(pt_dtype dtype) { return (unsigned)dtype < PT_DTYPE_COUNT ? dtype_info[dtype].block : 0; }

int64_t tensor_numel(const pt_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

pt_tensor tensor_make(pt_dtype dtype, int ndim, const int64_t *shape)
{
    pt_tensor t = {.dtype = dtype, .ndim = ndim};
    for (int i = 0; i < ndim && i < 4; i++) t.shape[i] = shape[i];
    if (dtype == PT_NF4) /* scales for the whole matrix live beside the codes (nf4.h) */
        t.nbytes = ndim == 2 && nf4_check_shape(shape[0], shape[1]) == PT_OK ? nf4_bytes(shape[0], shape[1]) : 0;
    else
        t.nbytes = dtype_size_bytes(dtype, tensor_numel(&t));
    return t;
}

const char *backend_list(void)
{
#ifdef PTRAIN_HAVE_CUDA
    return "cpu cuda";
#else
    return "cpu";
#endif
}

pt_device backend_resolve(pt_device device)
{
#ifdef PTRAIN_HAVE_CUDA
    if (device != DEVICE_CPU) return cuda_device_count() > 0 ? DEVICE_CUDA : DEVICE_CPU;
#else
    (void)device;
#endif
    return DEVICE_CPU;
}

pt_status backend_open(const pt_backend_options *opts, pt_backend **out)
{
    *out = NULL;
    if (opts->device == DEVICE_CPU) return cpu_backend_open(opts, out);
#ifdef PTRAIN_HAVE_CUDA
    int gpus = cuda_device_count();
    if (opts->device == DEVICE_CUDA && gpus == 0)
        return ERR(PT_ERR_USER, "device: cuda, but no GPU is visible to this process (check "
                                "nvidia-smi and CUDA_VISIBLE_DEVICES), or use device: cpu");
    if (gpus > 0) return cuda_backend_open(opts, out);
#else
    if (opts->device == DEVICE_CUDA)
        return ERR(PT_ERR_USER, "device: cuda, but this ptrain was built without CUDA; rebuild with "
                                "./configure --with-cuda, or use device: cpu");
#endif
    return cpu_backend_open(opts, out);
}

void backend_close(pt_backend *be)
{
    if (be) be->ops->close(be);
}

#define NEED_OP(be, op)                                                                            \
    do {                                                                                           \
        if (!(be)->ops->op)                                                                        \
            return ERR(PT_ERR_UNSUPPORTED, "the %s backend has no %s operation", (be)->ops->name, #op); \
    } while (0)

pt_status backend_alloc(pt_backend *be, pt_tensor *t)
{
    if (t->nbytes == 0 && tensor_numel(t) > 0)
        return ERR(PT_ERR_INTERNAL, "tensor of %s with %lld values is not whole blocks", dtype_name(t->dtype),
                   (long long)tensor_numel(t));
    return be->ops->alloc(be, t);
}

void backend_release(pt_backend *be, pt_tensor *t)
{
    if (t->data) be->ops->release(be, t);
    t->data = NULL;
}

pt_status backend_upload(pt_backend *be, pt_tensor *dst, const void *host, size_t nbytes)
{
    if (nbytes != dst->nbytes)
        return ERR(PT_ERR_INTERNAL, "upload of %zu bytes into a tensor of %zu", nbytes, dst->nbytes);
    double t0 = util_now();
    pt_status st = be->ops->upload(be, dst, host, nbytes);
    be->upload_s += util_now() - t0;
    return st;
}

pt_status backend_download(pt_backend *be, const pt_tensor *src, void *host, size_t nbytes)
{
    if (nbytes != src->nbytes)
        return ERR(PT_ERR_INTERNAL, "download of %zu bytes from a tensor of %zu", nbytes, src->nbytes);
    return be->ops->download(be, src, host, nbytes);
}

pt_status matmul_shapes(const pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int64_t *m,
                        int64_t *n, int64_t *k)
{
    if (x->ndim != 2 || w->ndim != 2 || y->ndim != 2)
        return ERR(PT_ERR_INTERNAL, "matmul needs 2-d tensors (got %d, %d, %d)", y->ndim, x->ndim, w->ndim);
    *m = x->shape[0];
    *k = x->shape[1];
    *n = w->shape[0];
    if (w->shape[1] != *k || y->shape[0] != *m || y->shape[1] != *n)
        return ERR(PT_ERR_INTERNAL, "matmul shapes: y[%lld,%lld] = x[%lld,%lld] @ w[%lld,%lld]^T",
                   (long long)y->shape[0], (long long)y->shape[1], (long long)*m, (long long)*k,
                   (long long)w->shape[0], (long long)w->shape[1]);
    return PT_OK;
}

/* An activation: f32 (every backend takes it) or the backend's activation dtype (backend.h). */
static pt_status need_act(const pt_backend *be, const pt_tensor *t, const char *op, const char *what)
{
    if (t->dtype != PT_F32 && t->dtype != be->act)
        return ERR(PT_ERR_INTERNAL, "%s: %s must be f32 or %s on the %s backend (got %s)", op, what,
                   dtype_name(be->act), be->ops->name, dtype_name(t->dtype));
    return PT_OK;
}

pt_status backend_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta)
{
    int64_t m, n, k;
    TRY(matmul_shapes(y, x, w, &m, &n, &k));
    TRY(need_act(be, x, "matmul", "x"));
    TRY(need_act(be, y, "matmul", "y"));
    NEED_OP(be, matmul);
    return be->ops->matmul(be, y, x, w, beta);
}

pt_status backend_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy,
                                   const pt_tensor *w, float beta)
{
    int64_t m, n, k;
    TRY(matmul_shapes(dy, dx, w, &m, &n, &k));
    TRY(need_act(be, dy, "matmul_bwd_input", "dy"));
    TRY(need_act(be, dx, "matmul_bwd_input", "dx"));
    NEED_OP(be, matmul_bwd_input);
    return be->ops->matmul_bwd_input(be, dx, dy, w, beta);
}

pt_status backend_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy,
                                    const pt_tensor *x, float beta)
{
    int64_t m, n, k;
    TRY(matmul_shapes(dy, x, dw, &m, &n, &k));
    TRY(need_act(be, dy, "matmul_bwd_weight", "dy"));
    TRY(need_act(be, x, "matmul_bwd_weight", "x"));
    if (dw->dtype != PT_F32) return ERR(PT_ERR_INTERNAL, "weight gradients are f32 (got %s)", dtype_name(dw->dtype));
    NEED_OP(be, matmul_bwd_weight);
    return be->ops->matmul_bwd_weight(be, dw, dy, x, beta);
}

pt_status backend_allreduce_sum(pt_backend *be, pt_tensor *t)
{
    if (t->dtype != PT_F32) return ERR(PT_ERR_INTERNAL, "all-reduce takes f32 (got %s)", dtype_name(t->dtype));
    NEED_OP(be, allreduce_sum);
    return be->ops->allreduce_sum(be, t);
}

pt_status backend_reduce_begin(pt_backend *be, pt_tensor *t)
{
    if (t->dtype != PT_F32) return ERR(PT_ERR_INTERNAL, "all-reduce takes f32 (got %s)", dtype_name(t->dtype));
    NEED_OP(be, reduce_begin);
    return be->ops->reduce_begin(be, t);
}

pt_status backend_reduce_poll(pt_backend *be)
{
    NEED_OP(be, reduce_poll);
    return be->ops->reduce_poll(be);
}

pt_status backend_reduce_end(pt_backend *be)
{
    NEED_OP(be, reduce_end);
    return be->ops->reduce_end(be);
}

pt_status backend_zero(pt_backend *be, pt_tensor *t)
{
    NEED_OP(be, zero);
    return be->ops->zero(be, t);
}

pt_status backend_host_alloc(pt_backend *be, size_t bytes, void **p)
{
    NEED_OP(be, host_alloc);
    return be->ops->host_alloc(be, bytes, p);
}

void backend_host_free(pt_backend *be, void *p)
{
    if (p && be && be->ops->host_free) be->ops->host_free(be, p);
}

pt_status backend_to_host_async(pt_backend *be, void *host, const pt_tensor *src)
{
    NEED_OP(be, to_host_async);
    return be->ops->to_host_async(be, host, src);
}

pt_status backend_from_host_async(pt_backend *be, pt_tensor *dst, const void *host)
{
    NEED_OP(be, from_host_async);
    return be->ops->from_host_async(be, dst, host);
}

pt_status backend_copies_wait(pt_backend *be)
{
    NEED_OP(be, copies_wait);
    return be->ops->copies_wait(be);
}

pt_status backend_weight_cache(pt_backend *be, size_t bytes)
{
    return be->ops->weight_cache ? be->ops->weight_cache(be, bytes) : PT_OK;
}

pt_status backend_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src)
{
    if (dst->dtype != src->dtype || dst->nbytes != src->nbytes)
        return ERR(PT_ERR_INTERNAL, "copy of %zu bytes of %s into %zu bytes of %s", src->nbytes,
                   dtype_name(src->dtype), dst->nbytes, dtype_name(dst->dtype));
    NEED_OP(be, copy);
    return be->ops->copy(be, dst, src);
}

pt_tensor tensor_span(const pt_tensor *t, int64_t offset, int64_t count)
{
    int64_t shape[1] = {count};
    pt_tensor v = tensor_make(PT_F32, 1, shape);
    v.data = (char *)t->data + (size_t)offset * sizeof(float);
    return v;
}

pt_tensor tensor_rows(const pt_tensor *t, int64_t r0, int64_t rows)
{
    pt_tensor v = *t;
    size_t row_bytes = dtype_size_bytes(t->dtype, t->shape[1]);
    v.shape[0] = rows;
    v.data = (char *)t->data + (size_t)r0 * row_bytes;
    v.nbytes = (size_t)rows * row_bytes;
    return v;
}

static pt_status need_f32(const pt_tensor *t, const char *op, const char *what)
{
    if (t->dtype != PT_F32)
        return ERR(PT_ERR_INTERNAL, "%s: %s must be f32 (got %s)", op, what, dtype_name(t->dtype));
    return PT_OK;
}

static pt_status need_same_shape(const pt_tensor *a, const pt_tensor *b, const char *op)
{
    if (tensor_numel(a) != tensor_numel(b) || a->shape[a->ndim - 1] != b->shape[b->ndim - 1])
        return ERR(PT_ERR_INTERNAL, "%s: shapes differ (%lld vs %lld values)", op,
                   (long long)tensor_numel(a), (long long)tensor_numel(b));
    if (a->dtype != b->dtype)
        return ERR(PT_ERR_INTERNAL, "%s: dtypes differ (%s vs %s)", op, dtype_name(a->dtype), dtype_name(b->dtype));
    return PT_OK;
}

pt_status backend_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids)
{
    TRY(need_act(be, out, "embed", "out"));
    if (table->ndim != 2 || out->shape[out->ndim - 1] != table->shape[1])
        return ERR(PT_ERR_INTERNAL, "embed: rows of %lld into a table of width %lld",
                   (long long)out->shape[out->ndim - 1], (long long)table->shape[1]);
    int64_t n = tensor_numel(out) / table->shape[1];
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= table->shape[0])
            return ERR(PT_ERR_USER, "token id %d is outside the vocabulary (%lld tokens)", ids[i],
                       (long long)table->shape[0]);
    NEED_OP(be, embed);
    return be->ops->embed(be, out, table, ids);
}

pt_status backend_embed_bwd(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids, float scale)
{
    TRY(need_act(be, dout, "embed_bwd", "dout"));
    if (dtable->dtype != PT_F32 || dtable->ndim != 2 || dout->shape[dout->ndim - 1] != dtable->shape[1])
        return ERR(PT_ERR_INTERNAL, "embed_bwd: rows of %lld into an f32 table of width %lld (%s)",
                   (long long)dout->shape[dout->ndim - 1], (long long)dtable->shape[1], dtype_name(dtable->dtype));
    int64_t n = tensor_numel(dout) / dtable->shape[1];
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= dtable->shape[0])
            return ERR(PT_ERR_USER, "token id %d is outside the vocabulary (%lld tokens)", ids[i],
                       (long long)dtable->shape[0]);
    NEED_OP(be, embed_bwd);
    return be->ops->embed_bwd(be, dtable, dout, ids, scale);
}

pt_status backend_rmsnorm(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                          const pt_tensor *w, float eps)
{
    TRY(need_act(be, x, "rmsnorm", "x"));
    TRY(need_f32(w, "rmsnorm", "weight"));
    TRY(need_same_shape(y, x, "rmsnorm"));
    if (tensor_numel(w) != x->shape[x->ndim - 1])
        return ERR(PT_ERR_INTERNAL, "rmsnorm: weight of %lld for rows of %lld", (long long)tensor_numel(w),
                   (long long)x->shape[x->ndim - 1]);
    NEED_OP(be, rmsnorm_fwd);
    return be->ops->rmsnorm_fwd(be, y, rstd, x, w, eps);
}

pt_status backend_add_rmsnorm(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                              const pt_tensor *w, float eps)
{
    TRY(need_act(be, h, "add_rmsnorm", "h"));
    TRY(need_same_shape(h, r, "add_rmsnorm"));
    TRY(need_same_shape(y, h, "add_rmsnorm"));
    TRY(need_f32(w, "add_rmsnorm", "weight"));
    int64_t dim = h->shape[h->ndim - 1];
    if (tensor_numel(w) != dim || (rstd && (rstd->dtype != PT_F32 || tensor_numel(rstd) != tensor_numel(h) / dim)))
        return ERR(PT_ERR_INTERNAL, "add_rmsnorm: a weight of %lld (or an rstd) for rows of %lld",
                   (long long)tensor_numel(w), (long long)dim);
    NEED_OP(be, add_rmsnorm);
    return be->ops->add_rmsnorm(be, h, y, rstd, r, w, eps);
}

static pt_status rope_check(pt_backend *be, const pt_tensor *x, const char *op, int n_heads, int head_dim, int rot_dim)
{
    TRY(need_act(be, x, op, "x"));
    if (head_dim % 2 || rot_dim % 2 || rot_dim <= 0 || rot_dim > head_dim ||
        x->shape[x->ndim - 1] != (int64_t)n_heads * head_dim)
        return ERR(PT_ERR_INTERNAL, "%s: rows of %lld for %d heads of %d (%d rotated)", op,
                   (long long)x->shape[x->ndim - 1], n_heads, head_dim, rot_dim);
    return PT_OK;
}

pt_status backend_rope_part(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                            const int32_t *pos, const float *inv_freq)
{
    TRY(rope_check(be, x, "rope", n_heads, head_dim, rot_dim));
    NEED_OP(be, rope_fwd);
    return be->ops->rope_fwd(be, x, n_heads, head_dim, rot_dim, mscale, pos, inv_freq);
}

pt_status backend_pos_scale(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos)
{
    TRY(need_act(be, x, "pos_scale", "x"));
    if (period <= 0 || !isfinite(beta))
        return ERR(PT_ERR_INTERNAL, "pos_scale: period %d and beta %g", period, beta);
    NEED_OP(be, pos_scale);
    return be->ops->pos_scale(be, x, beta, period, pos);
}

pt_status backend_rope(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, const int32_t *pos,
                       const float *inv_freq)
{
    return backend_rope_part(be, x, n_heads, head_dim, head_dim, 1.0f, pos, inv_freq);
}

/* The options every backend's attention takes on trust: a finite non-negative cap, a window >= 0. */
static pt_status attention_options(const pt_attention *a, const char *op)
{
    if (!(a->softcap >= 0.0f) || isinf(a->softcap) || a->window < 0 || !(a->scale > 0.0f))
        return ERR(PT_ERR_INTERNAL, "%s: scale %g, soft-cap %g and window %d are not usable", op, a->scale,
                   a->softcap, a->window);
    return PT_OK;
}

/* Packed and padding-free rows hold several examples whose queries never see each other's keys,
 * so attention runs one run of equal segment ids at a time, as an independent causal sequence:
 * the work is the sum of the squares of the example lengths, not the square of the row. */
static int segment_run_end(const pt_attention *a, int b, int t0)
{
    const int32_t *s = a->segments + (size_t)b * a->n_kv;
    int t1 = t0 + 1;
    while (t1 < a->n_kv && s[t1] == s[t0]) t1++;
    return t1;
}

static bool attention_splits(const pt_attention *a)
{
    if (!a->segments || a->q_pos0 != 0 || a->n_q != a->n_kv) return false;
    for (int b = 0; b < a->batch; b++)
        if (segment_run_end(a, b, 0) < a->n_kv) return true;
    return false;
}

/* Rows [r0, r0+rows) of t, which holds `total` rows (t may be [total, w] or, for the log-sum-exp,
 * flat). */
static pt_tensor run_rows(const pt_tensor *t, int64_t total, int64_t r0, int64_t rows)
{
    pt_tensor v = *t;
    size_t row_bytes = t->nbytes / (size_t)total;
    v.data = (char *)t->data + (size_t)r0 * row_bytes;
    v.nbytes = (size_t)rows * row_bytes;
    v.shape[0] = t->ndim == 1 ? t->shape[0] / total * rows : rows;
    return v;
}

static pt_attention attention_run(const pt_attention *a, int len)
{
    pt_attention s = *a;
    s.batch = 1;
    s.n_q = s.n_kv = len;
    s.segments = NULL;
    return s;
}

static pt_status attention_fwd_runs(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                                    const pt_tensor *k, const pt_tensor *v, const pt_attention *a)
{
    int64_t total = (int64_t)a->batch * a->n_q;
    for (int b = 0; b < a->batch; b++)
        for (int t0 = 0, t1; t0 < a->n_q; t0 = t1) {
            t1 = segment_run_end(a, b, t0);
            int64_t r0 = (int64_t)b * a->n_q + t0, n = t1 - t0;
            pt_tensor ov = run_rows(out, total, r0, n), qv = run_rows(q, total, r0, n);
            pt_tensor kv = run_rows(k, total, r0, n), vv = run_rows(v, total, r0, n);
            pt_tensor lv = lse ? run_rows(lse, total, r0, n) : (pt_tensor){0};
            pt_attention sub = attention_run(a, (int)n);
            TRY(be->ops->attention_fwd(be, &ov, lse ? &lv : NULL, &qv, &kv, &vv, &sub));
        }
    return PT_OK;
}

pt_status backend_attention(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                            const pt_tensor *k, const pt_tensor *v, const pt_attention *a)
{
    TRY(attention_options(a, "attention"));
    int64_t qw = (int64_t)a->n_heads * a->head_dim, kw = (int64_t)a->n_kv_heads * a->head_dim;
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || q->shape[1] != qw || k->shape[1] != kw ||
        v->shape[1] != kw || q->shape[0] != (int64_t)a->batch * a->n_q || k->shape[0] < (int64_t)a->batch * a->n_kv ||
        a->q_pos0 + a->n_q > a->n_kv)
        return ERR(PT_ERR_INTERNAL, "attention: inconsistent shapes (q %lldx%lld, k %lldx%lld, %d heads, "
                   "%d kv heads, %d queries at %d over %d keys)", (long long)q->shape[0], (long long)q->shape[1],
                   (long long)k->shape[0], (long long)k->shape[1], a->n_heads, a->n_kv_heads, a->n_q,
                   a->q_pos0, a->n_kv);
    TRY(need_act(be, q, "attention", "q"));
    TRY(need_same_shape(out, q, "attention"));
    TRY(need_same_shape(k, v, "attention"));
    if (k->dtype != q->dtype) return ERR(PT_ERR_INTERNAL, "attention: q and k dtypes differ");
    NEED_OP(be, attention_fwd);
    if (attention_splits(a)) return attention_fwd_runs(be, out, lse, q, k, v, a);
    return be->ops->attention_fwd(be, out, lse, q, k, v, a);
}

pt_status backend_swiglu(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    TRY(need_act(be, up, "swiglu", "up"));
    TRY(need_same_shape(gate, up, "swiglu"));
    TRY(need_same_shape(y, up, "swiglu"));
    NEED_OP(be, swiglu_fwd);
    return be->ops->swiglu_fwd(be, y, gate, up);
}

pt_status backend_swiglu_clamp(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                               float alpha)
{
    TRY(need_act(be, up, "swiglu_clamp", "up"));
    TRY(need_same_shape(gate, up, "swiglu_clamp"));
    TRY(need_same_shape(y, up, "swiglu_clamp"));
    NEED_OP(be, swiglu_clamp_fwd);
    return be->ops->swiglu_clamp_fwd(be, y, gate, up, limit, alpha);
}

pt_status backend_add(pt_backend *be, pt_tensor *y, const pt_tensor *x)
{
    TRY(need_act(be, x, "add", "x"));
    TRY(need_same_shape(y, x, "add"));
    NEED_OP(be, add);
    return be->ops->add(be, y, x);
}

pt_status backend_geglu(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    TRY(need_act(be, up, "geglu", "up"));
    TRY(need_same_shape(gate, up, "geglu"));
    TRY(need_same_shape(y, up, "geglu"));
    NEED_OP(be, geglu_fwd);
    return be->ops->geglu_fwd(be, y, gate, up);
}

pt_status backend_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias)
{
    TRY(need_act(be, y, "add_bias", "y"));
    TRY(need_f32(bias, "add_bias", "bias"));
    if (y->ndim < 1 || tensor_numel(bias) != y->shape[y->ndim - 1])
        return ERR(PT_ERR_INTERNAL, "add_bias: a bias of %lld for rows of %lld", (long long)tensor_numel(bias),
                   (long long)(y->ndim ? y->shape[y->ndim - 1] : 0));
    NEED_OP(be, add_bias);
    return be->ops->add_bias(be, y, bias);
}

static pt_status need_vector(const pt_tensor *t, int64_t n, const char *op, const char *what)
{
    TRY(need_f32(t, op, what));
    if (tensor_numel(t) != n)
        return ERR(PT_ERR_INTERNAL, "%s: %s has %lld values for %lld output columns", op, what,
                   (long long)tensor_numel(t), (long long)n);
    return PT_OK;
}

pt_status backend_dora_norm(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a,
                            const pt_tensor *b, float s)
{
    if (w->ndim != 2 || a->ndim != 2 || b->ndim != 2 || a->shape[1] != w->shape[1] || b->shape[0] != w->shape[0] ||
        b->shape[1] != a->shape[0])
        return ERR(PT_ERR_INTERNAL, "dora_norm: shapes do not fit: w [N, K], a [r, K], b [N, r]");
    TRY(need_f32(a, "dora_norm", "a"));
    TRY(need_f32(b, "dora_norm", "b"));
    TRY(need_vector(wnorm, w->shape[0], "dora_norm", "wnorm"));
    NEED_OP(be, dora_norm);
    return be->ops->dora_norm(be, wnorm, w, a, b, s);
}

pt_status backend_dora_scale(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm)
{
    TRY(need_act(be, y, "dora_scale", "y"));
    int64_t n = y->ndim ? y->shape[y->ndim - 1] : 0;
    TRY(need_vector(mag, n, "dora_scale", "mag"));
    TRY(need_vector(wnorm, n, "dora_scale", "wnorm"));
    NEED_OP(be, dora_scale);
    return be->ops->dora_scale(be, y, mag, wnorm);
}

pt_status backend_dora_mag_bwd(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                               const pt_tensor *wnorm)
{
    TRY(need_act(be, dy, "dora_mag_bwd", "dy"));
    TRY(need_act(be, z, "dora_mag_bwd", "z"));
    TRY(need_same_shape(dy, z, "dora_mag_bwd"));
    int64_t n = dy->ndim ? dy->shape[dy->ndim - 1] : 0;
    TRY(need_vector(dmag, n, "dora_mag_bwd", "dmag"));
    TRY(need_vector(wnorm, n, "dora_mag_bwd", "wnorm"));
    NEED_OP(be, dora_mag_bwd);
    return be->ops->dora_mag_bwd(be, dmag, dy, z, wnorm);
}

static pt_status need_cap(float cap, const char *op)
{
    if (!(cap > 0.0f) || isinf(cap)) return ERR(PT_ERR_INTERNAL, "%s: cap %g is not a positive number", op, cap);
    return PT_OK;
}

pt_status backend_softcap(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap)
{
    TRY(need_f32(x, "softcap", "x"));
    TRY(need_f32(y, "softcap", "y"));
    TRY(need_same_shape(y, x, "softcap"));
    TRY(need_cap(cap, "softcap"));
    NEED_OP(be, softcap_fwd);
    return be->ops->softcap_fwd(be, y, x, cap);
}

/* ---- Gated DeltaNet (qwen35) ---- */

static pt_status need_delta(const pt_delta *d, int64_t rows, const char *op)
{
    if (d->batch < 1 || d->seq < 1 || (int64_t)d->batch * d->seq != rows || d->k_heads < 1 || d->v_heads < 1 ||
        d->v_heads % d->k_heads || d->k_dim < 1 || d->v_dim < 1 || d->conv < 1)
        return ERR(PT_ERR_INTERNAL, "%s: %d sequences of %d rows for %lld rows, %d/%d heads of %d/%d, conv %d", op,
                   d->batch, d->seq, (long long)rows, d->k_heads, d->v_heads, d->k_dim, d->v_dim, d->conv);
    return PT_OK;
}

static pt_status need_2d(const pt_tensor *t, pt_dtype dtype, int64_t rows, int64_t cols, const char *op,
                         const char *what)
{
    if (t->dtype != dtype || t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols || !t->data)
        return ERR(PT_ERR_INTERNAL, "%s: %s is not %s [%lld, %lld]", op, what, dtype_name(dtype), (long long)rows,
                   (long long)cols);
    return PT_OK;
}

pt_status backend_conv1d_silu(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                              const pt_delta *d)
{
    int64_t rows = x->ndim == 2 ? x->shape[0] : -1, ch = x->ndim == 2 ? x->shape[1] : -1;
    TRY(need_delta(d, rows, "conv1d_silu"));
    TRY(need_act(be, x, "conv1d_silu", "x"));
    TRY(need_2d(x, x->dtype, rows, ch, "conv1d_silu", "x"));
    TRY(need_2d(y, x->dtype, rows, ch, "conv1d_silu", "y"));
    TRY(need_2d(w, PT_F32, ch, d->conv, "conv1d_silu", "w"));
    if (state && d->conv > 1) TRY(need_2d(state, x->dtype, (int64_t)d->batch * (d->conv - 1), ch, "conv1d_silu", "state"));
    if (state && d->segments) return ERR(PT_ERR_INTERNAL, "conv1d_silu: a state with packed examples");
    NEED_OP(be, conv1d_silu);
    return be->ops->conv1d_silu(be, y, x, w, d->conv > 1 ? state : NULL, d);
}

pt_status backend_delta_gates(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                              const pt_tensor *a_log, const pt_tensor *dt_bias)
{
    int64_t rows = b->ndim == 2 ? b->shape[0] : -1, h = b->ndim == 2 ? b->shape[1] : -1;
    TRY(need_act(be, b, "delta_gates", "b"));
    TRY(need_2d(b, b->dtype, rows, h, "delta_gates", "b"));
    TRY(need_2d(a, b->dtype, rows, h, "delta_gates", "a"));
    TRY(need_2d(beta, PT_F32, rows, h, "delta_gates", "beta"));
    TRY(need_2d(g, PT_F32, rows, h, "delta_gates", "g"));
    TRY(need_vector(a_log, h, "delta_gates", "a_log"));
    TRY(need_vector(dt_bias, h, "delta_gates", "dt_bias"));
    NEED_OP(be, delta_gates);
    return be->ops->delta_gates(be, beta, g, b, a, a_log, dt_bias);
}

/* The checks delta_rule and delta_chunk share */
static pt_status need_rule(pt_backend *be, const pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                           const pt_tensor *g, const pt_tensor *state, const pt_delta *d, const char *op)
{
    int64_t rows = qkv->ndim == 2 ? qkv->shape[0] : -1, kw = (int64_t)d->k_heads * d->k_dim,
            vw = (int64_t)d->v_heads * d->v_dim;
    TRY(need_delta(d, rows, op));
    if (d->k_dim > PT_DELTA_MAX_DIM || d->v_dim > PT_DELTA_MAX_DIM)
        return ERR(PT_ERR_USER, "a Gated DeltaNet head of %d key and %d value dimensions; ptrain runs heads of up to "
                   "%d", d->k_dim, d->v_dim, PT_DELTA_MAX_DIM);
    TRY(need_act(be, qkv, op, "qkv"));
    TRY(need_2d(qkv, qkv->dtype, rows, 2 * kw + vw, op, "qkv"));
    TRY(need_2d(o, qkv->dtype, rows, vw, op, "o"));
    TRY(need_2d(beta, PT_F32, rows, d->v_heads, op, "beta"));
    TRY(need_2d(g, PT_F32, rows, d->v_heads, op, "g"));
    if (state) TRY(need_2d(state, PT_F32, (int64_t)d->batch * d->v_heads * d->k_dim, d->v_dim, op, "state"));
    if (state && d->segments) return ERR(PT_ERR_INTERNAL, "%s: a state with packed examples", op);
    return PT_OK;
}

pt_status backend_delta_rule(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                             const pt_tensor *g, pt_tensor *state, const pt_delta *d)
{
    TRY(need_rule(be, o, qkv, beta, g, state, d, "delta_rule"));
    NEED_OP(be, delta_rule);
    return be->ops->delta_rule(be, o, qkv, beta, g, state, d);
}

pt_status backend_delta_chunk(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                              const pt_tensor *g, pt_tensor *state, const pt_delta *d)
{
    TRY(need_rule(be, o, qkv, beta, g, state, d, "delta_chunk"));
    NEED_OP(be, delta_chunk);
    return be->ops->delta_chunk(be, o, qkv, beta, g, state, d);
}

pt_status backend_sigmoid_mul(pt_backend *be, pt_tensor *y, const pt_tensor *gate)
{
    TRY(need_act(be, y, "sigmoid_mul", "y"));
    TRY(need_act(be, gate, "sigmoid_mul", "gate"));
    if (gate->dtype != y->dtype) return ERR(PT_ERR_INTERNAL, "sigmoid_mul: y and gate of different dtypes");
    TRY(need_same_shape(y, gate, "sigmoid_mul"));
    NEED_OP(be, sigmoid_mul);
    return be->ops->sigmoid_mul(be, y, gate);
}

pt_status backend_conv1d_silu_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                                  const pt_tensor *w, const pt_delta *d)
{
    int64_t rows = x->ndim == 2 ? x->shape[0] : -1, ch = x->ndim == 2 ? x->shape[1] : -1;
    TRY(need_delta(d, rows, "conv1d_silu_bwd"));
    TRY(need_act(be, x, "conv1d_silu_bwd", "x"));
    TRY(need_2d(x, x->dtype, rows, ch, "conv1d_silu_bwd", "x"));
    TRY(need_2d(dy, x->dtype, rows, ch, "conv1d_silu_bwd", "dy"));
    TRY(need_2d(dx, x->dtype, rows, ch, "conv1d_silu_bwd", "dx"));
    TRY(need_2d(w, PT_F32, ch, d->conv, "conv1d_silu_bwd", "w"));
    if (dx->data == dy->data || dx->data == x->data) return ERR(PT_ERR_INTERNAL, "conv1d_silu_bwd: dx aliases dy or x");
    NEED_OP(be, conv1d_silu_bwd);
    return be->ops->conv1d_silu_bwd(be, dx, dy, x, w, d);
}

pt_status backend_delta_gates_bwd(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                                  const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                                  const pt_tensor *dt_bias)
{
    int64_t rows = b->ndim == 2 ? b->shape[0] : -1, h = b->ndim == 2 ? b->shape[1] : -1;
    TRY(need_act(be, b, "delta_gates_bwd", "b"));
    TRY(need_2d(b, b->dtype, rows, h, "delta_gates_bwd", "b"));
    TRY(need_2d(a, b->dtype, rows, h, "delta_gates_bwd", "a"));
    TRY(need_2d(db, b->dtype, rows, h, "delta_gates_bwd", "db"));
    TRY(need_2d(da, b->dtype, rows, h, "delta_gates_bwd", "da"));
    TRY(need_2d(dbeta, PT_F32, rows, h, "delta_gates_bwd", "dbeta"));
    TRY(need_2d(dg, PT_F32, rows, h, "delta_gates_bwd", "dg"));
    TRY(need_vector(a_log, h, "delta_gates_bwd", "a_log"));
    TRY(need_vector(dt_bias, h, "delta_gates_bwd", "dt_bias"));
    NEED_OP(be, delta_gates_bwd);
    return be->ops->delta_gates_bwd(be, db, da, dbeta, dg, b, a, a_log, dt_bias);
}

size_t backend_delta_rule_bwd_bytes(const pt_delta *d)
{
    size_t rows = (size_t)d->batch * (size_t)d->seq, sz = (size_t)d->k_dim * (size_t)d->v_dim;
    size_t nch = ((size_t)d->seq + PT_DELTA_CHUNK - 1) / PT_DELTA_CHUNK;
    size_t grads = 2 * rows * (size_t)d->v_heads * (size_t)d->k_dim;
    size_t states = (size_t)d->batch * (size_t)d->v_heads * (nch + PT_DELTA_CHUNK + 1) * sz;
    return sizeof(float) * (grads + states);
}

static pt_status need_rule_bwd(pt_backend *be, const pt_tensor *dqkv, const pt_tensor *dbeta, const pt_tensor *dg,
                               const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g,
                               const pt_delta *d, const char *op)
{
    int64_t rows = qkv->ndim == 2 ? qkv->shape[0] : -1, kw = (int64_t)d->k_heads * d->k_dim,
            vw = (int64_t)d->v_heads * d->v_dim;
    TRY(need_delta(d, rows, op));
    if (d->k_dim > PT_DELTA_MAX_DIM || d->v_dim > PT_DELTA_MAX_DIM)
        return ERR(PT_ERR_INTERNAL, "%s: heads of %d/%d dimensions", op, d->k_dim, d->v_dim);
    TRY(need_act(be, qkv, op, "qkv"));
    TRY(need_2d(qkv, qkv->dtype, rows, 2 * kw + vw, op, "qkv"));
    TRY(need_2d(dqkv, qkv->dtype, rows, 2 * kw + vw, op, "dqkv"));
    TRY(need_2d(dout, qkv->dtype, rows, vw, op, "dout"));
    TRY(need_2d(beta, PT_F32, rows, d->v_heads, op, "beta"));
    TRY(need_2d(g, PT_F32, rows, d->v_heads, op, "g"));
    TRY(need_2d(dbeta, PT_F32, rows, d->v_heads, op, "dbeta"));
    TRY(need_2d(dg, PT_F32, rows, d->v_heads, op, "dg"));
    if (dqkv->data == qkv->data) return ERR(PT_ERR_INTERNAL, "%s: dqkv aliases qkv", op);
    return PT_OK;
}

pt_status backend_delta_rule_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                                 const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta,
                                 const pt_tensor *g, const pt_delta *d)
{
    TRY(need_rule_bwd(be, dqkv, dbeta, dg, dout, qkv, beta, g, d, "delta_rule_bwd"));
    NEED_OP(be, delta_rule_bwd);
    return be->ops->delta_rule_bwd(be, dqkv, dbeta, dg, dout, qkv, beta, g, d);
}

size_t backend_delta_chunk_bwd_bytes(const pt_delta *d)
{
    size_t rows = (size_t)d->batch * (size_t)d->seq, dk = (size_t)d->k_dim, dv = (size_t)d->v_dim;
    size_t nch = ((size_t)d->seq + PT_DELTA_CHUNK - 1) / PT_DELTA_CHUNK, C = PT_DELTA_CHUNK;
    size_t grads = 2 * rows * (size_t)d->v_heads * dk;
    size_t head = (nch + 1) * dk * dv + 2 * C * dk + 9 * C * dv + 6 * C * C + 2 * C * (dk > dv ? dk : dv);
    return sizeof(float) * (grads + (size_t)d->batch * (size_t)d->v_heads * head);
}

pt_status backend_delta_chunk_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                                  const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta,
                                  const pt_tensor *g, const pt_delta *d)
{
    TRY(need_rule_bwd(be, dqkv, dbeta, dg, dout, qkv, beta, g, d, "delta_chunk_bwd"));
    NEED_OP(be, delta_chunk_bwd);
    return be->ops->delta_chunk_bwd(be, dqkv, dbeta, dg, dout, qkv, beta, g, d);
}

pt_status backend_sigmoid_mul_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                                  const pt_tensor *y, const pt_tensor *gate)
{
    TRY(need_act(be, y, "sigmoid_mul_bwd", "y"));
    const pt_tensor *all[] = {dx, dgate, dy, gate};
    for (int i = 0; i < 4; i++) {
        if (all[i]->dtype != y->dtype) return ERR(PT_ERR_INTERNAL, "sigmoid_mul_bwd: tensors of different dtypes");
        TRY(need_same_shape(y, all[i], "sigmoid_mul_bwd"));
    }
    if (dgate->data == dy->data || dgate->data == y->data)
        return ERR(PT_ERR_INTERNAL, "sigmoid_mul_bwd: dgate aliases dy or y");
    NEED_OP(be, sigmoid_mul_bwd);
    return be->ops->sigmoid_mul_bwd(be, dx, dgate, dy, y, gate);
}

/* ---- backward ops, loss and optimizer ---- */

static pt_status need_rows_of(const pt_tensor *t, pt_dtype dtype, int64_t rows, int64_t width, const char *op,
                              const char *what)
{
    if (t->dtype != dtype || t->ndim < 1 || t->shape[t->ndim - 1] != width || tensor_numel(t) != rows * width)
        return ERR(PT_ERR_INTERNAL, "%s: %s must be %s [%lld, %lld] (got %s with %lld values of width %lld)",
                   op, what, dtype_name(dtype), (long long)rows, (long long)width, dtype_name(t->dtype),
                   (long long)tensor_numel(t),
                   (long long)(t->ndim ? t->shape[t->ndim - 1] : 0));
    return PT_OK;
}

pt_status backend_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy,
                              const pt_tensor *x, const pt_tensor *w, const pt_tensor *rstd)
{
    return backend_rmsnorm_bwd_add(be, dx, dw, dy, x, w, rstd, NULL);
}

pt_status backend_rmsnorm_bwd_add(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy,
                                  const pt_tensor *x, const pt_tensor *w, const pt_tensor *rstd,
                                  const pt_tensor *res)
{
    TRY(need_act(be, x, "rmsnorm_bwd", "x"));
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    TRY(need_rows_of(dx, x->dtype, rows, dim, "rmsnorm_bwd", "dx"));
    TRY(need_rows_of(dy, x->dtype, rows, dim, "rmsnorm_bwd", "dy"));
    TRY(need_rows_of(w, PT_F32, 1, dim, "rmsnorm_bwd", "weight"));
    if (dw) TRY(need_rows_of(dw, PT_F32, 1, dim, "rmsnorm_bwd", "dw"));
    if (!rstd || rstd->dtype != PT_F32 || tensor_numel(rstd) != rows)
        return ERR(PT_ERR_INTERNAL, "rmsnorm_bwd: needs the f32 rstd of %lld rows saved by the forward",
                   (long long)rows);
    if (res) TRY(need_rows_of(res, x->dtype, rows, dim, "rmsnorm_bwd", "the residual gradient"));
    if (res && res->data == dy->data) return ERR(PT_ERR_INTERNAL, "rmsnorm_bwd: the residual gradient aliases dy");
    NEED_OP(be, rmsnorm_bwd);
    return be->ops->rmsnorm_bwd(be, dx, dw, dy, x, w, rstd, res);
}

pt_status backend_rope_part_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                                const int32_t *pos, const float *inv_freq)
{
    TRY(rope_check(be, dx, "rope_bwd", n_heads, head_dim, rot_dim));
    NEED_OP(be, rope_bwd);
    return be->ops->rope_bwd(be, dx, n_heads, head_dim, rot_dim, mscale, pos, inv_freq);
}

pt_status backend_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, const int32_t *pos,
                           const float *inv_freq)
{
    return backend_rope_part_bwd(be, dx, n_heads, head_dim, head_dim, 1.0f, pos, inv_freq);
}

static pt_status attention_bwd_shapes(const pt_tensor *dq, const pt_tensor *dk, const pt_tensor *dv,
                                      const pt_tensor *dout, const pt_tensor *q, const pt_tensor *out,
                                      const pt_tensor *lse, const pt_attention *a)
{
    int64_t qrows = (int64_t)a->batch * a->n_q, krows = (int64_t)a->batch * a->n_kv;
    int64_t qw = (int64_t)a->n_heads * a->head_dim, kw = (int64_t)a->n_kv_heads * a->head_dim;
    pt_dtype t = q->dtype;
    TRY(need_rows_of(q, t, qrows, qw, "attention_bwd", "q"));
    TRY(need_rows_of(out, t, qrows, qw, "attention_bwd", "out"));
    TRY(need_rows_of(dout, t, qrows, qw, "attention_bwd", "dout"));
    TRY(need_rows_of(dq, t, qrows, qw, "attention_bwd", "dq"));
    TRY(need_rows_of(dk, t, krows, kw, "attention_bwd", "dk"));
    TRY(need_rows_of(dv, t, krows, kw, "attention_bwd", "dv"));
    if (!lse || lse->dtype != PT_F32 || tensor_numel(lse) != qrows * a->n_heads)
        return ERR(PT_ERR_INTERNAL, "attention_bwd: needs the f32 log-sum-exp of %lld rows x %d heads "
                   "saved by the forward", (long long)qrows, a->n_heads);
    return PT_OK;
}

static pt_status attention_bwd_runs(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv,
                                    const pt_tensor *dout, const pt_tensor *q, const pt_tensor *k,
                                    const pt_tensor *v, const pt_tensor *out, const pt_tensor *lse,
                                    const pt_attention *a)
{
    int64_t total = (int64_t)a->batch * a->n_q;
    for (int b = 0; b < a->batch; b++)
        for (int t0 = 0, t1; t0 < a->n_q; t0 = t1) {
            t1 = segment_run_end(a, b, t0);
            int64_t r0 = (int64_t)b * a->n_q + t0, n = t1 - t0;
            pt_tensor dqv = run_rows(dq, total, r0, n), dkv = run_rows(dk, total, r0, n);
            pt_tensor dvv = run_rows(dv, total, r0, n), dov = run_rows(dout, total, r0, n);
            pt_tensor qv = run_rows(q, total, r0, n), kv = run_rows(k, total, r0, n), vv = run_rows(v, total, r0, n);
            pt_tensor ov = run_rows(out, total, r0, n), lv = run_rows(lse, total, r0, n);
            pt_attention sub = attention_run(a, (int)n);
            TRY(be->ops->attention_bwd(be, &dqv, &dkv, &dvv, &dov, &qv, &kv, &vv, &ov, &lv, &sub));
        }
    return PT_OK;
}

pt_status backend_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv,
                                const pt_tensor *dout, const pt_tensor *q, const pt_tensor *k,
                                const pt_tensor *v, const pt_tensor *out, const pt_tensor *lse,
                                const pt_attention *a)
{
    if (a->sinks) /* the sinks' own gradient and the backward through them: gpt-oss's training, not built yet */
        return ERR(PT_ERR_UNSUPPORTED, "attention_bwd: the gradient through attention sinks (gpt-oss) is not built yet");
    int64_t qw = (int64_t)a->n_heads * a->head_dim, kw = (int64_t)a->n_kv_heads * a->head_dim;
    if (a->batch <= 0 || a->n_q <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || q->shape[1] != qw ||
        k->shape[1] != kw || v->shape[1] != kw || k->shape[0] < (int64_t)a->batch * a->n_kv ||
        v->shape[0] < (int64_t)a->batch * a->n_kv || a->q_pos0 < 0 || a->q_pos0 + a->n_q > a->n_kv)
        return ERR(PT_ERR_INTERNAL, "attention_bwd: inconsistent shapes (q %lldx%lld, k %lldx%lld, %d heads, "
                   "%d kv heads, %d queries at %d over %d keys)", (long long)q->shape[0], (long long)q->shape[1],
                   (long long)k->shape[0], (long long)k->shape[1], a->n_heads, a->n_kv_heads, a->n_q,
                   a->q_pos0, a->n_kv);
    TRY(attention_options(a, "attention_bwd"));
    TRY(need_act(be, q, "attention_bwd", "q"));
    TRY(attention_bwd_shapes(dq, dk, dv, dout, q, out, lse, a));
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return ERR(PT_ERR_INTERNAL, "attention_bwd: q, k and v dtypes differ");
    NEED_OP(be, attention_bwd);
    if (attention_splits(a)) return attention_bwd_runs(be, dq, dk, dv, dout, q, k, v, out, lse, a);
    return be->ops->attention_bwd(be, dq, dk, dv, dout, q, k, v, out, lse, a);
}

pt_status backend_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                             const pt_tensor *gate, const pt_tensor *up)
{
    const pt_tensor *all[] = {dgate, dup, dy, gate, up};
    for (int i = 0; i < 5; i++) {
        TRY(need_act(be, all[i], "swiglu_bwd", "every tensor"));
        TRY(need_same_shape(all[i], dy, "swiglu_bwd"));
    }
    NEED_OP(be, swiglu_bwd);
    return be->ops->swiglu_bwd(be, dgate, dup, dy, gate, up);
}

pt_status backend_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                            const pt_tensor *gate, const pt_tensor *up)
{
    const pt_tensor *all[] = {dgate, dup, dy, gate, up};
    for (int i = 0; i < 5; i++) {
        TRY(need_act(be, all[i], "geglu_bwd", "every tensor"));
        TRY(need_same_shape(all[i], dy, "geglu_bwd"));
    }
    NEED_OP(be, geglu_bwd);
    return be->ops->geglu_bwd(be, dgate, dup, dy, gate, up);
}

pt_status backend_softcap_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap)
{
    const pt_tensor *all[] = {dx, dy, y};
    for (int i = 0; i < 3; i++) {
        TRY(need_f32(all[i], "softcap_bwd", "every tensor"));
        TRY(need_same_shape(all[i], dy, "softcap_bwd"));
    }
    TRY(need_cap(cap, "softcap_bwd"));
    NEED_OP(be, softcap_bwd);
    return be->ops->softcap_bwd(be, dx, dy, y, cap);
}

pt_status backend_cross_entropy(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                                const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap)
{
    if (softcap != 0.0f) TRY(need_cap(softcap, "cross_entropy"));
    if (logits->dtype != PT_F32 || logits->ndim != 2)
        return ERR(PT_ERR_INTERNAL, "cross_entropy: logits must be f32 [rows, vocab]");
    int64_t rows = logits->shape[0], vocab = logits->shape[1];
    if (dlogits) TRY(need_rows_of(dlogits, PT_F32, rows, vocab, "cross_entropy", "dlogits"));
    for (int64_t r = 0; r < rows; r++)
        if (labels[r] != PT_IGNORE_INDEX && (labels[r] < 0 || labels[r] >= vocab))
            return ERR(PT_ERR_USER, "label %d at row %lld is outside the vocabulary (%lld tokens) and is not "
                       "the ignore index %d", labels[r], (long long)r, (long long)vocab, PT_IGNORE_INDEX);
    NEED_OP(be, cross_entropy);
    return be->ops->cross_entropy(be, dlogits, loss_sum, n_labelled, logits, labels, grad_scale, softcap);
}

pt_status backend_adamw_step(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m,
                             pt_tensor *v, const pt_adamw *hp)
{
    /* element-wise: any shape, as long as all four hold the same number of f32 values */
    const pt_tensor *all[4] = {param, grad, m, v};
    for (int i = 0; i < 4; i++)
        if (all[i]->dtype != PT_F32 || tensor_numel(all[i]) != tensor_numel(param))
            return ERR(PT_ERR_INTERNAL, "adamw: param, grad and moments must be f32 of %lld values",
                       (long long)tensor_numel(param));
    if (hp->step < 1 || !(hp->beta1 >= 0 && hp->beta1 < 1) || !(hp->beta2 >= 0 && hp->beta2 < 1))
        return ERR(PT_ERR_INTERNAL, "adamw: step %lld, betas (%g, %g)", (long long)hp->step, hp->beta1, hp->beta2);
    NEED_OP(be, adamw_step);
    return be->ops->adamw_step(be, param, grad, m, v, hp);
}

pt_status backend_sum_squares(pt_backend *be, const pt_tensor *t, double *acc)
{
    TRY(need_f32(t, "sum_squares", "t"));
    NEED_OP(be, sum_squares);
    return be->ops->sum_squares(be, t, acc);
}

pt_status backend_scale(pt_backend *be, pt_tensor *t, float s)
{
    TRY(need_act(be, t, "scale", "t"));
    NEED_OP(be, scale);
    return be->ops->scale(be, t, s);
}

pt_status backend_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed)
{
    TRY(need_act(be, x, "dropout", "x"));
    TRY(need_same_shape(y, x, "dropout"));
    if (!(p >= 0.0f && p < 1.0f)) return ERR(PT_ERR_INTERNAL, "dropout: p = %g is not in [0, 1)", p);
    NEED_OP(be, dropout);
    return be->ops->dropout(be, y, x, p, seed);
}

pt_status backend_clip_grad_norm(pt_backend *be, pt_tensor *grads, int n, double max_norm, double *total_norm)
{
    double ss = 0;
    for (int i = 0; i < n; i++) TRY(backend_sum_squares(be, &grads[i], &ss));
    double total = sqrt(ss), coef = max_norm / (total + 1e-6);
    if (total_norm) *total_norm = total;
    if (coef < 1.0)
        for (int i = 0; i < n; i++) TRY(backend_scale(be, &grads[i], (float)coef));
    return PT_OK;
}

pt_adamw_scalars adamw_scalars(const pt_adamw *hp)
{
    double bc1 = 1.0 - pow(hp->beta1, (double)hp->step), bc2 = 1.0 - pow(hp->beta2, (double)hp->step);
    pt_adamw_scalars s = {
        .decay = (float)(1.0 - hp->lr * hp->weight_decay),
        .w1 = (float)(1.0 - hp->beta1),
        .b2 = (float)hp->beta2,
        .w2 = (float)(1.0 - hp->beta2),
        .bc2_sqrt = (float)pow(bc2, 0.5), /* Python's bc2 ** 0.5 */
        .eps = (float)hp->eps,
        .neg_step = (float)-(hp->lr / bc1),
    };
    return s;
}

/* ---- mixture of experts ---- */

pt_status backend_moe_route(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm)
{
    TRY(need_act(be, logits, "moe_route", "logits"));
    if (logits->ndim != 2 || k < 1 || k > logits->shape[1])
        return ERR(PT_ERR_INTERNAL, "moe_route: top-%d of rows of %lld experts", k,
                   (long long)(logits->ndim == 2 ? logits->shape[1] : 0));
    NEED_OP(be, moe_route);
    return be->ops->moe_route(be, expert, weight, logits, k, norm);
}

pt_status backend_moe_gather(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token)
{
    TRY(need_act(be, xs, "moe_gather", "xs"));
    if (xs->dtype != x->dtype || xs->ndim != 2 || x->ndim != 2 || xs->shape[1] != x->shape[1])
        return ERR(PT_ERR_INTERNAL, "moe_gather: rows of %lld %s from rows of %lld %s", (long long)xs->shape[1],
                   dtype_name(xs->dtype), (long long)x->shape[1], dtype_name(x->dtype));
    for (int64_t i = 0; i < xs->shape[0]; i++)
        if (token[i] < 0 || token[i] >= x->shape[0])
            return ERR(PT_ERR_INTERNAL, "moe_gather: row %lld of %lld", (long long)token[i], (long long)x->shape[0]);
    NEED_OP(be, moe_gather);
    return be->ops->moe_gather(be, xs, x, token);
}

pt_status backend_moe_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                             const int64_t *offset, int n_experts)
{
    return backend_moe_matmul_beta(be, y, x, w, stride, offset, n_experts, 0.0f);
}

pt_status backend_moe_matmul_beta(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                                  const int64_t *offset, int n_experts, float beta)
{
    if (offset[0] != 0 || offset[n_experts] > x->shape[0] || x->shape[0] != y->shape[0])
        return ERR(PT_ERR_INTERNAL, "moe_matmul: %lld rows grouped over %lld", (long long)offset[n_experts],
                   (long long)x->shape[0]);
    for (int e = 0; e < n_experts; e++) {
        int64_t n = offset[e + 1] - offset[e];
        if (n < 0) return ERR(PT_ERR_INTERNAL, "moe_matmul: expert %d's rows end before they start", e);
        const pt_tensor *we = &w[(size_t)e * (size_t)stride];
        if (n > 0 && (we->ndim != 2 || we->shape[1] != x->shape[1] || we->shape[0] != y->shape[1]))
            return ERR(PT_ERR_INTERNAL, "moe_matmul: expert %d's weight does not fit rows of %lld into %lld", e,
                       (long long)x->shape[1], (long long)y->shape[1]);
    }
    if (be->ops->moe_matmul && x->dtype == PT_F32 && y->dtype == PT_F32) /* one pass over the experts */
        return be->ops->moe_matmul(be, y, x, w, stride, offset, n_experts, beta);
    for (int e = 0; e < n_experts; e++) {
        int64_t n = offset[e + 1] - offset[e];
        if (n == 0) continue;
        pt_tensor yv = tensor_rows(y, offset[e], n), xv = tensor_rows(x, offset[e], n);
        TRY(backend_matmul(be, &yv, &xv, &w[(size_t)e * (size_t)stride], beta));
    }
    return PT_OK;
}

pt_status backend_moe_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                        const int64_t *offset, int n_experts, float beta)
{
    if (offset[0] != 0 || offset[n_experts] > x->shape[0] || x->shape[0] != dy->shape[0])
        return ERR(PT_ERR_INTERNAL, "moe_matmul_bwd_weight: %lld rows grouped over %lld", (long long)offset[n_experts],
                   (long long)x->shape[0]);
    for (int e = 0; e < n_experts; e++)
        if (offset[e + 1] < offset[e] || (offset[e + 1] > offset[e] && (dw[e].dtype != PT_F32 ||
                                          dw[e].shape[0] != dy->shape[1] || dw[e].shape[1] != x->shape[1])))
            return ERR(PT_ERR_INTERNAL, "moe_matmul_bwd_weight: expert %d's rows or gradient do not fit", e);
    if (be->ops->moe_matmul_bwd_weight && x->dtype == PT_F32 && dy->dtype == PT_F32) /* one pass over the experts */
        return be->ops->moe_matmul_bwd_weight(be, dw, dy, x, offset, n_experts, beta);
    for (int e = 0; e < n_experts; e++) {
        int64_t n = offset[e + 1] - offset[e];
        if (n == 0) continue;
        pt_tensor dyv = tensor_rows(dy, offset[e], n), xv = tensor_rows(x, offset[e], n);
        TRY(backend_matmul_bwd_weight(be, &dw[e], &dyv, &xv, beta));
    }
    return PT_OK;
}

pt_status backend_moe_combine(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row,
                              const float *weight, int k)
{
    TRY(need_act(be, y, "moe_combine", "y"));
    if (ys->dtype != y->dtype || ys->ndim != 2 || y->ndim != 2 || ys->shape[1] != y->shape[1] || k < 1)
        return ERR(PT_ERR_INTERNAL, "moe_combine: rows of %lld %s into rows of %lld %s", (long long)ys->shape[1],
                   dtype_name(ys->dtype), (long long)y->shape[1], dtype_name(y->dtype));
    for (int64_t i = 0; i < y->shape[0] * k; i++)
        if (row[i] < 0 || row[i] >= ys->shape[0])
            return ERR(PT_ERR_INTERNAL, "moe_combine: row %lld of %lld", (long long)row[i], (long long)ys->shape[0]);
    NEED_OP(be, moe_combine);
    return be->ops->moe_combine(be, y, ys, row, weight, k);
}

pt_status backend_moe_combine_bwd(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy,
                                  const pt_tensor *ys, const int32_t *row, const float *weight, int k)
{
    TRY(need_act(be, dy, "moe_combine_bwd", "dy"));
    TRY(need_f32(dw, "moe_combine_bwd", "dw"));
    if (dys->dtype != dy->dtype || ys->dtype != dy->dtype || dys->shape[1] != dy->shape[1] ||
        ys->shape[1] != dy->shape[1] || dys->shape[0] != ys->shape[0] || tensor_numel(dw) != dy->shape[0] * k)
        return ERR(PT_ERR_INTERNAL, "moe_combine_bwd: shapes of dys, dw, dy and ys do not fit");
    for (int64_t i = 0; i < dy->shape[0] * k; i++)
        if (row[i] < 0 || row[i] >= ys->shape[0])
            return ERR(PT_ERR_INTERNAL, "moe_combine_bwd: row %lld of %lld", (long long)row[i], (long long)ys->shape[0]);
    NEED_OP(be, moe_combine_bwd);
    return be->ops->moe_combine_bwd(be, dys, dw, dy, ys, row, weight, k);
}

pt_status backend_moe_route_bwd(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                                const int32_t *expert, int k, bool norm)
{
    TRY(need_act(be, logits, "moe_route_bwd", "logits"));
    TRY(need_f32(dw, "moe_route_bwd", "dw"));
    if (dlogits->dtype != logits->dtype || tensor_numel(dlogits) != tensor_numel(logits) || logits->ndim != 2 ||
        tensor_numel(dw) != logits->shape[0] * k)
        return ERR(PT_ERR_INTERNAL, "moe_route_bwd: shapes of dlogits, logits and dw do not fit");
    for (int64_t i = 0; i < logits->shape[0] * k; i++)
        if (expert[i] < 0 || expert[i] >= logits->shape[1])
            return ERR(PT_ERR_INTERNAL, "moe_route_bwd: expert %d of %lld", expert[i], (long long)logits->shape[1]);
    NEED_OP(be, moe_route_bwd);
    return be->ops->moe_route_bwd(be, dlogits, logits, dw, expert, k, norm);
}

pt_status backend_moe_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                                       int stride, const int64_t *offset, int n_experts, float beta)
{
    if (offset[0] != 0 || offset[n_experts] > dy->shape[0] || dx->shape[0] != dy->shape[0])
        return ERR(PT_ERR_INTERNAL, "moe_matmul_bwd_input: %lld rows grouped over %lld", (long long)offset[n_experts],
                   (long long)dy->shape[0]);
    for (int e = 0; e < n_experts; e++) {
        int64_t n = offset[e + 1] - offset[e];
        if (n < 0) return ERR(PT_ERR_INTERNAL, "moe_matmul_bwd_input: expert %d's rows end before they start", e);
        const pt_tensor *we = &w[(size_t)e * (size_t)stride];
        if (n > 0 && (we->ndim != 2 || we->shape[0] != dy->shape[1] || we->shape[1] != dx->shape[1]))
            return ERR(PT_ERR_INTERNAL, "moe_matmul_bwd_input: expert %d's weight does not fit rows of %lld into %lld",
                       e, (long long)dy->shape[1], (long long)dx->shape[1]);
    }
    if (be->ops->moe_matmul_bwd_input && dx->dtype == PT_F32 && dy->dtype == PT_F32) /* one pass over the experts */
        return be->ops->moe_matmul_bwd_input(be, dx, dy, w, stride, offset, n_experts, beta);
    for (int e = 0; e < n_experts; e++) {
        int64_t n = offset[e + 1] - offset[e];
        if (n == 0) continue;
        pt_tensor dxv = tensor_rows(dx, offset[e], n), dyv = tensor_rows(dy, offset[e], n);
        TRY(backend_matmul_bwd_input(be, &dxv, &dyv, &w[(size_t)e * (size_t)stride], beta));
    }
    return PT_OK;
}
