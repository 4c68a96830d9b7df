/* trainer.h — the state of one `ptrain train` run, shared by the loop (train.c) and its
 * checkpoints (train_ckpt.c). Internal to src/train. */
#ifndef PTRAIN_TRAINER_H
#define PTRAIN_TRAINER_H

#include "ptrain/saved_modules.h"
#include "ptrain/score_head.h"
#include "ptrain/preference.h"
#include "ptrain/adapter.h"
#include "ptrain/arena.h"
#include "ptrain/checkpoint.h"
#include "ptrain/config.h"
#include "ptrain/dataset.h"
#include "ptrain/dirlock.h"
#include "ptrain/dist.h"
#include "ptrain/gradsync.h"
#include "ptrain/heartbeat.h"
#include "ptrain/hub.h"
#include "ptrain/lora.h"
#include "ptrain/memplan.h"
#include "ptrain/model.h"
#include "ptrain/progress.h"
#include "ptrain/schedule.h"
#include "ptrain/tfevents.h"
#include "ptrain/tokenizer.h"
#include "ptrain/grpo.h"
#include "ptrain/reward.h"
#include "ptrain/step.h"

/* Seconds of each start-up phase on this rank (train.c), reported with the slowest rank's after
 * the first step (train_startup.c). */
enum { START_MPI, START_READ, START_QUANTIZE, START_UPLOAD, START_DATASET, START_FIRST_STEP, START_COUNT };
typedef struct {
    double s[START_COUNT];
    bool reported;
} startup_times;

/* A method's metric sums of a step or window: preference.h's, or GRPO's (grpo.h). */
#define TRAIN_SUMS ((int)GRPO_COUNT > (int)PREF_COUNT ? (int)GRPO_COUNT : (int)PREF_COUNT)

/* The logging window in progress: sums since the last logged step. */
typedef struct {
    double loss, tokens, inputs, compute_s, comm_s, start; /* tokens: with a target; inputs: all */
    int64_t steps;
    double pref[TRAIN_SUMS]; /* preference methods: the metrics' sums over pairs (preference.h); GRPO's (grpo.h) */
} log_window;

typedef struct {
    const pt_config *cfg;
    const pt_dist *d;
    pt_backend *be;
    char model_path[4096];
    pt_tokenizer *tok;
    pt_model m;
    pt_lora l;
    score_head head; /* method: reward: the score head, trained beside the adapters (dim 0: none) */
    saved_modules sm; /* modules_to_save: the embedding and LM head trained in full (none on: none) */
    lr_schedule sched_saved; /* their learning rate's schedule (cpt: embedding_learning_rate) */
    reward_set *reward; /* method: grpo: the reward functions (and their Python worker) */
    struct grpo_micro *gbuf; /* grpo: the generation batch's micro-batches (accumulation of them), kept for
                                num_iterations steps; NULL: none yet (a new run, or resumed) */
    double gbuf_counts[2];   /* their completion tokens and input tokens over every rank */
    pt_dataset train, eval;
    pt_sampler sampler;
    long epoch;
    size_t next_batch;
    lr_schedule sched;
    progress p;
    gradsync sync;
    log_window w;
    int64_t step;        /* the optimizer step running (0-based) */
    int64_t first_step;  /* where this run started (the resumed step, or 0) */
    int64_t total;       /* optimizer steps of the whole run */
    double last_loss, last_lr;
    pt_memplan plan; /* this rank's memory, by part (memplan.c) */
    pt_arena arena;  /* every activation buffer of a step or an evaluation batch, allocated once */
    startup_times start;
    /* who read the model file: this rank (train_load.c), and over the job with the ranks per node
     * (the summary's `nodes` line) */
    bool read_model;
    int model_readers, node_ranks_min, node_ranks_max;
    void *offload_host; /* use_gradient_checkpointing "unsloth" on a GPU: the layer inputs, in host memory */
    /* the run's identity, the metric history and best model: what a checkpoint stores besides
     * the tensors and the position (train_ckpt.c fills and restores it) */
    ckpt_state run;
    ckpt_layout lay;
    int64_t resumed_from; /* step of the checkpoint this run resumed from, -1: none */
    int64_t last_saved;   /* step of the newest checkpoint this run wrote (or resumed from), -1: none */
    int nonfinite_run;    /* steps in a row with a non-finite loss or gradient norm (finite.c) */
    /* test hooks (tests/cli/test_resume.sh, tests/mpi/test_dp.sh, test_diverge*.sh): 0 = off */
    int64_t fail_step, kill_step, nan_step, nan_grad_step;
    int kill_rank, step_delay_ms;
    hub_queue *hub; /* rank 0 with push_to_hub: the upload thread (train_hub.c) */
    pt_dirlock lock; /* rank 0: output_dir's lock, held for the run */
    /* watching the run (train_watch.c; rank 0) */
    heartbeat *hb;        /* output_dir/heartbeat.json, refreshed by its own thread */
    tfevents tb;          /* report_to: tensorboard; fd -1 otherwise */
    char run_name[256];   /* run_name, or the one the run it continues had, or made from the time and host */
} trainer;

