#!/bin/sh
# test_inspect.sh — `ptrain inspect` on a GGUF file, a Hugging Face directory (bitsandbytes 4-bit),
# a sharded one, one whose chat template is in chat_template.jinja (transformers 5) and an HF id in a
# committed cache (tests/data/hfcache, via HF_HUB_CACHE); its usage
# errors and a cache miss naming the download command; and `ptrain generate` from a Hugging Face
# directory and from an HF id (a tiny random model: the test is that it runs, greedily and
# reproducibly, not what it says). Checkpoints: one from a tiny training run (tiny-llama-bnb4, 4
# steps, one checkpoint every 2) is described and verified; damaged copies (truncated, a flipped
# byte, appended to), incomplete ones (no completion mark, shorter than the header, empty, a
# crash's temporary file) and an adapter.h5 renamed checkpoint-3.h5 each exit 1 with one error of
# the right kind; and h5py, when installed, reads it as a plain HDF5 file (docs/checkpoint-format.md).
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
D=$PTRAIN_SRCDIR/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HF_HUB_CACHE=$D/hfcache
export HF_HUB_CACHE
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

run inspect --help
ok "inspect --help shows its usage" test "$rc" = 0 -a -n "$(echo "$out" | grep '^Usage: ptrain inspect')"
run --help
ok "ptrain --help lists inspect" contains "$out" "ptrain inspect MODEL"
run inspect
expect_eq "inspect without a model: exit 2" 2 "$rc"
ok "inspect without a model: says so" contains "$err" "no model given"
run inspect "$D/llama/tiny-mha-f32.gguf" --batch-size zero
expect_eq "inspect with a bad number: exit 2" 2 "$rc"
ok "inspect with a bad number: names the option" contains "$err" "--batch-size expects an integer from 1 to"
run inspect "$D/llama/tiny-mha-f32.gguf" --use-dora --lora-dropout 0.1
ok "inspect --use-dora with a dropout: exit 2, saying DoRA trains without one" \
    test "$rc" = 2 -a -n "$(echo "$err" | grep "DoRA trains without lora_dropout")"

run inspect "$D/llama/tiny-gqa-q4_0.gguf"
expect_eq "inspect a GGUF file: exit 0" 0 "$rc"
ok "inspect a GGUF file: format" contains "$out" "GGUF version 3"
ok "inspect a GGUF file: sizes" contains "$out" "3 layers, hidden 64, ffn 96"
ok "inspect a GGUF file: heads" contains "$out" "4 (key/value heads 2, head size 16)"
ok "inspect a GGUF file: tensor types" contains "$out" "q4_0: 22, f32: 8"
ok "inspect a GGUF file: memory per rank" contains "$out" "training per rank  "
ok "inspect a GGUF file: the trainer's memory plan" test -n "$(echo "$out" | grep '^memory plan: [0-9]* bytes on ')"
run inspect "$D/llama/tiny-mha-f32.gguf" --gradient-checkpointing sometimes
expect_eq "inspect with a bad checkpointing mode: exit 2" 2 "$rc"
ok "inspect with a bad checkpointing mode: names the choices" contains "$err" "expects false, true or unsloth"
# --device names the device whose plan is printed: cpu or cuda, never auto; what it echoes is
# escaped (a control character never reaches the terminal)
run inspect "$D/llama/tiny-mha-f32.gguf" --device "$(printf 'cu\nda')"
expect_eq "inspect with a device not known: exit 2, the value escaped" "rc=2
ptrain: usage error: --device expects cpu or cuda, got 'cu\\nda'
ptrain: usage error: Try 'ptrain inspect --help'." "rc=$rc
$err"
run inspect "$D/llama/tiny-mha-f32.gguf" --device auto
expect_eq "inspect --device auto: exit 2" 2 "$rc"

