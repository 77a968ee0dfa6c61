# studies/lib/blkio.sh: sourced by the bench scripts that throttle the disk under a dataset with
# cgroup v1 blkio.throttle.read_bps_device (whatif_tables.sh, partitioned_cache.sh).

# blkio_setup SCRIPT DATA NAME MBPS: checks that cgroup v1 blkio throttling is there (root) and
# that DATA is on a disk (not tmpfs), then makes the cgroup /sys/fs/cgroup/blkio/NAME-$$ with reads
# from that disk throttled to MBPS MB/s. Sets blkio_disk (/dev/...), blkio_majmin and blkio_cg.
# Exits 2 with a one-line error naming SCRIPT. The caller removes the cgroup (rmdir "$blkio_cg")
# once nothing runs in it, e.g. in its EXIT trap.
blkio_setup() {
  local script=$1 data=$2 name=$3 mbps=$4 root=/sys/fs/cgroup/blkio parent
  [[ -w "$root" && -e "$root/blkio.throttle.read_bps_device" ]] ||
    { echo "$script: error: cgroup v1 blkio throttling is unavailable here (needs root and $root)" >&2; exit 2; }
  # df names the filesystem that holds DATA (findmnt -T lists every mount stacked there).
  local fstype
  fstype=$(df --output=fstype "$data" | tail -1)
  [[ "$fstype" != tmpfs ]] || { echo "$script: error: $data is on tmpfs: no disk to throttle" >&2; exit 2; }
  blkio_disk=$(df --output=source "$data" | tail -1)
  parent=$(lsblk -no PKNAME "$blkio_disk" 2>/dev/null | head -1 || true)
  [[ -n "$parent" ]] && blkio_disk="/dev/$parent"
  blkio_majmin=$(lsblk -dno MAJ:MIN "$blkio_disk" 2>/dev/null | tr -d ' ' || true)
  [[ -n "$blkio_majmin" ]] ||
    { echo "$script: error: $data is on $blkio_disk ($fstype), not a block device blkio can throttle" >&2; exit 2; }
  blkio_cg="$root/$name-$$"
  mkdir "$blkio_cg"
  echo "$blkio_majmin $((mbps * 1000000))" > "$blkio_cg/blkio.throttle.read_bps_device"
}

# in_cg CMD...: runs CMD inside the throttled cgroup.
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$blkio_cg" "$@"; }
