// TopCdf: keep the largest entries of a probability row until their cumulative mass reaches a fraction τ.
// The one selection rule behind SpargeAttn (τ, crossing excluded), FG-Attn top-p and BFLA keep-mass
// (crossing included). Exact definition (research/spargeattn.md §4.4, fgattn.md §2, bfla.md §5):
//   1. Only valid entries take part (valid == nullptr: all). n_valid = their count.
//   2. τ >= 1: every valid entry is kept (explicitly, not through rounding).
//   3. Order: descending by value, ties by ascending index (a total order; values must not be NaN).
//   4. Mass in exact integers: each entry's weight W_t = top_cdf_weight(p_t, max) = ⌊p_t · 2^(40−e)⌋, e the binary
//      exponent of the row's largest entry (so that entry has 2^40 <= W < 2^41), read from the float's bits;
//      c_t = W_1 + … + W_t and Z = c_{n_valid}, exact (no rounding, so the sums do not depend on the order they are
//      taken in; n_valid <= 2^23 keeps Z below 2^64).
//   5. Crossing excluded (SpargeAttn): keep = #{t : c_t <= τ·Z}  (longest prefix with mass <= τZ).
//      Crossing included (top-p, keep-mass): keep = min{t : c_t >= τ·Z} (smallest prefix with mass >= τZ).
//      τ·Z is the exact product of the fp32 τ and the integer Z (top_cdf_target).
//   6. keep = clamp(keep, min(min_keep, n_valid), n_valid).
// The kept entries are the first `keep` of the order. Entries must be finite and >= 0. Because the sums are exact,
// the cut is a property of the multiset of (value, index) pairs, not of a summation order: a GPU may find it by a
// radix select over the selection keys without sorting the row. Until 2026-11 step 4 summed fp32 values in sorted
// order; on FG-Attn's tile logits of the trained captures no decision differs between the two rules, on random rows
// a few near-ties do (bench/quality/topcdf_fixed_point_study.py). Cost here: one sort of n entries per row.
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

/// The most entries a row may have: 2^23 weights below 2^41 each sum below 2^64.
inline constexpr int kTopCdfMaxEntries = 1 << 23;
/// A finite float x >= 0 as an integer significand times a power of two: x = sig · 2^exp (sig < 2^24; 0: sig 0).
struct TopCdfSplit {
  std::uint32_t sig;
  int exp;
};
SPATTN_INLINE TopCdfSplit top_cdf_split(float x) {
  const std::uint32_t bits = float_to_bits(x) & 0x7fffffffu, biased = bits >> 23, mant = bits & 0x7fffffu;
  if (biased == 0) return {mant, -149};  // zero or subnormal
  return {mant | 0x800000u, static_cast<int>(biased) - 150};
}
/// Step 4's scale of a row whose largest entry is `max`: the shift that puts max's leading bit at bit 40 (0 when
/// max is 0: every weight is then 0).
SPATTN_INLINE int top_cdf_scale(float max) {
  const TopCdfSplit m = top_cdf_split(max);
  if (m.sig == 0) return 0;
  int top = 0;  // index of sig's leading bit (sig < 2^24): a binary search, five steps
  for (int step = 16; step > 0; step >>= 1)
    if ((m.sig >> (top + step)) != 0) top += step;
  return 40 - (m.exp + top);
}
/// Step 4's weight of an entry p (finite, 0 <= p <= the row's max) under the row's scale: ⌊p · 2^scale⌋, exactly.
SPATTN_INLINE std::uint64_t top_cdf_weight(float p, int scale) {
  const TopCdfSplit v = top_cdf_split(p);
  const int shift = v.exp + scale;  // p · 2^scale = sig · 2^shift, shift <= 17 for p <= max
  if (shift >= 0) return static_cast<std::uint64_t>(v.sig) << shift;
  return shift <= -32 ? 0 : static_cast<std::uint64_t>(v.sig >> -shift);
}
/// Step 5 as one threshold on the prefix sums: the cut is the first t (1-based) with c_t >= target, keep =
/// top_cdf_kept(t, include_crossing); no such t (target > Z): keep = n_valid. Crossing included: target = ⌈τ·Z⌉
/// (0 for τ <= 0: the first entry); excluded: target = ⌊τ·Z⌋ + 1 (#{t : c_t <= τZ} = first t past it − 1; 0 for
/// τ < 0: nothing). τ·Z exactly: τ's 24-bit significand times Z in 128 bits. τ < 1 (τ >= 1 keeps every entry, step 2).
SPATTN_INLINE std::uint64_t top_cdf_target(float tau, std::uint64_t total, bool include_crossing) {
  if (tau < 0.0f) return 0;
  const TopCdfSplit t = top_cdf_split(tau);  // τ = sig · 2^exp, exp < 0 for τ < 1
  __extension__ using u128 = unsigned __int128;
  const u128 product = static_cast<u128>(t.sig) * total;
  const int down = -t.exp;  // τ·Z = product / 2^down
  const u128 floor = down >= 128 ? 0 : product >> down;
  if (!include_crossing) return static_cast<std::uint64_t>(floor) + 1;
  const bool exact = down >= 128 ? product == 0 : (floor << down) == product;
  return static_cast<std::uint64_t>(floor) + (exact ? 0 : 1);
}
/// The number kept when prefix t (1-based) is the first to reach top_cdf_target.
SPATTN_INLINE int top_cdf_kept(int t, bool include_crossing) { return include_crossing ? t : t - 1; }

