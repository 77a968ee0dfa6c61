# studies/lib/blas.sh: sourced by the bench scripts that choose the BLAS per run
# (blas_suite.sh, blas_threads.sh, compare_blas.sh). A BLAS is a Debian folder under
# /usr/lib/<arch> ("blas" is the reference BLAS, "openblas-openmp", "openblas-pthread",
# "blis-openmp", ...), chosen with LD_LIBRARY_PATH: the dynamic loader looks there before
# the alternatives link, so the machine's setting is left alone.
blas_arch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)"

# blas_check SCRIPT FOLDER...: exits 2 naming the first folder without a libblas.so.3.
blas_check() {
  local script=$1 folder
  shift
  for folder in "$@"; do
    [[ -e "/usr/lib/$blas_arch/$folder/libblas.so.3" ]] || {
      echo "$script: error: /usr/lib/$blas_arch/$folder/libblas.so.3 not found (install its Debian package)" >&2
      exit 2
    }
  done
}

# blas_library_path FOLDER: the LD_LIBRARY_PATH value for that BLAS (the reference BLAS
# needs Debian's reference LAPACK folder too).
blas_library_path() {
  local dir="/usr/lib/$blas_arch/$1"
  [[ "$1" == blas ]] && dir="$dir:/usr/lib/$blas_arch/lapack"
  echo "$dir"
}
