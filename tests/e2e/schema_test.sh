#!/usr/bin/env bash
# Every writer of the instance report against its JSON Schema (docs/schema/instance-report.schema.json,
# draft 2020-12, validated with Debian's python3-jsonschema):
#   - every benchmark of configs/fast.json, run by mlbench-run on tiny settings (its datasets' tiny
#     recipes, 2 observations of 1 iteration), so each report is the benchmark's own as the runner
#     completed it, plus the FAIL report the runner writes for an instance that dies before writing one;
#   - the Python probe (probe/mlbench_probe.py) around a script's loop of batches;
#   - the checked-in reports of tests/fixtures (written before schema_version: version 0);
# and mlbench-stall's stall.json (a stallsim analysis, an --exec analysis, the fixtures') against docs/schema/stall.schema.json;
# and every report also reads through the typed reader (the C++ side: mlbench-report --reports FILE) and
# goes through the typed record and back with nothing lost (report_roundtrip).
# Usage: schema_test.sh BUILD_DIR SOURCE_DIR
set -u
build=$(realpath "$1")
src=$(realpath "$2")
schema="$src/docs/schema/instance-report.schema.json"
python=/usr/bin/python3
if ! "$python" -c 'import jsonschema' 2>/dev/null; then
  echo "SKIPPED: python3-jsonschema is not installed (scripts/bootstrap.sh installs it)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# configs/fast.json on tiny settings, and one job whose benchmark exits before writing a report.
"$python" - "$src/configs/fast.json" "$tmp/jobs.json" <<'PY'
import json, sys
jobs = json.load(open(sys.argv[1]))
for job in jobs:
    args = job["args"]
    for k, v in list(args.items()):
        if isinstance(v, str):
            args[k] = v.replace("-small", "-tiny")
    args.pop("--min-time", None)
    args["--repeat"], args["--number"] = 2, 1
    if "--classes" in args:
        args["--classes"] = 4  # fake-imagenet-tiny has 4 classes
    if job["name"] == "recom":
        args["--batch-size"] = 256
    if job["name"] == "loader":
        args["--batch-size"] = 8  # fake-imagenet-tiny has 32 images: less than one batch of 64
    if "dataset" in job:
        job["dataset"] = job["dataset"].replace("-small", "-tiny")
    job["timeout"] = 300
jobs.append({"name": "dies", "cmd": "toy_reg", "args": {"--no-such-flag": 1}})
json.dump(jobs, open(sys.argv[2], "w"), indent=1)
PY
DATA_DIRECTORY="$tmp/data" "$build/bin/mlbench-run" --jobs "$tmp/jobs.json" --outdir "$tmp/run" --suite schema \
  --bench-dir "$build/benchmarks" >"$tmp/run.log" 2>&1
