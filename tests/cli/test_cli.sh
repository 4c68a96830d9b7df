#!/bin/sh
# test_cli.sh — the ptrain command line: help, version, usage errors and their exit codes, `check`
# on the shipped examples and on every config under tests/configs (bad ones must give exactly the
# error in their .err file), and that HF_TOKEN never reaches the output.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # run ARGS...: sets rc, out, err
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

run --help
ok "--help exits 0 and shows usage" test "$rc" = 0 -a -n "$(echo "$out" | grep '^Usage: ptrain')"
ok "--help documents the exit codes" contains "$out" "0 ok, 1 bad input"
run --version
ok "--version names the version" contains "$out" "ptrain "
ok "--version lists the backends built" contains "$out" "backends: cpu"
run
expect_eq "no arguments: exit 2" 2 "$rc"
expect_eq "no arguments: one usage error" "ptrain: usage error: no config file given
ptrain: usage error: Try 'ptrain --help'." "$err"
run check --bogus x.yaml
expect_eq "unknown option: exit 2" 2 "$rc"
ok "unknown option is named" contains "$err" "unknown option '--bogus'"
run check a.yaml b.yaml
expect_eq "extra argument: exit 2" 2 "$rc"
ok "extra argument is named" contains "$err" "unexpected argument 'b.yaml'"
run check "$tmp/missing.yaml"
expect_eq "missing config: exit 1" 1 "$rc"
expect_eq "missing config: names the file and the reason" \
    "ptrain: error: cannot open config file $tmp/missing.yaml: No such file or directory" "$err"