# --- the memory plan: inspect's (from the config alone) is the one ptrain train prints ---
# plan_case NAME MODEL MODE DROPOUT BATCH [dora]: one training step on the CPU and inspect with the
# same settings (dora: use_dora / --use-dora); their `memory plan:` lines must be the same bytes, and
# inspect's trainable count the one training prints
plan_case() { # [7: lora_target_modules, comma-separated]
    dora_yaml="" dora_opt="" tgt_yaml="" tgt_opt=""
    [ "${6:-}" = dora ] && dora_yaml="use_dora: true" dora_opt="--use-dora"
    [ -n "${7:-}" ] && tgt_yaml="lora_target_modules: [$7]" tgt_opt="--lora-target-modules $7"
    cat >"$tmp/plan.yaml" <<YAML
model_name: "$2"
max_seq_length: 64
dataset:
  - name: "$PTRAIN_SRCDIR/share/data/pirate-instructions.jsonl"
    num_samples: 24
lora_r: 4
lora_alpha: 8
lora_dropout: $4
per_device_train_batch_size: $5
max_steps: 1
threads: 1
use_gradient_checkpointing: $3
output_dir: "$tmp/plan"
$dora_yaml
$tgt_yaml
YAML
    rm -rf "$tmp/plan"
    "$P" train "$tmp/plan.yaml" >"$tmp/plan.log" 2>&1
    grep '^memory plan:' "$tmp/plan.log" >"$tmp/plan.train"
    "$P" inspect "$2" --max-seq-length 64 --batch-size "$5" --lora-r 4 --lora-dropout "$4" --gradient-checkpointing "$3" \
        --device cpu $dora_opt $tgt_opt >"$tmp/plan.ilog"
    grep '^memory plan:' "$tmp/plan.ilog" >"$tmp/plan.inspect"
    ok "inspect's plan is ptrain train's: $1, use_gradient_checkpointing $3, lora_dropout $4, batch $5${6:+, $6}" \
        test -s "$tmp/plan.train" -a "$(cat "$tmp/plan.train")" = "$(cat "$tmp/plan.inspect")"
    n_train=$(sed -n 's/^lora  *r [0-9]*, alpha [0-9.]*, \([0-9]*\) trainable parameters.*/\1/p' "$tmp/plan.log")
    n_insp=$(sed -n 's/^trainable params  *\([0-9]*\) .*/\1/p' "$tmp/plan.ilog")
    ok "inspect's trainable count is ptrain train's ($n_insp): $1${6:+, $6}" test -n "$n_train" -a "$n_train" = "$n_insp"
    cmp -s "$tmp/plan.train" "$tmp/plan.inspect" || printf '# train:   %s\n# inspect: %s\n' "$(cat "$tmp/plan.train")" \
        "$(cat "$tmp/plan.inspect")"
}
# tiny-llama-f32 (sharded f32, quantized to NF4 on load) with the bnb model's tokenizer
mkdir "$tmp/f32" && cp "$D/hf/tiny-llama-f32/"* "$tmp/f32/" && cp "$D/hf/tiny-llama-bnb4/"tokenizer* "$tmp/f32/"
plan_case "tiny Llama, bitsandbytes NF4" "$D/hf/tiny-llama-bnb4" false 0 2
plan_case "tiny Llama, bitsandbytes NF4" "$D/hf/tiny-llama-bnb4" true 0.1 1
plan_case "tiny Llama, bitsandbytes NF4" "$D/hf/tiny-llama-bnb4" unsloth 0 3
plan_case "tiny Llama, bitsandbytes NF4" "$D/hf/tiny-llama-bnb4" unsloth 0 2 dora
plan_case "tiny Llama, bitsandbytes NF4" "$D/hf/tiny-llama-bnb4" false 0 1 dora
plan_case "tiny Llama, sharded f32 quantized on load" "$tmp/f32" true 0 2
plan_case "tiny Qwen2, bitsandbytes NF4 (rows not whole blocks: some dequantized)" "$D/qwen2/hf-bnb4" false 0.1 2
plan_case "tiny Qwen2, bf16" "$D/qwen2/hf" unsloth 0 2
plan_case "tiny Qwen2, bf16" "$D/qwen2/hf" true 0 2 dora
plan_case "tiny Gemma 2, bitsandbytes NF4" "$D/gemma2/hf-bnb4" true 0 2
plan_case "tiny Gemma 2, bf16" "$D/gemma2/hf" false 0 1
smollm=$(smollm_model)
if [ -n "$smollm" ]; then
    plan_case "SmolLM2-135M, GGUF Q4_1" "$smollm" true 0 2
else
    skip_test "inspect's plan is ptrain train's: SmolLM2-135M, GGUF Q4_1" "SmolLM2-135M-Instruct.Q4_1.gguf not found"
