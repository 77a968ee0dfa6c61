"""End-to-end test of the partitioned cache (docs/pipeline.md) with the `loader` benchmark.

usage: check_partitioned.py LOADER DATA_DIR WORK_DIR [--netns]

Without --netns, on loopback:
1. Two loaders ("nodes"), each caching 50% of a 32-image set (its partition),
   4 epochs: both complete, each caches exactly its 16 items, the other
   partition's items come from the peer, and the two together read far fewer
   items from storage than two nodes caching on their own (160).
2. Two loaders, one killed (SIGKILL) once both are up: the other finishes every
   epoch, counts peer_failures and names the dead peer's address.
3. Bad input: --peers without --cache-size, a --rank outside --peers, a
   malformed --peers, a $RANK or $SLURM_PROCID that is not a rank: exit 2
   and one line naming the flag or variable.

With --netns: (1) across two network namespaces joined by a veth pair, each
loader in its own namespace with its own address, created here and removed at
the end; exit 77 (ctest: skipped) with the reason when they cannot be created.
"""
import atexit
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

loader, data, work = sys.argv[1:4]
netns = "--netns" in sys.argv[4:]
# -b 16 (> 8): the benchmark's memory probe runs one step in a forked child first,
# which must join no cluster. 32 images: 2 batches an epoch, one observation each.
base = [loader, "--data", data, "-b", "16", "--workers", "1", "--no-cuda", "--seed", "3", "--number", "2",
        "--cache-size", "50%", "--cpu-cores", "1"]
started = []
cleanups = []


def cleanup():
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()
    for c in reversed(cleanups):
        subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


atexit.register(cleanup)


held_ports = []


def free_port():
    # Held (bound with SO_REUSEADDR, never listening) for this script's life, not let go: a port
    # let go can be picked again, and two nodes given one port, the second cannot listen. The
    # nodes' servers set SO_REUSEADDR too, and bind it (core/loopback_port.h).
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    held_ports.append(s)
    return s.getsockname()[1]


def report(directory):
    files = glob.glob(directory + "/*.json")
    assert len(files) == 1, files
    return json.load(open(files[0]))


