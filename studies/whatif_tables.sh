#!/usr/bin/env bash
# The two tables of the cache what-ifs (docs/stall.md, "Held out: how the answers
# did"), on one dataset at one disk speed: the disk holding --data is throttled
# with cgroup v1 blkio.throttle.read_bps_device (a cgroup this script creates and
# removes; needs root and a real disk, not tmpfs), and inside it:
#   1. mlbench-stall on `loader --workers 2 --batch-size 64` at its default
#      --cache-fracs, --analyses times: the analyzer's own check of its
#      item-cache what-if (median measured and predicted per fraction);
#   2. independently, at each --fracs fraction, --rounds times: the dataset
#      evicted, that fraction of its files (a random subset, one per round)
#      read into the page cache and checked with fincore (mincore), then the
#      loader (no item cache) for --epochs timed epochs after one of warm-up
#      (default 30: at a resident share where the misses come near the disk's
#      rate an epoch's rate moves by 10-13% with its order, so the state's
#      mean needs tens of epochs; each round's 95% half-width is printed),
#      under --hold-page-cache (a read that brought a file in drops it again,
#      so every epoch sees the fraction made), against the analyzer's
#      page-cache what-if at the resident fraction measured (one prediction
#      per analysis: their median and range; and each round against the
#      analysis run just before it).
# The two kinds of run alternate (analysis 1, page-cache round 1, analysis 2,
# ...), so a host whose speed drifts over minutes weighs on both alike.
# Prints both tables as markdown (median [min-max]), with the load (uptime).
# Usage: studies/whatif_tables.sh --data DIR --mbps N [--fracs 0.3,0.6] [--rounds 3]
#        [--analyses 3] [--epochs 30] [--iterations 100] [--out DIR] [--io-depth N] [--stall-rounds 1]
# --stall-rounds N: each analysis is mlbench-stall --rounds N (every run N times, its median).
# --reanalyze (with --out DIR of an earlier run, --analyses and --mbps as then): measure nothing;
#   model each analysis of DIR again with today's mlbench-stall (--reanalyze) and print the tables.
# Env: MLBENCH_BUILD_DIR (default build): needs bin/mlbench-stall and benchmarks/loader.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
data=""; mbps=""; fracs="0.3,0.6"; rounds=3; analyses=3; epochs=30; out=""; iterations=100; io_depth=""; stall_rounds=1
reanalyze=0
while (($#)); do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --mbps) mbps="$2"; shift 2 ;;
    --fracs) fracs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --analyses) analyses="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --io-depth) io_depth="$2"; shift 2 ;;
    --stall-rounds) stall_rounds="$2"; shift 2 ;;
    --reanalyze) reanalyze=1; shift ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "whatif_tables.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ((reanalyze)); then
  [[ -n "$out" && -f "$out/page_cache.jsonl" ]] || { echo "whatif_tables.sh: error: --reanalyze needs --out DIR of an earlier run (with page_cache.jsonl)" >&2; exit 2; }
  [[ "$mbps" =~ ^[0-9]+$ ]] || { echo "whatif_tables.sh: error: --mbps N (as the run had) is required" >&2; exit 2; }
  for ((i = 1; i <= analyses; ++i)); do
    "$build/bin/mlbench-stall" --reanalyze "$out/stall-$i" > "$out/stall-$i.reanalysis.log" 2>&1 ||
      { echo "whatif_tables.sh: error: mlbench-stall --reanalyze failed (see $out/stall-$i.reanalysis.log)" >&2; exit 1; }
  done
fi
[[ -n "$data" && -d "$data" ]] || ((reanalyze)) || { echo "whatif_tables.sh: error: --data DIR (an ImageFolder) is required" >&2; exit 2; }
[[ "$mbps" =~ ^[0-9]+$ ]] || { echo "whatif_tables.sh: error: --mbps N (MB/s, an integer) is required" >&2; exit 2; }
for n in "$rounds" "$analyses" "$epochs" "$iterations" "$stall_rounds"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "whatif_tables.sh: error: --rounds, --analyses, --epochs, --iterations and --stall-rounds take a positive integer, got '$n'" >&2; exit 2; }
done
[[ -z "$io_depth" || "$io_depth" =~ ^[0-9]+$ ]] || { echo "whatif_tables.sh: error: --io-depth N (an integer)" >&2; exit 2; }
for exe in "$build/bin/mlbench-stall" "$build/benchmarks/loader"; do
  [[ -x "$exe" ]] || { echo "whatif_tables.sh: error: $exe is missing (build it, or set MLBENCH_BUILD_DIR)" >&2; exit 2; }
