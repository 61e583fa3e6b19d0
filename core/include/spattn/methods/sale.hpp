// SALE (research/sale.md, paper 001): low-bit estimates of the attention weights, the relative attention
// score against exact sink-local statistics, and per-head τ calibration.
//
// Quantization (spec §2; precision of every step defined here in fp32 — the authors' Triton precision is
// ambiguous):
// - Smoothing with one mean per head over the sequence: Q' = Q − μ_q, K' = K − μ_k (fp32). The per-key bias
//   qmk_j = μ_q·k'_j restores q·k' = q'·k' + qmk_j (softmax-invariant K smoothing needs no correction).
// - Symmetric codes in [−R, R], R = 7 (int4) or 127 (int8, the Hopper path, same groups): code =
//   round-to-nearest-even(x·R/amax), clamped; stored scale amax/R. Groups (option `groups`):
//   - "thread" (the default; the paper's kernel): the mma per-thread groups: Q rows 16a+r and 16a+r+8 (r < 8)
//     share a scale; in each aligned 32-key block, key n belongs to group (n mod 8) div 2 (8 keys).
//   - "block" (a deviation from the paper, SageAttention-like block scales): one Q scale per 64-row query block;
//     K: key block 0 (the sink) as above, then per 128-key candidate segment (keys 32 + 128s … 159 + 128s, the
//     segments of the selection below) group (n mod 8) div 2 (32 keys). The unit sq·sk of a candidate product is then
//     the same for every row of a query block and changes once a segment, so a GPU forms the reciprocal, the
//     biases and the thresholds once a segment instead of once a 32-key block. Priced on the trained captures
//     (bench/quality/sale_scale_groups_study.py, bench/results/gpu-pipeline.md): with int8 codes it decides as the
//     thread groups do (35–63 of 11160 LM decisions unlike the exact-score rule, against 17–58); with int4 codes
//     it keeps 1–2 points more of the tiles than int4 thread groups. Measured on the trained LM and DiT (quality
//     harness, --sweep sale_groups): int8 block groups keep the density and the loss of int8 thread groups (within
//     0.02 %), and the CUDA estimate is 4–5 % faster (H200, bench/results/gpu-pipeline.md). Recommended with bits = 8.
//   amax is taken over the group's valid rows only (tail rows never vote).
// - Zero-range group (amax = 0): codes 0 and scale 0 — no NaN/inf scales; such a row's estimate is the
//   exact bias term.
// - Bias in integer units: b_ij = RNE(qmk_j / (sq_i·sk_j)), clamped to ±2^30 (the code's fp16 bias could
//   overflow; ours cannot). Estimate (raw logit): est_ij = (sq_i·sk_j)·(acc_ij + b_ij), acc = integer dot
//   product of the codes (|acc| ≤ R²·d: 49·d for int4, which fits int32 for any d ≤ 256).
//   pack_int4 stores two codes per byte, channel 2c in the low nibble (two's complement).
//
// Selection (spec §3): query blocks of 64 rows, key blocks of 32, 4-block segments. With n_max key blocks
// reachable by the query block and B = n_max − 1: S = ⌊(B − NL)/4⌋ candidate segments (none when τ < 1e-5:
// the head is dense), candidates = blocks 1 … 4S, local = the rest up to n_max − 1, sink = block 0.
// NL = local_window / 32; default local_window = 128, the paper's setting and the Sage path the paper
// measured (the authors' fused path, also used by their calibration, is built with 256).
// Exact sink-local statistics (m̃, l̃, base 2) per row from the core's online softmax; the threshold in raw
// logits is T_i = (m̃_i + log2(τ·l̃_i)) / (scale·log2 e) = m̃_raw + √d·ln(τ·l̃) for scale = 1/√d.
// Candidate block J is selected when some valid row i and key j of it have est_ij ≥ T_i (the paper's
// select-on-tie; the code uses >). Computed per K scale group with the integer max and one dequantization,
// which is the same decision because the dequantization is monotone.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "spattn/anchor.hpp"
#include "spattn/config.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::sale {

/// Ranges and docs: kOptions below (validate() checks them, and that bits is 4 or 8).
/// Quantization scale groups (kOptions: "thread" | "block"; see above).
enum class Groups : std::uint8_t { thread, block };

