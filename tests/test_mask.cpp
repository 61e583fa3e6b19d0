// TileMask builders, conversions and statistics against brute force over individual (query, key) pairs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"

namespace spattn::test {
namespace {

MaskShape shape_of(std::int32_t tq, std::int32_t tk, std::int64_t nq, std::int64_t nkv, bool causal,
                   std::int64_t heads = 2, std::int64_t batch = 1) {
  MaskShape s;
  s.tile_q = tq;
  s.tile_k = tk;
  s.batch = batch;
  s.mask_heads = heads;
  s.seqlen_q = nq;
  s.seqlen_kv = nkv;
  s.causal = causal;
  return s;
}

/// Does tile (t, k) contain a visible pair? (brute force)
bool tile_reachable(const MaskShape& s, std::int64_t b, std::int64_t t, std::int64_t k) {
  const std::int64_t nq = s.seqlen_q_of(b), nkv = s.seqlen_kv_of(b);
  for (std::int64_t i = t * s.tile_q; i < std::min<std::int64_t>((t + 1) * s.tile_q, nq); ++i)
    for (std::int64_t j = k * s.tile_k; j < std::min<std::int64_t>((k + 1) * s.tile_k, nkv); ++j)
      if (!s.causal || j <= i + nkv - nq) return true;
  return false;
}

TEST_CASE("dense masks list exactly the tiles that hold a visible pair") {
  for (bool causal : {true, false})
    for (auto [tq, tk, nq, nkv] : std::vector<std::tuple<int, int, int, int>>{
             {16, 16, 100, 100}, {32, 7, 45, 200}, {128, 128, 1, 1}, {16, 1, 33, 40}, {48, 128, 300, 301}}) {
      const MaskShape s = shape_of(tq, tk, nq, nkv, causal);
      const TileMask m = TileMask::dense(s);
      CHECK_NOTHROW(m.validate());
      const auto bits = m.to_bitmap();
      for (std::int64_t t = 0; t < s.num_q_tiles(); ++t)
        for (std::int64_t k = 0; k < s.num_k_tiles(); ++k)
          REQUIRE(bool(bits[static_cast<std::size_t>((1 * s.num_q_tiles() + t) * s.num_k_tiles() + k)]) ==
                  tile_reachable(s, 0, t, k));
      const auto st = m.stats();
      CHECK(st.density == 1.0);
      CHECK(st.pair_density == 1.0);
      CHECK(st.empty_rows == 0);
    }
}

TEST_CASE("from_bitmap keeps exactly the nonzero reachable entries, row by row (brute force)") {
  // Any nonzero byte keeps its tile; entries past a row's reachable tiles (causal, varlen, the end) are ignored.
  for (const bool causal : {true, false})
    for (const auto& [tq, tk, nq, nkv, batch] : std::vector<std::tuple<std::int32_t, std::int32_t, std::int64_t, std::int64_t, std::int64_t>>{
             {16, 8, 150, 170, 1}, {32, 1, 45, 200, 2}, {128, 64, 1000, 1000, 1}, {16, 16, 20, 33, 3}}) {
      MaskShape s = shape_of(tq, tk, nq, nkv, causal, 3, batch);
      if (batch == 2) s.seqlens_q = {nq, nq / 3}, s.seqlens_kv = {nkv / 2, nkv};  // varlen: other reaches
      std::vector<std::uint8_t> bits(static_cast<std::size_t>(s.num_rows() * s.num_k_tiles()));
      for (auto& x : bits) x = uniform(0.0, 1.0) < 0.5 ? 0 : static_cast<std::uint8_t>(1 + uniform(0.0, 254.99));
      const TileMask m = TileMask::from_bitmap(s, bits);
      CHECK_NOTHROW(m.validate());
      REQUIRE(m.row_ptr.size() == static_cast<std::size_t>(s.num_rows() + 1));
      for (std::int64_t r = 0; r < s.num_rows(); ++r) {
        const std::int64_t b = r / (s.mask_heads * s.num_q_tiles()), t = r % s.num_q_tiles();
        std::vector<std::int32_t> want;
        for (std::int64_t k = 0; k < s.num_k_tiles(); ++k)
          if (bits[static_cast<std::size_t>(r * s.num_k_tiles() + k)] != 0 && tile_reachable(s, b, t, k))
            want.push_back(static_cast<std::int32_t>(k));
        const std::vector<std::int32_t> got(m.tiles.begin() + m.row_ptr[static_cast<std::size_t>(r)],
                                            m.tiles.begin() + m.row_ptr[static_cast<std::size_t>(r + 1)]);
        REQUIRE(got == want);
      }
    }
}

TEST_CASE("bitmap round trip, coarsen, expand and union against brute force") {
  const MaskShape s = shape_of(16, 8, 150, 170, true, 4);
  const TileMask m = random_mask(s, 0.4);
  CHECK_NOTHROW(m.validate());
  CHECK(TileMask::from_bitmap(s, m.to_bitmap()).tiles == m.tiles);

  const TileMask c = m.coarsen(2, 4);
  CHECK(c.shape.tile_q == 32);
  CHECK(c.shape.tile_k == 32);
  const auto fine = m.to_bitmap(), coarse = c.to_bitmap();
  for (std::int64_t h = 0; h < 4; ++h)
    for (std::int64_t t = 0; t < c.shape.num_q_tiles(); ++t)
      for (std::int64_t k = 0; k < c.shape.num_k_tiles(); ++k) {
        bool any = false;
        for (std::int64_t ft = 2 * t; ft < std::min<std::int64_t>(2 * t + 2, s.num_q_tiles()); ++ft)
          for (std::int64_t fk = 4 * k; fk < std::min<std::int64_t>(4 * k + 4, s.num_k_tiles()); ++fk)
            any = any || fine[static_cast<std::size_t>((h * s.num_q_tiles() + ft) * s.num_k_tiles() + fk)];
        REQUIRE(bool(coarse[static_cast<std::size_t>((h * c.shape.num_q_tiles() + t) * c.shape.num_k_tiles() + k)]) == any);
      }

  const TileMask e = c.expand(2, 4);
  CHECK(e.shape == s);
  const auto expanded = e.to_bitmap();
  for (std::int64_t h = 0; h < 4; ++h)
    for (std::int64_t t = 0; t < s.num_q_tiles(); ++t)
      for (std::int64_t k = 0; k < s.num_k_tiles(); ++k) {
        const bool parent = coarse[static_cast<std::size_t>((h * c.shape.num_q_tiles() + t / 2) * c.shape.num_k_tiles() + k / 4)];
        REQUIRE(bool(expanded[static_cast<std::size_t>((h * s.num_q_tiles() + t) * s.num_k_tiles() + k)]) ==
                (parent && tile_reachable(s, 0, t, k)));
      }

  const TileMask u = m.union_over_group(4, 2);
  CHECK(u.shape.mask_heads == 2);
  const auto ub = u.to_bitmap();
  for (std::int64_t g = 0; g < 2; ++g)
    for (std::int64_t t = 0; t < s.num_q_tiles(); ++t)
      for (std::int64_t k = 0; k < s.num_k_tiles(); ++k) {
        const auto at = [&](std::int64_t h) {
          return fine[static_cast<std::size_t>((h * s.num_q_tiles() + t) * s.num_k_tiles() + k)] != 0;
        };
        REQUIRE(bool(ub[static_cast<std::size_t>((g * s.num_q_tiles() + t) * s.num_k_tiles() + k)]) ==
                (at(2 * g) || at(2 * g + 1)));
      }
  CHECK_THROWS_AS(m.union_over_group(4, 3), Error);
  CHECK_THROWS_AS(c.expand(3, 1), Error);
}

TEST_CASE("stats count tiles and pairs like brute force") {
  MaskShape s = shape_of(16, 4, 70, 90, true, 3, 2);
  s.seqlens_q = {70, 20};
  s.seqlens_kv = {90, 31};
  const TileMask m = random_mask(s, 0.3);
  const auto st = m.stats();
  const auto bits = m.to_bitmap();
  std::int64_t kept = 0, reachable = 0, empty = 0, mn = 1 << 30, mx = 0;
  double pairs = 0, visible = 0;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 3; ++h)
      for (std::int64_t t = 0; t < s.num_q_tiles(); ++t) {
        if (t * 16 >= s.seqlen_q_of(b)) continue;
        std::int64_t row_kept = 0;
        for (std::int64_t k = 0; k < s.num_k_tiles(); ++k) {
          reachable += tile_reachable(s, b, t, k);
          row_kept += bits[static_cast<std::size_t>(((b * 3 + h) * s.num_q_tiles() + t) * s.num_k_tiles() + k)];
        }
        kept += row_kept;
        empty += row_kept == 0;
        mn = std::min(mn, row_kept);
        mx = std::max(mx, row_kept);
        const std::int64_t nq = s.seqlen_q_of(b), nkv = s.seqlen_kv_of(b);
        for (std::int64_t i = t * 16; i < std::min<std::int64_t>(t * 16 + 16, nq); ++i)
          for (std::int64_t j = 0; j < nkv; ++j) {
            if (j > i + nkv - nq) continue;
            visible += 1;
            pairs += bits[static_cast<std::size_t>(((b * 3 + h) * s.num_q_tiles() + t) * s.num_k_tiles() + j / 4)];
          }
      }
  CHECK(st.kept_tiles == kept);
  CHECK(st.reachable_tiles == reachable);
  CHECK(st.empty_rows == empty);
  CHECK(st.min_per_row == mn);
  CHECK(st.max_per_row == mx);
  CHECK(st.density == doctest::Approx(double(kept) / double(reachable)));
  CHECK(st.pair_density == doctest::Approx(pairs / visible));
  CHECK(st.bytes == static_cast<std::int64_t>(m.row_ptr.size() * 8 + m.tiles.size() * 4));
}

TEST_CASE("validate rejects inconsistent masks and bad tile sizes") {
  const MaskShape s = shape_of(16, 16, 64, 64, true, 1);
  TileMask m = TileMask::dense(s);
  CHECK_NOTHROW(m.validate());
  TileMask future = m;
  future.tiles[0] = 3;  // query tile 0 (rows 0..15) cannot reach key tile 3 under causality
  CHECK_THROWS_WITH_AS(future.validate(), doctest::Contains("outside the reachable"), Error);
  TileMask unsorted = m;
  std::swap(unsorted.tiles[1], unsorted.tiles[2]);  // row 1 holds tiles {0, 1}
  CHECK_THROWS_WITH_AS(unsorted.validate(), doctest::Contains("ascending"), Error);
  TileMask short_ptr = m;
  short_ptr.row_ptr.pop_back();
  CHECK_THROWS_WITH_AS(short_ptr.validate(), doctest::Contains("row_ptr"), Error);
  for (auto [tq, tk] : {std::pair{8, 16}, {4096, 16}, {16, 0}, {16, 256}}) {
    MaskShape bad = s;
    bad.tile_q = tq;
    bad.tile_k = tk;
    CHECK_THROWS_AS(TileMask::dense(bad), Error);
  }
  Problem p;
  p.seqlen_q = p.seqlen_kv = 64;
  p.head_dim = 64;
  p.causal = false;
  CHECK_THROWS_WITH_AS(m.validate_for(p), doctest::Contains("causal"), Error);
}

}  // namespace
}  // namespace spattn::test

