// BFLA (research/bfla.md, paper 004): flattened-group block pooling, keep-mass selection, tile rescues.
//
// Stage 1. Query blocks are local to the chunk (block i = query rows [i·b, (i+1)·b)), KV blocks absolute
// (block j = keys [j·b, (j+1)·b)); N_c = Nkv − Nq is the chunk offset. Each block is cut into G = b/g groups
// of g tokens; the group-pair score is the dot product of the flattened groups = the sum of the g logits on
// one diagonal of the g×g logit block (spec §2.2); the block score S[p,i,j] is the max over group pairs.
// Causal blocks: j·b ≤ e_i = min(N_c + (i+1)·b − 1, Nkv − 1). Block softmax of scale·S over the causal
// blocks; keep-mass: TopCdf with the crossing block included (smallest prefix with mass ≥ γ); one mask per
// KV head as the union over its query heads. The code's extra rules (probability threshold, top-k floor) are
// optional; the probability threshold is off by default, the top-k floor is on at half the causal blocks (below).
//
// Default keep_ratio 0.5 (the paper and its code: 0, the keep-mass alone), from quality: on the trained byte-level
// LM of bench/results/quality.md (H100, 2026-11-28), γ 0.99 alone kept 18 % / 5 % of the tiles at 8K / 32K and cost
// +17.8 % / +30.5 % held-out loss (+120 % on the trained DiT at 8K, 2026-11-27), and γ changed nothing (0.99 to
// 0.999): the flattened-group block scores are too peaked for a mass rule. The top-k floor is what works: keep_ratio
// 0.3 cost +1.44 % / +0.98 %, 0.5 +0.08 % / +0.11 % (density 0.88 / 0.90). keep_ratio = 0 restores the paper.
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
// - γ = 1 keeps every causal block; γ = 0 disables the mass rule (only sink, band and rescues remain).
// - Rows whose block scores are not finite (NaN/Inf inputs) keep every causal block.
#pragma once

#include <cstdint>

#include "spattn/config.hpp"

namespace spattn::bfla {

enum class RescueGrid : std::uint8_t { coarse, tile };

/// Ranges and docs: kOptions below (validate() checks them, and that g and T divide b).
struct Config {
  std::int32_t block = 256;
  std::int32_t group = 64;
  float gamma = 0.99f;
  std::int32_t n_local = 8;
  std::int32_t tile = 32;
  std::int64_t eta = 0;
  float rho = 0.0f;
  std::int64_t seed = 0;
  RescueGrid rescue_grid = RescueGrid::coarse;
  float prob_threshold = 2.0f;
  float keep_ratio = 0.5f;  ///< the paper: 0 (see the header comment)
  std::int32_t min_keep_blocks = 0;

