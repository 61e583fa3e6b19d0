// Block pooling, shared by SpargeAttn (pooled means and self-similarities of query and key blocks) and FG-Attn (tile
// means), a team per block: the core's fixed orders (pooling.hpp's column_sum / mean_of_sum; sparge::row_inv_norm,
// unit_sum, similarity_of), so that the means and similarities have the reference's bits.
//
// A block's rows are staged in team scratch as fp32 (minus the key centre), `chunk` rows at a time, as the
// hand-written pool kernel stages its whole block: every pass then reads plain floats with 32-bit indices, and the
// rows are loaded once, coalesced, several words in flight per thread. A chunk is what fits 36 KB of scratch (Kokkos
// allows 40,936 bytes of level-0 scratch a team): a whole 64-row block at D 128; a longer one is pooled chunk by chunk, with every sum
// carried in row order, so the bits do not depend on the chunk. Host spaces stage the same way (one thread). A tensor
// whose rows are not whole 4-byte words is read in place, the whole block as one chunk. SPATTN_KOKKOS_POOL_ROWS=n caps
// a chunk at n rows (tests/conformance/kokkos_pool.hpp: the masks do not change).
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernel_args.hpp"
#include "spattn/numerics.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/pooling.hpp"

namespace spattn::kokkos::detail {

/// Block j (`block` rows) of head bh = b·heads + h: the mean of each column, minus `mu` (the key centre, or null) at
/// mean[(bh·blocks + j)·d + c], or with `transposed` at mean[(bh·d + c)·blocks + j] (key means: a selection's threads
/// then read consecutive blocks); with `sim`, SpargeAttn's self-similarity at sim[bh·blocks + j].
template <class Exec>
struct BlockPool {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q, transposed;
  std::int64_t heads, block, blocks;
  const float* mu;
  float* mean;
  float* sim;
  int chunk;  ///< rows staged at a time (0: the rows are read in place, the block as one chunk)
  int level;

  static constexpr int kInFlight = 8;  ///< words each thread loads before it stores them
  /// Scratch a team takes at most: a 64-row block at D 128 in one chunk (35.6 KB), six teams an SM on the H100.
  static constexpr std::size_t kScratch = 36 * 1024;

