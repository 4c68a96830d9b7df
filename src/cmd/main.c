/* main.c — the ptrain command: parse the command line and dispatch to train or check.
 *
 *   ptrain [train] CONFIG      fine-tune as CONFIG says (under mpirun/srun: one rank per GPU)
 *   ptrain check CONFIG        parse, validate and print the resolved configuration
 *   ptrain generate ...        text from a model, streamed (src/cmd/generate.c)
 *   ptrain inspect MODEL       what a model is and the memory it needs (src/cmd/inspect.c)
 *   ptrain tokenize ...        the token ids of a text (src/cmd/tokenize.c)
 *   ptrain score ...           a reward model's scores of preference pairs (src/cmd/score.c)
 *   ptrain inspect CKPT.h5     what a checkpoint holds, and whether it is whole
 *   ptrain export ...          the adapter for PEFT/llama.cpp, merged models, a Modelfile (src/export)
 *   ptrain push DIR            what a run staged for the Hub and could not upload (src/hub)
 *   ptrain status DIR          what a run has done and whether it is running (src/watch)
 *   ptrain plot DIR            the picture of a run: losses, learning rate, ... (src/watch)
 *
 * Exit codes: 0 ok, 1 user error (bad config/model/data/checkpoint), 2 usage, 6 training diverged
 * (a non-finite loss or gradient norm; nothing bad saved), 75 checkpointed after a stop signal (run
 * me again, with resume_from_checkpoint: true), 130 interrupted,
 * anything else an internal error. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/backend.h"
#include "ptrain/blas_kernel.h"
#include "ptrain/config.h"
#include "ptrain/dist.h"
#include "ptrain/export.h"
#include "ptrain/generate.h"
#include "ptrain/hub.h"
#include "ptrain/inspect.h"
#include "ptrain/log.h"
#include "ptrain/signals.h"
#include "ptrain/score_cmd.h"
#include "ptrain/tokenize_cmd.h"
#include "ptrain/train.h"
#include "ptrain/util.h"
#include "ptrain/watch.h"

static const char usage_text[] =
    "Usage: ptrain [train] CONFIG        fine-tune with LoRA on a 4-bit base, as CONFIG says\n"
    "       ptrain check CONFIG          validate CONFIG and print the resolved settings\n"
    "       ptrain generate --prompt TEXT [--model MODEL] [--chat] ...   text from a model\n"
    "                                    (see ptrain generate --help)\n"
    "       ptrain inspect MODEL [...]    architecture, sizes, tensor types, tokenizer, chat\n"
    "                                    template and memory per rank (see ptrain inspect --help)\n"
    "       ptrain inspect checkpoint-N.h5  a checkpoint's step, loss, run and model; verifies it\n"
    "       ptrain tokenize [--model MODEL] [FILE|-] ...   the token ids (or pieces) of a text as the\n"
    "                                    model's tokenizer gives them (see ptrain tokenize --help)\n"
    "       ptrain score ADAPTER --data FILE [--model MODEL] ...   a reward model's scores of\n"
    "                                    preference pairs (see ptrain score --help)\n"
    "       ptrain export CONFIG | --model MODEL --adapter DIR --out DIR [...]   the adapter for\n"
    "                                    PEFT and llama.cpp, merged models (HF, GGUF), an Ollama\n"
    "                                    Modelfile (see ptrain export --help)\n"
    "       ptrain push OUTPUT_DIR [--repo ID] [--public]   upload to the Hugging Face Hub what a\n"
    "                                    run with push_to_hub staged and could not push (see docs/hub.md)\n"
    "       ptrain status OUTPUT_DIR [--json]   step of total, losses, speed, checkpoints, resumes,\n"
    "                                    uploads waiting, and whether the run is alive (any node)\n"
    "       ptrain plot OUTPUT_DIR [--out FILE.png]   train/eval loss, learning rate, gradient norm\n"
    "                                    and tokens/s against the step (default OUTPUT_DIR/training.png)\n"
    "       ptrain --help | --version\n"
    "\n"
    "CONFIG is a YAML file (see share/examples/ and docs/configuration.md); `--config CONFIG`\n"
    "is accepted in place of CONFIG. Launch on several GPUs or nodes with\n"
    "  mpirun -np 2 ptrain config.yaml      or      srun --mpi=pmix ptrain config.yaml\n"
    "Each rank loads the whole 4-bit model on its own device; rank 0 prints and writes files.\n"
    "\n"
    "Exit status: 0 ok, 1 bad input (config, model, data, checkpoint), 2 usage error,\n"
    "6 training diverged (a NaN or infinite loss or gradient norm; nothing after it saved),\n"
    "75 checkpointed after SIGUSR1/SIGTERM/Ctrl-C (with resume_from_checkpoint: true the same\n"
    "command continues; the message says what to set otherwise),\n"
    "130 interrupted by a second Ctrl-C, other values an internal error.\n"
    "Environment: HF_TOKEN (publishing only; never logged; else huggingface_hub's token file),\n"
    "HF_ENDPOINT (the Hub), HF_HOME / HF_HUB_CACHE (model ids).\n";

typedef enum { CMD_TRAIN, CMD_CHECK } command;

typedef struct {
    command cmd;
    const char *config;
} cli_args;

static pt_status usage_error(const char *what, const char *arg)
{
    return ERR(PT_ERR_USAGE, "%s%s%s%s\nTry 'ptrain --help'.", what, arg ? " '" : "", arg ? shown_text(arg).s : "",
               arg ? "'" : "");
}

/* Returns PT_OK with args filled, PT_ERR_USAGE, or -1 for "done" (help/version printed). */
static int cli_parse(int argc, char **argv, cli_args *args)
{
    args->cmd = CMD_TRAIN;
    args->config = NULL;
    int i = 1;
    if (i < argc && (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))) {
        fputs(usage_text, stdout);
        return -1;
    }
    if (i < argc && (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V"))) {
        printf("ptrain %s\nbackends: %s\n", PACKAGE_VERSION, backend_list());
        return -1;
    }
    if (i < argc && !strcmp(argv[i], "check")) args->cmd = CMD_CHECK, i++;
    else if (i < argc && !strcmp(argv[i], "train")) i++;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc && !args->config) args->config = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) return usage_error("unknown option", argv[i]);
        else if (!args->config) args->config = argv[i];
        else return usage_error("unexpected argument", argv[i]);
    }
    if (!args->config) return usage_error("no config file given", NULL);
    return PT_OK;
}

