// FG-Attn (research/fgattn.md, paper 003): fine-grained M×N tiles for video-diffusion attention.
//
// Estimator (§2): q̄_i = mean of the M queries of query tile i, k̄_j = mean of the N keys of key tile j (fp32,
// rows summed sequentially in token order, divided by the TRUE count of a partial tile); logits
// x_ij = (q̄_i·k̄_j) · scale (fp32 fma chain over d = 0…D−1), row softmax over the key tiles that the causal
// rule lets the query tile reach (non-causal by default: all), TopCdf top-p with the crossing tile included:
// the smallest prefix, in (â desc, j asc) order, whose mass reaches p. p = 1 keeps every tile.
//
// Decisions where the paper is silent (fgattn.md §10), with the reason:
// - Partial key tile weight: unweighted, the paper's formula (each tile is one "super-key"); optional
//   `size_weighted_tail` adds ln(n_j/N) to the tail tile's logit (SVG2-style). Default off: the paper.
// - Mass threshold: p·Z with Z the row's total mass (the core's TopCdf: exact fixed-point sums of the weights,
//   topcdf.hpp), not p alone; p·Z keeps the rule invariant to how the probabilities are normalized.
// - A row whose logits are not finite (NaN/Inf inputs) keeps every tile (dense fallback, §10).
// - GQA: masks per query head; K is pooled per KV head.
// - M must be a multiple of 16 (warp-uniform membership on GPUs) and 16…128; N is 1…128.
// - Default top_p 0.99 (the paper: 0.9), from quality (bench/results/quality.md, 2026-11-28): in every layer of the
//   trained DiT, top-p 0.9 cost +3.6 % / +3.0 % denoising loss at 8K (H100 run 1; H200) and 0.99 +0.27 % / +0.15 % /
//   +0.23 % (three trainings of the recipe); on the trained LM 0.9 cost +26.7 % / +35.8 % held-out loss at 8K / 32K
//   and 0.99 +7.1 % / +9.8 %: no setting of p holds the LM within +1 % (0.999: +4.6 % / +6.3 %). The LM's loss comes
//   from induction heads, whose rows each need one far key that no pooled query sees (quality.md, "the similarity
//   fallback"). top_p = 0.9 restores the paper.
//
// Merging (§3): R = 128/M query tiles form one 128-row work item. Consecutive: {gR, …, gR+R−1}. XOR
// (the paper's greedy merge-XOR): the lowest ungrouped tile anchors a group and takes the R−1 ungrouped
// tiles with the smallest popcount(row_a XOR row_i), ties by lower index; the last group may be short.
// Semantics: EXACT (default) — each row still attends only to its own tile's keys, so the output depends
// only on the mask; UNION — every member attends to the union of its group (the mask is densified).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "spattn/config.hpp"
#include "spattn/mask.hpp"
#include "spattn/numerics.hpp"

namespace spattn::fg_attn {

enum class Merge : std::uint8_t { none, consecutive, xor_greedy };
enum class Semantics : std::uint8_t { exact, union_keys };

std::string_view to_string(Merge merge);
Merge parse_merge(std::string_view name);  ///< "none", "consecutive", "xor"; throws spattn::Error

/// Ranges and docs: kOptions below (validate() checks them, and that work_rows holds at most 32 whole tiles).
struct Config {
  std::int32_t tile_q = 32;
  std::int32_t tile_k = 32;
  float top_p = 0.99f;  ///< the paper: 0.9 (see the header comment: 0.9 cost +3 % on the trained DiT)
  bool size_weighted_tail = false;
  Merge merge = Merge::xor_greedy;
  Semantics semantics = Semantics::exact;
  std::int32_t work_rows = 128;

