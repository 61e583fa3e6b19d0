#!/usr/bin/env bash
# The CUDA binaries of cuda_session.sh and e2e_session.sh, on the build machine (no GPU needed): the preset cuda-sm90
# (the cuda preset for sm_90a only), then the binaries and the libraries they link copied into CARRY_DIR (default
# .devbuild/cuda) for the GPU machine:
#   bash scripts/gpu/build_cuda.sh [CARRY_DIR]
#   (carry CARRY_DIR, then there:  bash scripts/gpu/cuda_session.sh CARRY_DIR  or  bash scripts/gpu/e2e_session.sh CARRY_DIR)
# Environment: JOBS (default 2), CUDACXX (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), OLD_BENCH (an older
# spattn_bench_cuda, copied as old_bench_cuda for cuda_session.sh's A/B).
set -euo pipefail
source "$(dirname "$0")/prelude.sh"
carry=$PWD/.devbuild/cuda
if [[ -n ${1:-} ]]; then carry=$(cd "$spattn_caller_dir" && realpath -m "$1"); fi
CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
export CUDACXX
cmake --preset cuda-sm90
cmake --build --preset cuda-sm90 -j "${JOBS:-2}"  # spattn_gpu_tests spattn_bench_cuda spattn_bench_e2e spattn_cli
mkdir -p "$carry"
cp build-cuda-sm90/tests/spattn_gpu_tests build-cuda-sm90/bench/spattn_bench_cuda build-cuda-sm90/bench/spattn_bench_e2e \
  build-cuda-sm90/tools/spattn "$carry/"
if [[ -n ${OLD_BENCH:-} ]]; then cp "$(cd "$spattn_caller_dir" && realpath "$OLD_BENCH")" "$carry/old_bench_cuda"; fi
cp -L "$(ldconfig -p | awk '/libtbb\.so\.12 /{print $NF; exit}')" "$carry/libtbb.so.12"
ls -la "$carry"
