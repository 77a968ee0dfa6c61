"""What the coordinated-prep end-to-end checks (check_coordinated.py, check_coordinated_damage.py)
share: a group's shared-memory segment, how far its members have got, and loaders that never
outlive a failed check."""
import atexit
import os
import struct
import subprocess

started = []


def segment(group):
    return f"/dev/shm/mlbench-coord-{os.geteuid()}-{group}"


def started_and_joined(group):
    # The segment's header (pipeline/remedies/coordinated.cc, Shared): u64 magic, u32 version,
    # i32 members, i32 slots, i32 started, i32 joined.
    try:
        with open(segment(group), "rb") as f:
            head = f.read(28)
    except FileNotFoundError:
        return 0, 0
    if len(head) < 28:
        return 0, 0
    return struct.unpack_from("<ii", head, 20)


def launch(args, **kw):
    p = subprocess.Popen(args, **kw)
    started.append(p)
    return p


def _cleanup():
    # A failed check (or a hang ended by a timeout) leaves no loader behind.
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_cleanup)
