// TopCdf: keep the largest entries of a probability row until their cumulative mass reaches a fraction τ.
// The one selection rule behind SpargeAttn (τ, crossing excluded), FG-Attn top-p and BFLA keep-mass
// (crossing included). Exact definition (research/spargeattn.md §4.4, fgattn.md §2, bfla.md §5):
//   1. Only valid entries take part (valid == nullptr: all). n_valid = their count.
//   2. τ >= 1: every valid entry is kept (explicitly, not through rounding).
//   3. Order: descending by value, ties by ascending index (a total order; values must not be NaN).
//   4. c_t = sequential fp32 prefix sum in that order; Z = c_{n_valid} (the same sum).
//   5. Crossing excluded (SpargeAttn): keep = #{t : c_t <= τ·Z}  (longest prefix with mass <= τZ).
//      Crossing included (top-p, keep-mass): keep = min{t : c_t >= τ·Z} (smallest prefix with mass >= τZ;
//      n_valid if rounding keeps c below τZ). τ·Z is one fp32 multiply.
//   6. keep = clamp(keep, min(min_keep, n_valid), n_valid).
// The kept entries are the first `keep` of the order. Cost: one sort of n entries per row.
#pragma once

#include <cstdint>
#include <vector>

#include "spattn/config.hpp"
#include "spattn/numerics.hpp"

namespace spattn {

struct TopCdfParams {
  float tau = 0.9f;
  int min_keep = 1;
  bool include_crossing = false;
};

/// The weight a base-2 score x enters the selection with, under the row's max m: 2^(x − m) by exp2_det, the
/// same bits everywhere (SpargeAttn's pooled scores, FG-Attn's tile logits, BFLA's block scores).
SPATTN_INLINE float selection_weight(float x, float max) { return exp2_det(x - max); }

/// Step 3, the selection order: entry a (value pa) comes before entry b (value pb) when it is larger, ties by
/// lower index. Also the order of every top-k rule (SpargeAttn's top-k, BFLA's top-k floor).
SPATTN_INLINE bool selection_before(float pa, int a, float pb, int b) { return pa > pb || (pa == pb && a < b); }

/// The selection order as one 64-bit key for a GPU's sort, ascending: for weights >= +0 (2^(x − max): their bit
/// patterns order like the values) and indices >= 0, selection_key(pa, a) < selection_key(pb, b) exactly when
/// selection_before(pa, a, pb, b). kNoSelectionKey sorts after every key (an empty slot).
SPATTN_INLINE std::uint64_t selection_key(float weight, int index) {
  return (static_cast<std::uint64_t>(~float_to_bits(weight)) << 32) | static_cast<std::uint32_t>(index);
}
inline constexpr std::uint64_t kNoSelectionKey = ~std::uint64_t{0};
/// The same order for signed values (BFLA's top-k floor orders block scores, which may be negative): value
/// descending, −0 and +0 equal (selection_before compares them with > and ==), ties by lower index. Not NaN.
SPATTN_INLINE std::uint64_t signed_selection_key(float value, int index) {
  const std::uint32_t bits = value == 0.0f ? 0u : float_to_bits(value);
  const std::uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);  // unsigned order = value order
  return (static_cast<std::uint64_t>(~ascending) << 32) | static_cast<std::uint32_t>(index);
}
/// The weight and the index a selection_key holds.
SPATTN_INLINE float selection_key_weight(std::uint64_t key) { return bits_to_float(~static_cast<std::uint32_t>(key >> 32)); }
SPATTN_INLINE int selection_key_index(std::uint64_t key) { return static_cast<int>(key & 0xffffffffu); }

