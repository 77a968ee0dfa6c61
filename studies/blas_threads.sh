#!/usr/bin/env bash
# Does the BLAS keep to its slot? Runs one job of a jobs file through mlbench-run with
# --slots N (default 2: two slots of 1 CPU on a 2-CPU machine, instances side by side),
# with the BLAS chosen by LD_LIBRARY_PATH, samples every instance's threads every 0.2 s
# (all threads, and those running at once: state R), and prints per instance the most
# threads seen, the most running at once, its CPU set, machine.blas from its report, and
# its CPU time / wall time (resources.cpu_seconds / runner.wall_seconds; at most the
# slot's CPU count when nothing oversubscribes).
# Usage: studies/blas_threads.sh [--blas DIR] [--slots 2] [--build DIR] [--jobs FILE] JOB
#   --blas: a Debian folder under /usr/lib/<arch> (default: the machine's libblas.so.3)
# Example: studies/blas_threads.sh --blas openblas-pthread wlm
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
blas=""; slots=2; build="$root/build"; jobs="$root/configs/fast.json"
while (($#)); do
  case "$1" in
    --blas) blas="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "blas_threads.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# == 1)) || { echo "blas_threads.sh: error: one JOB name is required (see --help)" >&2; exit 2; }
job="$1"
source "$root/studies/lib/blas.sh"
libs=""
if [[ -n "$blas" ]]; then
  blas_check blas_threads.sh "$blas"
  libs="$(blas_library_path "$blas")"
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
LD_LIBRARY_PATH="$libs" "$build/bin/mlbench-run" --jobs "$jobs" --name "$job" --slots "$slots" --outdir "$tmp/out" \
  >"$tmp/run.log" 2>&1 &
runner=$!
: >"$tmp/samples"
while kill -0 "$runner" 2>/dev/null; do
  for pid in $(pgrep -P "$runner" 2>/dev/null || true); do
    total=0; running=0
    for st in /proc/"$pid"/task/*/stat; do
      read -r s < "$st" 2>/dev/null || continue
      total=$((total + 1)); s="${s##*) }"; [[ "${s%% *}" == R ]] && running=$((running + 1))
    done
    echo "$pid $total $running" >>"$tmp/samples"
  done
  sleep 0.2
done
wait "$runner" || { echo "blas_threads.sh: error: mlbench-run failed; its output:" >&2; tail -5 "$tmp/run.log" >&2; exit 1; }
python3 - "$tmp/samples" "$tmp/out" "$job" "${blas:-system}" "$slots" <<'PY'
import collections, glob, json, sys
most = collections.defaultdict(lambda: [0, 0])
for line in open(sys.argv[1]):
    pid, total, running = map(int, line.split())
    most[pid][0] = max(most[pid][0], total); most[pid][1] = max(most[pid][1], running)
print(f"{sys.argv[3]} with {sys.argv[5]} slots, BLAS {sys.argv[4]}: most threads / most running at once per instance:",
      ", ".join(f"{t}/{r}" for t, r in most.values()) or "no samples")
for f in sorted(glob.glob(sys.argv[2] + "/**/*.json", recursive=True)):
    j = json.load(open(f))
    if "runner" not in j: continue
    b = j.get("machine", {}).get("blas", {})
    cpu = (j.get("resources") or {}).get("cpu_seconds"); wall = j["runner"].get("wall_seconds")
    ratio = f"{cpu / wall:.2f}" if cpu is not None and wall else "n/a"
    print(f"  slot {j['runner'].get('slot')} cpus {j['runner'].get('cpus')}: blas {b.get('name', '?')} "
          f"({b.get('threads', '?')} threads), cpu/wall {ratio}, {j['train_item']['avg']:.2f} items/s")
PY
