// Pooling shared by the estimators (DESIGN.md §4): block means and sequence means in one fixed fp32 order, so a
// backend that follows it gets the same bits — and the same masks — as the reference.
#pragma once

#include <cstdint>

#include "spattn/config.hpp"

namespace spattn {

/// The order of every sum of a column over rows [first, end): fp32, from 0, rows in order. `value(r)` is the
/// column's entry in row r. `s` continues a sum (a caller that stages rows piece by piece carries it).
template <class Value>
SPATTN_INLINE float column_sum(Value value, std::int64_t first, std::int64_t end, float s = 0.0f) {
  for (std::int64_t r = first; r < end; ++r) s += value(r);
  return s;
}

/// A column's mean from its column_sum over n rows (carried piece by piece by a caller that stages the rows): one
/// division by n, 0 when n = 0.
SPATTN_INLINE float mean_of_sum(float sum, std::int64_t n) { return n > 0 ? sum / static_cast<float>(n) : 0.0f; }

/// The mean of a block's column: column_sum over its n rows, one division by the TRUE count n (a partial tail
/// block divides by its own rows); 0 when n = 0. A GPU computes the columns of a block in parallel.
template <class Value>
SPATTN_INLINE float column_mean(Value value, std::int64_t n) {
  return mean_of_sum(column_sum(value, 0, n), n);
}

/// out[c] = column_mean of column c of the n rows [n × d] (row-major), for c < d.
SPATTN_INLINE void mean_rows(const float* rows, std::int64_t n, std::int64_t d, float* out) {
  for (std::int64_t c = 0; c < d; ++c) out[c] = column_mean([&](std::int64_t r) { return rows[r * d + c]; }, n);
}

/// Rows per chunk of a sequence mean.
inline constexpr std::int64_t kMeanChunk = 256;

/// The mean of a column over a whole sequence (the key centring of SpargeAttn and SALE), blocked so that a GPU
/// sums the chunks in parallel with the same bits: the column_sum of each chunk of kMeanChunk rows, then those
/// chunk sums added in order from 0, one division by n (0 when n = 0). `chunk(t)` is chunk t's column_sum. Equal
/// to column_mean when n <= kMeanChunk.
template <class Chunk>
SPATTN_INLINE float sequence_mean(Chunk chunk, std::int64_t n) {
  const std::int64_t chunks = (n + kMeanChunk - 1) / kMeanChunk;
  return n > 0 ? column_sum(chunk, 0, chunks) / static_cast<float>(n) : 0.0f;
}

/// out[c] = sequence_mean of column c of the n rows [n × d] (row-major), for c < d.
SPATTN_INLINE void sequence_mean_rows(const float* rows, std::int64_t n, std::int64_t d, float* out) {
  for (std::int64_t c = 0; c < d; ++c) {
    const auto value = [&](std::int64_t r) { return rows[r * d + c]; };
    out[c] = sequence_mean(
        [&](std::int64_t t) {
          const std::int64_t first = t * kMeanChunk, end = first + kMeanChunk < n ? first + kMeanChunk : n;
          return column_sum(value, first, end);
        },
        n);
  }
}

/// rows[r·d + c] −= mean[c] for the n rows (the softmax-invariant key centring of SpargeAttn and SALE).
SPATTN_INLINE void subtract_mean(float* rows, std::int64_t n, std::int64_t d, const float* mean) {
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < d; ++c) rows[r * d + c] -= mean[c];
}

}  // namespace spattn
