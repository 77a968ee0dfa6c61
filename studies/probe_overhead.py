#!/usr/bin/python3
"""Cost of probe/mlbench_probe.py per iteration (docs/performance.md, probe overhead).

Iterates a list of ready batches with a step of --step-us of busy work, alternately without and
with mlbench_probe.wrap (A, B, A, B, ... --rounds times each), and prints per round the time of an
iteration on each side, then the probe's added cost per iteration (B - A, paired by round) as
median and min-max in microseconds. With --step-s (a step's seconds, e.g. the `stall.iteration.avg`
of a probe report of the training script) it also prints that cost as a percentage of the step.
Usage: studies/probe_overhead.py [--rounds 7] [--iterations 20000] [--step-us 0] [--step-s S]"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "probe"))


def busy(us):
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def run(loader, step_us):
    t0 = time.perf_counter()
    n = 0
    for batch in loader:
        n += len(batch)
        if step_us:
            busy(step_us)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--step-us", type=float, default=0.0, help="busy work per step (0: none, the bare cost)")
    ap.add_argument("--step-s", type=float, default=None, help="a real step's seconds, to express the cost as a %%")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MLBENCH_PROBE_REPORT"] = tmp
        os.environ["MLBENCH_PROBE_INTERVAL"] = "5"
        import mlbench_probe
        batches = [[0] * 8 for _ in range(args.iterations)]
        a, b = [], []
        for r in range(args.rounds):
            ta = run(batches, args.step_us) / args.iterations
            tb = run(mlbench_probe.wrap(batches, name=f"round{r}"), args.step_us) / args.iterations
            a.append(ta)
            b.append(tb)
            print(f"round {r}: without {ta * 1e6:8.3f} us/iteration, with probe {tb * 1e6:8.3f} us/iteration, "
                  f"added {(tb - ta) * 1e6:7.3f} us")
        added = [(y - x) * 1e6 for x, y in zip(a, b)]
        print(f"probe cost per iteration: median {statistics.median(added):.3f} us, "
              f"min-max {min(added):.3f}-{max(added):.3f} us over {args.rounds} paired rounds "
              f"(load {os.getloadavg()[0]:.2f})")
        mlbench_probe.probe().finish(None)  # before the report folder goes
        if args.step_s:
            pct = [x / 1e6 / args.step_s * 100 for x in added]
            print(f"as a share of a {args.step_s * 1e3:.2f} ms step: median {statistics.median(pct):.4f}%, "
                  f"min-max {min(pct):.4f}-{max(pct):.4f}%")


if __name__ == "__main__":
    main()
