/* adapter_decomp.c — the LoRA starts that come from the base weight's own decomposition, as PEFT
 * 0.21 defines them (peft/tuners/lora/layer.py): pissa (the top r singular triplets of W = U S Vh:
 * B = U_r sqrt(S_r/scale), A = sqrt(S_r/scale) Vh_r) and olora (W = Q R: B = Q[:, :r], A = R[:r]).
 * pissa_niter_N: the same from a randomized SVD (torch.svd_lowrank, Halko et al. 2009 5.1) seeded from
 * random_state. All take the adapter's part out of the base: residual = W - scale·B·A, so the adapted model starts
 * equal to the original. The decompositions are LAPACK's (sgesdd, sgeqrf + sorgqr, from OpenBLAS,
 * called through their Fortran symbols), the routines torch.linalg.svd and .qr call on the CPU, so
 * the factors come out with the same sign convention. The decompositions are fp32, row-major, host
 * memory; adapter_decomp_base applies one to every pair of an adapter on a loaded model: each base
 * weight is dequantized to fp32, decomposed, and its residual quantized back into the weight's own
 * type (NF4 by nf4_quantize, a GGUF type by quant_quantize_row where ptrain has its quantizer). */
#include "ptrain/adapter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <math.h>

#include "ptrain/nf4.h"
#include "ptrain/quant.h"
#include "ptrain/util.h"

#include <cblas.h>

/* LAPACK's Fortran interface (column-major; the trailing size_t is the hidden length of a
 * character argument in gfortran's calling convention). */
extern void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u,
                    const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork, int *iwork,
                    int *info, size_t jobz_len);
extern void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work,
                    const int *lwork, int *info);
extern void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau,
                    float *work, const int *lwork, int *info);

static pt_status check_shape(int64_t out, int64_t in, int r, float scale)
{
    if (out < 1 || in < 1 || out > (1 << 20) || in > (1 << 20) || out * in > (int64_t)1 << 31)
        return ERR(PT_ERR_UNSUPPORTED, "a %lld x %lld weight is outside what the decomposition handles",
                   (long long)out, (long long)in);
    if (r < 1 || r > (out < in ? out : in))
        return ERR(PT_ERR_USER, "rank %d is more than the %lld x %lld weight's rank can be (at most %lld); "
                   "lower r (or its rank_pattern entry)", r, (long long)out, (long long)in,
                   (long long)(out < in ? out : in));
    if (!(scale > 0.0f) || !isfinite(scale))
        return ERR(PT_ERR_USER, "the adapter scale (lora_alpha / r) is %g; it must be positive", (double)scale);
    return PT_OK;
}

/* Column-major copy of the row-major out x in matrix w (LAPACK's layout). */
static float *column_major(const float *w, int64_t out, int64_t in)
{
    float *c = malloc((size_t)(out * in) * sizeof *c);
    if (c)
        for (int64_t i = 0; i < out; i++)
            for (int64_t j = 0; j < in; j++) c[i + j * out] = w[i * in + j];
    return c;
}

/* residual = w - scale·b·a (b: out x r, a: r x in), summed in double. */
static void residual_set(const float *w, const float *a, const float *b, int64_t out, int64_t in, int r, float scale,
                         float *residual)
{
    for (int64_t i = 0; i < out; i++)
        for (int64_t j = 0; j < in; j++) {
            double s = 0.0;
            for (int k = 0; k < r; k++) s += (double)b[i * r + k] * a[(int64_t)k * in + j];
            residual[i * in + j] = (float)((double)w[i * in + j] - (double)scale * s);
        }
}

