// NVIDIA warp-level primitives (sm_80 and later) shared by the backends that target NVIDIA GPUs: the hand-written CUDA
// backend (backends/cuda) and the Kokkos backend's tensor-core executor on Kokkos::Cuda (backends/kokkos). mma.sync,
// ldmatrix, cp.async and the swizzled shared-memory tile layout their fragments are read from; no rule of spattn lives
// here (those are core/'s), only how an NVIDIA GPU moves and multiplies 16-bit tiles. Compiled by nvcc only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace spattn::ptx {

/// mma.sync m16n8k16 with fp32 accumulators (row-major A, column-major B) for T = __half / __nv_bfloat16, and the
/// ldmatrix loads of its fragments (the CUDA backend's flash_sm80.cu and bfla.cu, the Kokkos backend's flash_mma.hpp).
template <class T>
struct MmaType;
template <>
struct MmaType<__half> {
  static __device__ __forceinline__ void mma(float* c, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaType<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float* c, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/// fp32 x as N pieces of T (__half / __nv_bfloat16), each the round-to-nearest of what the ones before leave: an fp32
/// operand of a 16-bit mma.sync as N products. With two, their sum is x within 2⁻¹⁸·|x| (bf16) or 2⁻²²·|x| (fp16,
/// before underflow) — below fp32 sums' own rounding bound at D ≥ 64 (AnchorAttention's pooled queries, both backends).
template <class T, int N>
__device__ __forceinline__ void split_pieces(float x, T* piece) {
  float rest = x;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (std::is_same_v<T, __half>) {
      piece[i] = __float2half_rn(rest);
      rest = rest - __half2float(piece[i]);
    } else {
      piece[i] = __float2bfloat16_rn(rest);
      rest = rest - __bfloat162float(piece[i]);
    }
  }
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t* r, std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t* r, std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// Element offset of (row, col) in a [rows][D] smem tile whose 16-byte chunks are XOR-swizzled by row % 8,
/// so the 8 rows an ldmatrix reads at one column land in 8 different bank groups. D = 96 (12 chunks): the first 8
/// chunks by row % 8, the last 4 by row % 4 (a permutation inside each group, so the row stays in bounds).
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  static_assert(D % 64 == 0 || D == 96, "rows of a multiple of 8 chunks, or 12");
  const int c = col >> 3;
  if constexpr (D % 64 == 0) return row * D + ((c ^ (row & 7)) << 3) + (col & 7);
  else return row * D + ((c < 8 ? c ^ (row & 7) : 8 + ((c - 8) ^ (row & 3))) << 3) + (col & 7);
}

/// Two fp32 values rounded (RNE) to T and packed into one 32-bit register, low half first.
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float a, float b) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<std::uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<std::uint32_t*>(&h);
  }
}

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16-byte async copy; src_bytes = 0 zero-fills the destination (rows past the end).
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
/// 4 bytes (0 bytes read: zeros), through L1 (.ca: the only cp.async of fewer than 16 bytes).
__device__ __forceinline__ void cp_async4(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace spattn::ptx
