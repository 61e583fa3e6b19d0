// The tile-sparse executor as one Kokkos kernel: a team per row block (at most 128 rows of one query tile of one
// query head, the reference's row blocks), its Q rows, the running softmax state and the accumulator in team
// scratch; the row block's kept keys are visited in ascending order in chunks of kChunk keys, each chunk's K and V
// rows staged in team scratch. Which keys a row sees, the key list of a row's kept tiles and the empty-row rule are
// mask_policy's; the per-row softmax arithmetic is OnlineSoftmax's (both in core/). fp32 accumulation for every
// input dtype; outputs rounded to O's dtype.
//
// Not bit-identical to the reference (its QKᵀ and PV are Eigen GEMMs in chunks of 256 keys): outputs are compared
// within the dtype's tolerance (DESIGN.md §5.4).
#pragma once

#include <Kokkos_Core.hpp>

#include "kernel_args.hpp"
#include "run.hpp"
#include "spattn/attend_options.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::kokkos {

/// Runs the executor on execution space Exec; tensors, the LSE array and the returned counts as in Backend::attend.
/// Inputs already validated and covered (no PV-skip, no int8 mode).
template <class Exec>
AttendStats attend_on(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TileMask& mask, const TensorView& o, const AttendOptions& options);

namespace detail {

inline constexpr int kChunk = 64;      // keys staged per step

template <class Exec>
struct FlashTeam {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;

  DeviceShape s;
  DeviceTensor q, k, v, o;
  float* lse = nullptr;  ///< [B, Hq, max Nq] natural-log LSE, or null
  const std::int64_t* row_ptr = nullptr;
  const std::int32_t* tiles = nullptr;
  std::int64_t mask_heads = 1, q_tiles = 0, blocks_per_tile = 1;
  std::int32_t tile_q = 128, tile_k = 128;
  int level = 0;  ///< scratch level (0: on-chip where it fits)

  /// Floats of team scratch for rows × (d, dv) with kChunk keys.
  static std::size_t scratch_floats(std::int64_t d, std::int64_t dv) {
    return static_cast<std::size_t>(kRowBlock * d + kChunk * d + kChunk * dv + kRowBlock * kChunk + kRowBlock * dv +
                                    3 * kRowBlock + 2 * kChunk);  // + m, l, alpha; keys as 2 floats each
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team, std::int64_t& empty_rows) const {
    // League index -> (b, hq, query tile t, row block of the tile).
    std::int64_t w = team.league_rank();
    const std::int64_t blk = w % blocks_per_tile;
    w /= blocks_per_tile;
    const std::int64_t t = w % q_tiles;
    w /= q_tiles;
    const std::int64_t h = w % s.heads_q, b = w / s.heads_q;
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b);
    const std::int64_t tile_end = (t + 1) * tile_q < nq ? (t + 1) * tile_q : nq;
    const std::int64_t r0 = t * tile_q + blk * kRowBlock;
    if (r0 >= tile_end) return;
    const std::int64_t r1 = r0 + kRowBlock < tile_end ? r0 + kRowBlock : tile_end;
    const int rows = static_cast<int>(r1 - r0);
    const std::int64_t hkv = h / s.group();
    const std::int64_t mh = mask_heads == s.heads_q ? h : h / (s.heads_q / mask_heads);
    const std::int64_t mrow = (b * mask_heads + mh) * q_tiles + t;
    const std::int32_t* kept = tiles + row_ptr[mrow];
    const std::int64_t count = row_ptr[mrow + 1] - row_ptr[mrow];
    const std::int64_t limit = mask_policy::block_key_end(r1 - 1, nq, nkv, s.causal);
    const std::int64_t positions =
        mask_policy::visited_tiles<std::int64_t>(kept, count, tile_k, limit) * static_cast<std::int64_t>(tile_k);
    const std::int64_t d = s.d, dv = s.dv;