pt_status adapter_pissa_init(const float *w, int64_t out, int64_t in, int r, float scale, float *a, float *b,
                             float *residual)
{
    TRY(check_shape(out, in, r, scale));
    int m = (int)out, n = (int)in, k = m < n ? m : n, lwork = -1, info = 0;
    float *c = column_major(w, out, in), *s = malloc((size_t)k * sizeof *s);
    float *u = malloc((size_t)m * (size_t)k * sizeof *u), *vt = malloc((size_t)k * (size_t)n * sizeof *vt);
    int *iwork = malloc(8 * (size_t)k * sizeof *iwork);
    float query = 0.0f, *work = NULL;
    pt_status st = PT_OK;
    if (!c || !s || !u || !vt || !iwork) {
        st = ERR(PT_ERR_NOMEM, "out of memory for the SVD of a %d x %d weight", m, n);
        goto done;
    }
    sgesdd_("S", &m, &n, c, &m, s, u, &m, vt, &k, &query, &lwork, iwork, &info, 1);
    lwork = info == 0 ? (int)query + 1 : 0;
    work = info == 0 ? malloc((size_t)lwork * sizeof *work) : NULL;
    if (info == 0 && !work) {
        st = ERR(PT_ERR_NOMEM, "out of memory for the SVD of a %d x %d weight", m, n);
        goto done;
    }
    if (info == 0) sgesdd_("S", &m, &n, c, &m, s, u, &m, vt, &k, work, &lwork, iwork, &info, 1);
    if (info != 0) {
        st = ERR(PT_ERR_INTERNAL, "LAPACK sgesdd failed on a %d x %d weight (info %d%s)", m, n, info,
                 info > 0 ? ": the SVD did not converge; is the weight finite?" : "");
        goto done;
    }
    for (int j = 0; j < r; j++) {
        float root = sqrtf(s[j] / scale); /* PEFT: Sr /= scaling; A = diag(sqrt(Sr)) Vh_r; B = U_r diag(sqrt(Sr)) */
        for (int i = 0; i < m; i++) b[(int64_t)i * r + j] = u[i + (int64_t)j * m] * root;
        for (int i = 0; i < n; i++) a[(int64_t)j * n + i] = root * vt[j + (int64_t)i * k];
    }
    residual_set(w, a, b, out, in, r, scale, residual);
done:
    free(c), free(s), free(u), free(vt), free(iwork), free(work);
    return st;
}

pt_status adapter_olora_init(const float *w, int64_t out, int64_t in, int r, float scale, float *a, float *b,
                             float *residual)
{
    TRY(check_shape(out, in, r, scale));
    int m = (int)out, n = (int)in, k = m < n ? m : n, lwork = -1, info = 0;
    float *c = column_major(w, out, in), *tau = malloc((size_t)k * sizeof *tau), query = 0.0f, *work = NULL;
    pt_status st = PT_OK;
    if (!c || !tau) {
        st = ERR(PT_ERR_NOMEM, "out of memory for the QR of a %d x %d weight", m, n);
        goto done;
    }
    sgeqrf_(&m, &n, c, &m, tau, &query, &lwork, &info);
    if (info == 0) {
        lwork = (int)query + 1 > n ? (int)query + 1 : n;
        work = malloc((size_t)lwork * sizeof *work);
        if (!work) {
            st = ERR(PT_ERR_NOMEM, "out of memory for the QR of a %d x %d weight", m, n);
            goto done;
        }
        sgeqrf_(&m, &n, c, &m, tau, work, &lwork, &info);
    }
    if (info == 0) /* A = R[:r] (upper triangular: zero below the diagonal) */
        for (int j = 0; j < r; j++)
            for (int i = 0; i < n; i++) a[(int64_t)j * n + i] = i >= j ? c[j + (int64_t)i * m] : 0.0f;
    if (info == 0) sorgqr_(&m, &k, &k, c, &m, tau, work, &lwork, &info); /* Q: m x k in c's first k columns */
    if (info != 0) {
        st = ERR(PT_ERR_INTERNAL, "LAPACK's QR (sgeqrf/sorgqr) failed on a %d x %d weight (info %d)", m, n, info);
        goto done;
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < r; j++) b[(int64_t)i * r + j] = c[i + (int64_t)j * m];
    residual_set(w, a, b, out, in, r, scale, residual);
done:
    free(c), free(tau), free(work);
    return st;
}

