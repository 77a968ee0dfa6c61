#!/usr/bin/env bash
# A whole jobs file on several BLAS libraries, passes alternating: pass k runs the suite
# once per BLAS (chosen with LD_LIBRARY_PATH, so the machine's alternatives link is left
# alone) into OUT/<blas>/R<k>, so every BLAS gets a reports tree that mlbench-report reads
# and a shared machine's drift spreads over all of them. Then, e.g.:
#   build/bin/mlbench-report --reports OUT/openblas-openmp --name fast --compare OUT/blas --min-runs 2
# Usage: studies/blas_suite.sh --out DIR [--passes 2] [--blas blas,openblas-openmp] [--build DIR]
#                            [-- MLBENCH-RUN ARGS...]   (default: --jobs configs/fast.json)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=""; passes=2; blas="blas,openblas-openmp"; build="$root/build"
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --passes) passes="$2"; shift 2 ;;
    --blas) blas="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "blas_suite.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "blas_suite.sh: error: --out DIR is required (see --help)" >&2; exit 2; }
[[ "$passes" =~ ^[1-9][0-9]*$ ]] || { echo "blas_suite.sh: error: --passes must be a positive integer" >&2; exit 2; }
(($#)) || set -- --jobs "$root/configs/fast.json"
source "$root/studies/lib/blas.sh"
IFS=, read -ra blas_list <<<"$blas"
blas_check blas_suite.sh "${blas_list[@]}"
for ((k = 0; k < passes; k++)); do
  for b in "${blas_list[@]}"; do
    libs="$(blas_library_path "$b")"
    echo "blas_suite.sh: pass $((k + 1))/$passes, $b | $(uptime | sed 's/.*load/load/')"
    LD_LIBRARY_PATH="$libs" "$build/bin/mlbench-run" "$@" --outdir "$out/$b/R$k" --uid "$k"
  done
done
