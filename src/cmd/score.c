/* score.c — `ptrain score ADAPTER|CONFIG --data FILE [--model MODEL] ...`: a reward model's scores
 * of preference pairs, or of single rows (prompt + completion, turns or text: one score each, as
 * AutoModelForSequenceClassification scores the tokenized text; the data layer's singles). ADAPTER is what `method: reward` saves (PEFT's SEQ_CLS files: the LoRA and the
 * score head, base_model.model.score.weight); a CONFIG (a method: reward config file) names it
 * (final_model_dir) with its model, revision, load_in_4bit, max_seq_length and chat template, each
 * replaced by its option when given; the rows are tokenized as that training tokenizes
 * them (prompt/chosen/rejected, text or turns: the data layer's pairs_reward, TRL's RewardTrainer),
 * and each pair's two sequences are scored by the reward model's forward without a gradient
 * (step_scores: the LoRA model, the final norm, the score head on the last non-pad token, as
 * transformers' sequence classification). Prints one line per kept pair: its place among them, the
 * chosen and rejected scores, the margin (chosen - rejected) and 1 when chosen scores higher;
 * single rows: one line each, its place and its score; then the means on stderr. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/adapter.h"
#include "ptrain/config.h"
#include "ptrain/dataset.h"
#include "ptrain/log.h"
#include "ptrain/model_io.h"
#include "ptrain/peft.h"
#include "ptrain/preference.h"
#include "ptrain/score_cmd.h"
#include "ptrain/step.h"
#include "ptrain/tokenizer.h"

#define DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct {
    const char *adapter, *model, *revision, *data, *chat_template;
    pt_device device;
    bool no_4bit, model_given, length_given;
    int threads;
    long max_length, batch;
} score_options;

static const char score_usage[] =
    "Usage: ptrain score ADAPTER|CONFIG --data FILE [--model MODEL] [--no-4bit] [--max-length N]\n"
    "                    [--batch N] [--chat-template NAME] [--threads N] [--device auto|cpu|cuda]\n"
    "A reward model's scores of preference pairs, one line per pair: its place, the chosen and the\n"
    "rejected score, the margin (chosen - rejected) and 1 when chosen scores higher (else 0); or of\n"
    "single rows, one line per row: its place and its score; the means on stderr.\n"
    "ADAPTER: the directory `method: reward` saved (PEFT's SEQ_CLS adapter with its score head).\n"
    "CONFIG: a method: reward config: its final_model_dir, model_name (and revision), load_in_4bit,\n"
    "max_seq_length and chat_template, unless the options say otherwise.\n"
    "FILE: a .jsonl, .json, .csv or .parquet file of pairs (prompt/chosen/rejected, text or turns) or\n"
    "of single rows (prompt/completion as text or turns, messages, conversations or text), tokenized\n"
    "as reward training tokenizes a chosen (pairs and rows longer than --max-length, default 1024, as\n"
    "TRL's RewardConfig, are left out and counted).\n"
    "MODEL: the base the adapter was trained on (a .gguf file, an HF model directory or id); default\n"
    DEFAULT_MODEL ". --no-4bit: keep its 8/16/32-bit weights (default: NF4, as training runs).\n";

static pt_status parse_long(const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < lo || v > hi)
        return ERR(PT_ERR_USAGE, "%s expects an integer from %ld to %ld, got '%s'\nTry 'ptrain score --help'.", opt,
                   lo, hi, shown_text(text).s);
    *out = v;
    return PT_OK;
}

/* Returns PT_OK, PT_ERR_USAGE, or -1 after printing --help. */
static int score_parse(int argc, char **argv, score_options *o)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},   {"data", required_argument, 0, 'D'},
        {"no-4bit", no_argument, 0, '4'},       {"max-length", required_argument, 0, 'L'},
        {"batch", required_argument, 0, 'b'},   {"chat-template", required_argument, 0, 'C'},
        {"threads", required_argument, 0, 'T'}, {"device", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    *o = (score_options){.model = DEFAULT_MODEL, .device = DEVICE_AUTO, .max_length = 1024, .batch = 8};
    long v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg, o->model_given = true; break;
        case 'D': o->data = optarg; break;
        case '4': o->no_4bit = true; break;
        case 'C': o->chat_template = optarg; break;
        case 'L': TRY(parse_long("--max-length", optarg, 2, 1 << 24, &o->max_length)); o->length_given = true; break;
        case 'b': TRY(parse_long("--batch", optarg, 1, 256, &o->batch)); break;
        case 'T': TRY(parse_long("--threads", optarg, 1, 4096, &v)); o->threads = (int)v; break;
        case 'd':
            if (!backend_device_parse(optarg, &o->device))
                return ERR(PT_ERR_USAGE, "--device expects auto, cpu or cuda, got '%s'\nTry 'ptrain score --help'.",
                           shown_text(optarg).s);
            break;
        case 'h': fputs(score_usage, stdout); return -1;
        default:
            return ERR(PT_ERR_USAGE, "unknown or incomplete option '%s'\nTry 'ptrain score --help'.",
                       shown_text(argv[optind - 1]).s);
        }
    }
    if (optind < argc) o->adapter = argv[optind++];
    if (optind < argc)
        return ERR(PT_ERR_USAGE, "unexpected argument '%s'\nTry 'ptrain score --help'.", shown_text(argv[optind]).s);
    if (!o->adapter) return ERR(PT_ERR_USAGE, "no ADAPTER given (the directory method: reward saved)\nTry 'ptrain score --help'.");
    if (!o->data) return ERR(PT_ERR_USAGE, "--data FILE is required\nTry 'ptrain score --help'.");
    return PT_OK;
}

