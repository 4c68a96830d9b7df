#!/bin/sh
# test_gemma4.sh — a Gemma 4 text model (tests/data/gemma4/hf, make_gemma4_goldens.py) through the
# commands a user starts with: `ptrain inspect` describes its features (the global layers' head size,
# rope and k_eq_v, the value norm, KV sharing, the per-layer inputs) and says training is not available
# yet; `ptrain generate` runs it greedily and reproducibly (its logits are held to transformers' in
# test_hf_model); `ptrain train`, `ptrain export` and `generate --adapter` refuse it with one clear
# message, naming the family.
. "$PTRAIN_SRCDIR/tests/tap.sh"
. "$PTRAIN_SRCDIR/tests/tiny.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
G=$PTRAIN_SRCDIR/tests/data/gemma4/hf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

run inspect "$G"
expect_eq "inspect gemma4: exit 0" 0 "$rc"
ok "inspect gemma4: the family" contains "$out" "gemma4 (model_type gemma4_text, Gemma4ForCausalLM)"
ok "inspect gemma4: the global layers" contains "$out" \
    "global layers: head size 32, key/value heads 1, 4 of 16 rotary pairs turning (proportional), values are the keys"
ok "inspect gemma4: KV sharing" contains "$out" "the last 3 layers reuse the keys and values of earlier ones"
ok "inspect gemma4: per-layer inputs" contains "$out" "per-layer inputs of 64 values (embed_tokens_per_layer 384 x 448"
ok "inspect gemma4: training not yet" contains "$out" "not available for gemma4 models yet"

run generate --model "$G" --prompt "the quick brown fox" --max-new-tokens 8 --temperature 0 --device cpu \
    --ids "$tmp/ids1"
expect_eq "generate gemma4: exit 0" 0 "$rc"
run generate --model "$G" --prompt "the quick brown fox" --max-new-tokens 8 --temperature 0 --device cpu \
    --ids "$tmp/ids2"
ok "generate gemma4: greedy, the same tokens twice" cmp -s "$tmp/ids1" "$tmp/ids2"
ok "generate gemma4: 8 tokens generated" test "$(sed -n 2p "$tmp/ids1" | wc -w)" = 8

run generate --model "$G" --prompt "hi" --adapter "$tmp/none" --device cpu
expect_eq "generate gemma4 with an adapter: exit 1" 1 "$rc"
ok "generate gemma4 with an adapter: refused" contains "$err" "an adapter (--adapter) is not available for gemma4"

tiny_config "$tmp/c.yaml" "$tmp/c" "max_steps: 1"
sed -i "s|^model_name: .*|model_name: \"$G\"|" "$tmp/c.yaml"
run train "$tmp/c.yaml"
expect_eq "train gemma4: exit 1" 1 "$rc"
ok "train gemma4: refused, naming the family" contains "$err" "training is not available for gemma4 models yet"
run export --model "$G" --adapter "$tmp/none" --out "$tmp/exp"
expect_eq "export gemma4: exit 1" 1 "$rc"
ok "export gemma4: refused, naming the family" contains "$err" "export is not available for gemma4 models yet"
done_testing
