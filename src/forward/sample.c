/* sample.c — next-token sampling: greedy at temperature 0, else temperature, then top-k (the
 * tokens whose logit reaches the k-th largest, ties kept, as transformers' TopKLogitsWarper), then
 * nucleus (top-p) over what is left, with a seeded generator, so the same seed gives the same text. Without a nucleus
 * (top_p >= 1) the draw walks the tokens in id order; with one, only the tokens that can be in it
 * are sorted (those whose probability is at least (1 - top_p) / n of the total: the rest together
 * hold at most 1 - top_p), not the whole vocabulary — GRPO draws a token per row of its group at
 * every step, and sorting 50k probabilities cost more than the forward pass of the step. Without
 * the memory for its work buffers it says so (PT_ERR_NOMEM) instead of drawing otherwise. */
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

static double uniform(sampler *s) { return (double)(rng_next(&s->state) >> 11) / (double)(1ULL << 53); }

/* the token whose share of [0, total) holds r, walking p[0..n) in order; the last if rounding runs past */
static int pick(const prob_id *p, int n, double r)
{
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += p[i].p;
        if (r < acc) return p[i].id;
    }
    return p[n - 1].id;
}

/* the nucleus: the fewest most probable tokens whose probabilities reach top_p of sum */
static int nucleus(sampler *s, prob_id *p, int n, double sum)
{
    double floor = (1.0 - s->top_p) * sum / n;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (p[i].p >= floor) p[c++] = p[i];
    qsort(p, (size_t)c, sizeof *p, by_prob_desc);
    double keep = 0;
    int m = 0;
    while (m < c && (m == 0 || keep < s->top_p * sum)) keep += p[m++].p;
    return pick(p, m, uniform(s) * keep);
}

/* the k-th largest of v[0..n) (1 <= k < n): a min-heap of the k largest seen */
static float kth_largest(const float *v, int n, int k, float *heap)
{
    for (int i = 0; i < n; i++) {
        if (i >= k && v[i] <= heap[0]) continue;
        int j = i < k ? i : 0;
        float x = v[i];
        if (i < k) { /* sift up */
            while (j > 0 && heap[(j - 1) / 2] > x) heap[j] = heap[(j - 1) / 2], j = (j - 1) / 2;
        } else { /* replace the root, sift down */
            for (;;) {
                int c = 2 * j + 1;
                if (c >= k) break;
                if (c + 1 < k && heap[c + 1] < heap[c]) c++;
                if (heap[c] >= x) break;
                heap[j] = heap[c], j = c;
            }
        }
        heap[j] = x;
    }
    return heap[0];
}

pt_status sample_next(sampler *s, const float *logits, int n, int32_t *out)
{
    if (s->temperature <= 0) {
        *out = argmax(logits, n);
        return PT_OK;
    }
    float max = logits[argmax(logits, n)], least = -INFINITY;
    if (s->top_k > 0 && s->top_k < n) {
        float *heap = malloc(sizeof *heap * (size_t)s->top_k);
        if (!heap)
            return ERR(PT_ERR_NOMEM, "sampling: no memory for top_k %d of %d logits; lower top_k or free memory",
                       s->top_k, n);
        least = kth_largest(logits, n, s->top_k, heap);
        free(heap);
    }
    prob_id *p = malloc(sizeof *p * (size_t)n);
    if (!p) return ERR(PT_ERR_NOMEM, "sampling: no memory for the probabilities of %d tokens", n);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        p[i].p = logits[i] < least ? 0.0f : expf((logits[i] - max) / s->temperature);
        p[i].id = i;
        sum += p[i].p;
    }
    *out = s->top_p >= 1.0f ? pick(p, n, uniform(s) * sum) : nucleus(s, p, n, sum);
    free(p);
    return PT_OK;
}
