#!/bin/sh
# install-deps.sh — install every Debian package that hetps needs to build,
# test and run the reference job. Idempotent: when everything is present it
# prints nothing and exits 0. Needs root (or sudo) only when something is
# missing.
set -eu

PKGS="build-essential pkg-config
libnng-dev libssl-dev
libprotobuf-c-dev protobuf-c-compiler
liblmdb-dev lmdb-utils libisal-dev
libcunit1-dev
libopenblas-dev
libcjson-dev
zlib1g-dev
libhdf5-dev libzip-dev python3-h5py
dataset-fashion-mnist
python3 python3-numpy python3-yaml python3-jsonschema
iproute2 procps iptables libnetfilter-queue-dev openssl curl
docker.io docker-compose debootstrap
bsdutils prometheus python3-protobuf python3-crc32c gnuplot-nox chromium
clang libclang-rt-14-dev"

# `--bench` adds what `make bench` compares against (PyTorch, CPU build).
if [ "${1:-}" = "--bench" ]; then
    PKGS="$PKGS python3-torch"
fi
# `--slurm` adds what tests/integration/slurm.sh needs to run a one-node
# Slurm cluster (it is skipped without them). Not by default: on a machine
# with systemd these packages start their own daemons when installed.
if [ "${1:-}" = "--slurm" ]; then
    PKGS="$PKGS slurmctld slurmd slurm-client munge"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    else
        echo "install-deps: missing packages:$missing; run this script as root" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "install-deps: done"
