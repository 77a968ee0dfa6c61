#!/usr/bin/env bash
# The partitioned cache (docs/pipeline.md "Partitioned cache"; its figures: docs/performance.md, "Partitioned cache"):
# N `loader` processes ("nodes") on this machine read one dataset from a disk
# throttled with cgroup v1 blkio.throttle.read_bps_device (a cgroup this script
# creates and removes; every node inside it, so they share the throttled disk as
# N nodes share one storage server), each with an item cache of 1/N of the
# dataset, for --epochs epochs, in two modes, alternating in every round:
#   own          each node caches its first 1/N on its own (no --peers)
#   partitioned  --peers on loopback: each node caches its partition, asks the owner for the rest
# Every read from storage is a real disk read (--drop-after-read). Per mode and N:
# the nodes' epoch-2+ img/s (each node's images / seconds of epochs 2..E, from the
# report's pipeline.epochs; median and min-max over nodes and rounds), the bytes
# read from storage by all nodes together (pipeline.bytes_read without --peers;
# partitioned_cache.storage.bytes + served.storage_bytes with), and the wall time.
# --pin: node r runs on CPU r mod (CPUs) only (taskset), so with as many nodes as CPUs each node
# has a CPU of its own, as nodes of a cluster do; without it the nodes share every CPU.
# --local: a third mode in every round, "local": each node the whole dataset in its item cache, no
# peers (the partitioned nodes' CPU without peer fetches, measured beside them: mlbench-stall's
# peer runs on the same footing); then a second table, per round, partitioned against local: the
# speed ratio and each mode's CPU per sample (epochs 2+, the loader's pipeline.epochs[].cpu_s), and
# the CPU of one peer fetch they imply, k = (CPU partitioned - CPU local) / ((N-1)/N).
# --unbatched: a mode more in every round, "unbatched": partitioned with --peer-batch 1 (one request
# to a peer per item, as before batched peer fetches); with --local, it gets rows of its own in the
# second table.
# Usage: studies/partitioned_cache.sh --data DIR [--mbps 20] [--nodes 2,4] [--epochs 4] [--rounds 2]
#          [--pin] [--local] [--unbatched] [--out DIR] [-- loader flags]
#   loader flags default: -b 32 --workers 1 --image-size 64 --no-cuda --cpu-cores 1
# Env: MLBENCH_BUILD_DIR (default build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data=""; mbps=20; nodes=2,4; epochs=4; rounds=2; out=""; pin=0; local=0; unbatched=0
flags=(-b 32 --workers 1 --image-size 64 --no-cuda --cpu-cores 1)
while (($#)); do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --pin) pin=1; shift ;;
    --local) local=1; shift ;;
    --unbatched) unbatched=1; shift ;;
    --) shift; flags=("$@"); break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "partitioned_cache.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$data" && -d "$data" ]] || { echo "partitioned_cache.sh: error: --data DIR (an ImageFolder) is required" >&2; exit 2; }
