// FG-Attn's estimator (research/fgattn.md §2; the rules in spattn/methods/fg_attn.hpp) as Kokkos kernels, the core's
// fixed fp32 order throughout, so that the mask is bit-identical to the reference's (reference/src/fg_attn.cpp):
//   1. tile means of Q (per query head) and K (per KV head, stored column-major), a team per tile (block_pool.hpp:
//      the rows staged in team scratch on a GPU, a column per thread);
//   2. a team per (batch, query head, query tile): pooled logits (pooled_logit, the tail weight), the dense fallback,
//      the selection order (team_sort.hpp), the top-p cut (top_cdf_count, crossing included); a bitmap row.
//   3. UNION semantics with a merge plan (fg_attn::effective_mask over fg_attn::merge_plan, on the device: the mask
//      stays there): consecutive groups of R = work_rows / tile_q tiles, or the greedy merge-XOR groups (each row's kept
//      tiles as a bitset, a team per (batch, head) running the core's merge_key / xor_distance greedy); then every
//      member's bitmap row becomes its group's union, each keeping what it reaches. EXACT masks do not depend on the
//      plan (the executor runs each tile's own keys).
#pragma once

#include <Kokkos_Core.hpp>
#include <vector>

#include "block_pool.hpp"
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
  static constexpr int kChains = 4;
  static std::size_t scratch_bytes(std::int64_t tk, std::int64_t d) {
    return sizeof(std::uint64_t) * static_cast<std::size_t>(sort_length(tk)) + sizeof(float) * static_cast<std::size_t>(tk + d) + 64;
  }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), i = row % tq, bh = row / tq;
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b);
    if (i * tile_q >= nq) return;
    const std::int64_t reach = mask_policy::reachable_tiles<std::int64_t>(i, tile_q, tile_k, nq, nkv, s.causal);
    const float tail = fg_attn::tail_weight(nkv, tile_k, size_weighted_tail);
    const float* km = k_mean + (b * s.heads_kv + hkv) * s.d * tk;  // [c][j]: the pool's transposed key means
    std::uint8_t* out = keep + row * tk;
    auto* keys = static_cast<std::uint64_t*>(team.team_scratch(level).get_shmem(sizeof(std::uint64_t) * sort_length(tk)));
    float* prob = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * tk));  // then: the sorted weights
    float* qm = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * s.d));
    int* cut = static_cast<int*>(team.team_scratch(level).get_shmem(sizeof(int)));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, s.d), [&](std::int64_t c) { qm[c] = q_mean[(bh * tq + i) * s.d + c]; });
    team.team_barrier();

    // The logits: thread me takes tiles me + u·threads; kChains of them at a time run pooled_logit's chain in lockstep
    // (dot_sequential_block: dot_sequential's bits, the latencies overlapped).
    const int me = team.team_rank(), threads = team.team_size();
    const auto logit = [&](std::int64_t j, float dot) {
      float x = fg_attn::logit_of(dot, s.scale_log2);
      if (fg_attn::is_tail_tile(j, nkv, tile_k)) x += tail;
      prob[j] = x;
      return std::isfinite(x) ? 1 : 0;
    };
    int finite_here = 1;
    std::int64_t j0 = me;
    for (; j0 + (kChains - 1) * threads < reach; j0 += kChains * threads) {
      float dots[1][kChains];
      dot_sequential_block<1, kChains>(qm, 0, km + j0, threads, s.d, dots, tk);
      for (int u = 0; u < kChains; ++u) finite_here &= logit(j0 + u * threads, dots[0][u]);
    }
    for (; j0 < reach; j0 += threads) finite_here &= logit(j0, dot_sequential(qm, km + j0, s.d, tk));
    team.team_barrier();
    int finite = finite_here;
    team.team_reduce(Kokkos::Min<int>(finite));
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


// ---- UNION semantics on the device: fg_attn::merge_plan's groups and fg_attn::effective_mask's union rows ----

/// The plan's geometry: rows (b·Hq + h)·tq + t of the per-tile bitmap, R tiles a group.
struct FgPlan {
  DeviceShape s;
  std::int32_t tile_q, tile_k;
  std::int64_t tq, tk, words, r;
  /// Query tiles of sequence b that take part in the plan (fg_attn::merge_plan: those starting before its end).
  KOKKOS_INLINE_FUNCTION std::int64_t tiles(std::int64_t b) const { return (s.nq(b) + tile_q - 1) / tile_q; }
  /// Key tiles of mask row `row` (what the mask keeps of its bitmap row: TileMask::from_bitmap).
  KOKKOS_INLINE_FUNCTION std::int64_t reach(std::int64_t row) const {
    const std::int64_t b = row / (s.heads_q * tq);
    return mask_policy::reachable_tiles<std::int64_t>(row % tq, tile_q, tile_k, s.nq(b), s.nkv(b), s.causal);
  }
};

