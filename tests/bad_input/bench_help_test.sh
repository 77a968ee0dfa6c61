#!/usr/bin/env bash
# Every studies/*.sh answers --help with its header comment, without the comment marks and without
# a line of its code, and exits 0. (Each printed a fixed range of its own lines: after a header
# grew or shrank, some printed `set -euo pipefail` and the first assignments, or cut the usage.)
# Usage: bench_help_test.sh SOURCE_DIR
set -u
src=$(cd "$1" && pwd)
fail=0
for script in "$src"/studies/*.sh; do
  name=$(basename "$script")
  out=$(cd /tmp && bash "$script" --help 2>&1)
  rc=$?
  header=$(sed -n '2,/^[^#]/p' "$script" | grep '^#' | sed 's/^# \{0,1\}//')
  if [[ $rc != 0 ]]; then
    echo "FAIL: $name --help exited $rc"; fail=1
  elif [[ "$out" != "$header" ]]; then
    echo "FAIL: $name --help did not print its header comment, and only it:"; diff <(echo "$header") <(echo "$out") | head -5
    fail=1
  elif grep -qE '^(set -|root=|#)' <<<"$out" || ! grep -q 'Usage\|usage\|Example' <<<"$out"; then
    echo "FAIL: $name --help printed code or comment marks, or no usage:"; head -3 <<<"$out"; fail=1
  fi
done
[[ $fail == 0 ]] && echo "every bench script's --help is its header"
exit $fail
