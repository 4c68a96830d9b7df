/* sample.h — choosing the next token from logits (greedy, or temperature + top-p). */
#ifndef PTRAIN_SAMPLE_H
#define PTRAIN_SAMPLE_H

#include <stdint.h>

typedef struct {
    float temperature; /* 0: greedy */
    float top_p;       /* keep the smallest set of tokens whose probability reaches top_p */
    uint64_t state;    /* the seed, advanced by every draw */
} sampler;

int sample_next(sampler *s, const float *logits, int n);

#endif