struct Config {
  int bits = 4;
  Groups groups = Groups::thread;
  std::int64_t local_window = 128;
  std::vector<float> tau = {0.004f};  ///< per query head (one value = all); the paper's example value
  /// Throws spattn::Error naming the bad field.
  void validate(std::int64_t heads_q) const;
  float tau_of(std::int64_t h) const { return tau.size() == 1 ? tau[0] : tau[static_cast<std::size_t>(h)]; }
  int range() const { return bits == 4 ? 7 : 127; }
};

constexpr std::int32_t kBlockQ = 64, kBlockK = 32, kSegment = 4;

// ---- rules (host + device; the reference's loops and every backend's estimator call these) ----

/// Scale group of query row r, as the group's first row (≤ r): thread groups: rows 16a+r' and 16a+r'+8 (r' < 8) share
/// one (the mma per-thread groups); block groups: the 64-row query block.
SPATTN_INLINE std::int64_t q_group(std::int64_t r, Groups groups) {
  return groups == Groups::block ? (r / kBlockQ) * kBlockQ : (r / 16) * 16 + r % 8;
}
/// K quantization chunk of key n (chunks hold whole K scale groups): its 32-key block (thread groups); key block 0,
/// then the 128-key candidate segments 32 + 128s … (block groups).
SPATTN_INLINE std::int64_t k_chunk_of(std::int64_t n, Groups groups) {
  if (groups == Groups::thread || n < kBlockK) return n / kBlockK;
  return 1 + (n - kBlockK) / (kSegment * kBlockK);
}
/// First key of K quantization chunk c.
SPATTN_INLINE std::int64_t k_chunk_begin(std::int64_t c, Groups groups) {
  if (groups == Groups::thread || c == 0) return c * kBlockK;
  return kBlockK + (c - 1) * (kSegment * kBlockK);
}
/// First key of key n's chunk, and how many chunks n keys fill.
SPATTN_INLINE std::int64_t k_chunk_first(std::int64_t n, Groups groups) { return k_chunk_begin(k_chunk_of(n, groups), groups); }
SPATTN_INLINE std::int64_t k_chunks(std::int64_t n, Groups groups) { return n > 0 ? k_chunk_of(n - 1, groups) + 1 : 0; }
/// Scale group of key n, as an id ≤ n: keys of one chunk with the same (n mod 8) div 2 share one.
SPATTN_INLINE std::int64_t k_group(std::int64_t n, Groups groups) { return k_chunk_first(n, groups) + (n % 8) / 2; }
/// The rows of Q quantization chunk c (whole scale groups): [c·q_chunk_rows, …): 16 rows (thread) or 64 (block).
SPATTN_INLINE std::int64_t q_chunk_rows(Groups groups) { return groups == Groups::block ? kBlockQ : 16; }
/// Key n = 32·block + 8a + 2g + c is lane (a, c) of scale group g of its block (a < 4, g < 4, c < 2).
SPATTN_INLINE std::int64_t group_key(std::int64_t block, int a, int g, int c) { return block * kBlockK + 8 * a + 2 * g + c; }

/// The stored scale of a group with max |x| = amax: amax / R, or 0 for a zero-range group.
SPATTN_INLINE float group_scale(float amax, int range) { return amax > 0.0f ? amax / static_cast<float>(range) : 0.0f; }
/// The quantization multiplier R / amax (0 for a zero-range group, whose codes are all 0).
SPATTN_INLINE float group_inv_scale(float amax, int range) { return amax > 0.0f ? static_cast<float>(range) / amax : 0.0f; }

/// Round to nearest even, clamped to [−range, range]; NaN gives 0.
SPATTN_INLINE int quant_code(float x, float inv_scale, int range) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  const float r = rintf(x * inv_scale);
#else
  const float r = std::nearbyint(x * inv_scale);  // default rounding mode: to nearest even
#endif
  if (!(r == r)) return 0;
  return r > static_cast<float>(range) ? range : r < static_cast<float>(-range) ? -range : static_cast<int>(r);
}

