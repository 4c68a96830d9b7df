/* test_gdn_grad.c — the CPU backend's backward of the Gated DeltaNet ops (qwen35's linear-attention layers,
 * src/cpu/gdn_bwd.c, src/cpu/gdn_chunk_bwd.c): delta_rule_bwd, delta_chunk_bwd, conv1d_silu_bwd, delta_gates_bwd and
 * sigmoid_mul_bwd against central finite differences of L = sum r * f(inputs) (r random) on a float64 reference
 * forward written here, independent of the backend (the delta rule token by token with its state reset where a
 * packed example starts; each forward checked against its reference too: delta_rule and the chunked delta_chunk);
 * the chunked ops against the recurrent ones (more than one chunk, a partial last chunk, examples starting inside a
 * chunk, on a chunk start and as the last token, one of a single token; delta_chunk from a state); and both
 * backwards against transformers 5.25's autograd through its chunked torch reference
 * (tests/reference/make_gdn_bwd_goldens.py: 2 sequences of 150 tokens, three chunks of 64, one of them three packed
 * examples; tests/data/qwen35/gdn_bwd.f32 under $PTRAIN_SRCDIR).
 *
 * Tolerances: the analytic gradients are fp32 sums over the state (k_dim x v_dim per token, carried over up to 150
 * tokens), the differences taken on the float64 reference with h = 1e-3 (truncation ~h^2/6 |f'''| ~ 1e-7): measured
 * errors are at most 8e-7 (max |analytic - fd| / max |fd| per gradient), held to GRAD_TOL = 2e-5; a wrong or missing
 * term (a decay, a reset, a head mapping) is O(1). Chunked against recurrent (both fp32, the sums in other orders):
 * held to FWD_TOL = 1e-5. Against torch: both fp32, the chunked WY form there and the recurrence here summing in
 * other orders, measured at most 2e-6, held to TORCH_TOL = 2e-5 (relative to the largest). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_fixture.h"
#include "ptrain/backend.h"

#define GRAD_TOL 2e-5
#define FWD_TOL 1e-5
#define TORCH_TOL 2e-5
#define FD_STEP 1e-3

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) & 0xffffff) / (float)0x1000000;
}

/* n values uniform in [lo, hi), as float and (d not NULL) as double */
static float *rand_range(int64_t n, uint64_t seed, float lo, float hi, double **d)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * frand(&seed);
    if (d) {
        *d = malloc(sizeof(double) * (size_t)n);
        assert_non_null(*d);
        for (int64_t i = 0; i < n; i++) (*d)[i] = v[i];
    }
    return v;
}

static pt_tensor put(pt_backend *be, int64_t rows, int64_t cols, const float *values)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor t = tensor_make(PT_F32, 2, shape);
    assert_int_equal(backend_alloc(be, &t), PT_OK);
    if (values) assert_int_equal(backend_upload(be, &t, values, t.nbytes), PT_OK);
    return t;
}

/* max |a - b| / max |b| over the entries where b is not NaN */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double diff = 0, scale = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(b[i])) continue;
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs(b[i]));
    }
    return diff / scale;
}

static void check(const char *what, const float *got, const double *want, int64_t n, double tol)
{
    double e = rel_err(got, want, n);
    print_message("  %-40s rel err %.2e (tolerance %.0e)\n", what, e, tol);
    if (e > tol) fail_msg("%s: off by %.3g (tolerance %.1g)", what, e, tol);
}

typedef double (*loss_fn)(void *ctx);

/* central differences of loss with respect to x[0..n), every stride-th entry (the others NaN) */
static double *fd_grad(loss_fn loss, void *ctx, double *x, int64_t n, int stride)
{
    double *g = malloc(sizeof(double) * (size_t)n);
    assert_non_null(g);
    for (int64_t i = 0; i < n; i++) {
        g[i] = NAN;
        if (i % stride) continue;
        double x0 = x[i];
        x[i] = x0 + FD_STEP;
        double up = loss(ctx);
        x[i] = x0 - FD_STEP;
        double down = loss(ctx);
        x[i] = x0;
        g[i] = (up - down) / (2 * FD_STEP);
    }
    return g;
}