fi

run inspect "$D/hf/tiny-llama-bnb4"
expect_eq "inspect an HF bnb-4bit directory: exit 0" 0 "$rc"
ok "inspect an HF directory: architecture" contains "$out" "llama (model_type llama, LlamaForCausalLM)"
ok "inspect an HF directory: vocabulary and tying" contains "$out" "320 tokens, context 256, separate lm_head"
ok "inspect an HF directory: rope scaling" contains "$out" "theta 10000, linear scaling (factor 2)"
ok "inspect an HF directory: tensor types" contains "$out" "BF16: 7, U8: 42, F32: 42"
ok "inspect an HF directory: bitsandbytes" contains "$out" "bitsandbytes NF4 with double quantization, pre-quantized"
ok "inspect an HF directory: tokenizer" contains "$out" "byte-level BPE (tokenizer.json), 300 tokens"
ok "inspect an HF directory: chat template" contains "$out" "chatml (recognised from the model's template)"
run inspect "$D/olmo3/hf" --device cpu
ok "inspect olmo3: a window on every layer but every 4th, their own rope" contains "$out" \
    "sliding window 6 on layers but (l + 1) % 4 == 0, their rope base 500000 unscaled"
run inspect "$D/olmo3/tiny-q4_0.gguf" --device cpu
ok "inspect an olmo3 GGUF (llama.cpp's olmo2 with a window): the same" contains "$out" \
    "sliding window 6 on layers but (l + 1) % 4 == 0, their rope base 500000 unscaled"
run inspect "$D/phi3/hf" --device cpu
ok "inspect phi3: fused weights, one LoRA each" contains "$out" "q/k/v and gate/up fused in the files (qkv_proj, gate_up_proj"
ok "inspect phi3: partial rotary" contains "$out" "partial rotary: 12 of 16 values of each head rotate"
ok "inspect phi3: the llama target list adapts the fused modules" contains "$out" \
    "LoRA r=16 on qkv_proj,o_proj,gate_up_proj,down_proj"
run inspect "$D/phi3/tiny-q4_0.gguf" --device cpu --lora-target-modules qkv_proj,down_proj
ok "inspect a phi3 GGUF: its targets" contains "$out" "LoRA r=16 on qkv_proj,down_proj"
run inspect "$D/qwen35-vl/hf" --device cpu
ok "inspect qwen3_5: the text tower of the multimodal checkpoint" contains "$out" \
    "qwen35 (model_type qwen3_5, Qwen3_5ForConditionalGeneration)"
ok "inspect qwen35: the hybrid's layers" contains "$out" "Gated DeltaNet on layers but (l + 1) % 4 == 0 (2 key heads of 16, 4 value heads of 12, conv 4"
ok "inspect qwen35: a memory plan" contains "$out" "memory plan: "
run generate --model "$D/qwen35-vl/hf" --prompt "hello" --temperature 0 --max-new-tokens 4 --threads 1
expect_eq "generate from a qwen3_5 checkpoint's text tower: exit 0" 0 "$rc"
ok "generate from qwen3_5: the vision tower left unread, said" contains "$out$err" \
    "loads its text model (model.language_model.*) and leaves its 21 other tensors (the vision tower, the projector) unread"
# qwen35: the trainer's plan (with the Gated DeltaNet backward's recurrent states) and its trainable count, LoRA on
# every projection PEFT adapts there (q_proj over its query and gate rows, the DeltaNet's five)
q35t="q_proj,k_proj,v_proj,o_proj,in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,out_proj,gate_proj,up_proj,down_proj"
plan_case "tiny Qwen3.5, f32 quantized on load" "$D/qwen35/hf" true 0 2 "" "$q35t"
n_named=$n_train
# all-linear: every linear layer of the text model, as PEFT 0.21.2's all-linear selects on Qwen3_5ForCausalLM (the
# seven llama names and the DeltaNet's five, in_proj_a and in_proj_b included)
plan_case "tiny Qwen3.5, all-linear" "$D/qwen35/hf" true 0 2 "" "all-linear"
ok "qwen35 all-linear trains the 12 modules' parameters ($n_named)" test -n "$n_named" -a "$n_train" = "$n_named"
ok "inspect qwen35 all-linear: the DeltaNet's five too" grep -q \
    "LoRA r=4 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,out_proj" \
    "$tmp/plan.ilog"
