/* optim.c — the CPU optimizer ops: one AdamW update, and the sum of squares and scaling that
 * gradient-norm clipping is built from (backend_clip_grad_norm). AdamW follows torch.optim.AdamW
 * (torch's single-tensor path, _single_tensor_adam with decoupled weight decay) operation by
 * operation, with its scalars computed in double as Python does and rounded to fp32 where torch
 * hands them to an fp32 kernel:
 *   p = p * (1 - lr wd);  m = m + (1 - b1)(g - m);  v = v b2 + ((1 - b2) g) g;
 *   p = p + (-lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * The m and v updates are fused multiply-adds, as in torch's vectorized CPU kernels (lerp's
 * vec::fmadd; addcmul contracted), so the moments come out bit for bit like torch's on every
 * element torch handles in vector registers (its scalar tail rounds twice; 1 ulp apart). */
#include <math.h>

#include "cpu.h"

/* torch's lerp(self, end, weight): its formula for weights below 0.5 and the mirrored one above */
static inline float adamw_lerp(float self, float end, float weight)
{
    return weight < 0.5f ? fmaf(weight, end - self, self) : fmaf(weight - 1.0f, end - self, end);
}

pt_status cpu_adamw_step(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m, pt_tensor *v,
                         const pt_adamw *hp)
{
    (void)be;
    pt_adamw_scalars s = adamw_scalars(hp);
    int64_t n = tensor_numel(param);
    float *p = param->data, *ms = m->data, *vs = v->data;
    const float *g = grad->data;
    int decay = hp->weight_decay != 0;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float pi = decay ? p[i] * s.decay : p[i], gi = g[i];
        float mi = adamw_lerp(ms[i], gi, s.w1);
        float vi = fmaf(s.w2 * gi, gi, vs[i] * s.b2);
        float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
        p[i] = pi + s.neg_step * mi / denom;
        ms[i] = mi;
        vs[i] = vi;
    }
    return PT_OK;
}

pt_status cpu_sum_squares(pt_backend *be, const pt_tensor *t, double *acc)
{
    (void)be;
    int64_t n = tensor_numel(t);
    const float *x = t->data;
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
    *acc += sum;
    return PT_OK;
}

pt_status cpu_scale(pt_backend *be, pt_tensor *t, float s)
{
    (void)be;
    int64_t n = tensor_numel(t);
    float *x = t->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return PT_OK;
}
