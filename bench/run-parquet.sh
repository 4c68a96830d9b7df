#!/bin/bash
# run-parquet.sh — reading a chat dataset from Parquet (issue 43): ROWS conversations
# (messages: list<struct<role, content>>, 2-6 turns of random words) written by pyarrow with
# Snappy in row groups of ROW_GROUP rows (default 100,000), then in the same run on the same
# machine with the same threads:
#   - ptrain: a one-step run on SmolLM2-135M-Instruct (GGUF), the dataset phase of its start-up
#     record (read, format, chat template, tokenize, label; no dataset cache) and its peak RSS;
#     the same rows as JSON Lines for comparison; the same run on the first 1,000 rows (one
#     group), whose peak RSS is the model's and the training step's, so that the difference is
#     what the dataset took, printed beside the tokenized output (the dataset cache the run
#     writes: ids and labels, 8 bytes a token) and the size of one row group's rows;
#   - the peer: datasets.load_dataset("parquet") + apply_chat_template + tokenize through
#     Dataset.map(batched, num_proc=THREADS) with SmolLM2's tokenizer (transformers), wall time;
# and the ratio. PEER=0 leaves the peer out (ptrain's memory alone). Usage, from a configured
# build directory:
#   [ROW_GROUP=N] [PEER=0] ../bench/run-parquet.sh [ROWS (default 1000000)] [THREADS (default nproc)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-1000000}
threads=${2:-$(nproc)}
group=${ROW_GROUP:-100000}
peer=${PEER:-1}
py=${PTRAIN_PYTHON:-python3}
gguf=${GGUF:-$here/../models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -x ./ptrain ] || { echo "run-parquet.sh: no ./ptrain here; run it from a build directory" >&2; exit 2; }
[ -f "$gguf" ] || "$here/../share/scripts/fetch-model.sh" "$(dirname "$gguf")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$tmp" "$rows" "$group" <<'PY'
import json, random, sys
import pyarrow as pa, pyarrow.parquet as pq
out, n, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(43)
words = ["the", "ship", "gold", "map", "arr", "sail", "wind", "crew", "island", "rum", "captain", "storm",
         "anchor", "treasure", "parrot", "deck", "harbor", "cannon", "compass", "tide"]
def turn(k): return " ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + ("?" if k % 2 == 0 else ".")
rows = [{"messages": [{"role": "user" if k % 2 == 0 else "assistant", "content": turn(k)}
                      for k in range(2 * rng.randint(1, 3))]} for _ in range(n)]
t = pa.Table.from_pylist(rows)
pq.write_table(t, f"{out}/chat.parquet", compression="snappy", row_group_size=group)
pq.write_table(t.slice(0, 1000), f"{out}/small.parquet", compression="snappy")
# one row group's rows as the JSON Lines text they are (what a group's row objects hold)
print(sum(len(json.dumps(r)) + 1 for r in rows[:group]) // 1024, file=open(f"{out}/group_kb", "w"))
with open(f"{out}/chat.jsonl", "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")
PY
config() { # config DATA OUTDIR
    cat <<YAML
model_name: "$gguf"
max_seq_length: 512
chat_template: model
dataset:
  - name: "$1"
lora_r: 8
per_device_train_batch_size: 1
max_steps: 1
save_strategy: "no"
threads: $threads
output_dir: "$2"
final_model_dir: "$2/lora"
YAML
}
ptrain_run() { # ptrain_run DATA: prints "dataset_s peak_rss_MB tokenized_MB"
    rm -rf "$tmp/out"
    config "$1" "$tmp/out" >"$tmp/c.yaml"
    OMP_NUM_THREADS=$threads /usr/bin/time -f '%M' -o "$tmp/rss" ./ptrain train "$tmp/c.yaml" >"$tmp/log" 2>&1 ||
        { tail -5 "$tmp/log" >&2; echo "- - -"; return; }
    "$py" -c 'import glob, json, os, sys
cache = sum(os.path.getsize(p) for p in glob.glob(sys.argv[3] + "/dataset-*.ptdata"))
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "startup" in r:
        print("%.2f" % r["startup"]["dataset_s"], int(open(sys.argv[2]).read().split()[-1]) // 1024, cache >> 20); break' \
        "$tmp/out/metrics.jsonl" "$tmp/rss" "$tmp/out"
}
read -r pq_s pq_rss pq_tok <<<"$(ptrain_run "$tmp/chat.parquet")"
read -r jl_s jl_rss jl_tok <<<"$(ptrain_run "$tmp/chat.jsonl")"
read -r _ base_rss _ <<<"$(ptrain_run "$tmp/small.parquet")"
peer_s=-
[ "$peer" = 0 ] || peer_s=$(HF_DATASETS_OFFLINE=1 "$py" - "$tmp" "$threads" "$here/../tests/data/tokenizer/smollm2" <<'PY' 2>"$tmp/peer.err"
import sys, time
import datasets, transformers
out, threads, tok_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
datasets.disable_progress_bars()
tok = transformers.AutoTokenizer.from_pretrained(tok_dir)
t0 = time.time()  # after the imports and the tokenizer, as ptrain's dataset phase starts after its own
ds = datasets.load_dataset("parquet", data_files=f"{out}/chat.parquet", split="train", cache_dir=f"{out}/hf")
ds = ds.map(lambda b: {"input_ids": tok.apply_chat_template(b["messages"], tokenize=True, return_dict=False)},
            batched=True, num_proc=threads if threads > 1 else None, remove_columns=["messages"])
assert len(ds) > 0
print("%.2f" % (time.time() - t0))
PY
) || { tail -3 "$tmp/peer.err" >&2; peer_s=-; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$rows conversations, $threads threads, parquet $(du -k "$tmp/chat.parquet" | cut -f1) KB (Snappy, row groups of $group rows: $(( $(cat "$tmp/group_kb" 2>/dev/null || echo 0) / 1024 )) MB of JSON text each), jsonl $(du -k "$tmp/chat.jsonl" | cut -f1) KB"
echo
echo "| reader | dataset s | peak RSS MB (whole run) | less the 1,000-row run's $base_rss MB | tokenized output MB |"
echo "|---|---|---|---|---|"
less() { case "$1$2" in *-*) echo - ;; *) echo $(( $1 - $2 )) ;; esac; }
echo "| ptrain, Parquet | $pq_s | $pq_rss | $(less "$pq_rss" "$base_rss") | $pq_tok |"
echo "| ptrain, JSON Lines | $jl_s | $jl_rss | $(less "$jl_rss" "$base_rss") | $jl_tok |"
echo "| datasets + apply_chat_template + tokenize (map, num_proc=$threads) | $peer_s | - | - | - |"
"$py" -c 'import sys; a, b = sys.argv[1:]; print("\nptrain (Parquet) is %.1fx the peer" % (float(b) / float(a)) if "-" not in (a, b) else "")' "$pq_s" "$peer_s"
