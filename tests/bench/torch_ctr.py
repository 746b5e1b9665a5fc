#!/usr/bin/env python3
"""torch_ctr.py -- the PyTorch peer of hetps's click-through model (issue
#40): the same Criteo-format files, read with the same row ids as
worker/data_ctr.h, trained one epoch in PyTorch (Debian's python3-torch).

    torch_ctr.py [--input-dim D] [--batch 512] [--epochs 1] [--lr 0.05]
                 [--optimizer adagrad|sgd] [--threads 1] [--seed 42]
                 TRAIN.tsv TEST.tsv
    torch_ctr.py --dump [--input-dim D] FILE    (what the reader makes of
                 FILE, in ctrids's format: tests/integration/ctr_ids.sh)

Reading (data_ctr.h's rule, written again in numpy): label 0/1; the 13
integer fields as log(1 + x) for x >= 0, negatives and empty as 0; a
categorical field f (0..25) with hex value v has key f * 2^33 + v (empty:
f * 2^33 + 2^32) and row id mix64(key) mod D -- mix64 splitmix64's output
function -- or the key itself when D >= 26 * 2^33 (not trainable here: a
dense table that size does not fit).

Model (Keras's shapes and initialisers): one nn.Embedding(D, 16,
sparse=True) over the 26 ids (a table shared by the fields, as hetps's
Embedding layer over the categorical input; the field salts every id, so
a field's values have rows of their own up to hash collisions --
per-field tables of the same rows), uniform(-0.05, 0.05) as Keras's
Embedding; flattened (26 * 16) and concatenated with the 13 numeric
fields; Dense 256 relu, 128 relu, 1 (Glorot-uniform kernels, zero
biases); sigmoid with binary cross-entropy (BCEWithLogits, averaged over
the batch). Adagrad as Keras's: initial accumulator 0.1 (PyTorch's default
is 0), epsilon 1e-7; or plain SGD. File order, no shuffling (as the
reader). Prints the epoch's training samples/s (parsing excluded), then
test AUC (exact, ties counting 1/2), log loss and the file's Bayes AUC
(TEST.tsv.bayes_auc, written by tests/tools/ctrgen). Beside the
samples/s: the process's CPU time a batch over the epoch (all its
threads), what the speed would be on a core of its own.
"""
import argparse
import os
import sys
import time

import numpy as np

