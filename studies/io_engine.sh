#!/usr/bin/env bash
# Read-ahead's two engines against each other (--io-engine threads against io_uring,
# docs/pipeline.md "Read-ahead"): the loader (`--workers 2 -b 64 --io-depth 8`) in
# --pairs pairs of runs, the side that runs first alternating, each run --epochs
# timed epochs after one of warm-up under --hold-page-cache, behind the data's disk
# throttled to --mbps MB/s (cgroup v1 blkio.throttle.read_bps_device; root, a real
# disk), with --cached-frac of the files (a fixed shuffle) made resident and the
# rest evicted before every run. Prints one line per run (engine, images/s over the
# timed epochs, user+sys CPU microseconds per image over the whole process, reads
# submitted, page-cache hits read inline), then per engine the median [min..max]
# and the paired change of io_uring against threads.
# Usage: studies/io_engine.sh --data DIR [--mbps 70] [--cached-frac 0.5] [--pairs 8] [--epochs 3]
# Env: MLBENCH_BUILD_DIR (default build): needs benchmarks/loader.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data=""; mbps=70; frac=0.5; pairs=8; epochs=3
while (($#)); do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --cached-frac) frac="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "io_engine.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$data" && -d "$data" ]] || { echo "io_engine.sh: error: --data DIR (an ImageFolder) is required" >&2; exit 2; }
[[ -x "$build/benchmarks/loader" ]] || { echo "io_engine.sh: error: $build/benchmarks/loader is not built" >&2; exit 2; }
py=/usr/bin/python3
# shellcheck source=studies/lib/blkio.sh
source "$root/studies/lib/blkio.sh"
blkio_setup io_engine.sh "$data" mlbench-io-engine "$mbps"
tmp=$(mktemp -d)
trap 'rmdir "$blkio_cg" 2>/dev/null || true; rm -rf "$tmp"' EXIT
find "$data" -type f | sort >"$tmp/files"

# shellcheck source=studies/lib/page_cache.sh
source "$root/studies/lib/page_cache.sh"

run() {  # $1: engine; prints "engine images/s cpu_us_per_image reads inline_reads"
  local dir; dir=$(mktemp -d -p "$tmp")
  page_cache_set "$tmp/files" "$frac"  # the first --cached-frac of a fixed shuffle resident, the rest evicted
  /usr/bin/time -f "%U %S" -o "$dir/time" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$blkio_cg" \
    "$build/benchmarks/loader" --data "$data" --workers 2 -b 64 --io-depth 8 --no-cuda --epochs $((epochs + 1)) \
    --number 1 --warmup 0 --hold-page-cache --io-engine "$1" --report "$dir" >"$dir/log" 2>&1 ||
    { cat "$dir/log" >&2; return 1; }
  "$py" - "$dir" "$1" <<'PY'
import glob, json, sys
p = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))["pipeline"]
timed = p["epochs"][1:]
user, system = map(float, open(sys.argv[1] + "/time").read().split())
images = sum(e["images"] for e in p["epochs"])
ra = p["read_ahead"]
print(f'{ra["engine"]} {sum(e["images"] for e in timed) / sum(e["seconds"] for e in timed):.0f} '
      f'{(user + system) / images * 1e6:.0f} {ra["reads"]} {ra["inline_reads"]}')
PY
}

echo "io_engine.sh: $data behind $blkio_disk throttled to $mbps MB/s, ${frac} of the files resident," \
  "$pairs pairs, $epochs epochs per run; load: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$tmp/runs"
for ((i = 1; i <= pairs; i++)); do
  if ((i % 2)); then order="threads io_uring"; else order="io_uring threads"; fi
  for e in $order; do run "$e" | tee -a "$tmp/runs"; done
done
"$py" - "$tmp/runs" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
side = {e: [(float(r[1]), float(r[2])) for r in rows if r[0] == e] for e in ("threads", "io_uring")}
if not side["io_uring"]:
    print("io_uring cannot be set up here: every run read ahead on threads (the loader warned why)")
    sys.exit(0)
f = lambda v, p=0: f"{st.median(v):.{p}f} [{min(v):.{p}f}..{max(v):.{p}f}]"
for e, v in side.items():
    print(f"{e:8s} images/s {f([x[0] for x in v])}, CPU us per image {f([x[1] for x in v])}")
t, u = side["threads"], side["io_uring"]
gain = [100 * (b[0] - a[0]) / a[0] for a, b in zip(t, u)]
cpu = [100 * (b[1] - a[1]) / a[1] for a, b in zip(t, u)]
print(f"io_uring against threads, paired: images/s {f(gain, 1)} %, CPU per image {f(cpu, 1)} %; "
      f"io_uring faster in {sum(g > 0 for g in gain)} of {len(gain)} pairs")
PY
