// SpargeAttn (research/spargeattn.md, paper 000): block-mask prediction from pooled Q/K and block
// self-similarity (Stage 1), and the sparse warp online softmax — PV-skip — as an executor option (Stage 2).
//
// Stage 1 (spec §3, the authors' code where it is sound):
// - Blocks of block_q query rows and block_k keys (defaults 128 × 64, the paper and sm80/89 code; the Hopper
//   geometry 64 × 128 is a config). K is mean-centred first: K' = K − mean over the sequence's keys (per KV
//   head; softmax-invariant per row).
// - q̄_i, k̄_j: fp32 means over the block's VALID rows (true count). Self-similarity
//   s = ‖mean of the unit vectors x_r/‖x_r‖‖² (the code's Gram-matrix mean in closed form, self-pairs
//   included), over valid, non-zero rows only; a block is self-similar iff s > θ (strict, as the code).
// - Scores: Ŝ_ij = q̄_i·k̄_j·scale (base 2 internally); non-self-similar key blocks are −∞; causal blocks
//   that lie entirely after the query block's last diagonal are −∞. Row softmax, then TopCdf with the
//   SpargeAttn rule — the longest prefix with cumulative mass ≤ τ·Z, crossing excluded, at least one
//   block — or top-k with k = ⌊ρ·valid blocks⌋ (valid = causally reachable, not all; at least 1).
// - Forced on: every non-self-similar key block (its whole column), every non-self-similar query block
//   (its whole row), for causal inputs the diagonal blocks (every key block holding a diagonal key of the
//   query block, so no row is empty), and key block 0 when attention_sink. All clipped to the causal region.
// - θ is per query head; the key-block similarity is computed per KV head and compared with each query
//   head's θ (GQA). A per-head dense flag replaces the code's (τ = 1, θ = 1) encoding.
// Decisions where the code disagrees or is unsound, with reasons:
// - Tail blocks and zero-norm rows: statistics over valid rows only; a zero row contributes nothing to the
//   unit-vector mean; a block with no non-zero row is non-self-similar (conservative: dense). The code's
//   padded rows make every tail block NaN and hence dense by accident.
// - Causal alignment is bottom-right (query i sees keys ≤ i + Nkv − Nq), like the rest of spattn; the code
//   is top-left and assumes Nq = Nkv.
// - TopCdf with exact fixed-point mass sums (topcdf.hpp) and a total order (ties by lower index), relative to
//   Z = Σp; the code's bf16 CDF with an unstable sort is not reproducible (spec §4.1).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "spattn/config.hpp"
#include "spattn/numerics.hpp"

namespace spattn::sparge {

// ---- Stage-1 rules (host + device; the reference's loops and every backend's estimator call these) ----

/// Block self-similarity ‖(1/n') Σ_r x_r/‖x_r‖‖² over the n' non-zero rows of a [rows × d] block: the mean of
/// the cosine Gram matrix including its diagonal, in [0, 1]; −1 when every row is zero (the caller treats that block as not
/// self-similar). fp32 in a fixed order, in three steps a GPU runs in parallel with the same bits:
///   1. per row r (independent): inv_r = row_inv_norm(x_r) — squares summed over c in order, 1/√; −1 marks a
///      row whose sum of squares is not > 0 (zero or NaN: left out);
///   2. per column c (independent): u_c = Σ_r x_rc · inv_r over the non-zero rows in order (unit_sum; `u` continues
///      a sum, for a caller that stages the rows piece by piece);
///   3. similarity_of(u, n', d) = Σ_c (u_c / n')² in order (u_c · (1/n') with one fp32 reciprocal), clamped to 1.
/// `value(r, c)` is the block's entry; the serial form below composes the steps (the reference's order).
template <class Value>
SPATTN_INLINE float row_inv_norm(Value value, std::int64_t r, std::int64_t d) {
  float sq = 0.0f;
  for (std::int64_t c = 0; c < d; ++c) sq += value(r, c) * value(r, c);
  return sq > 0.0f ? 1.0f / std::sqrt(sq) : -1.0f;
}
template <class Value>
SPATTN_INLINE float unit_sum(Value value, const float* inv, std::int64_t rows, std::int64_t c, float u = 0.0f) {
  for (std::int64_t r = 0; r < rows; ++r)
    if (inv[r] >= 0.0f) u += value(r, c) * inv[r];
  return u;
}
SPATTN_INLINE float similarity_of(const float* u, std::int64_t nonzero, std::int64_t d) {
  if (nonzero == 0) return -1.0f;
  float s = 0.0f;
  const float inv_n = 1.0f / static_cast<float>(nonzero);
  for (std::int64_t c = 0; c < d; ++c) {
    const float m = u[c] * inv_n;
    s += m * m;
  }
  return s > 1.0f ? 1.0f : s;  // ≤ 1 exactly; fp32 rounding may exceed it, and θ = 1 must mean "none similar"
}
/// Serial form over a row-major block; `scratch` holds rows + d floats.
SPATTN_INLINE float self_similarity(const float* x, std::int64_t rows, std::int64_t d, float* scratch) {
  const auto value = [&](std::int64_t r, std::int64_t c) { return x[r * d + c]; };
  float* inv = scratch;
  float* u = scratch + rows;
  std::int64_t nonzero = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    inv[r] = row_inv_norm(value, r, d);
    nonzero += inv[r] >= 0.0f ? 1 : 0;
  }
  for (std::int64_t c = 0; c < d; ++c) u[c] = unit_sum(value, inv, rows, c);
  return similarity_of(u, nonzero, d);
}
/// Host convenience form (scratch resized to rows + d).
inline float self_similarity(const float* x, std::int64_t rows, std::int64_t d, std::vector<float>& scratch) {
  scratch.resize(static_cast<std::size_t>(rows + d));
  return self_similarity(x, rows, d, scratch.data());
}

