#!/bin/bash
# train.sh — ptrain under Slurm: one MPI rank per GPU, on one node or many, checkpointing before
# the time limit and requeueing itself until training is done.
#
#   sbatch slurm/train.sh config.yaml                                  # the header below
#   sbatch --nodes=2 --ntasks-per-node=4 slurm/train.sh config.yaml    # 8 GPUs on 2 nodes
#
# The config should say `resume_from_checkpoint: true` (with `save_strategy: steps` and
# `save_steps`): that is what makes a requeued or re-submitted job continue from the newest
# complete checkpoint in output_dir instead of starting over. This script warns when it is missing.
#
# What happens:
#   - Slurm sends SIGUSR1 to this script N seconds before the time limit (--signal=B:USR1@N);
#     it is forwarded to every rank (srun forwards it to all tasks); the ranks agree at the next
#     step boundary, rank 0 writes a checkpoint and all exit 75 ("checkpointed, run me again");
#     this script then requeues the job (`scontrol requeue`), which starts again from the top
#     with the same job id, SLURM_RESTART_COUNT one higher, and appends to the same output file.
#   - Requeued from outside (`scontrol requeue JOBID`, preemption, a node failure): Slurm sends
#     SIGTERM to every process of the job and requeues it itself; the ranks checkpoint and exit 75
#     within KillWait (default 30 s), this script does not requeue a second time.
#   - Cancelled (`scancel JOBID`): SIGTERM as well, the ranks checkpoint and exit 75, and the job
#     stays cancelled. Submitting the same command again resumes (with resume_from_checkpoint: true).
#   - Training done (exit 0), bad input (1), usage (2), training diverged (6: a NaN or infinite
#     loss; requeueing would only diverge again), a rank killed or crashed (anything else):
#     the job ends with that status and is not requeued.
#
# Environment (set it before sbatch; sbatch passes the environment on):
#   PTRAIN=/path/to/ptrain     the binary (default: the installed one, else ptrain on PATH)
#   PTRAIN_REQUEUE=0           never requeue; re-submit by hand to resume (`sbatch --no-requeue`
#                              does the same and also keeps Slurm from requeueing the job)
#   PTRAIN_LAUNCHER=mpirun     launch with Open MPI's mpirun inside the allocation instead of srun
#   PTRAIN_SRUN_MPI=pmi2       srun's MPI plugin (default: pmix when `srun --mpi=list` has it,
#                              else pmi2, else the site's MpiDefault)
#
# GPUs: with --gpus-per-task=1 Slurm gives each task its own GPU (CUDA_VISIBLE_DEVICES holds
# just that one), and ptrain uses it. With the older --gres=gpu:N form (and with mpirun) every
# task sees all N GPUs of its node, and rank r uses GPU (node-local rank r) mod N; set
# --ntasks-per-node to N. Either way one rank per GPU; CPU-only nodes: drop the GPU lines.
#
#SBATCH --job-name=ptrain
#SBATCH --nodes=1                  # more nodes: data parallel across them
#SBATCH --ntasks-per-node=4        # one task (MPI rank) per GPU: the GPUs of one node
#SBATCH --gpus-per-task=1          # each task gets its own GPU
##SBATCH --gres=gpu:4              # older sites, instead of --gpus-per-task: N GPUs per node
#SBATCH --cpus-per-task=8          # OpenMP threads per rank (data loading, the CPU backend)
#SBATCH --time=04:00:00            # the time limit of one run; the job requeues until done
#SBATCH --requeue                  # Slurm may requeue it (preemption, node failure)
#SBATCH --signal=B:USR1@300        # SIGUSR1 to this script 300 s before the time limit:
#                                  # time to finish the current step and write a checkpoint
#SBATCH --open-mode=append         # a requeued job appends to the same output file
#SBATCH --output=ptrain-%j.out     # %j: the job id, the same across requeues
set -u

say() { echo "train.sh   $(date '+%Y-%m-%d %H:%M:%S') $*"; }

