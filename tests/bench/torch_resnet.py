#!/usr/bin/env python3
"""torch_resnet.py -- the PyTorch peer of the small ResNet on Fashion-MNIST
(Debian's python3-torch): the same model, initialisation family,
regularisation, batch norm and optimizer as Keras would train, so hetps's
accuracy and step speed can be set beside PyTorch's.

    torch_resnet.py [--seeds 42] [--epochs 3] [--batch 64] [--replicas 2]
                    [--threads 2] [--lr 1e-3] [--decay-steps N]
                    [--order torch|hetps] [--data DIR]
    torch_resnet.py --speed --threads 1 [--steps 100] [--batch 64]
    torch_resnet.py --seeds S --init-out DIR
    torch_resnet.py --seeds S --init-from DIR --order hetps --steps N
                    [--optimizer adam|sgd] [--double] --weights-out DIR

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
  * Keras 3's Adam (beta 0.9, 0.999, epsilon 1e-7 outside the root and
    before the bias correction: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t),
    p -= lr_t m / (sqrt(v) + eps), where PyTorch's Adam adds epsilon to
    the bias-corrected root), its rate Keras's CosineDecay from --lr
    (1e-3) to 0 over --decay-steps (the run's steps by default: epochs x
    ceil(60000 / batch)), no warm-up, evaluated at the optimizer's
    iteration count before the step as Keras and hetps's shards do;
    sparse categorical cross-entropy averaged over the batch; images
    scaled to [0, 1], the last shorter batch kept. Each epoch's order is
    PyTorch's randperm from the seed, or with --order hetps the one
    hetps's sync workers walk for that seed (worker/data.c's Fisher-Yates
    over splitmix64), so both sides see the same batches.

Prints one line per epoch and "torch seed S: val_accuracy A". --speed
times the training step on random data instead (PyTorch's own Adam, a
constant rate) and prints "torch resnet: N samples/s (batch B, T
threads)". For tests/bench/resnet_steps.sh: --init-out writes the seed's
initial weights as Keras-layout .npy files (hetps's names: stem/kernel,
stem_bn/gamma, ...) and stops; --init-from starts from such files, --steps
stops after N steps (printing each step's loss and rate),
--optimizer sgd takes plain SGD steps at the same schedule, --double
computes in float64, and --weights-out writes the weights at the end.
"""
import argparse
import math
import os
import struct
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


def keras_cosine(lr, decay_steps, alpha, it):
    """Keras's CosineDecay (no warm-up) at iteration `it`: the optimizer's
    iteration count before the step (Keras evaluates the schedule at
    `optimizer.iterations`, then increments it; hetps's shards at the
    updates applied before this one), float32 as Keras computes it."""
    f32 = struct.Struct("f")

    def r(x):
        return f32.unpack(f32.pack(x))[0]
    frac = r(min(it, decay_steps) / decay_steps)
    cd = r(0.5 * (1.0 + math.cos(r(math.pi) * frac)))
    return r(lr * r(r((1.0 - alpha) * cd) + alpha))


class KerasAdam:
    """Keras 3's Adam, step for step: m += (g - m)(1 - b1),
    v += (g^2 - v)(1 - b2), t = iterations + 1,
    lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), p -= lr_t m / (sqrt(v) + eps)
    (epsilon outside the root and before the bias correction, where
    PyTorch's Adam puts it after), lr from the schedule at `iterations`;
    with sgd, plain SGD steps p -= lr g at the same rates instead."""

    def __init__(self, torch, params, lr_at, b1=0.9, b2=0.999, eps=1e-7,
                 sgd=False):
        self.torch, self.params, self.lr_at = torch, list(params), lr_at
        self.sgd = sgd
        self.b1, self.b2, self.eps, self.it = b1, b2, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        lr = self.lr_at(self.it)
        t = self.it + 1
        lr_t = lr * math.sqrt(1.0 - self.b2 ** t) / (1.0 - self.b1 ** t)
        with self.torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v):
                g = p.grad
                if self.sgd:
                    p.sub_(g * lr)
                    continue
                m.add_((g - m) * (1.0 - self.b1))
                v.add_((g * g - v) * (1.0 - self.b2))
                p.sub_(m * lr_t / (v.sqrt() + self.eps))
        self.it += 1
        return lr


def hetps_order(n, seed, epoch):
    """The permutation hetps's sync workers walk in epoch `epoch` (one
    shard of the whole set, worker/data.c: Fisher-Yates driven by
    splitmix64 from mix64(seed ^ mix64(epoch * gamma ^ mix64(1))))."""
    M = (1 << 64) - 1
    G = 0x9E3779B97F4A7C15

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)
    state = mix(seed ^ mix(((epoch * G) & M) ^ mix(1)))
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        thr = ((1 << 64) - bound) % bound
        while True:
            state = (state + G) & M
            r = mix(state)
            if r >= thr:
                break
        j = r % bound
        order[i], order[j] = order[j], order[i]
    return order


