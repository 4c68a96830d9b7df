/* test_cuda_mma.cu — the tensor-core primitives of cuda/mma.h alone, against plain loops: the
 * fragments are built and read back on the host by the PTX ISA's per-lane formulas (transcribed
 * here on their own, not shared with the emulator or the kernels), and
 *   - mma_bf16_16816 gives D = A B + C for known matrices (exactly, on small integers);
 *   - ldmatrix .x1/.x2/.x4, with and without .trans, hands each lane the elements the ldmatrix
 *     section says, the row addresses coming from the lanes it says (rows scattered in memory);
 *   - cp_async_16 copies 16 bytes, zero-fills past src-size, and cp_async_wait<N> completes all
 *     groups but the N most recent (an empty group counts);
 *   - pack_bf16x2 puts its first value in the low half, rounded to nearest even;
 *   - ldmatrix + mma compose as the attention kernels use them (A row-major, B from the rows of
 *     K^T's transpose and, with .trans, from the rows of V) into the product of the loops.
 * Built twice: by nvcc for a GPU (tests/gpu/run.sh runs it; it skips without one), where it checks
 * the PTX formulas against the hardware, and through tests/emu/rewrite.sed for the CPU emulator
 * (tests/emu/test_cuda_mma_emu, in CI), where it checks tests/emu/emu_mma.cc. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "../tap.h"
#include "mma.h"

/* ---- the PTX ISA's formulas ("Matrix Fragments for mma.m16n8k16 with floating point type") ---- */