# Slurm's SIGUSR1 (time limit near): forward it to the launcher, which forwards it to every rank.
# SIGTERM (scancel, an outside requeue, preemption, the time limit itself) reaches every process
# of the job from Slurm directly: only note it, so that this script does not requeue.
got_usr1=0
got_term=0
signalled=0
step=""
# shellcheck disable=SC2317 # (called by the traps)
on_usr1() {
    got_usr1=1
    signalled=1
    say "SIGUSR1 (the time limit is near, or scancel --batch --signal=USR1): asking every rank to" \
        "checkpoint and stop"
    [ -n "$step" ] && kill -USR1 "$step" 2>/dev/null
}
# shellcheck disable=SC2317
on_term() {
    got_term=1
    signalled=1
    say "SIGTERM: the job is being cancelled, requeued or preempted; the ranks checkpoint and stop"
}
trap on_usr1 USR1
trap on_term TERM

config=${1:-}
if [ -z "$config" ] || [ $# -ne 1 ]; then
    echo "usage: sbatch [sbatch options] train.sh CONFIG.yaml" >&2
    exit 2
fi
if [ ! -r "$config" ]; then
    echo "train.sh: cannot read the config $config (relative paths are relative to $(pwd))" >&2
    exit 1
fi

# make install writes the installed binary here; PTRAIN overrides it
installed_ptrain=
ptrain=${PTRAIN:-${installed_ptrain:-ptrain}}
if ! command -v "$ptrain" >/dev/null 2>&1; then
    echo "train.sh: ptrain not found ($ptrain): set PTRAIN=/path/to/ptrain or put it on PATH" >&2
    exit 1
fi

say "job ${SLURM_JOB_ID:-none}, restart ${SLURM_RESTART_COUNT:-0}, nodes ${SLURM_JOB_NODELIST:-$(hostname -s)}," \
    "${SLURM_NTASKS:-1} tasks, config $config, $ptrain"

# the config as ptrain reads it: a bad one fails here, once, before any rank starts
table=$("$ptrain" check "$config")
rc=$?
if [ "$rc" = 1 ] || [ "$rc" = 2 ]; then
    say "the config does not pass ptrain check (exit $rc): not starting"
    exit "$rc"
fi
setting() { # setting KEY: its value in the table of ptrain check
    printf '%s\n' "$table" | sed -n "s/^$1  *//p" | sed 's/  (default)$//' | head -n 1
}
resume=$(setting resume_from_checkpoint | cut -d' ' -f1)
overwrite=$(setting overwrite_output_dir)
final_dir=$(setting final_model_dir)
# what continues a stopped job: the same command only when the config resumes
again="submit the same command to resume"
[ "$resume" = true ] || again="set resume_from_checkpoint: true in $config, then submit the same command to resume"
if [ "$rc" != 0 ]; then
    say "warning: ptrain check exited $rc; starting anyway"
elif [ "$overwrite" = true ]; then
    say "warning: $config sets overwrite_output_dir: true, so a requeued or re-submitted job removes the" \
        "checkpoints and starts over from step 0; use resume_from_checkpoint: true instead to continue"
elif [ "$resume" = false ]; then
    say "warning: $config does not set resume_from_checkpoint: true, so a requeued or re-submitted job" \
        "refuses to start over on top of the checkpoints in output_dir; add it (with save_strategy: steps and" \
        "save_steps) to continue"
elif [ "$resume" != true ]; then
    say "warning: $config sets resume_from_checkpoint: $resume, so a requeued or re-submitted job goes back" \
        "to that checkpoint; write resume_from_checkpoint: true to continue from the newest"
fi

# one OpenMP thread pool per rank: the CPUs Slurm gave each task
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

launcher=${PTRAIN_LAUNCHER:-srun}
case "$launcher" in
srun)
    mpi=${PTRAIN_SRUN_MPI:-}
    if [ -z "$mpi" ]; then
        plugins=$(srun --mpi=list 2>&1 | tr -s ' \t:' '\n')
        for want in pmix pmix_v5 pmix_v4 pmix_v3 pmix_v2 pmi2; do
            if printf '%s\n' "$plugins" | grep -qx "$want"; then
                mpi=$want
                break
            fi
        done
        [ -n "$mpi" ] || say "warning: srun has neither pmix nor pmi2 (srun --mpi=list); using the" \
            "site default, which Open MPI may not support (PTRAIN_LAUNCHER=mpirun is the fallback)"
    fi
    # srun does not inherit --cpus-per-task from the job since Slurm 22.05: pass it on
    set -- srun --kill-on-bad-exit=1 ${mpi:+--mpi=$mpi} \
        ${SLURM_CPUS_PER_TASK:+--cpus-per-task=$SLURM_CPUS_PER_TASK} "$ptrain" train "$config"
    ;;
