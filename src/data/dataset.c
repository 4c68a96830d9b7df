/* dataset.c — dataset_load: for each `dataset:` entry in config order, find its files, read the
 * rows, apply rename/filter/num_samples/shuffle, detect the format from the first row that has
 * one, then format and tokenize every row (in parallel, each row into its own slot, so the result
 * does not depend on the thread count), and tally the outcome of each row in order. Split across
 * the ranks of a job (dataset_work), each rank tokenizes its share of the rows and rank 0 counts
 * them all (parts.c). */
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
    return detected ? detected : own ? "model" : "chatml";
}

/* ---- one row ---- */

static void run_row(const label_ctx *lc, data_format f, const char *text_field, const data_row *r, data_slot *s)
{
    strbuf why = {0};
    data_record rec;
    s->row = format_row(f, r->obj, text_field, !strcmp(lc->template, "alpaca"), &rec, &why);
    if (s->row == ROW_OK) {
        s->rc = f == FMT_PROMPT       ? label_prompt(lc, &rec, &s->ex, &s->truncated, &s->label)
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

static pt_status tally_all(pt_dataset *ds, pt_dataset_stats *st, const data_rows *rows, data_slot *slots)
{
    pt_status rc = PT_OK;
    for (size_t i = 0; i < rows->n && rc == PT_OK; i++) rc = tally(ds, st, &rows->v[i], &slots[i]);
    return rc;
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

static data_format detect(const data_rows *rows, const char *text_field, bool pairs)
{
    for (size_t i = 0; i < rows->n; i++) {
        data_format f = format_detect(rows->v[i].obj, text_field, pairs);
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

static json_t *template_kwargs(const pt_strmap *kw)
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

/* GRPO: whether the first row with a prompt has it as turns (the chat template is then needed). */
static bool prompt_turns(const data_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++) {
        const json_t *p = json_object_get(rows->v[i].obj, "prompt");
        if (p) return json_is_array(p);
    }
    return false;
}

/* Tokenize this part's rows of one entry into *slots (one per row). */
static pt_status tokenize_entry(const loader *L, int index, const data_rows *rows, pt_dataset_stats *st,
                                data_slot **slots)
{
    data_format f = L->o->prompts ? FMT_PROMPT : detect(rows, L->o->dataset_text_field, L->o->pairs || L->o->unpaired);
    st->format = format_name(f);
    if (L->o->unpaired && f != FMT_NONE && f != FMT_UNPAIRED && f != FMT_PREFERENCE)
        return ERR(PT_ERR_USER,
                   "dataset[%d] %s: KTO reads unpaired rows (prompt, completion, label) or preference pairs (prompt, "
                   "chosen, rejected), but these rows are %s; give such a dataset or set method: sft",
                   index, shown_text(st->name).s, format_name(f));
    if (!L->o->unpaired && f == FMT_UNPAIRED)
        return ERR(PT_ERR_USER,
                   "dataset[%d] %s: these rows are unpaired preferences (prompt, completion, label), which KTO trains "
                   "on; set method: kto",
                   index, shown_text(st->name).s);
    if (!L->o->unpaired && f != FMT_NONE && (f == FMT_PREFERENCE) != L->o->pairs)
        return ERR(PT_ERR_USER,
                   L->o->pairs ? "dataset[%d] %s: the method reads preference rows (prompt, chosen, rejected), but "
                                 "these rows are %s; give a preference dataset or set method: sft"
                               : "dataset[%d] %s: these rows are %s pairs (prompt, chosen, rejected), which a "
                                 "preference method trains on; set method: dpo",
                   index, shown_text(st->name).s, format_name(f));
    st->assistant_only = loss_on_assistant(L, index, f);
    bool chat = f != FMT_TEXT && f != FMT_NONE && (f != FMT_PROMPT || prompt_turns(rows));
    label_ctx lc; /* plain text needs no template: any known name will do */
    pt_status rc = label_init(&lc, L->tok, chat ? L->template : "chatml", st->assistant_only,
                              (int32_t)L->o->max_seq_length);
    lc.max_prompt = (int32_t)L->o->max_prompt_length, lc.max_completion = (int32_t)L->o->max_completion_length;
    lc.pair_legacy = L->o->pairs_legacy;
    lc.pair_reward = L->o->pairs_reward;
    lc.unpaired = L->o->unpaired;
    if (rc != PT_OK) {
        err_context("chat_template");
        return rc;
    }
    json_t *kwargs = template_kwargs(L->o->chat_template_kwargs);
    lc.kwargs = kwargs;
    st->template = chat ? lc.template : NULL;
    if (chat) warn_template(L, index);
    *slots = calloc(rows->n + 1, sizeof **slots);
    if (!*slots) abort();
    run_rows(L, &lc, f, rows, *slots);
    label_free(&lc);
    json_decref(kwargs);
    return PT_OK;
}

static pt_status read_entry(const pt_dataset_config *d, data_files *files, data_rows *rows, pt_dataset_stats *st)
{
    TRY(source_files(d, files));
    for (int i = 0; i < files->n; i++) TRY(reader_read(files->path[i], i, files->format, rows, st));
    return PT_OK;
}

/* One entry: read, transform, tokenize this part's rows, then (several parts) share them, and
 * count every row on the part that has them all. before: an earlier entry failed on this part
 * after the parts last agreed; the entry then only takes part in the exchange, which stops every
 * part. *agreed: every part has this status (it came from the exchange). */
static pt_status load_entry(const loader *L, int index, pt_status before, bool *agreed)
{
    const pt_dataset_config *d = &L->o->datasets[index];
    const dataset_work *w = &L->o->work;
    pt_dataset_stats *st = &L->out->stats[index];
    data_files files = {0};
    data_rows rows = {0};
    data_slot *slots = NULL;
    pt_status rc = before;
    if (rc == PT_OK) {
        st->name = xstrdup(d->name);
        rc = read_entry(d, &files, &rows, st);
        if (rc != PT_OK) err_context("dataset[%d]", index);
    }
    if (rc == PT_OK) {
        rows_transform(d, index, &rows, st, L->warn);
        rc = tokenize_entry(L, index, &rows, st, &slots);
    }
    bool whole = w->parts <= 1 || w->part == 0; /* this part counts the rows */
    if (w->parts > 1) rc = share_slots(L, rc, slots, rows.n);
    *agreed = w->parts <= 1 || rc != PT_OK;
    if (rc == PT_OK && whole) rc = tally_all(L->out, st, &rows, slots);
    if (rc == PT_OK && whole && st->kept == 0) rc = no_usable_row(st, index);
    slots_free(slots, rows.n);
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
    for (int i = 0; i < o->n_datasets; i++) {
        bool agreed;
        rc = load_entry(&L, i, rc, &agreed);
        if (rc != PT_OK && agreed) break;
    }
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
