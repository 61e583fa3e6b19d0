// Device helpers shared by the flash kernels (flash_sm80.cu, flash_sm90.cu): packing, async copies and the
// output/LSE epilogue, so both kernels write results the same way. The mask semantics (which keys a row sees,
// the kept-key lookup, empty rows, PV-skip) are spattn/mask_policy.hpp's, shared with the reference executor.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "flash.cuh"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::cuda::detail {

/// mma.sync m16n8k16 with fp32 accumulators (row-major A, column-major B) for T = __half / __nv_bfloat16, and the
/// ldmatrix loads of its fragments (flash_sm80.cu, bfla.cu).
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

/// Stores output elements (col, col + 1) of a row starting at element offset `orow`.
__device__ __forceinline__ void store_pair(const FlashParams& p, std::int64_t orow, int col, float o0, float o1) {
  if (p.o_dtype == 0) {
    *reinterpret_cast<float2*>(static_cast<float*>(p.o) + orow + col) = make_float2(o0, o1);
  } else if (p.o_dtype == 1) {
    *reinterpret_cast<__half2*>(static_cast<__half*>(p.o) + orow + col) = __floats2half2_rn(o0, o1);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.o) + orow + col) = __floats2bfloat162_rn(o0, o1);
  }
}

/// Output elements (col, col + 1) of a row starting at element offset `orow`, as fp32.
__device__ __forceinline__ float2 load_pair(const FlashParams& p, std::int64_t orow, int col) {
  if (p.o_dtype == 0) return *reinterpret_cast<const float2*>(static_cast<const float*>(p.o) + orow + col);
  if (p.o_dtype == 1) return __half22float2(*reinterpret_cast<const __half2*>(static_cast<const __half*>(p.o) + orow + col));
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(static_cast<const __nv_bfloat16*>(p.o) + orow + col));
}

/// AttendOptions::resume (FlashParams::resume) for one thread's share of row i, whose output row starts at `orow`:
/// a quad of 4 threads (t4 = 0 … 3) holds the row, each thread the column pairs 8·dt + 2·t4 (+ 1), dt < D / 8, as
/// acc(dt, 0 / 1). Sets the running max m, this thread's part of l (all of it on t4 = 0: the epilogue sums the quad)
/// and the accumulators l·O; a row whose resumed l is 0 (or no resume) keeps the empty start the caller set.
template <int D, class Acc>
__device__ __forceinline__ void resume_row(const FlashParams& p, int b, int h, int i, std::int64_t orow, int t4, float& m,
                                           float& l, Acc acc) {
  if (p.resume == nullptr) return;
  const SoftmaxState st = p.resume[(static_cast<std::int64_t>(b) * p.heads_q + h) * p.seqlen_q + i];
  if (st.l == 0.0f) return;  // empty so far (a NaN state propagates)
  m = st.m;
  l = t4 == 0 ? st.l : 0.0f;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const float2 o = load_pair(p, orow, dt * 8 + 2 * t4);
    acc(dt, 0) = st.l * o.x;
    acc(dt, 1) = st.l * o.y;
  }
}

/// Row statistics after the last tile (one thread per row; m, l: the row's base-2 running max and softmax
/// denominator): the natural-log LSE (−∞ for an empty row, mask_policy::empty_row), the state (m, l)
/// (FlashParams::state) and the empty-row count (when one is given).
__device__ __forceinline__ void finish_row(const FlashParams& p, int b, int h, int i, float m, float l) {
  const bool empty = mask_policy::empty_row(l);
  const std::int64_t at = (static_cast<std::int64_t>(b) * p.heads_q + h) * p.seqlen_q + i;
  if (p.lse) p.lse[at] = empty ? -INFINITY : (m + log2_det(l)) * kLn2;
  if (p.state) p.state[at] = SoftmaxState{m, l};
  if (empty && p.empty_rows != nullptr) atomicAdd(p.empty_rows, 1);  // optional (attend_async)
}

}  // namespace spattn::cuda::detail
