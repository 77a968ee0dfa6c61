# Sourced by the golden-output tests (tests/report/golden_test.sh, tests/stall/golden_test.sh).
# golden_check GOT EXPECTED_FILE: compares GOT byte for byte with EXPECTED_FILE and prints the
# first lines of the diff (returns 1) when they differ; with MLBENCH_UPDATE_GOLDEN=1 it rewrites
# EXPECTED_FILE from GOT instead (review the diff before committing it).
golden_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

golden_check() {
  local got=$1 expected=$2
  if [[ "${MLBENCH_UPDATE_GOLDEN:-}" == 1 ]]; then
    mkdir -p "$(dirname "$expected")" && cp "$got" "$expected" && echo "rewrote $expected"
    return 0
  fi
  if ! diff -u "$expected" "$got" >"$got.diff"; then
    echo "FAIL: $(basename "$expected") differs from ${expected#"$golden_root"/}:"
    head -40 "$got.diff"
    return 1
  fi
}
