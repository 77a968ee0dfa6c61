#!/usr/bin/env bash
# studies/gpu/session.sh: the GPU measurements of docs/performance.md ("On a GPU")
# in one pass on a machine with an NVIDIA GPU and a CUDA PyTorch (the device
# machine: scripts/device-build.sh), each stage's results kept as it ends.
#
# Usage: studies/gpu/session.sh STAGE...   (in this order; any subset)
#   build     scripts/device-build.sh build + the GPU unit tests + a tiny convnet on CUDA
#   suite     configs/fast.json under mlbench-run (one slot per GPU; datasets made on first use;
#             scaling left out where it is not built; SUITE_ARGS: more mlbench-run arguments)
#   data      a fake-imagenet of 20,000 train JPEGs (100 classes x 200) in data/fake-imagenet-20k, and
#             20,000 real photographs (the real-photos recipe from .device-photos/, carried:
#             scripts/device-build.sh fetch) in data/real-photos-20k
#   baselines convnet, convnet_fp16 and loader with baselines.json's arguments on data/fake-imagenet-20k
#   convnet   ResNet-50 224 px batch 256 fp16: mlbench convnet_fp16 real (uint8; float32 too with FLOAT32=1) vs --synthetic,
#             and PyTorch's DataLoader + torchvision (studies/gpu/torch_convnet.py) real vs synthetic;
#             real = both 20k sets (the photographs when made); PASSES rounds, alternated
#   stall     mlbench-stall --bench convnet_fp16 on data/fake-imagenet-20k
#   overhead  convnet_fp16 --synthetic with CUDA events + NVML monitor on and off, alternated
#   probe     what the machine offers: cgroup version and delegation, nvJPEG, nsys, taskset
#   decode    --decode gpu (docs/gpu.md): the nvJPEG pixel tests (gpu_decode_tests, on the photographs too), then
#             ResNet-50 fp16 on real photographs at CPUS (default "2 4 8 16") CPUs each (taskset: the process
#             confined to that many CPUs, --workers and --cpu-cores as many): CPU decode, GPU decode, and
#             PyTorch with decode_jpeg(device='cuda') (studies/gpu/torch_convnet.py --decode gpu); synthetic once;
#             the generated set at 4 CPUs both ways
#   coordinated  coordinated prep on the GPU: K = 2, 4 convnet jobs (ResNet-18, 32 px, batch 256, --workers = CPUs
#             each) sharing the GPU and the CPUs, plain vs --coordinated K, with mlbench-stall's
#             prediction (studies/coordinated_prep.sh --predict; PASSES rounds; timed loops of seconds:
#             400 iterations a job, 200 per analysis run; a few minutes with 3 rounds)
# Env: OUT (results folder; default /tmp/gpu-session), MLBENCH_BUILD_DIR (default build-gpu),
#      PASSES (convnet rounds and overhead pairs, default 2), SESSION_SECONDS (stop starting work after this
#      many seconds and cut the running step's timeout to fit; default 3600), BUILD_TARGETS (the build
#      stage's ninja targets, blank-separated; default: every benchmark, the tools and device_copy_tests),
#      SMOKE (0: the build stage runs no smoke benchmarks), PER_CLASS (the data stage's images a class, default 200),
#      CPUS (the decode stage's CPU counts), TORCH_CPUS (those of them PyTorch's peer runs at; default CPUS),
#      BENCH_TIMEOUT (seconds one benchmark run may take, default 300).
# Writes OUT/session.log (one line per step, with seconds since the start) and
# OUT/results.tar.gz (every report and log), refreshed after each stage.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/gpu-session}"
build="${MLBENCH_BUILD_DIR:-build-gpu}"
res="$root/gpu-results"
mkdir -p "$out" "$res"
t0=$(date +%s)
deadline=$((t0 + ${SESSION_SECONDS:-3600}))
# Seconds a step may take: ARG, or less when the session's end is nearer (at least 1).
budget() {
  local left=$((deadline - $(date +%s) - 10))
  ((left < $1)) || left=$1
  ((left > 0)) || left=1
  echo "$left"
}
log() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$out/session.log"; }
pack() { tar -czf "$out/results.tar.gz" -C "$root" gpu-results 2>/dev/null; }
B="$root/$build/benchmarks"
launch=()  # a prefix for bench's command (the decode stage's taskset)
BIN="$root/$build/bin"
cpus=$(nproc)
big="$root/data/fake-imagenet-20k/train"
photos="$root/data/real-photos-20k/train"
rn50=(--arch resnet50 --image-size 224 -b 256 --classes 100)
# One run of a benchmark: NAME DIR ARGS...; its report lands in DIR, its log beside it.
bench() {
  local name=$1 dir=$2
  shift 2
  [[ -x "$B/$name" ]] || { log "  $name not built: $dir skipped"; return; }
  mkdir -p "$dir"
  if timeout "$(budget "${BENCH_TIMEOUT:-300}")" ${launch[@]+"${launch[@]}"} "$B/$name" "$@" --report "$dir" >"$dir.log" 2>&1; then
    python3 - "$dir" <<'PY' | tee -a "$out/session.log"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    j = json.load(open(f))
    st, mon = j.get("stall") or {}, (j.get("gpu_monitor") or {}).get("summary", {})
    dec = (j.get("pipeline") or {}).get("decode") or {}
    ms = lambda k: 1e3 * ((st.get(k) or {}).get("avg") or float("nan"))
    print("  %-40s %s img/s %8.1f  stall %5.1f%%  wait %.2f h2d %.2f compute %.1f ms  clock %s  gpu util %s  decode %s" % (
        sys.argv[1].split("gpu-results/")[-1], "ok" if j.get("completed") else "FAIL", (j.get("train_item") or {}).get("avg", float("nan")),
        st.get("stall_pct") or float("nan"), ms("wait"), ms("h2d"), ms("compute"), st.get("phase_clock"),
        (mon.get("util_pct") or {}).get("mean", "-"), dec.get("backend", dec.get("where", "-"))))
PY
  else
    log "  FAILED $name ($dir): $(tail -3 "$dir.log" | tr '\n' ' ')"
  fi
}