/* The pairs of FILE, tokenized as method: reward tokenizes them. */
static pt_status read_pairs(const score_options *o, const pt_tokenizer *tok, pt_dataset *ds)
{
    pt_dataset_config entry = {.name = (char *)o->data, .split_type = "train", .format = DATASET_JSON,
                               .num_samples = -1, .line = 0};
    dataset_options d = {.datasets = &entry, .n_datasets = 1, .max_seq_length = o->max_length,
                         .chat_template = o->chat_template, .assistant_only_loss = PT_FALSE,
                         .dataset_text_field = "text", .pairs = true, .pairs_reward = true, .singles = true};
    TRY(dataset_load(&d, tok, stderr, ds));
    dataset_report(ds, stderr);
    return PT_OK;
}

typedef struct {
    double margin, correct, reward;
    size_t pairs;
    bool single; /* rows scored one by one, not pairs */
} score_sums;

/* The scores of examples first..first+n (each one sequence, or a pair of two) printed. */
static void score_print(const double *score, size_t first, size_t n, score_sums *s)
{
    for (size_t k = 0; k < n; k++) {
        if (s->single) {
            printf("%zu\t%.6f\n", first + k, score[k]);
            s->reward += score[k], s->pairs++;
            continue;
        }
        double c = score[2 * k], r = score[2 * k + 1];
        printf("%zu\t%.6f\t%.6f\t%.6f\t%d\n", first + k, c, r, c - r, c > r);
        s->margin += c - r, s->correct += c > r, s->reward += c + r, s->pairs++;
    }
}

/* Examples first..first+n of ds scored and printed. */
static pt_status score_batch(const pt_model *m, const pt_adapter *ad, const float *w, int32_t pad, const pt_dataset *ds,
                             size_t first, size_t n, score_sums *s)
{
    size_t idx[256], per = s->single ? 1 : 2;
    for (size_t k = 0; k < n; k++) idx[k] = first + k;
    pt_batch b;
    TRY(batch_collate(ds, idx, n, &b));
    int rows = b.rows * b.cols;
    int32_t *row = malloc(sizeof(int32_t) * (size_t)(rows + 1));
    double *score = calloc(per * n, sizeof *score);
    pt_status st = row && score ? PT_OK : ERR(PT_ERR_NOMEM, "no memory for %zu examples' scores", n);
    int n_seq = st == PT_OK ? preference_score_rows(b.ids, b.segments, rows, pad, row) : 0;
    if (st == PT_OK && n_seq != (int)(per * n))
        st = ERR(PT_ERR_INTERNAL, "score: %d sequences for %zu examples", n_seq, n);
    train_batch v = {b.rows, b.cols, b.ids, b.targets, b.pos, b.segments};
    if (st == PT_OK) st = step_scores(m, ad, &v, w, row, n_seq, NULL, score);
    if (st == PT_OK) score_print(score, first, n, s);
    free(row), free(score);
    batch_free(&b);
    return st;
}