  /// Rows of a chunk: the block in as few chunks as fit `budget` bytes of scratch with the rest of the team's arrays,
  /// of equal length but the last (0: not even one row fits, the block is read in place).
  static int chunk_rows(std::int64_t block, std::int64_t d, std::size_t budget) {
    const std::size_t fixed = bytes(block, d, 0), per_row = sizeof(float) * static_cast<std::size_t>(d + 1) + 8;
    const auto fit = static_cast<std::int64_t>(budget > fixed ? (budget - fixed) / per_row : 0);
    if (fit == 0) return 0;
    const std::int64_t chunks = (block + fit - 1) / fit;
    return static_cast<int>((block + chunks - 1) / chunks);
  }
  /// Scratch of a team: inv (block), the carried sums and unit sums (2·d), the centre (d); staged: the chunk's rows
  /// (stride d + 1, odd at even d: a thread per row reads without bank conflicts) and their offsets.
  static std::size_t bytes(std::int64_t block, std::int64_t d, int chunk) {
    return sizeof(float) * static_cast<std::size_t>(block + 3 * d + chunk * (d + 1)) + 8 * static_cast<std::size_t>(chunk) +
           4 * 64;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t j = team.league_rank() % blocks, bh = team.league_rank() / blocks;
    const std::int64_t b = bh / heads, h = bh % heads, n = is_q ? s.nq(b) : s.nkv(b);
    const std::int64_t first = j * block;
    if (first >= n) return;
    const int rows = static_cast<int>(block < n - first ? block : n - first), d = static_cast<int>(s.d), ld = d + 1;
    auto& scratch = team.team_scratch(level);  // the 8-byte offsets first: get_shmem does not align
    auto* offset = chunk > 0 ? static_cast<std::int64_t*>(scratch.get_shmem(sizeof(std::int64_t) * chunk)) : nullptr;
    float* inv = static_cast<float*>(scratch.get_shmem(sizeof(float) * block));
    float* sum = static_cast<float*>(scratch.get_shmem(sizeof(float) * d));
    float* u = static_cast<float*>(scratch.get_shmem(sizeof(float) * d));
    float* centre = static_cast<float*>(scratch.get_shmem(sizeof(float) * d));
    float* x = chunk > 0 ? static_cast<float*>(scratch.get_shmem(sizeof(float) * chunk * ld)) : nullptr;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d), [&](int c) { centre[c] = mu != nullptr ? mu[bh * d + c] : 0.0f; });
    team.team_barrier();
    const int step = chunk > 0 ? chunk : rows;
    for (int c0 = 0; c0 < rows; c0 += step) {
      const int cr = step < rows - c0 ? step : rows - c0;
      if (chunk > 0) {
        stage(team, b, h, first + c0, cr, centre, x, offset);
        pool_chunk(team, [&](std::int64_t r, std::int64_t c) { return x[static_cast<int>(r) * ld + static_cast<int>(c)]; },
                   c0, cr, inv, sum, u);
      } else {
        pool_chunk(team,
                   [&](std::int64_t r, std::int64_t c) { return t.load(s.row(t, is_q, b, h, first + c0 + r) + c) - centre[c]; },
                   c0, cr, inv, sum, u);
      }
    }
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d), [&](int c) {
      mean[transposed ? (bh * d + c) * blocks + j : (bh * blocks + j) * d + c] = mean_of_sum(sum[c], rows);
    });
    if (sim == nullptr) return;
    int nonzero = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, rows), [&](int r, int& nz) { nz += inv[r] >= 0.0f ? 1 : 0; }, nonzero);
    Kokkos::single(Kokkos::PerTeam(team), [&]() { sim[bh * blocks + j] = sparge::similarity_of(u, nonzero, d); });
  }

  /// Rows [r0, r0 + cr) of the block's head as fp32 minus the centre into x (row stride d + 1): each row's offset once,
  /// then kInFlight 4-byte words a thread loaded before any is stored (two 16-bit entries or one fp32 entry a word).
  /// The previous chunk's passes ended with a barrier: x is free.
  KOKKOS_INLINE_FUNCTION void stage(const Member& team, std::int64_t b, std::int64_t h, std::int64_t r0, int cr,
                                    const float* centre, float* x, std::int64_t* offset) const {
    const bool wide = t.dtype == DType::f32, bf16 = t.dtype == DType::bf16;
    const int d = static_cast<int>(s.d), ld = d + 1, per_row = wide ? d : d / 2, items = cr * per_row;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cr), [&](int r) {
      offset[r] = s.row(t, is_q, b, h, r0 + r) / (wide ? 1 : 2);  // whole words (the launch checked the strides)
    });
    team.team_barrier();
    const auto* words = static_cast<const std::uint32_t*>(t.data);
    const int me = team.team_rank(), threads = team.team_size();
    for (int base = me; base < items; base += kInFlight * threads) {
      std::uint32_t w[kInFlight];
      for (int i = 0; i < kInFlight; ++i) {
        const int e = base + i * threads, r = e / per_row;
        w[i] = e < items ? words[offset[r] + (e - r * per_row)] : 0u;
      }
      for (int i = 0; i < kInFlight; ++i) {
        const int e = base + i * threads, r = e / per_row, c = e - r * per_row;
        if (e >= items) break;
        if (wide) {
          x[r * ld + c] = bits_to_float(w[i]) - centre[c];
        } else {
          const auto lo = static_cast<std::uint16_t>(w[i] & 0xffffu), hi = static_cast<std::uint16_t>(w[i] >> 16);
          x[r * ld + 2 * c] = (bf16 ? bf16_bits_to_f32(lo) : f16_bits_to_f32(lo)) - centre[2 * c];
          x[r * ld + 2 * c + 1] = (bf16 ? bf16_bits_to_f32(hi) : f16_bits_to_f32(hi)) - centre[2 * c + 1];
        }
      }
    }
    team.team_barrier();
  }

  /// The passes over one chunk of cr rows starting at block row c0 (value(r, c): entry c of the chunk's row r): each
  /// row's inverse norm (with sim), then each column's sum and unit sum carried on from the rows before.
  template <class Value>
  KOKKOS_INLINE_FUNCTION void pool_chunk(const Member& team, Value value, int c0, int cr, float* inv, float* sum,
                                         float* u) const {
    const std::int64_t d = s.d;
    if (sim != nullptr) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cr), [&](int r) { inv[c0 + r] = sparge::row_inv_norm(value, r, d); });
      team.team_barrier();
    }
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, static_cast<int>(d)), [&](int c) {
      sum[c] = column_sum([&](std::int64_t r) { return value(r, c); }, 0, cr, c0 == 0 ? 0.0f : sum[c]);
      if (sim != nullptr) u[c] = sparge::unit_sum(value, inv + c0, cr, c, c0 == 0 ? 0.0f : u[c]);
    });
    team.team_barrier();
  }
};

/// Launches BlockPool over every block of every head of t (`heads` heads, `blocks` blocks of `block` rows a sequence).
template <class Exec>
void pool_blocks(const char* label, const DeviceShape& s, const TensorView& tv, bool is_q, std::int64_t heads,
                 std::int64_t block, std::int64_t blocks, const float* centre, float* mean, float* sim) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Pool = BlockPool<Exec>;
  const DeviceTensor t = DeviceTensor::of(tv);
  const int ts = team_size<Exec>();
  // Staged where every row is whole 4-byte words (16-bit: even D, strides and address), on a host space too (the same
  // code, chunks included, runs in the Serial tests), in at most kScratch bytes.
  const bool words = t.dtype == DType::f32 || (s.d % 2 == 0 && t.stride_n % 2 == 0 && t.stride_h % 2 == 0 &&
                                                t.stride_b % 2 == 0 && reinterpret_cast<std::uintptr_t>(t.data) % 4 == 0);
  const std::size_t budget = std::min<std::size_t>(Pool::kScratch, static_cast<std::size_t>(Policy::scratch_size_max(0)));
  int chunk = words ? Pool::chunk_rows(block, s.d, budget) : 0;
  if (const char* cap = std::getenv("SPATTN_KOKKOS_POOL_ROWS"); cap != nullptr && chunk > 0)  // tests: many chunks
    chunk = std::clamp(std::atoi(cap), 1, chunk);
  const std::size_t bytes = Pool::bytes(block, s.d, chunk);
  const int level = scratch_level<Exec>(bytes);
  Kokkos::parallel_for(label,
                       Policy(static_cast<int>(s.batch * heads * blocks), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                       Pool{s, t, is_q, !is_q, heads, block, blocks, centre, mean, sim, chunk, level});
}

}  // namespace spattn::kokkos::detail
