/* step.c — forward and backward of one micro-batch with LoRA (see step.h for the contract), for
 * every family forward.c runs: the one forward pass keeping each layer's activations (or, with
 * checkpointing, only each layer's input, the layer run again just before its backward; with
 * offloading those inputs go to host memory and come back just in time, two on the device), the
 * loss head with its gradient (forward.h), then the layers' backward passes (backward.c) from the
 * last, handing each finished layer to the caller. All buffers come from an arena, taken in the
 * same order by the dry run that sizes it. */
#include "ptrain/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backward.h"
#include "ptrain/forward.h"
#include "ptrain/quant.h"

typedef struct {
    fwd_bufs f;
    pt_tensor d;         /* d loss / d hidden states, [rows, dim] */
    loss_bufs h;
    backward_bufs g;
    pt_tensor recompute; /* checkpointing: the output of a recomputed layer */
} step_bufs;

step_options step_options_for(pt_checkpointing ck, bool on_gpu, float lora_dropout)
{
    step_options so = {.checkpointing = ck != PT_CKPT_OFF, .offload = ck == PT_CKPT_OFFLOAD && on_gpu,
                       .lora_dropout = lora_dropout, .loss_chunk = 256, .act = on_gpu ? PT_BF16 : PT_F32};
    return so;
}

static int chunk_of(const step_options *o) { return o->loss_chunk > 0 ? o->loss_chunk : 256; }

static fwd_ctx ctx_of(const pt_model *m, pt_lora *l, const train_batch *b, const step_options *o)
{
    fwd_ctx c = forward_ctx(m, l ? &l->ad : NULL, b->batch, b->seq, b->pos, b->segments);
    if (l && o->lora_dropout > 0) c.dropout = o->lora_dropout, c.seed = o->dropout_seed;
    /* transformers' neftune_post_forward_hook: alpha / sqrt(input_ids.size(1) * hidden) */
    if (o->neftune_alpha > 0)
        c.noise_mag = (float)(o->neftune_alpha / sqrt((double)b->seq * (double)m->cfg.dim)), c.noise_seed = o->noise_seed;
    return c;
}

/* What lives through the whole step; then what each later phase needs (the loss head's buffers,
 * then the backward pass's in the same place). */
static bool offloading(const step_options *o) { return o->checkpointing && o->offload; }

static pt_status forward_phase_take(pt_arena *arena, fwd_ctx *c, const step_options *o, step_bufs *s)
{
    int n = c->m->cfg.n_layers, keep = o->keep_layers > 0 ? o->keep_layers : 0;
    TRY(forward_take_sets(arena, c, !offloading(o), !o->checkpointing || keep >= n ? n : keep + 1, &s->f));
    return arena_take(arena, &s->d, c->rows, c->m->cfg.dim);
}

static pt_status backward_phase_take(pt_arena *arena, const fwd_ctx *c, const step_options *o, step_bufs *s)
{
    TRY(backward_take(arena, c, c->ad ? c->ad->r_max : 0, &s->g));
    return arena_take(arena, &s->recompute, o->checkpointing ? c->rows : 0, c->m->cfg.dim);
}

size_t step_arena_bytes(const pt_model *m, const pt_adapter *ad, int64_t rows, const step_options *o)
{
    pt_arena a;
    arena_measure(&a, o->act);
    fwd_ctx c = forward_ctx(m, ad, 1, (int)rows, NULL, NULL);
    c.dropout = ad ? o->lora_dropout : 0.0f;
    moe_aux aux = {.coef = o->router_aux_coef}; /* only its coefficient is read here: the aux gradient's buffers */
    if (m->cfg.n_experts > 0 && o->router_aux_coef != 0.0f) c.aux = &aux;
    step_bufs s = {0};
    pt_status st = forward_phase_take(&a, &c, o, &s);
    size_t mark = arena_mark(&a);
    if (st == PT_OK) st = loss_take_rows(&a, &c, rows, chunk_of(o), true, &s.h);
    arena_back_to(&a, mark);
    if (st == PT_OK) st = backward_phase_take(&a, &c, o, &s);
    forward_bufs_free(&s.f);
    return a.high;
}

size_t step_offload_bytes(const pt_model *m, int64_t rows, pt_dtype act)
{
    return dtype_size_bytes(act, 1) * (size_t)m->cfg.n_layers * (size_t)rows * (size_t)m->cfg.dim;
}

