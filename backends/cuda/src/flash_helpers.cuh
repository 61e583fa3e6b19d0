// Device helpers shared by the flash kernels (flash_sm80.cu, flash_sm90.cu): the output/LSE stores and loads and
// the epilogue, so both kernels write results the same way (packing and async copies: warp_primitives.cuh). The
// mask semantics (which keys a row sees, the kept-key lookup, empty rows, PV-skip) are spattn/mask_policy.hpp's,
// shared with the reference executor.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "flash.cuh"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"
#include "warp_primitives.cuh"

namespace spattn::cuda::detail {

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
