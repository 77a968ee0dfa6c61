#!/usr/bin/env bash
# Runs the main job: bootstrap (install + build), then the benchmarks of the
# default jobs file. Until mlbench-run lands this runs toy_reg directly.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh"
build="${MLBENCH_BUILD_DIR:-$root/build}"
out="${OUTPUT_DIRECTORY:-${BASE:-$root}/output}"
exec "$build/benchmarks/toy_reg" --report "$out" "$@"
