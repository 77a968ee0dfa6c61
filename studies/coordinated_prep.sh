#!/usr/bin/env bash
# Coordinated prep (docs/pipeline.md "Coordinated prep"; its figures: docs/performance.md, "Coordinated prep"):
# K concurrent jobs of one benchmark on this machine, all reading the same data
# with the same seed, each job prepping everything itself ("plain") against the
# same K jobs under --coordinated K ("coord"), alternating plain, coord in every
# round, over --rounds rounds. Reports per-job img/s (each job's
# train_item.avg), the group's total CPU seconds (user + sys, bash's `times`,
# summed over the K jobs) and wall seconds: medians and min-max over rounds
# (img/s: over every job of every round).
# With --predict it first runs mlbench-stall once on one job with the same flags
# (--cpus 1,N, so that P(1 CPU) is measured) and prints its whatif.coordinated
# predictions beside the measured medians, with the error.
# With --cycles N (implies --predict) it does that N times, each cycle an analysis, the rounds
# and an analysis again (the host of a VM moves between minutes), and ends with every analysis
# against the rounds it came before or after, and the summary the cache what-if is judged by
# (docs/stall.md, "Held out: how the answers did"): per point, the median of all 2N predictions
# against the median of every job of every cycle; and how many analysis-round comparisons are
# within 5%.
# Usage: studies/coordinated_prep.sh [--bench loader] [--dataset fake-imagenet-small] [--data-root /tmp/coordprep-data]
#          [--jobs 2,4] [--rounds 3] [--predict] [--cycles N] [--stall-iterations 60] [--stall-rounds 1]
#          [--out DIR] [-- benchmark flags]
#   --out DIR: where the runs, logs and the analysis go (default: a new /tmp/coordinated_prep.XXXXXX)
#   --stall-iterations N: mlbench-stall's --iterations for --predict (default 60; a fast GPU needs
#     more: each run's timed loop should last seconds, not one)
#   --stall-rounds N: mlbench-stall's --rounds for --predict (default 1: each rate from one run; N:
#     the median of N, so that one slow moment of the host does not set P(1 CPU))
#   benchmark flags default: -b 16 --workers 1 --image-size 64 --repeat 10 --number 10 --no-cuda --io-depth 0
# Each row also gives a job's CPU per sample over its timed loop (process_cpu.per_item_us) and
# how long that loop lasted: median [min-max] over every job of every round.
# Env: MLBENCH_BUILD_DIR (default build), MLBENCH_NO_BUILD=1 (use the built binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MLBENCH_BUILD_DIR:-$root/build}"
out=""; stall_iterations=60; stall_rounds=1; bench=loader; dataset=fake-imagenet-small; data_root=/tmp/coordprep-data; jobs=2,4; rounds=3; predict=0; cycles=0
flags=(-b 16 --workers 1 --image-size 64 --repeat 10 --number 10 --no-cuda --io-depth 0)
while (($#)); do
  case "$1" in
    --bench) bench="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --data-root) data_root="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --predict) predict=1; shift ;;
    --cycles) cycles="$2"; predict=1; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --stall-iterations) stall_iterations="$2"; shift 2 ;;
    --stall-rounds) stall_rounds="$2"; shift 2 ;;
    --) shift; flags=("$@"); break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "coordinated_prep.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$stall_iterations" =~ ^[1-9][0-9]*$ ]] || { echo "coordinated_prep.sh: error: --stall-iterations must be a positive integer" >&2; exit 2; }