/* Offloading: layer l's input in host memory. */
typedef struct {
    const fwd_ctx *c;
    fwd_bufs *f;
    void *host;
} offload;

static void *host_input(const offload *h, int layer)
{
    size_t row_bytes = dtype_size_bytes(h->c->m->be->act, h->c->m->cfg.dim);
    return (char *)h->host + (size_t)layer * (size_t)h->c->rows * row_bytes;
}

/* Before layer l of the forward pass: its output goes where input l-1 was, whose copy out (started
 * before layer l-1) must be done; then input l starts its copy out, overlapping layer l. */
static pt_status offload_before(void *arg, int layer)
{
    offload *h = arg;
    pt_backend *be = h->c->m->be;
    TRY(backend_copies_wait(be));
    return backend_to_host_async(be, host_input(h, layer), &h->f->x[layer % 2]);
}

/* Before layer l's backward pass: input l is on the device (the last forward left input L-1 there;
 * the others come back one layer ahead), and input l-1 starts coming back into the slot input l+1
 * left, overlapping this layer's backward. */
static pt_status fetch_ahead(const offload *h, int layer)
{
    pt_backend *be = h->c->m->be;
    TRY(backend_copies_wait(be));
    return layer > 0 ? backend_from_host_async(be, &h->f->x[(layer - 1) % 2], host_input(h, layer - 1)) : PT_OK;
}

/* The layers' backward passes, last first. With checkpointing, a layer without activations of its own
 * (gradient_checkpointing_keep_layers keeps the last ones') runs again first into the shared set; not the
 * last of them: the forward pass ran it last into that set, which nothing since has written, so its
 * recomputation would give the same values again. */
static pt_status backward_all(const fwd_ctx *c, pt_lora *l, const step_options *o, step_bufs *s, const offload *h)
{
    int n = c->m->cfg.n_layers, last_shared = n - s->f.n_acts;
    for (int layer = n - 1; layer >= 0; layer--) {
        int set = forward_acts_index(&s->f, n, layer);
        layer_acts *a = &s->f.acts[set];
        if (h) TRY(fetch_ahead(h, layer));
        const pt_tensor *x = &s->f.x[layer % s->f.n_x];
        if (set == 0 && layer != last_shared) TRY(forward_layer(c, layer, x, &s->recompute, a));
        TRY(backward_layer(c, l, layer, x, a, &s->d, &s->g));
        if (o->layer_done) TRY(o->layer_done(o->layer_done_arg, layer));
    }
    return PT_OK;
}

/* Row r's score: w · its final-normed state (raw: the rows' states, bf16 or f32), its values into hi
 * (dim floats); fp32, as torch's linear. */
static double row_score(const void *raw, bool bf16, int64_t r, int64_t dim, const float *w, float *hi)
{
    float acc = 0;
    for (int64_t k = 0; k < dim; k++) {
        size_t at = (size_t)(r * dim + k);
        hi[k] = bf16 ? quant_bf16_to_f32(((const uint16_t *)raw)[at]) : ((const float *)raw)[at];
        acc += w[k] * hi[k];
    }
    return acc;
}

/* The score head (step.h's score_w): the final norm of the hidden states (as the loss head's), the
 * scores and their gradients from seq_grad on the host, the normed states' gradient on the scored
 * rows (zero elsewhere) back through the norm into s->d, and the head's own gradient. Its buffers
 * fit in what the loss head would take of the arena. */
