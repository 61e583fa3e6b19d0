// Where the Kokkos backend has tensor-core kernels: Kokkos::Cuda built for sm_80 or later defines SPATTN_KOKKOS_MMA and
// brings in the NVIDIA warp-level primitives (nvidia/spattn_ptx, shared with the hand-written CUDA backend). The kernels that
// use them (flash_mma.hpp, bfla_mma.hpp) are NVIDIA specializations of the portable ones beside them; every other space
// runs the portable kernels.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "spattn/problem.hpp"
#include "spattn/tensor.hpp"

#if defined(KOKKOS_ENABLE_CUDA) && (defined(KOKKOS_ARCH_AMPERE) || defined(KOKKOS_ARCH_ADA89) || \
                                    defined(KOKKOS_ARCH_HOPPER) || defined(KOKKOS_ARCH_BLACKWELL))
#define SPATTN_KOKKOS_MMA 1
#include "spattn_ptx/sm80.cuh"
#endif

namespace spattn::kokkos::detail {

/// SPATTN_KOKKOS_MMA=0 runs the portable kernels where a tensor-core one would serve (the tests use it to keep the
/// portable kernels covered on a GPU).
inline bool mma_allowed() {
  const char* env = std::getenv("SPATTN_KOKKOS_MMA");
  return env == nullptr || std::string(env) != "0";
}

/// Whether tensors suit the 16-bit tensor-core kernels: all of one dtype, fp16 or bf16, every row on a 16-byte
/// boundary (base pointers and strides).
inline bool mma_rows_fit(std::initializer_list<const TensorView*> tensors) {
  const DType dtype = (*tensors.begin())->dtype;
  if (dtype != DType::f16 && dtype != DType::bf16) return false;
  for (const TensorView* t : tensors)
    if (t->dtype != dtype || reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0 || t->stride_b % 8 != 0 ||
        t->stride_h % 8 != 0 || t->stride_n % 8 != 0)
      return false;
  return true;
}

}  // namespace spattn::kokkos::detail
