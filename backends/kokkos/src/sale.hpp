// SALE's estimator (research/sale.md; the rules in spattn/methods/sale.hpp) as Kokkos kernels:
//   1. sequence means of Q (per query head) and K (per KV head), sequence_mean's chunked order;
//   2. codes and scales of the centred rows by the core's groups (q_group, k_group, group_scale, quant_code), a team
//      per chunk of whole groups (16 or 64 query rows; 32 keys, or 128-key segments), a row per thread (the group's
//      amax is a max: any order gives its bits);
//   3. the smoothing bias qmk_j = dot_lanes8(μ_q, k'_j) per (query head, key);
//   4. a team per (batch, query head, 64-row query block): sink, local and candidate blocks (candidate_segments), the
//      exact sink-local state of each row (one fma chain per score, the core's online softmax) and its threshold, then
//      every candidate block's margin from the integer products of the codes (GroupMax per K scale group).
// Codes, scales, biases and integer products are the reference's bit for bit (DESIGN.md §5.2); the sink-local scores
// are dot products whose order differs from the reference's Eigen dot, so a decision at its threshold may differ.
// Given the same sink-local states, the same mask (the test feeds reference::sale_select with these states).
#pragma once

#include <Kokkos_Core.hpp>
#include <cmath>
#include <vector>

#include "device_estimate.hpp"
#include "kernel_args.hpp"
#include "sequence_mean.hpp"
#include "spattn/anchor.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"

namespace spattn::kokkos {

/// The mask, the margins and each row's sink-local (m, l) (EstimateViews::margins / states, as
/// reference::SaleEstimate's) and the (candidate, selected) counts per mask row.
template <class Exec>
EstimateViews<Exec> sale_estimate_on(const Problem& problem, const TensorView& q, const TensorView& k,
                                      const sale::Config& c);

namespace detail {

/// Codes [(bh·n_max + r)·d + e] and scales [bh·n_max + r] of the centred rows x − μ of head bh, a team per chunk of
/// whole scale groups (sale::q_chunk_rows, sale::k_chunk_begin: 16 or 64 query rows; 32 keys, or block 0 and 128-key
/// segments), a row per thread.
template <class Exec>
struct SaleQuantize {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q;
  sale::Groups groups;
  std::int64_t heads, chunks, n_max;
  int range;
  const float* mu;
  std::int8_t* codes;
  float* scale;
  KOKKOS_INLINE_FUNCTION std::int64_t begin(std::int64_t c) const {
    return is_q ? c * sale::q_chunk_rows(groups) : sale::k_chunk_begin(c, groups);
  }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t c = team.league_rank() % chunks, bh = team.league_rank() / chunks, c0 = begin(c);
    const std::int64_t b = bh / heads, h = bh % heads, n = is_q ? s.nq(b) : s.nkv(b), d = s.d;
    if (c0 >= n) return;
    const auto value = [&](std::int64_t r, std::int64_t e) { return t.load(s.row(t, is_q, b, h, r) + e) - mu[bh * d + e]; };
    const auto group_of = [&](std::int64_t r) { return is_q ? sale::q_group(r, groups) : sale::k_group(r, groups); };
    const std::int64_t end = begin(c + 1) < n ? begin(c + 1) : n;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c0, end), [&](std::int64_t r) {
      float amax = 0.0f;  // over the valid rows of r's group (all inside this chunk)
      for (std::int64_t o = c0; o < end; ++o)
        if (group_of(o) == group_of(r))
          for (std::int64_t e = 0; e < d; ++e) {
            const float a = std::fabs(value(o, e));
            amax = amax < a ? a : amax;  // std::max(amax, a)
          }
      const float inv = sale::group_inv_scale(amax, range);
      scale[bh * n_max + r] = sale::group_scale(amax, range);
      for (std::int64_t e = 0; e < d; ++e)
        codes[(bh * n_max + r) * d + e] = static_cast<std::int8_t>(sale::quant_code(value(r, e), inv, range));
    });
  }
};

/// qmk[bh·nkv_max + j] = dot_lanes8(μ_q, k_j − μ_k), a key per thread.
template <class Exec>
struct SaleBias {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor k;
  std::int64_t chunks;
  const float *mu_q, *mu_k;
  float* qmk;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t c0 = (team.league_rank() % chunks) * 32, bh = team.league_rank() / chunks;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group(), nkv = s.nkv(b), d = s.d;
    if (c0 >= nkv) return;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c0, c0 + 32 < nkv ? c0 + 32 : nkv), [&](std::int64_t j) {
      float kj[Problem::kMaxHeadDim];
      const std::int64_t at = s.row(k, false, b, hkv, j);
      for (std::int64_t e = 0; e < d; ++e) kj[e] = k.load(at + e) - mu_k[(b * s.heads_kv + hkv) * d + e];
      qmk[bh * s.seqlen_kv + j] = dot_lanes8(mu_q + bh * d, kj, static_cast<int>(d));
    });
  }
};

