#!/usr/bin/env bash
# The bench scripts that throttle a disk (studies/lib/blkio.sh: whatif_tables.sh,
# partitioned_cache.sh, partitioned_whatif.sh, io_engine.sh) given a dataset on tmpfs: one line naming the cause, exit 2.
# (They used to exit 32 without a word: findmnt -T lists every mount stacked on
# /dev/shm, so the tmpfs check missed and lsblk failed under set -e.)
# Usage: throttle_scripts_tmpfs_test.sh SOURCE_DIR BUILD_DIR. Exit 77 (skip) without
# root and cgroup v1 blkio (the scripts then stop earlier, at that check) or without
# a tmpfs at /dev/shm, saying why.
set -u
src=$1 build=$2
if [[ ! -w /sys/fs/cgroup/blkio || ! -e /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]]; then
  echo "SKIP: no writable cgroup v1 blkio here (needs root): the scripts stop before the tmpfs check"
  exit 77
fi
if [[ "$(df --output=fstype /dev/shm 2>/dev/null | tail -1)" != tmpfs ]]; then
  echo "SKIP: /dev/shm is not a tmpfs here"
  exit 77
fi
for exe in "$build/benchmarks/loader" "$build/bin/mlbench-stall"; do
  [[ -x "$exe" ]] || { echo "SKIP: $exe is not built (the scripts check it first)"; exit 77; }
done
data=$(mktemp -d /dev/shm/mlbench-tmpfs-data.XXXXXX)
trap 'rm -rf "$data"' EXIT
mkdir -p "$data/c0"
fail=0
for script in whatif_tables.sh partitioned_cache.sh partitioned_whatif.sh io_engine.sh; do
  out=(--out "$data/out")
  [[ "$script" == io_engine.sh ]] && out=()
  err=$(MLBENCH_BUILD_DIR="$build" "$src/studies/$script" --data "$data" --mbps 20 "${out[@]}" 2>&1 >/dev/null)
  rc=$?
  want="$script: error: $data is on tmpfs: no disk to throttle"
  if [[ $rc -ne 2 || "$err" != "$want" ]]; then
    echo "FAIL: $script exited $rc with: '$err' (wanted exit 2 and '$want')"
    fail=1
  else
    echo "ok: $script: $err"
  fi
done
exit $fail
