#!/usr/bin/env bash
# The end of a CI run, read from bun test's output (FILE) and npm test's exit status (STATUS):
# "N skipped: name, name, ..." (the names as bun prints them, "describe > test"), then last
# "N passed, M failed". A failed run with no failed test (the typecheck, the runner) counts one.
set -uo pipefail
out=$1
status=$2

count() { grep -Eo "^ *[0-9]+ $1\$" "$out" | tail -1 | grep -Eo '[0-9]+' || echo 0; }
passed=$(count pass)
failed=$(count fail)
skipped=$(count skip)
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
names=$(sed -n 's/^(skip) //p' "$out" | awk '!seen[$0]++' | awk 'NR > 1 { printf ", " } { printf "%s", $0 }')
echo "${skipped} skipped${names:+: $names}"
echo "${passed} passed, ${failed} failed"
