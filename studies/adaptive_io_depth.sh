#!/usr/bin/env bash
# The adaptive requests in flight over HTTP (docs/pipeline.md, "Read-ahead"; figures:
# docs/performance.md, "Datasets over HTTP"): images/s of `loader` reading the dataset from nginx
# on loopback through mlbench-delay-proxy at each added latency of --latencies (ms per request),
# at the default (no --io-depth: adaptive from 8) and at each fixed --io-depth of --depths. Rounds
# interleave every setting; each figure is the median of --rounds with its min and max, and the
# adaptive runs' settled depths are listed (each run's line goes to stderr as it ends). The goal: the default reaches at least 0.9 of the best
# fixed depth on the same server (the ratio printed is of the medians). Each run reads --batches
# batches in --repeat observations, the first dropped as warm-up: the same work at every depth.
# Two figures per run: "timed", the loader's train_item (the default's search, 2.5 to 3 s, is
# paid in it as a run of that length pays it), and "settled", images/s over the epochs from
# --settled-from on (pipeline.epochs; by then the search is over), as a longer run would see it.
# (Not --min-time: it calibrates the batches per observation at the first depth, and the rest of
# the run is then a fraction of the search.)
# Usage: studies/adaptive_io_depth.sh [--dataset fake-imagenet-small] [--data-root DIR (default ./rs-data)]
#          [--latencies 2,20] [--depths 8,16,32,64,128] [--workers 2] [--batch-size 32]
#          [--batches 500] [--repeat 10] [--settled-from 4] [--rounds 3]
# Env: MLBENCH_BUILD_DIR (default build), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
dataset=fake-imagenet-small; data_root=rs-data; latencies=2,20; depths=8,16,32,64,128; workers=2; batch=32
batches=500; repeat=10; settled_from=4; rounds=3
while (($#)); do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --data-root) data_root="$2"; shift 2 ;;
    --latencies) latencies="$2"; shift 2 ;;
    --depths) depths="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --settled-from) settled_from="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "adaptive_io_depth.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
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
nginx_start adaptive_io_depth.sh "$data_abs"
# A proxy per latency, each in front of the one nginx (started here, not in $(...): see nginx.sh).
declare -A url
IFS=, read -r -a lat_list <<<"$latencies"
IFS=, read -r -a depth_list <<<"$depths"
for ms in "${lat_list[@]}"; do
  delay_proxy_start adaptive_io_depth.sh "$build/bin/mlbench-delay-proxy" "$nginx_port" "$ms"
  proxies+=("$proxy_pid")
  url[$ms]="$proxy_url/$dataset/train/"
done
find "$train" -type f -name '*.jpg' -exec cat {} + >/dev/null  # the server's page cache warm
n=$(find "$train" -type f -name '*.jpg' | wc -l)
mean_kb=$(find "$train" -type f -name '*.jpg' -printf '%s\n' | awk '{s += $1} END {printf "%.1f", s / NR / 1000}')

run_loader() {  # $1: URL, $2: io depth ("default": not given); prints "timed settled depth steps"
  local dir; dir=$(mktemp -d -p "$tmp")
  local depth=(--io-depth "$2")
  [[ "$2" == default ]] && depth=()
  "$build/benchmarks/loader" --data "$1" --workers "$workers" -b "$batch" --repeat "$repeat" \
    --number $((batches / repeat)) --warmup 1 --no-cuda "${depth[@]}" --report "$dir" >"$dir/log" 2>&1 ||
    { cat "$dir/log" >&2; return 1; }
  "$py" - "$dir" "$settled_from" <<'PY'
import glob, json, sys
j = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
a = (j["pipeline"].get("read_ahead") or {}).get("adaptive")
settled = "-" if not a else (a["settled"] if a["settled"] is not None else "unsettled")
steps = "-" if not a else ",".join(f"{s['depth']}:{s['rate']:.0f}" for s in a["steps"])
late = [e for e in j["pipeline"]["epochs"] if e["epoch"] >= int(sys.argv[2])]
rate = sum(e["images"] for e in late) / sum(e["seconds"] for e in late) if late else float("nan")
print(j["train_item"]["avg"], rate, settled, steps)
PY
}

: >"$tmp/rows"
for ((r = 1; r <= rounds; r++)); do
  for ms in "${lat_list[@]}"; do
    for d in default "${depth_list[@]}"; do
      row="$ms $d $(run_loader "${url[$ms]}" "$d")"
      echo "$row" >>"$tmp/rows"
      echo "adaptive_io_depth: round $r: +$row" >&2
    done
  done
  echo "adaptive_io_depth: round $r/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

"$py" - "$tmp/rows" "$dataset" "$n" "$mean_kb" "$workers" "$batch" "$batches" "$settled_from" <<'PY'
import collections, statistics as st, sys
timed, late = collections.OrderedDict(), collections.OrderedDict()
settled = collections.defaultdict(list)
for line in open(sys.argv[1]):
    ms, depth, rate, late_rate, s, _steps = line.split()
    timed.setdefault((int(ms), depth), []).append(float(rate))
    late.setdefault((int(ms), depth), []).append(float(late_rate))
    if depth == "default":
        settled[int(ms)].append(s)
dataset, n, mean_kb, workers, batch, batches, settled_from = sys.argv[2:9]
print(f"dataset: {dataset}, {n} images (mean {mean_kb} KB), loader --workers {workers}, batch {batch}, "
      f"{batches} batches a run; nginx on loopback, page cache warm; latency added per request by "
      f"mlbench-delay-proxy. images/s, median [min-max]: timed (train_item) and settled (epochs {settled_from}+)")
print(f"{'latency':<8} {'--io-depth':<30} {'timed':>26} {'settled':>26} {'n':>3}")
cell = lambda v: f"{st.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]"
for (ms, depth), v in timed.items():
    name = f"default (settled {','.join(settled[ms])})" if depth == "default" else depth
    print(f"{'+' + str(ms) + ' ms':<8} {name:<30} {cell(v):>26} {cell(late[(ms, depth)]):>26} {len(v):>3}")
for ms in sorted({k[0] for k in timed}):
    for what, rows in (("timed", timed), ("settled", late)):
        fixed = {d: st.median(v) for (m, d), v in rows.items() if m == ms and d != "default"}
        if not fixed or (ms, "default") not in rows:
            continue
        best = max(fixed, key=fixed.get)
        ratio = st.median(rows[(ms, "default")]) / fixed[best]
        print(f"+{ms} ms, {what}: default / best fixed (io-depth {best}) = {ratio:.3f} "
              f"({'meets' if ratio >= 0.9 else 'misses'} 0.9)")
PY
