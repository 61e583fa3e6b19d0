// FG-Attn's mask estimator on the CPU (definition in core/include/spattn/methods/fg_attn.hpp).
#pragma once

#include <vector>

#include "spattn/mask.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

/// One mask per query head, tile_q = M, tile_k = N, kept tiles by top-p over the pooled-score softmax.
TileMask fg_attn_estimate(const Problem& problem, const TensorView& q, const TensorView& k,
                          const fg_attn::Config& config);

/// The pooled base-2 logits (q̄_i·k̄_j·scale·log2 e, plus the tail weight when enabled) of (b, hq):
/// [Tq][Tk] row-major, -inf where a tile is unreachable. Exposed for tests and analysis.
std::vector<float> fg_attn_logits(const Problem& problem, const TensorView& q, const TensorView& k,
                                  const fg_attn::Config& config, std::int64_t b, std::int64_t hq);

}  // namespace spattn::reference