static pt_status score_run(const score_options *o)
{
    pt_tokenizer *tok = NULL;
    pt_backend *be = NULL;
    pt_model m = {0};
    pt_adapter ad = {0};
    pt_dataset ds = {0};
    float *w = NULL;
    pt_backend_options bo = {.device = o->device, .threads = o->threads};
    pt_load_options lo = {.load_in_4bit = !o->no_4bit};
    pt_status st = backend_open(&bo, &be);
    if (st == PT_OK) st = model_load(o->model, o->revision, &lo, be, &m, &tok, NULL, 0);
    if (st == PT_OK) st = peft_read_score(o->adapter, m.cfg.dim, &w);
    if (st == PT_OK && !w)
        st = ERR(PT_ERR_USER, "%s has no score head (base_model.model.score.weight in adapter_model.safetensors): it is "
                 "not a reward model's adapter; train one with method: reward", shown_text(o->adapter).s);
    if (st == PT_OK) st = adapter_load(o->adapter, &m, &ad);
    if (st == PT_OK) st = read_pairs(o, tok, &ds);
    int32_t pad = tokenizer_pad(tok) >= 0 ? tokenizer_pad(tok) : tokenizer_eos(tok); /* as reward training */
    score_sums s = {.single = st == PT_OK && !(ds.n_stats && ds.stats[0].format &&
                                               !strcmp(ds.stats[0].format, "preference"))};
    if (st == PT_OK) fputs(s.single ? "row\tscore\n" : "pair\tchosen\trejected\tmargin\tcorrect\n", stdout);
    for (size_t i = 0; st == PT_OK && i < ds.n; i += (size_t)o->batch)
        st = score_batch(&m, &ad, w, pad, &ds, i, ds.n - i < (size_t)o->batch ? ds.n - i : (size_t)o->batch, &s);
    if (st == PT_OK && s.pairs && s.single) fprintf(stderr, "%zu rows: mean score %.6f\n", s.pairs, s.reward / (double)s.pairs);
    else if (st == PT_OK && s.pairs)
        fprintf(stderr, "%zu pairs: mean margin %.6f, accuracy %.6f, mean reward %.6f\n", s.pairs,
                s.margin / (double)s.pairs, s.correct / (double)s.pairs, s.reward / (2.0 * (double)s.pairs));
    free(w);
    dataset_free(&ds);
    adapter_free(&ad);
    model_free(&m);
    backend_close(be);
    tokenizer_free(tok);
    return st;
}

/* A CONFIG in place of ADAPTER: what it says, where no option says otherwise. */
static pt_status from_config(score_options *o, const pt_config *cfg)
{
    if (cfg->method != METHOD_REWARD)
        return ERR(PT_ERR_USER, "%s: method is %s; ptrain score scores with a reward model's adapter (method: reward)",
                   shown_text(cfg->path).s, config_method_choices[cfg->method]);
    o->adapter = cfg->final_model_dir;
    if (!o->model_given) o->model = cfg->model_name, o->revision = cfg->revision;
    if (!cfg->load_in_4bit) o->no_4bit = true;
    if (!o->length_given) o->max_length = cfg->max_seq_length;
    if (!o->chat_template) o->chat_template = cfg->chat_template;
    return PT_OK;
}

pt_status score_main(int argc, char **argv)
{
    score_options o;
    int parsed = score_parse(argc, argv, &o);
    if (parsed < 0) return PT_OK;
    if (parsed != PT_OK) return (pt_status)parsed;
    struct stat sb;
    if (stat(o.adapter, &sb) != 0 || !S_ISREG(sb.st_mode)) return score_run(&o); /* a directory: the adapter */
    pt_config cfg;
    TRY(config_load(o.adapter, &cfg, stderr));
    pt_status st = from_config(&o, &cfg);
    if (st == PT_OK) st = score_run(&o);
    config_free(&cfg);
    return st;
}
