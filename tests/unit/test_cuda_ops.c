/* test_cuda_ops.c — every op of the CUDA backend against the CPU backend, the reference
 * (backend.h), on random inputs: the same host bytes go to both backends, every output is first
 * filled with NaN so an element an op never writes fails, each op runs on both, and the results
 * are compared as ‖dev - cpu‖₂ / ‖cpu‖₂ (and max|dev - cpu| / max|cpu| within 10x that), with
 * no NaN or Inf allowed. One line per check names the op, the case, the error and the tolerance.
 * The matmuls also run on a third backend, the one under test opened with
 * PTRAIN_CUDA_KERNELS=reference (issue 26, point 9): its fast GEMMs (cuBLASLt, bf16 adapters) are
 * compared with its reference ones, and run twice to give the same bits. Dequantization
 * (test_dequant) is checked bit for bit: cuda/dequant.cu's fast kernel against its generic one
 * and the CPU, in fp32 and bf16 (the PTRAIN_TEST_CUDA_OPS_DEVICE=cpu harness skips it).
 *
 * Built with the CUDA backend only; with no GPU visible it skips and says why. With
 * PTRAIN_TEST_CUDA_OPS_DEVICE=cpu the side under test is a second CPU backend, which runs the
 * whole harness anywhere (every check must then pass). PTRAIN_TEST_SMALL=1 (the default of the
 * CPU-emulated build, tests/emu) shrinks the largest GEMMs and runs the larger attention cases on
 * one sequence instead of two.
 *
 * Attention runs on the backend under test twice: with its default kernels (tensor cores for
 * head_dim a multiple of 16 up to 256, at a bf16 tolerance) and with PTRAIN_CUDA_KERNELS=reference
 * (the fp32 kernels, at TOL_REDUCE), and the two are compared with each other too. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ptrain/backend.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"

/* Tolerances on the relative L2 error (the max-norm error may be 10x larger):
 *   TOL_ELEM    elementwise fp32 ops: the same formula on both sides, a few ulp apart (CUDA's
 *               expf/tanhf/sincos are not correctly rounded either);
 *   TOL_REDUCE  reductions (RMSNorm, softmax/attention, cross-entropy): sums in another order;
 *   TOL_GEMM    anything through a GEMM: the CUDA matmuls round both operands to bf16 (8-bit
 *               mantissa) and accumulate in fp32, the CPU ones multiply fp32 values, so each
 *               product differs by ~2^-9 relative (seen: 1.5e-3 to 2.5e-3); the same holds for
 *               the fast adapter GEMMs (bf16 operands) against the reference ones (fp32);
 *   TOL_ACCUM   the fast base-weight GEMMs against the reference ones: the same bf16 operands,
 *               so only the order of the fp32 sums differs (~sqrt(K) 2^-24 relative, 3e-6 at
 *               K = 9216);
 *   TOL_ADAMW   one fused update per element, the same fp32 operations in the same order;
 *   TOL_SUMSQ   the sum of squares is accumulated in double on both sides (backend.h). */
#define TOL_ELEM 1e-5
#define TOL_REDUCE 1e-4
#define TOL_GEMM 1e-2
#define TOL_ACCUM 2e-5
#define TOL_ADAMW 1e-6
#define TOL_SUMSQ 1e-6
#define MAX_FACTOR 10.0

static pt_backend *ref_be, *dev_be; /* the CPU reference and the backend under test */
static pt_backend *kref_be;         /* the backend under test with PTRAIN_CUDA_KERNELS=reference */
static int n_sides = 2;             /* the sides a twin lives on: 3 or 4 in the matmul tests (twin) */
static pt_device dev_device = DEVICE_CUDA; /* the device option that opens it */
static const char *dev_label = "cuda"; /* how the lines name its results */
static const char *skip_reason;
static int failures; /* failed checks of the running test */
static bool small;   /* PTRAIN_TEST_SMALL: smaller cases for slow backends (the CPU emulator) */

/* ---- random host data (one fixed-seed stream: the same inputs on every run) ---- */

static uint64_t rng_state = 0x853c49e6748fea9bULL;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi), never exactly 0 (dropout tells dropped elements by their zeros). */
static float rng_uniform(float lo, float hi)
{
    float v = lo + (hi - lo) * (float)((double)(rng_next() >> 40) / 16777216.0);
    return v == 0.0f ? 0.5f * hi : v;
}

static float *host_random(int64_t n, float lo, float hi)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = rng_uniform(lo, hi);
    return v;
}

static float *host_fill(int64_t n, float value)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = value;
    return v;
}

/* Overwrite a host array an op took by pointer, once both sides have been called: the backend
 * must have copied it (cuda_stage), not kept a reference to it. */
static void scribble(void *p, size_t bytes) { memset(p, 0xa5, bytes); }

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

/* Q4_K super-block (src/backend/quant.c): fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128
 * bytes of nibbles; x = d*sc*q - dmin*m, so |x| < 945 d + 63 dmin, about 2 here. Q5_K (size 176)
 * has 32 bytes of fifth bits before the nibbles, |x| < 1953 d + 63 dmin. */
static void random_q4_k_block(uint8_t *p, size_t size)
{
    put16(p, quant_f32_to_f16(rng_uniform(0.0005f, 0.002f)));
    put16(p + 2, quant_f32_to_f16(rng_uniform(0.001f, 0.02f)));
    for (size_t i = 4; i < size; i++) p[i] = (uint8_t)rng_next();
}

/* Q6_K super-block: ql[128], qh[64], int8 scales[16], fp16 d at 208; x = d*sc*(q-32), |x| < 4096 d. */
static void random_q6_k_block(uint8_t *p)
{
    for (int i = 0; i < 208; i++) p[i] = (uint8_t)rng_next();
    put16(p + 208, quant_f32_to_f16(rng_uniform(0.0001f, 0.0005f)));
}

/* Host bytes of a random weight [rows, cols] stored as dtype; the size is tensor_make's. */
static void *weight_host(pt_dtype dtype, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor t = tensor_make(dtype, 2, shape);
    assert_true(t.nbytes > 0);
    uint8_t *buf = malloc(t.nbytes);
    assert_non_null(buf);
    if (dtype == PT_Q4_K || dtype == PT_Q5_K || dtype == PT_Q6_K) { /* no quantizer: random blocks */
        size_t block = dtype_size_bytes(dtype, 256);
        for (size_t off = 0; off < t.nbytes; off += block) {
            if (dtype != PT_Q6_K)
                random_q4_k_block(buf + off, block);
            else
                random_q6_k_block(buf + off);
        }
        return buf;
    }
    float *v = host_random(rows * cols, -1.0f, 1.0f);
    if (dtype == PT_NF4) {
        assert_int_equal(nf4_quantize(v, rows, cols, buf), PT_OK);
    } else {
        size_t row_bytes = dtype_size_bytes(dtype, cols);
        for (int64_t r = 0; r < rows; r++)
            assert_int_equal(quant_quantize_row(dtype, v + r * cols, buf + (size_t)r * row_bytes, cols), PT_OK);
    }
    free(v);
    return buf;
}

/* ---- one tensor on both backends ---- */

/* Memory calls must work on both sides; on a GPU a failing kernel shows up here (the next
 * download after it), so say what the backend said. */
static void must(pt_status st, const char *what)
{
    if (st != PT_OK) fail_msg("%s failed: %s: %s", what, err_status_name(st), err_message());
}

/* One tensor on each side: 0 the CPU (ref), 1 the backend under test (dev); in the matmul tests
 * also 2 its reference kernels (kref, on kref_be) and 3 a second copy on the backend under test
 * (again), which runs each op a second time on inputs at other addresses. */
typedef struct {
    pt_tensor ref, dev, kref, again;
} twin;

static pt_backend *B(int side) { return side == 2 ? kref_be : side ? dev_be : ref_be; }
static pt_tensor *S(twin *t, int side)
{
    pt_tensor *all[] = {&t->ref, &t->dev, &t->kref, &t->again};
    return all[side];
}
static const char *side_name(int side)
{
    const char *names[] = {"cpu", "the backend under test", "the backend under test with reference kernels",
                           "the backend under test (second run)"};
    return names[side];
}

/* A [rows, cols] tensor of dtype on every side, holding the same host bytes. */
static twin twin_bytes(pt_dtype dtype, int64_t rows, int64_t cols, const void *host)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor made = tensor_make(dtype, 2, shape);
    twin t = {made, made, made, made};
    assert_true(t.ref.nbytes > 0);
    for (int side = 0; side < n_sides; side++) {
        char what[96];
        snprintf(what, sizeof what, "alloc on %s", side_name(side));
        must(backend_alloc(B(side), S(&t, side)), what);
        snprintf(what, sizeof what, "upload to %s", side_name(side));
        must(backend_upload(B(side), S(&t, side), host, t.ref.nbytes), what);
    }
    return t;
}

static twin twin_f32(int64_t rows, int64_t cols, const float *host) { return twin_bytes(PT_F32, rows, cols, host); }

static twin twin_random(int64_t rows, int64_t cols, float lo, float hi)
{
    float *v = host_random(rows * cols, lo, hi);
    twin t = twin_f32(rows, cols, v);
    free(v);
    return t;
}

static twin twin_value(int64_t rows, int64_t cols, float value)
{
    float *v = host_fill(rows * cols, value);
    twin t = twin_f32(rows, cols, v);
    free(v);
    return t;
}

/* An output: NaN everywhere, so what the op leaves unwritten fails the check. */
static twin twin_poison(int64_t rows, int64_t cols) { return twin_value(rows, cols, NAN); }

static void twin_free(twin *t)
{
    backend_release(ref_be, &t->ref);
    backend_release(dev_be, &t->dev);
    if (t->kref.data) backend_release(kref_be, &t->kref);
    if (t->again.data) backend_release(dev_be, &t->again);
}

static void *fetch(pt_backend *be, const pt_tensor *t)
{
    void *host = malloc(t->nbytes ? t->nbytes : 1);
    assert_non_null(host);
    must(backend_download(be, t, host, t->nbytes), be == dev_be ? "download from the backend under test" : "download");
    return host;
}

/* ---- checks ---- */

static void report(bool ok, const char *op, const char *cas, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void report(bool ok, const char *op, const char *cas, const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    print_message("# %-22s %-40s %s  %s\n", op, cas, detail, ok ? "ok" : "FAIL");
    failures += !ok;
}

/* Whether one side's op call succeeded; a failure (a missing kernel, say) is a failed check. */
static bool ran(pt_status st, int side, const char *op, const char *cas)
{
    if (st != PT_OK)
        report(false, op, cas, "%s failed: %s: %s", side == 1 ? dev_label : side_name(side), err_status_name(st),
               err_message());
    return st == PT_OK;
}

/* Run `call` on the reference (side 0), then on the backend under test (side 1), and in the
 * matmul tests on its reference kernels (2) and once more on it (3); the call names its backend
 * B(side) and its tensors S(&twin, side). ok: every side succeeded. */
#define BOTH(ok, op, cas, call)                                                                    \
    do {                                                                                           \
        (ok) = true;                                                                               \
        for (int side = 0; side < n_sides && (ok); side++) (ok) = ran((call), side, op, cas);      \
    } while (0)

/* dev against ref (named ref_name), over n values. */
static void check_values_of(const char *op, const char *cas, const float *dev, const float *ref, const char *ref_name,
                            int64_t n, double tol)
{
    double diff2 = 0, ref2 = 0, diff_max = 0, ref_max = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(dev[i]) || !isfinite(ref[i])) {
            if (bad < 0) bad = i;
            continue;
        }
        double e = (double)dev[i] - (double)ref[i];
        diff2 += e * e;
        ref2 += (double)ref[i] * ref[i];
        diff_max = fmax(diff_max, fabs(e));
        ref_max = fmax(ref_max, fabs((double)ref[i]));
    }
    if (bad >= 0) {
        report(false, op, cas, "non-finite at [%lld] of %lld: %s %g, %s %g", (long long)bad, (long long)n,
               dev_label, (double)dev[bad], ref_name, (double)ref[bad]);
        return;
    }
    double rel = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2), rel_max = ref_max > 0 ? diff_max / ref_max : diff_max;
    report(rel <= tol && rel_max <= MAX_FACTOR * tol, op, cas, "rel %8.2e max %8.2e tol %.0e", rel, rel_max, tol);
}

static void check_values(const char *op, const char *cas, const float *dev, const float *ref, int64_t n,
                         double tol)
{
    check_values_of(op, cas, dev, ref, "cpu", n, tol);
}

