"""Ground truth for mlbench-stall --exec (tests/stall/exec_test.cc): a training loop whose costs
are injected sleeps. Each sample is read from a file of DIR; a read that would block (the file's
pages are not in the page cache: os.preadv with RWF_NOWAIT) takes --fetch-ms in all (the real
read, then a sleep for the rest), as an emulated slow disk; each sample then takes --prep-ms
(prep) and each step --compute-ms (compute). Costs are sleeps against a virtual clock (spend()),
so a late wake-up on a loaded machine does not lengthen the run. Samples are loaded one after another in the loop's thread (no overlap), so with B
samples a batch the true split of a cold step is compute C / (C + B (p + f)), prep B p / (...),
fetch B f / (...). Usage: sleepy_train.py DIR [--batch B] [--prep-ms p] [--fetch-ms f]
[--compute-ms C] [--epochs E] [--no-wrap]. Needs probe/ on PYTHONPATH (mlbench_probe)."""

import argparse
import os
import random
import sys
import time


def files_of(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names]
    return sorted(out)


_virtual = None  # the end of the last injected cost, on time.perf_counter's scale


def spend(seconds):
    """Injects a cost: sleeps until the virtual clock, advanced by `seconds`, is reached. A late
    wake-up (a loaded machine) shortens the next sleep instead of adding up, so the run's rates
    are the injected ones (as stallsim's virtual CPUs and storage device)."""
    global _virtual
    now = time.perf_counter()
    _virtual = (now if _virtual is None else _virtual) + seconds
    if _virtual > now:
        time.sleep(_virtual - now)


def load(path, prep_s, fetch_s):
    with open(path, "rb") as f:
        buf = bytearray(os.fstat(f.fileno()).st_size)
        try:
            os.preadv(f.fileno(), [buf], 0, os.RWF_NOWAIT)
        except BlockingIOError:  # not resident: the real read, within the emulated device's latency
            f.readinto(buf)
            spend(fetch_s)
    spend(prep_s)
    return bytes(buf[:16])


def batches(files, batch, prep_s, fetch_s, seed):
    order = list(files)
    random.Random(seed).shuffle(order)
    for i in range(0, len(order) - batch + 1, batch):
        yield [load(p, prep_s, fetch_s) for p in order[i:i + batch]]


class Loader:
    """An epoch per iteration, as a DataLoader; len() = batches per epoch."""

    def __init__(self, files, batch, prep_s, fetch_s):
        self.files, self.batch, self.prep_s, self.fetch_s, self.epoch = files, batch, prep_s, fetch_s, 0

    def __iter__(self):
        self.epoch += 1
        return batches(self.files, self.batch, self.prep_s, self.fetch_s, self.epoch)

    def __len__(self):
        return len(self.files) // self.batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prep-ms", type=float, default=10)
    ap.add_argument("--fetch-ms", type=float, default=15)
    ap.add_argument("--compute-ms", type=float, default=40)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--no-wrap", action="store_true", help="iterate without the probe (overhead baseline)")
    args = ap.parse_args()
    files = files_of(args.data)
    if not files:
        sys.exit(f"sleepy_train.py: no files under {args.data}")
    loader = Loader(files, args.batch, args.prep_ms / 1e3, args.fetch_ms / 1e3)
    if not args.no_wrap:
        import mlbench_probe
        loader = mlbench_probe.wrap(loader, name="sleepy")
    for _ in range(args.epochs):
        for batch in loader:
            assert len(batch) == args.batch
            spend(args.compute_ms / 1e3)


if __name__ == "__main__":
    main()