/* GRPO (grpo_step.c): one micro-batch's completions, their advantages and the row of prompt +
 * completion sequences the step trains on (each completion token its own loss-head sequence). */
typedef struct grpo_micro {
    int n;             /* completions: prompts x gen */
    int gen;           /* completions per prompt: num_generations (eval: num_generations_eval) */
    int32_t **comp, *len;
    bool *ended;       /* ended with the end of turn (else cut at max_completion_length) */
    double *adv;
    pt_batch b;
    int32_t *row_seq;  /* [b.cols]: each completion token's index, -1 elsewhere */
    int32_t *tok_seq;  /* [n_tok]: the completion of each token */
    int64_t n_tok;
    double *old_nll;   /* [n_tok]: -log p of each token by the policy that sampled it (num_iterations > 1);
                          NULL: on-policy */
} grpo_micro;
/* The completions GRPO samples at most (max_completion_length, TRL's 512 when unset). */
long grpo_max_new(const pt_config *c);
/* Completions per prompt: num_generations, or in evaluation num_generations_eval (TRL's: when unset,
 * num_generations). */
int grpo_generations(const pt_config *c, bool eval);
/* The n_prompts examples idx of ds (t->train, or t->eval): their completions generated
 * (num_generations each, num_generations_eval for t->eval; seed: this micro-batch's), scored and laid out, the old log-probs taken (training with num_iterations > 1);
 * the rewards' and lengths' metrics added to sums. */
pt_status grpo_micro_make(trainer *t, const pt_dataset *ds, const size_t *idx, size_t n_prompts, uint64_t seed,
                          grpo_micro *g, double *sums);
/* An eval batch's loss as TRL's prediction_step takes it: on-policy (the ratio 1), no gradient; its
 * tokens' summed loss into sums[GRPO_LOSS] and the loss's metrics (kl, entropy, clip_ratio/ *). */
pt_status grpo_micro_eval(trainer *t, const grpo_micro *g, double *sums);

/* GRPO's evaluation metrics, TRL's names with "eval_" (grpo_eval.c). */
typedef struct {
    int n;
    const char *names[GRPO_COUNT];
    double values[GRPO_COUNT];
    char name_buf[GRPO_COUNT][112];
    double acc[GRPO_COUNT];    /* each value's sum over the eval batches ... */
    int n_acc[GRPO_COUNT];     /* ... and how many were finite (TRL leaves NaN out) */
    double loss_acc, loss_weight; /* the losses' weighted sum and the weights' */
} grpo_eval_metrics;
/* How many times the Trainer's evaluation loop keeps rank `rank`'s loss of an eval batch (TRL's
 * rule: each rank's loss repeated per_device_eval_batch_size = batch times and gathered; on the last
 * batch accelerate's gather_for_metrics keeps the first rows % (batch x world) of them when that is
 * not 0: rows counts the eval set's prompt rows, batch completions). */
double grpo_eval_weight(size_t rows, long batch, int world, int rank, bool last);
/* One eval batch (every rank's) added to out: sums, summed over the ranks, give TRL's metrics (its
 * GRPO_STEPS set to 1 when 0); loss_w, the sum over the ranks of each one's weight times its
 * sums[GRPO_LOSS], and weight, the weights' sum, give the loss: a rank's loss is its GRPO_LOSS over
 * the batch's tokens per rank (TRL's dapo normalizer), as world ranks split them. */
void grpo_eval_add(double *sums, double loss_w, double weight, int world, int n_funcs, const char *const *funcs,
                   bool with_kl, grpo_eval_metrics *out);
/* TRL's means: GRPOTrainer.log averages each metric over the eval batches (one value a batch, NaN
 * left out), the evaluation loop the losses kept (grpo_eval_weight): out->values set; returns the
 * loss (0 when no batch had a weight). */
double grpo_eval_mean(grpo_eval_metrics *out);
/* Evaluate the eval set's prompts after step (0-based count of steps done): the loss and TRL's
 * metrics, each the mean over the eval batches of that batch's (as TRL), the same on every rank. */
pt_status grpo_evaluate(trainer *t, int64_t step, double *eval_loss, grpo_eval_metrics *out);
/* Its reference pass (beta != 0) and its step: the gradient of the loss with inv_n = 1 / the
 * step's completion tokens over every rank; the loss's metrics (grpo_token_scales) added to sums. */
pt_status grpo_micro_run(trainer *t, const grpo_micro *g, step_options so, double inv_n, double *sums);
void grpo_micro_free(grpo_micro *g);
/* m as the loss head sees it at a sampling temperature (TRL's log-probs of logits / temperature): a
 * copy sharing the weights, its logit divisor times temperature. */