done
if ! ((reanalyze)); then
out="${out:-/tmp/whatif-tables-$(basename "$(dirname "$data")")-${mbps}}"
mkdir -p "$out"
source "$root/studies/lib/blkio.sh"
blkio_setup whatif_tables.sh "$data" mlbench-whatif "$mbps"
trap 'rmdir "$blkio_cg" 2>/dev/null || true' EXIT
batch=64
loader_flags=(--workers 2 --batch-size "$batch" --no-cuda)
[[ -n "$io_depth" ]] && loader_flags+=(--io-depth "$io_depth")
echo "# $data on $blkio_disk ($blkio_majmin) throttled to $mbps MB/s; load: $(uptime | sed 's/.*load/load/')"

# Table 2: the page cache, made resident independently of the analyzer.
files="$out/files.txt"
find "$data" -type f | sort > "$files"
per_epoch=$(( $(wc -l < "$files") / batch ))
((per_epoch >= 1)) || { echo "whatif_tables.sh: error: $data has fewer than $batch files (one batch)" >&2; exit 2; }
: > "$out/page_cache.jsonl"
resident_of() {  # fraction of the dataset's pages resident (fincore, i.e. mincore)
  python3 - "$files" <<'EOF'
import os, subprocess, sys
files = open(sys.argv[1]).read().split("\n")[:-1]
page = os.sysconf("SC_PAGE_SIZE")  # fincore counts whole pages: so must the total
total = sum(-(-os.path.getsize(p) // page) * page for p in files)
res = 0
for i in range(0, len(files), 500):
    outp = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES"] + files[i:i + 500],
                          capture_output=True, text=True, check=True).stdout
    res += sum(int(x) for x in outp.split())
print(f"{res / total:.4f}")
EOF
}
IFS=, read -ra fr <<< "$fracs"
page_cache_round() {  # one round: every fraction made resident, then read under --hold-page-cache
  local round=$1 f before after rdir
  for f in "${fr[@]}"; do
    echo "page cache $f, round $round of $rounds ..." >&2
    python3 - "$files" "$f" "$round" <<'EOF'
import os, random, sys
files = open(sys.argv[1]).read().split("\n")[:-1]
frac, seed = float(sys.argv[2]), int(sys.argv[3])
for p in files:  # evict every file
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
for p in random.Random(seed).sample(files, round(frac * len(files))):
    with open(p, "rb") as fh: fh.read()
EOF
    before=$(resident_of)
    rdir="$out/pc-$f-$round"
    rm -rf "$rdir"; mkdir -p "$rdir"
    in_cg "$build/benchmarks/loader" --data "$data" "${loader_flags[@]}" --hold-page-cache \
      --repeat $((epochs + 1)) --number "$per_epoch" --warmup 1 --report "$rdir" > "$rdir/log" 2>&1 ||
      { echo "whatif_tables.sh: error: loader failed ($rdir/log)" >&2; exit 1; }
    after=$(resident_of)
    python3 - "$rdir" "$f" "$before" "$after" "$round" >> "$out/page_cache.jsonl" <<'EOF'
import glob, json, sys
rep = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
meas = rep["train_item"]["avg"] if isinstance(rep["train_item"], dict) else rep["train_item"]
st = rep.get("stability", {})
n = st.get("observations") or 0
# 95% half-width of the round's mean rate over its epochs (Student's t, n - 1 degrees of freedom)
t95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
       15: 2.13, 20: 2.09, 30: 2.04, 60: 2.00}
t = next((v for k, v in sorted(t95.items()) if n - 1 <= k), 1.96)
hw = t * st["sd_pct"] / n ** 0.5 if n > 1 and st.get("sd_pct") is not None else None
print(json.dumps({"frac": float(sys.argv[2]), "before": float(sys.argv[3]), "after": float(sys.argv[4]),
                  "round": int(sys.argv[5]), "measured": meas, "sd_pct": st.get("sd_pct"),
                  "epochs": n, "half_width_pct": hw}))
EOF
  done
}

# The two tables' runs interleaved (analysis 1, page-cache round 1, analysis 2, ...): a shared host's
# speed drifts by more than 5% over minutes (docs/stall.md, "--rounds N"), and runs taken in one
# block after the other would compare the analyses' host with the page-cache runs' host.
for ((i = 1; i <= analyses || i <= rounds; ++i)); do
  if ((i <= analyses)); then
    echo "analysis $i of $analyses ..." >&2
    in_cg "$build/bin/mlbench-stall" --bench loader --bench-dir "$build/benchmarks" --data "$data" --out "$out/stall-$i" \
      --iterations "$iterations" --rounds "$stall_rounds" -- "${loader_flags[@]}" > "$out/stall-$i.log" 2>&1 ||
      { echo "whatif_tables.sh: error: mlbench-stall failed (see $out/stall-$i.log)" >&2; exit 1; }
  fi
  if ((i <= rounds)); then page_cache_round "$i"; fi
