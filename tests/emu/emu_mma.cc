/* emu_mma.cc — the tensor-core primitives of cuda/mma.h (mma.sync m16n8k16 bf16, ldmatrix, cp.async)
 * on the CPU SIMT emulator (emu.cc), written from the PTX ISA's own definitions, not from the
 * kernels that use them, so that a kernel built on a misreading of a fragment layout fails here as
 * it would on a GPU. tests/unit/test_cuda_mma.cu checks these against plain loops, and the same
 * test on a GPU checks them against the hardware.
 *
 * mma and ldmatrix are warp collectives (emu_warp_vector): each lane waits with its registers
 * until all 32 have arrived; then the whole matrices are gathered from the lanes' registers and
 * the result scattered back, each by the section's per-lane formula.
 *
 * cp.async is per thread, as in PTX: a copy is recorded, not done; cp.async.commit_group closes the
 * thread's uncommitted copies into a group (an empty one too), and cp.async.wait_group N performs
 * every copy of the thread's groups but its N most recent. So a kernel that reads shared memory
 * before the wait that completes the copy reads the emulator's NaN poison (or the tile before),
 * and an ldmatrix of 16 bytes a cp.async of any thread of the block still has pending is reported.
 * Copies pending when a thread ends are dropped. Only dynamic shared memory may be a destination. */
#include <stdint.h>
#include <string.h>

#include <vector>

#include "cuda_bf16.h"
#include "emu_internal.h"

/* ---- mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ---- */

/* PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": groupID = %laneid >> 2,
 * threadID_in_group = %laneid % 4. */
static int group_id(int lane) { return lane >> 2; }
static int thread_in_group(int lane) { return lane % 4; }

/* Multiplicand A (.bf16, a0..a7 in four .b32 registers, two elements each, low half first):
 * row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise;
 * col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4, ... + 8 for ai where i >= 4. */
