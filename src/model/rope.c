/* rope.c — rotary frequencies: theta^(-2i/d), then the config's scaling. Llama 3 (rope_type
 * "llama3"): with wavelength w = 2*pi/f and the original context L, frequencies of short
 * wavelength (w < L/high_freq_factor) stay, long ones (w > L/low_freq_factor) are divided by
 * factor, and those between are blended: s = (L/w - low)/(high - low), f' = (1-s) f/factor + s f.
 * Linear: every frequency divided by factor. Computed in double, stored as float. */
#include "ptrain/rope.h"

#include <math.h>

const char *rope_type_name(pt_rope_type t)
{
    return t == PT_ROPE_LINEAR ? "linear" : t == PT_ROPE_LLAMA3 ? "llama3" : t == PT_ROPE_LONGROPE ? "longrope"
                                                                                              : "default";
}

static double llama3(double f, const pt_rope_scaling *s)
{
    double wavelen = 2.0 * M_PI / f, L = s->original_max_position_embeddings;
    if (wavelen < L / s->high_freq_factor) return f;
    if (wavelen > L / s->low_freq_factor) return f / s->factor;
    double smooth = (L / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
    return (1.0 - smooth) * f / s->factor + smooth * f;
}

pt_status rope_inv_freq(double theta, int head_dim, const pt_rope_scaling *s, float *inv_freq)
{
    if (head_dim <= 0 || head_dim % 2 || !(theta > 1.0))
        return ERR(PT_ERR_USER, "rotary embedding: head size %d and rope_theta %g do not make frequencies "
                   "(head size must be even and positive, rope_theta above 1)", head_dim, theta);
    bool scaled = s && s->type != PT_ROPE_DEFAULT;
    if (scaled && s->type == PT_ROPE_LONGROPE) {
        if (s->n_factors != head_dim / 2)
            return ERR(PT_ERR_USER, "rope_scaling (longrope): short_factor has %d values; the %d rotated values of a "
                       "head need %d", s->n_factors, head_dim, head_dim / 2);
        for (int i = 0; i < head_dim / 2; i++) {
            if (!(s->short_factor[i] > 0) || isinf(s->short_factor[i]))
                return ERR(PT_ERR_USER, "rope_scaling (longrope): short_factor[%d] = %g must be a positive number", i,
                           s->short_factor[i]);
            inv_freq[i] = (float)(1.0 / ((double)s->short_factor[i] * pow(theta, 2.0 * i / head_dim)));
        }
        return PT_OK;
    }
    if (scaled && !(s->factor > 0))
        return ERR(PT_ERR_USER, "rope_scaling: factor %g must be positive", s->factor);
    if (scaled && s->type == PT_ROPE_LLAMA3 &&
        !(s->high_freq_factor > s->low_freq_factor && s->low_freq_factor > 0 && s->original_max_position_embeddings > 0))
        return ERR(PT_ERR_USER, "rope_scaling (llama3): needs high_freq_factor > low_freq_factor > 0 and "
                   "original_max_position_embeddings > 0, found %g, %g and %g", s->high_freq_factor,
                   s->low_freq_factor, s->original_max_position_embeddings);
    for (int i = 0; i < head_dim / 2; i++) {
        double f = pow(theta, -2.0 * i / head_dim);
        if (scaled) f = s->type == PT_ROPE_LINEAR ? f / s->factor : llama3(f, s);
        inv_freq[i] = (float)f;
    }
    return PT_OK;
}
