// SpargeAttn's quantized compute mode (AttendOptions::qk_int8; research/spargeattn.md §2, spattn/quant.hpp) before the
// executor runs: the key means (detail::sequence_mean, rounded to the input dtype) that smooth K, and the int8 scales of
// every block of quant_block_q query rows and quant_block_k smoothed keys — the reference's make_quant (reference/src/executor.cpp)
// as Kokkos kernels, with the same bits (sequence_mean's order; a block's amax is a max: any order).
#pragma once

#include <Kokkos_Core.hpp>
#include <cmath>

#include "kernel_args.hpp"
#include "sequence_mean.hpp"
#include "spattn/attend_options.hpp"
#include "spattn/quant.hpp"

namespace spattn::kokkos {

/// Where the quantized mode's per-block data live (execution space memory), as the executor reads them.
struct Int8Blocks {
  const float* k_mean = nullptr;   ///< [(b·Hkv + h)·D + e], rounded to the input dtype
  const float* q_scale = nullptr;  ///< [(b·Hq + h)·q_blocks + i / block_q]
  const float* k_scale = nullptr;  ///< [(b·Hkv + h)·k_blocks + j / block_k]
  std::int64_t q_blocks = 0, k_blocks = 0;
  int block_q = 128, block_k = 64;
  DType dtype = DType::f32;

  /// K' = K − mean, rounded to the input dtype (spattn/quant.hpp).
  KOKKOS_INLINE_FUNCTION float smoothed(float k, std::int64_t bh_kv, std::int64_t d, std::int64_t e) const {
    return int8_smoothed_key(k, k_mean[bh_kv * d + e], dtype);
  }
};

namespace detail {

/// x[i] rounded to the input dtype (the key means, after detail::sequence_mean).
struct RoundToDtype {
  float* x;
  DType dtype;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const { x[i] = round_to_dtype(x[i], dtype); }
};

/// scale[bh·blocks + blk] = int8_block_scale(amax) over the block's valid rows (keys smoothed when `blocks` is K's).
template <class Exec>
struct Int8BlockScale {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q;
  std::int64_t heads, block, blocks;
  Int8Blocks quant;  ///< k_mean (keys)
  float* scale;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t blk = team.league_rank() % blocks, bh = team.league_rank() / blocks;
    const std::int64_t b = bh / heads, h = bh % heads, n = is_q ? s.nq(b) : s.nkv(b);
    const std::int64_t first = blk * block, end = first + block < n ? first + block : n;
    float amax = 0.0f;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, first < end ? (end - first) * s.d : std::int64_t{0}),
        [&](std::int64_t x, float& mx) {
          const std::int64_t r = first + x / s.d, e = x % s.d;
          const float v = t.load(s.row(t, is_q, b, h, r) + e);
          const float a = std::fabs(is_q ? v : quant.smoothed(v, bh, s.d, e));
          mx = mx < a ? a : mx;
        },
        Kokkos::Max<float>(amax));
    Kokkos::single(Kokkos::PerTeam(team), [&]() { scale[bh * blocks + blk] = int8_block_scale(amax > 0.0f ? amax : 0.0f); });
  }
};

}  // namespace detail

/// The per-block data of the quantized mode, in Exec's memory (`blocks` points into the views). Constructed empty (the
/// mode off): never a default-constructed View, whose destructor crashes in the Kokkos 4.6 snapshot of ../shared/deps
/// (mdspan-based View, g++ 12).
template <class Exec>
struct Int8Prepared {
  using Floats = Kokkos::View<float*, typename Exec::memory_space>;
  Floats k_mean{std::string("spattn::int8_k_mean"), 0}, q_scale{std::string("spattn::int8_q_scale"), 0},
      k_scale{std::string("spattn::int8_k_scale"), 0};
  Int8Blocks blocks;
};

template <class Exec>
Int8Prepared<Exec> prepare_int8(const Problem& p, const DeviceShape& s, const DeviceTensor& q, const DeviceTensor& k,
                                const AttendOptions& options) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  Int8Prepared<Exec> out;
  Int8Blocks& qb = out.blocks;
  qb.block_q = options.quant_block_q;
  qb.block_k = options.quant_block_k;
  qb.q_blocks = (p.seqlen_q + qb.block_q - 1) / qb.block_q;
  qb.k_blocks = (p.seqlen_kv + qb.block_k - 1) / qb.block_k;
  qb.dtype = p.dtype;
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  out.k_mean = typename Int8Prepared<Exec>::Floats(std::string("spattn::int8_k_mean"), n(p.batch * p.heads_kv * p.head_dim));
  out.q_scale = typename Int8Prepared<Exec>::Floats(std::string("spattn::int8_q_scale"), n(p.batch * p.heads_q * qb.q_blocks));
  out.k_scale = typename Int8Prepared<Exec>::Floats(std::string("spattn::int8_k_scale"), n(p.batch * p.heads_kv * qb.k_blocks));
  qb.k_mean = out.k_mean.data();
  qb.q_scale = out.q_scale.data();
  qb.k_scale = out.k_scale.data();
  const int ts = team_size<Exec>();
  detail::sequence_mean<Exec>(s, k, false, p.heads_kv, p.seqlen_kv, out.k_mean.data());
  Kokkos::parallel_for("spattn::kokkos::int8_k_mean_round", Kokkos::RangePolicy<Exec>(0, out.k_mean.extent(0)),
                       detail::RoundToDtype{out.k_mean.data(), p.dtype});
  Kokkos::parallel_for("spattn::kokkos::int8_k_scale", Policy(static_cast<int>(p.batch * p.heads_kv * qb.k_blocks), ts),
                       detail::Int8BlockScale<Exec>{s, k, false, p.heads_kv, qb.block_k, qb.k_blocks, qb, out.k_scale.data()});
  Kokkos::parallel_for("spattn::kokkos::int8_q_scale", Policy(static_cast<int>(p.batch * p.heads_q * qb.q_blocks), ts),
                       detail::Int8BlockScale<Exec>{s, q, true, p.heads_q, qb.block_q, qb.q_blocks, qb, out.q_scale.data()});
  return out;
}

}  // namespace spattn::kokkos
