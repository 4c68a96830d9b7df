/* test_cuda_bf16.c — the CUDA backend's bf16 activations (its fast path, issue 26 point 1) against
 * the CPU backend's fp32: every op that takes activations runs on the same values on both sides
 * (random inputs rounded to bf16 first, so both start equal: bf16 tensors on the GPU, their exact
 * fp32 values on the CPU), every output is poisoned with NaN first, and the GPU's bf16 (or fp32)
 * results are compared with the CPU's as ‖dev - cpu‖₂ / ‖cpu‖₂, the max-norm error within 10x that,
 * with no NaN or Inf allowed. One line per check names the op, the case, the error and the
 * tolerance. The fp32 activations of the same ops are test_cuda_ops'.
 *
 * Tolerances (relative L2):
 *   TOL_OUT   an op computed in fp32 registers from equal inputs, its result rounded to bf16 once:
 *             at most 2^-8 relative per element (bf16 keeps 8 significant bits; seen 1.1e-3 to
 *             1.8e-3 in L2), a few fp32 ulp for the formula;
 *   TOL_STAT  fp32 results of the same arithmetic (rstd, the log-sum-exp, dw): sums in another order;
 *   TOL_GEMM  through a GEMM whose weight the GPU rounds to bf16 (quantized bases, fp32 adapters)
 *             or whose probabilities it rounds to bf16 (attention on the tensor cores), as
 *             test_cuda_ops' TOL_GEMM, plus the output's rounding.
 * test_weight_cache: the dequantized weights kept for the backward pass of a recomputed layer
 * (cuda/wcache.cu): a second multiplication by a weight finds it, and the results are the uncached
 * ones (the forward's bit for bit here; the input gradient within TOL_OUT, since tile by tile its
 * bf16 partial sum is rounded once per tile, and cached once).
 * Without a GPU it skips and says so; so it does when the backend opens with fp32 activations
 * (PTRAIN_CUDA_KERNELS=reference). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptrain/backend.h"
#include "ptrain/quant.h"

#define TOL_OUT 4e-3
#define TOL_STAT 1e-4
#define TOL_GEMM 1.2e-2
#define MAX_FACTOR 10.0

static pt_backend *cpu, *dev;
static const char *skip_reason;
static int failures;
static uint64_t rng = 0x2545f4914f6cdd1dULL;

static float uniform(float lo, float hi)
{
    rng += 0x9e3779b97f4a7c15ULL;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return lo + (hi - lo) * (float)((z >> 40) * (1.0 / 16777216.0));
}

static uint16_t to_bf16(float f) /* round to nearest even, as __float2bfloat16_rn */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static float from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void must(pt_status st, const char *what)
{
    if (st != PT_OK) {
        print_error("%s: %s\n", what, err_message());
        fail();
    }
}

/* One tensor on both sides: c on the CPU (f32), d on the GPU (bf16 for an activation, else f32). */
typedef struct {
    pt_tensor c, d;
} pair;

static pt_tensor make_on(pt_backend *be, pt_dtype dtype, int64_t rows, int64_t cols, const float *values)
{
    int64_t shape[2] = {rows, cols}, n = rows * cols;
    pt_tensor t = tensor_make(dtype, 2, shape);
    must(backend_alloc(be, &t), "alloc");
    if (dtype == PT_BF16) {
        uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(n + 1));
        for (int64_t i = 0; i < n; i++) b[i] = to_bf16(values[i]);
        must(backend_upload(be, &t, b, t.nbytes), "upload");
        free(b);
    } else {
        must(backend_upload(be, &t, values, t.nbytes), "upload");
    }
    return t;
}

/* values (rounded to bf16 in place when act) on both sides */
static pair pair_of(bool act, int64_t rows, int64_t cols, float *values)
{
    if (act)
        for (int64_t i = 0; i < rows * cols; i++) values[i] = from_bf16(to_bf16(values[i]));
    pair p = {make_on(cpu, PT_F32, rows, cols, values), make_on(dev, act ? PT_BF16 : PT_F32, rows, cols, values)};
    return p;
}

static pair pair_fill(bool act, int64_t rows, int64_t cols, float lo, float hi, bool random)
{
    int64_t n = rows * cols;
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = random ? uniform(lo, hi) : lo;
    pair p = pair_of(act, rows, cols, v);
    free(v);
    return p;
}

