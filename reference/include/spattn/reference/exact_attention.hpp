// Attention in float64 over an explicit element mask: the exact value every kernel approximates, the "ref64" of
// spattn::check_attention (spattn/check.hpp). Not an executor: no tiles, no online softmax, no fp32 — one row at a
// time, scores, max, exp, sums and the weighted V sum all in double, so its rounding is far below any fp32 kernel's.
// Inputs must already be validated (check_attention does it); host memory, no variable-length batch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "spattn/problem.hpp"

namespace spattn::reference {

/// Fills allowed[0, Nkv) with 1 where query row i of (batch b, query head h) may see key j, else 0. The causal rule
/// is the caller's to include (check.hpp's masks do).
using RowMask = std::function<void(std::int64_t b, std::int64_t h, std::int64_t i, std::uint8_t* allowed)>;

/// out [B, Hq, Nq, Dv] row-major: softmax(scale · q kᵀ over the allowed keys) v in double; a row with no allowed key
/// is 0 (DESIGN.md §3's empty rows). The scale is problem.softmax_scale() (the fp32 value a kernel is given).
/// Deterministic: one task per (batch, head), every sum in key order.
std::vector<double> exact_attention(const Problem& problem, const TensorView& q, const TensorView& k,
                                    const TensorView& v, const RowMask& allowed);

}  // namespace spattn::reference
