// AnchorAttention's estimator (research/anchorattention.md; the rules in spattn/methods/anchor_attn.hpp, anchor.hpp)
// as Kokkos kernels:
//   1. the anchor pass: a team per block of rows of one group, the group's sink and local keys (group_keys) visited in
//      chunks staged in team scratch, 4 × 4 register blocks of scores, each row's own region (row_anchor_region) and
//      the core's OnlineSoftmax: its anchor m is the exact max of its region's scores (the reference forms those
//      scores with an Eigen GEMM: equal up to the rounding of each dot product);
//   2. a team per group: pooled query blocks and anchor means (column_mean, the reference's order), then every
//      candidate key by the stripe rule (stripe_score, stripe_selected); sink and local keys kept; a bitmap row.
// Given the same anchors, the same mask (the test feeds reference::anchor_attn_select with these anchors).
#pragma once

#include <Kokkos_Core.hpp>
#include <vector>

#include "device_estimate.hpp"
#include "kernel_args.hpp"
#include "spattn/anchor.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"

namespace spattn::kokkos {

/// The mask, each row's (m, l) over its anchor region (EstimateViews::states, as reference::AnchorEstimate::anchors)
/// and the (candidate, selected) counts per mask row.
template <class Exec>
EstimateViews<Exec> anchor_attn_estimate_on(const Problem& problem, const TensorView& q, const TensorView& k,
                                             const anchor_attn::Config& c);

namespace detail {

inline constexpr int kAnchorRows = 64, kAnchorChunk = 32, kAnchorBlock = 4;

template <class Exec>
struct AnchorPass {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor q, k;
  std::int64_t n_sink, local_lead, group, groups, blocks_per_group;
  float* anchors;  ///< (m, l) pairs, [(b·Hq + h)·Nq + i]
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    constexpr int R = kAnchorRows, C = kAnchorChunk, B = kAnchorBlock;
    std::int64_t w = team.league_rank();
    const std::int64_t blk = w % blocks_per_group;
    w /= blocks_per_group;
    const std::int64_t t = w % groups, bh = w / groups, b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b), first = t * group;
    if (first >= nq) return;
    const std::int64_t last = (first + group < nq ? first + group : nq) - 1;
    const std::int64_t r0 = first + blk * R;
    if (r0 > last) return;
    const int rows = static_cast<int>(last + 1 - r0 < R ? last + 1 - r0 : R);
    const anchor_attn::GroupKeys keys = anchor_attn::group_keys(n_sink, local_lead, group, first, last, nq, nkv, s.causal);
    const std::int64_t region = keys.sink_end + (keys.local.end - keys.local.begin);
    const std::int64_t d = s.d, ld = d + 1;
    float* qs = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * R * ld));
    float* ks = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * C * ld));
    float* ps = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * R * C));
    float* m = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * R));
    float* l = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * R));
    auto* key = static_cast<std::int64_t*>(team.team_scratch(level).get_shmem(sizeof(std::int64_t) * C));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d), [&](std::int64_t e) {  // a column per thread, no division
      for (int r = 0; r < R; ++r) qs[r * ld + e] = r < rows ? q.load(s.row(q, true, b, h, r0 + r) + e) : 0.0f;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R), [&](int r) {
      const AnchorStats init;
      m[r] = init.m;
      l[r] = init.l;
    });
    for (std::int64_t c0 = 0; c0 < region; c0 += C) {
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {  // position → key (−1 past the region)
        const std::int64_t p = c0 + c;
        key[c] = p >= region ? -1 : p < keys.sink_end ? p : keys.local.begin + (p - keys.sink_end);
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d), [&](std::int64_t e) {
        for (int c = 0; c < C; ++c) ks[c * ld + e] = key[c] < 0 ? 0.0f : k.load(s.row(k, false, b, hkv, key[c]) + e);
      });
      team.team_barrier();
      constexpr int key_groups = C / B;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, (R / B) * key_groups), [&](int x) {
        const int rg = x / key_groups, cg = x % key_groups;
        float dot[B][B];
        dot_sequential_block<B, B>(qs + rg * B * ld, ld, ks + cg * ld, key_groups * ld, d, dot);
        for (int i = 0; i < B; ++i) {
          const std::int64_t row = r0 + rg * B + i;
          const std::int64_t visible = mask_policy::row_key_end<std::int64_t>(row, nq, nkv, s.causal);
          const AnchorRegion own = anchor_attn::row_anchor_region(n_sink, keys.local, visible);
          for (int jj = 0; jj < B; ++jj) {
            const int c = cg + jj * key_groups;
            ps[(rg * B + i) * C + c] = key[c] >= 0 && own.contains(key[c]) ? dot[i][jj] * s.scale_log2 : -INFINITY;
          }
        }
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
        AnchorStats st{m[r], l[r]};
        OnlineSoftmax::update(st, ps + r * C, C, ps + r * C);
        m[r] = st.m;
        l[r] = st.l;
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
      anchors[2 * (bh * s.seqlen_q + r0 + r)] = m[r];
      anchors[2 * (bh * s.seqlen_q + r0 + r) + 1] = l[r];
    });
  }
};

