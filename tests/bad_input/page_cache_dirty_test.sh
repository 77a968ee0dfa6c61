#!/usr/bin/env bash
# bench/lib/page_cache.sh (readahead.sh, io_engine.sh set a dataset's page-cache state with it)
# on files just written, whose pages are still dirty: page_cache_set FILES 0 must leave none of
# them resident, and FILES 0.5 half. (It used to leave a freshly generated dataset resident:
# POSIX_FADV_DONTNEED only starts the write-back of dirty pages and drops none of them, so the
# first "50% cached" run of bench/readahead.sh read every file from memory, fincore 1.000.)
# Usage: page_cache_dirty_test.sh SOURCE_DIR. Exit 77 (skip), saying why, without fincore or
# without a disk-backed temporary directory (tmpfs keeps every page).
set -u
src=$1
command -v fincore >/dev/null || { echo "SKIP: no fincore (util-linux) to check the page cache"; exit 77; }
dir=$(mktemp -d "${MLBENCH_DISK_TMP:-/var/tmp}/mlbench-dirty.XXXXXX") || { echo "SKIP: no temporary directory on a disk"; exit 77; }
trap 'rm -rf "$dir"' EXIT
if [[ "$(stat -f -c %T "$dir")" == tmpfs ]]; then
  echo "SKIP: $dir is on tmpfs (no disk to evict to)"
  exit 77
fi
for i in 1 2 3 4 5 6 7 8; do
  head -c 4M /dev/urandom > "$dir/f$i"
done
ls -d "$dir"/f* > "$dir/list"
source "$src/bench/lib/page_cache.sh"
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
