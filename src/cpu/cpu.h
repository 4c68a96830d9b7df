/* cpu.h — the CPU backend's op functions, shared between its files. */
#ifndef PTRAIN_CPU_H
#define PTRAIN_CPU_H

#include "ptrain/backend.h"

pt_status cpu_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta);
pt_status cpu_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                               float beta);
pt_status cpu_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                float beta);

pt_status cpu_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids);
pt_status cpu_rmsnorm_fwd(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                          const pt_tensor *w, float eps);
pt_status cpu_rope_fwd(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, const int32_t *pos,
                       const float *inv_freq);
pt_status cpu_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, const int32_t *pos,
                       const float *inv_freq);
pt_status cpu_attention_fwd(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                            const pt_tensor *k, const pt_tensor *v, const pt_attention *a);
pt_status cpu_swiglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
pt_status cpu_add(pt_backend *be, pt_tensor *y, const pt_tensor *x);

#endif
