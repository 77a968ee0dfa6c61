#!/usr/bin/env bash
# The partitioned-cache what-if against measured nodes (docs/stall.md, "Partitioned cache"; its
# figures: docs/performance.md, "Partitioned cache"). --cycles times, in turn:
#   1. an analysis: mlbench-stall on the loader, inside a cgroup whose reads from the data's disk
#      are throttled to --mbps (cgroup v1 blkio; made here and removed at the end), with
#      --nodes-share-cpus (the nodes below share this machine's CPUs);
#   2. the nodes: studies/partitioned_cache.sh --local on the same data and throttle (2 and 4 nodes,
#      each caching 1/N on its own and partitioned, --rounds rounds);
#   3. the same analysis again.
# Then, per point (N nodes, own or partitioned), the measured epoch-2+ img/s per node (median
# over nodes and rounds) against each analysis's prediction (whatif.partitioned.predictions), the
# error, and over all points: how many within 5%, the median |error|, the mean and the largest;
# and how many are within 5% or inside the prediction's pairs' range (partitioned points: the
# predictions the analysis's pairs of peer runs make one by one, each with its own p and k).
# Then the summary the cache what-if is judged by: per point, the median of every analysis's
# prediction against the median of every node of every round of every cycle. Last, per cycle, the
# CPU an image of the nodes with and without peers at 2 and 4 nodes (what a peer fetch costs).
# Usage: studies/partitioned_whatif.sh --data DIR [--mbps 20] [--cycles 3] [--rounds 2] [--epochs 4]
#          [--out DIR]
#   loader flags (analysis and nodes): -b 32 --workers 1 --image-size 64 --cpu-cores 1
# Env: MLBENCH_BUILD_DIR (default build). Root (cgroup v1 blkio). About 4.5 minutes a cycle on
# real-photos-small (2,000 JPEGs) at 20 MB/s on 2 CPUs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-build}"
[[ "$build" = /* ]] || build="$root/$build"
data=""; mbps=20; cycles=3; rounds=2; epochs=4; out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --cycles) cycles="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "partitioned_whatif.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$data" && -d "$data" ]] || { echo "partitioned_whatif.sh: error: --data DIR (an ImageFolder) is required" >&2; exit 2; }
for v in mbps cycles rounds; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "partitioned_whatif.sh: error: --$v must be a positive integer" >&2; exit 2; }
done
[[ "$epochs" =~ ^[2-9][0-9]*$|^[1-9][0-9]+$ ]] || { echo "partitioned_whatif.sh: error: --epochs must be 2 or more" >&2; exit 2; }
stall="$build/bin/mlbench-stall"
[[ -x "$stall" ]] || { echo "partitioned_whatif.sh: error: $stall is missing (build it, or set MLBENCH_BUILD_DIR)" >&2; exit 2; }
out="${out:-$(mktemp -d /tmp/partitioned_whatif.XXXXXX)}"
mkdir -p "$out"
source "$root/studies/lib/blkio.sh"
blkio_setup partitioned_whatif.sh "$data" mlbench-pwhatif "$mbps"
trap 'rmdir "$blkio_cg" 2>/dev/null || true' EXIT
flags=(-b 32 --workers 1 --image-size 64 --cpu-cores 1)
echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/'); $data at $mbps MB/s; $cycles cycles; out: $out"

analysis() {  # OUT
  in_cg "$stall" --bench loader --data "$data" --nodes-share-cpus --cache-fracs 0.5 --iterations 60 --out "$1" \
    -- "${flags[@]}" > "$1.log" 2>&1 ||
    { echo "partitioned_whatif.sh: error: the analysis failed (see $1.log)" >&2; exit 1; }
}

t0=$(date +%s)
for ((c = 1; c <= cycles; c++)); do
  analysis "$out/c$c-before"
  MLBENCH_BUILD_DIR="$build" "$root/studies/partitioned_cache.sh" --data "$data" --mbps "$mbps" --nodes 2,4 \
    --epochs "$epochs" --rounds "$rounds" --local --out "$out/c$c-nodes" -- "${flags[@]}" --no-cuda \
    > "$out/c$c-nodes.log" 2>&1 ||
    { echo "partitioned_whatif.sh: error: the nodes failed (see $out/c$c-nodes.log)" >&2; exit 1; }
  analysis "$out/c$c-after"
  now=$(date +%s)
  echo "# cycle $c/$cycles done after $(( (now - t0) / 60 )) min; ETA $(( (now - t0) * (cycles - c) / c / 60 )) min"
done

/usr/bin/python3 - "$out" "$cycles" "$root/studies/lib" <<'EOF'
import glob, json, os, statistics, sys
out, cycles = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from node_speed import epochs2
every = {}  # (nodes, mode) -> every node's epoch-2+ img/s of every round of every cycle
preds = {}  # (nodes, mode) -> every analysis's prediction
def measured(nodes_dir, mode, n):
    speeds = [s for rd in glob.glob(os.path.join(nodes_dir, f"{mode}-n{n}-r*")) for s, _ in epochs2(rd) if s == s]
    return speeds
errors = {"own": [], "partitioned": []}
in_range = {"own": 0, "partitioned": 0}
print("\n| cycle | analysis | p us (from; pairs) | k us a request (from; pairs) | point | measured img/s per node | predicted [pairs' range] | error |")
print("|---|---|---|---|---|---|---|---|")
for c in range(1, cycles + 1):
    for side in ("before", "after"):
        w = json.load(open(os.path.join(out, f"c{c}-{side}", "stall.json")))["whatif"]["partitioned"]
        if not w:
            print(f"| {c} | {side} | – | – | – | – | no partitioned what-if | – |")
            continue
        k = w.get("peer_cpu", {})
        pairs = ", ".join(f"{x:.0f}" for x in k.get("pairs_us", []))
        p_pairs = ", ".join(f"{x:.0f}" for x in k.get("pairs_local_cpu_per_item_us", []))
        head = f"| {c} | {side} | {w['prep_cpu_us']:.0f} ({w.get('prep_cpu_from', 'cpus-1')}" \
               f"{'; ' + p_pairs if p_pairs and w.get('prep_cpu_from') == 'peer-local' else ''}) | " \
               f"{w.get('peer_request_cpu_us', w.get('peer_cpu_us')):.1f} ({k.get('source', 'loopback')}{'; ' + pairs if pairs else ''}) |"
        for pred in w["predictions"]:
            n = pred["nodes"]
            if n not in (2, 4):
                continue
            for mode in ("own", "partitioned"):
                speeds = measured(os.path.join(out, f"c{c}-nodes"), mode, n)
                if not speeds:
                    continue
                m = statistics.median(speeds)
                if side == "before":  # each cycle's nodes once
                    every.setdefault((n, mode), []).extend(speeds)
                preds.setdefault((n, mode), []).append(pred[mode])
                e = 100 * (pred[mode] / m - 1)
                errors[mode].append(e)
                # The pairs' range (schema 9: the predictions of the peer runs' pairs one by one).
                rng = pred.get("partitioned_range") if mode == "partitioned" else None
                in_range[mode] += abs(e) <= 5 or bool(rng and rng[0] <= m <= rng[1])
                shown = f" [{rng[0]:,.0f}-{rng[1]:,.0f}]" if rng else ""
                print(f"{head} {n} nodes, {mode} | {m:,.0f} | {pred[mode]:,.0f}{shown} | {e:+.1f}% |")
                head = "| | | | |"
print()
for mode, v in errors.items():
    if v:
        a = [abs(x) for x in v]
        print(f"{mode}: {sum(x <= 5 for x in a)} of {len(v)} within 5%; median |error| {statistics.median(a):.1f}%, "
              f"mean {statistics.mean(v):+.1f}%, largest {max(a):.1f}%; within 5% or inside the pairs' range: "
              f"{in_range[mode]} of {len(v)}")
# The summary the cache what-if is judged by (docs/stall.md, "Held out: how the answers did"): the
# median of every analysis's prediction against the median of every node of every cycle.
print(f"\n{cycles} cycles: the median of the analyses' predictions against the median of every node")
print("| point | measured img/s per node, median [min-max] | predicted, median [min-max] | error |")
print("|---|---|---|---|")
within = 0
for (n, mode), speeds in sorted(every.items()):
    m, p = statistics.median(speeds), statistics.median(preds[(n, mode)])
    within += abs(p / m - 1) <= 0.05
    print(f"| {n} nodes, {mode} | {m:,.0f} [{min(speeds):,.0f}-{max(speeds):,.0f}] | {p:,.0f} "
          f"[{min(preds[(n, mode)]):,.0f}-{max(preds[(n, mode)]):,.0f}] | {100 * (p / m - 1):+.1f}% |")
print(f"medians: {within} of {len(every)} points within 5%")
# What peers cost a node's CPU (k, docs/stall.md "Partitioned cache"; docs/performance.md,
# "Partitioned cache"):
# per cycle, CPU us an image over epochs 2+ (median over nodes and rounds) of the nodes holding the
# whole dataset (local) and of the partitioned ones, at 2 and 4 nodes, and 4 nodes' extra over 2's.
def cpu(nodes_dir, mode, n):
    v = [c for rd in glob.glob(os.path.join(nodes_dir, f"{mode}-n{n}-r*")) for _, c in epochs2(rd) if c]
    return statistics.median(v) if v else None
print("\n| cycle | local-n2 / partitioned-n2, us an image | extra, 2 nodes | local-n4 / partitioned-n4 | extra, 4 nodes | 4 over 2 |")
print("|---|---|---|---|---|---|")
sums = [0.0, 0.0]
for c in range(1, cycles + 1):
    d = os.path.join(out, f"c{c}-nodes")
    v = {(mode, n): cpu(d, mode, n) for mode in ("local", "partitioned") for n in (2, 4)}
    if None in v.values():
        print(f"| {c} | – | – | – | – | no process CPU in the reports |")
        continue
    e2, e4 = v[("partitioned", 2)] - v[("local", 2)], v[("partitioned", 4)] - v[("local", 4)]
    sums[0] += e2
    sums[1] += e4
    ratio = f"{e4 / e2:.1f}" if e2 > 0 else "–"
    print(f"| {c} | {v[('local', 2)]:.0f} / {v[('partitioned', 2)]:.0f} | {e2:.1f} | {v[('local', 4)]:.0f} / "
          f"{v[('partitioned', 4)]:.0f} | {e4:.1f} | {ratio} |")
if sums[0] > 0:
    print(f"pooled: 4 nodes' extra {sums[1]:.1f} us against 2 nodes' {sums[0]:.1f}: {sums[1] / sums[0]:.1f} times")
EOF