template <class Exec>
struct SaleSelect {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor q, k;
  std::int64_t tq, tk, local_blocks;
  const float *tau, *mu_k, *qmk, *q_scale, *k_scale;
  const std::int8_t *q_codes, *k_codes;
  float* sink_local;  ///< (m, l) pairs [(b·Hq + h)·Nq + i]
  float* margins;     ///< [((b·Hq + h)·Tq + blk)·Tk + jb]
  std::uint8_t* keep;
  std::int64_t* counts;  ///< per row of the mask: candidates, selected
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), blk = row % tq, bh = row / tq;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group(), nq = s.nq(b), nkv = s.nkv(b), d = s.d;
    const std::int64_t first = blk * sale::kBlockQ;
    if (first >= nq) return;
    const std::int64_t last = (first + sale::kBlockQ < nq ? first + sale::kBlockQ : nq) - 1, nrows = last - first + 1;
    const std::int64_t n_max = mask_policy::reachable_tiles<std::int64_t>(blk, sale::kBlockQ, sale::kBlockK, nq, nkv, s.causal);
    const std::int64_t segs = sale::candidate_segments(n_max, local_blocks, tau[h]);
    const std::int64_t cand_end = sale::candidate_end(segs);
    std::uint8_t* out = keep + row * tk;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n_max), [&](std::int64_t j) {
      out[j] = j == 0 || j >= cand_end || segs == 0 ? 1 : 0;
    });
    if (segs == 0) return;  // dense head or a short row: everything is sink/local
    const float sl = s.scale_log2;
    float* thr = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * sale::kBlockQ));
    // Exact sink-local state and raw-logit threshold of each row.
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nrows), [&](std::int64_t r) {
      const std::int64_t i = first + r;
      const AnchorRegion region = sale::sink_local_region(mask_policy::row_key_end(i, nq, nkv, s.causal), cand_end);
      const std::int64_t qat = s.row(q, true, b, h, i);
      SoftmaxState st;
      const auto fold = [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t j = begin; j < end; ++j) {
          const std::int64_t kat = s.row(k, false, b, hkv, j);
          float dot = 0.0f;
          for (std::int64_t e = 0; e < d; ++e) dot = fma_f32(q.load(qat + e), k.load(kat + e) - mu_k[(b * s.heads_kv + hkv) * d + e], dot);
          float x = dot * sl, w;
          OnlineSoftmax::update(st, &x, 1, &w);
        }
      };
      fold(0, region.sink_end);
      fold(region.local_begin, region.local_end);
      thr[r] = sale::threshold(st, tau[h], sl);
      sink_local[2 * (bh * s.seqlen_q + i)] = st.m;
      sink_local[2 * (bh * s.seqlen_q + i) + 1] = st.l;
    });
    team.team_barrier();
    // Candidate blocks [1, cand_end): the largest estimate − threshold over valid (row, key) pairs, per K scale group.
    std::int64_t selected = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, std::int64_t{1}, cand_end),
        [&](std::int64_t jb, std::int64_t& sel) {
          float margin = -INFINITY;
          for (std::int64_t r = 0; r < nrows; ++r) {
            const std::int64_t i = first + r, visible = mask_policy::row_key_end(i, nq, nkv, s.causal);
            const float sq = q_scale[bh * s.seqlen_q + i];
            const std::int8_t* qc = q_codes + (bh * s.seqlen_q + i) * d;
            for (int g = 0; g < 4; ++g) {
              sale::GroupMax group;
              for (int a = 0; a < 4; ++a)
                for (int cc = 0; cc < 2; ++cc) {
                  const std::int64_t j = sale::group_key(jb, a, g, cc);
                  if (j >= nkv || j >= visible) continue;
                  const std::int8_t* kc = k_codes + ((b * s.heads_kv + hkv) * s.seqlen_kv + j) * d;
                  std::int32_t acc = 0;
                  for (std::int64_t e = 0; e < d; ++e) acc += std::int32_t{qc[e]} * std::int32_t{kc[e]};
                  group.add(acc, qmk[bh * s.seqlen_kv + j], sq, k_scale[(b * s.heads_kv + hkv) * s.seqlen_kv + j]);
                }
              const float mg = group.estimate() - thr[r];
              margin = margin < mg ? mg : margin;  // std::max(margin, mg)
            }
          }
          margins[row * tk + jb] = margin;
          const bool kept = sale::selected(margin);
          out[jb] = kept ? 1 : 0;
          sel += kept ? 1 : 0;
        },
        selected);
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      counts[2 * row] = cand_end - 1;
      counts[2 * row + 1] = selected;
    });
  }
};

}  // namespace detail

