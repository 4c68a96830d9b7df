/* splits.c — which files of a folder (a local directory or a Hub snapshot without README configs)
 * are a split's, as datasets' get_data_patterns decides for a repository without a loading script:
 * first the sharded names data/SPLIT-00000-of-00003.* (any split name); else the default splits'
 * keywords as folder names at any depth (train/, train-x/, x_train/, ...), else as file names
 * (train-0.jsonl, x.train.csv, ...), the keyword followed (and, inside a name, preceded) by one of
 * "-._ " or a digit; else every file is train. The split's files are each of its patterns'
 * matches in turn, each pattern's sorted, a file once. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

enum { TRAIN, VALIDATION, TEST, N_SPLITS };
static const char *const split_name[N_SPLITS] = {"train", "validation", "test"};
static const char *const keywords[N_SPLITS][5] = {
    {"train", "training", NULL}, {"validation", "valid", "dev", "val", NULL}, {"test", "testing", "eval", "evaluation", NULL}};
#define SEP "[-._ 0-9]"
static const char *const dir_bases[] = {"**/%s/**", "**/%s" SEP "*/**", "**/*" SEP "%s/**", "**/*" SEP "%s" SEP "*/**"};
static const char *const file_bases[] = {"**/%s" SEP "*", "**/*" SEP "%s" SEP "*"};
#define SHARDED "data/%s-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*"

/* The default split split names (train for "training", ...), or -1. */
static int canonical(const char *split)
{
    for (int s = 0; s < N_SPLITS; s++)
        for (int k = 0; keywords[s][k]; k++)
            if (!strcmp(split, keywords[s][k])) return s;
    return -1;
}

/* The split a sharded name data/SPLIT-00000-of-00001.* gives (malloc'd), or NULL. */
static char *sharded_split(const char *rel)
{
    if (!pattern_matches("data/*-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*", rel)) return NULL;
    const char *base = strrchr(rel, '/') + 1, *cut = NULL;
    for (const char *p = base; (p = strstr(p, "-of-")) != NULL; p++) /* the last -NNNNN-of-NNNNN */
        if (p - base >= 6 && p[-6] == '-' && isdigit((unsigned char)p[-1]) && isdigit((unsigned char)p[-5]) &&
            isdigit((unsigned char)p[4]))
            cut = p - 6;
    return cut && cut > base ? strndup(base, (size_t)(cut - base)) : NULL;
}

static void add_name(pt_strlist *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->items[i], name)) return;
    char **grown = realloc(l->items, sizeof *grown * (size_t)(l->n + 1));
    if (!grown) abort();
    l->items = grown;
    l->items[l->n++] = xstrdup(name);
}

static void names_free(pt_strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    *l = (pt_strlist){0};
}

static pt_status not_there(const char *split, const char *where, const pt_strlist *have)
{
    strbuf found = {0};
    for (int i = 0; i < have->n; i++) sb_printf(&found, "%s%s", i ? ", " : "", have->items[i]);
    pt_status rc = ERR(PT_ERR_USER, "split \"%s\" is not in %s: its files name the split%s %s; set split_type to one "
                       "of them", shown_text(split).s, shown_text(where).s, have->n > 1 ? "s" : "", sb_text(&found));
    sb_free(&found);
    return rc;
}

/* Keep the files matching any of pats (in pattern order, each file once); free the others. */
static void keep_matching(data_files *f, size_t skip, char **pats, int n_pats)
{
    char **out = malloc(sizeof *out * (size_t)(f->n + 1));
    bool *taken = calloc((size_t)f->n + 1, sizeof *taken);
    if (!out || !taken) abort();
    int n = 0;
    for (int p = 0; p < n_pats; p++) /* f is sorted by path, so each pattern's files come sorted */
        for (int i = 0; i < f->n; i++)
            if (!taken[i] && pattern_matches(pats[p], f->path[i] + skip)) {
                taken[i] = true;
                out[n++] = f->path[i];
            }
    for (int i = 0; i < f->n; i++)
        if (!taken[i]) free(f->path[i]);
    free(taken);
    free(f->path);
    f->path = out;
    f->n = n;
}

