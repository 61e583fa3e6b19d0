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
// bottom-right diagonal. Default θ 20 (the paper: 12), from quality (bench/results/quality.md, 2026-11-28): in every
// layer of the trained LM θ 12 cost +6.2 % / +11.5 % held-out loss at 8K / 32K (H100 run 2; +3.8 % / +11.3 % on the
// H200), θ 20 +1.2 % / +4.9 % (densities 0.83 / 0.70); on the trained DiT at 8K θ 12 cost +5.2 % / +6.1 % (H100
// run 1; H200), θ 16 +0.13 % and θ 20 +0.001 % (H200; densities 0.985 / 0.995). No θ that leaves the LM's mask
// sparse holds it within +1 %: its induction heads' rows each need one far key that no pooled query sees
// (quality.md, "the similarity fallback"). θ = 12 restores the paper. The reference recomputes the anchor region
// in the attend pass instead of resuming from the anchor state (same keys, same result up to fp32 summation order).
#pragma once

#include <cstdint>

#include "spattn/anchor.hpp"
#include "spattn/config.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::anchor_attn {

/// Ranges and docs: kOptions below (validate() checks them, and S = block·step in [16, 2048]).
struct Config {
  std::int32_t block = 128;       ///< paper and code: 128
  std::int32_t step = 16;         ///< S = block·step = 2048 rows share a key list
  float theta = 20.0f;            ///< the paper: 12 (see the header comment: 12 cost +6 % to +12 % on trained models)
  std::int64_t n_sink = 128;      ///< paper: block 0
  std::int64_t local_lead = 128;  ///< paper: one block

  std::int32_t group_rows() const { return block * step; }
  /// Throws spattn::Error naming the bad field.
  void validate() const;
};

// ---- rules (host + device; the reference's loops and every backend's estimator call these) ----

/// Keys [begin, end) of the local window of the query group whose first query position is p0 and whose
/// reach ends at `reach_end` (exclusive), in a sequence of nkv keys.
struct Window {
  std::int64_t begin = 0, end = 0;
};
SPATTN_INLINE Window local_window(std::int64_t n_sink, std::int64_t local_lead, std::int64_t p0, std::int64_t reach_end) {
  const std::int64_t lead = p0 - local_lead;
  Window w;
  w.begin = lead > n_sink ? lead : n_sink;
  w.end = reach_end > w.begin ? reach_end : w.begin;
  return w;
}
inline Window local_window(const Config& c, std::int64_t p0, std::int64_t reach_end) {
  return local_window(c.n_sink, c.local_lead, p0, reach_end);
}

/// Exclusive end of the keys the group of query rows [first, last] reaches: the last row's diagonal (causal),
/// or the end of the group's window p0 + group_rows (non-causal), clipped to [0, nkv].
SPATTN_INLINE std::int64_t group_reach_end(std::int64_t first, std::int64_t last, std::int64_t nq, std::int64_t nkv,
                                           bool causal, std::int64_t group_rows) {
  const std::int64_t offset = nkv - nq;
  if (causal) {
    const std::int64_t e = last + offset + 1;
    return e < nkv ? e : nkv;
  }
  std::int64_t e = first + offset + group_rows;
  e = e > 0 ? e : 0;
  return e < nkv ? e : nkv;
}

/// The partition of the keys the group of query rows [first, last] works on (disjoint, covering the keys it can
/// reach): sink [0, sink_end), local window [local.begin, local.end), candidates [sink_end, candidates_end)
/// and, for non-causal inputs, [after_begin, nkv) after the window (after_begin = nkv when causal).
struct GroupKeys {
  std::int64_t sink_end = 0;
  Window local;
  std::int64_t candidates_end = 0;
  std::int64_t after_begin = 0;