def variables(model):
    """(hetps/Keras name, tensor, to Keras layout, from Keras layout) of
    every variable, in the names of deploy/models/fashion_resnet_bn.json."""
    out = []

    def conv(name, c):
        w = c.conv.weight
        out.append((name + "/kernel", w, lambda t: t.permute(2, 3, 1, 0),
                    lambda a: a.permute(3, 2, 0, 1)))

    def bn(name, b):
        for k, t in (("gamma", b.gamma), ("beta", b.beta),
                     ("moving_mean", b.moving_mean),
                     ("moving_variance", b.moving_var)):
            out.append((name + "/" + k, t, lambda x: x, lambda a: a))
    conv("stem", model.stem)
    bn("stem_bn", model.bn)
    for s, blk in enumerate(model.blocks, 1):
        conv("res%d_a" % s, blk.c1)
        bn("res%d_a_bn" % s, blk.b1)
        conv("res%d_b" % s, blk.c2)
        bn("res%d_b_bn" % s, blk.b2)
        if blk.proj is not None:
            conv("res%d_proj" % s, blk.proj)
            bn("res%d_proj_bn" % s, blk.pb)
    out.append(("dense/kernel", model.dense.weight, lambda t: t.t(),
                lambda a: a.t()))
    out.append(("dense/bias", model.dense.bias, lambda t: t, lambda a: a))
    return out


def save_npy(torch, model, d):
    import numpy as np
    for name, t, to_k, _ in variables(model):
        os.makedirs(os.path.join(d, os.path.dirname(name)), exist_ok=True)
        np.save(os.path.join(d, name + ".npy"),
                np.ascontiguousarray(to_k(t.detach()).numpy().astype(np.float32)))


def load_npy(torch, model, d):
    import numpy as np
    with torch.no_grad():
        for name, t, _, from_k in variables(model):
            a = torch.from_numpy(np.load(os.path.join(d, name + ".npy")))
            t.copy_(from_k(a))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    ap.add_argument("--decay-steps", type=int, default=0)
    ap.add_argument("--order", choices=("torch", "hetps"), default="torch")
    ap.add_argument("--init-out")
    ap.add_argument("--init-from")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--weights-out")
    ap.add_argument("--double", action="store_true")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--speed", action="store_true")
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
        steps = args.steps or 100
        x = torch.rand((args.batch, 1, 28, 28), generator=gen)
        y = torch.randint(0, 10, (args.batch,), generator=gen)
        for i in range(steps + 10):
            if i == 10:
                t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            (loss_fn(model(x), y) + model.l2()).backward()
            opt.step()
        dt = time.perf_counter() - t0
        print("torch resnet: %.0f samples/s (batch %d, %d threads)"
              % (steps * args.batch / dt, args.batch,
                 torch.get_num_threads()))
        return 0
    xtr, ytr = load(torch, args.data, "train")
    xte, yte = load(torch, args.data, "t10k")
    n = xtr.shape[0]
    steps_per_epoch = -(-n // args.batch)
    decay_steps = args.decay_steps or args.epochs * steps_per_epoch
    for seed in [int(s) for s in args.seeds.split(",")]:
        gen = torch.Generator().manual_seed(seed)
        model = build(torch, nn, gen, args.replicas)
        if args.init_out:
            save_npy(torch, model, args.init_out)
            print("torch seed %d: initial weights in %s" % (seed, args.init_out))
            return 0
        if args.init_from:
            load_npy(torch, model, args.init_from)
        if args.double:
            model.double()
            xtr, xte = xtr.double(), xte.double()
        opt = KerasAdam(torch, model.parameters(),
                        lambda it: keras_cosine(args.lr, decay_steps, 0.0, it),
                        sgd=args.optimizer == "sgd")
        acc = 0.0
        step = 0
        for epoch in range(args.epochs):
            model.train()
            if args.order == "hetps":
                order = torch.tensor(hetps_order(n, seed, epoch))
            else:
                order = torch.randperm(n, generator=gen)
            for i in range(0, n, args.batch):
                if args.steps and step == args.steps:
                    break
                idx = order[i:i + args.batch]
                opt.zero_grad()
                loss = loss_fn(model(xtr[idx]), ytr[idx]) + model.l2()
                loss.backward()
                lr = opt.step()
                step += 1
                if args.steps:
                    print("torch seed %d: step %d loss %.6f lr %.6g"
                          % (seed, step, loss.item(), lr))
            if args.steps and step == args.steps:
                break
            model.eval()
            with torch.no_grad():
                logits = torch.cat([model(xte[i:i + 1000])
                                    for i in range(0, xte.shape[0], 1000)])
                val_loss = loss_fn(logits, yte).item()
                acc = (logits.argmax(1) == yte).float().mean().item()
            print("torch seed %d: Epoch %d/%d - val_loss: %.4f - "
                  "val_accuracy: %.4f" % (seed, epoch + 1, args.epochs,
                                          val_loss, acc), flush=True)
        if args.weights_out:
            save_npy(torch, model, args.weights_out)
        if not args.steps:
            print("torch seed %d: val_accuracy %.4f" % (seed, acc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
