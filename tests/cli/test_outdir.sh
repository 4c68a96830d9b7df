#!/bin/sh
# test_outdir.sh — what ptrain writes cannot be redirected, and one run owns its output_dir (issue
# 24). On the tiny Llama of tests/tiny.sh (a run takes about half a second):
# - the sweep: a reference run (checkpoints, save_total_limit, eval, the final adapter in three
#   formats, Hub staging against an unreachable endpoint) is listed; then, for every name it
#   created, a fresh run finds a symbolic link planted at that name (a file's name: a link to a
#   victim file; a directory's: a link owned by another user to a victim directory). Each run
#   either refuses with an error naming the planted path or replaces the link; the victims are
#   never written;
# - a link at output_dir that is the user's own is followed (scratch -> /lustre/... is common);
# - the lock: a second run in the same output_dir is refused with the first one's host and PID; a
#   kill -9 leaves no stale lock; a requeued Slurm job waits for its own earlier instance;
# - metrics.jsonl: a kill -9 before the first checkpoint does not leave the dead run's steps to be
#   logged twice; a record cut short is dropped on resume; a full disk while appending (a real
#   tmpfs) is an error naming the file and the reason, with no partial record;
# - with umask 000, directories are created 0755 and files 0644;
# - an output_dir with a newline and a long name: the progress lines that name it (the dataset
#   cache, checkpoints, resume) show it as error messages do (shown_text: \n escaped, the middle
#   of a long path cut), one line each.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
mnt=""
cleanup() {
    [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# uploads go nowhere (connection refused at once) and stay staged in output_dir/hub/
export HF_ENDPOINT=http://127.0.0.1:9 HF_TOKEN=hf_outdirtestoutdirtestoutdirtestoutd

sweep_config() { # sweep_config FILE OUTDIR
    tiny_config "$1" "$2" "max_steps: 6
save_steps: 2
save_total_limit: 2
logging_steps: 1
eval_strategy: steps
eval_steps: 3
val_split_ratio: 0.2
push_to_hub: true
hub_model_id: tester/outdir
hub_strategy: checkpoint
hub_upload_timeout: 1"
}

train() { # train CONFIG [env...]: sets rc; stdout in $tmp/out, stderr in $tmp/err
    cfg=$1
    shift
    env "$@" "$P" train "$cfg" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# --- the reference run and what it creates ---
sweep_config "$tmp/ref.yaml" "$tmp/ref"
train "$tmp/ref.yaml"
expect_eq "reference run: exit 0" 0 "$rc"
(cd "$tmp/ref" && find . -mindepth 1 | sed 's#^\./##' | sort) >"$tmp/names"
ok "reference run: it creates checkpoints, metrics, the lock, the adapter and Hub staging" \
    sh -c "grep -qx checkpoint-6.h5 '$tmp/names' && grep -qx metrics.jsonl '$tmp/names' && \
grep -qx .ptrain.lock '$tmp/names' && grep -qx lora/adapter.h5 '$tmp/names' && grep -q '^hub/.*/job.json' '$tmp/names'"

# --- the sweep: a link planted at every one of those names ---
other_owner=yes
ln -s /nonexistent "$tmp/probe" && chown -h 65534:65534 "$tmp/probe" 2>/dev/null || other_owner=""
rm -f "$tmp/probe"
mkdir -p "$tmp/victimdir"
# sweep LABEL NAMES REF RUN: for each name of the file NAMES (made under REF), RUN OUTDIR in a fresh
# directory where a link sits at that name; sets n (names tried) and bad (what went wrong)
sweep() {
    label=$1 names=$2 ref=$3 runner=$4
    n=0 bad=""
    while read -r name; do
        n=$((n + 1))
        d=$tmp/$label$n
        mkdir -p "$(dirname "$d/out/$name")"
        printf 'untouched\n' >"$tmp/victim.txt"
        if [ -d "$ref/$name" ]; then
            [ -n "$other_owner" ] || continue
            ln -s "$tmp/victimdir" "$d/out/$name"
            chown -h 65534:65534 "$d/out/$name"
        else
            ln -s "$tmp/victim.txt" "$d/out/$name"
        fi
        "$runner" "$d"
        what="$name: exit $rc"
        [ "$(cat "$tmp/victim.txt")" = untouched ] || what="$what, the victim file was written"
        [ -z "$(ls -A "$tmp/victimdir")" ] || what="$what, files appeared in the victim directory"
        [ "$rc" != 1 ] || grep -qF "$d/out/$name" "$tmp/err" || what="$what, the error does not name the link"
        [ "$rc" = 0 ] || [ "$rc" = 1 ] || what="$what, (a crash?)"
        case $what in *,*) bad="$bad
$what" ;; esac
        rm -rf "$tmp/victimdir"/* "$tmp/victimdir"/.[!.]* 2>/dev/null
    done <"$names"
}
train_into() { # the sweep's training run into $1/out
    sweep_config "$1/c.yaml" "$1/out"
    train "$1/c.yaml"
}
sweep s "$tmp/names" "$tmp/ref" train_into
expect_eq "sweep of a training run: $n planted links, no victim written, every refusal names the link" "" "$bad"
[ -n "$other_owner" ] || skip_test "sweep: links at directory names" "cannot chown a link to uid 65534 here (not root)"
d=$tmp/sm
mkdir -p "$d/out"
ln -s "$tmp/victim.txt" "$d/out/metrics.jsonl"
sweep_config "$d/c.yaml" "$d/out"
train "$d/c.yaml"
expect_eq "a link at metrics.jsonl: exit 1" 1 "$rc"
ok "a link at metrics.jsonl: the error names it and says it is a link" \
    grep -q "refusing to [a-z ]* $d/out/metrics.jsonl: it is a symbolic link" "$tmp/err"
ok "a link at metrics.jsonl: refused before the first step" test -z "$(grep '^step ' "$tmp/out")"
if [ -n "$other_owner" ]; then
    d=$tmp/sl
    mkdir -p "$d/out"
    ln -s "$tmp/victimdir" "$d/out/lora"
    chown -h 65534:65534 "$d/out/lora"
    sweep_config "$d/c.yaml" "$d/out"
    train "$d/c.yaml"
    ok "another user's link at final_model_dir: refused, naming it and its owner" \
        grep -q "$d/out/lora is a symbolic link owned by another user (uid 65534)" "$tmp/err"
else
    skip_test "another user's link at final_model_dir" "cannot chown a link to uid 65534 here (not root)"
fi

# --- the same for `ptrain export` (the tiny Qwen2: PEFT and GGUF adapters, merged HF and GGUF, Modelfile) ---
qwen=$PTRAIN_SRCDIR/tests/data/qwen2/hf
tiny_config "$tmp/qw.yaml" "$tmp/qw" "max_steps: 1"
sed -i "s#$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4#$qwen#" "$tmp/qw.yaml"
train "$tmp/qw.yaml"
export_into() { # export the tiny Qwen2 adapter into $1/out
    "$P" export --model "$qwen" --adapter "$tmp/qw/lora" --out "$1/out" --hf --gguf q8_0 --ollama pirate \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
export_into "$tmp/exref"
(cd "$tmp/exref/out" && find . -mindepth 1 | sed 's#^\./##' | sort) >"$tmp/exnames"
ok "reference export: merged HF and GGUF, adapters and a Modelfile" \
    sh -c "[ $rc = 0 ] && grep -qx merged/model.safetensors '$tmp/exnames' && grep -qx merged-q8_0.gguf '$tmp/exnames' && \
grep -qx Modelfile '$tmp/exnames'"
sweep e "$tmp/exnames" "$tmp/exref/out" export_into
expect_eq "sweep of an export: $n planted links, no victim written, every refusal names the link" "" "$bad"

# --- the user's own link at output_dir is followed ---
mkdir -p "$tmp/real"
ln -s "$tmp/real" "$tmp/mine"
sweep_config "$tmp/mine.yaml" "$tmp/mine"
train "$tmp/mine.yaml"
ok "the user's own link at output_dir: followed, the run writes through it" \
    sh -c "[ $rc = 0 ] && [ -f '$tmp/real/checkpoint-6.h5' ] && [ -f '$tmp/real/lora/adapter.h5' ]"

# --- one run per output_dir ---
lock_config() { # lock_config FILE OUTDIR: a run long enough to overlap (0.3 s a step)
    tiny_config "$1" "$2" "max_steps: 30
save_steps: 10
logging_steps: 1
resume_from_checkpoint: true"
}
lock_config "$tmp/lock.yaml" "$tmp/lock"
PTRAIN_TEST_STEP_DELAY_MS=300 "$P" train "$tmp/lock.yaml" >"$tmp/first.out" 2>"$tmp/first.err" &
first=$!
i=0
while ! grep -q '^step ' "$tmp/first.out" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
train "$tmp/lock.yaml"
expect_eq "a second run in the same output_dir: exit 1" 1 "$rc"
ok "... refused with the first run's host and PID" \
    grep -q "output_dir $tmp/lock is in use by another ptrain run: host $(hostname), PID $first, since " "$tmp/err"
ok "... before loading anything, and it wrote nothing" \
    sh -c "[ -z \"\$(grep '^step ' '$tmp/out')\" ] && [ \$(grep -c '\"step\": 1,' '$tmp/lock/metrics.jsonl') = 1 ]"
kill -9 $first
wait $first 2>/dev/null
train "$tmp/lock.yaml"
expect_eq "after a kill -9 of the holder: the next run takes the lock at once and finishes" 0 "$rc"
lock_config "$tmp/job.yaml" "$tmp/job"
SLURM_JOB_ID=4242 PTRAIN_TEST_STEP_DELAY_MS=100 "$P" train "$tmp/job.yaml" >"$tmp/job1.out" 2>&1 &
first=$!
i=0
while ! grep -q '^step ' "$tmp/job1.out" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
train "$tmp/job.yaml" SLURM_JOB_ID=4242
wait $first
expect_eq "a requeued Slurm job finding its earlier instance's lock: waits, then runs (exit 0)" 0 "$rc"
ok "... saying whom it waits for" grep -q "still held by an earlier run of Slurm job 4242 (host $(hostname), PID $first)" "$tmp/out"

# --- metrics.jsonl ---
records() { grep -c "\"step\": $2," "$1/metrics.jsonl"; }
kill_config() {
    tiny_config "$1" "$2" "max_steps: 8
save_steps: 4
logging_steps: 1
resume_from_checkpoint: true"
}
kill_config "$tmp/k.yaml" "$tmp/k"
train "$tmp/k.yaml" PTRAIN_TEST_KILL_STEP=3
expect_eq "kill -9 at step 3, before the first checkpoint: died of SIGKILL" 137 "$rc"
train "$tmp/k.yaml"
ok "... the run from scratch logs steps 1 and 2 once, not twice" \
    sh -c "[ $rc = 0 ] && [ $(records "$tmp/k" 1) = 1 ] && [ $(records "$tmp/k" 2) = 1 ] && [ $(records "$tmp/k" 8) = 1 ]"
kill_config "$tmp/p.yaml" "$tmp/p"
train "$tmp/p.yaml" PTRAIN_TEST_KILL_STEP=6
printf '{"step": 3, "epoch": 0.1, "lo' >>"$tmp/p/metrics.jsonl"
train "$tmp/p.yaml"
ok "a record cut short (no newline) is dropped on resume; every line is JSON" \
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/p/metrics.jsonl"
ok "... and each step logged once" sh -c "[ $(records "$tmp/p" 3) = 1 ] && [ $(records "$tmp/p" 8) = 1 ]"

mnt=$tmp/small
mkdir -p "$mnt"
if mount -t tmpfs -o size=64k tmpfs "$mnt" 2>"$tmp/mount.err"; then
    tiny_config "$tmp/full.yaml" "$mnt/run" "max_steps: 400
save_strategy: \"no\"
logging_steps: 1"
    mkdir -p "$mnt/run"
    head -c 16000 /dev/zero >"$mnt/filler" 2>/dev/null # the dataset cache takes about 20 KB of the rest
    train "$tmp/full.yaml"
    expect_eq "disk full while appending metrics.jsonl: exit 1" 1 "$rc"
    ok "... the error names the file and the reason" \
        grep -q "cannot write $mnt/run/metrics.jsonl: No space left on device (the disk is full" "$tmp/err"
    ok "... no partial record: every line is whole JSON" \
        python3 -c 'import json,sys; d=open(sys.argv[1]).read(); assert d.endswith("\n"); [json.loads(l) for l in d.splitlines()]' \
        "$mnt/run/metrics.jsonl"
    umount "$mnt" && mnt=""
else
    for t in "exit 1" "the error" "no partial record"; do
        skip_test "disk full while appending metrics.jsonl: $t" "cannot mount a tmpfs here: $(head -c 120 "$tmp/mount.err")"
    done
    mnt=""
fi

# --- progress lines show output_dir through shown_text ---
long=$(printf '%0170d' 0 | tr 0 d)
tiny_config "$tmp/shown.yaml" "$tmp/new\\nline/$long" "max_steps: 4
save_steps: 2
resume_from_checkpoint: true
logging_dir: \"$tmp/shown-tb\""
sed -i "s#^final_model_dir: .*#final_model_dir: \"$tmp/shown-lora\"#" "$tmp/shown.yaml" # its command stays whole
train "$tmp/shown.yaml"
expect_eq "output_dir with a newline and 231 bytes: the run finishes" 0 "$rc"
cp "$tmp/out" "$tmp/shown.1"
sed -i 's/^max_steps: 4$/max_steps: 6/' "$tmp/shown.yaml"
train "$tmp/shown.yaml"
expect_eq "... and resumes" 0 "$rc"
cat "$tmp/out" >>"$tmp/shown.1"
shown="$tmp/new\\\\nline/d+…\([0-9]+ bytes\)…d+" # an extended regular expression
expect_eq "... no progress line is cut by the newline" "" "$(grep '^line/' "$tmp/shown.1")"
for line in "dataset    tokenized on 1 rank, kept in $shown/dataset-[0-9a-f]*\.ptdata for the next run" \
    "checkpoint $shown/checkpoint-2\.h5 written .*" "dataset    reused $shown/dataset-[0-9a-f]*\.ptdata .*" \
    "resume     from $shown/checkpoint-4\.h5 at step 4 .*" "checkpoint $shown/checkpoint-6\.h5 written .*"; do
    ok "... shown escaped and shortened: $line" grep -Eqx "$line" "$tmp/shown.1"
done

# --- modes under umask 000 ---
sweep_config "$tmp/um.yaml" "$tmp/um/out"
(umask 000 && "$P" train "$tmp/um.yaml" >"$tmp/out" 2>"$tmp/err")
expect_eq "umask 000: the run finishes" 0 $?
expect_eq "umask 000: every directory 755 (hub staging included), every file 644" "" \
    "$(find "$tmp/um" -mindepth 1 \( -type d ! -perm 755 -o -type f ! -perm 644 \) -printf '%p %m\n')"
done_testing
