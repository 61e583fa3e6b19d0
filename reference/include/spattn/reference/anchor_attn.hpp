// AnchorAttention's estimator on the CPU (definition in core/include/spattn/methods/anchor_attn.hpp).
#pragma once

#include <vector>

#include "spattn/anchor.hpp"
#include "spattn/mask.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

struct AnchorEstimate {
  TileMask mask;  ///< tile_q = block·step (one key list per group), tile_k = 1, one mask per query head
  std::vector<AnchorStats> anchors;  ///< per row [(b·Hq + h)·Nq + i]: base-2 (m, l) over its anchor region
  std::int64_t candidates = 0, selected = 0;  ///< candidate (group, key) pairs and those kept as stripes
};

AnchorEstimate anchor_attn_estimate(const Problem& problem, const TensorView& q, const TensorView& k,
                                    const anchor_attn::Config& config);

}  // namespace spattn::reference
