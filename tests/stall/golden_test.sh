#!/usr/bin/env bash
# Golden output of mlbench-stall's model: a finished analysis of the loader
# (tests/fixtures/stall_golden/analysis: its runs' reports and runs.json, paths scrubbed) is
# modelled again with --reanalyze, which measures nothing, and its console summary and
# stall.json are compared byte for byte with tests/fixtures/stall_golden/expected. A change in
# the split, the what-if, the ranges, the verdict or the advice shows here as a diff.
# Usage: golden_test.sh MLBENCH_STALL SOURCE_DIR
#   MLBENCH_UPDATE_GOLDEN=1 golden_test.sh ...   rewrites the expected files (review the diff).
set -u
bin=$(realpath "$1")
fixture=$(cd "$2/tests/fixtures/stall_golden" && pwd)
source "$2/tests/support/golden.sh"
expected="$fixture/expected"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cp -r "$fixture/analysis" "$out/analysis"
(cd "$out" && "$bin" --reanalyze analysis --out model >"$out/console.txt" 2>&1)
echo "exit $?" >>"$out/console.txt"

fail=0
for f in console.txt model/stall.json; do
  want=$(basename "$f")
  if [[ ! -f "$out/$f" ]]; then
    echo "FAIL: mlbench-stall wrote no $f"; cat "$out/console.txt"; fail=1; continue
  fi
  golden_check "$out/$f" "$expected/$want" || fail=1
done
[[ $fail == 0 ]] && echo "the console summary and stall.json match their golden files"
exit $fail
