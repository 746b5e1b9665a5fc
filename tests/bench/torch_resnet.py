#!/usr/bin/env python3
"""torch_resnet.py -- the PyTorch peer of the small ResNet on Fashion-MNIST
(Debian's python3-torch): the same model, initialisation family,
regularisation, batch norm and optimizer as Keras would train, so hetps's
accuracy and step speed can be set beside PyTorch's.

    torch_resnet.py [--seeds 42] [--epochs 3] [--batch 64] [--replicas 2]
                    [--threads 2] [--data DIR]
    torch_resnet.py --speed --threads 1 [--steps 100] [--batch 64]

The model (Keras's words): Conv2D(16, 3x3, same) -> BatchNormalization ->
ReLU, then three stages of one residual block each, 16, 32 and 64
filters (the second and third with stride 2 and a projection shortcut:
Conv2D(1x1, stride 2) -> BatchNormalization), each block
Conv2D(3x3) -> BN -> ReLU -> Conv2D(3x3) -> BN, Add, ReLU; then
GlobalAveragePooling2D -> Dense(10, softmax). Keras's choices throughout:

  * "same" padding as Keras pads it: with stride 2 the extra pixel goes
    bottom and right (PyTorch's padding=1 pads both sides);
  * HeNormal kernels (a normal truncated at two standard deviations, its
    stddev sqrt(2 / fan_in) / 0.87962566103423978), Glorot-uniform for the
    dense kernel, zero biases; convolutions without bias before BN;
  * L2(1e-4) on every kernel, added to the loss as Keras adds it
    (1e-4 * sum(w^2));
  * batch norm as Keras computes it: momentum 0.99 (PyTorch's 0.01),
    epsilon 1e-3, the batch's biased variance both to normalise and to move
    the moving variance (PyTorch moves it with the unbiased one). With
    --replicas R the batch is normalised in R equal parts, each by its own
    moments, as R mirrored replicas (or R sync workers) do, and the moving
    statistics move once by the moments of the whole batch;
  * Adam(1e-3, 0.9, 0.999, epsilon 1e-7); sparse categorical cross-entropy
    averaged over the batch; images scaled to [0, 1], reshuffled each
    epoch from the seed, the last shorter batch kept.

Prints one line per epoch and "torch seed S: val_accuracy A". --speed
times the training step on random data instead and prints
"torch resnet: N samples/s (batch B, T threads)".
"""
import argparse
import math
import sys
import time


# The data as torch_train.py reads it (the same folder).
from torch_train import load  # noqa: E402