pt_model grpo_model_at(const pt_model *m, double temperature);

/* The run's examples (t->train, t->eval) and the sampler: from the dataset cache in output_dir,
 * or tokenized across the ranks and cached there (train_data.c). Agreed across ranks. */
pt_status trainer_load_data(trainer *t);
/* Every rank read the same dataset files (size, CRC-32, rows) and made the same examples as rank 0,
 * or every rank stops, the ranks that differ saying what they read and the fix (data_agree.c). */
pt_status trainer_agree_data(trainer *t);
/* The model and its tokenizer: read and quantized once per node into shared memory, bound by every
 * rank (train_load.c). Agreed across ranks. Counts the ranks that read the model file and the
 * ranks per node (model_readers, node_ranks_min/max). */
pt_status trainer_load_model(trainer *t);
/* The model phase's wall seconds, split: upload_s in backend_upload, quantizing as counted by the
 * loader, the rest reading (waiting for the node's loading rank included). */
void startup_model(trainer *t, double wall_s, double upload_s);
/* Once, after the first step: every rank's phases to rank 0, printed and recorded. Collective. */
pt_status startup_report(trainer *t);
/* Fill t->run with this run's identity (model, LoRA, config, run shape, Slurm) and t->lay. */
pt_status trainer_identify(trainer *t);
/* Resume when the config says so: rank 0 finds and reads the checkpoint, every rank receives
 * it and continues from its step, data position, optimizer and metric state. */
pt_status trainer_resume(trainer *t);
/* Rank 0 writes output_dir/checkpoint-<step>.h5 and applies save_total_limit; agreed. */
pt_status trainer_save(trainer *t, int64_t step);
/* load_best_model_at_end: every rank takes the best checkpoint's adapters. */
pt_status trainer_load_best(trainer *t, int64_t last_step);
/* Divergence (finite.c). A step whose loss or gradient norm was not finite on some rank
 * (nonfinite, agreed by all ranks) was not applied: stop with PT_ERR_DIVERGED naming the step, the
 * loss (summed over all ranks) and the gradient norm and the likely causes, or, with
 * skip_nonfinite_steps, set *skip and warn (until FINITE_MAX_SKIPPED in a row). Every rank passes
 * the same values, so every rank decides the same. PT_OK with *skip false: a finite step. */
#define FINITE_MAX_SKIPPED 10
pt_status trainer_check_step(trainer *t, int64_t step, bool nonfinite, double loss, double grad_norm, bool *skip);
/* PT_ERR_DIVERGED naming the tensor and element when a flat array (lay's layout) holds a NaN or
 * an infinity; what: the file that is therefore not written, array: what v holds ("adapter"). */
pt_status trainer_check_finite(const trainer *t, const float *v, const char *array, const char *what);
/* The same for the adapters as they are now (downloaded from the backend). */
pt_status trainer_check_adapters(const trainer *t, const char *what);
/* What the adapter files say about this run (base, template, dropout, best step). */
adapter_info trainer_adapter_info(const trainer *t);
/* modules_to_save's weights as they are now, into info (host copies in host[2], which
 * trainer_saved_free releases): the PEFT files then carry them. */
pt_status trainer_saved_info(const trainer *t, adapter_info *info, float *host[2]);
void trainer_saved_free(float *host[2]);

/* Publishing (train_hub.c; rank 0 with push_to_hub, else no-ops; never fails training): start the
 * upload thread; after a checkpoint save, stage what hub_strategy pushes then; at the end, stage the
 * final adapter (and the merged model), wait hub_upload_timeout (0 when st failed) and report. */
void trainer_hub_start(trainer *t);
void trainer_hub_save(trainer *t, int64_t step, const char *ckpt_path);
void trainer_hub_end(trainer *t, pt_status st, int64_t last_step);

/* Watching (train_watch.c; rank 0, no-ops on the others; see heartbeat.h, tfevents.h, plot.h): the
 * heartbeat from the lock on (the run's name first: the config's, the name the run it continues
 * had, or the start time and host); after progress_open, TensorBoard's event file with a START at
 * the step the run continues from; each logging step's and evaluation's scalars; after each
 * checkpoint, the event file synced and output_dir/training.png drawn (a failure to draw only
 * warns); at the end training.png again and the heartbeat's final state. */
pt_status trainer_watch_start(trainer *t);
pt_status trainer_watch_open(trainer *t);
void trainer_watch_step(trainer *t, int64_t steps_done);
pt_status trainer_watch_log(trainer *t, const progress_record *r);
pt_status trainer_watch_eval(trainer *t, int64_t step, double eval_loss);
void trainer_watch_saved(trainer *t, int64_t step);
void trainer_watch_end(trainer *t, pt_status st);
/* What makes this run continue after a stop: "run the same command again to continue" when the
 * config resumes, else what to set first (heartbeat_continue_text). */
void trainer_continue_text(const trainer *t, char *out, size_t len);

#endif