/* y (rows x cols, row-major, rows >= cols) replaced by the Q of its QR (torch.linalg.qr(y).Q). */
static pt_status orthonormalize(float *y, int rows, int cols)
{
    float *c = column_major(y, rows, cols), *tau = malloc((size_t)cols * sizeof *tau), query = 0.0f, *work = NULL;
    int lwork = -1, info = 0;
    pt_status st = c && tau ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory for a QR");
    if (st == PT_OK) sgeqrf_(&rows, &cols, c, &rows, tau, &query, &lwork, &info);
    if (st == PT_OK && info == 0) {
        lwork = (int)query + 1 > cols ? (int)query + 1 : cols;
        if (!(work = malloc((size_t)lwork * sizeof *work))) st = ERR(PT_ERR_NOMEM, "out of memory for a QR");
    }
    if (st == PT_OK && info == 0) sgeqrf_(&rows, &cols, c, &rows, tau, work, &lwork, &info);
    if (st == PT_OK && info == 0) sorgqr_(&rows, &cols, &cols, c, &rows, tau, work, &lwork, &info);
    if (st == PT_OK && info != 0) st = ERR(PT_ERR_INTERNAL, "LAPACK's QR failed on a %d x %d matrix (info %d)", rows, cols, info);
    if (st == PT_OK)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) y[(int64_t)i * cols + j] = c[i + (int64_t)j * rows];
    free(c), free(tau), free(work);
    return st;
}

/* A standard normal draw (Box-Muller on splitmix64). */
static float normal(uint64_t *rng)
{
    double u1 = (double)(rng_next(rng) >> 11) / 9007199254740992.0, u2 = (double)(rng_next(rng) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
}

pt_status adapter_pissa_niter_init(const float *w, int64_t out, int64_t in, int r, float scale, int niter, uint64_t seed,
                                   float *a, float *b, float *residual)
{
    TRY(check_shape(out, in, r, scale));
    if (niter < 0 || niter > 1000) return ERR(PT_ERR_USER, "pissa_niter_%d: expected 0 to 1000 iterations", niter);
    /* torch.svd_lowrank(W, q = r, niter) (Halko et al. 2009, algorithm 5.1) on the tall one of W and its transpose */
    bool tall = out >= in;
    int m = (int)(tall ? out : in), n = (int)(tall ? in : out);
    float *x = malloc((size_t)m * (size_t)n * sizeof *x), *q = malloc((size_t)m * (size_t)r * sizeof *q);
    float *z = malloc((size_t)n * (size_t)r * sizeof *z), *bm = malloc((size_t)r * (size_t)n * sizeof *bm);
    float *ub = malloc((size_t)r * (size_t)r * sizeof *ub), *sb = malloc((size_t)r * sizeof *sb);
    float *vt = malloc((size_t)r * (size_t)n * sizeof *vt), *scratch = malloc((size_t)r * (size_t)n * sizeof *scratch);
    float *u = malloc((size_t)m * (size_t)r * sizeof *u);
    pt_status st = x && q && z && bm && ub && sb && vt && scratch && u ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory for pissa_niter");
    if (st != PT_OK) goto done;
    for (int64_t i = 0; i < out; i++)
        for (int64_t j = 0; j < in; j++) x[tall ? i * in + j : j * out + i] = w[i * in + j];
    uint64_t rng = seed;
    for (int64_t i = 0; i < (int64_t)n * r; i++) z[i] = normal(&rng); /* R: n x r */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, r, n, 1.0f, x, n, z, r, 0.0f, q, r);
    st = orthonormalize(q, m, r);
    for (int it = 0; st == PT_OK && it < niter; it++) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, r, m, 1.0f, x, n, q, r, 0.0f, z, r);
        st = orthonormalize(z, n, r);
        if (st == PT_OK) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, r, n, 1.0f, x, n, z, r, 0.0f, q, r);
        if (st == PT_OK) st = orthonormalize(q, m, r);
    }
    if (st != PT_OK) goto done;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r, n, m, 1.0f, q, r, x, n, 0.0f, bm, n); /* Q^T X: r x n */
    /* the SVD of Q^T X (r x n, r <= n): by sgesdd on its column-major copy */
    {
        int rr = r, nn = n, lwork = -1, info = 0, *iwork = malloc(8 * (size_t)r * sizeof *iwork);
        float *c = column_major(bm, r, n), query = 0.0f, *work = NULL;
        if (!iwork || !c) st = ERR(PT_ERR_NOMEM, "out of memory for pissa_niter");
        if (st == PT_OK) sgesdd_("S", &rr, &nn, c, &rr, sb, scratch, &rr, vt, &rr, &query, &lwork, iwork, &info, 1);
        if (st == PT_OK && info == 0) {
            lwork = (int)query + 1;
            if (!(work = malloc((size_t)lwork * sizeof *work))) st = ERR(PT_ERR_NOMEM, "out of memory for pissa_niter");
        }
        if (st == PT_OK && info == 0) sgesdd_("S", &rr, &nn, c, &rr, sb, scratch, &rr, vt, &rr, work, &lwork, iwork, &info, 1);
        if (st == PT_OK && info != 0) st = ERR(PT_ERR_INTERNAL, "LAPACK sgesdd failed in pissa_niter (info %d)", info);
        if (st == PT_OK) /* ub row-major r x r from the column-major U in scratch */
            for (int i = 0; i < r; i++)
                for (int j = 0; j < r; j++) ub[i * r + j] = scratch[i + j * r];
        free(iwork), free(c), free(work);
    }
    if (st != PT_OK) goto done;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, r, r, 1.0f, q, r, ub, r, 0.0f, u, r); /* U = Q Ub: m x r */
    /* X = U S V^T with V[i][j] = vt[j + i*r] (column-major r x n); W = X (tall) or X^T */
    for (int j = 0; j < r; j++) {
        float root = sqrtf(sb[j] / scale);
        for (int64_t i = 0; i < out; i++) b[i * r + j] = root * (tall ? u[i * r + j] : vt[j + i * r]);
        for (int64_t i = 0; i < in; i++) a[(int64_t)j * in + i] = root * (tall ? vt[j + i * r] : u[i * r + j]);
    }
    residual_set(w, a, b, out, in, r, scale, residual);
