# studies/lib/page_cache.sh: sourced by the bench scripts that set a dataset's page-cache state
# before each run (readahead.sh, io_engine.sh). Needs /usr/bin/python3 and fincore (util-linux).

# page_cache_set FILES FRAC: of the files listed in FILES (one path a line), the first FRAC
# (0 .. 1) of a fixed shuffle (seed 14: the same subset every time) read into the page cache,
# the rest evicted (written back first, then POSIX_FADV_DONTNEED: the advice drops no dirty
# page, so a dataset generated seconds before would stay resident).
page_cache_set() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import os, random, sys
files = open(sys.argv[1]).read().split("\n")[:-1]
shuffled = list(files)
random.Random(14).shuffle(shuffled)
keep = set(shuffled[:round(float(sys.argv[2]) * len(files))])
for f in files:
    fd = os.open(f, os.O_RDONLY)
    if f in keep:
        while os.read(fd, 1 << 20):
            pass
    else:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}

# page_cache_fraction FILES: prints the fraction of the files' pages resident (fincore), e.g. 0.500.
page_cache_fraction() {
  xargs -a "$1" -d '\n' fincore -b -n -o RES,SIZE |
    awk -v pg="$(getconf PAGESIZE)" '{r += $1; s += int(($2 + pg - 1) / pg) * pg} END {printf "%.3f", r / s}'
}
