#!/bin/sh
# run.sh — the GPU checks, in one script for a machine with a CUDA device
# (under 5 minutes): build with nvcc, run test_cuda (every op and whole nets,
# GPU vs CPU) and test_nn, then time a training step of the reference model
# (tests/bench/step_gpu.c: wk_net_step with uploads and downloads) at batch
# 64, 256 and 1024 on gpu:0 and on cpu, and PyTorch CUDA on the same model
# when torch sees a GPU. Writes a short report to $OUT/report.txt (or
# ./gpu-report.txt without OUT) and prints it.
#
# Not covered yet: mirrored replicas on gpu:0,gpu:1 (step_gpu runs one
# device; with two GPUs it times each separately).
set -u
cd "$(dirname "$0")/../.."
REPORT=${OUT:+$OUT/report.txt}
REPORT=${REPORT:-./gpu-report.txt}
B=build/rel
STEPS=${STEPS:-100}
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }

say "== gpu checks $(date -u +%FT%TZ)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$REPORT"
if ! make -j"$(nproc)" all > build.log 2>&1; then
    say "build FAILED:"; tail -30 build.log | tee -a "$REPORT"; exit 1
fi
say "$(grep '^nvcc:' build.log | head -1)"
say "$(bin/hetps-worker --list-devices 2>&1)"

for t in test_cuda test_nn; do
    timeout 120 "$B/tests/$t" > "$t.log" 2>&1
    say "$t: exit $? — $(grep '^cunit-counts' "$t.log")"
    grep -E 'FAIL|max \|gpu' "$t.log" | sort -t' ' -k1 | head -60 >> "$REPORT"
    grep -q 'failed 0' "$t.log" || grep -B2 -A8 'FAIL' "$t.log" | head -40 | tee -a "$REPORT"
done

n_gpu=$(bin/hetps-worker --list-devices 2>/dev/null | grep -c '^gpu:')
say "== step speed, fashion_cnn, $STEPS steps (samples/s; hetps: forward+loss+backward with param upload/grad download; torch: the same plus its Adam update)"
for b in 64 256 1024; do
    for d in cpu $(seq -s ' ' -f 'gpu:%g' 0 $((n_gpu - 1)) 2>/dev/null); do
        [ "$d" = cpu ] && [ "$b" = 1024 ] && continue
        s=$([ "$d" = cpu ] && echo 20 || echo "$STEPS")
        r=$(timeout 60 "$B/bench/step_gpu" --device "$d" --batch "$b" --steps "$s" 2>&1 | tail -1)
        say "  $r"
    done
done

if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    for b in 64 256 1024; do
        r=$(timeout 60 python3 - "$b" "$STEPS" <<'PY' 2>&1 | tail -1
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
else
    say "  torch: no CUDA PyTorch here: skipped"
fi
say "== report in $REPORT"
