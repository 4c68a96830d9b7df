/* sample.h — choosing the next token from logits (greedy, or temperature + top-k + top-p). */
#ifndef PTRAIN_SAMPLE_H
#define PTRAIN_SAMPLE_H

#include <stdint.h>

typedef struct {
    float temperature; /* 0: greedy */
    float top_p;       /* keep the smallest set of tokens whose probability reaches top_p */
    uint64_t state;    /* the seed, advanced by every draw */
    int top_k;         /* keep the tokens whose logit reaches the top_k-th largest (ties kept); 0: all */
} sampler;

int sample_next(sampler *s, const float *logits, int n);

#endif
