/* gdn_chunk.h — the pieces of the chunked (WY) gated delta rule that its forward (gdn_chunk.c) and backward
 * (gdn_chunk_bwd.c) share. A chunk is up to PT_DELTA_CHUNK tokens of one sequence and value head, starting on a
 * multiple of PT_DELTA_CHUNK; with S0 the state before it and G_i the sum of g over the chunk's tokens up to i:
 *   A_ij = beta_i exp(G_i - G_j) k_i.k_j (j < i), (I + A) U = R, R_i = beta_i (v_i - exp(G_i) S0^T k_i),
 *   o_i = exp(G_i) S0^T q_i + sum_{j <= i} exp(G_i - G_j) (q_i.k_j) u_j,
 *   S = exp(G_last) S0 + sum_j exp(G_last - G_j) k_j u_j^T,
 * the same sums as the recurrence S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - exp(g_t) S_{t-1}^T k_t))^T unrolled
 * over the chunk (u_t is beta_t times the recurrence's v_t - exp(g_t) S_{t-1}^T k_t). A packed example starting
 * inside the chunk cuts every pair (i, j) of different examples (lo[i]: the first token of i's example in the
 * chunk), and S0 reaches only the tokens before the first such start. */
#ifndef PTRAIN_CPU_GDN_CHUNK_H
#define PTRAIN_CPU_GDN_CHUNK_H

#include "cpu.h"

typedef struct {
    const pt_delta *d;
    int dk, dv, nv, rep;
    int64_t kw, width, ow;
    float qscale;
    const float *x, *beta, *g; /* qkv [rows, width], beta and g [rows, v_heads] */
} chunk_src;

/* One chunk of one value head, loaded and solved (C = PT_DELTA_CHUNK; n the chunk's tokens) */
typedef struct {
    int b, h, t0, n;
    bool fresh;                    /* S0 is zero: the chunk starts an example (or the pass, without a state) */
    int lo[PT_DELTA_CHUNK];        /* the first token of token i's example within the chunk */
    float beta[PT_DELTA_CHUNK], G[PT_DELTA_CHUNK];
    float eg[PT_DELTA_CHUNK];      /* exp(G_i) where S0 reaches token i, else 0 */
    float gam[PT_DELTA_CHUNK];     /* exp(G_last - G_j) where token j is in the last example, else 0 */
    float c;                       /* exp(G_last) where S0 reaches the end, else 0 */
    float *hk;                     /* [2n, dk]: the normalised (and for q scaled) q rows, then the k rows */
    float *v;                      /* [n, dv] */
    float *gram;                   /* [2n, n]: q_i.k_j, then k_i.k_j */
    float *hs;                     /* [2n, dv]: S0^T q_i, then S0^T k_i */
    float *a, *p;                  /* [n, n]: A (strictly lower) and exp(G_i - G_j) q_i.k_j (lower), cut as said */
    float *u;                      /* [n, dv] */
    float *w;                      /* [2n, max(dk, dv)] scratch */
} chunk_buf;

void chunk_src_init(chunk_src *s, const pt_delta *d, const float *x, const float *beta, const float *g);
/* The floats chunk_bind takes (per thread) */
size_t chunk_buf_floats(const pt_delta *d);
void chunk_bind(chunk_buf *c, float *mem, const pt_delta *d);
/* Loads chunk t0 of sequence b, value head h; has_state: a state given before t0 == 0 (not fresh then) */
void chunk_load(const chunk_src *s, chunk_buf *c, int b, int h, int t0, bool has_state);
/* gram, a, p, hs and u from the loaded chunk and S0 (zero when fresh) */
void chunk_solve(const chunk_src *s, chunk_buf *c, const float *s0);
/* S = c S + sum_j gam_j k_j u_j^T: the state after the chunk (S holds S0 on entry) */
void chunk_advance(const chunk_src *s, chunk_buf *c, float *S);

#endif
