#!/bin/sh
# test_rerun.sh — "run the same command again" must be true (issue 44), on the tiny Llama of
# tests/tiny.sh:
# - a config that does not resume (resume_from_checkpoint left at false), stopped by SIGTERM after
#   a checkpoint: the exit-75 line and `ptrain status` (text and --json) name the key to set, never
#   "run the same command again to continue"; with resume_from_checkpoint: true (SIGUSR1, Ctrl-C)
#   they say exactly that, and the same command continues;
# - the same command again is refused (exit 1) before it writes anything (not even the lock or the
#   heartbeat), naming the newest complete checkpoint, its step, that this config wrote it, and
#   both keys; a config that differs is told its config hash differs; while the first run still
#   runs there, the lock's message names it instead;
# - an output_dir holding only a finished final_model_dir, a lock of a dead process, files that
#   are not ptrain's, or only a damaged checkpoint starts as before;
# - overwrite_output_dir: true starts over: the earlier run's checkpoints, metrics.jsonl, TensorBoard
#   event files, staged Hub pushes, heartbeat (so the run gets a new name) and the dataset cache of
#   other data are removed first, the user's files and a link planted at a checkpoint's name are
#   not, and nothing of the two runs mixes; its exit-75 line says to use resume_from_checkpoint in
#   its place.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# uploads go nowhere (connection refused at once) and stay staged in output_dir/hub/
export HF_ENDPOINT=http://127.0.0.1:9 HF_TOKEN=hf_reruntestreruntestreruntestrerunte

train() { # train CONFIG [env...]: sets rc; stdout in $tmp/out, stderr in $tmp/err
    cfg=$1
    shift
    env "$@" "$P" train "$cfg" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# stop CONFIG SIGNAL: train CONFIG slowly, send SIGNAL once it logged a step; sets rc, the output in
# $tmp/out, and stopped (the step it stopped after)
stop() {
    # emptied first: the shell truncates it in the child after the fork, and the loop below must not
    # read the previous run's step lines and signal a process not yet started (whose SIGINT an
    # asynchronous command of a non-interactive shell ignores until ptrain installs its handler)
    : >"$tmp/out"
    PTRAIN_TEST_STEP_DELAY_MS=150 "$P" train "$1" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    i=0
    until grep -q '^step ' "$tmp/out" 2>/dev/null || [ $i -gt 1200 ]; do sleep 0.1; i=$((i + 1)); done
    kill -s "$2" "$pid"
    wait "$pid"
    rc=$?
    stopped=$(sed -n 's/.*stopped    by SIG[A-Z0-9]* after step \([0-9]*\).*/\1/p' "$tmp/out")
}

# what is in a directory, with sizes, times and contents' sums: any write shows
snapshot() { (cd "$1" && find . -printf '%p %s %T@\n' | sort && find . -type f -exec md5sum {} + | sort); }

# --- a config that does not resume, stopped by SIGTERM ---
tiny_config "$tmp/a.yaml" "$tmp/a" "max_steps: 30
save_steps: 1
logging_steps: 1"
stop "$tmp/a.yaml" TERM
expect_eq "no resume key, SIGTERM: exit 75" 75 "$rc"
ok "no resume key, SIGTERM: the checkpoint of step $stopped is written" test -n "$stopped" -a -f "$tmp/a/checkpoint-$stopped.h5"
ok "no resume key: the exit-75 line names the key to set, not \"run the same command again to continue\"" \
    sh -c "grep -q 'stopped    by SIGTERM after step $stopped: checkpoint written; to continue, set resume_from_checkpoint: true in $tmp/a.yaml, then run the same command again' '$tmp/out' && ! grep -q 'again to continue' '$tmp/out'"
"$P" status "$tmp/a" >"$tmp/status" 2>&1
ok "no resume key: ptrain status names the key to set" \
    sh -c "grep -q '^$tmp/a: stopped by a signal after a checkpoint (exit status 75), .* ago; to continue, set resume_from_checkpoint: true in $tmp/a.yaml' '$tmp/status' && ! grep -q 'again to continue' '$tmp/status'"
"$P" status "$tmp/a" --json >"$tmp/status.json" 2>&1
ok "no resume key: ptrain status --json: to_continue names the key, the heartbeat says resume_from_checkpoint false" \
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); h=s["heartbeat"]
assert s["to_continue"].startswith("to continue, set resume_from_checkpoint: true in "), s["to_continue"]
assert h["resume_from_checkpoint"] == "false" and h["overwrite_output_dir"] is False, h' "$tmp/status.json"

# --- the same command again: refused before it writes anything ---
snapshot "$tmp/a" >"$tmp/before"
train "$tmp/a.yaml"
expect_eq "the same command again without resume: refused (exit 1)" 1 "$rc"
ok "... naming the newest complete checkpoint, its step and that this config wrote it" \
    grep -q "output_dir $tmp/a holds the checkpoints of an earlier run; the newest complete one is $tmp/a/checkpoint-$stopped.h5 at step $stopped of 30, written with this config (the same config hash, [0-9a-f]*)" "$tmp/err"
