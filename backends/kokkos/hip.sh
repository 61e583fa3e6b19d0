#!/usr/bin/env bash
# The Kokkos backend compiled for AMD GPUs, and proof that the code is there. Compile-only: no AMD GPU is reachable
# from our machines; every line that would run on one is the Kokkos source that runs, and passes the conformance
# table, on Kokkos Serial (CI) and Kokkos::Cuda (the H100).
#
#   bash backends/kokkos/hip.sh [ARCH...]        (default: gfx90a gfx940; run from the repository root, as root)
#
# For each ARCH (gfx90a: MI200; gfx940: MI300, the first of that family Debian's ROCm 5.2 compiles for):
#   1. Kokkos (the snapshot of ../shared/deps, HIP + Serial, C++17, static) into build-hip-kokkos/ARCH unless it is
#      there; Debian's hipcc (clang 15) segfaults on Kokkos' own sources in C++20 mode (../shared/deps/README.md);
#   2. spattn's preset hip against it, in build-hip-ARCH/: the backend's sources through hipcc (C++20), everything
#      else through the host compiler; target spattn_kokkos_tests (the Kokkos test binary, linked by hipcc);
#   3. checks with ROCm's roc-obj-ls / roc-obj-extract / llvm-nm that the binary carries code objects for ARCH and that
#      they hold every Kokkos kernel of the backend (each `template <class Exec[, …]> struct X` of backends/kokkos/src
#      with a team operator(), instantiated for Kokkos::HIP), and that it carries code for no other AMD architecture.
# Installs Debian 12's ROCm packages it needs (hipcc, the HIP runtime and device libraries, roc-obj) when hipcc is
# missing. DEPS (default ../shared/deps) holds the Kokkos snapshot; JOBS (default: nproc) the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/../.."
archs=${*:-gfx90a gfx940}
source backends/kokkos/snapshot.sh
jobs=${JOBS:-$(nproc)}
if ! command -v hipcc > /dev/null || ! command -v roc-obj-ls > /dev/null; then
  apt-get install -y --no-install-recommends hipcc libamdhip64-dev libhsa-runtime-dev rocm-device-libs \
    libamd-comgr-dev rocminfo
fi
nm=$(ls /usr/lib/llvm-*/bin/llvm-nm | sort -V | tail -1)
export HCC_AMDGPU_TARGET=${archs%% *}  # silences rocm_agent_enumerator's traceback (no AMD GPU here)

# The backend's kernels: functor templates over the execution space that define a team operator().
kernels=$(awk '/^template <class Exec(, [^>]*)?>$/ { t = 1; next }
               t && /^struct [A-Za-z0-9_]+ \{/ { name = $2 }
               { t = 0 }
               /operator\(\)\(const Member/ && name != "" { print name; name = "" }' backends/kokkos/src/*.hpp | sort -u)
[[ -n $kernels ]] || { echo "hip.sh: found no Kokkos kernels in backends/kokkos/src"; exit 1; }

for arch in $archs; do
  prefix=$PWD/build-hip-kokkos/$arch
  # The snapshot's gpu_arch_can_access_system_allocations() has no answer for gfx940 (an error, "no return statement
  # in constexpr function"): gfx940 is of the MI300 family, answered like gfx942.
  kokkos_snapshot "$prefix" "sed -i 's/defined(KOKKOS_ARCH_AMD_GFX942) || defined(KOKKOS_ARCH_AMD_GFX942_APU)\$/defined(KOKKOS_ARCH_AMD_GFX940) || &/' core/src/HIP/Kokkos_HIP_IsXnack.hpp" \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_COMPILER=hipcc -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_HIP=ON \
    "-DKokkos_ARCH_AMD_${arch^^}=ON" -DKokkos_ENABLE_ROCTHRUST=OFF
  build=build-hip-$arch
  cmake --preset hip -B "$build" -DKokkos_ROOT="$prefix"
  cmake --build "$build" --target spattn_kokkos_tests -j "$jobs"

  binary=$PWD/$build/tests/spattn_kokkos_tests
  objects=$(mktemp -d)
  roc-obj-ls "$binary" > "$objects/list"
  others=$(awk '$2 ~ /amdgcn/ && $2 !~ /--'"$arch"'$/' "$objects/list" | wc -l)
  awk '$2 ~ /--'"$arch"'$/ && $3 !~ /size=0$/ { print $3 }' "$objects/list" | (cd "$objects" && roc-obj-extract -o "$objects")
  count=$(find "$objects" -name '*.co' | wc -l)
  for co in "$objects"/*.co; do "$nm" -C --defined-only "$co"; done > "$objects/symbols"
  missing=""
  for k in $kernels; do
    grep -qE "spattn::kokkos::detail::$k<Kokkos::HIP[,>]" "$objects/symbols" || missing="$missing $k"
  done
  rm -rf "$objects"
  echo "hip.sh: $arch: $binary carries $count $arch code objects with all $(echo $kernels | wc -w) Kokkos kernels of" \
       "the backend for Kokkos::HIP${missing:+ EXCEPT:$missing}; code objects for other AMD targets: $others"
  [[ $count -gt 0 && -z $missing && $others == 0 ]] || exit 1
done
