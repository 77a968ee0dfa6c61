#!/usr/bin/env bash
# The job what-if against held-out runs (docs/performance.md, "Job what-if"; docs/stall.md,
# "CPUs per rank and the job's what-if"): mlbench-stall --exec on a real 2-rank DDP job,
# tests/stall/exec/ddp_imagefolder.py (mp.spawn, Gloo, an ImageFolder of photographs, each rank its
# DistributedSampler shard through a DataLoader), --analyses times. Each analysis's model takes the
# synthetic run and the CPU sweep made per rank (cpus-1: each rank on a CPU of its own) and predicts
# the runs it did not use: cold (every read from storage, a cache state) and cached (the ranks
# sharing every CPU unsplit). Prints per analysis each held-out run's measured and predicted job
# samples/s, range and error, and each rank's CPU set in the sweep; then the medians.
# Usage: studies/job_whatif.sh DATA [--analyses 2] [--iterations 20] [--rounds 1] [--batch-size 16] [--workers 1]
#                                    [--out DIR]
# --rounds R: mlbench-stall's --rounds (every run R times, each run's median: the drift between runs).
# DATA: an ImageFolder root (e.g. DATA/real-photos-small/train, DATA made by mlbench-datagen).
# Env: MLBENCH_BUILD_DIR (default build): needs bin/mlbench-stall; /usr/bin/python3 with torch and torchvision.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
[[ "${1:-}" == -h || "${1:-}" == --help ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
data="${1:-}"; shift || true
analyses=2; iterations=20; rounds=1; batch=16; workers=1; out=""
while (($#)); do
  case "$1" in
    --analyses) analyses="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "job_whatif.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -d "$data" ]] || { echo "job_whatif.sh: error: DATA '$data' is not a folder (see --help)" >&2; exit 2; }
[[ -x "$build/bin/mlbench-stall" ]] || { echo "job_whatif.sh: error: no $build/bin/mlbench-stall (build first)" >&2; exit 2; }
if [[ -z "$out" ]]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out" "$out/work"
for a in $(seq 1 "$analyses"); do
  "$build/bin/mlbench-stall" --exec --exec-workdir "$out/work" --data "$data" --out "$out/a$a" \
    --iterations "$iterations" --rounds "$rounds" --cpus 1,2 --target-noise 0 -- \
    /usr/bin/python3 "$root/tests/stall/exec/ddp_imagefolder.py" "$data" --batch-size "$batch" --workers "$workers" \
    > "$out/a$a.log" 2>&1 || { echo "analysis $a failed: $out/a$a.log"; tail -5 "$out/a$a.log"; exit 1; }
  grep -E '^job what-if|^  cpus-|^advice \(job\)' "$out/a$a.log" | sed "s/^/[a$a] /"
done
/usr/bin/python3 - "$out" "$analyses" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = {}
for a in range(1, n + 1):
    j = json.load(open(f"{out}/a{a}/stall.json"))["job_whatif"]
    for s in j["sweep"]:
        print(f"analysis {a}: {s['run']} split={s['split']} ranks' CPUs " + ", ".join(f"rank {r['rank']}: {r['cpus']}" for r in s["ranks"]))
    for h in j["held_out"]:
        rows.setdefault(h["run"], []).append(h)
        print(f"analysis {a}: {h['run']:7} measured {h['measured']:7.1f}/s predicted {h['predicted']:7.1f}/s "
              f"[{h['lo']:.1f}-{h['hi']:.1f}] error {h['error_pct']:+.1f}% {'within' if h['within'] else 'OFF'}")
print("| held out | runs | measured (median) | predicted (median) | error of the medians | each analysis's error | within |")
for run, hs in rows.items():
    m = statistics.median(h["measured"] for h in hs)
    p = statistics.median(h["predicted"] for h in hs)
    print(f"| {run} | {len(hs)} | {m:.1f} [{min(h['measured'] for h in hs):.1f}-{max(h['measured'] for h in hs):.1f}] | {p:.1f} | "
          f"{100 * (m - p) / p:+.1f}% | " + ", ".join(f"{h['error_pct']:+.1f}%" for h in hs) + " | "
          + ", ".join("yes" if h["within"] else "no" for h in hs) + " |")
PY
