// AnchorAttention's estimator (research/anchorattention.md; the rules in spattn/methods/anchor_attn.hpp, anchor.hpp)
// as Kokkos kernels:
//   1. the anchor pass, each row's (m, l) over its anchor region (its anchor m is the exact max of its region's
//      scores; the reference forms those scores with an Eigen GEMM: equal up to the rounding of each dot product):
//      - on Kokkos::Cuda with tensor cores (flash_mma.hpp's statistics pass, kPV = false) over the anchor-region mask
//        (per sequence and group the sink then the local window, GroupKeys::region_key, tile_k = 1), built on the
//        device; the executor's causal rule clips it per row exactly as row_anchor_region does (as the hand-written
//        backend's anchor pass);
//      - elsewhere a team per block of rows of one group, the group's region visited in chunks staged in team
//        scratch, 4 × 4 register blocks of scores, each row's own region (row_anchor_region) and the core's
//        OnlineSoftmax;
//   2. pooled query blocks q̄ and anchor means ā (column_mean, the reference's order), a team per group;
//   3. the stripes: every candidate key by the stripe rule (stripe_score, stripe_selected), sink and local keys kept
//      (GroupKeys::candidate, always_kept); a bitmap row per group. On Kokkos::Cuda with tensor cores for groups of at
//      most 16 pooled blocks (anchor_mma.hpp: q̄ in two 16-bit pieces, as the hand-written stripes); elsewhere a
//      thread per key, the core's fixed-order stripe_score.
// Given the same anchors, the portable stripes give the reference's mask (the test feeds reference::anchor_attn_select
// with these anchors); the tensor-core stripes decide within the score bound of the hand-written backend's test.
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <vector>

#include "anchor_group.hpp"
#include "anchor_mma.hpp"
#include "device_estimate.hpp"
#include "kernel_args.hpp"
#include "nvidia_mma.hpp"
#include "spattn/anchor.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"

#if defined(SPATTN_KOKKOS_MMA)
#include "flash_mma.hpp"
#endif

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
  AnchorGeometry g;
  DeviceTensor q, k;
  std::int64_t blocks_per_group;
  float* anchors;  ///< (m, l) pairs, [(b·Hq + h)·Nq + i]
  int level;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    constexpr int R = kAnchorRows, C = kAnchorChunk, B = kAnchorBlock;
    const DeviceShape& s = g.s;
    std::int64_t w = team.league_rank();
    const std::int64_t blk = w % blocks_per_group;
    w /= blocks_per_group;
    const std::int64_t t = w % g.groups, bh = w / g.groups, b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const AnchorGeometry::Group grp = g.at(b, t);
    if (!grp.valid) return;
    const std::int64_t r0 = grp.first + blk * R;
    if (r0 > grp.last) return;
    const int rows = static_cast<int>(grp.last + 1 - r0 < R ? grp.last + 1 - r0 : R);
    const std::int64_t region = grp.keys.region_size();
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
        key[c] = c0 + c >= region ? -1 : grp.keys.region_key(c0 + c);
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
          const std::int64_t visible = mask_policy::row_key_end<std::int64_t>(row, grp.nq, grp.nkv, s.causal);
          const AnchorRegion own = anchor_attn::row_anchor_region(g.n_sink, grp.keys.local, visible);
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

/// q̄ and ā of every pooled block of a group (a team per pooled block: its D + 1 columns spread over the team):
/// column_mean of the block's query rows and of their anchors m, in the reference's order.
template <class Exec>
struct AnchorMeans {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  AnchorGeometry g;
  DeviceTensor q;
  const float* anchors;
  float* qbar;  ///< [(row · step + blk) · D + e]
  float* abar;  ///< [row · step + blk]
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const DeviceShape& s = g.s;
    const std::int64_t blk = team.league_rank() % g.step, row = team.league_rank() / g.step;
    const std::int64_t t = row % g.groups, bh = row / g.groups, b = bh / s.heads_q, h = bh % s.heads_q, d = s.d;
    const AnchorGeometry::Group grp = g.at(b, t);
    if (!grp.valid || blk >= grp.blocks(g.block)) return;
    const std::int64_t r0 = grp.first + blk * g.block;
    const std::int64_t count = g.block < grp.last + 1 - r0 ? g.block : grp.last + 1 - r0;
    const std::int64_t at = row * g.step + blk;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, d + 1), [&](std::int64_t col) {
      if (col < d)
        qbar[at * d + col] = column_mean([&](std::int64_t r) { return q.load(s.row(q, true, b, h, r0 + r) + col); }, count);
      else
        abar[at] = column_mean([&](std::int64_t r) { return anchors[2 * (bh * s.seqlen_q + r0 + r)]; }, count);
    });
  }
};

