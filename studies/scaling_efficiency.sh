#!/usr/bin/env bash
# scaling_efficiency.sh: 2-rank scaling efficiency with the real image pipeline per rank, the
# scaling benchmark against its PyTorch DDP peer (studies/ddp_peer.py), alternately, R rounds.
#
# Efficiency = throughput(2 ranks) / (2 x throughput(1 rank)). Each side runs a 1-rank job on one
# CPU and a 2-rank job on two, each rank pinned to a CPU of its own (its loader with it: the
# benchmark's pipeline threads, the DataLoader's worker processes): the benchmark pins its local
# ranks itself (--ranks 2 --cpu-cores 2 under taskset of the two CPUs), the peer pins each rank it
# spawns. Same model (ResNet-18, the same parameters), same JPEG dataset, same augment
# (RandomResizedCrop --image-size, flip, ImageNet normalisation), each rank's shard dealt as
# DistributedSampler deals it, gradients averaged over Gloo in 25 MB buckets overlapped with
# backward, SGD(0.1, momentum 0.9, weight decay 1e-4), one intra-op thread and one loader worker a rank.
# The 1-rank jobs train the model as it is, with no reducer and no DDP, on both sides; the peer's
# 1-rank job is also run wrapped in DDP over a world of one (row `pt-ddp1`: its efficiency against
# that slower baseline, as this study computed it before 2026-11-29 16:30 UTC).
#
# Prints each round's figures, then medians [min-max]: throughput(1), throughput(2), efficiency,
# and each rank's stall share in the 2-rank job: data wait (prep and fetch: inside next()) and sync
# (blocked on the all-reduce after backward's computation), % of its step; and the 1-rank job's wait.
#
# Usage: studies/scaling_efficiency.sh [--build DIR] [--data DIR] [--rounds R] [--iterations N]
#                                      [--warmup W] [--image-size S] [--batch-size B]
# Defaults: build/, $DATA_DIRECTORY/fake-imagenet-small/train (data/ when unset), 3 rounds, 30 timed
# iterations after 10 of warm-up, 64 px, batch 16 per rank, 10 classes; the first two CPUs of this
# process's affinity. Run it under the CPU lock, alone on the machine.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
data="${DATA_DIRECTORY:-$root/data}/fake-imagenet-small/train"
rounds=3
iters=30
warm=10
size=64
batch=16
classes=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --iterations) iters=$2; shift 2 ;;
    --warmup) warm=$2; shift 2 ;;
    --image-size) size=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "scaling_efficiency.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bin="$build/benchmarks/scaling"
py=/usr/bin/python3
[[ -x "$bin" ]] || { echo "scaling_efficiency.sh: $bin not built (cmake --build build --target scaling)" >&2; exit 1; }
[[ -d "$data" ]] || { echo "scaling_efficiency.sh: no dataset at $data (build/bin/mlbench-datagen ensure fake-imagenet-small --root DIR)" >&2; exit 1; }
"$py" -c 'import torch, torchvision' 2>/dev/null || { echo "scaling_efficiency.sh: $py has no torch/torchvision (apt-get install python3-torch python3-torchvision)" >&2; exit 1; }
read -r c0 c1 < <("$py" -c 'import os; c = sorted(os.sched_getaffinity(0)); print(*c[:2])')
[[ -n "${c1:-}" ]] || { echo "scaling_efficiency.sh: needs 2 CPUs" >&2; exit 1; }
# The benchmark's loop: observations of 10 iterations, the warm-up whole observations.
number=10
repeat=$(( (warm + iters + number - 1) / number ))
bwarm=$(( (warm + number - 1) / number ))
flags=(--no-cuda --data "$data" --arch resnet18 --image-size "$size" --classes "$classes" --batch-size "$batch"
       --workers 1 --repeat "$repeat" --number "$number" --warmup "$bwarm" --rank-reports --baseline-iterations 1)
peer=("$py" "$root/studies/ddp_peer.py" --data "$data" --image-size "$size" --classes "$classes" --batch-size "$batch"
      --workers 1 --warmup "$warm" --iterations "$iters")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "data: $data ($(find "$data" -type f -name '*.*' ! -name '*.json' | wc -l) files); CPUs $c0,$c1; $iters timed iterations after $warm, batch $batch per rank, $size px"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

