#!/bin/sh
# test_requeue.sh — slurm/train.sh on a throw-away Slurm cluster (tests/slurm/cluster.sh: one node,
# 2 CPUs, 2 fake GPUs), 2 tasks training the tiny Llama of tests/data for 40 steps (jobs.sh):
# - baseline: an uninterrupted job completes, is not requeued, each task gets its own GPU
#   (CUDA_VISIBLE_DEVICES 0 and 1 with --gpus-per-task=1), and the log has train.sh's and
#   ptrain's job id / restart / nodes lines; a config without resume_from_checkpoint is warned of;
# - requeue: `scontrol requeue` in the middle of training: the ranks checkpoint on SIGTERM, the job
#   comes back (restart 1), resumes from the newest checkpoint, and its final adapter is
#   bit-identical to the baseline's; its checkpoints store the job id, restart count and nodes;
# - signal: a job whose warning signal (--signal=B:USR1@15 with a 1 minute limit) arrives in the
#   middle of training checkpoints, requeues itself, comes back and finishes bit-identically.
# Requeued jobs wait for a BeginTime of cred_expire + 1 s, 6 s on the test cluster (120 s is the
# default). Skips, saying why, only when Slurm is missing and cannot be installed.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
cluster_start 2
. "$PTRAIN_SRCDIR/tests/slurm/jobs.sh"
tmp=$cluster_dir
host=$cluster_node
elapsed() { echo $(($(date +%s) - $1)); }

# --- baseline, with a launcher wrapper that records what each task sees ---
cat >"$tmp/record-env" <<SH
#!/bin/sh
[ "\$1" = train ] && echo "\$SLURM_PROCID \$SLURM_LOCALID \${CUDA_VISIBLE_DEVICES-unset} \$OMP_NUM_THREADS" >"$tmp/env.\$SLURM_PROCID"
exec "$P" "\$@"
SH
chmod +x "$tmp/record-env"
write_config base
t0=$(date +%s)
job=$(PTRAIN=$tmp/record-env submit base)
wait_end "$job" 120
echo "# baseline: job $job $(job_state "$job") in $(elapsed "$t0") s"
expect_eq "baseline: the uninterrupted job completes (exit 0:0), not requeued" "COMPLETED 0:0 0" \
    "$(job_state "$job") $(job_field "$job" ExitCode) $(job_field "$job" Restarts)"
ok "baseline: the final adapter is written" test -s "$tmp/base/lora/adapter.h5"
expect_eq "baseline: --gpus-per-task=1 gives each task its own GPU (rank, local rank, CUDA_VISIBLE_DEVICES, threads)" \
    "0 0 0 1|1 1 1 1" "$(cat "$tmp/env.0" 2>/dev/null)|$(cat "$tmp/env.1" 2>/dev/null)"
ok "baseline: train.sh logs the job id, restart count and nodes" \
    grep -q "^train.sh   .* job $job, restart 0, nodes $host, 2 tasks" "$tmp/base.log"
ok "baseline: ptrain logs the job id, restart count and nodes" \
    grep -q "^slurm      job $job, restart 0, nodes $host" "$tmp/base.log"
ok "baseline: train.sh says training is done" grep -q '^train.sh   .* training done (exit 0)' "$tmp/base.log"

write_config noresume "# no resume_from_checkpoint"
sed -i 's/^max_steps: 40/max_steps: 2/' "$tmp/noresume.yaml"
job=$(submit noresume)
wait_end "$job" 60
ok "no resume_from_checkpoint: train.sh warns that a requeued job would refuse to start over" \
    grep -q '^train.sh   .* warning: .*noresume.yaml does not set resume_from_checkpoint: true, so a requeued or re-submitted job refuses to start over' "$tmp/noresume.log"

