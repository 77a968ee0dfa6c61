#!/usr/bin/env bash
# python/mlbench_probe.py's cold reads (MLBENCH_PROBE_COLD_DIR: mlbench-stall --exec's cold runs
# evict each file from the page cache as the script opens it) on files just written, whose pages
# are still dirty: after open() none of a file's pages may be resident. (It used to leave them:
# POSIX_FADV_DONTNEED drops no dirty page, so a script that writes its data and then trains, or a
# dataset generated seconds before, read from memory in the "cold" run.)
# Usage: probe_cold_dirty_test.sh SOURCE_DIR. Exit 77 (skip), saying why, without fincore or
# without a disk-backed temporary directory (tmpfs keeps every page).
set -u
src=$1
command -v fincore >/dev/null || { echo "SKIP: no fincore (util-linux) to check the page cache"; exit 77; }
dir=$(mktemp -d "${MLBENCH_DISK_TMP:-/var/tmp}/mlbench-probe-dirty.XXXXXX") || { echo "SKIP: no temporary directory on a disk"; exit 77; }
trap 'rm -rf "$dir"' EXIT
if [[ "$(stat -f -c %T "$dir")" == tmpfs ]]; then
  echo "SKIP: $dir is on tmpfs (no disk to evict to)"
  exit 77
fi
/usr/bin/python3 - "$src/python" "$dir" <<'PY'
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import mlbench_probe
folder = sys.argv[2]
files = []
for i in range(8):
    path = os.path.join(folder, f"f{i}")
    with open(path, "wb") as f:
        f.write(os.urandom(4 << 20))
    files.append(path)
mlbench_probe._evict_before_open(folder)
resident = []
for path in files:
    with open(path, "rb"):  # evicted as it opens; nothing read yet
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", path], capture_output=True, text=True, check=True)
        resident.append(int(out.stdout.split()[0]))
if any(resident):
    print(f"FAIL: after open() under MLBENCH_PROBE_COLD_DIR, {sum(r > 0 for r in resident)} of 8 just-written "
          f"files still had pages resident ({sum(resident)} bytes)")
    sys.exit(1)
print("the probe's cold open: none of 8 just-written files resident")
PY
