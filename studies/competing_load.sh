#!/usr/bin/env bash
# competing_load.sh: ./run.sh --repeat-suite P (every fast.json job, or --name's) with a
# competing CPU load started on purpose: a busy loop pinned to one CPU, either over a whole
# pass or for a burst inside one; then mlbench-report over the passes, whose "Unstable"
# lines must name the load (docs/report.md, "Unstable benchmarks"; docs/performance.md,
# "Stable numbers", has the figures).
#
# Usage: studies/competing_load.sh --out DIR [--passes P] [--pass K] [--cpu C]
#                                [--burst-after S --burst-for T] [-- mlbench-run flags]
# Defaults: 3 passes, the loop on CPU 1 over all of pass R2 (the third). With --burst-after S
# --burst-for T it starts S seconds into pass K and runs T seconds. The loop's start and end
# times go to DIR.load.log.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=""
passes=3
pass=2
cpu=1
after=""
burst=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --pass) pass=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --burst-after) after=$2; shift 2 ;;
    --burst-for) burst=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "competing_load.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "competing_load.sh: --out DIR is required (see --help)" >&2; exit 2; }
((pass < passes)) || { echo "competing_load.sh: --pass $pass: the passes are R0..R$((passes - 1))" >&2; exit 2; }
[[ -z "$after" || -n "$burst" ]] || { echo "competing_load.sh: --burst-after needs --burst-for" >&2; exit 2; }
[[ -e "$out" ]] && { echo "competing_load.sh: $out exists; give a new directory" >&2; exit 2; }

loop_pid=""
# The loop and its watcher go with this script (Ctrl-C included).
cleanup() { [[ -n "$loop_pid" ]] && { pkill -P "$loop_pid" 2>/dev/null; kill "$loop_pid" 2>/dev/null; } || true; }
trap cleanup EXIT

(
  while [[ ! -d "$out/R$pass" ]]; do sleep 0.2; done
  if [[ -n "$after" ]]; then
    sleep "$after"
    echo "load on $(date -u +%T.%N) (CPU $cpu, ${burst} s)" >> "$out.load.log"
    taskset -c "$cpu" timeout "$burst" bash -c 'while :; do :; done' || true
  else
    echo "load on $(date -u +%T.%N) (CPU $cpu, pass R$pass)" >> "$out.load.log"
    taskset -c "$cpu" bash -c 'while :; do :; done' &
    busy=$!
    # Until the next pass starts; in the last pass, until the run ends (cleanup below).
    while [[ ! -d "$out/R$((pass + 1))" ]]; do sleep 0.2; done
    kill $busy
  fi
  echo "load off $(date -u +%T.%N)" >> "$out.load.log"
) &
loop_pid=$!

OUTPUT_DIRECTORY="$out" "$root/run.sh" --repeat-suite "$passes" "$@"
if kill -0 "$loop_pid" 2>/dev/null; then
  cleanup
  echo "load off $(date -u +%T.%N) (the run ended)" >> "$out.load.log"
fi
loop_pid=""
"${MLBENCH_BUILD_DIR:-$root/build}/bin/mlbench-report" --reports "$out" --name fast --min-runs "$passes" --gpu-model cpu
cat "$out.load.log"
