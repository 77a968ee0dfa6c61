#!/usr/bin/env bash
# Read-ahead (--io-depth) against the serial loader (--io-depth 0), paired and
# alternating over --rounds rounds (docs/pipeline.md, "Read-ahead"; figures: docs/performance.md, "Read-ahead and io_uring").
# Each run times --epochs epochs after one of warm-up (the first epoch pays the
# start: threads, buffers, the first batches' wait) under --hold-page-cache, so
# the resident fraction made before the run holds over every epoch (a read that
# brought a file in drops it again). Two settings:
#   --mode cached     every file in the page cache (goal: no loss)
#   --mode throttled  the data's block device throttled to --mbps MB/s for the
#                     loader (cgroup v1 blkio.throttle.read_bps_device; root),
#                     --cached-frac of the files made resident before every run
#                     and the rest evicted (checked with fincore). Each round
#                     also measures the two rates the goal is stated in: F(x),
#                     the fetch stage alone (--fetch-only, read-ahead on) at the
#                     same page-cache state, and P, the loader with every file
#                     cached; goal: read-ahead within 10% of min(F(x), P).
# The data folder must sit on a real block device (not tmpfs); datasets are made
# with mlbench-datagen under --data-root when missing (real-photos-small needs
# Debian's mate-backgrounds, installed when missing).
# Usage: studies/readahead.sh [--mode cached|throttled] [--dataset real-photos-small] [--data-root DIR (default ./ra-data)]
#          [--io-depth 8] [--io-engine threads|io_uring] [--workers 2] [--batch-size 64] [--mbps 70]
#          [--cached-frac 0.5] [--rounds 5] [--epochs 3]
# --io-engine: how the read-ahead side (and F(x)'s fetch-only run) issues its reads.
# Env: MLBENCH_BUILD_DIR (default build), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
mode=cached; dataset=real-photos-small; data_root=ra-data; depth=8; workers=2; batch=64; mbps=70
frac=0.5; rounds=5; engine=auto; epochs=3
while (($#)); do
  case "$1" in
    --mode) mode="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --data-root) data_root="$2"; shift 2 ;;
    --io-depth) depth="$2"; shift 2 ;;
    --io-engine) engine="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --cached-frac) frac="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "readahead.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$engine" in threads|io_uring|auto) ;; *) echo "readahead.sh: error: --io-engine must be threads, io_uring or auto, not $engine" >&2; exit 2 ;; esac
case "$mode" in cached|throttled) ;; *) echo "readahead.sh: error: --mode must be cached or throttled, not $mode" >&2; exit 2 ;; esac
if [[ "$depth" == 0 ]]; then echo "readahead.sh: error: --io-depth must be > 0 (0 is the serial side)" >&2; exit 2; fi
py=/usr/bin/python3
if [[ "$dataset" == real-photos* ]] && ! dpkg-query -W -f='${Status}' mate-backgrounds 2>/dev/null | grep -q "install ok installed"; then
  echo "readahead: installing mate-backgrounds (Debian; the real-photos source photographs)" >&2
  apt-get install -y -qq --no-install-recommends mate-backgrounds >/dev/null
fi
[[ -n "${MLBENCH_NO_BUILD:-}" ]] || cmake --build "$build" --target loader mlbench-datagen >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_root" -q
train="$data_root/$dataset/train"
if [[ "$(stat -f -c %T "$train")" == tmpfs ]]; then
  echo "readahead.sh: error: $train is on tmpfs (no block device to throttle); use --data-root on a disk" >&2; exit 2