static pt_status score_head(pt_arena *arena, const fwd_ctx *c, const step_options *o, step_bufs *s,
                            const pt_tensor *hid)
{
    if (!o->seq_grad || !o->score_row || !o->score_grad || o->n_seq <= 0)
        return ERR(PT_ERR_INTERNAL, "step: a score head without seq_grad, score_row or score_grad");
    pt_backend *be = c->m->be;
    int64_t dim = c->m->cfg.dim, rows = c->rows;
    pt_tensor xf, rstd, dxf;
    TRY(arena_take(arena, &xf, rows, dim));
    TRY(arena_take_f32(arena, &rstd, rows, 1));
    TRY(arena_take(arena, &dxf, rows, dim));
    TRY(backend_rmsnorm(be, &xf, &rstd, hid, &c->m->out_norm, c->m->cfg.norm_eps));
    bool bf16 = xf.dtype == PT_BF16;
    if (!bf16 && xf.dtype != PT_F32) return ERR(PT_ERR_INTERNAL, "step: a score head on activations of dtype %d", xf.dtype);
    size_t esz = bf16 ? 2 : 4, n = (size_t)o->n_seq, all = (size_t)(rows * dim);
    void *raw = malloc(esz * all);
    float *h = malloc(sizeof(float) * n * (size_t)dim), *d = calloc(all, sizeof *d);
    double *score = calloc(n, sizeof *score);
    float *scale = calloc(n, sizeof *scale);
    pt_status st = raw && h && d && score && scale ? PT_OK : ERR(PT_ERR_NOMEM, "step: no memory for the score head");
    if (st == PT_OK) st = backend_download(be, &xf, raw, esz * all);
    for (size_t i = 0; st == PT_OK && i < n; i++) {
        int64_t r = o->score_row[i];
        if (r < 0 || r >= rows) {
            st = ERR(PT_ERR_INTERNAL, "step: score row %lld of %lld rows", (long long)r, (long long)rows);
            break;
        }
        score[i] = row_score(raw, bf16, r, dim, o->score_w, h + i * (size_t)dim);
    }
    if (st == PT_OK) st = o->seq_grad(o->seq_grad_arg, score, scale);
    for (size_t i = 0; st == PT_OK && i < n; i++) {
        float *dr = d + (size_t)o->score_row[i] * (size_t)dim;
        for (int64_t k = 0; k < dim; k++) {
            dr[k] += scale[i] * o->score_w[k];
            o->score_grad[k] += scale[i] * h[i * (size_t)dim + (size_t)k];
        }
    }
    if (st == PT_OK && bf16) /* the gradient in the activations' dtype */
        for (size_t i = 0; i < all; i++) ((uint16_t *)raw)[i] = quant_f32_to_bf16(d[i]);
    if (st == PT_OK) st = backend_upload(be, &dxf, bf16 ? raw : (void *)d, esz * all);
    if (st == PT_OK) st = backend_rmsnorm_bwd(be, &s->d, NULL, &dxf, hid, &c->m->out_norm, &rstd);
    free(raw), free(h), free(d), free(score), free(scale);
    return st;
}

/* The loss head: the token loss, or per sequence (o->row_seq) its two passes (step.h). */
static pt_status loss_head(pt_arena *arena, const fwd_ctx *c, const step_options *o, step_bufs *s, float grad_scale,
                           double *loss_sum, int64_t *n_tokens)
{
    const pt_tensor *hid = forward_output(c, &s->f);
    if (o->score_w) return score_head(arena, c, o, s, hid);
    if (!o->row_seq) return forward_loss(c, &s->h, hid, &s->d, grad_scale, loss_sum, n_tokens);
    if (!o->seq_grad || o->n_seq <= 0) return ERR(PT_ERR_INTERNAL, "step: sequences without seq_grad");
    double *nll = calloc((size_t)o->n_seq, sizeof *nll);
    float *scale = calloc((size_t)o->n_seq, sizeof *scale);
    pt_status st = nll && scale ? loss_by_sequence(&s->h, o->row_seq, nll, scale) : ERR(PT_ERR_NOMEM, "step: no memory");
    double first = 0;
    int64_t none = 0;
    s->h.grad = false, s->h.seq_ent = o->seq_entropy;
    if (st == PT_OK) st = forward_loss(c, &s->h, hid, NULL, 0.0f, &first, &none);
    s->h.grad = true, s->h.seq_ent = NULL;
    if (st == PT_OK) st = o->seq_grad(o->seq_grad_arg, nll, scale);
    s->h.seq_nll = NULL;
    if (st == PT_OK) st = forward_loss(c, &s->h, hid, &s->d, 0.0f, loss_sum, n_tokens);
    free(nll);
    free(scale);
    return st;
}

/* A trained embedding table (modules_to_save): d loss / d its rows, from the gradient at the first
 * layer's input (the rows scaled as the forward scaled them; NEFTune's noise is added, so it passes). */
static pt_status embed_grad(const fwd_ctx *c, const train_batch *b, const step_options *o, const pt_tensor *d)
{
    float scale = c->m->cfg.embed_scale;
    return backend_embed_bwd(c->m->be, o->embed_grad, d, b->ids, scale != 0.0f ? scale : 1.0f);
}

