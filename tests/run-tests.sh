#!/bin/sh
# run-tests.sh — run `make check` in one or more configured build directories and print one
# closing line counting every test case across them: "N passed, N failed, N skipped".
# Usage: tests/run-tests.sh BUILD_DIR...
pass=0 fail=0 skip=0 status=0
for dir in "$@"; do
    echo "=== make check in $dir"
    # one job more than cores: the Slurm, MPI and Hub tests spend part of their time waiting
    make -C "$dir" -j"$(($(nproc) + 1))" check || status=1
    find "$dir/tests" -name '*.trs' >"$dir/trs-list" 2>/dev/null || true
    while read -r trs; do
        p=$(grep -c '^:test-result: PASS' "$trs")
        f=$(grep -c -E '^:test-result: (FAIL|ERROR|XPASS)' "$trs")
        s=$(grep -c '^:test-result: SKIP' "$trs")
        pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
        [ "$f" -eq 0 ] || echo "FAILED in $trs (see ${trs%.trs}.log)"
    done <"$dir/trs-list"
    # the slowest tests: from each log's birth (the test's start) to its .trs (its end), where the
    # file system records births; what to look at when the suite grows past its time
    while read -r trs; do
        born=$(stat -c %W "${trs%.trs}.log" 2>/dev/null || echo 0)
        [ "${born:-0}" -gt 0 ] && echo "$(($(stat -c %Y "$trs") - born)) ${trs%.trs}"
    done <"$dir/trs-list" | sort -rn | head -n 8 | awk -v d="$dir" 'NR == 1 { print "slowest in " d " (seconds):" } { print "  " $0 }'
done
[ "$fail" -eq 0 ] || status=1
echo "$pass passed, $fail failed, $skip skipped"
exit $status
