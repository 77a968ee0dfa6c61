#!/usr/bin/python3
"""The PyTorch peer of the scaling benchmark (studies/scaling_efficiency.sh): the same model
(torchvision's ResNet, the same parameters as benchmarks/models' ResNet), the same data (a
torchvision ImageFolder of the same JPEG dataset with convnet's augment: RandomResizedCrop
--image-size, a horizontal flip, ImageNet normalisation), each rank's shard dealt by
DistributedSampler, DistributedDataParallel over Gloo on CPU (25 MB buckets, its default), one
intra-op thread per rank, SGD as the benchmark's (lr 0.1, momentum 0.9, weight decay 1e-4).

Usage: ddp_peer.py --data DIR --ranks N [--image-size 64] [--classes 10] [--batch-size 16]
                   [--workers 1] [--warmup 10] [--iterations 40] [--cpus 0,1] [--ddp-at-one]
With --ranks 1 the model is trained as it is, without DDP (DDP over a world of one still copies
every gradient into its buckets and back): the 1-rank baseline of the efficiency, as the
benchmark's. --ddp-at-one wraps it all the same.
The ranks are started here with torch.multiprocessing.spawn; rank k is pinned to the k-th CPU of
--cpus (its DataLoader workers with it), as the benchmark pins its local ranks. Prints one JSON
line: the job's images/s (N x batch x timed iterations over the slowest rank's time) and, per
rank, its images/s and the shares of its timed steps spent waiting for data (inside next()), in
sync (blocked on DDP's all-reduce after backward's computation: from the last bucket's call to the
last bucket's completion, as mlbench's probe times it) and the rest (compute).
"""
import argparse
import json
import os
import sys
import time


def run_rank(rank, a, port, out):
    import torch
    import torch.distributed as dist
    import torchvision
    from torchvision import datasets, transforms

    import faulthandler
    faulthandler.dump_traceback_later(a.hang_timeout, exit=True)  # a hung rank says where, and ends
    cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else []
    if cpus:
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(a.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.manual_seed(a.seed)  # the same weights on every rank
    t = transforms.Compose([transforms.RandomResizedCrop(a.image_size), transforms.RandomHorizontalFlip(),
                            transforms.ToTensor(),
                            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(a.data, t)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=a.ranks, rank=rank, shuffle=True,
                                                              seed=a.seed, drop_last=True)
    # Persistent workers: a run longer than a shard (2 ranks, 70 steps of 16 over 1,000 images) would
    # otherwise restart its workers at the epoch's end, a data stall the scaling is not about.
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers,
                                     drop_last=True, persistent_workers=a.workers > 0)
    model = torchvision.models.resnet18(num_classes=a.classes)
    buckets = []  # (call, done) of the iteration's buckets
    if a.ranks == 1 and not a.ddp_at_one:
        # One rank trains the model itself, as the benchmark's 1-rank job does (no reducer): DDP over
        # a world of one would still copy every gradient into its buckets and back and call the hook.
        ddp = model
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)

    def hook(state, bucket):
        t0 = time.perf_counter()
        fut = dist.all_reduce(bucket.buffer().div_(a.ranks), async_op=True).get_future()

        def done(f):
            buckets.append((t0, time.perf_counter()))
            return f.value()[0]
        return fut.then(done)

    if ddp is not model:
        ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def batches():
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            yield from dl
            epoch += 1

    it = batches()
    waits, syncs, steps = [], [], []
    total = a.warmup + a.iterations
    start = None
    for i in range(total):
        if i == a.warmup:
            dist.barrier()
            start = time.perf_counter()
        t0 = time.perf_counter()
        x, y = next(it)
        t1 = time.perf_counter()
        buckets.clear()
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        if a.verbose:
            print(f"rank {rank}: step {i} wait {t1 - t0:.3f} s step {t2 - t0:.3f} s", file=sys.stderr, flush=True)
        if i >= a.warmup:
            waits.append(t1 - t0)
            syncs.append(max(0.0, max(d for _, d in buckets) - max(c for c, _ in buckets)) if buckets else 0.0)
            steps.append(t2 - t0)
    elapsed = time.perf_counter() - start
    slowest = torch.tensor([elapsed], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    total_s = sum(steps)
    mine = {"rank": rank, "images_per_s": a.batch_size * a.iterations / elapsed,
            "wait_pct": 100 * sum(waits) / total_s, "sync_pct": 100 * sum(syncs) / total_s,
            "compute_pct": 100 * (total_s - sum(waits) - sum(syncs)) / total_s,
            "cpus": sorted(os.sched_getaffinity(0))}
    gathered = [None] * a.ranks
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"ranks": a.ranks, "images_per_s": a.ranks * a.batch_size * a.iterations / slowest.item(),
                       "per_rank": gathered, "torch": torch.__version__}, f)
    if a.verbose:
        print(f"rank {rank}: done", file=sys.stderr, flush=True)
    dist.destroy_process_group()
    # Out at once: a rank whose interpreter shutdown met its DataLoader's worker still running once
    # spun there at 100% of its CPU, and mp.spawn waited for it (the figures were written).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--cpus", default="", help="CPUs, one per rank in rank order (default: not pinned)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--port", type=int, default=0, help="the rendezvous port (0: a free one)")
    p.add_argument("--hang-timeout", type=float, default=150,
                   help="seconds after which a rank prints its threads' stacks and exits")
    p.add_argument("--verbose", action="store_true", help="each rank's progress on stderr")
    p.add_argument("--ddp-at-one", action="store_true",
                   help="with --ranks 1, wrap the model in DDP all the same (by default one rank trains the "
                        "model itself, as the benchmark's 1-rank job does)")
    a = p.parse_args()
    import socket
    import tempfile
    import torch.multiprocessing as mp
    port = a.port
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(run_rank, args=(a, port, out), nprocs=a.ranks, join=True)
        with open(out) as f:
            sys.stdout.write(f.read() + "\n")


if __name__ == "__main__":
    main()
