/* dataset.c — dataset_load: for each `dataset:` entry in config order, find its files and read
 * their rows in batches (a Parquet row group, a JSON or CSV file), each batch renamed, filtered
 * and cut to num_samples, then formatted and tokenized (in parallel, each row into its own slot,
 * so the result does not depend on the thread count) and counted in order before the next batch
 * is read, so memory holds one batch besides the examples; the format is detected from the first
 * row that has one, and shuffle puts the examples in the seeded permutation of the rows. Split
 * across the ranks of a job (dataset_work), each rank tokenizes its share of each batch's rows and
 * rank 0 counts them all (parts.c). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "data_internal.h"

typedef struct {
    const dataset_options *o;
    const pt_tokenizer *tok;
    const char *template;
    FILE *warn;
    pt_dataset *out;
} loader;

const char *dataset_template_name(const char *chat_template, const pt_tokenizer *tok)
{
    if (chat_template && *chat_template) return chat_template;
    const char *own = tok ? tokenizer_chat_template(tok) : NULL, *detected = chat_template_detect(own);
    strbuf named = {0}; /* named templates and no default: "model", which says so (label_init) */
    tokenizer_chat_template_names(tok, &named);
    bool some = named.len > 0;
    sb_free(&named);
    return detected ? detected : own || some ? "model" : "chatml";
}

/* ---- one row ---- */

static void run_row(const label_ctx *lc, data_format f, const char *text_field, const data_row *r, data_slot *s)
{
    strbuf why = {0};
    data_record rec;
    s->row = format_row(f, r->obj, text_field, !strcmp(lc->template, "alpaca"), &rec, &why);
    if (s->row == ROW_OK) {
        s->rc = f == FMT_PROMPT       ? label_prompt(lc, &rec, &s->ex, &s->truncated, &s->label)
                : lc->single && f != FMT_PREFERENCE ? label_single(lc, &rec, &s->ex, &s->truncated, &s->label)
                : lc->unpaired        ? label_unpaired(lc, &rec, &s->ex, &s->truncated, &s->label)
                : f == FMT_PREFERENCE ? label_pair(lc, &rec, &s->ex, &s->truncated, &s->label)
                : rec.text          ? label_text(lc, rec.text, &s->ex, &s->truncated, &s->label)
                                    : label_chat(lc, rec.msgs, rec.n, rec.tools, &s->ex, &s->truncated, &s->label);
        if (s->rc != PT_OK) sb_printf(&why, "%s", err_message());
    }
    s->why = why.data;
    record_free(&rec);
}

/* The rows of this part (all of them with one part). */
static void run_rows(const loader *L, const label_ctx *lc, data_format f, const data_rows *rows, data_slot *slots)
{
    long n = (long)rows->n;
    const dataset_work *w = &L->o->work;
#pragma omp parallel for schedule(dynamic, 8)
    for (long i = 0; i < n; i++)
        if (parts_mine((size_t)i, w->part, w->parts)) run_row(lc, f, L->o->dataset_text_field, &rows->v[i], &slots[i]);
}

/* ---- tally ---- */

static void push_example(pt_dataset *ds, pt_example *ex)
{
    if ((ds->n & (ds->n - 1)) == 0) { /* capacity doubles at powers of two */
        pt_example *grown = realloc(ds->ex, sizeof *grown * (ds->n ? ds->n * 2 : 1));
        if (!grown) abort();
        ds->ex = grown;
    }
    ds->ex[ds->n++] = *ex;
    *ex = (pt_example){0};
}

/* Count slot s of row r; fails only on errors that are not the row's fault. */
static pt_status tally(pt_dataset *ds, pt_dataset_stats *st, const data_row *r, data_slot *s)
{
    if (s->row == ROW_BAD) row_bad(st, r, s->why);
    else if (s->row == ROW_EMPTY) st->empty++;
    else if (s->rc == PT_ERR_USER) row_bad(st, r, s->why);
    else if (s->rc != PT_OK) return ERR(s->rc, "%s", s->why);
    else if (s->label == LABEL_NO_LOSS) st->no_loss++;
    else {
        st->kept++;
        st->truncated += s->truncated;
        push_example(ds, &s->ex);
    }
    return PT_OK;
}

