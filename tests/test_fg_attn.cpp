// FG-Attn: the pooled-score identity, top-p limits, merging (exact = unmerged bit for bit, XOR beats
// consecutive where it should), work order, odd lengths, determinism and bad configurations.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/reference/fg_attn.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {
namespace {

Workload video(std::int64_t n, std::int64_t heads = 2) {
  WorkloadSpec s;
  s.kind = WorkloadKind::video;
  s.seqlen = n;
  s.heads_q = heads;
  s.heads_kv = 1;
  s.head_dim = 64;
  s.seed = test_seed();
  return make_workload(s);
}

TEST_CASE("estimated tile logit = mean of the tile's true logits (derived identity)") {
  const Workload w = video(1000);  // 1000 = 31·32 + 8 query rows, 62·16 + 8 keys: partial tiles on both sides
  fg_attn::Config cfg;
  cfg.tile_q = 32;
  cfg.tile_k = 16;
  const auto logits = reference::fg_attn_logits(w.problem, w.q.view(), w.k.view(), cfg, 0, 1);
  const std::int64_t tk = (1000 + 15) / 16;
  const double scale = 1.0 / std::sqrt(64.0) * 1.4426950408889634;
  for (std::int64_t i : {0, 7, 31})
    for (std::int64_t j : {0, 13, 62}) {
      double sum = 0;
      std::int64_t count = 0;
      for (std::int64_t r = i * 32; r < std::min<std::int64_t>(i * 32 + 32, 1000); ++r)
        for (std::int64_t c = j * 16; c < std::min<std::int64_t>(j * 16 + 16, 1000); ++c, ++count) {
          double dot = 0;
          for (std::int64_t d = 0; d < 64; ++d) dot += double(w.q.get(0, 1, r, d)) * w.k.get(0, 0, c, d);
          sum += dot;
        }
      CAPTURE(i);
      CAPTURE(j);
      CHECK(logits[static_cast<std::size_t>(i * tk + j)] == doctest::Approx(sum / double(count) * scale).epsilon(1e-4));
    }
}

TEST_CASE("top-p: kept mass reaches p with a minimal set; p >= 1 is dense attention") {
  const Workload w = video(777);
  fg_attn::Config cfg;
  cfg.top_p = 0.8f;
  const TileMask m = reference::fg_attn_estimate(w.problem, w.q.view(), w.k.view(), cfg);
  const auto logits = reference::fg_attn_logits(w.problem, w.q.view(), w.k.view(), cfg, 0, 0);
  const std::int64_t tk = m.shape.num_k_tiles();
  for (std::int64_t i = 0; i < m.shape.num_q_tiles(); ++i) {
    std::vector<double> p(static_cast<std::size_t>(tk));
    double mx = -INFINITY, z = 0, kept = 0, min_kept = INFINITY;
    for (std::int64_t j = 0; j < tk; ++j) mx = std::max(mx, double(logits[static_cast<std::size_t>(i * tk + j)]));
    for (std::int64_t j = 0; j < tk; ++j) z += (p[static_cast<std::size_t>(j)] = std::exp2(logits[static_cast<std::size_t>(i * tk + j)] - mx));
    for (std::int32_t j : m.row(0, 0, i)) kept += p[static_cast<std::size_t>(j)], min_kept = std::min(min_kept, p[static_cast<std::size_t>(j)]);
    CHECK(kept / z >= 0.8 - 1e-5);
    CHECK((kept - min_kept) / z < 0.8 + 1e-5);
  }
  cfg.top_p = 1.0f;
  const TileMask all = reference::fg_attn_estimate(w.problem, w.q.view(), w.k.view(), cfg);
  CHECK(all.tiles == TileMask::dense(all.shape).tiles);
  HostTensor o1(DType::f32, 1, 2, 777, 64), o2(DType::f32, 1, 2, 777, 64);
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), all, o1.view());
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(all.shape), o2.view());
  CHECK(std::memcmp(o1.data(), o2.data(), o1.size_bytes()) == 0);
}