template <class Exec>
EstimateViews<Exec> sale_estimate_on(const Problem& p, const TensorView& q, const TensorView& k,
                                      const sale::Config& c) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const MaskShape shape = MaskShape::of(p, sale::kBlockQ, sale::kBlockK);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const ProblemOn<Exec> on(p);
  const DeviceShape& s = on.shape;
  const DeviceTensor qt = DeviceTensor::of(q), kt = DeviceTensor::of(k);
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const std::int64_t bq = p.batch * p.heads_q, bk = p.batch * p.heads_kv;

  auto mu_q = detail::workspace<Exec, float>("spattn::mu_q", n(bq * d));
  auto mu_k = detail::workspace<Exec, float>("spattn::mu_k", n(bk * d));
  detail::sequence_mean<Exec>(s, qt, true, p.heads_q, p.seqlen_q, mu_q.data());
  detail::sequence_mean<Exec>(s, kt, false, p.heads_kv, p.seqlen_kv, mu_k.data());
  auto q_codes = detail::workspace<Exec, std::int8_t>("spattn::q_codes", n(bq * p.seqlen_q * d));
  auto k_codes = detail::workspace<Exec, std::int8_t>("spattn::k_codes", n(bk * p.seqlen_kv * d));
  auto q_scale = detail::workspace<Exec, float>("spattn::q_scale", n(bq * p.seqlen_q));
  auto k_scale = detail::workspace<Exec, float>("spattn::k_scale", n(bk * p.seqlen_kv));
  const std::int64_t q_rows = sale::q_chunk_rows(c.groups), q_chunks = (p.seqlen_q + q_rows - 1) / q_rows;
  const std::int64_t k_quant_chunks = sale::k_chunks(p.seqlen_kv, c.groups), k_chunks = (p.seqlen_kv + 31) / 32;
  Kokkos::parallel_for("spattn::kokkos::sale_quantize_q", Policy(idx(bq * q_chunks), ts),
                       detail::SaleQuantize<Exec>{s, qt, true, c.groups, p.heads_q, q_chunks, p.seqlen_q, c.range(),
                                                  mu_q.data(), q_codes.data(), q_scale.data()});
  Kokkos::parallel_for("spattn::kokkos::sale_quantize_k", Policy(idx(bk * k_quant_chunks), ts),
                       detail::SaleQuantize<Exec>{s, kt, false, c.groups, p.heads_kv, k_quant_chunks, p.seqlen_kv, c.range(),
                                                  mu_k.data(), k_codes.data(), k_scale.data()});
  auto qmk = detail::workspace<Exec, float>("spattn::qmk", n(bq * p.seqlen_kv));
  Kokkos::parallel_for("spattn::kokkos::sale_bias", Policy(idx(bq * k_chunks), ts),
                       detail::SaleBias<Exec>{s, kt, k_chunks, mu_q.data(), mu_k.data(), qmk.data()});

  std::vector<float> taus(n(p.heads_q));
  for (std::int64_t h = 0; h < p.heads_q; ++h) taus[n(h)] = c.tau_of(h);
  const auto tau = to_space<Exec>("spattn::tau", taus.data(), taus.size());
  std::vector<float> empty_states(n(2 * bq * p.seqlen_q));  // rows without a sink-local pass: (m, l) = (−∞, 0)
  for (std::size_t i = 0; i < empty_states.size(); i += 2) empty_states[i] = -INFINITY, empty_states[i + 1] = 0.0f;
  const auto sink_local = to_space<Exec>("spattn::sink_local", empty_states.data(), empty_states.size());
  // NaN where SaleSelect writes no margin. Uploaded rather than filled: on Kokkos::Cuda (the 4.6 snapshot, CUDA 13),
  // Kokkos::deep_copy(margins, NAN)'s fill kernel wrote outside every allocation (compute-sanitizer, H100).
  const std::vector<float> no_margins(n(shape.num_rows() * tk), NAN);
  const auto margins = to_space<Exec>("spattn::margins", no_margins.data(), no_margins.size());
  auto keep = detail::workspace<Exec, std::uint8_t>("spattn::keep", n(shape.num_rows() * tk));
  auto counts = detail::workspace<Exec, std::int64_t>("spattn::sale_counts", n(2 * shape.num_rows()));
  const std::size_t bytes = sizeof(float) * sale::kBlockQ + 64;
  const int level = scratch_level<Exec>(bytes);
  Kokkos::parallel_for("spattn::kokkos::sale_select",
                       Policy(idx(shape.num_rows()), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                       detail::SaleSelect<Exec>{s, qt, kt, tq, tk, c.local_window / sale::kBlockK, tau.data(), mu_k.data(),
                                                qmk.data(), q_scale.data(), k_scale.data(), q_codes.data(), k_codes.data(),
                                                sink_local.data(), margins.data(), keep.data(), counts.data(), level});

  EstimateViews<Exec> out{};
  out.shape = shape;
  out.states = sink_local;
  out.margins = margins;
  out.counts = counts;
  set_mask_from_bitmap(out, s, keep);
  return out;
}

}  // namespace spattn::kokkos