#define HD __host__ __device__ static inline
HD int gid(int lane) { return lane >> 2; } /* groupID */
HD int tig(int lane) { return lane % 4; }  /* threadID_in_group */
HD int frag_a_row(int l, int i) { return (i < 2 || (i >= 4 && i < 6)) ? gid(l) : gid(l) + 8; }
HD int frag_a_col(int l, int i) { return tig(l) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
HD int frag_b_row(int l, int i) { return tig(l) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
HD int frag_b_col(int l) { return gid(l); }
HD int frag_c_row(int l, int i) { return i < 2 ? gid(l) : gid(l) + 8; }
HD int frag_c_col(int l, int i) { return tig(l) * 2 + (i & 1); }

/* bf16 bits of a float that bf16 holds exactly (the test's values all are) */
static uint16_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (u & 0xffff) {
        fprintf(stderr, "test bug: %g is not a bf16 value\n", (double)f);
        exit(1);
    }
    return (uint16_t)(u >> 16);
}

static float bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- device side ---- */

/* One warp: acc = A B + C from per-lane registers a[32][4], b[32][2], c[32][4]; d[32][4] out. */
__global__ static void mma_kernel(float *d, const uint32_t *a, const uint32_t *b, const float *c)
{
    int l = threadIdx.x;
    uint32_t ra[4], rb[2];
    float acc[4];
    for (int i = 0; i < 4; i++) ra[i] = a[l * 4 + i], acc[i] = c[l * 4 + i];
    for (int i = 0; i < 2; i++) rb[i] = b[l * 2 + i];
    mma_bf16_16816(acc, ra, rb);
    for (int i = 0; i < 4; i++) d[l * 4 + i] = acc[i];
}

/* One warp: src (32 rows of 8 bf16) to shared memory, row s at row slot s; lane l addresses the
 * row slot row_of[l]; variant: 0..2 x1/x2/x4, 3..5 the same with .trans. out[32][4]. */
__global__ static void ldmatrix_kernel(uint32_t *out, const uint16_t *src, const int *row_of, int variant)
{
    extern __shared__ float4 smem4[];
    uint16_t *rows = (uint16_t *)smem4;
    int l = threadIdx.x;
    for (int i = l; i < 32 * 8; i += 32) rows[i] = src[i];
    __syncthreads();
    uint32_t r[4] = {0, 0, 0, 0};
    const uint16_t *row = rows + 8 * row_of[l];
    switch (variant) {
    case 0: ldmatrix_x1(r, row); break;
    case 1: ldmatrix_x2(r, row); break;
    case 2: ldmatrix_x4(r, row); break;
    case 3: ldmatrix_x1_trans(r, row); break;
    case 4: ldmatrix_x2_trans(r, row); break;
    default: ldmatrix_x4_trans(r, row); break;
    }
    for (int i = 0; i < 4; i++) out[l * 4 + i] = r[i];
}

/* One warp, each lane on its own 16-byte slots: copy 0 (16 bytes) in group 0, copy 1 (the first
 * 5 + lane % 11 bytes) in group 1, an empty group 2, then wait_group 1 (groups 0 and 1 done) and
 * snapshot; copy 2 with src-size 0 in group 3, wait_group 0, snapshot. out[lane][5][16]:
 * slots 0, 1 after the first wait, slots 0, 1, 2 after the second; seen_early[lane]: slot 0 before
 * any wait still held the kernel's own 0x5a bytes (only meaningful on the emulator). */
__global__ static void cp_async_kernel(uint8_t *out, int *seen_early, const uint8_t *src)
{
    extern __shared__ float4 smem4[];
    uint8_t *slot = (uint8_t *)smem4 + threadIdx.x * 48;
    int l = threadIdx.x;
    for (int i = 0; i < 48; i++) slot[i] = 0x5a;
    cp_async_16(slot, src + l * 48, 16);
    cp_async_commit();
    seen_early[l] = slot[0] == 0x5a && slot[15] == 0x5a;
    cp_async_16(slot + 16, src + l * 48 + 16, 5 + l % 11);
    cp_async_commit();
    cp_async_commit();
    cp_async_wait<1>();
    for (int i = 0; i < 32; i++) out[l * 80 + i] = slot[i];
    cp_async_16(slot + 32, src + l * 48 + 32, 0);
    cp_async_commit();
    cp_async_wait<0>();
    for (int i = 0; i < 48; i++) out[l * 80 + 32 + i] = slot[i];
}

__global__ static void pack_kernel(uint32_t *out, const float *lo, const float *hi)
{
    int l = threadIdx.x;
    out[l] = pack_bf16x2(lo[l], hi[l]);
}

/* One warp: a (16x16, row-major), kt (8 rows n x 16 k: B's transpose, as K[key][d]) and vb
 * (16 rows k x 8 n: B itself, as V[key][d]) to shared memory (rows padded to 24 bf16, 48 bytes:
 * 16-byte aligned); d1 = A Kt^T, d2 = A Vb, each from ldmatrix and one mma, as [16][8] floats. */
__global__ static void gemm_kernel(float *d1, float *d2, const uint16_t *a, const uint16_t *kt, const uint16_t *vb)
{
    extern __shared__ float4 smem4[];
    enum { LD = 24 };
    uint16_t *sa = (uint16_t *)smem4, *sk = sa + 16 * LD, *sv = sk + 8 * LD;
    int l = threadIdx.x;
    for (int i = l; i < 16 * 16; i += 32) sa[(i / 16) * LD + i % 16] = a[i], sv[(i / 8) * LD + i % 8] = vb[i];
    for (int i = l; i < 8 * 16; i += 32) sk[(i / 16) * LD + i % 16] = kt[i];
    __syncthreads();
    uint32_t ra[4], rb[2];
    ldmatrix_x4(ra, sa + (l % 16) * LD + (l / 16) * 8);
    ldmatrix_x2(rb, sk + (l % 8) * LD + ((l / 8) % 2) * 8);
    float acc[4] = {0, 0, 0, 0};
    mma_bf16_16816(acc, ra, rb);
    for (int i = 0; i < 4; i++) d1[frag_c_row(l, i) * 8 + frag_c_col(l, i)] = acc[i];
    ldmatrix_x2_trans(rb, sv + (l % 16) * LD);
    float acc2[4] = {0, 0, 0, 0};
    mma_bf16_16816(acc2, ra, rb);
    for (int i = 0; i < 4; i++) d2[frag_c_row(l, i) * 8 + frag_c_col(l, i)] = acc2[i];
}

/* ---- host side ---- */

static bool cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return true;
    printf("# %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

static void *dev_copy(const void *host, size_t n)
{
    void *d = NULL;
    if (!cuda_ok(cudaMalloc(&d, n), "cudaMalloc")) exit(1);
    if (host) cuda_ok(cudaMemcpyAsync(d, host, n, cudaMemcpyHostToDevice, 0), "upload");
    return d;
}

/* The launch's errors, then the result to the host; false on any error. */
static bool fetch(void *host, const void *dev, size_t n)
{
    return cuda_ok(cudaGetLastError(), "launch") && cuda_ok(cudaStreamSynchronize(0), "kernel") &&
           cuda_ok(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, 0), "download") &&
           cuda_ok(cudaStreamSynchronize(0), "download");
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static int rand_int(int lo, int hi) /* uniform in [lo, hi] */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int)(rng % (uint64_t)(hi - lo + 1));
}