# --- scontrol requeue in the middle of training ---
write_config requeue
t0=$(date +%s)
job=$(submit requeue --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150)
wait_file "$tmp/requeue/checkpoint-10.h5" 60
scontrol requeue "$job"
requeued=0
wait_requeued "$job" 1 60 && requeued=1
stopped_at=$(newest_step requeue)
wait_end "$job" 120
echo "# requeue: job $job $(job_state "$job") in $(elapsed "$t0") s, stopped at step ${stopped_at:-none}"
expect_eq "requeue: requeued once, the job comes back and completes" "1 COMPLETED 0:0 1" \
    "$requeued $(job_state "$job") $(job_field "$job" ExitCode) $(job_field "$job" Restarts)"
ok "requeue: the ranks checkpointed on SIGTERM and train.sh did not requeue again" sh -c \
    "grep -q '^stopped    by SIGTERM.* after step $stopped_at: checkpoint written' '$tmp/requeue.log' &&
     grep -q '^train.sh   .* checkpointed and stopped (exit 75) on SIGTERM' '$tmp/requeue.log'"
ok "requeue: the log shows restart 1 (train.sh and ptrain)" test -n "$(log_after requeue "$job" 1 |
    grep "^slurm      job $job, restart 1, nodes $host")"
expect_eq "requeue: restart 1 resumed from the newest checkpoint (step $stopped_at)" "${stopped_at:-none}" \
    "$(resumed_at requeue "$job" 1)"
ok "requeue: the final adapter is bit-identical to the uninterrupted run's" same_adapter base requeue
ckpt_attr() { h5dump -a "/slurm/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): //p' | tr -d '"' | head -n 1; }
last=$tmp/requeue/checkpoint-40.h5
expect_eq "requeue: the checkpoints of restart 1 store the job id, restart count and nodes" "$job 1 $host" \
    "$(ckpt_attr "$last" job_id) $(ckpt_attr "$last" restart_count) $(ckpt_attr "$last" nodelist)"

# --- the warning signal before the time limit: checkpoint, requeue itself, finish ---
# the first run's steps take 1.5 s (60 s in all, past the 1 minute limit), so the signal, sent
# 15 to 45 s into the run, lands in the middle; the requeued run goes at full speed
cat >"$tmp/slow-first" <<SH
#!/bin/sh
[ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && export PTRAIN_TEST_STEP_DELAY_MS=1500
exec "$P" "\$@"
SH
chmod +x "$tmp/slow-first"
write_config signal
t0=$(date +%s)
job=$(PTRAIN=$tmp/slow-first submit signal --time=1 --signal=B:USR1@15)
requeued=0
wait_requeued "$job" 1 90 && requeued=1
stopped_at=$(newest_step signal)
echo "# signal: requeued after $(elapsed "$t0") s at step ${stopped_at:-none}"
wait_end "$job" 120
echo "# signal: job $job $(job_state "$job") in $(elapsed "$t0") s"
expect_eq "signal: the job requeued itself once, came back and completed" "1 COMPLETED 0:0 1" \
    "$requeued $(job_state "$job") $(job_field "$job" ExitCode) $(job_field "$job" Restarts)"
ok "signal: SIGUSR1 was forwarded, the ranks checkpointed, train.sh requeued the job" sh -c \
    "grep -q '^train.sh   .* SIGUSR1 (the time limit is near' '$tmp/signal.log' &&
     grep -q '^stopped    by SIGUSR1.* after step $stopped_at: checkpoint written' '$tmp/signal.log' &&
     grep -q '^train.sh   .* checkpointed and stopped (exit 75) on SIGUSR1; requeueing job $job' '$tmp/signal.log'"
ok "signal: the first run stopped before its time limit" sh -c "! grep -q 'DUE TO TIME LIMIT' '$tmp/signal.log'"
expect_eq "signal: restart 1 resumed from the newest checkpoint (step $stopped_at)" "${stopped_at:-none}" \
    "$(resumed_at signal "$job" 1)"
ok "signal: the final adapter is bit-identical to the uninterrupted run's" same_adapter base signal

show_logs base noresume requeue signal
done_testing
