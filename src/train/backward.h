/* backward.h — the backward pass of a layer of the forward pass (backward.c), for step.c. */
#ifndef PTRAIN_BACKWARD_H
#define PTRAIN_BACKWARD_H

#include "ptrain/forward.h"
#include "ptrain/lora.h"

/* The gradient buffers of a layer's backward pass (reused by every layer). */
enum { G_FFN1, G_FFN2, G_DIM1, G_DH, G_ATT, G_Q, G_K, G_V, G_R, G_Z, G_DZ, /* G_Z, G_DZ: DoRA's */
       G_QG, /* qwen35's full layers: the gradient at the output gate */
       /* qwen35's Gated DeltaNet layers: at the conv's output and input (conv channels wide), at the gated norm's
        * output and z, then at its input (value width), at b and a, at beta and g (f32) */
       G_L1, G_L2, G_LV1, G_LV2, G_LB, G_LA, G_LBETA, G_LG,
       /* gemma4: at the per-layer input's gate and the product (ple_dim wide); the keys' and values' gradients the
        * KV-shared layers hand back to the layer that computed them, per kind of layer (global 0, sliding 1) */
       G_PL1, G_PL2, G_SK0, G_SV0, G_SK1, G_SV1, G_COUNT };
typedef struct {
    pt_tensor t[G_COUNT];
} backward_bufs;

pt_status backward_take(pt_arena *arena, const fwd_ctx *c, int lora_r, backward_bufs *g);
/* Given dout = d loss / d (layer output), replace it with d loss / d (layer input x), a being
 * what forward_layer wrote for this layer; writes l's gradients of this layer. */
pt_status backward_layer(const fwd_ctx *c, pt_lora *l, int layer, const pt_tensor *x, layer_acts *a, pt_tensor *dout,
                         backward_bufs *g);

#endif
