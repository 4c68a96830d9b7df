/* loss.c — the loss head (forward.h): final norm, lm_head, Gemma 2's soft-cap and the
 * cross-entropy, `chunk` rows of logits at a time, on the labelled rows only (gathered into one
 * block first); with a gradient, d loss / d logits goes back through the soft-cap and the lm_head
 * chunk by chunk and is scattered back to the rows (zero elsewhere), so the full [rows, vocab]
 * logits never exist. Evaluation and training share it. The preference methods sum it per sequence
 * and scale each sequence's gradient by its own factor (loss_by_sequence): d log p / d logits is the
 * cross-entropy's gradient negated, so a per-sequence scale is all DPO's gradient needs. GRPO's
 * entropy metric reads the sequences' logits back to the host (logits_entropy). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/forward.h"

/* The rows whose target counts (every row with all), as runs of consecutive rows, and their
 * targets in that order. */
static pt_status labelled_find(const int32_t *targets, int64_t n, bool all, loss_bufs *h)
{
    h->start = malloc(sizeof(int64_t) * (size_t)(n / 2 + 1));
    h->len = malloc(sizeof(int64_t) * (size_t)(n / 2 + 1));
    h->targets = malloc(sizeof(int32_t) * (size_t)(n + 1));
    TRY_ALLOC(h->start && h->len && h->targets ? h->start : NULL);
    for (int64_t r = 0; r < n; r++) {
        if (targets[r] == PT_IGNORE_INDEX && !all) continue;
        if (h->n_runs == 0 || h->start[h->n_runs - 1] + h->len[h->n_runs - 1] != r)
            h->start[h->n_runs] = r, h->len[h->n_runs++] = 0;
        h->len[h->n_runs - 1]++;
        h->targets[h->labelled++] = targets[r];
    }
    return PT_OK;
}

pt_status loss_take_rows(pt_arena *arena, const fwd_ctx *c, int64_t labelled, int chunk, bool grad, loss_bufs *h)
{
    const pt_model_config *g = &c->m->cfg;
    int64_t nl = labelled > 0 ? labelled : 1, ch = chunk < nl ? chunk : nl;
    h->chunk = chunk, h->grad = grad;
    int64_t rows[H_COUNT] = {c->rows, c->rows, nl, grad ? nl : 0, grad ? c->rows : 0, ch};
    int64_t cols[H_COUNT] = {g->dim, 1, g->dim, g->dim, g->dim, g->vocab};
    for (int i = 0; i < H_COUNT; i++) { /* the norm's rstd, the logits and the loss stay f32 */
        bool f32 = i == H_RSTD || i == H_LOGITS;
        TRY((f32 ? arena_take_f32 : arena_take)(arena, &h->t[i], rows[i], cols[i]));
    }
    return PT_OK;
}

pt_status loss_take(pt_arena *arena, const fwd_ctx *c, const int32_t *targets, bool all_rows, int chunk, bool grad,
                    loss_bufs *h)
{
    memset(h, 0, sizeof *h);
    TRY(labelled_find(targets, c->rows, all_rows, h));
    return loss_take_rows(arena, c, h->labelled, chunk, grad, h);
}

pt_status loss_by_sequence(loss_bufs *h, const int32_t *row_seq, double *nll, const float *scale)
{
    free(h->seq);
    h->seq = malloc(sizeof(int32_t) * (size_t)(h->labelled + 1));
    TRY_ALLOC(h->seq);
    for (int64_t i = 0, at = 0; i < h->n_runs; i++)
        for (int64_t r = h->start[i]; r < h->start[i] + h->len[i]; r++) h->seq[at++] = row_seq[r];
    h->seq_nll = nll, h->seq_scale = scale;
    return PT_OK;
}

void loss_free(loss_bufs *h)
{
    free(h->start), free(h->len), free(h->targets), free(h->seq);
    memset(h, 0, sizeof *h);
}

/* Copy the labelled rows of all into packed (gather), or packed back into them (scatter). */
static pt_status labelled_move(pt_backend *be, const loss_bufs *h, pt_tensor *all, pt_tensor *packed, bool gather)
{
    for (int64_t i = 0, at = 0; i < h->n_runs; at += h->len[i++]) {
        pt_tensor a = tensor_rows(all, h->start[i], h->len[i]), p = tensor_rows(packed, at, h->len[i]);
        TRY(gather ? backend_copy(be, &p, &a) : backend_copy(be, &a, &p));
    }
    return PT_OK;
}

/* The summed entropy (nats) of the softmax of each of the rows of logits lv (capped first with a
 * soft-cap), on the host: a metric (GRPO's), read back once per sequence run. */
