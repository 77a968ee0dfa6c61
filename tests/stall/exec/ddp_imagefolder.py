"""A 2-rank DDP training script over a torchvision ImageFolder, as a user writes one (pytorch/examples'
ImageNet script's shape with --multiprocessing-distributed, on the CPU over Gloo): the ranks started
by torch.multiprocessing.spawn, each reading its DistributedSampler shard through a DataLoader
(RandomResizedCrop, flip, ToTensor, Normalize), a small CNN wrapped in DistributedDataParallel.
Nothing in it knows about mlbench. Used by studies/job_whatif.sh (docs/performance.md, "Job what-if").

    python3 ddp_imagefolder.py DIR [--ranks 2] [--batch-size 16] [--workers 1] [--size 64] [--epochs 100]
"""

import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torchvision
import torchvision.transforms as T
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def worker(rank, args):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.ranks)
    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = torchvision.datasets.ImageFolder(args.data, transform=tf)
    sampler = DistributedSampler(data, num_replicas=args.ranks, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        drop_last=True, persistent_workers=args.workers > 0)
    model = DistributedDataParallel(nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, max(2, len(data.classes)))))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=100)
    args = ap.parse_args()
    args.port = int(os.environ.get("DDP_PORT", "0")) or free_port()
    mp.spawn(worker, args=(args,), nprocs=args.ranks)


if __name__ == "__main__":
    main()
