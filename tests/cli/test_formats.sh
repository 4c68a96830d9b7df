#!/bin/sh
# test_formats.sh — Parquet, CSV and a Hub snapshot train as JSON Lines do (issue 43): on the tiny
# Llama, `ptrain train` on a Parquet file (tests/data/datasets/pq/pirate-40.parquet: 40 sample
# conversations as datasets writes them, 5 row groups), on a CSV file (csv/alpaca.csv) and on a
# Parquet Hub snapshot in an HF cache (acme/tables) gives, bit for bit, the adapter that the same
# rows as JSON Lines give (the rows datasets.load_dataset reads from the file, NAME.rows.jsonl,
# tests/reference/make_parquet_rows.py and make_csv_rows.py); with mpirun, so do two ranks, each
# tokenizing a share of every row group. Skips the two-rank case, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=$PTRAIN_SRCDIR/tests/data/datasets

# train NAME DATA [NP]: 6 steps of the tiny run on DATA (a path or an HF id) into $tmp/NAME; sets rc
train() {
    tiny_config "$tmp/$1.yaml" "$tmp/$1" "max_steps: 6
seed: 5"
    sed -i "s|\"$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl\"|\"$2\"|" "$tmp/$1.yaml"
    if [ "${3:-1}" -eq 1 ]; then
        timeout 300 "$P" train "$tmp/$1.yaml" >"$tmp/$1.out" 2>&1
    else
        OMP_NUM_THREADS=1 timeout 300 "$mpirun" --oversubscribe -np "$3" "$P" train "$tmp/$1.yaml" >"$tmp/$1.out" 2>&1
    fi
    rc=$?
    [ "$rc" -eq 0 ] || sed -e 's/^/# /' "$tmp/$1.out" | tail -5
}

# same A B WHAT: both runs ended and their adapters are the same bytes
same() {
    ok "$3: trains, the adapter equal to the JSON Lines run's" \
        cmp -s "$tmp/$1/lora/adapter_model.safetensors" "$tmp/$2/lora/adapter_model.safetensors"
}

train pq "$data/pq/pirate-40.parquet"
ok "Parquet: the run ends" test "$rc" = 0
ok "Parquet: the report lists the file and its 40 rows" contains "$(cat "$tmp/pq.out")" "pirate-40.parquet: 40 rows"
train pqj "$data/pq/pirate-40.parquet.rows.jsonl"
same pq pqj "Parquet (5 row groups)"

train csv "$data/csv/alpaca.csv"
train csvj "$data/csv/alpaca.csv.rows.jsonl"
same csv csvj "CSV (Alpaca columns)"
ok "other rows give another adapter (the comparison can fail)" test -s "$tmp/csv/lora/adapter_model.safetensors" -a \
    -n "$(cmp "$tmp/pq/lora/adapter_model.safetensors" "$tmp/csv/lora/adapter_model.safetensors" 2>&1)"

# the Hub snapshot's train split (two shards) against its three rows as JSON Lines
for i in 0 1 2; do
    printf '{"messages": [{"role": "user", "content": "Question %s?"}, {"role": "assistant", "content": "Answer %s."}]}\n' \
        "$i" "$i"
done >"$tmp/tables.jsonl"
HF_HUB_CACHE=$data/hfcache
export HF_HUB_CACHE
train hub acme/tables
unset HF_HUB_CACHE
train hubj "$tmp/tables.jsonl"
same hub hubj "Hub snapshot (Parquet shards)"

mpirun=${MPIRUN:-mpirun}
if command -v "$mpirun" >/dev/null 2>&1; then
    train pq2 "$data/pq/pirate-40.parquet" 2
    train pqj2 "$data/pq/pirate-40.parquet.rows.jsonl" 2
    same pq2 pqj2 "Parquet on 2 ranks"
else
    skip_test "Parquet on 2 ranks" "mpirun not found (Debian: apt-get install openmpi-bin)"
fi

done_testing
