# shellcheck shell=sh
# tap.sh — TAP helpers for the shell tests: ok/skip lines and the plan at the end.
# Usage: . tests/tap.sh; ok "name" test-command...; expect_eq "name" expected actual; done_testing
# (also: skip_test, contains, smollm_model, need_mpirun)
tap_n=0
tap_fail=0
ok() {
    name=$1
    shift
    tap_n=$((tap_n + 1))
    if "$@"; then
        echo "ok $tap_n - $name"
    else
        echo "not ok $tap_n - $name"
        tap_fail=$((tap_fail + 1))
    fi
}
expect_eq() {
    tap_n=$((tap_n + 1))
    if [ "$2" = "$3" ]; then
        echo "ok $tap_n - $1"
    else
        echo "not ok $tap_n - $1"
        printf '%s\n' "# expected:" "$2" "# got:" "$3" | sed 's/^/#   /'
        tap_fail=$((tap_fail + 1))
    fi
}
skip_test() {
    tap_n=$((tap_n + 1))
    echo "ok $tap_n - $1 # SKIP $2"
}
contains() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }
# smollm_model: the path of SmolLM2-135M-Instruct.Q4_1.gguf in $PTRAIN_MODELS, models/ or
# /tmp/models (share/scripts/fetch-model.sh fetches it), or nothing
smollm_model() {
    for dir in "${PTRAIN_MODELS:-}" "$PTRAIN_SRCDIR/models" /tmp/models; do
        [ -n "$dir" ] && [ -f "$dir/SmolLM2-135M-Instruct.Q4_1.gguf" ] && echo "$dir/SmolLM2-135M-Instruct.Q4_1.gguf" && return
    done
}
# plain_build_only REASON: in the sanitizer build (PTRAIN_SANITIZERS=1, set by make check) the whole
# script is skipped, saying why; for the tests whose time goes to the Python tools' side (loading
# ptrain's files in PEFT, transformers, llama.cpp), not to ptrain's code, which other tests run
# under the sanitizers
plain_build_only() {
    [ "${PTRAIN_SANITIZERS:-0}" = 1 ] || return 0
    echo "1..0 # SKIP in the sanitizer build: $1; the plain build runs it"
    exit 0
}
# need_mpirun: sets mpirun ($MPIRUN, else mpirun); without it the whole script is skipped, saying why
need_mpirun() {
    mpirun=${MPIRUN:-mpirun}
    command -v "$mpirun" >/dev/null 2>&1 && return 0
    echo "1..0 # SKIP mpirun not found (Debian: apt-get install openmpi-bin)"
    exit 0
}
done_testing() {
    echo "1..$tap_n"
    [ "$tap_fail" -eq 0 ]
}
