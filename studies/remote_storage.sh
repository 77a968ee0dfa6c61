#!/usr/bin/env bash
# The loader over HTTP (docs/pipeline.md, "Datasets over HTTP"; figures: docs/performance.md,
# "Datasets over HTTP"): images/s of `loader` reading the dataset from nginx on loopback at each
# added latency of --latencies (ms per request, through mlbench-delay-proxy: this kernel has no
# netem) and each --io-depth of --depths, against the same files read locally (page cache warm),
# and PyTorch's DataLoader over the same server (studies/lib/torch_http_loader.py: requests in a
# Dataset, --torch-workers workers) as the peer a user would write. Rounds interleave every
# setting; each figure is the median of --rounds with its min and max. nginx serves from the page
# cache (the dataset is read once before): the figures are the network's and the request
# pattern's, not a disk's.
# Usage: studies/remote_storage.sh [--dataset fake-imagenet-small] [--data-root DIR (default ./rs-data)]
#          [--latencies 2,20] [--depths 1,8,32] [--workers 2] [--batch-size 32] [--batches 30]
#          [--rounds 3] [--torch-workers 2] [--no-torch]
# Env: MLBENCH_BUILD_DIR (default build), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
dataset=fake-imagenet-small; data_root=rs-data; latencies=2,20; depths=1,8,32; workers=2; batch=32
batches=30; rounds=3; torch_workers=2; torch=1
while (($#)); do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --data-root) data_root="$2"; shift 2 ;;
    --latencies) latencies="$2"; shift 2 ;;
    --depths) depths="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --torch-workers) torch_workers="$2"; shift 2 ;;
    --no-torch) torch=0; shift ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "remote_storage.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[[ -n "${MLBENCH_NO_BUILD:-}" ]] || cmake --build "$build" --target loader mlbench-datagen mlbench-delay-proxy >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_root" -q
train="$data_root/$dataset/train"
"$build/bin/mlbench-datagen" listing --root "$train" >/dev/null
chmod -R o+rX "$data_root"
data_abs=$(cd "$data_root" && pwd)
tmp=$(mktemp -d)
# shellcheck source=studies/lib/nginx.sh
source "$root/studies/lib/nginx.sh"
proxies=()
cleanup() {
  for p in "${proxies[@]}"; do kill "$p" 2>/dev/null || true; done
  nginx_stop 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
nginx_start remote_storage.sh "$data_abs"
# A proxy per latency, each in front of the one nginx.
declare -A url
url[0]="$nginx_url/$dataset/train/"
IFS=, read -r -a lat_list <<<"$latencies"
IFS=, read -r -a depth_list <<<"$depths"
for ms in "${lat_list[@]}"; do
  "$build/bin/mlbench-delay-proxy" --upstream "127.0.0.1:$nginx_port" --delay-ms "$ms" --port-file "$tmp/port-$ms" \
    >"$tmp/proxy-$ms.log" 2>&1 &
  proxies+=($!)
  for _ in $(seq 100); do [[ -s "$tmp/port-$ms" ]] && break; sleep 0.05; done
  url[$ms]="http://127.0.0.1:$(cat "$tmp/port-$ms")/$dataset/train/"
done
find "$train" -type f -name '*.jpg' -exec cat {} + >/dev/null  # the server's page cache warm
n=$(find "$train" -type f -name '*.jpg' | wc -l)
mean_kb=$(find "$train" -type f -name '*.jpg' -printf '%s\n' | awk '{s += $1} END {printf "%.1f", s / NR / 1000}')

run_loader() {  # $1: data (folder or URL), $2: io depth; prints images/s over the timed batches
  local dir; dir=$(mktemp -d -p "$tmp")
  "$build/benchmarks/loader" --data "$1" --workers "$workers" -b "$batch" --repeat $((batches / 5 + 1)) --number 5 \
    --warmup 1 --no-cuda --io-depth "$2" --report "$dir" >"$dir/log" 2>&1 || { cat "$dir/log" >&2; return 1; }
  "$py" -c 'import json,glob,sys; print(json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["train_item"]["avg"])' "$dir"
}
run_torch() {  # $1: URL; prints images/s
  "$py" "$root/studies/lib/torch_http_loader.py" "$1" --workers "$torch_workers" --batch-size "$batch" --batches "$batches"
}

: >"$tmp/rows"
for ((r = 1; r <= rounds; r++)); do
  echo "local 0 $(run_loader "$train" 8)" >>"$tmp/rows"
  for ms in 0 "${lat_list[@]}"; do
    for d in "${depth_list[@]}"; do
      echo "http-$ms $d $(run_loader "${url[$ms]}" "$d")" >>"$tmp/rows"
    done
    if ((torch)); then echo "torch-$ms $torch_workers $(run_torch "${url[$ms]}")" >>"$tmp/rows"; fi
  done
  echo "remote_storage: round $r/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

"$py" - "$tmp/rows" "$dataset" "$n" "$mean_kb" "$workers" "$batch" "$torch_workers" <<'PY'
import collections, statistics as st, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    what, depth, rate = line.split()
    rows.setdefault((what, int(depth)), []).append(float(rate))
dataset, n, mean_kb, workers, batch, tw = sys.argv[2:8]
print(f"dataset: {dataset}, {n} images (mean {mean_kb} KB), loader --workers {workers}, batch {batch}; "
      f"nginx on loopback, page cache warm; latency added per request by mlbench-delay-proxy")
print(f"{'source':<28} {'in flight':>9} {'images/s (median)':>18} {'min':>8} {'max':>8} {'n':>3}")
for (what, depth), v in rows.items():
    if what == "local":
        name, infl = "local files (io-depth 8)", "-"
    elif what.startswith("torch-"):
        name, infl = f"PyTorch DataLoader, +{what[6:]} ms", f"{tw} wk"
    else:
        name, infl = f"mlbench over HTTP, +{what[5:]} ms", str(depth)
    print(f"{name:<28} {infl:>9} {st.median(v):>18.1f} {min(v):>8.1f} {max(v):>8.1f} {len(v):>3}")
PY
