#!/usr/bin/env bash
# Builds mlbench (installing what is missing) and runs every test through ctest.
# Extra arguments go to ctest, e.g. ./test.sh -L unit
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh"
cd "${MLBENCH_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