TEST_CASE("exact-mode merged output equals the unmerged output bit for bit; union covers it") {
  const Workload w = video(1000);
  for (auto merge : {fg_attn::Merge::consecutive, fg_attn::Merge::xor_greedy}) {
    fg_attn::Config cfg;
    cfg.tile_q = 16;
    cfg.tile_k = 8;
    cfg.merge = merge;
    const TileMask m = reference::fg_attn_estimate(w.problem, w.q.view(), w.k.view(), cfg);
    const fg_attn::MergePlan plan = fg_attn::merge_plan(m, cfg);
    // Every tile in exactly one item, at most R = 8 members.
    std::vector<int> seen(static_cast<std::size_t>(m.shape.num_rows()), 0);
    for (const auto& item : plan.items) {
      CHECK(item.members.size() <= 8);
      for (std::int32_t t : item.members) ++seen[static_cast<std::size_t>(m.row_index(item.batch, item.head, t))];
    }
    for (int s : seen) REQUIRE(s == 1);
    const TileMask exact = fg_attn::effective_mask(m, plan, fg_attn::Semantics::exact);
    CHECK(exact.tiles == m.tiles);
    CHECK(exact.row_ptr == m.row_ptr);
    HostTensor a(DType::f32, 1, 2, 1000, 64), b(DType::f32, 1, 2, 1000, 64);
    a.poison();
    b.poison();
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), m, a.view());
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), exact, b.view());
    CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
    const TileMask uni = fg_attn::effective_mask(m, plan, fg_attn::Semantics::union_keys);
    CHECK(uni.stats().kept_tiles >= m.stats().kept_tiles);
    CHECK(uni.stats().density == doctest::Approx(plan.density_after));
    CHECK(m.stats().density == doctest::Approx(plan.density_before));
    CHECK(plan.redundant_load >= 1.0);
  }
}

TEST_CASE("merge-XOR groups alike tiles where consecutive merging mixes them") {
  // Even query tiles select key tiles {0..3}, odd ones {10..13}: consecutive groups mix both patterns
  // (union of 8 tiles per member), XOR groups pair like with like (no waste).
  MaskShape s;
  s.tile_q = 32;
  s.tile_k = 16;
  s.seqlen_q = 32 * 16;
  s.seqlen_kv = 16 * 16;
  std::vector<std::vector<std::int32_t>> rows;
  for (int t = 0; t < 16; ++t) rows.push_back(t % 2 == 0 ? std::vector<std::int32_t>{0, 1, 2, 3} : std::vector<std::int32_t>{10, 11, 12, 13});
  const TileMask m = TileMask::from_rows(s, rows);
  fg_attn::Config cfg;
  cfg.tile_q = 32;
  cfg.tile_k = 16;
  cfg.merge = fg_attn::Merge::consecutive;
  const auto consecutive = fg_attn::merge_plan(m, cfg);
  cfg.merge = fg_attn::Merge::xor_greedy;
  const auto greedy = fg_attn::merge_plan(m, cfg);
  CHECK(consecutive.redundant_load == doctest::Approx(2.0));
  CHECK(greedy.redundant_load == doctest::Approx(1.0));
  REQUIRE(greedy.items.size() == 4);
  CHECK(greedy.items[0].members == std::vector<std::int32_t>{0, 2, 4, 6});  // anchor, then nearest by index
  CHECK(greedy.items[1].members == std::vector<std::int32_t>{1, 3, 5, 7});
  for (const auto& p : {consecutive, greedy})  // longest first; ties by index
    for (std::size_t i = 1; i < p.order.size(); ++i)
      CHECK(p.items[static_cast<std::size_t>(p.order[i - 1])].key_count >= p.items[static_cast<std::size_t>(p.order[i])].key_count);
  CHECK(greedy.skew == doctest::Approx(0.0));
}

TEST_CASE("FG-Attn estimates are deterministic, handle odd lengths and GQA, and reject bad tiles") {
  const Workload w = video(32760 / 16, 4);  // 2047 tokens: partial tiles
  fg_attn::Config cfg;
  cfg.tile_q = 64;
  cfg.tile_k = 32;
  const TileMask a = reference::fg_attn_estimate(w.problem, w.q.view(), w.k.view(), cfg);
  const TileMask b = reference::fg_attn_estimate(w.problem, w.q.view(), w.k.view(), cfg);
  CHECK(a.tiles == b.tiles);
  CHECK_NOTHROW(a.validate_for(w.problem));
  CHECK(a.shape.mask_heads == 4);
  CHECK(a.stats().empty_rows == 0);
  CHECK(a.stats().density < 1.0);
  for (auto [m, n] : {std::pair{24, 16}, {8, 16}, {256, 16}, {32, 0}, {32, 129}}) {
    fg_attn::Config bad;
    bad.tile_q = m;
    bad.tile_k = n;
    CHECK_THROWS_AS(reference::fg_attn_estimate(w.problem, w.q.view(), w.k.view(), bad), Error);
  }
  fg_attn::Config bad_p;
  bad_p.top_p = 0.0f;
  CHECK_THROWS_WITH_AS(bad_p.validate(), doctest::Contains("top_p"), Error);
  CHECK_THROWS_AS(fg_attn::parse_merge("random"), Error);
}

}  // namespace
}  // namespace spattn::test
