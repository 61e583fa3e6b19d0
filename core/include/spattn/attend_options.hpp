// What an attend() call takes besides the tensors and the mask (AttendOptions) and what it returns (AttendStats).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace spattn {

struct SoftmaxState;  // spattn/online_softmax.hpp

struct AttendOptions {
  std::string backend = "auto";  ///< "auto" or a backend's name ("reference", …)
  /// Optional [B, Hq, Nq] fp32 output: each row's natural-log log-sum-exp (-inf for a row with no key).
  /// Variable-length batches: row n of sequence b is at (b·Hq + h)·seqlen_q + n.
  float* lse = nullptr;
  /// Optional [B, Hq, Nq] output (indexed like lse, in the tensors' memory): each row's final base-2 online-softmax
  /// state (m, l) (spattn/online_softmax.hpp; (−inf, 0) for a row with no key). With O, what a later call resumes from.
  SoftmaxState* state_out = nullptr;
  /// Resume (optional [B, Hq, Nq] input, indexed like lse, in the tensors' memory): row i starts from the state
  /// resume[(b·Hq + h)·Nq + i] = (m, l) and the accumulator l·O[i] — O holding, in its dtype, the normalised output of
  /// the call that wrote that state (state_out) over the keys it covered — instead of the empty state (−inf, 0, 0);
  /// then it visits the keys of `mask` as always. A row whose l is 0 starts empty and O is not read. The two calls
  /// together compute attention over the union of their masks, up to rounding (O's dtype rounds the first call's part;
  /// the keys are visited in another order): so an estimator's exact pass over part of each row (AnchorAttention's
  /// anchor region) becomes part of the answer instead of being computed twice. With qk_int8, both calls must use
  /// it. Equivalently, a caller that has a row's natural-log LSE λ may pass (λ·log2 e, 1).
  const SoftmaxState* resume = nullptr;
  /// SpargeAttn's PV-skip (Stage 2, research/spargeattn.md §5), off at +inf. Key tiles are visited in
  /// ascending order; after QKᵀ of a tile, the rows of a vote group skip the tile — no max update, no
  /// weights in the denominator, no P·V — when for every row (tile max − running max) < −pv_threshold
  /// (base-2 units, the code's pvthreshd; λ = −pv_threshold·ln 2 in the paper's natural units).
  float pv_threshold = INFINITY;
  /// Per query head thresholds (SpargeAttn's tuned λ per head); overrides pv_threshold when not empty.
  std::vector<float> pv_threshold_per_head;
  /// Rows per vote: 16 = one warp (the paper), 32, 64 or 128 = that many warps' rows, 0 = the executor's whole
  /// row block of the query tile, min(tile_q, 128) rows (the code's CTA-wide vote).
  int pv_vote_rows = 0;
  /// The last tiles of every row are never skipped (the code: 2 on sm80/sm89, 1 on sm90); in [0, 2^20].
  int pv_exempt_last = 1;
  /// SpargeAttn's quantized compute mode (SageAttention-style, research/spargeattn.md §2): K is smoothed
  /// (K − its mean over the sequence, rounded to the input dtype), Q and K' are quantized to int8 per block
  /// of quant_block_q rows / quant_block_k keys (spattn/quant.hpp), QKᵀ is the exact integer product
  /// dequantized as acc · (scale_log2 · (δ_q · δ_k)), and P is rounded to the input dtype before P·V
  /// (fp32 accumulation; the softmax denominator uses the unrounded P).
  bool qk_int8 = false;
  int quant_block_q = 128, quant_block_k = 64;  ///< each in [1, 2^20]

  /// Throws spattn::Error naming the bad field: thresholds in [0, inf] (NaN is not), one per query head
  /// (heads_q) or none, the ranges above.
  void validate(std::int64_t heads_q) const;
};

struct AttendStats {
  std::string backend;           ///< which backend ran
  std::string kernel;            ///< which of its kernels ran, where the backend reports it (Kokkos: mma, tile, generic)
  std::int64_t empty_rows = 0;   ///< query rows that attended to no key (output zeros)
  std::int64_t visited_tiles = 0;  ///< (query-tile row, key tile) pairs processed, summed over query heads
  std::int64_t pv_skipped = 0;  ///< (vote group, key tile) pairs skipped by PV-skip, summed over query heads
};

}  // namespace spattn
