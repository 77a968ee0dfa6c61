#!/usr/bin/env bash
# Sets up mlbench on Debian 12: installs the Debian packages that are missing
# (apt-get update first, only when something is missing), then configures
# (Release, Ninja) and builds incrementally with every core. Idempotent: on a
# built tree it only checks and returns in seconds.
#
# Environment: MLBENCH_BUILD_DIR (default: <repo>/build), CMAKE_PREFIX_PATH
# (a CUDA LibTorch, to build for the GPU), MLBENCH_CMAKE_ARGS (extra -D flags).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MLBENCH_BUILD_DIR:-$root/build}"

packages=(
  cmake ninja-build g++ git pkg-config
  libtorch-dev                 # LibTorch 1.13 (CPU)
  libgloo-dev                  # gloo's headers: c10d's ProcessGroupGloo (the scaling benchmark)
  libcgroup-dev                # cgroup slices
  nlohmann-json3-dev libfmt-dev libcli11-dev
  libboost-dev libboost-filesystem-dev   # Boost.Process (header-only, needs filesystem)
  libgtest-dev libgmock-dev
  libturbojpeg0-dev            # libjpeg-turbo's TurboJPEG API
  libjpeg62-turbo-dev          # libjpeg-turbo's libjpeg API (jpeg_crop_scanline: region decode)
  libopencv-imgproc-dev        # cv::resize
  liburing-dev                 # io_uring for read-ahead (--io-engine io_uring)
  libssl-dev                   # sha256 for unique_id
  libopenblas0-openmp          # the BLAS LibTorch calls (selected below; docs/performance.md, "BLAS")
  mate-backgrounds             # real photographs: the real-photos dataset's sources (docs/datasets.md)
  slurm-wlm munge              # --launcher slurm, and the private test cluster (docs/runner.md)
  help2man dpkg-dev            # the man pages from --help, and the Debian package's dependencies (cpack -G DEB)
  python3-torch python3-torchvision  # /usr/bin/python3's PyTorch: mlbench-stall --exec on an unmodified
                                     # PyTorch script (its end-to-end tests) and the peer comparisons
  python3-jsonschema           # the tests that hold every report writer to docs/schema/*.schema.json
  libsqlite3-dev               # the results store's default back-end (docs/report.md, "The results store")
  libpq-dev postgresql         # its PostgreSQL back-end, and the private server its tests start
  libcurl4-openssl-dev         # datasets over HTTP (--data http://...; libcurl's multi interface)
  libarchive-dev               # WebDataset tar shards (--data DIR/*.tar)
  nginx-light                  # the HTTP server the remote-storage tests start on loopback
)

missing=()
for p in "${packages[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "bootstrap: error: missing packages (${missing[*]}) and not root; install them or run as root" >&2
      exit 1
    fi
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's LibTorch calls whatever libblas.so.3 the alternatives system points at; on a
# fresh machine that is the reference BLAS, ~20x slower on a Linear layer than OpenBLAS.
# Select the OpenMP OpenBLAS (it shares LibTorch's OpenMP threads, so --cpu-cores governs
# both; docs/performance.md, "BLAS", has the measurement) unless the machine's administrator chose
# another optimised BLAS by hand. MLBENCH_BLAS=keep leaves the choice alone.
# libopenblas.so.0 too: when the pthread build is also installed, a library that links
# libopenblas.so.0 directly would otherwise load it first, and its soname wins for
# LibTorch's libblas.so.3 as well (the reports' machine.blas then says openblas-pthread).
arch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)"
blas_dir="/usr/lib/$arch/openblas-openmp"
if [[ "${MLBENCH_BLAS:-}" != keep ]]; then
  as_root=""
  [[ $(id -u) -ne 0 ]] && as_root="sudo"
  for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
    name="$lib-$arch"
    current="$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')"
    mode="$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Status: //p')"
    [[ "$current" == "$blas_dir/$lib" ]] && continue
    if [[ "$mode" == manual && "$current" != "/usr/lib/$arch/blas/"* && "$current" != "/usr/lib/$arch/lapack/"* ]]; then
      echo "bootstrap: note: $lib is set by hand to $current; keeping it (mlbench recommends $blas_dir)"
      continue
    fi
    echo "bootstrap: selecting $blas_dir/$lib for $lib (was ${current:-none})"
    $as_root update-alternatives --set "$name" "$blas_dir/$lib"
  done
fi

if [[ ! -f "$build_dir/build.ninja" ]]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MLBENCH_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)"
