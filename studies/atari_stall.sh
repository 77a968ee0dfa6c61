#!/usr/bin/env bash
# The atari benchmark's stall split: the share of training spent waiting on the
# environment workers (report stall.stall_pct), with inference and update apart
# (metrics.env_wait_pct of the three), for each --envs and --cpu-cores given,
# ROUNDS rounds, the configurations alternating inside each round (A,B,C,D,A,...)
# so that a load change on a shared machine hits them alike. Prints one line per
# run, then per configuration the median and min-max of stall_pct, env_wait_pct and
# train_item (agent steps/s).
# Usage: studies/atari_stall.sh [--rounds 3] [--envs "4 16"] [--cores "1 2"] [--build DIR] [-- ATARI ARGS...]
#   ATARI ARGS default: --rollout 32 --repeat 4 --number 1 --warmup 1 --seed 1
# Example: studies/atari_stall.sh --rounds 3
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3; envs="4 16"; cores="1 2"; build="$root/build"
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --envs) envs="$2"; shift 2 ;;
    --cores) cores="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "atari_stall.sh: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
args=("$@")
((${#args[@]})) || args=(--rollout 32 --repeat 4 --number 1 --warmup 1 --seed 1)
bin="$build/benchmarks/atari"
[[ -x "$bin" ]] || { echo "atari_stall.sh: error: $bin not found (build the atari target)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# $(uptime)"
for ((r = 1; r <= rounds; r++)); do
  for e in $envs; do
    for c in $cores; do
      out="$tmp/e$e.c$c.r$r"
      "$bin" --envs "$e" --cpu-cores "$c" --report "$out" "${args[@]}" >"$out.log" 2>&1 ||
        { echo "atari_stall.sh: error: run failed, see below" >&2; cat "$out.log" >&2; exit 1; }
      python3 - "$out" "$e" "$c" "$r" <<'EOF'
import json, os, sys
d, e, c, r = sys.argv[1:]
rep = json.load(open(os.path.join(d, os.listdir(d)[0])))
print(f"round {r} envs {e:>2} cores {c}: stall_pct {rep['stall']['stall_pct']:6.2f}  "
      f"env_wait_pct {rep['metrics']['env_wait_pct']:6.2f}  train_item {rep['train_item']['avg']:8.1f}")
EOF
    done
  done
done | tee "$tmp/lines"
echo "# $(uptime)"
python3 - "$tmp/lines" <<'EOF'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ envs +(\d+) cores (\d+): stall_pct +([\d.]+) +env_wait_pct +([\d.]+) +train_item +([\d.]+)", line)
    if m:
        runs.setdefault((int(m[1]), int(m[2])), []).append([float(m[3]), float(m[4]), float(m[5])])
print("envs cores  stall_pct median (min-max)  env_wait_pct median (min-max)  train_item median (min-max)")
for (e, c), v in sorted(runs.items()):
    cols = []
    for k in range(3):
        xs = [x[k] for x in v]
        cols.append(f"{statistics.median(xs):8.2f} ({min(xs):.2f}-{max(xs):.2f})")
    print(f"{e:>4} {c:>5}  " + "  ".join(cols) + f"  n={len(v)}")
EOF
