"""A 2-rank DDP training script over Gloo on the CPU, started by torch.multiprocessing.spawn (as
pytorch/examples' ImageNet script does with --multiprocessing-distributed): a tiny model, a
synthetic Dataset sharded by DistributedSampler, and one rank's samples slowed on purpose.

    python3 ddp_train.py [--ranks 2] [--slow-rank R] [--slow-ms MS] [--batch 4] [--epochs 50]
    srun -N2 --ntasks-per-node=1 python3 ddp_train.py --launcher env ...

--launcher env (as a script started by torchrun or srun is): this process is one rank, which
takes its rank and world size from RANK/WORLD_SIZE, else srun's SLURM_PROCID/SLURM_NTASKS, and
the rendezvous from MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default: one derived from
SLURM_JOB_ID and SLURM_STEP_ID, the same in every task of a step and different for each step).

--slow-rank R (default none) sleeps --slow-ms in every __getitem__ of rank R's Dataset, so R is
late at every step and the other ranks wait for it at DDP's gradient all-reduce; ``all`` slows
every rank alike (a balanced job). --data DIR makes each sample read a file of DIR (sample i the
i-th file, sorted, modulo their count; the differential runs' cached state is DIR in the page
cache), and --slow-read-rank R (``all``: every rank) then pads each of rank R's reads that would
block, the file's pages not resident (os.preadv with RWF_NOWAIT), to --slow-read-ms: a slow disk
for that rank, seen in the cold run only (the probe evicts each file as it is opened) and not in
the cached one, so the analysis calls it fetch. Used by
tests/stall/exec_e2e_test.cc (StallExecRanks.*) under mlbench-stall --exec; it knows nothing of
mlbench."""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Synthetic(Dataset):
    def __init__(self, n, delay_s):
        self.n, self.delay_s = n, delay_s
        self.files, self.read_s = [], 0.0  # --data's files; the read padding of a non-resident file

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.files:
            self.read(self.files[i % len(self.files)])
        if self.delay_s:
            time.sleep(self.delay_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, generator=g), i % 4

    def read(self, path):
        t0 = time.perf_counter()
        with open(path, "rb") as f:
            buf = bytearray(os.fstat(f.fileno()).st_size)
            try:
                os.preadv(f.fileno(), [buf], 0, os.RWF_NOWAIT)
            except BlockingIOError:  # not resident: the real read, padded to the slow disk's latency
                f.readinto(buf)
                rest = self.read_s - (time.perf_counter() - t0)
                if rest > 0:
                    time.sleep(rest)


def worker(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{args.addr}:{args.port}", rank=rank, world_size=args.ranks)
    delay = args.slow_ms / 1000 if args.slow_rank in ("all", str(rank)) else 0.0
    data = Synthetic(args.samples, delay)
    if args.data:
        data.files = sorted(os.path.join(d, n) for d, _, names in os.walk(args.data) for n in names)
        data.read_s = args.slow_read_ms / 1000 if args.slow_read_rank in ("all", str(rank)) else 0.0
    sampler = DistributedSampler(data, num_replicas=args.ranks, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler, num_workers=0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--slow-rank", default="none")
    ap.add_argument("--slow-ms", type=float, default=50)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--data", default="")
    ap.add_argument("--slow-read-rank", default="none")
    ap.add_argument("--slow-read-ms", type=float, default=20)
    ap.add_argument("--launcher", choices=("spawn", "env"), default="spawn")
    args = ap.parse_args()
    if args.launcher == "env":
        env = os.environ
        rank = int(env.get("RANK") or env["SLURM_PROCID"])
        args.ranks = int(env.get("WORLD_SIZE") or env["SLURM_NTASKS"])
        args.addr = env.get("MASTER_ADDR", "127.0.0.1")
        step = int(env.get("SLURM_JOB_ID", "0")) * 64 + int(env.get("SLURM_STEP_ID", "0") or 0)
        args.port = int(env.get("MASTER_PORT", "0")) or 12000 + step % 8000
        worker(rank, args)
        return
    args.addr = "127.0.0.1"
    args.port = int(os.environ.get("DDP_PORT", "0")) or free_port()
    mp.spawn(worker, args=(args,), nprocs=args.ranks)


if __name__ == "__main__":
    main()