done:
    free(x), free(q), free(z), free(bm), free(ub), free(sb), free(vt), free(scratch), free(u);
    return st;
}

const char *adapter_decomp_name(adapter_decomp how)
{
    return how == ADAPTER_DECOMP_PISSA ? "pissa" : how == ADAPTER_DECOMP_OLORA ? "olora" : "pissa_niter";
}

bool adapter_decomp_text(const pt_adapter *ad, char *out, size_t len)
{
    if (ad->init == ADAPTER_INIT_PISSA_NITER) snprintf(out, len, "pissa_niter_%d", ad->init_niter);
    else snprintf(out, len, "%s", ad->init == ADAPTER_INIT_PISSA ? "pissa" : ad->init == ADAPTER_INIT_OLORA ? "olora" : "");
    return out[0] != '\0';
}

/* w (fp32, out x in) from the base weight t's bytes in host. */
static pt_status weight_to_f32(const pt_tensor *t, const void *host, int64_t out, int64_t in, float *w)
{
    if (t->dtype == PT_F32) {
        memcpy(w, host, (size_t)(out * in) * sizeof *w);
        return PT_OK;
    }
    if (t->dtype == PT_NF4) return nf4_dequantize_rows(host, out, in, 0, out, w);
    size_t row = dtype_size_bytes(t->dtype, in);
    for (int64_t i = 0; i < out; i++) TRY(quant_dequantize_row(t->dtype, (const char *)host + (size_t)i * row, w + i * in, in));
    return PT_OK;
}

/* The residual res (fp32, out x in) written over host in t's own type. */
static pt_status weight_from_f32(const pt_tensor *t, const float *res, int64_t out, int64_t in, void *host)
{
    if (t->dtype == PT_F32) {
        memcpy(host, res, (size_t)(out * in) * sizeof *res);
        return PT_OK;
    }
    if (t->dtype == PT_NF4) return nf4_quantize(res, out, in, host);
    size_t row = dtype_size_bytes(t->dtype, in);
    for (int64_t i = 0; i < out; i++) TRY(quant_quantize_row(t->dtype, res + i * in, (char *)host + (size_t)i * row, in));
    return PT_OK;
}