ok "qwen35's plan counts the DeltaNet's recurrent states" grep -q "^memory plan: of it [0-9]* bytes for the Gated DeltaNet" \
    "$tmp/plan.ilog"
plan_case "tiny Qwen3.5, f32 quantized on load" "$D/qwen35/hf" false 0.1 1
run inspect "$D/qwen35/hf" --device cpu --lora-target-modules "$q35t"
ok "inspect qwen35: its targets, q_proj over the query and gate rows" contains "$out" \
    "LoRA r=16 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,out_proj"
run export --model "$D/qwen35/hf" --adapter "$tmp/none" --out "$tmp/q35out" --gguf f32
expect_eq "a merged GGUF export of a qwen35 model: refused (exit 1)" 1 "$rc"
ok "a merged GGUF export of a qwen35 model: says it is not built yet" contains "$err" "of a qwen35 model is not built yet"
# gemma4: the trainer's plan and trainable count (pairs of each layer's shape, none on the KV-shared layers' k/v or
# the k_eq_v global layers' v; the per-layer table in the weights)
g4t="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
plan_case "tiny Gemma 4, f32 quantized on load" "$D/gemma4/hf32" true 0 2 "" "$g4t"
plan_case "tiny Gemma 4, bf16" "$D/gemma4/hf" false 0.1 1
run inspect "$D/hf/tiny-llama-f32" --no-4bit
ok "inspect a sharded directory (got: $(echo "$out" | grep ^format))" contains "$out" "3 files (sharded"
ok "inspect --no-4bit: weights as stored" contains "$out" "401.2 KB (load_in_4bit off)"
mkdir "$tmp/jinja" && cp "$D/qwen2/hf/"* "$tmp/jinja/"
run inspect "$tmp/jinja"
ok "inspect a directory without a chat template: says so" contains "$out" "none in the model (set chat_template)"
printf '%s\n' "{% for m in messages %}<|im_start|>{{ m.role }}{{ '\\n' }}{{ m.content }}<|im_end|>{% endfor %}" \
    >"$tmp/jinja/chat_template.jinja"
run inspect "$tmp/jinja"
ok "inspect a directory with chat_template.jinja: the template from it" contains "$out" "chatml (recognised from the model's template)"
run inspect ptrain-test/tiny-llama
expect_eq "inspect an HF id in the cache: exit 0" 0 "$rc"
ok "inspect an HF id: resolved to the snapshot" contains "$out" "models--ptrain-test--tiny-llama/snapshots/"
run inspect ptrain-test/absent
expect_eq "inspect an HF id not in the cache: exit 1" 1 "$rc"
ok "inspect a cache miss: says how to download" contains "$err" "huggingface-cli download ptrain-test/absent"

# --- checkpoints: a real one from a tiny training run, then damaged and incomplete copies ---
ck=$tmp/ck
mkdir -p "$ck"
# (its config has tokens where no token key is: a comment, an unknown key, a string key)
T1=hf_CommentedOutTokenAbcdefghijklmnopqr T2=hf_UnknownKeyTokenAbcdefghijklmnopqrst T3=hf_AllowedKeyTokenAbcdefghijklmnopqrs
tiny_config "$ck/train.yaml" "$ck/out" "max_steps: 4
save_steps: 2
logging_steps: 1
# hub_token: $T1
hf_api_key: $T2
hub_model_id: tester/$T3"
run train "$ck/train.yaml"
expect_eq "a tiny training run writes checkpoints: exit 0" 0 "$rc"
[ "$rc" = 0 ] || echo "$err" | tail -n 5 | sed 's/^/# /'
good=$ck/out/checkpoint-4.h5
if command -v h5dump >/dev/null 2>&1; then
    h5dump -d /run/config.yaml "$good" >"$tmp/config.dump" 2>&1
    ok "a checkpoint keeps the settings (lora_r: 4) but no token of the config file (a comment, an unknown key, a string key)" \
        sh -c "grep -q 'lora_r: 4' '$tmp/config.dump' && ! grep -q -e '$T1' -e '$T2' -e '$T3' '$tmp/config.dump'"
