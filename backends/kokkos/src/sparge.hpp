// SpargeAttn's Stage 1 (research/spargeattn.md §3) as Kokkos kernels, every decision by the core's rules
// (spattn/methods/sparge.hpp, pooling.hpp, topcdf.hpp) in their fixed fp32 order, so that the mask is bit-identical
// to the reference's (reference/src/sparge.cpp):
//   1. key means over each sequence (sequence_mean), a team per (batch, KV head), a column per thread;
//   2. pooled block means and self-similarities of the centred keys and of the queries, a team per block (on a GPU
//      its 16-bit rows first copied into team scratch): rows' inverse norms in parallel, then the unit sums of the
//      columns in parallel, then similarity_of; the key means stored column-major for step 3;
//   3. a team per (batch, query head, query block): pooled scores, the row max, the selection order of the
//      candidates (team_sort.hpp: the core's selection keys sorted in team scratch), the cut by top_cdf_count or
//      topk_count, then the forced blocks; written as a bitmap row.
#pragma once

#include <Kokkos_Core.hpp>
#include <vector>

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

template <class Exec>
using Floats = Kokkos::View<float*, typename Exec::memory_space>;

/// Step 2: the pooled mean and self-similarity (sim[bh·blocks + j]) of block j of `block` rows of head bh = b·heads + h;
/// keys are centred by mu (null for queries). The mean goes to mean[(bh·blocks + j)·d + c], or with `transposed` to
/// mean[(bh·d + c)·blocks + j] (the key means: the selection's threads then read consecutive blocks). `staged`: the
/// block's 16-bit rows are first copied into team scratch (4-byte words, coalesced, 32-bit index arithmetic; rows
/// padded to an odd number of words so that a thread per row reads without bank conflicts) with the key centre, and
/// the three passes read them there.
template <class Exec>
struct SpargePool {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q, transposed, staged;
  std::int64_t heads, block, blocks;
  const float* mu;
  float* mean;
  float* sim;
  int level;

