#!/usr/bin/env bash
# The Kokkos backend on CPU threads: Kokkos' OpenMP execution space, where the host's teams run concurrently (Debian's
# Kokkos 3.4 has Serial only, so CI's preset kokkos runs every team one after the other and could not see a race
# between teams, e.g. two teams writing one output row or one mask slot).
#
#   bash backends/kokkos/openmp.sh [THREADS...]     (default: 3 1; run from the repository root)
#
#   1. Kokkos (the snapshot of ../shared/deps, OpenMP + Serial, C++20, static) into build-openmp-kokkos/ unless it is
#      there (80 s on 2 cores);
#   2. spattn's preset kokkos against it, in build-kokkos-openmp/ (target spattn_kokkos_tests);
#   3. the shared conformance table and the backend's own tests on Kokkos::OpenMP, once per THREADS value (more
#      threads than cores interleave the teams further). SPATTN_KOKKOS_EXPECT_HOST makes the tests fail unless the
#      host execution space really is OpenMP.
# DEPS (default ../shared/deps) holds the Kokkos snapshot; JOBS (default: nproc) the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${*:-3 1}
deps=$(realpath "${DEPS:-../shared/deps}")
jobs=${JOBS:-$(nproc)}
command -v ninja > /dev/null || apt-get install -y --no-install-recommends ninja-build
prefix=$PWD/build-openmp-kokkos
if [[ ! -f $prefix/lib/cmake/Kokkos/KokkosConfig.cmake ]]; then
  src=$(mktemp -d)
  tar xzf "$deps/kokkos-develop-2025-06-20.tar.gz" -C "$src"
  kk=$src/kokkos-develop-2025-06-20
  cmake -G Ninja -S "$kk" -B "$kk/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 -DCMAKE_CXX_COMPILER=g++ \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON -DBUILD_SHARED_LIBS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" \
    > "$src/configure.log" || { cat "$src/configure.log"; exit 1; }
  cmake --build "$kk/build" -j "$jobs"
  cmake --install "$kk/build" > /dev/null
  rm -rf "$src"
fi
build=build-kokkos-openmp
cmake --preset kokkos -B "$build" -DKokkos_ROOT="$prefix"
cmake --build "$build" --target spattn_kokkos_tests -j "$jobs"
for t in $threads; do
  echo "openmp.sh: spattn_kokkos_tests on Kokkos::OpenMP with OMP_NUM_THREADS=$t"
  OMP_NUM_THREADS=$t OMP_PROC_BIND=false SPATTN_KOKKOS_EXPECT_HOST=OpenMP "$build/tests/spattn_kokkos_tests"
done
