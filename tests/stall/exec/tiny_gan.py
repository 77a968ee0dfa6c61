"""A small GAN trained as a public DCGAN-style script trains one (docs/stall.md, "--exec"; the
measurement in studies/results/2026-11-29-epoch-start.md): a transposed-convolution generator and a
convolution discriminator at 64x64, torchvision's ImageFolder over photographs, one DataLoader
worker by default, batch 64, Adam. Each iteration prints its own step time as such scripts do
(`time` from the previous batch's end, `data` the part of it spent waiting for the batch), and each
epoch its wall time. Nothing in it knows about mlbench.

Usage: tiny_gan.py DIR [--epochs 5] [--batch-size 64] [--workers 1] [--persistent-workers]
[--width 8] [--quiet]"""

import argparse
import time

import torch
import torch.nn as nn
import torchvision
import torchvision.transforms as T

LATENT = 64


def generator(width):
    # LATENT x 1 x 1 -> 3 x 64 x 64, doubling the side at each layer as DCGAN's generator does.
    w = width
    return nn.Sequential(
        nn.ConvTranspose2d(LATENT, w * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(w * 8), nn.ReLU(True),
        nn.ConvTranspose2d(w * 8, w * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 4), nn.ReLU(True),
        nn.ConvTranspose2d(w * 4, w * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 2), nn.ReLU(True),
        nn.ConvTranspose2d(w * 2, w, 4, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(True),
        nn.ConvTranspose2d(w, 3, 4, 2, 1, bias=False), nn.Tanh())


def discriminator(width):
    # 3 x 64 x 64 -> one logit, halving the side at each layer.
    w = width
    return nn.Sequential(
        nn.Conv2d(3, w, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(w, w * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(w * 2, w * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(w * 4, w * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(w * 8), nn.LeakyReLU(0.2, True),
        nn.Conv2d(w * 8, 1, 4, 1, 0, bias=False), nn.Flatten())


def init_weights(m):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--persistent-workers", action="store_true")
    ap.add_argument("--width", type=int, default=8, help="channels of the first/last layer (DCGAN: 64)")
    ap.add_argument("--quiet", action="store_true", help="only the epoch lines")
    args = ap.parse_args()
    torch.manual_seed(0)
    tf = T.Compose([T.Resize(64), T.CenterCrop(64), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    data = torchvision.datasets.ImageFolder(args.data, transform=tf)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                         num_workers=args.workers,
                                         persistent_workers=args.persistent_workers and args.workers > 0)
    net_g, net_d = generator(args.width), discriminator(args.width)
    net_g.apply(init_weights)
    net_d.apply(init_weights)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    loss_fn = nn.BCEWithLogitsLoss()
    for epoch in range(args.epochs):
        epoch_start = end = time.perf_counter()
        for i, (real, _) in enumerate(loader):
            data_time = time.perf_counter() - end
            n = real.size(0)
            ones, zeros = torch.ones(n, 1), torch.zeros(n, 1)
            # Discriminator: real images up, generated ones down.
            net_d.zero_grad()
            fake = net_g(torch.randn(n, LATENT, 1, 1))
            loss_d = loss_fn(net_d(real), ones) + loss_fn(net_d(fake.detach()), zeros)
            loss_d.backward()
            opt_d.step()
            # Generator: make the discriminator call its images real.
            net_g.zero_grad()
            loss_g = loss_fn(net_d(fake), ones)
            loss_g.backward()
            opt_g.step()
            now = time.perf_counter()
            if not args.quiet:
                print(f"[{epoch}/{args.epochs}][{i}/{len(loader)}] Loss_D: {loss_d.item():.4f} "
                      f"Loss_G: {loss_g.item():.4f} time {1000 * (now - end):.1f} ms "
                      f"(data {1000 * data_time:.1f} ms)", flush=True)
            end = now
        took = time.perf_counter() - epoch_start
        print(f"epoch {epoch}: {took:.3f} s, {len(loader) * args.batch_size / took:.1f} samples/s", flush=True)


if __name__ == "__main__":
    main()
