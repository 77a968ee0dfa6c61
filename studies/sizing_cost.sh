#!/usr/bin/env bash
# What sizing runs by their noise costs (docs/stall.md, "How runs are sized"): the wall time of
# mlbench-stall's default analysis of `loader --workers 2 --batch-size 64` over --data, runs sized
# by their noise (the default), against the same analysis with fixed runs (--target-noise 0), in
# --pairs alternated pairs (sized first, then fixed), so that a host whose speed drifts over
# minutes weighs on both alike. Prints each pair's wall times and their ratio, then the ratios'
# median [min-max] and each sized analysis's closing `sized:` line. The dataset is read as it is
# (in the page cache after the first analysis when it fits in RAM): the cost of sizing is in the
# runs' count and length, not in the disk.
# Usage: studies/sizing_cost.sh --data DIR [--pairs 3] [--out DIR] [-- EXTRA mlbench-stall FLAGS]
# Env: MLBENCH_BUILD_DIR (default build): needs bin/mlbench-stall and benchmarks/loader.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data=""; pairs=3; out=""; extra=()
while (($#)); do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "sizing_cost.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$data" && -d "$data" ]] || { echo "sizing_cost.sh: error: --data DIR (an ImageFolder) is required" >&2; exit 2; }
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "sizing_cost.sh: error: --pairs takes a positive integer, got '$pairs'" >&2; exit 2; }
for exe in "$build/bin/mlbench-stall" "$build/benchmarks/loader"; do
  [[ -x "$exe" ]] || { echo "sizing_cost.sh: error: $exe is missing (build it, or set MLBENCH_BUILD_DIR)" >&2; exit 2; }
done
out="${out:-/tmp/sizing-cost-$(basename "$(dirname "$data")")}"
mkdir -p "$out"
echo "# $data; $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
analysis() {  # LABEL [FLAGS...]: prints the wall time in seconds
  local label="$1"; shift
  rm -rf "${out:?}/$label"
  local t0 t1
  t0=$(date +%s.%N)
  "$build/bin/mlbench-stall" --bench loader --bench-dir "$build/benchmarks" --data "$data" --out "$out/$label" \
    "$@" ${extra[@]+"${extra[@]}"} -- --workers 2 --batch-size 64 > "$out/$label.log" 2>&1 ||
    { echo "sizing_cost.sh: error: mlbench-stall failed (see $out/$label.log)" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'
}
ratios=()
echo "| pair | sized (s) | fixed (s) | ratio |"
echo "|---|---|---|---|"
for ((i = 1; i <= pairs; ++i)); do
  echo "pair $i of $pairs ..." >&2
  sized=$(analysis "sized-$i")
  fixed=$(analysis "fixed-$i" --target-noise 0)
  r=$(awk -v a="$sized" -v b="$fixed" 'BEGIN { printf "%.2f", a / b }')
  ratios+=("$r")
  echo "| $i | $sized | $fixed | x$r |"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "ratio: median x%s [x%s-x%s] of %d pairs\n", v[int((NR + 1) / 2)], v[1], v[NR], NR }'
for ((i = 1; i <= pairs; ++i)); do grep -h '^sized:' "$out/sized-$i.log" | sed "s/^/pair $i: /" || true; done
