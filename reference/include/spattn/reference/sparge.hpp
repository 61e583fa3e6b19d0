// SpargeAttn's Stage-1 estimator on the CPU (definition in core/include/spattn/methods/sparge.hpp).
#pragma once

#include <vector>

#include "spattn/mask.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

struct SpargeEstimate {
  TileMask mask;  ///< tile_q = block_q, tile_k = block_k, one mask per query head
  std::vector<float> q_similarity;  ///< [(b·Hq + h)·Tq + i]
  std::vector<float> k_similarity;  ///< [(b·Hkv + h)·Tk + j], of the mean-centred keys
};

SpargeEstimate sparge_estimate(const Problem& problem, const TensorView& q, const TensorView& k,
                               const sparge::Config& config);

}  // namespace spattn::reference
