#!/usr/bin/python3
"""The peer a user would write for a dataset over HTTP: a PyTorch Dataset whose __getitem__ GETs
the object (requests, one keep-alive Session per DataLoader worker), decodes it with PIL and
applies torchvision's RandomResizedCrop(224), flip, ToTensor and Normalize; a DataLoader with
--workers workers. Reads the same listing as mlbench (mlbench-listing.json at the URL's prefix).
Prints the images/s of --batches batches after one batch of start-up.

Usage: /usr/bin/python3 studies/lib/torch_http_loader.py URL [--workers 2] [--batch-size 32] [--batches 40]
"""
import argparse
import io
import json
import sys
import time
import urllib.parse

import requests
import torch
from PIL import Image
from torchvision import transforms


class HttpImageFolder(torch.utils.data.Dataset):
    def __init__(self, url, transform):
        self.url = url if url.endswith("/") else url + "/"
        listing = requests.get(self.url + "mlbench-listing.json", timeout=30)
        listing.raise_for_status()
        j = listing.json()
        self.objects = [(urllib.parse.quote(o[0]), o[2]) for o in j["objects"]]
        self.transform = transform
        self.session = None  # one per worker process, made there (keep-alive)

    def __len__(self):
        return len(self.objects)

    def __getitem__(self, i):
        if self.session is None:
            self.session = requests.Session()
        path, label = self.objects[i]
        r = self.session.get(self.url + path, timeout=30)
        r.raise_for_status()
        img = Image.open(io.BytesIO(r.content)).convert("RGB")
        return self.transform(img), label


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--batches", type=int, default=40)
    a = ap.parse_args()
    torch.set_num_threads(1)
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = HttpImageFolder(a.url, t)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                     drop_last=True, persistent_workers=a.workers > 0)

    def batches():
        while True:
            yield from dl

    it = batches()
    next(it)  # worker start-up and the first batch outside the timing
    t0 = time.perf_counter()
    n = 0
    for _ in range(a.batches):
        x, _ = next(it)
        n += x.shape[0]
    print(n / (time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
