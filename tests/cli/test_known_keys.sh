#!/bin/sh
# test_known_keys.sh — every config key of the seed system (praisonai-train 0.1.16, the wheel that
# share/scripts/test-python.sh downloads beside the test Python environment) means something to
# ptrain (issue 46): the keys of its KNOWN_KEYS and those its trainer and Hub code read from the
# config (config.get("KEY"), config["KEY"]) are read out of the wheel's source, and each, given as
# null in a working config, is a key of ptrain's table (or an alias of one) or one it reads and has
# no field for, with a note saying what ptrain does instead; never "unknown key". A key of the second
# kind given a value ptrain cannot honour (a one-item list, which none of them accepts unless it
# accepts any value) is refused with the reason and the fix (docs/configuration.md, "Keys ptrain
# reads but has no field for"). Skipped, saying why, when the wheel is absent.
. "$PTRAIN_SRCDIR/tests/tap.sh"
P=${PTRAIN:?set PTRAIN to the ptrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wheel=${PTRAIN_SEED_WHEEL:-}
if [ -z "$wheel" ] && [ -n "${PTRAIN_PYTHON:-}" ]; then
    wheel=$(dirname "$(dirname "$PTRAIN_PYTHON")")/wheels/praisonai_train-0.1.16-py3-none-any.whl
fi
if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
    echo "1..0 # SKIP the seed's wheel praisonai_train-0.1.16-py3-none-any.whl is not there (set PTRAIN_PYTHON to the env share/scripts/test-python.sh builds, which downloads it, or PTRAIN_SEED_WHEEL to the file)"
    exit 0
fi
py=${PTRAIN_PYTHON:-python3}
"$py" - "$wheel" >"$tmp/keys" <<'PY' || { echo "1..0 # SKIP could not read the keys out of $wheel"; exit 0; }
import ast, re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
trainer = z.read("praisonai_train/train/llm/trainer.py").decode()
keys = set()
for node in ast.walk(ast.parse(trainer)):
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KNOWN_KEYS" for t in node.targets):
        keys |= set(ast.literal_eval(node.value.args[0]))
if len(keys) < 100:
    sys.exit("KNOWN_KEYS not found in trainer.py")
for path in ("praisonai_train/train/llm/trainer.py", "praisonai_train/_hub.py"):
    keys |= set(re.findall(r'\bconfig(?:\.get\(|\[)\s*"(\w+)"', z.read(path).decode()))
print("\n".join(sorted(keys)))
PY
nkeys=$(wc -l <"$tmp/keys")
ok "the seed's wheel gives its config keys ($nkeys)" test "$nkeys" -ge 113

check() { # check FILE: rc, out, err of ptrain check on FILE
    "$P" check "$1" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}
one() { # one KEY VALUE: the working config with KEY: VALUE at line 3, checked
    printf 'dataset:\n  - name: data.jsonl\n%s: %s\n' "$1" "$2" >"$tmp/one.yaml"
    check "$tmp/one.yaml"
    cfg=$tmp/one.yaml line=3
}
# Every key null in one config (a run each would take long on a loaded machine); a key given twice
# there through its alias (model_name and model) is checked on its own.
grep -v -x -e dataset "$tmp/keys" >"$tmp/batch"
batch() { { printf 'dataset:\n  - name: data.jsonl\n'; sed 's/$/: null/' "$tmp/batch"; } >"$tmp/all.yaml"; }
batch
check "$tmp/all.yaml"
: >"$tmp/alone"
for n in $(echo "$err" | sed -n "s|.*$tmp/all.yaml:\([0-9]*\):[0-9]*: .*given twice.*|\1|p"); do
    sed -n "${n}s/: null\$//p" "$tmp/all.yaml" >>"$tmp/alone"
done
if [ -s "$tmp/alone" ]; then
    grep -v -x -f "$tmp/alone" "$tmp/batch" >"$tmp/batch2"
    mv "$tmp/batch2" "$tmp/batch"
    batch
    check "$tmp/all.yaml"
fi
all_out=$out all_err=$err
known=0 alias=0 noted=0 refused=0
while read -r key; do
    if [ "$key" = dataset ]; then # the working config's own
        one model_name null
    elif grep -q -x "$key" "$tmp/alone"; then
        one "$key" null
    else
        cfg=$tmp/all.yaml line=$(grep -n -x "$key: null" "$tmp/all.yaml" | cut -d: -f1) out=$all_out
        err=$(echo "$all_err" | grep "$tmp/all.yaml:$line:") rc=0
        # neither printed by check nor noted: an alias, or a note past the first 20 the report shows
        if [ -z "$err" ] && ! echo "$out" | grep -q "^$key "; then one "$key" null; fi
    fi
    if [ "$rc" != 0 ] || contains "$err" "unknown key"; then
        expect_eq "$key: null is accepted, not unknown" "rc=0" "rc=$rc
$err"
        continue
    fi
    if contains "$err" "note: $cfg:$line:1: $key: "; then
        # one ptrain has no field for: a value it cannot honour is refused with the reason and the fix,
        # or any value is accepted with the note
        ok "$key: a row in docs/configuration.md" grep -q "^| \`$key\` |" "$PTRAIN_SRCDIR/docs/configuration.md"
        one "$key" "[ptrain-probe]"
        if [ "$rc" = 0 ]; then
            ok "$key: accepted with a note (any value)" contains "$err" "note: $cfg:3:1: $key: "
            noted=$((noted + 1))
        else
            first=$(echo "$err" | head -n 1)
            ok "$key: accepted with a note, refused with the reason and the fix for a value it cannot honour" \
                test "$rc" = 1 -a -n "$(echo "$first" | grep "error: $cfg:3:[0-9]*: $key: .*remove")"
            refused=$((refused + 1))
        fi
    elif [ -z "$err" ] && echo "$out" | grep -q "^$key[ []"; then
        ok "$key: a key of ptrain's table" true
        known=$((known + 1))
    elif [ -z "$err" ]; then
        ok "$key: an alias of a key of ptrain's table" true
        alias=$((alias + 1))
    else
        expect_eq "$key: null is accepted without warnings" "" "$err"
    fi
done <"$tmp/keys"
echo "# $known keys of ptrain's table, $alias aliases, $noted accepted with a note, $refused refused unless given a value ptrain honours"
done_testing
