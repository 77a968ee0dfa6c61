"""End-to-end test of coordinated prep (docs/pipeline.md) against another process that damages a
running group's shared-memory segment, with the `loader` benchmark.

usage: check_coordinated_damage.py LOADER DATA_DIR WORK_DIR

Two loaders with --coordinated 2 on one group; once both are in it, this process
1. truncates the segment to 0 bytes (before: every member died of SIGBUS, exit 135, no report);
2. (a new group) overwrites the segment's first 64 bytes, its header (before: the FAIL report,
   then `terminate called`, exit 134).
Each time, every member must exit 1 with a FAIL report whose reason names the segment.
"""
import glob
import json
import os
import subprocess
import sys
import time

from coordinated_group import launch, segment, started_and_joined

loader, data, work = sys.argv[1:4]
base = [loader, "--data", data, "-b", "16", "--workers", "1", "--no-cuda", "--seed", "3", "--io-depth", "0",
        "--number", "2", "--epochs", "100000"]
group_prefix = f"damage-{os.getpid()}"


def damaged_group(name, damage, what):
    group = f"{group_prefix}-{name}"
    procs = [launch(base + ["--coordinated", "2", "--group", group, "--report", f"{work}/{name}{m}"],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for m in range(2)]
    deadline = time.monotonic() + 120  # a hang guard, not a speed
    while started_and_joined(group) != (1, 2):
        assert time.monotonic() < deadline, "the two members never formed the group"
        for p in procs:
            assert p.poll() is None, p.communicate()[0].decode()
        time.sleep(0.01)
    time.sleep(0.5)  # batches go round the ring
    damage(segment(group))
    for m, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        out = out.decode()
        assert p.returncode == 1, f"{name}: member {m} exit {p.returncode}:\n{out}"
        assert "terminate called" not in out, out
        assert segment(group) in out, out
        reports = glob.glob(f"{work}/{name}{m}/*.FAIL.*.json")
        assert len(reports) == 1, (reports, out)
        r = json.load(open(reports[0]))
        assert not r["completed"], r
        assert segment(group) in r["reason"] and what in r["reason"], r["reason"]
    if os.path.exists(segment(group)):
        os.remove(segment(group))


def truncate(path):
    os.truncate(path, 0)


def overwrite_header(path):
    with open(path, "r+b") as f:
        f.write(b"X" * 64)


damaged_group("truncated", truncate, "truncated")
damaged_group("overwritten", overwrite_header, "overwrote the header")
print("ok")
