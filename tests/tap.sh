# shellcheck shell=sh
# tap.sh — TAP helpers for the shell tests: ok/skip lines and the plan at the end.
# Usage: . tests/tap.sh; ok "name" test-command...; expect_eq "name" expected actual; done_testing
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
done_testing() {
    echo "1..$tap_n"
    [ "$tap_fail" -eq 0 ]
}
