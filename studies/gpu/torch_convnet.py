#!/usr/bin/env python3
"""PyTorch's own pipeline beside mlbench's convnet, for the GPU comparison of
docs/performance.md, "On a GPU" (studies/gpu/session.sh): torchvision's ResNet trained with
SGD (momentum 0.9, weight decay 1e-4) and cross-entropy, fp16 autocast with
GradScaler (as convnet_fp16), on an ImageFolder read by torch.utils.data's
DataLoader (RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize;
pin_memory) or, with --synthetic, on one batch made once on the GPU. With
--decode gpu, the peer a user would write to decode on the GPU: the DataLoader's
workers only read each file (torchvision.io.read_file), the main process decodes
the batch with torchvision.io.decode_jpeg(device='cuda') (nvJPEG) and applies
RandomResizedCrop and RandomHorizontalFlip (transforms.v2) to each image on the
GPU, then normalises the stacked batch there.

Prints one JSON line: {"mode", "images_per_s", "iterations", "seconds", ...}.
The timed iterations follow --warmup untimed ones; the GPU is synchronised at
both edges of the timed region only (GradScaler reads its overflow flag every
step, as mlbench's loss scaler does).
"""
import argparse
import json
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="ImageFolder root (train/)")
    p.add_argument("--synthetic", action="store_true", help="one batch made once on the GPU")
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--warmup", type=int, default=10, help="untimed iterations first")
    p.add_argument("--iterations", type=int, default=40, help="timed iterations")
    p.add_argument("--no-half", action="store_true", help="fp32 instead of fp16 autocast")
    p.add_argument("--decode", choices=["cpu", "gpu"], default="cpu",
                   help="gpu: the workers read the files; decode_jpeg(device='cuda') and GPU transforms")
    a = p.parse_args()
    if not a.synthetic and not a.data:
        p.error("--data or --synthetic")

    import torch
    import torchvision
    from torchvision import transforms

    dev = torch.device("cuda")
    model = getattr(torchvision.models, a.arch)(num_classes=a.classes).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=not a.no_half)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.float16, enabled=not a.no_half):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    if a.synthetic:
        x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=dev)
        y = torch.randint(a.classes, (a.batch_size,), device=dev)
        batches = iter(lambda: (x, y), None)
    elif a.decode == "gpu":
        from torchvision.io import decode_jpeg, ImageReadMode
        from torchvision.transforms import v2

        def read_bytes(path):  # bytes cross the worker's pipe; 256 small tensors a batch would each need a shared fd
            with open(path, "rb") as f:
                return f.read()
        ds = torchvision.datasets.ImageFolder(a.data, loader=read_bytes)
        need = (a.warmup + a.iterations) * a.batch_size
        if len(ds) < need:
            sys.exit(f"torch_convnet.py: {a.data} has {len(ds)} images, fewer than the {need} the run reads")
        loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                             drop_last=True, collate_fn=lambda b: ([x for x, _ in b],
                                                                                  torch.tensor([y for _, y in b])),
                                             prefetch_factor=2 if a.workers > 0 else None)
        aug = v2.Compose([v2.RandomResizedCrop(a.image_size, antialias=True), v2.RandomHorizontalFlip()])
        mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1) * 255
        std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1) * 255

        def on_gpu():
            for data, y in loader:
                data = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in data]
                imgs = decode_jpeg(data, mode=ImageReadMode.RGB, device=dev)
                x = torch.stack([aug(i) for i in imgs]).float()
                yield (x - mean) / std, y.to(dev, non_blocking=True)
        batches = on_gpu()
    else:
        tf = transforms.Compose([
            transforms.RandomResizedCrop(a.image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])
        ds = torchvision.datasets.ImageFolder(a.data, tf)
        need = (a.warmup + a.iterations) * a.batch_size
        if len(ds) < need:
            sys.exit(f"torch_convnet.py: {a.data} has {len(ds)} images, fewer than the {need} the run reads")
        loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                             pin_memory=True, drop_last=True, persistent_workers=False,
                                             prefetch_factor=2 if a.workers > 0 else None)

        def on_gpu():
            for x, y in loader:
                yield x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        batches = on_gpu()

    for _ in range(a.warmup):
        step(*next(batches))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.iterations):
        loss = step(*next(batches))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    print(json.dumps({"mode": "synthetic" if a.synthetic else "real", "arch": a.arch, "batch_size": a.batch_size,
                      "workers": a.workers, "decode": a.decode, "iterations": a.iterations, "seconds": seconds,
                      "images_per_s": a.iterations * a.batch_size / seconds, "loss": float(loss),
                      "torch": torch.__version__, "torchvision": torchvision.__version__,
                      "gpu": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