static void slots_free(data_slot *slots, size_t n)
{
    for (size_t i = 0; slots && i < n; i++) {
        example_free(&slots[i].ex);
        free(slots[i].why);
    }
    free(slots);
}

/* With several parts: every part's slots to part 0 (dataset_work). Called by every part, even
 * after its own failure (local); returns the agreed status. */
static pt_status share_slots(const loader *L, pt_status local, data_slot *slots, size_t n)
{
    const dataset_work *w = &L->o->work;
    strbuf mine = {0};
    if (local == PT_OK) parts_encode(slots, n, w->part, w->parts, &mine);
    void *all = NULL;
    size_t len = 0;
    pt_status rc = w->gather(w->arg, local, mine.data, mine.len, &all, &len);
    sb_free(&mine);
    if (rc == PT_OK && w->part == 0) {
        for (size_t i = 0; i < n; i++) { /* part 0's own slots come back with the rest */
            example_free(&slots[i].ex);
            free(slots[i].why);
            slots[i] = (data_slot){0};
        }
        rc = parts_decode(all, len, slots, n, w->parts);
    }
    free(all);
    return rc;
}

/* ---- one entry ---- */

static data_format detect(const data_rows *rows, const char *text_field, bool pairs, bool singles)
{
    for (size_t i = 0; i < rows->n; i++) {
        data_format f = format_detect(rows->v[i].obj, text_field, pairs, singles);
        if (f != FMT_NONE) return f;
    }
    return FMT_NONE;
}

static bool loss_on_assistant(const loader *L, int index, data_format f)
{
    if (f != FMT_TEXT) return L->o->assistant_only_loss != PT_FALSE;
    if (L->o->assistant_only_loss == PT_TRUE && L->warn)
        fprintf(L->warn, "warning: dataset[%d]: assistant_only_loss is true, but plain-text rows have no assistant "
                         "turns; every token is labelled\n", index);
    return false;
}

/* Chat rows rendered with chatml because the model has no template of its own. */
static void warn_template(const loader *L, int index)
{
    bool chosen = L->o->chat_template && *L->o->chat_template;
    if (!L->warn || chosen || (L->tok && tokenizer_chat_template(L->tok))) return;
    fprintf(L->warn, "warning: dataset[%d]: the model has no chat template of its own; rendering with chatml; set "
                     "chat_template to choose another\n", index);
}

/* A YAML scalar of chat_template_kwargs as the JSON value a template sees: true/false, null,
 * integers and numbers as such, anything else as text. */
static json_t *kwarg_value(const char *v)
{
    char *end;
    if (!strcasecmp(v, "true") || !strcasecmp(v, "false")) return json_boolean(!strcasecmp(v, "true"));
    if (!strcmp(v, "null") || !strcmp(v, "~")) return json_null();
    long long i = strtoll(v, &end, 10);
    if (*v && !*end) return json_integer(i);
    double d = strtod(v, &end);
    if (*v && !*end) return json_real(d);
    return json_string(v);
}

json_t *data_template_kwargs(const pt_strmap *kw)
{
    if (!kw || !kw->n) return NULL;
    json_t *o = json_object();
    for (int i = 0; i < kw->n; i++) json_object_set_new(o, kw->keys[i], kwarg_value(kw->values[i]));
    return o;
}

static pt_status no_usable_row(const pt_dataset_stats *st, int index)
{
    strbuf sb = {0};
    sb_printf(&sb, "dataset[%d] %s: no usable row (%ld read", index, shown_text(st->name).s, st->read);
    const char *names[] = {"bad", "filtered out", "beyond num_samples", "empty", "without a labelled token"};
    long counts[] = {st->bad, st->filtered, st->limited, st->empty, st->no_loss};
    for (int i = 0; i < 5; i++)
        if (counts[i]) sb_printf(&sb, ", %ld %s", counts[i], names[i]);
    sb_printf(&sb, ")");
    if (st->n_bad_rows) sb_printf(&sb, "; first bad row: %s", st->bad_rows[0]);
    pt_status rc = ERR(PT_ERR_USER, "%s", sb.data);
    sb_free(&sb);
    return rc;
}

