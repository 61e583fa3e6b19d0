// AnchorAttention: θ = ±∞ limits, a planted dominant key in the middle of the sequence, disjoint
// sink/local/stripe partition, partial groups, GQA, chunked prefill, determinism, bad parameters.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {
namespace {

anchor_attn::Config small_config(float theta) {
  anchor_attn::Config c;
  c.block = 16;
  c.step = 4;  // groups of 64 rows
  c.n_sink = 16;
  c.local_lead = 16;
  c.theta = theta;
  return c;
}

Workload llm(std::int64_t n, std::int64_t heads = 2, std::int64_t kv = 1, std::int64_t nq = 0) {
  return test_workload(WorkloadKind::llm, n, heads, kv, nq);
}

TEST_CASE("theta = +inf is exactly dense attention; theta = -inf is the anchor region only") {
  for (std::int64_t nq : {0, 150}) {
    const Workload w = llm(333, 2, 1, nq);
    const auto dense = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(INFINITY));
    CHECK(dense.mask.tiles == TileMask::dense(dense.mask.shape).tiles);
    CHECK(dense.selected == dense.candidates);
    HostTensor a(DType::f32, 1, 2, w.problem.seqlen_q, 64), b = a;
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), dense.mask, a.view());
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(dense.mask.shape), b.view());
    CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);

    const auto none = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(-INFINITY));
    CHECK(none.selected == 0);
    const std::int64_t offset = w.problem.seqlen_kv - w.problem.seqlen_q;
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t t = 0; t < none.mask.shape.num_q_tiles(); ++t) {
        // Independent construction: sink [0,16) and [max(16, p0 - 16), last diagonal].
        const std::int64_t p0 = t * 64 + offset, last = std::min<std::int64_t>(t * 64 + 63, w.problem.seqlen_q - 1) + offset;
        std::vector<std::int32_t> want;
        for (std::int64_t j = 0; j <= last; ++j)
          if (j < 16 || j >= std::max<std::int64_t>(16, p0 - 16)) want.push_back(static_cast<std::int32_t>(j));
        const auto got = none.mask.row(0, h, t);
        REQUIRE(std::vector<std::int32_t>(got.begin(), got.end()) == want);
      }
  }
}

TEST_CASE("GroupKeys' key predicates and region list are the reference's masks at theta = -inf and +inf") {
  // The backends' kernels decide each key by GroupKeys::candidate / always_kept and list the anchor region by
  // region_key: over causal and not, Nq < Nkv, odd sinks and leads, they must give the reference's θ = −∞ mask (the
  // region) and θ = +∞ mask (region and candidates), and candidate_count its candidates.
  for (const bool causal : {true, false})
    for (const std::int64_t nq : {std::int64_t{0}, std::int64_t{150}})
      for (const std::int64_t sink : {0, 5, 16, 400}) {
        Workload w = llm(333, 1, 1, nq);
        w.problem.causal = causal;
        anchor_attn::Config c = small_config(-INFINITY);
        c.n_sink = sink;
        c.local_lead = sink == 5 ? 37 : 16;
        const auto none = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), c);
        c.theta = INFINITY;
        const auto all = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), c);
        const Problem& p = w.problem;
        std::int64_t candidates = 0;
        for (std::int64_t t = 0; t < none.mask.shape.num_q_tiles(); ++t) {
          CAPTURE(causal);
          CAPTURE(nq);
          CAPTURE(sink);
          CAPTURE(t);
          const std::int64_t first = t * c.group_rows(), last = std::min<std::int64_t>(first + c.group_rows(), p.seqlen_q) - 1;
          const anchor_attn::GroupKeys g =
              anchor_attn::group_keys(c.n_sink, c.local_lead, c.group_rows(), first, last, p.seqlen_q, p.seqlen_kv, causal);
          // Causal: keys past the group's reach leave the mask (a sink longer than the reach lists some).
          const std::int64_t reach =
              causal ? anchor_attn::group_reach_end(first, last, p.seqlen_q, p.seqlen_kv, true, c.group_rows()) : p.seqlen_kv;
          std::vector<std::int32_t> region, kept, listed;
          for (std::int64_t j = 0; j < p.seqlen_kv; ++j) {
            CHECK_FALSE((g.candidate(j) && g.always_kept(j)));
            if (j >= reach) {
              CHECK_FALSE(g.candidate(j));
              continue;
            }
            if (g.always_kept(j)) region.push_back(static_cast<std::int32_t>(j));
            if (g.always_kept(j) || g.candidate(j)) kept.push_back(static_cast<std::int32_t>(j));
            candidates += g.candidate(j) ? 1 : 0;
          }
          for (std::int64_t i = 0; i < g.region_size(); ++i)
            if (g.region_key(i) < reach) listed.push_back(static_cast<std::int32_t>(g.region_key(i)));
          const auto want_region = none.mask.row(0, 0, t), want_kept = all.mask.row(0, 0, t);
          CHECK(region == std::vector<std::int32_t>(want_region.begin(), want_region.end()));
          CHECK(listed == region);
          CHECK(kept == std::vector<std::int32_t>(want_kept.begin(), want_kept.end()));
          std::int64_t counted = 0;
          for (std::int64_t j = 0; j < p.seqlen_kv; ++j) counted += g.candidate(j) ? 1 : 0;
          CHECK(g.candidate_count(p.seqlen_kv) == counted);
        }
        CHECK(candidates == all.candidates);
      }
}

