// Row access to host TensorViews: fp32 loads and dtype-rounding stores of one row (the reference's loops, the
// input range check).
#pragma once

#include <algorithm>
#include <cstdint>

#include "spattn/numerics.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// Reads `n` elements of a row as fp32.
inline void load_row(const TensorView& t, std::int64_t offset, std::int64_t n, float* dst) {
  switch (t.dtype) {
    case DType::f32: {
      const float* src = static_cast<const float*>(t.data) + offset;
      std::copy(src, src + n, dst);
      return;
    }
    case DType::f16: {
      const auto* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t d = 0; d < n; ++d) dst[d] = f16_bits_to_f32(src[d]);
      return;
    }
    case DType::bf16: {
      const auto* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t d = 0; d < n; ++d) dst[d] = bf16_bits_to_f32(src[d]);
      return;
    }
  }
}

/// Writes `n` fp32 values into a row, rounded (RNE) to the view's dtype.
inline void store_row(const TensorView& t, std::int64_t offset, std::int64_t n, const float* src) {
  switch (t.dtype) {
    case DType::f32:
      std::copy(src, src + n, static_cast<float*>(t.data) + offset);
      return;
    case DType::f16: {
      auto* dst = static_cast<std::uint16_t*>(t.data) + offset;
      for (std::int64_t d = 0; d < n; ++d) dst[d] = f32_to_f16_bits(src[d]);
      return;
    }
    case DType::bf16: {
      auto* dst = static_cast<std::uint16_t*>(t.data) + offset;
      for (std::int64_t d = 0; d < n; ++d) dst[d] = f32_to_bf16_bits(src[d]);
      return;
    }
  }
}

/// Element offset of row n of head h of sequence b.
inline std::int64_t row_offset(const TensorView& t, const Problem& p, bool is_q, std::int64_t b, std::int64_t h,
                        std::int64_t n) {
  const std::int64_t base = p.varlen() ? 0 : b * t.stride_b;
  const std::int64_t row = (is_q ? p.row_offset_q(b) : p.row_offset_kv(b)) + n;
  return base + h * t.stride_h + row * t.stride_n;
}

}  // namespace spattn
