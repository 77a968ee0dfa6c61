#!/usr/bin/env bash
# What the results store adds to a run (docs/performance.md, "Results store overhead"):
# mlbench-run on N no-op instances (fakebench: one empty iteration, writes its report; one
# `student` job over N slots), with the default store (<outdir>/results.db: the run, the
# machine, each instance as its report lands, the run's end) and with --no-store, alternated
# R times; the difference is the store's cost. Then the same reports imported into a fresh
# store (mlbench-report --import: the same writes without the run). A fast-suite pass has 17
# instances on a 2-CPU machine (one slot); its wall time comes from a summary.txt ("Total
# Time") when one is given, and the store's share of it is printed.
#
# Usage: studies/store_overhead.sh [BUILD_DIR] [R] [N] [SUMMARY_TXT]   (default: build, 7, 17)
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
reps="${2:-7}"
n="${3:-17}"
summary="${4:-}"
run="$build/bin/mlbench-run"
report="$build/bin/mlbench-report"
fake="$build/tests/fixtures/fakebench"
for f in "$run" "$report" "$fake"; do
  [[ -x "$f" ]] || { echo "store_overhead: error: $f not built" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '[{"name": "noop", "cmd": "%s", "args": {}, "cgroup": "student"}]\n' "$fake" >"$tmp/jobs.json"

now() { date +%s.%N; }
spread() {  # "median (min..max)" of the numbers on stdin, 1 decimal
  sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f (%.1f..%.1f)", m, a[1], a[NR]}'
}
runner() {  # seconds of one mlbench-run of N instances with `flags`
  local flags=$1 out="$tmp/runner" t0 t1
  rm -rf "$out"
  t0=$(now)
  "$run" --jobs "$tmp/jobs.json" --slots "$n" --outdir "$out" --no-cgroup $flags >/dev/null 2>&1 || {
    echo "store_overhead: error: mlbench-run failed" >&2; exit 1; }
  t1=$(now)
  echo "$t1 - $t0" | bc -l
}

echo "# $n instances a run, $reps rounds (no store, store, alternated); load: $(cut -d' ' -f1-3 /proc/loadavg)"
with=() without=() diff=() import=()
for ((k = 0; k < reps; k++)); do
  a=$(runner "--no-store")
  b=$(runner "")
  if command -v sqlite3 >/dev/null; then
    rows=$(sqlite3 "$tmp/runner/results.db" "SELECT count(*) FROM instances")
    [[ "$rows" == "$n" ]] || { echo "store_overhead: error: the store holds $rows instances, not $n" >&2; exit 1; }
  fi
  without+=("$a") with+=("$b") diff+=("$(echo "($b - $a) * 1000" | bc -l)")
  t0=$(now)
  "$report" --store "$tmp/imported.db" --import "$tmp/runner" >/dev/null 2>&1 || {
    echo "store_overhead: error: mlbench-report --import failed" >&2; exit 1; }
  t1=$(now)
  rm -f "$tmp"/imported.db*
  import+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
done
printf 'run without store (ms): %s\n' "$(printf '%s\n' "${without[@]}" | awk '{print $1*1000}' | spread)"
printf 'run with store (ms):    %s\n' "$(printf '%s\n' "${with[@]}" | awk '{print $1*1000}' | spread)"
printf 'store cost of the run (ms, paired): %s\n' "$(printf '%s\n' "${diff[@]}" | spread)"
printf 'import of the same %d reports into a new store (ms, whole command): %s\n' "$n" \
  "$(printf '%s\n' "${import[@]}" | spread)"
if [[ -n "$summary" ]]; then
  total=$(grep -o 'Total Time[^0-9]*[0-9.]*' "$summary" | grep -o '[0-9.]*$' | tail -1)
  unit=$(grep -o 'Total Time.*' "$summary" | tail -1)
  med=$(printf '%s\n' "${diff[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}')
  echo "fast-suite pass: $unit"
  echo "store share of it: $(echo "$med / 1000 / $total * 100" | bc -l | xargs printf '%.3f')%"
fi
