#!/usr/bin/env bash
# The Kokkos backend on an NVIDIA GPU, in two steps.
#
# 1. On the build machine (Debian 12, nvcc 13 in /usr/local/cuda), from the repository root:
#      bash backends/kokkos/device.sh build [CARRY_DIR]        (default CARRY_DIR: .devbuild/kokkos)
#    builds Kokkos 4.6 (the snapshot of ../shared/deps, CUDA 13 patch, Hopper, static libraries) into
#    $KOKKOS_PREFIX (default /work/kokkos-cuda/install) unless it is there, then spattn with the Kokkos backend and
#    the hand-written CUDA backend for sm_90a (build-kokkos-cuda/), and copies what the GPU machine needs into
#    CARRY_DIR (about 30 MB): spattn_kokkos_gpu_tests, spattn_bench_e2e (stripped), the kernel timer library,
#    libtbb.so.12 and libcudart.so.13
#    (Kokkos and spattn are static libraries; the driver, libcuda.so.1, is the GPU machine's).
# 2. On the GPU machine, from the repository root, with CARRY_DIR carried along:
#      bash backends/kokkos/device.sh run CARRY_DIR [LENGTHS...]   (default 32768)
#    runs the conformance table on Kokkos::Cuda against the reference, then spattn_bench_e2e for WORKLOADS (default
#    "llm video": causal bf16, Hq = 32, Hkv = 8, D = 128; non-causal, Hkv = 32): the hand-written arms and, in the same
#    run, the Kokkos executor (dense and 11 % block masks) and each Kokkos estimator of the workload's arms (SpargeAttn,
#    BFLA, AnchorAttention; FG-Attn on video; SALE only with KOKKOS_SALE=1) against the hand-written ones. Logs in $OUT.
#    TIMER="llm:sparge video:fgattn" (workload:arm pairs) then reruns those arms with bench/kokkos_kernel_timer.cpp
#    loaded as a Kokkos Tools library: the time of every Kokkos kernel by label (synchronised per kernel).
set -euo pipefail
mode=${1:?usage: device.sh build [CARRY_DIR] | device.sh run CARRY_DIR [LENGTHS...]}
shift
case $mode in
  build)
    carry=${1:-.devbuild/kokkos}
    prefix=${KOKKOS_PREFIX:-/work/kokkos-cuda/install}
    export PATH=/usr/local/cuda/bin:$PATH
    source backends/kokkos/snapshot.sh
    NVCC_WRAPPER_DEFAULT_COMPILER=g++ kokkos_snapshot "$prefix" 'patch -p1 < "$DEPS/kokkos-cuda13.patch"' \
      -DCMAKE_CXX_STANDARD=20 -DCMAKE_CXX_COMPILER=@SRC@/bin/nvcc_wrapper -DKokkos_ENABLE_SERIAL=ON \
      -DKokkos_ENABLE_CUDA=ON -DKokkos_ARCH_HOPPER90=ON
    cmake -S . -B build-kokkos-cuda -DCMAKE_BUILD_TYPE=Release -DSPATTN_ENABLE_KOKKOS=ON -DKokkos_ROOT="$prefix" \
      -DSPATTN_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DSPATTN_BUILD_TOOLS=OFF \
      -DSPATTN_BUILD_BENCH=ON -DSPATTN_WERROR=ON -DSPATTN_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a"
    cmake --build build-kokkos-cuda --target spattn_kokkos_gpu_tests spattn_bench_e2e spattn_kokkos_timer -j "${JOBS:-2}"
    mkdir -p "$carry"
    cp build-kokkos-cuda/tests/spattn_kokkos_gpu_tests build-kokkos-cuda/bench/spattn_bench_e2e \
      build-kokkos-cuda/bench/libspattn_kokkos_timer.so "$carry/"
    strip "$carry/spattn_kokkos_gpu_tests" "$carry/spattn_bench_e2e"
    cp -L "$(ldconfig -p | awk '/libtbb\.so\.12 /{print $NF; exit}')" "$carry/libtbb.so.12"
    cp -L /usr/local/cuda/lib/libcudart.so.13 "$carry/"  # the runtime it was built with (the driver is the GPU machine's)
    ls -la "$carry"
    ;;
  run)
    dir=${1:?CARRY_DIR}
    shift
    lengths=${*:-32768}
    out=${OUT:-/tmp}
    export LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-}
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
    set +e
    "$dir/spattn_kokkos_gpu_tests" > "$out/kokkos_gpu_tests.log" 2>&1
    echo "== spattn_kokkos_gpu_tests exit status: $?"
    grep -E "MESSAGE|ERROR|test cases|assertions|Status" "$out/kokkos_gpu_tests.log" | sed 's/^.*MESSAGE: //' | tail -30
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
    echo "device.sh: unknown mode '$mode' (build or run)" >&2
    exit 2
    ;;
esac