/* ---- the delta rule ---- */

typedef struct {
    pt_delta d;
    double *x, *beta, *g, *r, *o;
} rule_ctx;

static void ref_l2(double *v, const double *x, int n, double scale)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    for (int i = 0; i < n; i++) v[i] = x[i] / sqrt(ss + 1e-6) * scale;
}

/* o of value head h of sequence b, token by token (S starting empty at each example) */
static void ref_rule_head(const rule_ctx *c, int b, int h, double *s)
{
    const pt_delta *d = &c->d;
    int dk = d->k_dim, dv = d->v_dim, nv = d->v_heads, kh = h / (nv / d->k_heads);
    int64_t kw = (int64_t)d->k_heads * dk, width = 2 * kw + (int64_t)nv * dv;
    double q[PT_DELTA_MAX_DIM], k[PT_DELTA_MAX_DIM], kv[PT_DELTA_MAX_DIM];
    for (int t = 0; t < d->seq; t++) {
        int64_t r = (int64_t)b * d->seq + t;
        if (t == 0 || (d->segments && d->segments[r] != d->segments[r - 1])) memset(s, 0, sizeof(double) * dk * dv);
        const double *row = c->x + r * width, *v = row + 2 * kw + (int64_t)h * dv;
        ref_l2(q, row + (int64_t)kh * dk, dk, 1.0 / sqrt((double)dk));
        ref_l2(k, row + kw + (int64_t)kh * dk, dk, 1.0);
        double eg = exp(c->g[r * nv + h]), bt = c->beta[r * nv + h];
        for (int j = 0; j < dv; j++) kv[j] = 0;
        for (int i = 0; i < dk * dv; i++) s[i] *= eg, kv[i % dv] += s[i] * k[i / dv];
        for (int i = 0; i < dk * dv; i++) s[i] += k[i / dv] * bt * (v[i % dv] - kv[i % dv]);
        for (int j = 0; j < dv; j++) {
            double acc = 0;
            for (int i = 0; i < dk; i++) acc += s[i * dv + j] * q[i];
            c->o[r * nv * dv + (int64_t)h * dv + j] = acc;
        }
    }
}

static double rule_loss(void *p)
{
    rule_ctx *c = p;
    double *s = malloc(sizeof(double) * (size_t)c->d.k_dim * c->d.v_dim), sum = 0;
    assert_non_null(s);
    for (int b = 0; b < c->d.batch; b++)
        for (int h = 0; h < c->d.v_heads; h++) ref_rule_head(c, b, h, s);
    free(s);
    int64_t n = (int64_t)c->d.batch * c->d.seq * c->d.v_heads * c->d.v_dim;
    for (int64_t i = 0; i < n; i++) sum += c->r[i] * c->o[i];
    return sum;
}

/* The op's forward and backward (delta_chunk and delta_chunk_bwd when chunked, else delta_rule and delta_rule_bwd)
 * on x, beta, g, r (f32) into o and the three gradients (host arrays) */
