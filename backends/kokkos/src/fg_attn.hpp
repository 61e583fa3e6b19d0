// FG-Attn's estimator (research/fgattn.md §2; the rules in spattn/methods/fg_attn.hpp) as Kokkos kernels, the core's
// fixed fp32 order throughout, so that the mask is bit-identical to the reference's (reference/src/fg_attn.cpp):
//   1. tile means of Q (per query head) and K (per KV head, stored column-major), a team per tile, a column per thread
//      (column_mean);
//   2. a team per (batch, query head, query tile): pooled logits (pooled_logit, the tail weight), the dense fallback,
//      the selection order (team_sort.hpp), the top-p cut by top_cdf_count (crossing included); a bitmap row.
// Union semantics and merging are the core's host functions over the resulting mask (fg_attn::plan, effective_mask).
#pragma once

#include <Kokkos_Core.hpp>
#include <vector>

#include "device_estimate.hpp"
#include "kernel_args.hpp"
#include "team_sort.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::kokkos {

template <class Exec>
EstimateViews<Exec> fg_attn_estimate_on(const Problem& problem, const TensorView& q, const TensorView& k,
                                         const fg_attn::Config& c);

namespace detail {

/// The mean of column c over tile j (`tile` rows) of head bh = b·heads + h at mean[(bh·tiles + j)·d + c], or with
/// `transposed` at mean[(bh·d + c)·tiles + j] (the key means: the selection's threads then read consecutive tiles).
template <class Exec>
struct TileMeans {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q, transposed;
  std::int64_t heads, tile, tiles;
  float* mean;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t j = team.league_rank() % tiles, bh = team.league_rank() / tiles;
    const std::int64_t b = bh / heads, h = bh % heads, n = is_q ? s.nq(b) : s.nkv(b), first = j * tile;
    if (first >= n) return;
    const std::int64_t rows = tile < n - first ? tile : n - first;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, s.d), [&](std::int64_t col) {
      mean[transposed ? (bh * s.d + col) * tiles + j : (bh * tiles + j) * s.d + col] =
          column_mean([&](std::int64_t r) { return t.load(s.row(t, is_q, b, h, first + r) + col); }, rows);
    });
  }
};

template <class Exec>
struct FgSelect {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  std::int32_t tile_q, tile_k;
  float top_p;
  bool size_weighted_tail;
  std::int64_t tq, tk;
  const float *q_mean, *k_mean;
  std::uint8_t* keep;
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), i = row % tq, bh = row / tq;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b);
    if (i * tile_q >= nq) return;
    const std::int64_t reach = mask_policy::reachable_tiles<std::int64_t>(i, tile_q, tile_k, nq, nkv, s.causal);
    const float tail = fg_attn::tail_weight(nkv, tile_k, size_weighted_tail);
    const float* qm = q_mean + (bh * tq + i) * s.d;
    const float* km = k_mean + (b * s.heads_kv + hkv) * s.d * tk;  // [c][j]: TileMeans' transposed key means
    std::uint8_t* out = keep + row * tk;
    auto* keys = static_cast<std::uint64_t*>(team.team_scratch(level).get_shmem(sizeof(std::uint64_t) * sort_length(tk)));
    float* prob = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * tk));  // then: the sorted weights
    int* cut = static_cast<int*>(team.team_scratch(level).get_shmem(sizeof(int)));

    int finite = 1;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, reach),
        [&](std::int64_t j, int& fin) {
          float x = fg_attn::pooled_logit(qm, km + j, s.d, s.scale_log2, tk);
          if (fg_attn::is_tail_tile(j, nkv, tile_k)) x += tail;
          prob[j] = x;
          if (!std::isfinite(x)) fin = 0;
        },
        Kokkos::Min<int>(finite));
    float m = -INFINITY;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, reach), [&](std::int64_t j, float& mx) { mx = prob[j] > mx ? prob[j] : mx; },
        Kokkos::Max<float>(m));
    if (!(m > Kokkos::reduction_identity<float>::max())) m = -INFINITY;
    team.team_barrier();
    if (fg_attn::keep_all_tiles(finite != 0, top_p)) {  // dense fallback (NaN/Inf inputs) or p >= 1
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, reach), [&](std::int64_t j) { out[j] = 1; });
      return;
    }
    team_selection_order(team, keys, reach,
                         [&](std::int64_t j) { return selection_key(selection_weight(prob[j], m), static_cast<int>(j)); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, reach), [&](std::int64_t r) { prob[r] = selection_key_weight(keys[r]); });
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() { *cut = top_cdf_count(prob, static_cast<int>(reach), top_p, 1, true); });
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, reach), [&](std::int64_t r) {
      out[selection_key_index(keys[r])] = r < *cut ? 1 : 0;
    });
  }
};

}  // namespace detail

template <class Exec>
EstimateViews<Exec> fg_attn_estimate_on(const Problem& p, const TensorView& q, const TensorView& k,
                                         const fg_attn::Config& c) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const MaskShape shape = MaskShape::of(p, c.tile_q, c.tile_k);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const ProblemOn<Exec> on(p);
  const DeviceShape& s = on.shape;
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };
  Kokkos::View<float*, typename Exec::memory_space> q_mean(std::string("spattn::q_mean"),
                                                            static_cast<std::size_t>(p.batch * p.heads_q * tq * d));
  Kokkos::View<float*, typename Exec::memory_space> k_mean(std::string("spattn::k_mean"),
                                                            static_cast<std::size_t>(p.batch * p.heads_kv * tk * d));
  Kokkos::parallel_for("spattn::kokkos::fg_attn_q_means", Policy(idx(p.batch * p.heads_q * tq), ts),
                       detail::TileMeans<Exec>{s, DeviceTensor::of(q), true, false, p.heads_q, c.tile_q, tq, q_mean.data()});
  Kokkos::parallel_for("spattn::kokkos::fg_attn_k_means", Policy(idx(p.batch * p.heads_kv * tk), ts),
                       detail::TileMeans<Exec>{s, DeviceTensor::of(k), false, true, p.heads_kv, c.tile_k, tk, k_mean.data()});
  Kokkos::View<std::uint8_t*, typename Exec::memory_space> keep(std::string("spattn::keep"),
                                                                 static_cast<std::size_t>(shape.num_rows() * tk));
  const std::size_t bytes = sizeof(std::uint64_t) * static_cast<std::size_t>(detail::sort_length(tk)) +
                            sizeof(float) * static_cast<std::size_t>(tk) + 64;
  const int level = scratch_level<Exec>(bytes);
  Kokkos::parallel_for("spattn::kokkos::fg_attn_select",
                       Policy(idx(shape.num_rows()), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                       detail::FgSelect<Exec>{s, c.tile_q, c.tile_k, c.top_p, c.size_weighted_tail, tq, tk,
                                              q_mean.data(), k_mean.data(), keep.data(), level});
  EstimateViews<Exec> out{};
  out.shape = shape;
  set_mask_from_bitmap(out, s, keep);
  return out;
}

}  // namespace spattn::kokkos