/* GRPO: whether a row has a prompt (the rows before the first that has one wait for it). */
static bool prompt_seen(const data_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++)
        if (json_object_get(rows->v[i].obj, "prompt")) return true;
    return false;
}

/* GRPO: whether the first row with a prompt has it as turns (the chat template is then needed). */
static bool prompt_turns(const data_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++) {
        const json_t *p = json_object_get(rows->v[i].obj, "prompt");
        if (p) return json_is_array(p);
    }
    return false;
}

/* ---- one entry, batch by batch ---- */

/* One entry as its rows come in (rows_sink): a batch is transformed (rows.c), tokenized on this
 * part, exchanged with the other parts (one exchange a batch, the same on every part, as every
 * part reads the same files) and counted on the part that counts, then freed; memory holds one
 * batch (a Parquet row group) besides the examples. Rows before the first with a format wait for
 * one. With shuffle, the examples are kept in row order and put in the permutation's order at the
 * end, as if the rows had been shuffled before tokenizing. */
typedef struct {
    const loader *L;
    int index;
    const pt_dataset_config *d;
    pt_dataset_stats *st;
    rows_state rs;
    data_rows pending; /* rows read before one with a format */
    bool ready;        /* the format is known and lc made */
    data_format f;
    label_ctx lc;
    json_t *kwargs;
    bool whole;              /* this part counts the rows */
    pt_dataset shuffled;     /* shuffle: the examples in row order */
    long *row_ex;            /* ... and each row's example there (-1: none) */
    size_t n_rows, cap_rows;
    bool agreed;             /* the failure returned was agreed by every part in an exchange */
    bool in_sink;            /* the failure came from a batch, not from reading */
} entry_run;

static pt_status entry_start(entry_run *E, data_format f)
{
    const loader *L = E->L;
    int index = E->index;
    pt_dataset_stats *st = E->st;
    E->f = f;
    st->format = format_name(f);
    if (!L->o->singles && L->o->unpaired && f != FMT_NONE && f != FMT_UNPAIRED && f != FMT_PREFERENCE)
        return ERR(PT_ERR_USER,
                   "dataset[%d] %s: KTO reads unpaired rows (prompt, completion, label) or preference pairs (prompt, "
                   "chosen, rejected), but these rows are %s; give such a dataset or set method: sft",
                   index, shown_text(st->name).s, format_name(f));
    if (!L->o->singles && !L->o->unpaired && f == FMT_UNPAIRED)
        return ERR(PT_ERR_USER,
                   "dataset[%d] %s: these rows are unpaired preferences (prompt, completion, label), which KTO trains "
                   "on; set method: kto",
                   index, shown_text(st->name).s);
    if (!L->o->singles && !L->o->unpaired && f != FMT_NONE && (f == FMT_PREFERENCE) != L->o->pairs)
        return ERR(PT_ERR_USER,
                   L->o->pairs ? "dataset[%d] %s: the method reads preference rows (prompt, chosen, rejected), but "
                                 "these rows are %s; give a preference dataset or set method: sft"
                               : "dataset[%d] %s: these rows are %s pairs (prompt, chosen, rejected), which a "
                                 "preference method trains on; set method: dpo",
                   index, shown_text(st->name).s, format_name(f));
    st->assistant_only = loss_on_assistant(L, index, f);
    bool chat = f != FMT_TEXT && f != FMT_NONE && ((f != FMT_PROMPT && f != FMT_COMPLETION) || prompt_turns(&E->pending));
    /* plain text needs no template: any known name will do */
    pt_status rc = label_init(&E->lc, L->tok, chat ? L->template : "chatml", st->assistant_only,
                              (int32_t)L->o->max_seq_length);
    if (rc != PT_OK) {
        err_context("chat_template");
        return rc;
    }
    E->lc.max_prompt = (int32_t)L->o->max_prompt_length, E->lc.max_completion = (int32_t)L->o->max_completion_length;
    E->lc.pair_legacy = L->o->pairs_legacy;
    E->lc.pair_reward = L->o->pairs_reward;
    E->lc.unpaired = L->o->unpaired;
    E->lc.single = L->o->singles;
    if (chat && !(L->o->chat_template && *L->o->chat_template)) rc = label_use_tool_template(&E->lc);
    if (rc != PT_OK) {
        label_free(&E->lc);
        return rc;
    }
    E->kwargs = data_template_kwargs(L->o->chat_template_kwargs);
    E->lc.kwargs = E->kwargs;
    st->template = chat ? E->lc.template : NULL;
    if (chat) warn_template(L, index);
    E->ready = true;
    return PT_OK;
}