static void run_rule(const pt_delta *d, bool chunked, const float *x, const float *beta, const float *g,
                     const float *r, float *o, float *dx, float *dbeta, float *dg)
{
    pt_backend *be = cpu();
    int64_t rows = (int64_t)d->batch * d->seq, width = 2 * (int64_t)d->k_heads * d->k_dim + (int64_t)d->v_heads * d->v_dim;
    int64_t ow = (int64_t)d->v_heads * d->v_dim;
    pt_tensor tx = put(be, rows, width, x), tb = put(be, rows, d->v_heads, beta), tg = put(be, rows, d->v_heads, g);
    pt_tensor tr = put(be, rows, ow, r), to = put(be, rows, ow, NULL), tdx = put(be, rows, width, NULL);
    pt_tensor tdb = put(be, rows, d->v_heads, NULL), tdg = put(be, rows, d->v_heads, NULL);
    if (chunked) {
        assert_int_equal(backend_delta_chunk(be, &to, &tx, &tb, &tg, NULL, d), PT_OK);
        assert_int_equal(backend_delta_chunk_bwd(be, &tdx, &tdb, &tdg, &tr, &tx, &tb, &tg, d), PT_OK);
    } else {
        assert_int_equal(backend_delta_rule(be, &to, &tx, &tb, &tg, NULL, d), PT_OK);
        assert_int_equal(backend_delta_rule_bwd(be, &tdx, &tdb, &tdg, &tr, &tx, &tb, &tg, d), PT_OK);
    }
    assert_int_equal(backend_download(be, &to, o, to.nbytes), PT_OK);
    assert_int_equal(backend_download(be, &tdx, dx, tdx.nbytes), PT_OK);
    assert_int_equal(backend_download(be, &tdb, dbeta, tdb.nbytes), PT_OK);
    assert_int_equal(backend_download(be, &tdg, dg, tdg.nbytes), PT_OK);
    pt_tensor *all[] = {&tx, &tb, &tg, &tr, &to, &tdx, &tdb, &tdg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) backend_release(be, all[i]);
    backend_close(be);
}

/* max |a - b| / max |b| of two float arrays */
static double rel_err_f(const float *a, const float *b, int64_t n)
{
    double diff = 0, scale = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return diff / scale;
}

static void check_f(const char *what, const float *got, const float *want, int64_t n, double tol)
{
    double e = rel_err_f(got, want, n);
    print_message("  %-40s rel err %.2e (tolerance %.0e)\n", what, e, tol);
    if (e > tol) fail_msg("%s: off by %.3g (tolerance %.1g)", what, e, tol);
}

typedef struct {
    float *o, *dx, *db, *dg;
} rule_out;

static rule_out rule_out_make(int64_t rows, int64_t nv, int64_t width, int64_t ow)
{
    rule_out r = {malloc(sizeof(float) * (size_t)(rows * ow)), malloc(sizeof(float) * (size_t)(rows * width)),
                  malloc(sizeof(float) * (size_t)(rows * nv)), malloc(sizeof(float) * (size_t)(rows * nv))};
    assert_true(r.o && r.dx && r.db && r.dg);
    return r;
}

/* Both forms (recurrent, then chunked) against the float64 reference and its central differences, and the chunked
 * against the recurrent */
