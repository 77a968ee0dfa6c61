#!/usr/bin/env bash
# Evictions of files just written, whose pages are still dirty (POSIX_FADV_DONTNEED drops no dirty
# page: it only starts their write-back), one of two evicting codes per call:
#   lib    studies/lib/page_cache.sh (readahead.sh, io_engine.sh set a dataset's page-cache state with
#          it): page_cache_set FILES 0 must leave none of them resident, FILES 0.5 half. (It left a
#          dataset generated seconds before resident: the first "50% cached" round of
#          studies/readahead.sh on a fresh fake-imagenet read every file from memory, fincore 1.000.)
#   probe  probe/mlbench_probe.py's cold opens (MLBENCH_PROBE_COLD_DIR: mlbench-stall --exec's
#          cold runs evict each file as the script opens it): after open() none of a file's pages
#          may be resident. (A script that wrote its data, then trained, read it from memory.)
#   probe-clean  the same cold opens on clean files: evicted without an fdatasync each (a journal
#          commit or disk-cache flush per file, which the cold run measured as fetch).
# Usage: evict_dirty_test.sh SOURCE_DIR lib|probe|probe-clean. Exit 77 (skip), saying why, without fincore or
# without a disk-backed temporary directory (tmpfs keeps every page).
set -u
src=$1 what=$2
command -v fincore >/dev/null || { echo "SKIP: no fincore (util-linux) to check the page cache"; exit 77; }
dir=$(mktemp -d "${MLBENCH_DISK_TMP:-/var/tmp}/mlbench-dirty.XXXXXX") || { echo "SKIP: no temporary directory on a disk"; exit 77; }
trap 'rm -rf "$dir"' EXIT
if [[ "$(stat -f -c %T "$dir")" == tmpfs ]]; then
  echo "SKIP: $dir is on tmpfs (no disk to evict to)"
  exit 77
fi
case "$what" in
lib)
  for i in 1 2 3 4 5 6 7 8; do
    head -c 4M /dev/urandom > "$dir/f$i"
  done
  ls -d "$dir"/f* > "$dir/list"
  source "$src/studies/lib/page_cache.sh"
  fail=0
  page_cache_set "$dir/list" 0
  got=$(page_cache_fraction "$dir/list")
  if [[ "$got" != 0.000 ]]; then
    echo "FAIL: page_cache_set FILES 0 on just-written files left $got of their pages resident (want 0.000)"
    fail=1
  fi
  page_cache_set "$dir/list" 0.5
  got=$(page_cache_fraction "$dir/list")
  if [[ "$got" != 0.500 ]]; then
    echo "FAIL: page_cache_set FILES 0.5 left $got of the pages resident (want 0.500: 4 of 8 equal files)"
    fail=1
  fi
  [[ $fail == 0 ]] && echo "page_cache_set: 0 and 0.5 of 8 just-written files as asked"
  exit $fail
  ;;
probe)
  # Not exec: the EXIT trap removes the 32 MB written here.
  /usr/bin/python3 - "$src/probe" "$dir" <<'PY'
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
  exit $?
  ;;
probe-clean)
  # The cold open of a clean file must not fdatasync it: on ext4 that is a journal commit or a
  # disk-cache flush per file (57-67 us a file, paid at every cold open: the cold run measured it
  # as fetch). The pages still go: none resident after open().
  /usr/bin/python3 - "$src/probe" "$dir" <<'PY'
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import mlbench_probe
folder = sys.argv[2]
files = []
for i in range(8):
    path = os.path.join(folder, f"c{i}")
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))
    files.append(path)
os.sync()  # clean, then read back into the page cache
for path in files:
    with open(path, "rb") as f:
        f.read()
calls = []
real = os.fdatasync
os.fdatasync = lambda fd: (calls.append(fd), real(fd))[1]
mlbench_probe._evict_before_open(folder)
resident = []
for path in files:
    with open(path, "rb"):
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", path], capture_output=True, text=True, check=True)
        resident.append(int(out.stdout.split()[0]))
os.fdatasync = real
fail = False
if calls:
    print(f"FAIL: the probe's cold open called fdatasync {len(calls)} times on 8 clean files (want 0: "
          "sync_file_range writes dirty pages back without a journal commit or flush)")
    fail = True
if any(resident):
    print(f"FAIL: after open() under MLBENCH_PROBE_COLD_DIR, {sum(r > 0 for r in resident)} of 8 clean files "
          "still had pages resident")
    fail = True
if fail:
    sys.exit(1)
print("the probe's cold open: 8 clean files evicted, no fdatasync")
PY
  exit $?
  ;;
*) echo "evict_dirty_test.sh: error: the second argument must be lib, probe or probe-clean, not $what" >&2; exit 2 ;;
esac
