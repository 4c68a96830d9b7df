#!/bin/bash
# run-parquet.sh — reading a chat dataset from Parquet (issue 43): ROWS conversations
# (messages: list<struct<role, content>>, 2-6 turns of random words) written by pyarrow with
# Snappy in row groups of ROW_GROUP rows (default 100,000), then in the same run on the same
# machine with the same threads:
#   - ptrain: its dataset phase (read, format, chat template, tokenize, label: dataset_prepare, as
#     a training run calls it, without the dataset cache) by bench/bench_dataset with
#     SmolLM2-135M-Instruct's tokenizer and template: seconds, and the most memory the phase took
#     (peak RSS less the RSS before it, the kernel's high-water mark reset first) beside the
#     tokenized output it keeps (ids and labels, 8 bytes a token); the same rows as JSON Lines
#     (read as one batch) for comparison;
#   - the peer: datasets.load_dataset("parquet") + apply_chat_template + tokenize through
#     Dataset.map(batched, num_proc=THREADS) with SmolLM2's tokenizer (transformers), wall time;
# and the ratio. PEER=0 leaves the peer out. Usage, from a configured build directory:
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
make -s bench/bench_dataset >&2 || exit 2
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
pq.write_table(pa.Table.from_pylist(rows), f"{out}/chat.parquet", compression="snappy", row_group_size=group)
with open(f"{out}/chat.jsonl", "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")
PY
config() { # config DATA
    cat <<YAML
model_name: "$gguf"
max_seq_length: 512
chat_template: model
dataset:
  - name: "$1"
threads: $threads
YAML
}
ptrain_run() { # ptrain_run DATA: prints "dataset_s phase_peak_MB tokenized_MB examples_hash"
    config "$1" >"$tmp/c.yaml"
    OMP_NUM_THREADS=$threads ./bench/bench_dataset "$tmp/c.yaml" >"$tmp/m.json" 2>"$tmp/log" ||
        { tail -5 "$tmp/log" >&2; echo "- - - -"; return; }
    "$py" -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("%.2f %.1f %.1f %s" % (r["dataset_s"], r["phase_peak_mb"], r["tokenized_mb"], r["examples_hash"]))' "$tmp/m.json"
}
read -r pq_s pq_mem pq_tok pq_hash <<<"$(ptrain_run "$tmp/chat.parquet")"
read -r jl_s jl_mem jl_tok jl_hash <<<"$(ptrain_run "$tmp/chat.jsonl")"
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
cpu() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'; }
echo "machine: $(cpu 'model name') ($(cpu vendor_id) family $(cpu 'cpu family') model $(cpu 'model	')$(grep -qw avx512f /proc/cpuinfo && echo ', AVX-512')), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$rows conversations, $threads threads, parquet $(du -k "$tmp/chat.parquet" | cut -f1) KB (Snappy, row groups of $group rows), jsonl $(du -k "$tmp/chat.jsonl" | cut -f1) KB"
echo
echo "| reader | dataset s | dataset phase's peak memory MB | tokenized output MB |"
echo "|---|---|---|---|"
echo "| ptrain, Parquet | $pq_s | $pq_mem | $pq_tok |"
echo "| ptrain, JSON Lines | $jl_s | $jl_mem | $jl_tok |"
echo "| datasets + apply_chat_template + tokenize (map, num_proc=$threads) | $peer_s | - | - |"
echo
if [ "$pq_hash" = - ] || [ "$jl_hash" = - ]; then echo "ptrain's examples not compared (a run failed)"
elif [ "$pq_hash" = "$jl_hash" ]; then echo "ptrain's examples from Parquet and from JSON Lines: the same ($pq_hash)"
else echo "ptrain's examples from Parquet and from JSON Lines DIFFER ($pq_hash, $jl_hash)"; fi
"$py" -c 'import sys; a, b = sys.argv[1:]; print("\nptrain (Parquet) is %.1fx the peer" % (float(b) / float(a)) if "-" not in (a, b) else "")' "$pq_s" "$peer_s"
