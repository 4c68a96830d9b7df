#!/bin/sh
# test_mpi.sh — `ptrain check` launched as 2 MPI ranks: the table is printed once (rank 0), a bad
# config is reported once and ends the job non-zero, ranks given different configs stop with a
# clear error from the rank that differs, a rank that fails alone ends the whole job (no hang),
# and device_map auto is refused under several ranks.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
mpirun=${MPIRUN:-mpirun}
if ! command -v "$mpirun" >/dev/null 2>&1; then
    echo "1..0 # SKIP mpirun not found (Debian: apt-get install openmpi-bin)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ex=$PTRAIN_SRCDIR/share/examples/multi-gpu-resume.yaml

mpi() { # mpi ARGS...: sets rc, out, err; 60 s bound so a hang fails instead of blocking
    timeout 60 "$mpirun" --oversubscribe "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(grep '^ptrain' "$tmp/err") # mpirun's own banner is not ours
}

mpi -np 2 "$P" check "$ex"
expect_eq "2 ranks: check exits 0" 0 "$rc"
expect_eq "2 ranks: the table is printed once" 1 "$(grep -c '^key ' "$tmp/out")"
ok "2 ranks: launch shows 2 ranks" contains "$out" "launch.ranks                   2 (2 on this node)"

printf 'model_name: x\nsave_steps: fifty\n' >"$tmp/bad.yaml"
mpi -np 2 "$P" check "$tmp/bad.yaml"
ok "2 ranks, bad config: non-zero exit" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "2 ranks, bad config: reported once, by rank 0" \
    "ptrain: rank 0: error: $tmp/bad.yaml:2:13: save_steps: expected a positive integer (at most 1e+18) or a fraction below 1 of the total steps, found \"fifty\"" "$err"

printf 'model_name: x\nlearning_rate: 1e-4\n' >"$tmp/a.yaml"
printf 'model_name: x\nlearning_rate: 2e-4\n' >"$tmp/b.yaml"
mpi -np 1 "$P" check "$tmp/a.yaml" : -np 1 "$P" check "$tmp/b.yaml"
ok "different configs per rank: non-zero exit" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "different configs per rank: rank 1 names the key that differs" \
    "ptrain: rank 1: error: the config differs from rank 0's in learning_rate: start every rank with the same config file" \
    "$err"

# the same relative path, but each rank in its own directory (Open MPI's MPMD form with --wdir)
mkdir -p "$tmp/A" "$tmp/B"
printf 'model_name: x\nlearning_rate: 1e-4\noutput_dir: runs\nlora_r: 8\n' >"$tmp/A/c.yaml"
printf 'model_name: x\nlearning_rate: 2e-4\noutput_dir: runs/b\nlora_r: 8\n' >"$tmp/B/c.yaml"
mpi -np 1 --wdir "$tmp/A" "$P" check c.yaml : -np 1 --wdir "$tmp/B" "$P" check c.yaml
ok "the same path, another file per rank: non-zero exit" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "the same path, another file per rank: rank 1 names the keys that differ" \
    "ptrain: rank 1: error: the config differs from rank 0's in learning_rate, output_dir: start every rank with the same config file" \
    "$err"
printf 'model_name: x\n' >"$tmp/A/c.yaml"
printf 'model_name: x\nlora_r: 8\nlora_alpha: 8\nlora_dropout: 0.1\nrandom_state: 1\nwarmup_steps: 1\nlearning_rate: 1e-4
num_train_epochs: 1\nmax_steps: 9\nweight_decay: 0\nmax_grad_norm: 0\nseed: 1\nlogging_steps: 1\n' >"$tmp/B/c.yaml"
mpi -np 1 --wdir "$tmp/A" "$P" check c.yaml : -np 1 --wdir "$tmp/B" "$P" check c.yaml
# 12 keys given differ, and data_seed with them (it follows seed when not given): 13 settings
expect_eq "12 keys differ: rank 1 names 10, then how many more" \
    "ptrain: rank 1: error: the config differs from rank 0's in lora_r, lora_alpha, lora_dropout, random_state, warmup_steps, learning_rate, num_train_epochs, max_steps, weight_decay, max_grad_norm and 3 more: start every rank with the same config file" \
    "$err"

mpi -np 1 "$P" check "$tmp/a.yaml" : -np 1 "$P" check "$tmp/missing.yaml"
ok "rank 1 fails alone: the job ends non-zero, no hang" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "rank 1 fails alone: its own error, with its rank" \
    "ptrain: rank 1: error: cannot open config file $tmp/missing.yaml: No such file or directory" "$err"

printf 'model_name: x\ndevice_map: auto\n' >"$tmp/dm.yaml"
mpi -np 2 "$P" check "$tmp/dm.yaml"
ok "device_map auto under 2 ranks is refused" test "$rc" -ne 0 -a "$rc" -ne 124
ok "device_map refusal gives the reason" contains "$err" "conflicts with data-parallel training over 2 ranks"
mpi -np 1 "$P" check "$tmp/dm.yaml"
expect_eq "device_map auto under 1 rank is accepted" 0 "$rc"

done_testing
