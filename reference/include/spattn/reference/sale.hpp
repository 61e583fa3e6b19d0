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
/// Q' rows [n][d] by sale::q_group (thread groups: rows 16a+r and 16a+r+8 share a scale; block groups: 64 rows).
SaleQuantized sale_quantize_q(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range,
                              sale::Groups groups);
/// K' rows [n][d] by sale::k_group (thread groups: in each aligned 32-key block, key n is in group (n mod 8) div 2;
/// block groups: the same within block 0 and within each 128-key segment after it).
SaleQuantized sale_quantize_k(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range,
                              sale::Groups groups);

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

/// sale_estimate's selection over GIVEN sink-local states ([(b·Hq + h)·Nq + i], base 2, e.g. a GPU's statistics
/// pass) instead of its own exact pass: the thresholds, margins and mask that follow from them (out.sink_local = the
/// given states). For decision-by-decision tests of a backend whose sink-local sums run in another order. Throws
/// spattn::Error when sink_local does not hold batch·heads_q·seqlen_q states.
SaleEstimate sale_select(const Problem& problem, const TensorView& q, const TensorView& k, const sale::Config& config,
                         const std::vector<SoftmaxState>& sink_local);

/// What sale_estimate forms for one (batch, query head) before selecting: the Q rows as read (fp32), K' = K − μ_k,
/// the per-key bias qmk_j = μ_q·k'_j (dot_lanes8), and the codes of Q' = Q − μ_q and K' (rows of the sequence).
struct SaleHeadInputs {
  std::vector<float> q_raw, k_centred, qmk;
  SaleQuantized q, k;
};
SaleHeadInputs sale_head_inputs(const Problem& problem, const TensorView& q, const TensorView& k, const sale::Config& config,
                                std::int64_t b, std::int64_t h);

}  // namespace spattn::reference
