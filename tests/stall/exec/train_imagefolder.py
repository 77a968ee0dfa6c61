"""A small PyTorch training script, as a user writes one (tests/stall/exec_e2e_test.cc and
docs/stall.md): an ImageFolder (torchvision) read by a DataLoader, images cropped to 32x32, a
small CNN, SGD. Nothing in it knows about mlbench unless --wrap is given, which adds the probe's
one line. Usage: train_imagefolder.py DIR [--batch-size 8] [--workers 1] [--epochs 100] [--wrap]
[--size 32] [--model small|resnet18] (resnet18: torchvision's, untrained, as a public ImageNet
script trains it)."""

import argparse

import torch
import torch.nn as nn
import torchvision
import torchvision.transforms as T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--wrap", action="store_true", help="probe the loader with mlbench_probe.wrap")
    ap.add_argument("--model", choices=["small", "resnet18"], default="small")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = torchvision.datasets.ImageFolder(args.data, transform=tf)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, drop_last=True,
                                         persistent_workers=args.workers > 0)
    if args.wrap:
        import mlbench_probe
        loader = mlbench_probe.wrap(loader, name="train")
    if args.model == "resnet18":
        model = torchvision.models.resnet18(num_classes=len(data.classes))
    else:
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(32, len(data.classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for images, labels in loader:
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
