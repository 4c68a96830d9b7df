#!/bin/sh
# test_chat_cmd.sh — `ptrain tokenize --chat` and `ptrain generate --chat --show-prompt` choose and
# render the chat template as training does: the tiny Qwen2 model of tests/data/qwen2/hf with the
# tokenizer_config.json of tests/data/tokenizer/chat-cmd (named templates default and tool_use, pad
# and mask tokens the template prints), each case's --chat-template / --chat-template-kwarg
# options, the tool_use template for a conversation with tools; `ptrain inspect` names them. The expected texts and ids are
# transformers' apply_chat_template's, written by tests/reference/make_chat_cmd_goldens.py.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
G=$PTRAIN_SRCDIR/tests/data/tokenizer/chat-cmd
M=$PTRAIN_SRCDIR/tests/data/qwen2/hf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/model"
for f in config.json model.safetensors tokenizer.json; do ln -s "$M/$f" "$tmp/model/$f"; done
cp "$G/tokenizer_config.json" "$tmp/model/"

for n in 1 2 3 4 5; do
    set -- $(cat "$G/$n.args")
    if [ -f "$G/$n.gen" ]; then # one user message and the generation prompt: what generate --chat renders
        prompt=$(sed -n 's/.*"content": "\([^"]*\)".*/\1/p' "$G/$n.json")
        "$P" generate --model "$tmp/model" --chat --show-prompt --prompt "$prompt" "$@" >"$tmp/out" 2>"$tmp/err"
        expect_eq "case $n: generate --chat --show-prompt $*: exit 0" 0 $?
        ok "  the text transformers renders" cmp -s "$G/$n.txt" "$tmp/out"
    else
        "$P" tokenize --model "$tmp/model" --chat "$@" "$G/$n.json" >"$tmp/out" 2>"$tmp/err"
        expect_eq "case $n: tokenize --chat $*: exit 0 $(head -c 200 "$tmp/err")" 0 $?
        expect_eq "  the ids transformers gives" "$(cat "$G/$n.ids")" "$(cat "$tmp/out")"
    fi
done

out=$("$P" inspect "$tmp/model")
ok "inspect: the chat template line names tool_use for rows with tools" contains "$out" \
    "named: tool_use (tool_use renders rows with tools)"
"$P" tokenize --model "$tmp/model" --chat --chat-template nosuch "$G/1.json" >/dev/null 2>"$tmp/err"
expect_eq "an unknown --chat-template: exit 1" 1 $?
ok "  naming the model's templates" contains "$(cat "$tmp/err")" "model, tool_use"
"$P" tokenize --model "$tmp/model" --chat --chat-template-kwarg novalue "$G/1.json" >/dev/null 2>"$tmp/err"
expect_eq "--chat-template-kwarg without =: a usage error (exit 2)" 2 $?
done_testing