/* A (16x16), B (16x8), C (16x8): integers in [-8, 8] (C in [-64, 64]), or with frac, multiples
 * of 1/64 in [-2, 2] (still exact in bf16; the products and sums then round in fp32). */
static void random_problem(float A[16][16], float B[16][8], float C[16][8], bool frac)
{
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) A[r][k] = frac ? rand_int(-128, 128) / 64.0f : (float)rand_int(-8, 8);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) B[k][n] = frac ? rand_int(-128, 128) / 64.0f : (float)rand_int(-8, 8);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) C[r][n] = frac ? rand_int(-256, 256) / 64.0f : (float)rand_int(-64, 64);
}

static void check_mma(bool frac)
{
    float A[16][16], B[16][8], C[16][8];
    random_problem(A, B, C, frac);
    uint32_t a[32][4] = {{0}}, b[32][2] = {{0}};
    float c[32][4], d[32][4];
    for (int l = 0; l < 32; l++) {
        for (int i = 0; i < 8; i++)
            a[l][i / 2] |= (uint32_t)bf16_bits(A[frag_a_row(l, i)][frag_a_col(l, i)]) << (16 * (i & 1));
        for (int i = 0; i < 4; i++)
            b[l][i / 2] |= (uint32_t)bf16_bits(B[frag_b_row(l, i)][frag_b_col(l)]) << (16 * (i & 1));
        for (int i = 0; i < 4; i++) c[l][i] = C[frag_c_row(l, i)][frag_c_col(l, i)];
    }
    float *dd = (float *)dev_copy(NULL, sizeof d);
    void *da = dev_copy(a, sizeof a), *db = dev_copy(b, sizeof b), *dc = dev_copy(c, sizeof c);
    mma_kernel<<<1, 32, 0, 0>>>(dd, (const uint32_t *)da, (const uint32_t *)db, (const float *)dc);
    bool ran = fetch(d, dd, sizeof d);
    double worst = 0;
    for (int l = 0; l < 32 && ran; l++)
        for (int i = 0; i < 4; i++) {
            int r = frag_c_row(l, i), n = frag_c_col(l, i);
            double ref = C[r][n], mag = fabs(C[r][n]);
            for (int k = 0; k < 16; k++) ref += (double)A[r][k] * B[k][n], mag += fabs((double)A[r][k] * B[k][n]);
            worst = fmax(worst, fabs(d[l][i] - ref) / (mag > 0 ? mag : 1));
        }
    double tol = frac ? 1e-6 : 0; /* integers: exact; fractions: fp32 accumulation of the exact products */
    TAP_OK(ran && worst <= tol, "mma m16n8k16 bf16 (%s): D = A B + C, worst error %.2e of the sum of |terms| (<= %g)",
           frac ? "fractions" : "integers", worst, tol);
    cudaFree(dd), cudaFree(da), cudaFree(db), cudaFree(dc);
}