ok "... and the two ways on: resume_from_checkpoint: true to continue, overwrite_output_dir: true to start over" \
    grep -q "To continue from step $stopped, set resume_from_checkpoint: true in $tmp/a.yaml; to start over, set overwrite_output_dir: true" "$tmp/err"
expect_eq "... one error line, nothing else on stderr" 1 "$(wc -l <"$tmp/err")"
ok "... before any step" test -z "$(grep '^step ' "$tmp/out")"
snapshot "$tmp/a" >"$tmp/after"
ok "... and before it wrote anything: the lock, heartbeat, metrics, cache and checkpoints are untouched" \
    cmp -s "$tmp/before" "$tmp/after"
sed 's/^max_steps: 30/max_steps: 31/' "$tmp/a.yaml" >"$tmp/a2.yaml"
train "$tmp/a2.yaml"
ok "another config into the same output_dir: refused, saying its config hash differs" \
    sh -c "[ $rc = 1 ] && grep -q 'at step $stopped of 30, written with another config ($tmp/a.yaml, config hash [0-9a-f]*; this config.s is [0-9a-f]*)' '$tmp/err'"

# a run going on there now: the lock's message (its host and PID), not the checkpoints'
tiny_config "$tmp/live.yaml" "$tmp/live" "max_steps: 30
save_steps: 1
logging_steps: 1"
PTRAIN_TEST_STEP_DELAY_MS=300 "$P" train "$tmp/live.yaml" >"$tmp/live.out" 2>&1 &
live=$!
i=0
until [ -f "$tmp/live/checkpoint-1.h5" ] || [ $i -gt 1200 ]; do sleep 0.1; i=$((i + 1)); done
train "$tmp/live.yaml"
ok "the same command while the first still runs: refused with that run's host and PID, not as an earlier run" \
    sh -c "[ $rc = 1 ] && grep -q 'output_dir $tmp/live is in use by another ptrain run: host $(hostname), PID $live' '$tmp/err' &&
           ! grep -q 'earlier run' '$tmp/err'"
kill -9 $live
wait $live 2>/dev/null

# --- with resume_from_checkpoint: true the same command continues, and the messages say so ---
printf 'resume_from_checkpoint: true\n' >>"$tmp/a.yaml"
stop "$tmp/a.yaml" USR1
expect_eq "resume_from_checkpoint: true: the run continues, and stops on SIGUSR1 with exit 75" 75 "$rc"
ok "... it continued from the checkpoint of the first run" grep -q "resume     from $tmp/a/checkpoint-[0-9]*.h5 at step" "$tmp/out"
ok "... its exit-75 line says to run the same command again" \
    grep -q "stopped    by SIGUSR1 after step $stopped: checkpoint written; run the same command again to continue (exit status 75)" "$tmp/out"
"$P" status "$tmp/a" >"$tmp/status" 2>&1
ok "... and so does ptrain status" grep -q "^$tmp/a: stopped by a signal after a checkpoint (exit status 75), .* ago; run the same command again to continue$" "$tmp/status"
stop "$tmp/a.yaml" INT
ok "... Ctrl-C: the same line" grep -q "stopped    by SIGINT after step [0-9]*: checkpoint written; run the same command again to continue (exit status 75)" "$tmp/out"
train "$tmp/a.yaml"
expect_eq "... and the same command finishes the run" 0 "$rc"

# --- what is not a run to protect: the run starts as before ---
tiny_config "$tmp/f.yaml" "$tmp/f" "max_steps: 2
save_strategy: \"no\""
train "$tmp/f.yaml"
train "$tmp/f.yaml"
expect_eq "an output_dir holding only a finished final_model_dir (no checkpoint): starts again (exit 0)" 0 "$rc"
tiny_config "$tmp/l.yaml" "$tmp/l" "max_steps: 2
save_steps: 1"
mkdir -p "$tmp/l"
sh -c 'exit 0' &
dead=$!
wait $dead
printf 'host=%s pid=%s slurm_job=- since=2025-01-01T00:00:00Z\n' "$(hostname)" "$dead" >"$tmp/l/.ptrain.lock"
train "$tmp/l.yaml"
expect_eq "an output_dir holding the lock of a dead process: starts (exit 0)" 0 "$rc"
tiny_config "$tmp/u.yaml" "$tmp/u" "max_steps: 2
save_steps: 1"
mkdir -p "$tmp/u/mine"
printf 'mine\n' >"$tmp/u/notes.txt"
printf 'mine\n' >"$tmp/u/mine/data.json"
train "$tmp/u.yaml"
ok "an output_dir holding files that are not ptrain's: starts (exit 0), the files untouched" \
    sh -c "[ $rc = 0 ] && [ \"\$(cat '$tmp/u/notes.txt' '$tmp/u/mine/data.json')\" = \"mine
