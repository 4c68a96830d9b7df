#!/bin/sh
# test_tokenize.sh — `ptrain tokenize` on the SentencePiece GGUF and the Llama 3-style GGUF of
# tests/data/tokenizer: the ids of tokenizer(text) (bos added as the model adds it, the dummy
# prefix before a leading space), of tokenizer(text, add_special_tokens=False), per line, as
# pieces, of a rendered chat, and its errors (missing file, bad JSON for --chat, invalid UTF-8,
# a second file, an unknown option). The expected ids are transformers' (and, for the
# SentencePiece GGUF, with the model's own dummy prefix) from tests/data/tokenizer/bos_goldens.json,
# written by tests/reference/make_bos_goldens.py.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
T=$PTRAIN_SRCDIR/tests/data/tokenizer
SPM=$T/spm/vocab.gguf
L3=$T/llama3-mini/bos.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_eq "spm: tokenizer(\"Hello world\"): bos, then the ids" "1 627 1034" "$(printf 'Hello world' | "$P" tokenize --model "$SPM")"
expect_eq "spm: a leading space gets the dummy prefix too" "1 265 667 265 795 2521" \
    "$(printf ' Hello  world ' | "$P" tokenize --model "$SPM" -)"
expect_eq "spm: --no-special leaves bos out" "627 1034" "$(printf 'Hello world' | "$P" tokenize --model "$SPM" --no-special)"
expect_eq "spm: special tokens in the text are ids, bos once" "1 265 667" \
    "$(printf '<s> Hello' | "$P" tokenize --model "$SPM")"
expect_eq "llama3: tokenizer(\"Hello world\")" "4000 958 1444" "$(printf 'Hello world' | "$P" tokenize --model "$L3" --ids)"
printf 'Hello world\n\nx<s>y' >"$tmp/in.txt"
expect_eq "llama3: --lines: one line of ids per line of the file" "4000 958 1444
4000
4000 87 27 82 29 88" "$("$P" tokenize --model "$L3" --lines "$tmp/in.txt")"
awk 'BEGIN { for (i = 0; i < 40000; i++) printf "line %d: caf\303\251 %s\n", i, (i % 3 ? "x<s>y" : "") }' >"$tmp/many.txt"
OMP_NUM_THREADS=1 "$P" tokenize --model "$L3" --lines "$tmp/many.txt" >"$tmp/one.ids"
OMP_NUM_THREADS=2 "$P" tokenize --model "$L3" --lines "$tmp/many.txt" >"$tmp/two.ids"
expect_eq "--lines: 40000 lines (3 blocks), one id line each" 40000 "$(wc -l <"$tmp/two.ids" | tr -d ' ')"
ok "--lines: the same ids on 2 threads as on 1" cmp -s "$tmp/one.ids" "$tmp/two.ids"
expect_eq "--lines: line 39999 (the last block) as the line alone" \
    "$(sed -n 39999p "$tmp/many.txt" | tr -d '\n' | "$P" tokenize --model "$L3")" "$(sed -n 39999p "$tmp/two.ids")"
printf 'fine\nalso fine\nbad \377\nfine\n' | OMP_NUM_THREADS=2 "$P" tokenize --model "$L3" --lines >"$tmp/out" 2>"$tmp/err"
expect_eq "--lines: a line of invalid UTF-8: exit 1" 1 $?
expect_eq "  after printing the lines before it" 2 "$(wc -l <"$tmp/out" | tr -d ' ')"
ok "  saying so" contains "$(cat "$tmp/err")" "not valid UTF-8"
expect_eq "spm: --pieces quotes each token's text" "'<s>' ' Hello' ' world'" \
    "$(printf 'Hello world' | "$P" tokenize --model "$SPM" --pieces)"
out=$(printf '[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]' | "$P" tokenize --model "$SPM" --chat)
ok "spm: --chat renders the model's template and starts with one bos" contains " $out" " 1 "
ok "spm: --chat: no second bos" test "$(echo "$out" | cut -d' ' -f2)" != 1

"$P" tokenize --model "$SPM" "$tmp/missing.txt" >/dev/null 2>"$tmp/err"
expect_eq "a missing input file: exit 1" 1 $?
ok "  naming it" contains "$(cat "$tmp/err")" "missing.txt: cannot open it"
printf '{"role": "user"}' | "$P" tokenize --model "$SPM" --chat >/dev/null 2>"$tmp/err"
expect_eq "--chat with JSON that is not a list of messages: exit 1" 1 $?
ok "  saying what it expects" contains "$(cat "$tmp/err")" "expected a JSON list of"
printf 'ab\377' | "$P" tokenize --model "$SPM" >/dev/null 2>"$tmp/err"
expect_eq "invalid UTF-8: exit 1" 1 $?
ok "  saying so" contains "$(cat "$tmp/err")" "not valid UTF-8"
"$P" tokenize --model "$SPM" a b >/dev/null 2>"$tmp/err"
expect_eq "two input files: a usage error (exit 2)" 2 $?
"$P" tokenize --bogus >/dev/null 2>"$tmp/err"
expect_eq "an unknown option: a usage error (exit 2)" 2 $?
ok "--help prints the usage" contains "$("$P" tokenize --help)" "Usage: ptrain tokenize"
done_testing
