/* grpo_step.c — one GRPO micro-batch as TRL 1.16's GRPOTrainer makes it (grpo.h for the loss):
 * its prompts (examples of dataset_options.prompts) each get num_generations completions sampled
 * by ptrain's own forward, the group's completions decoded in step as one batch over a KV cache
 * (forward_tokens_batch), up to max_completion_length tokens or the end of turn (which is kept, as
 * TRL keeps eos); every completion is scored by the reward functions (reward.h), the group's rewards become
 * advantages, and the prompts and completions make one padding-free row of sequences whose
 * completion tokens are the targets, each token its own "sequence" of the loss head so that
 * grpo_token_scales can weigh it. Sampling is seeded by the seed, the micro-batch's number in the
 * run over all ranks (from the step) and the prompt's place alone (train.c), so a resumed run draws
 * the same completions, and so do W ranks and one process with W times the accumulation. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/forward.h"
#include "ptrain/grpo.h"
#include "ptrain/sample.h"
#include "ptrain/step.h"
#include "trainer.h"

/* The end of a completion: eos, or a special token that ends a turn. */
static bool ends_turn(const pt_tokenizer *tok, int32_t id)
{
    if (id == tokenizer_eos(tok)) return true;
    if (!tokenizer_is_special(tok, id)) return false;
    strbuf s = {0};
    tokenizer_decode_token(tok, id, &s);
    const char *t = sb_text(&s);
    bool end = !strcmp(t, "<|im_end|>") || !strcmp(t, "<|eot_id|>") || !strcmp(t, "<|endoftext|>") ||
               !strcmp(t, "<|end_of_text|>") || !strcmp(t, "</s>") || !strcmp(t, "<end_of_turn>");
    sb_free(&s);
    return end;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

long grpo_max_new(const pt_config *c) { return c->max_completion_length > 0 ? c->max_completion_length : 512; }

int grpo_generations(const pt_config *c, bool eval)
{
    long g = eval && c->num_generations_eval > 0 ? c->num_generations_eval : c->num_generations;
    return g > 0 ? (int)g : 1;
}

/* g completions of the prompt ids[0..np) into out[k] (malloc'd, len[k] tokens), ended[k]: with
 * the end of turn; decoded in step, one batch of g sequences over a KV cache (the prompt run once,
 * its keys and values shared). seed: of the prompt; completion k draws from mix(seed + k). */
static pt_status generate_group(const trainer *t, const int32_t *ids, int32_t np, int g, uint64_t seed,
                                int32_t **out, int32_t *len, bool *ended)
{
    const pt_model *m = &t->m;
    long max_new = grpo_max_new(t->cfg);
    int ctx = (int)(np + max_new < m->cfg.ctx_len ? np + max_new : m->cfg.ctx_len);
    if (np >= ctx)
        return ERR(PT_ERR_USER, "GRPO: a prompt of %d tokens leaves no room to generate in the model's context of %d; "
                   "set max_prompt_length", np, m->cfg.ctx_len);
    int vocab = m->cfg.vocab < tokenizer_vocab_size(t->tok) ? m->cfg.vocab : tokenizer_vocab_size(t->tok);
    size_t width = (size_t)m->cfg.vocab;
    float *logits = malloc(sizeof(float) * width * (size_t)g);
    int32_t *step_ids = malloc(sizeof(int32_t) * (size_t)g);
    sampler *s = calloc((size_t)g, sizeof *s);
    pt_kv_cache kv = {0};
    pt_status st = logits && step_ids && s ? kv_cache_init_batch(m, g, ctx, &kv)
                                           : ERR(PT_ERR_NOMEM, "GRPO: no memory for logits");
    for (int k = 0; st == PT_OK && k < g; k++) {
        out[k] = malloc(sizeof(int32_t) * (size_t)(max_new + 1));
        if (!out[k]) st = ERR(PT_ERR_NOMEM, "GRPO: no memory for a completion");
        len[k] = 0, ended[k] = false;
        s[k] = (sampler){(float)t->cfg->temperature, (float)t->cfg->top_p, mix(seed + (uint64_t)k), (int)t->cfg->top_k};
    }
    if (st == PT_OK) st = forward_tokens_shared(m, &t->l.ad, &kv, ids, np, logits);
    for (long made = 0; st == PT_OK && made < max_new; made++) {
        bool open = false;
        for (int k = 0; k < g && st == PT_OK; k++) {
            step_ids[k] = 0; /* an ended sequence's slot runs on, unread */
            if (ended[k]) continue;
            int32_t next;
            st = sample_next(&s[k], logits + (size_t)k * width, vocab, &next);
            if (st != PT_OK) break;
            out[k][len[k]++] = next, step_ids[k] = next;
            if (ends_turn(t->tok, next)) ended[k] = true;
            else open = true;
        }
        if (st != PT_OK || !open || made + 1 >= max_new || kv.n_past >= ctx) break;
        st = forward_tokens_batch(m, &t->l.ad, &kv, step_ids, 1, logits);
    }
    if (kv.k) kv_cache_free(m, &kv);
    free(logits), free(step_ids), free(s);
    return st;
}

void grpo_micro_free(grpo_micro *g)
{
    for (int i = 0; g->comp && i < g->n; i++) free(g->comp[i]);
    free(g->comp), free(g->len), free(g->ended), free(g->row_seq), free(g->tok_seq), free(g->adv), free(g->old_nll);
    batch_free(&g->b);
    *g = (grpo_micro){0};
}

/* The completions' texts (special tokens left out, as TRL's batch_decode skips them). */
static pt_status decode_all(const trainer *t, const grpo_micro *g, char **text)
{
    for (int i = 0; i < g->n; i++) {
        strbuf sb = {0};
        pt_status st = PT_OK;
        for (int32_t k = 0; k < g->len[i] && st == PT_OK; k++)
            if (!tokenizer_is_special(t->tok, g->comp[i][k])) st = tokenizer_decode(t->tok, &g->comp[i][k], 1, &sb);
        if (st != PT_OK) {
            sb_free(&sb);
            return st;
        }
        text[i] = sb.data ? sb.data : calloc(1, 1);
        TRY_ALLOC(text[i]);
    }
    return PT_OK;
}

/* The rewards of the completions and their advantages (sums: the metrics). */
static pt_status score(const trainer *t, grpo_micro *g, const char *const *cols, double *sums)
{
    int n = g->n, p = n / g->gen;
    char **text = calloc((size_t)n + 1, sizeof *text), **prompt = calloc((size_t)n + 1, sizeof *prompt);
    const char **cl = calloc((size_t)n + 1, sizeof *cl);
    double *per = calloc((size_t)n * (size_t)reward_count(t->reward) + 1, sizeof *per);
    double *reward = calloc((size_t)n + 1, sizeof *reward);
    pt_status st = text && prompt && cl && per && reward ? PT_OK : ERR(PT_ERR_NOMEM, "GRPO: no memory for rewards");
    if (st == PT_OK) st = decode_all(t, g, text);
    for (int i = 0; st == PT_OK && i < n; i++) {
        json_t *row = json_loads(cols[i / (n / p)], 0, NULL);
        prompt[i] = json_dumps(json_object_get(row, "prompt"), JSON_ENCODE_ANY | JSON_COMPACT);
        json_decref(row);
        cl[i] = cols[i / (n / p)];
        if (!prompt[i]) st = ERR(PT_ERR_INTERNAL, "GRPO: a row without its prompt");
    }
    reward_batch rb = {n, (const char *const *)prompt, cl, (const char *const *)text, (const int32_t *const *)g->comp,
                       g->len, grpo_max_new(t->cfg)};
    if (st == PT_OK) st = reward_score(t->reward, &rb, per);
    if (st == PT_OK) grpo_advantages(per, reward_count(t->reward), n, g->gen, reward, g->adv, sums);
    for (int i = 0; i < n; i++) free(text ? text[i] : NULL), free(prompt ? prompt[i] : NULL);
    free(text), free(prompt), free(cl), free(per), free(reward);
    return st;
}

/* The row of sequences: prompt i / g then completion i, segment i + 1, its completion tokens the
 * targets, each labelled row its own index in row_seq. */
static pt_status lay_out(grpo_micro *g, const int32_t *const *pid, const int32_t *np, int gen)
{
    int64_t cols = 0;
    for (int i = 0; i < g->n; i++) cols += np[i / gen] + g->len[i];
    pt_batch *b = &g->b;
    b->rows = 1, b->cols = (int)cols;
    size_t bytes = sizeof(int32_t) * (size_t)(cols + 1);
    b->ids = malloc(bytes), b->labels = malloc(bytes), b->targets = malloc(bytes), b->pos = malloc(bytes);
    b->segments = malloc(bytes), g->row_seq = malloc(bytes), g->tok_seq = malloc(bytes);
    TRY_ALLOC(b->ids && b->labels && b->targets && b->pos && b->segments && g->row_seq && g->tok_seq ? b->ids : NULL);
    int64_t at = 0;
    g->n_tok = 0;
    for (int i = 0; i < g->n; i++) {
        int32_t p = np[i / gen], n = p + g->len[i];
        for (int32_t k = 0; k < n; k++, at++) {
            b->ids[at] = k < p ? pid[i / gen][k] : g->comp[i][k - p];
            b->labels[at] = k < p ? PT_IGNORE_INDEX : b->ids[at];
            b->pos[at] = k, b->segments[at] = i + 1, g->row_seq[at] = -1;
            b->targets[at] = PT_IGNORE_INDEX;
            if (k + 1 < n && k + 1 >= p) {
                b->targets[at] = g->comp[i][k + 1 - p];
                g->tok_seq[g->n_tok] = i;
                g->row_seq[at] = (int32_t)g->n_tok++;
            }
        }
    }
    return PT_OK;
}

/* The completions' token log-probs by the policy that sampled them (the ratio's denominator on the
 * later iterations), as TRL takes them when the batch is made. */
static pt_status old_logps(trainer *t, grpo_micro *g)
{
    pt_model m = grpo_model_at(&t->m, t->cfg->temperature);
    train_batch v = {g->b.rows, g->b.cols, g->b.ids, g->b.targets, g->b.pos, g->b.segments};
    g->old_nll = calloc((size_t)g->n_tok + 1, sizeof *g->old_nll);
    TRY_ALLOC(g->old_nll);
    return step_sequence_nll(&m, &t->l.ad, &v, g->row_seq, (int)g->n_tok, &t->arena, g->old_nll);
}

pt_status grpo_micro_make(trainer *t, const pt_dataset *ds, const size_t *idx, size_t n_prompts, uint64_t seed,
                          grpo_micro *g, double *sums)
{
    int gen = grpo_generations(t->cfg, ds == &t->eval);
    *g = (grpo_micro){.gen = gen};
    g->n = (int)n_prompts * gen;
    size_t n = (size_t)g->n + 1, p = n_prompts + 1; /* + 1: an empty eval batch (grpo_eval.c) has none */
    g->comp = calloc(n, sizeof *g->comp), g->len = calloc(n, sizeof *g->len);
    g->ended = calloc(n, sizeof *g->ended), g->adv = calloc(n, sizeof *g->adv);
    const int32_t **pid = calloc(p, sizeof *pid);
    int32_t *np = calloc(p, sizeof *np);
    char **cols = calloc(p, sizeof *cols);
    pt_status st = g->comp && g->len && g->ended && g->adv && pid && np && cols ? PT_OK
                                                                              : ERR(PT_ERR_NOMEM, "GRPO: no memory");
    for (size_t j = 0; st == PT_OK && j < n_prompts; j++) {
        st = dataset_prompt_row(&ds->ex[idx[j]], &pid[j], &np[j], &cols[j]);
        if (st == PT_OK)
            st = generate_group(t, pid[j], np[j], gen, mix(seed + 0x9e3779b97f4a7c15ULL * (j + 1)),
                                g->comp + j * (size_t)gen, g->len + j * (size_t)gen, g->ended + j * (size_t)gen);
    }
    if (st == PT_OK) st = score(t, g, (const char *const *)cols, sums);
    if (st == PT_OK) grpo_lengths(g->len, g->ended, g->n, sums), sums[GRPO_STEPS] += g->n > 0;
    if (st == PT_OK) st = lay_out(g, pid, np, gen);
    if (st == PT_OK && t->cfg->num_iterations > 1 && ds == &t->train) st = old_logps(t, g); /* eval: on-policy */
    for (size_t j = 0; cols && j < n_prompts; j++) free(cols[j]);
    free(pid), free(np), free(cols);
    if (st != PT_OK) grpo_micro_free(g);
    return st;
}

typedef struct {
    grpo_tokens in;
    double *sums;
} grpo_grad;

static pt_status grpo_seq_grad(void *arg, const double *nll, float *scale)
{
    grpo_grad *p = arg;
    p->in.nll = nll;
    grpo_token_scales(&p->in, scale, p->sums);
    return PT_OK;
}

pt_model grpo_model_at(const pt_model *m, double temperature)
{
    pt_model at = *m; /* the same weights; only the loss head's logit divisor changes */
    float ls = m->cfg.logit_scale != 0.0f ? m->cfg.logit_scale : 1.0f;
    at.cfg.logit_scale = (float)(ls * temperature);
    return at;
}

pt_status grpo_micro_eval(trainer *t, const grpo_micro *g, double *sums)
{
    if (g->n_tok == 0) return PT_OK;
    pt_model m = grpo_model_at(&t->m, t->cfg->temperature);
    train_batch v = {g->b.rows, g->b.cols, g->b.ids, g->b.targets, g->b.pos, g->b.segments};
    size_t n = (size_t)g->n_tok;
    double beta = t->cfg->beta, *nll = calloc(n, sizeof *nll), *ent = calloc(n, sizeof *ent), *ref = NULL;
    float *scale = calloc(n, sizeof *scale);
    pt_status st = nll && ent && scale ? PT_OK : ERR(PT_ERR_NOMEM, "GRPO: no memory for an eval batch's log-probs");
    if (st == PT_OK && beta != 0) {
        ref = calloc(n, sizeof *ref);
        st = ref ? step_sequence_nll(&m, NULL, &v, g->row_seq, (int)n, &t->arena, ref)
                 : ERR(PT_ERR_NOMEM, "GRPO: no memory for the reference log-probs");
    }
    if (st == PT_OK) st = step_sequence_nll_entropy(&m, &t->l.ad, &v, g->row_seq, (int)n, &t->arena, nll, ent);
    grpo_tokens in = {nll, ref, NULL, ent, g->tok_seq, g->n_tok, g->adv, beta, t->cfg->epsilon, t->cfg->epsilon_high,
                      1.0};
    if (st == PT_OK) grpo_token_scales(&in, scale, sums); /* GRPO_LOSS: the tokens' summed loss */
    free(nll), free(ent), free(ref), free(scale);
    return st;
}

pt_status grpo_micro_run(trainer *t, const grpo_micro *g, step_options so, double inv_n, double *sums)
{
    pt_model m = grpo_model_at(&t->m, t->cfg->temperature); /* TRL's log-probs of logits / temperature */
    train_batch v = {g->b.rows, g->b.cols, g->b.ids, g->b.targets, g->b.pos, g->b.segments};
    double beta = t->cfg->beta, *ref = NULL, *ent = calloc((size_t)g->n_tok + 1, sizeof *ent);
    pt_status st = ent ? PT_OK : ERR(PT_ERR_NOMEM, "GRPO: no memory for the entropies");
    if (st == PT_OK && beta != 0) {
        ref = calloc((size_t)g->n_tok + 1, sizeof *ref);
        st = ref ? step_sequence_nll(&m, NULL, &v, g->row_seq, (int)g->n_tok, &t->arena, ref)
                 : ERR(PT_ERR_NOMEM, "GRPO: no memory for the reference log-probs");
    }
    grpo_grad p = {{NULL, ref, g->old_nll, ent, g->tok_seq, g->n_tok, g->adv, beta, t->cfg->epsilon,
                    t->cfg->epsilon_high, inv_n},
                   sums};
    so.row_seq = g->row_seq, so.n_seq = (int)g->n_tok, so.seq_grad = grpo_seq_grad, so.seq_grad_arg = &p;
    so.seq_entropy = ent;
    double token_loss = 0;
    int64_t n = 0;
    if (st == PT_OK) st = step_run(&m, &t->l, &v, &so, 0.0f, &token_loss, &n);
    free(ref), free(ent);
    return st;
}
