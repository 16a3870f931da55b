#!/usr/bin/env bash
# A stand-in for python:3.11-slim made from Debian's own packages, for machines that reach a
# Debian mirror but no container registry (CI here; ../shared/CONTAINER-NOTES.md):
#   docker/local-base.sh [TAG]        (default local/bookworm-python:3.11; needs root and debootstrap)
# then  docker build --network host --build-arg BASE=local/bookworm-python:3.11 -f docker/Dockerfile .
# Debian bookworm's Python is 3.11, the minor version of python:3.11-slim. python3-venv (not
# python3-pip) is enough: the Dockerfile makes a venv and its pip comes from ensurepip.
# Like the slim image, it drops apt's downloaded packages and lists, documentation and locales.
set -euo pipefail
TAG="${1:-local/bookworm-python:3.11}"
# The mirror apt already uses (deb822 sources first, then the one-line format).
MIRROR="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 || true)"
if [ -z "$MIRROR" ]; then
    MIRROR="$(awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
fi
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
ROOTFS="$(mktemp -d /tmp/moses-reorder-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$ROOTFS" "$MIRROR" >/dev/null
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
       "$ROOTFS"/usr/share/locale/*
tar -C "$ROOTFS" -c . | docker import - "$TAG" >/dev/null
echo "$TAG: $(docker image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1 / 1e6}')"