def build(torch, nn, gen, replicas):
    F = nn.functional

    def he_normal_(w, fan_in):
        std = math.sqrt(2.0 / fan_in) / 0.87962566103423978
        with torch.no_grad():
            t = torch.empty(w.shape)
            # a normal truncated at two standard deviations: redraw outside
            t.normal_(0.0, 1.0, generator=gen)
            bad = t.abs() > 2
            while bad.any():
                t[bad] = torch.empty(int(bad.sum())).normal_(0.0, 1.0, generator=gen)
                bad = t.abs() > 2
            w.copy_(t * std)

    class SameConv(nn.Module):
        """Conv2D without bias, Keras's "same" padding, HeNormal."""

        def __init__(self, cin, cout, k, stride):
            super().__init__()
            self.k, self.stride = k, stride
            self.conv = nn.Conv2d(cin, cout, k, stride, bias=False)
            he_normal_(self.conv.weight, cin * k * k)

        def forward(self, x):
            h = x.shape[2]
            out = -(-h // self.stride)
            pad = max((out - 1) * self.stride + self.k - h, 0)
            lo = pad // 2
            return self.conv(F.pad(x, (lo, pad - lo, lo, pad - lo)))

    class KerasBN(nn.Module):
        """BatchNormalization(momentum=0.99, epsilon=1e-3), Keras's way."""

        def __init__(self, c):
            super().__init__()
            self.gamma = nn.Parameter(torch.ones(c))
            self.beta = nn.Parameter(torch.zeros(c))
            self.register_buffer("moving_mean", torch.zeros(c))
            self.register_buffer("moving_var", torch.ones(c))

        def forward(self, x):
            g = self.gamma.view(1, -1, 1, 1)
            b = self.beta.view(1, -1, 1, 1)
            if not self.training:
                mm = self.moving_mean.view(1, -1, 1, 1)
                mv = self.moving_var.view(1, -1, 1, 1)
                return (x - mm) * torch.rsqrt(mv + 1e-3) * g + b
            parts = x.chunk(replicas, 0) if replicas > 1 else (x,)
            outs = []
            for p in parts:
                mean = p.mean((0, 2, 3), keepdim=True)
                var = ((p - mean) ** 2).mean((0, 2, 3), keepdim=True)
                outs.append((p - mean) * torch.rsqrt(var + 1e-3) * g + b)
            with torch.no_grad():
                mean = x.mean((0, 2, 3))
                var = ((x - mean.view(1, -1, 1, 1)) ** 2).mean((0, 2, 3))
                self.moving_mean.mul_(0.99).add_(mean, alpha=0.01)
                self.moving_var.mul_(0.99).add_(var, alpha=0.01)
            return torch.cat(outs, 0)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1, self.b1 = SameConv(cin, cout, 3, stride), KerasBN(cout)
            self.c2, self.b2 = SameConv(cout, cout, 3, 1), KerasBN(cout)
            self.proj = None
            if stride != 1 or cin != cout:
                self.proj = SameConv(cin, cout, 1, stride)
                self.pb = KerasBN(cout)

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            s = x if self.proj is None else self.pb(self.proj(x))
            return F.relu(y + s)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = SameConv(1, 16, 3, 1), KerasBN(16)
            self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2),
                                        Block(32, 64, 2))
            self.dense = nn.Linear(64, 10)
            limit = math.sqrt(6.0 / (64 + 10))
            with torch.no_grad():
                self.dense.weight.copy_(torch.rand((10, 64), generator=gen) *
                                        (2 * limit) - limit)
                self.dense.bias.zero_()

        def forward(self, x):
            x = self.blocks(F.relu(self.bn(self.stem(x))))
            return self.dense(x.mean((2, 3)))

        def l2(self):
            return 1e-4 * sum((m.conv.weight ** 2).sum()
                              for m in self.modules() if isinstance(m, SameConv))

    return Net()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print("torch resnet: skipped (python3-torch not installed)")
        return 0
    torch.set_num_threads(args.threads)
    loss_fn = nn.CrossEntropyLoss()
    if args.speed:
        gen = torch.Generator().manual_seed(1)
        model = build(torch, nn, gen, 1)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        x = torch.rand((args.batch, 1, 28, 28), generator=gen)
        y = torch.randint(0, 10, (args.batch,), generator=gen)
        for i in range(args.steps + 10):
            if i == 10:
                t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            (loss_fn(model(x), y) + model.l2()).backward()
            opt.step()
        dt = time.perf_counter() - t0
        print("torch resnet: %.0f samples/s (batch %d, %d threads)"
              % (args.steps * args.batch / dt, args.batch,
                 torch.get_num_threads()))
        return 0
    xtr, ytr = load(torch, args.data, "train")
    xte, yte = load(torch, args.data, "t10k")
    for seed in [int(s) for s in args.seeds.split(",")]:
        gen = torch.Generator().manual_seed(seed)
        model = build(torch, nn, gen, args.replicas)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        n = xtr.shape[0]
        acc = 0.0
        for epoch in range(args.epochs):
            model.train()
            order = torch.randperm(n, generator=gen)
            for i in range(0, n, args.batch):
                idx = order[i:i + args.batch]
                opt.zero_grad(set_to_none=True)
                (loss_fn(model(xtr[idx]), ytr[idx]) + model.l2()).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                logits = torch.cat([model(xte[i:i + 1000])
                                    for i in range(0, xte.shape[0], 1000)])
                val_loss = loss_fn(logits, yte).item()
                acc = (logits.argmax(1) == yte).float().mean().item()
            print("torch seed %d: Epoch %d/%d - val_loss: %.4f - "
                  "val_accuracy: %.4f" % (seed, epoch + 1, args.epochs,
                                          val_loss, acc), flush=True)
        print("torch seed %d: val_accuracy %.4f" % (seed, acc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
