// The oracle mask: at a given tile shape, the key tiles each query tile keeps when they are ranked by their EXACT
// attention mass — the yardstick every estimator is measured against (no estimator can keep less mass with the same
// tiles at the same granularity; bench/results/accuracy-frontier.md).
//
// Definition. For a MaskShape S (tile_q, tile_k, mask heads Hq or Hkv) and a problem:
//   - p_i(j) is the softmax of query row i over the keys it sees (mask_policy::row_sees: causal bottom-right, the
//     sequence end), so Σ_j p_i(j) = 1 for every row that sees a key (a row that sees none contributes 0);
//   - the mass of key tile k for query tile t of mask head h is
//       M(t, k) = Σ_{query heads hq of h} Σ_{rows i of t} Σ_{keys j of k} p_i^{hq}(j)
//     (one query head when S has Hq mask heads; the heads_q / heads_kv heads sharing a KV head, ascending, when it has
//     Hkv — the union mask BFLA uses). Only the reachable tiles of t (MaskShape::reachable_k_tiles) have a mass, the
//     same tiles that TileMask::Stats::density counts, so an oracle density and a method's density share one
//     denominator.
//   - Fixed-order fp32 arithmetic (the reference computes it; numerics.hpp): row max, weights 2^(x − m) by exp2_det,
//     l = sum_lanes8 over the row's visible keys in ascending order, a tile's weight sum_sequential over its keys,
//     p = tile weight / l; M accumulated in fp32 over query heads ascending, then rows ascending.
//   - Selection per row (b, h, t) with the TopCdf order (topcdf.hpp: descending mass, ties by lower tile index),
//     always at least the row's heaviest tile (a reachable row is never empty):
//       OracleBudget::mass(τ):      the smallest prefix whose mass reaches τ·Z (Z = the row's total), i.e.
//                                   top_cdf_count(…, τ, min_keep = 1, include_crossing = true); τ = 1: every tile;
//       OracleBudget::density(ρ):   the first ⌈ρ·R⌉ tiles of the R reachable ones (ρ·R: one fp32 multiply);
//       OracleBudget::threshold(ε): every tile whose mass per query row, M(t, k) / rows(t), is >= ε (rows(t): the
//                                   query rows of tile t inside the sequence, times the query heads summed). One ε
//                                   for the whole mask: this is the global greedy — the mask keeps the heaviest
//                                   tiles of the whole problem — so no mask with the same number of tiles (and one
//                                   tile per row at least) keeps more total mass. ε = 0 keeps every tile.
//     Per row, mass(τ) and density(ρ) are optimal too (no set of fewer tiles of that row holds τ·Z; no set of
//     ⌈ρ·R⌉ tiles holds more), but they spend the same fraction on every row; threshold(ε) spends tiles where the
//     mass is, and is the budget spattn frontier searches by default (bench/results/accuracy-frontier.md compares).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spattn/config.hpp"
#include "spattn/mask.hpp"
#include "spattn/topcdf.hpp"

namespace spattn {

/// How many tiles of each mask row the oracle keeps.
struct OracleBudget {
  enum class Kind : std::uint8_t { mass, density, threshold };
  Kind kind = Kind::mass;
  /// τ (kept fraction of each row's mass, (0, 1]), ρ (kept fraction of its reachable tiles, (0, 1]) or ε (least mass
  /// per query row of a kept tile, [0, 1])
  float value = 0.99f;

  static OracleBudget mass(float tau) { return {Kind::mass, tau}; }
  static OracleBudget density(float rho) { return {Kind::density, rho}; }
  static OracleBudget threshold(float epsilon) { return {Kind::threshold, epsilon}; }
  /// Throws spattn::Error: "oracle mass budget: must be in (0, 1] …" (density, threshold alike).
  void validate() const;
};

/// The exact tile masses of every mask row: row r = row_index(b, h, t) holds one mass per reachable key tile,
/// mass[offset[r] + k] for k in [0, reachable_k_tiles(b, t)).
struct OracleMass {
  MaskShape shape;
  std::vector<std::int64_t> offset;  ///< num_rows() + 1
  std::vector<float> mass;
  std::int64_t heads_per_row = 1;  ///< query heads summed into one mask row (heads_q / heads_kv for Hkv mask heads)

  std::int64_t row_index(std::int64_t b, std::int64_t h, std::int64_t t) const {
    return (b * shape.mask_heads + h) * shape.num_q_tiles() + t;
  }
  std::span<const float> row(std::int64_t r) const {
    return {mass.data() + offset[static_cast<std::size_t>(r)],
            static_cast<std::size_t>(offset[static_cast<std::size_t>(r) + 1] - offset[static_cast<std::size_t>(r)])};
  }
};

/// The number of tiles a row keeps: `sorted` holds its n reachable tile masses in the selection order (descending,
/// ties by lower index); `rows` is the number of query rows (times query heads) the masses were summed over, the
/// scale of threshold(ε). Host and device.
SPATTN_INLINE int oracle_keep_count(const float* sorted, int n, OracleBudget budget, std::int64_t rows) {
  if (n <= 0) return 0;
  if (budget.kind == OracleBudget::Kind::mass) return top_cdf_count(sorted, n, budget.value, 1, true);
  if (budget.kind == OracleBudget::Kind::threshold) {
    // ε·rows in double, compared with each mass exactly; the masses descend, so the kept ones are a prefix.
    const double limit = static_cast<double>(budget.value) * static_cast<double>(rows);
    int keep = 0;
    while (keep < n && static_cast<double>(sorted[keep]) >= limit) ++keep;
    return clamp_keep(keep, n, 1);
  }
  // ⌈ρ·n⌉ with ρ·n one fp32 multiply (so ρ = float(k / n) gives k), clamped to [1, n].
  const float x = budget.value * static_cast<float>(n);
  int keep = static_cast<int>(x);
  if (static_cast<float>(keep) < x) ++keep;
  if (keep > n) keep = n;
  return clamp_keep(keep, n, 1);
}

}  // namespace spattn
