// What estimate() takes besides the method and the tensors (EstimateOptions) and what it returns (Estimate):
// the TileMask, the per-decision margins the method exports, the exact state over each row's anchor region
// that the executor can reuse, and counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spattn/attend_options.hpp"
#include "spattn/mask.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn {

struct EstimateOptions {
  std::string backend = "auto";  ///< "auto" or a backend's name ("reference", …)
};

struct Estimate {
  std::string method;   ///< the method's registry name
  std::string backend;  ///< which backend estimated it
  /// The mask the executor runs (FG-Attn union semantics: already densified over each work item).
  TileMask mask;
  /// Per-decision margins (≥ 0 ⇔ kept) for comparing two backends decision by decision (DESIGN.md §5.3), or
  /// empty. SALE: [((b·Hq + h)·Tq + i)·Tk + j] = max over the block of (estimate − threshold) in raw logits for
  /// candidate blocks, NaN for sink, local and unreachable blocks.
  std::vector<float> margins;
  /// The exact base-2 online-softmax state (m, l) over each query row's anchor region, [(b·Hq + h)·Nq + i], or
  /// empty. SALE: sink-local region (sale::sink_local_region) for rows of query blocks with candidates;
  /// AnchorAttention: sink ∪ window (anchor_attn::row_anchor_region). Rows without a region hold m = −∞, l = 0.
  std::vector<SoftmaxState> anchor_state;
  std::int64_t candidates = 0;  ///< decisions the method's rule made (candidate blocks / stripe keys), where counted
  std::int64_t selected = 0;    ///< of those, kept
};

/// What sparse_attention() returns: the estimate (its mask on the host) and the executor's counts.
struct SparseAttentionResult {
  Estimate estimate;
  AttendStats attend;
};

}  // namespace spattn
