#!/usr/bin/env bash
# The Kokkos backend on an NVIDIA GPU, in two steps.
#
# 1. On the build machine (Debian 12, nvcc 13 in /usr/local/cuda):
#      bash scripts/gpu/kokkos.sh build [CARRY_DIR]        (default CARRY_DIR: .devbuild/kokkos)
#    builds Kokkos 4.6 (the snapshot of ../shared/deps, CUDA 13 patch, Hopper, static libraries) into
#    $KOKKOS_PREFIX (default /work/kokkos-cuda/install) unless it is there, then spattn with the Kokkos backend and
#    the hand-written CUDA backend for sm_90a (the preset kokkos-cuda, in build-kokkos-cuda/), and copies what the GPU
#    machine needs into CARRY_DIR (about 30 MB): spattn_kokkos_gpu_tests, spattn_bench_e2e (stripped), the kernel timer library,
#    libtbb.so.12 and libcudart.so.13
#    (Kokkos and spattn are static libraries; the driver, libcuda.so.1, is the GPU machine's).
# 2. On the GPU machine, with CARRY_DIR carried along:
#      bash scripts/gpu/kokkos.sh run CARRY_DIR [LENGTHS...]   (default 32768)
#    runs the conformance table on Kokkos::Cuda against the reference, then spattn_bench_e2e for WORKLOADS (default
#    "llm video": causal bf16, Hq = 32, Hkv = 8, D = 128; non-causal, Hkv = 32): the hand-written arms and, in the same
#    run, the Kokkos executor (dense and 11 % block masks) and each Kokkos estimator of the workload's arms (SpargeAttn,
#    BFLA, AnchorAttention; FG-Attn on video; SALE only with KOKKOS_SALE=1) against the hand-written ones. Logs in $OUT.
#    TIMER="llm:sparge video:fgattn" (workload:arm pairs) then reruns those arms with bench/kokkos_kernel_timer.cpp
#    loaded as a Kokkos Tools library: the time of every Kokkos kernel by label (synchronised per kernel).
set -euo pipefail
source "$(dirname "$0")/prelude.sh"
mode=${1:?usage: kokkos.sh build [CARRY_DIR] | kokkos.sh run CARRY_DIR [LENGTHS...]}
shift
case $mode in
  build)
    carry=$PWD/.devbuild/kokkos
    if [[ -n ${1:-} ]]; then carry=$(cd "$spattn_caller_dir" && realpath -m "$1"); fi
    prefix=${KOKKOS_PREFIX:-/work/kokkos-cuda/install}
    export PATH=/usr/local/cuda/bin:$PATH
    source backends/kokkos/snapshot.sh
    NVCC_WRAPPER_DEFAULT_COMPILER=g++ kokkos_snapshot "$prefix" 'patch -p1 < "$DEPS/kokkos-cuda13.patch"' \
      -DCMAKE_CXX_STANDARD=20 -DCMAKE_CXX_COMPILER=@SRC@/bin/nvcc_wrapper -DKokkos_ENABLE_SERIAL=ON \
      -DKokkos_ENABLE_CUDA=ON -DKokkos_ARCH_HOPPER90=ON
    cmake --preset kokkos-cuda -DKokkos_ROOT="$prefix" -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
    cmake --build --preset kokkos-cuda -j "${JOBS:-2}"  # spattn_kokkos_gpu_tests spattn_bench_e2e spattn_kokkos_timer
    mkdir -p "$carry"
    cp build-kokkos-cuda/tests/spattn_kokkos_gpu_tests build-kokkos-cuda/bench/spattn_bench_e2e \
      build-kokkos-cuda/bench/libspattn_kokkos_timer.so "$carry/"
    strip "$carry/spattn_kokkos_gpu_tests" "$carry/spattn_bench_e2e"
    cp -L "$(ldconfig -p | awk '/libtbb\.so\.12 /{print $NF; exit}')" "$carry/libtbb.so.12"
    cp -L /usr/local/cuda/lib/libcudart.so.13 "$carry/"  # the runtime it was built with (the driver is the GPU machine's)
    ls -la "$carry"
    ;;
  run)
    gpu_session "${1:?CARRY_DIR}"
    shift
    lengths=${*:-32768}
    set +e
    gpu_tests spattn_kokkos_gpu_tests 30
    for workload in ${WORKLOADS:-llm video}; do
      WORKLOAD=$workload "$dir/spattn_bench_e2e" $lengths > "$out/kokkos_e2e_$workload.md" 2>&1
      echo "== spattn_bench_e2e ($workload, Kokkos arms) exit status: $?"
      cat "$out/kokkos_e2e_$workload.md"
    done
    # TIMER="llm:sparge video:fgattn ...": each (workload, arm) once more with the kernel timer loaded
    # (bench/kokkos_kernel_timer.cpp): every Kokkos kernel by label, synchronised, the executor arms included.
    for pair in ${TIMER:-}; do
      WORKLOAD=${pair%%:*} ARMS=${pair#*:} KOKKOS_TOOLS_LIBS=$(realpath "$dir")/libspattn_kokkos_timer.so \
        "$dir/spattn_bench_e2e" $lengths > "$out/kokkos_timer_${pair/:/_}.md" 2>&1
      echo "== kernel timer, $pair: exit status $?"
      grep -E "kokkos-timer|estimate: cuda" "$out/kokkos_timer_${pair/:/_}.md" | head -40
    done
    ;;
  *)
    echo "kokkos.sh: unknown mode '$mode' (build or run)" >&2
    exit 2
    ;;
esac