/* The settings only known at launch: ranks, threads, backend, token presence (never its value). */
static void print_launch(const pt_config *cfg, const pt_dist *d, int threads)
{
    const char *backend = backend_device_names[backend_resolve(cfg->device)];
    log_info("%-30s %d (%d on this node)\n", "launch.ranks", d->world, d->local_world);
    log_info("%-30s %d\n", "launch.nodes", d->nodes);
    log_info("%-30s %d\n", "launch.threads_per_rank", threads);
    log_info("%-30s %s (built: %s)\n", "launch.backend", backend, backend_list());
    log_info("%-30s %s\n", "env.HF_TOKEN", getenv("HF_TOKEN") ? "set (hidden)" : "not set");
}

/* Every rank resolved the config rank 0 did; a rank that did not names the keys that differ (ten,
 * then how many more). */
static pt_status check_same_config(const pt_dist *d, const pt_config *cfg)
{
    const char *const *names = config_key_names();
    int n = 0;
    while (names[n]) n++;
    uint64_t *hashes = malloc(sizeof *hashes * (size_t)n);
    bool *differ = malloc(sizeof *differ * (size_t)n);
    pt_status st = hashes && differ ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) config_key_hashes(cfg, hashes);
    if (st == PT_OK) st = dist_compare_items(d, hashes, n, differ);
    if (st != PT_OK) err_context("comparing the config with rank 0's (start every rank with the same ptrain)");
    strbuf keys = {0};
    int shown = 0, more = 0;
    for (int i = 0; st == PT_OK && i < n; i++)
        if (differ[i] && shown < 10) sb_printf(&keys, "%s%s", shown++ ? ", " : "", names[i]);
        else if (differ[i]) more++;
    if (more) sb_printf(&keys, " and %d more", more);
    if (shown)
        st = ERR(PT_ERR_USER, "the config differs from rank 0's in %s: start every rank with the same config file",
                 sb_text(&keys));
    sb_free(&keys);
    free(hashes);
    free(differ);
    return st;
}

/* Load the config on every rank and make sure all ranks resolved the same one. */
static pt_status load_config(const pt_dist *d, const char *path, pt_config *cfg)
{
    pt_status st = config_load(path, cfg, log_warn_stream());
    pt_status all = dist_agree(d, st);
    if (all != PT_OK) {
        if (st == PT_OK) config_free(cfg); /* another rank failed */
        return all;
    }
    st = config_validate_launch(cfg, d->world);
    if (st == PT_OK) st = check_same_config(d, cfg);
    st = dist_agree(d, st);
    if (st != PT_OK) config_free(cfg);
    return st;
}