/// A block is self-similar iff its similarity exceeds θ (strict, as the code).
SPATTN_INLINE bool self_similar(float similarity, float theta) { return similarity > theta; }

/// Every block of a query row is forced on when the head is dense or the query block is not self-similar.
SPATTN_INLINE bool row_forced(bool dense_head, bool q_self_similar) { return dense_head || !q_self_similar; }

/// A key block that is not self-similar is forced on in every row (its whole column) and takes no part in
/// the selection; a self-similar reachable block is a candidate.
SPATTN_INLINE bool column_forced(bool k_self_similar) { return !k_self_similar; }
SPATTN_INLINE bool candidate(std::int64_t j, std::int64_t reach, bool k_self_similar) { return j < reach && k_self_similar; }

/// Pooled score of (query block, key block) in base-2 units: dot_lanes8(q̄, k̄) · scale·log2 e (score_of its dot);
/// k̄'s entries lie k_stride floats apart.
SPATTN_INLINE float score_of(float dot, float scale_log2) { return dot * scale_log2; }
SPATTN_INLINE float pooled_score(const float* q_mean, const float* k_mean, int d, float scale_log2,
                                 long long k_stride = 1) {
  return score_of(dot_lanes8(q_mean, k_mean, d, k_stride), scale_log2);
}

/// The selection runs when the row has a candidate and its max pooled score is finite; a row whose
/// candidates' max is ±inf or NaN (non-finite inputs) keeps every block instead.
SPATTN_INLINE bool scores_usable(int candidates, float max_score) { return candidates > 0 && std::isfinite(max_score); }

/// Top-k entry point: k = ⌊ρ · reachable blocks⌋, at least 1 (reachable, not only candidate, blocks).
SPATTN_INLINE std::int64_t topk_count(float topk, std::int64_t reach) {
  const auto k = static_cast<std::int64_t>(topk * static_cast<float>(reach));
  return k > 1 ? k : 1;
}

/// Causal inputs: the key blocks [first, last] (clipped to reach) holding a diagonal key of the query block
/// whose rows are [row_first, row_last] (offset = Nkv − Nq), so no row is left without a key.
struct BlockRange {
  std::int64_t first = 0, last = -1;  ///< inclusive; empty when last < first
};
SPATTN_INLINE BlockRange diagonal_blocks(std::int64_t row_first, std::int64_t row_last, std::int64_t offset,
                                         std::int64_t block_k, std::int64_t reach) {
  BlockRange r;
  r.first = (row_first + offset) / block_k;
  const std::int64_t last = (row_last + offset) / block_k;
  r.last = last < reach - 1 ? last : reach - 1;
  return r;
}

/// Defaults: the entry point the authors' README recommends to users (spas_sage2_attn_meansim_topk_cuda) is θ = −0.1,
/// top-k ρ = 0.5 (spec §7); the default here is θ = −0.1 with ρ = 0.9, the setting that kept both trained models of
/// bench/results/quality.md within +1 % held-out loss: ρ 0.5 cost +4.05 % / +2.12 % (LM 8K / 32K) and +1.50 % /
/// +0.77 % (video DiT 8K / 32K); ρ 0.7 +2.41 % / +1.02 %; ρ 0.9 +0.56 % / +0.09 % and +0.13 % / +0.05 %
/// (H100, 2026-11-27). At ρ 0.9 the method is no faster than dense on that LM (0.98× cuDNN at 32K): give topk (or
/// calibrate) to trade quality for speed. The TopCdf entry point is ρ = 0 with τ (code default 0.98, with θ = 0.6;
/// note that θ = 0.6 marks most mean-centred key blocks "not self-similar", i.e. dense, on real inputs).
/// PV-skip is off by default: the code's pvthreshd = 50 skips a tile only when its weights are < 2^-50, which
/// changes nothing measurable; spattn calibrate sets per-head thresholds.
/// Ranges and docs: kOptions below (validate() checks them).
struct Config {
  std::int32_t block_q = 128;
  std::int32_t block_k = 64;
  std::vector<float> theta = {-0.1f};  ///< simthreshd per query head (one value = all heads)
  std::vector<float> tau = {0.98f};    ///< cdfthreshd per query head
  float topk = 0.9f;
  bool attention_sink = false;
  std::vector<std::uint8_t> dense_heads;
  std::vector<float> pv_threshold;  ///< Stage 2; sparse_attention() passes it to the executor
  bool qk_int8 = false;             ///< Stage 2; sparse_attention() passes it to the executor

