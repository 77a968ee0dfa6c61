"""Checks a loader report directory and a trace file (used by the loader_e2e test)."""
import glob
import json
import sys

reports = glob.glob(sys.argv[1] + "/*.json")
assert len(reports) == 1, reports
r = json.load(open(reports[0]))
assert r["completed"] is True, r.get("reason")
assert r["train_item"]["avg"] > 0
p = r["pipeline"]
for stage in ("fetch", "decode", "augment", "collate"):
    assert p["stages"][stage]["busy_s"] > 0, stage
    assert p["stages"][stage]["items"] >= 6 * 8, stage
assert p["bytes_read"] > 0 and p["corrupt_samples"] == 0
assert p["batches"] == 6 and p["epochs"][0]["epoch"] == 0
# Each epoch's process CPU: decoding its images took some, and per image it is cpu_s / images.
for e in p["epochs"]:
    assert e["cpu_s"] > 0, e
    assert abs(e["cpu_us_per_image"] - 1e6 * e["cpu_s"] / e["images"]) < 1e-6 * e["cpu_us_per_image"] + 1e-9, e
assert r["stall"]["wait"]["count"] > 0
t = json.load(open(sys.argv[2]))
names = {e["name"] for e in t["traceEvents"]}
for n in ("fetch", "decode", "augment", "collate", "wait", "h2d", "compute", "thread_name"):
    assert n in names, n
tracks = {e["args"]["name"] for e in t["traceEvents"] if e["name"] == "thread_name"}
assert {"worker 0", "worker 1", "consumer"} <= tracks, tracks
print("ok")
