#!/bin/sh
# pack.sh — what tests/gpu/run.sh needs on a GPU machine that has a driver,
# CUDA and PyTorch but none of our Debian libraries and no package registry,
# built here and bundled into one file: build/gpu-pack.tar.gz.
#
# It builds (`make all`, which must find nvcc: the CUDA backend is the point),
# then bundles, in the tree's own layout so that run.sh finds them where it
# looks: bin/, build/rel/tests/test_*, build/rel/bench/*, build/rel/tools/*
# (debug sections stripped), build/gpu-lib/ (every shared library they link
# that is not the C and C++ runtime, found with ldd: nng, OpenSSL, mbedTLS,
# protobuf-c, LMDB, cJSON, zlib, ISA-L, OpenBLAS and its Fortran runtime) and
# build/gpu-data/ (Fashion-MNIST's four IDX files). On the GPU machine, in a
# copy of this tree:
#
#   tar -xzf build/gpu-pack.tar.gz && NOBUILD=1 sh tests/gpu/run.sh
#
# NOBUILD=1 makes run.sh skip the build and give build/gpu-lib to our
# programs only (PyTorch keeps its own libraries).
set -eu
cd "$(dirname "$0")/../.."
P=build/gpu-pack
OUT=build/gpu-pack.tar.gz
DATA=${HETPS_DATA:-/usr/share/datasets/fashion-mnist}

make --no-print-directory -j"$(nproc)" all > build/gpu-pack.log 2>&1 ||
    { tail -30 build/gpu-pack.log; echo "pack: the build failed (log: build/gpu-pack.log)"; exit 1; }
grep -q '^nvcc: found (sm_' build/gpu-pack.log ||
    { grep '^nvcc:' build/gpu-pack.log; echo "pack: no CUDA build here: nothing to run on a GPU"; exit 1; }

rm -rf "$P"
mkdir -p "$P/bin" "$P/build/rel/tests" "$P/build/rel/bench" "$P/build/rel/tools" \
    "$P/build/gpu-lib" "$P/build/gpu-data"
cp bin/hetps bin/hetps-ps bin/hetps-worker "$P/bin/"
cp build/rel/tests/test_* "$P/build/rel/tests/"
cp build/rel/bench/* "$P/build/rel/bench/"
cp build/rel/tools/* "$P/build/rel/tools/"
for f in "$P"/bin/* "$P"/build/rel/tests/* "$P"/build/rel/bench/* "$P"/build/rel/tools/*; do
    strip --strip-debug "$f"
done

# The libraries the programs link, less the C and C++ runtime (the GPU
# machine's own are newer, and PyTorch needs its own libstdc++).
for f in "$P"/bin/* "$P"/build/rel/tests/* "$P"/build/rel/bench/* "$P"/build/rel/tools/*; do
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case $(basename "$lib") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    *) cp -L "$lib" "$P/build/gpu-lib/" ;;
    esac
done

for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [ -f "$DATA/$f.gz" ]; then cp "$DATA/$f.gz" "$P/build/gpu-data/"
    elif [ -f "$DATA/$f" ]; then cp "$DATA/$f" "$P/build/gpu-data/"
    else echo "pack: $DATA has no $f(.gz): the jobs of run.sh need Fashion-MNIST"; exit 1
    fi
done

tar -czf "$OUT" -C "$P" .
echo "pack: $OUT ($(du -h "$OUT" | cut -f1)): $(ls "$P/build/gpu-lib" | wc -l) libraries, $(find "$P" -type f -perm -u+x | wc -l) programs"
