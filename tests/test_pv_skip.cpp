// SpargeAttn's PV-skip in the reference executor: planted tiles whose skip decisions are known, the
// skipped keys excluded from numerator and denominator (the fp64 reference, exact_fp64), per-warp vs whole-block votes,
// exempt last tile, no skips at a huge threshold, bad parameters.
#include <doctest/doctest.h>

#include <cmath>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

struct Planted {
  Problem p;
  HostTensor q{DType::f32, 1, 1, 512, 64}, k{DType::f32, 1, 1, 512, 64}, v{DType::f32, 1, 1, 512, 64};
};

/// Every query carries 4·e0, keys 0..63 carry 10·e0 (logit 40/8 = 5… scaled below), the rest small noise;
/// with `warp_tile` the first 16 rows of every 128-row block also carry 4·e1 and keys of tile 3 carry 10·e1.
Planted planted(bool warp_tile) {
  Planted x;
  x.p.seqlen_q = x.p.seqlen_kv = 512;
  x.p.head_dim = 64;
  x.p.scale = 1.0f;  // logits = q·k: 40 on the planted pairs, O(0.1) elsewhere
  fill_random(x.q, 0.05);
  fill_random(x.k, 0.05);
  fill_random(x.v);
  for (std::int64_t i = 0; i < 512; ++i) {
    x.q.set(0, 0, i, 0, 4.0f);
    if (warp_tile && i % 128 < 16) x.q.set(0, 0, i, 1, 4.0f);
  }
  for (std::int64_t j = 0; j < 64; ++j) x.k.set(0, 0, j, 0, 10.0f);
  if (warp_tile)
    for (std::int64_t j = 192; j < 256; ++j) x.k.set(0, 0, j, 1, 10.0f);
  return x;
}

TEST_CASE("PV-skip drops the tiles far below the running max, from numerator and denominator") {
  Planted x = planted(false);
  const TileMask mask = TileMask::dense(MaskShape::of(x.p, 128, 64));
  HostTensor o(DType::f32, 1, 1, 512, 64);
  o.poison();
  AttendOptions opt;
  opt.pv_threshold = 20.0f;  // 2^-20 relative weight
  const AttendStats st = attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt);
  // Tile 0 sets the max (logits ≈ 40 → 57.7 in base 2); tiles 1..6 sit ≈ 57 below it and are skipped;
  // tile 7 is the exempt last tile. 4 row blocks × 6 tiles.
  CHECK(st.pv_skipped == 24);
  const auto want = exact_fp64(x.p, x.q, x.k, x.v, [](std::int64_t, std::int64_t, std::int64_t, std::int64_t j) {
    return j < 64 || j >= 448;
  });
  for (std::int64_t i = 0; i < 512; ++i)
    for (std::int64_t d = 0; d < 64; ++d)
      REQUIRE(std::fabs(o.get(0, 0, i, d) - want[static_cast<std::size_t>(i * 64 + d)]) < 1e-4);

  opt.pv_threshold = 1e30f;
  HostTensor all(DType::f32, 1, 1, 512, 64), plain(DType::f32, 1, 1, 512, 64);
  CHECK(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, all.view(), opt).pv_skipped == 0);
  attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, plain.view());
  for (std::int64_t i = 0; i < 512; ++i)
    for (std::int64_t d = 0; d < 64; ++d) REQUIRE(std::fabs(all.get(0, 0, i, d) - plain.get(0, 0, i, d)) < 1e-5);

  opt.pv_exempt_last = 3;
  opt.pv_threshold = 20.0f;
  CHECK(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt).pv_skipped == 16);
}

TEST_CASE("PV-skip vote groups: one warp of 16 rows or the whole row block") {
  Planted x = planted(true);
  const TileMask mask = TileMask::dense(MaskShape::of(x.p, 128, 64));
  HostTensor o(DType::f32, 1, 1, 512, 64);
  AttendOptions opt;
  opt.pv_threshold = 20.0f;
  // Whole block: tile 3 raises the max of rows 0..15 of every block, so the block computes it: 5 skips each.
  CHECK(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt).pv_skipped == 4 * 5);
  // Per warp: 8 groups skip tiles 1, 2, 4, 5, 6 and 7 groups (all but the first) skip tile 3.
  opt.pv_vote_rows = 16;
  CHECK(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt).pv_skipped == 4 * (5 * 8 + 7));
}

TEST_CASE("PV-skip parameters are validated") {
  Planted x = planted(false);
  const TileMask mask = TileMask::dense(MaskShape::of(x.p, 128, 64));
  HostTensor o(DType::f32, 1, 1, 512, 64);
  AttendOptions opt;
  opt.pv_threshold = -1.0f;
  CHECK_THROWS_WITH_AS(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt),
                       doctest::Contains("pv_threshold"), Error);
  opt.pv_threshold = NAN;
  CHECK_THROWS_AS(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt), Error);
  opt.pv_threshold = 10.0f;
  opt.pv_vote_rows = 500;
  CHECK_THROWS_WITH_AS(attend(x.p, x.q.view(), x.k.view(), x.v.view(), mask, o.view(), opt),
                       doctest::Contains("pv_vote_rows"), Error);
}

}  // namespace
}  // namespace spattn::test
