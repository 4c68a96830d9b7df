#!/bin/bash
# train.sh — run ptrain under Slurm, one MPI rank per GPU, and come back after preemption.
#
#   sbatch slurm/train.sh config.yaml
#   sbatch --nodes=2 --ntasks-per-node=4 --gpus-per-task=1 slurm/train.sh config.yaml
#
# The job may be requeued (node failure, preemption, `scontrol requeue`); Slurm then runs this
# script again from the top with the same job id, and ptrain resumes from the newest complete
# checkpoint when the config says `resume_from_checkpoint: true`. SIGUSR1 arrives 120 s before the
# time limit; it is forwarded to every rank (ptrain saves and stops), then the job requeues itself.
#SBATCH --job-name=ptrain
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@120
#SBATCH --output=ptrain-%j.out
set -u
config=${1:?usage: sbatch slurm/train.sh CONFIG.yaml}
ptrain=${PTRAIN:-ptrain}
echo "ptrain job ${SLURM_JOB_ID:-?} start $(date -Is), restart ${SLURM_RESTART_COUNT:-0}, ${SLURM_NTASKS:-1} ranks"

# one OpenMP thread pool per rank: the CPUs Slurm gave each task
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

srun --mpi=pmix --kill-on-bad-exit=1 "$ptrain" train "$config" &
step=$!
timed_out=0
trap 'timed_out=1; kill -USR1 "$step" 2>/dev/null' USR1
wait "$step"
rc=$?
if [ "$timed_out" = 1 ]; then
    wait "$step" # bash returns from wait when the trap runs; wait for the step to finish saving
    rc=$?
    echo "time limit near: ranks saved (exit $rc); requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"
