// Pooling shared by the estimators (DESIGN.md §4): block means and sequence means in one fixed fp32 order, so a
// backend that follows it gets the same bits — and the same masks — as the reference.
#pragma once

#include <cstdint>

#include "spattn/config.hpp"

namespace spattn {

/// out[c] = (Σ_r rows[r·d + c]) / n for c < d: fp32 sums over the n rows in order, then one division by the
/// TRUE count n (a partial tail block divides by its own rows). n = 0 leaves out zero.
SPATTN_INLINE void mean_rows(const float* rows, std::int64_t n, std::int64_t d, float* out) {
  for (std::int64_t c = 0; c < d; ++c) out[c] = 0.0f;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < d; ++c) out[c] += rows[r * d + c];
  if (n > 0)
    for (std::int64_t c = 0; c < d; ++c) out[c] /= static_cast<float>(n);
}

/// rows[r·d + c] −= mean[c] for the n rows (the softmax-invariant key centring of SpargeAttn and SALE).
SPATTN_INLINE void subtract_mean(float* rows, std::int64_t n, std::int64_t d, const float* mean) {
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < d; ++c) rows[r * d + c] -= mean[c];
}

}  // namespace spattn