/* An f32 output of both sides compared. */
static void check_twin(const char *op, const char *cas, const twin *t, double tol)
{
    float *r = fetch(ref_be, &t->ref), *d = fetch(dev_be, &t->dev);
    check_values(op, cas, d, r, tensor_numel(&t->ref), tol);
    free(r);
    free(d);
}

static size_t bytes_differ(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += x[i] != y[i];
    return differ;
}

/* Bit-for-bit equal contents (copies, no-op sums). */
static void check_bytes(const char *op, const char *cas, const twin *t)
{
    unsigned char *r = fetch(ref_be, &t->ref), *d = fetch(dev_be, &t->dev);
    size_t differ = bytes_differ(r, d, t->ref.nbytes);
    report(differ == 0, op, cas, "%zu of %zu bytes differ", differ, t->ref.nbytes);
    free(r);
    free(d);
}

static void check_scalar(const char *op, const char *cas, double dev, double ref, double tol)
{
    double rel = fabs(dev - ref) / (ref != 0 ? fabs(ref) : 1.0);
    report(isfinite(dev) && rel <= tol, op, cas, "rel %8.2e (%s %.10g, cpu %.10g) tol %.0e", rel, dev_label, dev,
           ref, tol);
}

/* ---- linear algebra ---- */

/* The CPU emulator (tests/emu) counts the cublasLtMatmul calls it ran; absent (NULL) elsewhere. */
extern long emu_lt_matmul_calls(void) __attribute__((weak));

/* A matmul's output on every side: the backend under test against the CPU (TOL_GEMM), against
 * its reference kernels (tol_kernels), and its second run (side 3: copies of the inputs at other
 * addresses, run after the reference kernels) bit for bit: the GEMM algorithm of a shape is fixed
 * and its sums have a fixed order, so a run repeats exactly. */
static void check_matmul_out(const char *op, const char *cas, const twin *t, double tol_kernels)
{
    check_twin(op, cas, t, TOL_GEMM);
    if (n_sides < 3) return;
    char name[48];
    float *d = fetch(dev_be, &t->dev), *k = fetch(kref_be, &t->kref);
    snprintf(name, sizeof name, "%s vs ref", op);
    check_values_of(name, cas, d, k, "reference kernels", tensor_numel(&t->ref), tol_kernels);
    free(k);
    if (n_sides == 4) {
        float *again = fetch(dev_be, &t->again);
        size_t differ = bytes_differ(d, again, t->ref.nbytes);
        snprintf(name, sizeof name, "%s again", op);
        report(differ == 0, name, cas, "%zu of %zu bytes differ from the first run", differ, t->ref.nbytes);
        free(again);
    }
    free(d);
}

/* y = x wᵀ and dx = dy w. Against the reference kernels a base weight meets the same bf16
 * operands (TOL_ACCUM); an f32 weight is an adapter, bf16 on the fast path, fp32 in the reference
 * (TOL_GEMM). */
static void check_matmul_case(pt_dtype dtype, int m, int n, int k)
{
    void *wh = weight_host(dtype, n, k);
    twin w = twin_bytes(dtype, n, k, wh);
    free(wh);
    twin x = twin_random(m, k, -1.0f, 1.0f), dy = twin_random(m, n, -1.0f, 1.0f);
    double tol_kernels = dtype == PT_F32 ? TOL_GEMM : TOL_ACCUM;
    for (int beta = 0; beta <= 1; beta++) { /* beta 0 must ignore the NaN already there */
        char cas[96];
        snprintf(cas, sizeof cas, "%s M=%d N=%d K=%d beta=%d", dtype_name(dtype), m, n, k, beta);
        twin y = beta ? twin_random(m, n, -1.0f, 1.0f) : twin_poison(m, n);
        twin dx = beta ? twin_random(m, k, -1.0f, 1.0f) : twin_poison(m, k);
        bool ok;
        BOTH(ok, "matmul", cas, backend_matmul(B(side), S(&y, side), S(&x, side), S(&w, side), (float)beta));
        if (ok) check_matmul_out("matmul", cas, &y, tol_kernels);
        BOTH(ok, "matmul_bwd_input", cas,
             backend_matmul_bwd_input(B(side), S(&dx, side), S(&dy, side), S(&w, side), (float)beta));
        if (ok) check_matmul_out("matmul_bwd_input", cas, &dx, tol_kernels);
        twin_free(&y);
        twin_free(&dx);
    }
    twin_free(&w);
    twin_free(&x);
    twin_free(&dy);
}

static void check_matmul_bwd_weight_case(int m, int n, int k)
{
    twin x = twin_random(m, k, -1.0f, 1.0f), dy = twin_random(m, n, -1.0f, 1.0f);
    for (int beta = 0; beta <= 1; beta++) {
        char cas[96];
        snprintf(cas, sizeof cas, "M=%d N=%d K=%d beta=%d", m, n, k, beta);
        twin dw = beta ? twin_random(n, k, -1.0f, 1.0f) : twin_poison(n, k);
        bool ok;
        BOTH(ok, "matmul_bwd_weight", cas,
             backend_matmul_bwd_weight(B(side), S(&dw, side), S(&dy, side), S(&x, side), (float)beta));
        if (ok) check_matmul_out("matmul_bwd_weight", cas, &dw, TOL_GEMM); /* an adapter's gradient */
        twin_free(&dw);
    }
    twin_free(&x);
    twin_free(&dy);
}

static const pt_dtype weight_types[] = {PT_F32, PT_BF16, PT_F16, PT_Q8_0, PT_Q4_0,
                                        PT_Q4_1, PT_Q4_K, PT_Q6_K, PT_NF4};
enum { N_WEIGHT_TYPES = sizeof weight_types / sizeof weight_types[0] };

static bool is_k_quant(pt_dtype t) { return t == PT_Q4_K || t == PT_Q6_K; }

/* Tiles: the emulator's tile holds 64K values (tests/emu/rewrite.sed), so N=300 rows of K=512
 * are 3 fast tiles of 128, 128 and 44 rows, and of K=384 the reference's 170 + 130 rows against
 * the fast path's 128 + 128 + 44; a GPU's 16M-value tile is spanned only by the Gemma 2 2B MLP
 * shape (run where not emulated: 2 x 4608 rows fast, 7281 + 1935 in the reference). K=36, N=30
 * and N=12 are not 16-byte aligned rows: the fast path falls back to cublasGemmEx there. The
 * second run (side 3) is left out on the emulator, whose GEMMs are OpenBLAS's: it repeats
 * trivially there, and the cuBLASLt plans are reused across the cases' two betas anyway. */
static void test_matmul(void **state)
{
    (void)state;
    bool emulated = emu_lt_matmul_calls != NULL;
    n_sides = !kref_be ? 2 : emulated ? 3 : 4;
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        pt_dtype t = weight_types[i];
        check_matmul_case(t, 37, 96, is_k_quant(t) ? 256 : 128); /* k-quant rows are whole 256-blocks */
        check_matmul_case(t, 3, 96, 256);                         /* few rows: generation */
        check_matmul_case(t, small ? 45 : 300, small ? 300 : 1000, 512);
        if (t == PT_Q8_0 || t == PT_NF4) check_matmul_case(t, 45, 300, 384);
        if (t == PT_F32 || t == PT_BF16 || t == PT_F16) check_matmul_case(t, 5, 30, 36);
    }
    if (!emulated) check_matmul_case(PT_NF4, 37, 9216, 2304);
    check_matmul_bwd_weight_case(37, 96, 128);
    check_matmul_bwd_weight_case(small ? 45 : 300, small ? 300 : 1000, 512);
    check_matmul_bwd_weight_case(37, 12, 64);
    if (emulated)
        report(emu_lt_matmul_calls() > 0, "matmul", "fast path through cuBLASLt (emulator)", "%ld cublasLtMatmul calls",
               emu_lt_matmul_calls());
    n_sides = 2;
    if (failures) fail_msg("%d matmul checks failed (FAIL lines above)", failures);
}

/* ---- layers ---- */

static void ids_fill(int32_t *ids, int n, int vocab)
{
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(((int64_t)i * 7919 + 5) % vocab);
    ids[0] = 0;
    ids[1] = vocab - 1;
    ids[3] = ids[2]; /* a repeat */
}

static void check_embed_case(pt_dtype dtype)
{
    enum { VOCAB = 300, DIM = 256, N = 77 };
    int32_t ids[N];
    ids_fill(ids, N, VOCAB);
    void *th = weight_host(dtype, VOCAB, DIM);
    twin table = twin_bytes(dtype, VOCAB, DIM, th), out = twin_poison(N, DIM);
    free(th);
    char cas[64];
    snprintf(cas, sizeof cas, "%s vocab=%d dim=%d n=%d", dtype_name(dtype), VOCAB, DIM, N);
    bool ok;
    BOTH(ok, "embed", cas, backend_embed(B(side), S(&out, side), S(&table, side), ids));
    scribble(ids, sizeof ids);
    if (ok) check_twin("embed", cas, &out, TOL_ELEM);
    if (ok) check_bytes("embed bits", cas, &out); /* dequantized rows: the CPU's bits (dequant.cu) */
    twin_free(&table);
    twin_free(&out);
}

/* The embedding's gradient (modules_to_save): repeated ids add up in row order, so the CPU's
 * bits; the table starts non-zero (a micro-batch adds to the last one's). */
static void check_embed_bwd_case(int vocab, int dim, int n, float scale)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    assert_non_null(ids);
    ids_fill(ids, n, vocab);
    for (int i = 4; i < n; i += 9) ids[i] = ids[2]; /* one id many times */
    twin dt = twin_random(vocab, dim, -1.0f, 1.0f), dy = twin_random(n, dim, -1.0f, 1.0f);
    char cas[80];
    snprintf(cas, sizeof cas, "vocab=%d dim=%d n=%d scale=%g", vocab, dim, n, scale);
    bool ok;
    BOTH(ok, "embed_bwd", cas, backend_embed_bwd(B(side), S(&dt, side), S(&dy, side), ids, scale));
    scribble(ids, sizeof(int32_t) * (size_t)n);
    if (ok) check_twin("embed_bwd", cas, &dt, TOL_ELEM);
    if (ok) check_bytes("embed_bwd bits", cas, &dt);
    free(ids);
    twin_free(&dt);
    twin_free(&dy);
}

static void test_embed(void **state)
{
    (void)state;
    for (int i = 0; i < N_WEIGHT_TYPES; i++) check_embed_case(weight_types[i]);
    check_embed_bwd_case(300, 256, 77, 1.0f);
    check_embed_bwd_case(49, 576, 300, 0.37f);
    if (failures) fail_msg("%d embed checks failed (FAIL lines above)", failures);
}