  /// The anchor region's keys as one ascending list (the sink, then the local window): its length, and key p of it.
  SPATTN_INLINE std::int64_t region_size() const { return sink_end + (local.end - local.begin); }
  SPATTN_INLINE std::int64_t region_key(std::int64_t p) const { return p < sink_end ? p : local.begin + (p - sink_end); }
  /// Key j is a candidate: the stripe rule decides it.
  SPATTN_INLINE bool candidate(std::int64_t j) const { return (j >= sink_end && j < candidates_end) || j >= after_begin; }
  /// The number of candidate keys in a sequence of nkv keys.
  SPATTN_INLINE std::int64_t candidate_count(std::int64_t nkv) const {
    const std::int64_t before = candidates_end - sink_end, after = nkv - after_begin;
    return (before > 0 ? before : 0) + (after > 0 ? after : 0);
  }
  /// Key j is a sink or local-window key: always kept where the group reaches it (a key neither this nor a candidate
  /// is past the group's reach; sink keys may be too, and the mask drops them).
  SPATTN_INLINE bool always_kept(std::int64_t j) const { return j < sink_end || (j >= local.begin && j < local.end); }
};
SPATTN_INLINE GroupKeys group_keys(std::int64_t n_sink, std::int64_t local_lead, std::int64_t group_rows, std::int64_t first,
                                   std::int64_t last, std::int64_t nq, std::int64_t nkv, bool causal) {
  GroupKeys g;
  g.sink_end = n_sink < nkv ? n_sink : nkv;
  g.local = local_window(n_sink, local_lead, first + (nkv - nq), group_reach_end(first, last, nq, nkv, causal, group_rows));
  g.local.begin = g.local.begin < nkv ? g.local.begin : nkv;  // a sink longer than the sequence: an empty window at nkv
  g.local.end = g.local.end < nkv ? g.local.end : nkv;
  g.candidates_end = g.local.begin < nkv ? g.local.begin : nkv;
  g.after_begin = causal ? nkv : (g.local.end > g.sink_end ? g.local.end : g.sink_end);
  return g;
}

/// The anchor region of a row that sees `visible` keys (causal rule, sequence end): the group's sink
/// [0, n_sink) and local window, both clipped to what the row sees. Its exact scores give the anchor.
SPATTN_INLINE AnchorRegion row_anchor_region(std::int64_t n_sink, const Window& w, std::int64_t visible) {
  const std::int64_t seen = visible < w.end ? visible : w.end;
  return anchor_region(seen, n_sink, seen > w.begin ? seen - w.begin : 0);
}

/// θ in base-2 units (θ·log2 e, one fp32 multiply), the unit every score is compared in.
SPATTN_INLINE float theta_log2(float theta) { return theta * kLog2e; }

/// Pooled stripe score of candidate key k for a pooled query block q̄ (base 2): dot_lanes8(q̄, k)·scale·log2 e.
SPATTN_INLINE float stripe_score(const float* q_mean, const float* key, int d, float scale_log2) {
  return dot_lanes8(q_mean, key, d) * scale_log2;
}

/// Candidate key j is kept for the group when, for some pooled block, score + θ ≥ ā (ties select).
SPATTN_INLINE bool stripe_selected(float score, float theta2, float anchor_mean) { return score + theta2 >= anchor_mean; }
/// Signed distance of that decision (≥ 0 ⇔ selected), for decision-by-decision comparisons across backends.
SPATTN_INLINE float stripe_margin(float score, float theta2, float anchor_mean) { return (score + theta2) - anchor_mean; }

}  // namespace spattn::anchor_attn

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <cmath>

#include "spattn/checked.hpp"
#include "spattn/options.hpp"

namespace spattn::anchor_attn {

inline constexpr double kThetaSweep[] = {4, 6, 7, 8, 9, 10, 12};
inline constexpr Refusal kRefusals[] = {
    {.names = "tile_q|tile_k", .reason = "anchor sets its own tiles (groups of 128·step rows, single-key stripes)"}};

// clang-format off
inline constexpr Option kOptions[] = {
    {.name = "block", .field = SPATTN_FIELD(Config, block), .symbol = "b_q", .doc = "rows per pooled query block",
     .lo = 1, .hi = 2048},
    {.name = "step", .field = SPATTN_FIELD(Config, step), .symbol = "",
     .doc = "pooled blocks per group: S = block·step rows share one key list", .lo = 1, .hi = 2048},
    {.name = "theta", .field = SPATTN_FIELD(Config, theta), .symbol = "θ",
     .doc = "stripe threshold in natural-log units: key kept when pooled score + θ ≥ anchor (inf = dense)", .lo = 0.0,
     .hi = INFINITY, .note = " (inf = dense; or -inf: the anchor region only)", .also = -INFINITY, .sweep = kThetaSweep},
    {.name = "n_sink", .field = SPATTN_FIELD(Config, n_sink), .symbol = "", .doc = "initial keys always kept",
     .lo = 0, .hi = static_cast<double>(kMaxAllocationBytes)},
    {.name = "local_lead", .field = SPATTN_FIELD(Config, local_lead), .symbol = "",
     .doc = "the local window starts this many keys before the group", .lo = 0,
     .hi = static_cast<double>(kMaxAllocationBytes)},
};
// clang-format on

inline constexpr OptionTable kOptionTable{
    .method = "anchor",
    .summary = "AnchorAttention: anchors over sink + local, difference-aware stripes",
    .options = kOptions,
    .refusals = kRefusals};
constexpr const OptionTable& option_table(const Config&) { return kOptionTable; }

}  // namespace spattn::anchor_attn
#endif