/// Candidate segments of a query block that reaches n_max key blocks: S = ⌊(n_max − 1 − NL) / 4⌋ (none when
/// τ < 1e-5: the head is dense). Candidates are key blocks [1, candidate_end(S)); sink = block 0; local = the rest.
SPATTN_INLINE std::int64_t candidate_segments(std::int64_t n_max, std::int64_t local_blocks, float tau) {
  if (tau < 1e-5f) return 0;
  const std::int64_t s = (n_max - 1 - local_blocks) / kSegment;
  return s > 0 ? s : 0;
}
SPATTN_INLINE std::int64_t candidate_end(std::int64_t segments) { return 1 + kSegment * segments; }

/// Sink-local region of a row that sees `visible` keys, in a query block whose candidates end at key block
/// cand_end: sink = key block 0, local = [cand_end·32, visible). Its exact (m, l) give the threshold.
SPATTN_INLINE AnchorRegion sink_local_region(std::int64_t visible, std::int64_t cand_end) {
  AnchorRegion r;
  r.sink_end = visible < kBlockK ? visible : kBlockK;
  r.local_begin = cand_end * kBlockK;
  r.local_end = visible > r.local_begin ? visible : r.local_begin;
  return r;
}

/// Row threshold in raw logits: T = (m̃ + log2(τ·l̃)) / (scale·log2 e), from the base-2 sink-local state.
SPATTN_INLINE float threshold(const SoftmaxState& sink_local, float tau, float scale_log2) {
  return (sink_local.m + log2_det(tau * sink_local.l)) / scale_log2;
}

/// RNE(qf) when qf is within rel·|qf| of a quotient Q and that certifies RNE(Q) = RNE(qf): |qf| < 2²² (its fraction is
/// held) and qf farther than rel·|qf| from its nearest half-integer (so no half-integer lies between qf and Q, and Q is
/// no tie). Sets `out` and returns true, or returns false (large, near a tie, not finite). RNE(qf) is qf + 1.5·2²³,
/// whose ulp is 1: its bits minus those of 1.5·2²³; |qf − RNE(qf)| and its distance to 1/2 are exact.
SPATTN_INLINE bool round_certified(float qf, float rel, std::int32_t& out) {
  if (!(qf > -4194304.0f && qf < 4194304.0f)) return false;
  const float t = qf + kRoundMagic;
  const float r = t - kRoundMagic;
  const float off = (qf > r ? qf - r : r - qf) - 0.5f;  // minus the distance to the nearest half-integer
  if (!((off < 0.0f ? -off : off) > rel * (qf < 0.0f ? -qf : qf))) return false;
  out = magic_int(t);
  return true;
}

/// Smoothing bias of key j for a row in integer units: RNE(qmk_j / (sq·sk)) — the double quotient rounded to nearest
/// even — clamped to ±2^30 (unit > 0).
/// Fast path with the same result: the fp32 quotient qf = RN(qmk / unit) is within 2⁻²⁴·|Q| of the exact quotient Q
/// (and the double one within 2⁻⁵³·|Q|); round_certified with rel = 1.2e-7 (> 2·2⁻²⁴) gives RNE of all three.
/// Otherwise (near a tie, large, NaN) the double division decides.
/// tests/test_sale.cpp checks it against the double formula on random and constructed near-tie quotients.
SPATTN_INLINE std::int64_t bias_units(float qmk, float unit) {
  std::int32_t fast = 0;
  if (round_certified(qmk / unit, 1.2e-7f, fast)) return fast;  // IEEE division (no fast-math anywhere in the build)
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  double b = rint(static_cast<double>(qmk) / unit);
#else
  double b = std::nearbyint(static_cast<double>(qmk) / unit);
#endif
  b = b < -1073741824.0 ? -1073741824.0 : (b > 1073741824.0 ? 1073741824.0 : b);
  return static_cast<std::int64_t>(b);
}

