#!/usr/bin/env bash
# Side by side on one generated dataset, same transforms, batch size and
# workers: (a) mlbench's loader (and its --no-stats run: instrumentation
# overhead), (b) PyTorch's DataLoader + torchvision ImageFolder/transforms,
# (c) the full-size TurboJPEG decode bound of one core. Page cache warm.
# Usage: bench/compare_loader.sh [--workers 2] [--batch-size 256] [--dataset fake-imagenet-small]
# Env: MLBENCH_BUILD_DIR (default build), DATA_DIRECTORY (default data), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data_dir="${DATA_DIRECTORY:-$root/data}"
workers=2; batch=256; dataset=fake-imagenet-small; repeat=6; number=5
while (($#)); do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "compare_loader.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
  echo "compare_loader: installing python3-torch python3-torchvision (Debian)"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision >/dev/null
fi
[[ -n "${MLBENCH_NO_BUILD:-}" ]] || cmake --build "$build" --target loader mlbench-datagen mlbench-decode-bound >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_dir" -q
train="$data_dir/$dataset/train"
n=$(find "$train" -name '*.jpg' | wc -l)
find "$train" -name '*.jpg' -exec cat {} + >/dev/null   # warm the page cache
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run_mlbench() {  # $1: extra flag
  "$build/benchmarks/loader" --data "$train" --workers "$workers" -b "$batch" --repeat "$repeat" --number "$number" \
    --warmup 1 --no-cuda --report "$tmp/$2" $1 >/dev/null
  "$py" -c 'import json,glob,sys; print(json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["train_item"]["avg"])' "$tmp/$2"
}
mlb=$(run_mlbench "" stats)
mlb_nostats=$(run_mlbench "--no-stats" nostats)
mlb2=$(run_mlbench "" stats2)
mlb_nostats2=$(run_mlbench "--no-stats" nostats2)

torch_rate=$("$py" - "$train" "$workers" "$batch" "$((repeat * number))" <<'PY'
import sys, time, torch, torchvision
from torchvision import datasets, transforms
root, workers, batch, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)
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
decode=$("$build/bin/mlbench-decode-bound" "$train" --seconds 5 | "$py" -c 'import json,sys; print(json.load(sys.stdin)["images_per_s"])')
cores=$(nproc)
"$py" - "$mlb" "$mlb_nostats" "$mlb2" "$mlb_nostats2" "$torch_rate" "$decode" "$workers" "$cores" "$n" "$batch" <<'PY'
import sys
mlb, mns, mlb2, mns2, tr, dec = map(float, sys.argv[1:7]); workers, cores, n, batch = map(int, sys.argv[7:11])
stats = (mlb + mlb2) / 2; nostats = (mns + mns2) / 2
per_core = stats / min(workers, cores) if workers else stats
print(f"dataset: {n} images, batch {batch}, --workers {workers}, {cores} CPUs, page cache warm")
print(f"(a) mlbench loader          {stats:9.1f} images/s  (runs: {mlb:.1f}, {mlb2:.1f})")
print(f"    mlbench --no-stats      {nostats:9.1f} images/s  (runs: {mns:.1f}, {mns2:.1f}); overhead {100*(nostats-stats)/nostats:+.2f}%")
print(f"(b) PyTorch DataLoader      {tr:9.1f} images/s")
print(f"(c) full-size decode bound  {dec:9.1f} images/s per core")
print(f"ratio a/b = {stats/tr:.2f}x (target >= 3x); mlbench per core / decode bound = {per_core/dec:.2f}x (target >= 1.0x)")
PY
