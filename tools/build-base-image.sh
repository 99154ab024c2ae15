#!/usr/bin/env bash
# A base image for the Dockerfile where Docker Hub is out of reach: Debian
# bookworm (python3 is 3.11 there, as in python:3.11-slim-bookworm) built by
# debootstrap from Debian's own mirror and imported into the local engine.
#
#   tools/build-base-image.sh                    # -> tinystream-base:bookworm
#   docker build --build-arg BASE_IMAGE=tinystream-base:bookworm -t tinystream:dev .
#   ENGINE=podman tools/build-base-image.sh      # into podman's store (the kind suite's offline path)
#
# The machine's CA bundle and pip settings go into the base, so pip inside the
# build reaches PyPI the way the host does (a TLS-inspecting proxy's CA, say).
set -euo pipefail

TAG="${TAG:-tinystream-base:bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
ENGINE="${ENGINE:-docker}"
docker() { command "$ENGINE" "$@"; }

if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image: $TAG (already built)"
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
fi
# /var/tmp, not /tmp: debootstrap runs binaries inside the root, and /tmp may be noexec.
rootfs=$(mktemp -d /var/tmp/tinystream-rootfs.XXXXXX)
trap 'rm -rf "$rootfs" "$rootfs.log"' EXIT
echo "base image: debootstrap bookworm into $rootfs (about a minute)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR" \
  >"$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; exit 1; }
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"
fi
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$TAG" >/dev/null
echo "base image: $TAG ($(docker image inspect "$TAG" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}'))"