done
fi

python3 - "$out" "$analyses" "$mbps" <<'EOF'
import json, statistics, sys
out, analyses, mbps = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [json.load(open(f"{out}/stall-{a}/stall.json")) for a in range(1, analyses + 1)]
def mm(v, fmt="{:,.0f}"):
    return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}-{fmt.format(max(v))}]"
def err(pred, meas):
    return 100 * (pred - meas) / meas
w0 = runs[0]["whatif"]
print(f"\nmodel: {w0['model']} ({w0['cache']}); {analyses} analyses; rates, median [min-max]: " +
      ", ".join(f"{k} {mm([r['rates'][k] for r in runs])}" for k in runs[0]["rates"] if k != "unit"))
print("\n| item cache | measured img/s | predicted | error of the medians | errors, per analysis |\n|---|---|---|---|---|")
for i, m in enumerate(w0["measured"]):
    meas = [r["whatif"]["measured"][i]["measured"] for r in runs]
    pred = [r["whatif"]["measured"][i]["predicted"] for r in runs]
    each = ", ".join(f"{r['whatif']['measured'][i]['error_pct']:.1f}%" for r in runs)
    print(f"| {100*m['x']:.0f}% | {mm(meas)} | {mm(pred)} | {err(statistics.median(pred), statistics.median(meas)):+.1f}% | {each} |")
for a, r in enumerate(runs, 1):
    print(f"\nverdict {a}: {r['recommendation']['verdict']}")

for a, r in enumerate(runs, 1):
    rec = r["recommendation"]
    if rec.get("page_cache_fraction") is not None:
        print(f"recommendation {a}: page cache {100 * rec['page_cache_fraction']:.0f}% (knee "
              f"{100 * r['whatif']['page_cache'].get('knee_fraction', float('nan')):.0f}%), item cache "
              f"{100 * rec['cache_fraction']:.0f}%: {rec['predicted']:,.0f}/s predicted "
              f"[{rec['predicted_range'][0]:,.0f}-{rec['predicted_range'][1]:,.0f}]")
    else:
        print(f"recommendation {a}: none ({rec.get('remedy_text', '')})")

def predict(r, x, key="predicted"):  # the page-cache curve, linear between its points (every 5%)
    curve = r["whatif"]["page_cache"]["curve"]
    for a, b in zip(curve, curve[1:]):
        if a["x"] <= x <= b["x"]:
            return a.get(key, a["predicted"]) + (x - a["x"]) / (b["x"] - a["x"]) * (
                b.get(key, b["predicted"]) - a.get(key, a["predicted"]))
    return curve[-1].get(key, curve[-1]["predicted"])
rows = [json.loads(l) for l in open(f"{out}/page_cache.jsonl")]
print("\n| disk | page cache (fincore, before / after) | measured img/s | page-cache what-if | range stated "
      "(median analysis) | error of the medians | errors, per round (against its analysis) | rounds' 95% half-width "
      "| within 5% or inside the range |\n|---|---|---|---|---|---|---|---|---|")
for f in sorted({r["frac"] for r in rows}):
    rs = [r for r in rows if r["frac"] == f]
    x = statistics.median(r["before"] for r in rs)
    meas = [r["measured"] for r in rs]
    pred = [predict(r, x) for r in runs]
    res = f"{100*x:.0f}% / {100*statistics.median(r['after'] for r in rs):.0f}%"
    # Each round against the analysis run just before it (same number): the pair shares the host's speed.
    paired = ", ".join(f"{err(predict(runs[r['round'] - 1], r['before']), r['measured']):+.1f}%"
                       for r in rs if "round" in r and r["round"] <= len(runs)) or "-"
    mid = sorted(runs, key=lambda r: predict(r, x))[(len(runs) - 1) // 2]
    lo, hi = predict(mid, x, "lo"), predict(mid, x, "hi")
    inside = "inside" if lo <= statistics.median(meas) <= hi else "outside"
    e = err(statistics.median(pred), statistics.median(meas))
    hws = [r["half_width_pct"] for r in rs if r.get("half_width_pct") is not None]
    hw = f"±{min(hws):.1f}-{max(hws):.1f}% ({rs[0].get('epochs', '?')} epochs)" if hws else "-"
    ok = "yes" if abs(e) <= 5 or inside == "inside" else "**no**"
    print(f"| {mbps} MB/s | {res} | {mm(meas)} | {mm(pred)} | {lo:,.0f}-{hi:,.0f} "
          f"({100 * (hi - lo) / 2 / predict(mid, x):.1f}%; the measured median {inside}) "
          f"| {e:+.1f}% | {paired} | {hw} | {ok} |")
EOF