static pt_status run(const train_batch *b, const step_options *o, pt_lora *l, fwd_ctx *c, pt_arena *arena,
                     float *host, float grad_scale, double *loss_sum, int64_t *n_tokens)
{
    step_bufs s = {0};
    pt_status st = forward_phase_take(arena, c, o, &s);
    offload h = {c, &s.f, host};
    fwd_hooks hooks = {offload_before, &h};
    if (st == PT_OK) st = forward_run(c, b->ids, &s.f, offloading(o) ? &hooks : NULL);
    if (c->aux) { /* the routers' statistics are complete: recomputed layers add nothing */
        c->aux->frozen = true;
        if (o->aux_loss) *o->aux_loss = moe_aux_value(c->aux);
    }
    size_t mark = arena_mark(arena);
    if (st == PT_OK && !o->score_w) st = loss_take(arena, c, b->targets, o->full_lm_head, chunk_of(o), true, &s.h);
    s.h.head_grad = o->head_grad;
    if (st == PT_OK) st = loss_head(arena, c, o, &s, grad_scale, loss_sum, n_tokens);
    loss_free(&s.h);
    arena_back_to(arena, mark);
    if (st == PT_OK) st = backward_phase_take(arena, c, o, &s);
    if (st == PT_OK) st = backward_all(c, l, o, &s, offloading(o) ? &h : NULL);
    if (st == PT_OK && o->embed_grad) st = embed_grad(c, b, o, &s.d);
    if (offloading(o)) { /* nothing may still be copying into memory the caller reuses */
        pt_status done = backend_copies_wait(c->m->be);
        if (st == PT_OK) st = done;
    }
    forward_bufs_free(&s.f);
    return st;
}

pt_status step_run(pt_model *m, pt_lora *l, const train_batch *b, const step_options *o, float grad_scale,
                   double *loss_sum, int64_t *n_tokens)
{
    if (l) adapter_dora_stale(&l->ad); /* DoRA: norms of the adapters as they are now */
    fwd_ctx c = ctx_of(m, l, b, o);
    moe_aux aux = {0};
    if (m->cfg.n_experts > 0 && (o->router_aux_coef != 0.0f || o->aux_loss)) {
        TRY(moe_aux_open(&aux, m->cfg.n_experts, o->router_aux_coef, o->aux_mask));
        c.aux = &aux;
    }
    pt_arena own = {0}, *arena = o->arena;
    if (!arena) { /* sized for the activations of this backend */
        step_options mine = *o;
        mine.act = m->be->act;
        TRY(arena_open(&own, m->be, step_arena_bytes(m, l ? &l->ad : NULL, c.rows, &mine)));
        arena = &own;
    }
    arena_reset(arena);
    void *host = o->offload_host;
    pt_status st = PT_OK;
    if (offloading(o) && !host) st = backend_host_alloc(m->be, step_offload_bytes(m, c.rows, m->be->act), &host);
    if (st == PT_OK) st = run(b, o, l, &c, arena, host, grad_scale, loss_sum, n_tokens);
    if (host != o->offload_host) backend_host_free(m->be, host);
    arena_close(&own);
    moe_aux_close(&aux);
    return st;
}

size_t step_loss_arena_bytes(const pt_model *m, const pt_adapter *ad, int64_t rows, pt_dtype act)
{
    pt_arena a;
    arena_measure(&a, act);
    fwd_ctx c = forward_ctx(m, ad, 1, (int)rows, NULL, NULL);
    fwd_bufs f;
    loss_bufs h = {0};
    pt_status st = forward_take(&a, &c, false, false, &f);
    if (st == PT_OK) st = loss_take_rows(&a, &c, rows, 256, false, &h);
    forward_bufs_free(&f);
    return a.high;
}

/* *arena reset for a forward without a gradient over rows rows; when the caller gave none, own opened (the
 * caller closes it) and *arena pointed at it. */
static pt_status arena_ready(const pt_model *m, const pt_adapter *ad, int64_t rows, pt_arena **arena, pt_arena *own)
{
    if (!*arena) {
        TRY(arena_open(own, m->be, step_loss_arena_bytes(m, ad, rows, m->be->act)));
        *arena = own;
    }
    arena_reset(*arena);
    return PT_OK;
}

