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

Standard library only (torch is used when the script imports it).
"""

import atexit
import builtins
import datetime
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
        self.compute = []
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
        self.name = env.get("MLBENCH_PROBE_NAME") or os.path.splitext(os.path.basename(sys.argv[0] or "python"))[0] or "python"
        self.loaders = []
        self.cached = {}  # loader index -> batches kept for compute-only replay
        self.start = time.time()
        self.file = None
        self.last_write = self.clock()
        self.finished = False
        self.failure = None
        self.lock = threading.RLock()
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

    def record(self, st, wait, compute, items, first=False, iter_s=None):
        with self.lock:
            if first:
                st.firsts[len(st.wait)] = iter_s
            st.wait.append(wait)
            st.compute.append(compute)
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
        waits, computes = [], []
        for o in range(warm, obs_total):
            a, b = o * self.number, (o + 1) * self.number
            train.append(sum(st.wait[a:b]) + sum(st.compute[a:b]))
            train_items.append(sum(st.items[a:b]))
            waits += st.wait[a:b]
            computes += st.compute[a:b]
        iters = [w + c for w, c in zip(waits, computes)]
        rate = [i / t for i, t in zip(train_items, train) if t > 0]
        total = sum(iters)
        batch = round(sum(st.items) / n) if n else 0
        args = {"argv": sys.argv, "mode": self.mode, "iterations": self.iterations or None, "loader": st.name if st else None}
        uid = hashlib.sha256(json.dumps([sys.argv, self.mode], sort_keys=True).encode()).hexdigest()
        affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        torch = sys.modules.get("torch")
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
                      "warmup_iterations": warm * self.number},
            "pipeline": {"source": "mlbench_probe", "loader": st.name if st else None, "workers": st.workers if st else 0},
            "resources": None,
            "iterations": n,
            "probe": {"schema": SCHEMA, "mode": self.mode, "cache_batches": self.cache_batches if self.mode == "compute-only" else None,
                      "loader_index": st.index if st else None, "epochs": st.epochs if st else 0,
                      "replayed_iterations": st.replayed if st else 0,
                      "epoch_start": _epoch_start(st, warm * self.number, obs_total * self.number) if st else None,
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
        name = f"{r['suite']}.{r['name']}.R{r['run_id']}.D{r['jr_id']}{fail}.{stamp}.json"
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
                    return  # a DataLoader worker started with spawn: its parent reports
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
        if self.pending is not None:
            wait, items, returned, first, iter_s = self.pending
            self.pending = None
            self.probe.record(self.st, wait, now - returned, items, first, iter_s)

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
        st = stats.get(id(self))
        if st is None:
            st = stats[id(self)] = p.register(self)
        try:
            n = len(self)
        except TypeError:
            n = None
        return _ProbedIterator(p, st, lambda: orig(self), n)

    cls.__iter__ = __iter__


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
                        os.fdatasync(fd)  # the advice drops no dirty page: write them back first
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)
                except OSError:
                    pass
        return real_open(file, mode, *args, **kwargs)

    builtins.open = open_cold


class _DataLoaderFinder:
    """Patches torch.utils.data.dataloader right after it is imported, so that starting the
    probe costs nothing in scripts that never import torch."""

    target = "torch.utils.data.dataloader"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _patch_dataloader(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Probe every torch DataLoader iteration of this process (what mlbench-stall --exec does
    through probe/autoprobe/sitecustomize.py)."""
    mod = sys.modules.get(_DataLoaderFinder.target)
    if mod is not None:
        _patch_dataloader(mod)
    elif not any(isinstance(f, _DataLoaderFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DataLoaderFinder())
    probe()
