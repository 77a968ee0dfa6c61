"""Checks the loader's read-ahead end to end (used by the loader_e2e test): a run with
--io-depth > 0 and one with --io-depth 0, same seed, must load the same items into the
same batches (from their traces' decode spans), report their io_depth, and the read-ahead
run's trace must show the I/O threads' reads.
Usage: check_read_ahead.py REPORT_DIR_AHEAD TRACE_AHEAD REPORT_DIR_SERIAL TRACE_SERIAL DEPTH"""
import glob
import json
import sys


def load(report_dir, trace_file):
    reports = glob.glob(report_dir + "/*.json")
    assert len(reports) == 1, reports
    r = json.load(open(reports[0]))
    assert r["completed"] is True, r.get("reason")
    return r, json.load(open(trace_file))


def loaded(report, trace):
    """(batch, item) of every sample decoded for the batches the consumer took."""
    batches = report["pipeline"]["batches"]
    pairs = sorted((e["args"]["batch"], e["args"]["item"]) for e in trace["traceEvents"]
                   if e.get("name") == "decode" and e["args"]["batch"] < batches)
    assert len(pairs) == batches * report["batch_size"], (len(pairs), batches)
    return pairs


ahead, ahead_trace = load(sys.argv[1], sys.argv[2])
serial, serial_trace = load(sys.argv[3], sys.argv[4])
depth = int(sys.argv[5])
assert ahead["pipeline"]["io_depth"] == depth, ahead["pipeline"]["io_depth"]
assert serial["pipeline"]["io_depth"] == 0 and serial["pipeline"]["read_ahead"] is None
ra = ahead["pipeline"]["read_ahead"]
assert ra["io_threads"] == depth and ra["reads"] + ra["inline_reads"] > 0, ra
assert ra["read_busy_s"] == 0 or ra["reads"] > 0, ra  # page-cached files are read inline
if ahead["pipeline"].get("drop_after_read"):
    assert ra["inline_reads"] == 0 and ra["reads"] > 0 and ra["read_busy_s"] > 0, ra
assert 0 < ra["max_outstanding"] <= depth, ra
assert loaded(ahead, ahead_trace) == loaded(serial, serial_trace), "read-ahead loaded other items than serial"
tracks = {e["args"]["name"] for e in ahead_trace["traceEvents"] if e["name"] == "thread_name"}
assert {f"io {i}" for i in range(depth)} <= tracks, tracks
reads = [e for e in ahead_trace["traceEvents"] if e["name"] == "read"]
# Reads still queued when the run stopped were dropped, never run.
assert len(reads) <= ra["reads"] and all("item" in e["args"] for e in reads), (len(reads), ra)
assert not any(e["name"] == "read" for e in serial_trace["traceEvents"])
print("ok")