bench() {  # bench RANKS OUT
  local n=$1 out=$2 cpus=$c0
  [[ $n -gt 1 ]] && cpus="$c0,$c1"
  mkdir -p "$out"
  timeout 300 taskset -c "$cpus" "$bin" "${flags[@]}" --ranks "$n" --cpu-cores "$n" --report "$out" >"$out.log" 2>&1 ||
    { echo "scaling_efficiency.sh: scaling --ranks $n failed:"; tail -3 "$out.log"; exit 1; }
}
peer_run() {  # peer_run RANKS OUT [FLAGS...]
  local n=$1 out=$2 cpus=$c0
  shift 2
  [[ $n -gt 1 ]] && cpus="$c0,$c1"
  timeout 200 "${peer[@]}" --ranks "$n" --cpus "$cpus" "$@" >"$out.json" 2>"$out.log" ||
    { echo "scaling_efficiency.sh: ddp_peer.py --ranks $n failed:"; tail -30 "$out.log"; exit 1; }
}

for r in $(seq 1 "$rounds"); do
  # Alternate which side goes first, so that a drift of the host weighs on both alike.
  if (( r % 2 )); then order="bench peer"; else order="peer bench"; fi
  for side in $order; do
    if [[ $side == bench ]]; then bench 1 "$tmp/b1-$r"; bench 2 "$tmp/b2-$r"; else peer_run 1 "$tmp/p1-$r"; peer_run 1 "$tmp/q1-$r" --ddp-at-one; peer_run 2 "$tmp/p2-$r"; fi
  done
  echo "round $r done ($order); load $(cut -d' ' -f1 /proc/loadavg)" >&2
done

"$py" - "$tmp" "$rounds" <<'PY'
import glob, json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])

def bench(d):
    reps = {}
    for f in glob.glob(d + "/*.json"):
        j = json.load(open(f))
        reps[(j.get("rank") or {}).get("rank", 0)] = j
    return reps

def stall(j):
    st = j["stall"]
    it = st["iteration"]["avg"]
    return 100 * st["wait"]["avg"] / it, st.get("sync_pct") or 0.0

rows = {"mlbench": [], "pytorch": [], "pt-ddp1": []}
for r in range(1, rounds + 1):
    b1, b2 = bench(f"{tmp}/b1-{r}"), bench(f"{tmp}/b2-{r}")
    t1 = b1[0]["train_item"]["avg"]
    t2 = b2[0]["metrics"]["throughput_n"]
    (w0, s0), (w1, s1) = stall(b2[0]), stall(b2[1])
    rows["mlbench"].append([t1, t2, t2 / (2 * t1), stall(b1[0])[0], w0, s0, w1, s1])
    p1, p2 = json.load(open(f"{tmp}/p1-{r}.json")), json.load(open(f"{tmp}/p2-{r}.json"))
    q = {x["rank"]: x for x in p2["per_rank"]}
    rows["pytorch"].append([p1["images_per_s"], p2["images_per_s"], p2["images_per_s"] / (2 * p1["images_per_s"]),
                            p1["per_rank"][0]["wait_pct"], q[0]["wait_pct"], q[0]["sync_pct"], q[1]["wait_pct"], q[1]["sync_pct"]])
    d1 = json.load(open(f"{tmp}/q1-{r}.json"))
    rows["pt-ddp1"].append([d1["images_per_s"], p2["images_per_s"], p2["images_per_s"] / (2 * d1["images_per_s"]),
                            d1["per_rank"][0]["wait_pct"], q[0]["wait_pct"], q[0]["sync_pct"], q[1]["wait_pct"], q[1]["sync_pct"]])

cols = ["thru(1)/s", "thru(2)/s", "efficiency", "1r wait%", "r0 wait%", "r0 sync%", "r1 wait%", "r1 sync%"]
print("%-8s %-6s " % ("side", "round") + " ".join("%10s" % c for c in cols))
for side, rs in rows.items():
    for i, v in enumerate(rs, 1):
        print("%-8s %-6d " % (side, i) + " ".join("%10.3f" % x if k == 2 else "%10.1f" % x for k, x in enumerate(v)))
print()
print("medians [min-max] over %d rounds" % rounds)
for side, rs in rows.items():
    cells = []
    for k, c in enumerate(cols):
        v = [row[k] for row in rs]
        fmt = "%.3f" if k == 2 else "%.1f"
        cells.append(("%s " + fmt + " [" + fmt + "-" + fmt + "]") % (c, statistics.median(v), min(v), max(v)))
    print("%-8s " % side + "; ".join(cells))
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