/* The backend for this rank; CUDA under several ranks first shares rank 0's NCCL unique id. */
static pt_status open_backend(pt_dist *d, const pt_config *cfg, int threads, pt_backend **be)
{
    pt_backend_options opts = {.device = cfg->device, .local_rank = d->local_rank, .threads = threads,
                               .rank = d->rank, .world = d->world};
    bool cuda_here = backend_resolve(opts.device) == DEVICE_CUDA; /* the backend this rank would open */
    if (cuda_here && cfg->dtype == COMPUTE_FLOAT32) /* the CPU computes in float32: there dtype float32 holds */
        return dist_agree(d, ERR(PT_ERR_USER, "%s: dtype: float32: ptrain's CUDA backend computes in bfloat16 (float32 "
                                              "compute on the GPU is not implemented); set dtype to auto or bfloat16, "
                                              "or device: cpu, which computes in float32", shown_text(cfg->path).s));
    double cuda = cuda_here; /* every rank takes the same path */
    TRY(dist_agree(d, dist_sum_f64(d, &cuda, 1)));
    if (cuda > 0 && cuda < d->world)
        return dist_agree(d, ERR(PT_ERR_USER, "only %d of the %d ranks see a GPU (this one %s); give every rank a "
                                              "GPU, or set device: cpu", (int)cuda, d->world,
                                 cuda_here ? "does" : "does not"));
    if (d->world > 1 && cuda > 0) {
        TRY(dist_share_nccl_id(d));
        opts.nccl_id = d->nccl_id;
    }
    return dist_agree(d, backend_open(&opts, be));
}

static pt_status run(pt_dist *d, const cli_args *args)
{
    pt_config cfg;
    TRY(load_config(d, args->config, &cfg));
    int threads = cfg.threads > 0 ? (int)cfg.threads : dist_default_threads(d);
    if (cfg.threads == 0 && d->bound_cores == 1 && d->node_cores / d->local_world > 1)
        log_warn("the launcher bound each rank to one core, so each rank runs 1 thread; for more, "
                 "use mpirun --bind-to none (or --map-by socket:PE=N), or srun --cpus-per-task=N");
    pt_status st = PT_OK;
    if (args->cmd == CMD_CHECK) {
        if (d->rank == 0) config_print(&cfg, stdout);
        print_launch(&cfg, d, threads);
        log_info("%s: ok\n", shown_text(cfg.path).s);
    } else {
        pt_backend *be = NULL;
        st = open_backend(d, &cfg, threads, &be);
        if (st == PT_OK && !cfg.train) log_info("train: false: nothing to do\n");
        else if (st == PT_OK) st = train_run(&cfg, d, be, threads);
        backend_close(be);
    }
    config_free(&cfg);
    return st;
}

int main(int argc, char **argv)
{
    blas_kernel_setup(argv); /* may exec this program again with the right OPENBLAS_CORETYPE */
    if (argc > 1 && (!strcmp(argv[1], "generate") || !strcmp(argv[1], "inspect") || !strcmp(argv[1], "export") ||
                     !strcmp(argv[1], "push") || !strcmp(argv[1], "status") || !strcmp(argv[1], "plot") ||
                     !strcmp(argv[1], "tokenize") || !strcmp(argv[1], "score"))) {
        /* one process, no MPI */
        pt_status st = !strcmp(argv[1], "generate") ? generate_main(argc - 1, argv + 1)
                       : !strcmp(argv[1], "export") ? export_main(argc - 1, argv + 1)
                       : !strcmp(argv[1], "push")   ? hub_push_main(argc - 1, argv + 1)
                       : !strcmp(argv[1], "status") ? status_main(argc - 1, argv + 1)
                       : !strcmp(argv[1], "plot")   ? plot_main(argc - 1, argv + 1)
                       : !strcmp(argv[1], "tokenize") ? tokenize_main(argc - 1, argv + 1)
                       : !strcmp(argv[1], "score")    ? score_main(argc - 1, argv + 1)
                                                    : inspect_main(argc - 1, argv + 1);
        if (st != PT_OK) log_error(st);
        return st;
    }
    cli_args args;
    int parsed = cli_parse(argc, argv, &args);
    if (parsed < 0) return 0;
    if (parsed != PT_OK) {
        log_error(PT_ERR_USAGE);
        return PT_ERR_USAGE;
    }
    if (args.cmd == CMD_TRAIN) signals_install(); /* SIGUSR1/SIGTERM/SIGINT: checkpoint and exit 75 */
    pt_dist d;
    pt_status st = dist_init(&d, &argc, &argv);
    if (st != PT_OK) {
        log_error(st);
        return st;
    }
    st = run(&d, &args);
    dist_finalize(&d);
    return st;
}