stage_build() {
  log "machine: $(nvidia-smi -L | head -1); $cpus CPUs; $(. /etc/os-release; echo "$PRETTY_NAME"); torch $(python3 -c 'import torch; print(torch.__version__)')"
  local targets=(toy_reg loader toy_lstm vae wlm wlmfp16 recom translator cart atari convnet convnet_fp16 dcgan reso
    fast_style ssd mlbench-run mlbench-report mlbench-stall mlbench-datagen device_copy_tests scaling)
  [[ -z "${BUILD_TARGETS:-}" ]] || read -r -a targets <<<"$BUILD_TARGETS"
  if ! timeout "$(budget 480)" scripts/device-build.sh build "$build" -- "${targets[@]}" >"$res/build.log" 2>&1; then
    log "build FAILED (gpu-results/build.log)"
    tail -40 "$res/build.log"
  fi
  log "build done; scaling $([[ -x "$B/scaling" ]] && echo built || echo "NOT built")"
  [[ -f "$build/device-env.sh" ]] && source "$build/device-env.sh"
  if [[ -x "$root/$build/tests/benchmarks/device_copy_tests" ]]; then
    "$root/$build/tests/benchmarks/device_copy_tests" >"$res/device_copy_tests.log" 2>&1
    log "device_copy_tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$res/device_copy_tests.log" | tr '\n' ' ')"
  fi
  [[ "${SMOKE:-1}" == 0 ]] && return
  "$BIN/mlbench-datagen" ensure fake-imagenet-small --root data >/dev/null 2>&1
  bench convnet "$res/smoke/convnet-synth" --synthetic --arch resnet18 --image-size 64 --classes 10 -b 16 --repeat 3 --number 5 --cuda
  bench convnet "$res/smoke/convnet-real" --data data/fake-imagenet-small/train --arch resnet18 --image-size 64 --classes 10 -b 16 --workers 2 --repeat 3 --number 5 --cuda
  bench convnet_fp16 "$res/smoke/convnet16-uint8" --data data/fake-imagenet-small/train --arch resnet18 --image-size 64 --classes 10 -b 16 --workers 2 --repeat 3 --number 5 --cuda --output uint8
  bench loader "$res/smoke/loader" --data data/fake-imagenet-small/train --workers 2 -b 64 --repeat 3 --number 5 --cuda
}

