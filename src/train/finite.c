/* finite.c — what training does once its numbers stop being numbers. A step whose loss (summed
 * over all ranks) or gradient norm is NaN or infinite is never applied (optimizer_step_run skips
 * AdamW): the run stops with PT_ERR_DIVERGED and one message naming the step and the likely causes,
 * or, with skip_nonfinite_steps, the step is skipped with a warning, as AMP's loss scaler skips
 * it, and FINITE_MAX_SKIPPED such steps in a row stop the run. The loss is summed across ranks and
 * the gradient norm's flag rides along with it, so every rank sees the same numbers and takes the
 * same decision: no rank waits for another. As a last line of defence, the parameters are checked
 * to be finite before any checkpoint or the final adapter is written, so a file of NaN weights is
 * never written, nor rotated in by save_total_limit in place of a good one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ptrain/log.h"
#include "ptrain/resume.h"
#include "trainer.h"

/* "nan", "inf", "-inf" or the number, whatever the C library prints for NaN's sign. */
static const char *number(double x, char *buf, size_t len)
{
    if (isnan(x)) return "nan";
    if (isinf(x)) return x > 0 ? "inf" : "-inf";
    snprintf(buf, len, "%.6g", x);
    return buf;
}

/* Where the user can go back to: the newest checkpoint written before the divergence, if any. */
static void last_good(const trainer *t, char *buf, size_t len)
{
    if (t->last_saved < 0) {
        snprintf(buf, len, "No checkpoint was written before it.");
        return;
    }
    snprintf(buf, len, "The newest checkpoint, %s/checkpoint-%lld.h5, is from before it and is kept: lower "
             "learning_rate and start again (overwrite_output_dir: true, or another output_dir), or resume from a "
             "checkpoint whose logged loss and grad_norm still looked sane (resume_from_checkpoint: its path).",
             t->cfg->output_dir, (long long)t->last_saved);
}

pt_status trainer_check_step(trainer *t, int64_t step, bool nonfinite, double loss, double grad_norm, bool *skip)
{
    *skip = false;
    if (!nonfinite) {
        t->nonfinite_run = 0;
        return PT_OK;
    }
    char a[32], b[32], what[160], back[4400];
    snprintf(what, sizeof what, "the loss is %s and the gradient norm %s", number(loss, a, sizeof a),
             number(grad_norm, b, sizeof b));
    if (t->cfg->skip_nonfinite_steps && ++t->nonfinite_run < FINITE_MAX_SKIPPED) {
        log_warn("step %lld: %s: the step is skipped (skip_nonfinite_steps: true; %d such steps in a row stop "
                 "the run)", (long long)step, shown_text(what).s, FINITE_MAX_SKIPPED);
        *skip = true;
        return PT_OK;
    }
    last_good(t, back, sizeof back);
    char row[64] = "";
    if (t->nonfinite_run >= FINITE_MAX_SKIPPED)
        snprintf(row, sizeof row, " (%d steps in a row)", t->nonfinite_run);
    return ERR(PT_ERR_DIVERGED, "step %lld of %lld: %s%s, so training stops: the step was not applied and nothing "
               "after step %lld is saved. Likely causes: a learning rate too high (learning_rate %g; QLoRA trains at "
               "about 1e-4 to 3e-4: lower it, or add warmup_steps), bad rows in the data (text unlike what the model "
               "expects), or a damaged model file (try ptrain generate with it). %s",
               (long long)step, (long long)t->total, shown_text(what).s, row, (long long)(step - 1),
               t->cfg->learning_rate, back);
}

pt_status trainer_check_finite(const trainer *t, const float *v, const char *array, const char *what)
{
    for (int i = 0; v && i < t->lay.n; i++) {
        const ckpt_entry *e = &t->lay.e[i];
        for (int64_t k = 0; k < e->rows * e->cols; k++) {
            if (isfinite(v[e->offset + k])) continue;
            char a[32];
            return ERR(PT_ERR_DIVERGED, "%s is not written: %s %s holds %s at [%lld, %lld]: the weights are no "
                       "longer finite. Training diverged (learning_rate %g may be too high), or the adapter this run "
                       "started from (lora_model_dir, or the checkpoint it resumed from) holds such values. %s",
                       shown_text(what).s, array, e->name, number(v[e->offset + k], a, sizeof a),
                       (long long)(k / e->cols), (long long)(k % e->cols), t->cfg->learning_rate,
                       t->last_saved >= 0 ? "The checkpoints written before are kept." : "");
        }
    }
    return PT_OK;
}

pt_status trainer_check_adapters(const trainer *t, const char *what)
{
    float *v = malloc(sizeof(float) * (size_t)(t->lay.total + 1));
    TRY_ALLOC(v);
    pt_status st = lora_export_all(&t->l, &t->head, &t->sm, &t->lay, v, NULL, NULL);
    if (st == PT_OK) st = trainer_check_finite(t, v, "adapter", what);
    free(v);
    return st;
}
