#!/usr/bin/env bash
# spattn.distributed over NCCL on the GPUs of one host (issue 44): builds the Python module (python.sh, build only),
# then python/tests/gpu/distributed_nccl.py under torchrun, one process per GPU (GPUS, default: all the host's).
#   bash scripts/gpu/distributed.sh [N ...]      (a machine kind with 2 or 4 GPUs; SPATTN_SYSROOT as python.sh's)
# NVLink multicast stays off (the machine's NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are kept).
set -euo pipefail
source "$(dirname "$0")/prelude.sh"
SPATTN_BUILD_ONLY=1 bash scripts/gpu/python.sh > "${OUT:-/tmp}/distributed_build.log" 2>&1 ||
  { tail -30 "${OUT:-/tmp}/distributed_build.log"; exit 1; }
if [[ -n ${SPATTN_SYSROOT:-} ]]; then  # the libraries the module links, as python.sh found them
  export LD_LIBRARY_PATH=$(realpath "$SPATTN_SYSROOT")/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/${BUILD:-build-python-cuda}/python PYTHONDONTWRITEBYTECODE=1
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
"${PYTHON:-python3}" -m torch.distributed.run --standalone --nproc_per_node "$gpus" python/tests/gpu/distributed_nccl.py "$@"
