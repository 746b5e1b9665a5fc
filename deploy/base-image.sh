#!/bin/sh
# base-image.sh — a Debian bookworm minbase image, built here with no image
# registry: debootstrap from the mirror apt uses, then `docker import`.
# Cached: when TAG exists it does nothing. About 50 s and 117 MB.
#
#   deploy/base-image.sh [TAG]      (default hetps-base:bookworm)
set -eu
TAG=${1:-hetps-base:bookworm}
docker image inspect "$TAG" >/dev/null 2>&1 && exit 0
command -v debootstrap >/dev/null || { echo "base-image.sh: debootstrap missing (apt-get install debootstrap)" >&2; exit 1; }
# The mirror apt uses: deb822 sources (URIs:) or sources.list (deb URL).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *//p' | grep -v security | head -n 1)
[ -n "$mirror" ] || mirror=$(cat /etc/apt/sources.list 2>/dev/null | awk '$1 == "deb" && $2 !~ /^\[/ && $0 !~ /security/ { print $2; exit }')
mirror=${mirror:-http://deb.debian.org/debian}
dir=$(mktemp -d "${TMPDIR:-/tmp}/hetps-base-XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "base-image.sh: debootstrap --variant=minbase bookworm from $mirror"
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.log" 2>&1 ||
    { tail -20 "$dir.log" >&2; rm -f "$dir.log"; exit 1; }
rm -f "$dir.log"
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log
: > "$dir/etc/resolv.conf"
tar -C "$dir" -c . | docker import - "$TAG" >/dev/null
echo "base-image.sh: built $TAG"
