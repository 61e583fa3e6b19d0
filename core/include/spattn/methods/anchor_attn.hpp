// AnchorAttention (research/anchorattention.md, paper 002): anchors and difference-aware stripes.
//
// Query rows are cut into groups of S = block·step rows (2048 by default); all rows of a group share one
// sorted key list. For group t with first query position p0 = t·S + (Nkv − Nq) (bottom-right alignment):
//   sink        [0, n_sink)
//   local L(t)  [max(n_sink, p0 − local_lead), end of the group's reach)   (the paper's group-aligned
//               window starting one block before the group; the causal rule clips it per row)
//   candidates  every other key the group can reach: [n_sink, max(n_sink, p0 − local_lead)) and, for
//               non-causal inputs, the keys after the group's window
// These three are disjoint and cover the row — fixing the authors' code, which counts [128, 2048) twice and
// never attends the 128 keys before each group (spec §3.3).
//
// Anchor of row i: x_a(i) = max exact score (scaled logit) over sink ∪ local visible to the row (§2.2), from
// the core's online softmax (AnchorStats); the reference forms these scores with a GEMM, the pooled stripe
// scores with the core's fixed-order dot_lanes8. For each pooled block r of `block` rows of the group:
// q̄_r = mean of its queries, ā_r = mean of its rows' anchors (fp32, sequential, true counts). Candidate key j
// is kept for the group when, for some r, q̄_r·k_j·scale + θ ≥ ā_r (ties select; θ in natural-log units,
// converted once to base 2 as θ·log2 e, the unit all scores are compared in).
// θ = +∞ gives exactly dense attention; θ = −∞ gives the anchor region only.
//
// Deviations, with reasons: partial last groups are handled like full ones (the authors fall back to dense
// for the tail and return zeros when N is a multiple of 2048); GQA reads K/V through the KV head (no copy);
// non-causal inputs are supported with the window above; Nq < Nkv groups query rows, positioned at the
// bottom-right diagonal. The reference recomputes the anchor region in the attend pass instead of resuming
// from the anchor state (same keys, same result up to fp32 summation order).
#pragma once

#include <cstdint>

namespace spattn::anchor_attn {

struct Config {
  std::int32_t block = 128;  ///< b_q: rows per pooled query block (paper and code: 128)
  std::int32_t step = 16;    ///< pooled blocks per group: S = block·step = 2048 rows share a key list
  float theta = 12.0f;       ///< θ in natural-log units (paper default 12)
  std::int64_t n_sink = 128;      ///< initial keys always kept (paper: block 0)
  std::int64_t local_lead = 128;  ///< the local window starts this many keys before the group (paper: one block)

  std::int32_t group_rows() const { return block * step; }
  /// Throws spattn::Error naming the bad field.
  void validate() const;
};

/// Keys [begin, end) of the local window of the query group whose first query position is p0 and whose
/// reach ends at `reach_end` (exclusive), in a sequence of nkv keys.
struct Window {
  std::int64_t begin = 0, end = 0;
};
inline Window local_window(const Config& c, std::int64_t p0, std::int64_t reach_end) {
  const std::int64_t lead = p0 - c.local_lead;
  Window w;
  w.begin = lead > c.n_sink ? lead : c.n_sink;
  w.end = reach_end > w.begin ? reach_end : w.begin;
  return w;
}

}  // namespace spattn::anchor_attn
