#!/bin/sh
# run.sh — the GPU checks, in one script for a machine with a CUDA device
# (under 5 minutes): build with nvcc, run test_cuda (every op and whole nets,
# GPU vs CPU), the test_nn_* programs and test_replica (mirrored replicas on
# GPUs against one CPU device), then time a training step of the reference model
# (tests/bench/step_gpu.c: the trainer's wk_replicas_step, with uploads,
# downloads and the host reduction) at batch 64, 256 and 1024: on cpu, on
# gpu:0 (and gpu:1 when there is one), on gpu:0,gpu:1 mirrored when there
# are two GPUs, and on gpu:0,cpu mirrored (the batch split by measured
# speed); then PyTorch CUDA on the same model when torch sees a GPU. Works
# with no GPU, one, or more (only gpu:0 and gpu:1 are timed), and without
# nvidia-smi. Every step runs under a timeout cut to what is left of a
# 290 s budget (BUDGET), so the script ends in time even when something
# hangs; what did not run says so. Then the 20 M-parameter MLP
# (deploy/models/fashion_mlp_20m.json) on gpu:0: its step (step_gpu), real
# jobs with parameter servers on the same machine (tests/bench/big.sh: sync
# with 2 and 4 shards over plain TCP, sync over mutual TLS, async with and
# without --overlap), and with PyTorch the same model's step and 80 MB copies
# from pageable and pinned host memory. Writes a short report to
# $OUT/report.txt (or ./gpu-report.txt without OUT) and prints it; the build
# and test logs go beside it.
#
# NOBUILD=1: a machine without our Debian libraries runs what
# tests/gpu/pack.sh built and bundled elsewhere (tar -xzf
# build/gpu-pack.tar.gz first): no build; our programs get build/gpu-lib as
# LD_LIBRARY_PATH (PyTorch keeps its own) and the jobs read build/gpu-data.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPORT=${OUT:+$OUT/report.txt}
REPORT=${REPORT:-./gpu-report.txt}
LOGS=$(dirname "$REPORT")
B=build/rel
STEPS=${STEPS:-100}
BUDGET=${BUDGET:-290}
T0=$(date +%s)
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }

# capped SECONDS CMD…: run CMD under timeout, SECONDS or what is left of
# the budget if less; exit 124 (like timeout) without running it when
# nothing is left.
capped() {
    cap=$1; shift
    left=$((BUDGET - ($(date +%s) - T0)))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -le 0 ]; then
        echo "not run: the ${BUDGET} s budget is spent"
        return 124
    fi
    timeout "$cap" "$@"
}

say "== gpu checks $(date -u +%FT%TZ)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version \
        --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$REPORT"
else
    say "gpu: nvidia-smi not found"
fi
DATA=/usr/share/datasets/fashion-mnist
if [ "${NOBUILD:-0}" = 1 ]; then
    [ -x bin/hetps-worker ] && [ -d build/gpu-lib ] ||
        { say "NOBUILD=1 but no unpacked build/gpu-pack.tar.gz here (tests/gpu/pack.sh)"; exit 1; }
    LD_LIBRARY_PATH=$(pwd)/build/gpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
    DATA=$(pwd)/build/gpu-data
    say "nvcc: not run here (NOBUILD=1: programs built by tests/gpu/pack.sh)"
elif ! capped 200 make -j"$(nproc)" all > "$LOGS/build.log" 2>&1; then
    say "build FAILED (or ran out of time):"
    tail -30 "$LOGS/build.log" | tee -a "$REPORT"; exit 1
else
    say "$(grep '^nvcc:' "$LOGS/build.log" | head -1)"
fi
say "$(bin/hetps-worker --list-devices 2>&1)"

for p in "$B"/tests/test_cuda "$B"/tests/test_nn_* "$B"/tests/test_replica; do
    t=$(basename "$p")
    log=$LOGS/$t.log
    capped 90 "$B/tests/$t" > "$log" 2>&1
    rc=$?
    counts=$(grep '^cunit-counts' "$log")
    [ $rc = 124 ] && counts=$(grep -m1 '^not run' "$log" || echo "timed out")
    say "$t: exit $rc — $counts"
    grep -E 'FAIL|max \|gpu|gpu.*rel diff|gpu mirrored:|skipped:' "$log" | head -60 >> "$REPORT"
    grep -q 'failed 0' "$log" || grep -B2 -A8 'FAIL' "$log" | head -40 | tee -a "$REPORT"
done

n_gpu=$(bin/hetps-worker --list-devices 2>/dev/null | grep -c '^gpu:')
case $n_gpu in
0) gpus="" ;;
1) gpus="gpu:0 gpu:0,cpu" ;;
*) gpus="gpu:0 gpu:1 gpu:0,gpu:1 gpu:0,cpu" ;;
esac
say "== step speed, fashion_cnn, $STEPS steps (samples/s; hetps: forward+loss+backward with param upload/grad download, mirrored: the batch split by measured speed and the gradients reduced on the host; torch: the same plus its Adam update)"
[ "$n_gpu" -lt 2 ] && say "  $n_gpu GPU: gpu:0,gpu:1 mirrored not timed"
for b in 64 256 1024; do
    for d in cpu $gpus; do
        [ "$d" = cpu ] && [ "$b" = 1024 ] && continue
        s=$([ "$d" = cpu ] && echo 20 || echo "$STEPS")
        r=$(capped 40 "$B/bench/step_gpu" --device "$d" --batch "$b" --steps "$s" 2>&1 | tail -1)
        case $r in
        hetps-gpu:*) say "  $r" ;;
        *) say "  $d batch $b: FAILED: ${r:-timed out}" ;;
        esac
    done
