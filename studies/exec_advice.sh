#!/usr/bin/env bash
# What mlbench-stall --exec tells a user of a public-style training script (docs/stall.md,
# "Answers you can act on"): tests/stall/exec/train_imagefolder.py with torchvision's resnet18
# (untrained), 2 DataLoader workers, 224-pixel crops, over 256 crops of real photographs
# (mlbench-datagen real-photos, ~35 KB each) on the local disk. Storage serves far more than the
# script reads, so the truth is no fetch stall and no cache remedy. Runs --analyses analyses on a
# quiet machine, then as many with a busy loop on every CPU but one (--load), and prints per
# analysis: the split with its noise, storage against the consumer, what the console called the
# fetch share, the verdict's bound and the remedy named.
# Usage: studies/exec_advice.sh [--analyses 2] [--iterations 12] [--batch-size 16] [--out DIR] [--no-load]
# Env: MLBENCH_BUILD_DIR (default build): needs bin/mlbench-stall and bin/mlbench-datagen;
# /usr/bin/python3 with torch and torchvision (Debian's python3-torch, python3-torchvision).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
analyses=2; iterations=12; batch=16; out=""; load=1
while (($#)); do
  case "$1" in
    --analyses) analyses="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-load) load=0; shift ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "exec_advice.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$analyses" "$iterations" "$batch"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "exec_advice.sh: error: --analyses, --iterations and --batch-size take a positive integer, got '$n'" >&2; exit 2; }
done
for exe in mlbench-stall mlbench-datagen; do
  [[ -x "$build/bin/$exe" ]] || { echo "exec_advice.sh: error: no executable $build/bin/$exe (build first)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null ||
  { echo "exec_advice.sh: error: /usr/bin/python3 cannot import torch and torchvision (apt-get install python3-torchvision)" >&2; exit 2; }
if [[ -z "$out" ]]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
data="$out/photos"
"$build/bin/mlbench-datagen" real-photos --out "$data" --classes 2 --per-class 128 --val-per-class 0 -q
sync
loop_pids=()
stop_load() { for p in "${loop_pids[@]}"; do kill "$p" 2>/dev/null || true; done; loop_pids=(); }
trap 'stop_load' EXIT
summary() {  # $1: stall.json, $2: condition
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); s = j["split"]; n = j["noise_pp"]; r = j["rates"]; f = j["findings"]["fetch"]
rec = j["recommendation"]; remedy = rec["remedy"]["name"] if rec["remedy"] else "none"
print(f"| {sys.argv[2]} | {s['compute_pct']:.1f} / {s['prep_pct']:.1f} (±{n['prep']:.1f}) / {s['fetch_pct']:.1f} (±{n['fetch']:.1f}) "
      f"| {r['S_model']:,.0f} / {r['F_obs']:.1f} ({r['S_model'] / r['F_obs']:,.0f}x) "
      f"| {'fetch stall' if f['claimed'] else 'no measurable fetch stall'} | {rec['bound']} | {remedy} |")
EOF
}
echo "| condition | split compute / prep / fetch, % | storage S / consumer F, samples/s | fetch share | bound | remedy named |"
echo "|---|---|---|---|---|---|"
conditions=(quiet); ((load)) && conditions+=(loaded)
for cond in "${conditions[@]}"; do
  if [[ "$cond" == loaded ]]; then
    cpus=$(nproc)
    for ((c = 1; c < cpus; ++c)); do taskset -c "$c" sh -c 'while :; do :; done' & loop_pids+=($!); done
  fi
  for ((a = 1; a <= analyses; ++a)); do
    "$build/bin/mlbench-stall" --exec --data "$data/train" --out "$out/$cond-$a" --iterations "$iterations" -- \
      /usr/bin/python3 "$root/tests/stall/exec/train_imagefolder.py" "$data/train" --model resnet18 --workers 2 \
      --size 224 --batch-size "$batch" >"$out/$cond-$a.log" 2>&1 ||
      { echo "exec_advice.sh: error: mlbench-stall failed ($cond, analysis $a): $(tail -1 "$out/$cond-$a.log")" >&2; exit 1; }
    summary "$out/$cond-$a/stall.json" "$cond $a"
  done
  stop_load
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%MZ)"
