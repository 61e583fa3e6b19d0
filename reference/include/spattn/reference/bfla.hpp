// BFLA's estimator on the CPU (definition in core/include/spattn/methods/bfla.hpp).
#pragma once

#include <vector>

#include "spattn/mask.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

/// The executor mask: tile_q = min(128, b), tile_k = T. One mask per KV head (the union over its query
/// heads), or per query head when `per_query_head` (for analysis and tests).
TileMask bfla_estimate(const Problem& problem, const TensorView& q, const TensorView& k, const bfla::Config& config,
                       bool per_query_head = false);

/// Flattened-group scores of (b, hq): [⌈Nq/g⌉][⌈Nkv/g⌉] row-major, entry (u, v) = Σ_t q_{ug+t}·k_{vg+t}
/// (unscaled), with the real tokens of partial groups only. Exposed for tests.
std::vector<float> bfla_group_scores(const Problem& problem, const TensorView& q, const TensorView& k,
                                     const bfla::Config& config, std::int64_t b, std::int64_t hq);

}  // namespace spattn::reference