def launch(args, log, prefix=()):
    p = subprocess.Popen(list(prefix) + args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    started.append(p)
    return p


def wait(p, what, timeout=180):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL: {what} did not finish within {timeout} s")


def text(path):
    return open(path).read()


def two_nodes(name, hosts, prefixes, repeat):
    ports = [free_port() for _ in hosts]
    peers = ",".join(f"{h}:{p}" for h, p in zip(hosts, ports))
    procs, dirs, logs = [], [], []
    for rank in range(2):
        d = os.path.join(work, f"{name}{rank}")
        log = d + ".log"
        args = base + ["--repeat", str(repeat), "--warmup", "1", "--peers", peers, "--rank", str(rank),
                       "--report", d]
        procs.append(launch(args, log, prefixes[rank]))
        dirs.append(d)
        logs.append(log)
    return procs, dirs, logs, peers


def check_shared(name, hosts, prefixes=((), ())):
    procs, dirs, logs, peers = two_nodes(name, hosts, prefixes, 4)
    for rank, p in enumerate(procs):
        rc = wait(p, f"{name}: rank {rank}")
        assert rc == 0, f"{name}: rank {rank} exited {rc}:\n{text(logs[rank])}"
        assert f"partitioned cache: rank {rank} of 2: all peers up" in text(logs[rank]), text(logs[rank])
    blocks = []
    for rank in range(2):
        r = report(dirs[rank])
        assert r["completed"], r
        pipe = r["pipeline"]
        pc = pipe["partitioned_cache"]
        blocks.append(pc)
        assert pc["rank"] == rank and pc["world"] == 2, pc
        assert pc["peers"] == peers.split(","), pc
        assert pc["owned_items"] == 16, pc
        assert pipe["cache"]["items"] == 16, pipe["cache"]  # its partition, and only it
        assert pc["served"]["requests"] > 0, pc
        assert pc["served"]["rejected"] == 0, pc
        # Every fetch of the other partition is accounted for: from the peer, a miss, or a failure.
        other = pc["peer"]["cache_items"] + pc["peer"]["storage_items"] + pc["peer"]["misses"] + pc["peer_failures"]
        # 4 epochs of it, and what the workers built ahead into a 5th before the run stopped.
        assert 16 * 4 <= other <= 16 * 6, pc
    # Two nodes caching 16 each on their own read 2 x (32 + 3 x 16) = 160 items from storage; the
    # partitioned pair reads each item about once (32). A node that finishes first and exits costs
    # the other a few fallbacks at its end: at most half the baseline is asked.
    reads = sum(b["storage"]["items"] + b["served"]["from_storage"] for b in blocks)
    hits = sum(b["peer"]["cache_items"] + b["peer"]["storage_items"] for b in blocks)
    assert reads <= 80, (reads, blocks)
    assert hits >= 64, (hits, blocks)
    # The node that finished first keeps answering while the other still asks (--peer-linger):
    # before it did, the other read about 24 of its 64 fetches from storage after it left.
    failures = sum(b["peer_failures"] for b in blocks)
    assert failures <= 16, (failures, blocks)
    print(f"{name}: ok: {reads} items from storage for both nodes, {hits} from the peer, {failures} failures")


def check_killed():
    ports = [free_port(), free_port()]
    peers = f"127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"
    procs, logs, dirs = [], [], []
    for rank in range(2):
        d = os.path.join(work, f"killed{rank}")
        logs.append(d + ".log")
        dirs.append(d)
        procs.append(launch(base + ["--repeat", "300", "--warmup", "1", "--peers", peers, "--rank", str(rank),
                                    "--report", d], logs[rank]))
    deadline = time.time() + 120
    while not all("all peers up" in text(l) for l in logs):
        assert time.time() < deadline, "the two nodes never saw each other:\n" + text(logs[0]) + text(logs[1])
        assert all(p.poll() is None for p in procs), "a node ended early:\n" + text(logs[0]) + text(logs[1])
        time.sleep(0.05)
    time.sleep(0.5)
    assert procs[0].poll() is None, "rank 0 finished before rank 1 could be killed:\n" + text(logs[0])
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    rc = wait(procs[0], "rank 0 after its peer was killed")
    assert rc == 0, f"rank 0 exited {rc}:\n{text(logs[0])}"
    r = report(dirs[0])
    assert r["completed"], r
    pc = r["pipeline"]["partitioned_cache"]
    assert pc["peer_failures"] > 0, pc
    assert f":{ports[1]}" in pc["peer"]["last_error"], pc
    epochs = r["pipeline"]["epochs"]
    assert all(e["images"] == 32 for e in epochs), epochs  # every epoch whole
    print(f"killed: ok: {pc['peer_failures']} items read from storage after the peer died ({pc['peer']['last_error']})")


def check_bad_input():
    p1 = f"127.0.0.1:{free_port()}"
    p2 = f"127.0.0.1:{free_port()}"
    cases = [
        # One address twice: the node would ask itself for the other partition.
        (["--peers", f"{p1},{p1}", "--cache-size", "50%"], "is given twice (ranks 0 and 1)"),
        (["--peers", f"{p1},{p2}"], "--cache-size"),
        (["--peers", f"{p1},{p2}", "--rank", "2", "--cache-size", "50%"], "--rank 2 is not one of the 2 nodes"),
        (["--peers", "nohost", "--cache-size", "50%"], "--peers: 'nohost' is not host:port"),
        (["--rank", "1", "--cache-size", "50%"], "give --peers too"),
        # A rank from the environment that is not one (was: atoi, so rank 0, silently).
        (["--peers", f"{p1},{p2}", "--cache-size", "50%"], "environment variable RANK='1x' is not an integer >= 0 (a rank)", {"RANK": "1x"}),
        (["--peers", f"{p1},{p2}", "--cache-size", "50%"], "environment variable SLURM_PROCID='-1' is not an integer >= 0 (a rank)",
         {"SLURM_PROCID": "-1"}),
    ]
    for extra, needle, *env in cases:
        args = [a for a in base if a not in ("--cache-size", "50%")] + ["--repeat", "1"] + extra
        environ = {k: v for k, v in os.environ.items() if k not in ("RANK", "SLURM_PROCID")}
        environ.update(env[0] if env else {})
        r = subprocess.run(args + ["--report", os.path.join(work, "bad")], capture_output=True, text=True,
                           timeout=120, env=environ)
        out = r.stdout + r.stderr
        assert r.returncode == 2, (extra, r.returncode, out)
        lines = [l for l in r.stderr.splitlines() if needle in l]
        assert len(lines) == 1, (extra, out)
    print("bad input: ok")


def netns_setup():
    if os.geteuid() != 0:
        return "not root: cannot create network namespaces"
    tag = f"mlb{os.getpid() % 100000}"
    ns = [f"{tag}a", f"{tag}b"]
    veth = [f"{tag}x", f"{tag}y"]
    hosts = ["10.213.7.1", "10.213.7.2"]
    steps = [["ip", "netns", "add", ns[0]], ["ip", "netns", "add", ns[1]],
             ["ip", "link", "add", veth[0], "type", "veth", "peer", "name", veth[1]],
             ["ip", "link", "set", veth[0], "netns", ns[0]], ["ip", "link", "set", veth[1], "netns", ns[1]]]
    cleanups.extend([["ip", "netns", "del", ns[0]], ["ip", "netns", "del", ns[1]], ["ip", "link", "del", veth[0]]])
    for i in range(2):
        steps += [["ip", "-n", ns[i], "addr", "add", hosts[i] + "/24", "dev", veth[i]],
                  ["ip", "-n", ns[i], "link", "set", veth[i], "up"],
                  ["ip", "-n", ns[i], "link", "set", "lo", "up"]]
    for s in steps:
        r = subprocess.run(s, capture_output=True, text=True)
        if r.returncode != 0:
            return f"cannot create the namespaces: `{' '.join(s)}`: {r.stderr.strip()}"
    return (hosts, [["ip", "netns", "exec", ns[0]], ["ip", "netns", "exec", ns[1]]])


os.makedirs(work, exist_ok=True)
if netns:
    got = netns_setup()
    if isinstance(got, str):
        print(f"SKIPPED: {got}")
        sys.exit(77)
    hosts, prefixes = got
    check_shared("netns", hosts, prefixes)
else:
    check_shared("loopback", ["127.0.0.1", "127.0.0.1"])
    check_killed()
    check_bad_input()
print("partitioned cache e2e: all checks passed")
