#!/usr/bin/env bash
# Items/s of one benchmark on several BLAS libraries and slot sizes, alternating:
# each round runs every (BLAS, slot) pair once, in turn, so a shared machine's drift
# spreads over all of them. A BLAS is chosen per run with LD_LIBRARY_PATH (the dynamic
# loader looks there before the alternatives link), so the machine's setting is untouched.
# A slot of N CPUs is `taskset -c <first N CPUs> ... --cpu-cores N`, as mlbench-run makes.
# Prints every run, then per (BLAS, slot) the median and min-max items/s and the paired
# ratio to the first BLAS of the list (median, min-max over rounds).
# Usage: studies/compare_blas.sh [--rounds 3] [--blas LIST] [--cpus LIST] [--bin DIR]
#                              (--job NAME [--jobs FILE] | -- BENCH [ARGS...])
#   --blas: Debian folders under /usr/lib/<arch>, comma-separated
#           (default blas,openblas-openmp,openblas-pthread; "blas" is the reference BLAS)
#   --cpus: slot sizes, comma-separated (default 1,2)
#   --job: take BENCH and ARGS from that entry of --jobs (default configs/fast.json),
#          $DATA_DIRECTORY expanded (default ./data)
#   --bin: the folder of benchmark executables (default build/benchmarks)
# Example: studies/compare_blas.sh --rounds 5 --cpus 1 --job wlm
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3; blas="blas,openblas-openmp,openblas-pthread"; cpus="1,2"; bin="$root/build/benchmarks"
job=""; jobs="$root/configs/fast.json"
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --blas) blas="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --job) job="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "compare_blas.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "compare_blas.sh: error: --rounds must be a positive integer (got $rounds)" >&2; exit 2
fi
if [[ -n "$job" ]]; then
  export DATA_DIRECTORY="${DATA_DIRECTORY:-$root/data}"
  mapfile -t cmd < <(python3 - "$jobs" "$job" <<'PY'
import json, os, sys
entries = [e for e in json.load(open(sys.argv[1])) if e["name"] == sys.argv[2]]
if not entries: sys.exit(f"compare_blas.sh: error: no job {sys.argv[2]} in {sys.argv[1]}")
e = entries[0]
print(e["cmd"])
for k, v in e.get("args", {}).items():
    print(k)
    if v != "": print(os.path.expandvars(str(v)))
PY
)
  set -- "${cmd[@]}"
fi
(($# >= 1)) || { echo "compare_blas.sh: error: --job NAME or -- BENCH [ARGS...] is required (see --help)" >&2; exit 2; }
bench="$1"; shift
[[ -x "$bin/$bench" ]] || { echo "compare_blas.sh: error: no executable $bin/$bench (--bin)" >&2; exit 2; }
source "$root/studies/lib/blas.sh"
IFS=, read -ra blas_list <<<"$blas"
IFS=, read -ra cpu_list <<<"$cpus"
blas_check compare_blas.sh "${blas_list[@]}"
mapfile -t allowed < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: >"$tmp/results"
echo "compare_blas.sh: $bench $* | rounds $rounds | $(uptime | sed 's/.*load/load/')"
for ((r = 1; r <= rounds; r++)); do
  for n in "${cpu_list[@]}"; do
    ((n <= ${#allowed[@]})) || { echo "compare_blas.sh: error: a slot of $n CPUs needs $n allowed CPUs" >&2; exit 2; }
    set_cpus="$(IFS=,; echo "${allowed[*]:0:n}")"
    for b in "${blas_list[@]}"; do
      out="$tmp/run"; rm -rf "$out"; mkdir -p "$out"
      libs="$(blas_library_path "$b")"
      if ! LD_LIBRARY_PATH="$libs" taskset -c "$set_cpus" "$bin/$bench" "$@" --cpu-cores "$n" --report "$out" \
          >"$tmp/log" 2>&1; then
        echo "compare_blas.sh: error: $bench failed on $b with $n CPUs; its output:" >&2; tail -5 "$tmp/log" >&2; exit 1
      fi
      read -r items loaded threads < <(python3 -c '
import glob, json, sys
j = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
b = j["machine"].get("blas", {})
print(j["train_item"]["avg"], b.get("name", "?"), b.get("threads", "?"))' "$out")
      echo "$r $n $b $items" >>"$tmp/results"
      printf 'round %d/%d  cpus %d  %-18s %12.2f items/s  (loaded %s, %s threads)\n' "$r" "$rounds" "$n" "$b" "$items" \
        "$loaded" "$threads"
    done
  done
done
python3 - "$tmp/results" "$bench" "${blas_list[0]}" <<'PY'
import collections, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(dict)
for r, n, b, v in rows: by[(int(n), b)][int(r)] = float(v)
print(f"{sys.argv[2]}: median items/s (min-max), ratio to {sys.argv[3]} paired by round (median, min-max)")
for (n, b), vals in sorted(by.items(), key=lambda kv: (kv[0][0], list(by).index(kv[0]))):
    v = list(vals.values())
    base = by.get((n, sys.argv[3]), {})
    ratios = [vals[r] / base[r] for r in vals if r in base]
    print(f"  cpus {n}  {b:<18} {statistics.median(v):12.2f} ({min(v):.2f}-{max(v):.2f})"
          f"  x{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
PY
