/* sample.c — next-token sampling: greedy at temperature 0, else temperature + nucleus (top-p)
 * sampling with a seeded generator, so the same seed gives the same text. */
#include "ptrain/sample.h"
#include "ptrain/util.h"

#include <math.h>
#include <stdlib.h>

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

typedef struct {
    float p;
    int id;
} prob_id;

static int by_prob_desc(const void *a, const void *b)
{
    float pa = ((const prob_id *)a)->p, pb = ((const prob_id *)b)->p;
    return pa < pb ? 1 : pa > pb ? -1 : ((const prob_id *)a)->id - ((const prob_id *)b)->id;
}

int sample_next(sampler *s, const float *logits, int n)
{
    if (s->temperature <= 0) return argmax(logits, n);
    prob_id *p = malloc(sizeof *p * (size_t)n);
    if (!p) return argmax(logits, n);
    float max = logits[argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        p[i].p = expf((logits[i] - max) / s->temperature);
        p[i].id = i;
        sum += p[i].p;
    }
    qsort(p, (size_t)n, sizeof *p, by_prob_desc);
    double keep = 0;
    int m = 0;
    while (m < n && (m == 0 || keep < s->top_p * sum)) keep += p[m++].p;
    double r = (double)(rng_next(&s->state) >> 11) / (double)(1ULL << 53) * keep, acc = 0;
    int id = p[m - 1].id;
    for (int i = 0; i < m; i++) {
        acc += p[i].p;
        if (r < acc) {
            id = p[i].id;
            break;
        }
    }
    free(p);
    return id;
}
