"""A launcher of ranks as torchrun is one, for the launcher faults under mlbench-stall --exec
(tests/stall/exec_e2e_test.cc, StallExecJob.*): starts --nproc-per-node copies of a script with
RANK, LOCAL_RANK and WORLD_SIZE set, and waits for them.

    fake_launcher.py --nproc-per-node N [--fail-before-start] [--restart-rank R] SCRIPT ARGS...

--fail-before-start: raises before starting any rank (as Debian 12's torchrun does on Python
3.11, from its own argument parsing). --restart-rank R: once rank R printed "step 1", starts a
replacement of it (with TORCHELASTIC_RESTART_COUNT=1, as torchrun's --max-restarts), waits for its
"ready", then kills the first one: a rank restarted by its launcher."""

import argparse
import os
import subprocess
import sys


def start(rank, n, script, extra=None):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), **(extra or {}))
    return subprocess.Popen([sys.executable] + script, env=env, stdout=subprocess.PIPE, text=True)


def wait_line(p, line):
    for got in p.stdout:
        if got.strip() == line:
            return True
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc-per-node", type=int, required=True)
    ap.add_argument("--fail-before-start", action="store_true")
    ap.add_argument("--restart-rank", type=int, default=-1)
    ap.add_argument("script", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.fail_before_start:
        raise ValueError("cannot parse the launcher's own options (before any rank)")
    ranks = [start(r, args.nproc_per_node, args.script) for r in range(args.nproc_per_node)]
    if 0 <= args.restart_rank < len(ranks):
        old = ranks[args.restart_rank]
        if wait_line(old, "step 1"):
            new = start(args.restart_rank, args.nproc_per_node, args.script, {"TORCHELASTIC_RESTART_COUNT": "1"})
            wait_line(new, "ready")
            old.kill()
            old.wait()
            ranks[args.restart_rank] = new
    sys.exit(max(abs(p.wait()) for p in ranks))


if __name__ == "__main__":
    main()
