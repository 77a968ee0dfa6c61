#!/usr/bin/env bash
# compare_models.sh: the same model trained by mlbench's C++ benchmark and by
# Debian's python3-torch (same LibTorch version underneath) at equal threads,
# equal batch size and equal measurement (repeat x number iterations, the first
# --warmup observations dropped); prints items/s of each and the ratio C++/Python.
#
# Usage: studies/compare_models.sh [--build DIR] [--threads N] [--models a,b,...] [--out FILE]
# Models: toy_reg toy_lstm vae, and convnet (resnet18 at 64 px, torchvision's
# resnet18 on the Python side) and dcgan (opt-in: --models convnet,dcgan)
# (one function per model below, in bash and Python;
# add a model by adding both). Inputs are fixed in-memory batches on both sides
# (--synthetic in C++), so the figures compare framework overhead, not data.
# Needs /usr/bin/python3 with python3-torch (apt-get installed when missing).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
threads=1
models="toy_reg,toy_lstm,vae"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "compare_models.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "installing python3-torch (Debian) for the comparison..." >&2
  if ! { apt-get install -y -q python3-torch >/dev/null 2>&1 || sudo apt-get install -y -q python3-torch >/dev/null 2>&1; }; then
    echo "compare_models.sh: cannot install python3-torch (run: sudo apt-get install python3-torch)" >&2
    exit 1
  fi
fi

# Per model: the C++ command line (workload flags) and the Python settings.
# Keep both sides' batch size, repeat, number and warm-up equal.
cxx_args() {
  case "$1" in
    toy_reg)  echo "--batch-size 256 --repeat 12 --number 100 --warmup 2" ;;
    toy_lstm) echo "--batch-size 1 --repeat 8 --number 3 --warmup 1" ;;
    vae)      echo "--batch-size 128 --repeat 6 --number 5 --warmup 1" ;;
    convnet)  echo "--batch-size 16 --repeat 6 --number 2 --warmup 1 --image-size 64 --classes 1000" ;;
    dcgan)    echo "--batch-size 32 --repeat 6 --number 2 --warmup 1" ;;
    *) echo "compare_models.sh: unknown model '$1' (toy_reg, toy_lstm, vae, convnet, dcgan)" >&2; return 2 ;;
  esac
}
# C++-only flags that are not numbers (the Python side hard-codes the same choice).
cxx_extra() {
  case "$1" in
    convnet) echo "--arch resnet18" ;;
    *) echo "" ;;
  esac
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cxx_rate() {  # model -> items/s from the C++ report
  local model=$1 args
  args="$(cxx_args "$model") $(cxx_extra "$model")"
  [[ -x "$build/benchmarks/$model" ]] || { echo "compare_models.sh: $build/benchmarks/$model not built" >&2; return 1; }
  mkdir -p "$tmp/$model"
  # shellcheck disable=SC2086
  "$build/benchmarks/$model" $args --synthetic --no-cuda --cpu-cores "$threads" --seed 1 --report "$tmp/$model" >"$tmp/$model.log" 2>&1 \
    || { echo "compare_models.sh: $model failed, see its log:" >&2; tail -5 "$tmp/$model.log" >&2; return 1; }
  "$py" -c 'import json,sys,glob; print(json.load(open(glob.glob(sys.argv[1]+"/*.json")[0]))["train_item"]["avg"])' "$tmp/$model"
}