done

capped 60 env -u LD_LIBRARY_PATH python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1
torch_rc=$?
if [ $torch_rc = 0 ]; then
    for b in 64 256 1024; do
        r=$(capped 60 env -u LD_LIBRARY_PATH python3 - "$b" "$STEPS" <<'PY' 2>&1 | tail -1
import sys, time, torch, torch.nn as nn
b, steps = int(sys.argv[1]), int(sys.argv[2])
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
m = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                  nn.Linear(32 * 13 * 13, 10)).to(dev)
opt = torch.optim.Adam(m.parameters(), 1e-3)
x = torch.rand(b, 1, 28, 28); y = torch.randint(0, 10, (b,))
loss_fn = nn.CrossEntropyLoss()
def step():
    opt.zero_grad(); xb, yb = x.to(dev), y.to(dev)
    loss = loss_fn(m(xb), yb); loss.backward(); opt.step()
    return loss
for _ in range(10): step()
torch.cuda.synchronize(); t0 = time.time()
for _ in range(steps): step()
torch.cuda.synchronize()
print("torch-cuda: batch %d: %.0f samples/s" % (b, steps * b / (time.time() - t0)))
PY
)
        say "  $r"
    done
elif [ $torch_rc = 124 ]; then
    say "  torch: not timed (import timed out or the budget is spent)"
else
    say "  torch: no CUDA PyTorch here: skipped"
fi
MLP=deploy/models/fashion_mlp_20m.json
say "== the 20 M-parameter MLP ($MLP, 80 MB of parameters), batch 64"
if [ "$n_gpu" -ge 1 ]; then
    # The step with the host buffers page-locked (as the trainer has them)
    # and with plain pageable ones.
    for a in "64" "64 --pageable" "1024" "1024 --pageable"; do
        set -- $a
        r=$(capped 40 "$B/bench/step_gpu" --device gpu:0 --model "$MLP" --batch "$1" --steps 30 ${2:-} 2>&1 | tail -1)
        case $r in
        hetps-gpu:*) say "  step: $r" ;;
        *) say "  step gpu:0 batch $1${2:+ $2}: FAILED: ${r:-timed out}" ;;
        esac
    done
    # Jobs: parameter servers and workers on this machine (big.sh), 40 steps.
    # big SHARDS RUNS: one big.sh call, its step lines into the report.
    big() {
        BENCH_BIG_SHARDS=$1 BENCH_BIG_RUNS=$2 BENCH_BIG_STEPS=40 \
        BENCH_BIG_WORKER_ARGS="--devices gpu:0 --data-dir $DATA" \
            capped 60 sh tests/bench/big.sh > "$LOGS/big-$1-$2.log" 2>&1
        rc=$?
        grep -E '^\$ hetps-worker|per step|peak RSS' "$LOGS/big-$1-$2.log" | tee -a "$REPORT"
        [ $rc = 0 ] || { say "  ($1 shards, $2: exit $rc)"; tail -5 "$LOGS/big-$1-$2.log" | tee -a "$REPORT"; }
    }
    big 2 sync-plain
    big 4 sync-plain
    big 2 sync
    big 2 async-plain
    big 2 async-overlap-plain
else
    say "  no GPU: the 20 M model's step and jobs on gpu:0 not run"
fi
if [ $torch_rc = 0 ]; then
    r=$(capped 60 env -u LD_LIBRARY_PATH python3 - <<'PY' 2>&1 | tail -6
import time, torch, torch.nn as nn
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
def timed(f, n=20):
    for _ in range(3): f()
    torch.cuda.synchronize(); t0 = time.time()
    for _ in range(n): f()
    torch.cuda.synchronize(); return (time.time() - t0) / n * 1e3
n = 20 * 1024 * 1024  # 80 MB of float32
g = torch.empty(n, device=dev)
for pinned in (False, True):
    h = torch.empty(n, pin_memory=pinned)
    up = timed(lambda: g.copy_(h, non_blocking=pinned))
    down = timed(lambda: h.copy_(g, non_blocking=pinned))
    print("torch 80 MB copies, %s host memory: host->device %.2f ms, device->host %.2f ms"
          % ("pinned" if pinned else "pageable", up, down))
m = nn.Sequential(nn.Flatten(), nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096),
                  nn.ReLU(), nn.Linear(4096, 10)).to(dev)
opt = torch.optim.Adam(m.parameters(), 1e-3)
loss_fn = nn.CrossEntropyLoss()
for b in (64, 1024):
    x = torch.rand(b, 1, 28, 28, device=dev); y = torch.randint(0, 10, (b,), device=dev)
    def fb():
        m.zero_grad(); loss_fn(m(x), y).backward()
    def whole():
        opt.zero_grad(); loss_fn(m(x), y).backward(); opt.step()
    print("torch 20 M MLP batch %d: forward+backward %.2f ms, whole step with Adam %.2f ms"
          % (b, timed(fb), timed(whole)))
PY
)
    echo "$r" | sed 's/^/  /' | tee -a "$REPORT"
fi
say "== done in $(($(date +%s) - T0)) s; report in $REPORT"