static pt_status logits_entropy(pt_backend *be, const pt_tensor *lv, float cap, double *sum)
{
    int64_t rows = lv->shape[0], vocab = lv->shape[1];
    float *x = malloc(lv->nbytes);
    TRY_ALLOC(x);
    pt_status st = backend_download(be, lv, x, lv->nbytes);
    for (int64_t r = 0; st == PT_OK && r < rows; r++) {
        float *z = x + r * vocab;
        double hi = -INFINITY, se = 0, sz = 0;
        for (int64_t j = 0; j < vocab; j++) {
            if (cap > 0.0f) z[j] = cap * tanhf(z[j] / cap);
            hi = fmax(hi, z[j]);
        }
        for (int64_t j = 0; j < vocab; j++) {
            double e = exp(z[j] - hi);
            se += e, sz += e * (z[j] - hi);
        }
        *sum += log(se) - sz / se; /* log sum e^z - sum p z, shifted by the max */
    }
    free(x);
    return st;
}

/* Cross-entropy of rows [r0, r0+rows) of the labelled states; with a gradient also theirs. */
static pt_status loss_chunk(const fwd_ctx *c, loss_bufs *h, int64_t r0, int64_t rows, float grad_scale,
                            double *loss_sum, int64_t *n_tokens)
{
    pt_backend *be = c->m->be;
    float cap = c->m->cfg.final_softcap;
    pt_tensor *t = h->t;
    pt_tensor xv = tensor_rows(&t[H_XL], r0, rows), lv = tensor_rows(&t[H_LOGITS], 0, rows);
    TRY(backend_matmul(be, &lv, &xv, adapter_lm_head(c->ad, c->m), 0.0f));
    /* the soft-cap (Gemma 2) inside the cross-entropy: its gradient is the logits' */
    if (!h->seq) {
        TRY(backend_cross_entropy(be, h->grad ? &lv : NULL, loss_sum, n_tokens, &lv, h->targets + r0, grad_scale, cap));
    } else { /* each run of one sequence's rows with that sequence's sum and scale */
        for (int64_t a = 0, b; a < rows; a = b) {
            int32_t q = h->seq[r0 + a];
            for (b = a + 1; b < rows && h->seq[r0 + b] == q; b++) {}
            pt_tensor part = tensor_rows(&lv, a, b - a);
            double nll = 0;
            float scale = h->seq_scale ? h->seq_scale[q] : grad_scale;
            if (h->seq_ent) TRY(logits_entropy(be, &part, cap, &h->seq_ent[q])); /* before the gradient overwrites */
            TRY(backend_cross_entropy(be, h->grad ? &part : NULL, &nll, n_tokens, &part, h->targets + r0 + a, scale,
                                      cap));
            *loss_sum += nll;
            if (h->seq_nll) h->seq_nll[q] += nll;
        }
    }
    if (!h->grad) return PT_OK;
    if (h->head_grad) TRY(backend_matmul_bwd_weight(be, h->head_grad, &lv, &xv, 1.0f)); /* a trained LM head */
    pt_tensor dv = tensor_rows(&t[H_DXL], r0, rows);
    return backend_matmul_bwd_input(be, &dv, &lv, adapter_lm_head(c->ad, c->m), 0.0f);
}

pt_status forward_loss(const fwd_ctx *c, loss_bufs *h, const pt_tensor *hid, pt_tensor *dh, float grad_scale,
                       double *loss_sum, int64_t *n_tokens)
{
    pt_backend *be = c->m->be;
    const pt_model_config *g = &c->m->cfg;
    pt_tensor *t = h->t;
    TRY(backend_rmsnorm(be, &t[H_XF], &t[H_RSTD], hid, &c->m->out_norm, g->norm_eps));
    bool scaled = g->logit_scale != 0.0f && g->logit_scale != 1.0f; /* granite: logits / logits_scaling */
    if (scaled) TRY(backend_scale(be, &t[H_XF], 1.0f / g->logit_scale));
    TRY(labelled_move(be, h, &t[H_XF], &t[H_XL], true));
    for (int64_t r0 = 0; r0 < h->labelled; r0 += h->chunk)
        TRY(loss_chunk(c, h, r0, h->labelled - r0 < h->chunk ? h->labelled - r0 : h->chunk, grad_scale, loss_sum,
                       n_tokens));
    if (!h->grad) return PT_OK;
    TRY(backend_zero(be, &t[H_DXF]));
    TRY(labelled_move(be, h, &t[H_DXF], &t[H_DXL], false));
    if (scaled) TRY(backend_scale(be, &t[H_DXF], 1.0f / g->logit_scale));
    return backend_rmsnorm_bwd(be, dh, NULL, &t[H_DXF], hid, &c->m->out_norm, &t[H_RSTD]);
}