N_NUM, N_CAT = 13, 26
N_FIELDS = 1 + N_NUM + N_CAT
EXACT_DIM = 26 << 33
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z):
    """splitmix64's output function on a uint64 array (wrapping products)."""
    z = z.astype(np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def cat_ids(values, empty, input_dim):
    """(n, 26) hex values and empty flags -> (n, 26) int64 row ids."""
    field = np.arange(N_CAT, dtype=np.uint64)[None, :] << np.uint64(33)
    low = np.where(empty, np.uint64(1) << np.uint64(32), values.astype(np.uint64))
    key = field | low
    if input_dim >= EXACT_DIM:
        return key.astype(np.int64)
    return (mix64(key) % np.uint64(input_dim)).astype(np.int64)


HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    HEX[_c] = 10 + _i


def parse_chunk(text, first_line, path, input_dim):
    """Lines of Criteo TSV (a str ending in a newline) -> arrays."""
    lines = text.count("\n")
    flat = text.replace("\r\n", "\n")[:-1].replace("\n", "\t").split("\t")
    if len(flat) != lines * N_FIELDS:
        for i, line in enumerate(text.split("\n")[:lines]):
            n = line.rstrip("\r").count("\t") + 1
            if n != N_FIELDS:
                sys.exit(f"{path}:{first_line + i + 1}: {n} tab-separated "
                         f"field(s); a Criteo line has {N_FIELDS}")
    label = np.array(flat[0::N_FIELDS])
    if not np.all((label == "0") | (label == "1")):
        bad = int(np.argmax((label != "0") & (label != "1")))
        sys.exit(f"{path}:{first_line + bad + 1}: label is not 0 or 1")
    x = np.empty((lines, N_NUM), dtype=np.int64)
    for j in range(N_NUM):
        col = np.array(flat[1 + j::N_FIELDS])
        col[col == ""] = "0"
        x[:, j] = col.astype(np.int64)
    num = np.log1p(np.maximum(x, 0).astype(np.float64)).astype(np.float32)
    lens = np.empty((lines, N_CAT), dtype=np.int64)
    digits = np.empty((lines, N_CAT, 8), dtype=np.uint8)
    for j in range(N_CAT):
        col = flat[1 + N_NUM + j::N_FIELDS]
        lens[:, j] = np.char.str_len(np.array(col))
        hx = np.array(col, dtype="S8")
        digits[:, j, :] = HEX[np.frombuffer(hx.tobytes(), dtype=np.uint8)
                              .reshape(lines, 8)]
    empty = lens == 0
    values = np.zeros((lines, N_CAT), dtype=np.uint64)
    for i in range(8):
        values = (values << np.uint64(4)) | digits[:, :, i].astype(np.uint64)
    return (label.astype(np.float32), num, cat_ids(values, empty, input_dim))


def read_criteo(path, input_dim, chunk_lines=200000):
    """The whole file as label (N,), num (N, 13), cat (N, 26)."""
    labels, nums, cats, done = [], [], [], 0
    with open(path, "r", encoding="ascii", newline="") as f:
        while True:
            lines = f.readlines(chunk_lines * 256)
            if not lines:
                break
            if not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            lab, num, cat = parse_chunk("".join(lines), done, path, input_dim)
            labels.append(lab)
            nums.append(num)
            cats.append(cat)
            done += len(lines)
    if done == 0:
        sys.exit(f"{path}: no lines (an empty file)")
    return np.concatenate(labels), np.concatenate(nums), np.concatenate(cats)


def exact_auc(scores, labels):
    """Rank AUC, ties sharing their average rank (common/eval_metric.c's)."""
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s), dtype=np.float64)
    edges = np.flatnonzero(np.diff(s)) + 1
    starts = np.concatenate(([0], edges))
    ends = np.concatenate((edges, [len(s)]))
    for a, b in zip(starts, ends):
        ranks[a:b] = (a + 1 + b) / 2.0
    pos = float(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return 0.0
    return (ranks[y > 0.5].sum() - pos * (pos + 1) / 2) / (pos * neg)


def dump(args):
    label, num, cat = read_criteo(args.files[0], args.input_dim)
    out = sys.stdout
    for i in range(len(label)):
        out.write("%g" % label[i])
        out.write("".join(" %.9g" % v for v in num[i].tolist()))
        out.write("".join(" %d" % v for v in cat[i].tolist()))
        out.write("\n")


def glorot_(torch, w, gen):
    fan_out, fan_in = w.shape
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    with torch.no_grad():
        w.copy_(torch.rand(w.shape, generator=gen) * (2 * limit) - limit)


def train(args):
    import torch
    import torch.nn as nn

    torch.set_num_threads(args.threads)
    t0 = time.time()
    ytr, ntr, ctr = read_criteo(args.files[0], args.input_dim)
    yte, nte, cte = read_criteo(args.files[1], args.input_dim)
    print(f"torch_ctr: read {len(ytr)} train and {len(yte)} test rows in "
          f"{time.time() - t0:.1f} s (input_dim {args.input_dim})", flush=True)
    gen = torch.Generator().manual_seed(args.seed)
    emb = nn.Embedding(args.input_dim, 16, sparse=True)
    with torch.no_grad():
        emb.weight.copy_(torch.rand(emb.weight.shape, generator=gen) * 0.1 - 0.05)
    d1 = nn.Linear(N_CAT * 16 + N_NUM, 256)
    d2 = nn.Linear(256, 128)
    d3 = nn.Linear(128, 1)
    for d in (d1, d2, d3):
        glorot_(torch, d.weight, gen)
        nn.init.zeros_(d.bias)
    dense = [p for d in (d1, d2, d3) for p in d.parameters()]
    params = [emb.weight] + dense
    if args.optimizer == "adagrad":
        opt = torch.optim.Adagrad(params, lr=args.lr,
                                  initial_accumulator_value=0.1, eps=1e-7)
    else:
        opt = torch.optim.SGD(params, lr=args.lr)
    lossf = nn.BCEWithLogitsLoss()

    def forward(num, cat):
        e = emb(cat).reshape(cat.shape[0], N_CAT * 16)
        h = torch.relu(d1(torch.cat((e, num), dim=1)))
        return d3(torch.relu(d2(h))).squeeze(1)

    ytr_t, ntr_t, ctr_t = (torch.from_numpy(ytr), torch.from_numpy(ntr),
                           torch.from_numpy(ctr))
    n, B = len(ytr), args.batch
    for epoch in range(args.epochs):
        t1, c1, loss_sum = time.time(), time.process_time(), 0.0
        for a in range(0, n, B):
            b = min(a + B, n)
            opt.zero_grad(set_to_none=True)
            loss = lossf(forward(ntr_t[a:b], ctr_t[a:b]), ytr_t[a:b])
            loss.backward()
            opt.step()
            loss_sum += loss.item() * (b - a)
        dt, cpu = time.time() - t1, time.process_time() - c1
        print(f"torch_ctr: epoch {epoch + 1}: loss {loss_sum / n:.4f}, {n} "
              f"samples in {dt:.1f} s: {n / dt:.0f} samples/s "
              f"({args.threads} thread(s), batch {B}, {args.optimizer} "
              f"lr {args.lr}; {1e3 * cpu * B / n:.2f} ms CPU a batch)",
              flush=True)
    with torch.no_grad():
        p = torch.cat([torch.sigmoid(forward(torch.from_numpy(nte[a:a + 8192]),
                                             torch.from_numpy(cte[a:a + 8192])))
                       for a in range(0, len(yte), 8192)]).double().numpy()
    auc = exact_auc(p, yte)
    pc = np.clip(p, 1e-7, 1 - 1e-7)
    ll = float(-np.mean(yte * np.log(pc) + (1 - yte) * np.log(1 - pc)))
    bayes_path = args.files[1] + ".bayes_auc"
    bayes = None
    if os.path.exists(bayes_path):
        with open(bayes_path) as f:
            bayes = float(f.read().split()[0])
    print(f"torch_ctr: test AUC {auc:.4f}, log loss {ll:.4f}" +
          (f", Bayes AUC {bayes:.4f} (gap {bayes - auc:.4f})"
           if bayes is not None else ", no Bayes AUC file"), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--input-dim", type=int, default=1 << 23)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--optimizer", choices=("adagrad", "sgd"), default="adagrad")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    if args.input_dim < 1:
        sys.exit("torch_ctr: --input-dim must be at least 1")
    if args.dump:
        if len(args.files) != 1:
            sys.exit("torch_ctr: --dump reads one file")
        dump(args)
    else:
        if len(args.files) != 2:
            sys.exit("torch_ctr: give TRAIN.tsv and TEST.tsv")
        train(args)


if __name__ == "__main__":
    main()
