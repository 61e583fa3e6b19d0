// BFLA's Stage 1 (research/bfla.md; the rules in spattn/methods/bfla.hpp) as Kokkos kernels:
//   1. flattened-group scores S[u][v] = Σ_t q_{ug+t}·k_{vg+t} of the causal block pairs as a tiled product, a team per
//      (batch, query head, 64 × 64 group pairs), fma chains over t then e (a fixed order, the same on every space, not
//      the reference's Eigen GEMM: scores agree within rounding, so a decision at a threshold may differ); on
//      Kokkos::Cuda (sm_80+) with fp16 / bf16 inputs the tensor-core GEMM of bfla_mma.hpp instead;
//   2. a team per (batch, KV head, query block): block maxima, the mass rule (TopCdf with the crossing included, its
//      order by team_sort.hpp), the code's optional threshold and top-k rules, the union over the KV head's query heads, sink,
//      band, causal limit and the coarse-grid rescues;
//   3. a team per executor row: the expansion to tiles and the tile-grid rescues, written as a bitmap row.
// Every rule after the scores is the reference's (reference/src/bfla.cpp): given the same scores, the same mask (the
// test feeds reference::bfla_mask_from_scores with these scores).
#pragma once

#include <Kokkos_Core.hpp>
#include <type_traits>
#include <vector>

#include "bfla_mma.hpp"
#include "device_estimate.hpp"
#include "kernel_args.hpp"
#include "team_sort.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::kokkos {

/// The mask (one per KV head); `scores`, when not null, receives each (b, hq)'s group scores as
/// reference::bfla_group_scores lays them out (non-causal pairs 0: no rule reads them).
template <class Exec>
EstimateViews<Exec> bfla_estimate_on(const Problem& problem, const TensorView& q, const TensorView& k, const bfla::Config& c,
                          std::vector<std::vector<float>>* scores);

namespace detail {

struct BflaGeometry {
  std::int64_t g, block, per_block, gq, gk, lq, lkv;  ///< gq, gk, lq, lkv: maxima over the batch
  KOKKOS_INLINE_FUNCTION std::int64_t pair(std::int64_t bh, std::int64_t u, std::int64_t v) const {
    return (bh * gq + u) * gk + v;
  }
};

/// Step 1 as a tiled product: S[u][v] = Σ_x A[u][x]·B[v][x] over x = t·d + e (t < g, e < d), A[u] query group u's rows
/// and B[v] key group v's, entries past either sequence's end 0. A team computes a kGroupTile × kGroupTile block of
/// (u, v) pairs: kGroupChunk values of x at a time staged in team scratch (transposed, rows padded to kGroupLd), each
/// of 256 micro-blocks a 4 × 4 register block of fma chains over x ascending, its sums kept in team scratch between
/// chunks (so that a one-thread team on a host space runs every micro-block in turn, the same arithmetic). Blocks
/// wholly past a row's causal key groups are not computed; their scores are 0, as every pair past them.
inline constexpr int kGroupTile = 64, kGroupChunk = 32, kGroupLd = kGroupTile + 4, kGroupMicro = 4;

template <class Exec>
struct BflaGroupScores {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor q, k;
  BflaGeometry geo;
  std::int64_t tiles_u, tiles_v;  ///< blocks of pairs per (batch, query head): ⌈gq / kGroupTile⌉ × ⌈gk / kGroupTile⌉
  float* scores;                  ///< [B·Hq][gq][gk]
  int level;