/// Step 6: keep clamped to [min(min_keep, n_valid), n_valid].
SPATTN_INLINE int clamp_keep(int keep, int n_valid, int min_keep) {
  const int floor = min_keep < n_valid ? min_keep : n_valid;
  return keep < floor ? floor : keep;
}
/// Step 5 on one prefix sum c: whether it is past the limit τ·Z (at or past it with the crossing included), and the
/// count kept when prefix t (0-based) is the first one past it.
SPATTN_INLINE bool past_limit(float c, float limit, bool include_crossing) {
  return include_crossing ? c >= limit : !(c <= limit);
}
SPATTN_INLINE int kept_count(int t, bool include_crossing) { return include_crossing ? t + 1 : t; }
/// Steps 2, 4-6 on values already in selection order (descending, ties by index), n_valid of them: the
/// number of entries kept. Host and device: a GPU that sorts its own way calls this for the cut.
SPATTN_INLINE int top_cdf_count(const float* sorted, int n_valid, float tau, int min_keep,
                                bool include_crossing) {
  if (n_valid <= 0) return 0;
  if (tau >= 1.0f) return n_valid;
  // Entries are read kBatch at a time ahead of the sums (one thread of a GPU then waits for one load per batch,
  // not per entry); the sums are the sequential ones, entry by entry, in order.
  constexpr int kBatch = 8;
  float total = 0.0f;
  for (int t0 = 0; t0 < n_valid; t0 += kBatch) {
    float v[kBatch];
    for (int u = 0; u < kBatch; ++u) v[u] = t0 + u < n_valid ? sorted[t0 + u] : 0.0f;
    for (int u = 0; u < kBatch; ++u)
      if (t0 + u < n_valid) total += v[u];
  }
  const float limit = tau * total;
  float c = 0.0f;
  for (int t0 = 0; t0 < n_valid; t0 += kBatch) {
    float v[kBatch];
    for (int u = 0; u < kBatch; ++u) v[u] = t0 + u < n_valid ? sorted[t0 + u] : 0.0f;
    for (int u = 0; u < kBatch && t0 + u < n_valid; ++u) {
      c += v[u];
      // Crossing included: the first prefix at or past the limit is kept; excluded: the prefix before the first
      // one past it (c is non-decreasing, entries are >= 0: no later prefix qualifies).
      if (past_limit(c, limit, include_crossing)) return clamp_keep(kept_count(t0 + u, include_crossing), n_valid, min_keep);
    }
  }
  return clamp_keep(n_valid, n_valid, min_keep);  // no prefix reached the limit: every entry
}

/// top_cdf_count in two steps for a caller that may overwrite the sorted weights (a GPU's select kernel: one pass of
/// sequential adds instead of two, then a binary search), with the same result bit for bit:
/// top_cdf_prefix turns sorted[t] into c_{t+1} — top_cdf_count's sums, the same adds in the same order — and
/// top_cdf_cut finds the cut on them (c is non-decreasing: entries >= 0).
SPATTN_INLINE void top_cdf_prefix(float* sorted, int n_valid) {
  constexpr int kBatch = 8;  // as in top_cdf_count: loads ahead of the sequential sums
  float c = 0.0f;
  for (int t0 = 0; t0 < n_valid; t0 += kBatch) {
    float v[kBatch];
    for (int u = 0; u < kBatch; ++u) v[u] = t0 + u < n_valid ? sorted[t0 + u] : 0.0f;
    for (int u = 0; u < kBatch && t0 + u < n_valid; ++u) sorted[t0 + u] = c += v[u];
  }
}
SPATTN_INLINE int top_cdf_cut(const float* prefix, int n_valid, float tau, int min_keep, bool include_crossing) {
  if (n_valid <= 0) return 0;
  if (tau >= 1.0f) return n_valid;
  const float limit = tau * prefix[n_valid - 1];
  int lo = 0, hi = n_valid;  // the first prefix past the limit: top_cdf_count's return point
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (past_limit(prefix[mid], limit, include_crossing)) hi = mid;
    else lo = mid + 1;
  }
  return clamp_keep(lo == n_valid ? n_valid : kept_count(lo, include_crossing), n_valid, min_keep);
}

/// Selects entries of p[0..n); writes keep[i] = 1 for kept entries, 0 otherwise, and returns their count.
/// `order` is scratch of size n (the sorted valid indices are left in it, kept ones first).
/// Throws spattn::Error on a NaN among the valid entries or negative n/min_keep.
int top_cdf(const float* p, const std::uint8_t* valid, int n, const TopCdfParams& params,
            std::uint8_t* keep, std::vector<int>& order);

/// Convenience form: returns the kept indices in ascending order.
std::vector<int> top_cdf(const std::vector<float>& p, const TopCdfParams& params,
                         const std::vector<std::uint8_t>* valid = nullptr);

}  // namespace spattn