static int a_row(int lane, int i) { return (i < 2 || (i >= 4 && i < 6)) ? group_id(lane) : group_id(lane) + 8; }
static int a_col(int lane, int i) { return thread_in_group(lane) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
/* Multiplicand B (.bf16, b0..b3 in two registers): row = (threadID_in_group * 2) + (i & 0x1) for
 * bi where i < 2, ... + 8 for bi where i >= 2; col = groupID. */
static int b_row(int lane, int i) { return thread_in_group(lane) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
static int b_col(int lane, int i) { (void)i; return group_id(lane); }
/* Accumulators C, D (.f32, c0..c3): row = groupID for ci where i < 2, groupID + 8 for ci where
 * i >= 2; col = (threadID_in_group * 2) + (i & 0x1). */
static int c_row(int lane, int i) { return i < 2 ? group_id(lane) : group_id(lane) + 8; }
static int c_col(int lane, int i) { return thread_in_group(lane) * 2 + (i & 1); }

/* element i of a fragment whose registers each hold two 16-bit elements, the lower-numbered in
 * the low half ("Elements (low to high)") */
static float bf16_element(const uint32_t *regs, int i)
{
    __nv_bfloat16 b;
    b.x = (uint16_t)(regs[i / 2] >> (16 * (i & 1)));
    return __bfloat162float(b);
}

/* A lane's operands as cuda/mma.h passes them: a[4], b[2] (bf16 pairs), acc[4] (in and out). */
struct mma_lane {
    uint32_t a[4], b[2];
    float acc[4];
};

/* D = A B + C. bf16 products are exact in double; the 16 of a dot product and C are summed in
 * double and rounded once to fp32 (the hardware's accumulation order and intermediate rounding
 * are not specified by the PTX ISA; this is the exactly rounded result). */
void emu_mma_resolve(const void *const in[32], void *const out[32], int param)
{
    (void)param;
    float a[16][16], b[16][8], c[16][8];
    int seen_a[16][16] = {{0}}, seen_b[16][8] = {{0}}, seen_c[16][8] = {{0}};
    for (int l = 0; l < 32; l++) {
        const mma_lane *x = (const mma_lane *)in[l];
        for (int i = 0; i < 8; i++) {
            a[a_row(l, i)][a_col(l, i)] = bf16_element(x->a, i);
            seen_a[a_row(l, i)][a_col(l, i)]++;
        }
        for (int i = 0; i < 4; i++) {
            b[b_row(l, i)][b_col(l, i)] = bf16_element(x->b, i);
            seen_b[b_row(l, i)][b_col(l, i)]++;
            c[c_row(l, i)][c_col(l, i)] = x->acc[i];
            seen_c[c_row(l, i)][c_col(l, i)]++;
        }
    }
    for (int r = 0; r < 16; r++) /* the formulas cover each element exactly once */
        for (int k = 0; k < 16; k++)
            if (seen_a[r][k] != 1 || (k < 8 && (seen_b[r][k] != 1 || seen_c[r][k] != 1))) {
                emu_fail(cudaErrorLaunchFailure, "emulator bug: the mma fragment formulas miss (%d,%d)", r, k);
                return;
            }
    for (int l = 0; l < 32; l++) {
        mma_lane *y = (mma_lane *)out[l];
        for (int i = 0; i < 4; i++) {
            int r = c_row(l, i), n = c_col(l, i);
            double s = c[r][n];
            for (int k = 0; k < 16; k++) s += (double)a[r][k] * b[k][n];
            y->acc[i] = (float)s;
        }
    }
}

void emu_mma_bf16_16816(float acc[4], const uint32_t a[4], const uint32_t b[2])
{
    mma_lane x;
    memcpy(x.a, a, sizeof x.a);
    memcpy(x.b, b, sizeof x.b);
    memcpy(x.acc, acc, sizeof x.acc);
    emu_warp_vector(EMU_OP_MMA, 0, &x, &x); /* every lane's operands are read before any is written */
    memcpy(acc, x.acc, sizeof x.acc);
}

/* ---- cp.async.cg.shared.global (16 bytes), commit_group, wait_group ---- */

struct async_copy {
    char *dst;
    const char *src;
    int src_bytes, group; /* group -1: not committed yet */
};

/* Per thread of the running block (reset when another block starts): its copies not yet done and
 * its count of committed groups; and per 16 bytes of dynamic shared memory, copies pending there. */
static struct {
    std::vector<async_copy> copies;
    int groups;
    uint64_t serial;
} threads[1024];
static std::vector<unsigned> pending_at;
static uint64_t pending_serial;

static void async_state_for_block(void)
{
    if (pending_serial == emu_block_serial()) return;
    pending_serial = emu_block_serial();
    size_t bytes;
    emu_dyn_smem(&bytes);
    pending_at.assign(bytes / 16 + 1, 0);
}

static void async_thread_fresh(int t)
{
    if (threads[t].serial == emu_block_serial()) return;
    threads[t].serial = emu_block_serial();
    threads[t].copies.clear();
    threads[t].groups = 0;
}

void emu_cp_async_16(void *dst, const void *src, int src_bytes)
{
    size_t bytes;
    char *smem = emu_dyn_smem(&bytes);
    if (!emu_in_kernel() || (uintptr_t)dst % 16 || (uintptr_t)src % 16 || src_bytes < 0 || src_bytes > 16 ||
        (char *)dst < smem || (char *)dst + 16 > smem + bytes || emu_in_shared(src, 1)) {
        emu_fail(cudaErrorLaunchFailure, "cp.async: dst %p (16-byte aligned dynamic shared memory), src %p (16-byte "
                 "aligned global), src-size %d (0..16)", dst, src, src_bytes);
        return;
    }
    async_state_for_block();
    int t = emu_thread();
    async_thread_fresh(t);
    threads[t].copies.push_back(async_copy{(char *)dst, (const char *)src, src_bytes, -1});
    pending_at[((char *)dst - smem) / 16]++;
}

void emu_cp_async_commit(void)
{
    int t = emu_thread();
    async_thread_fresh(t);
    for (async_copy &c : threads[t].copies)
        if (c.group < 0) c.group = threads[t].groups;
    threads[t].groups++;
}

/* PTX ISA, "cp.async.wait_group": wait till only N or fewer of the most recent cp.async-groups
 * are pending and all the prior cp.async-groups committed by the executing thread are complete.
 * Uncommitted copies belong to no group and stay pending. */
void emu_cp_async_wait(int n)
{
    int t = emu_thread();
    async_thread_fresh(t);
    async_state_for_block();
    size_t bytes;
    char *smem = emu_dyn_smem(&bytes);
    std::vector<async_copy> &v = threads[t].copies;
    size_t keep = 0;
    for (size_t i = 0; i < v.size(); i++) {
        async_copy c = v[i];
        if (c.group < 0 || c.group >= threads[t].groups - n) {
            v[keep++] = c;
            continue;
        }
        memcpy(c.dst, c.src, (size_t)c.src_bytes); /* src-size bytes, then zeros up to cp-size */
        memset(c.dst + c.src_bytes, 0, (size_t)(16 - c.src_bytes));
        pending_at[(c.dst - smem) / 16]--;
    }
    v.resize(keep);
}

/* ---- ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 ---- */

/* PTX ISA, "Warp-level matrix load instruction: ldmatrix": for .xN, threads 8m .. 8m+7 give the
 * addresses of rows 0..7 of matrix m (addr0-addr7 the first matrix, addr8-addr15 the second, ...),
 * each the 16-byte aligned start of a row of eight 16-bit elements; the other lanes' addresses are
 * not used. Each thread receives in its register m a fragment of matrix m: "a group of four
 * threads loads an entire row", thread l getting the elements (row l / 4, columns 2 (l % 4) and
 * 2 (l % 4) + 1), the first in the low half (Figure "ldmatrix fragment layout for one 8x8 Matrix
 * with 16-bit elements"). With .trans the matrix is loaded in column-major format: thread l gets
 * (rows 2 (l % 4) and 2 (l % 4) + 1, column l / 4). param: N | .trans << 3. */
void emu_ldmatrix_resolve(const void *const in[32], void *const out[32], int param)
{
    int num = param & 7;
    bool trans = param >> 3;
    size_t bytes;
    char *smem = emu_dyn_smem(&bytes);
    const uint16_t *rows[4][8];
    for (int m = 0; m < num; m++)
        for (int r = 0; r < 8; r++) {
            const char *p = *(const char *const *)in[8 * m + r];
            if ((uintptr_t)p % 16 || !emu_in_shared(p, 16)) {
                emu_fail(cudaErrorLaunchFailure, "ldmatrix: lane %d's row address %p is not 16-byte aligned shared "
                         "memory", 8 * m + r, (const void *)p);
                return;
            }
            if (p >= smem && p < smem + bytes && pending_serial == emu_block_serial() && pending_at[(p - smem) / 16]) {
                emu_fail(cudaErrorLaunchFailure, "ldmatrix: lane %d reads shared memory at offset %td that a cp.async "
                         "has not completed (a missing cp.async.wait_group or __syncthreads)", 8 * m + r, p - smem);
                return;
            }
            rows[m][r] = (const uint16_t *)p;
        }
    for (int l = 0; l < 32; l++) {
        uint32_t *reg = (uint32_t *)out[l];
        for (int m = 0; m < num; m++) {
            reg[m] = 0;
            for (int h = 0; h < 2; h++) {
                int row = trans ? 2 * (l % 4) + h : l / 4, col = trans ? l / 4 : 2 * (l % 4) + h;
                reg[m] |= (uint32_t)rows[m][row][col] << (16 * h);
            }
        }
    }
}

void emu_ldmatrix(uint32_t *r, int num, bool trans, const void *row)
{
    uint32_t got[4] = {0, 0, 0, 0};
    emu_warp_vector(EMU_OP_LDMATRIX, num | (trans ? 8 : 0), &row, got);
    memcpy(r, got, sizeof(uint32_t) * (size_t)num);
}