static void check_rmsnorm_case(int rows, int dim, float eps)
{
    char cas[64];
    snprintf(cas, sizeof cas, "rows=%d dim=%d eps=%g", rows, dim, (double)eps);
    float *xh = host_random((int64_t)rows * dim, -2.0f, 2.0f);
    for (int r = 0; r < rows; r++) /* rows of different scales */
        for (int i = 0; i < dim; i++) xh[(int64_t)r * dim + i] *= 0.05f + (float)(r % 7);
    twin x = twin_f32(rows, dim, xh), w = twin_random(1, dim, 0.5f, 1.5f);
    free(xh);
    twin y = twin_poison(rows, dim), rstd = twin_poison(rows, 1), y2 = twin_poison(rows, dim);
    bool ok;
    BOTH(ok, "rmsnorm", cas, backend_rmsnorm(B(side), S(&y, side), S(&rstd, side), S(&x, side), S(&w, side), eps));
    if (ok) {
        check_twin("rmsnorm y", cas, &y, TOL_REDUCE);
        check_twin("rmsnorm rstd", cas, &rstd, TOL_REDUCE);
    }
    BOTH(ok, "rmsnorm no rstd", cas, backend_rmsnorm(B(side), S(&y2, side), NULL, S(&x, side), S(&w, side), eps));
    if (ok) check_twin("rmsnorm no rstd", cas, &y2, TOL_REDUCE);

    /* backward from each side's own rstd; dw accumulates onto the same random start */
    float *dyh = host_random((int64_t)rows * dim, -1.0f, 1.0f);
    twin dy = twin_f32(rows, dim, dyh), dx = twin_poison(rows, dim), dw = twin_random(1, dim, -1.0f, 1.0f);
    BOTH(ok, "rmsnorm_bwd", cas,
         backend_rmsnorm_bwd(B(side), S(&dx, side), S(&dw, side), S(&dy, side), S(&x, side), S(&w, side),
                             S(&rstd, side)));
    if (ok) {
        check_twin("rmsnorm_bwd dx", cas, &dx, TOL_REDUCE);
        check_twin("rmsnorm_bwd dw", cas, &dw, TOL_REDUCE);
    }
    /* dx over dy, no dw */
    twin dyx = twin_f32(rows, dim, dyh);
    free(dyh);
    BOTH(ok, "rmsnorm_bwd dx=dy", cas,
         backend_rmsnorm_bwd(B(side), S(&dyx, side), NULL, S(&dyx, side), S(&x, side), S(&w, side),
                             S(&rstd, side)));
    if (ok) check_twin("rmsnorm_bwd dx=dy", cas, &dyx, TOL_REDUCE);
    /* fused with the residual add: h += r, y = norm(h); dx = norm_bwd(dy) + res */
    twin h = twin_random(rows, dim, -2.0f, 2.0f), r = twin_random(rows, dim, -1.0f, 1.0f), yf = twin_poison(rows, dim);
    twin rf = twin_poison(rows, 1), dxf = twin_poison(rows, dim);
    BOTH(ok, "add_rmsnorm", cas,
         backend_add_rmsnorm(B(side), S(&h, side), S(&yf, side), S(&rf, side), S(&r, side), S(&w, side), eps));
    if (ok) {
        check_twin("add_rmsnorm h", cas, &h, TOL_ELEM);
        check_twin("add_rmsnorm y", cas, &yf, TOL_REDUCE);
        check_twin("add_rmsnorm rstd", cas, &rf, TOL_REDUCE);
    }
    BOTH(ok, "rmsnorm_bwd_add", cas,
         backend_rmsnorm_bwd_add(B(side), S(&dxf, side), NULL, S(&dy, side), S(&h, side), S(&w, side), S(&rf, side),
                                 S(&r, side)));
    if (ok) check_twin("rmsnorm_bwd_add dx", cas, &dxf, TOL_REDUCE);
    twin *all[] = {&x, &w, &y, &rstd, &y2, &dy, &dx, &dw, &dyx, &h, &r, &yf, &rf, &dxf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
}

/* ---- dequantization (cuda/dequant.cu) ---- */

/* cuda/dequant.cu's entry for this test: rows [r0, r0 + rows) of w (on be, a CUDA backend) by its
 * fast kernel (fast) or its generic one, as bf16 (bf16) or fp32, copied to host_out. Weak: a build
 * without it (no CUDA) skips the test. */
extern pt_status cuda_dequant_rows_test(pt_backend *be, const pt_tensor *w, int64_t r0, int64_t rows, bool fast,
                                        bool bf16, void *host_out) __attribute__((weak));

/* Rows [r0, r0 + rows) of the weight [n, k] in host as the CPU dequantizes them. */
static float *cpu_dequant(pt_dtype dtype, const void *host, int64_t n, int64_t k, int64_t r0, int64_t rows)
{
    float *out = malloc((size_t)(rows * k) * sizeof(float) + 1);
    assert_non_null(out);
    if (dtype == PT_NF4) {
        assert_int_equal(nf4_dequantize_rows(host, n, k, r0, rows, out), PT_OK);
        return out;
    }
    size_t row_bytes = dtype_size_bytes(dtype, k);
    for (int64_t r = 0; r < rows; r++)
        assert_int_equal(quant_dequantize_row(dtype, (const uint8_t *)host + (size_t)(r0 + r) * row_bytes,
                                              out + r * k, k),
                         PT_OK);
    return out;
}

/* __float2bfloat16_rn's bits: round to nearest even, a NaN kept quiet. */
static uint16_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* One kernel's output of rows [r0, r0 + rows), fp32 and bf16; NULL (and a failed check) when it
 * failed. */
static bool dequant_run(const pt_tensor *w, int64_t r0, int64_t rows, bool fast, float *f32, uint16_t *bf16,
                        const char *cas)
{
    const char *op = fast ? "dequant fast" : "dequant generic";
    return ran(cuda_dequant_rows_test(dev_be, w, r0, rows, fast, false, f32), 1, op, cas) &&
           ran(cuda_dequant_rows_test(dev_be, w, r0, rows, fast, true, bf16), 1, op, cas);
}

/* Rows [r0, r0 + rows) of a random [n, k] weight: the fast kernel's fp32 against the CPU's and the
 * generic kernel's, its bf16 against the generic kernel's and the CPU's rounded, bit for bit. */
static void check_dequant_case(pt_dtype dtype, int64_t n, int64_t k, int64_t r0, int64_t rows)
{
    char cas[96];
    snprintf(cas, sizeof cas, "%s [%lld, %lld] rows %lld..%lld", dtype_name(dtype), (long long)n, (long long)k,
             (long long)r0, (long long)(r0 + rows));
    void *wh = weight_host(dtype, n, k);
    int64_t shape[2] = {n, k};
    pt_tensor w = tensor_make(dtype, 2, shape);
    must(backend_alloc(dev_be, &w), "alloc on the backend under test");
    must(backend_upload(dev_be, &w, wh, w.nbytes), "upload to the backend under test");
    size_t nv = (size_t)(rows * k);
    float *cpu = cpu_dequant(dtype, wh, n, k, r0, rows), *f[2];
    uint16_t *h[2], *cpu16 = malloc(nv * 2 + 1);
    assert_non_null(cpu16);
    for (size_t i = 0; i < nv; i++) cpu16[i] = bf16_bits(cpu[i]);
    bool ok = true;
    for (int fast = 0; fast < 2; fast++) {
        f[fast] = malloc(nv * 4 + 1);
        h[fast] = malloc(nv * 2 + 1);
        assert_true(f[fast] && h[fast]);
        ok = ok && dequant_run(&w, r0, rows, fast, f[fast], h[fast], cas);
    }
    if (ok) {
        report(bytes_differ(f[1], cpu, nv * 4) == 0, "dequant fast fp32", cas, "%zu of %zu bytes differ from cpu",
               bytes_differ(f[1], cpu, nv * 4), nv * 4);
        report(bytes_differ(f[1], f[0], nv * 4) == 0, "dequant fast fp32", cas,
               "%zu of %zu bytes differ from generic", bytes_differ(f[1], f[0], nv * 4), nv * 4);
        report(bytes_differ(h[1], h[0], nv * 2) == 0, "dequant fast bf16", cas,
               "%zu of %zu bytes differ from generic", bytes_differ(h[1], h[0], nv * 2), nv * 2);
        report(bytes_differ(h[1], cpu16, nv * 2) == 0, "dequant fast bf16", cas,
               "%zu of %zu bytes differ from cpu rounded", bytes_differ(h[1], cpu16, nv * 2), nv * 2);
    }
    for (int fast = 0; fast < 2; fast++) {
        free(f[fast]);
        free(h[fast]);
    }
    free(cpu);
    free(cpu16);
    free(wh);
    backend_release(dev_be, &w);
}

/* A format the fast kernel does not take: asked for it, it refuses (matmul and embed then use the
 * generic kernel). */
static void check_dequant_refused(pt_dtype dtype)
{
    int64_t shape[2] = {4, 256};
    pt_tensor w = tensor_make(dtype, 2, shape);
    void *wh = calloc(1, w.nbytes); /* the values do not matter */
    assert_non_null(wh);
    must(backend_alloc(dev_be, &w), "alloc on the backend under test");
    must(backend_upload(dev_be, &w, wh, w.nbytes), "upload to the backend under test");
    float out[4 * 256];
    pt_status st = cuda_dequant_rows_test(dev_be, &w, 0, 4, true, false, out);
    report(st == PT_ERR_UNSUPPORTED, "dequant fast", dtype_name(dtype), "%s (the generic kernel's format)",
           err_status_name(st));
    free(wh);
    backend_release(dev_be, &w);
}

/* NF4: 2400 blocks (10 nested groups, the last partial); K=384, a multiple of the block and not of
 * 256; 111 blocks (one partial nested group); odd row ranges. Q8_0/Q4_0/Q4_1: 3 blocks per row,
 * 16 per row, odd ranges; F16, Q5_0 and Q5_1 the same. Q4_K/Q5_K/Q6_K: 1, 2 and 3 super-blocks
 * per row, odd ranges. The last case
 * has more groups of 8 than the fast kernel's grid on the emulator (8 SMs x 16 blocks x 256
 * threads), so its threads loop. */
static void test_dequant(void **state)
{
    (void)state;
    if (!cuda_dequant_rows_test || dev_device != DEVICE_CUDA) skip();
    const pt_dtype fast_types[] = {PT_NF4, PT_F16,  PT_Q8_0, PT_Q4_0, PT_Q4_1,
                                   PT_Q5_0, PT_Q5_1, PT_Q4_K, PT_Q5_K, PT_Q6_K};
    for (size_t i = 0; i < sizeof fast_types / sizeof fast_types[0]; i++) {
        pt_dtype t = fast_types[i];
        bool k_quant = is_k_quant(t) || t == PT_Q5_K; /* rows of whole 256-value super-blocks */
        check_dequant_case(t, 300, 512, 0, 300);
        check_dequant_case(t, 300, 512, 7, 251);
        check_dequant_case(t, 45, k_quant ? 768 : 384, 13, 29);
        check_dequant_case(t, 37, k_quant ? 256 : t == PT_NF4 ? 192 : 96, 0, 37);
        check_dequant_case(t, 3, k_quant ? 256 : 64, 1, 1);
        check_dequant_case(t, 640, 512, 0, 640); /* 40960 groups of 8: over the emulator's grid */
    }
    check_dequant_refused(PT_Q2_K);
    check_dequant_refused(PT_Q3_K);
    if (failures) fail_msg("%d dequantization checks failed (FAIL lines above)", failures);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    check_rmsnorm_case(77, 576, 1e-5f);
    check_rmsnorm_case(5, 2048, 1e-6f);
    check_rmsnorm_case(130, 64, 1e-6f);
    if (failures) fail_msg("%d rmsnorm checks failed (FAIL lines above)", failures);
}

static void rope_fill(int32_t *pos, int rows, float *inv_freq, int head_dim, double base)
{
    for (int t = 0; t < rows; t++) pos[t] = (int32_t)(((int64_t)t * 613 + 11) % 4096); /* up to 4095 */
    for (int i = 0; i < head_dim / 2; i++) inv_freq[i] = (float)pow(base, -2.0 * i / head_dim);
}

/* rot_dim < head_dim: partial rotary (Phi-3), the rest of each head passes; mscale: LongRoPE's factor */
static void check_rope_case(int rows, int n_heads, int head_dim, int rot_dim, float mscale, double base)
{
    char cas[96];
    snprintf(cas, sizeof cas, "rows=%d heads=%d head_dim=%d rot_dim=%d mscale=%g", rows, n_heads, head_dim, rot_dim,
             mscale);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)rows);
    float *freq = malloc(sizeof(float) * (size_t)head_dim / 2);
    assert_non_null(pos);
    assert_non_null(freq);
    twin x = twin_random(rows, (int64_t)n_heads * head_dim, -1.0f, 1.0f);
    twin dx = twin_random(rows, (int64_t)n_heads * head_dim, -1.0f, 1.0f);
    bool ok;
    rope_fill(pos, rows, freq, rot_dim, base);
    BOTH(ok, "rope", cas, backend_rope_part(B(side), S(&x, side), n_heads, head_dim, rot_dim, mscale, pos, freq));
    scribble(pos, sizeof(int32_t) * (size_t)rows);
    scribble(freq, sizeof(float) * (size_t)head_dim / 2);
    if (ok) check_twin("rope", cas, &x, TOL_ELEM);
    rope_fill(pos, rows, freq, rot_dim, base);
    BOTH(ok, "rope_bwd", cas,
         backend_rope_part_bwd(B(side), S(&dx, side), n_heads, head_dim, rot_dim, mscale, pos, freq));
    scribble(pos, sizeof(int32_t) * (size_t)rows);
    scribble(freq, sizeof(float) * (size_t)head_dim / 2);
    if (ok) check_twin("rope_bwd", cas, &dx, TOL_ELEM);
    twin_free(&x);
    twin_free(&dx);
    free(pos);
    free(freq);
}

static void test_rope(void **state)
{
    (void)state;
    check_rope_case(77, 8, 64, 64, 1.0f, 10000.0);
    check_rope_case(130, 2, 128, 128, 1.0f, 500000.0);
    check_rope_case(33, 4, 256, 256, 1.0f, 10000.0);
    check_rope_case(41, 3, 128, 96, 1.1902380714f, 10000.0); /* Phi-4-mini: 96 of 128 rotate, LongRoPE's factor */
    if (failures) fail_msg("%d rope checks failed (FAIL lines above)", failures);
}