  SPATTN_HD std::int32_t tile_q() const { return block < 128 ? block : 128; }
  /// Throws spattn::Error naming the bad field.
  void validate() const;
};

// ---- rules (host + device; the reference's loops and every backend's estimator call these) ----

/// Causal block limit of query block i: KV blocks j < causal_blocks(i) may be seen (all lkv blocks when not
/// causal): j·b ≤ e_i = min(N_c + (i+1)·b − 1, Nkv − 1), N_c = Nkv − Nq.
SPATTN_INLINE std::int64_t causal_blocks(std::int64_t i, std::int64_t nq, std::int64_t nkv, std::int64_t block, bool causal) {
  const std::int64_t lkv = (nkv + block - 1) / block;
  if (!causal) return lkv;
  const std::int64_t e0 = (nkv - nq) + (i + 1) * block - 1;
  const std::int64_t e = e0 < nkv - 1 ? e0 : nkv - 1;
  return e / block + 1;
}

/// Group pairs scored for the block pair (i, j): query groups [i·G, min((i+1)·G, gq)) × key groups
/// [j·G, min((j+1)·G, gk)), G = b/g, padded groups excluded. The block score is the max of the flattened-group
/// products over them, times scale·log2 e.
SPATTN_INLINE std::int64_t groups_end(std::int64_t block_index, std::int64_t groups_per_block, std::int64_t groups) {
  const std::int64_t e = (block_index + 1) * groups_per_block;
  return e < groups ? e : groups;
}

/// Local band L_c = max(1, ⌈n_local·T/b⌉) blocks.
SPATTN_INLINE std::int64_t local_blocks(std::int32_t n_local, std::int32_t tile, std::int32_t block) {
  const std::int64_t l = (std::int64_t{n_local} * tile + block - 1) / block;
  return l > 1 ? l : 1;
}

/// Sink and band of query block i: KV block 0 and the KV blocks [first − L_c, last] where first/last are the
/// KV blocks holding the block's first and last query positions (every block the query block overlaps).
struct Band {
  std::int64_t first = 0, last = -1;  ///< inclusive
};
SPATTN_INLINE Band band(std::int64_t i, std::int64_t nq, std::int64_t nkv, std::int64_t block, std::int64_t local) {
  const std::int64_t nc = nkv - nq, lkv = (nkv + block - 1) / block;
  const std::int64_t row_last = ((i + 1) * block < nq ? (i + 1) * block : nq) - 1;
  std::int64_t first = (nc + i * block) / block, last = (nc + row_last) / block;
  first = first < 0 ? 0 : (first > lkv - 1 ? lkv - 1 : first);
  last = last < 0 ? 0 : (last > lkv - 1 ? lkv - 1 : last);
  Band r;
  r.first = first - local > 0 ? first - local : 0;
  r.last = last;
  return r;
}

/// The code's top-k floor: k = clamp(max(min_keep, ⌊lkv·ratio⌋), 1, lkv) blocks by score (selection order).
SPATTN_INLINE std::int64_t topk_floor(std::int32_t min_keep, float keep_ratio, std::int64_t lkv) {
  const auto by_ratio = static_cast<std::int64_t>(static_cast<double>(lkv) * keep_ratio);
  std::int64_t k = min_keep > by_ratio ? std::int64_t{min_keep} : by_ratio;
  k = k < 1 ? 1 : k;
  return k > lkv ? lkv : k;
}

/// The code's probability threshold: keep a block whose share p/Z of the row exceeds prob_threshold.
SPATTN_INLINE bool above_prob_threshold(float p, float z, float prob_threshold) { return p / z > prob_threshold; }

/// The mass rule runs when the row's scores are finite and γ < 1 (else every causal block is kept); γ ≤ 0
/// disables it (only sink, band and rescues remain).
SPATTN_INLINE bool keep_all_blocks(bool scores_finite, float gamma) { return !scores_finite || gamma >= 1.0f; }

/// The coarse block of executor tile (r, t): (r·tile_q / b, t·T / b).
SPATTN_INLINE std::int64_t coarse_q(std::int64_t r, std::int32_t tile_q, std::int32_t block) { return r * tile_q / block; }
SPATTN_INLINE std::int64_t coarse_k(std::int64_t t, std::int32_t tile, std::int32_t block) { return t * tile / block; }

/// Stride rescue test: (131·i + 17·j + s) mod η == 0 with a floor modulus (η > 0).
SPATTN_INLINE bool stride_rescued(std::int64_t i, std::int64_t j, std::int64_t s, std::int64_t eta) {
  const std::int64_t x = 131 * i + 17 * j + s;
  std::int64_t r = x % eta;
  if (r < 0) r += eta;
  return r == 0;
}

/// Random rescue hash H = ((i+1)·1103515245 + (j+1)·12345 + (h+1)·2654435761 + s) & 0x7FFFFFFF, in wrapping
/// 64-bit arithmetic (the low 31 bits are those of the int64 sum wherever that does not overflow).
SPATTN_INLINE std::int64_t rescue_hash(std::int64_t i, std::int64_t j, std::int64_t h, std::int64_t s) {
  const std::uint64_t x = static_cast<std::uint64_t>(i + 1) * 1103515245ULL + static_cast<std::uint64_t>(j + 1) * 12345ULL +
                          static_cast<std::uint64_t>(h + 1) * 2654435761ULL + static_cast<std::uint64_t>(s);
  return static_cast<std::int64_t>(x & 0x7FFFFFFFULL);
}

/// Random rescue test: ρ ≥ 1, or H mod 10⁶ < ⌊ρ·10⁶⌋.
SPATTN_INLINE bool random_rescued(std::int64_t i, std::int64_t j, std::int64_t h, std::int64_t s, float rho) {
  if (rho >= 1.0f) return true;
  const auto limit = static_cast<std::int64_t>(static_cast<double>(rho) * 1e6);
  return rescue_hash(i, j, h, s) % 1000000 < limit;
}

}  // namespace spattn::bfla

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <cmath>

