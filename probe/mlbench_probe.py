"""mlbench's probe for a training loop written in Python (docs/stall.md, "--exec").

Per iteration of the probed loader it records the *wait* (time inside ``next()``) and the
*compute* (time from ``next()`` returning to the next call: the rest of the training step) and
writes an mlbench instance report (docs/report-format.md: ``train``, ``train_item``, the
wait/compute split, ``stall_pct``) atomically at exit and every few seconds, so a killed run still
leaves its data.

Two ways in:

* ``loader = mlbench_probe.wrap(loader)`` in the script (any iterable of batches: a
  ``torch.utils.data.DataLoader`` or the script's own batch iterator), with ``probe/`` on
  ``PYTHONPATH``;
* no change at all when the script runs under ``mlbench-stall --exec``: it puts
  ``probe/autoprobe`` (a ``sitecustomize``) on ``PYTHONPATH``, which calls :func:`install`: every
  ``torch.utils.data.DataLoader`` iteration is probed, and the report is about the loader iterated
  most (``MLBENCH_PROBE_LOADER`` picks another).

Settings come from the environment (mlbench-stall sets them; all optional):

``MLBENCH_PROBE_REPORT``     report directory (default ``$OUTPUT_DIRECTORY``, else ``./mlbench-probe``)
``MLBENCH_PROBE_MODE``       ``normal`` or ``compute-only``: cache the first K batches, then replay them
                             without touching the loader (the ingestion rate G of the analysis)
``MLBENCH_PROBE_CACHE_BATCHES``  K (default 8)
``MLBENCH_PROBE_ITERATIONS`` timed iterations; after warm-up + these the report is written and the
                             script ends with ``SystemExit(0)`` raised from ``next()``
``MLBENCH_PROBE_NUMBER``     iterations per observation (default iterations / 10, else 10)
``MLBENCH_PROBE_WARMUP``     observations dropped as warm-up (default 2)
``MLBENCH_PROBE_LOADER``     which loader: its index (0 = the first iterated) or its dataset's class name
``MLBENCH_PROBE_COLD_DIR``   evict each file under this folder from the page cache right before the
                             script opens it (``open()`` from Python), so every epoch reads from storage
``MLBENCH_PROBE_INTERVAL``   seconds between snapshot reports (default 5)
``MLBENCH_PROBE_NAME``       report name (default: the script's file name without ``.py``)

A rank of a distributed job (docs/stall.md, "Distributed jobs") is told apart: the report has a
``rank`` block (``{rank, local_rank, world_size, from, host}``, from ``RANK``/``LOCAL_RANK``/
``WORLD_SIZE``, srun's ``SLURM_PROCID``/``SLURM_LOCALID``/``SLURM_NTASKS``, else
``torch.distributed`` once ``init_process_group`` has run; read when the report is written) and a
file name of its own (``<suite>.<name>.rank<k>.R<run>.D<slot>...``) when the job has more than one
rank. The time a rank spends blocked in collectives is its per-iteration *sync*
(``torch.distributed``'s collective functions, timed around the call, and the part of DDP's
gradient all-reduce that backward waits for, through a communication hook); it is apart from the
compute in ``stall.sync``.

Standard library only (torch is used when the script imports it).
"""

import atexit
import builtins
import datetime
import functools
import hashlib
import json
import math
import os
import socket
import sys
import threading
import time

SCHEMA = "mlbench-probe-1"
# The instance report's schema_version (core/instance_report.h, docs/schema/instance-report.schema.json).
REPORT_SCHEMA_VERSION = 1
_clock = time.perf_counter


def _env_int(env, name, default):
    v = env.get(name, "")
    if not v:
        return default
    try:
        return int(v)
    except ValueError:
        raise SystemExit(f"mlbench_probe: {name}={v!r} is not an integer")


def _iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _stats(xs, unit="s"):
    if not xs:
        return {"avg": None, "min": None, "max": None, "sd": None, "count": 0, "unit": unit}
    n = len(xs)
    avg = sum(xs) / n
    sd = math.sqrt(sum((x - avg) ** 2 for x in xs) / n)
    return {"avg": avg, "min": min(xs), "max": max(xs), "sd": sd, "count": n, "unit": unit}


def _script_name():
    """The script's file name without ``.py``; in a process started by multiprocessing's spawn (a
    rank of torch.multiprocessing.spawn, whose argv is ``-c``), its parent's script."""
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 in ("", "-c"):
        main = sys.modules.get("__mp_main__")
        argv0 = getattr(main, "__file__", None) or argv0
    return os.path.splitext(os.path.basename(argv0 or "python"))[0] or "python"


def _first_int(env, names):
    for name in names:
        v = env.get(name, "")
        if v.strip():
            try:
                return int(v)
            except ValueError:
                pass
    return None


def _node_identity(env):
    """Where this rank runs (docs/stall.md, "Across nodes (Slurm)"): ``node`` (srun's
    ``SLURMD_NODENAME``, else the host name), ``node_id`` (``SLURM_NODEID``), ``boot_id`` (the
    kernel's: ranks on "nodes" with one boot id share one kernel, so one page cache), ``cpus`` (the
    CPUs this process may run on, as Slurm's ``--cpus-per-task`` or an affinity gave them),
    ``cpus_per_task`` (``SLURM_CPUS_PER_TASK``), ``mem_total_mib`` (the kernel's memory) and
    ``memory_max_mib`` (its cgroup's memory limit, ``memory.max`` or v1's ``memory.limit_in_bytes``,
    the smallest up to the root: Slurm's ``--mem``, which bounds the page cache it keeps; null:
    none)."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return ""
    mem = None
    for line in read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) // 1024
    # The smallest memory limit of this process's cgroup and its ancestors (v1's memory controller
    # where it has one, else v2's unified hierarchy).
    limit = None
    groups = dict(line.split(":", 2)[1:] for line in read("/proc/self/cgroup").splitlines() if line.count(":") >= 2)
    if "memory" in groups:
        base, path, name = "/sys/fs/cgroup/memory", groups["memory"], "memory.limit_in_bytes"
    else:
        base, path, name = "/sys/fs/cgroup", groups.get("", "/"), "memory.max"
    while True:
        value = read(f"{base}{path.rstrip('/')}/{name}")
        if value.isdigit() and int(value) < (1 << 60):
            limit = min(limit or 1 << 62, int(value) // (1 << 20))
        if path in ("", "/"):
            break
        path = os.path.dirname(path.rstrip("/"))
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return {"node": env.get("SLURMD_NODENAME") or socket.gethostname(), "node_id": _first_int(env, ("SLURM_NODEID",)),
            "boot_id": read("/proc/sys/kernel/random/boot_id") or None, "cpus": cpus,
            "cpus_per_task": _first_int(env, ("SLURM_CPUS_PER_TASK",)), "mem_total_mib": mem,
            "memory_max_mib": limit}


def rank_identity(environ=None):
    """This process's place in a distributed job, with where it runs (_node_identity)."""
    env = os.environ if environ is None else environ
    ident = _rank_identity(env)
    ident.update(_node_identity(env))
    return ident