stage_suite() {
  # A folder per pass: a pass never reads the reports (or failures) of an earlier one.
  local dir
  dir="$res/suite-$(date +%Y%m%d-%H%M%S)"
  # A build whose scaling failed (ninja -k 0 built the rest): leave it out rather than fail the suite.
  [[ -x "$B/scaling" ]] || SUITE_ARGS="${SUITE_ARGS:-} --exclude scaling"
  timeout "$(budget 420)" "$BIN/mlbench-run" --jobs fast.json --outdir "$dir" ${SUITE_ARGS:-} >"$res/suite.log" 2>&1
  local rc=$?
  if ! compgen -G "$dir/*/*.json" >/dev/null && ! compgen -G "$dir/*.json" >/dev/null; then
    log "suite: no report with cgroups (rc $rc: $(tail -2 "$res/suite.log" | tr '\n' ' ')); again with --no-cgroup"
    rm -rf "$dir"
    timeout "$(budget 420)" "$BIN/mlbench-run" --jobs fast.json --outdir "$dir" ${SUITE_ARGS:-} --no-cgroup >"$res/suite.log" 2>&1
    rc=$?
  fi
  log "suite rc=$rc"
  "$BIN/mlbench-report" --reports "$dir" --color never >"$dir.report.txt" 2>&1
  head -40 "$dir.report.txt"
}

stage_data() {
  timeout "$(budget 300)" "$BIN/mlbench-datagen" fake-imagenet --out "$root/data/fake-imagenet-20k" --classes 100 --per-class "${PER_CLASS:-200}" \
    --val-per-class 0 -q >"$res/datagen.log" 2>&1
  log "datagen 20k rc=$? ($(find "$big" -name '*.jpg' -o -name '*.JPEG' | wc -l) files, $(du -sh "$big" | cut -f1))"
  if compgen -G "$root/.device-photos/*.jpg" >/dev/null; then
    timeout "$(budget 300)" "$BIN/mlbench-datagen" real-photos --out "$root/data/real-photos-20k" --source "$root/.device-photos" \
      --classes 100 --per-class "${PER_CLASS:-200}" --val-per-class 0 -q >"$res/datagen-photos.log" 2>&1
    log "datagen photos 20k rc=$? ($(find "$photos" -name '*.jpg' | wc -l) files, $(du -sh "$photos" | cut -f1))"
  else
    log "no .device-photos/ (scripts/device-build.sh fetch, then carry it): no real photographs"
  fi
}

stage_baselines() {
  bench convnet "$res/baselines/convnet" --data "$big" --arch resnet101 -b 64 --workers 8 --repeat 15 --number 5 --cuda
  bench convnet_fp16 "$res/baselines/convnet_fp16" --data "$big" --arch resnet101 -b 128 --workers 8 --repeat 15 --number 5 --cuda
  bench loader "$res/baselines/loader" --data "$big" --workers 8 -b 256 --repeat 15 --number 5 --cuda
}

