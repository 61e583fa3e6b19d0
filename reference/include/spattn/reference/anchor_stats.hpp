// Exact anchor statistics on the CPU: for every query row, the base-2 running max and sum of its scores
// over its anchor region (sink keys + local window, core/include/spattn/anchor.hpp). SALE thresholds
// candidate blocks at m + √d·ln(τ·l), AnchorAttention at pooled(m) − θ; both start from these.
#pragma once

#include <vector>

#include "spattn/anchor.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

/// Stats of every row, indexed [(b·Hq + h)·Nq + i] (rows past a varlen sequence's end stay empty).
/// Scores are formed like the executor's: fp32 dot products of the dtype-rounded inputs times
/// scale_log2(scale), folded in ascending key order.
std::vector<AnchorStats> anchor_stats(const Problem& problem, const TensorView& q, const TensorView& k,
                                      std::int64_t sink, std::int64_t local);

}  // namespace spattn::reference