TEST_CASE("a planted dominant key in the middle of the sequence is kept and gets its dense weight") {
  // N = 300 with groups of 64: key 100 is a candidate (not sink, not local) for groups 3 and 4; key 189 lies
  // in the lead-in before group 3 (rows 192...), the block the authors' code never attends.
  const std::int64_t n = 300;
  Workload w = llm(n, 1, 1);
  w.q = HostTensor(DType::f32, 1, 1, n, 64);
  w.k = HostTensor(DType::f32, 1, 1, n, 64);
  w.problem.dtype = DType::f32;
  HostTensor v(DType::f32, 1, 1, n, 64);
  fill_random(w.q, 0.3);
  fill_random(w.k, 0.3);
  fill_random(v);
  for (std::int64_t i = 0; i < n; ++i) w.q.set(0, 0, i, 0, 3.0f);  // every query points along dim 0
  for (std::int64_t j : {100, 189}) w.k.set(0, 0, j, 0, 30.0f);    // two keys with logits ≈ 90/8 ≈ 11
  const auto est = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(12.0f));
  for (std::int64_t t = 3; t < 5; ++t) {
    const auto row = est.mask.row(0, 0, t);
    CHECK(std::count(row.begin(), row.end(), 100) == 1);
    CHECK(std::count(row.begin(), row.end(), 189) == 1);
  }
  HostTensor o(DType::f32, 1, 1, n, 64), dense(DType::f32, 1, 1, n, 64);
  attend(w.problem, w.q.view(), w.k.view(), v.view(), est.mask, o.view());
  attend_dense(w.problem, w.q.view(), w.k.view(), v.view(), dense.view());
  // The two keys carry almost all the mass, so rows of groups 3-4 must match dense closely.
  for (std::int64_t i = 192; i < n; ++i)
    for (std::int64_t d = 0; d < 64; ++d) REQUIRE(std::fabs(o.get(0, 0, i, d) - dense.get(0, 0, i, d)) < 1e-2);
}

TEST_CASE("sink, local window and stripes never overlap; partial groups, GQA and determinism") {
  const Workload w = llm(1000, 4, 2);  // 1000 = 15·64 + 40: a partial last group
  const auto a = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(6.0f));
  const auto b = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(6.0f));
  CHECK(a.mask.tiles == b.mask.tiles);
  CHECK_NOTHROW(a.mask.validate_for(w.problem));
  CHECK(a.selected > 0);
  CHECK(a.selected < a.candidates);
  std::int64_t kept_stripes = 0;
  for (std::int64_t h = 0; h < 4; ++h)
    for (std::int64_t t = 0; t < a.mask.shape.num_q_tiles(); ++t) {
      const auto row = a.mask.row(0, h, t);
      const std::int64_t last = std::min<std::int64_t>(t * 64 + 63, 999);
      const std::int64_t local_begin = std::max<std::int64_t>(16, t * 64 - 16);
      std::int64_t sink = 0, local = 0, stripes = 0;
      for (std::int32_t j : row) (j < 16 ? sink : j >= local_begin ? local : stripes) += 1;
      CHECK(sink == 16);
      CHECK(local == last + 1 - local_begin);
      CHECK(sink + local + stripes == static_cast<std::int64_t>(row.size()));  // ascending + unique = no double count
      kept_stripes += stripes;
    }
  CHECK(kept_stripes == a.selected);
  // Anchors are the exact maxima over the region (compare one row against fp64).
  const std::int64_t i = 777, visible = 778;
  double mx = -INFINITY;
  for (std::int64_t j = 0; j < visible; ++j) {
    if (j >= 16 && j < std::max<std::int64_t>(16, (i / 64) * 64 - 16)) continue;
    double dot = 0;
    for (std::int64_t e = 0; e < 64; ++e) dot += double(w.q.get(0, 3, i, e)) * w.k.get(0, 1, j, e);
    mx = std::max(mx, dot / 8.0 * 1.4426950408889634);
  }
  CHECK(a.anchors[static_cast<std::size_t>(3 * 1000 + i)].m == doctest::Approx(mx).epsilon(1e-5));
}

