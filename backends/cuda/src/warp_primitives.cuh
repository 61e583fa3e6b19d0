// The NVIDIA warp-level primitives (nvidia/spattn_ptx/sm80.cuh) under the CUDA backend's detail namespace, for the
// flash kernels (flash_helpers.cuh) and the estimators whose products run on tensor cores (bfla.cu, anchor_attn.cu,
// sale.cu).
#pragma once

#include "spattn_ptx/sm80.cuh"

namespace spattn::cuda::detail {

// The warp-level primitives (mma.sync, ldmatrix, swizzle, pack2, cp.async): nvidia/spattn_ptx, shared with the
// Kokkos backend.
using ptx::cp_async16;
using ptx::cp_async4;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::MmaType;
using ptx::pack2;
using ptx::smem_addr;
using ptx::split_pieces;
using ptx::swz;

}  // namespace spattn::cuda::detail