/* What lane l's register m half h must hold: the element of matrix m the ldmatrix section gives. */
static uint16_t ldmatrix_expect(const uint16_t *rows, const int *row_of, int l, int m, int h, bool trans)
{
    int r = trans ? 2 * (l % 4) + h : l / 4, c = trans ? l / 4 : 2 * (l % 4) + h;
    return rows[8 * row_of[8 * m + r] + c]; /* matrix m's row r starts where lane 8m + r points */
}

static void check_ldmatrix(int variant)
{
    static const int nums[3] = {1, 2, 4};
    int num = nums[variant % 3];
    bool trans = variant >= 3;
    uint16_t rows[32 * 8];
    int row_of[32];
    for (int i = 0; i < 32 * 8; i++) rows[i] = (uint16_t)(0x1000 + i);
    for (int l = 0; l < 32; l++) row_of[l] = (l * 13 + 7) % 32; /* scattered, distinct rows */
    uint32_t out[32][4];
    void *dout = dev_copy(NULL, sizeof out), *drows = dev_copy(rows, sizeof rows);
    void *dof = dev_copy(row_of, sizeof row_of);
    ldmatrix_kernel<<<1, 32, 32 * 8 * sizeof(uint16_t), 0>>>((uint32_t *)dout, (const uint16_t *)drows,
                                                               (const int *)dof, variant);
    bool ran = fetch(out, dout, sizeof out);
    int bad = 0;
    for (int l = 0; l < 32 && ran; l++)
        for (int m = 0; m < num; m++)
            for (int h = 0; h < 2; h++)
                bad += (uint16_t)(out[l][m] >> (16 * h)) != ldmatrix_expect(rows, row_of, l, m, h, trans);
    TAP_OK(ran && bad == 0, "ldmatrix m8n8.x%d%s.b16: every lane's elements as the PTX ISA lays them out (%d wrong)",
           num, trans ? ".trans" : "", bad);
    cudaFree(dout), cudaFree(drows), cudaFree(dof);
}

static void check_cp_async(void)
{
    uint8_t src[32 * 48], out[32][80];
    int early[32];
    for (int i = 0; i < (int)sizeof src; i++) src[i] = (uint8_t)(i * 7 + 1);
    void *dsrc = dev_copy(src, sizeof src), *dout = dev_copy(NULL, sizeof out), *dearly = dev_copy(NULL, sizeof early);
    cp_async_kernel<<<1, 32, 32 * 48, 0>>>((uint8_t *)dout, (int *)dearly, (const uint8_t *)dsrc);
    bool ran = fetch(out, dout, sizeof out) && fetch(early, dearly, sizeof early);
    int bad = 0, deferred = 0;
    for (int l = 0; l < 32 && ran; l++) {
        const uint8_t *s = src + l * 48;
        int part = 5 + l % 11;
        for (int i = 0; i < 16; i++) {
            uint8_t slot1 = i < part ? s[16 + i] : 0;
            bad += out[l][i] != s[i] || out[l][16 + i] != slot1; /* after wait_group 1 */
            bad += out[l][32 + i] != s[i] || out[l][48 + i] != slot1 || out[l][64 + i] != 0; /* after wait_group 0 */
        }
        deferred += early[l];
    }
    TAP_OK(ran && bad == 0, "cp.async 16 bytes, src-size zero fill, wait_group 1 and 0 over groups with an empty one "
           "(%d bytes wrong)", bad);
#ifdef PTRAIN_CUDA_EMU
    TAP_OK(ran && deferred == 32, "emulator: a cp.async is not visible before the wait_group that completes it "
           "(%d of 32 lanes)", deferred);
#else
    TAP_SKIP("on a GPU the copy may land at any time before the wait", "cp.async visibility before the wait");
#endif
    cudaFree(dsrc), cudaFree(dout), cudaFree(dearly);
}