/* Count this batch's rows (the counting part); with shuffle, their examples kept aside in row order. */
static pt_status entry_tally(entry_run *E, const data_rows *rows, data_slot *slots)
{
    pt_dataset *into = E->d->shuffle ? &E->shuffled : E->L->out;
    for (size_t i = 0; i < rows->n; i++) {
        size_t before = into->n;
        TRY(tally(into, E->st, &rows->v[i], &slots[i]));
        if (!E->d->shuffle) continue;
        if (E->n_rows == E->cap_rows) {
            E->cap_rows = E->cap_rows ? 2 * E->cap_rows : 1024;
            long *grown = realloc(E->row_ex, sizeof *grown * E->cap_rows);
            if (!grown) abort();
            E->row_ex = grown;
        }
        E->row_ex[E->n_rows++] = into->n > before ? (long)before : -1;
    }
    return PT_OK;
}

/* Tokenize this part's rows of the batch, exchange, count; the rows are freed. */
static pt_status entry_batch(entry_run *E, data_rows *rows)
{
    const dataset_work *w = &E->L->o->work;
    data_slot *slots = calloc(rows->n + 1, sizeof *slots);
    if (!slots) abort();
    run_rows(E->L, &E->lc, E->f, rows, slots);
    pt_status rc = PT_OK;
    if (w->parts > 1) {
        rc = share_slots(E->L, PT_OK, slots, rows->n);
        E->agreed = rc != PT_OK;
    }
    if (rc == PT_OK && E->whole) rc = entry_tally(E, rows, slots);
    slots_free(slots, rows->n);
    for (size_t i = 0; i < rows->n; i++) json_decref(rows->v[i].obj);
    rows->n = 0;
    return rc;
}

static pt_status entry_rows(entry_run *E, data_rows *rows)
{
    rows_step(E->d, &E->rs, rows, E->st);
    if (E->ready) return entry_batch(E, rows);
    for (size_t i = 0; i < rows->n; i++) rows_push(&E->pending, rows->v[i].obj, &rows->v[i]);
    rows->n = 0;
    data_format f = E->L->o->prompts ? (prompt_seen(&E->pending) ? FMT_PROMPT : FMT_NONE)
                                     : detect(&E->pending, E->L->o->dataset_text_field, E->L->o->pairs || E->L->o->unpaired,
                                              E->L->o->singles);
    if (f == FMT_NONE) return PT_OK;
    TRY(entry_start(E, f));
    return entry_batch(E, &E->pending);
}

/* rows_sink's take */
static pt_status entry_take(void *arg, data_rows *rows)
{
    entry_run *E = arg;
    pt_status rc = entry_rows(E, rows);
    E->in_sink = rc != PT_OK;
    return rc;
}

/* After the last batch: rows that never had a format, the shuffle, the check that a row is kept. */
static pt_status entry_end(entry_run *E)
{
    if (!E->ready) {
        TRY(entry_start(E, FMT_NONE));
        TRY(entry_batch(E, &E->pending));
    }
    if (E->whole && E->d->shuffle && E->n_rows) {
        size_t *perm = malloc(sizeof *perm * E->n_rows);
        if (!perm) abort();
        rng_permutation(E->n_rows, (uint64_t)E->d->seed, perm);
        for (size_t i = 0; i < E->n_rows; i++)
            if (E->row_ex[perm[i]] >= 0) push_example(E->L->out, &E->shuffled.ex[E->row_ex[perm[i]]]);
        free(perm);
    }
    if (E->whole && E->st->kept == 0) return no_usable_row(E->st, E->index);
    return PT_OK;
}

static void entry_free(entry_run *E)
{
    if (E->ready) label_free(&E->lc);
    json_decref(E->kwargs);
    rows_free(&E->pending);
    for (size_t i = 0; i < E->shuffled.n; i++) example_free(&E->shuffled.ex[i]); /* those not moved */
    free(E->shuffled.ex);
    free(E->row_ex);
}