fi
tmp=$(mktemp -d)
cgroup=""
cleanup() {
  if [[ -n "$cgroup" && -d "$cgroup" ]]; then
    # Move anything left back to the root group, then remove ours.
    while read -r pid; do echo "$pid" >/sys/fs/cgroup/blkio/cgroup.procs 2>/dev/null || true; done <"$cgroup/cgroup.procs"
    rmdir "$cgroup" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
find "$train" -type f | sort >"$tmp/files"
n=$(wc -l <"$tmp/files")
mean_kb=$(xargs -a "$tmp/files" -d '\n' stat -c %s | awk '{s += $1} END {printf "%.1f", s / NR / 1000}')

# Page-cache state: the first `frac` of a fixed shuffle of the files resident, the rest evicted.
# shellcheck source=studies/lib/page_cache.sh
source "$root/studies/lib/page_cache.sh"
set_page_cache() {  # $1: fraction resident (0 .. 1); prints the fraction of pages resident (fincore)
  page_cache_set "$tmp/files" "$1"
  page_cache_fraction "$tmp/files"
}

if [[ "$mode" == throttled ]]; then
  [[ $(id -u) -eq 0 ]] || { echo "readahead.sh: error: --mode throttled needs root (cgroup v1 blkio)" >&2; exit 2; }
  [[ -f /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]] ||
    { echo "readahead.sh: error: no cgroup v1 blkio controller at /sys/fs/cgroup/blkio" >&2; exit 2; }
  dev=$(stat -c '%Hd:%Ld' "$train")
  # A partition's throttle goes on its whole disk.
  if [[ -e "/sys/dev/block/$dev/partition" ]]; then dev=$(cat "/sys/dev/block/$dev/../dev"); fi
  cgroup=/sys/fs/cgroup/blkio/mlbench-readahead-$$
  mkdir "$cgroup"
  echo "$dev $((mbps * 1000 * 1000))" >"$cgroup/blkio.throttle.read_bps_device"
fi

run_loader() {  # $1: io depth, $2: extra flags; prints the epoch's images/s
  local dir; dir=$(mktemp -d -p "$tmp")
  local cmd=("$build/benchmarks/loader" --data "$train" --workers "$workers" -b "$batch" --epochs $((epochs + 1))
             --number 1 --warmup 0 --hold-page-cache --no-cuda --io-depth "$1" --io-engine "$engine" --report "$dir")
  # shellcheck disable=SC2206
  cmd+=($2)
  if [[ -n "$cgroup" ]]; then
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup" "${cmd[@]}" >"$dir/log" 2>&1
  else
    "${cmd[@]}" >"$dir/log" 2>&1
  fi || { cat "$dir/log" >&2; return 1; }
  # images/s over the epochs after the first
  "$py" -c 'import json,glob,sys; e=json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["pipeline"]["epochs"][1:]; print(sum(x["images"] for x in e)/sum(x["seconds"] for x in e))' "$dir"
}

: >"$tmp/rounds"
for ((r = 1; r <= rounds; r++)); do
  if [[ "$mode" == cached ]]; then
    res=$(set_page_cache 1)
    if ((r % 2)); then s=$(run_loader 0 ""); a=$(run_loader "$depth" "")
    else a=$(run_loader "$depth" ""); s=$(run_loader 0 ""); fi
    echo "$s $a $res $(cut -d' ' -f1 /proc/loadavg)" >>"$tmp/rounds"
    echo "readahead: round $r/$rounds: serial $s, io-depth $depth $a images/s (resident $res, load $(cut -d' ' -f1 /proc/loadavg))" >&2
  else
    # Alternate which side runs first; the page-cache state is set before every run.
    if ((r % 2)); then
      res=$(set_page_cache "$frac"); s=$(run_loader 0 "")
      res2=$(set_page_cache "$frac"); a=$(run_loader "$depth" "")
    else
      res2=$(set_page_cache "$frac"); a=$(run_loader "$depth" "")
      res=$(set_page_cache "$frac"); s=$(run_loader 0 "")
    fi
    set_page_cache "$frac" >/dev/null; f=$(run_loader "$depth" --fetch-only)
    set_page_cache 1 >/dev/null; p=$(run_loader "$depth" ""); p0=$(run_loader 0 "")
    p=$("$py" -c "print(max($p, $p0))")
    echo "$s $a $res $f $p $res2 $(cut -d' ' -f1 /proc/loadavg)" >>"$tmp/rounds"
    echo "readahead: round $r/$rounds: serial $s, io-depth $depth $a, F(x) $f, P $p images/s (resident $res/$res2, load $(cut -d' ' -f1 /proc/loadavg))" >&2
  fi
done

"$py" - "$tmp/rounds" "$mode" "$dataset" "$n" "$mean_kb" "$depth" "$workers" "$batch" "$mbps" "$frac" "$engine" "$epochs" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
mode, dataset, n, mean_kb, depth, workers, batch, mbps, frac, engine, epochs = sys.argv[2:13]
col = lambda i: [r[i] for r in rows]
def summary(v, fmt="{:.0f}"):
    return f"median {fmt.format(st.median(v))} (min {fmt.format(min(v))}, max {fmt.format(max(v))}, n={len(v)})"
print(f"dataset: {dataset}, {n} files (mean {mean_kb} KB), --workers {workers} -b {batch}, {epochs} epochs per run after one of warm-up (--hold-page-cache), "
      f"{len(rows)} paired rounds, side order alternating")
s, a = col(0), col(1)
gain = [100 * (y - x) / x for x, y in zip(s, a)]
if mode == "cached":
    print(f"page cache: every file resident (fincore: {summary(col(2), '{:.3f}')})")
    print(f"load average (1 min): {summary(col(3), '{:.2f}')}")
else:
    f, p = col(3), col(4)
    print(f"disk throttled to {mbps} MB/s (blkio), {float(frac):.0%} of the files resident "
          f"(fincore before the serial run: {summary(col(2), '{:.3f}')}, before read-ahead: {summary(col(5), '{:.3f}')})")
    print(f"load average (1 min): {summary(col(6), '{:.2f}')}")
print(f"serial (--io-depth 0)        {summary(s)} images/s")
print(f"read-ahead (--io-depth {depth}, --io-engine {engine})  {summary(a)} images/s")
print(f"paired gain (read-ahead - serial) / serial: {summary(gain, '{:+.1f}')} %")
if mode == "throttled":
    bound = [min(x, y) for x, y in zip(f, p)]
    ratio = [100 * x / b for x, b in zip(a, bound)]
    ratio_s = [100 * x / b for x, b in zip(s, bound)]
    print(f"F(x): fetch stage alone (--fetch-only, io-depth {depth}) {summary(f)} images/s")
    print(f"P: every file cached (best of serial, read-ahead)   {summary(p)} images/s")
    print(f"read-ahead / min(F(x), P), paired: {summary(ratio, '{:.1f}')} % (goal >= 90%)")
    print(f"serial / min(F(x), P), paired:     {summary(ratio_s, '{:.1f}')} %")
PY
