// SALE (research/sale.md, paper 001): low-bit estimates of the attention weights, the relative attention
// score against exact sink-local statistics, and per-head τ calibration.
//
// Quantization (spec §2; precision of every step defined here in fp32 — the authors' Triton precision is
// ambiguous):
// - Smoothing with one mean per head over the sequence: Q' = Q − μ_q, K' = K − μ_k (fp32). The per-key bias
//   qmk_j = μ_q·k'_j restores q·k' = q'·k' + qmk_j (softmax-invariant K smoothing needs no correction).
// - Symmetric codes in [−R, R], R = 7 (int4) or 127 (int8, the Hopper path, same groups): code =
//   round-to-nearest-even(x·R/amax), clamped; stored scale amax/R. Groups are the mma per-thread groups:
//   Q rows 16a+r and 16a+r+8 (r < 8) share a scale; in each aligned 32-key block, key n belongs to group
//   (n mod 8) div 2 (8 keys). amax is taken over the group's valid rows only (tail rows never vote).
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

#include <cstdint>
#include <string>
#include <vector>

namespace spattn::sale {

struct Config {
  int bits = 4;                     ///< 4 or 8
  std::int64_t local_window = 128;  ///< NL·32 keys
  std::vector<float> tau = {0.004f};  ///< per query head (one value = all); the paper's example value
  /// Throws spattn::Error naming the bad field.
  void validate(std::int64_t heads_q) const;
  float tau_of(std::int64_t h) const { return tau.size() == 1 ? tau[0] : tau[static_cast<std::size_t>(h)]; }
  int range() const { return bits == 4 ? 7 : 127; }
};

constexpr std::int32_t kBlockQ = 64, kBlockK = 32, kSegment = 4;

/// Round to nearest even, clamped to [−range, range].
int quant_code(float x, float inv_scale, int range);
/// Two int4 codes per byte: channel 2c in the low nibble, 2c+1 in the high nibble (two's complement).
std::vector<std::uint8_t> pack_int4(const std::vector<std::int8_t>& codes);
std::vector<std::int8_t> unpack_int4(const std::vector<std::uint8_t>& bytes);

/// Tuned τ per head (SALE's calibration): JSON with "method": "sale".
struct Params {
  int bits = 4;
  std::int64_t local_window = 128;
  float theta = 0.4f;
  std::vector<float> tau;
  Config config() const;
};

}  // namespace spattn::sale
