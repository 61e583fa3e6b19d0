# Sourced by openmp.sh, hip.sh and scripts/gpu/kokkos.sh: kokkos_snapshot builds the Kokkos snapshot of $DEPS (default
# ../shared/deps, relative to the repository root) into a prefix, once.
#
#   kokkos_snapshot PREFIX "PATCH" [CMAKE_ARGS...]
#
# Unless PREFIX already holds an install: unpacks kokkos-develop-2025-06-20.tar.gz into a temporary directory, runs
# PATCH there (a shell command, "" for none), configures it with Ninja (Release, static libraries, installed into
# PREFIX, then CMAKE_ARGS, where @SRC@ stands for the unpacked source directory), builds it with $JOBS (default: nproc)
# jobs and installs it. A failed configure prints its log.
kokkos_snapshot() {
  local prefix=$1 patch=$2
  shift 2
  [[ -f $prefix/lib/cmake/Kokkos/KokkosConfig.cmake ]] && return 0
  command -v ninja > /dev/null || apt-get install -y --no-install-recommends ninja-build
  local deps src kk
  deps=$(realpath "${DEPS:-../shared/deps}")
  src=$(mktemp -d)
  tar xzf "$deps/kokkos-develop-2025-06-20.tar.gz" -C "$src"
  kk=$src/kokkos-develop-2025-06-20
  if [[ -n $patch ]]; then (cd "$kk" && export DEPS=$deps && eval "$patch"); fi
  cmake -G Ninja -S "$kk" -B "$kk/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_INSTALL_PREFIX="$prefix" "${@//@SRC@/$kk}" > "$src/configure.log" || { cat "$src/configure.log"; return 1; }
  cmake --build "$kk/build" -j "${JOBS:-$(nproc)}"
  cmake --install "$kk/build" > /dev/null
  rm -rf "$src"
}
