#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/anchor.hpp"

namespace spattn::test {
namespace {

TEST_CASE("anchor regions: sink, local and candidates are disjoint and cover the visible keys") {
  for (int trial = 0; trial < 2000; ++trial) {
    const auto visible = static_cast<std::int64_t>(uniform(1, 5000));
    const auto sink = static_cast<std::int64_t>(uniform(0, 300));
    const auto local = static_cast<std::int64_t>(uniform(0, 600));
    const AnchorRegion r = anchor_region(visible, sink, local);
    REQUIRE(r.sink_end == std::min(sink, visible));
    REQUIRE(r.local_end == visible);
    REQUIRE(r.local_begin >= r.sink_end);
    REQUIRE(r.local_end - r.local_begin <= local);
    // Cover + disjoint: every key in exactly one of the three parts.
    std::int64_t in_region = 0;
    for (std::int64_t j = 0; j < visible; ++j) {
      const bool is_sink = j < r.sink_end, is_local = j >= r.local_begin && j < r.local_end;
      const bool is_candidate = j >= r.sink_end && j < r.local_begin;
      REQUIRE(int(is_sink) + int(is_local) + int(is_candidate) == 1);
      REQUIRE(r.contains(j) == (is_sink || is_local));
      in_region += r.contains(j);
    }
    REQUIRE(in_region == r.size());
    REQUIRE(r.size() + r.candidates() == visible);
  }
  const AnchorRegion r = anchor_region(1000, 128, 256);
  CHECK(r.sink_end == 128);
  CHECK(r.local_begin == 744);
  CHECK(r.candidates() == 616);
  const AnchorRegion small = anchor_region(200, 128, 256);  // window would overlap the sink: it stops there
  CHECK(small.local_begin == 128);
  CHECK(small.candidates() == 0);
}

}  // namespace
}  // namespace spattn::test

#include "spattn/reference/anchor_stats.hpp"

namespace spattn::test {
namespace {

TEST_CASE("reference anchor stats equal the fp64 max and sum over the region") {
  Problem p;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = 150;
  p.seqlen_kv = 200;
  p.head_dim = 64;
  p.causal = true;
  p.dtype = DType::bf16;
  HostTensor q(DType::bf16, 1, 4, 150, 64), k(DType::bf16, 1, 2, 200, 64);
  fill_random(q, 1.5);
  fill_random(k, 1.5);
  const std::int64_t sink = 16, local = 40;
  const auto stats = reference::anchor_stats(p, q.view(), k.view(), sink, local);
  const double sl = p.softmax_scale() * 1.4426950408889634;
  for (std::int64_t h = 0; h < 4; ++h)
    for (std::int64_t i = 0; i < 150; ++i) {
      const std::int64_t visible = i + 50 + 1;
      std::vector<double> x;
      for (std::int64_t j = 0; j < visible; ++j) {
        if (j >= sink && j < visible - local) continue;
        double dot = 0;
        for (std::int64_t d = 0; d < 64; ++d) dot += double(q.get(0, h, i, d)) * k.get(0, h / 2, j, d);
        x.push_back(dot * sl);
      }
      const double m = *std::max_element(x.begin(), x.end());
      double l = 0;
      for (double e : x) l += std::exp2(e - m);
      const AnchorStats& st = stats[static_cast<std::size_t>(h * 150 + i)];
      REQUIRE(st.m == doctest::Approx(m).epsilon(1e-5));
      REQUIRE(st.l == doctest::Approx(l).epsilon(1e-5));
    }
  CHECK_THROWS_AS(reference::anchor_stats(p, q.view(), k.view(), -1, 4), Error);
}

}  // namespace
}  // namespace spattn::test
