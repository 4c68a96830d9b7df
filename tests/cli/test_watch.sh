#!/bin/sh
# test_watch.sh — watching a run (issue 28), on the tiny Llama of tests/tiny.sh (a run takes about a
# second):
# - config: report_to, logging_dir and run_name in `ptrain check`'s table; a service ptrain does not
#   send to is named with what it writes instead; "none" among other entries and a run_name with a
#   '/' are errors;
# - TensorBoard (report_to: tensorboard), read by TensorBoard's own EventAccumulator
#   ($PTRAIN_PYTHON with tensorboard; skipped, saying so, without it): a run killed with kill -9 at
#   step 7 (checkpoint at 4) whose event file then loses its last bytes reads back as the steps
#   before the torn record; the run resumed by the same command continues the same curves in the
#   same directory, and TensorBoard then has every scalar at every step once, equal to
#   metrics.jsonl's; a torn tail of the newest file loses only its last record;
# - `ptrain status`: a killed run (its process gone), a run being written by a job still running,
#   a heartbeat gone stale on another node, a fresh one from another node, a finished run with its
#   resume, best checkpoint and an upload waiting for the Hub; --json; usage errors;
# - `ptrain plot` and training.png (the PNG's size; its pixels are checked in test_watch.c); a link
#   planted at training.png is replaced, never written through; HF_TOKEN reaches no file;
# - under mpirun, rank 0 alone writes the event file and the heartbeat.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
PY=${PTRAIN_PYTHON:-}
tmp=$(mktemp -d)
bg=""
cleanup() {
    [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
secret=hf_watchtestwatchtestwatchtestwatch
export HF_TOKEN=$secret

watch_config() { # watch_config FILE OUTDIR STEPS [more yaml]: each step logged, a checkpoint every 4
    tiny_config "$1" "$2" "max_steps: $3
logging_steps: 1
save_steps: 4
val_split_ratio: 0.2
eval_strategy: steps
eval_steps: 4
load_best_model_at_end: true
resume_from_checkpoint: true
${4:-}"
}
run() { # run CONFIG [env...]: sets rc; stdout in $tmp/out, stderr in $tmp/err
    cfg=$1
    shift
    env "$@" "$P" train "$cfg" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{print $3 * 256 + $4 "x" $7 * 256 + $8}'; }
tb_check() { # tb_check ARGS...: tests/cli/tb_check.py's output, its messages added when it fails
    "$PY" "$PTRAIN_SRCDIR/tests/cli/tb_check.py" "$@" 2>"$tmp/py.err" || cat "$tmp/py.err"
}
has_py() { [ -n "$PY" ] && "$PY" -c 'import tensorboard' 2>/dev/null; }
no_py="PTRAIN_PYTHON is unset or has no tensorboard (share/scripts/test-python.sh installs it)"

# --- config ---
watch_config "$tmp/c.yaml" "$tmp/c" 12 "report_to: [tensorboard, wandb]
run_name: lora-r4"
"$P" check "$tmp/c.yaml" >"$tmp/out" 2>"$tmp/err"
expect_eq "check: exit 0" 0 $?
ok "check: report_to in the table" grep -q "^report_to  *tensorboard, wandb$" "$tmp/out"
ok "check: run_name in the table" grep -q "^run_name  *lora-r4$" "$tmp/out"
ok "check: logging_dir in the table" grep -q "^logging_dir  *(unset)" "$tmp/out"
ok "check: wandb is named with what ptrain writes instead" grep -q \
    "c.yaml:[0-9]*:[0-9]*: report_to: ptrain cannot send metrics to Weights & Biases.*metrics.jsonl.*training.png.*TensorBoard event files under $tmp/c/runs/RUN_NAME" "$tmp/err"
watch_config "$tmp/bad.yaml" "$tmp/bad" 12 "report_to: [none, tensorboard]
run_name: a/b"
"$P" check "$tmp/bad.yaml" >/dev/null 2>"$tmp/err"
expect_eq "check: a bad report_to and run_name: exit 1" 1 $?
ok "check: none among other entries is named" grep -q "report_to: \"none\" among other entries" "$tmp/err"
ok "check: a run_name with '/' is named with the fix" grep -q "run_name: \"a/b\" cannot name a directory.*use a name" "$tmp/err"

# --- a run killed at step 7, its event file torn, then resumed by the same command ---
watch_config "$tmp/k.yaml" "$tmp/k" 12 "report_to: tensorboard"
mkdir -p "$tmp/k"
echo untouched >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/k/training.png"
run "$tmp/k.yaml" PTRAIN_TEST_KILL_STEP=7
expect_eq "killed run: died of SIGKILL" 137 "$rc"
"$P" status "$tmp/k" >"$tmp/status" 2>&1
expect_eq "status of a killed run: exit 0" 0 $?
ok "status of a killed run: not running, its process gone" grep -q "^$tmp/k: not running: its process [0-9]* on this host (.*) is gone" "$tmp/status"
ok "status of a killed run: the checkpoint it resumes from" grep -q "^checkpoint  $tmp/k/checkpoint-4.h5 (step 4)" "$tmp/status"
ok "training.png drawn at the checkpoint, the planted link replaced" test -f "$tmp/k/training.png" -a ! -L "$tmp/k/training.png"
expect_eq "the link's target is never written" untouched "$(cat "$tmp/victim")"
rname=$(sed -n 's/^ *"run_name": "\(.*\)",$/\1/p' "$tmp/k/heartbeat.json") # (not $name: tap.sh's ok uses it)
ok "the run's name is made as transformers makes it (Mon01_12-00-00_host)" \
    sh -c "echo '$rname' | grep -Eq '^[A-Z][a-z]{2}[0-9]{2}_[0-9]{2}-[0-9]{2}-[0-9]{2}_.'"
first=$(ls "$tmp/k/runs/$rname"/events.out.tfevents.*)
size=$(wc -c <"$first")
truncate -s $((size - 3)) "$first" # the last record torn, as a lost node can leave it
if has_py; then
    expect_eq "torn tail: TensorBoard reads the steps before the torn record" "1 2 3 4 5" \
        "$(tb_check "$tmp/k/runs/$rname" --steps train/loss)"
else
    skip_test "torn tail: TensorBoard reads the steps before the torn record" "$no_py"
fi
run "$tmp/k.yaml"
expect_eq "resumed run: exit 0" 0 "$rc"
expect_eq "resumed run: the same TensorBoard run directory" "$rname" "$(ls "$tmp/k/runs")"
expect_eq "resumed run: a second event file" 2 "$(ls "$tmp/k/runs/$rname" | wc -l)"
if has_py; then
    expect_eq "resumed run: TensorBoard has every scalar at every step once, as metrics.jsonl" ok \
        "$(tb_check "$tmp/k/runs/$rname" "$tmp/k/metrics.jsonl")"
    expect_eq "resumed run: train/loss at steps 1 to 12" "1 2 3 4 5 6 7 8 9 10 11 12" \
        "$(tb_check "$tmp/k/runs/$rname" --steps train/loss)"
    cp -r "$tmp/k/runs/$rname" "$tmp/torn"
    newest=$(ls "$tmp/torn"/events.out.tfevents.* | tail -n 1)
    truncate -s $(($(wc -c <"$newest") - 5)) "$newest"
    expect_eq "a torn tail of the newest file loses only its last record" "4 8" \
        "$(tb_check "$tmp/torn" --steps eval/loss)"
else
    for what in "every scalar at every step once" "train/loss at steps 1 to 12" "a torn tail of the newest file"; do
        skip_test "resumed run: $what" "$no_py"
    done
fi
"$P" status "$tmp/k" >"$tmp/status" 2>&1
ok "status of a finished run: finished" grep -q "^$tmp/k: finished on " "$tmp/status"
ok "status: step of total" grep -q "^step        12 of 12 (100%), epoch " "$tmp/status"
ok "status: the last loss and eval loss" grep -q "^loss        [0-9.]* at step 12, eval_loss [0-9.]* at step 12" "$tmp/status"
ok "status: speed, elapsed, ETA" grep -q "^speed       [0-9]* tokens/s, elapsed [0-9:]*, eta 0:00:00" "$tmp/status"
ok "status: the best checkpoint" grep -q "^best        $tmp/k/checkpoint-[0-9]*.h5 (eval_loss [0-9.]* at step [0-9]*)" "$tmp/status"
ok "status: the resume" grep -q "^resumes     1 (at step 4)" "$tmp/status"
ok "status: where TensorBoard looks" grep -q "^tensorboard tensorboard --logdir $tmp/k/runs/$rname" "$tmp/status"
mkdir -p "$tmp/k/hub/000001-checkpoint-12/files"
printf '{"repo_id": "tester/tiny", "message": "Training in progress, step 12", "key": "adapter", "what": "checkpoint 12", "private": true, "delete": []}\n' \
    >"$tmp/k/hub/000001-checkpoint-12/job.json"
"$P" status "$tmp/k" --json >"$tmp/json" 2>&1
expect_eq "status --json: exit 0" 0 $?
ok "status --json: the state" grep -q '^  "state": "finished",' "$tmp/json"
ok "status --json: steps" grep -q '"total_steps": 12,' "$tmp/json"
ok "status --json: the upload waiting" grep -q '"what": "checkpoint 12"' "$tmp/json"
"$P" status "$tmp/k" >"$tmp/status" 2>&1
ok "status: the upload waiting, and how to send it" grep -q "^hub         1 upload waiting: tester/tiny: checkpoint 12 (.*ptrain push $tmp/k" "$tmp/status"
ok "HF_TOKEN reaches no file of the run" sh -c "! grep -rq '$secret' '$tmp/k'"

# --- plot ---
"$P" plot "$tmp/k" --out "$tmp/k.png" >"$tmp/out" 2>&1
expect_eq "plot: exit 0" 0 $?
expect_eq "plot: a PNG of 1200x860" 1200x860 "$(png_size "$tmp/k.png")"
expect_eq "training.png at the end: 1200x860" 1200x860 "$(png_size "$tmp/k/training.png")"
"$P" plot "$tmp/c" >/dev/null 2>"$tmp/err"
expect_eq "plot of a directory without a run: exit 1" 1 $?
ok "plot of a directory without a run: names the file" grep -q "$tmp/c/metrics.jsonl not found" "$tmp/err"
"$P" plot >/dev/null 2>&1
expect_eq "plot without a directory: usage error" 2 $?
"$P" status >/dev/null 2>&1
expect_eq "status without a directory: usage error" 2 $?
"$P" status "$tmp/victim" >/dev/null 2>"$tmp/err"
expect_eq "status of a file: exit 1" 1 $?

# --- a job running now: status and plot from outside, then kill -9 ---
watch_config "$tmp/r.yaml" "$tmp/r" 200
PTRAIN_TEST_STEP_DELAY_MS=300 PTRAIN_TEST_HEARTBEAT_S=1 "$P" train "$tmp/r.yaml" >"$tmp/r.out" 2>&1 &
bg=$!
state=""
for _ in $(seq 1 600); do # a loaded machine gets two minutes
    "$P" status "$tmp/r" --json >"$tmp/json" 2>/dev/null
    state=$(sed -n 's/^  "state": "\(.*\)",$/\1/p' "$tmp/json")
    [ "$state" = running ] && grep -q '"loss_step": [1-9]' "$tmp/json" && break
    sleep 0.2
done
expect_eq "status of a job running now: running" running "$state"
"$P" status "$tmp/r" >"$tmp/status" 2>&1
ok "status of a job running now: host, PID, heartbeat" grep -q "^$tmp/r: running on .* (PID $bg), heartbeat " "$tmp/status"
ok "status of a job running now: step of 200" grep -q "^step        [0-9]* of 200 " "$tmp/status"
"$P" plot "$tmp/r" --out "$tmp/r.png" >/dev/null 2>&1
expect_eq "plot of a job running now: a PNG" 1200x860 "$(png_size "$tmp/r.png")"
ok "report_to none: no TensorBoard directory" test ! -e "$tmp/r/runs"
kill -9 "$bg"
wait "$bg" 2>/dev/null
bg=""
"$P" status "$tmp/r" >"$tmp/status" 2>&1
ok "status after kill -9: not running" grep -q "^$tmp/r: not running: its process [0-9]* on this host" "$tmp/status"
# the same heartbeat seen from another node: stale, then fresh
sed -E 's/"host": "[^"]*"/"host": "another-node"/; s/"updated": [0-9.e+]*/"updated": 1000/' "$tmp/r/heartbeat.json" \
    >"$tmp/hb" && mv "$tmp/hb" "$tmp/r/heartbeat.json"
"$P" status "$tmp/r" >"$tmp/status" 2>&1
ok "a stale heartbeat from another node: not running, and why" \
    grep -q "^$tmp/r: not running: its heartbeat stopped [0-9]* s ago (stale after 180 s): the job was killed or its node another-node was lost" "$tmp/status"
sed -E "s/\"updated\": [0-9.e+]*/\"updated\": $(date +%s)/" "$tmp/r/heartbeat.json" >"$tmp/hb" && mv "$tmp/hb" "$tmp/r/heartbeat.json"
"$P" status "$tmp/r" >"$tmp/status" 2>&1
ok "a fresh heartbeat from another node: running" grep -q "^$tmp/r: running on another-node" "$tmp/status"

# --- several ranks: rank 0 alone writes ---
mpirun=${MPIRUN:-mpirun}
if command -v "$mpirun" >/dev/null 2>&1; then
    tiny_config "$tmp/m.yaml" "$tmp/m" "max_steps: 4
logging_steps: 1
report_to: tensorboard
run_name: two-ranks"
    "$mpirun" -np 2 "$P" train "$tmp/m.yaml" >"$tmp/out" 2>&1
    expect_eq "two ranks: exit 0" 0 $?
    expect_eq "two ranks: one event file" 1 "$(ls "$tmp/m/runs/two-ranks" | wc -l)"
    ok "two ranks: the heartbeat says finished" grep -q '"state": "finished"' "$tmp/m/heartbeat.json"
else
    skip_test "two ranks: rank 0 alone writes" "mpirun not found"
fi
done_testing
