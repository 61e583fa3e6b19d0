// SALE on the CPU (definition in core/include/spattn/methods/sale.hpp): quantization and the selection pass
// (calibration: spattn::calibrate).
#pragma once

#include <vector>

#include "spattn/mask.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

/// Codes [n][d] and the per-row copy of each group's scale (amax / R; 0 for a zero-range group).
struct SaleQuantized {
  std::vector<std::int8_t> codes;
  std::vector<float> scale;
};
/// Q' rows [n][d]: rows 16a+r and 16a+r+8 share a scale.
SaleQuantized sale_quantize_q(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range);
/// K' rows [n][d]: in each aligned 32-key block, key n is in group (n mod 8) div 2.
SaleQuantized sale_quantize_k(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range);

struct SaleEstimate {
  TileMask mask;  ///< tile_q = 64, tile_k = 32, one mask per query head
  /// Per (b, hq, query block, key block): max over the block of est − T (raw logits) for candidate blocks,
  /// NaN for sink/local/unreachable blocks. ≥ 0 ⇔ selected. For near-tie analysis across backends.
  std::vector<float> margins;
  /// Per row [(b·Hq + h)·Nq + i]: the exact base-2 (m, l) over its sink-local region
  /// (sale::sink_local_region), for rows of query blocks with candidates; empty state elsewhere.
  std::vector<SoftmaxState> sink_local;
  std::int64_t candidates = 0, selected = 0;
};

SaleEstimate sale_estimate(const Problem& problem, const TensorView& q, const TensorView& k, const sale::Config& config);

}  // namespace spattn::reference
