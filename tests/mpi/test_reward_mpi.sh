#!/bin/sh
# test_reward_mpi.sh — method: reward (TRL's RewardTrainer with a SEQ_CLS LoRA) through the whole
# trainer, on the tiny Llama in tests/data and the conversational pairs of
# share/data/pirate-preferences.jsonl:
# - metrics.jsonl has TRL's metrics (min_reward, mean_reward, max_reward, accuracy, margin) and the
#   loss falls; the PEFT files are a SEQ_CLS adapter with its score;
# - data parallel: 2 ranks with 2 pairs each train the same adapter and score head as 1 process
#   with 2 pairs and gradient_accumulation_steps 2 (max relative difference <= 1e-5);
# - exact resume: a run killed (kill -9) after its step-4 checkpoint and run again ends with the
#   adapter and score head of the uninterrupted run, bit-identical;
# - PEFT loads the adapter (AutoModelForSequenceClassification + PeftModel, its modules_to_save
#   score) and scores two pairs, tokenized by TRL's RewardTrainer, as ptrain did: trained on those
#   two pairs alone (the f32 tiny Llama, load_in_4bit false), resumed one step further, the logged
#   loss and metrics of that step (the final adapter's scores) equal PEFT's; the pairs carry TRL's
#   margin column, so the loss is -logsigmoid(r_c - r_r - margin) as RewardTrainer's (reward_check.py;
#   $PTRAIN_PYTHON with torch, transformers, peft and trl; skipped, saying so, without them);
# - ptrain score: the f32 adapter's scores of five pairs (one line each: the two scores, the margin,
#   whether chosen scores higher) are PEFT's within 1e-4 (reward_check.py --scores), single rows
#   (prompt + completion as turns and as text, messages, plain text: one score each) are PEFT's
#   scores of the rows tokenized as RewardTrainer tokenizes a chosen (--singles), a row of a pair's
#   prompt + chosen scores as that pair's chosen, and the run's
#   config in place of the adapter gives the same lines; the score of an adapter without a score head
#   is refused, and score without --data is a usage error;
# - reading the adapter back: PEFT's two files alone as lora_model_dir of a new reward run (LoRA and
#   score head re-read), whose first step's loss and metrics equal PEFT's scores of the pairs; the
#   same directory under method dpo is refused.
# The 2-rank case skips, saying why, without mpirun.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
DIFF=$(dirname "$P")/tests/mpi/adapter_diff
mpirun=${MPIRUN:-mpirun}
PY=${PTRAIN_PYTHON:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SCORE=/adapter/base_model.model.score.weight

write_config() { # write_config FILE OUTDIR BATCH ACCUM [extra yaml]
    cat >"$1" <<YAML
model_name: "${MODEL:-$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4}"
method: reward
max_seq_length: 256
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl"
    num_samples: ${SAMPLES:-24}
lora_r: 4
lora_alpha: 8
per_device_train_batch_size: $3
gradient_accumulation_steps: $4
learning_rate: ${LR:-1e-3}
warmup_steps: 0
max_steps: ${MAX_STEPS:-8}
logging_steps: 1
save_steps: 4
seed: 11
threads: 1
output_dir: "$2"
final_model_dir: "$2/lora"
$5
YAML
}
losses() { grep -o '"loss": [0-9.]*' "$1/metrics.jsonl" | awk '{print $2}'; }

write_config "$tmp/one.yaml" "$tmp/one" 2 2
"$P" train "$tmp/one.yaml" >"$tmp/one.out" 2>&1
expect_eq "the reward run exits 0" 0 "$?"
ok "metrics.jsonl has TRL's reward metrics" grep -q '"min_reward": [-0-9.]*, "mean_reward": [-0-9.]*, "max_reward": [-0-9.]*, "accuracy": [0-9.]*, "margin": [-0-9.]*}' "$tmp/one/metrics.jsonl"
first=$(losses "$tmp/one" | head -1) last=$(losses "$tmp/one" | tail -1)
ok "the loss falls ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b + 0 < a + 0) }'
ok "the PEFT adapter is a SEQ_CLS LoRA with the score in modules_to_save" \
    grep -q '"task_type": "SEQ_CLS"' "$tmp/one/lora/adapter_config.json"
ok "adapter_model.safetensors holds base_model.model.score.weight" \
    grep -q 'base_model.model.score.weight' "$tmp/one/lora/adapter_model.safetensors"

if command -v "$mpirun" >/dev/null 2>&1; then
    write_config "$tmp/two.yaml" "$tmp/two" 2 1
    timeout 300 "$mpirun" --oversubscribe -np 2 "$P" train "$tmp/two.yaml" >"$tmp/two.out" 2>&1
    expect_eq "2 ranks: the run exits 0" 0 "$?"
    diff_line=$("$DIFF" "$tmp/one/lora/adapter.h5" "$tmp/two/lora/adapter.h5" 2>&1)
    printf '# adapter difference, 1 process x accumulation 2 vs 2 ranks: %s\n' "$diff_line"
    max_rel=$(printf '%s\n' "$diff_line" | awk '$1 == "max_rel" { print $2 }')
    ok "2 ranks: the adapter of 1 process x accumulation 2 (max relative difference ${max_rel:-?} <= 1e-5)" \
        awk -v d="${max_rel:-x}" 'BEGIN { exit !(d != "x" && d + 0 <= 1e-5) }'
    ok "2 ranks: the score head of 1 process x accumulation 2 (h5diff relative 1e-5)" \
        h5diff -p 1e-5 "$tmp/one/checkpoint-8.h5" "$tmp/two/checkpoint-8.h5" "$SCORE"
else
    skip_test "2 ranks: the run exits 0" "mpirun not found"
    skip_test "2 ranks: the adapter of 1 process" "mpirun not found"
    skip_test "2 ranks: the score head of 1 process" "mpirun not found"
fi

# exact resume: killed after the step-4 checkpoint, run again
write_config "$tmp/cut.yaml" "$tmp/cut" 2 2 "resume_from_checkpoint: true"
PTRAIN_TEST_KILL_STEP=6 "$P" train "$tmp/cut.yaml" >"$tmp/cut.out" 2>&1
rc=$?
ok "resume: the first run is killed at step 6 (exit $rc) after checkpoint-4" test "$rc" -ne 0 -a -f "$tmp/cut/checkpoint-4.h5"
"$P" train "$tmp/cut.yaml" >"$tmp/cut2.out" 2>&1
expect_eq "resume: the second run exits 0" 0 "$?"
ok "resume: the adapter is bit-identical to the uninterrupted run's" h5diff -d 0 "$tmp/one/lora/adapter.h5" "$tmp/cut/lora/adapter.h5"
ok "resume: the score head is bit-identical" h5diff -d 0 "$tmp/one/checkpoint-8.h5" "$tmp/cut/checkpoint-8.h5" "$SCORE"
ok "resume: the PEFT files are byte-identical" cmp "$tmp/one/lora/adapter_model.safetensors" "$tmp/cut/lora/adapter_model.safetensors"

# PEFT scores two pairs as ptrain does: the f32 model (no quantization), trained on those pairs alone
if [ -n "$PY" ] && "$PY" -c 'import torch, transformers, peft, trl' 2>/dev/null; then
    mkdir "$tmp/model"
    cp "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-f32/* "$PTRAIN_SRCDIR"/tests/data/hf/tiny-llama-bnb4/tokenizer* "$tmp/model/"
    # the first two pairs with TRL's margin column
    head -2 "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl" | sed '1s/}$/, "margin": 0.5}/; 2s/}$/, "margin": -0.25}/' \
        >"$tmp/margins.jsonl"
    MODEL="$tmp/model" SAMPLES=2 LR=5e-3 write_config "$tmp/f.yaml" "$tmp/f" 2 1 "load_in_4bit: false"
    sed -i "s#name: .*pirate-preferences.jsonl\"#name: \"$tmp/margins.jsonl\"#" "$tmp/f.yaml"
    "$P" train "$tmp/f.yaml" >"$tmp/f.out" 2>&1
    expect_eq "PEFT check: the f32 run exits 0" 0 "$?"
    MODEL="$tmp/model" SAMPLES=2 LR=5e-3 MAX_STEPS=9 write_config "$tmp/f9.yaml" "$tmp/f" 2 1 \
        "load_in_4bit: false
resume_from_checkpoint: true"
    sed -i "s#final_model_dir: .*#final_model_dir: \"$tmp/f/lora9\"#; s#name: .*pirate-preferences.jsonl\"#name: \"$tmp/margins.jsonl\"#" "$tmp/f9.yaml"
    "$P" train "$tmp/f9.yaml" >"$tmp/f9.out" 2>&1
    expect_eq "PEFT check: one more step from the final checkpoint exits 0" 0 "$?"
    "$PY" "$PTRAIN_SRCDIR/tests/mpi/reward_check.py" "$tmp/model" "$tmp/f/lora" \
        "$tmp/margins.jsonl" 2 "$tmp/f/metrics.jsonl" 9 >"$tmp/check.out" 2>&1
    rc=$?
    grep '^#' "$tmp/check.out"
    [ "$rc" -eq 0 ] || tail -20 "$tmp/check.out" | sed 's/^/#   /'
    expect_eq "PEFT loads the reward adapter and scores the pairs as ptrain did (loss and metrics within 1e-4)" 0 "$rc"
    # ptrain score: the adapter's scores of five pairs (three it never trained on) as PEFT scores them
    head -5 "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl" >"$tmp/five.jsonl"
    "$P" score "$tmp/f/lora" --model "$tmp/model" --no-4bit --data "$tmp/five.jsonl" --batch 2 --threads 1 \
        >"$tmp/scores.tsv" 2>"$tmp/scores.err"
    expect_eq "ptrain score: exits 0" 0 "$?"
    ok "ptrain score: a header and one line per pair, the means on stderr" sh -c \
        "test \$(wc -l <'$tmp/scores.tsv') = 6 && grep -q '^5 pairs: mean margin [-0-9.]*, accuracy [0-9.]*' '$tmp/scores.err'"
    # single rows, one score each: prompt + completion as turns (the pairs' chosen) and as text,
    # messages, plain text
    head -3 "$tmp/five.jsonl" | sed 's/"chosen": /"completion": /; s/, "rejected": .*}$/}/' >"$tmp/s_turns.jsonl"
    head -2 "$tmp/five.jsonl" | sed 's/^{"prompt": \[\(.*\)\], "chosen": \[\(.*\)\], "rejected": .*$/{"messages": [\1, \2]}/' \
        >"$tmp/s_messages.jsonl"
    printf '%s\n' '{"prompt": "Where be the gold? ", "completion": "Buried under the palm, matey!"}' \
        '{"prompt": "Say hello.", "completion": " Hello."}' >"$tmp/s_text.jsonl"
    printf '%s\n' '{"text": "Arr, the sea be calm today."}' '{"text": "I cannot help with that."}' \
        '{"text": "Yo ho ho"}' >"$tmp/s_plain.jsonl"
    singles=""
    for k in turns messages text plain; do
        "$P" score "$tmp/f/lora" --model "$tmp/model" --no-4bit --data "$tmp/s_$k.jsonl" --batch 2 --threads 1 \
            >"$tmp/s_$k.tsv" 2>"$tmp/s_$k.err" || echo "# ptrain score --data s_$k.jsonl failed: $(tail -1 "$tmp/s_$k.err")"
        singles="$singles --singles $tmp/s_$k.jsonl $tmp/s_$k.tsv"
    done
    ok "ptrain score of single rows: a header and one line per row, the mean on stderr" sh -c \
        "test \$(wc -l <'$tmp/s_turns.tsv') = 4 && head -1 '$tmp/s_turns.tsv' | grep -q '^row.score\$' &&
         grep -q '^3 rows: mean score [-0-9.]*\$' '$tmp/s_turns.err' && test \$(wc -l <'$tmp/s_plain.tsv') = 4"
    ok "ptrain score: a row's prompt + completion scores as the pair's chosen" sh -c \
        "cut -f2 '$tmp/scores.tsv' | sed -n 2,4p >'$tmp/chosen3' && cut -f2 '$tmp/s_turns.tsv' | sed -n 2,4p |
         paste '$tmp/chosen3' - | awk -F'\t' 'NF != 2 { exit 1 } { d = \$1 - \$2; if (d < -1e-5 || d > 1e-5) exit 1 }
         END { exit NR != 3 }'"
    # shellcheck disable=SC2086 # the --singles arguments split on purpose
    "$PY" "$PTRAIN_SRCDIR/tests/mpi/reward_check.py" "$tmp/model" "$tmp/f/lora" "$tmp/five.jsonl" 5 \
        --scores "$tmp/scores.tsv" $singles >"$tmp/check3.out" 2>&1
    rc=$?
    grep '^#' "$tmp/check3.out"
    [ "$rc" -eq 0 ] || tail -5 "$tmp/check3.out" | sed 's/^/#   /'
    expect_eq "ptrain score: each pair's scores, margin and correct, and each single row's score (turns, messages, text) are PEFT's (within 1e-4)" 0 "$rc"
    "$P" score "$tmp/f.yaml" --data "$tmp/five.jsonl" --batch 2 --threads 1 >"$tmp/scores_cfg.tsv" 2>/dev/null
    ok "ptrain score CONFIG: the config's adapter, model and load_in_4bit give the same lines" \
        cmp "$tmp/scores.tsv" "$tmp/scores_cfg.tsv"
    # reading it back: PEFT's two files alone as lora_model_dir of a new reward run, whose first
    # step's loss and metrics (taken before its update) are the re-read adapter's and score's
    mkdir "$tmp/peftonly" && cp "$tmp/f/lora/adapter_config.json" "$tmp/f/lora/adapter_model.safetensors" "$tmp/peftonly/"
    MODEL="$tmp/model" SAMPLES=2 LR=5e-3 MAX_STEPS=1 write_config "$tmp/g.yaml" "$tmp/g" 2 1 \
        "load_in_4bit: false
lora_model_dir: \"$tmp/peftonly\""
    sed -i "s#name: .*pirate-preferences.jsonl\"#name: \"$tmp/margins.jsonl\"#" "$tmp/g.yaml"
    "$P" train "$tmp/g.yaml" >"$tmp/g.out" 2>&1
    expect_eq "lora_model_dir: a reward run continues from PEFT's SEQ_CLS files" 0 "$?"
    ok "... its score head is the adapter's" grep -q "the score head starts as" "$tmp/g.out"
    "$PY" "$PTRAIN_SRCDIR/tests/mpi/reward_check.py" "$tmp/model" "$tmp/peftonly" \
        "$tmp/margins.jsonl" 2 "$tmp/g/metrics.jsonl" 1 >"$tmp/check2.out" 2>&1
    rc=$?
    grep '^#' "$tmp/check2.out"
    expect_eq "PEFT's scores of the pairs equal ptrain's from the re-read adapter (step 1's loss and metrics within 1e-4)" 0 "$rc"
    "$P" generate --model "$tmp/model" --no-4bit --adapter "$tmp/peftonly" --prompt "Ahoy" --max-new-tokens 3 \
        --temperature 0 --threads 1 >"$tmp/gen.out" 2>&1
    expect_eq "ptrain generate --adapter takes PEFT's SEQ_CLS files (the LoRA; the score aside)" 0 "$?"
    sed -e 's/^method: reward/method: dpo/' "$tmp/g.yaml" >"$tmp/h.yaml"
    sed -i "s#output_dir: .*#output_dir: \"$tmp/h\"#; s#final_model_dir: .*#final_model_dir: \"$tmp/h/lora\"#" "$tmp/h.yaml"
    "$P" train "$tmp/h.yaml" >"$tmp/h.out" 2>&1
    ok "lora_model_dir: a reward adapter under another method is refused, saying so" \
        grep -q "is a reward model's adapter (task_type SEQ_CLS, with its score head); this config's method is dpo" "$tmp/h.out"
else
    no_py="PTRAIN_PYTHON is unset or lacks torch, transformers, peft or trl (share/scripts/test-python.sh installs them)"
    skip_test "PEFT check: the f32 run exits 0" "$no_py"
    skip_test "PEFT check: one more step" "$no_py"
    skip_test "PEFT loads the reward adapter and scores the pairs as ptrain did" "$no_py"
    skip_test "ptrain score: exits 0" "$no_py"
    skip_test "ptrain score: a header and one line per pair" "$no_py"
    skip_test "ptrain score of single rows: a header and one line per row" "$no_py"
    skip_test "ptrain score: a row's prompt + completion scores as the pair's chosen" "$no_py"
    skip_test "ptrain score: each pair's and single row's scores are PEFT's" "$no_py"
    skip_test "ptrain score CONFIG: the same lines" "$no_py"
    skip_test "lora_model_dir: a reward run continues from PEFT's SEQ_CLS files" "$no_py"
    skip_test "... its score head is the adapter's" "$no_py"
    skip_test "PEFT's scores of the pairs equal ptrain's from the re-read adapter" "$no_py"
    skip_test "ptrain generate --adapter takes PEFT's SEQ_CLS files" "$no_py"
    skip_test "lora_model_dir: a reward adapter under another method is refused" "$no_py"
fi
"$P" score "$tmp/one/lora" >"$tmp/nodata.out" 2>&1
expect_eq "ptrain score without --data: a usage error (exit 2)" 2 "$?"
mkdir "$tmp/noscore" && cp "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4/config.json" "$tmp/noscore/" 2>/dev/null
"$P" score "$tmp/noscore" --data "$PTRAIN_SRCDIR/share/data/pirate-preferences.jsonl" \
    --model "$PTRAIN_SRCDIR/tests/data/hf/tiny-llama-bnb4" >"$tmp/noscore.out" 2>&1
ok "ptrain score of a directory without a reward adapter: refused, saying so" grep -q "noscore has no score head (base_model.model.score.weight" "$tmp/noscore.out"
done_testing
