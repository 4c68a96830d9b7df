#!/bin/bash
# run-tokenize.sh — `ptrain tokenize` against the Hugging Face tokenizers library (issue 41): MB
# megabytes of mixed text, one text a line (a third English prose from the repository's docs, a
# third C and Python source, a third CJK: random words of common Chinese characters and
# Japanese kana with punctuation), tokenized with the Qwen2 and the Llama 3 vocabularies (the
# tokenizer.json directories tests/reference/make_llama_vocab_hf.py makes from llama.cpp's
# ggml-vocab-qwen2 and ggml-vocab-llama-bpe), in the same run on the same machine with the same
# threads:
#   - ptrain: `OMP_NUM_THREADS=T ptrain tokenize --model DIR --lines --no-special FILE >/dev/null`,
#     wall time of the whole command (loading the tokenizer, reading the file, printing the ids);
#   - the peer: tokenizers' Tokenizer.from_file + encode_batch(lines, add_special_tokens=False)
#     with RAYON_NUM_THREADS=T, the encode_batch call alone (loading and reading not counted);
# the ids of both are compared (a hash of every line's ids), then MB/s and the ratio printed.
# Usage, from a configured build directory:
#   ../bench/run-tokenize.sh [MB (default 100)] [THREADS (default nproc)]
# PTRAIN_PYTHON: the Python with tokenizers (default: the test environment's);
# PTRAIN_LLAMA_VOCABS: where the vocabularies are (default ~/.cache/ptrain/llama-vocabs).
set -u
here=$(cd "$(dirname "$0")" && pwd)
mb=${1:-100}
threads=${2:-$(nproc)}
py=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
vocabs=${PTRAIN_LLAMA_VOCABS:-$HOME/.cache/ptrain/llama-vocabs}
[ -x ./ptrain ] || { echo "run-tokenize.sh: no ./ptrain here; run it from a build directory" >&2; exit 2; }
for v in qwen2 llama-bpe; do
    [ -f "$vocabs/hf/$v/tokenizer.json" ] || {
        echo "run-tokenize.sh: no $vocabs/hf/$v/tokenizer.json: run share/scripts/fetch-llama-vocabs.sh" >&2
        exit 2
    }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$tmp/text.txt" "$mb" "$here/.." <<'PY'
import glob, os, random, sys
out, mb, root = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rng = random.Random(41)
prose = []
for p in sorted(glob.glob(f"{root}/docs/*.md")) + [f"{root}/README.md"]:
    prose += [l.strip() for l in open(p, encoding="utf-8") if len(l.strip()) > 40]
code = []
for p in sorted(glob.glob(f"{root}/src/*/*.c")) + sorted(glob.glob(f"{root}/tests/reference/*.py")):
    lines = open(p, encoding="utf-8").read().split("\n")
    code += ["\\n".join(lines[i:i + 6]).replace("\t", "    ") for i in range(0, len(lines), 6)]
han = ("的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而"
       "能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进"
       "把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教")
kana = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソ"
punct = "，。、！？：；"
def cjk():
    words = []
    for _ in range(rng.randint(10, 40)):
        src = han if rng.random() < 0.75 else kana
        words.append("".join(rng.choice(src) for _ in range(rng.randint(1, 4))))
        if rng.random() < 0.2:
            words.append(rng.choice(punct))
    return "".join(words)
target, size = int(mb * 1e6), 0
with open(out, "w", encoding="utf-8") as f:
    while size < target:
        k = rng.randrange(3)
        line = rng.choice(prose) if k == 0 else rng.choice(code) if k == 1 else cjk()
        f.write(line + "\n")
        size += len(line.encode()) + 1
PY
bytes=$(stat -c %s "$tmp/text.txt")
lines=$(wc -l <"$tmp/text.txt")
echo "run-tokenize.sh: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB, $lines lines, $threads threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for v in qwen2 llama-bpe; do
    dir=$vocabs/hf/$v
    start=$(date +%s.%N)
    OMP_NUM_THREADS=$threads ./ptrain tokenize --model "$dir" --lines --no-special "$tmp/text.txt" >"$tmp/ptrain.ids" ||
        { echo "run-tokenize.sh: ptrain tokenize failed" >&2; exit 1; }
    end=$(date +%s.%N)
    pt=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
    RAYON_NUM_THREADS=$threads TOKENIZERS_PARALLELISM=true "$py" - "$dir/tokenizer.json" "$tmp/text.txt" \
        "$tmp/ptrain.ids" "$pt" "$bytes" "$v" <<'PY'
import hashlib, sys, time
from tokenizers import Tokenizer
tj, text, ptrain_ids, pt, nbytes, name = sys.argv[1:7]
pt, nbytes = float(pt), int(nbytes)
tok = Tokenizer.from_file(tj)
with open(text, encoding="utf-8") as f:
    lines = f.read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
t0 = time.perf_counter()
enc = tok.encode_batch(lines, add_special_tokens=False)
hf = time.perf_counter() - t0
h_hf = hashlib.sha256("".join(" ".join(map(str, e.ids)) + "\n" for e in enc).encode()).hexdigest()
with open(ptrain_ids, "rb") as f:
    h_pt = hashlib.sha256(f.read()).hexdigest()
same = "the same ids" if h_hf == h_pt else "DIFFERENT ids"
print(f"{name}: ptrain tokenize {pt:.2f} s ({nbytes / 1e6 / pt:.2f} MB/s, whole command), "
      f"tokenizers encode_batch {hf:.2f} s ({nbytes / 1e6 / hf:.2f} MB/s); ratio {hf / pt:.2f}x; {same}")
PY
done
