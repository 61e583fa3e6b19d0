#include <doctest/doctest.h>

#include "common.hpp"
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