stage_convnet() {
  local common=("${rn50[@]}" --repeat 6 --number 10 --warmup 2 --cuda)
  local sets=(fake:"$big") pass set name path
  [[ -d "$photos" ]] && sets+=(photos:"$photos")
  for pass in $(seq 1 "${PASSES:-2}"); do
    bench convnet_fp16 "$res/convnet/mlbench-synthetic-$pass" --synthetic "${common[@]}"
    for set in "${sets[@]}"; do
      name=${set%%:*} path=${set#*:}
      bench convnet_fp16 "$res/convnet/mlbench-$name-uint8-$pass" --data "$path" --workers "$cpus" --output uint8 "${common[@]}"
      [[ -n "${FLOAT32:-}" ]] && bench convnet_fp16 "$res/convnet/mlbench-$name-float32-$pass" --data "$path" --workers "$cpus" "${common[@]}"
    done
    for set in synthetic "${sets[@]}"; do
      local a=(--synthetic)
      name=${set%%:*} path=${set#*:}
      [[ $set == synthetic ]] || a=(--data "$path" --workers "$cpus")
      if timeout "$(budget 300)" python3 studies/gpu/torch_convnet.py "${a[@]}" --classes 100 --warmup 20 --iterations 40 \
        >"$res/convnet/pytorch-$name-$pass.json" 2>"$res/convnet/pytorch-$name-$pass.log"; then
        log "  pytorch $name $pass: $(cat "$res/convnet/pytorch-$name-$pass.json")"
      else
        log "  pytorch $name $pass FAILED: $(tail -3 "$res/convnet/pytorch-$name-$pass.log" | tr '\n' ' ')"
      fi
    done
  done
}

stage_stall() {
  timeout "$(budget 420)" "$BIN/mlbench-stall" --bench convnet_fp16 --bench-dir "$B" --data "$big" --cpus 4 "$cpus" \
    --cache-fracs 0.25 0.75 --iterations 30 --out "$res/stall" --timeout 200 -- "${rn50[@]}" --cuda \
    >"$res/stall.log" 2>&1
  log "stall rc=$?"
  tail -30 "$res/stall.log"
}

stage_overhead() {
  local common=(--synthetic "${rn50[@]}" --repeat 6 --number 10 --warmup 2 --cuda)
  for i in $(seq 1 "${PASSES:-2}"); do
    bench convnet_fp16 "$res/overhead/on-$i" "${common[@]}"
    bench convnet_fp16 "$res/overhead/off-$i" "${common[@]}" --no-device-events --monitor-interval 0
  done
}

stage_probe() {
  log "machine: $(nvidia-smi -L | head -1); $cpus CPUs; kernel $(uname -r); $(. /etc/os-release; echo "$PRETTY_NAME")"
  log "cgroup: /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup) (cgroup2fs: v2); controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>&1);" \
    "subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>&1); this process: $(tr '\n' ' ' </proc/self/cgroup)"
  local g=/sys/fs/cgroup/mlbench-probe-$$
  if mkdir "$g" 2>"$res/cgprobe.err"; then
    log "cgroup: mkdir $g ok; files: $(ls "$g" | grep -E '^(cpu|cpuset|memory)\.(max|cpus|high)$' | tr '\n' ' ');" \
      "memory.max<-64M: $(echo 67108864 >"$g/memory.max" 2>&1 && echo ok); cpuset.cpus<-0-1: $(echo 0-1 >"$g/cpuset.cpus" 2>&1 && echo ok);" \
      "move a process: $(sh -c "echo \$\$ >$g/cgroup.procs && echo ok" 2>&1)"
    rmdir "$g" 2>/dev/null
  else
    log "cgroup: mkdir $g failed: $(cat "$res/cgprobe.err")"
  fi
  log "nvjpeg: $(find /usr/local/cuda*/ /opt /usr/lib "$(python3 -c 'import site; print(site.getsitepackages()[0])')" -name 'libnvjpeg*.so*' 2>/dev/null | head -5 | tr '\n' ' ')"
  log "nsys: $(command -v nsys || find /opt /usr/local -name nsys -type f 2>/dev/null | head -2 | tr '\n' ' ')"
  log "taskset: $(command -v taskset)"
}

stage_decode() {
  local t="$root/$build/tests/benchmarks/gpu_decode_tests"
  if [[ -x "$t" ]]; then
    MLBENCH_GPU_DECODE_DATA="$photos" timeout 120 "$t" --gtest_filter='*Nvjpeg*' >"$res/gpu_decode_tests.log" 2>&1
    log "gpu_decode_tests (nvJPEG) rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |nvJPEG|^on ' "$res/gpu_decode_tests.log" | tr '\n' ' ')"
    timeout 120 "$t" --gtest_filter='-*Nvjpeg*' >"$res/gpu_decode_tests_cpu.log" 2>&1
    log "gpu_decode_tests (the rest) rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$res/gpu_decode_tests_cpu.log" | tr '\n' ' ')"
  fi
  local common=("${rn50[@]}" --repeat 4 --number 8 --warmup 1 --cuda --output uint8) n
  launch=(taskset -c "0-$((cpus - 1))")
  bench convnet_fp16 "$res/decode/synthetic" --synthetic "${rn50[@]}" --repeat 4 --number 8 --warmup 1 --cuda
  for n in ${CPUS:-2 4 8 16}; do
    ((n <= cpus)) || continue
    launch=(taskset -c "0-$((n - 1))")
    bench convnet_fp16 "$res/decode/photos-gpu-$n" --data "$photos" --workers "$n" --cpu-cores "$n" --decode gpu "${common[@]}"
    bench convnet_fp16 "$res/decode/photos-cpu-$n" --data "$photos" --workers "$n" --cpu-cores "$n" "${common[@]}"
    [[ " ${TORCH_CPUS:-${CPUS:-2 4 8 16}} " == *" $n "* ]] || continue
    if timeout "$(budget 60)" taskset -c "0-$((n - 1))" python3 studies/gpu/torch_convnet.py --data "$photos" --workers "$n" \
      --decode gpu --classes 100 --warmup 3 --iterations 15 >"$res/decode/pytorch-gpu-$n.json" 2>"$res/decode/pytorch-gpu-$n.log"; then
      log "  pytorch decode_jpeg(cuda) $n CPUs: $(cat "$res/decode/pytorch-gpu-$n.json")"
    else
      log "  pytorch decode_jpeg(cuda) $n CPUs FAILED: $(tail -3 "$res/decode/pytorch-gpu-$n.log" | tr '\n' ' ')"
    fi
  done
  launch=(taskset -c 0-3)
  bench convnet_fp16 "$res/decode/fake-gpu-4" --data "$big" --workers 4 --cpu-cores 4 --decode gpu "${common[@]}"
  bench convnet_fp16 "$res/decode/fake-cpu-4" --data "$big" --workers 4 --cpu-cores 4 "${common[@]}"
  launch=()
}

stage_coordinated() {
  MLBENCH_BUILD_DIR="$root/$build" MLBENCH_NO_BUILD=1 timeout "$(budget 540)" studies/coordinated_prep.sh --bench convnet \
    --data-root "$root/data" --rounds "${PASSES:-2}" --jobs 2,4 --predict --stall-iterations 200 --out "$res/coordinated" -- \
    --arch resnet18 --classes 10 --image-size 32 -b 256 --workers "$cpus" --repeat 40 --number 10 --cuda --io-depth 0 \
    >"$res/coordinated.log" 2>&1
  log "coordinated rc=$?"
  tail -25 "$res/coordinated.log" | tee -a "$out/session.log"
}

[[ -f "$build/device-env.sh" ]] && source "$build/device-env.sh"  # a build of an earlier call
(($#)) || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
for stage in "$@"; do
  if (($(date +%s) + 20 > deadline)); then
    log "out of session time: stage $stage and those after it not run"
    break
  fi
  log "stage $stage"
  "stage_$stage"
  pack
done
log "session done"