/// bias_units(qmk, unit) without a division, from rcp = 1.0f / unit (IEEE; a GPU thread divides once for all its keys
/// of one unit), when the fp32 product certifies it: sets `bias` and returns true; false (bias untouched) when
/// bias_units(qmk, unit) must decide. qf = RN(qmk·rcp) is within (2·2⁻²⁴ + 2⁻⁴⁸)·|Q| of the exact quotient Q, so
/// round_certified with rel = 4.8e-7 (> 2⁻²¹) gives RNE(Q) = bias_units (no clamp below 2²²). tests/test_sale.cpp checks
/// it against the double division.
SPATTN_INLINE bool bias_units_certified(float qmk, float rcp, std::int32_t& bias) {
  return round_certified(qmk * rcp, 4.8e-7f, bias);
}
/// bias_units(qmk, unit) from rcp = 1.0f / unit: the certified product, else the division.
SPATTN_INLINE std::int64_t bias_units(float qmk, float unit, float rcp) {
  std::int32_t b = 0;
  return bias_units_certified(qmk, rcp, b) ? b : bias_units(qmk, unit);
}

/// Estimated raw logit of an integer score v = acc + bias: (sq·sk)·v.
SPATTN_INLINE float dequantize(float sq, float sk, std::int64_t v) { return (sq * sk) * static_cast<float>(v); }

/// The largest estimate of one row over the keys of one K scale group (they share sk): the integer max of
/// acc + bias over keys with a non-zero unit sq·sk, dequantized once — the same decision as per key, because the
/// dequantization is monotone — and, for keys whose unit is 0 (q' = 0 or k' = 0), their exact bias qmk.
struct GroupMax {
  std::int64_t best = 0;
  bool any = false;
  float exact = -INFINITY, sq = 0.0f, sk = 0.0f;
  SPATTN_HD void add(std::int64_t acc, float qmk, float q_scale, float k_scale) {
    add_biased(acc, q_scale * k_scale > 0.0f ? bias_units(qmk, q_scale * k_scale) : 0, qmk, q_scale, k_scale);
  }
  /// add() with the key's bias bias_units(qmk, q_scale·k_scale) computed by the caller (ignored when the unit is 0):
  /// the two rows of a Q scale group share it, so a GPU thread holding both divides once.
  SPATTN_HD void add_biased(std::int64_t acc, std::int64_t bias, float qmk, float q_scale, float k_scale) {
    if (q_scale * k_scale > 0.0f) {
      const std::int64_t v = acc + bias;
      best = !any || best < v ? v : best;
      any = true;
      sq = q_scale;
      sk = k_scale;
    } else {
      exact = exact < qmk ? qmk : exact;
    }
  }
  SPATTN_HD float estimate() const {
    if (!any) return exact;
    const float d = dequantize(sq, sk, best);
    return exact < d ? d : exact;
  }
};

/// A candidate block is selected when its margin max(est − T) over its valid (row, key) pairs is ≥ 0
/// (the paper's select-on-tie).
SPATTN_INLINE bool selected(float margin) { return margin >= 0.0f; }

// ---- the decision without the bias division: the bias folded into the integer accumulator ----
//
// Pairs that share one unit u = q_scale·k_scale > 0 (one Q scale group × one K scale group, u rounded as GroupMax
// rounds it) get an integer stand-in for the bias from rcp = RN(1/u): c_j = folded_bias(qmk_j, rcp), the integer
// nearest qmk_j·rcp, exact by the 1.5·2²³ magic number when folded_bias_ok (|qmk_j·rcp| < 2²¹ for every pair, rcp a
// normal float). A GPU takes the largest acc_ij + c_j of a row group in integers (one add-and-max per pair); that
// value V bounds the group's GroupMax:
//   b_j = bias_units(qmk_j, u) = RNE(qmk_j/u) (no clamp: |qmk_j/u| < 2²¹ + 1) is within 1/2 + 2⁻⁵³·|qmk_j/u| of qmk_j/u;
//   c_j is within 1/2 of qmk_j·rcp, which is within 2⁻²⁴·|qmk_j/u| ≤ 1/8 of qmk_j/u; so |b_j − c_j| < 2, and both are
//   integers: |b_j − c_j| ≤ 1. The group's best = max_j(acc_j + b_j) over the same pairs is in [V − 1, V + 1]
//   (|acc| ≤ R²·d < 2²² for d ≤ 256, so |V| + 1 < 2²⁴: every float below is exact), and its estimate RN(u·best) lies
//   between RN(u·(V − 1)) and RN(u·(V + 1)) because RN is monotone and u > 0.
// The row group is surely selected (some estimate ≥ T) when RN(u·(V − 1)) ≥ T, surely not when RN(u·(V + 1)) < T;
// otherwise, or when the guard fails (u = 0, a huge or non-finite qmk, NaN), the exact rules decide.
// An undecided row group is settled when bias_units_certified(qmk_j, rcp) holds for every pair: then c_j = b_j (the
// exact product qmk_j·rcp is within 2⁻²⁴·(1 + 2⁻²³) of RN(qmk_j·rcp), which is farther than that from every
// half-integer, so the fma's nearest integer and the certified rounding agree), V IS GroupMax's integer max and RN(u·V)
// its estimate: selected iff RN(u·V) ≥ T (folded_exact_decision).
// tests/test_sale.cpp checks every sure and every settled answer against GroupMax and `selected` on random and
// near-tie pairs.