/* Ministral 3's query temperature: rows at positions past 0, 1, 2 ... periods scaled by 1 + beta ln(1 + k) */
static void check_pos_scale_case(int rows, int64_t width, float beta, int period)
{
    char cas[96];
    snprintf(cas, sizeof cas, "rows=%d width=%lld beta=%g period=%d", rows, (long long)width, beta, period);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)rows);
    assert_non_null(pos);
    twin x = twin_random(rows, width, -1.0f, 1.0f);
    bool ok;
    for (int t = 0; t < rows; t++) pos[t] = (int32_t)(((int64_t)t * 613 + 11) % 4096);
    BOTH(ok, "pos_scale", cas, backend_pos_scale(B(side), S(&x, side), beta, period, pos));
    scribble(pos, sizeof(int32_t) * (size_t)rows);
    if (ok) check_twin("pos_scale", cas, &x, TOL_ELEM);
    twin_free(&x);
    free(pos);
}

static void test_pos_scale(void **state)
{
    (void)state;
    check_pos_scale_case(77, 8 * 64, 0.1f, 16);
    check_pos_scale_case(130, 2 * 128, 0.5f, 1000); /* positions 0 .. 4095: 0 to 4 periods */
    check_pos_scale_case(5, 96, 0.1f, 16384);       /* below the period: a scale of 1 */
    if (failures) fail_msg("%d pos_scale checks failed (FAIL lines above)", failures);
}

/* ---- attention ---- */

/* The backend under test twice: as configured (its tensor-core kernels where they apply), and
 * with PTRAIN_CUDA_KERNELS=reference (its fp32 SIMT kernels) as kref_be, compared with the CPU
 * and with each other on the same inputs. The inputs are bf16 values (q, k, v, dO rounded on the
 * host), so that the tensor-core kernels' only roundings are their own of P and dS, and their
 * tolerance can be tight; one case in fp32 values covers the rounding of the inputs too. */

typedef struct {
    const char *name;
    int batch, n_q, n_kv, q_pos0, n_heads, n_kv_heads, head_dim;
    float softcap;
    int window;
    int packed;   /* segments: 1 three packed examples per sequence (ids in order), 2 ids interleaved */
    bool no_lse;  /* also the forward without lse (generation) */
    float q_mag;  /* q in [-q_mag, q_mag]: large values make the soft-cap bite */
    bool fp32_in; /* inputs not rounded to bf16 values */
} attn_case;

static const attn_case attn_cases[] = {
    {"mha d64 T77", 2, 77, 77, 0, 4, 4, 64, 0, 0, 0, true, 2, false},
    {"gqa d128 T130", 2, 130, 130, 0, 8, 2, 128, 0, 0, 0, false, 2, false},
    {"gqa d256 T77", 2, 77, 77, 0, 8, 2, 256, 0, 0, 0, false, 2, false},
    {"gen d64 q1@99 kv100", 2, 1, 100, 99, 8, 2, 64, 0, 0, 0, true, 2, false},
    {"gen d128 q1@60 kv100", 2, 1, 100, 60, 8, 2, 128, 0, 0, 0, false, 2, false},
    {"gen d256 q1@99 w16", 2, 1, 100, 99, 8, 2, 256, 0, 16, 0, false, 2, false},
    {"chunk d64 q20@57 kv77", 2, 20, 77, 57, 8, 2, 64, 0, 0, 0, false, 2, false},
    {"softcap50 d256 T77", 2, 77, 77, 0, 8, 2, 256, 50.0f, 0, 0, false, 8, false},
    {"softcap50 d256 T77 fp32 in", 2, 77, 77, 0, 8, 2, 256, 50.0f, 0, 0, false, 8, true},
    {"window16 d128 T100", 2, 100, 100, 0, 8, 2, 128, 0, 16, 0, false, 2, false},
    {"packed d64 T130", 2, 130, 130, 0, 8, 2, 64, 0, 0, 1, false, 2, false},
    {"packed+cap+w16 mha d64", 2, 100, 100, 0, 4, 4, 64, 50.0f, 16, 1, false, 8, false},
    {"interleaved ids d64 T70", 2, 70, 70, 0, 4, 2, 64, 0, 0, 2, false, 2, false},
    {"gqa d16 T45 (tiny models)", 2, 45, 45, 0, 4, 2, 16, 0, 0, 0, true, 2, false},
    {"gqa d80 T70 packed", 2, 70, 70, 0, 4, 2, 80, 0, 0, 1, false, 2, false},
    {"d20 T40 (SIMT only)", 2, 40, 40, 0, 4, 2, 20, 0, 0, 1, false, 2, false},
    /* every other head_dim the tensor-core kernels take (multiples of 16 up to 256), tiny */
    {"d32 T33 b2", 2, 33, 33, 0, 2, 1, 32, 0, 0, 0, false, 2, false},
    {"d48 T40 w9 b2", 2, 40, 40, 0, 2, 1, 48, 0, 9, 0, false, 2, false},
    {"d96 T36 q12@24 b2", 2, 12, 36, 24, 4, 2, 96, 0, 0, 0, false, 2, false},
    {"d112 T40 packed b2", 2, 40, 40, 0, 2, 1, 112, 0, 0, 1, false, 2, false},
    {"d144 T33 cap b2", 2, 33, 33, 0, 2, 1, 144, 30.0f, 0, 0, false, 6, false},
    {"d160 T40 w20 b2", 2, 40, 40, 0, 2, 1, 160, 0, 20, 0, false, 2, false},
    {"d176 T36 b2", 2, 36, 36, 0, 2, 2, 176, 0, 0, 0, false, 2, false},
    {"d192 T33 packed b2", 2, 33, 33, 0, 2, 1, 192, 0, 0, 1, false, 2, false},
    {"d208 T40 b2", 2, 40, 40, 0, 2, 1, 208, 0, 0, 0, false, 2, false},
    {"d224 T33 q1@32 b2", 2, 1, 33, 32, 2, 1, 224, 0, 0, 0, false, 2, false},
    {"d240 T36 w9 b2", 2, 36, 36, 0, 2, 1, 240, 0, 9, 2, false, 2, false},
};

/* Tolerances of the tensor-core kernels (bf16 operands, fp32 softmax and accumulation; relative
 * L2, the max-norm error within 10x): with bf16 inputs only P and dS are rounded (each ~2^-9
 * relative; seen up to 1.9e-3); with fp32 inputs q, k, v and dO are rounded too, as a bf16 GEMM's
 * operands (TOL_GEMM; seen up to 5.5e-3). Head dims they do not take keep TOL_REDUCE. */
#define TOL_ATTN_BF16 5e-3
#define TOL_ATTN_FP32 TOL_GEMM

static bool attn_tensor_cores(const attn_case *c) { return c->head_dim % 16 == 0 && c->head_dim <= 256; }

static double attn_tol(const attn_case *c)
{
    return !attn_tensor_cores(c) ? TOL_REDUCE : c->fp32_in ? TOL_ATTN_FP32 : TOL_ATTN_BF16;
}

/* Sequence b packs three examples (ids 10b, 10b+1, 10b+2) with cuts that differ per sequence;
 * interleaved: ids that come back (runs of 7 cycling through 3 ids). */
static void segments_fill(int32_t *seg, int batch, int n_kv, int packed)
{
    for (int b = 0; b < batch; b++) {
        int c1 = n_kv * (b + 1) / 5 + 3, c2 = n_kv * (b + 3) / 5 - 2;
        for (int j = 0; j < n_kv; j++)
            seg[(size_t)b * n_kv + j] = packed == 2 ? 10 * b + j / 7 % 3 : 10 * b + (j >= c1) + (j >= c2);
    }
}

/* n random values in [lo, hi), rounded to bf16 values unless fp32 */
static float *attn_input(int64_t n, float lo, float hi, bool fp32)
{
    float *v = host_random(n, lo, hi);
    for (int64_t i = 0; i < n && !fp32; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&v[i], &u, 4);
    }
    return v;
}

/* One case's host inputs, and its tensors on the CPU and the backend under test. */
typedef struct {
    int qrows, krows, qw, kw;
    float *hq, *hk, *hv, *hdo;
    twin q, k, v, dout, out, lse, dq, dk, dv;
} attn_io;

static attn_io attn_io_make(const attn_case *c)
{
    attn_io io = {.qrows = c->batch * c->n_q, .krows = c->batch * c->n_kv, .qw = c->n_heads * c->head_dim,
                  .kw = c->n_kv_heads * c->head_dim};
    io.hq = attn_input((int64_t)io.qrows * io.qw, -c->q_mag, c->q_mag, c->fp32_in);
    io.hk = attn_input((int64_t)io.krows * io.kw, -1.0f, 1.0f, c->fp32_in);
    io.hv = attn_input((int64_t)io.krows * io.kw, -1.0f, 1.0f, c->fp32_in);
    io.hdo = attn_input((int64_t)io.qrows * io.qw, -1.0f, 1.0f, c->fp32_in);
    io.q = twin_f32(io.qrows, io.qw, io.hq), io.k = twin_f32(io.krows, io.kw, io.hk);
    io.v = twin_f32(io.krows, io.kw, io.hv), io.dout = twin_f32(io.qrows, io.qw, io.hdo);
    io.out = twin_poison(io.qrows, io.qw), io.lse = twin_poison(io.qrows, c->n_heads);
    io.dq = twin_poison(io.qrows, io.qw), io.dk = twin_poison(io.krows, io.kw), io.dv = twin_poison(io.krows, io.kw);
    return io;
}

static void attn_io_free(attn_io *io)
{
    twin *all[] = {&io->q, &io->k, &io->v, &io->dout, &io->out, &io->lse, &io->dq, &io->dk, &io->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    free(io->hq), free(io->hk), free(io->hv), free(io->hdo);
}

/* The backend under test against the CPU: forward (and without lse), then the backward from each
 * side's own out and lse. The segments are scribbled over after each call (they must be staged). */
static void check_attention_fast(const attn_case *c, attn_io *io, pt_attention *a, int32_t *seg, size_t seg_bytes)
{
    double tol = attn_tol(c);
    bool ok;
    BOTH(ok, "attention", c->name,
         backend_attention(B(side), S(&io->out, side), S(&io->lse, side), S(&io->q, side), S(&io->k, side),
                           S(&io->v, side), a));
    scribble(seg, seg_bytes);
    if (ok) {
        check_twin("attention out", c->name, &io->out, tol);
        check_twin("attention lse", c->name, &io->lse, tol);
    }
    if (c->no_lse) {
        twin out2 = twin_poison(io->qrows, io->qw);
        segments_fill(seg, c->batch, c->n_kv, c->packed);
        BOTH(ok, "attention no lse", c->name,
             backend_attention(B(side), S(&out2, side), NULL, S(&io->q, side), S(&io->k, side), S(&io->v, side), a));
        scribble(seg, seg_bytes);
        if (ok) check_twin("attention no lse", c->name, &out2, tol);
        twin_free(&out2);
    }
    segments_fill(seg, c->batch, c->n_kv, c->packed);
    BOTH(ok, "attention_bwd", c->name,
         backend_attention_bwd(B(side), S(&io->dq, side), S(&io->dk, side), S(&io->dv, side), S(&io->dout, side),
                               S(&io->q, side), S(&io->k, side), S(&io->v, side), S(&io->out, side),
                               S(&io->lse, side), a));
    scribble(seg, seg_bytes);
    if (ok) {
        check_twin("attention_bwd dq", c->name, &io->dq, tol);
        check_twin("attention_bwd dk", c->name, &io->dk, tol);
        check_twin("attention_bwd dv", c->name, &io->dv, tol);
    }
}

/* A tensor of kref_be holding host values (NULL: NaN). */
static pt_tensor refk_tensor(int64_t rows, int64_t cols, const float *host)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor t = tensor_make(PT_F32, 2, shape);
    float *nan = host ? NULL : host_fill(rows * cols, NAN);
    must(backend_alloc(kref_be, &t), "alloc on the reference kernels");
    must(backend_upload(kref_be, &t, host ? host : nan, t.nbytes), "upload to the reference kernels");
    free(nan);
    return t;
}

/* An output of the reference kernels against the CPU's (TOL_REDUCE) and the fast kernels' (the
 * fast kernels' tolerance). */
static void check_refk(const char *what, const attn_case *c, const pt_tensor *r, const twin *t)
{
    char op[64], op2[64];
    float *got = fetch(kref_be, r), *cpu = fetch(ref_be, &t->ref), *fast = fetch(dev_be, &t->dev);
    const char *label = dev_label;
    snprintf(op, sizeof op, "%s (reference)", what);
    snprintf(op2, sizeof op2, "%s fast vs ref", what);
    check_values(op, c->name, got, cpu, tensor_numel(r), TOL_REDUCE);
    dev_label = "fast";
    check_values(op2, c->name, fast, got, tensor_numel(r), attn_tol(c));
    dev_label = label;
    free(got), free(cpu), free(fast);
}

