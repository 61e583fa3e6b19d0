// SpargeAttn's Stage 1 (research/spargeattn.md §3) as Kokkos kernels, every decision by the core's rules
// (spattn/methods/sparge.hpp, pooling.hpp, topcdf.hpp) in their fixed fp32 order, so that the mask is bit-identical
// to the reference's (reference/src/sparge.cpp):
//   1. key means over each sequence (sequence_mean), a team per (batch, KV head), a column per thread;
//   2. pooled block means and self-similarities of the centred keys and of the queries (block_pool.hpp), a team per
//      block: rows' inverse norms in parallel, then the unit sums of the columns in parallel, then similarity_of; the
//      key means stored column-major for step 3;
//   3. a team per (batch, query head, query block): pooled scores, the row max, the selection order of the
//      candidates (team_sort.hpp: the core's selection keys sorted in team scratch), the cut by top_cdf_count or
//      topk_count, then the forced blocks; written as a bitmap row.
#pragma once

#include <Kokkos_Core.hpp>
#include <vector>

#include "block_pool.hpp"
#include "device_estimate.hpp"
#include "kernel_args.hpp"
#include "sequence_mean.hpp"
#include "team_sort.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::kokkos {

template <class Exec>
EstimateViews<Exec> sparge_estimate_on(const Problem& problem, const TensorView& q, const TensorView& k,
                                        const sparge::Config& c);

namespace detail {

/// Step 3: the kept key blocks of one (batch, query head, query block) as bitmap row keep[row·tk + j].
template <class Exec>
struct SpargeSelect {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  std::int64_t block_q, block_k, tq, tk;
  float topk;
  bool attention_sink;
  const float *theta, *tau, *q_mean, *q_sim, *k_mean, *k_sim;
  const std::uint8_t* dense;
  std::uint8_t* keep;
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), i = row % tq, bh = row / tq;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b);
    if (i * block_q >= nq) return;
    const std::int64_t reach = mask_policy::reachable_tiles(i, block_q, block_k, nq, nkv, s.causal);
    const std::int64_t blocks_k = (nkv + block_k - 1) / block_k;
    const float th = theta[h];
    const float* qm = q_mean + (bh * tq + i) * s.d;
    const float* km = k_mean + (b * s.heads_kv + hkv) * s.d * tk;  // [c][j]: block_pool.hpp's transposed key means
    const float* ks = k_sim + (b * s.heads_kv + hkv) * tk;
    std::uint8_t* out = keep + row * tk;
    const bool forced = sparge::row_forced(dense[h] != 0, sparge::self_similar(q_sim[bh * tq + i], th));

    auto* keys = static_cast<std::uint64_t*>(team.team_scratch(level).get_shmem(sizeof(std::uint64_t) * sort_length(tk)));
    float* prob = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * tk));  // then: the sorted weights
    int* candidate = static_cast<int*>(team.team_scratch(level).get_shmem(sizeof(int) * tk));
    int* cut = static_cast<int*>(team.team_scratch(level).get_shmem(sizeof(int)));

    // Scores of the candidates (−∞ elsewhere, in prob for now), their max and count; forced columns and rows.
    float m = -INFINITY;
    int n_valid = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, blocks_k),
        [&](std::int64_t j, float& mx) {
          const bool k_similar = sparge::self_similar(ks[j], th);
          const bool valid = sparge::candidate(j, reach, k_similar);
          out[j] = j < reach && (forced || sparge::column_forced(k_similar)) ? 1 : 0;
          prob[j] = valid ? sparge::pooled_score(qm, km + j, static_cast<int>(s.d), s.scale_log2, tk) : -INFINITY;
          candidate[j] = valid ? 1 : 0;
          if (valid && prob[j] > mx) mx = prob[j];
        },
        Kokkos::Max<float>(m));
    // The reducer starts at the lowest finite value; the reference's max starts at −∞ (all candidates −∞: unusable).
    if (!(m > Kokkos::reduction_identity<float>::max())) m = -INFINITY;
    team.team_barrier();
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, blocks_k), [&](std::int64_t j, int& nv) { nv += candidate[j]; }, n_valid);
    team.team_barrier();
    if (sparge::scores_usable(n_valid, m)) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blocks_k), [&](std::int64_t j) {
        prob[j] = candidate[j] ? selection_weight(prob[j], m) : 0.0f;
      });
      team.team_barrier();
      // The selection order of the candidates (descending, ties by lower index), their weights in that order.
      team_selection_order(team, keys, reach, [&](std::int64_t j) {  // candidates lie below reach
        return candidate[j] ? selection_key(prob[j], static_cast<int>(j)) : kNoSelectionKey;
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n_valid), [&](std::int64_t r) { prob[r] = selection_key_weight(keys[r]); });
      team.team_barrier();
      Kokkos::single(Kokkos::PerTeam(team), [&]() {
        if (topk > 0.0f) {
          const std::int64_t kk = sparge::topk_count(topk, reach);
          *cut = static_cast<int>(kk < n_valid ? kk : n_valid);
        } else {
          *cut = top_cdf_count(prob, n_valid, tau[h], 1, false);
        }
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, *cut), [&](std::int64_t r) { out[selection_key_index(keys[r])] = 1; });
    } else if (n_valid > 0) {  // NaN/Inf pooled scores: dense row
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, reach), [&](std::int64_t j) { out[j] = 1; });
    }
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      if (s.causal) {
        const std::int64_t first = i * block_q, last = (first + block_q < nq ? first + block_q : nq) - 1;
        const sparge::BlockRange diag = sparge::diagonal_blocks(first, last, nkv - nq, block_k, reach);
        for (std::int64_t j = diag.first; j <= diag.last; ++j) out[j] = 1;
      }
      if (attention_sink && reach > 0) out[0] = 1;
    });
  }
};