/// Steps 2, 5, 6 on n_valid entries in selection order whose step-4 weights are weight(t) (t = 0 … n_valid − 1) and
/// sum to `total`: the number kept. Host and device; a GPU that sums its own way (any order gives Z's bits) calls
/// this, or finds the same cut by a radix select (the first prefix reaching top_cdf_target).
template <class Weight>
SPATTN_INLINE int top_cdf_cut_by(Weight weight, int n_valid, std::uint64_t total, float tau, int min_keep,
                                 bool include_crossing) {
  if (n_valid <= 0) return 0;
  if (tau >= 1.0f) return n_valid;
  const std::uint64_t target = top_cdf_target(tau, total, include_crossing);
  std::uint64_t c = 0;
  for (int t = 0; t < n_valid; ++t) {
    c += weight(t);
    if (c >= target) return clamp_keep(top_cdf_kept(t + 1, include_crossing), n_valid, min_keep);
  }
  return clamp_keep(n_valid, n_valid, min_keep);  // no prefix reaches the target: every entry
}

/// Steps 2, 4-6 on values already in selection order (descending, ties by index; finite, >= 0), n_valid of them: the
/// number of entries kept. Host and device.
SPATTN_INLINE int top_cdf_count(const float* sorted, int n_valid, float tau, int min_keep, bool include_crossing) {
  if (n_valid <= 0) return 0;
  const int scale = top_cdf_scale(sorted[0]);  // the largest entry comes first
  std::uint64_t total = 0;
  for (int t = 0; t < n_valid; ++t) total += top_cdf_weight(sorted[t], scale);
  return top_cdf_cut_by([&](int t) { return top_cdf_weight(sorted[t], scale); }, n_valid, total, tau, min_keep,
                        include_crossing);
}

/// Selects entries of p[0..n); writes keep[i] = 1 for kept entries, 0 otherwise, and returns their count.
/// `order` is scratch of size n (the sorted valid indices are left in it, kept ones first).
/// Throws spattn::Error on a NaN, infinite or negative valid entry, more than kTopCdfMaxEntries entries, or negative
/// n/min_keep.
int top_cdf(const float* p, const std::uint8_t* valid, int n, const TopCdfParams& params,
            std::uint8_t* keep, std::vector<int>& order);

/// Convenience form: returns the kept indices in ascending order.
std::vector<int> top_cdf(const std::vector<float>& p, const TopCdfParams& params,
                         const std::vector<std::uint8_t>* valid = nullptr);

}  // namespace spattn
