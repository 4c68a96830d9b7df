#!/bin/sh
# test_resubmit.sh — slurm/train.sh on a throw-away Slurm cluster (tests/slurm/cluster.sh), jobs
# that end without requeueing and are submitted again by hand (2 tasks, the tiny Llama, jobs.sh):
# - scancel: cancelled in the middle of training, the ranks checkpoint on SIGTERM and the job
#   stays cancelled; the same sbatch command again resumes from the newest checkpoint and ends
#   with a final adapter bit-identical to an uninterrupted run's; with a config that does not
#   resume, ptrain and train.sh name the key to set, and the same command is refused (issue 44);
# - kill -9: one task killed (PTRAIN_TEST_KILL_STEP/RANK: rank 1 SIGKILLs itself at the start of
#   step 13) ends the job step non-zero within seconds, no hang and no requeue; the job submitted
#   again resumes from the last complete checkpoint and ends bit-identically;
# - salloc + mpirun: the README's interactive form trains the same adapter as the batch job.
# Skips, saying why, only when Slurm is missing and cannot be installed.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
cluster_start 2
. "$PTRAIN_SRCDIR/tests/slurm/jobs.sh"
tmp=$cluster_dir
elapsed() { echo $(($(date +%s) - $1)); }
seconds() { date -d "$1" +%s 2>/dev/null || echo 0; } # a Slurm time stamp as seconds

write_config base
job=$(submit base)
wait_end "$job" 120
expect_eq "baseline: the uninterrupted job completes" "COMPLETED 0:0" "$(job_state "$job") $(job_field "$job" ExitCode)"

# --- scancel, then the same command again ---
write_config cancel
t0=$(date +%s)
job=$(submit cancel --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150)
wait_file "$tmp/cancel/checkpoint-10.h5" 60
scancel "$job"
wait_end "$job" 60
sleep 3 # a requeue would show by now
expect_eq "scancel: the job stays cancelled, not requeued" "CANCELLED 0" \
    "$(job_state "$job") $(job_field "$job" Restarts)"
stopped_at=$(newest_step cancel)
ok "scancel: the ranks checkpointed on SIGTERM, train.sh did not requeue" sh -c \
    "grep -q '^stopped    by SIGTERM.* after step $stopped_at: checkpoint written' '$tmp/cancel.log' &&
     grep -q '^train.sh   .* checkpointed and stopped (exit 75) on SIGTERM' '$tmp/cancel.log'"
job2=$(submit cancel --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150)
wait_end "$job2" 120
echo "# scancel: job $job cancelled at step ${stopped_at:-none}, job $job2 $(job_state "$job2"), $(elapsed "$t0") s in all"
expect_eq "scancel: the job submitted again completes" "COMPLETED 0:0" "$(job_state "$job2") $(job_field "$job2" ExitCode)"
expect_eq "scancel: it resumed from the newest checkpoint (step $stopped_at)" "${stopped_at:-none}" \
    "$(resumed_at cancel "$job2" 0)"
ok "scancel: the final adapter is bit-identical to the uninterrupted run's" same_adapter base cancel

# --- a config that does not resume: what says how to go on names the key (issue 44) ---
write_config noresume "# no resume_from_checkpoint"
job=$(submit noresume --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150)
wait_file "$tmp/noresume/checkpoint-5.h5" 60
scancel "$job"
wait_end "$job" 60
ok "no resume key, scancel: ptrain's and train.sh's lines name the key to set first" sh -c \
    "grep -q '^stopped    by SIGTERM.* checkpoint written; to continue, set resume_from_checkpoint: true in noresume.yaml, then run the same command again' '$tmp/noresume.log' &&
     grep -q '^train.sh   .* checkpointed and stopped (exit 75) on SIGTERM: to continue, set resume_from_checkpoint: true in noresume.yaml, then submit the same command to resume' '$tmp/noresume.log'"
job2=$(submit noresume)
wait_end "$job2" 60
ok "no resume key: the same command submitted again is refused (exit 1) before training, naming the checkpoint" sh -c \
    "[ '$(job_field "$job2" ExitCode)' = 1:0 ] &&
     grep -q 'ptrain: rank 0: error: output_dir $tmp/noresume holds the checkpoints of an earlier run' '$tmp/noresume.log'"

# --- kill -9 of one task ---
write_config kill
t0=$(date +%s)
job=$(submit kill --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150,PTRAIN_TEST_KILL_STEP=13,PTRAIN_TEST_KILL_RANK=1)
wait_end "$job" 120
ended=$(job_state "$job")
# from the kill (the start of step 13: step 12's checkpoint-free log line) to the end of the job
killed_at=$(stat -c %Y "$tmp/kill/checkpoint-10.h5" 2>/dev/null || echo 0)
end=$(seconds "$(job_field "$job" EndTime)")
secs=$((end - killed_at))
sleep 3
echo "# kill-9: job $job $ended $(job_field "$job" ExitCode), ended ${secs} s after checkpoint-10 was written"
ok "kill-9: the job step ends non-zero ($ended $(job_field "$job" ExitCode)), not requeued" \
    test "$ended" = FAILED -a "$(job_field "$job" ExitCode)" != 0:0 -a "$(job_field "$job" Restarts)" = 0
ok "kill-9: srun reports the killed task" grep -q 'srun: error: .*task 1: Killed' "$tmp/kill.log"
ok "kill-9: the job ended ${secs} s after the last checkpoint (< 25 s; no hang)" test "$killed_at" -gt 0 -a "$secs" -lt 25
ok "kill-9: train.sh did not requeue" grep -q '^train.sh   .* ptrain ended with exit [0-9]*: not requeueing' "$tmp/kill.log"
stopped_at=$(newest_step kill)
complete=yes
for f in "$tmp/kill"/checkpoint-*.h5; do
    h5dump -H "$f" >/dev/null 2>&1 || complete="no ($f)"
done
expect_eq "kill-9: every checkpoint left is a complete HDF5 file" yes "$complete"
job2=$(submit kill --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150)
wait_end "$job2" 120
echo "# kill-9: job $job2 $(job_state "$job2"), $(elapsed "$t0") s in all"
expect_eq "kill-9: the job submitted again completes" "COMPLETED 0:0" "$(job_state "$job2") $(job_field "$job2" ExitCode)"
expect_eq "kill-9: it resumed from the last complete checkpoint (step $stopped_at)" "${stopped_at:-none}" \
    "$(resumed_at kill "$job2" 0)"
ok "kill-9: the final adapter is bit-identical to the uninterrupted run's" same_adapter base kill

# --- the same training with mpirun inside an salloc allocation (README, "On a Slurm cluster") ---
mpirun=${MPIRUN:-mpirun}
if command -v "$mpirun" >/dev/null 2>&1; then
    write_config salloc
    (cd "$tmp" && timeout 120 salloc -n 2 --gres=gpu:2 --cpus-per-task=1 --time=5 \
        "$mpirun" "$P" train salloc.yaml >"$tmp/salloc.log" 2>&1)
    rc=$?
    expect_eq "salloc + mpirun: exit 0" 0 "$rc"
    ok "salloc + mpirun: the same adapter as the batch job" same_adapter base salloc
else
    skip_test "salloc + mpirun" "mpirun not found (Debian: apt-get install openmpi-bin)"
fi

show_logs base cancel kill salloc
done_testing
