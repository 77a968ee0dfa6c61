#!/usr/bin/env bash
# Runs the main job: bootstrap (install + build), then mlbench-run on a jobs
# file (default configs/fast.json). Every argument goes to mlbench-run, e.g.
#   ./run.sh --jobs baselines.json --repeat-suite 10
#   ./run.sh --name toy_reg --dry
# Environment: BASE (default: the repository), OUTPUT_DIRECTORY (default
# $BASE/output), DATA_DIRECTORY (default $BASE/data), MLBENCH_BUILD_DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh"
build="${MLBENCH_BUILD_DIR:-$root/build}"
base="${BASE:-$root}"
export OUTPUT_DIRECTORY="${OUTPUT_DIRECTORY:-$base/output}"
export DATA_DIRECTORY="${DATA_DIRECTORY:-$base/data}"
jobs=()
for a in "$@"; do
  if [[ "$a" == --jobs || "$a" == --jobs=* ]]; then jobs=(); break; fi
  jobs=(--jobs "$root/configs/fast.json")
done
(($# == 0)) && jobs=(--jobs "$root/configs/fast.json")
exec "$build/bin/mlbench-run" "${jobs[@]}" "$@"
