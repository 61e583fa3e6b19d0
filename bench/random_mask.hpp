// The GPU benchmarks' random block masks: every tile kept with probability `density`, plus key tile 0 and the tiles
// of the causal diagonal (seeded, so two benchmarks and their peers see the same mask).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "spattn/mask.hpp"

namespace spattn::bench {

inline TileMask random_block_mask(const MaskShape& s, double density, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const std::int64_t tq = s.num_q_tiles(), tk = s.num_k_tiles();
  std::vector<std::uint8_t> bits(static_cast<std::size_t>(s.num_rows() * tk));
  for (std::int64_t r = 0; r < s.num_rows(); ++r) {
    const std::int64_t t = r % tq;
    const std::int64_t diag = ((t + 1) * s.tile_q - 1 + s.seqlen_kv - s.seqlen_q) / s.tile_k;
    for (std::int64_t k = 0; k < tk; ++k)
      bits[static_cast<std::size_t>(r * tk + k)] = (k == 0 || k >= diag - (s.tile_q / s.tile_k) + 1 || u(gen) < density);
  }
  return TileMask::from_bitmap(s, bits);
}

}  // namespace spattn::bench
