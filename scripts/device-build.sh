#!/usr/bin/env bash
# Builds mlbench on a GPU "device machine" that has a compiler, CMake, Ninja, nvcc and a
# CUDA PyTorch in its python3, but no Debian/Ubuntu -dev packages and no network.
#
#   scripts/device-build.sh fetch                      # here (Debian 12, network): .device-debs/
#   scripts/device-build.sh build [BUILD_DIR] [-- TARGET...]   # there: unpack, configure, build
#
# docs/gpu.md ("Building on a GPU machine") explains the flow; --help lists the settings.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
debs_dir="$root/.device-debs"
photos_dir="$root/.device-photos"
max_mib=48

# Packages whose headers, CMake/pkg-config files and libraries the build uses (LibTorch
# comes from the device's python3). Always unpacked into the prefix.
dev_packages=(
  libfmt-dev libfmt9
  nlohmann-json3-dev
  libcli11-dev
  libcgroup-dev libcgroup2
  libboost1.74-dev                       # headers (Boost.Process is header-only) + BoostConfig
  libboost-filesystem1.74-dev libboost-filesystem1.74.0
  libturbojpeg0-dev libturbojpeg0
  libjpeg62-turbo-dev libjpeg62-turbo
  libopencv-core-dev libopencv-core406
  libopencv-imgproc-dev libopencv-imgproc406
  liburing-dev liburing2
  libssl-dev libssl3
  libgtest-dev libgmock-dev              # static libraries + GTestConfig
  libgloo-dev                            # headers only (benchmarks/scaling: ProcessGroupGloo.hpp)
)
# pkg-config, used only when the device has none.
tool_packages=(pkgconf-bin libpkgconf3)
# Runtime dependencies of the libraries above (libopencv_core.so.406 needs libtbb,
# BLAS/LAPACK and libGLX). A library from these is dropped from the prefix when the
# device's own ldconfig already knows its soname, so the system's copy wins.
runtime_packages=(
  libtbb12
  libblas3 liblapack3 libgfortran5 libquadmath0
  libglx0 libglvnd0 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
)
# Never fetched: libc6, libstdc++6, libgcc-s1, libgomp1, zlib1g, ... (the device's own
# copies must win; Debian's in front of them would break its compiler and python).

usage() {
  cat <<EOF
Usage:
  scripts/device-build.sh fetch
      (on Debian 12 with network) apt-get download the Debian packages the build needs,
      except LibTorch, into $debs_dir (skips files already there; removes
      other .debs there; fails above ${max_mib} MiB), and the real-photos recipe's
      source photographs (mate-backgrounds' nature/, 6.6 MB) into $photos_dir.
  scripts/device-build.sh build [BUILD_DIR] [-- NINJA_TARGET...]
      (on the device) unpack .device-debs into a prefix, configure with CMake (Ninja,
      Release) against it and the python3's LibTorch, and build (all targets when none
      are given). BUILD_DIR defaults to $root/build-device.
      Writes BUILD_DIR/device-env.sh (source it before running the binaries),
      BUILD_DIR/device-cmake.log and BUILD_DIR/device-ninja.log.
  scripts/device-build.sh --help

Environment (build):
  MLBENCH_DEVICE_PREFIX     unpack prefix (default /tmp/mlbench-prefix; never /)
  MLBENCH_PYTHON            python with torch (default python3)
  MLBENCH_TORCH_PREFIX      LibTorch CMake prefix (default: torch.utils.cmake_prefix_path)
  MLBENCH_TORCH_LIB         LibTorch library dir for LD_LIBRARY_PATH (default: from python,
                            else <MLBENCH_TORCH_PREFIX>/../../lib when it holds libtorch*)
  TORCH_CUDA_ARCH_LIST      default: the GPU's compute capability as torch sees it, else 9.0
  MLBENCH_CMAKE_ARGS        extra CMake arguments (word-split)
  MLBENCH_NINJA_KEEP_GOING  1 (default): ninja -k 0, report every failing target; 0: stop at first
  MLBENCH_JOBS              ninja -j (default: nproc)
EOF
}

t_start=0
log() { echo "device-build: $*"; }
die() { echo "device-build: error: $*" >&2; exit 1; }
step_begin() { t_start=$SECONDS; }
step_end() { log "$1 ($((SECONDS - t_start))s)"; }