def _rank_identity(environ=None):
    """This process's place in a distributed job: ``{rank, local_rank, world_size, from, host}``.
    ``from``: ``env`` (``RANK``, else srun's ``SLURM_PROCID``; torchrun, srun, ranks started by hand),
    ``torch.distributed`` (a script that spawns its own ranks, once ``init_process_group`` has run),
    or ``none`` (a single process: rank 0 of 1). A figure the source does not give is null
    (``torch.distributed`` knows no local rank)."""
    env = os.environ if environ is None else environ
    host = socket.gethostname()
    rank = _first_int(env, ("RANK", "SLURM_PROCID"))
    if rank is not None:
        world = _first_int(env, ("WORLD_SIZE", "SLURM_NTASKS"))
        return {"rank": rank, "local_rank": _first_int(env, ("LOCAL_RANK", "SLURM_LOCALID")),
                "world_size": world, "from": "env", "host": host}
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return {"rank": int(dist.get_rank()), "local_rank": _first_int(env, ("LOCAL_RANK",)),
                    "world_size": int(dist.get_world_size()), "from": "torch.distributed", "host": host}
    except Exception:  # a process group being torn down
        pass
    return {"rank": 0, "local_rank": 0, "world_size": 1, "from": "none", "host": host}


class _SyncTimer:
    """The time this process spends blocked in collectives, taken per iteration by the loop.

    * A collective function of ``torch.distributed`` (all_reduce, barrier, ...) called with
      ``async_op=False``: its whole call (the outermost one: all_gather_object's own all_gather is
      not counted twice). With ``async_op=True`` only the call is timed, not the later ``wait()``.
    * DDP's gradient all-reduce, bucket by bucket, through a communication hook: each bucket's
      (call, completion) times. backward() returns once every bucket's future is complete; the part
      of the step it was blocked is from the last bucket's call (its gradients, the last to be
      computed, are ready) to the last completion. The buckets' whole times, overlapped with
      backward, are kept apart (``probe.sync.ddp_allreduce``), not counted as sync."""

    def __init__(self, clock):
        self.clock = clock
        self.local = threading.local()
        self.lock = threading.Lock()
        self.calls_s = 0.0  # collective calls since the last take()
        self.buckets = []  # DDP buckets since the last take(): (call, done)
        self.collectives = 0
        self.ddp_buckets = 0
        self.ddp_overlapped_s = 0.0
        self.ddp_hooked = 0  # DDP models whose all-reduce is timed
        self.ddp_unhooked = []  # why a model's could not be

    def depth(self):
        return getattr(self.local, "depth", 0)

    def enter(self):
        self.local.depth = self.depth() + 1

    def leave(self):
        self.local.depth = self.depth() - 1

    def add_call(self, seconds):
        with self.lock:
            self.calls_s += seconds
            self.collectives += 1

    def add_bucket(self, call, done):
        with self.lock:
            self.buckets.append((call, done))
            self.ddp_buckets += 1
            self.ddp_overlapped_s += done - call

    def take(self):
        """The sync of the iteration that just ended; starts the next one's."""
        with self.lock:
            s = self.calls_s
            if self.buckets:
                s += max(0.0, max(d for _, d in self.buckets) - max(c for c, _ in self.buckets))
            self.calls_s, self.buckets = 0.0, []
            return s