  /// Elements per staged row: 2·(odd number of 4-byte words) ≥ d.
  static KOKKOS_INLINE_FUNCTION std::int64_t staged_stride(std::int64_t d) { return 2 * (((d + 1) / 2) | 1); }
  static std::size_t scratch_bytes(std::int64_t block, std::int64_t d, bool staged) {
    // inv, u; staged: the rows, the centre and each row's offset
    const std::int64_t extra = staged ? block * staged_stride(d) * 2 + d * 4 + block * 8 : 0;
    return sizeof(float) * static_cast<std::size_t>(block + d) + static_cast<std::size_t>(extra) + 4 * 64;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t j = team.league_rank() % blocks, bh = team.league_rank() / blocks;
    const std::int64_t b = bh / heads, h = bh % heads, n = is_q ? s.nq(b) : s.nkv(b);
    const std::int64_t first = j * block;
    if (first >= n) return;
    const std::int64_t rows = block < n - first ? block : n - first, d = s.d, ld = staged_stride(d);
    float* inv = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * block));
    float* u = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * d));
    std::uint16_t* raw =
        staged ? static_cast<std::uint16_t*>(team.team_scratch(level).get_shmem(sizeof(std::uint16_t) * block * ld)) : nullptr;
    float* centre = staged && mu != nullptr ? static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * d)) : nullptr;
    auto* offset = staged ? static_cast<std::int64_t*>(team.team_scratch(level).get_shmem(sizeof(std::int64_t) * block)) : nullptr;
    if (staged) {  // each row's offset once, then a 4-byte word (two entries) per item: 32-bit index arithmetic
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
        offset[r] = s.row(t, is_q, b, h, first + r) / 2;  // even (staged requires even strides)
      });
      if (centre != nullptr) Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d), [&](std::int64_t c) { centre[c] = mu[bh * d + c]; });
      team.team_barrier();
      const auto* words = static_cast<const std::uint32_t*>(t.data);
      auto* out = reinterpret_cast<std::uint32_t*>(raw);
      const int per_row = static_cast<int>(d / 2), ldw = static_cast<int>(ld / 2);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, static_cast<int>(rows) * per_row), [&](int x) {
        const int r = x / per_row, w = x - r * per_row;
        out[r * ldw + w] = words[offset[r] + w];
      });
      team.team_barrier();
    }
    const bool bf16 = t.dtype == DType::bf16;
    const int ldi = static_cast<int>(ld);
    const auto value = [&](std::int64_t r, std::int64_t col) {
      if (staged) {
        const std::uint16_t v = raw[static_cast<int>(r) * ldi + static_cast<int>(col)];
        const float x = bf16 ? bf16_bits_to_f32(v) : f16_bits_to_f32(v);
        return centre != nullptr ? x - centre[col] : x;
      }
      const float x = t.load(s.row(t, is_q, b, h, first + r) + col);
      return mu != nullptr ? x - mu[bh * d + col] : x;
    };
    std::int64_t nonzero = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, rows),
        [&](std::int64_t r, std::int64_t& nz) {
          inv[r] = sparge::row_inv_norm(value, r, d);
          nz += inv[r] >= 0.0f ? 1 : 0;
        },
        nonzero);
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d), [&](std::int64_t col) {
      u[col] = sparge::unit_sum(value, inv, rows, col);
      const float m = column_mean([&](std::int64_t r) { return value(r, col); }, rows);
      mean[transposed ? (bh * d + col) * blocks + j : (bh * blocks + j) * d + col] = m;
    });
    team.team_barrier();
    Kokkos::single(Kokkos::PerTeam(team), [&]() { sim[bh * blocks + j] = sparge::similarity_of(u, nonzero, d); });
  }
};

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
    const float* km = k_mean + (b * s.heads_kv + hkv) * s.d * tk;  // [c][j]: SpargePool's transposed key means
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
  const DeviceTensor qt = DeviceTensor::of(q), kt = DeviceTensor::of(k);
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };

  detail::Floats<Exec> mu(std::string("spattn::k_mu"), static_cast<std::size_t>(p.batch * p.heads_kv * d));
  detail::sequence_mean<Exec>(s, kt, false, p.heads_kv, p.seqlen_kv, mu.data());

  detail::Floats<Exec> k_mean(std::string("spattn::k_mean"), static_cast<std::size_t>(p.batch * p.heads_kv * tk * d));
  detail::Floats<Exec> k_sim(std::string("spattn::k_sim"), static_cast<std::size_t>(p.batch * p.heads_kv * tk));
  detail::Floats<Exec> q_mean(std::string("spattn::q_mean"), static_cast<std::size_t>(p.batch * p.heads_q * tq * d));
  detail::Floats<Exec> q_sim(std::string("spattn::q_sim"), static_cast<std::size_t>(p.batch * p.heads_q * tq));
  const auto pool = [&](const DeviceTensor& t, bool is_q, std::int64_t heads, std::int64_t block, std::int64_t blocks,
                        const float* centre, float* mean, float* sim) {
    using Pool = detail::SpargePool<Exec>;
    // Staged in level-0 scratch on a GPU where the block's 16-bit rows fit (the host reads them in place).
    const bool even = d % 2 == 0 && t.stride_n % 2 == 0 && t.stride_h % 2 == 0 && t.stride_b % 2 == 0 &&
                      reinterpret_cast<std::uintptr_t>(t.data) % 4 == 0;  // rows as whole 4-byte words
    const bool staged = ts > 1 && t.dtype != DType::f32 && even &&
                        Pool::scratch_bytes(block, d, true) <= static_cast<std::size_t>(Policy::scratch_size_max(0));
    const std::size_t bytes = Pool::scratch_bytes(block, d, staged);
    const int level = scratch_level<Exec>(bytes);
    Kokkos::parallel_for("spattn::kokkos::sparge_pool",
                         Policy(idx(p.batch * heads * blocks), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                         Pool{s, t, is_q, !is_q, staged, heads, block, blocks, centre, mean, sim, level});
  };
  pool(kt, false, p.heads_kv, c.block_k, tk, mu.data(), k_mean.data(), k_sim.data());
  pool(qt, true, p.heads_q, c.block_q, tq, nullptr, q_mean.data(), q_sim.data());

  const auto theta = detail::per_head<Exec>("spattn::theta", c.theta, p.heads_q, 0.0f);
  const auto tau = detail::per_head<Exec>("spattn::tau", c.tau, p.heads_q, 1.0f);
  const auto dense = detail::per_head<Exec>("spattn::dense", c.dense_heads, p.heads_q, std::uint8_t{0});
  Kokkos::View<std::uint8_t*, typename Exec::memory_space> keep(std::string("spattn::keep"),
                                                                 static_cast<std::size_t>(shape.num_rows() * tk));
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