/// A team per mask row: its kept key tiles as a bitset of `words` words (bit k of word k / 64).
template <class Exec>
struct FgBits {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  FgPlan g;
  const std::uint8_t* keep;
  std::uint64_t* bits;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank(), reach = g.reach(row);
    const std::uint8_t* in = keep + row * g.tk;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, g.words), [&](std::int64_t w) {
      std::uint64_t word = 0;
      for (std::int64_t e = 0; e < 64 && 64 * w + e < reach; ++e)
        if (in[64 * w + e] != 0) word |= std::uint64_t{1} << e;
      bits[row * g.words + w] = word;
    });
  }
};

/// The greedy merge-XOR groups of fg_attn::merge_plan, a team per (batch, head): the lowest ungrouped tile anchors a
/// group and takes the R − 1 ungrouped tiles of smallest fg_attn::merge_key(xor_distance, index), one team min-reduction
/// each. groups[bh·tq …] lists the tiles in group order: group g is entries [g·R, min(g·R + R, tiles)).
template <class Exec>
struct FgXorGroups {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  FgPlan g;
  const std::uint64_t* bits;
  std::int32_t* groups;
  int level;
  static std::size_t scratch_bytes(std::int64_t tq) { return static_cast<std::size_t>(tq) * 9 + 64; }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    constexpr std::uint64_t kNone = ~std::uint64_t{0};
    const std::int64_t bh = team.league_rank(), n = g.tiles(bh / g.s.heads_q);
    auto* key = static_cast<std::uint64_t*>(team.team_scratch(level).get_shmem(sizeof(std::uint64_t) * g.tq));
    auto* used = static_cast<std::uint8_t*>(team.team_scratch(level).get_shmem(g.tq));
    const std::uint64_t* head = bits + bh * g.tq * g.words;
    std::int32_t* out = groups + bh * g.tq;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](std::int64_t i) { used[i] = 0; });
    team.team_barrier();
    std::int64_t placed = 0;
    for (std::int64_t anchor = 0; anchor < n; ++anchor) {
      if (used[anchor] != 0) continue;  // every thread reads the same flags after a barrier: the loop stays uniform
      const std::int64_t take = n - placed - 1 < g.r - 1 ? n - placed - 1 : g.r - 1;  // ungrouped others, at most R − 1
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, anchor + 1, n), [&](std::int64_t i) {
        key[i] = used[i] != 0 ? kNone
                              : fg_attn::merge_key(fg_attn::xor_distance(head + anchor * g.words, head + i * g.words, g.words),
                                                   static_cast<std::int32_t>(i));
      });
      Kokkos::single(Kokkos::PerTeam(team), [&]() { out[placed] = static_cast<std::int32_t>(anchor); });
      team.team_barrier();
      for (std::int64_t t = 0; t < take; ++t) {  // the nearest ungrouped tile, take times
        std::uint64_t best = kNone;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, anchor + 1, n), [&](std::int64_t i, std::uint64_t& m) { m = key[i] < m ? key[i] : m; },
            Kokkos::Min<std::uint64_t>(best));
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          const std::int32_t i = fg_attn::merge_key_index(best);
          used[i] = 1;
          key[i] = kNone;
          out[placed + 1 + t] = i;
        });
        team.team_barrier();
      }
      Kokkos::single(Kokkos::PerTeam(team), [&]() { used[anchor] = 1; });
      placed += 1 + take;
      team.team_barrier();
    }
  }
};

/// A team per (group, (batch, head)): every member's bitmap row becomes the union of the members' kept tiles
/// (consecutive members g·R … when `groups` is null, else groups[bh·tq + g·R …]); set_mask_from_bitmap then keeps of
/// it what each member reaches (fg_attn::effective_mask through TileMask::from_rows).
template <class Exec>
struct FgUnionRows {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  FgPlan g;
  const std::int32_t* groups;
  const std::uint8_t* keep;
  std::uint8_t* out;
  /// Team scratch: each member's bitmap row and reach.
  static std::size_t scratch_bytes(std::int64_t r) { return 2 * sizeof(std::int64_t) * static_cast<std::size_t>(r) + 64; }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t groups_per_head = (g.tq + g.r - 1) / g.r;
    const std::int64_t bh = team.league_rank() / groups_per_head, first = (team.league_rank() % groups_per_head) * g.r;
    const std::int64_t n = g.tiles(bh / g.s.heads_q);
    if (first >= n) return;
    const std::int64_t members = n - first < g.r ? n - first : g.r;
    auto* row = static_cast<std::int64_t*>(team.team_scratch(0).get_shmem(sizeof(std::int64_t) * g.r));
    auto* reach = static_cast<std::int64_t*>(team.team_scratch(0).get_shmem(sizeof(std::int64_t) * g.r));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, members), [&](std::int64_t m) {
      row[m] = bh * g.tq + (groups != nullptr ? groups[bh * g.tq + first + m] : first + m);
      reach[m] = g.reach(row[m]);
    });
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, g.tk), [&](std::int64_t j) {
      std::uint8_t v = 0;
      for (std::int64_t m = 0; m < members; ++m)
        if (j < reach[m] && keep[row[m] * g.tk + j] != 0) v = 1;
      for (std::int64_t m = 0; m < members; ++m) out[row[m] * g.tk + j] = v;
    });
  }
};