#include "spattn/options.hpp"

namespace spattn::bfla {

// BFLA's γ is inert on spattn's workloads (its block softmax runs on sums of 64 logits: one block takes all the mass,
// research/bfla.md §2.2, Table 5); the authors' code's top-k floor is the knob that moves its density.
inline constexpr double kKeepRatioSweep[] = {0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9};
inline constexpr Refusal kRefusals[] = {{.names = "tile_q", .reason = "bfla sets its query tile (min(128, block))"}};

// clang-format off
inline constexpr Option kOptions[] = {
    {.name = "block", .field = SPATTN_FIELD(Config, block), .symbol = "b", .doc = "coarse block (query and key)",
     .lo = 16, .hi = 4096},
    {.name = "group", .field = SPATTN_FIELD(Config, group), .symbol = "g", .doc = "flattening group (divides b)",
     .lo = 1, .hi = 4096},
    {.name = "gamma", .field = SPATTN_FIELD(Config, gamma), .symbol = "γ",
     .doc = "keep-mass: the smallest prefix of blocks with mass ≥ γ", .lo = 0.0, .hi = 1.0,
     .note = " (1 = dense, 0 = no mass rule)"},
    {.name = "n_local", .field = SPATTN_FIELD(Config, n_local), .symbol = "", .doc = "local band in executor tiles (T keys each)",
     .lo = 0, .hi = 1 << 20},
    {.name = "tile_k", .field = SPATTN_FIELD(Config, tile), .symbol = "T", .doc = "executor key tile (divides b)",
     .lo = 1, .hi = 128},
    {.name = "eta", .field = SPATTN_FIELD(Config, eta), .symbol = "η", .doc = "stride rescue period",
     .lo = 0, .hi = static_cast<double>(std::int64_t{1} << 31), .note = " (0 = off)"},
    {.name = "rho", .field = SPATTN_FIELD(Config, rho), .symbol = "ρ",
     .doc = "random rescue fraction of the dropped blocks", .lo = 0.0, .hi = 1.0, .note = " (0 = off)"},
    {.name = "rescue_seed", .field = SPATTN_FIELD(Config, seed), .symbol = "s", .doc = "seed of both rescues",
     .lo = 0, .hi = static_cast<double>(std::int64_t{1} << 31)},
    {.name = "rescue_grid", .field = SPATTN_FIELD(Config, rescue_grid), .symbol = "",
     .doc = "rescues on the coarse blocks (the code) or on the executor tiles (the paper)", .choices = "coarse|tile"},
    {.name = "prob_threshold", .field = SPATTN_FIELD(Config, prob_threshold), .symbol = "",
     .doc = "the code's threshold rule: keep blocks whose probability exceeds this", .lo = 0.0, .hi = INFINITY,
     .note = " (> 1 = off)"},
    {.name = "keep_ratio", .field = SPATTN_FIELD(Config, keep_ratio), .symbol = "",
     .doc = "the code's top-k floor: max(min_keep_blocks, ⌊ratio·causal blocks⌋) kept", .lo = 0.0, .hi = 1.0,
     .note = " (0 = off)", .sweep = kKeepRatioSweep},
    {.name = "min_keep_blocks", .field = SPATTN_FIELD(Config, min_keep_blocks), .symbol = "",
     .doc = "the code's top-k floor: at least this many blocks", .lo = 0, .hi = 1 << 30},
};
// clang-format on

inline constexpr OptionTable kOptionTable{
    .method = "bfla",
    .summary = "BFLA: flattened-group block scores, keep-mass, sink + local band, rescues",
    .options = kOptions,
    .refusals = kRefusals};
constexpr const OptionTable& option_table(const Config&) { return kOptionTable; }

}  // namespace spattn::bfla
#endif