else
    skip_test "a checkpoint keeps no token of the config file" "h5dump not found (Debian: apt-get install hdf5-tools)"
fi
run inspect "$good"
expect_eq "inspect a checkpoint: exit 0 ($err)" 0 "$rc"
ok "inspect a checkpoint: verified" contains "$out" "complete     yes: CRC-32 of the file and Fletcher-32 of 84 tensors verified"
ok "inspect a checkpoint: step and epoch" contains "$out" "step         4 of 4 (epoch 0.44; 16 sequences of epoch 0's order seen)"
ok "inspect a checkpoint: loss" test -n "$(echo "$out" | grep -E '^loss +[0-9]+\.[0-9]{4} at learning rate')"
ok "inspect a checkpoint: world size" contains "$out" "world size   1 rank x batch 2 x accumulation 2"
ok "inspect a checkpoint: config hash" test -n "$(echo "$out" | grep -E "^config +$ck/train.yaml \(hash [0-9a-f]{16}, seed 3407\)")"
ok "inspect a checkpoint: base model" contains "$out" "base model   $D/hf/tiny-llama-bnb4 (llama, 2 layers, dim 64, vocab 320"
ok "inspect a checkpoint: LoRA" contains "$out" "lora         r 4, alpha 8, dropout 0, targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj; 8192 parameters"
ok "inspect a checkpoint: optimizer state" contains "$out" "optimizer    AdamW moments for every parameter"
size=$(stat -c %s "$good")
# bad NAME TEXT FILE: inspect FILE exits 1 with one error line "ptrain: error: FILE: TEXT..." (no
# crash, no HDF5 error stack)
bad() {
    run inspect "$3"
    ok "inspect $1: exit 1, one error \"$2\"" \
        test "$rc" = 1 -a "$(echo "$err" | grep -c .)" = 1 -a -n "$(echo "$err" | grep -F "ptrain: error: $3: $2")"
    [ "$rc" = 1 ] && [ -n "$(echo "$err" | grep -F "$3: $2")" ] || printf '# exit %s: %s\n' "$rc" "$err"
}
mkdir "$ck/trunc" "$ck/flip" "$ck/zero" "$ck/empty" "$ck/adapter" "$ck/append" "$ck/short" "$ck/tmp"
head -c $((size / 2)) "$good" >"$ck/trunc/checkpoint-4.h5"
bad "a truncated copy" "damaged: $((size / 2)) bytes, the completion mark says $size (truncated or appended to)" \
    "$ck/trunc/checkpoint-4.h5"
cp "$good" "$ck/append/checkpoint-4.h5" && printf 'x' >>"$ck/append/checkpoint-4.h5"
bad "a copy with a byte appended" "damaged: $((size + 1)) bytes, the completion mark says $size" "$ck/append/checkpoint-4.h5"
cp "$good" "$ck/flip/checkpoint-4.h5"
byte=$(od -An -tu1 -j $((size / 2)) -N 1 "$good" | tr -d ' ')
printf "\\$(printf '%03o' $(((byte + 1) % 256)))" | dd of="$ck/flip/checkpoint-4.h5" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
bad "a copy with one byte changed in the middle" "damaged: CRC-32 " "$ck/flip/checkpoint-4.h5"
cp "$good" "$ck/zero/checkpoint-4.h5"
dd if=/dev/zero of="$ck/zero/checkpoint-4.h5" bs=512 count=1 conv=notrunc 2>/dev/null
bad "a copy with its first 512 bytes zeroed" "incomplete: no completion mark" "$ck/zero/checkpoint-4.h5"
cp "$ck/zero/checkpoint-4.h5" "$ck/tmp/.checkpoint-6.h5.tmp.4242"
bad "a crash's temporary file" "incomplete: no completion mark" "$ck/tmp/.checkpoint-6.h5.tmp.4242"
head -c 100 "$good" >"$ck/short/checkpoint-4.h5"
bad "a copy shorter than the header" "incomplete: 100 bytes, shorter than a checkpoint's 512-byte header" \
    "$ck/short/checkpoint-4.h5"