/* The same case on the reference kernels (PTRAIN_CUDA_KERNELS=reference), forward and backward. */
static void check_attention_reference(const attn_case *c, attn_io *io, pt_attention *a, int32_t *seg)
{
    pt_tensor q = refk_tensor(io->qrows, io->qw, io->hq), k = refk_tensor(io->krows, io->kw, io->hk);
    pt_tensor v = refk_tensor(io->krows, io->kw, io->hv), dout = refk_tensor(io->qrows, io->qw, io->hdo);
    pt_tensor out = refk_tensor(io->qrows, io->qw, NULL), lse = refk_tensor(io->qrows, c->n_heads, NULL);
    pt_tensor dq = refk_tensor(io->qrows, io->qw, NULL), dk = refk_tensor(io->krows, io->kw, NULL);
    pt_tensor dv = refk_tensor(io->krows, io->kw, NULL);
    segments_fill(seg, c->batch, c->n_kv, c->packed);
    bool ok = ran(backend_attention(kref_be, &out, &lse, &q, &k, &v, a), 1, "attention (reference)", c->name) &&
              ran(backend_attention_bwd(kref_be, &dq, &dk, &dv, &dout, &q, &k, &v, &out, &lse, a), 1,
                  "attention_bwd (reference)", c->name);
    if (ok) {
        check_refk("attention out", c, &out, &io->out);
        check_refk("attention lse", c, &lse, &io->lse);
        check_refk("attention_bwd dq", c, &dq, &io->dq);
        check_refk("attention_bwd dk", c, &dk, &io->dk);
        check_refk("attention_bwd dv", c, &dv, &io->dv);
    }
    pt_tensor *all[] = {&q, &k, &v, &dout, &out, &lse, &dq, &dk, &dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) backend_release(kref_be, all[i]);
}

static void check_attention_case(const attn_case *c_full)
{
    attn_case small_case = *c_full;
    if (small && c_full->n_q * c_full->n_heads > 64) small_case.batch = 1;
    const attn_case *c = &small_case;
    size_t seg_bytes = sizeof(int32_t) * (size_t)c->batch * c->n_kv;
    int32_t *seg = malloc(seg_bytes);
    assert_non_null(seg);
    segments_fill(seg, c->batch, c->n_kv, c->packed);
    pt_attention a = {
        .batch = c->batch, .n_q = c->n_q, .n_kv = c->n_kv, .q_pos0 = c->q_pos0, .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .scale = 1.0f / sqrtf((float)c->head_dim),
        .segments = c->packed ? seg : NULL, .softcap = c->softcap, .window = c->window,
    };
    attn_io io = attn_io_make(c);
    check_attention_fast(c, &io, &a, seg, seg_bytes);
    if (kref_be) check_attention_reference(c, &io, &a, seg);
    attn_io_free(&io);
    free(seg);
}

/* gpt-oss's attention sinks (the forward; the tensor-core kernels hand heads with sinks to the fp32 one): a window
 * shorter than the sequence, grouped heads, sinks on both sides of the scores. */
static void check_attention_sinks(void)
{
    attn_case c = {.name = "sinks 2x40 h4/2 d64 w12", .batch = 2, .n_q = 40, .n_kv = 40, .n_heads = 4,
                   .n_kv_heads = 2, .head_dim = 64, .window = 12};
    attn_io io = attn_io_make(&c);
    float sh[4] = {-3.0f, 0.5f, 2.0f, 6.0f};
    twin sk = twin_f32(1, 4, sh);
    pt_attention a = {.batch = c.batch, .n_q = c.n_q, .n_kv = c.n_kv, .n_heads = c.n_heads, .n_kv_heads = c.n_kv_heads,
                      .head_dim = c.head_dim, .scale = 0.125f, .window = c.window};
    bool ok;
    BOTH(ok, "attention sinks", c.name,
         (a.sinks = S(&sk, side)->data, backend_attention(B(side), S(&io.out, side), S(&io.lse, side), S(&io.q, side),
                                                          S(&io.k, side), S(&io.v, side), &a)));
    if (ok) {
        check_twin("attention sinks out", c.name, &io.out, TOL_REDUCE);
        check_twin("attention sinks lse", c.name, &io.lse, TOL_REDUCE);
    }
    twin_free(&sk);
    attn_io_free(&io);
}

static void test_attention(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof attn_cases / sizeof attn_cases[0]; i++) check_attention_case(&attn_cases[i]);
    check_attention_sinks();
    if (failures) fail_msg("%d attention checks failed (FAIL lines above)", failures);
}

/* ---- elementwise ---- */

