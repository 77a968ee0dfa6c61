#!/usr/bin/env bash
# Split error of mlbench-stall --exec against injected truth (docs/performance.md, "Stall
# split accuracy"): runs the analysis of tests/stall/exec/sleepy_train.py (fetch 30 ms
# per non-resident sample, prep 20 ms per sample, compute 60 ms a step, 2 samples a batch: true
# split 37.5 / 25 / 37.5) --rounds times over 100 files of 16 KiB and prints each round's split,
# its largest error in percentage points, and the median and min-max of that error.
# Usage: studies/exec_split_error.sh [--rounds 5] [--build build] [--iterations 20]
set -euo pipefail
rounds=5; build=build; iterations=20
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "exec_split_error.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
stall="$build/bin/mlbench-stall"
[[ -x "$stall" ]] || { echo "exec_split_error.sh: error: no executable $stall (build mlbench-stall first)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for c in 0 1; do mkdir -p "$tmp/data/c$c"; for i in $(seq 0 49); do head -c 16384 /dev/urandom >"$tmp/data/c$c/f$i.bin"; done; done
sync
errs=()
for r in $(seq 1 "$rounds"); do
  "$stall" --exec --data "$tmp/data" --out "$tmp/out" --iterations "$iterations" --cpus 1 -- /usr/bin/python3 \
    "$repo/tests/stall/exec/sleepy_train.py" "$tmp/data" --batch 2 --prep-ms 20 --fetch-ms 30 --compute-ms 60 \
    >"$tmp/log" 2>&1 || { echo "exec_split_error.sh: error: mlbench-stall failed:" >&2; tail -3 "$tmp/log" >&2; exit 1; }
  e=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["split"]
c,p,f=s["compute_pct"],s["prep_pct"],s["fetch_pct"]; e=max(abs(c-37.5),abs(p-25),abs(f-37.5))
print(f"round: compute {c:.2f}% prep {p:.2f}% fetch {f:.2f}% (truth 37.5/25/37.5), largest error {e:.2f} pp", file=sys.stderr); print(e)' "$tmp/out/stall.json")
  errs+=("$e")
done
python3 -c 'import sys,statistics; e=[float(x) for x in sys.argv[1:]]
print(f"largest share error: median {statistics.median(e):.2f} pp, min-max {min(e):.2f}-{max(e):.2f} pp over {len(e)} analyses")' "${errs[@]}"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