template <class Exec>
struct AnchorStripes {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor q, k;
  std::int64_t n_sink, local_lead, group, groups, block, tk;
  float theta2;
  const float* anchors;
  std::uint8_t* keep;          ///< bitmap [B·Hq·groups][tk]
  std::int64_t* counts;        ///< per group: candidates, selected
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), t = row % groups, bh = row / groups;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b), first = t * group, d = s.d;
    if (first >= nq) return;
    const std::int64_t last = (first + group < nq ? first + group : nq) - 1, rows = last - first + 1;
    const anchor_attn::GroupKeys keys = anchor_attn::group_keys(n_sink, local_lead, group, first, last, nq, nkv, s.causal);
    const std::int64_t blocks = (rows + block - 1) / block;
    float* qbar = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * blocks * d));
    float* abar = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * blocks));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blocks * (d + 1)), [&](std::int64_t x) {
      const std::int64_t blk = x / (d + 1), col = x % (d + 1), r0 = first + blk * block;
      const std::int64_t count = block < last + 1 - r0 ? block : last + 1 - r0;
      if (col < d)
        qbar[blk * d + col] = column_mean([&](std::int64_t r) { return q.load(s.row(q, true, b, h, r0 + r) + col); }, count);
      else
        abar[blk] = column_mean([&](std::int64_t r) { return anchors[2 * (bh * s.seqlen_q + r0 + r)]; }, count);
    });
    team.team_barrier();
    std::uint8_t* out = keep + row * tk;
    const std::int64_t before = keys.candidates_end - keys.sink_end, after = nkv - keys.after_begin;
    std::int64_t selected = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, nkv),
        [&](std::int64_t j, std::int64_t& sel) {
          const bool candidate = (j >= keys.sink_end && j < keys.candidates_end) || j >= keys.after_begin;
          if (!candidate) {  // sink and local window: kept; keys the group does not reach: not
            out[j] = j < keys.sink_end || (j >= keys.local.begin && j < keys.local.end) ? 1 : 0;
            return;
          }
          float kj[Problem::kMaxHeadDim];  // k_j as fp32 (the reference's load_row)
          const std::int64_t at = s.row(k, false, b, hkv, j);
          for (std::int64_t e = 0; e < d; ++e) kj[e] = k.load(at + e);
          bool kept = false;
          for (std::int64_t blk = 0; blk < blocks && !kept; ++blk)
            kept = anchor_attn::stripe_selected(
                anchor_attn::stripe_score(qbar + blk * d, kj, static_cast<int>(d), s.scale_log2), theta2, abar[blk]);
          out[j] = kept ? 1 : 0;
          sel += kept ? 1 : 0;
        },
        selected);
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      counts[2 * row] = (before > 0 ? before : 0) + (after > 0 ? after : 0);
      counts[2 * row + 1] = selected;
    });
  }
};

}  // namespace detail

template <class Exec>
EstimateViews<Exec> anchor_attn_estimate_on(const Problem& p, const TensorView& q, const TensorView& k,
                                             const anchor_attn::Config& c) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const std::int64_t group = c.group_rows();
  const MaskShape shape = MaskShape::of(p, static_cast<std::int32_t>(group), 1);
  const std::int64_t groups = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const ProblemOn<Exec> on(p);
  const DeviceShape& s = on.shape;
  const DeviceTensor qt = DeviceTensor::of(q), kt = DeviceTensor::of(k);
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };

  Kokkos::View<float*, typename Exec::memory_space> anchors(std::string("spattn::anchors"),
                                                             static_cast<std::size_t>(2 * p.batch * p.heads_q * p.seqlen_q));
  {
    constexpr std::int64_t R = detail::kAnchorRows, C = detail::kAnchorChunk;
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>((R + C) * (d + 1) + R * C + 2 * R) +
                              sizeof(std::int64_t) * C + 8 * 64;
    const int level = scratch_level<Exec>(bytes);
    const std::int64_t blocks_per_group = (group + R - 1) / R;
    Kokkos::parallel_for(
        "spattn::kokkos::anchor_pass",
        Policy(idx(p.batch * p.heads_q * groups * blocks_per_group), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
        detail::AnchorPass<Exec>{s, qt, kt, c.n_sink, c.local_lead, group, groups, blocks_per_group, anchors.data(), level});
  }
  Kokkos::View<std::uint8_t*, typename Exec::memory_space> keep(std::string("spattn::keep"),
                                                                 static_cast<std::size_t>(shape.num_rows() * tk));
  Kokkos::View<std::int64_t*, typename Exec::memory_space> counts(std::string("spattn::anchor_counts"),
                                                                   static_cast<std::size_t>(2 * shape.num_rows()));
  {
    const std::int64_t blocks = (group + c.block - 1) / c.block;
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(blocks * (d + 1)) + 2 * 64;
    const int level = scratch_level<Exec>(bytes);
    Kokkos::parallel_for("spattn::kokkos::anchor_stripes",
                         Policy(idx(shape.num_rows()), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                         detail::AnchorStripes<Exec>{s, qt, kt, c.n_sink, c.local_lead, group, groups, c.block, tk,
                                                     anchor_attn::theta_log2(c.theta), anchors.data(), keep.data(),
                                                     counts.data(), level});
  }
  EstimateViews<Exec> out{};
  out.shape = shape;
  out.states = anchors;
  out.counts = counts;
  set_mask_from_bitmap(out, s, keep);
  return out;
}

}  // namespace spattn::kokkos