mine\" ]"
tiny_config "$tmp/d.yaml" "$tmp/d" "max_steps: 2
save_steps: 1"
mkdir -p "$tmp/d"
cp "$tmp/a/checkpoint-1.h5" "$tmp/d/checkpoint-7.h5"
printf 'X' | dd of="$tmp/d/checkpoint-7.h5" bs=1 seek=3000 conv=notrunc 2>/dev/null
train "$tmp/d.yaml"
expect_eq "an output_dir holding only a damaged checkpoint (no complete one): starts (exit 0)" 0 "$rc"

# --- overwrite_output_dir: true starts over, and nothing of the two runs mixes ---
tiny_config "$tmp/o1.yaml" "$tmp/o" "max_steps: 8
save_steps: 2
logging_steps: 1
report_to: tensorboard
push_to_hub: true
hub_model_id: tester/rerun
hub_strategy: checkpoint
hub_upload_timeout: 1"
train "$tmp/o1.yaml"
ok "the first run: checkpoints, metrics, TensorBoard, Hub jobs and a dataset cache" \
    sh -c "[ $rc = 0 ] && [ -f '$tmp/o/checkpoint-8.h5' ] && [ -n \"\$(ls '$tmp/o/runs/'*/events.out.tfevents.*)\" ] && \
[ -n \"\$(ls '$tmp/o/hub')\" ] && [ -n \"\$(ls '$tmp/o/'dataset-*.ptdata)\" ]"
old_name=$(sed -n 's/.*"run_name": "\(.*\)".*/\1/p' "$tmp/o/heartbeat.json")
old_cache=$(ls "$tmp/o" | grep '^dataset-')
printf 'mine\n' >"$tmp/o/notes.txt"
mkdir -p "$tmp/o/runs/mine"
printf 'mine\n' >"$tmp/o/runs/mine/notes.txt"
printf 'victim\n' >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/o/checkpoint-99.h5"
sleep 1 # the second run's name (the start time) differs from the first's
tiny_config "$tmp/o2.yaml" "$tmp/o" "max_steps: 3
save_steps: 2
logging_steps: 1
seed: 7
report_to: tensorboard
overwrite_output_dir: true"
sed -i 's/num_samples: 40/num_samples: 30/' "$tmp/o2.yaml"
train "$tmp/o2.yaml"
expect_eq "overwrite_output_dir: true into the first run's output_dir: runs (exit 0)" 0 "$rc"
ok "... saying what it removed first" \
    grep -q "^overwrite  output_dir $tmp/o: removed the earlier run's 4 checkpoints (the newest of step 8), metrics.jsonl, training.png, heartbeat.json, 1 TensorBoard event file, [0-9]* Hub push\(es\)\? not made; starting over" "$tmp/out"
expect_eq "... the checkpoints are this run's only (and the planted link, left alone)" \
    "checkpoint-2.h5 checkpoint-3.h5 checkpoint-99.h5" "$(ls "$tmp/o" | grep '^checkpoint' | tr '\n' ' ' | sed 's/ $//')"
ok "... the link was not followed: its target is untouched" test "$(cat "$tmp/victim")" = victim -a -L "$tmp/o/checkpoint-99.h5"
expect_eq "... metrics.jsonl holds this run's steps only (1 to 3) and one start" "1 2 3|1" \
    "$(grep -v startup "$tmp/o/metrics.jsonl" | sed -n 's/.*"step": \([0-9]*\),.*/\1/p' | tr '\n' ' ' | sed 's/ $//')|$(grep -c startup "$tmp/o/metrics.jsonl")"
new_name=$(sed -n 's/.*"run_name": "\(.*\)".*/\1/p' "$tmp/o/heartbeat.json")
ok "... the run has a name of its own ($new_name, not $old_name)" test -n "$new_name" -a "$new_name" != "$old_name"
expect_eq "... TensorBoard: the first run's event files are gone, this run has one; the user's directory stays" \
    "$new_name mine|1" "$(LC_ALL=C ls "$tmp/o/runs" | tr '\n' ' ' | sed 's/ $//')|$(ls "$tmp/o/runs/$new_name" | grep -c '^events.out.tfevents')"
ok "... the first run's Hub pushes are dropped (this run does not push)" test ! -e "$tmp/o/hub"
ok "... the dataset cache of the first run's data is removed, this run's is kept" \
    sh -c "[ ! -e '$tmp/o/$old_cache' ] && [ \$(ls '$tmp/o' | grep -c '^dataset-') = 1 ] && grep -q 'overwrite  removed 1 dataset cache' '$tmp/out'"
ok "... the user's files stay" test "$(cat "$tmp/o/notes.txt" "$tmp/o/runs/mine/notes.txt")" = "mine
mine"
stop_cfg=$tmp/o3.yaml
sed 's/^max_steps: 3/max_steps: 300/' "$tmp/o2.yaml" >"$stop_cfg"
stop "$stop_cfg" TERM
ok "overwrite_output_dir, stopped by SIGTERM: the exit-75 line says to use resume_from_checkpoint in its place" \
    grep -q "checkpoint written; to continue, set resume_from_checkpoint: true in $stop_cfg in place of overwrite_output_dir: true" "$tmp/out"
done_testing