static pair act_in(int64_t rows, int64_t cols, float lo, float hi) { return pair_fill(true, rows, cols, lo, hi, true); }
static pair act_out(int64_t rows, int64_t cols) { return pair_fill(true, rows, cols, NAN, NAN, false); }
static pair f32_in(int64_t rows, int64_t cols, float lo, float hi) { return pair_fill(false, rows, cols, lo, hi, true); }
static pair f32_out(int64_t rows, int64_t cols) { return pair_fill(false, rows, cols, NAN, NAN, false); }

static void pair_free(pair *p)
{
    backend_release(cpu, &p->c);
    backend_release(dev, &p->d);
}

/* t's values as f32 on the host (bf16 widened exactly) */
static float *fetch(pt_backend *be, const pt_tensor *t)
{
    int64_t n = tensor_numel(t);
    float *out = malloc(sizeof(float) * (size_t)(n + 1));
    if (t->dtype == PT_BF16) {
        uint16_t *b = malloc(t->nbytes + 2);
        must(backend_download(be, t, b, t->nbytes), "download");
        for (int64_t i = 0; i < n; i++) out[i] = from_bf16(b[i]);
        free(b);
    } else {
        must(backend_download(be, t, out, t->nbytes), "download");
    }
    return out;
}

static void check(const char *op, const char *cas, const pair *p, double tol)
{
    int64_t n = tensor_numel(&p->c);
    float *c = fetch(cpu, &p->c), *d = fetch(dev, &p->d);
    double num = 0, den = 0, maxd = 0, maxc = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(d[i]) || !isfinite(c[i])) {
            bad++;
            continue;
        }
        double e = (double)d[i] - c[i];
        num += e * e, den += (double)c[i] * c[i];
        maxd = fmax(maxd, fabs(e)), maxc = fmax(maxc, fabs(c[i]));
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num), rmax = maxc > 0 ? maxd / maxc : maxd;
    bool ok = bad == 0 && rel <= tol && rmax <= tol * MAX_FACTOR;
    print_message("# %-17s %-34s %s rel %.2e max %.2e tol %.0e", op, cas, dtype_name(p->d.dtype), rel, rmax, tol);
    if (bad) print_message(" (%lld not finite)", (long long)bad);
    print_message("  %s\n", ok ? "ok" : "FAILED");
    failures += !ok;
    free(c);
    free(d);
}

/* run the same call on both sides: side 0 the CPU's tensors, side 1 the GPU's */
#define BOTH(call_c, call_d)                                   \
    do {                                                       \
        must(call_c, "cpu");                                   \
        must(call_d, "cuda");                                  \
    } while (0)