def batch_items(batch):
    """Samples in one batch: a tensor's (or array's) first dimension; for a tuple, list or dict
    the first element's when it has a shape (``(images, labels)``), else the list's length."""
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    first = None
    if isinstance(batch, dict) and batch:
        first = next(iter(batch.values()))
    elif isinstance(batch, (list, tuple)) and batch:
        first = batch[0]
    shape = getattr(first, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    if isinstance(batch, (list, tuple)):
        return len(batch)
    return 1


class _Log:
    """The probe's log: stderr and, under mlbench-stall, OUT/runs/<label>/probe.log."""

    def __init__(self, folder):
        self.path = os.path.join(folder, "probe.log") if folder else None

    def __call__(self, msg):
        line = f"mlbench_probe[{os.getpid()}]: {msg}"
        print(line, file=sys.stderr, flush=True)
        if self.path:
            try:
                with open(self.path, "a") as f:
                    f.write(line + "\n")
            except OSError:
                pass


class LoaderStats:
    """Timings of one loader over all its epochs."""

    def __init__(self, index, name, workers, persistent=None):
        self.index = index
        self.name = name
        self.workers = workers
        self.persistent = persistent  # a DataLoader's persistent_workers; None: not a DataLoader
        self.wait = []
        self.compute = []  # the rest of the step, less its sync
        self.sync = []  # blocked in collectives (_SyncTimer)
        self.items = []
        self.epochs = 0
        self.replayed = 0  # compute-only: iterations served from the cached batches
        self.firsts = {}  # index of each epoch's first batch from the loader -> seconds its wait spent making the iterator
        self.batches_per_epoch = None


class Probe:
    """The process-wide probe: settings, the loaders seen, the report."""

    def __init__(self, environ=None, clock=None):
        env = os.environ if environ is None else environ
        self.clock = clock or _clock
        self.folder = env.get("MLBENCH_PROBE_REPORT") or env.get("OUTPUT_DIRECTORY") or "mlbench-probe"
        self.mode = env.get("MLBENCH_PROBE_MODE", "normal") or "normal"
        if self.mode not in ("normal", "compute-only"):
            raise SystemExit(f"mlbench_probe: MLBENCH_PROBE_MODE={self.mode!r} is not normal or compute-only")
        self.cache_batches = max(1, _env_int(env, "MLBENCH_PROBE_CACHE_BATCHES", 8))
        self.iterations = _env_int(env, "MLBENCH_PROBE_ITERATIONS", 0)
        self.number = max(1, _env_int(env, "MLBENCH_PROBE_NUMBER", max(1, self.iterations // 10) if self.iterations else 10))
        self.warmup = max(0, _env_int(env, "MLBENCH_PROBE_WARMUP", 2))
        self.pick = env.get("MLBENCH_PROBE_LOADER", "")
        self.interval = float(env.get("MLBENCH_PROBE_INTERVAL", "5") or 5)
        self.name = env.get("MLBENCH_PROBE_NAME") or _script_name()
        self.loaders = []
        self.cached = {}  # loader index -> batches kept for compute-only replay
        self.start = time.time()
        self.file = None
        self.last_write = self.clock()
        self.finished = False
        self.failure = None
        self.lock = threading.RLock()
        self.sync = _SyncTimer(self.clock)
        self.spawned = 0  # ranks this process started with torch.multiprocessing.spawn
        self.environ = env
        os.makedirs(self.folder, exist_ok=True)
        self.log = _Log(self.folder if env.get("MLBENCH_PROBE_REPORT") else None)

    # ---- loaders -------------------------------------------------------------------
    def register(self, obj, name=None, workers=None):
        with self.lock:
            persistent = getattr(obj, "persistent_workers", None)
            st = LoaderStats(len(self.loaders), name or _loader_name(obj), workers if workers is not None else getattr(obj, "num_workers", 0),
                             persistent if isinstance(persistent, bool) else None)
            self.loaders.append(st)
            self.log(f"loader #{st.index} ({st.name}, {st.workers} workers) first iterated")
            return st

    def probed(self):
        """The loader the report is about: MLBENCH_PROBE_LOADER's, else the one iterated most."""
        if self.pick:
            for st in self.loaders:
                if self.pick == str(st.index) or self.pick == st.name:
                    return st
            return None
        return max(self.loaders, key=lambda s: len(s.wait), default=None)

    def target(self):
        return (self.warmup + math.ceil(self.iterations / self.number)) * self.number if self.iterations else 0

    def record(self, st, wait, compute, items, first=False, iter_s=None, sync=0.0):
        with self.lock:
            if first:
                st.firsts[len(st.wait)] = iter_s
            sync = min(max(sync, 0.0), compute)
            st.wait.append(wait)
            st.compute.append(compute - sync)
            st.sync.append(sync)
            st.items.append(items)
            now = self.clock()
            if now - self.last_write >= self.interval:
                self.last_write = now
                self.write(final=False)
            chosen = not self.pick or self.pick in (str(st.index), st.name)
            if self.target() and chosen and len(st.wait) >= self.target() and not self.finished:
                self.finish(None)
                self.log(f"loader #{st.index}: {len(st.wait)} iterations probed; ending the script")
                raise SystemExit(0)

    # ---- report --------------------------------------------------------------------
    def report(self, completed, reason=None):
        st = self.probed()
        n = len(st.wait) if st else 0
        obs_total = n // self.number
        warm = min(self.warmup, obs_total)
        train, train_items = [], []
        waits, computes, syncs = [], [], []
        for o in range(warm, obs_total):
            a, b = o * self.number, (o + 1) * self.number
            train.append(sum(st.wait[a:b]) + sum(st.compute[a:b]) + sum(st.sync[a:b]))
            train_items.append(sum(st.items[a:b]))
            waits += st.wait[a:b]
            computes += st.compute[a:b]
            syncs += st.sync[a:b]
        iters = [w + c + y for w, c, y in zip(waits, computes, syncs)]
        rate = [i / t for i, t in zip(train_items, train) if t > 0]
        total = sum(iters)
        batch = round(sum(st.items) / n) if n else 0
        args = {"argv": sys.argv, "mode": self.mode, "iterations": self.iterations or None, "loader": st.name if st else None}
        if not self.environ.get("MLBENCH_PROBE_NAME"):
            self.name = _script_name()  # a rank started by spawn knows its script only once it ran
        uid = hashlib.sha256(json.dumps([sys.argv, self.mode], sort_keys=True).encode()).hexdigest()
        affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        torch = sys.modules.get("torch")
        rank = rank_identity(self.environ)
        sy = self.sync
        r = {
            "schema_version": REPORT_SCHEMA_VERSION,
            "name": self.name, "suite": os.environ.get("SUITE_NAME", "mlbench"), "run_id": int(os.environ.get("RUN_ID", "0") or 0),
            "vcd": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "jr_id": int(os.environ.get("JOB_ID", "0") or 0),
            "batch_size": batch, "workers": st.workers if st else 0, "cpu_cores": len(affinity),
            "repeat": obs_total, "number": self.number, "warmup": warm, "seed": None, "min_time": None,
            "hostname": socket.gethostname(), "gpu": None, "device": "cpu",
            "version": {"mlbench": SCHEMA, "git": None, "source": None}, "unique_id": uid, "args": args,
            "machine": {"affinity": ",".join(map(str, affinity)), "logical_cores": os.cpu_count(),
                        "framework": "pytorch" if torch else "python",
                        "framework_version": getattr(torch, "__version__", sys.version.split()[0]), "cuda_available": False},
            "batch_loss": [], "epoch_loss": [], "metrics": {},
            "train": _stats(train),
            "train_item": ({"avg": sum(train_items) / sum(train), "max": max(rate), "min": min(rate),
                            "range": max(rate) - min(rate), "unit": "items/sec"} if train and sum(train) > 0 else
                           {"avg": None, "max": None, "min": None, "range": None, "unit": "items/sec"}),
            "stall": {"wait": _stats(waits), "h2d": _stats([0.0] * len(waits)), "compute": _stats(computes),
                      "iteration": _stats(iters), "stall_pct": 100 * sum(waits) / total if total > 0 else None,
                      "sync": _stats(syncs), "sync_pct": 100 * sum(syncs) / total if total > 0 else None,
                      "warmup_iterations": warm * self.number,
                      "steps": _steps(waits, syncs, computes, warm * self.number)},
            "rank": rank,
            "cpu_split": _CPU_SPLIT,
            "pipeline": {"source": "mlbench_probe", "loader": st.name if st else None, "workers": st.workers if st else 0},
            "resources": None,
            "iterations": n,
            "probe": {"schema": SCHEMA, "mode": self.mode, "cache_batches": self.cache_batches if self.mode == "compute-only" else None,
                      "loader_index": st.index if st else None, "epochs": st.epochs if st else 0,
                      "replayed_iterations": st.replayed if st else 0,
                      "epoch_start": _epoch_start(st, warm * self.number, obs_total * self.number) if st else None,
                      "sync": {"collectives": sy.collectives, "ddp_models": sy.ddp_hooked, "ddp_buckets": sy.ddp_buckets,
                               "ddp_allreduce_s": sy.ddp_overlapped_s, "ddp_unhooked": list(sy.ddp_unhooked)},
                      "loaders": [{"index": s.index, "name": s.name, "iterations": len(s.wait), "workers": s.workers} for s in self.loaders]},
            "completed": completed, "start_time": _iso(self.start), "end_time": _iso(time.time()),
        }
        if not completed:
            r["reason"] = reason or "unknown"
        return r

    def write(self, final, completed=True, reason=None):
        """Writes the report atomically; snapshots are .FAIL. reports (the run is not over), the
        final one replaces them."""
        if not self.loaders:
            return None
        snapshot_reason = f"in progress: snapshot at {_iso(time.time())} (the probe writes one every {self.interval:g} s)"
        r = self.report(completed and final, reason if final else snapshot_reason)
        stamp = datetime.datetime.fromtimestamp(self.start, datetime.timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
        fail = "" if r["completed"] else ".FAIL"
        # A rank of a job of several has a name of its own (before .R: what names an instance, to
        # the store's --resume, stays apart per rank); a single process's is as it always was.
        rk = r["rank"]
        of_rank = f".rank{rk['rank']}" if (rk["world_size"] or 1) > 1 or rk["rank"] else ""
        name = f"{r['suite']}.{r['name']}{of_rank}.R{r['run_id']}.D{r['jr_id']}{fail}.{stamp}.json"
        path = os.path.join(self.folder, name)
        tmp = path + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(r, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        if self.file and self.file != path:
            try:
                os.unlink(self.file)
            except OSError:
                pass
        self.file = path
        return path

    def finish(self, failure):
        with self.lock:
            if self.finished:
                return
            self.finished = True
            if not self.loaders:
                import multiprocessing
                if multiprocessing.parent_process() is not None:
                    return  # a DataLoader worker, or a rank, started with spawn: its parent reports
                if "multiprocessing.resource_tracker" in sys.modules and sys.argv[:1] == ["-c"]:
                    return  # the resource tracker that multiprocessing's spawn starts
                if self.spawned:
                    self.log(f"no DataLoader in this process; it started {self.spawned} rank(s) "
                             "(torch.multiprocessing.spawn), each of which reports")
                    return
                self.log("the script iterated no DataLoader (wrap your own batch iterator: "
                         "loader = mlbench_probe.wrap(loader)); no report written")
                return
            st = self.probed()
            if st is None:
                self.log(f"MLBENCH_PROBE_LOADER={self.pick!r} names no loader the script iterated (seen: "
                         + ", ".join(f"#{s.index} {s.name}" for s in self.loaders) + ")")
                failure = failure or f"MLBENCH_PROBE_LOADER={self.pick!r} names no loader the script iterated"
            elif self.target() and len(st.wait) < self.target() and failure is None:
                failure = f"the script ended after {len(st.wait)} of {self.target()} probed iterations"
            try:
                path = self.write(final=True, completed=failure is None, reason=failure)
            except OSError as e:
                self.log(f"cannot write the report into {self.folder}: {e}")
                return
            self.log(f"report {path}" + (f" (not completed: {failure})" if failure else ""))
            _announce("reported", completed=failure is None, reason=failure, report=path)


# The most timed iterations whose wait/sync/compute stall.steps lists one by one (the statistics
# cover them all): 3 x 1000 numbers, about 30 KB of report.
STEPS_MAX = 1000


def _steps(waits, syncs, computes, first):
    """stall.steps: each timed iteration's wait, sync and compute (seconds, to the microsecond), the
    first STEPS_MAX of them; iteration `first` + i of the loader is entry i, so the ranks of a job
    line up step by step (docs/report-format.md, "Ranks of a distributed job")."""
    kept = min(len(waits), STEPS_MAX)
    r6 = lambda xs: [round(x, 6) for x in xs[:kept]]
    return {"first": first, "count": len(waits), "kept": kept, "unit": "s",
            "wait": r6(waits), "sync": r6(syncs), "compute": r6(computes)}


def _epoch_start(st, lo, hi):
    """Each epoch's first batch against the others, over the timed iterations [lo, hi) (those of
    `stall`): a DataLoader without persistent_workers starts its workers at every epoch, and none
    loads the next epoch's first batch during the last steps of the previous one, so that batch's
    wait is seen here and nowhere within the epoch (the step times a script prints)."""
    firsts = sorted(i for i in st.firsts if lo <= i < hi)
    chosen = set(firsts)
    others = [i for i in range(lo, min(hi, len(st.wait))) if i not in chosen]
    return {"epochs": len(firsts), "batches_per_epoch": st.batches_per_epoch, "workers": st.workers,
            "persistent_workers": st.persistent,
            "wait": _stats([st.wait[i] for i in firsts]),
            "iter": _stats([st.firsts[i] for i in firsts if st.firsts[i] is not None]),
            "compute": _stats([st.compute[i] for i in firsts]),
            "steady_wait": _stats([st.wait[i] for i in others]),
            "steady_compute": _stats([st.compute[i] for i in others])}


def _loader_name(obj):
    ds = getattr(obj, "dataset", None)
    return type(ds).__name__ if ds is not None else type(obj).__name__


class _ProbedIterator:
    """Iterates one epoch of a loader, timing each next(); in compute-only mode serves the
    cached batches once K are held, without creating the loader's own iterator."""

    def __init__(self, probe, st, make_iter, epoch_len):
        self.probe, self.st, self.make_iter, self.epoch_len = probe, st, make_iter, epoch_len
        self.it = None
        self.served = 0
        self.pending = None  # (wait, items, returned_at, first, iter_s) of the batch the loop holds
        st.epochs += 1
        st.batches_per_epoch = epoch_len

    def __iter__(self):
        return self

    def _close_pending(self, now):
        sync = self.probe.sync.take()  # blocked in collectives since the last batch was returned
        if self.pending is not None:
            wait, items, returned, first, iter_s = self.pending
            self.pending = None
            self.probe.record(self.st, wait, now - returned, items, first, iter_s, sync)

    def __next__(self):
        probe = self.probe
        t0 = probe.clock()
        self._close_pending(t0)
        cache = probe.cached.setdefault(self.st.index, []) if probe.mode == "compute-only" else None
        # The epoch's first batch from the loader: its wait is apart in the report (probe.epoch_start),
        # with the part of it spent making the loader's iterator (a DataLoader starts its workers there).
        first, iter_s = False, None
        if cache is not None and len(cache) >= probe.cache_batches:
            if self.epoch_len is not None and self.served >= self.epoch_len:
                raise StopIteration
            batch = cache[(self.st.replayed) % len(cache)]
            self.st.replayed += 1
        else:
            if self.it is None:
                first, made = True, probe.clock()
                self.it = self.make_iter()
                iter_s = probe.clock() - made
            batch = next(self.it)
            if cache is not None:
                cache.append(batch)
        self.served += 1
        if _ANNOUNCED is not None and _ANNOUNCED.get("stage") in _BEFORE_ITERATING:
            _announce("iterating")
        t1 = probe.clock()
        self.pending = (t1 - t0, batch_items(batch), t1, first, iter_s)
        return batch

    def __len__(self):
        return self.epoch_len if self.epoch_len is not None else 0


class Wrapped:
    """What wrap() returns: iterating it iterates the loader, probed."""

    def __init__(self, probe, loader, name=None, workers=None):
        self._probe, self._loader = probe, loader
        self._name, self._workers = name, workers
        self._st = None

    def __iter__(self):
        if self._st is None:
            self._st = self._probe.register(self._loader, self._name, self._workers)
        loader = self._loader
        orig = _ORIGINAL_ITER.get(type(loader))
        make = (lambda: orig(loader)) if orig else (lambda: iter(loader))
        try:
            n = len(loader)
        except TypeError:
            n = None
        return _ProbedIterator(self._probe, self._st, make, n)

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)


# The CPU sweep of a job of several ranks (docs/stall.md, "Distributed jobs", "CPUs per rank"):
# mlbench-stall gives the job the first K x c CPUs of its own and says c and the job's CPUs here;
# each rank then keeps CPUs [slot x c, (slot + 1) x c) of them, slot its local rank, as a server of
# C CPUs and K GPUs would split them. Applied to every thread of the rank before any DataLoader
# worker forks (workers inherit it): at load when the environment names the slot (LOCAL_RANK,
# SLURM_LOCALID, else RANK mod MLBENCH_PROBE_RANKS_PER_NODE), in a rank torch.multiprocessing.spawn
# started as it starts (its index), else at the rank's first DataLoader iteration
# (torch.distributed's rank). The report's ``cpu_split`` says what was applied.
# Under srun (docs/stall.md, "Across nodes (Slurm)") a task is started by slurmstepd on its node
# with the CPUs Slurm gave it there, and MLBENCH_PROBE_JOB_CPUS (srun's --export=ALL) names the
# analyzer's CPUs, which need not be that node's: a task of a job step, slot SLURM_LOCALID, takes
# the job's CPUs from its own affinity instead (job_cpus_for).
_CPU_SPLIT = None
_JOB_CPUS_FROM_ENV = "MLBENCH_PROBE_JOB_CPUS"
_JOB_CPUS_FROM_SLURM = "the task's affinity (Slurm)"


def job_cpus_for(environ, slot_from=None, own=None):
    """The job's CPUs that the split divides, and where they came from: a task that srun started
    (``SLURM_STEP_ID`` and ``SLURM_LOCALID`` set, which slurmstepd sets in a job step's tasks and not
    in a batch script's, and the slot taken from ``SLURM_LOCALID``, not from a launcher's
    ``LOCAL_RANK``) takes its own affinity (`own`, else this process's: what Slurm gave it on its
    node); anything else MLBENCH_PROBE_JOB_CPUS, the analyzer's CPUs for the job."""
    if slot_from == "SLURM_LOCALID" and environ.get("SLURM_STEP_ID", "").strip():
        if own is None:
            own = os.sched_getaffinity(0)
        return sorted(own), _JOB_CPUS_FROM_SLURM
    return [int(c) for c in environ.get("MLBENCH_PROBE_JOB_CPUS", "").split(",") if c.strip()], _JOB_CPUS_FROM_ENV


def cpu_split_for(environ, slot, slot_from=None, own=None):
    """The CPUs of the rank in `slot` under the split the environment asks for
    (MLBENCH_PROBE_CPUS_PER_RANK, the job's CPUs from job_cpus_for), or None when none is asked;
    raises ValueError when the job's CPUs do not hold the slot's share. A task that srun started
    keeps its slot's share of its own CPUs where they hold it (task/cgroup: a node's tasks share the
    step's cpuset), else its first c CPUs (task/affinity: each task has CPUs of its own)."""
    per = _env_int(environ, "MLBENCH_PROBE_CPUS_PER_RANK", 0)
    if per <= 0:
        return None
    job, source = job_cpus_for(environ, slot_from, own)
    if (slot + 1) * per <= len(job):
        return job[slot * per:(slot + 1) * per]
    if source == _JOB_CPUS_FROM_SLURM:
        if len(job) >= per:
            return job[:per]
        raise ValueError(f"the task's CPUs from Slurm ({job}) are {len(job)}, fewer than {per} CPUs per rank")
    raise ValueError(f"slot {slot} x {per} CPUs per rank is beyond the job's {len(job)} CPUs ({job})")


def _apply_cpu_split(slot, slot_from, when):
    """Keeps this process's threads on its slot's CPUs (once); the record goes into the report."""
    global _CPU_SPLIT
    env = os.environ
    if _CPU_SPLIT is not None or _env_int(env, "MLBENCH_PROBE_CPUS_PER_RANK", 0) <= 0:
        return
    rec = {"cpus_per_rank": _env_int(env, "MLBENCH_PROBE_CPUS_PER_RANK", 0),
           "ranks_per_node": _env_int(env, "MLBENCH_PROBE_RANKS_PER_NODE", 0) or None,
           "job_cpus": [], "job_cpus_from": None,
           "slot": slot, "slot_from": slot_from, "applied": when, "cpus": None, "error": None}
    _CPU_SPLIT = rec
    try:
        rec["job_cpus"], rec["job_cpus_from"] = job_cpus_for(env, slot_from)
        cpus = cpu_split_for(env, slot, slot_from, rec["job_cpus"])
        try:
            tasks = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            tasks = [0]
        for tid in tasks:
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:  # a thread that ended meanwhile
                pass
        rec["cpus"] = sorted(os.sched_getaffinity(0))
    except (ValueError, OSError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
        print(f"mlbench_probe: CPUs per rank not applied: {rec['error']}", file=sys.stderr)


def _cpu_split_slot(env):
    """The slot the environment names (see above), or None."""
    local = _first_int(env, ("LOCAL_RANK", "SLURM_LOCALID"))
    if local is not None:
        return local, "LOCAL_RANK" if env.get("LOCAL_RANK", "").strip() else "SLURM_LOCALID"
    rank = _first_int(env, ("RANK", "SLURM_PROCID"))
    per_node = _env_int(env, "MLBENCH_PROBE_RANKS_PER_NODE", 0)
    if rank is not None and per_node > 0:
        return rank % per_node, "RANK mod ranks per node"
    return None


def _cpu_split_at_first_iteration():
    """The fallback: the rank as torch.distributed knows it (mod the ranks per node)."""
    if _CPU_SPLIT is not None or _env_int(os.environ, "MLBENCH_PROBE_CPUS_PER_RANK", 0) <= 0:
        return
    ident = _rank_identity(os.environ) if "_rank_identity" in globals() else rank_identity(os.environ)
    if ident.get("from") == "none":
        return  # not a rank of the job (a launcher's own loader, say): the job's CPUs stay
    per_node = _env_int(os.environ, "MLBENCH_PROBE_RANKS_PER_NODE", 0) or 1
    slot = ident["local_rank"] if ident.get("local_rank") is not None else ident["rank"] % per_node
    _apply_cpu_split(slot, "torch.distributed rank", "first DataLoader iteration")


_PROBE = None
_ORIGINAL_ITER = {}


def probe():
    """The process's probe, made on first use (with its exit hooks)."""
    global _PROBE
    if _PROBE is None:
        _PROBE = Probe()
        if os.environ.get("MLBENCH_PROBE_COLD_DIR"):
            _evict_before_open(os.environ["MLBENCH_PROBE_COLD_DIR"])
        atexit.register(_at_exit)
        previous = sys.excepthook

        def hook(kind, value, tb):
            if _PROBE is not None and _PROBE.failure is None:
                _PROBE.failure = f"the script raised {kind.__name__}: {value}"
            previous(kind, value, tb)

        sys.excepthook = hook
    return _PROBE


def _at_exit():
    if _PROBE is not None and os.getpid() == _PROBE_PID:
        _PROBE.finish(_PROBE.failure)
        if _ANNOUNCED is not None and _ANNOUNCED.get("stage") != "reported":
            _announce("ended", reason=_PROBE.failure)


_PROBE_PID = os.getpid()


def wrap(loader, name=None, batch_size=None, workers=None):
    """The one line for a script: ``loader = mlbench_probe.wrap(loader)``. ``loader`` is any
    iterable of batches; ``name`` labels it in the report. ``batch_size`` is unused (the probe
    counts each batch's samples) and accepted for clarity."""
    del batch_size
    if isinstance(loader, Wrapped):
        return loader
    return Wrapped(probe(), loader, name, workers)


def _patch_dataloader(module):
    cls = getattr(module, "DataLoader", None)
    if cls is None or cls in _ORIGINAL_ITER:
        return
    orig = cls.__iter__
    _ORIGINAL_ITER[cls] = orig
    stats = {}

    def __iter__(self):
        p = probe()
        _cpu_split_at_first_iteration()  # before its workers fork
        st = stats.get(id(self))
        if st is None:
            st = stats[id(self)] = p.register(self)
        try:
            n = len(self)
        except TypeError:
            n = None
        return _ProbedIterator(p, st, lambda: orig(self), n)

    cls.__iter__ = __iter__


_SYNC_FILE_RANGE = None  # libc's sync_file_range, once looked up (False: not to be had)


def _write_back(fd):
    """Writes a file's dirty pages back and waits for them, so that the advice can drop them.
    sync_file_range (WAIT_BEFORE | WRITE | WAIT_AFTER): on a clean file a few microseconds and no
    I/O. fdatasync, where libc lacks it, costs a journal commit or a disk-cache flush on ext4 even
    for a clean file (57-67 us a file on this VM, against 4-10 us): paid at every cold open, it
    was part of what the cold run measured as fetch."""
    global _SYNC_FILE_RANGE
    if _SYNC_FILE_RANGE is None:
        _SYNC_FILE_RANGE = False
        try:
            import ctypes
            import ctypes.util
            fn = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _SYNC_FILE_RANGE = fn
        except (OSError, AttributeError):
            pass
    if _SYNC_FILE_RANGE and _SYNC_FILE_RANGE(fd, 0, 0, 7) == 0:
        return
    os.fdatasync(fd)


def _evict_before_open(folder):
    """Every file under `folder` that Python opens for reading is dropped from the page cache
    first, so each epoch reads it from storage (what mlbench's --drop-after-read does)."""
    folder = os.path.realpath(folder) + os.sep
    real_open = builtins.open

    def open_cold(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and "r" in mode and "+" not in mode:
            path = os.fsdecode(file)
            if os.path.realpath(path).startswith(folder):
                try:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        _write_back(fd)  # the advice drops no dirty page: write them back first
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)
                except OSError:
                    pass
        return real_open(file, mode, *args, **kwargs)

    builtins.open = open_cold


# torch.distributed's collectives whose calls are timed as sync (those this torch has).
_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "_all_gather_base",
                "broadcast", "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "reduce_scatter",
                "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all", "all_to_all_single", "gather",
                "gather_object", "scatter", "scatter_object_list")


def _patch_c10d(module):
    """Times torch.distributed's collective functions (patched in distributed_c10d right after it
    runs, so torch.distributed's ``from .distributed_c10d import *`` takes the timed ones)."""
    if getattr(module, "_mlbench_timed", False):
        return
    module._mlbench_timed = True
    _patch_init_process_group(module)
    sync = probe().sync
    clock = sync.clock

    def timed(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if sync.depth():
                return fn(*args, **kwargs)
            t0 = clock()
            sync.enter()
            try:
                return fn(*args, **kwargs)
            finally:
                sync.leave()
                sync.add_call(clock() - t0)
        call._mlbench_original = fn
        return call

    for name in _COLLECTIVES:
        fn = getattr(module, name, None)
        if callable(fn) and not hasattr(fn, "_mlbench_original"):
            setattr(module, name, timed(fn))
    dist = sys.modules.get("torch.distributed")
    if dist is not None:  # torch.distributed already took the untimed ones
        for name in _COLLECTIVES:
            if hasattr(dist, name) and hasattr(getattr(module, name, None), "_mlbench_original"):
                setattr(dist, name, getattr(module, name))


def _timed_comm_hook(hook):
    """A DDP communication hook that times each bucket's future, from the hook's call to its
    completion (_SyncTimer.add_bucket); ``hook`` is the script's own or DDP's default all-reduce."""
    sync = probe().sync
    clock = sync.clock

    def timed(state, bucket):
        t0 = clock()
        sync.enter()  # the hook's own all_reduce is this bucket's, not a collective of the script
        try:
            fut = hook(state, bucket)
        finally:
            sync.leave()

        def done(f):
            sync.add_bucket(t0, clock())
            return f.value()

        return fut.then(done)

    return timed


def _patch_ddp(module):
    """Times DDP's gradient all-reduce: a script's own communication hook is wrapped; a model
    without one gets DDP's default all-reduce (allreduce_hook) as a timed hook at its first forward."""
    cls = getattr(module, "DistributedDataParallel", None)
    if cls is None or getattr(cls, "_mlbench_timed", False):
        return
    cls._mlbench_timed = True
    register, builtin, forward = cls.register_comm_hook, getattr(cls, "_register_builtin_comm_hook", None), cls.forward

    def register_comm_hook(self, state, hook):
        self._mlbench_hook = True
        probe().sync.ddp_hooked += 1
        return register(self, state, _timed_comm_hook(hook))

    def register_builtin(self, comm_hook_type):
        self._mlbench_hook = True
        probe().sync.ddp_unhooked.append(f"a built-in hook ({comm_hook_type})")
        return builtin(self, comm_hook_type)

    def timed_forward(self, *args, **kwargs):
        if not getattr(self, "_mlbench_hook", False):
            self._mlbench_hook = True
            try:
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
                register(self, self.process_group, _timed_comm_hook(default_hooks.allreduce_hook))
                probe().sync.ddp_hooked += 1
            except Exception as e:  # this DDP takes no hook: its wait stays in the compute
                probe().sync.ddp_unhooked.append(f"{type(e).__name__}: {e}")
                probe().log(f"DDP's all-reduce is not timed ({type(e).__name__}: {e}); its wait counts as compute")
        return forward(self, *args, **kwargs)

    functools.update_wrapper(register_comm_hook, register)
    functools.update_wrapper(timed_forward, forward)
    cls.register_comm_hook = register_comm_hook
    if builtin is not None:
        cls._register_builtin_comm_hook = register_builtin
    cls.forward = timed_forward


def _patch_spawn(module):
    """Counts the ranks a script starts with torch.multiprocessing.spawn (each has its own probe
    and report; this process, which iterates no loader, then says so rather than a warning)."""
    start = getattr(module, "start_processes", None)
    if start is None or getattr(start, "_mlbench_original", None):
        return

    @functools.wraps(start)
    def start_processes(fn, args=(), nprocs=1, *rest, **kwargs):
        probe().spawned += nprocs
        return start(fn, args, nprocs, *rest, **kwargs)

    start_processes._mlbench_original = start
    module.start_processes = start_processes
    _patch_spawn_wrap(module)
    _patch_spawn_job(module)


def _patch_spawn_wrap(module):
    """A rank that torch.multiprocessing.spawn starts runs its ``_wrap(fn, i, ...)``: the index i
    is its local rank, known before the script's function runs (the CPU split applies there)."""
    wrap_fn = getattr(module, "_wrap", None)
    if wrap_fn is None or getattr(wrap_fn, "_mlbench_original", None):
        return

    @functools.wraps(wrap_fn)
    def _wrap(fn, i, *rest, **kwargs):
        _apply_cpu_split(int(i), "torch.multiprocessing.spawn index", "rank start")
        return wrap_fn(fn, i, *rest, **kwargs)

    _wrap._mlbench_original = wrap_fn
    module._wrap = _wrap


# What is patched right after it is imported (or at install() when it already was).
_PATCHES = {"torch.utils.data.dataloader": _patch_dataloader, "torch.distributed.distributed_c10d": _patch_c10d,
            "torch.nn.parallel.distributed": _patch_ddp, "torch.multiprocessing.spawn": _patch_spawn}


class _DataLoaderFinder:
    """Patches torch.utils.data.dataloader (and torch.distributed's collectives, DDP and
    torch.multiprocessing.spawn: _PATCHES) right after each is imported, so that starting the
    probe costs nothing in scripts that never import torch."""

    target = "torch.utils.data.dataloader"

    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            try:
                patch(module)
            except Exception as e:  # a torch whose shape the probe does not know: unprobed, not broken
                print(f"mlbench_probe: cannot patch {fullname}: {type(e).__name__}: {e}", file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Probe every torch DataLoader iteration of this process (what mlbench-stall --exec does
    through probe/autoprobe/sitecustomize.py)."""
    probe()
    slot = _cpu_split_slot(os.environ)
    if slot is not None:
        _apply_cpu_split(slot[0], slot[1], "probe load")
    for name, patch in _PATCHES.items():
        if sys.modules.get(name) is not None:
            patch(sys.modules[name])
    if not any(isinstance(f, _DataLoaderFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DataLoaderFinder())
    _announce_from_env()


# ---- The job's ranks, announced (docs/stall.md, "Distributed jobs": "When the job fails") -------
# Under mlbench-stall --exec each rank of a job writes ``<report folder>/ranks/<host>.<pid>.json`` as
# it goes: ``started`` (RANK or SLURM_PROCID in its environment, or the index torch.multiprocessing.spawn
# gave it), ``init_process_group`` (inside that call), ``initialized``, ``iterating`` (its first
# batch), ``reported`` (its report written: ``completed`` and ``reason``) or ``ended`` (no report).
# mlbench-stall watches these processes: a rank that vanishes without its completed report, a rank
# seen with a second pid (a launcher restarted it), ranks still without a batch after
# --probe-timeout, and a launcher that ended with no rank ever announced each end the run. A
# process started by a rank (a DataLoader worker, a subprocess) inherits MLBENCH_PROBE_RANK_OF and
# is not announced, but for RANK's ranks of an srun task (torchrun under srun); a process that starts
# ranks with spawn is announced as their ``launcher``, and one whose children are announced is taken
# for their launcher by mlbench-stall.
_RANK_OF = "MLBENCH_PROBE_RANK_OF"
_ANNOUNCED = None  # this process's announcement, once it is a rank
_LAUNCHER = {}  # this process's, once it started ranks with torch.multiprocessing.spawn
_BEFORE_ITERATING = ("started", "init_process_group", "initialized")


def _proc_start_ticks():
    """This process's start time (/proc/self/stat's 22nd field, clock ticks after boot): with the
    pid, what tells it from a later process given the same pid."""
    try:
        with open("/proc/self/stat") as f:
            s = f.read()
        return int(s[s.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _write_announcement(name, body):
    folder = os.environ.get("MLBENCH_PROBE_REPORT")
    if not folder:
        return
    try:
        d = os.path.join(folder, "ranks")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, name)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(body, f)
        os.replace(tmp, path)
    except OSError:
        pass  # the watch is lost for this process, not the script


def _announce(stage, rank=None, world=None, source=None, **extra):
    """Announces this process as a rank at `stage` (a process not yet announced only with a rank)."""
    global _ANNOUNCED
    if not os.environ.get("MLBENCH_PROBE_REPORT"):
        return
    if _ANNOUNCED is None:
        if rank is None:
            return
        _ANNOUNCED = {"pid": os.getpid(), "ppid": os.getppid(), "host": socket.gethostname(),
                      "start_ticks": _proc_start_ticks(), "started": time.time(), "argv": sys.argv[:6]}
        os.environ[_RANK_OF] = f"{rank}:{source}"  # what it starts is of this rank, not a rank
    elif _ANNOUNCED["pid"] != os.getpid():
        return  # a fork of a rank (a DataLoader worker)
    if rank is not None:
        _ANNOUNCED.update(rank=int(rank), world_size=world, **({"from": source} if source else {}))
    _ANNOUNCED.update(stage=stage, since=time.time(), **extra)
    _write_announcement(f"{_ANNOUNCED['host']}.{os.getpid()}.json", _ANNOUNCED)


def _announce_from_env():
    """At the probe's load: a rank by its environment (torchrun, srun, ranks started by hand)."""
    env = os.environ
    if sys.argv[:1] == ["-c"]:
        return  # started by multiprocessing (spawn): a rank of mp.spawn says so in _wrap, a worker is none
    # Started by a rank: not a rank, but where srun's task is a launcher that gives its ranks RANK.
    if env.get(_RANK_OF) and not (env[_RANK_OF].endswith(":slurm") and env.get("RANK", "").strip()):
        return
    rank = _first_int(env, ("RANK", "SLURM_PROCID"))
    if rank is not None:
        _announce("started", rank, _first_int(env, ("WORLD_SIZE", "SLURM_NTASKS")),
                  "env" if env.get("RANK", "").strip() else "slurm")


def _patch_spawn_job(module):
    """torch.multiprocessing.spawn: the spawning process is the job's launcher (not a rank: it
    iterates nothing), each process it starts a rank from its start, by its index; the exception a
    rank raises (which spawn's _wrap catches, so no excepthook sees it) is its report's reason."""
    start, wrap_fn = module.start_processes, getattr(module, "_wrap", None)
    if getattr(start, "_mlbench_job", False):
        return

    @functools.wraps(start)
    def start_processes(fn, args=(), nprocs=1, *rest, **kwargs):
        global _ANNOUNCED
        if _ANNOUNCED is not None and _ANNOUNCED["pid"] == os.getpid():
            _ANNOUNCED = None  # a launcher that had RANK set (srun's task per node): its ranks are its children
        os.environ.pop(_RANK_OF, None)
        _LAUNCHER.update({"pid": os.getpid(), "host": socket.gethostname(), "launcher": "torch.multiprocessing.spawn",
                          "nprocs": nprocs, "start_ticks": _proc_start_ticks(), "since": time.time()})
        _write_announcement(f"{socket.gethostname()}.{os.getpid()}.json", _LAUNCHER)
        return start(fn, args, nprocs, *rest, **kwargs)

    start_processes._mlbench_job = True
    module.start_processes = start_processes
    context = getattr(module, "ProcessContext", None)
    if context is not None and hasattr(context, "join"):
        join = context.join

        @functools.wraps(join)
        def joined(self, *args, **kwargs):
            try:
                return join(self, *args, **kwargs)
            except Exception as e:  # spawn names the process that failed first: the watch names its rank
                i = getattr(e, "error_index", None)
                if _LAUNCHER and isinstance(i, int) and 0 <= i < len(self.processes):
                    _LAUNCHER.update(failed_index=i, failed_pid=self.processes[i].pid,
                                     failed_exitcode=self.processes[i].exitcode, since=time.time())
                    _write_announcement(f"{socket.gethostname()}.{os.getpid()}.json", _LAUNCHER)
                raise

        context.join = joined
    if wrap_fn is None:
        return

    @functools.wraps(wrap_fn)
    def _wrap(fn, i, *rest, **kwargs):
        _announce("started", int(i), None, "mp.spawn")

        def run(*a, **kw):
            try:
                return fn(*a, **kw)
            except Exception as e:
                if _PROBE is not None and _PROBE.failure is None:
                    _PROBE.failure = f"the script raised {type(e).__name__}: {e}"
                raise

        return wrap_fn(run, i, *rest, **kwargs)

    module._wrap = _wrap


def _patch_init_process_group(module):
    """init_process_group: the stage a rank waits in for its peers, then its rank as torch knows it."""
    init = getattr(module, "init_process_group", None)
    if init is None or getattr(init, "_mlbench_job", False):
        return

    @functools.wraps(init)
    def init_process_group(*args, **kwargs):
        rank = kwargs.get("rank", args[4] if len(args) > 4 else -1)
        world = kwargs.get("world_size", args[3] if len(args) > 3 else -1)
        env_rank = _first_int(os.environ, ("RANK",))
        known = rank if isinstance(rank, int) and rank >= 0 else env_rank
        if not os.environ.get(_RANK_OF) or _ANNOUNCED is not None:
            _announce("init_process_group", known, world if isinstance(world, int) and world > 0 else None,
                      "torch.distributed" if known is not None else None)
        out = init(*args, **kwargs)
        try:
            _announce("initialized", int(module.get_rank()), int(module.get_world_size()), "torch.distributed")
        except Exception:
            pass
        return out

    init_process_group._mlbench_job = True
    module.init_process_group = init_process_group
    dist = sys.modules.get("torch.distributed")
    if dist is not None and hasattr(dist, "init_process_group"):
        dist.init_process_group = init_process_group
