#!/usr/bin/env python3
"""torch_train.py -- the accuracy peer of `make run`: the reference job
trained to the end in PyTorch (Debian's python3-torch), so hetps's test
accuracy can be set beside PyTorch's for the same model and settings.

    torch_train.py [--seeds 42,1,2] [--epochs 10] [--batch 64]
                   [--threads 2] [--data DIR] [--optimizer adam|adagrad]
                   [--lr LR]

The model of deploy/models/fashion_cnn.json: Conv2D(32, 3x3, relu) ->
MaxPool(2x2) -> Flatten -> Dense(10, softmax); Keras's initialisers
(Glorot-uniform kernels, zero biases); Adam(lr 1e-3, beta 0.9/0.999,
epsilon 1e-7, PyTorch's form of the update; or --optimizer adagrad:
PyTorch's Adagrad with Keras's initial_accumulator_value 0.1 and epsilon
1e-7, lr 1e-3 unless --lr says); sparse categorical
cross-entropy averaged over the batch; the 60000 training images scaled
to [0, 1] and reshuffled every epoch from the seed; the last, shorter
batch of an epoch kept (as Keras's fit does). Prints one line per epoch
and, per seed, "torch seed S: val_accuracy A (after epoch E)"; with
several seeds also their mean and range.
"""
import argparse
import gzip
import os
import struct
import sys


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    dims = [struct.unpack(">I", data[4 + 4 * i:8 + 4 * i])[0]
            for i in range(magic & 0xFF)]
    return dims, data[4 + 4 * len(dims):]


def load(torch, data_dir, prefix):
    dims, img = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    _, lab = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    x = torch.frombuffer(bytearray(img), dtype=torch.uint8).float().div_(255.0)
    x = x.view(dims[0], 1, dims[1], dims[2])
    y = torch.frombuffer(bytearray(lab), dtype=torch.uint8).long()
    return x, y


def glorot_(torch, w, fan_in, fan_out, gen):
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    with torch.no_grad():
        w.copy_(torch.rand(w.shape, generator=gen) * (2 * limit) - limit)


def train(torch, nn, seed, args, xtr, ytr, xte, yte):
    gen = torch.Generator().manual_seed(seed)
    conv = nn.Conv2d(1, 32, 3)
    dense = nn.Linear(32 * 13 * 13, 10)
    glorot_(torch, conv.weight, 1 * 9, 32 * 9, gen)
    glorot_(torch, dense.weight, 32 * 13 * 13, 10, gen)
    nn.init.zeros_(conv.bias)
    nn.init.zeros_(dense.bias)
    model = nn.Sequential(conv, nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), dense)
    if args.optimizer == "adagrad":
        opt = torch.optim.Adagrad(model.parameters(), lr=args.lr,
                                  initial_accumulator_value=0.1, eps=1e-7)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=args.lr,
                               betas=(0.9, 0.999), eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    n = xtr.shape[0]
    acc = 0.0
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, args.batch):
            idx = order[i:i + args.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(xte)
            val_loss = loss_fn(logits, yte).item()
            acc = (logits.argmax(1) == yte).float().mean().item()
        print("torch seed %d: Epoch %d/%d - val_loss: %.4f - val_accuracy: %.4f"
              % (seed, epoch + 1, args.epochs, val_loss, acc), flush=True)
    return acc


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="42")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--optimizer", choices=("adam", "adagrad"), default="adam")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        sys.exit("torch_train.py: --seeds '%s' is not a comma-separated list "
                 "of integers" % args.seeds)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    import torch
    import torch.nn as nn
    torch.set_num_threads(args.threads)
    xtr, ytr = load(torch, args.data, "train")
    xte, yte = load(torch, args.data, "t10k")
    accs = []
    for s in seeds:
        a = train(torch, nn, s, args, xtr, ytr, xte, yte)
        accs.append(a)
        print("torch seed %d: val_accuracy %.4f (after epoch %d)"
              % (s, a, args.epochs), flush=True)
    if len(accs) > 1:
        print("torch: %d seeds: mean val_accuracy %.4f (%.4f..%.4f)"
              % (len(accs), sum(accs) / len(accs), min(accs), max(accs)))


if __name__ == "__main__":
    main()
