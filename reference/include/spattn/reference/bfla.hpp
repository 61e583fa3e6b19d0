// BFLA's estimator on the CPU (definition in core/include/spattn/methods/bfla.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "spattn/mask.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

/// The executor mask: tile_q = min(128, b), tile_k = T. One mask per KV head (the union over its query
/// heads), or per query head when `per_query_head` (for analysis and tests).
TileMask bfla_estimate(const Problem& problem, const TensorView& q, const TensorView& k, const bfla::Config& config,
                       bool per_query_head = false);

/// Fills `out` (gq_b·gk_b floats, row-major [⌈Nq_b/g⌉][⌈Nkv_b/g⌉]) with the unscaled flattened-group scores of
/// (batch b, query head hq). Called concurrently from several threads.
using BflaScores = std::function<void(std::int64_t b, std::int64_t hq, float* out)>;

/// The mask built from group scores given by `scores` (every rule after the group products: block maxima, mass,
/// threshold and top-k rules, sink, band, rescues, expansion). bfla_estimate is this with the reference's Eigen
/// products; a GPU test feeds it the device's scores, so the device's rules can be checked bit for bit.
TileMask bfla_mask_from_scores(const Problem& problem, const bfla::Config& config, bool per_query_head,
                               const BflaScores& scores);

/// Flattened-group scores of (b, hq): [⌈Nq/g⌉][⌈Nkv/g⌉] row-major, entry (u, v) = Σ_t q_{ug+t}·k_{vg+t}
/// (unscaled), with the real tokens of partial groups only. Exposed for tests.
std::vector<float> bfla_group_scores(const Problem& problem, const TensorView& q, const TensorView& k,
                                     const bfla::Config& config, std::int64_t b, std::int64_t hq);

}  // namespace spattn::reference
