#!/usr/bin/env bash
# The Debian package (docs/runner.md, "Installing"): `cpack -G DEB` in the build folder, then its contents and
# control fields: the installed layout under /usr, no path of the build machine, and the
# libraries the binaries need as dependencies (dpkg-shlibdeps).
# Usage: deb_test.sh BUILD_DIR
set -euo pipefail
build="$1"
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "deb_test: skipped: no dpkg-deb on this machine"; exit 77; }
command -v dpkg-shlibdeps >/dev/null || { echo "deb_test: skipped: no dpkg-shlibdeps (dpkg-dev) on this machine"; exit 77; }
out="$(mktemp -d /tmp/mlbench_deb_XXXXXX)"
trap 'rm -rf "$out"' EXIT
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || fail "cpack: $(tail -5 "$out/cpack.log")"
deb="$(ls "$out"/mlbench_*.deb 2>/dev/null | head -1)"
[[ -n "$deb" ]] || fail "no .deb in $out: $(tail -3 "$out/cpack.log")"
dpkg-deb -c "$deb" >"$out/list"
for f in ./usr/bin/mlbench-run ./usr/bin/mlbench-report ./usr/bin/mlbench-stall ./usr/bin/mlbench-datagen \
         ./usr/lib/mlbench/benchmarks/convnet ./usr/share/mlbench/probe/mlbench_probe.py \
         ./usr/share/mlbench/configs/fast.json ./usr/share/mlbench/baselines.json; do
  grep -q " $f\$" "$out/list" || fail "$f not in the package"
done
root="$(cd "$build/.." && pwd)"
if grep -q -e "$root" -e "$build" "$out/list"; then fail "a path of the build machine in the package: $(grep -e "$root" "$out/list" | head -2)"; fi
dpkg-deb -I "$deb" >"$out/info"
grep -q "^ Depends:.*libtorch" "$out/info" || fail "no libtorch dependency: $(grep Depends "$out/info")"
grep -q "^ Depends:.*libcgroup" "$out/info" || fail "no libcgroup dependency: $(grep Depends "$out/info")"
if command -v help2man >/dev/null; then
  grep -q " ./usr/share/man/man1/mlbench-run.1\$" "$out/list" || fail "no man page for mlbench-run"
fi
echo "deb_test: ok: $(basename "$deb"), $(wc -l <"$out/list") entries; $(grep '^ Depends:' "$out/info" | cut -c1-200)"
