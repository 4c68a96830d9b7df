#!/bin/sh
# test_srun.sh — ptrain launched by Slurm: a throw-away one-node cluster (tests/slurm/cluster.sh)
# runs `srun --mpi=pmix -n 2 ptrain check` directly and inside an sbatch allocation; rank and
# local rank must come from MPI, the table is printed once, and a bad config ends the step
# non-zero with one error. Skips, saying why, only when Slurm is missing and cannot be installed.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/slurm/cluster.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
cluster_start 2
tmp=$cluster_dir

ex=$PTRAIN_SRCDIR/share/examples/multi-gpu-resume.yaml
timeout 120 srun --mpi=pmix -n 2 "$P" check "$ex" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect_eq "srun --mpi=pmix -n 2 ptrain check: exit 0" 0 "$rc"
expect_eq "srun: the table is printed once" 1 "$(grep -c '^key ' "$tmp/out")"
ok "srun: both ranks come from MPI" grep -q 'launch.ranks                   2 (2 on this node)' "$tmp/out"

printf 'model_name: x\nsave_steps: fifty\n' >"$tmp/bad.yaml"
timeout 120 srun --mpi=pmix -n 2 "$P" check "$tmp/bad.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
ok "srun, bad config: the step ends non-zero" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "srun, bad config: one error, from rank 0" \
    "ptrain: rank 0: error: $tmp/bad.yaml:2:13: save_steps: expected a positive integer (at most 1e+18) or a fraction below 1 of the total steps, found \"fifty\"" \
    "$(grep '^ptrain' "$tmp/err")"

cat >"$tmp/job.sh" <<JOB
#!/bin/sh
srun --mpi=pmix "$P" check "$ex"
JOB
timeout 180 sbatch --wait -n 2 -o "$tmp/job.out" "$tmp/job.sh" >/dev/null 2>"$tmp/err"
rc=$?
expect_eq "sbatch -n 2 with srun inside: exit 0" 0 "$rc"
expect_eq "sbatch: the table is printed once" 1 "$(grep -c '^key ' "$tmp/job.out" 2>/dev/null)"

done_testing
