// Pooling shared by the estimators (DESIGN.md §4): block means and sequence means in one fixed fp32 order, so a
// backend that follows it gets the same bits — and the same masks — as the reference.
#pragma once

#include <cstdint>

#include "spattn/config.hpp"

namespace spattn {

/// The order of every mean: one column's fp32 sum over rows r = 0 … n−1 in order, then one division by the TRUE
/// count n (a partial tail block divides by its own rows); 0 when n = 0. `value(r)` is the column's entry in row
/// r. A GPU computes the columns of a block in parallel, each in this order (backends/cuda/src/estimate.cuh).
template <class Value>
SPATTN_INLINE float column_mean(Value value, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t r = 0; r < n; ++r) s += value(r);
  return n > 0 ? s / static_cast<float>(n) : 0.0f;
}

/// out[c] = column_mean of column c of the n rows [n × d] (row-major), for c < d.
SPATTN_INLINE void mean_rows(const float* rows, std::int64_t n, std::int64_t d, float* out) {
  for (std::int64_t c = 0; c < d; ++c) out[c] = column_mean([&](std::int64_t r) { return rows[r * d + c]; }, n);
}

/// rows[r·d + c] −= mean[c] for the n rows (the softmax-invariant key centring of SpargeAttn and SALE).
SPATTN_INLINE void subtract_mean(float* rows, std::int64_t n, std::int64_t d, const float* mean) {
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < d; ++c) rows[r * d + c] -= mean[c];
}

}  // namespace spattn