# ---------------------------------------------------------------------------- fetch
cmd_fetch() {
  command -v apt-get >/dev/null || die "fetch needs apt-get (run it on Debian 12, not on the device)"
  local pkgs=("${dev_packages[@]}" "${tool_packages[@]}" "${runtime_packages[@]}")
  mkdir -p "$debs_dir"
  step_begin
  local uris
  if ! uris="$(apt-get download --print-uris "${pkgs[@]}" 2>&1)"; then
    log "apt-get download --print-uris failed; running apt-get update"
    local sudo=""
    if [[ $(id -u) -ne 0 ]]; then command -v sudo >/dev/null && sudo="sudo"; fi
    $sudo apt-get update -qq
    uris="$(apt-get download --print-uris "${pkgs[@]}")" || die "cannot resolve: ${pkgs[*]}"
  fi
  # Lines: 'URI' file size hash
  local -a files=() missing=()
  local uri file _rest
  while read -r uri file _rest; do
    [[ "$uri" == \'* && "$file" == *.deb ]] || continue
    files+=("$file")
    [[ -s "$debs_dir/$file" ]] || missing+=("${file%%_*}")
  done <<<"$uris"
  ((${#files[@]} == ${#pkgs[@]})) || die "expected ${#pkgs[@]} .debs, apt resolved ${#files[@]}:
$uris"
  if ((${#missing[@]})); then
    (cd "$debs_dir" && apt-get download -q "${missing[@]}" >/dev/null 2>"$debs_dir/.fetch.err") || {
      log "apt-get download failed; apt-get update, then one retry"
      local sudo=""
      if [[ $(id -u) -ne 0 ]]; then command -v sudo >/dev/null && sudo="sudo"; fi
      $sudo apt-get update -qq
      (cd "$debs_dir" && apt-get download -q "${missing[@]}" >/dev/null) || die "apt-get download failed: $(cat "$debs_dir/.fetch.err")"
    }
    rm -f "$debs_dir/.fetch.err"
  fi
  # Other versions / packages no longer listed would be unpacked too: remove them.
  local f keep
  for f in "$debs_dir"/*.deb; do
    [[ -e "$f" ]] || continue
    keep=0
    for file in "${files[@]}"; do [[ "${f##*/}" == "$file" ]] && keep=1 && break; done
    if ((keep == 0)); then log "removing stale ${f##*/}"; rm -f "$f"; fi
  done
  fetch_photos
  local bytes
  bytes="$(du -cb "$debs_dir"/*.deb | tail -n1 | cut -f1)"
  step_end "fetch: ${#files[@]} .debs (${#missing[@]} downloaded), $((bytes / 1024 / 1024)) MiB ($bytes bytes) in $debs_dir"
  ((bytes <= max_mib * 1024 * 1024)) || die ".device-debs is $((bytes / 1024 / 1024)) MiB, above the ${max_mib} MiB budget (the device's carry limit is 64 MiB with the repo)"
}

# The real-photos recipe's sources (docs/datasets.md): the 12 nature photographs of
# mate-backgrounds (6.6 MB) into .device-photos/, for `mlbench-datagen real-photos
# --source` on the device; the package itself (45 MB) is too big to carry.
fetch_photos() {
  local src=/usr/share/backgrounds/mate/nature tmp=""
  if [[ ! -d "$src" ]]; then
    tmp="$(mktemp -d)"
    chmod a+rwx "$tmp"  # apt's download sandbox user writes there
    (cd "$tmp" && apt-get download -q mate-backgrounds >/dev/null) || die "apt-get download mate-backgrounds failed"
    dpkg-deb -x "$tmp"/mate-backgrounds_*.deb "$tmp/x"
    src="$tmp/x/usr/share/backgrounds/mate/nature"
  fi
  rm -rf "$photos_dir"
  mkdir -p "$photos_dir"
  cp "$src"/*.jpg "$photos_dir/"
  [[ -z "$tmp" ]] || rm -rf "$tmp"
  log "photos: $(find "$photos_dir" -name '*.jpg' | wc -l) nature photographs of mate-backgrounds in $photos_dir ($(du -sh "$photos_dir" | cut -f1))"
}

# ---------------------------------------------------------------------------- build
unpack_deb() {  # deb dest
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$2"
  else
    local tmp data
    tmp="$(mktemp -d)"
    (cd "$tmp" && ar x "$1")
    data="$(find "$tmp" -maxdepth 1 -name 'data.tar*' | head -n1)"
    [[ -n "$data" ]] || die "no data.tar in $1"
    case "$data" in
      *.zst) zstd -dc "$data" | tar -x -C "$2" ;;
      *) tar -xf "$data" -C "$2" ;;
    esac
    rm -rf "$tmp"
  fi
}

is_listed() {  # word list...
  local w="$1" x; shift
  for x in "$@"; do [[ "$x" == "$w" ]] && return 0; done
  return 1
}

make_prefix() {  # prefix arch system_has_pkgconfig
  local prefix="$1" arch="$2" have_pc="$3"
  local stamp="$prefix/.mlbench-device-prefix"
  local want
  want="$({ find "$debs_dir" -maxdepth 1 -name "*.deb" -printf "%f\n" | sort; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)-$have_pc-$prefix"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "prefix $prefix is up to date (0s)"
    return
  fi
  step_begin
  if [[ -e "$prefix" ]]; then
    # Only ever delete a prefix this script made (or an empty folder).
    if [[ -f "$stamp" || -z "$(ls -A "$prefix")" ]]; then rm -rf "$prefix"; else
      die "$prefix exists and was not made by this script; remove it or set MLBENCH_DEVICE_PREFIX"
    fi
  fi
  mkdir -p "$prefix"
  local stage="$prefix/.stage" deb pkg n=0 pruned=()
  local sys_libs=""
  local ldc
  ldc="$(command -v ldconfig || echo /sbin/ldconfig)"
  [[ -x "$ldc" ]] && sys_libs="$("$ldc" -p 2>/dev/null | awk '/=>/{print $1}' | sort -u)"
  for deb in "$debs_dir"/*.deb; do
    pkg="${deb##*/}"; pkg="${pkg%%_*}"
    if is_listed "$pkg" "${tool_packages[@]}"; then
      [[ "$have_pc" == yes ]] && continue
      unpack_deb "$deb" "$prefix"
    elif is_listed "$pkg" "${runtime_packages[@]}"; then
      rm -rf "$stage"; mkdir -p "$stage"
      unpack_deb "$deb" "$stage"
      local lib
      while IFS= read -r lib; do
        if grep -qxF "${lib##*/}" <<<"$sys_libs"; then rm -f "$lib"; pruned+=("${lib##*/}"); fi
      done < <(find "$stage" \( -type f -o -type l \) -name 'lib*.so*')
      cp -a "$stage/." "$prefix/"
      rm -rf "$stage"
    else
      unpack_deb "$deb" "$prefix"
    fi
    n=$((n + 1))
  done
  rm -rf "$prefix/usr/share/doc" "$prefix/usr/share/man" "$prefix/usr/share/lintian"
  # Merged /usr, as on Debian 12 and Ubuntu: libcgroup-dev ships libcgroup.so in /usr/lib
  # but its library and .pc's libdir in /lib.
  if [[ -d "$prefix/lib" && ! -L "$prefix/lib" ]]; then
    mkdir -p "$prefix/usr/lib"
    cp -a "$prefix/lib/." "$prefix/usr/lib/"
    rm -rf "${prefix:?}/lib"
    ln -s usr/lib "$prefix/lib"
  fi
  # Absolute symlinks (/usr/...) point into the prefix instead.
  local link target
  while IFS= read -r link; do
    target="$(readlink "$link")"
    [[ "$target" == /* ]] && ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l)
  # Debian's BLAS/LAPACK live in blas/ and lapack/ behind update-alternatives links, which
  # dpkg-deb -x does not make: add them (unless the system's copy was kept instead).
  local libdir="$prefix/usr/lib/$arch" so
  for so in blas/libblas.so.3 lapack/liblapack.so.3; do
    [[ -e "$libdir/$so" && ! -e "$libdir/${so#*/}" ]] && ln -s "$so" "$libdir/${so#*/}"
  done
  # pkg-config files: prefix=/usr and other absolute /usr, /lib paths (libcgroup.pc's
  # libdir=/lib/<arch>) -> the prefix.
  local pc
  while IFS= read -r pc; do
    sed -i -E -e "s#^([A-Za-z0-9_.]+)=/(usr|lib)(/|\$)#\\1=$prefix/\\2\\3#" \
      -e "s#(-[IL])/(usr|lib)/#\\1$prefix/\\2/#g" "$pc"
  done < <(find "$prefix" -name '*.pc' -type f)
  echo "$want" >"$stamp"
  step_end "unpacked $n .debs into $prefix${pruned:+ (system copies used for: ${pruned[*]})}"
}

cmd_build() {
  local build_dir="" targets=()
  while (($#)); do
    case "$1" in
      --) shift; targets=("$@"); break ;;
      -h|--help) usage; exit 0 ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) [[ -z "$build_dir" ]] || die "one BUILD_DIR only (targets go after --)"; build_dir="$1" ;;
    esac
    shift
  done
  build_dir="${build_dir:-$root/build-device}"
  mkdir -p "$build_dir"
  build_dir="$(cd "$build_dir" && pwd)"
  local prefix="${MLBENCH_DEVICE_PREFIX:-/tmp/mlbench-prefix}"
  [[ "$prefix" == /* ]] || die "MLBENCH_DEVICE_PREFIX must be absolute"
  prefix="${prefix%/}"
  [[ -n "$prefix" && "$prefix" != /usr && "$prefix" != /tmp ]] || die "refusing prefix '${prefix:-/}'"
  compgen -G "$debs_dir/*.deb" >/dev/null || die "no .debs in $debs_dir: run 'scripts/device-build.sh fetch' on Debian 12 and carry .device-debs"
  local t0=$SECONDS
  local cxx="${CXX:-g++}"
  command -v "$cxx" >/dev/null || cxx=c++
  local arch
  arch="$("$cxx" -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)"
  arch="${arch/-pc-/-}"   # x86_64-pc-linux-gnu (some gcc builds) -> Debian's x86_64-linux-gnu
  for tool in cmake ninja "$cxx"; do command -v "$tool" >/dev/null || die "$tool not found"; done

  local have_pc=no
  command -v pkg-config >/dev/null && have_pc=yes
  make_prefix "$prefix" "$arch" "$have_pc"

  local libdirs="$prefix/usr/lib/$arch"

  # LibTorch: the CMake prefix and library dir of the python3's torch, or as given.
  step_begin
  local py="${MLBENCH_PYTHON:-python3}" torch_prefix="${MLBENCH_TORCH_PREFIX:-}" torch_lib="${MLBENCH_TORCH_LIB:-}"
  local arch_list="${TORCH_CUDA_ARCH_LIST:-}" torch_info=""
  if [[ -z "$torch_prefix" || -z "$torch_lib" || -z "$arch_list" ]] && command -v "$py" >/dev/null; then
    torch_info="$("$py" - 2>/dev/null <<'EOF' || true
import os, torch
cap = ""
try:
    if torch.cuda.is_available():
        cap = "%d.%d" % torch.cuda.get_device_capability(0)
except Exception:
    pass
print(torch.utils.cmake_prefix_path)
print(os.path.join(os.path.dirname(torch.__file__), "lib"))
print(cap)
print(torch.__version__, torch.version.cuda or "cpu")
EOF
)"
  fi
  local info_prefix info_lib info_cap info_ver
  { read -r info_prefix; read -r info_lib; read -r info_cap; read -r info_ver; } <<<"$torch_info" || true
  torch_prefix="${torch_prefix:-$info_prefix}"
  [[ -n "$torch_prefix" ]] || die "no LibTorch: '$py -c \"import torch\"' failed; set MLBENCH_TORCH_PREFIX (or MLBENCH_PYTHON)"
  if [[ -z "$torch_lib" ]]; then
    if [[ -n "$info_lib" ]]; then torch_lib="$info_lib"
    elif compgen -G "$torch_prefix/../../lib/libtorch*" >/dev/null; then torch_lib="$(cd "$torch_prefix/../../lib" && pwd)"
    fi
  fi
  arch_list="${arch_list:-${info_cap:-9.0}}"
  step_end "torch ${info_ver:-(version unknown)}: prefix $torch_prefix, lib ${torch_lib:-(system)}, TORCH_CUDA_ARCH_LIST=$arch_list"

  local ld_path="$libdirs${torch_lib:+:$torch_lib}"
  export LD_LIBRARY_PATH="$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_LIBDIR="$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/lib/pkgconfig:$prefix/usr/share/pkgconfig"
  export TORCH_CUDA_ARCH_LIST="$arch_list"
  cat >"$build_dir/device-env.sh" <<EOF
# Written by scripts/device-build.sh: source it before running this build's binaries.
export LD_LIBRARY_PATH="$ld_path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export MLBENCH_DEVICE_PREFIX="$prefix"
export TORCH_CUDA_ARCH_LIST="$arch_list"
EOF
  log "LD_LIBRARY_PATH=$ld_path (also in $build_dir/device-env.sh)"

  # Libraries in the prefix whose dependencies resolve nowhere (a warning: the link says more).
  if command -v ldd >/dev/null; then
    local missing
    missing="$(find "$prefix/usr/lib/$arch" -maxdepth 1 -name 'lib*.so.*' -type f -exec ldd {} + 2>/dev/null \
      | awk '/not found/{print $1}' | sort -u | tr '\n' ' ')"
    [[ -z "$missing" ]] || log "warning: prefix libraries need libraries found nowhere: $missing"
  fi

  local cmake_args=(
    -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=$prefix/usr;$torch_prefix"
    "-DCMAKE_INCLUDE_PATH=$prefix/usr/include/$arch;$prefix/usr/include"
    "-DCMAKE_LIBRARY_PATH=$prefix/usr/lib/$arch;$prefix/usr/lib"
    "-DCMAKE_PROGRAM_PATH=$prefix/usr/bin"
    # Headers found through the compiler's default /usr/include (+ multiarch: jconfig.h,
    # openssl/configuration.h, gloo/) are searched in the prefix, after every -I/-isystem.
    "-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES=$prefix/usr/include/$arch;$prefix/usr/include"
    "-DCMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES=$prefix/usr/include/$arch;$prefix/usr/include"
    "-DOPENSSL_ROOT_DIR=$prefix/usr"
    "-DTORCH_CUDA_ARCH_LIST=$arch_list"
    # PyTorch's wheels ship fmt's headers (a newer fmt than Debian's libfmt.so.9): TUs that
    # see torch's include dir may get them first. Header-only fmt needs no matching library,
    # and each fmt version lives in its own inline namespace (fmt::v9, fmt::v11, ...).
    "-DCMAKE_CXX_FLAGS=-DFMT_HEADER_ONLY=1 ${CXXFLAGS:-}"
  )
  if [[ "$have_pc" == no ]]; then
    local wrapper="$prefix/bin/pkg-config"
    mkdir -p "$prefix/bin"
    cat >"$wrapper" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$prefix/usr/lib/$arch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$prefix/usr/bin/pkgconf" "\$@"
EOF
    chmod +x "$wrapper"
    cmake_args+=("-DPKG_CONFIG_EXECUTABLE=$wrapper")
  fi
  local cuda="${CUDAToolkit_ROOT:-/usr/local/cuda}"
  if [[ -x "$cuda/bin/nvcc" ]]; then
    cmake_args+=("-DCUDAToolkit_ROOT=$cuda" "-DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc")
    export PATH="$cuda/bin:$PATH"
  fi
  local extra=()
  read -r -a extra <<<"${MLBENCH_CMAKE_ARGS:-}"   # split on blanks, no globbing
  cmake_args+=("${extra[@]}")

  step_begin
  if ! cmake "${cmake_args[@]}" >"$build_dir/device-cmake.log" 2>&1; then
    log "cmake failed ($((SECONDS - t_start))s); last 60 lines of $build_dir/device-cmake.log:"
    tail -n 60 "$build_dir/device-cmake.log"
    exit 1
  fi
  step_end "configured $build_dir"

  step_begin
  local ninja_args=(-C "$build_dir" -j "${MLBENCH_JOBS:-$(nproc)}")
  [[ "${MLBENCH_NINJA_KEEP_GOING:-1}" == 1 ]] && ninja_args+=(-k 0)
  if ! ninja "${ninja_args[@]}" "${targets[@]}" >"$build_dir/device-ninja.log" 2>&1; then
    local failed
    failed="$(grep -c '^FAILED: ' "$build_dir/device-ninja.log" || true)"
    log "ninja failed ($((SECONDS - t_start))s, $failed failed edges: $(grep '^FAILED: ' "$build_dir/device-ninja.log" | cut -c9- | cut -d' ' -f1 | head -n 10 | tr '\n' ' '))"
    log "first errors in $build_dir/device-ninja.log:"
    grep -m 40 -E 'error:|FAILED:|undefined reference' "$build_dir/device-ninja.log" | cut -c1-400
    exit 1
  fi
  step_end "built ${targets[*]:-all} ($(grep -c '^\[' "$build_dir/device-ninja.log" || true) steps)"
  log "done in $((SECONDS - t0))s; run binaries after: source $build_dir/device-env.sh"
}

case "${1:-}" in
  fetch) shift; (($# == 0)) || die "fetch takes no arguments"; cmd_fetch ;;
  build) shift; cmd_build "$@" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
