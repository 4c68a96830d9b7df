# peft_env.sh — the set-up the scripts that hold ptrain's adapters to PEFT share (sourced after
# tests/tap.sh): P (the ptrain binary), PY (the test Python), a temporary directory $tmp removed at
# exit, the prompt $pr, `run` (a ptrain command's exit status in $rc, its standard error in $err),
# and `peft_require NAME MODULE...`, which skips the whole script, saying why, when that Python
# lacks one of the modules.
P=${PTRAIN:?set PTRAIN to the ptrain binary}
PY=${PTRAIN_PYTHON:-$HOME/.cache/ptrain/pyenv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pr="Arr, the sea is wide and the ship"
run() {
    "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    err=$(cat "$tmp/err")
}
peft_require() { # peft_require NAME MODULE...
    req=$1
    shift
    mods="" list="" last=""
    for m in "$@"; do # list: "a, b and c"
        mods="$mods\"$m\", "
        [ -n "$last" ] && list="${list:+$list, }$last"
        last=$m
    done
    list="${list:+$list and }$last"
    if [ -z "$PY" ] || ! "$PY" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ($mods)))" 2>/dev/null; then
        skip_test "$req" "no Python with $list in \$PTRAIN_PYTHON (share/scripts/test-python.sh makes one)"
        done_testing
        exit $?
    fi
}
