// Integer quantization shared by every backend. Decisions in the integer domain are bit-identical
// everywhere (DESIGN.md §5.2), so these are the only definitions of scale and rounding.
//
// SageAttention-style per-block INT8 (SpargeAttn's quantized compute mode, research/spargeattn.md §2.3):
//   δ = amax / 127 + 1e-7   (fp32; amax = max |x| over the block's valid rows and all channels;
//                            the 1e-7 keeps an all-zero block finite)
//   code = round-half-away-from-zero(x / δ), clamped to [-127, 127]   (IEEE fp32 division; the authors'
//          Triton division is approximate, spec §2.3 — we define the exact one)
// A product of two int8 rows sums at most 127²·256 < 2²⁴ in magnitude, so any fp32 or int32 accumulation
// of the codes is exact: the integer QKᵀ is bit-identical on every backend.
//
// The quantized compute mode smooths K first (spec §2.2): K' = K − μ_k, rounded to the input dtype, where μ_k is the
// key mean of the (batch, KV head) in pooling.hpp's blocked sequence_mean order (the order SpargeAttn's and SALE's
// estimators centre keys with, so a GPU sums the chunks in parallel with the same bits), rounded to the input dtype.
#pragma once

#include <cmath>
#include <cstdint>

#include "spattn/config.hpp"
#include "spattn/numerics.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// x rounded to `dtype` and back (what storing it in that dtype does; round to nearest even).
SPATTN_INLINE float round_to_dtype(float x, DType dtype) {
  return dtype == DType::f16 ? f16_bits_to_f32(f32_to_f16_bits(x))
                             : dtype == DType::bf16 ? bf16_bits_to_f32(f32_to_bf16_bits(x)) : x;
}

/// A smoothed key element: (k − μ_k) rounded to the input dtype (the subtraction the authors' kernel does in it).
SPATTN_INLINE float int8_smoothed_key(float k, float mean, DType dtype) { return round_to_dtype(k - mean, dtype); }

SPATTN_INLINE float int8_block_scale(float amax) { return amax / 127.0f + 1e-7f; }

SPATTN_INLINE std::int8_t int8_code(float x, float scale) {
  float r = std::round(x / scale);  // half away from zero, exact (floor(t + 0.5) is not: 0.49999997)
  r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
  return static_cast<std::int8_t>(r == r ? r : 0.0f);  // NaN inputs (rejected upstream) give 0, not UB
}

}  // namespace spattn
