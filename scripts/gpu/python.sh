#!/usr/bin/env bash
# The Python package on the GPU machine (Python 3.12, torch 2.11, pip's pybind11, CUDA 13, nvcc, cmake, ninja; no
# internet):
#   bash scripts/gpu/python.sh
# Builds only the module (and the C++ timing program) with the CUDA backend for sm_90a — the preset python-cuda
# (Release, SPATTN_ENABLE_CUDA, no doctest suite, tools or benchmarks, one architecture) with this machine's Python
# and pybind11 — then runs the CPU test suite with this PyTorch and the GPU checks
# (python/tests/gpu/run_gpu_checks.py), whose table ends the output.
# Environment: SPATTN_BUILD_ONLY (set: stop after the build), PYTHON (default python3), BUILD (default
# build-python-cuda, relative to the repository root), OUT (where gpu_checks.txt goes; default the build directory),
# SPATTN_SYSROOT (Debian's Eigen/oneTBB/nlohmann-json/zlib unpacked by sysroot.sh, for a machine without them;
# relative to the repository root).
set -euo pipefail
source "$(dirname "$0")/prelude.sh"
PYTHON=$(command -v "${PYTHON:-python3}")
BUILD=${BUILD:-build-python-cuda}
OUT=${OUT:-$BUILD}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# The system compiler where there is one: a compiler wrapper that links libstdc++ statically into shared objects
# (our H100 machine's CXX=/opt/gcc/bin/g++) gives a module that crashes at its first use of a C++ stream (GCC 13 sets
# up the streams inside libstdc++.so). SPATTN_PY_CXX overrides.
if [[ -n ${SPATTN_PY_CXX:-} || -x /usr/bin/g++ ]]; then
  export CXX=${SPATTN_PY_CXX:-/usr/bin/g++}
  export CUDAHOSTCXX=$CXX
fi
if [[ -n ${SPATTN_SYSROOT:-} ]]; then
  sys=$(realpath "$SPATTN_SYSROOT")/usr
  export CMAKE_PREFIX_PATH=$sys${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH} ZLIB_ROOT=$sys
  export LD_LIBRARY_PATH=$sys/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)

echo "+ $PYTHON: $($PYTHON -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
start=$(date +%s)
CUDACXX=$nvcc cmake --preset python-cuda -B "$BUILD" "${generator[@]}" \
  -DPython_EXECUTABLE="$PYTHON" -Dpybind11_DIR="$($PYTHON -m pybind11 --cmakedir)"
cmake --build "$BUILD" --target _spattn spattn_python_call_time -j "$(nproc)"  # the build preset python-cuda's targets
echo "+ configure + build: $(( $(date +%s) - start )) s"
[[ -n ${SPATTN_BUILD_ONLY:-} ]] && exit 0  # the module for another script (quality.sh)

export PYTHONPATH=$PWD/$BUILD/python PYTHONDONTWRITEBYTECODE=1
status=0
# The CPU suite with this PyTorch (the custom-op and BlockMask tests run here; Debian's 1.13 skips them).
"$PYTHON" -m pytest -q -p no:cacheprovider python/tests --ignore=python/tests/gpu || status=1
mkdir -p "$OUT"
"$PYTHON" python/tests/gpu/run_gpu_checks.py --build "$BUILD" 2>&1 | tee "$OUT/gpu_checks.txt" || status=1
exit $status