static void check_pack(void)
{
    /* 1 + 2^-8 is halfway between 1 (0x3f80) and 1 + 2^-7 (0x3f81): to even, 0x3f80; 1 + 3 2^-8 is
     * halfway between 0x3f81 and 0x3f82: to even, 0x3f82; -2.5 is exact: 0xc020 */
    float lo[32], hi[32];
    uint32_t out[32];
    static const float vals[4] = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 0.0f};
    static const uint16_t bits[4] = {0x3f80, 0x3f82, 0xc020, 0x0000};
    for (int l = 0; l < 32; l++) lo[l] = vals[l % 4], hi[l] = vals[(l + 1) % 4];
    void *dout = dev_copy(NULL, sizeof out), *dlo = dev_copy(lo, sizeof lo), *dhi = dev_copy(hi, sizeof hi);
    pack_kernel<<<1, 32, 0, 0>>>((uint32_t *)dout, (const float *)dlo, (const float *)dhi);
    bool ran = fetch(out, dout, sizeof out);
    int bad = 0;
    for (int l = 0; l < 32 && ran; l++) bad += out[l] != ((uint32_t)bits[(l + 1) % 4] << 16 | bits[l % 4]);
    TAP_OK(ran && bad == 0, "pack_bf16x2: the first value in the low half, rounded to nearest even (%d wrong)", bad);
    cudaFree(dout), cudaFree(dlo), cudaFree(dhi);
}

static void check_gemm(void)
{
    float A[16][16], B[16][8], C[16][8];
    random_problem(A, B, C, false);
    uint16_t a[16 * 16], kt[8 * 16], vb[16 * 8];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) a[r * 16 + k] = bf16_bits(A[r][k]);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) kt[n * 16 + k] = vb[k * 8 + n] = bf16_bits(B[k][n]);
    float d1[16][8], d2[16][8];
    void *dd1 = dev_copy(NULL, sizeof d1), *dd2 = dev_copy(NULL, sizeof d2);
    void *da = dev_copy(a, sizeof a), *dk = dev_copy(kt, sizeof kt), *dv = dev_copy(vb, sizeof vb);
    gemm_kernel<<<1, 32, 40 * 24 * sizeof(uint16_t), 0>>>((float *)dd1, (float *)dd2, (const uint16_t *)da,
                                                          (const uint16_t *)dk, (const uint16_t *)dv);
    bool ran = fetch(d1, dd1, sizeof d1) && fetch(d2, dd2, sizeof d2);
    int bad1 = 0, bad2 = 0;
    for (int r = 0; r < 16 && ran; r++)
        for (int n = 0; n < 8; n++) {
            float ref = 0;
            for (int k = 0; k < 16; k++) ref += A[r][k] * B[k][n]; /* integers: exact */
            bad1 += d1[r][n] != ref;
            bad2 += d2[r][n] != ref;
        }
    TAP_OK(ran && bad1 == 0, "ldmatrix.x4 (A row-major) + ldmatrix.x2 (B from rows of its transpose) + mma: A B "
           "exactly (%d wrong)", bad1);
    TAP_OK(ran && bad2 == 0, "ldmatrix.x4 (A) + ldmatrix.x2.trans (B from its own rows) + mma: A B exactly (%d wrong)",
           bad2);
    (void)bf16_value;
    cudaFree(dd1), cudaFree(dd2), cudaFree(da), cudaFree(dk), cudaFree(dv);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("1..0 # SKIP no GPU is visible (tests/emu/test_cuda_mma_emu runs this on the CPU emulator)\n");
        return 0;
    }
    TAP_PLAN(13);
    check_mma(false);
    check_mma(true);
    for (int v = 0; v < 6; v++) check_ldmatrix(v);
    check_cp_async();
    check_pack();
    check_gemm();
    return tap_failed ? 1 : 0;
}
