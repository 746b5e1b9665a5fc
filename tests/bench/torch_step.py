#!/usr/bin/env python3
"""torch_step.py -- the peer of tests/bench/step.c: the same model, batch,
optimizer and thread count in PyTorch (Debian's python3-torch), timed over
the same number of training steps on the same Fashion-MNIST images.

    torch_step.py [STEPS [BATCH [THREADS [DATA_DIR]]]] [--nchw] [--rss]

Prints "torch: STEPS steps batch B threads T: S samples/s" and
"torch: loss first F last L" (first warm-up step, last timed step); with
--rss also "torch: peak RSS M MiB" (getrusage, like step.c --rss).

What is timed per step, like step.c: the next batch gathered from a
shuffled order of the 60000 training images into a fresh tensor (step.c's
wk_shard_batch copies too), zero_grad, forward, loss, backward, Adam step.

Fairness settings (see tests/bench/README.md for their measured effect):
  * Threads: torch.set_num_threads(T) sets only ATen's OpenMP pool. Debian's
    torch does its matrix products in OpenBLAS, whose own pool would still
    have one thread per core, so OPENBLAS_NUM_THREADS and OMP_NUM_THREADS
    are set to T before torch is imported, and the OpenBLAS count checked.
  * Layout: channels_last (NHWC) by default, the layout hetps computes in
    and the one PyTorch recommends for CNNs on CPU (oneDNN); --nchw keeps
    PyTorch's default NCHW layout, which is slower here.
  * zero_grad(set_to_none=True) (PyTorch 2's default): the gradient buffers
    are written by backward, not zeroed first, as hetps's are.
  * Memory: eager PyTorch allocates activations every step. With glibc's
    default malloc thresholds those multi-MiB blocks go back to the kernel
    and are page-faulted in again each step, which on this VM costs several
    times the compute. run.sh therefore runs this script with
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...:trim_threshold=... (the
    effect PyTorch's tuning guide gets from jemalloc/tcmalloc); that has to
    be set in the environment before Python starts, so it is not done here.
"""
import gzip
import os
import struct
import sys
import time


def parse_args(argv):
    flags = {"--nchw", "--rss"}
    nchw, rss = "--nchw" in argv, "--rss" in argv
    pos = [a for a in argv if a not in flags]
    steps = int(pos[0]) if len(pos) > 0 else 300
    batch = int(pos[1]) if len(pos) > 1 else 64
    threads = int(pos[2]) if len(pos) > 2 else 1
    data = pos[3] if len(pos) > 3 else "/usr/share/datasets/fashion-mnist"
    return steps, batch, threads, data, nchw, rss


STEPS, BATCH, THREADS, DATA, NCHW, RSS = parse_args(sys.argv[1:])
# Before torch loads OpenBLAS and libgomp: they size their pools at load.
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import ctypes  # noqa: E402
import resource  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def openblas_threads():
    """The thread count of the OpenBLAS torch loaded, or None if none."""
    with open(f"/proc/{os.getpid()}/maps") as f:
        libs = {ln.split()[-1] for ln in f if "libopenblas" in ln}
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_num_threads
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        return fn()
    return None


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
    steps, batch, threads = STEPS, BATCH, THREADS
    torch.set_num_threads(threads)
    blas = openblas_threads()
    if blas is not None and blas != threads:
        sys.exit(f"torch_step: OpenBLAS runs {blas} threads, wanted {threads}")
    torch.manual_seed(0)
    fmt = torch.contiguous_format if NCHW else torch.channels_last
    x = torch.from_numpy(load_images(f"{DATA}/train-images-idx3-ubyte.gz",
                                     60000))
    y = torch.from_numpy(load_labels(f"{DATA}/train-labels-idx1-ubyte.gz",
                                     60000))
    order = torch.randperm(x.shape[0])
    # Keras: Conv2D(32, 3x3, relu) -> MaxPool(2) -> Flatten -> Dense(10),
    # softmax fused into the loss as hetps fuses it.
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(13 * 13 * 32, 10))
    model = model.to(memory_format=fmt)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999),
                           eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    nb = x.shape[0] // batch

    def step(i):
        idx = order[(i % nb) * batch:(i % nb + 1) * batch]
        xb = x.index_select(0, idx).contiguous(memory_format=fmt)
        yb = y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.item()

    first = step(0)
    for i in range(1, 20):  # warm-up
        step(i)
    t0 = time.perf_counter()
    for i in range(20, 20 + steps):
        last = step(i)
    dt = time.perf_counter() - t0
    print(f"torch: {steps} steps batch {batch} threads {threads}: "
          f"{steps * batch / dt:.1f} samples/s")
    print(f"torch: loss first {first:.4f} last {last:.4f}")
    if RSS:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"torch: peak RSS {kib / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
