#!/bin/sh
# tap-run.sh — runs one test for the automake TAP driver. Shell tests speak TAP themselves; cmocka
# programs are run with TAP output, and cmocka 1.1's "not ok N # SKIP" (which TAP counts as a
# failure) is rewritten to "ok N - name # SKIP reason", the reason being the line the test printed
# just before ("SKIP reason: ...").
case "$1" in
*.sh) exec "${SHELL:-/bin/sh}" "$@" ;;
esac
export CMOCKA_MESSAGE_OUTPUT=TAP
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out" | awk '
/^SKIP reason: / { reason = substr($0, 14); print "# " $0; next }
/^not ok [0-9]+ # SKIP/ {
    n = $3; name = $0; sub(/^not ok [0-9]+ # SKIP[ \t]*/, "", name)
    print "ok " n " - " name " # SKIP " (reason != "" ? reason : "no reason given"); reason = ""; next }
{ print }'
exit $status