static void test_rows(void **state)
{
    (void)state;
    failures = 0;
    int rows = 37, dim = 300;
    pair x = act_in(rows, dim, -2, 2), w = f32_in(1, dim, 0.5f, 1.5f), y = act_out(rows, dim), rs = f32_out(rows, 1);
    BOTH(backend_rmsnorm(cpu, &y.c, &rs.c, &x.c, &w.c, 1e-6f), backend_rmsnorm(dev, &y.d, &rs.d, &x.d, &w.d, 1e-6f));
    check("rmsnorm", "37x300", &y, TOL_OUT);
    check("rmsnorm", "37x300 rstd", &rs, TOL_STAT);
    pair dy = act_in(rows, dim, -1, 1), dx = act_out(rows, dim), dw = pair_fill(false, 1, dim, 0, 0, false);
    BOTH(backend_rmsnorm_bwd(cpu, &dx.c, &dw.c, &dy.c, &x.c, &w.c, &rs.c),
         backend_rmsnorm_bwd(dev, &dx.d, &dw.d, &dy.d, &x.d, &w.d, &rs.d));
    check("rmsnorm_bwd", "37x300 dx", &dx, TOL_OUT);
    check("rmsnorm_bwd", "37x300 dw", &dw, TOL_STAT);
    pair h = act_in(rows, dim, -2, 2), r = act_in(rows, dim, -1, 1), yf = act_out(rows, dim), rf = f32_out(rows, 1);
    pair dxf = act_out(rows, dim);
    BOTH(backend_add_rmsnorm(cpu, &h.c, &yf.c, &rf.c, &r.c, &w.c, 1e-6f),
         backend_add_rmsnorm(dev, &h.d, &yf.d, &rf.d, &r.d, &w.d, 1e-6f));
    check("add_rmsnorm", "37x300 h", &h, TOL_OUT);
    check("add_rmsnorm", "37x300 y", &yf, TOL_OUT * 2); /* from h rounded to bf16, then y rounded */
    check("add_rmsnorm", "37x300 rstd", &rf, TOL_OUT);
    BOTH(backend_rmsnorm_bwd_add(cpu, &dxf.c, NULL, &dy.c, &h.c, &w.c, &rf.c, &r.c),
         backend_rmsnorm_bwd_add(dev, &dxf.d, NULL, &dy.d, &h.d, &w.d, &rf.d, &r.d));
    check("rmsnorm_bwd_add", "37x300 dx", &dxf, TOL_OUT * 2);
    pair *fused[] = {&h, &r, &yf, &rf, &dxf};
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) pair_free(fused[i]);
    /* in place: each on fresh inputs, equal on both sides */
    pair b = f32_in(1, dim, -1, 1), s = act_in(rows, dim, -1, 1), y1 = act_in(rows, dim, -2, 2);
    pair y2 = act_in(rows, dim, -2, 2), y3 = act_in(rows, dim, -2, 2);
    BOTH(backend_add_bias(cpu, &y1.c, &b.c), backend_add_bias(dev, &y1.d, &b.d));
    check("add_bias", "37x300", &y1, TOL_OUT);
    BOTH(backend_add(cpu, &y2.c, &s.c), backend_add(dev, &y2.d, &s.d));
    check("add", "37x300", &y2, TOL_OUT);
    BOTH(backend_scale(cpu, &y3.c, 0.37f), backend_scale(dev, &y3.d, 0.37f));
    check("scale", "37x300", &y3, TOL_OUT);
    BOTH(backend_dropout(cpu, &dx.c, &s.c, 0.25f, 77), backend_dropout(dev, &dx.d, &s.d, 0.25f, 77));
    check("dropout", "37x300 p=0.25", &dx, TOL_OUT);
    /* DoRA: the column scale of bf16 outputs, the magnitude gradient from bf16 dy and z into f32 */
    pair mag = f32_in(1, dim, 0.5f, 2.0f), wn = f32_in(1, dim, 0.5f, 2.0f), dm = f32_in(1, dim, -1, 1);
    BOTH(backend_dora_mag_bwd(cpu, &dm.c, &dy.c, &x.c, &wn.c), backend_dora_mag_bwd(dev, &dm.d, &dy.d, &x.d, &wn.d));
    check("dora_mag_bwd", "37x300", &dm, TOL_STAT);
    BOTH(backend_dora_scale(cpu, &x.c, &mag.c, &wn.c), backend_dora_scale(dev, &x.d, &mag.d, &wn.d));
    check("dora_scale", "37x300", &x, TOL_OUT);
    pair *all[] = {&x, &w, &y, &rs, &dy, &dx, &dw, &b, &s, &y1, &y2, &y3, &mag, &wn, &dm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    assert_int_equal(failures, 0);
}

static void test_rope_glu(void **state)
{
    (void)state;
    failures = 0;
    int rows = 9, heads = 3, hd = 64;
    int32_t pos[9];
    float freq[32];
    for (int i = 0; i < rows; i++) pos[i] = 3 * i + 1;
    for (int i = 0; i < hd / 2; i++) freq[i] = (float)pow(10000.0, -2.0 * i / hd);
    pair q = act_in(rows, heads * hd, -1, 1);
    BOTH(backend_rope(cpu, &q.c, heads, hd, pos, freq), backend_rope(dev, &q.d, heads, hd, pos, freq));
    check("rope", "9 rows x 3 heads of 64", &q, TOL_OUT);
    BOTH(backend_rope_bwd(cpu, &q.c, heads, hd, pos, freq), backend_rope_bwd(dev, &q.d, heads, hd, pos, freq));
    check("rope_bwd", "9 rows x 3 heads of 64", &q, TOL_OUT);
    pair_free(&q);
    for (int geglu = 0; geglu < 2; geglu++) {
        const char *name = geglu ? "geglu" : "swiglu";
        pair g = act_in(21, 200, -4, 4), u = act_in(21, 200, -2, 2), y = act_out(21, 200), dy = act_in(21, 200, -1, 1);
        pair dg = act_out(21, 200), du = act_out(21, 200);
        if (geglu)
            BOTH(backend_geglu(cpu, &y.c, &g.c, &u.c), backend_geglu(dev, &y.d, &g.d, &u.d));
        else
            BOTH(backend_swiglu(cpu, &y.c, &g.c, &u.c), backend_swiglu(dev, &y.d, &g.d, &u.d));
        check(name, "21x200", &y, TOL_OUT);
        if (geglu)
            BOTH(backend_geglu_bwd(cpu, &dg.c, &du.c, &dy.c, &g.c, &u.c),
                 backend_geglu_bwd(dev, &dg.d, &du.d, &dy.d, &g.d, &u.d));
        else
            BOTH(backend_swiglu_bwd(cpu, &dg.c, &du.c, &dy.c, &g.c, &u.c),
                 backend_swiglu_bwd(dev, &dg.d, &du.d, &dy.d, &g.d, &u.d));
        check(geglu ? "geglu_bwd" : "swiglu_bwd", "21x200 dgate", &dg, TOL_OUT);
        check(geglu ? "geglu_bwd" : "swiglu_bwd", "21x200 dup", &du, TOL_OUT);
        pair *all[] = {&g, &u, &y, &dy, &dg, &du};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    }
    assert_int_equal(failures, 0);
}

