#!/bin/sh
# test_train_knobs.sh — neftune_noise_alpha and group_by_length (issue 46) on the tiny model: each
# changes training (another loss at step 1); a run with both, stopped at its step-4 checkpoint and
# resumed, ends with the straight run's adapter and losses, bit for bit (the noise is a function of
# the seed, the step and the micro-batch, the grouped order one of the epoch's permutation, so
# nothing of either needs keeping). The noise's statistics, its place in the step and evaluation
# without it: test_train's test_neftune; the order against transformers': test_dataset's
# test_group_by_length.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
metrics() { grep '"step"' "$1/metrics.jsonl" | grep -v '"startup"' | sed 's/, "tokens_per_s.*//; s/"elapsed[^,]*, //'; }
cfg() { # cfg FILE OUT [yaml]
    tiny_config "$1" "$2" "max_steps: 8
learning_rate: 0.01
logging_steps: 1
lr_scheduler_type: constant
$3"
    sed -i 's/^max_seq_length: 64$/max_seq_length: 200/' "$1" # untruncated: the lengths differ
}
cfg "$tmp/plain.yaml" "$tmp/plain"
run "$tmp/plain.yaml"
ok "the run without NEFTune trains (exit $rc)" test "$rc" = 0
cfg "$tmp/g.yaml" "$tmp/g" "group_by_length: true"
run "$tmp/g.yaml"
g1=$(grep '"step": 1,' "$tmp/g/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
cfg "$tmp/n.yaml" "$tmp/n" "neftune_noise_alpha: 5
group_by_length: true
save_steps: 4"
run "$tmp/n.yaml"
ok "the run with neftune_noise_alpha: 5 and group_by_length trains (exit $rc)" test "$rc" = 0
l1=$(grep '"step": 1,' "$tmp/plain/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
n1=$(grep '"step": 1,' "$tmp/n/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
ok "the noise (with grouping) changes step 1's loss ($g1 grouped without noise, $n1 with)" test -n "$n1" -a "$g1" != "$n1"
ok "group_by_length changes step 1's batch, so its loss ($l1 without, $g1 with)" test -n "$g1" -a "$l1" != "$g1"
ok "the noise changes the adapter" sh -c '! cmp -s "$1" "$2"' - "$tmp/plain/lora/adapter.h5" "$tmp/n/lora/adapter.h5"
# resume: a run of 4 steps (its checkpoint), then on to 8 from it
sed "s|$tmp/n|$tmp/r|g; s/^max_steps: 8$/max_steps: 4/" "$tmp/n.yaml" >"$tmp/r4.yaml"
run "$tmp/r4.yaml"
sed "s|$tmp/n|$tmp/r|g" "$tmp/n.yaml" >"$tmp/r.yaml"
printf 'resume_from_checkpoint: true\n' >>"$tmp/r.yaml"
run "$tmp/r.yaml"
ok "the run with both resumes from its step-4 checkpoint (exit $rc)" test "$rc" = 0
ok "resumed, it ends with the straight run's adapter, bit for bit" \
    cmp "$tmp/n/lora/adapter_model.safetensors" "$tmp/r/lora/adapter_model.safetensors"
n58=$(metrics "$tmp/n" | grep -c -E '"step": [5-8],')
ok "the straight run logged steps 5 to 8 ($n58)" test "$n58" -ge 4
expect_eq "... and its steps 5 to 8 log the same losses" "$(metrics "$tmp/n" | grep -E '"step": [5-8],')" \
    "$(metrics "$tmp/r" | grep -E '"step": [5-8],')"
done_testing
