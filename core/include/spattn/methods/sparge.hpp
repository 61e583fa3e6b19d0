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
// - TopCdf in fp32 with a total order (ties by lower index), relative to Z = Σp; the code's bf16 CDF with an
//   unstable sort is not reproducible (spec §4.1).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace spattn::sparge {

/// Block self-similarity ‖(1/n') Σ_r x_r/‖x_r‖‖² over the n' non-zero rows of a [rows × d] block (row-major):
/// the mean of the cosine Gram matrix including its diagonal. −1 when every row is zero (the caller treats
/// that block as not self-similar). fp32, rows in order; `scratch` is resized to d.
float self_similarity(const float* x, std::int64_t rows, std::int64_t d, std::vector<float>& scratch);

struct Config {
  std::int32_t block_q = 128;
  std::int32_t block_k = 64;
  std::vector<float> theta = {0.6f};  ///< simthreshd per query head (one value = all heads); code default 0.6
  std::vector<float> tau = {0.98f};   ///< cdfthreshd per query head; code default 0.98
  float topk = 0.0f;                  ///< ρ > 0 selects top-k instead of TopCdf
  bool attention_sink = false;
  std::vector<std::uint8_t> dense_heads;  ///< per query head: 1 = keep every block (empty: none)

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