/// The stripes, a team per mask row, a thread per key: the core's fixed-order stripe_score against every pooled block.
template <class Exec>
struct AnchorStripes {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  AnchorGeometry g;
  DeviceTensor k;
  std::int64_t tk;
  float theta2;
  const float* qbar;
  const float* abar;
  std::uint8_t* keep;    ///< bitmap [B·Hq·groups][tk]
  std::int64_t* counts;  ///< per group: candidates, selected
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const DeviceShape& s = g.s;
    const std::int64_t row = team.league_rank(), t = row % g.groups, bh = row / g.groups;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group(), d = s.d;
    const AnchorGeometry::Group grp = g.at(b, t);
    if (!grp.valid) return;
    const anchor_attn::GroupKeys& keys = grp.keys;
    const std::int64_t blocks = grp.blocks(g.block);
    const float* qb = qbar + row * g.step * d;
    const float* ab = abar + row * g.step;
    std::uint8_t* out = keep + row * tk;
    std::int64_t selected = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, grp.nkv),
        [&](std::int64_t j, std::int64_t& sel) {
          if (!keys.candidate(j)) {  // sink and local window: kept; keys the group does not reach: not
            out[j] = keys.always_kept(j) ? 1 : 0;
            return;
          }
          float kj[Problem::kMaxHeadDim];  // k_j as fp32 (the reference's load_row)
          const std::int64_t at = s.row(k, false, b, hkv, j);
          for (std::int64_t e = 0; e < d; ++e) kj[e] = k.load(at + e);
          bool kept = false;
          for (std::int64_t blk = 0; blk < blocks && !kept; ++blk)
            kept = anchor_attn::stripe_selected(anchor_attn::stripe_score(qb + blk * d, kj, static_cast<int>(d), s.scale_log2),
                                                theta2, ab[blk]);
          out[j] = kept ? 1 : 0;
          sel += kept ? 1 : 0;
        },
        selected);
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      counts[2 * row] = grp.keys.candidate_count(grp.nkv);
      counts[2 * row + 1] = selected;
    });
  }
};

/// Whether the tensor-core anchor pass runs: Kokkos::Cuda with tensor cores, mma_allowed(), Q and K mma_qk_fit.
template <class Exec>
bool anchor_pass_on_mma(const Problem& p, const TensorView& q, const TensorView& k) {
#if defined(SPATTN_KOKKOS_MMA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda>)
    return mma_allowed() && mma_qk_fit(p, q, k) &&
           mma::scratch_bytes<128>() <= static_cast<std::size_t>(Kokkos::TeamPolicy<Exec>::scratch_size_max(0));
#endif
  (void)p, (void)q, (void)k;
  return false;
}

/// Whether the tensor-core stripes run: as anchor_pass_on_mma, and a group holds at most 16 pooled blocks (one m16 tile).
template <class Exec>
bool stripes_on_mma(const Problem& p, const TensorView& q, const TensorView& k, const anchor_attn::Config& c) {
#if defined(SPATTN_KOKKOS_MMA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda>)
    return c.step <= stripes::kRows && mma_allowed() && mma_qk_fit(p, q, k) &&
           stripes::scratch_bytes<128>() <= static_cast<std::size_t>(Kokkos::TeamPolicy<Exec>::scratch_size_max(0));
#endif
  (void)p, (void)q, (void)k, (void)c;
  return false;
}

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
  const detail::AnchorGeometry geo{s, c.n_sink, c.local_lead, group, groups, c.block, c.step};
  const int ts = team_size<Exec>();
  const auto idx = [](std::int64_t n) { return static_cast<int>(n); };

  auto anchors = detail::workspace<Exec, float>("spattn::anchors", static_cast<std::size_t>(2 * p.batch * p.heads_q * p.seqlen_q));
  if (detail::anchor_pass_on_mma<Exec>(p, q, k)) {
#if defined(SPATTN_KOKKOS_MMA)
    detail::run_anchor_pass_mma(geo, qt, kt, q.dtype, tk, anchors.data());
#endif
  } else {
    constexpr std::int64_t R = detail::kAnchorRows, C = detail::kAnchorChunk;
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>((R + C) * (d + 1) + R * C + 2 * R) +
                              sizeof(std::int64_t) * C + 8 * 64;
    const int level = scratch_level<Exec>(bytes);
    const std::int64_t blocks_per_group = (group + R - 1) / R;
    Kokkos::parallel_for(
        "spattn::kokkos::anchor_pass",
        Policy(idx(p.batch * p.heads_q * groups * blocks_per_group), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
        detail::AnchorPass<Exec>{geo, qt, kt, blocks_per_group, anchors.data(), level});
  }
  const std::int64_t rows = shape.num_rows();
  auto qbar = detail::workspace<Exec, float>("spattn::anchor_qbar", static_cast<std::size_t>(rows * c.step * d), false);
  auto abar = detail::workspace<Exec, float>("spattn::anchor_abar", static_cast<std::size_t>(rows * c.step), false);
  Kokkos::parallel_for("spattn::kokkos::anchor_means", Policy(idx(rows * c.step), ts),
                       detail::AnchorMeans<Exec>{geo, qt, anchors.data(), qbar.data(), abar.data()});
  auto keep = detail::workspace<Exec, std::uint8_t>("spattn::keep", static_cast<std::size_t>(rows * tk));
  auto counts = detail::workspace<Exec, std::int64_t>("spattn::anchor_counts", static_cast<std::size_t>(2 * rows));
  const float theta2 = anchor_attn::theta_log2(c.theta);
  if (detail::stripes_on_mma<Exec>(p, q, k, c)) {
#if defined(SPATTN_KOKKOS_MMA)
    detail::run_stripes_mma(detail::StripesArgs{geo, kt, tk, theta2, qbar.data(), abar.data(), keep.data(), counts.data()},
                            q.dtype, d);
#endif
  } else {
    Kokkos::parallel_for("spattn::kokkos::anchor_stripes", Policy(idx(rows), ts),
                         detail::AnchorStripes<Exec>{geo, kt, tk, theta2, qbar.data(), abar.data(), keep.data(), counts.data()});
  }
  EstimateViews<Exec> out{};
  out.shape = shape;
  out.states = anchors;
  out.counts = counts;
  set_mask_from_bitmap(out, s, keep);
  return out;
}

}  // namespace spattn::kokkos