reports=("$tmp"/run/*.json)
reports=("${reports[@]/*machine.json/}")
want=$(($("$python" -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$tmp/jobs.json")))
got=0
for r in "${reports[@]}"; do [[ -n "$r" ]] && got=$((got + 1)); done
((got >= want)) || fail "mlbench-run left $got reports for $want jobs:
$(tail -20 "$tmp/run.log")"
grep -q '"schema_version"' "$tmp"/run/*.dies.*FAIL*.json || fail "the runner's FAIL report has no schema_version"
# Every benchmark of configs/fast.json completes under the runner, which reads its report through the
# typed reader: atari's pipeline.workers, once the word "processes", made it a FAIL ("pipeline.workers
# is "processes" (not an integer)") in every ./run.sh.
failed=""
for r in "$tmp"/run/*.FAIL.*.json; do
  [[ $r == *.dies.* || ! -f $r ]] && continue
  failed+="$(basename "$r"): $("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["reason"])' "$r")"$'\n'
done
[[ -z $failed ]] || fail "instances failed under mlbench-run:"$'\n'"$failed"

# The Python probe, around a loop of batches (mlbench_probe.wrap, as a script's own iterator).
printf '%s\n' 'import mlbench_probe' 'train = mlbench_probe.wrap([[0] * 4] * 30, name="train")' \
  'for epoch in range(2):' '    for b in train: pass' >"$tmp/train.py"
MLBENCH_PROBE_REPORT="$tmp/probe" PYTHONPATH="$src/probe" "$python" "$tmp/train.py" >"$tmp/probe.log" 2>&1 ||
  fail "the probed script failed: $(tail -5 "$tmp/probe.log")"
probe_reports=("$tmp"/probe/*.json)
[[ -f "${probe_reports[0]}" ]] || fail "the Python probe wrote no report: $(tail -5 "$tmp/probe.log")"

# A stall analysis of stallsim (a dataset of 16 small files), for docs/schema/stall.schema.json.
for c in 0 1; do
  mkdir -p "$tmp/stall-data/c$c"
  for i in 0 1 2 3 4 5 6 7; do head -c 4096 /dev/zero >"$tmp/stall-data/c$c/f$i.bin"; done
done
"$build/bin/mlbench-stall" --bench stallsim --bench-dir "$build/benchmarks" --data "$tmp/stall-data" --out "$tmp/stall" \
  --cpus 1 --cache-fracs 0.5 --iterations 4 -- --batch-size 2 --workers 1 --compute-ms 0.1 --prep-ms 0.1 \
  >"$tmp/stall.log" 2>&1 || fail "mlbench-stall failed: $(tail -5 "$tmp/stall.log")"

"$python" - "$schema" "$tmp"/run/*.json "${probe_reports[@]}" "$src"/tests/fixtures/report_golden/tree/R*/*.json \
  "$src"/tests/fixtures/stall_golden/analysis/runs/*/*.json <<'PY' || exit 1
import json, os, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
files = [f for f in sys.argv[2:] if os.path.basename(f) != "machine.json"]
bad = 0
for f in files:
    for e in validator.iter_errors(json.load(open(f))):
        bad += 1
        where = ".".join(map(str, e.absolute_path)) or "(the report)"
        print(f"FAIL: {os.path.basename(f)}: {where}: {e.message[:300]}")
print(f"{len(files)} reports against {os.path.basename(sys.argv[1])}: {bad} errors")
sys.exit(1 if bad else 0)
PY

# And an --exec analysis (the probe in a script of injected sleeps, no torch): its stall.json has no
# cache fraction between 0 and 1 to self-check, so self_check.passed is null, which the schema once
# refused (a boolean only).
"$build/bin/mlbench-stall" --exec --exec-writes-ok --data "$tmp/stall-data" --out "$tmp/stall-exec" --cpus 1 \
  --iterations 4 --target-noise 0 -- "$python" "$src/tests/stall/exec/sleepy_train.py" "$tmp/stall-data" --batch 2 \
  --prep-ms 1 --fetch-ms 1 --compute-ms 2 >"$tmp/stall-exec.log" 2>&1 ||
  fail "mlbench-stall --exec failed: $(tail -5 "$tmp/stall-exec.log")"

"$python" - "$src/docs/schema/stall.schema.json" "$tmp/stall/stall.json" "$tmp/stall-exec/stall.json" \
  "$src"/tests/fixtures/*/expected/stall.json \
  "$src"/tests/fixtures/stall_golden/analysis/stall.json "$src"/tests/fixtures/report_golden/tree/stall/*/stall.json <<'PY' || exit 1
import json, os, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
bad = 0
for f in sys.argv[2:]:
    for e in validator.iter_errors(json.load(open(f))):
        bad += 1
        print(f"FAIL: {f}: {'.'.join(map(str, e.absolute_path)) or '(the result)'}: {e.message[:300]}")
print(f"{len(sys.argv) - 2} stall.json files against {os.path.basename(sys.argv[1])}: {bad} errors")
sys.exit(1 if bad else 0)
PY

# Every report through the typed record and back (core/instance_report.h): no field lost or changed
# (the runner rewrites each benchmark's report through it).
"$build/tests/e2e/report_roundtrip" "$tmp"/run/*[!e].json "${probe_reports[@]}" \
  "$src"/tests/fixtures/report_golden/tree/R*/*.json || fail "a report lost a field through the typed record"

# The same files through the typed reader: one report file at a time, as mlbench-report reads it.
for f in "$tmp"/run/*.json "${probe_reports[@]}"; do
  [[ $(basename "$f") == machine.json ]] && continue
  out=$("$build/bin/mlbench-report" --reports "$f" --color never 2>&1) || fail "mlbench-report cannot read $(basename "$f"): $out"
done
echo "every report validates against the schema and reads through the typed reader"