  float theta_of(std::int64_t h) const { return theta.size() == 1 ? theta[0] : theta[static_cast<std::size_t>(h)]; }
  float tau_of(std::int64_t h) const { return tau.size() == 1 ? tau[0] : tau[static_cast<std::size_t>(h)]; }
  bool dense_head(std::int64_t h) const {
    return !dense_heads.empty() && dense_heads[static_cast<std::size_t>(h)] != 0;
  }
  /// Throws spattn::Error naming the bad field; heads_q sizes the per-head vectors.
  void validate(std::int64_t heads_q) const;
};

/// Tuned per-head hyper-parameters (the tuner's output; spattn calibrate writes them as JSON).
struct HeadParams {
  float theta = -1.0f, tau = 1.0f;
  float pv_threshold = INFINITY;  ///< base 2 (the code's pvthreshd); +inf = no PV-skip
  bool dense = false;
  double sparsity = 0.0;  ///< 1 − executed / reachable tiles at these parameters on the calibration inputs
  double rel_l1 = 0.0;    ///< worst relative L1 error over the calibration inputs
};

struct Params {
  std::int32_t block_q = 128, block_k = 64;
  float l1 = 0.08f, l2 = 0.09f;
  std::vector<HeadParams> heads;

  Config config() const;                    ///< per-head θ, τ and dense flags
  std::vector<float> pv_thresholds() const;  ///< per-head PV-skip thresholds for AttendOptions
};

}  // namespace spattn::sparge

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <span>
#include <string_view>

#include "spattn/mask.hpp"
#include "spattn/options.hpp"

namespace spattn::sparge {

inline constexpr double kTopkSweep[] = {0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95};

// clang-format off
inline constexpr Option kOptions[] = {
    {.name = "block_q", .field = SPATTN_FIELD(Config, block_q), .symbol = "b_q", .doc = "query rows per block (the mask's query tile)",
     .lo = MaskShape::kMinTileQ, .hi = MaskShape::kMaxTileQ, .aliases = "tile_q"},
    {.name = "block_k", .field = SPATTN_FIELD(Config, block_k), .symbol = "b_k", .doc = "keys per block (the mask's key tile)",
     .lo = MaskShape::kMinTileK, .hi = MaskShape::kMaxTileK, .aliases = "tile_k"},
    {.name = "theta", .field = SPATTN_FIELD(Config, theta), .symbol = "θ",
     .doc = "block self-similarity threshold (self-similar iff similarity > θ; 1 = dense)", .lo = -1.0, .hi = 1.0,
     .note = " (1 = no block self-similar: dense)", .aliases = "sim_threshold"},
    {.name = "tau", .field = SPATTN_FIELD(Config, tau), .symbol = "τ",
     .doc = "TopCdf mass: the longest prefix of mass ≤ τ·Z (when ρ = 0; giving τ alone selects TopCdf)", .lo = 0.0,
     .hi = 1.0, .aliases = "cdf_threshold"},
    {.name = "topk", .field = SPATTN_FIELD(Config, topk), .symbol = "ρ",
     .doc = "ρ > 0 keeps ⌊ρ·reachable blocks⌋ per row (top-k); 0 = TopCdf with τ", .lo = 0.0, .hi = 1.0,
     .note = " (0 = TopCdf)", .sweep = kTopkSweep},
    {.name = "attention_sink", .field = SPATTN_FIELD(Config, attention_sink), .symbol = "",
     .doc = "always keep key block 0", .aliases = "sink"},
    {.name = "dense", .field = SPATTN_FIELD(Config, dense_heads), .symbol = "",
     .doc = "per query head: keep every block (spattn calibrate)", .heads = Heads::none_or_each, .by_name = false},
    {.name = "pv_threshold", .field = SPATTN_FIELD(Config, pv_threshold), .symbol = "λ",
     .doc = "Stage 2 PV-skip: skip a key tile whose max is this far (base 2) below the running max; per head",
     .lo = 0.0, .hi = INFINITY, .note = " (inf = off)", .heads = Heads::none_one_or_each, .by_name = false},
    {.name = "qk_int8", .field = SPATTN_FIELD(Config, qk_int8), .symbol = "",
     .doc = "Stage 2 computes QKᵀ in int8 on smoothed K (the authors' SageAttention kernels; off: exact)"},
};
// clang-format on

/// Giving τ without ρ selects the TopCdf entry point (ρ = 0).
inline void settle_options(void* config, std::span<const std::string_view> given) {
  bool tau = false, topk = false;
  for (std::string_view n : given) {
    tau = tau || n == "tau";
    topk = topk || n == "topk";
  }
  if (tau && !topk) static_cast<Config*>(config)->topk = 0.0f;
}

inline constexpr OptionTable kOptionTable{
    .method = "sparge",
    .summary = "SpargeAttn: pooled scores + self-similarity; top-k ρ, or TopCdf τ when ρ = 0",
    .options = kOptions,
    .settle = settle_options};
constexpr const OptionTable& option_table(const Config&) { return kOptionTable; }

}  // namespace spattn::sparge
#endif
