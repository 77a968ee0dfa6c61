#!/usr/bin/python3
"""Where a probed script's rate goes against its own per-iteration lines: the DataLoader's worker
started again at every epoch, or the probe (docs/stall.md, "Each epoch's start";
studies/results/2026-11-29-epoch-start.md).

Runs tests/stall/exec/tiny_gan.py (a DCGAN-shaped GAN, one DataLoader worker, batch 64) over DATA
in four conditions, round after round (A B C D, A B C D, ...): `plain` (as written), `probed` (the
probe installed as mlbench-stall's cached run installs it: probe/autoprobe on PYTHONPATH, 100
iterations in observations of 10 after 2 dropped), `persistent` (plain with
`persistent_workers=True`) and `probed-persistent`. From the script's own lines it takes, per epoch
after the first two: the steady step (iterations 1.., median), the epoch's start (the first batch's
data time: iter(loader) to the first batch), the first step's compute (its time less that wait) and
the epoch's wall time; from the probe's report its rate (`train_item.avg`) and, where the probe
records them, its epoch-start waits. Prints one table row per condition (medians over the rounds'
epochs) and the paired differences that split the gap.

Usage: studies/epoch_start.py DATA [--rounds 3] [--epochs 12] [--width 8] [--workers 1] [--out DIR]
DATA: an ImageFolder of 640 photographs (10 steps of 64 an epoch), e.g. 64 per class of
mlbench-datagen's real-photos-small."""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCRIPT = os.path.join(ROOT, "tests", "stall", "exec", "tiny_gan.py")
STEP = re.compile(r"^\[(\d+)/\d+\]\[(\d+)/(\d+)\] .* time ([0-9.]+) ms \(data ([0-9.]+) ms\)")
EPOCH = re.compile(r"^epoch (\d+): ([0-9.]+) s")