[[ "$stall_rounds" =~ ^[1-9][0-9]*$ ]] || { echo "coordinated_prep.sh: error: --stall-rounds must be a positive integer" >&2; exit 2; }
[[ "$cycles" =~ ^[0-9]+$ ]] || { echo "coordinated_prep.sh: error: --cycles must be a whole number (0: no cycles)" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "coordinated_prep.sh: error: --rounds must be a positive integer" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "coordinated_prep.sh: error: --jobs must be like 2,4" >&2; exit 2; }
[[ -n "${MLBENCH_NO_BUILD:-}" ]] || nice -n 19 cmake --build "$build" -j1 --target "$bench" mlbench-datagen mlbench-stall >/dev/null
"$build/bin/mlbench-datagen" ensure "$dataset" --root "$data_root" -q
train="$data_root/$dataset/train"
bin="$build/benchmarks/$bench"
if [[ -n "$out" ]]; then mkdir -p "$out"; else out=$(mktemp -d /tmp/coordinated_prep.XXXXXX); fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $bench ${flags[*]} on $train; out: $out"
# Pages of the dataset in memory for every run: the jobs measure prep, not the disk.
cat "$train"/*/* >/dev/null

# run_timed FILE CMD...: runs CMD and writes its user and sys CPU seconds into FILE
# (bash's `times` in a subshell: its children's; no GNU time needed).
run_timed() {
  local file=$1
  shift
  (
    "$@"
    rc=$?
    times >"$file.times"  # not in a pipe: that would be another subshell's times
    tail -n1 "$file.times" | sed -E 's/([0-9]+)m([0-9.]+)s/\1 \2/g' | awk '{print $1 * 60 + $2, $3 * 60 + $4}' >"$file"
    rm -f "$file.times"
    exit "$rc"
  )
}

# run_group DIR K MODE: K jobs at once; MODE plain or coord.
run_group() {
  local dir="$1" k="$2" mode="$3" i extra=()
  mkdir -p "$dir"
  [[ "$mode" == coord ]] && extra=(--coordinated "$k" --group "cp-$$-$(basename "$dir")")
  local t0 t1
  t0=$(date +%s.%N)
  pids=()
  for ((i = 0; i < k; i++)); do
    run_timed "$dir/time.$i" "$bin" --data "$train" "${flags[@]}" "${extra[@]}" \
      --report "$dir/r$i" >"$dir/log.$i" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  pids=()
  t1=$(date +%s.%N)
  echo "$t0 $t1" >"$dir/wall"
  if ((rc)); then echo "coordinated_prep.sh: error: a job failed; logs in $dir" >&2; exit 1; fi
}

stall_flags=()
skip=0
for f in "${flags[@]}"; do  # mlbench-stall sets the iteration counts itself
  if ((skip)); then skip=0; continue; fi
  case "$f" in --repeat|--number) skip=1 ;; *) stall_flags+=("$f") ;; esac
done
# analysis DIR: mlbench-stall on one job with the jobs' flags, results in DIR, its console in DIR.log.
analysis() {
  echo "# $(date -u +%T) mlbench-stall on one job (the what-if's inputs) -> $1 ..."
  "$build/bin/mlbench-stall" --bench "$bench" --bench-dir "$build/benchmarks" --data "$train" --cpus "1,$(nproc)" \
    --cache-fracs 0 --iterations "$stall_iterations" --rounds "$stall_rounds" --out "$1" -- "${stall_flags[@]}" >"$1.log" 2>&1 ||
    { echo "coordinated_prep.sh: error: mlbench-stall failed; see $1.log" >&2; exit 1; }
}
# rounds DIR: the groups, --rounds times, into DIR/k<K>.<mode>.<round>.
IFS=, read -ra ks <<<"$jobs"
run_rounds() {
  local r k mode
  for ((r = 0; r < rounds; r++)); do
    for k in "${ks[@]}"; do
      for mode in plain coord; do
        run_group "$1/k$k.$mode.$r" "$k" "$mode"
      done
    done
  done
}

if ((cycles)); then
  t_start=$(date +%s)
  for ((c = 1; c <= cycles; c++)); do
    mkdir -p "$out/c$c"
    analysis "$out/c$c/stall-before"
    run_rounds "$out/c$c"
    analysis "$out/c$c/stall-after"
    now=$(date +%s)
    echo "# cycle $c/$cycles done after $(((now - t_start) / 60)) min; ETA $(((now - t_start) * (cycles - c) / c / 60)) min"
  done
else
  ((predict)) && analysis "$out/stall"
  run_rounds "$out"
fi
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
"$py" - "$out" "$jobs" "$rounds" "$predict" "$cycles" <<'EOF'
import glob, json, statistics, sys
out, jobs, rounds = sys.argv[1], [int(k) for k in sys.argv[2].split(",")], int(sys.argv[3])
predict, cycles = sys.argv[4] == "1", int(sys.argv[5])

def spread(xs):
    return f"{statistics.median(xs):8.1f} [{min(xs):.1f}-{max(xs):.1f}]"

def analysis(stall_dir, name):
    """The analysis's coordinated predictions by K, after a line of its inputs."""
    s = json.load(open(f"{stall_dir}/stall.json"))
    c = s["whatif"]["coordinated"]
    print(f"# {name}: prep {c['prep_cpu_us']:.0f} us/sample (from {c.get('prep_cpu_from', 'cpus-1')}), host compute {c['host_compute_cpu_us']:.0f} us, "
          f"copy {c['copy_cpu_us']:.1f} us, {c['cores']} cores, {c['workers']} workers/job; "
          f"P={s['rates']['P']:.1f} G={s['rates']['G']:.1f} P(cpus)={s['prep_by_cores']}")
    if c.get("devices"):
        print(f"# the jobs share {c['devices']} device(s); a job's device ceiling: " + ", ".join(
            f"{p['jobs']} jobs {p['device_per_job']:.1f}/s ({p['device_per_job_from']})" for p in c["predictions"] if "device_per_job" in p))
    return {p["jobs"]: p for p in c["predictions"]}

def measured(d):
    """Per (K, mode): every job's img/s, the groups' CPU s and wall s, the jobs' CPU us per sample
    and timed seconds, over the rounds in d."""
    m = {}
    for k in jobs:
        for mode in ("plain", "coord"):
            rates, cpu, wall, per_item, timed = [], [], [], [], []
            for r in range(rounds):
                g = f"{d}/k{k}.{mode}.{r}"
                for i in range(k):
                    rep = json.load(open(glob.glob(f"{g}/r{i}/*.json")[0]))
                    assert rep["completed"], rep.get("reason")
                    rates.append(rep["train_item"]["avg"])
                    pc = rep.get("process_cpu") or {}
                    if pc.get("per_item_us") is not None:
                        per_item.append(pc["per_item_us"])
                        timed.append(pc["wall_s"])
                cpu.append(sum(sum(map(float, open(f"{g}/time.{i}").read().split()[-2:])) for i in range(k)))
                t0, t1 = map(float, open(f"{g}/wall").read().split())
                wall.append(t1 - t0)
            m[(k, mode)] = (rates, cpu, wall, per_item, timed)
    return m

def key(mode):
    return "coordinated" if mode == "coord" else "uncoordinated"

def table(m, preds):
    """The rounds' table; preds: the analyses' predictions by K (a column each)."""
    print(f"{'K':>2} {'mode':<6} {'img/s per job, median [min-max]':>34} {'CPU s (all jobs)':>26} {'wall s':>22}"
          + f" {'CPU us/sample (job)':>24} {'timed s (job)':>20}"
          + "".join(f"  {'predicted':>9}  {'error':>6}" for _ in preds))
    for k in jobs:
        for mode in ("plain", "coord"):
            rates, cpu, wall, per_item, timed = m[(k, mode)]
            med = statistics.median(rates)
            line = f"{k:>2} {mode:<6} {spread(rates):>34} {spread(cpu):>26} {spread(wall):>22}"
            line += f" {spread(per_item) if per_item else '-':>24} {spread(timed) if timed else '-':>20}"
            for pred in preds:
                if k in pred:
                    p = pred[k][key(mode)]
                    line += f"  {p:9.1f}  {100 * (p - med) / med:+5.1f}%"
            print(line)
        gain = statistics.median(m[(k, "coord")][0]) / statistics.median(m[(k, "plain")][0])
        print(f"   gain (coord / plain, medians): x{gain:.2f}"
              + "".join(f"; predicted x{pred[k]['gain']:.2f}" for pred in preds if k in pred))

if not cycles:
    table(measured(out), [analysis(f"{out}/stall", "what-if inputs")] if predict else [])
    sys.exit(0)

every = {}   # (K, mode) -> every job's img/s of every cycle
preds = {}   # (K, mode) -> every analysis's prediction
errors = []  # each analysis against the rounds of its cycle: error %
for c in range(1, cycles + 1):
    print(f"\n## cycle {c}")
    pr = [analysis(f"{out}/c{c}/stall-{side}", f"analysis {side}") for side in ("before", "after")]
    m = measured(f"{out}/c{c}")
    table(m, pr)
    for (k, mode), v in m.items():
        every.setdefault((k, mode), []).extend(v[0])
        med = statistics.median(v[0])
        for pred in pr:
            if k in pred:
                p = pred[k][key(mode)]
                preds.setdefault((k, mode), []).append(p)
                errors.append(100 * (p - med) / med)

print(f"\n## {cycles} cycles: the median of the {2 * cycles} analyses' predictions against the median of every job")
print(f"{'K':>2} {'mode':<6} {'measured img/s per job, median [min-max]':>42} {'predicted, median [min-max]':>36} {'error':>7}")
within = 0
for (k, mode), rates in every.items():
    if (k, mode) not in preds:
        continue
    med, pm = statistics.median(rates), statistics.median(preds[(k, mode)])
    e = 100 * (pm - med) / med
    within += abs(e) <= 5
    print(f"{k:>2} {mode:<6} {spread(rates):>42} {spread(preds[(k, mode)]):>36} {e:+6.1f}%")
if errors:
    a = [abs(e) for e in errors]
    print(f"medians: {within} of {len(preds)} points within 5%; each analysis against its cycle: {sum(x <= 5 for x in a)} of "
          f"{len(a)} within 5%, median |error| {statistics.median(a):.1f}%, mean {statistics.mean(errors):+.1f}%, "
          f"largest {max(a):.1f}%")
EOF
