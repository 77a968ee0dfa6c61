#!/bin/sh
# Measures how long mlbench-report takes on a full-size reports tree: RUNS runs x
# 19 benchmarks x SLOTS slots of generated instance reports (Contract 1 fields the
# report reads, ~1 KB each), console + CSV + JSON + HTML. Prints the median of 5.
# Usage: studies/measure_speed.sh [BUILD_DIR] [RUNS] [SLOTS]
set -eu
case "${1:-}" in
  -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
build=${1:-build}
runs=${2:-10}
slots=${3:-8}
bin="$build/bin/mlbench-report"
[ -x "$bin" ] || { echo "measure_speed.sh: $bin not found (build the mlbench-report target first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
benches="atari cart convnet convnet_distributed convnet_distributed_fp16 convnet_fp16 dcgan_all dcgan fast_style loader recom reso ssd toy_lstm toy_reg translator vae wlm wlmfp16"
r=0
while [ "$r" -lt "$runs" ]; do
  mkdir -p "$tmp/out/R$r"
  for b in $benches; do
    s=0
    while [ "$s" -lt "$slots" ]; do
      v=$((1000 + (r * 7 + s * 13) % 50))
      printf '{"name":"%s","suite":"speed","run_id":%d,"jr_id":%d,"completed":true,"batch_loss":[0.5,0.4],"train":{"avg":0.1,"min":0.1,"max":0.1,"sd":0.0,"count":10,"unit":"s"},"train_item":{"avg":%d.5,"min":900,"max":1100,"range":200,"unit":"items/sec"},"stall":{"wait":{"avg":0.001},"h2d":{"avg":0.0001},"compute":{"avg":0.009},"iteration":{"avg":0.0101},"stall_pct":9.9,"warmup_iterations":10},"pipeline":null,"resources":null}\n' \
        "$b" "$r" "$s" "$v" > "$tmp/out/R$r/speed.$b.R$r.D$s.20260101-000000-000000.json"
      s=$((s + 1))
    done
  done
  r=$((r + 1))
done
files=$(find "$tmp/out" -name '*.json' | wc -l)
times=""
i=0
while [ "$i" -lt 5 ]; do
  t0=$(date +%s.%N)
  "$bin" --reports "$tmp/out" --name speed --csv "$tmp/r.csv" --json "$tmp/r.json" --html "$tmp/r.html" > /dev/null
  t1=$(date +%s.%N)
  times="$times $(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }")"
  i=$((i + 1))
done
median=$(echo $times | tr ' ' '\n' | sort -n | sed -n 3p)
echo "mlbench-report on $files reports ($runs runs x 19 benchmarks x $slots slots), console+CSV+JSON+HTML:"
echo "  times (s):$times"
echo "  median: $median s"