[[ "$mbps" =~ ^[1-9][0-9]*$ ]] || { echo "partitioned_cache.sh: error: --mbps must be a positive integer" >&2; exit 2; }
[[ "$nodes" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "partitioned_cache.sh: error: --nodes must be like 2,4" >&2; exit 2; }
[[ "$epochs" =~ ^[2-9][0-9]*$|^[1-9][0-9]+$ ]] || { echo "partitioned_cache.sh: error: --epochs must be 2 or more" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "partitioned_cache.sh: error: --rounds must be a positive integer" >&2; exit 2; }
loader="$build/benchmarks/loader"
[[ -x "$loader" ]] || { echo "partitioned_cache.sh: error: $loader is missing (build it, or set MLBENCH_BUILD_DIR)" >&2; exit 2; }
out="${out:-$(mktemp -d /tmp/partitioned_cache.XXXXXX)}"
mkdir -p "$out"
source "$root/studies/lib/blkio.sh"
blkio_setup partitioned_cache.sh "$data" mlbench-partitioned "$mbps"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.2
  rmdir "$blkio_cg" 2>/dev/null || true
}
trap cleanup EXIT
items=$(find "$data" -type f | wc -l)
bs=32
for ((i = 0; i < ${#flags[@]}; i++)); do [[ "${flags[$i]}" == -b || "${flags[$i]}" == --batch-size ]] && bs=${flags[$((i + 1))]}; done
bpe=$((items / bs))
echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/')"
echo "# $data ($items files, $(du -sm "$data" | cut -f1) MB) on $blkio_disk ($blkio_majmin) throttled to $mbps MB/s; $epochs epochs of $bpe batches"
echo "# loader ${flags[*]} --drop-after-read --repeat $epochs --number $bpe --warmup 0; out: $out"

# The CPUs this script may use (its affinity), for --pin.
mapfile -t cpu_list < <(/usr/bin/python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
((pin)) && echo "# --pin: node r on CPU r mod ${#cpu_list[@]} of ${cpu_list[*]}"

# N free ports, picked together so that they are N (picked one by one, two can be one port).
free_ports() {
  /usr/bin/python3 -c 'import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

run_mode() {  # mode n round
  local mode=$1 n=$2 round=$3 dir="$out/$1-n$2-r$3" peers="" share
  mkdir -p "$dir"
  share=$(/usr/bin/python3 -c "print(f'{100.0/$n:.4f}%')")
  [[ $mode == local ]] && share=100%
  if [[ $mode == partitioned || $mode == unbatched ]]; then
    local list=() port
    for port in $(free_ports "$n"); do list+=("127.0.0.1:$port"); done
    peers=$(IFS=,; echo "${list[*]}")
  fi
  # Nothing of the dataset in the page cache at the start (only its files: dropping every cache
  # would make the nodes load LibTorch through the throttle).
  /usr/bin/python3 -c 'import os, sys
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        fd = os.open(os.path.join(d, f), os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$data"
  local start end
  start=$(date +%s.%N)
  pids=()
  for ((r = 0; r < n; r++)); do
    local extra=()
    [[ -n "$peers" ]] && extra=(--peers "$peers" --rank "$r")
    [[ $mode == unbatched ]] && extra+=(--peer-batch 1)
    local on_cpu=()
    ((pin)) && on_cpu=(taskset -c "${cpu_list[$((r % ${#cpu_list[@]}))]}")
    in_cg "${on_cpu[@]}" "$loader" --data "$data" "${flags[@]}" --drop-after-read --cache-size "$share" --repeat "$epochs" \
      --number "$bpe" --warmup 0 --seed $((round * 100 + r)) --report "$dir/node$r" "${extra[@]}" \
      > "$dir/node$r.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  pids=()
  end=$(date +%s.%N)
  ((failed == 0)) || { echo "partitioned_cache.sh: error: a node failed (see $dir/node*.log)" >&2; exit 1; }
  echo "$mode $n $round $(/usr/bin/python3 -c "print($end - $start)")" >> "$out/runs.txt"
}

: > "$out/runs.txt"
IFS=, read -ra ns <<< "$nodes"
for n in "${ns[@]}"; do
  for ((round = 0; round < rounds; round++)); do
    run_mode own "$n" "$round"
    run_mode partitioned "$n" "$round"
    ((unbatched)) && run_mode unbatched "$n" "$round"
    ((local)) && run_mode local "$n" "$round"
  done
done

/usr/bin/python3 - "$out" "$epochs" "$root/studies/lib" <<'EOF'
import glob, json, os, statistics, sys
out, epochs = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from node_speed import epochs2
walls = {}
for line in open(os.path.join(out, "runs.txt")):
    mode, n, rnd, wall = line.split()
    walls.setdefault((mode, int(n)), []).append(float(wall))
def med(xs):
    return f"{statistics.median(xs):,.0f} [{min(xs):,.0f}-{max(xs):,.0f}]"
print("\n| nodes | mode | epoch 2+ img/s per node | storage MB, all nodes | peer items per node | peer requests per node | peer failures | wall s |")
print("|---|---|---|---|---|---|---|---|")
for (mode, n) in sorted(walls, key=lambda k: (k[1], k[0] != "own")):
    speeds, mbs, peer, reqs, fails = [], [], [], [], []
    for rd in sorted(glob.glob(os.path.join(out, f"{mode}-n{n}-r*"))):
        total = 0
        speeds += [s for s, _ in epochs2(rd)]
        for f in glob.glob(os.path.join(rd, "node*", "*.json")):
            p = json.load(open(f))["pipeline"]
            pc = p.get("partitioned_cache")
            if pc:
                total += pc["storage"]["bytes"] + pc["served"]["storage_bytes"]
                peer.append(pc["peer"]["cache_items"] + pc["peer"]["storage_items"])
                if "requests" in pc["peer"]:
                    reqs.append(pc["peer"]["requests"])
                fails.append(pc["peer_failures"])
            else:
                total += p["bytes_read"]
        mbs.append(total / 1e6)
    w = walls[(mode, n)]
    print(f"| {n} | {mode} | {med(speeds)} | {med(mbs)} | {med(peer) if peer else '–'} | {med(reqs) if reqs else '–'} | "
          f"{sum(fails) if peer else '–'} | {statistics.median(w):.1f} [{min(w):.1f}-{max(w):.1f}] |")

# --local: partitioned (and unbatched) against local, round by round (they ran one after the other).
rows = []
for (mode, n) in sorted(walls):
    if mode != "local":
        continue
    for rd, peer_mode in [(rd, m) for m in ("partitioned", "unbatched")
                          for rd in sorted(glob.glob(os.path.join(out, f"local-n{n}-r*")))]:
        rnd = rd.rsplit("-r", 1)[1]
        loc, part = epochs2(rd), epochs2(os.path.join(out, f"{peer_mode}-n{n}-r{rnd}"))
        if not loc or not part:
            continue
        sl, sp = statistics.median(s for s, _ in loc), statistics.median(s for s, _ in part)
        cl = [c for _, c in loc if c is not None]
        cp = [c for _, c in part if c is not None]
        ml, mp = (statistics.mean(cl), statistics.mean(cp)) if cl and cp else (None, None)
        k = (mp - ml) / ((n - 1) / n) if ml is not None and n > 1 else None
        rows.append(f"| {n} | {peer_mode} | {rnd} | {sl:,.0f} | {sp:,.0f} | {sp / sl:.3f} | "
                    + (f"{ml:.0f} | {mp:.0f} | {k:.0f} |" if k is not None else "– | – | – |"))
if rows:
    print("\n| nodes | mode | round | local img/s per node | with peers | with peers / local | CPU us a sample, local | with peers | k implied, us |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
EOF
