#!/usr/bin/env bash
# Installed like a tool (docs/runner.md, "Installing"): `cmake --install` into a temporary prefix, then every
# command run from the prefix, from /, with a cleared environment: mlbench-run on a tiny jobs
# file, mlbench-report on its results, mlbench-stall --exec on a training script, a benchmark,
# and --version everywhere. An installed command must find its parts in the prefix (never in
# the build or source tree: core/layout.h).
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
tmp="$(mktemp -d /tmp/mlbench_install_XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || fail "cmake --install: $(tail -3 "$tmp/install.log")"
# A clean environment and a working directory that is neither tree.
run() { (cd / && env -i PATH=/usr/bin:/bin HOME="$tmp/home" "$@"); }
# The same from a folder of the user's (mlbench-stall --exec refuses to run a script in /: what it
# writes there could not be kept from the user's files by an overlay).
run_in() { (cd "$1" && shift && env -i PATH=/usr/bin:/bin HOME="$tmp/home" "$@"); }
mkdir -p "$tmp/home"
for c in mlbench-run mlbench-report mlbench-stall mlbench-datagen; do
  [[ -x "$prefix/bin/$c" ]] || fail "$c not installed"
  out="$(run "$prefix/bin/$c" --version)" || fail "$c --version exited $?"
  [[ "$out" == "$c "*" (commit "* ]] || fail "$c --version said: $out"
done
for f in share/mlbench/probe/mlbench_probe.py share/mlbench/probe/autoprobe/sitecustomize.py \
         share/mlbench/configs/fast.json share/mlbench/configs/targets/cpu.json share/mlbench/baselines.json \
         share/doc/mlbench/runner.md lib/mlbench/benchmarks/toy_reg; do
  [[ -e "$prefix/$f" ]] || fail "$f not installed"
done
# A benchmark from the prefix.
out="$(run "$prefix/lib/mlbench/benchmarks/toy_reg" --version)"
[[ "$out" == "toy_reg "* ]] || fail "toy_reg --version said: $out"
run "$prefix/lib/mlbench/benchmarks/toy_reg" --no-cuda --repeat 2 --number 2 --report "$tmp/toy" >"$tmp/toy.log" 2>&1 \
  || fail "toy_reg from the prefix: $(tail -2 "$tmp/toy.log")"
# mlbench-run on the installed jobs file (found by name in the prefix), its targets from the prefix.
# The installed CPU targets are for the CPU they were measured on; made this machine's here, so that
# the run uses them on any CPU (the test is of where they come from, not of their figures).
/usr/bin/python3 - "$prefix/share/mlbench/configs/targets/cpu.json" <<'PY'
import json, os, sys
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
t = json.load(open(sys.argv[1]))
t["cpu_model"], t["logical_cores"] = model, os.cpu_count()
json.dump(t, open(sys.argv[1], "w"), indent=2)
PY
run env DATA_DIRECTORY="$tmp/data" "$prefix/bin/mlbench-run" --jobs fast --name toy_reg --outdir "$tmp/out" --no-cgroup \
  >"$tmp/run.log" 2>&1 || fail "mlbench-run: $(tail -5 "$tmp/run.log")"
grep -q "toy_reg *1/1" "$tmp/run.log" || fail "mlbench-run's table: $(tail -8 "$tmp/run.log")"
grep -q "$prefix/share/mlbench/configs/targets/cpu.json" "$tmp/run.log" || fail "targets not from the prefix: $(grep 'vs target' "$tmp/run.log")"
run "$prefix/bin/mlbench-report" --reports "$tmp/out" >"$tmp/report.log" 2>&1 || fail "mlbench-report: $(tail -3 "$tmp/report.log")"
# mlbench-stall --exec: the probe from the prefix, on a script of the user's, from their project folder.
mkdir -p "$tmp/sd/c0" "$tmp/sd/c1" "$tmp/project"
for i in $(seq 1 20); do
  head -c 8192 /dev/urandom >"$tmp/sd/c0/f$i.bin"
  head -c 8192 /dev/urandom >"$tmp/sd/c1/f$i.bin"
done
run_in "$tmp/project" "$prefix/bin/mlbench-stall" --exec --data "$tmp/sd" --out "$tmp/stall" --iterations 10 --cpus 1 -- \
  /usr/bin/python3 "$src/tests/stall/exec/sleepy_train.py" "$tmp/sd" --batch 2 --prep-ms 1 --fetch-ms 1 --compute-ms 3 \
  >"$tmp/stall.log" 2>&1 || fail "mlbench-stall --exec: $(tail -3 "$tmp/stall.log")"
[[ -s "$tmp/stall/stall.json" ]] || fail "no stall.json"
echo "install_test: ok: the commands, a benchmark and the probe run from $prefix"