  /// Throws spattn::Error naming the bad field.
  void validate() const;
};

// ---- estimator rules (host + device; the reference's loops and every backend's estimator call these) ----

/// Pooled logit of (query tile, key tile) in base-2 units: dot_sequential(q̄, k̄)·scale·log2 e. A backend that forms
/// several dot products at once (dot_sequential_block: the same bits) scales each by logit_of.
SPATTN_INLINE float logit_of(float dot, float scale_log2) { return dot * scale_log2; }
SPATTN_INLINE float pooled_logit(const float* q_mean, const float* k_mean, std::int64_t d, float scale_log2,
                                 std::int64_t k_stride = 1) {
  return logit_of(dot_sequential(q_mean, k_mean, d, k_stride), scale_log2);
}

/// The partial tail key tile (nkv mod N ≠ 0) is tile nkv / N; with size_weighted_tail its logit gains
/// log2(n_tail / N) (ln in natural units), else 0 (the paper: every tile is one super-key).
SPATTN_INLINE bool is_tail_tile(std::int64_t j, std::int64_t nkv, std::int32_t tile_k) {
  return nkv % tile_k != 0 && j == nkv / tile_k;
}
SPATTN_INLINE float tail_weight(std::int64_t nkv, std::int32_t tile_k, bool size_weighted_tail) {
  const std::int64_t tail = nkv % tile_k;
  return size_weighted_tail && tail != 0 ? log2_det(static_cast<float>(tail) / static_cast<float>(tile_k)) : 0.0f;
}

/// A row keeps every reachable tile when a logit is not finite (NaN/Inf inputs) or p = 1.
SPATTN_INLINE bool keep_all_tiles(bool logits_finite, float top_p) { return !logits_finite || top_p >= 1.0f; }

// ---- merge rules (host + device: fg_attn::merge_plan and the CUDA estimator's UNION masks call these) ----

/// Words of a query tile's key-tile bitset (bit k of word k / 64: the tile keeps key tile k).
SPATTN_INLINE std::int64_t bitset_words(std::int64_t num_k_tiles) { return (num_k_tiles + 63) / 64; }
/// The greedy merge-XOR distance of two query tiles: popcount(row_a XOR row_b) over their bitsets, a sum of
/// xor_distance_word over the words (integers: any order of the sum gives the same distance).
SPATTN_INLINE int xor_distance_word(std::uint64_t a, std::uint64_t b) { return popcount64(a ^ b); }
SPATTN_INLINE std::int64_t xor_distance(const std::uint64_t* a, const std::uint64_t* b, std::int64_t words) {
  std::int64_t d = 0;
  for (std::int64_t w = 0; w < words; ++w) d += xor_distance_word(a[w], b[w]);
  return d;
}
/// The order in which an anchor takes its ungrouped candidates: smaller XOR distance first, ties by lower query
/// tile, as one ascending 64-bit key (distance <= 2^31 key tiles, index >= 0).
SPATTN_INLINE std::uint64_t merge_key(std::int64_t distance, std::int32_t index) {
  return static_cast<std::uint64_t>(distance) << 32 | static_cast<std::uint32_t>(index);
}
SPATTN_INLINE std::int32_t merge_key_index(std::uint64_t key) { return static_cast<std::int32_t>(key & 0xffffffffu); }

/// One merged work item: up to R member query tiles of one (batch, mask head) and the union of their key
/// tiles, with a membership bit per union tile (bit t = member t selected it).
struct WorkItem {
  std::int64_t batch = 0, head = 0;
  std::vector<std::int32_t> members;  ///< query-tile ids, in group order (anchor first for XOR)
  std::vector<std::int32_t> keys;     ///< union of the members' key tiles, ascending
  std::vector<std::uint32_t> membership;  ///< per union tile: bit t set when members[t] selected it
  std::int64_t key_count = 0;         ///< keys (tokens) in the union, clipped to the sequence: the cost
};

struct MergePlan {
  std::vector<WorkItem> items;
  std::vector<std::int32_t> order;  ///< items longest-first (cost desc, then index asc)
  double redundant_load = 1.0;      ///< Σ_items |union|·|members| / Σ_tiles |own tiles|  (1 = no waste)
  double density_before = 0.0, density_after = 0.0;  ///< kept / reachable tiles, own vs union
  double skew = 0.0;  ///< (L_max − L_min) / L_max over the items' key counts
};

/// Groups the query tiles of every (batch, mask head) of `mask` into work items. For Merge::none each
/// item is one tile.
MergePlan merge_plan(const TileMask& mask, const Config& config);

/// The mask an executor runs for a plan: EXACT rebuilds each member's own tiles from the union lists and
/// membership bits (equal to the estimated mask); UNION gives every member its group's union.
TileMask effective_mask(const TileMask& mask, const MergePlan& plan, Semantics semantics);

}  // namespace spattn::fg_attn

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include "spattn/options.hpp"

namespace spattn::fg_attn {

inline constexpr double kTopPSweep[] = {0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999};

// clang-format off
inline constexpr Option kOptions[] = {
    {.name = "tile_q", .field = SPATTN_FIELD(Config, tile_q), .symbol = "M", .symbol_in_messages = true, .doc = "query rows per tile",
     .lo = 16, .hi = 128, .multiple_of = 16},
    {.name = "tile_k", .field = SPATTN_FIELD(Config, tile_k), .symbol = "N", .symbol_in_messages = true, .doc = "keys per tile", .lo = 1, .hi = 128},
    {.name = "top_p", .field = SPATTN_FIELD(Config, top_p), .symbol = "p",
     .doc = "kept probability mass: the smallest prefix of tiles with mass ≥ p", .lo = 0.0, .hi = 1.0, .open_lo = true,
     .note = " (1 keeps every tile)", .sweep = kTopPSweep},
    {.name = "size_weighted_tail", .field = SPATTN_FIELD(Config, size_weighted_tail), .symbol = "",
     .doc = "add ln(n/N) to the partial tail key tile's logit (SVG2-style; off: the paper)"},
    {.name = "merge", .field = SPATTN_FIELD(Config, merge), .symbol = "",
     .doc = "query tiles merged into 128-row work items", .choices = "none|consecutive|xor"},
    {.name = "semantics", .field = SPATTN_FIELD(Config, semantics), .symbol = "",
     .doc = "merged rows attend to their own tiles (exact) or to the group's union", .choices = "exact|union"},
    {.name = "work_rows", .field = SPATTN_FIELD(Config, work_rows), .symbol = "R·M",
     .doc = "rows of one work item (a multiple of M, at most 32 tiles)", .lo = 16, .hi = 4096},
};
// clang-format on

inline constexpr OptionTable kOptionTable{
    .method = "fgattn",
    .summary = "FG-Attn: mean-pooled M×N tile scores, top-p",
    .options = kOptions};
constexpr const OptionTable& option_table(const Config&) { return kOptionTable; }

}  // namespace spattn::fg_attn
#endif