mpirun)
    # Open MPI's mpirun finds the allocation itself and starts one rank per task slot
    set -- mpirun "$ptrain" train "$config"
    ;;
*)
    echo "train.sh: PTRAIN_LAUNCHER must be srun or mpirun, not $launcher" >&2
    exit 2
    ;;
esac

if [ "$got_usr1" = 1 ]; then
    # the warning came while this script was still checking: the time limit is shorter than
    # --signal's lead; starting now would only be cut short (requeueing would loop)
    say "SIGUSR1 before training started: the time limit leaves no time to train; give --time" \
        "more than the warning time of --signal=B:USR1@N. Not starting, not requeueing"
    exit 75
fi
if [ "$got_term" = 1 ]; then
    say "SIGTERM before training started: not starting"
    exit 143
fi
say "launching: $*"
start=$(date +%s)
"$@" &
step=$!
while :; do
    signalled=0
    wait "$step"
    rc=$?
    # a trap interrupts wait; wait again until the launcher itself has ended
    [ "$signalled" = 1 ] || break
done

# requeue on exit 75 unless: turned off (PTRAIN_REQUEUE=0, `sbatch --no-requeue`, or
# `scontrol update JobId=N Requeue=0` while it runs), not a batch job (salloc), or pointless
# (the config does not resume)
requeue=yes
why=""
job_info=""
[ -n "${SLURM_JOB_ID:-}" ] && job_info=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null)
if [ "${PTRAIN_REQUEUE:-1}" = 0 ]; then
    requeue=no
    why="PTRAIN_REQUEUE=0"
elif [ -z "${SLURM_JOB_ID:-}" ]; then
    requeue=no
    why="not a Slurm job"
elif printf '%s\n' "$job_info" | grep -q 'Requeue=0'; then
    requeue=no
    why="the job has Requeue=0: sbatch --no-requeue or scontrol update Requeue=0"
elif printf '%s\n' "$job_info" | grep -q 'BatchFlag=0'; then
    requeue=no
    why="not a batch job"
elif [ "$resume" != true ]; then
    requeue=no
    why="the config does not resume: resume_from_checkpoint is not true"
fi

case "$rc" in
0)
    if [ "$(setting train)" = true ] && [ -n "$final_dir" ] &&
        [ -z "$(find "$final_dir/adapter.h5" -newermt "@$start" 2>/dev/null)" ]; then
        # srun can end 0 when its tasks never started (a step launch that failed)
        say "the launcher ended with exit 0 but no new $final_dir/adapter.h5 was written: the" \
            "ranks did not train (see the launcher's messages above); failing the job"
        exit 1
    fi
    say "training done (exit 0): $final_dir/adapter.h5"
    ;;
75)
    how="on SIGUSR1"
    [ "$got_usr1" = 1 ] || how="on a signal sent to the ranks"
    if [ "$got_term" = 1 ]; then
        if [ "$resume" = true ]; then
            say "checkpointed and stopped (exit 75) on SIGTERM: a cancelled job stays cancelled ($again)," \
                "a requeued or preempted one comes back by itself"
        else
            say "checkpointed and stopped (exit 75) on SIGTERM: to continue, $again"
        fi
    elif [ "$requeue" = no ]; then
        say "checkpointed and stopped (exit 75) $how; not requeueing ($why): $again"
    else
        say "checkpointed and stopped (exit 75) $how; requeueing job $SLURM_JOB_ID"
        scontrol requeue "$SLURM_JOB_ID" || say "scontrol requeue $SLURM_JOB_ID failed: $again"
    fi
    ;;
*)
    if [ "$got_term" = 1 ]; then
        # mpirun ends 1 on SIGTERM even when its ranks checkpointed and exited 75
        say "stopped on SIGTERM (exit $rc): not requeueing; to continue from the newest complete" \
            "checkpoint, $again"
    else
        say "ptrain ended with exit $rc: not requeueing (1: bad input, 2: usage, 6: training" \
            "diverged, other: a rank failed or was killed; see above); to continue from the newest complete" \
            "checkpoint once the cause is fixed, $again"
    fi
    ;;
esac
exit "$rc"
