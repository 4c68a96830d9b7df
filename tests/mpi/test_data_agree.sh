#!/bin/sh
# test_data_agree.sh — ranks that read different data under the same config stop together, on the
# tiny Llama in tests/data. Open MPI's MPMD form starts each rank in its own directory with a
# relative dataset path in the same config (as two nodes with different copies would be):
# - different row counts (they used to end in a raw MPI_ERR_TRUNCATE, their step counts differing);
# - the same row count and size, one byte of content changed (they used to train silently);
# - the same files but another tokenizer (a relative model path): the examples differ;
# each ends non-zero within seconds with one message from rank 1 naming the file as it resolved it,
# what differs and the fix; identical copies in both directories train (exit 0).
# Skips, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
need_mpirun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl
model=$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4

# the tiny config with a relative dataset path (and model path, when MODEL says so), one epoch
tiny_config "$tmp/c.yaml" "$tmp/out" "num_train_epochs: 1"
sed -i "s|\"$data\"|\"data.jsonl\"|" "$tmp/c.yaml"
cp "$tmp/c.yaml" "$tmp/m.yaml"
sed -i "s|\"$model\"|\"model\"|" "$tmp/m.yaml"

two_dirs() { # two_dirs NAME CONFIG: rank 0 in $tmp/NAME/a, rank 1 in $tmp/NAME/b; sets rc, secs
    rm -rf "$tmp/out"
    start=$(date +%s)
    timeout 120 "$mpirun" --oversubscribe -np 1 --wdir "$tmp/$1/a" "$P" train "$2" : \
        -np 1 --wdir "$tmp/$1/b" "$P" train "$2" >"$tmp/$1.out" 2>"$tmp/$1.err"
    rc=$?
    secs=$(($(date +%s) - start))
}
setup() { # setup NAME: both directories with the same data file
    mkdir -p "$tmp/$1/a" "$tmp/$1/b"
    cp "$data" "$tmp/$1/a/data.jsonl"
    cp "$data" "$tmp/$1/b/data.jsonl"
}
messages() { grep -c '^ptrain: rank [0-9]*: error' "$tmp/$1.err"; }
says() { grep -qF "$2" "$tmp/$1.err"; }
fix="start every rank in the same directory (mpirun --wdir, srun --chdir)"

setup same
two_dirs same "$tmp/c.yaml"
expect_eq "identical copies in two directories: training runs (exit 0)" 0 "$rc"

setup rows
head -n 30 "$data" >"$tmp/rows/b/data.jsonl"
two_dirs rows "$tmp/c.yaml"
ok "different row counts: the job ends non-zero within seconds (rc $rc, ${secs} s)" test "$rc" -ne 0 -a "$rc" -ne 124 -a "$secs" -lt 60
ok "different row counts: no raw MPI error (MPI_ERR_TRUNCATE, ORTE_ERROR_LOG)" sh -c "! grep -qE 'MPI_ERR|ORTE_ERROR|An error occurred in MPI' '$tmp/rows.err'"
expect_eq "different row counts: one message" 1 "$(messages rows)"
ok "different row counts: rank 1 names its file, its rows, what differs and the fix" says rows \
    "ptrain: rank 1: error: dataset[0] data.jsonl: this rank (1) read $tmp/rows/b/data.jsonl ("
ok "different row counts: ... 30 rows against 372 on rank 0" says rows \
    "30 rows, CRC-32"
ok "different row counts: ... the size, the content and the row count differ" says rows \
    "rank 0 read $tmp/rows/a/data.jsonl ($(wc -c <"$data") bytes, 372 rows"
ok "different row counts: ... and the fix" says rows "the size, the content and the row count differ. Every rank must read the same data"
ok "different row counts: nothing trained" test ! -e "$tmp/out/metrics.jsonl"

setup content
sed '5s/e/E/' "$data" >"$tmp/content/b/data.jsonl"
two_dirs content "$tmp/c.yaml"
ok "one byte changed: the job ends non-zero (rc $rc, ${secs} s)" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "one byte changed: one message" 1 "$(messages content)"
ok "one byte changed: rank 1 names its file and says the content differs" says content \
    "this rank (1) read $tmp/content/b/data.jsonl ($(wc -c <"$data") bytes, 372 rows, CRC-32"
ok "one byte changed: ... only the content" says content "): the content differs. Every rank must read"
ok "one byte changed: ... and the fix" says content "$fix"
ok "one byte changed: nothing trained" test ! -e "$tmp/out/metrics.jsonl"

setup tok
cp -r "$model" "$tmp/tok/a/model"
cp -r "$model" "$tmp/tok/b/model"
python3 - "$tmp/tok/b/model/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["model"]["merges"] = t["model"]["merges"][1:]  # another tokenizer: no "a l" merge
json.dump(t, open(sys.argv[1], "w"))
PY
two_dirs tok "$tmp/m.yaml"
ok "another tokenizer: the job ends non-zero (rc $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
expect_eq "another tokenizer: one message" 1 "$(messages tok)"
ok "another tokenizer: rank 1 says its examples differ and names its model" says tok \
    "this rank (1) read the same dataset files as rank 0 but made other training examples from them"
ok "another tokenizer: ... naming the model it resolved" says tok "the tokenizer differs, or the model it came from ($tmp/tok/b/model here)"
done_testing
