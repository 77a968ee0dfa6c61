#!/usr/bin/env bash
# Issue 14's two tables, re-measured on one dataset at one disk speed: the
# disk holding --data is throttled with cgroup v1 blkio.throttle.read_bps_device
# (a cgroup this script creates and removes; needs root and a real disk, not
# tmpfs), and inside it:
#   1. mlbench-stall on `loader --workers 2 --batch-size 64` at its default
#      --cache-fracs: the analyzer's own check of its item-cache what-if;
#   2. independently, at each --fracs fraction: the dataset evicted, that
#      fraction of its files (a random subset) read into the page cache and
#      checked with fincore (mincore), then one epoch of the loader (no item
#      cache, no --drop-after-read: each file is read once) against the
#      analyzer's page-cache what-if at the resident fraction measured.
# Prints both tables as markdown, with the load (uptime) beside them.
# Usage: bench/whatif_tables.sh --data DIR --mbps N [--fracs 0.3,0.6] [--rounds 2] [--out DIR] [--iterations 100]
# Env: MLBENCH_BUILD_DIR (default build): needs bin/mlbench-stall and benchmarks/loader.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data=""; mbps=""; fracs="0.3,0.6"; rounds=2; out=""; iterations=100
while (($#)); do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --fracs) fracs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "whatif_tables.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$data" && -d "$data" ]] || { echo "whatif_tables.sh: error: --data DIR (an ImageFolder) is required" >&2; exit 2; }
[[ "$mbps" =~ ^[0-9]+$ ]] || { echo "whatif_tables.sh: error: --mbps N (MB/s, an integer) is required" >&2; exit 2; }
for exe in "$build/bin/mlbench-stall" "$build/benchmarks/loader"; do
  [[ -x "$exe" ]] || { echo "whatif_tables.sh: error: $exe is missing (build it, or set MLBENCH_BUILD_DIR)" >&2; exit 2; }
done
blkio=/sys/fs/cgroup/blkio
[[ -w "$blkio" && -e "$blkio/blkio.throttle.read_bps_device" ]] ||
  { echo "whatif_tables.sh: error: cgroup v1 blkio throttling is unavailable here (needs root and $blkio)" >&2; exit 2; }
fstype=$(findmnt -no FSTYPE -T "$data")
[[ "$fstype" != tmpfs ]] || { echo "whatif_tables.sh: error: $data is on tmpfs: no disk to throttle" >&2; exit 2; }
disk=$(findmnt -no SOURCE -T "$data")
parent=$(lsblk -no PKNAME "$disk" 2>/dev/null | head -1)
[[ -n "$parent" ]] && disk="/dev/$parent"
majmin=$(lsblk -dno MAJ:MIN "$disk" | tr -d ' ')
out="${out:-/tmp/whatif-tables-$(basename "$(dirname "$data")")-${mbps}}"
mkdir -p "$out"
cg="$blkio/mlbench-whatif-$$"
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo "$majmin $((mbps * 1000000))" > "$cg/blkio.throttle.read_bps_device"
# Runs a command inside the throttled cgroup.
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
echo "# $data on $disk ($majmin) throttled to $mbps MB/s; load: $(uptime | sed 's/.*load/load/')"

# Table 1: the analyzer's own check.
in_cg "$build/bin/mlbench-stall" --bench loader --bench-dir "$build/benchmarks" --data "$data" --out "$out/stall" \
  --iterations "$iterations" -- --workers 2 --batch-size 64 --no-cuda > "$out/stall.log" 2>&1 ||
  { echo "whatif_tables.sh: error: mlbench-stall failed (see $out/stall.log)" >&2; exit 1; }
python3 - "$out/stall/stall.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
w = r["whatif"]
print(f"\nmodel: {w['model']} ({w['cache']}); rates: " + ", ".join(f"{k} {v:.0f}" for k, v in r["rates"].items() if k != "unit"))
if w.get("serial"):
    s = w["serial"]
    print(f"serial model: prep {s['prep_us']:.0f} us, storage {s['storage_us']:.0f} us, page-cache hit {s['page_hit_us']:.0f} us;"
          f" cold run predicted {s['predicted_cold']:.0f}/s against {r['rates']['F_obs']:.0f}/s ({s['cold_error_pct']:.1f}%)")
print("\n| item cache | measured img/s | predicted | off |\n|---|---|---|---|")
for m in w["measured"]:
    print(f"| {100*m['x']:.0f}% | {m['measured']:,.0f} | {m['predicted']:,.0f} | {m['error_pct']:.1f}% |")
print(f"\nverdict: {r['recommendation']['verdict']}")
EOF

# Table 2: the page cache, made resident independently of the analyzer.
files="$out/files.txt"
find "$data" -type f | sort > "$files"
echo -e "\n| disk | page cache (fincore) | measured img/s | page-cache what-if | error |\n|---|---|---|---|---|"
IFS=, read -ra fr <<< "$fracs"
for f in "${fr[@]}"; do
  for ((round = 1; round <= rounds; ++round)); do
    resident=$(python3 - "$files" "$f" "$round" <<'EOF'
import os, random, subprocess, sys
files = open(sys.argv[1]).read().split("\n")[:-1]
frac, seed = float(sys.argv[2]), int(sys.argv[3])
for p in files:  # evict every file
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
for p in random.Random(seed).sample(files, round(frac * len(files))):
    with open(p, "rb") as fh: fh.read()
total = sum(os.path.getsize(p) for p in files)
res = 0
for i in range(0, len(files), 500):  # fincore: resident bytes per file (mincore)
    outp = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES"] + files[i:i + 500],
                          capture_output=True, text=True, check=True).stdout
    res += sum(int(x) for x in outp.split())
print(f"{res / total:.4f}")
EOF
)
    rdir="$out/pc-$f-$round"
    rm -rf "$rdir"; mkdir -p "$rdir"
    in_cg "$build/benchmarks/loader" --data "$data" --workers 2 --batch-size 64 --repeat 6 --number 5 --warmup 1 \
      --no-cuda --report "$rdir" > "$rdir/log" 2>&1 || { echo "whatif_tables.sh: error: loader failed ($rdir/log)" >&2; exit 1; }
    python3 - "$out/stall/stall.json" "$rdir" "$resident" "$mbps" <<'EOF'
import glob, json, sys
r = json.load(open(sys.argv[1]))
rep = json.load(open(glob.glob(sys.argv[2] + "/*.json")[0]))
x = float(sys.argv[3])
curve = r["whatif"]["page_cache"]["curve"]
for a, b in zip(curve, curve[1:]):  # linear between the curve's points (every 5%)
    if a["x"] <= x <= b["x"]:
        pred = a["predicted"] + (x - a["x"]) / (b["x"] - a["x"]) * (b["predicted"] - a["predicted"])
meas = rep["train_item"]["avg"] if isinstance(rep["train_item"], dict) else rep["train_item"]
print(f"| {sys.argv[4]} MB/s | {100 * x:.0f}% | {meas:,.0f} | {pred:,.0f} | {100 * (pred - meas) / meas:+.1f}% |")
EOF
  done
done