    float* qs = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kRowBlock * d));
    float* ks = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kChunk * d));
    float* vs = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kChunk * dv));
    float* ps = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kRowBlock * kChunk));
    float* acc = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kRowBlock * dv));
    float* m = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kRowBlock));
    float* l = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kRowBlock));
    float* alpha = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * kRowBlock));
    auto* keys = static_cast<std::int64_t*>(team.team_scratch(level).get_shmem(sizeof(std::int64_t) * kChunk));

    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t x) {
      const std::int64_t r = x / d, e = x % d;
      qs[x] = q.load(s.row(q, true, b, h, r0 + r) + e);
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dv), [&](std::int64_t x) { acc[x] = 0.0f; });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
      const SoftmaxState init;
      m[r] = init.m;
      l[r] = init.l;
    });

    for (std::int64_t c0 = 0; c0 < positions; c0 += kChunk) {
      const int n = static_cast<int>(positions - c0 < kChunk ? positions - c0 : kChunk);
      team.team_barrier();  // the previous chunk's P·V is done with ks, vs, ps
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](int c) {
        keys[c] = mask_policy::key_at<std::int64_t>(kept, count, tile_k, c0 + c, limit);
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n * d), [&](std::int64_t x) {
        const std::int64_t c = x / d, e = x % d, j = keys[c];
        ks[x] = j < 0 ? 0.0f : k.load(s.row(k, false, b, hkv, j) + e);
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n * dv), [&](std::int64_t x) {
        const std::int64_t c = x / dv, e = x % dv, j = keys[c];
        vs[x] = j < 0 ? 0.0f : v.load(s.row(v, false, b, hkv, j) + e);
      });
      team.team_barrier();
      // Base-2 scores; a key the row does not see (causal, past the sequence, past the list) is −∞.
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * n), [&](int x) {
        const int r = x / n, c = x % n;
        const mask_policy::RowKeys<std::int64_t> row(r0 + r, nq, nkv, s.causal);
        float dot = 0.0f;
        for (std::int64_t e = 0; e < d; ++e) dot += qs[r * d + e] * ks[c * d + e];
        ps[r * kChunk + c] = row.sees(keys[c]) ? dot * s.scale_log2 : -INFINITY;
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
        SoftmaxState st{m[r], l[r]};
        alpha[r] = OnlineSoftmax::update(st, ps + r * kChunk, n, ps + r * kChunk);
        m[r] = st.m;
        l[r] = st.l;
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dv), [&](std::int64_t x) {
        const std::int64_t r = x / dv, e = x % dv;
        float sum = 0.0f;
        for (int c = 0; c < n; ++c) sum += ps[r * kChunk + c] * vs[c * dv + e];
        acc[x] = acc[x] * alpha[r] + sum;
      });
    }
    team.team_barrier();

    std::int64_t empty = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, rows),
        [&](int r, std::int64_t& e) {
          const SoftmaxState st{m[r], l[r]};
          float* out = acc + r * dv;
          const float lse2 = OnlineSoftmax::finalize(st, out, static_cast<int>(dv), out);  // in place
          e += mask_policy::empty_row(st.l) ? 1 : 0;
          const std::int64_t at = s.row(o, true, b, h, r0 + r);
          for (std::int64_t x = 0; x < dv; ++x) o.store(at + x, out[x]);
          if (lse != nullptr) lse[(b * s.heads_q + h) * s.seqlen_q + r0 + r] = lse2 * kLn2;
        },
        empty);
    Kokkos::single(Kokkos::PerTeam(team), [&]() { empty_rows += empty; });
  }
};

}  // namespace detail

template <class Exec>
AttendStats attend_on(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  using Team = detail::FlashTeam<Exec>;
  const auto row_ptr = to_space<Exec>("spattn::row_ptr", mask.row_ptr.data(), mask.row_ptr.size());
  const auto tiles = to_space<Exec>("spattn::tiles", mask.tiles.data(), mask.tiles.size());
  const auto cu_q = to_space<Exec>("spattn::cu_q", p.cu_seqlens_q.data(), p.cu_seqlens_q.size());
  const auto cu_kv = to_space<Exec>("spattn::cu_kv", p.cu_seqlens_kv.data(), p.cu_seqlens_kv.size());

  Team f;
  f.s = {p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_kv, p.head_dim, p.dim_v(), p.causal,
         scale_log2(p.softmax_scale()), p.varlen() ? cu_q.data() : nullptr, p.varlen() ? cu_kv.data() : nullptr};
  f.q = DeviceTensor::of(q);
  f.k = DeviceTensor::of(k);
  f.v = DeviceTensor::of(v);
  f.o = DeviceTensor::of(o);
  f.lse = options.lse;
  f.row_ptr = row_ptr.data();
  f.tiles = tiles.data();
  f.mask_heads = mask.shape.mask_heads;
  f.q_tiles = mask.shape.num_q_tiles();
  f.tile_q = mask.shape.tile_q;
  f.tile_k = mask.shape.tile_k;
  f.blocks_per_tile = (mask.shape.tile_q + kRowBlock - 1) / kRowBlock;

  const std::size_t bytes = sizeof(float) * Team::scratch_floats(p.head_dim, p.dim_v()) + 64 * 9;  // + alignment
  f.level = scratch_level<Exec>(bytes);
  const std::int64_t league = p.batch * p.heads_q * f.q_tiles * f.blocks_per_tile;
  typename Team::Policy policy(static_cast<int>(league), team_size<Exec>());
  std::int64_t empty = 0;
  Kokkos::parallel_reduce("spattn::kokkos::attend", policy.set_scratch_size(f.level, Kokkos::PerTeam(static_cast<int>(bytes))), f,
                          empty);
  Exec().fence();

  AttendStats stats;
  stats.backend = "kokkos";
  stats.empty_rows = empty;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t t = 0; t * mask.shape.tile_q < p.seqlen_q_of(b); ++t)
        stats.visited_tiles += static_cast<std::int64_t>(mask.row(b, mask.mask_head_of(h, p.heads_q), t).size());
  return stats;
}

}  // namespace spattn::kokkos
