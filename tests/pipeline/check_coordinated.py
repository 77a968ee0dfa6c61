"""End-to-end test of coordinated prep (docs/pipeline.md) with the `loader` benchmark.

usage: check_coordinated.py LOADER DATA_DIR WORK_DIR

1. One loader alone: the batches an epoch has.
2. Two loaders with --coordinated 2 on one group: each consumes every batch of
   every epoch (the same per-epoch counts as alone), each builds about half
   (members s % 2), both complete, and the shared-memory segment is gone after.
3. Two loaders, one killed (SIGKILL) once both are in the group: the other is
   dropped from it by pid, finishes with every batch, and removes the segment.
4. Bad input: --coordinated without --group fails with one line, exit 2.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

from coordinated_group import launch, segment, started_and_joined

loader, data, work = sys.argv[1:4]
# -b 16 (> 8): the benchmark's memory probe runs one step in a forked child first,
# which must stay out of the group.
base = [loader, "--data", data, "-b", "16", "--workers", "1", "--no-cuda", "--seed", "3", "--io-depth", "0",
        "--number", "2"]  # 32 images: 2 batches an epoch, one observation each
group_prefix = f"e2e-{os.getpid()}"


def report(directory):
    files = glob.glob(directory + "/*.json")
    assert len(files) == 1, files
    return json.load(open(files[0]))


def epochs(r):
    return [(e["epoch"], e["batches"], e["images"]) for e in r["pipeline"]["epochs"]]





# 1. Alone.
subprocess.run(base + ["--epochs", "3", "--report", f"{work}/alone"], check=True, capture_output=True)
alone = report(f"{work}/alone")
assert alone["completed"], alone.get("reason")
assert alone["pipeline"]["coordinated"] is None
per_epoch = epochs(alone)
batches = alone["pipeline"]["batches_per_epoch"]
assert batches == 2, batches
assert per_epoch == [(e, 2, 32) for e in range(3)], per_epoch

# 2. Two coordinated members.
group = group_prefix + "-pair"
procs = [launch(base + ["--epochs", "3", "--coordinated", "2", "--group", group, "--report",
                                  f"{work}/pair{m}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
         for m in range(2)]
for p in procs:
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out.decode()
members = set()
for m in range(2):
    r = report(f"{work}/pair{m}")
    assert r["completed"], r.get("reason")
    assert epochs(r) == per_epoch, (epochs(r), per_epoch)
    c = r["pipeline"]["coordinated"]
    assert c["group"] == group and c["members"] == 2 and c["joined"] == 2, c
    assert c["members_dropped"] == [], c
    assert c["batches_consumed"] >= 3 * batches, c
    # Members own batches s % 2 and take a prefix of the run: half of it; a waiting
    # worker builds its member's next batches ahead (at most 2 rounds of the group),
    # and the loader is endless, so up to 2 more at the end.
    assert c["batches_consumed"] / 2 - 1 <= c["batches_prepped"] <= c["batches_consumed"] / 2 + 2, c
    assert c["batches_taken_over"] == 0, c
    # Decode ran only for the batches built here.
    assert r["pipeline"]["stages"]["decode"]["items"] == c["batches_prepped"] * 16, r["pipeline"]["stages"]
    members.add(c["member"])
assert members == {0, 1}, members
assert not os.path.exists(segment(group)), "the segment outlived its group"

# 3. One member killed mid-run.
group = group_prefix + "-kill"
survivor = launch(base + ["--epochs", "4", "--coordinated", "2", "--group", group, "--report",
                                    f"{work}/survivor"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
victim = launch(base + ["--epochs", "1000", "--coordinated", "2", "--group", group, "--report",
                                  f"{work}/victim"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 120  # a hang guard, not a speed
while started_and_joined(group) != (1, 2):
    assert time.monotonic() < deadline, "the two members never formed the group"
    assert survivor.poll() is None, survivor.communicate()[0].decode()
    time.sleep(0.01)
victim.send_signal(signal.SIGKILL)
victim.wait()
out, _ = survivor.communicate(timeout=120)
assert survivor.returncode == 0, out.decode()
r = report(f"{work}/survivor")
assert r["completed"], r.get("reason")
assert epochs(r) == [(e, 2, 32) for e in range(4)], epochs(r)
c = r["pipeline"]["coordinated"]
assert len(c["members_dropped"]) == 1, c
assert c["members_dropped"][0]["pid"] == victim.pid and "exited" in c["members_dropped"][0]["reason"], c
assert c["batches_taken_over"] > 0, c
assert not os.path.exists(segment(group)), "the survivor left the segment behind"

# 4. Bad input.
p = subprocess.run(base + ["--coordinated", "2", "--epochs", "1"], capture_output=True, text=True)
assert p.returncode == 2 and "--coordinated needs --group" in p.stderr, (p.returncode, p.stderr)
p = subprocess.run(base + ["--coordinated", "2", "--group", "a/b", "--epochs", "1"], capture_output=True, text=True)
assert p.returncode == 2 and "--group 'a/b'" in p.stderr, (p.returncode, p.stderr)
print("ok")