/* One pair: the decomposition of layer's weight in slot w, into p and the weight. */
static pt_status pair_decomp(pt_backend *be, adapter_pair *p, pt_tensor *t, int64_t out, int64_t in,
                             adapter_decomp how, int niter, uint64_t seed, const char *where)
{
    void *host = malloc(t->nbytes);
    float *w = malloc((size_t)(out * in) * sizeof *w), *res = malloc((size_t)(out * in) * sizeof *res);
    float *a = malloc((size_t)(p->r * in) * sizeof *a), *b = malloc((size_t)(out * p->r) * sizeof *b);
    pt_status st = host && w && res && a && b ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory for %s", where);
    if (st == PT_OK && tensor_numel(t) != out * in)
        st = ERR(PT_ERR_INTERNAL, "%s: the base weight has %lld values, not %lld x %lld", where,
                 (long long)tensor_numel(t), (long long)out, (long long)in);
    if (st == PT_OK) st = backend_download(be, t, host, t->nbytes);
    if (st == PT_OK) st = weight_to_f32(t, host, out, in, w);
    if (st == PT_OK)
        st = how == ADAPTER_DECOMP_PISSA ? adapter_pissa_init(w, out, in, p->r, p->scale, a, b, res)
             : how == ADAPTER_DECOMP_OLORA ? adapter_olora_init(w, out, in, p->r, p->scale, a, b, res)
                                           : adapter_pissa_niter_init(w, out, in, p->r, p->scale, niter, seed, a, b, res);
    char why[256] = "";
    if (st == PT_OK && weight_from_f32(t, res, out, in, host) != PT_OK) {
        snprintf(why, sizeof why, "%s", err_message()); /* the quantizer's own words, before ERR replaces them */
        st = ERR(PT_ERR_UNSUPPORTED, "%s: init_lora_weights %s takes the adapter's part out of the base weight, "
                 "which is %s here, and ptrain cannot quantize that type back (%s); use a base in f32, f16, bf16, "
                 "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k, load_in_4bit (NF4), or init_lora_weights true",
                 where, adapter_decomp_name(how), dtype_name(t->dtype), why);
    }
    if (st == PT_OK) st = backend_upload(be, t, host, t->nbytes);
    if (st == PT_OK) st = backend_upload(be, &p->a, a, p->a.nbytes);
    if (st == PT_OK) st = backend_upload(be, &p->b, b, p->b.nbytes);
    if (st == PT_OK) { /* the start, for the adapter converted to the original base at saving */
        free(p->start);
        p->start = malloc((size_t)(p->r * (in + out)) * sizeof *p->start);
        if (!p->start) st = ERR(PT_ERR_NOMEM, "out of memory for %s", where);
    }
    if (st == PT_OK) {
        memcpy(p->start, a, (size_t)(p->r * in) * sizeof *a);
        memcpy(p->start + p->r * in, b, (size_t)(out * p->r) * sizeof *b);
    }
    free(host), free(w), free(res), free(a), free(b);
    return st;
}

pt_status adapter_decomp_base(pt_adapter *ad, pt_model *m, adapter_decomp how, int niter, uint64_t seed)
{
    if (m->borrowed)
        return ERR(PT_ERR_UNSUPPORTED, "init_lora_weights %s changes the base weights, which this process shares "
                   "with the other ranks on its node; run one process per node, or use init_lora_weights true",
                   adapter_decomp_name(how));
    if (arch_info(m->cfg.arch)->fused || m->cfg.attn_gate)
        return ERR(PT_ERR_UNSUPPORTED, "init_lora_weights %s on a family with fused projections (phi3's qkv_proj, "
                   "gate_up_proj; qwen35's q_proj of queries and gates) is not implemented; use init_lora_weights "
                   "true", adapter_decomp_name(how));
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) {
        size_t i = (size_t)(p - ad->pairs);
        int layer = (int)(i / W_COUNT), w = (int)(i % W_COUNT);
        int64_t out, in;
        char where[128];
        snprintf(where, sizeof where, "layer %d %s", layer, adapter_module_name(m->cfg.arch, w));
        if (!model_layer_adapter_shape(&m->cfg, layer, w, &out, &in))
            return ERR(PT_ERR_INTERNAL, "%s: no [out, in] shape for this slot", where);
        TRY(pair_decomp(ad->be, p, &m->layers[layer].w[w], out, in, how, niter, seed ^ (0x9E3779B97F4A7C15ull * (i + 1)),
                        where));
    }
    ad->init = how == ADAPTER_DECOMP_PISSA ? ADAPTER_INIT_PISSA : how == ADAPTER_DECOMP_OLORA ? ADAPTER_INIT_OLORA
                                                                                            : ADAPTER_INIT_PISSA_NITER;
    ad->init_niter = how == ADAPTER_DECOMP_PISSA_NITER ? niter : 0;
    return PT_OK;
}

void adapter_decomp_convert(const float *a, const float *b, const float *a0, const float *b0, int64_t out,
                            int64_t in, int r, float *a2, float *b2)
{
    memcpy(a2, a, (size_t)((int64_t)r * in) * sizeof *a2);
    memcpy(a2 + (int64_t)r * in, a0, (size_t)((int64_t)r * in) * sizeof *a2);
    for (int64_t i = 0; i < out; i++)
        for (int j = 0; j < r; j++) {
            b2[i * 2 * r + j] = b[i * r + j];
            b2[i * 2 * r + r + j] = -b0[i * r + j];
        }
}