  static constexpr std::size_t scratch_bytes() {
    return sizeof(float) * (2 * kGroupChunk * kGroupLd + kGroupTile * kGroupTile) + 64;
  }
  /// Key groups of query group u's causal block pairs (the rest score 0), within the gk groups of the sequence.
  KOKKOS_INLINE_FUNCTION std::int64_t last_group(std::int64_t u, std::int64_t nq, std::int64_t nkv, std::int64_t gk) const {
    const std::int64_t reach = bfla::causal_blocks(u / geo.per_block, nq, nkv, geo.block, s.causal) * geo.per_block;
    return reach < 0 ? 0 : reach < gk ? reach : gk;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    constexpr int T = kGroupTile, C = kGroupChunk, L = kGroupLd, M = kGroupMicro, per_row = T / M;
    const std::int64_t tv = team.league_rank() % tiles_v, tu = team.league_rank() / tiles_v % tiles_u;
    const std::int64_t bh = team.league_rank() / (tiles_v * tiles_u);
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b), g = geo.g, d = s.d;
    const std::int64_t gq = (nq + g - 1) / g, gk = (nkv + g - 1) / g, u0 = tu * T, v0 = tv * T;
    if (u0 >= gq || v0 >= gk) return;
    const std::int64_t nu = gq - u0 < T ? gq - u0 : T, nv = gk - v0 < T ? gk - v0 : T;
    float* a = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * C * L));
    float* bs = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * C * L));
    float* sum = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * T * T));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, T * T), [&](int x) { sum[x] = 0.0f; });
    if (v0 < last_group(u0 + nu - 1, nq, nkv, gk)) {  // some pair of the block is causal (last_group grows with u)
      for (std::int64_t x0 = 0, t0 = 0, e0 = 0; x0 < g * d; x0 += C, e0 += C) {  // x0 = t0·d + e0
        for (; e0 >= d; e0 -= d) ++t0;
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, 2 * T * C), [&](int i) {
          const bool is_q = i < T * C;
          const int row = (i % (T * C)) / C, col = i % C;
          const std::int64_t x = x0 + col;
          std::int64_t t = t0, e = e0 + col;  // x = t·d + e without a division
          for (; e >= d; e -= d) ++t;
          const std::int64_t grp = (is_q ? u0 : v0) + row, n = is_q ? nq : nkv, pos = grp * g + t;
          const bool inside = x < g * d && grp < (is_q ? gq : gk) && pos < n;
          const float val = inside ? (is_q ? q.load(s.row(q, true, b, h, pos) + e) : k.load(s.row(k, false, b, hkv, pos) + e))
                                   : 0.0f;
          (is_q ? a : bs)[col * L + row] = val;
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, per_row * per_row), [&](int m) {
          const int mu = m / per_row * M, mv = m % per_row * M;
          float acc[M][M];
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < M; ++j) acc[i][j] = sum[(mu + i) * T + mv + j];
          for (int x = 0; x < C; ++x) {
            float av[M], bv[M];
            for (int i = 0; i < M; ++i) av[i] = a[x * L + mu + i], bv[i] = bs[x * L + mv + i];
            for (int i = 0; i < M; ++i)
              for (int j = 0; j < M; ++j) acc[i][j] = fma_f32(av[i], bv[j], acc[i][j]);
          }
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < M; ++j) sum[(mu + i) * T + mv + j] = acc[i][j];
        });
      }
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nu * nv), [&](std::int64_t x) {
      const std::int64_t i = x / nv, j = x % nv;
      scores[geo.pair(bh, u0 + i, v0 + j)] = v0 + j < last_group(u0 + i, nq, nkv, gk) ? sum[i * T + j] : 0.0f;
    });
  }
};

