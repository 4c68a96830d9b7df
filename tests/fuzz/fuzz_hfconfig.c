/* fuzz-sources: src/model/hf_config.c src/model/arch.c src/model/family.c src/model/rope.c src/core/jsonfile.c src/core/error.c src/core/shown.c */
/* fuzz_hfconfig.c — libFuzzer target for the config.json reader: the input is parsed with
 * hf_config_parse; a failure must leave one message naming the file and a zeroed hf_config, a
 * success a configuration the model code can trust (positive sizes, heads a multiple of key/value
 * heads, an even head size of at most 1024, a known family, a positive norm epsilon and rope
 * theta), whose rotary frequencies rope_inv_freq either computes (all finite and positive) or
 * refuses with a message. Seed corpus: tests/fuzz/corpus/hfconfig/ (see
 * tests/fuzz/make_corpus_hf.py). Built and run by tests/fuzz/run-fuzz.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/hf_model.h"

#define FUZZ_NAME "fuzz_hfconfig"
#include "support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const hf_config zero;
    hf_config h;
    pt_status st = hf_config_parse("config.json", (const char *)data, size, &h);
    if (st != PT_OK) {
        CHECK(st == PT_ERR_USER);
        CHECK(strncmp(err_message(), "config.json: ", 13) == 0);
        CHECK(memcmp(&h, &zero, sizeof h) == 0);
        err_clear();
        return 0;
    }
    const pt_model_config *c = &h.cfg;
    CHECK((unsigned)c->arch < PT_ARCH_COUNT);
    CHECK(c->n_layers > 0 && c->dim > 0 && c->ffn_dim > 0 && c->vocab > 0 && c->ctx_len > 0);
    CHECK(c->n_heads > 0 && c->n_kv_heads > 0 && c->n_heads % c->n_kv_heads == 0);
    CHECK(c->head_dim > 0 && c->head_dim % 2 == 0 && c->head_dim <= 1024);
    CHECK(c->norm_eps > 0 && h.rope_theta >= 1 && c->attn_scale > 0 && c->embed_scale > 0);
    CHECK(isfinite(c->attn_scale) && isfinite(c->embed_scale) && isfinite(c->rope_theta));
    CHECK(c->sliding_window >= 0 && c->sliding_period >= 0);
    CHECK(!c->sliding_window || c->sliding_pattern > 0 || c->sliding_period > 0); /* gemma2's rule or gemma3's */
    CHECK(c->rope_dim >= 0 && c->rope_dim <= c->head_dim && c->rope_dim % 2 == 0); /* phi3's partial rotary */
    /* gemma4: the global layers' heads fit, the shared layers have a layer of their kind to read */
    CHECK(c->head_dim_full >= 0 && c->head_dim_full % 2 == 0 && c->head_dim_full <= 1024);
    CHECK(c->n_kv_heads_full >= 0 && (!c->n_kv_heads_full || c->n_heads % c->n_kv_heads_full == 0));
    CHECK(c->rope_pairs_full >= 0 && c->rope_pairs_full <= c->head_dim_full / 2);
    CHECK(c->kv_shared >= 0 && c->kv_shared < c->n_layers && c->ple_dim >= 0);
    for (int l = c->n_layers - c->kv_shared; c->kv_shared > 0 && l < c->n_layers; l++)
        CHECK(model_kv_source(c, l) < c->n_layers - c->kv_shared);
    CHECK(c->full_period >= 0); /* qwen35's hybrid: the DeltaNet's heads fit together */
    CHECK(!c->full_period || (c->lin_k_heads > 0 && c->lin_v_heads % c->lin_k_heads == 0 && c->lin_k_dim > 0 &&
                              c->lin_v_dim > 0 && c->lin_conv > 0));
    static float f[512];
    int rd = c->rope_dim ? c->rope_dim : c->head_dim; /* the rotated values of a head */
    CHECK(h.rope.type != PT_ROPE_LONGROPE || (h.rope.n_factors == rd / 2 && c->rope_mscale > 0 && c->rope_short_max > 0));
    CHECK(h.rope.type != PT_ROPE_YARN || (h.rope.factor > 0 && h.rope.original_max_position_embeddings > 0 &&
                                          c->rope_mscale > 0 && isfinite(c->rope_mscale)));
    st = rope_inv_freq(h.rope_theta, rd, &h.rope, f);
    if (st == PT_OK)
        for (int i = 0; i < rd / 2; i++) CHECK(isfinite(f[i]) && f[i] >= 0);
    else
        CHECK(st == PT_ERR_USER);
    err_clear();
    return 0;
}