/// rcp = RN(1/unit) is a normal float and qmk_bound·rcp < 2²¹, qmk_bound ≥ |qmk| of every pair (NaN or ∞: false).
SPATTN_INLINE bool folded_bias_ok(float rcp, float qmk_bound) {
  return rcp >= 1.17549435e-38f && rcp <= 3.40282347e38f && qmk_bound * rcp < 2097152.0f;
}
/// The integer nearest qmk·rcp: RN(qmk·rcp + 1.5·2²³) has ulp 1 for |qmk·rcp| < 2²², so its bits carry it.
SPATTN_INLINE std::int32_t folded_bias(float qmk, float rcp) {
  return magic_int(fma_f32(qmk, rcp, kRoundMagic));
}
/// +1: the row group surely has an estimate ≥ thr (selected); −1: surely none; 0: the exact rules must decide.
/// best: the largest acc + folded_bias over the group's valid pairs of unit `unit` (folded_bias_ok held).
SPATTN_INLINE int folded_decision(std::int32_t best, float unit, float thr) {
  if (unit * static_cast<float>(best - 1) >= thr) return 1;
  if (unit * static_cast<float>(best + 1) < thr) return -1;
  return 0;
}
/// c = folded_bias(qmk, rcp) is bias_units(qmk, unit) itself (the certified product; folded_bias_ok held).
SPATTN_INLINE bool folded_bias_exact(float qmk, float rcp) {
  std::int32_t b = 0;
  return bias_units_certified(qmk, rcp, b);
}
/// The decision when folded_bias_exact held for every valid pair of the group: +1 (selected) or −1.
SPATTN_INLINE int folded_exact_decision(std::int32_t best, float unit, float thr) {
  return unit * static_cast<float>(best) >= thr ? 1 : -1;
}
/// folded_decision and folded_exact_decision of one threshold and unit as integer comparisons, for a GPU that meets
/// the same (unit, thr) with many values of best (block groups: a row's unit is the same for a whole key segment).
/// L = the least integer v with RN(unit·v) ≥ thr (RN(unit·v) is non-decreasing in v for unit > 0, so the v that reach
/// thr are [L, ∞)), clamped to ±2²⁴: then folded_decision(best) is +1 iff best ≥ L + 1 (RN(unit·(best − 1)) ≥ thr),
/// −1 iff best ≤ L − 2 (RN(unit·(best + 1)) < thr), and folded_exact_decision +1 iff best ≥ L, for |best| < 2²³ (the
/// accumulator's bound, folded_bias_ok's) — a clamped L is beyond every such best's reach. A NaN threshold meets no
/// comparison: never sure, and never selected exactly (as the float forms). unit > 0 where folded_bias_ok held; any
/// other unit (0, negative, NaN) gets bounds that are never sure. rcp = RN(1/unit) (a GPU has it already): the search
/// starts at ⌈RN(thr·rcp)⌉, within a few units of L (|thr·rcp − thr/unit| ≤ 2⁻²²·|thr/unit|), and the clamps hold for
/// it (RN(thr·rcp) ≥ 2²⁴ means thr/unit > 2²⁴ − 5, beyond every RN(unit·v) with |v| ≤ 2²³ + 1): the decisions do not
/// depend on rcp, only the steps of the search do.
/// tests/test_sale.cpp checks it against the float forms on random and constructed boundary thresholds, also with a
/// reciprocal a few ulps off.
struct FoldedBounds {
  std::int32_t sure_from;    ///< best ≥ sure_from: folded_decision is +1
  std::int32_t sure_not_to;  ///< best ≤ sure_not_to: folded_decision is −1
  std::int32_t exact_from;   ///< best ≥ exact_from: folded_exact_decision is +1 (else −1)
};
SPATTN_INLINE FoldedBounds folded_bounds(float unit, float rcp, float thr) {
  constexpr std::int32_t kLimit = 1 << 24;
  if (!(thr == thr) || !(unit > 0.0f)) return {INT32_MAX, INT32_MIN, INT32_MAX};
  const float v = thr * rcp;
  std::int32_t l = kLimit;
  if (!(v < static_cast<float>(kLimit))) l = kLimit;
  else if (!(v > -static_cast<float>(kLimit))) l = -kLimit;
  else {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    l = static_cast<std::int32_t>(ceilf(v));
#else
    l = static_cast<std::int32_t>(std::ceil(v));
#endif
    while (l > -kLimit && unit * static_cast<float>(l - 1) >= thr) --l;
    while (l < kLimit && unit * static_cast<float>(l) < thr) ++l;
  }
  return {l + 1, l - 2, l};
}
/// folded_decision from the bounds: +1, −1, or 0 (the exact rules decide).
SPATTN_INLINE int folded_decision(std::int32_t best, const FoldedBounds& b) {
  return best >= b.sure_from ? 1 : best <= b.sure_not_to ? -1 : 0;
}
/// folded_exact_decision from the bounds.
SPATTN_INLINE int folded_exact_decision(std::int32_t best, const FoldedBounds& b) { return best >= b.exact_from ? 1 : -1; }