template <class Exec, class T>
Kokkos::View<T*, typename Exec::memory_space> per_head(const char* label, const std::vector<T>& values,
                                                         std::int64_t heads, T fallback) {
  std::vector<T> all(static_cast<std::size_t>(heads), fallback);
  for (std::int64_t h = 0; h < heads; ++h)
    if (!values.empty()) all[static_cast<std::size_t>(h)] = values.size() == 1 ? values[0] : values[static_cast<std::size_t>(h)];
  return to_space<Exec>(label, all.data(), all.size());
}

}  // namespace detail

template <class Exec>
EstimateViews<Exec> sparge_estimate_on(const Problem& p, const TensorView& q, const TensorView& k,
                                        const sparge::Config& c) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const MaskShape shape = MaskShape::of(p, c.block_q, c.block_k);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const ProblemOn<Exec> on(p);
  const DeviceShape& s = on.shape;
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };

  auto mu = detail::workspace<Exec, float>("spattn::k_mu", static_cast<std::size_t>(p.batch * p.heads_kv * d));
  detail::sequence_mean<Exec>(s, DeviceTensor::of(k), false, p.heads_kv, p.seqlen_kv, mu.data());

  auto k_mean = detail::workspace<Exec, float>("spattn::k_mean", static_cast<std::size_t>(p.batch * p.heads_kv * tk * d));
  auto k_sim = detail::workspace<Exec, float>("spattn::k_sim", static_cast<std::size_t>(p.batch * p.heads_kv * tk));
  auto q_mean = detail::workspace<Exec, float>("spattn::q_mean", static_cast<std::size_t>(p.batch * p.heads_q * tq * d));
  auto q_sim = detail::workspace<Exec, float>("spattn::q_sim", static_cast<std::size_t>(p.batch * p.heads_q * tq));
  detail::pool_blocks<Exec>("spattn::kokkos::sparge_pool", s, k, false, p.heads_kv, c.block_k, tk, mu.data(), k_mean.data(),
                            k_sim.data());
  detail::pool_blocks<Exec>("spattn::kokkos::sparge_pool", s, q, true, p.heads_q, c.block_q, tq, nullptr, q_mean.data(),
                            q_sim.data());

  const auto theta = detail::per_head<Exec>("spattn::theta", c.theta, p.heads_q, 0.0f);
  const auto tau = detail::per_head<Exec>("spattn::tau", c.tau, p.heads_q, 1.0f);
  const auto dense = detail::per_head<Exec>("spattn::dense", c.dense_heads, p.heads_q, std::uint8_t{0});
  auto keep = detail::workspace<Exec, std::uint8_t>("spattn::keep", static_cast<std::size_t>(shape.num_rows() * tk));
  const std::size_t bytes = sizeof(std::uint64_t) * static_cast<std::size_t>(detail::sort_length(tk)) +
                            (sizeof(float) + sizeof(int)) * static_cast<std::size_t>(tk) + 64;
  const int level = scratch_level<Exec>(bytes);
  Kokkos::parallel_for("spattn::kokkos::sparge_select",
                       Policy(idx(shape.num_rows()), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                       detail::SpargeSelect<Exec>{s, c.block_q, c.block_k, tq, tk, c.topk, c.attention_sink,
                                                  theta.data(), tau.data(), q_mean.data(), q_sim.data(),
                                                  k_mean.data(), k_sim.data(), dense.data(), keep.data(), level});
  EstimateViews<Exec> out{};
  out.shape = shape;
  set_mask_from_bitmap(out, s, keep);
  return out;
}

}  // namespace spattn::kokkos
