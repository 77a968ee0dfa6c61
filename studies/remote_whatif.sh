#!/usr/bin/env bash
# The io-depth what-if of a dataset over HTTP, against runs it did not use (docs/stall.md,
# "Datasets over HTTP"; figures: docs/performance.md, "Datasets over HTTP"): mlbench-stall on
# `loader` over nginx on loopback with --latency-ms added per request (mlbench-delay-proxy), the
# model fed by the probe (L, B) and the cached run (P), checked against the cold run, the
# --io-depths runs and the partial cache runs; prints stall.json's whatif.http.measured
# (measured, predicted, the prediction's range, error, off: beyond 5% and outside the range) and the
# recommendation. The analysis is in --out.
# Usage: studies/remote_whatif.sh [--dataset fake-imagenet-small] [--data-root DIR (default ./rs-data)]
#          [--latency-ms 20] [--io-depths 1,2,32] [--cache-fracs 0.5] [--iterations 60] [--workers 2]
#          [--batch-size 32] [--rounds 1] [--out DIR (default ./rs-whatif)]
# --rounds N: mlbench-stall --rounds N (every run N times, its median; the spread of P's rounds in its
#   range).
# Env: MLBENCH_BUILD_DIR (default build), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
dataset=fake-imagenet-small; data_root=rs-data; latency=20; depths=1,2,32; fracs=0.5; iterations=60; workers=2
batch=32; out=rs-whatif; rounds=1
while (($#)); do
  case "$1" in
    --dataset) dataset="$2"; shift 2 ;;
    --data-root) data_root="$2"; shift 2 ;;
    --latency-ms) latency="$2"; shift 2 ;;
    --io-depths) depths="$2"; shift 2 ;;
    --cache-fracs) fracs="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "remote_whatif.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "remote_whatif.sh: error: --rounds takes a positive integer, got '$rounds'" >&2; exit 2; }
[[ -n "${MLBENCH_NO_BUILD:-}" ]] ||
  cmake --build "$build" --target loader mlbench-datagen mlbench-delay-proxy mlbench-stall >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_root" -q
"$build/bin/mlbench-datagen" listing --root "$data_root/$dataset/train" >/dev/null
chmod -R o+rX "$data_root"
data_abs=$(cd "$data_root" && pwd)
# shellcheck source=studies/lib/nginx.sh
source "$root/studies/lib/nginx.sh"
trap 'delay_proxy_stop 2>/dev/null || true; nginx_stop 2>/dev/null || true' EXIT
nginx_start remote_whatif.sh "$data_abs"
delay_proxy_start remote_whatif.sh "$build/bin/mlbench-delay-proxy" "$nginx_port" "$latency"
find "$data_abs/$dataset/train" -type f -name '*.jpg' -exec cat {} + >/dev/null  # the server's page cache warm
"$build/bin/mlbench-stall" --bench loader --bench-dir "$build/benchmarks" --data "$proxy_url/$dataset/train/" \
  --cpus "$workers" --cache-fracs "$fracs" --io-depths "$depths" --iterations "$iterations" --rounds "$rounds" --peer-nodes 0 \
  --out "$out" -- -b "$batch" --workers "$workers" --no-cuda >"$out.log" 2>&1 || { tail -20 "$out.log" >&2; exit 1; }
/usr/bin/python3 - "$out/stall.json" "$latency" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
io = s["whatif"]["http"]
print(f"+{sys.argv[2]} ms a request: L {io['latency_ms']:.2f} ms (probe), B {io['bandwidth_MBps']:.1f} MB/s at "
      f"{io['probe_depth']} in flight, P {io['P']:.1f} samples/s (cached run), --io-depth {io['io_depth_now']} in the runs")
if io.get("probe_latency_end_ms") is not None:
    print(f"L1 (one at a time): {io['probe_latency_start_ms']:.2f} ms at the start, {io['probe_latency_end_ms']:.2f} after the runs")
cpu = io.get("request_cpu", {})
print(f"a request's CPU charged: {cpu.get('charged_us', 0):.0f} us (client {cpu.get('client_us', 0):.0f}, from "
      f"{cpu.get('client_from', '')}; others {cpu.get('others_us', 0):.0f})")
print(f"{'run':<12} {'io depth':>8} {'cache':>6} {'measured':>9} {'predicted':>10} {'range':>13} {'error':>7}")
for m in io["measured"]:
    r = m.get("range") or [0, 0]
    print(f"{m['run']:<12} {m['io_depth']:>8} {m['cache_fraction']:>6.2f} {m['measured']:>9.1f} {m['predicted']:>10.1f} "
          f"{r[0]:>6.0f}-{r[1]:<6.0f} {m['error_pct']:>+6.1f}%{' off' if m.get('off') else ''}")
print(f"max |error| {io['max_error_pct']:.1f}%; recommended --io-depth: {io['recommended_io_depth']}")
print("remedy:", s["recommendation"].get("remedy_text", ""))
PY