static void check_glu_case(bool geglu, int rows, int cols)
{
    const char *fwd = geglu ? "geglu" : "swiglu", *bwd = geglu ? "geglu_bwd" : "swiglu_bwd";
    const char *dg_name = geglu ? "geglu_bwd dgate" : "swiglu_bwd dgate";
    const char *du_name = geglu ? "geglu_bwd dup" : "swiglu_bwd dup";
    pt_status (*fwd_op)(pt_backend *, pt_tensor *, const pt_tensor *, const pt_tensor *) =
        geglu ? backend_geglu : backend_swiglu;
    pt_status (*bwd_op)(pt_backend *, pt_tensor *, pt_tensor *, const pt_tensor *, const pt_tensor *,
                        const pt_tensor *) = geglu ? backend_geglu_bwd : backend_swiglu_bwd;
    char cas[64];
    snprintf(cas, sizeof cas, "%dx%d", rows, cols);
    int64_t n = (int64_t)rows * cols;
    float *uh = host_random(n, -2.0f, 2.0f), *dyh = host_random(n, -1.0f, 1.0f);
    twin g = twin_random(rows, cols, -4.0f, 4.0f), u = twin_f32(rows, cols, uh), y = twin_poison(rows, cols);
    bool ok;
    BOTH(ok, fwd, cas, fwd_op(B(side), S(&y, side), S(&g, side), S(&u, side)));
    if (ok) check_twin(fwd, cas, &y, TOL_ELEM);
    twin dy = twin_f32(rows, cols, dyh), dg = twin_poison(rows, cols), du = twin_poison(rows, cols);
    BOTH(ok, bwd, cas, bwd_op(B(side), S(&dg, side), S(&du, side), S(&dy, side), S(&g, side), S(&u, side)));
    if (ok) {
        check_twin(dg_name, cas, &dg, TOL_ELEM);
        check_twin(du_name, cas, &du, TOL_ELEM);
    }
    /* the aliasing the contract allows: dgate over dy, dup over up */
    twin dy2 = twin_f32(rows, cols, dyh), u2 = twin_f32(rows, cols, uh);
    char acas[80];
    snprintf(acas, sizeof acas, "%s dgate=dy dup=up", cas);
    BOTH(ok, bwd, acas, bwd_op(B(side), S(&dy2, side), S(&u2, side), S(&dy2, side), S(&g, side), S(&u2, side)));
    if (ok) {
        check_twin(dg_name, acas, &dy2, TOL_ELEM);
        check_twin(du_name, acas, &u2, TOL_ELEM);
    }
    twin *all[] = {&g, &u, &y, &dy, &dg, &du, &dy2, &u2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    free(uh);
    free(dyh);
}

/* gpt-oss's clamped SwiGLU (limit 7, alpha 1.702) on values past the clamps on both sides */
static void check_glu_clamp_case(int rows, int cols)
{
    char cas[64];
    snprintf(cas, sizeof cas, "%dx%d", rows, cols);
    twin g = twin_random(rows, cols, -12.0f, 12.0f), u = twin_random(rows, cols, -12.0f, 12.0f), y = twin_poison(rows, cols);
    bool ok;
    BOTH(ok, "swiglu_clamp", cas, backend_swiglu_clamp(B(side), S(&y, side), S(&g, side), S(&u, side), 7.0f, 1.702f));
    if (ok) check_twin("swiglu_clamp", cas, &y, TOL_ELEM);
    twin_free(&g);
    twin_free(&u);
    twin_free(&y);
}

static void test_glu(void **state)
{
    (void)state;
    check_glu_clamp_case(77, 1000);
    check_glu_clamp_case(1, 33);
    check_glu_case(false, 77, 1000);
    check_glu_case(true, 77, 1000);
    check_glu_case(false, 1, 33);
    check_glu_case(true, 1, 33);
    if (failures) fail_msg("%d gated activation checks failed (FAIL lines above)", failures);
}

/* ---- mixture of experts (moe_route, moe_gather, moe_matmul, moe_combine) ---- */

/* The (token, expert) pairs sorted by expert, then token, as src/forward/moe.c sorts them. */
static void moe_sort(const int32_t *ex, int rows, int k, int n_exp, int32_t *token, int32_t *row, int64_t *offset)
{
    int64_t r = 0;
    for (int e = 0; e < n_exp; e++) {
        offset[e] = r;
        for (int t = 0; t < rows; t++)
            for (int s = 0; s < k; s++)
                if (ex[t * k + s] == e) token[r] = t, row[t * k + s] = (int32_t)r++;
    }
    offset[n_exp] = r;
}

static void check_moe_case(int rows, int n_exp, int k, bool norm, int dim, int ffn)
{
    char cas[80];
    snprintf(cas, sizeof cas, "%d rows %d experts top-%d%s %dx%d", rows, n_exp, k, norm ? " norm" : "", ffn, dim);
    int n = rows * k;
    int32_t *ex[2], *token = malloc(sizeof(int32_t) * (size_t)n), *row = malloc(sizeof(int32_t) * (size_t)n);
    float *w[2];
    int64_t *offset = malloc(sizeof(int64_t) * (size_t)(n_exp + 1));
    twin z = twin_random(rows, n_exp, -3.0f, 3.0f);
    bool ok = true;
    for (int side = 0; side < 2; side++) {
        ex[side] = malloc(sizeof(int32_t) * (size_t)n), w[side] = malloc(sizeof(float) * (size_t)n);
        ok = ok && ran(backend_moe_route(B(side), ex[side], w[side], S(&z, side), k, norm), side, "moe_route", cas);
    }
    if (!ok) return;
    int differ = 0;
    for (int i = 0; i < n; i++) differ += ex[0][i] != ex[1][i];
    report(differ == 0, "moe_route experts", cas, "%d of %d choices differ", differ, n);
    check_values("moe_route weights", cas, w[1], w[0], n, TOL_ELEM);
    moe_sort(ex[0], rows, k, n_exp, token, row, offset);
    twin x = twin_random(rows, dim, -1.0f, 1.0f), xs = twin_poison(n, dim);
    BOTH(ok, "moe_gather", cas, backend_moe_gather(B(side), S(&xs, side), S(&x, side), token));
    if (ok) check_twin("moe_gather", cas, &xs, 0.0);
    twin *wt = malloc(sizeof(twin) * (size_t)n_exp);
    pt_tensor *ws[2] = {malloc(sizeof(pt_tensor) * (size_t)n_exp), malloc(sizeof(pt_tensor) * (size_t)n_exp)};
    for (int e = 0; e < n_exp; e++) {
        void *wh = weight_host(PT_NF4, ffn, dim);
        wt[e] = twin_bytes(PT_NF4, ffn, dim, wh);
        free(wh);
        ws[0][e] = wt[e].ref, ws[1][e] = wt[e].dev;
    }
    twin ys = twin_poison(n, ffn);
    BOTH(ok, "moe_matmul", cas, backend_moe_matmul(B(side), S(&ys, side), S(&xs, side), ws[side], 1, offset, n_exp));
    if (ok) check_twin("moe_matmul", cas, &ys, TOL_GEMM);
    twin y = twin_random(rows, dim, -1.0f, 1.0f), yd = twin_random(n, dim, -1.0f, 1.0f);
    BOTH(ok, "moe_combine", cas, backend_moe_combine(B(side), S(&y, side), S(&yd, side), row, w[0], k));
    if (ok) check_twin("moe_combine", cas, &y, TOL_ELEM);
    /* the backward ops: combine's (dys, the routing weights' gradient), the router's, the grouped input gradient */
    twin dy = twin_random(rows, dim, -1.0f, 1.0f), dys = twin_poison(n, dim), dw = twin_poison(rows, k);
    BOTH(ok, "moe_combine_bwd", cas,
         backend_moe_combine_bwd(B(side), S(&dys, side), S(&dw, side), S(&dy, side), S(&yd, side), row, w[0], k));
    if (ok) check_twin("moe_combine_bwd dys", cas, &dys, TOL_ELEM);
    if (ok) check_twin("moe_combine_bwd dw", cas, &dw, TOL_REDUCE);
    twin gw = twin_random(rows, k, -1.0f, 1.0f), dz = twin_poison(rows, n_exp);
    BOTH(ok, "moe_route_bwd", cas, backend_moe_route_bwd(B(side), S(&dz, side), S(&z, side), S(&gw, side), ex[0], k, norm));
    if (ok) check_twin("moe_route_bwd", cas, &dz, TOL_REDUCE);
    twin dxs = twin_poison(n, dim);
    BOTH(ok, "moe_matmul_bwd_input", cas,
         backend_moe_matmul_bwd_input(B(side), S(&dxs, side), S(&ys, side), ws[side], 1, offset, n_exp, 0.0f));
    if (ok) check_twin("moe_matmul_bwd_input", cas, &dxs, TOL_GEMM);
    twin *all[] = {&z, &x, &xs, &ys, &y, &yd, &dy, &dys, &dw, &gw, &dz, &dxs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    for (int e = 0; e < n_exp; e++) twin_free(&wt[e]);
    for (int side = 0; side < 2; side++) free(ex[side]), free(w[side]), free(ws[side]);
    free(wt), free(token), free(row), free(offset);
}

static void test_moe(void **state)
{
    (void)state;
    check_moe_case(37, 8, 2, true, 64, 128);
    check_moe_case(5, 16, 4, false, 128, 64); /* experts no token chose */
    check_moe_case(1, 4, 1, true, 64, 64);
    if (failures) fail_msg("%d mixture-of-experts checks failed (FAIL lines above)", failures);
}

static void check_softcap_case(int rows, int cols, float cap)
{
    char cas[64];
    snprintf(cas, sizeof cas, "%dx%d cap=%g", rows, cols, (double)cap);
    float *xh = host_random((int64_t)rows * cols, -3.0f * cap, 3.0f * cap);
    twin x = twin_f32(rows, cols, xh), y = twin_poison(rows, cols), xy = twin_f32(rows, cols, xh);
    free(xh);
    bool ok;
    BOTH(ok, "softcap", cas, backend_softcap(B(side), S(&y, side), S(&x, side), cap));
    if (ok) check_twin("softcap", cas, &y, TOL_ELEM);
    BOTH(ok, "softcap y=x", cas, backend_softcap(B(side), S(&xy, side), S(&xy, side), cap));
    if (ok) check_twin("softcap y=x", cas, &xy, TOL_ELEM);
    float *dyh = host_random((int64_t)rows * cols, -1.0f, 1.0f);
    twin dy = twin_f32(rows, cols, dyh), dx = twin_poison(rows, cols), dyx = twin_f32(rows, cols, dyh);
    free(dyh);
    BOTH(ok, "softcap_bwd", cas, backend_softcap_bwd(B(side), S(&dx, side), S(&dy, side), S(&y, side), cap));
    if (ok) check_twin("softcap_bwd", cas, &dx, TOL_ELEM);
    BOTH(ok, "softcap_bwd dx=dy", cas,
         backend_softcap_bwd(B(side), S(&dyx, side), S(&dyx, side), S(&y, side), cap));
    if (ok) check_twin("softcap_bwd dx=dy", cas, &dyx, TOL_ELEM);
    twin *all[] = {&x, &y, &xy, &dy, &dx, &dyx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
}

static void test_elementwise(void **state)
{
    (void)state;
    bool ok;
    twin y = twin_random(77, 896, -1.0f, 1.0f), bias = twin_random(1, 896, -1.0f, 1.0f);
    BOTH(ok, "add_bias", "77x896", backend_add_bias(B(side), S(&y, side), S(&bias, side)));
    if (ok) check_twin("add_bias", "77x896", &y, TOL_ELEM);
    twin y2 = twin_random(77, 1000, -1.0f, 1.0f), x2 = twin_random(77, 1000, -1.0f, 1.0f);
    BOTH(ok, "add", "77x1000", backend_add(B(side), S(&y2, side), S(&x2, side)));
    if (ok) check_twin("add", "77x1000", &y2, TOL_ELEM);
    twin t = twin_random(333, 77, -1.0f, 1.0f);
    BOTH(ok, "scale", "333x77 s=-0.37", backend_scale(B(side), S(&t, side), -0.37f));
    if (ok) check_twin("scale", "333x77 s=-0.37", &t, TOL_ELEM);
    twin *all[] = {&y, &bias, &y2, &x2, &t};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    check_softcap_case(77, 1000, 50.0f);
    check_softcap_case(3, 49152, 30.0f);
    if (failures) fail_msg("%d elementwise checks failed (FAIL lines above)", failures);
}

/* ---- DoRA ---- */

/* The row norm of W + s·B·A for a stored weight of dtype, the column scale and the magnitude
 * gradient, against the CPU. */
static void check_dora_norm_case(pt_dtype dtype, int64_t n, int64_t k, int64_t r, float s)
{
    char cas[96];
    snprintf(cas, sizeof cas, "%s %lldx%lld r=%lld", dtype_name(dtype), (long long)n, (long long)k, (long long)r);
    void *wh = weight_host(dtype, n, k);
    twin w = twin_bytes(dtype, n, k, wh), a = twin_random(r, k, -0.5f, 0.5f), b = twin_random(n, r, -0.5f, 0.5f);
    twin wn = twin_poison(1, n);
    bool ok;
    BOTH(ok, "dora_norm", cas, backend_dora_norm(B(side), S(&wn, side), S(&w, side), S(&a, side), S(&b, side), s));
    if (ok) check_twin("dora_norm", cas, &wn, TOL_ELEM);
    free(wh);
    twin *all[] = {&w, &a, &b, &wn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
}

static void test_dora(void **state)
{
    (void)state;
    check_dora_norm_case(PT_F32, 70, 96, 8, 2.0f);
    check_dora_norm_case(PT_Q4_1, 45, 256, 16, 0.5f);
    check_dora_norm_case(PT_NF4, 33, 128, 4, 1.0f);
    if (!small) check_dora_norm_case(PT_Q4_K, 300, 1024, 16, 2.0f);
    bool ok;
    twin y = twin_random(77, 896, -1.0f, 1.0f), z = twin_random(77, 896, -1.0f, 1.0f);
    twin mag = twin_random(1, 896, 0.5f, 2.0f), wn = twin_random(1, 896, 0.5f, 2.0f);
    twin dm = twin_random(1, 896, -1.0f, 1.0f);
    BOTH(ok, "dora_scale", "77x896", backend_dora_scale(B(side), S(&y, side), S(&mag, side), S(&wn, side)));
    if (ok) check_twin("dora_scale", "77x896", &y, TOL_ELEM);
    BOTH(ok, "dora_mag_bwd", "77x896", backend_dora_mag_bwd(B(side), S(&dm, side), S(&y, side), S(&z, side), S(&wn, side)));
    if (ok) check_twin("dora_mag_bwd", "77x896", &dm, TOL_ELEM);
    twin *all[] = {&y, &z, &mag, &wn, &dm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    if (failures) fail_msg("%d DoRA checks failed (FAIL lines above)", failures);
}

/* ---- Gated DeltaNet (qwen35) ---- */

/* segments for batch sequences of seq rows: each sequence two packed examples, split at seq / 3 (NULL: none) */
static int32_t *gdn_segments(int batch, int seq)
{
    int32_t *seg = malloc(sizeof(int32_t) * (size_t)batch * seq);
    assert_non_null(seg);
    for (int i = 0; i < batch * seq; i++) seg[i] = 2 * (i / seq) + (i % seq >= seq / 3);
    return seg;
}

/* The causal conv: plain, with packed examples, and through a random conv state (a prompt, then one token). */
static void check_conv_case(int batch, int seq, int ch, int k, int mode)
{
    char cas[96];
    const char *modes[] = {"", " packed", " state"};
    snprintf(cas, sizeof cas, "%dx%d ch=%d k=%d%s", batch, seq, ch, k, modes[mode]);
    int32_t *seg = mode == 1 ? gdn_segments(batch, seq) : NULL;
    pt_delta d = {.batch = batch, .seq = seq, .k_heads = 1, .v_heads = 1, .k_dim = 1, .v_dim = 1, .conv = k,
                  .segments = seg};
    twin x = twin_random((int64_t)batch * seq, ch, -2.0f, 2.0f), w = twin_random(ch, k, -1.0f, 1.0f);
    twin y = twin_poison((int64_t)batch * seq, ch), st = twin_random((int64_t)batch * (k - 1), ch, -1.0f, 1.0f);
    bool ok;
    BOTH(ok, "conv1d_silu", cas,
         backend_conv1d_silu(B(side), S(&y, side), S(&x, side), S(&w, side), mode == 2 ? S(&st, side) : NULL, &d));
    if (ok) check_twin("conv1d_silu", cas, &y, TOL_ELEM);
    if (ok && mode == 2) check_twin("conv1d_silu state", cas, &st, TOL_ELEM);
    twin *all[] = {&x, &w, &y, &st};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    free(seg);
}

/* The delta rule, recurrent and chunked: plain, packed, and from a random recurrent state (the state after compared
 * too). */
static void check_rule_case(int batch, int seq, int nk, int nv, int dk, int dv, int mode)
{
    char cas[96];
    const char *modes[] = {"", " packed", " state"};
    snprintf(cas, sizeof cas, "%dx%d h=%d/%d d=%d/%d%s", batch, seq, nk, nv, dk, dv, modes[mode]);
    int32_t *seg = mode == 1 ? gdn_segments(batch, seq) : NULL;
    pt_delta d = {.batch = batch, .seq = seq, .k_heads = nk, .v_heads = nv, .k_dim = dk, .v_dim = dv, .conv = 4,
                  .segments = seg};
    int64_t rows = (int64_t)batch * seq, width = 2 * (int64_t)nk * dk + (int64_t)nv * dv;
    twin qkv = twin_random(rows, width, -1.0f, 1.0f), beta = twin_random(rows, nv, 0.05f, 0.95f);
    twin g = twin_random(rows, nv, -2.0f, -0.01f), o = twin_poison(rows, (int64_t)nv * dv);
    twin st = twin_random((int64_t)batch * nv * dk, dv, -0.5f, 0.5f);
    bool ok;
    BOTH(ok, "delta_rule", cas,
         backend_delta_rule(B(side), S(&o, side), S(&qkv, side), S(&beta, side), S(&g, side),
                            mode == 2 ? S(&st, side) : NULL, &d));
    if (ok) check_twin("delta_rule", cas, &o, TOL_REDUCE);
    if (ok && mode == 2) check_twin("delta_rule state", cas, &st, TOL_REDUCE);
    twin oc = twin_poison(rows, (int64_t)nv * dv), stc = twin_random((int64_t)batch * nv * dk, dv, -0.5f, 0.5f);
    BOTH(ok, "delta_chunk", cas,
         backend_delta_chunk(B(side), S(&oc, side), S(&qkv, side), S(&beta, side), S(&g, side),
                             mode == 2 ? S(&stc, side) : NULL, &d));
    if (ok) check_twin("delta_chunk", cas, &oc, TOL_REDUCE);
    if (ok && mode == 2) check_twin("delta_chunk state", cas, &stc, TOL_REDUCE);
    twin *all[] = {&qkv, &beta, &g, &o, &st, &oc, &stc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    free(seg);
}

/* The backward ops: the conv (plain and packed), the delta rule (recurrent and chunked) over more than one chunk of
 * PT_DELTA_CHUNK (plain and packed), the gates and the gated output's. */
static void check_gdn_bwd_case(int batch, int seq, int nk, int nv, int dk, int dv, bool packed)
{
    char cas[96];
    snprintf(cas, sizeof cas, "%dx%d h=%d/%d d=%d/%d%s", batch, seq, nk, nv, dk, dv, packed ? " packed" : "");
    int32_t *seg = packed ? gdn_segments(batch, seq) : NULL;
    pt_delta d = {.batch = batch, .seq = seq, .k_heads = nk, .v_heads = nv, .k_dim = dk, .v_dim = dv, .conv = 4,
                  .segments = seg};
    int64_t rows = (int64_t)batch * seq, width = 2 * (int64_t)nk * dk + (int64_t)nv * dv, ow = (int64_t)nv * dv;
    twin x = twin_random(rows, width, -1.0f, 1.0f), beta = twin_random(rows, nv, 0.05f, 0.95f);
    twin g = twin_random(rows, nv, -2.0f, -0.01f), dout = twin_random(rows, ow, -1.0f, 1.0f);
    twin dx = twin_poison(rows, width), db = twin_poison(rows, nv), dg = twin_poison(rows, nv);
    twin w = twin_random(width, 4, -1.0f, 1.0f), dc = twin_poison(rows, width);
    bool ok;
    BOTH(ok, "delta_rule_bwd", cas,
         backend_delta_rule_bwd(B(side), S(&dx, side), S(&db, side), S(&dg, side), S(&dout, side), S(&x, side),
                                S(&beta, side), S(&g, side), &d));
    if (ok) check_twin("delta_rule_bwd dqkv", cas, &dx, TOL_REDUCE);
    if (ok) check_twin("delta_rule_bwd dbeta", cas, &db, TOL_REDUCE);
    if (ok) check_twin("delta_rule_bwd dg", cas, &dg, TOL_REDUCE);
    twin dxc = twin_poison(rows, width), dbc = twin_poison(rows, nv), dgc = twin_poison(rows, nv);
    BOTH(ok, "delta_chunk_bwd", cas,
         backend_delta_chunk_bwd(B(side), S(&dxc, side), S(&dbc, side), S(&dgc, side), S(&dout, side), S(&x, side),
                                 S(&beta, side), S(&g, side), &d));
    if (ok) check_twin("delta_chunk_bwd dqkv", cas, &dxc, TOL_REDUCE);
    if (ok) check_twin("delta_chunk_bwd dbeta", cas, &dbc, TOL_REDUCE);
    if (ok) check_twin("delta_chunk_bwd dg", cas, &dgc, TOL_REDUCE);
    twin *chunked[] = {&dxc, &dbc, &dgc};
    for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++) twin_free(chunked[i]);
    BOTH(ok, "conv1d_silu_bwd", cas,
         backend_conv1d_silu_bwd(B(side), S(&dc, side), S(&dx, side), S(&x, side), S(&w, side), &d));
    if (ok) check_twin("conv1d_silu_bwd", cas, &dc, TOL_REDUCE);
    twin *all[] = {&x, &beta, &g, &dout, &dx, &db, &dg, &w, &dc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    free(seg);
}

static void check_gates_bwd(void)
{
    bool ok;
    twin b = twin_random(77, 6, -4.0f, 4.0f), a = twin_random(77, 6, -30.0f, 30.0f);
    twin alog = twin_random(1, 6, -1.0f, 2.0f), dt = twin_random(1, 6, -1.0f, 1.0f);
    twin dbeta = twin_random(77, 6, -1.0f, 1.0f), dg = twin_random(77, 6, -1.0f, 1.0f);
    twin db = twin_poison(77, 6), da = twin_poison(77, 6);
    BOTH(ok, "delta_gates_bwd", "77x6",
         backend_delta_gates_bwd(B(side), S(&db, side), S(&da, side), S(&dbeta, side), S(&dg, side), S(&b, side),
                                 S(&a, side), S(&alog, side), S(&dt, side)));
    if (ok) check_twin("delta_gates_bwd db", "77x6", &db, TOL_ELEM);
    if (ok) check_twin("delta_gates_bwd da", "77x6", &da, TOL_ELEM);
    twin y = twin_random(77, 96, -2.0f, 2.0f), gate = twin_random(77, 96, -6.0f, 6.0f);
    twin dy = twin_random(77, 96, -1.0f, 1.0f), dgate = twin_poison(77, 96);
    BOTH(ok, "sigmoid_mul_bwd", "77x96",
         backend_sigmoid_mul_bwd(B(side), S(&dy, side), S(&dgate, side), S(&dy, side), S(&y, side), S(&gate, side)));
    if (ok) check_twin("sigmoid_mul_bwd dx", "77x96", &dy, TOL_ELEM);
    if (ok) check_twin("sigmoid_mul_bwd dgate", "77x96", &dgate, TOL_ELEM);
    twin *all[] = {&b, &a, &alog, &dt, &dbeta, &dg, &db, &da, &y, &gate, &dy, &dgate};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
}

static void test_gdn(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        check_conv_case(2, 37, 40, 4, mode);
        check_rule_case(2, small ? 23 : 70, 2, 4, 16, 12, mode);
    }
    check_conv_case(1, 1, 33, 4, 2);  /* one generated token: the window is the state and the token */
    check_conv_case(3, 2, 20, 4, 2);  /* fewer tokens than the window: the state shifts */
    check_rule_case(1, 1, 1, 2, 8, 8, 2);
    if (!small) check_rule_case(1, 5, 2, 2, 128, 64, 0); /* more key values than threads of a block */
    bool ok;
    twin b = twin_random(77, 6, -4.0f, 4.0f), a = twin_random(77, 6, -30.0f, 30.0f);
    twin alog = twin_random(1, 6, -1.0f, 2.0f), dt = twin_random(1, 6, -1.0f, 1.0f);
    twin beta = twin_poison(77, 6), gg = twin_poison(77, 6);
    BOTH(ok, "delta_gates", "77x6",
         backend_delta_gates(B(side), S(&beta, side), S(&gg, side), S(&b, side), S(&a, side), S(&alog, side),
                             S(&dt, side)));
    if (ok) check_twin("delta_gates beta", "77x6", &beta, TOL_ELEM);
    if (ok) check_twin("delta_gates g", "77x6", &gg, TOL_ELEM);
    twin y = twin_random(77, 96, -2.0f, 2.0f), gate = twin_random(77, 96, -6.0f, 6.0f);
    BOTH(ok, "sigmoid_mul", "77x96", backend_sigmoid_mul(B(side), S(&y, side), S(&gate, side)));
    if (ok) check_twin("sigmoid_mul", "77x96", &y, TOL_ELEM);
    twin *all[] = {&b, &a, &alog, &dt, &beta, &gg, &y, &gate};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    check_gdn_bwd_case(2, small ? 70 : 150, 2, 4, 16, 12, false);
    check_gdn_bwd_case(2, small ? 70 : 150, 2, 4, 16, 12, true);
    check_gates_bwd();
    if (failures) fail_msg("%d Gated DeltaNet checks failed (FAIL lines above)", failures);
}

/* ---- loss ---- */

enum { CE_SEPARATE, CE_LOSS_ONLY, CE_IN_PLACE };

/* Every 5th row ignored (all of them with all_ignored), labels spread over the vocabulary. */
static int labels_fill(int32_t *labels, int rows, int vocab, bool all_ignored)
{
    int count = 0;
    for (int r = 0; r < rows; r++) {
        bool ignore = all_ignored || r % 5 == 3;
        labels[r] = ignore ? PT_IGNORE_INDEX : (int32_t)(((int64_t)r * 7919 + 13) % vocab);
        count += !ignore;
    }
    return count;
}

static void check_cross_entropy_case(int rows, int vocab, int mode, bool all_ignored, float softcap)
{
    static const char *mode_name[] = {"dlogits", "loss only", "dlogits=logits"};
    char cas[80];
    snprintf(cas, sizeof cas, "%dx%d %s%s%s", rows, vocab, mode_name[mode], all_ignored ? " all ignored" : "",
             softcap > 0 ? " soft-capped" : "");
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)rows);
    assert_non_null(labels);
    int count = labels_fill(labels, rows, vocab, all_ignored);
    float grad_scale = count ? 1.0f / (float)count : 1.0f;
    float *xh = host_random((int64_t)rows * vocab, -8.0f, 8.0f);
    if (rows > 1) /* a row of large logits: exp overflows unless the row max is subtracted */
        for (int j = 0; j < vocab; j++) xh[vocab + j] += 100.0f;
    twin logits = twin_f32(rows, vocab, xh);
    free(xh);
    twin dl = mode == CE_SEPARATE ? twin_poison(rows, vocab) : logits;
    double loss[2] = {1.25, 1.25}; /* both accumulate onto what is there */
    int64_t n[2] = {3, 3};
    bool ok;
    BOTH(ok, "cross_entropy", cas,
         backend_cross_entropy(B(side), mode == CE_LOSS_ONLY ? NULL : S(&dl, side), &loss[side], &n[side],
                               S(&logits, side), labels, grad_scale, softcap));
    scribble(labels, sizeof(int32_t) * (size_t)rows);
    if (ok) {
        check_scalar("cross_entropy loss", cas, loss[1] - 1.25, loss[0] - 1.25, TOL_REDUCE);
        report(n[1] == n[0] && n[0] == 3 + count, "cross_entropy count", cas, "%s %lld, cpu %lld", dev_label,
               (long long)n[1], (long long)n[0]);
        if (mode != CE_LOSS_ONLY) check_twin("cross_entropy dlogits", cas, &dl, TOL_REDUCE);
    }
    if (mode == CE_SEPARATE) twin_free(&dl);
    twin_free(&logits);
    free(labels);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    for (int mode = CE_SEPARATE; mode <= CE_IN_PLACE; mode++) {
        check_cross_entropy_case(77, 1000, mode, false, 0.0f);
        check_cross_entropy_case(9, 49152, mode, false, 0.0f);
        check_cross_entropy_case(77, 1000, mode, false, 5.0f); /* Gemma 2's final soft-cap, fused */
    }
    check_cross_entropy_case(4, 1000, CE_SEPARATE, true, 0.0f);
    check_cross_entropy_case(4, 1000, CE_IN_PLACE, true, 5.0f);
    if (failures) fail_msg("%d cross-entropy checks failed (FAIL lines above)", failures);
}

/* ---- optimizer, norms, dropout, copies ---- */

static void check_adamw_case(double lr, double weight_decay)
{
    enum { ROWS = 101, COLS = 297, STEPS = 5 };
    twin p = twin_random(ROWS, COLS, -1.0f, 1.0f), m = twin_value(ROWS, COLS, 0.0f), v = twin_value(ROWS, COLS, 0.0f);
    pt_adamw hp = {.lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = weight_decay};
    bool ok = true;
    for (int step = 1; step <= STEPS && ok; step++) {
        char cas[64];
        snprintf(cas, sizeof cas, "lr=%g wd=%g step %d", lr, weight_decay, step);
        twin g = twin_random(ROWS, COLS, -0.1f, 0.1f);
        hp.step = step;
        BOTH(ok, "adamw_step", cas,
             backend_adamw_step(B(side), S(&p, side), S(&g, side), S(&m, side), S(&v, side), &hp));
        if (ok && (step == 1 || step == STEPS)) {
            check_twin("adamw param", cas, &p, TOL_ADAMW);
            check_twin("adamw m", cas, &m, TOL_ADAMW);
            check_twin("adamw v", cas, &v, TOL_ADAMW);
        }
        twin_free(&g);
    }
    twin_free(&p);
    twin_free(&m);
    twin_free(&v);
}

static void test_adamw(void **state)
{
    (void)state;
    check_adamw_case(1e-3, 0.01);
    check_adamw_case(2e-4, 0.0);
    if (failures) fail_msg("%d adamw checks failed (FAIL lines above)", failures);
}

static void test_norms(void **state)
{
    (void)state;
    static const int shapes[][2] = {{1, 1}, {1, 33}, {1000, 1001}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char cas[48];
        snprintf(cas, sizeof cas, "%dx%d onto 2.5", shapes[i][0], shapes[i][1]);
        twin t = twin_random(shapes[i][0], shapes[i][1], -1.0f, 1.0f);
        double acc[2] = {2.5, 2.5};
        bool ok;
        BOTH(ok, "sum_squares", cas, backend_sum_squares(B(side), S(&t, side), &acc[side]));
        if (ok) check_scalar("sum_squares", cas, acc[1] - 2.5, acc[0] - 2.5, TOL_SUMSQ);
        twin_free(&t);
    }
    /* clip_grad_norm over three gradients: clipped (max_norm 1), then left alone (max_norm 1e6) */
    static const double max_norms[] = {1.0, 1e6};
    for (int c = 0; c < 2; c++) {
        char cas[48];
        snprintf(cas, sizeof cas, "3 grads max_norm=%g", max_norms[c]);
        twin g[3] = {twin_random(64, 64, -1.0f, 1.0f), twin_random(1, 1000, -1.0f, 1.0f),
                     twin_random(17, 33, -1.0f, 1.0f)};
        pt_tensor grads[2][3];
        for (int side = 0; side < 2; side++)
            for (int i = 0; i < 3; i++) grads[side][i] = *S(&g[i], side);
        double total[2] = {-1, -1};
        bool ok;
        BOTH(ok, "clip_grad_norm", cas, backend_clip_grad_norm(B(side), grads[side], 3, max_norms[c], &total[side]));
        if (ok) {
            check_scalar("clip_grad_norm total", cas, total[1], total[0], TOL_SUMSQ);
            for (int i = 0; i < 3; i++) {
                char op[32];
                snprintf(op, sizeof op, "clip_grad_norm grad %d", i);
                check_twin(op, cas, &g[i], TOL_ELEM);
            }
        }
        for (int i = 0; i < 3; i++) twin_free(&g[i]);
    }
    if (failures) fail_msg("%d sum-of-squares and clipping checks failed (FAIL lines above)", failures);
}

/* The dropout masks must be the same bit for bit (zeros in the same places), the kept values
 * the same within TOL_ELEM, and the dropped fraction near p (so the masks are not trivial). */
static void check_dropout_result(const char *cas, const twin *y, float p)
{
    int64_t n = tensor_numel(&y->ref), differ = 0, dropped = 0;
    float *r = fetch(ref_be, &y->ref), *d = fetch(dev_be, &y->dev);
    for (int64_t i = 0; i < n; i++) {
        differ += (r[i] == 0.0f) != (d[i] == 0.0f) || !isfinite(d[i]);
        dropped += r[i] == 0.0f;
    }
    double frac = (double)dropped / (double)n;
    report(differ == 0 && fabs(frac - p) < 0.02, "dropout mask", cas, "%lld of %lld differ, %.2f%% dropped",
           (long long)differ, (long long)n, 100.0 * frac);
    check_values("dropout values", cas, d, r, n, TOL_ELEM);
    free(r);
    free(d);
}

static void test_dropout(void **state)
{
    (void)state;
    static const float ps[] = {0.1f, 0.5f};
    static const uint64_t seeds[] = {1234, 0xdeadbeefcafef00dULL};
    for (int c = 0; c < 2; c++) {
        char cas[64];
        snprintf(cas, sizeof cas, "77x1000 p=%g", (double)ps[c]);
        float *xh = host_random(77 * 1000, -1.0f, 1.0f);
        twin x = twin_f32(77, 1000, xh), y = twin_poison(77, 1000), xy = twin_f32(77, 1000, xh);
        free(xh);
        bool ok;
        BOTH(ok, "dropout", cas, backend_dropout(B(side), S(&y, side), S(&x, side), ps[c], seeds[c]));
        if (ok) check_dropout_result(cas, &y, ps[c]);
        char acas[80];
        snprintf(acas, sizeof acas, "%s y=x", cas);
        BOTH(ok, "dropout", acas, backend_dropout(B(side), S(&xy, side), S(&xy, side), ps[c], seeds[c] + 1));
        if (ok) check_dropout_result(acas, &xy, ps[c]);
        twin_free(&x);
        twin_free(&y);
        twin_free(&xy);
    }
    if (failures) fail_msg("%d dropout checks failed (FAIL lines above)", failures);
}

static void test_copy_and_sums(void **state)
{
    (void)state;
    bool ok;
    float *h = host_random(77 * 100, -1.0f, 1.0f);
    twin src = twin_f32(77, 100, h), dst = twin_poison(77, 100);
    free(h);
    BOTH(ok, "copy", "f32 77x100", backend_copy(B(side), S(&dst, side), S(&src, side)));
    if (ok) check_bytes("copy", "f32 77x100", &dst);
    /* rows 10..29 of src into rows 30..49 of big: offsets into device memory; the rest stays NaN */
    twin big = twin_poison(77, 100);
    pt_tensor views[2][2];
    for (int side = 0; side < 2; side++) {
        views[side][0] = tensor_rows(S(&src, side), 10, 20);
        views[side][1] = tensor_rows(S(&big, side), 30, 20);
    }
    BOTH(ok, "copy", "row views", backend_copy(B(side), &views[side][1], &views[side][0]));
    if (ok) check_bytes("copy", "row views", &big);
    /* zero rows 25..34 of big: half of them copied, half NaN before; the rest keeps its bytes */
    for (int side = 0; side < 2; side++) views[side][0] = tensor_rows(S(&big, side), 25, 10);
    BOTH(ok, "zero", "row view", backend_zero(B(side), &views[side][0]));
    if (ok) check_bytes("zero", "row view", &big);
    float *ref = fetch(ref_be, &big.ref);
    int64_t wrong = -1;
    for (int64_t i = 0; i < 77 * 100 && wrong < 0; i++) {
        bool zeroed = i >= 25 * 100 && i < 35 * 100, copied = i >= 35 * 100 && i < 50 * 100;
        if (zeroed ? ref[i] != 0.0f : copied ? isnan(ref[i]) : !isnan(ref[i])) wrong = i;
    }
    report(wrong < 0, "zero", "cpu rows 25..34 only", "first wrong value at %lld", (long long)wrong);
    free(ref);
    void *qh = weight_host(PT_Q4_K, 4, 512);
    twin qsrc = twin_bytes(PT_Q4_K, 4, 512, qh), qdst = twin_bytes(PT_Q4_K, 4, 512, qh);
    free(qh);
    float *qbytes = host_fill((int64_t)qdst.ref.nbytes / 4, NAN); /* overwrite dst before the copy */
    for (int side = 0; side < 2; side++)
        must(backend_upload(B(side), S(&qdst, side), qbytes, qdst.ref.nbytes), "upload");
    free(qbytes);
    BOTH(ok, "copy", "q4_k 4x512", backend_copy(B(side), S(&qdst, side), S(&qsrc, side)));
    if (ok) check_bytes("copy", "q4_k 4x512", &qdst);
    /* with one rank the sums leave the tensor as it is */
    BOTH(ok, "allreduce_sum", "world 1", backend_allreduce_sum(B(side), S(&src, side)));
    if (ok) check_bytes("allreduce_sum", "world 1", &src);
    BOTH(ok, "reduce_begin", "world 1", backend_reduce_begin(B(side), S(&src, side)));
    if (ok) BOTH(ok, "reduce_poll", "world 1", backend_reduce_poll(B(side)));
    if (ok) BOTH(ok, "reduce_end", "world 1", backend_reduce_end(B(side)));
    if (ok) check_bytes("reduce_begin/end", "world 1", &src);
    twin *all[] = {&src, &dst, &big, &qsrc, &qdst};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    if (failures) fail_msg("%d copy and sum checks failed (FAIL lines above)", failures);
}

/* ---- what the front doors reject, they reject for every backend ---- */

/* A call that must fail with `want` on both sides, with the same message, leaving `out` as it was. */
#define REJECTED(op, cas, want, out, call)                                                         \
    do {                                                                                           \
        pt_status st_[2];                                                                          \
        char msg_[2][320];                                                                         \
        for (int side = 0; side < 2; side++) {                                                     \
            err_clear();                                                                           \
            st_[side] = (call);                                                                    \
            snprintf(msg_[side], sizeof msg_[side], "%s", err_message());                          \
        }                                                                                          \
        report(st_[0] == (want) && st_[1] == (want) && strcmp(msg_[0], msg_[1]) == 0, op, cas,    \
               "%s: \"%s\"", err_status_name(st_[1]), msg_[1]);                                     \
        check_bytes(op, cas " (output untouched)", out);                                           \
    } while (0)

static void test_rejects(void **state)
{
    (void)state;
    twin x = twin_random(2, 4, -1.0f, 1.0f), w = twin_random(3, 5, -1.0f, 1.0f), y = twin_random(2, 3, -1.0f, 1.0f);
    REJECTED("matmul", "bad shapes", PT_ERR_INTERNAL, &y,
             backend_matmul(B(side), S(&y, side), S(&x, side), S(&w, side), 0.0f));
    twin table = twin_random(10, 4, -1.0f, 1.0f), out = twin_random(3, 4, -1.0f, 1.0f);
    int32_t ids[3] = {1, 10, 2};
    REJECTED("embed", "id outside vocab", PT_ERR_USER, &out,
             backend_embed(B(side), S(&out, side), S(&table, side), ids));
    twin logits = twin_random(3, 4, -1.0f, 1.0f), dl = twin_random(3, 4, -1.0f, 1.0f);
    int32_t labels[3] = {0, PT_IGNORE_INDEX, 4};
    double loss = 0;
    REJECTED("cross_entropy", "label outside vocab", PT_ERR_USER, &dl,
             backend_cross_entropy(B(side), S(&dl, side), &loss, NULL, S(&logits, side), labels, 1.0f, 0.0f));
    twin *all[] = {&x, &w, &y, &table, &out, &logits, &dl};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) twin_free(all[i]);
    if (failures) fail_msg("%d rejection checks failed (FAIL lines above)", failures);
}

/* ---- setup ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double test_started;

static int before_each(void **state)
{
    (void)state;
    failures = 0;
    n_sides = 2;
    test_started = now_s();
    return 0;
}

static int after_each(void **state)
{
    (void)state;
    print_message("# (%.2f s)\n", now_s() - test_started);
    return 0;
}

/* kref_be: the backend under test once more, with PTRAIN_CUDA_KERNELS=reference while it opens
 * (the backend reads it then); the variable is left as it was. */
static int open_reference_kernels(const pt_backend_options *opts)
{
    const char *was = getenv("PTRAIN_CUDA_KERNELS");
    char *saved = was ? strdup(was) : NULL;
    setenv("PTRAIN_CUDA_KERNELS", "reference", 1);
    pt_status st = backend_open(opts, &kref_be);
    if (saved)
        setenv("PTRAIN_CUDA_KERNELS", saved, 1);
    else
        unsetenv("PTRAIN_CUDA_KERNELS");
    free(saved);
    if (st != PT_OK) {
        print_error("cannot open the %s backend with reference kernels: %s\n", backend_device_names[dev_device],
                    err_message());
        return -1;
    }
    return 0;
}

static int open_backends(void **state)
{
    (void)state;
    pt_backend_options ref_opts = {.device = DEVICE_CPU, .threads = 2, .world = 1};
    pt_backend_options dev_opts = {.device = dev_device, .threads = 2, .world = 1};
    if (backend_open(&ref_opts, &ref_be) != PT_OK || backend_open(&dev_opts, &dev_be) != PT_OK) {
        print_error("cannot open the %s backend: %s\n", ref_be ? backend_device_names[dev_device] : "cpu",
                    err_message());
        return -1;
    }
    print_message("# %s backend (device %d) against the cpu backend\n", dev_be->ops->name, dev_be->device);
    return open_reference_kernels(&dev_opts);
}

static int close_backends(void **state)
{
    (void)state;
    backend_close(kref_be);
    backend_close(dev_be);
    backend_close(ref_be);
    return 0;
}

static void test_cuda_ops(void **state)
{
    (void)state;
    print_message("SKIP reason: %s\n", skip_reason);
    skip();
}

/* The backend under test: cuda, or cpu from PTRAIN_TEST_CUDA_OPS_DEVICE to run the harness
 * without a GPU. Sets skip_reason when it cannot run here; false for a value other than those
 * two. */
static bool choose_device(void)
{
    const char *want = getenv("PTRAIN_TEST_CUDA_OPS_DEVICE");
    pt_device want_device = DEVICE_CUDA;
    if (want && *want && (!backend_device_parse(want, &want_device) || want_device == DEVICE_AUTO)) {
        fprintf(stderr, "PTRAIN_TEST_CUDA_OPS_DEVICE=%s: expected cuda (the default) or cpu\n", want);
        return false;
    }
    if (want_device == DEVICE_CPU) {
        dev_device = DEVICE_CPU;
        dev_label = "cpu under test";
        return true;
    }
#ifdef PTRAIN_HAVE_CUDA
    if (cuda_device_count() == 0)
        skip_reason = "CUDA backend built, but no GPU is visible on this machine "
                      "(PTRAIN_TEST_CUDA_OPS_DEVICE=cpu runs the harness cpu against cpu)";
#else
    skip_reason = "this build has no CUDA backend (./configure --with-cuda); "
                  "PTRAIN_TEST_CUDA_OPS_DEVICE=cpu runs the harness cpu against cpu";
#endif
    return true;
}

int main(void)
{
    const char *sm = getenv("PTRAIN_TEST_SMALL");
    small = sm && *sm && strcmp(sm, "0") != 0;
    if (!choose_device()) return 1;
    if (skip_reason) {
        const struct CMUnitTest skipped[] = {cmocka_unit_test(test_cuda_ops)};
        return cmocka_run_group_tests_name("cuda_ops", skipped, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matmul, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_embed, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_dequant, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_rmsnorm, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_rope, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_pos_scale, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_attention, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_glu, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_moe, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_dora, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_gdn, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_elementwise, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_cross_entropy, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_adamw, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_norms, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_dropout, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_copy_and_sums, before_each, after_each),
        cmocka_unit_test_setup_teardown(test_rejects, before_each, after_each),
    };
    return cmocka_run_group_tests_name("cuda_ops", tests, open_backends, close_backends);
}
