"""Checks the loader's read-ahead end to end (used by the loader_e2e test): a run with
--io-depth > 0 and one with --io-depth 0, same seed, must load the same items into the
same batches (from their traces' decode spans), report their io_depth and engine, and a
read-ahead run on threads must show the I/O threads' reads in its trace. ENGINE: the
--io-engine asked for (threads, io_uring); io_uring falls back to threads, with a warning,
where it cannot be set up, and the report says which ran.
Usage: check_read_ahead.py REPORT_DIR_AHEAD TRACE_AHEAD REPORT_DIR_SERIAL TRACE_SERIAL DEPTH ENGINE"""
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
asked = sys.argv[6]
assert ahead["pipeline"]["io_depth"] == depth, ahead["pipeline"]["io_depth"]
assert serial["pipeline"]["io_depth"] == 0 and serial["pipeline"]["read_ahead"] is None
ra = ahead["pipeline"]["read_ahead"]
assert ra["engine"] in ("threads", asked), ra
engine = ra["engine"]
if engine != asked:
    print(f"io_uring cannot be set up here: the run read ahead on threads", file=sys.stderr)
assert ra["io_threads"] == (depth if engine == "threads" else 0) and ra["reads"] + ra["inline_reads"] > 0, ra
assert ra["read_busy_s"] == 0 or ra["reads"] > 0, ra  # page-cached files are read inline
if ahead["pipeline"].get("drop_after_read"):
    assert ra["inline_reads"] == 0 and ra["reads"] > 0 and ra["read_busy_s"] > 0, ra
assert 0 < ra["max_outstanding"] <= depth, ra
assert loaded(ahead, ahead_trace) == loaded(serial, serial_trace), "read-ahead loaded other items than serial"
tracks = {e["args"]["name"] for e in ahead_trace["traceEvents"] if e["name"] == "thread_name"}
if engine == "io_uring":  # no thread reads: no I/O tracks, no read spans
    assert not any(t.startswith("io ") for t in tracks), tracks
    assert not any(e["name"] == "read" for e in ahead_trace["traceEvents"])
    print("ok")
    sys.exit(0)
assert {f"io {i}" for i in range(depth)} <= tracks, tracks
reads = [e for e in ahead_trace["traceEvents"] if e["name"] == "read"]
# Reads still queued when the run stopped were dropped, never run.
assert len(reads) <= ra["reads"] and all("item" in e["args"] for e in reads), (len(reads), ra)
assert not any(e["name"] == "read" for e in serial_trace["traceEvents"])
print("ok")
