/* sample.h — choosing the next token from logits (greedy, or temperature + top-k + top-p). */
#ifndef PTRAIN_SAMPLE_H
#define PTRAIN_SAMPLE_H

#include <stdint.h>

#include "ptrain/error.h"

typedef struct {
    float temperature; /* 0: greedy */
    float top_p;       /* keep the smallest set of tokens whose probability reaches top_p */
    uint64_t state;    /* the seed, advanced by every draw */
    int top_k;         /* keep the tokens whose logit reaches the top_k-th largest (ties kept); 0: all */
} sampler;

/* The next token of logits[0..n) into *out. Sampling needs a work buffer of n (and top_k) entries:
 * without the memory, PT_ERR_NOMEM (nothing is drawn; greedy needs none). */
pt_status sample_next(sampler *s, const float *logits, int n, int32_t *out);

#endif
