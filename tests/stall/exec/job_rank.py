"""A rank of a toy job that needs no torch, for the faults of a distributed job under
mlbench-stall --exec (tests/stall/exec_e2e_test.cc, StallExecJob.*; docs/stall.md, "Distributed
jobs"). Its rank and world size come from RANK and WORLD_SIZE. Each step it takes a batch of a
probed loader (mlbench_probe.wrap), then meets the other ranks at a barrier of files in --barrier
(as ranks meet at an all-reduce): a rank that never comes leaves the others waiting there forever.

    RANK=r WORLD_SIZE=n job_rank.py --pids DIR --barrier DIR [--die-at K] [--raise-at K] [--fault-rank R]
                                    [--init-hangs]

--die-at K: rank --fault-rank (default 1) kills itself with SIGKILL at step K (as the OOM killer
would); --raise-at K: it raises RuntimeError at step K; --init-hangs: it calls
torch.distributed.init_process_group of tests/stall/exec/fake_torch (which waits forever, as for a
peer that never comes) before its first batch. Each rank writes its pid into --pids/<rank>.<pid>
and prints "ready", then "step K" for its first steps."""

import argparse
import os
import signal
import sys
import time

import mlbench_probe


def barrier(folder, step, rank, world):
    open(os.path.join(folder, f"{step}.{rank}"), "w").close()
    while not all(os.path.exists(os.path.join(folder, f"{step}.{r}")) for r in range(world)):
        time.sleep(0.002)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pids", required=True)
    ap.add_argument("--barrier", required=True)
    ap.add_argument("--fault-rank", type=int, default=1)
    ap.add_argument("--die-at", type=int, default=-1)
    ap.add_argument("--raise-at", type=int, default=-1)
    ap.add_argument("--init-hangs", action="store_true")
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    faulty = rank == args.fault_rank
    os.makedirs(args.pids, exist_ok=True)
    os.makedirs(args.barrier, exist_ok=True)
    open(os.path.join(args.pids, f"{rank}.{os.getpid()}"), "w").close()
    print("ready", flush=True)
    if faulty and args.init_hangs:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_torch"))
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world)
    for step, batch in enumerate(mlbench_probe.wrap([[1, 2]] * 100000)):
        if step < 4:
            print(f"step {step}", flush=True)
        if faulty and step == args.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if faulty and step == args.raise_at:
            raise RuntimeError(f"injected at step {step}")
        time.sleep(0.002)
        barrier(args.barrier, step, rank, world)


if __name__ == "__main__":
    main()
