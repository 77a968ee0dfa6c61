#!/usr/bin/env bash
# scaling.sh: the scaling benchmark with 1 and N local ranks on this machine, R
# rounds; prints per round throughput(1) (rank 0 alone, its share of the CPUs),
# throughput(N), the efficiency throughput(N) / (N x throughput(1)), the share of
# the iteration spent in allreduce not hidden by backward (rank 0), and whether the
# ranks ended with the same weights; then median and min-max of each over the rounds.
#
# Usage: studies/scaling.sh [--build DIR] [--data DIR] [--ranks N] [--cpu-cores C] [--rounds R] [-- extra scaling flags]
# Defaults: build/, $DATA_DIRECTORY/fake-imagenet-small/train (data/ when unset),
# 2 ranks, 2 CPUs (1 thread per rank), 3 rounds; the model and sizes of configs/fast.json's job.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
data="${DATA_DIRECTORY:-$root/data}/fake-imagenet-small/train"
ranks=2
cores=2
rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --cpu-cores) cores=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bin="$build/benchmarks/scaling"
[[ -x "$bin" ]] || { echo "scaling.sh: $bin not built (cmake --build build --target scaling)" >&2; exit 1; }
[[ -d "$data" ]] || { echo "scaling.sh: no dataset at $data (build/bin/mlbench-datagen ensure fake-imagenet-small --root data)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %12s %12s %10s %12s %8s\n' round "thru(1)/s" "thru($ranks)/s" efficiency "allreduce%" in_sync
for r in $(seq 1 "$rounds"); do
  out="$tmp/r$r"
  "$bin" --no-cuda --data "$data" --ranks "$ranks" --cpu-cores "$cores" --arch resnet18 --image-size 64 --classes 10 \
    --batch-size 16 --workers 1 --repeat 6 --number 3 --report "$out" "$@" >"$tmp/log$r" 2>&1 ||
    { echo "scaling.sh: round $r failed:"; tail -3 "$tmp/log$r"; exit 1; }
  /usr/bin/python3 - "$out" "$r" <<'PY'
import glob, json, sys
j = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
m = j["metrics"]
share = 100 * m["allreduce_exposed_s"] / j["stall"]["iteration"]["avg"] if m.get("allreduce_exposed_s") is not None else float("nan")
print("%-6s %12.1f %12.1f %10.3f %12.1f %8s" % (sys.argv[2], m.get("throughput_1") or float("nan"),
      j["train_item"]["avg"], m.get("scaling_efficiency") or float("nan"), share,
      (m.get("weights") or {}).get("in_sync")))
PY
done | tee "$tmp/table"
/usr/bin/python3 - "$tmp/table" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for k, name in ((1, "thru(1)"), (2, "thru(N)"), (3, "efficiency"), (4, "allreduce%")):
    v = [float(r[k]) for r in rows]
    print("%-11s median %.3f (min %.3f, max %.3f) over %d rounds" % (name, statistics.median(v), min(v), max(v), len(v)))
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
