// SpargeAttn's per-head hyper-parameter search (research/spargeattn.md §6) on the CPU reference.
//
// For each query head, on single-head slices of every calibration input, against dense attention:
// for θ = −1, −1 + 2/steps, … (ascending): bisect τ ∈ [0, 1] for the smallest τ whose worst relative L1 over
// the inputs is < l1 (interval 0.01), then bisect the PV-skip threshold t ∈ [0, 50] (base 2) for the smallest
// t still < l2 (interval 0.5; none passing = PV-skip off); stop when the sparsity drops below 0.1. The head
// takes the θ with the largest sparsity (ties: lower θ); a head whose best sparsity is ≤ 0.1 is dense.
// Sparsity counts what the executor runs: 1 − (kept tiles − skipped tiles) / reachable tiles.
// Deviations from the code (which bisects to 0.001, caches points per input and takes per-bin maxima): every
// candidate is verified on all inputs at once, and the best passing value (not the last midpoint) is kept.
#pragma once

#include <functional>
#include <vector>

#include "spattn/methods/sparge.hpp"
#include "spattn/workload.hpp"

namespace spattn::reference {

struct SpargeTuneOptions {
  float l1 = 0.08f, l2 = 0.09f;  ///< error bounds: τ search, then PV threshold search (l2 ≥ l1)
  std::int32_t block_q = 128, block_k = 64;
  int theta_steps = 16;
  std::function<void(double fraction, const std::string& what)> progress;  ///< optional
};

/// All samples must share heads and head_dim. Throws spattn::Error on bad bounds or inconsistent samples.
sparge::Params sparge_calibrate(const std::vector<Workload>& samples, const SpargeTuneOptions& options);

}  // namespace spattn::reference
