"""Checks the loader's read-ahead end to end (used by the loader_e2e test): a run with
--io-depth > 0 and one with --io-depth 0, same seed, must load the same items into the
same batches (from their traces' decode spans), report their io_depth and engine, and a
read-ahead run's trace must show its reads: on the I/O threads' tracks ("io N"), or on
io_uring's lanes ("io_uring R.L": one per read in flight on ring R), no two overlapping on a track. ENGINE: the
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
if engine == "io_uring":  # no I/O threads: the rings' lanes instead
    assert not any(t.startswith("io ") for t in tracks), tracks
    assert any(t.startswith("io_uring ") for t in tracks), tracks
else:
    assert {f"io {i}" for i in range(depth)} <= tracks, tracks
reads = [e for e in ahead_trace["traceEvents"] if e["name"] == "read"]
assert reads, "no read spans in the read-ahead run's trace"
by_track = {}
for e in reads:
    by_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
for spans in by_track.values():
    spans.sort()
    assert all(b[0] >= a[1] - 1e-3 for a, b in zip(spans, spans[1:])), "overlapping read spans on one track"
# The report is made before the loader stops: reads for batches past the ones delivered may be
# issued after it (and on threads, reads still queued at the stop are dropped, never run). The
# reads of the delivered batches were all issued before the report.
delivered = [e for e in reads if e["args"]["batch"] < ahead["pipeline"]["batches"]]
assert len(delivered) <= ra["reads"] and all("item" in e["args"] for e in reads), (len(delivered), ra)
assert not any(e["name"] == "read" for e in serial_trace["traceEvents"])
print("ok")