/* The loss without a gradient: summed, or per sequence (row_seq, into nll). */
static pt_status loss_only(const pt_model *m, const pt_adapter *ad, const train_batch *b, const int32_t *row_seq,
                           double *nll, double *ent, pt_arena *arena, double *loss_sum, int64_t *n_tokens)
{
    fwd_ctx c = forward_ctx(m, ad, b->batch, b->seq, b->pos, b->segments);
    pt_arena own = {0};
    TRY(arena_ready(m, ad, c.rows, &arena, &own));
    fwd_bufs f;
    loss_bufs h = {0};
    pt_status st = forward_take(arena, &c, false, false, &f);
    if (st == PT_OK) st = forward_run(&c, b->ids, &f, NULL);
    if (st == PT_OK) st = loss_take(arena, &c, b->targets, false, 256, false, &h);
    if (st == PT_OK && row_seq) st = loss_by_sequence(&h, row_seq, nll, NULL);
    h.seq_ent = ent;
    if (st == PT_OK) st = forward_loss(&c, &h, forward_output(&c, &f), NULL, 0.0f, loss_sum, n_tokens);
    loss_free(&h);
    forward_bufs_free(&f);
    arena_close(&own);
    return st;
}

pt_status step_loss(const pt_model *m, const pt_adapter *ad, const train_batch *b, pt_arena *arena, double *loss_sum,
                    int64_t *n_tokens)
{
    return loss_only(m, ad, b, NULL, NULL, NULL, arena, loss_sum, n_tokens);
}

pt_status step_sequence_nll(const pt_model *m, const pt_adapter *ad, const train_batch *b, const int32_t *row_seq,
                            int n_seq, pt_arena *arena, double *nll)
{
    for (int i = 0; i < n_seq; i++) nll[i] = 0;
    double sum = 0;
    int64_t n = 0;
    return loss_only(m, ad, b, row_seq, nll, NULL, arena, &sum, &n);
}

pt_status step_scores(const pt_model *m, const pt_adapter *ad, const train_batch *b, const float *score_w,
                      const int32_t *score_row, int n, pt_arena *arena, double *score)
{
    fwd_ctx c = forward_ctx(m, ad, b->batch, b->seq, b->pos, b->segments);
    pt_arena own = {0};
    TRY(arena_ready(m, ad, c.rows, &arena, &own));
    int64_t dim = m->cfg.dim, rows = c.rows;
    fwd_bufs f;
    pt_tensor xf, rstd;
    pt_status st = forward_take(arena, &c, false, false, &f);
    if (st == PT_OK) st = forward_run(&c, b->ids, &f, NULL);
    if (st == PT_OK) st = arena_take(arena, &xf, rows, dim);
    if (st == PT_OK) st = arena_take_f32(arena, &rstd, rows, 1);
    if (st == PT_OK) st = backend_rmsnorm(m->be, &xf, &rstd, forward_output(&c, &f), &m->out_norm, m->cfg.norm_eps);
    bool bf16 = xf.dtype == PT_BF16;
    size_t esz = bf16 ? 2 : 4;
    void *raw = st == PT_OK ? malloc(esz * (size_t)(rows * dim)) : NULL;
    float *h = st == PT_OK ? malloc(sizeof(float) * (size_t)dim) : NULL;
    if (st == PT_OK && (!raw || !h)) st = ERR(PT_ERR_NOMEM, "step: no memory for the score head");
    if (st == PT_OK) st = backend_download(m->be, &xf, raw, esz * (size_t)(rows * dim));
    for (int i = 0; st == PT_OK && i < n; i++) {
        if (score_row[i] < 0 || score_row[i] >= rows)
            st = ERR(PT_ERR_INTERNAL, "step: score row %d of %lld rows", score_row[i], (long long)rows);
        else score[i] = row_score(raw, bf16, score_row[i], dim, score_w, h);
    }
    free(raw), free(h);
    forward_bufs_free(&f);
    arena_close(&own);
    return st;
}

pt_status step_sequence_nll_entropy(const pt_model *m, const pt_adapter *ad, const train_batch *b,
                                    const int32_t *row_seq, int n_seq, pt_arena *arena, double *nll, double *ent)
{
    for (int i = 0; i < n_seq; i++) nll[i] = 0, ent[i] = 0;
    double sum = 0;
    int64_t n = 0;
    return loss_only(m, ad, b, row_seq, nll, ent, arena, &sum, &n);
}
