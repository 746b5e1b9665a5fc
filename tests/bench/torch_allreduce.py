"""torch_allreduce.py — the collective a parameter server competes with:
one gloo all-reduce of N float32 values (default the 20 M-parameter MLP's
20 037 642, 80 MB) between two PyTorch processes on loopback, the time of
one all-reduce, best of ITERS after a warm-up (part of `make bench`).

    python3 torch_allreduce.py [N] [ITERS] [PORT]

Prints "allreduce: N floats (B MB), 2 processes, gloo: best X ms, median
Y ms". Threads: 1 per process, as the hetps processes run.
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def worker(rank, n, iters, port, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    x = torch.ones(n, dtype=torch.float32)
    dist.all_reduce(x)                      # warm-up: connect, fault in
    times = []
    for _ in range(iters):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t)
    if rank == 0:
        q.put(times)
    dist.destroy_process_group()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20037642
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 29500 + os.getpid() % 1000
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, n, iters, port, q))
             for r in range(2)]
    for p in procs:
        p.start()
    times = q.get(timeout=600)
    for p in procs:
        p.join()
    print("allreduce: %d floats (%.1f MB), 2 processes, gloo: best %.1f ms, "
          "median %.1f ms" % (n, n * 4 / 1e6, min(times) * 1e3,
                              statistics.median(times) * 1e3))


if __name__ == "__main__":
    main()