template <class Exec>
struct BflaBlockRule {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  BflaGeometry geo;
  bfla::Config c;  // plain values only (no vectors)
  std::int64_t local;
  const float* scores;
  std::uint8_t* coarse;  ///< [B·Hkv][lq][lkv]
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t i = team.league_rank() % geo.lq, bk = team.league_rank() / geo.lq;
    const std::int64_t b = bk / s.heads_kv, hkv = bk % s.heads_kv;
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b), bs = geo.block, per_block = geo.per_block;
    const std::int64_t lq = (nq + bs - 1) / bs, lkv = (nkv + bs - 1) / bs;
    const std::int64_t gq = (nq + geo.g - 1) / geo.g, gk = (nkv + geo.g - 1) / geo.g;
    if (i >= lq || lkv == 0) return;  // a sequence without keys keeps nothing
    const std::int64_t reach = bfla::causal_blocks(i, nq, nkv, bs, s.causal);
    auto* keys = static_cast<std::uint64_t*>(team.team_scratch(level).get_shmem(sizeof(std::uint64_t) * sort_length(geo.lkv)));
    float* x = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * geo.lkv));
    float* prob = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * geo.lkv));
    float* sorted = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * geo.lkv));
    int* cut = static_cast<int*>(team.team_scratch(level).get_shmem(sizeof(int)));
    std::uint8_t* keep = coarse + (bk * geo.lq + i) * geo.lkv;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lkv), [&](std::int64_t j) { keep[j] = 0; });

    for (std::int64_t h = hkv * s.group(); h < (hkv + 1) * s.group(); ++h) {
      const std::int64_t bh = b * s.heads_q + h;
      team.team_barrier();
      // Block scores of the causal blocks (max over their group pairs, base 2); all finite?
      int finite = 1;
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(team, lkv),
          [&](std::int64_t j, int& fin) {
            float best = -INFINITY;
            for (std::int64_t u = i * per_block; u < bfla::groups_end(i, per_block, gq); ++u)
              for (std::int64_t v = j * per_block; v < bfla::groups_end(j, per_block, gk); ++v) {
                const float sv = scores[geo.pair(bh, u, v)];
                best = best < sv ? sv : best;  // std::max(best, sv)
              }
            x[j] = j < reach ? best * s.scale_log2 : -INFINITY;
            if (j < reach && !std::isfinite(x[j])) fin = 0;
          },
          Kokkos::Min<int>(finite));
      float m = -INFINITY;
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(team, reach), [&](std::int64_t j, float& mx) { mx = mx < x[j] ? x[j] : mx; },
          Kokkos::Max<float>(m));
      if (!(m > Kokkos::reduction_identity<float>::max())) m = -INFINITY;
      team.team_barrier();
      if (bfla::keep_all_blocks(finite != 0, c.gamma)) {
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, reach), [&](std::int64_t j) { keep[j] = 1; });
        continue;
      }
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lkv), [&](std::int64_t j) {
        prob[j] = j < reach ? selection_weight(x[j], m) : 0.0f;
      });
      team.team_barrier();
      if (c.gamma > 0.0f) {  // keep-mass: TopCdf over the causal blocks, crossing included
        team_selection_order(team, keys, reach, [&](std::int64_t j) { return selection_key(prob[j], static_cast<int>(j)); });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, reach), [&](std::int64_t r) { sorted[r] = selection_key_weight(keys[r]); });
        team.team_barrier();
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          *cut = top_cdf_count(sorted, static_cast<int>(reach), c.gamma, 1, true);
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, *cut), [&](std::int64_t r) { keep[selection_key_index(keys[r])] = 1; });
      }
      if (c.prob_threshold <= 1.0f) {
        team.team_barrier();
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          const float z = sum_sequential(prob, lkv);
          for (std::int64_t j = 0; j < reach; ++j)
            if (bfla::above_prob_threshold(prob[j], z, c.prob_threshold)) keep[j] = 1;
        });
      }
      if (c.keep_ratio > 0.0f || c.min_keep_blocks > 0) {  // the code's top-k floor, by score
        const std::int64_t kk = bfla::topk_floor(c.min_keep_blocks, c.keep_ratio, lkv);
        team.team_barrier();
        team_selection_order(team, keys, reach, [&](std::int64_t j) { return signed_selection_key(x[j], static_cast<int>(j)); });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, kk < reach ? kk : reach),
                             [&](std::int64_t r) { keep[selection_key_index(keys[r])] = 1; });
      }
    }
    team.team_barrier();
    // Sink and local band, the causal limit, then the coarse-grid rescues of the dropped causal blocks.
    const bfla::Band band = bfla::band(i, nq, nkv, bs, local);
    const bool coarse_rescues = c.rescue_grid == bfla::RescueGrid::coarse;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lkv), [&](std::int64_t j) {
      bool kept = keep[j] != 0 || j == 0 || (band.first <= j && j <= band.last);
      if (j >= reach) kept = false;
      else if (!kept && coarse_rescues)
        kept = (c.eta > 0 && bfla::stride_rescued(i, j, c.seed, c.eta)) ||
               (c.rho > 0.0f && bfla::random_rescued(i, j, hkv, c.seed, c.rho));
      keep[j] = kept ? 1 : 0;
    });
  }
};

template <class Exec>
struct BflaExpand {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  BflaGeometry geo;
  bfla::Config c;
  std::int64_t tq, tk;  ///< executor tiles (maxima)
  const std::uint8_t* coarse;
  std::uint8_t* keep;  ///< bitmap [B·Hkv·tq][tk]
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), r = row % tq, bk = row / tq;
    const std::int64_t b = bk / s.heads_kv, hkv = bk % s.heads_kv, nq = s.nq(b), nkv = s.nkv(b);
    const std::int32_t tile_q = c.tile_q();
    if (r * tile_q >= nq || nkv == 0) return;
    const std::int64_t tiles_k = (nkv + c.tile - 1) / c.tile;
    const std::int64_t reach = mask_policy::reachable_tiles<std::int64_t>(r, tile_q, c.tile, nq, nkv, s.causal);
    const std::uint8_t* from = coarse + (bk * geo.lq + bfla::coarse_q(r, tile_q, c.block)) * geo.lkv;
    const bool tile_rescues = c.rescue_grid == bfla::RescueGrid::tile;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tiles_k), [&](std::int64_t t) {
      bool kept = from[bfla::coarse_k(t, c.tile, c.block)] != 0;
      if (!kept && tile_rescues && t < reach)
        kept = (c.eta > 0 && bfla::stride_rescued(r, t, c.seed, c.eta)) ||
               (c.rho > 0.0f && bfla::random_rescued(r, t, hkv, c.seed, c.rho));
      keep[row * tk + t] = kept ? 1 : 0;
    });
  }
};

}  // namespace detail

