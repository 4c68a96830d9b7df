# shellcheck shell=sh
# jobs.sh — training jobs for the Slurm tests, sourced after tap.sh and cluster.sh (cluster_start
# done): a small config, sbatch of slurm/train.sh, waiting on job states, and comparing adapters.
#
# The model is the tiny Llama of tests/data/hf/tiny-llama-bnb4 (2 layers, hidden 64, bitsandbytes
# 4-bit, a byte-level BPE tokenizer and a chatml template): 40 steps of 2 ranks x batch 2 on the
# sample data take about a second, so the tests slow the steps down with PTRAIN_TEST_STEP_DELAY_MS
# where a signal has to land in the middle of training. Checkpoints every 5 steps, 3 kept.

P=${PTRAIN:?set PTRAIN to the ptrain binary}
TRAIN_SH=${TRAIN_SH:-$PTRAIN_SRCDIR/slurm/train.sh}
jobs_model=$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4
jobs_diff=$(dirname "$P")/tests/mpi/adapter_diff

# write_config NAME [extra yaml]: $cluster_dir/NAME.yaml, writing into $cluster_dir/NAME/
write_config() {
    cat >"$cluster_dir/$1.yaml" <<YAML
model_name: "$jobs_model"
max_seq_length: 64
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl"
    num_samples: 64
lora_r: 4
lora_alpha: 8
lora_dropout: 0
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
learning_rate: 1e-3
warmup_steps: 0
max_steps: 40
logging_steps: 1
seed: 11
threads: 1
output_dir: "$cluster_dir/$1"
final_model_dir: "$cluster_dir/$1/lora"
save_strategy: steps
save_steps: 5
save_total_limit: 3
${2:-resume_from_checkpoint: true}
YAML
}

# submit NAME [sbatch options...]: sbatch train.sh NAME.yaml as a user would, 2 tasks on the one
# node, appending to $cluster_dir/NAME.log; prints the job id. The header asks for 4 tasks of 8
# CPUs for 4 hours: the test node has 2 CPUs and 2 (fake) GPUs, its partition allows 30 minutes.
# The time limit stays well above the header's warning (--signal=B:USR1@300, sent up to 30 s
# early), or every job would be told at once to checkpoint and stop.
submit() {
    name=$1
    shift
    (cd "$cluster_dir" && sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 --time=15 \
        --output="$cluster_dir/$name.log" "$@" "$TRAIN_SH" "$name.yaml")
}

# job_state JOBID, job_field JOBID FIELD
job_state() { cluster_job_field "$1" JobState; }
job_field() { cluster_job_field "$1" "$2"; }

jobs_ended() { # jobs_ended STATE: a final state
    case "$1" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED) return 0 ;;
    *) return 1 ;;
    esac
}

# wait_end JOBID SECONDS: until the job has ended for good (a requeued job has not); 1 on timeout
wait_end() {
    i=0
    while [ "$i" -lt $(($2 * 2)) ]; do
        jobs_ended "$(job_state "$1")" && return 0
        sleep 0.5
        i=$((i + 1))
    done
    return 1
}

# wait_file FILE SECONDS
wait_file() {
    i=0
    while [ ! -e "$1" ] && [ "$i" -lt $(($2 * 5)) ]; do
        sleep 0.2
        i=$((i + 1))
    done
    [ -e "$1" ]
}

# wait_requeued JOBID RESTARTS SECONDS: until the job is back in the queue after its RESTARTS-th
# requeue (its run before has ended); 1 on timeout. Slurm holds a requeued job until a BeginTime
# of cred_expire + 1 s (the old run's credentials must expire first, or the new run's launch is
# refused); the test cluster's cred_expire is 5 s instead of 120, so the job starts again by itself
# some 6 to 8 s later.
wait_requeued() {
    i=0
    while [ "$i" -lt $(($3 * 2)) ]; do
        [ "$(job_state "$1")" = PENDING ] && [ "$(job_field "$1" Restarts)" = "$2" ] && return 0
        sleep 0.5
        i=$((i + 1))
    done
    return 1
}

# newest_step NAME: the step of the newest checkpoint in $cluster_dir/NAME (empty when none)
newest_step() {
    for f in "$cluster_dir/$1"/checkpoint-*.h5; do
        [ -e "$f" ] || continue
        f=${f##*/checkpoint-}
        echo "${f%.h5}"
    done | sort -n | tail -n 1
}

# same_adapter A B: the two runs' final adapters hold bit-identical tensors (adapter_diff from the
# build, else h5diff -d 0); prints the comparison as a TAP comment
same_adapter() {
    a=$cluster_dir/$1/lora/adapter.h5
    b=$cluster_dir/$2/lora/adapter.h5
    [ -s "$a" ] && [ -s "$b" ] || return 1
    if [ -x "$jobs_diff" ]; then
        line=$("$jobs_diff" "$a" "$b" 2>&1) || {
            echo "# $line"
            return 1
        }
        echo "# adapter_diff $1 $2: $line"
        printf '%s\n' "$line" | grep -q '^max_rel 0 .* max_abs 0 '
    else
        h5diff -d 0 "$a" "$b" >/dev/null
    fi
}

# log_after NAME JOBID RESTART: the part of NAME.log written by that job's run RESTART
log_after() {
    awk -v m="job $2, restart $3," 'index($0, "train.sh") == 1 && index($0, m) { on = 1 }
        on && index($0, "train.sh") == 1 && index($0, " job ") && !index($0, m) && /restart [0-9]+,/ { on = 0 }
        on' "$cluster_dir/$1.log"
}

# resumed_at NAME JOBID RESTART: the step that run resumed at, from ptrain's "resume     from" line
resumed_at() {
    log_after "$1" "$2" "$3" | sed -n 's/^resume     from .* at step \([0-9]*\).*/\1/p' | head -n 1
}

# show_logs NAME...: when a test failed, the jobs' logs and the end of slurmctld's as TAP comments
show_logs() {
    [ "$tap_fail" -eq 0 ] && return 0
    for name in "$@"; do
        echo "# --- $name.log"
        sed 's/^/#   /' "$cluster_dir/$name.log" 2>/dev/null
    done
    echo "# --- slurmctld.log (end)"
    tail -n 30 "$cluster_dir/slurmctld.log" | sed 's/^/#   /'
}
