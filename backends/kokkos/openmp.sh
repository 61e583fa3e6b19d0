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
jobs=${JOBS:-$(nproc)}
source backends/kokkos/snapshot.sh
prefix=$PWD/build-openmp-kokkos
kokkos_snapshot "$prefix" "" -DCMAKE_CXX_STANDARD=20 -DCMAKE_CXX_COMPILER=g++ -DKokkos_ENABLE_SERIAL=ON \
  -DKokkos_ENABLE_OPENMP=ON
build=build-kokkos-openmp
cmake --preset kokkos -B "$build" -DKokkos_ROOT="$prefix"
cmake --build "$build" --target spattn_kokkos_tests -j "$jobs"
for t in $threads; do
  echo "openmp.sh: spattn_kokkos_tests on Kokkos::OpenMP with OMP_NUM_THREADS=$t"
  OMP_NUM_THREADS=$t OMP_PROC_BIND=false SPATTN_KOKKOS_EXPECT_HOST=OpenMP "$build/tests/spattn_kokkos_tests"
done