template <class Exec>
EstimateViews<Exec> bfla_estimate_on(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                          std::vector<std::vector<float>>* scores_out) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const MaskShape shape = MaskShape::of(p, c.tile_q(), c.tile, true);
  const ProblemOn<Exec> on(p);
  const DeviceShape& s = on.shape;
  const std::int64_t g = c.group, bs = c.block;
  const detail::BflaGeometry geo{g, bs, bs / g, (p.seqlen_q + g - 1) / g, (p.seqlen_kv + g - 1) / g,
                                 (p.seqlen_q + bs - 1) / bs, (p.seqlen_kv + bs - 1) / bs};
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };
  bfla::Config plain = c;  // the kernels copy it: no heap members

  auto scores = detail::workspace<Exec, float>("spattn::bfla_scores",
                                               static_cast<std::size_t>(p.batch * p.heads_q * geo.gq * geo.gk));
  bool scored = false;  // by the tensor-core kernel (bfla_mma.hpp)
#if defined(SPATTN_KOKKOS_MMA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda>) {
    if (detail::bfla_mma_fits(p, q, k)) {
      const auto run = [&](auto tag) {
        using Kernel = detail::BflaScoresMma<decltype(tag), detail::BflaGroupScores<Exec>>;
        const std::int64_t tiles_u = (geo.gq + Kernel::kTile - 1) / Kernel::kTile;
        const std::int64_t tiles_v = (geo.gk + Kernel::kTile - 1) / Kernel::kTile;
        Kernel f{{s, DeviceTensor::of(q), DeviceTensor::of(k), geo, tiles_u, tiles_v, scores.data(), 0}};
        Kokkos::parallel_for("spattn::kokkos::bfla_group_scores_mma",
                             typename Kernel::Policy(idx(p.batch * p.heads_q * tiles_u * tiles_v), Kernel::kThreads)
                                 .set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(Kernel::scratch_bytes()))),
                             f);
      };
      if (q.dtype == DType::f16) run(__half{});
      else run(__nv_bfloat16{});
      scored = true;
    }
  }
#endif
  if (!scored) {
    using Scores = detail::BflaGroupScores<Exec>;
    const std::int64_t tiles_u = (geo.gq + detail::kGroupTile - 1) / detail::kGroupTile;
    const std::int64_t tiles_v = (geo.gk + detail::kGroupTile - 1) / detail::kGroupTile;
    const std::size_t bytes = Scores::scratch_bytes();
    const int level = scratch_level<Exec>(bytes);
    Kokkos::parallel_for("spattn::kokkos::bfla_group_scores",
                         Policy(idx(p.batch * p.heads_q * tiles_u * tiles_v), ts == 1 ? 1 : 256)
                             .set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                         Scores{s, DeviceTensor::of(q), DeviceTensor::of(k), geo, tiles_u, tiles_v, scores.data(), level});
  }
  auto coarse = detail::workspace<Exec, std::uint8_t>("spattn::bfla_coarse",
                                                      static_cast<std::size_t>(p.batch * p.heads_kv * geo.lq * geo.lkv));
  {
    const std::size_t bytes = sizeof(std::uint64_t) * static_cast<std::size_t>(detail::sort_length(geo.lkv)) +
                              3 * sizeof(float) * static_cast<std::size_t>(geo.lkv) + 64;
    const int level = scratch_level<Exec>(bytes);
    Kokkos::parallel_for("spattn::kokkos::bfla_block_rule",
                         Policy(idx(p.batch * p.heads_kv * geo.lq), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                         detail::BflaBlockRule<Exec>{s, geo, plain, bfla::local_blocks(c.n_local, c.tile, c.block),
                                                     scores.data(), coarse.data(), level});
  }
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles();
  auto keep = detail::workspace<Exec, std::uint8_t>("spattn::keep", static_cast<std::size_t>(shape.num_rows() * tk));
  Kokkos::parallel_for("spattn::kokkos::bfla_expand", Policy(idx(shape.num_rows()), ts),
                       detail::BflaExpand<Exec>{s, geo, plain, tq, tk, coarse.data(), keep.data()});

  if (scores_out != nullptr) {
    const std::vector<float> all = to_host(scores);
    scores_out->assign(static_cast<std::size_t>(p.batch * p.heads_q), {});
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const std::int64_t gq = (p.seqlen_q_of(b) + g - 1) / g, gk = (p.seqlen_kv_of(b) + g - 1) / g;
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        std::vector<float>& out = (*scores_out)[static_cast<std::size_t>(b * p.heads_q + h)];
        for (std::int64_t u = 0; u < gq; ++u)
          for (std::int64_t v = 0; v < gk; ++v) out.push_back(all[static_cast<std::size_t>(geo.pair(b * p.heads_q + h, u, v))]);
      }
    }
  }
  EstimateViews<Exec> out{};
  out.shape = shape;
  set_mask_from_bitmap(out, s, keep);
  return out;
}

}  // namespace spattn::kokkos