for f in "$PTRAIN_SRCDIR"/share/examples/*.yaml "$PTRAIN_SRCDIR"/tests/configs/good/*.yaml; do
    [ -e "$f" ] || continue
    run check "$f"
    ok "check $(basename "$f"): exit 0, table, ok" test "$rc" = 0 -a "$(echo "$out" | head -n1 | cut -c1-3)" = key \
        -a "$(echo "$out" | tail -n1)" = "$f: ok"
done
run check --config "$PTRAIN_SRCDIR/share/examples/multi-gpu-resume.yaml"
expect_eq "check --config FILE works like check FILE" 0 "$rc"
run "$PTRAIN_SRCDIR/share/examples/smollm2-demo.yaml" --bogus
expect_eq "train with a bad option: exit 2" 2 "$rc"

# every malformed config gets exactly its expected error, with exit status 1
cd "$PTRAIN_SRCDIR/tests/configs/bad" || exit 1
for f in *.yaml; do
    [ -e "$f" ] || continue
    run check "$f"
    expect_eq "bad config $f: exact error, exit 1" "$(cat "${f%.yaml}.err")
rc=1" "$err
rc=$rc"
done
cd - >/dev/null || exit 1

# every key `check` prints is documented in docs/configuration.md
run check "$PTRAIN_SRCDIR/share/examples/multi-gpu-resume.yaml"
undocumented=""
for key in $(echo "$out" | awk 'NR > 1 && $1 !~ /^(launch|env)\./ && $1 !~ /^dataset\[/ && $1 !~ /:$/ && NF > 1 {print $1}'); do
    grep -q "\`$key\`" "$PTRAIN_SRCDIR/docs/configuration.md" || undocumented="$undocumented $key"
done
expect_eq "every key is in docs/configuration.md" "" "$undocumented"

# bounded parsing: 50000 nested mappings (250 KB; libyaml alone would take many seconds on them)
# are refused at once at level 65, and a file past 256 KiB where it crosses the limit
awk 'BEGIN { printf "model_name: x\ndataset: "; for (i = 0; i < 50000; i++) printf "{a: "; printf "1";
             for (i = 0; i < 50000; i++) printf "}"; print "" }' >"$tmp/deep.yaml"
timeout 5 "$P" check "$tmp/deep.yaml" >"$tmp/out" 2>"$tmp/err"
expect_eq "50000 nested mappings: refused within 5 s at level 65, naming the limit" "rc=1
ptrain: error: $tmp/deep.yaml:2:262: nested deeper than 64 levels (mappings and lists inside one another), the most ptrain reads; no key needs more than 4: flatten it" \
    "rc=$?
$(cat "$tmp/err")"
{ printf 'model_name: x\n# '; head -c 300000 /dev/zero | tr '\0' 'x'; printf '\n'; } >"$tmp/big.yaml"
run check "$tmp/big.yaml"
expect_eq "a config of 300000 bytes: refused where it passes 256 KiB" "rc=1
ptrain: error: $tmp/big.yaml:2:262131: the file goes on past 256 KiB (262144 bytes), the most ptrain reads of a config file; is this really a config file?" \
    "rc=$rc
$err"

# a value of any length is shown by its start, its end and its length, and the reason after it is whole
# (issue 29): a model_name of 200 KB (near the most a config file holds), a --repo of 100 KB
{ printf 'model_name: /very/long/path/'; head -c 200000 /dev/zero | tr '\0' d; printf '/model.gguf\ndataset:\n  - name: x.jsonl\noutput_dir: %s/longname\n' "$tmp"; } \
    >"$tmp/longname.yaml"
run "$tmp/longname.yaml"
expect_eq "a model_name of 200 KB: one line with its start, length and end, and the reason" "rc=1
lines=1
ptrain: error: model /very/long/path/ddd
…(200027 bytes)…
dddd/model.gguf not found
fetch the default model with share/scripts/fetch-model.sh" "rc=$rc
lines=$(printf '%s\n' "$err" | grep -c '')
$(printf '%s' "$err" | cut -c1-40)
$(printf '%s' "$err" | grep -o '…([0-9]* bytes)…')
$(printf '%s' "$err" | grep -o 'dddd/model.gguf not found')
$(printf '%s' "$err" | grep -o 'fetch the default model with share/scripts/fetch-model.sh$')"
run push "$tmp" --repo "me/$(head -c 100000 /dev/zero | tr '\0' r)"
expect_eq "push --repo of 100 KB: one line with its length, and the reason" "rc=2
lines=1
…(100003 bytes)…
is not a Hub repository id: each part must be 1 to 96 letters, digits, '-', '_' or '.', and not start or end with '-' or '.'; give NAMESPACE/NAME" \
    "rc=$rc
lines=$(printf '%s\n' "$err" | grep -c '')
$(printf '%s' "$err" | grep -o '…([0-9]* bytes)…')
$(printf '%s' "$err" | grep -o 'is not a Hub repository id: .*$')"

# an Arrow dataset is refused, whatever the file's name, with no conversion command in the error
# (nothing for a user to paste; the message names the file and what to give instead)
conv=$tmp/conv
mkdir -p "$conv"
for name in "it's \$(touch PWNED).arrow" 'say "hi" \ `touch PWNED` back.arrow'; do
    printf 'a,b\n1,2\n' >"$conv/$name"
    yaml_name=$(printf '%s' "$name" | sed "s/'/''/g")
    printf 'model_name: "%s/tests/data/hf/tiny-llama-bnb4"\ndataset:\n  - name: '"'%s'"'\nthreads: 1\nmax_steps: 1\n' \
        "$PTRAIN_SRCDIR" "$yaml_name" >"$conv/c.yaml"
    (cd "$conv" && "$P" c.yaml >out 2>err)
    expect_eq "a dataset named $name: refused as an Arrow file, no command in the error" "Arrow file
no python3" "$(grep -o 'Arrow file' "$conv/err" | head -1)
$(grep -q 'python3' "$conv/err" && echo python3 || echo no python3)"
    rm -f "$conv/$name"
done

# secrets: the token's value appears nowhere, its presence is shown
HF_TOKEN=hf_do_not_print_me_123 run check "$PTRAIN_SRCDIR/share/examples/push-checkpoints.yaml"
ok "HF_TOKEN shown as set (hidden)" contains "$out" "set (hidden)"
ok "HF_TOKEN value never printed" test -z "$(cat "$tmp/out" "$tmp/err" | grep hf_do_not_print_me_123)"
printf 'hub_token: hf_in_config_secret\n' >"$tmp/token.yaml"
run check "$tmp/token.yaml"
ok "a token in the config warns and is never printed" test "$rc" = 0 -a \
    -z "$(cat "$tmp/out" "$tmp/err" | grep hf_in_config_secret)" -a -n "$(echo "$err" | grep 'export HF_TOKEN')"

done_testing
