// BFLA (research/bfla.md, paper 004): flattened-group block pooling, keep-mass selection, tile rescues.
//
// Stage 1. Query blocks are local to the chunk (block i = query rows [i·b, (i+1)·b)), KV blocks absolute
// (block j = keys [j·b, (j+1)·b)); N_c = Nkv − Nq is the chunk offset. Each block is cut into G = b/g groups
// of g tokens; the group-pair score is the dot product of the flattened groups = the sum of the g logits on
// one diagonal of the g×g logit block (spec §2.2); the block score S[p,i,j] is the max over group pairs.
// Causal blocks: j·b ≤ e_i = min(N_c + (i+1)·b − 1, Nkv − 1). Block softmax of scale·S over the causal
// blocks; keep-mass: TopCdf with the crossing block included (smallest prefix with mass ≥ γ); one mask per
// KV head as the union over its query heads. The code's extra rules (probability threshold, top-k floor)
// are optional and off by default.
//
// Stage 2. Sink (KV block 0) and a local band of L_c = max(1, ⌈n_local·T/b⌉) blocks before every KV block
// the query block overlaps; stride rescue (131·i + 17·j + s) mod η = 0 (floor mod) and random rescue
// ((i+1)·1103515245 + (j+1)·12345 + (h+1)·2654435761 + s) & 0x7FFFFFFF mod 10⁶ < ⌊ρ·10⁶⌋, both in int64 over
// the dropped causal blocks, then expansion to the executor's tiles (tile_q = min(128, b), tile_k = T).
//
// Decisions, with reasons:
// - Padded groups (past the end of Q or K) are excluded from the max, not zero-filled: a zero-padded
//   group scores exactly 0 and can dominate the max of a block with negative scores (the code's artefact).
//   Partially padded groups sum their real tokens only (identical to zero padding).
// - The local band anchors on EVERY KV block the query block overlaps (first to last token), not only the
//   block of its first token: with N_c mod b ≠ 0 the code's band misses the keys nearest to the later
//   queries of the block, even their own positions (spec §6.2, §14).
// - Rescue hashes use the model's KV-head index h (the code's is local to the tensor-parallel rank).
// - Rescues run on the coarse grid by default, as the code (whose numbers the paper reports); on the tile
//   grid (the paper's equations) i, j are tile indices of the expanded mask.
// - γ ≥ 1 keeps every causal block; γ ≤ 0 disables the mass rule (only sink, band and rescues remain).
// - Rows whose block scores are not finite (NaN/Inf inputs) keep every causal block.
#pragma once

#include <cstdint>

#include "spattn/config.hpp"

namespace spattn::bfla {

enum class RescueGrid : std::uint8_t { coarse, tile };

struct Config {
  std::int32_t block = 256;  ///< b
  std::int32_t group = 64;   ///< g (divides b)
  float gamma = 0.99f;       ///< keep-mass γ
  std::int32_t n_local = 8;  ///< local band in executor tiles (T keys each)
  std::int32_t tile = 32;    ///< T: executor key tile (divides b)
  std::int64_t eta = 0;      ///< stride rescue period (0 = off)
  float rho = 0.0f;          ///< random rescue fraction (0 = off, >= 1 = all dropped blocks)
  std::int64_t seed = 0;     ///< s, shared by both rescues
  RescueGrid rescue_grid = RescueGrid::coarse;
  float prob_threshold = 2.0f;    ///< code's threshold rule: keep blocks with probability > this (> 1 = off)
  float keep_ratio = 0.0f;        ///< code's top-k rule: k = max(min_keep, ⌊Lkv·ratio⌋) (0 and 0 = off)
  std::int32_t min_keep_blocks = 0;

  std::int32_t tile_q() const { return block < 128 ? block : 128; }
  /// Throws spattn::Error naming the bad field.
  void validate() const;
};

/// Stride rescue test: (131·i + 17·j + s) mod η == 0 with a floor modulus (η > 0).
SPATTN_INLINE bool stride_rescued(std::int64_t i, std::int64_t j, std::int64_t s, std::int64_t eta) {
  const std::int64_t x = 131 * i + 17 * j + s;
  std::int64_t r = x % eta;
  if (r < 0) r += eta;
  return r == 0;
}

/// Random rescue hash H = ((i+1)·1103515245 + (j+1)·12345 + (h+1)·2654435761 + s) & 0x7FFFFFFF.
SPATTN_INLINE std::int64_t rescue_hash(std::int64_t i, std::int64_t j, std::int64_t h, std::int64_t s) {
  return ((i + 1) * 1103515245LL + (j + 1) * 12345LL + (h + 1) * 2654435761LL + s) & 0x7FFFFFFFLL;
}

/// Random rescue test: ρ ≥ 1, or H mod 10⁶ < ⌊ρ·10⁶⌋.
SPATTN_INLINE bool random_rescued(std::int64_t i, std::int64_t j, std::int64_t h, std::int64_t s, float rho) {
  if (rho >= 1.0f) return true;
  const auto limit = static_cast<std::int64_t>(static_cast<double>(rho) * 1e6);
  return rescue_hash(i, j, h, s) % 1000000 < limit;
}

}  // namespace spattn::bfla
