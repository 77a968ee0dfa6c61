#!/usr/bin/env bash
# A/B throughput of one benchmark built twice (e.g. before and after a change):
# runs A and B in turn, A B A B ..., --rounds times each, reads train_item.avg
# (items/s) from each run's report and prints every round, the median and
# min-max of each side, and the paired ratio B/A per round (median, min-max).
# Pairing by round keeps a shared machine's drift out of the ratio.
# Usage: studies/paired_items.sh --a DIR --b DIR [--rounds 5] -- BENCH [ARGS...]
#   DIR: a folder holding the benchmark executable (build/benchmarks).
# Example: studies/paired_items.sh --a /tmp/before/benchmarks --b build/benchmarks --rounds 7 \
#            -- vae --data data/mnist-small --batch-size 128 --repeat 10 --number 10
set -euo pipefail
a=""; b=""; rounds=5
while (($#)); do
  case "$1" in
    --a) a="$2"; shift 2 ;;
    --b) b="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "paired_items.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$a" || -z "$b" || $# -lt 1 ]]; then
  echo "paired_items.sh: error: --a DIR, --b DIR and a benchmark are required (see --help)" >&2; exit 2
fi
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "paired_items.sh: error: --rounds must be a positive integer (got $rounds)" >&2; exit 2
fi
bench="$1"; shift
for dir in "$a" "$b"; do
  [[ -x "$dir/$bench" ]] || { echo "paired_items.sh: error: no executable $dir/$bench" >&2; exit 2; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run_side() { local dir="$1" out="$2"; shift 2; rm -rf "$out"; mkdir -p "$out"
  "$dir/$bench" "$@" --report "$out" >"$out.log" 2>&1 || {
    echo "paired_items.sh: error: $dir/$bench failed; its output:" >&2; tail -5 "$out.log" >&2; exit 1; }
  python3 -c 'import json,sys,glob; print(json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["train_item"]["avg"])' "$out"
}

: >"$tmp/pairs"
for ((r = 1; r <= rounds; r++)); do
  va=$(run_side "$a" "$tmp/a" "$@")
  vb=$(run_side "$b" "$tmp/b" "$@")
  echo "$va $vb" >>"$tmp/pairs"
  printf 'round %d/%d: A %.1f  B %.1f items/s\n' "$r" "$rounds" "$va" "$vb"
done
python3 - "$tmp/pairs" "$bench" <<'EOF'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
a = [p[0] for p in pairs]; b = [p[1] for p in pairs]; r = [y / x for x, y in pairs]
def sd_pct(v): return 100 * statistics.pstdev(v) / statistics.mean(v) if len(v) > 1 else 0.0
print(f"{sys.argv[2]}: A median {statistics.median(a):.1f} items/s (min-max {min(a):.1f}-{max(a):.1f}, sd {sd_pct(a):.1f}%)")
print(f"{sys.argv[2]}: B median {statistics.median(b):.1f} items/s (min-max {min(b):.1f}-{max(b):.1f}, sd {sd_pct(b):.1f}%)")
print(f"{sys.argv[2]}: B/A paired ratio median {statistics.median(r):.3f} (min-max {min(r):.3f}-{max(r):.3f}, {len(r)} rounds)")
EOF