: >"$ck/empty/checkpoint-4.h5"
bad "an empty file" "incomplete: 0 bytes" "$ck/empty/checkpoint-4.h5"
cp "$ck/out/lora/adapter.h5" "$ck/adapter/checkpoint-3.h5"
bad "an adapter.h5 renamed checkpoint-3.h5" "not a ptrain checkpoint: an HDF5 file without a checkpoint's 512-byte header" \
    "$ck/adapter/checkpoint-3.h5"
bad "a checkpoint that does not exist" "cannot open: No such file or directory" "$ck/none/checkpoint-4.h5"

# h5py reads a checkpoint as the HDF5 file it is (the user block is skipped): one attribute, one
# adapter tensor (its Fletcher-32 checksum checked), the config text; and the completion mark
# checks out as docs/checkpoint-format.md describes it (size, zlib CRC-32 of the rest, the step)
py=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import h5py' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    skip_test "h5py reads a checkpoint" "python3 -c 'import h5py' fails (Debian: apt-get install python3-h5py)"
else
    got=$("$py" - "$good" <<'PY' 2>&1
import sys, zlib, h5py, numpy as np
data = open(sys.argv[1], "rb").read()
mark = dict(line.split(" ", 1) for line in data[:512].rstrip(b"\0").decode().splitlines())
assert mark["PTRAIN-CHECKPOINT"] == "1" and int(mark["bytes"]) == len(data), mark
assert int(mark["crc32"], 16) == zlib.crc32(data[512:]) and mark["step"] == "4", mark
with h5py.File(sys.argv[1], "r") as f:
    name = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    a = f["adapter"][name][()]
    assert a.dtype == np.float32 and a.shape == (4, 64) and np.isfinite(a).all(), (a.dtype, a.shape)
    assert f["adapter"][name].fletcher32
    print(f.attrs["format"].decode(), int(f["state"].attrs["global_step"]), f.userblock_size,
          f["run/config.yaml"][()].decode().count("lora_r: 4"))
PY
)
    expect_eq "h5py reads a checkpoint: the mark, format, /state global_step, user block, config text" \
        "ptrain-checkpoint 4 512 1" "$got"
fi

run generate --model "$D/hf/tiny-llama-bnb4" --chat --prompt "What is the capital of France?" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from an HF bnb-4bit directory: exit 0 ($err)" 0 "$rc"
first=$out
run generate --model "$D/hf/tiny-llama-bnb4" --chat --prompt "What is the capital of France?" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from an HF directory: greedy output is reproducible" "$first" "$out"
run generate --model ptrain-test/tiny-llama --prompt "The quick brown fox" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from an HF id: exit 0 ($err)" 0 "$rc"
ok "generate from an HF id: reports its speed" contains "$err" "tokens in"
run generate --model "$D/hf/tiny-llama-f32" --prompt "hi" --threads 1
expect_eq "generate from a directory without tokenizer.json: exit 1" 1 "$rc"
ok "generate without tokenizer.json: says what is missing" contains "$err" "no tokenizer.json in the model directory"

# a mixture of experts (tests/reference/make_qwen3moe_goldens.py): 4 experts of 3 x 64 x 64, top-2, on layers
# 0 and 2; parameters counted from the tensors (test_moe.c checks the counts against the loaded tensors)
run inspect "$D/qwen3moe/hf" --lora-target-modules q_proj,v_proj
expect_eq "inspect a Qwen3-MoE directory: exit 0 ($err)" 0 "$rc"
ok "inspect a Qwen3-MoE directory: the experts" contains "$out" \
    "mixture of experts on 2 of 3 layers: 4 experts of width 64, top-2, renormalised (router softmax in fp32)"
ok "inspect a Qwen3-MoE directory: total and active parameters" contains "$out" "(222288, 173136)"
ok "inspect a Qwen3-MoE directory: experts in 4 bits" contains "$out" "weights per rank   263.4 KB (load_in_4bit on)"
run inspect "$D/qwen3moe/hf-fused" --lora-target-modules q_proj,v_proj
ok "inspect fused experts: the same 4-bit weights" contains "$out" "weights per rank   263.4 KB (load_in_4bit on)"
run generate --model "$D/qwen3moe/hf" --prompt "The quick brown fox" --temperature 0 --max-new-tokens 8 --threads 1
expect_eq "generate from a Qwen3-MoE directory: exit 0 ($err)" 0 "$rc"
done_testing