/* One entry: its files read batch by batch (entry_run). With several parts, every part ends the
 * entry with the same status: a failure in an exchange is every part's, and otherwise each part
 * takes part in one more exchange with its own status (a part that failed on its own meets the
 * others' next batch, or their last exchange). */
static pt_status load_entry(const loader *L, int index)
{
    const pt_dataset_config *d = &L->o->datasets[index];
    const dataset_work *w = &L->o->work;
    pt_dataset_stats *st = &L->out->stats[index];
    entry_run E = {.L = L, .index = index, .d = d, .st = st, .whole = w->parts <= 1 || w->part == 0};
    data_files files = {0};
    data_rows rows = {0};
    st->name = xstrdup(d->name);
    pt_status rc = source_files(d, &files);
    rows_sink sink = {entry_take, &E};
    for (int i = 0; rc == PT_OK && i < files.n; i++) rc = reader_stream(files.path[i], i, files.format, &rows, st, &sink);
    if (rc != PT_OK && !E.in_sink) err_context("dataset[%d]", index);
    if (rc == PT_OK) rc = entry_end(&E);
    rows_end(d, index, &E.rs, rc == PT_OK ? L->warn : NULL);
    if (w->parts > 1 && !(rc != PT_OK && E.agreed)) rc = share_slots(L, rc, NULL, 0);
    entry_free(&E);
    rows_free(&rows);
    source_free(&files);
    return rc;
}

pt_status dataset_load(const dataset_options *o, const pt_tokenizer *tok, FILE *warn, pt_dataset *out)
{
    /* a pair is one example of two sequences (segments 1 and 2), as a packed example is; so is a
     * pair KTO unrolls, and KTO keeps a completion up to max_seq_length beside its prompt */
    bool two = o->pairs || o->unpaired || o->prompts;
    *out = (pt_dataset){.max_len = o->prompts ? INT32_MAX : (int32_t)o->max_seq_length * (two ? 2 : 1), .packed = two};
    if (o->n_datasets == 0) return ERR(PT_ERR_USER, "dataset: no dataset given");
    out->stats = calloc((size_t)o->n_datasets, sizeof *out->stats);
    if (!out->stats) abort();
    out->n_stats = o->n_datasets;
    loader L = {o, tok, dataset_template_name(o->chat_template, tok), warn, out};
    pt_status rc = PT_OK;
    for (int i = 0; i < o->n_datasets && rc == PT_OK; i++) rc = load_entry(&L, i);
    if (rc != PT_OK) dataset_free(out);
    return rc;
}

pt_status dataset_prepare(const dataset_options *o, const pt_tokenizer *tok, FILE *warn, pt_dataset *train,
                          pt_dataset *eval)
{
    pt_dataset all;
    *train = *eval = (pt_dataset){0};
    TRY(dataset_load(o, tok, warn, &all));
    if (o->work.parts > 1 && o->work.part != 0) { /* part 0 has the examples */
        dataset_free(&all);
        return PT_OK;
    }
    pt_status rc = dataset_split(&all, o->val_split_ratio, (uint64_t)o->seed, train, eval);
    if (rc == PT_OK && o->unpaired) rc = dataset_unpair(train);
    if (rc == PT_OK && o->unpaired) rc = dataset_unpair(eval);
    if (rc == PT_OK && o->packing) rc = dataset_pack(train);
    if (rc == PT_OK && o->packing && eval->n) rc = dataset_pack(eval);
    if (rc != PT_OK) {
        dataset_free(&all);
        dataset_free(train);
        dataset_free(eval);
    }
    return rc;
}

void dataset_free(pt_dataset *ds)
{
    for (size_t i = 0; !ds->backing && i < ds->n; i++) example_free(&ds->ex[i]);
    free(ds->ex);
    if (ds->backing && ds->backing_mapped) munmap(ds->backing, ds->backing_len);
    else free(ds->backing);
    for (int i = 0; i < ds->n_stats; i++) stats_free(&ds->stats[i]);
    free(ds->stats);
    *ds = (pt_dataset){0};
}
