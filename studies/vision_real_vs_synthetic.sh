#!/usr/bin/env bash
# vision_real_vs_synthetic.sh: each image benchmark twice on the same small
# settings (those of configs/fast.json), once reading its generated dataset
# through the pipeline and once with --synthetic, and prints images/s and
# stall_pct of both, so each benchmark's data stall is visible.
#
# Usage: studies/vision_real_vs_synthetic.sh [--build DIR] [--data-dir DIR] [--threads N] [--workers N] [--models a,b]
# Datasets (made with mlbench-datagen ensure when missing): fake-imagenet-small,
# bsds500-small, coco-shapes-small under --data-dir (default: data).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
data="$root/data"
threads=1
workers=1
models="convnet,convnet_fp16,dcgan,reso,fast_style,ssd"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --data-dir) data=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "vision_real_vs_synthetic.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

settings() {  # model -> "dataset|data path|flags"
  case "$1" in
    convnet|convnet_fp16) echo "fake-imagenet-small|$data/fake-imagenet-small/train|--arch resnet18 --image-size 64 --classes 10 -b 16 --repeat 6 --number 3" ;;
    dcgan)      echo "fake-imagenet-small|$data/fake-imagenet-small/train|-b 16 --repeat 6 --number 3" ;;
    reso)       echo "bsds500-small|$data/bsds500-small/train|--image-size 128 -b 16 --repeat 6 --number 3" ;;
    fast_style) echo "fake-imagenet-small|$data/fake-imagenet-small/train|--image-size 64 -b 4 --repeat 6 --number 2" ;;
    ssd)        echo "coco-shapes-small|$data/coco-shapes-small|-b 2 --repeat 4 --number 2" ;;
    *) echo "vision_real_vs_synthetic.sh: unknown model '$1'" >&2; return 2 ;;
  esac
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=python3
field() { "$py" -c 'import json,sys,glob; j=json.load(open(glob.glob(sys.argv[1]+"/*.json")[0])); print("%.2f %.1f" % (j["train_item"]["avg"], j["stall"]["stall_pct"]))' "$1"; }

printf '%-12s %10s %10s %12s %12s\n' model "real img/s" "real stall%" "synth img/s" "synth stall%"
IFS=, read -r -a list <<<"$models"
for m in "${list[@]}"; do
  IFS='|' read -r dataset path flags <<<"$(settings "$m")"
  "$build/bin/mlbench-datagen" ensure "$dataset" --root "$data" >/dev/null
  for mode in real synth; do
    mkdir -p "$tmp/$m.$mode"
    extra="--data $path --workers $workers"
    [[ $mode == synth ]] && extra="--synthetic"
    # shellcheck disable=SC2086
    "$build/benchmarks/$m" $flags $extra --warmup 2 --no-cuda --cpu-cores "$threads" --report "$tmp/$m.$mode" \
      >"$tmp/$m.$mode.log" 2>&1 || { echo "$m ($mode) failed:" >&2; tail -5 "$tmp/$m.$mode.log" >&2; exit 1; }
  done
  read -r rr rs <<<"$(field "$tmp/$m.real")"
  read -r sr ss <<<"$(field "$tmp/$m.synth")"
  printf '%-12s %10s %10s %12s %12s\n' "$m" "$rr" "$rs" "$sr" "$ss"
done
