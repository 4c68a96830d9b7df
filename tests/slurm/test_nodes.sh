#!/bin/sh
# test_nodes.sh — ptrain on two nodes: a throw-away Slurm cluster of two nodes on one machine
# (tests/slurm/cluster.sh: each slurmd in a network, UTS and mount namespace of its own, with its
# own hostname, address on a private bridge, /tmp and /dev/shm), 2 tasks per node, each node with
# 2 fake GPUs, training the tiny Llama for 40 steps (jobs.sh). What a real multi-node job does
# that one node cannot show: ranks on two hosts, node-local ranks, the model read once per node,
# gradients summed over TCP between hosts, a requeue that brings the job back on two nodes.
# - srun -N 2: ptrain check counts 4 ranks, 2 on its node, on 2 nodes;
# - sbatch --nodes=2 (slurm/train.sh): tasks 0 and 1 run on the first node, 2 and 3 on the second
#   (hostname, Slurm's local rank, a GPU each); ptrain says 2 nodes of 2 ranks each (MPI's
#   node-local communicator) and that the weights were read from the file by 2 of the 4 ranks, one
#   per node (the others use their node's copy in shared memory), and prints its start-up report;
#   with model_read: broadcast rank 0 alone reads them, and the adapter is bit-identical;
# - requeue: `scontrol requeue` in the middle of training; the job comes back on both nodes,
#   resumes from the newest checkpoint, and its final adapter is bit-identical to the
#   uninterrupted run's;
# - mpirun: train.sh with PTRAIN_LAUNCHER=mpirun (Open MPI starts its daemon on the other node
#   with srun), and mpirun outside Slurm with --host over both nodes (an ssh stand-in enters the
#   other host's namespaces), train bit-identical adapters.
# Skips, saying why, only when Slurm is missing and cannot be installed, or the machine does not
# let root make network namespaces (cluster.sh).
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
cluster_start 2 2
. "$PTRAIN_SRCDIR/tests/slurm/jobs.sh"
tmp=$cluster_dir
n1=${cluster_nodes% *}
n2=${cluster_nodes#* }
nodes=$cluster_nodelist
elapsed() { echo $(($(date +%s) - $1)); }
t_all=$(date +%s)
echo "# nodes $n1 and $n2 on $cluster_subnet (this machine: $cluster_link)"

# --- srun across the two nodes ---
ex=$PTRAIN_SRCDIR/share/examples/multi-gpu-resume.yaml
timeout 120 srun --mpi=pmix -N 2 --ntasks-per-node=2 "$P" check "$ex" >"$tmp/check.out" 2>"$tmp/check.err"
rc=$?
expect_eq "srun -N 2 --ntasks-per-node=2 ptrain check: exit 0" 0 "$rc"
expect_eq "srun: 4 ranks, 2 on the node, 2 nodes" "launch.ranks                   4 (2 on this node)|launch.nodes                   2" \
    "$(grep '^launch\.ranks' "$tmp/check.out")|$(grep '^launch\.nodes' "$tmp/check.out")"

# --- sbatch --nodes=2, with a launcher wrapper that records where each task runs ---
cat >"$tmp/record-env" <<SH
#!/bin/sh
[ "\$1" = train ] && echo "\$(hostname) \$SLURM_PROCID \$SLURM_LOCALID \$SLURM_NODEID \${CUDA_VISIBLE_DEVICES-unset}" >"$tmp/env.\$SLURM_PROCID"
exec "$P" "\$@"
SH
chmod +x "$tmp/record-env"
write_config base
t0=$(date +%s)
job=$(PTRAIN=$tmp/record-env submit base --nodes=2)
wait_end "$job" 180
echo "# baseline: job $job $(job_state "$job") in $(elapsed "$t0") s"
expect_eq "sbatch --nodes=2: the job completes (exit 0:0)" "COMPLETED 0:0" "$(job_state "$job") $(job_field "$job" ExitCode)"
ok "sbatch --nodes=2: the final adapter is written" test -s "$tmp/base/lora/adapter.h5"
expect_eq "sbatch --nodes=2: tasks 0, 1 on $n1 and 2, 3 on $n2 (host, rank, local rank, node, GPU)" \
    "$n1 0 0 0 0|$n1 1 1 0 1|$n2 2 0 1 0|$n2 3 1 1 1" \
    "$(cat "$tmp/env.0" 2>/dev/null)|$(cat "$tmp/env.1" 2>/dev/null)|$(cat "$tmp/env.2" 2>/dev/null)|$(cat "$tmp/env.3" 2>/dev/null)"
ok "sbatch --nodes=2: train.sh and ptrain log the job's two nodes" sh -c \
    "grep -qF 'job $job, restart 0, nodes $nodes, 4 tasks' '$tmp/base.log' &&
     grep -qF 'slurm      job $job, restart 0, nodes $nodes' '$tmp/base.log'"
expect_eq "sbatch --nodes=2: ptrain sees 2 nodes of 2 ranks each, the weights read by one rank per node" \
    "nodes      2 nodes of 2 ranks each; the weights read by 2 of 4 ranks (one per node)" \
    "$(grep '^nodes  ' "$tmp/base.log")"
ok "sbatch --nodes=2: the start-up report gives the model read's time" grep -q '^startup    model read  *[0-9.]* s  (slowest: rank [0-3])' "$tmp/base.log"

write_config bcast "resume_from_checkpoint: true
model_read: broadcast"
job=$(submit bcast --nodes=2)
wait_end "$job" 180
expect_eq "model_read: broadcast: the job completes" "COMPLETED 0:0" "$(job_state "$job") $(job_field "$job" ExitCode)"
expect_eq "model_read: broadcast: the weights read by rank 0 alone" \
    "nodes      2 nodes of 2 ranks each; the weights read by 1 of 4 ranks (rank 0, sent to the other nodes)" \
    "$(grep '^nodes  ' "$tmp/bcast.log")"
ok "model_read: broadcast: the final adapter is bit-identical to per_node's" same_adapter base bcast

# --- scontrol requeue in the middle of training on two nodes ---
write_config requeue
t0=$(date +%s)
job=$(submit requeue --nodes=2 --export=ALL,PTRAIN_TEST_STEP_DELAY_MS=150)
wait_file "$tmp/requeue/checkpoint-10.h5" 90
scontrol requeue "$job"
requeued=0
wait_requeued "$job" 1 60 && requeued=1
stopped_at=$(newest_step requeue)
wait_end "$job" 180
echo "# requeue: job $job $(job_state "$job") in $(elapsed "$t0") s, stopped at step ${stopped_at:-none}"
expect_eq "requeue: requeued once, the job comes back and completes" "1 COMPLETED 0:0 1" \
    "$requeued $(job_state "$job") $(job_field "$job" ExitCode) $(job_field "$job" Restarts)"
ok "requeue: the ranks checkpointed on SIGTERM" \
    grep -q "^stopped    by SIGTERM.* after step $stopped_at: checkpoint written" "$tmp/requeue.log"
ran_again() { # restart 1's part of the log: Slurm's two nodes, and ptrain's
    log_after requeue "$job" 1 | grep -qF "slurm      job $job, restart 1, nodes $nodes" &&
        log_after requeue "$job" 1 | grep -q '^nodes      2 nodes of 2 ranks each; the weights read by 2 of 4 ranks'
}
ok "requeue: restart 1 ran on both nodes again" ran_again
expect_eq "requeue: restart 1 resumed from the newest checkpoint (step $stopped_at)" "${stopped_at:-none}" \
    "$(resumed_at requeue "$job" 1)"
ok "requeue: the final adapter is bit-identical to the uninterrupted run's" same_adapter base requeue

# --- mpirun across the two hosts ---
mpirun=${MPIRUN:-mpirun}
if command -v "$mpirun" >/dev/null 2>&1; then
    # in the allocation: train.sh's mpirun starts Open MPI's daemon on the second node with srun
    write_config mpirun
    job=$(PTRAIN_LAUNCHER=mpirun submit mpirun --nodes=2)
    wait_end "$job" 180
    expect_eq "sbatch --nodes=2, PTRAIN_LAUNCHER=mpirun: the job completes" "COMPLETED 0:0" \
        "$(job_state "$job") $(job_field "$job" ExitCode)"
    ok "PTRAIN_LAUNCHER=mpirun: 2 nodes of 2 ranks each" grep -q '^nodes      2 nodes of 2 ranks each;' "$tmp/mpirun.log"
    ok "PTRAIN_LAUNCHER=mpirun: the same adapter as srun's" same_adapter base mpirun
    # outside Slurm: mpirun on this machine, ranks on both hosts through the ssh stand-in, TCP on
    # the bridge only
    write_config hosts
    (cd "$tmp" && timeout 180 "$mpirun" -np 4 --host "$n1:2,$n2:2" --mca plm_rsh_agent "$tmp/rsh" \
        --mca oob_tcp_if_include "$cluster_subnet" --mca btl_tcp_if_include "$cluster_subnet" \
        -x OMP_NUM_THREADS=1 "$P" train hosts.yaml >"$tmp/hosts.log" 2>&1)
    rc=$?
    expect_eq "mpirun --host $n1:2,$n2:2 (plm_rsh_agent): exit 0" 0 "$rc"
    ok "mpirun --host: 2 nodes of 2 ranks each" grep -q '^nodes      2 nodes of 2 ranks each;' "$tmp/hosts.log"
    ok "mpirun --host: the same adapter as srun's" same_adapter base hosts
else
    skip_test "mpirun across the two nodes" "mpirun not found (Debian: apt-get install openmpi-bin)"
fi

echo "# two-node tests: $(elapsed "$t_all") s after the cluster came up"
show_logs base bcast requeue mpirun hosts
done_testing