py_rate() {  # model -> items/s of the same model in Python
  "$py" - "$1" "$threads" $(cxx_args "$1") <<'PYEOF'
import sys, time, torch
import torch.nn as nn
import torch.nn.functional as F

model_name, threads = sys.argv[1], int(sys.argv[2])
flags = dict(zip(sys.argv[3::2], map(int, sys.argv[4::2])))
bs, repeat, number, warmup = flags["--batch-size"], flags["--repeat"], flags["--number"], flags["--warmup"]
torch.set_num_threads(threads)
torch.manual_seed(1)

def toy_reg():
    degree = 4
    x = torch.randn(bs)
    x = torch.stack([x ** i for i in range(1, degree + 1)], 1)
    y = x @ (torch.randn(degree, 1) * 5) + torch.randn(1) * 5
    model = nn.Linear(degree, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def step():
        opt.zero_grad()
        loss = F.smooth_l1_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step

def toy_lstm():
    class Sequence(nn.Module):  # PyTorch's time_sequence_prediction
        def __init__(self):
            super().__init__()
            self.lstm1, self.lstm2, self.linear = nn.LSTMCell(1, 51), nn.LSTMCell(51, 51), nn.Linear(51, 1)
        def forward(self, input):
            h = torch.zeros(input.size(0), 51); c = torch.zeros_like(h)
            h2 = torch.zeros_like(h); c2 = torch.zeros_like(h)
            outputs = []
            for x in input.chunk(input.size(1), dim=1):
                h, c = self.lstm1(x, (h, c))
                h2, c2 = self.lstm2(h, (h2, c2))
                outputs.append(self.linear(h2))
            return torch.stack(outputs, 1).squeeze(2)
    t = torch.arange(1000, dtype=torch.float64).unsqueeze(0) + torch.randint(-80, 80, (bs, 1))
    data = torch.sin(t / 20).float()
    inp, target = data[:, :-1], data[:, 1:]
    model = Sequence()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    def step():
        opt.zero_grad()
        loss = F.mse_loss(model(inp), target)
        loss.backward()
        opt.step()
        return loss
    return step

def vae():
    class VAE(nn.Module):  # PyTorch's VAE example
        def __init__(self):
            super().__init__()
            self.fc1, self.fc21, self.fc22 = nn.Linear(784, 400), nn.Linear(400, 20), nn.Linear(400, 20)
            self.fc3, self.fc4 = nn.Linear(20, 400), nn.Linear(400, 784)
        def forward(self, x):
            h1 = F.relu(self.fc1(x))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar
    x = torch.rand(bs, 784)
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    def step():
        opt.zero_grad()
        recon, mu, logvar = model(x)
        loss = F.binary_cross_entropy(recon, x, reduction="sum") - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss.backward()
        opt.step()
        return loss
    return step

def convnet():  # torchvision's resnet18 (as convnet --arch resnet18), SGD momentum, cross-entropy
    import torchvision
    size, classes = flags["--image-size"], flags["--classes"]
    x, y = torch.randn(bs, 3, size, size), torch.randint(classes, (bs,))
    model = torchvision.models.resnet18(num_classes=classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step

def dcgan():  # PyTorch's DCGAN example at 64x64 (nz 100, ngf = ndf = 64)
    nz, ngf, ndf = 100, 64, 64
    def init(m):
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)): nn.init.normal_(m.weight, 0.0, 0.02)
        elif isinstance(m, nn.BatchNorm2d): nn.init.normal_(m.weight, 1.0, 0.02); nn.init.zeros_(m.bias)
    G = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())
    D = nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    G.apply(init); D.apply(init)
    real = torch.rand(bs, 3, 64, 64) * 2 - 1
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    ones, zeros = torch.ones(bs), torch.zeros(bs)
    def step():
        D.zero_grad()
        err_real = F.binary_cross_entropy(D(real).view(-1), ones); err_real.backward()
        fake = G(torch.randn(bs, nz, 1, 1))
        err_fake = F.binary_cross_entropy(D(fake.detach()).view(-1), zeros); err_fake.backward()
        opt_d.step()
        G.zero_grad()
        err_g = F.binary_cross_entropy(D(fake).view(-1), ones); err_g.backward()
        opt_g.step()
        return (err_real + err_fake + err_g).detach()
    return step

step = {"toy_reg": toy_reg, "toy_lstm": toy_lstm, "vae": vae, "convnet": convnet, "dcgan": dcgan}[model_name]()
times = []
for r in range(repeat):
    t0 = time.perf_counter()
    losses = [step() for _ in range(number)]
    times.append(time.perf_counter() - t0)
    assert all(torch.isfinite(l) for l in losses)
kept = times[warmup:]
print(bs * number / (sum(kept) / len(kept)))
PYEOF
}

IFS=, read -r -a list <<<"$models"
printf '%-10s %8s %14s %14s %8s\n' model threads "C++ items/s" "Python items/s" ratio
json="["
for m in "${list[@]}"; do
  cxx_args "$m" >/dev/null || exit 2
  c=$(cxx_rate "$m")
  p=$(py_rate "$m")
  ratio=$("$py" -c "print(f'{$c/$p:.2f}')")
  printf '%-10s %8s %14.1f %14.1f %8s\n' "$m" "$threads" "$c" "$p" "$ratio"
  json+="$([[ $json == "[" ]] || echo ,){\"model\":\"$m\",\"threads\":$threads,\"cxx_items_per_s\":$c,\"python_items_per_s\":$p,\"ratio\":$ratio}"
done
json+="]"
if [[ -n "$out" ]]; then
  printf '%s\n' "$json" >"$out.tmp.$$" && mv "$out.tmp.$$" "$out"
fi