/// The bitmap of `keep` under UNION semantics with c's merge plan (consecutive or greedy merge-XOR groups), built in
/// Exec's memory: the plan is fg_attn::merge_plan's, the rows fg_attn::effective_mask's (bit-identical masks).
template <class Exec>
Kokkos::View<std::uint8_t*, typename Exec::memory_space> fg_union_bitmap(
    const FgPlan& g, const fg_attn::Config& c, const Kokkos::View<std::uint8_t*, typename Exec::memory_space>& keep) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const std::int64_t rows = g.s.batch * g.s.heads_q * g.tq, heads = g.s.batch * g.s.heads_q;
  const int ts = team_size<Exec>();
  auto groups = workspace<Exec, std::int32_t>("spattn::fg_groups", 0);
  if (c.merge == fg_attn::Merge::xor_greedy) {
    auto bits = workspace<Exec, std::uint64_t>("spattn::fg_bits", static_cast<std::size_t>(rows * g.words), false);
    Kokkos::parallel_for("spattn::kokkos::fg_attn_bits", Policy(static_cast<int>(rows), ts), FgBits<Exec>{g, keep.data(), bits.data()});
    groups = workspace<Exec, std::int32_t>("spattn::fg_groups", static_cast<std::size_t>(rows));
    const std::size_t bytes = FgXorGroups<Exec>::scratch_bytes(g.tq);
    const int level = scratch_level<Exec>(bytes);
    Kokkos::parallel_for("spattn::kokkos::fg_attn_xor_groups",
                         Policy(static_cast<int>(heads), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                         FgXorGroups<Exec>{g, bits.data(), groups.data(), level});
  }
  auto out = workspace<Exec, std::uint8_t>("spattn::keep_union", static_cast<std::size_t>(rows * g.tk));
  Kokkos::parallel_for("spattn::kokkos::fg_attn_union_rows",
                       Policy(static_cast<int>(heads * ((g.tq + g.r - 1) / g.r)), ts)
                           .set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(FgUnionRows<Exec>::scratch_bytes(g.r)))),
                       FgUnionRows<Exec>{g, groups.size() > 0 ? groups.data() : nullptr, keep.data(), out.data()});
  return out;
}

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
  auto q_mean = detail::workspace<Exec, float>("spattn::q_mean",
                                               static_cast<std::size_t>(p.batch * p.heads_q * tq * d));
  auto k_mean = detail::workspace<Exec, float>("spattn::k_mean",
                                               static_cast<std::size_t>(p.batch * p.heads_kv * tk * d));
  detail::pool_blocks<Exec>("spattn::kokkos::fg_attn_q_means", s, q, true, p.heads_q, c.tile_q, tq, nullptr, q_mean.data(),
                            nullptr);
  detail::pool_blocks<Exec>("spattn::kokkos::fg_attn_k_means", s, k, false, p.heads_kv, c.tile_k, tk, nullptr, k_mean.data(),
                            nullptr);
  auto keep = detail::workspace<Exec, std::uint8_t>("spattn::keep", static_cast<std::size_t>(shape.num_rows() * tk));
  const std::size_t bytes = detail::FgSelect<Exec>::scratch_bytes(tk, d);
  const int level = scratch_level<Exec>(bytes);
  Kokkos::parallel_for("spattn::kokkos::fg_attn_select",
                       Policy(idx(shape.num_rows()), ts).set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes))),
                       detail::FgSelect<Exec>{s, c.tile_q, c.tile_k, c.top_p, c.size_weighted_tail, tq, tk,
                                              q_mean.data(), k_mean.data(), keep.data(), level});
  EstimateViews<Exec> out{};
  out.shape = shape;
  if (c.semantics == fg_attn::Semantics::union_keys && c.merge != fg_attn::Merge::none) {
    const detail::FgPlan plan{s, c.tile_q, c.tile_k, tq, tk, fg_attn::bitset_words(tk), c.work_rows / c.tile_q};
    set_mask_from_bitmap(out, s, detail::fg_union_bitmap<Exec>(plan, c, keep));
  } else {
    set_mask_from_bitmap(out, s, keep);
  }
  return out;
}

}  // namespace spattn::kokkos