namespace spattn::test {
namespace {

TEST_CASE("mask policy: RowKeys / row_sees / row_key_end against the causal rule written out") {
  for (int trial = 0; trial < 20000; ++trial) {
    const bool causal = trial % 2 == 0;
    const auto nkv = static_cast<std::int64_t>(uniform(1, 300));
    const auto nq = causal ? static_cast<std::int64_t>(uniform(1, static_cast<double>(nkv) + 1))
                           : static_cast<std::int64_t>(uniform(1, 300));
    const auto i = static_cast<std::int64_t>(uniform(0, static_cast<double>(nq)));
    const auto j = static_cast<std::int64_t>(uniform(-2, static_cast<double>(nkv) + 3));
    const bool want = j >= 0 && j < nkv && (!causal || j <= i + nkv - nq);  // DESIGN.md §3
    const mask_policy::RowKeys<std::int64_t> keys(i, nq, nkv, causal);
    REQUIRE(keys.sees(j) == want);
    REQUIRE(mask_policy::row_sees(i, j, nq, nkv, causal) == want);
    REQUIRE(mask_policy::RowKeys<int>(int(i), int(nq), int(nkv), causal).sees(int(j)) == want);
    REQUIRE(keys.end == mask_policy::row_key_end(i, nq, nkv, causal));
    REQUIRE(keys.end == (causal ? std::min(i + nkv - nq + 1, nkv) : nkv));
  }
  CHECK_FALSE(mask_policy::RowKeys<int>().sees(0));  // default: sees no key
}

}  // namespace
}  // namespace spattn::test