/* A Q4_0 weight [n, k] of random values on both sides. */
static pair weight_q4_0(int64_t n, int64_t k)
{
    float *v = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++) v[i] = uniform(-0.5f, 0.5f);
    int64_t shape[2] = {n, k};
    pair w = {tensor_make(PT_Q4_0, 2, shape), tensor_make(PT_Q4_0, 2, shape)};
    void *blocks = malloc(w.c.nbytes);
    must(quant_quantize_row(PT_Q4_0, v, blocks, n * k), "quantize");
    must(backend_alloc(cpu, &w.c), "alloc");
    must(backend_alloc(dev, &w.d), "alloc");
    must(backend_upload(cpu, &w.c, blocks, w.c.nbytes), "upload");
    must(backend_upload(dev, &w.d, blocks, w.d.nbytes), "upload");
    free(blocks);
    free(v);
    return w;
}

static void test_embed_matmul(void **state)
{
    (void)state;
    failures = 0;
    int m = 40, k = 256, n = 384; /* the emulator's tiles are 64K values: this weight spans two */
    pair w = weight_q4_0(n, k);
    int32_t ids[40];
    for (int i = 0; i < m; i++) ids[i] = (i * 37) % n;
    pair e = act_out(m, k);
    BOTH(backend_embed(cpu, &e.c, &w.c, ids), backend_embed(dev, &e.d, &w.d, ids));
    check("embed", "q4_0 384x256", &e, TOL_OUT);
    pair y = act_out(m, n), yf = f32_out(m, n);
    BOTH(backend_matmul(cpu, &y.c, &e.c, &w.c, 0.0f), backend_matmul(dev, &y.d, &e.d, &w.d, 0.0f));
    check("matmul", "q4_0 40x256 @ 384x256", &y, TOL_GEMM);
    BOTH(backend_matmul(cpu, &yf.c, &e.c, &w.c, 0.0f), backend_matmul(dev, &yf.d, &e.d, &w.d, 0.0f));
    check("matmul", "q4_0, fp32 out (logits)", &yf, TOL_GEMM);
    pair dy = act_in(m, n, -1, 1), dx = act_in(m, k, -1, 1);
    BOTH(backend_matmul_bwd_input(cpu, &dx.c, &dy.c, &w.c, 1.0f), backend_matmul_bwd_input(dev, &dx.d, &dy.d, &w.d, 1.0f));
    check("matmul_bwd_input", "q4_0, two tiles, beta 1", &dx, TOL_GEMM);
    pair dyf = f32_in(m, n, -1, 1);
    BOTH(backend_matmul_bwd_input(cpu, &dx.c, &dyf.c, &w.c, 0.0f),
         backend_matmul_bwd_input(dev, &dx.d, &dyf.d, &w.d, 0.0f));
    check("matmul_bwd_input", "q4_0, fp32 dy (logits' grad)", &dx, TOL_GEMM);
    /* an adapter (fp32) of rank 8 on k = 100: unaligned for cuBLASLt, so cublasGemmEx's bf16 output */
    pair x = act_in(m, 100, -1, 1), a = f32_in(8, 100, -0.3f, 0.3f), xa = act_out(m, 8), ga = f32_out(8, 100);
    pair g8 = act_in(m, 8, -1, 1), dxa = act_out(m, 100);
    BOTH(backend_matmul(cpu, &xa.c, &x.c, &a.c, 0.0f), backend_matmul(dev, &xa.d, &x.d, &a.d, 0.0f));
    check("matmul", "adapter 40x100 @ 8x100", &xa, TOL_GEMM);
    BOTH(backend_matmul_bwd_input(cpu, &dxa.c, &g8.c, &a.c, 0.0f),
         backend_matmul_bwd_input(dev, &dxa.d, &g8.d, &a.d, 0.0f));
    check("matmul_bwd_input", "adapter 40x8 @ 8x100", &dxa, TOL_GEMM);
    BOTH(backend_matmul_bwd_weight(cpu, &ga.c, &g8.c, &x.c, 0.0f),
         backend_matmul_bwd_weight(dev, &ga.d, &g8.d, &x.d, 0.0f));
    check("matmul_bwd_weight", "adapter grad 8x100 (fp32)", &ga, TOL_GEMM);
    /* modules_to_save: the embedding's gradient from bf16 rows into its fp32 table, and the LM head's from the
     * logits' fp32 gradient and the bf16 states, added to the last micro-batch's */
    pair dt = f32_in(n, k, -1, 1), de = act_in(m, k, -1, 1), gh = f32_in(n, k, -1, 1);
    BOTH(backend_embed_bwd(cpu, &dt.c, &de.c, ids, 0.5f), backend_embed_bwd(dev, &dt.d, &de.d, ids, 0.5f));
    check("embed_bwd", "bf16 rows into an fp32 384x256 table", &dt, TOL_OUT);
    BOTH(backend_matmul_bwd_weight(cpu, &gh.c, &dyf.c, &e.c, 1.0f),
         backend_matmul_bwd_weight(dev, &gh.d, &dyf.d, &e.d, 1.0f));
    check("matmul_bwd_weight", "lm_head grad 384x256: fp32 dy, bf16 x, beta 1", &gh, TOL_GEMM);
    pair *all[] = {&w, &e, &y, &yf, &dy, &dx, &dyf, &x, &a, &xa, &ga, &g8, &dxa, &dt, &de, &gh};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    assert_int_equal(failures, 0);
}

