#!/bin/bash
# run-template.sh — rendering and tokenizing chat data with Qwen3's chat template (issue 37):
# ROWS conversations (messages: an optional system turn, then 1-3 user/assistant exchanges of random
# words; some assistant turns with reasoning_content) written as JSON Lines, then in the same run on
# the same machine with the same threads:
#   - ptrain: bench/bench_template, the Jinja interpreter (src/template) rendering each
#     conversation with tests/data/templates/Qwen-Qwen3-trl.jinja and ptrain's tokenizer encoding
#     it (special tokens parsed), OpenMP over the conversations;
#   - the peer: transformers' tokenizer.apply_chat_template(conversations, tokenize=False) with
#     the same template, then tokenizer(texts, add_special_tokens=False) (the Rust tokenizer's
#     batch, RAYON_NUM_THREADS=threads);
# both with SmolLM2's tokenizer (tests/data/tokenizer/smollm2: real byte-level BPE with <|im_start|>
# and <|im_end|>; Qwen3's own tokenizer is not in the repository). Reading and parsing the file
# are outside both clocks. Both print the number of tokens and a checksum of the ids, which must
# be equal (same renderings, same tokens); then the ratio. Usage, from a configured build
# directory:  ../bench/run-template.sh [ROWS (default 100000)] [THREADS (default nproc)]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
rows=${1:-100000}
threads=${2:-$(nproc)}
py=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
template=$src/tests/data/templates/Qwen-Qwen3-trl.jinja
tokdir=$src/tests/data/tokenizer/smollm2
make -s bench/bench_template
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$tmp/chat.jsonl" "$rows" <<'PY'
import json, random, sys
out, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(37)
words = ["the", "ship", "gold", "map", "arr", "sail", "wind", "crew", "island", "rum", "captain", "storm",
         "anchor", "treasure", "parrot", "deck", "harbor", "cannon", "compass", "tide", "héllo", "多谢", "👋"]
def text(a, b): return " ".join(rng.choice(words) for _ in range(rng.randint(a, b)))
with open(out, "w", encoding="utf-8") as f:
    for _ in range(n):
        msgs = [{"role": "system", "content": text(3, 12) + "."}] if rng.random() < 0.3 else []
        for k in range(rng.randint(1, 3)):
            msgs.append({"role": "user", "content": text(5, 40) + "?"})
            a = {"role": "assistant", "content": text(5, 60) + "."}
            if rng.random() < 0.3:
                a["reasoning_content"] = text(5, 30) + "."
            msgs.append(a)
        f.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
PY
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; threads $threads; $rows conversations"
ours=$(OMP_NUM_THREADS=$threads ./bench/bench_template "$template" "$tokdir/tokenizer.json" "$tmp/chat.jsonl" "$threads")
peer=$(RAYON_NUM_THREADS=$threads TOKENIZERS_PARALLELISM=true "$py" - "$template" "$tokdir" "$tmp/chat.jsonl" <<'PY'
import json, sys, time
from transformers import AutoTokenizer
template, tokdir, data = sys.argv[1:4]
tok = AutoTokenizer.from_pretrained(tokdir)
tok.chat_template = open(template, encoding="utf-8").read()
convs = [json.loads(line)["messages"] for line in open(data, encoding="utf-8")]
t0 = time.perf_counter()
texts = tok.apply_chat_template(convs, tokenize=False)
ids = tok(texts, add_special_tokens=False)["input_ids"]
dt = time.perf_counter() - t0
checksum = sum(sum(i * (t + 1) for t, i in enumerate(x)) % 2**32 for x in ids) % 2**64
print(json.dumps({"seconds": round(dt, 3), "conversations": len(convs), "tokens": sum(map(len, ids)),
                  "checksum": checksum}))
PY
)
"$py" - "$ours" "$peer" <<'PY'
import json, sys
ours, peer = json.loads(sys.argv[1]), json.loads(sys.argv[2])
same = ours["tokens"] == peer["tokens"] and ours["checksum"] % 2**64 == peer["checksum"]
print("| | seconds | conversations/s | tokens |")
print("|---|---|---|---|")
for name, r in (("ptrain (Jinja interpreter + tokenizer)", ours), ("transformers apply_chat_template + tokenize", peer)):
    print(f"| {name} | {r['seconds']:.2f} | {r['conversations'] / r['seconds']:.0f} | {r['tokens']} |")
print(f"ratio: {peer['seconds'] / ours['seconds']:.1f}x (target >= 5x); same tokens and checksum: {'yes' if same else 'NO'}")
sys.exit(0 if same else 1)
PY
