#!/usr/bin/env bash
# Tar shards against an ImageFolder where the disk is the bound (docs/pipeline.md, "Tar shards
# (WebDataset)"; figures: docs/performance.md, "Tar shards against small files"): the same
# dataset read by `loader` as files (one random read per sample) and as tar shards made by
# `mlbench-datagen shards` (read forward per shard), every read from the disk (--drop-after-read,
# the page cache emptied of both before each run), the disk throttled for the loader by cgroup v1
# blkio to --mbps MB/s and --iops reads/s (a cloud volume's two limits: gp2/gp3-like; a real
# disk's seek cost is the IOPS limit). Each round runs both, alternating which goes first, plus
# both with --fetch-only (the fetch rate alone); figures are medians over --rounds with min and max.
# Usage: studies/shards_vs_folder.sh [--dataset fake-imagenet-small] [--data-root DIR (default ./sh-data, on a disk)]
#          [--mbps 200] [--iops 400] [--shard-size 16M] [--shuffle-buffer 1000] [--workers 2] [--batch-size 32]
#          [--epochs 1] [--rounds 3]
# Env: MLBENCH_BUILD_DIR (default build), MLBENCH_NO_BUILD=1 (use the built binaries). Needs root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
dataset=fake-imagenet-small; data_root=sh-data; mbps=200; iops=400; shard_size=16M; buffer=1000; workers=2
batch=32; epochs=1; rounds=3
while (($#)); do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --data-root) data_root="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --iops) iops="$2"; shift 2 ;;
    --shard-size) shard_size="$2"; shift 2 ;;
    --shuffle-buffer) buffer="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "shards_vs_folder.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[[ -n "${MLBENCH_NO_BUILD:-}" ]] || cmake --build "$build" --target loader mlbench-datagen >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_root" -q
train="$data_root/$dataset/train"
shards="$data_root/$dataset-shards"
"$build/bin/mlbench-datagen" shards --from "$train" --out "$shards" --shard-size "$shard_size" -q
# shellcheck source=studies/lib/blkio.sh
source "$root/studies/lib/blkio.sh"
# shellcheck source=studies/lib/page_cache.sh
source "$root/studies/lib/page_cache.sh"
blkio_setup shards_vs_folder.sh "$train" mlbench-shards "$mbps"
echo "$blkio_majmin $iops" >"$blkio_cg/blkio.throttle.read_iops_device"
tmp=$(mktemp -d)
cleanup() {
  if [[ -n "${blkio_cg:-}" && -d "$blkio_cg" ]]; then
    while read -r pid; do echo "$pid" >/sys/fs/cgroup/blkio/cgroup.procs 2>/dev/null || true; done <"$blkio_cg/cgroup.procs"
    rmdir "$blkio_cg" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
find "$train" -type f -name '*.jpg' | sort >"$tmp/files"
find "$shards" -type f -name '*.tar' | sort >>"$tmp/files"
n=$(find "$train" -type f -name '*.jpg' | wc -l)
n_shards=$(find "$shards" -type f -name '*.tar' | wc -l)
mean_kb=$(find "$train" -type f -name '*.jpg' -printf '%s\n' | awk '{s += $1} END {printf "%.1f", s / NR / 1000}')

run_loader() {  # $1: data, $2: extra flags; prints images/s over the timed epochs
  local dir; dir=$(mktemp -d -p "$tmp")
  page_cache_set "$tmp/files" 0
  # shellcheck disable=SC2086
  in_cg "$build/benchmarks/loader" --data "$1" --workers "$workers" -b "$batch" --epochs "$epochs" --warmup 0 \
    --no-cuda --drop-after-read --shuffle-buffer "$buffer" --report "$dir" $2 >"$dir/log" 2>&1 ||
    { cat "$dir/log" >&2; return 1; }
  "$py" -c 'import json,glob,sys; e=json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["pipeline"]["epochs"]; print(sum(x["images"] for x in e)/sum(x["seconds"] for x in e))' "$dir"
}

: >"$tmp/rounds"
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then f=$(run_loader "$train" ""); s=$(run_loader "$shards/*.tar" "")
  else s=$(run_loader "$shards/*.tar" ""); f=$(run_loader "$train" ""); fi
  ff=$(run_loader "$train" --fetch-only); sf=$(run_loader "$shards/*.tar" --fetch-only)
  echo "$f $s $ff $sf" >>"$tmp/rounds"
  echo "shards_vs_folder: round $r/$rounds: folder $f, shards $s images/s; fetch alone: folder $ff, shards $sf (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

"$py" - "$tmp/rounds" "$dataset" "$n" "$mean_kb" "$n_shards" "$shard_size" "$mbps" "$iops" "$workers" "$batch" "$buffer" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
dataset, n, mean_kb, n_shards, shard_size, mbps, iops, workers, batch, buffer = sys.argv[2:12]
col = lambda i: [r[i] for r in rows]
def summary(v):
    return f"{st.median(v):.1f} (min {min(v):.1f}, max {max(v):.1f}, n={len(v)})"
print(f"dataset: {dataset}, {n} images (mean {mean_kb} KB) = {n_shards} shards of <= {shard_size}; disk throttled to "
      f"{mbps} MB/s and {iops} reads/s (blkio), every read from the disk; loader --workers {workers}, batch {batch}, "
      f"--shuffle-buffer {buffer}")
print(f"ImageFolder, loader:        {summary(col(0))} images/s")
print(f"tar shards, loader:         {summary(col(1))} images/s")
print(f"ImageFolder, --fetch-only:  {summary(col(2))} images/s")
print(f"tar shards, --fetch-only:   {summary(col(3))} images/s")
print(f"shards / folder (paired):   {st.median([b / a for a, b in zip(col(0), col(1))]):.2f}x")
PY
