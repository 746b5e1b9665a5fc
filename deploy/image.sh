#!/bin/sh
# image.sh — build the hetps image (deploy/Dockerfile) from bin/ as built
# here. `make image` and `make image-gpu` run it.
#
#   deploy/image.sh [--gpu]
#   IMAGE   tag to build (default hetps:latest, with --gpu hetps:gpu)
#   BASE    base image (default hetps-base:bookworm, built here once with
#           debootstrap and reused; e.g. BASE=debian:bookworm-slim)
#   DATA=1  put Fashion-MNIST in the image
# The GPU variant copies cuBLAS (libcublas.so.N, libcublasLt.so.N) from
# CUDA_LIB (default /usr/local/cuda/lib64) into the image.
set -eu
cd "$(dirname "$0")/.."
gpu=0
[ "${1:-}" = "--gpu" ] && gpu=1
IMAGE=${IMAGE:-$([ $gpu = 1 ] && echo hetps:gpu || echo hetps:latest)}
BASE=${BASE:-hetps-base:bookworm}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}

for b in hetps-ps hetps-worker hetps; do
    [ -x "bin/$b" ] || { echo "image.sh: bin/$b missing: run make first" >&2; exit 1; }
done
docker info >/dev/null 2>&1 || { echo "image.sh: no Docker daemon answers (start one: dockerd, or systemctl start docker)" >&2; exit 1; }
case "$BASE" in
hetps-base:*) ./deploy/base-image.sh "$BASE" ;;
esac

ctx=build/image
rm -rf "$ctx" && mkdir -p "$ctx/bin" "$ctx/models" "$ctx/cuda"
cp bin/hetps-ps bin/hetps-worker bin/hetps "$ctx/bin/"
strip "$ctx"/bin/* 2>/dev/null || true
cp deploy/models/*.json "$ctx/models/" && cp -r deploy/models/keras "$ctx/models/"
target=cpu
if [ $gpu = 1 ]; then
    target=gpu
    libs=$(ls "$CUDA_LIB"/libcublas.so.[0-9]* "$CUDA_LIB"/libcublasLt.so.[0-9]* 2>/dev/null | grep -E '\.so\.[0-9]+$' || true)
    [ -n "$libs" ] || { echo "image.sh: --gpu: no libcublas.so.N in $CUDA_LIB (set CUDA_LIB)" >&2; exit 1; }
    for l in $libs; do cp -L "$l" "$ctx/cuda/"; done
fi
docker build -q -f deploy/Dockerfile --target $target --build-arg BASE="$BASE" \
    --build-arg DATA="${DATA:-0}" -t "$IMAGE" "$ctx" >/dev/null
echo "image.sh: built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }')) on $BASE"