/// Two int4 codes per byte: channel 2c in the low nibble, 2c+1 in the high nibble (two's complement).
std::vector<std::uint8_t> pack_int4(const std::vector<std::int8_t>& codes);
std::vector<std::int8_t> unpack_int4(const std::vector<std::uint8_t>& bytes);

/// Tuned τ per head (SALE's calibration): JSON with "method": "sale".
struct Params {
  int bits = 4;
  Groups groups = Groups::thread;
  std::int64_t local_window = 128;
  float theta = 0.4f;
  std::vector<float> tau;
  Config config() const;
};

}  // namespace spattn::sale

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include "spattn/options.hpp"

namespace spattn::sale {

inline constexpr double kTauSweep[] = {0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.004, 0.001};
inline constexpr Refusal kRefusals[] = {{.names = "tile_q|tile_k", .reason = "sale uses 64×32 blocks"}};

// clang-format off
inline constexpr Option kOptions[] = {
    {.name = "bits", .field = SPATTN_FIELD(Config, bits), .symbol = "",
     .doc = "estimate codes: 4 (int4) or 8 (int8, the Hopper path; same groups)", .lo = 4, .hi = 8},
    {.name = "groups", .field = SPATTN_FIELD(Config, groups), .symbol = "",
     .doc = "quantization scale groups: the mma's per-thread groups (the paper) or one Q scale per 64-row block and "
            "K scales per 128-key segment (use with bits 8)",
     .choices = "thread|block"},
    {.name = "local_window", .field = SPATTN_FIELD(Config, local_window), .symbol = "NL·32",
     .doc = "local keys before the diagonal, counted exactly", .lo = 0,
     .hi = static_cast<double>(std::int64_t{1} << 40), .multiple_of = kBlockK},
    {.name = "tau", .field = SPATTN_FIELD(Config, tau), .symbol = "τ",
     .doc = "relative-score threshold: a block kept when an estimate ≥ m̃ + √d·ln(τ·l̃)", .lo = 0.0, .hi = 1.0,
     .note = " (0 = dense head)", .sweep = kTauSweep},
};
// clang-format on

inline constexpr OptionTable kOptionTable{
    .method = "sale",
    .summary = "SALE: int4 estimates, relative score vs exact sink-local statistics",
    .options = kOptions,
    .refusals = kRefusals};
constexpr const OptionTable& option_table(const Config&) { return kOptionTable; }

}  // namespace spattn::sale
#endif