/* The patterns of split s from the bases (dir or file names), malloc'd. */
static int split_patterns(int s, const char *const *bases, int n_bases, char **out)
{
    int n = 0;
    for (int k = 0; keywords[s][k]; k++)
        for (int b = 0; b < n_bases; b++) {
            strbuf p = {0};
            sb_printf(&p, bases[b], keywords[s][k]);
            out[n++] = p.data;
        }
    return n;
}

static bool any_match(const data_files *f, size_t skip, char **pats, int n)
{
    for (int i = 0; i < f->n; i++)
        for (int p = 0; p < n; p++)
            if (pattern_matches(pats[p], f->path[i] + skip)) return true;
    return false;
}

/* The keyword patterns (folder or file names): PT_OK with *done when some split has files. */
static pt_status by_keywords(data_files *f, size_t skip, const char *split, const char *where,
                             const char *const *bases, int n_bases, bool *done)
{
    char *pats[N_SPLITS][4 * 4];
    int n[N_SPLITS];
    pt_strlist have = {0};
    for (int s = 0; s < N_SPLITS; s++) {
        n[s] = split_patterns(s, bases, n_bases, pats[s]);
        if (any_match(f, skip, pats[s], n[s])) add_name(&have, split_name[s]);
    }
    int want = canonical(split);
    pt_status rc = PT_OK;
    *done = have.n > 0;
    if (*done && (want < 0 || !any_match(f, skip, pats[want], n[want]))) rc = not_there(split, where, &have);
    else if (*done) keep_matching(f, skip, pats[want], n[want]);
    for (int s = 0; s < N_SPLITS; s++)
        for (int i = 0; i < n[s]; i++) free(pats[s][i]);
    names_free(&have);
    return rc;
}

pt_status splits_pick(data_files *f, size_t skip, const char *split, const char *where)
{
    if (f->n == 0) return PT_OK; /* the caller says the folder has no data files */
    /* sharded names: the splits they give, in datasets' order (the default ones, then the others sorted) */
    pt_strlist shards = {0}, have = {0};
    for (int i = 0; i < f->n; i++) {
        char *s = sharded_split(f->path[i] + skip);
        if (s) add_name(&shards, s);
        free(s);
    }
    if (shards.n) {
        for (int s = 0; s < N_SPLITS; s++)
            for (int i = 0; i < shards.n; i++)
                if (!strcmp(shards.items[i], split_name[s])) add_name(&have, split_name[s]);
        char *sorted[64];
        int n_sorted = 0;
        for (int i = 0; i < shards.n && n_sorted < 64; i++)
            if (canonical(shards.items[i]) < 0 || strcmp(split_name[canonical(shards.items[i])], shards.items[i]))
                sorted[n_sorted++] = shards.items[i];
        for (int i = 1; i < n_sorted; i++) /* a few names: insertion sort */
            for (int j = i; j > 0 && strcmp(sorted[j - 1], sorted[j]) > 0; j--) {
                char *t = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = t;
            }
        for (int i = 0; i < n_sorted; i++) add_name(&have, sorted[i]);
        bool there = false;
        for (int i = 0; i < have.n; i++) there = there || !strcmp(have.items[i], split);
        if (!there && canonical(split) >= 0) { /* "training" names the train split, and so on */
            const char *name = split_name[canonical(split)];
            for (int i = 0; i < have.n && !there; i++) there = !strcmp(have.items[i], name);
            if (there) split = name;
        }
        pt_status rc = PT_OK;
        if (!there) rc = not_there(split, where, &have);
        else {
            strbuf p = {0};
            sb_printf(&p, SHARDED, split);
            keep_matching(f, skip, &p.data, 1);
            sb_free(&p);
        }
        names_free(&shards);
        names_free(&have);
        return rc;
    }
    bool done;
    TRY(by_keywords(f, skip, split, where, dir_bases, 4, &done));
    if (done) return PT_OK;
    TRY(by_keywords(f, skip, split, where, file_bases, 2, &done));
    if (done) return PT_OK;
    if (canonical(split) != TRAIN) { /* no file names a split: every one is train */
        add_name(&have, "train");
        pt_status rc = not_there(split, where, &have);
        names_free(&have);
        return rc;
    }
    return PT_OK;
}
