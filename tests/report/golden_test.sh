#!/usr/bin/env bash
# Golden output of mlbench-report: the console, CSV, JSON and HTML of a fixed reports tree
# (tests/fixtures/report_golden: 4 runs of toy_reg, loader, cart and a job that fails, written
# by mlbench-run, with a stall analysis of the loader and a targets file), and the console of
# --compare of its last two passes against its first two, are compared byte for byte with the files in
# tests/fixtures/report_golden/expected. A change to what users see shows here as a diff.
# Paths are written as TREE and OUT so the files do not depend on where the test runs.
# Usage: golden_test.sh MLBENCH_REPORT SOURCE_DIR
#   MLBENCH_UPDATE_GOLDEN=1 golden_test.sh ...   rewrites the expected files (review the diff).
set -u
bin=$(realpath "$1")
fixture=$(cd "$2/tests/fixtures/report_golden" && pwd)
source "$2/tests/support/golden.sh"
expected="$fixture/expected"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
tree="$out/tree"
cp -r "$fixture/tree" "$tree"
cp "$fixture/targets.json" "$out/targets.json"

normalise() { sed -e "s#$tree#TREE#g" -e "s#$out#OUT#g" "$1"; }

(cd "$out" && "$bin" --reports "$tree" --color never --targets "$out/targets.json" \
  --csv "$out/report.csv" --json "$out/report.json" --html "$out/report.html" >"$out/console.raw" 2>&1)
echo "exit $?" >>"$out/console.raw"
# --compare: passes R0, R1 against R2, R3 as two trees of 2 runs.
mkdir -p "$out/early" "$out/late"
cp -r "$tree/R0" "$tree/R1" "$out/early/" && cp -r "$tree/R2" "$out/late/R0" && cp -r "$tree/R3" "$out/late/R1"
(cd "$out" && "$bin" --reports "$out/late" --compare "$out/early" --color never --min-runs 2 >"$out/compare.raw" 2>&1)
echo "exit $?" >>"$out/compare.raw"

fail=0
for pair in console.txt:console.raw compare.txt:compare.raw report.csv:report.csv report.json:report.json \
  report.html:report.html; do
  want=${pair%%:*}
  got="$out/${pair##*:}"
  if [[ ! -f "$got" ]]; then
    echo "FAIL: mlbench-report wrote no ${pair##*:}"; fail=1; continue
  fi
  normalise "$got" >"$out/$want.normalised"
  golden_check "$out/$want.normalised" "$expected/$want" || fail=1
done
[[ $fail == 0 ]] && echo "console, compare, CSV, JSON and HTML match their golden files"
exit $fail