/* Causal GQA attention, forward and backward: head_dim 64 on the tensor cores, 24 through the fp32
 * kernels on fp32 copies (with a soft-cap and a window). */
static void attention_case(int head_dim, float softcap, int window)
{
    pt_attention a = {.batch = 2, .n_q = 40, .n_kv = 40, .n_heads = 4, .n_kv_heads = 2, .head_dim = head_dim,
                      .scale = 1.0f / sqrtf((float)head_dim), .softcap = softcap, .window = window};
    int64_t rq = 80, qw = 4 * head_dim, kw = 2 * head_dim;
    char cas[64];
    snprintf(cas, sizeof cas, "2x40, 4/2 heads of %d%s", head_dim, softcap > 0 ? ", cap, window" : "");
    pair q = act_in(rq, qw, -1, 1), k = act_in(rq, kw, -1, 1), v = act_in(rq, kw, -1, 1), o = act_out(rq, qw);
    pair lse = f32_out(rq, 4), dout = act_in(rq, qw, -1, 1);
    pair dq = act_out(rq, qw), dk = act_out(rq, kw), dv = act_out(rq, kw);
    BOTH(backend_attention(cpu, &o.c, &lse.c, &q.c, &k.c, &v.c, &a), backend_attention(dev, &o.d, &lse.d, &q.d, &k.d, &v.d, &a));
    check("attention", cas, &o, TOL_GEMM);
    check("attention", "log-sum-exp", &lse, TOL_STAT * 10);
    BOTH(backend_attention_bwd(cpu, &dq.c, &dk.c, &dv.c, &dout.c, &q.c, &k.c, &v.c, &o.c, &lse.c, &a),
         backend_attention_bwd(dev, &dq.d, &dk.d, &dv.d, &dout.d, &q.d, &k.d, &v.d, &o.d, &lse.d, &a));
    check("attention_bwd", "dq", &dq, TOL_GEMM * 2);
    check("attention_bwd", "dk", &dk, TOL_GEMM * 2);
    check("attention_bwd", "dv", &dv, TOL_GEMM * 2);
    pair *all[] = {&q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
}

static void test_attention(void **state)
{
    (void)state;
    failures = 0;
    attention_case(64, 0.0f, 0);
    attention_case(24, 30.0f, 16);
    assert_int_equal(failures, 0);
}

/* cuda/wcache.cu's counters (weak: absent without the CUDA backend, where nothing runs). */
extern void cuda_wcache_stats(pt_backend *be, long *hits, long *misses) __attribute__((weak));

static void test_weight_cache(void **state)
{
    (void)state;
    failures = 0;
    int m = 40, k = 256, n = 384; /* two of the emulator's tiles uncached */
    pair w = weight_q4_0(n, k), x = act_in(m, k, -1, 1), dy = act_in(m, n, -1, 1);
    pair y = act_out(m, n), dx = act_out(m, k), yc = act_out(m, n), dxc = act_out(m, k);
    must(backend_matmul(dev, &y.d, &x.d, &w.d, 0.0f), "matmul");
    must(backend_matmul_bwd_input(dev, &dx.d, &dy.d, &w.d, 0.0f), "matmul_bwd_input");
    long h0, m0, h1, m1;
    cuda_wcache_stats(dev, &h0, &m0);
    must(backend_weight_cache(dev, (size_t)n * k * 2), "weight cache");
    must(backend_matmul(dev, &yc.d, &x.d, &w.d, 0.0f), "matmul");
    must(backend_matmul_bwd_input(dev, &dxc.d, &dy.d, &w.d, 0.0f), "matmul_bwd_input");
    cuda_wcache_stats(dev, &h1, &m1);
    must(backend_weight_cache(dev, 0), "weight cache off");
    print_message("# weight cache: %ld dequantization(s), %ld reuse(s) (want 1 and 1)\n", m1 - m0, h1 - h0);
    failures += m1 - m0 != 1 || h1 - h0 != 1;
    /* the cached results against the uncached ones: the CPU side holds the uncached results */
    float *a = fetch(dev, &y.d), *b = fetch(dev, &dx.d);
    must(backend_upload(cpu, &yc.c, a, yc.c.nbytes), "upload");
    must(backend_upload(cpu, &dxc.c, b, dxc.c.nbytes), "upload");
    free(a), free(b);
    check("matmul", "cached weight vs tiles", &yc, TOL_STAT);
    /* tile by tile, the bf16 dx is rounded after each tile's share; cached, once */
    check("matmul_bwd_input", "cached weight vs tiles", &dxc, TOL_OUT);
    pair *all[] = {&w, &x, &dy, &y, &dx, &yc, &dxc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(all[i]);
    assert_int_equal(failures, 0);
}

static void test_skipped(void **state)
{
    (void)state;
    print_message("SKIP reason: %s\n", skip_reason);
    skip();
}

static int open_backends(void **state)
{
    (void)state;
    pt_backend_options co = {.device = DEVICE_CPU, .threads = 2, .world = 1}, go = {.device = DEVICE_CUDA, .threads = 2, .world = 1};
    if (backend_open(&co, &cpu) != PT_OK || backend_open(&go, &dev) != PT_OK) {
        print_error("cannot open the backends: %s\n", err_message());
        return -1;
    }
    return 0;
}

static int close_backends(void **state)
{
    (void)state;
    backend_close(dev);
    backend_close(cpu);
    return 0;
}

int main(void)
{
#ifdef PTRAIN_HAVE_CUDA
    const char *k = getenv("PTRAIN_CUDA_KERNELS");
    if (cuda_device_count() == 0) skip_reason = "CUDA backend built, but no GPU is visible on this machine";
    else if (k && !strcmp(k, "reference"))
        skip_reason = "PTRAIN_CUDA_KERNELS=reference: the backend opens with fp32 activations (test_cuda_ops checks them)";
#else
    skip_reason = "this build has no CUDA backend";
#endif
    if (skip_reason) {
        const struct CMUnitTest skipped[] = {cmocka_unit_test(test_skipped)};
        return cmocka_run_group_tests_name("cuda_bf16", skipped, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_rope_glu),
        cmocka_unit_test(test_embed_matmul),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_weight_cache),
    };
    return cmocka_run_group_tests_name("cuda_bf16", tests, open_backends, close_backends);
}