TEST_CASE("non-causal inputs: the group's window plus stripes on both sides") {
  WorkloadSpec s;
  s.kind = WorkloadKind::video;
  s.seqlen = 400;
  s.head_dim = 64;
  s.seed = test_seed();
  const Workload w = make_workload(s);
  const auto est = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(INFINITY));
  CHECK(est.mask.tiles == TileMask::dense(est.mask.shape).tiles);
  // A huge finite θ must select every candidate, on
  // both sides of each group's window: the mask is then dense, stripes right of the window included.
  const auto wide = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(1e6f));
  CHECK(wide.mask.tiles == TileMask::dense(wide.mask.shape).tiles);
  CHECK(wide.selected == wide.candidates);
  bool after_window = false;
  for (std::int32_t j : wide.mask.row(0, 0, 1)) after_window = after_window || j >= 128;
  CHECK(after_window);
  const auto none = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(-INFINITY));
  CHECK(none.selected == 0);
  CHECK(none.mask.stats().density < 0.5);
}

TEST_CASE("anchor_attn_select over the estimator's own anchors is the estimator; margins decide like the rule") {
  for (const bool causal : {true, false}) {
    CAPTURE(causal);
    Workload w = llm(401, 4, 2, causal ? 0 : 300);
    w.problem.causal = causal;
    // θ = 1.5 makes real decisions on both sides for most seeds; where this seed's scores select nothing (or all),
    // the next θ of the ladder that does (the REQUIREs below still demand both sides).
    const auto estimate_at = [&](float theta) {
      return reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), small_config(theta));
    };
    float theta = 1.5f;
    auto est = estimate_at(theta);
    for (const float next : {3.0f, 6.0f, 0.75f}) {
      if (est.selected > 0 && est.selected < est.candidates) break;
      theta = next;
      est = estimate_at(theta);
    }
    CAPTURE(theta);
    const anchor_attn::Config c = small_config(theta);
    std::vector<float> margins;
    const auto sel = reference::anchor_attn_select(w.problem, w.q.view(), w.k.view(), c, est.anchors, &margins);
    CHECK(sel.mask.row_ptr == est.mask.row_ptr);
    CHECK(sel.mask.tiles == est.mask.tiles);
    CHECK(sel.candidates == est.candidates);
    CHECK(sel.selected == est.selected);
    REQUIRE(est.selected > 0);
    REQUIRE(est.selected < est.candidates);  // θ = 1.5 makes real decisions on both sides
    // Every candidate has a margin whose sign is the decision; every other key has NaN.
    const std::vector<std::uint8_t> kept = est.mask.to_bitmap();
    const MaskShape& s = est.mask.shape;
    std::int64_t candidates = 0, agree = 0;
    for (std::size_t e = 0; e < margins.size(); ++e) {
      if (std::isnan(margins[e])) continue;
      ++candidates;
      agree += (margins[e] >= 0.0f) == (kept[e] != 0) ? 1 : 0;
    }
    CHECK(static_cast<std::int64_t>(margins.size()) == s.num_rows() * s.num_k_tiles());
    CHECK(candidates == est.candidates);
    CHECK(agree == candidates);
    // Other anchors change the decisions: anchors raised by 1000 (base 2) keep only the anchor region.
    std::vector<AnchorStats> high = est.anchors;
    for (AnchorStats& a : high) a.m += 1000.0f;
    const auto none = reference::anchor_attn_select(w.problem, w.q.view(), w.k.view(), c, high);
    CHECK(none.selected == 0);
    CHECK_THROWS_AS(reference::anchor_attn_select(w.problem, w.q.view(), w.k.view(), c, std::vector<AnchorStats>(3)),
                    Error);
  }
}

TEST_CASE("bad AnchorAttention parameters are rejected") {
  const Workload w = llm(100);
  auto bad = [&](auto mutate, const char* field) {
    anchor_attn::Config c = small_config(12.0f);
    mutate(c);
    CHECK_THROWS_WITH_AS(reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), c), doctest::Contains(field), Error);
  };
  bad([](anchor_attn::Config& c) { c.theta = NAN; }, "theta");
  bad([](anchor_attn::Config& c) { c.step = 0; }, "step");
  bad([](anchor_attn::Config& c) { c.block = 128, c.step = 32; }, "block");
  bad([](anchor_attn::Config& c) { c.n_sink = -1; }, "n_sink");
  bad([](anchor_attn::Config& c) { c.local_lead = -5; }, "local_lead");
}

}  // namespace
}  // namespace spattn::test
