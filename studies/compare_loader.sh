#!/usr/bin/env bash
# Side by side on one generated dataset, same transforms, batch size and
# workers: (a) mlbench's loader (and its --no-stats run: instrumentation
# overhead; and a one-thread --workers 0 run: images/s per core), (b) PyTorch's
# DataLoader + torchvision ImageFolder/transforms, (c) the full-size TurboJPEG
# decode bound of one core. Page cache warm. The mlbench runs and the decode
# bound are interleaved over --rounds rounds (a shared machine's load drifts);
# medians, min-max and the paired per-round differences/ratios are printed.
# --dataset: any ImageFolder recipe of mlbench-datagen, e.g. fake-imagenet-small
# (synthetic photo-like) or real-photos-small (crops of real photographs from
# Debian's mate-backgrounds, installed here when missing; docs/datasets.md).
# --output uint8: batches of uint8 CHW (normalised later on the device); the
# PyTorch side then uses PILToTensor without Normalize.
# Usage: studies/compare_loader.sh [--workers 2] [--batch-size 256] [--dataset fake-imagenet-small] [--rounds 7] [--repeat 6] [--output float32|uint8]
# Env: MLBENCH_BUILD_DIR (default build), DATA_DIRECTORY (default data), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data_dir="${DATA_DIRECTORY:-$root/data}"
workers=2; batch=256; dataset=fake-imagenet-small; repeat=6; number=5; rounds=7; output=float32
while (($#)); do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "compare_loader.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$output" in float32|uint8) ;; *) echo "compare_loader.sh: error: --output must be float32 or uint8, not $output" >&2; exit 2 ;; esac
py=/usr/bin/python3
if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
  echo "compare_loader: installing python3-torch python3-torchvision (Debian)"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision >/dev/null
fi
if [[ "$dataset" == real-photos* ]] && ! dpkg-query -W -f='${Status}' mate-backgrounds 2>/dev/null | grep -q "install ok installed"; then
  echo "compare_loader: installing mate-backgrounds (Debian; the real-photos source photographs)"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get install -y -qq --no-install-recommends mate-backgrounds >/dev/null
fi
[[ -n "${MLBENCH_NO_BUILD:-}" ]] || cmake --build "$build" --target loader mlbench-datagen mlbench-decode-bound >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_dir" -q
train="$data_dir/$dataset/train"
n=$(find "$train" -name '*.jpg' | wc -l)
mean_kb=$(find "$train" -name '*.jpg' -printf '%s\n' | awk '{s += $1} END {printf "%.1f", s / NR / 1000}')
find "$train" -name '*.jpg' -exec cat {} + >/dev/null   # warm the page cache
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run_mlbench() {  # $1: workers, $2: extra flag; prints images/s (train_item avg)
  local dir; dir=$(mktemp -d -p "$tmp")
  "$build/benchmarks/loader" --data "$train" --workers "$1" -b "$batch" --repeat "$repeat" --number "$number" \
    --warmup 1 --no-cuda --output "$output" --report "$dir" $2 >/dev/null
  "$py" -c 'import json,glob,sys; print(json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["train_item"]["avg"])' "$dir"
}
run_decode() {
  "$build/bin/mlbench-decode-bound" "$train" --seconds 4 | "$py" -c 'import json,sys; print(json.load(sys.stdin)["images_per_s"])'
}
: >"$tmp/rounds"
for ((r = 1; r <= rounds; r++)); do
  # Alternate the order of the stats/no-stats pair so neither always runs first.
  if ((r % 2)); then s=$(run_mlbench "$workers" ""); ns=$(run_mlbench "$workers" --no-stats)
  else ns=$(run_mlbench "$workers" --no-stats); s=$(run_mlbench "$workers" ""); fi
  one=$(run_mlbench 0 ""); dec=$(run_decode)
  echo "$s $ns $one $dec $(cut -d' ' -f1-3 /proc/loadavg)" >>"$tmp/rounds"
  echo "compare_loader: round $r/$rounds: stats $s, no-stats $ns, one thread $one, decode bound $dec images/s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

torch_rate=$("$py" - "$train" "$workers" "$batch" "$((repeat * number))" "$output" <<'PY'
import sys, time, torch, torchvision
from torchvision import datasets, transforms
root, workers, batch, iters, output = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.set_num_threads(1)
if output == "uint8":  # as mlbench --output uint8: CHW uint8, normalised later on the device
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
else:
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ds = datasets.ImageFolder(root, t)
dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                                 persistent_workers=workers > 0)
def batches():
    while True:
        yield from dl
it = batches()
next(it)  # worker start-up and the first batch outside the timing
t0 = time.perf_counter(); n = 0
for _ in range(iters):
    x, y = next(it); n += x.shape[0]
print(n / (time.perf_counter() - t0))
PY
)
cores=$(nproc)
"$py" - "$tmp/rounds" "$torch_rate" "$workers" "$cores" "$n" "$batch" "$dataset" "$mean_kb" "$output" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
tr = float(sys.argv[2]); workers, cores, n, batch = map(int, sys.argv[3:7]); dataset, mean_kb, output = sys.argv[7:10]
col = lambda i: [r[i] for r in rows]
def summary(v, fmt="{:.1f}"):
    return f"median {fmt.format(st.median(v))} (min {fmt.format(min(v))}, max {fmt.format(max(v))}, n={len(v)})"
s, ns, one, dec, load = col(0), col(1), col(2), col(3), col(4)
over = [100 * (b - a) / b for a, b in zip(s, ns)]           # paired per round: + means stats cost
ratio_one = [a / d for a, d in zip(one, dec)]                # one thread vs one-thread decode bound, same round
per_core = [a / min(workers, cores) / d for a, d in zip(s, dec)] if workers else ratio_one
print(f"dataset: {dataset}, {n} images (mean {mean_kb} KB), batch {batch}, --workers {workers}, --output {output}, "
      f"{cores} CPUs, page cache warm, {len(rows)} interleaved rounds")
print(f"load average (1 min) during the rounds: {summary(load, '{:.2f}')}")
print(f"(a) mlbench loader --workers {workers}   {summary(s)} images/s")
print(f"    mlbench --no-stats               {summary(ns)} images/s")
print(f"    mlbench --workers 0 (one thread) {summary(one)} images/s")
print(f"(b) PyTorch DataLoader, {workers} workers  {tr:.1f} images/s")
print(f"(c) full-size decode bound, 1 thread {summary(dec)} images/s")
print(f"ratio a/b = {st.median(s)/tr:.2f}x (target >= 5x)")
print(f"per core: one-thread mlbench / decode bound, paired per round: {summary(ratio_one, '{:.2f}')} (target >= 1.0x)")
print(f"per core: (--workers {workers} / {min(workers, cores)} cores) / decode bound, paired: {summary(per_core, '{:.2f}')}")
print(f"instrumentation overhead (no-stats - stats) / no-stats, paired per round: {summary(over, '{:+.2f}')} % (target < 1%)")
PY
