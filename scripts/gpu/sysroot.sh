#!/usr/bin/env bash
# The Debian 12 packages the Python module's build needs (Eigen, oneTBB, nlohmann-json, zlib headers and libraries),
# unpacked into DIR on this (CPU) machine, for a GPU machine that lacks them (our H100 image did on 2026-11-26: CMake
# stopped at find_package(TBB)). Carry DIR there and pass it to python.sh or quality.sh:
#   bash scripts/gpu/sysroot.sh .devbuild/sysroot                      (here, on the build machine)
#   SPATTN_SYSROOT=.devbuild/sysroot bash scripts/gpu/python.sh       (there)
set -euo pipefail
dir=$(realpath -m "${1:?usage: sysroot.sh DIR}")
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libeigen3-dev libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 nlohmann-json3-dev zlib1g-dev)
mkdir -p "$dir"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$dir"; done
rm -rf "$tmp"
# zlib1g-dev's libz.so points at the build machine's libz.so.1.x.y; the GPU machine has its own libz.so.1.
ln -sf /lib/x86_64-linux-gnu/libz.so.1 "$dir/usr/lib/x86_64-linux-gnu/libz.so"
du -sh "$dir"