def run(cond, args, out, rnd):
    cmd = [sys.executable, SCRIPT, args.data, "--epochs", str(args.epochs), "--width", str(args.width),
           "--workers", str(args.workers)]
    env = dict(os.environ)
    if "persistent" in cond:
        cmd.append("--persistent-workers")
    report = os.path.join(out, f"{cond}-{rnd}")
    if cond.startswith("probed"):
        probe = os.path.join(ROOT, "probe")
        env.update(PYTHONPATH=f"{probe}/autoprobe:{probe}", MLBENCH_PROBE_REPORT=report, MLBENCH_PROBE_NAME="exec",
                   MLBENCH_PROBE_MODE="normal", MLBENCH_PROBE_ITERATIONS="100", MLBENCH_PROBE_NUMBER="10",
                   MLBENCH_PROBE_WARMUP="2")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    with open(report + ".log", "w") as f:
        f.write(p.stdout)
    if p.returncode != 0:
        raise SystemExit(f"epoch_start.py: {cond} round {rnd} exited with {p.returncode}: {p.stdout.strip().splitlines()[-1:]}")
    steps, epochs = {}, {}
    for line in p.stdout.splitlines():
        m = STEP.match(line)
        if m:
            steps[(int(m[1]), int(m[2]))] = (float(m[4]) / 1e3, float(m[5]) / 1e3)
        m = EPOCH.match(line)
        if m:
            epochs[int(m[1])] = float(m[2])
    r = {"steady": [], "start_wait": [], "first_compute": [], "epoch_s": [], "end_s": [], "by_position": {}}
    last = max(e for e, _ in steps)
    for e in range(2, last + 1):
        if (e, 0) not in steps or e not in epochs:
            continue  # the probe ended the script within this epoch
        t0, d0 = steps[(e, 0)]
        r["start_wait"].append(d0)
        r["first_compute"].append(t0 - d0)
        times = [steps[(e, i)][0] for i in range(0, 1000) if (e, i) in steps]
        r["steady"] += times[1:]
        r["epoch_s"].append(epochs[e])
        r["end_s"].append(epochs[e] - sum(times))  # the epoch's end: the loader's last next() (its workers stop)
        for i, t in enumerate(times):
            r["by_position"].setdefault(i, []).append(t)
    if cond.startswith("probed"):
        rep = [f for f in glob.glob(os.path.join(report, "*.json")) if ".FAIL." not in f]
        if rep:
            j = json.load(open(rep[0]))
            r["probe_rate"] = j["train_item"]["avg"]
            r["probe_wait"] = j["stall"]["wait"]["avg"]
            es = j["probe"].get("epoch_start")
            if es:
                r["probe_epoch_start"] = es["wait"]["avg"]
                r["probe_steady_wait"] = es["steady_wait"]["avg"]
    return r


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--width", type=int, default=8, help="tiny_gan.py's --width")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="epoch-start-")
    os.makedirs(out, exist_ok=True)
    conds = ["plain", "probed", "persistent", "probed-persistent"]
    res = {c: [] for c in conds}
    for rnd in range(args.rounds):
        for c in conds:
            res[c].append(run(c, args, out, rnd))
            r = res[c][-1]
            print(f"round {rnd} {c}: steady {1e3 * med(r['steady']):.1f} ms, epoch start {1e3 * med(r['start_wait']):.1f} ms, "
                  f"epoch {med(r['epoch_s']):.3f} s" + (f", probe {r['probe_rate']:.1f}/s" if "probe_rate" in r else ""),
                  flush=True)
    print()
    print("| condition | steady step, ms | steady samples/s | epoch start (iter to first batch), ms | first step's compute, ms "
          "| epoch wall, s | epoch samples/s | probe's rate, samples/s | probe: epoch-start wait / steady wait, ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    per_epoch = 640
    for c in conds:
        pool = lambda k: [x for r in res[c] for x in r.get(k, [])]
        steady, start, first, ep = med(pool("steady")), med(pool("start_wait")), med(pool("first_compute")), med(pool("epoch_s"))
        rates = [r["probe_rate"] for r in res[c] if "probe_rate" in r]
        pes = [r["probe_epoch_start"] for r in res[c] if "probe_epoch_start" in r]
        psw = [r["probe_steady_wait"] for r in res[c] if "probe_steady_wait" in r]
        probe = f"{med(rates):.1f} ({min(rates):.0f}-{max(rates):.0f})" if rates else "-"
        pe = f"{1e3 * med(pes):.1f} / {1e3 * med(psw):.1f}" if pes else "-"
        print(f"| {c} | {1e3 * steady:.1f} | {64 / steady:.1f} | {1e3 * start:.1f} | {1e3 * first:.1f} | {ep:.3f} "
              f"| {per_epoch / ep:.1f} | {probe} | {pe} |")
    print()
    print("step time by position in the epoch (ms, median), and the epoch's end (its wall time less its steps):")
    for c in conds:
        pos = {}
        for r in res[c]:
            for i, ts in r["by_position"].items():
                pos.setdefault(i, []).extend(ts)
        ends = [x for r in res[c] for x in r["end_s"]]
        print(f"  {c:18s} " + " ".join(f"{1e3 * med(pos[i]):.0f}" for i in sorted(pos)) + f" | end {1e3 * med(ends):.1f}")
    print()
    # Paired by round: the probe's cost in the steady step, and the epoch's start as persistent workers remove it.
    d_probe = [med(b["steady"]) - med(a["steady"]) for a, b in zip(res["plain"], res["probed"])]
    d_probe_p = [med(b["steady"]) - med(a["steady"]) for a, b in zip(res["persistent"], res["probed-persistent"])]
    d_epoch = [med(a["epoch_s"]) - med(b["epoch_s"]) for a, b in zip(res["plain"], res["persistent"])]
    print(f"probe's cost per steady step (probed - plain), ms: {', '.join(f'{1e3 * d:+.1f}' for d in d_probe)}; "
          f"with persistent workers: {', '.join(f'{1e3 * d:+.1f}' for d in d_probe_p)}")
    print(f"epoch wall time that persistent_workers=True removes (plain - persistent), ms: "
          f"{', '.join(f'{1e3 * d:+.1f}' for d in d_epoch)}")
    print(f"load: {open('/proc/loadavg').read().split()[:3]}; out: {out}")


if __name__ == "__main__":
    main()
