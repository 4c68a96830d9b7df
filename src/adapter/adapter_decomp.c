/* adapter_decomp.c — the LoRA starts that come from the base weight's own decomposition, as PEFT
 * 0.21 defines them (peft/tuners/lora/layer.py): pissa (the top r singular triplets of W = U S Vh:
 * B = U_r sqrt(S_r/scale), A = sqrt(S_r/scale) Vh_r) and olora (W = Q R: B = Q[:, :r], A = R[:r]).
 * Both take the adapter's part out of the base: residual = W - scale·B·A, so the adapted model starts
 * equal to the original. The decompositions are LAPACK's (sgesdd, sgeqrf + sorgqr, from OpenBLAS,
 * called through their Fortran symbols), the routines torch.linalg.svd and .qr call on the CPU, so
 * the factors come out with the same sign convention. Everything is fp32, row-major, host memory. */
#include "ptrain/adapter.h"

#include <stdlib.h>
#include <string.h>
#include <math.h>

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