/* PEFT's selectors for the converted adapter: rank_pattern's ranks doubled, alpha_pattern's alphas times two (times
 * sqrt(2) with rsLoRA, so the scale stays: PEFT 0.21 doubles them either way); NULL when out of memory. */
static char *doubled_select(const char *select, bool rslora)
{
    json_t *sel = json_loads(select, 0, NULL);
    const char *key;
    json_t *v;
    if (!sel) return NULL;
    json_object_foreach(json_object_get(sel, "rank_pattern"), key, v)
        if (json_is_integer(v)) json_integer_set(v, 2 * json_integer_value(v));
    json_object_foreach(json_object_get(sel, "alpha_pattern"), key, v)
        if (json_is_number(v)) json_real_set(v, (rslora ? sqrt(2.0) : 2.0) * json_number_value(v));
    char *text = json_dumps(sel, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(sel);
    return text;
}

pt_status adapter_decomp_converted(const pt_adapter *ad, const pt_model *m, pt_adapter *conv)
{
    size_t n = (size_t)ad->n_layers * W_COUNT;
    int *ranks = calloc(n, sizeof *ranks);
    float *alphas = calloc(n, sizeof *alphas), two = ad->rslora ? sqrtf(2.0f) : 2.0f;
    pt_status st = ranks && alphas ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    for (adapter_pair *p = adapter_next(ad, NULL); st == PT_OK && p; p = adapter_next(ad, p)) {
        if (!p->start)
            st = ERR(PT_ERR_INTERNAL, "an adapter pair has no pissa/olora start to convert from");
        ranks[p - ad->pairs] = 2 * p->r, alphas[p - ad->pairs] = two * ad->alpha;
    }
    char *select = st == PT_OK && ad->select ? doubled_select(ad->select, ad->rslora) : NULL;
    if (st == PT_OK && ad->select && !select) st = ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK && select)
        st = adapter_create_select(conv, m, 2 * ad->r, two * ad->alpha, ad->rslora, ad->target, select,
                                   "the adapter converted for the original base", NULL);
    else if (st == PT_OK)
        st = adapter_create_ranks(conv, m, 2 * ad->r, two * ad->alpha, ad->rslora, ad->target, ranks, alphas, NULL);
    free(select);
    for (adapter_pair *p = adapter_next(ad, NULL); st == PT_OK && p; p = adapter_next(ad, p)) {
        const adapter_pair *q = &conv->pairs[p - ad->pairs];
        if (q->r != 2 * p->r || fabsf(q->scale - p->scale) > 1e-6f * p->scale) {
            st = ERR(PT_ERR_INTERNAL, "the converted adapter's pair has rank %d and scale %g, not %d and %g", q->r,
                     (double)q->scale, 2 * p->r, (double)p->scale);
            adapter_free(conv);
        }
    }
    free(ranks), free(alphas);
    TRY(st);
    for (adapter_pair *p = adapter_next(ad, NULL); st == PT_OK && p; p = adapter_next(ad, p)) {
        adapter_pair *q = &conv->pairs[p - ad->pairs];
        int64_t out = p->b.shape[0], in = p->a.shape[1];
        float *a = malloc(p->a.nbytes), *b = malloc(p->b.nbytes), *a2 = malloc(q->a.nbytes), *b2 = malloc(q->b.nbytes);
        st = a && b && a2 && b2 ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
        if (st == PT_OK) st = backend_download(ad->be, &p->a, a, p->a.nbytes);
        if (st == PT_OK) st = backend_download(ad->be, &p->b, b, p->b.nbytes);
        if (st == PT_OK) adapter_decomp_convert(a, b, p->start, p->start + p->r * in, out, in, p->r, a2, b2);
        if (st == PT_OK) st = backend_upload(conv->be, &q->a, a2, q->a.nbytes);
        if (st == PT_OK) st = backend_upload(conv->be, &q->b, b2, q->b.nbytes);
        free(a), free(b), free(a2), free(b2);
    }
    if (st != PT_OK) adapter_free(conv);
    return st;
}
