/* rope.c — rotary frequencies: theta^(-2i/d), then the config's scaling. Llama 3 (rope_type
 * "llama3"): with wavelength w = 2*pi/f and the original context L, frequencies of short
 * wavelength (w < L/high_freq_factor) stay, long ones (w > L/low_freq_factor) are divided by
 * factor, and those between are blended: s = (L/w - low)/(high - low), f' = (1-s) f/factor + s f.
 * Linear: every frequency divided by factor. YaRN (rope_type "yarn", transformers'
 * _compute_yarn_parameters): the pair index where a frequency turns beta rotations over the original
 * context, d ln(L / (2 pi beta)) / (2 ln theta), for beta_fast and beta_slow (rounded out unless
 * truncate is false, held to [0, d-1]) bounds a ramp r(i) from 0 to 1; f' = r f/factor + (1-r) f, so
 * fast frequencies stay and slow ones are interpolated. Computed in double, stored as float. */
#include "ptrain/rope.h"

#include <math.h>

const char *rope_type_name(pt_rope_type t)
{
    return t == PT_ROPE_LINEAR ? "linear" : t == PT_ROPE_LLAMA3 ? "llama3" : t == PT_ROPE_LONGROPE ? "longrope"
           : t == PT_ROPE_YARN ? "yarn" : "default";
}

static double llama3(double f, const pt_rope_scaling *s)
{
    double wavelen = 2.0 * M_PI / f, L = s->original_max_position_embeddings;
    if (wavelen < L / s->high_freq_factor) return f;
    if (wavelen > L / s->low_freq_factor) return f / s->factor;
    double smooth = (L / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
    return (1.0 - smooth) * f / s->factor + smooth * f;
}

static double yarn_mscale(double factor, double weight)
{
    return factor <= 1.0 ? 1.0 : 0.1 * weight * log(factor) + 1.0;
}

double rope_yarn_attention(double factor, double mscale, double mscale_all_dim)
{
    if (mscale != 0.0 && mscale_all_dim != 0.0) return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
    return yarn_mscale(factor, 1.0);
}

/* the pair index where frequency theta^(-2i/d) turns `rotations` times over `positions` */
static double yarn_dim(double rotations, int d, double theta, double positions)
{
    return d * log(positions / (rotations * 2.0 * M_PI)) / (2.0 * log(theta));
}

static pt_status yarn(double theta, int d, const pt_rope_scaling *s, float *inv_freq)
{
    double fast = s->beta_fast != 0.0 ? s->beta_fast : 32.0, slow = s->beta_slow != 0.0 ? s->beta_slow : 1.0;
    double L = s->original_max_position_embeddings;
    if (!(s->factor > 0) || !(L > 0) || !(fast > 0) || !(slow > 0))
        return ERR(PT_ERR_USER, "rope_scaling (yarn): needs factor, original_max_position_embeddings, beta_fast and "
                   "beta_slow above 0, found %g, %g, %g and %g", s->factor, L, fast, slow);
    double low = yarn_dim(fast, d, theta, L), high = yarn_dim(slow, d, theta, L);
    if (!s->no_truncate) low = floor(low), high = ceil(high);
    low = low > 0.0 ? low : 0.0;
    high = high < d - 1 ? high : d - 1;
    if (low == high) high += 0.001; /* as transformers: no zero-width ramp */
    for (int i = 0; i < d / 2; i++) {
        double f = pow(theta, -2.0 * i / d), r = (i - low) / (high - low);
        r = r < 0.0 ? 0.0 : r > 1.0 ? 1.0 : r;
        inv_freq[i] = (float)(r * f / s->factor + (1.0 - r) * f);
    }
    return PT_OK;
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
    if (scaled && s->type == PT_ROPE_YARN) return yarn(theta, head_dim, s, inv_freq);
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
