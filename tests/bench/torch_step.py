#!/usr/bin/env python3
"""torch_step.py -- the peer of tests/bench/step.c: the same model, batch,
optimizer and thread count in PyTorch (Debian's python3-torch), timed over
the same number of training steps on the same Fashion-MNIST images.

Prints one line: "torch: STEPS steps batch B threads T: S samples/s".
"""
import gzip
import struct
import sys
import time

import numpy as np
import torch
from torch import nn


def load_images(path, limit):
    with gzip.open(path, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803, path
        n = min(n, limit)
        data = np.frombuffer(f.read(n * rows * cols), dtype=np.uint8)
    return data.reshape(n, 1, rows, cols).astype(np.float32) / 255.0


def load_labels(path, limit):
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        assert magic == 0x801, path
        n = min(n, limit)
        return np.frombuffer(f.read(n), dtype=np.uint8).astype(np.int64)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    data = sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    n = steps * batch
    x = torch.from_numpy(load_images(f"{data}/train-images-idx3-ubyte.gz", 60000))
    y = torch.from_numpy(load_labels(f"{data}/train-labels-idx1-ubyte.gz", 60000))
    # Keras: Conv2D(32, 3x3, relu) -> MaxPool(2) -> Flatten -> Dense(10).
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(13 * 13 * 32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999),
                           eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        lo = (i * batch) % (x.shape[0] - batch)
        xb, yb = x[lo:lo + batch], y[lo:lo + batch]
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for i in range(20):  # warm-up
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    dt = time.perf_counter() - t0
    print(f"torch: {steps} steps batch {batch} threads {threads}: "
          f"{steps * batch / dt:.1f} samples/s")
    del n


if __name__ == "__main__":
    main()