static void rule_case(const char *name, pt_delta d, int stride)
{
    print_message("%s: %d x %d, heads %d/%d of %d/%d%s\n", name, d.batch, d.seq, d.k_heads, d.v_heads, d.k_dim,
                  d.v_dim, d.segments ? ", packed" : "");
    int64_t rows = (int64_t)d.batch * d.seq, nv = d.v_heads;
    int64_t width = 2 * (int64_t)d.k_heads * d.k_dim + nv * d.v_dim, ow = nv * d.v_dim;
    rule_ctx c = {.d = d};
    float *x = rand_range(rows * width, 11, -1.0f, 1.0f, &c.x), *beta = rand_range(rows * nv, 12, 0.05f, 0.95f, &c.beta);
    float *g = rand_range(rows * nv, 13, -1.5f, -0.01f, &c.g), *r = rand_range(rows * ow, 14, -1.0f, 1.0f, &c.r);
    rule_out out[2] = {rule_out_make(rows, nv, width, ow), rule_out_make(rows, nv, width, ow)};
    c.o = malloc(sizeof(double) * (size_t)(rows * ow));
    assert_non_null(c.o);
    for (int k = 0; k < 2; k++) run_rule(&d, k == 1, x, beta, g, r, out[k].o, out[k].dx, out[k].db, out[k].dg);
    rule_loss(&c);
    double *fx = fd_grad(rule_loss, &c, c.x, rows * width, stride), *fb = fd_grad(rule_loss, &c, c.beta, rows * nv, 1);
    double *fg = fd_grad(rule_loss, &c, c.g, rows * nv, 1);
    rule_loss(&c);
    for (int k = 0; k < 2; k++) {
        const char *op = k ? "delta_chunk" : "delta_rule";
        char what[64];
        snprintf(what, sizeof what, "%s forward", op);
        check(what, out[k].o, c.o, rows * ow, FWD_TOL);
        snprintf(what, sizeof what, "%s_bwd dqkv", op);
        check(what, out[k].dx, fx, rows * width, GRAD_TOL);
        snprintf(what, sizeof what, "%s_bwd dbeta", op);
        check(what, out[k].db, fb, rows * nv, GRAD_TOL);
        snprintf(what, sizeof what, "%s_bwd dg", op);
        check(what, out[k].dg, fg, rows * nv, GRAD_TOL);
    }
    check_f("delta_chunk vs delta_rule: o", out[1].o, out[0].o, rows * ow, FWD_TOL);
    check_f("delta_chunk_bwd vs delta_rule_bwd: dqkv", out[1].dx, out[0].dx, rows * width, FWD_TOL);
    check_f("delta_chunk_bwd vs delta_rule_bwd: dbeta", out[1].db, out[0].db, rows * nv, FWD_TOL);
    check_f("delta_chunk_bwd vs delta_rule_bwd: dg", out[1].dg, out[0].dg, rows * nv, FWD_TOL);
    for (int k = 0; k < 2; k++) {
        void *o4[] = {out[k].o, out[k].dx, out[k].db, out[k].dg};
        for (size_t i = 0; i < 4; i++) free(o4[i]);
    }
    void *all[] = {x, beta, g, r, c.x, c.beta, c.g, c.r, c.o, fx, fb, fg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static void test_delta_rule_fd(void **state)
{
    (void)state;
    int32_t seg[2 * 70];
    for (int i = 0; i < 2 * 70; i++) seg[i] = 2 * (i / 70) + (i % 70 >= 23); /* each row two examples */
    pt_delta packed = {.batch = 2, .seq = 70, .k_heads = 2, .v_heads = 4, .k_dim = 16, .v_dim = 12, .conv = 4,
                       .segments = seg};
    rule_case("packed, a chunk boundary inside the second example", packed, 5);
    pt_delta plain = {.batch = 1, .seq = 150, .k_heads = 1, .v_heads = 2, .k_dim = 8, .v_dim = 6, .conv = 4};
    rule_case("three chunks, the last partial", plain, 3);
    int32_t many[140]; /* examples starting at 10, 11 (one token), 40, 64 (a chunk start), 100 and 139 (the last) */
    for (int i = 0; i < 140; i++) many[i] = (i >= 10) + (i >= 11) + (i >= 40) + (i >= 64) + (i >= 100) + (i >= 139);
    pt_delta cut = {.batch = 1, .seq = 140, .k_heads = 1, .v_heads = 1, .k_dim = 6, .v_dim = 10, .conv = 4,
                    .segments = many};
    rule_case("six examples, two inside a chunk, one a token", cut, 3);
}

/* delta_chunk from a state (a prompt after earlier tokens) against delta_rule from the same state: o and the
 * state after, over two and a half chunks */
static void test_delta_chunk_state(void **state)
{
    (void)state;
    pt_delta d = {.batch = 2, .seq = 150, .k_heads = 2, .v_heads = 4, .k_dim = 16, .v_dim = 12, .conv = 4};
    int64_t rows = (int64_t)d.batch * d.seq, nv = d.v_heads, width = 2 * 2 * 16 + nv * 12, ow = nv * 12;
    int64_t ns = (int64_t)d.batch * nv * d.k_dim * d.v_dim;
    float *x = rand_range(rows * width, 41, -1, 1, NULL), *beta = rand_range(rows * nv, 42, 0.05f, 0.95f, NULL);
    float *g = rand_range(rows * nv, 43, -1.5f, -0.01f, NULL), *s0 = rand_range(ns, 44, -1, 1, NULL);
    float *o[2], *st[2];
    pt_backend *be = cpu();
    for (int k = 0; k < 2; k++) {
        o[k] = malloc(sizeof(float) * (size_t)(rows * ow)), st[k] = malloc(sizeof(float) * (size_t)ns);
        assert_true(o[k] && st[k]);
        pt_tensor tx = put(be, rows, width, x), tb = put(be, rows, nv, beta), tg = put(be, rows, nv, g);
        pt_tensor to = put(be, rows, ow, NULL), ts = put(be, ns / d.v_dim, d.v_dim, s0);
        assert_int_equal(k ? backend_delta_chunk(be, &to, &tx, &tb, &tg, &ts, &d)
                           : backend_delta_rule(be, &to, &tx, &tb, &tg, &ts, &d), PT_OK);
        assert_int_equal(backend_download(be, &to, o[k], to.nbytes), PT_OK);
        assert_int_equal(backend_download(be, &ts, st[k], ts.nbytes), PT_OK);
        pt_tensor *all[] = {&tx, &tb, &tg, &to, &ts};
        for (size_t i = 0; i < 5; i++) backend_release(be, all[i]);
    }
    backend_close(be);
    check_f("delta_chunk vs delta_rule from a state: o", o[1], o[0], rows * ow, FWD_TOL);
    check_f("delta_chunk vs delta_rule: the state after", st[1], st[0], ns, FWD_TOL);
    void *fr[] = {x, beta, g, s0, o[0], o[1], st[0], st[1]};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

/* ---- against transformers' autograd (make_gdn_bwd_goldens.py) ---- */

static double *to_double(const float *v, int64_t n)
{
    double *d = malloc(sizeof(double) * (size_t)n);
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

static void test_delta_rule_torch(void **state)
{
    (void)state;
    enum { B = 2, T = 150, NK = 2, NV = 4, DK = 16, DV = 12, ROWS = B * T, W = 2 * NK * DK + NV * DV, OW = NV * DV };
    int32_t seg[ROWS];
    for (int t = 0; t < T; t++) seg[t] = 0, seg[T + t] = 1 + (t >= 40) + (t >= 110);
    pt_delta d = {.batch = B, .seq = T, .k_heads = NK, .v_heads = NV, .k_dim = DK, .v_dim = DV, .conv = 4,
                  .segments = seg};
    int64_t sizes[] = {ROWS * W, ROWS * NV, ROWS * NV, ROWS * OW, ROWS * OW, ROWS * W, ROWS * NV, ROWS * NV};
    size_t total = 0, at[8];
    for (int i = 0; i < 8; i++) at[i] = total, total += (size_t)sizes[i];
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/qwen35/gdn_bwd.f32", srcdir());
    float *gold = read_f32(path, total);
    float *o = malloc(sizeof(float) * ROWS * OW), *dx = malloc(sizeof(float) * ROWS * W);
    float *db = malloc(sizeof(float) * ROWS * NV), *dg = malloc(sizeof(float) * ROWS * NV);
    assert_true(o && dx && db && dg);
    for (int k = 0; k < 2; k++) {
        run_rule(&d, k == 1, gold + at[0], gold + at[1], gold + at[2], gold + at[3], o, dx, db, dg);
        const float *got[] = {o, dx, db, dg};
        const char *names[] = {"o vs torch_chunk_gated_delta_rule", "dqkv vs torch autograd",
                               "dbeta vs torch autograd", "dg vs torch autograd"};
        print_message(" %s\n", k ? "delta_chunk, delta_chunk_bwd" : "delta_rule, delta_rule_bwd");
        for (int i = 0; i < 4; i++) {
            double *want = to_double(gold + at[4 + i], sizes[4 + i]);
            check(names[i], got[i], want, sizes[4 + i], TORCH_TOL);
            free(want);
        }
    }
    void *all[] = {gold, o, dx, db, dg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* ---- conv1d_silu, delta_gates, sigmoid_mul ---- */

typedef struct {
    pt_delta d;
    int64_t ch;
    double *x, *w, *r;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    int k = c->d.conv;
    double sum = 0;
    for (int b = 0; b < c->d.batch; b++)
        for (int t = 0, start = 0; t < c->d.seq; t++) {
            int64_t r = (int64_t)b * c->d.seq + t;
            if (t == 0 || (c->d.segments && c->d.segments[r] != c->d.segments[r - 1])) start = t;
            for (int64_t ch = 0; ch < c->ch; ch++) {
                double a = 0;
                for (int j = 0; j < k; j++)
                    if (t - (k - 1) + j >= start) a += c->w[ch * k + j] * c->x[(r - (k - 1) + j) * c->ch + ch];
                sum += c->r[r * c->ch + ch] * a / (1.0 + exp(-a));
            }
        }
    return sum;
}

static void conv_case(const char *name, pt_delta d, int64_t ch)
{
    pt_backend *be = cpu();
    int64_t rows = (int64_t)d.batch * d.seq, n = rows * ch;
    conv_ctx c = {.d = d, .ch = ch};
    float *x = rand_range(n, 21, -2.0f, 2.0f, &c.x), *w = rand_range(ch * d.conv, 22, -1.0f, 1.0f, &c.w);
    float *r = rand_range(n, 23, -1.0f, 1.0f, &c.r), *dx = malloc(sizeof(float) * (size_t)n);
    assert_non_null(dx);
    pt_tensor tx = put(be, rows, ch, x), tw = put(be, ch, d.conv, w), tr = put(be, rows, ch, r), td = put(be, rows, ch, NULL);
    assert_int_equal(backend_conv1d_silu_bwd(be, &td, &tr, &tx, &tw, &d), PT_OK);
    assert_int_equal(backend_download(be, &td, dx, td.nbytes), PT_OK);
    double *fd = fd_grad(conv_loss, &c, c.x, n, 1);
    check(name, dx, fd, n, GRAD_TOL);
    pt_tensor *all[] = {&tx, &tw, &tr, &td};
    for (size_t i = 0; i < 4; i++) backend_release(be, all[i]);
    backend_close(be);
    void *fr[] = {x, w, r, dx, c.x, c.w, c.r, fd};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

static void test_conv_fd(void **state)
{
    (void)state;
    int32_t seg[2 * 19];
    for (int i = 0; i < 2 * 19; i++) seg[i] = 3 * (i / 19) + (i % 19 >= 2) + (i % 19 >= 9); /* examples of 2, 7, 10 */
    pt_delta d = {.batch = 2, .seq = 19, .k_heads = 1, .v_heads = 1, .k_dim = 1, .v_dim = 1, .conv = 4};
    conv_case("conv1d_silu_bwd dx", d, 10);
    d.segments = seg;
    conv_case("conv1d_silu_bwd dx, packed", d, 10);
}

typedef struct {
    int64_t rows, h;
    double *b, *a, *alog, *dt, *rb, *rg, *y, *gate, *ry;
} gate_ctx;

static double gates_loss(void *p)
{
    gate_ctx *c = p;
    double sum = 0;
    for (int64_t i = 0; i < c->rows * c->h; i++) {
        double z = c->a[i] + c->dt[i % c->h], sp = z > 20 ? z : log1p(exp(z));
        sum += c->rb[i] / (1.0 + exp(-c->b[i])) - c->rg[i] * exp(c->alog[i % c->h]) * sp;
    }
    return sum;
}

static double sigmul_loss(void *p)
{
    gate_ctx *c = p;
    double sum = 0;
    for (int64_t i = 0; i < c->rows * c->h; i++) sum += c->ry[i] * c->y[i] / (1.0 + exp(-c->gate[i]));
    return sum;
}

static void test_gates_fd(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    gate_ctx c = {.rows = 9, .h = 6};
    int64_t n = c.rows * c.h;
    float *b = rand_range(n, 31, -4, 4, &c.b), *a = rand_range(n, 32, -30, 30, &c.a);
    float *al = rand_range(c.h, 33, -1, 2, &c.alog), *dt = rand_range(c.h, 34, -1, 1, &c.dt);
    float *rb = rand_range(n, 35, -1, 1, &c.rb), *rg = rand_range(n, 36, -1, 1, &c.rg);
    float *y = rand_range(n, 37, -2, 2, &c.y), *gate = rand_range(n, 38, -6, 6, &c.gate);
    float *ry = rand_range(n, 39, -1, 1, &c.ry), *out = malloc(sizeof(float) * (size_t)n * 2);
    assert_non_null(out);
    pt_tensor tb = put(be, c.rows, c.h, b), ta = put(be, c.rows, c.h, a), tal = put(be, 1, c.h, al);
    pt_tensor tdt = put(be, 1, c.h, dt), trb = put(be, c.rows, c.h, rb), trg = put(be, c.rows, c.h, rg);
    pt_tensor tdb = put(be, c.rows, c.h, NULL), tda = put(be, c.rows, c.h, NULL);
    tal.ndim = tdt.ndim = 1, tal.shape[0] = tdt.shape[0] = c.h;
    assert_int_equal(backend_delta_gates_bwd(be, &tdb, &tda, &trb, &trg, &tb, &ta, &tal, &tdt), PT_OK);
    assert_int_equal(backend_download(be, &tdb, out, tdb.nbytes), PT_OK);
    assert_int_equal(backend_download(be, &tda, out + n, tda.nbytes), PT_OK);
    double *fb = fd_grad(gates_loss, &c, c.b, n, 1), *fa = fd_grad(gates_loss, &c, c.a, n, 1);
    check("delta_gates_bwd db", out, fb, n, GRAD_TOL);
    check("delta_gates_bwd da", out + n, fa, n, GRAD_TOL);
    /* sigmoid_mul: y is the forward's output y0 sigmoid(gate); the gradient at y0 and at gate */
    pt_tensor ty = put(be, c.rows, c.h, y), tg = put(be, c.rows, c.h, gate), tr = put(be, c.rows, c.h, ry);
    pt_tensor tdx = put(be, c.rows, c.h, NULL), tdg = put(be, c.rows, c.h, NULL);
    assert_int_equal(backend_sigmoid_mul(be, &ty, &tg), PT_OK);
    assert_int_equal(backend_sigmoid_mul_bwd(be, &tdx, &tdg, &tr, &ty, &tg), PT_OK);
    assert_int_equal(backend_download(be, &tdx, out, tdx.nbytes), PT_OK);
    assert_int_equal(backend_download(be, &tdg, out + n, tdg.nbytes), PT_OK);
    double *fy = fd_grad(sigmul_loss, &c, c.y, n, 1), *fgt = fd_grad(sigmul_loss, &c, c.gate, n, 1);
    check("sigmoid_mul_bwd dx", out, fy, n, GRAD_TOL);
    check("sigmoid_mul_bwd dgate", out + n, fgt, n, GRAD_TOL);
    pt_tensor *all[] = {&tb, &ta, &tal, &tdt, &trb, &trg, &tdb, &tda, &ty, &tg, &tr, &tdx, &tdg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) backend_release(be, all[i]);
    backend_close(be);
    void *fr[] = {b, a, al, dt, rb, rg, y, gate, ry, out, c.b, c.a, c.alog, c.dt, c.rb, c.rg, c.y, c.gate, c.ry,
                  fb, fa, fy, fgt};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delta_rule_fd),
        cmocka_unit_test(test_delta_rule_torch),
        cmocka_unit_test(test_delta_chunk_state),
        cmocka_unit_test(test_conv_fd),
        cmocka_unit_test(test_gates_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
