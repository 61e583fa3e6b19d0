// TileMask export and files: the FlexAttention full/partial split and BSR against brute force over
// (row, key) pairs, on hand-built and random masks; .npz save/load round trips and bad mask files.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/npy.hpp"

namespace spattn::test {
namespace {

using Rows = std::vector<std::vector<std::int32_t>>;


/// The mask written field by field (no builder), rows in row_index order.
TileMask by_hand(const MaskShape& shape, const Rows& rows) {
  TileMask m;
  m.shape = shape;
  m.row_ptr = {0};
  for (const auto& row : rows) {
    m.tiles.insert(m.tiles.end(), row.begin(), row.end());
    m.row_ptr.push_back(static_cast<std::int64_t>(m.tiles.size()));
  }
  REQUIRE(static_cast<std::int64_t>(rows.size()) == shape.num_rows());
  return m;
}

/// Brute force: tile (t, k) of sequence b is FlexAttention-"full" when it is complete (no ragged
/// rows or keys, FlexAttention's full blocks skip the bounds check) and the executor's rule admits
/// every (row, key) pair in it.
bool brute_force_full(const MaskShape& s, std::int64_t b, std::int64_t t, std::int64_t k) {
  const std::int64_t nq = s.seqlen_q_of(b), nkv = s.seqlen_kv_of(b);
  if ((t + 1) * s.tile_q > nq || (k + 1) * s.tile_k > nkv) return false;
  for (std::int64_t i = t * s.tile_q; i < (t + 1) * s.tile_q; ++i)
    for (std::int64_t j = k * s.tile_k; j < (k + 1) * s.tile_k; ++j)
      if (j >= nkv || (s.causal && j > i + nkv - nq)) return false;
  return true;
}

/// Checks every row of the Flex lists and the BSR arrays against the mask; returns the number of
/// full tiles, so callers can assert that both kinds occurred.
std::int64_t check_exports(const TileMask& m) {
  const MaskShape& s = m.shape;
  const auto f = m.to_flex_block_mask();
  const std::int64_t tq = s.num_q_tiles(), tk = s.num_k_tiles();
  const auto rows = static_cast<std::size_t>(s.num_rows());
  REQUIRE(f.kv_num_blocks.size() == rows);
  REQUIRE(f.full_kv_num_blocks.size() == rows);
  REQUIRE(f.kv_indices.size() == rows * static_cast<std::size_t>(tk));
  REQUIRE(f.full_kv_indices.size() == rows * static_cast<std::size_t>(tk));
  std::int64_t full_total = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.mask_heads; ++h) {
      for (std::int64_t t = 0; t < tq; ++t) {
        CAPTURE(b);
        CAPTURE(h);
        CAPTURE(t);
        // [B, Hm, Tq] / [B, Hm, Tq, Tk] flattened in C order.
        const auto r = static_cast<std::size_t>((b * s.mask_heads + h) * tq + t);
        std::vector<std::int32_t> full(static_cast<std::size_t>(tk), 0), partial = full;
        std::int32_t n_full = 0, n_partial = 0;
        for (std::int32_t k : m.row(b, h, t)) {
          if (brute_force_full(s, b, t, k))
            full[static_cast<std::size_t>(n_full++)] = k;
          else
            partial[static_cast<std::size_t>(n_partial++)] = k;
        }
        full_total += n_full;
        CHECK(f.full_kv_num_blocks[r] == n_full);
        CHECK(f.kv_num_blocks[r] == n_partial);
        const auto at = f.kv_indices.begin() + static_cast<long>(r) * tk;
        const auto full_at = f.full_kv_indices.begin() + static_cast<long>(r) * tk;
        CHECK(std::vector<std::int32_t>(at, at + tk) == partial);  // ascending, padded with 0
        CHECK(std::vector<std::int32_t>(full_at, full_at + tk) == full);
      }
    }
  }
  const auto bsr = m.to_bsr();
  CHECK(bsr.indptr == std::vector<std::int32_t>(m.row_ptr.begin(), m.row_ptr.end()));
  CHECK(bsr.indices == m.tiles);
  return full_total;
}

MaskShape geometry(bool causal, std::int32_t tile_q, std::int64_t seqlen_q,
                   std::int64_t seqlen_kv) {
  MaskShape s;
  s.tile_q = tile_q;
  s.tile_k = 4;
  s.batch = 1;
  s.mask_heads = 2;
  s.seqlen_q = seqlen_q;
  s.seqlen_kv = seqlen_kv;
  s.causal = causal;
  return s;
}

TEST_CASE("FlexAttention lists of a hand-built causal mask (4x4 tiles, Nq 10, Nkv 13, 2 heads)") {
  // Causal offset 3: query tile 0 (rows 0-3) reaches key tiles 0-1, tile 1 (rows 4-7) 0-2, tile 2
  // (rows 8-9, a ragged tail) 0-3, the last of which (key 12) is itself ragged.
  const MaskShape s = geometry(true, 4, 10, 13);
  REQUIRE(s.num_q_tiles() == 3);
  REQUIRE(s.num_k_tiles() == 4);
  const TileMask m = by_hand(s, {{0, 1},
                                 {0, 1, 2},
                                 {0, 1, 2, 3},  // head 0: every reachable tile
                                 {1},
                                 {0, 2},
                                 {3}});  // head 1: sparse
  const auto f = m.to_flex_block_mask();
  // Worked out by hand: row 0 sees keys <= 3 (tile 0 full, tile 1 not); row 4 sees keys <= 7 (tiles
  // 0 and 1 full, tile 2 not); query tile 2 is ragged, so nothing in it is full.
  CHECK(f.full_kv_num_blocks == std::vector<std::int32_t>{1, 2, 0, 0, 1, 0});
  CHECK(f.kv_num_blocks == std::vector<std::int32_t>{1, 1, 4, 1, 1, 1});
  CHECK(f.full_kv_indices == std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,  //
                                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(f.kv_indices == std::vector<std::int32_t>{1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 2, 3,  //
                                                  1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0});
  CHECK(check_exports(m) == 4);
  const auto bsr = m.to_bsr();
  CHECK(bsr.indptr == std::vector<std::int32_t>{0, 2, 5, 9, 10, 12, 13});
  CHECK(bsr.indices == std::vector<std::int32_t>{0, 1, 0, 1, 2, 0, 1, 2, 3, 1, 0, 2, 3});
}

TEST_CASE("FlexAttention lists of hand-built non-causal and variable-length masks") {
  // Non-causal: only completeness matters; key tile 3 (key 12 alone) and query tile 2 are ragged.
  MaskShape s = geometry(false, 4, 10, 13);
  const TileMask dense = by_hand(s, {{0, 1, 2, 3},
                                     {0, 1, 2, 3},
                                     {0, 1, 2, 3},  //
                                     {3},
                                     {1, 2},
                                     {0}});
  const auto f = dense.to_flex_block_mask();
  CHECK(f.full_kv_num_blocks == std::vector<std::int32_t>{3, 3, 0, 0, 2, 0});
  CHECK(f.kv_num_blocks == std::vector<std::int32_t>{1, 1, 4, 1, 0, 1});
  CHECK(check_exports(dense) == 8);

  // Two sequences of one padded batch: the second (Nq 8, Nkv 11, causal offset 3) has its own
  // ragged edges, so the same tile ids classify differently per sequence.
  s = geometry(true, 4, 10, 13);
  s.batch = 2;
  s.seqlens_q = {10, 8};
  s.seqlens_kv = {13, 11};
  Rows rows;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.mask_heads; ++h)
      for (std::int64_t t = 0; t < s.num_q_tiles(); ++t) {
        std::vector<std::int32_t> row;
        for (std::int32_t k = 0; k < s.reachable_k_tiles(b, t); ++k)
          if (h == 0 || (k + t) % 2 == 0) row.push_back(k);
        rows.push_back(row);
      }
  const TileMask varlen = by_hand(s, rows);
  CHECK(varlen.row(1, 0, 2).empty());  // query tile 2 lies past sequence 1's 8 rows
  CHECK(check_exports(varlen) > 0);
  // Sequence 1, query tile 1 (rows 4-7, complete): keys <= 7 visible to row 4, so tiles 0-1 are
  // full.
  const auto fv = varlen.to_flex_block_mask();
  const auto r = static_cast<std::size_t>(varlen.row_index(1, 0, 1));
  CHECK(fv.full_kv_num_blocks[r] == 2);
  CHECK(fv.kv_num_blocks[r] == 1);
}

TEST_CASE("FlexAttention lists and BSR of dense and random masks match the brute force") {
  for (bool causal : {true, false}) {
    CAPTURE(causal);
    MaskShape s = geometry(causal, 16, 77, 93);
    // Causal offsets 16, 46, 3, 1: every residue modulo tile_k, so some key tile ends exactly one
    // key before, on and after the diagonal of its first row.
    s.batch = 4;
    s.seqlens_q = {77, 16, 40, 30};
    s.seqlens_kv = {93, 62, 43, 31};
    CHECK(check_exports(TileMask::dense(s)) > 0);
    CHECK(check_exports(random_mask(s, 0.6)) > 0);
    s.seqlens_q.clear();
    s.seqlens_kv.clear();
    CHECK(check_exports(TileMask::dense(s)) > 0);
    CHECK(check_exports(random_mask(s, 0.5)) > 0);
  }
}

TEST_CASE("exports refuse inconsistent CSR arrays instead of writing out of bounds") {
  TileMask m = by_hand(geometry(false, 4, 10, 13), {{0}, {1}, {2}, {3}, {0}, {1}});
  TileMask bad = m;
  bad.tiles[2] = 4;  // beyond the 4 key tiles
  CHECK_THROWS_AS(bad.to_flex_block_mask(), Error);
  bad = m;
  bad.row_ptr.pop_back();
  CHECK_THROWS_AS(bad.to_flex_block_mask(), Error);
  CHECK_THROWS_AS(bad.to_bsr(), Error);
  bad = m;
  bad.row_ptr[3] = 100;
  CHECK_THROWS_AS(bad.to_flex_block_mask(), Error);
  CHECK_THROWS_AS(bad.to_bsr(), Error);
  bad = by_hand(geometry(false, 4, 10, 13), {{0, 0}, {}, {}, {}, {}, {}});  // repeated id
  CHECK_THROWS_AS(bad.to_flex_block_mask(), Error);
  // tile_q 4 is below MaskShape::kMinTileQ: exported above, but not a mask the library may save.
  const TempDir dir("spattn_test_mask_io_");
  CHECK_THROWS_WITH_AS(save_mask_npz(m, dir.file("small.npz")), doctest::Contains("tile_q"), Error);
}

void check_round_trip(const TileMask& m, const std::string& path) {
  save_mask_npz(m, path);
  const auto arrays = read_npz(path);
  std::vector<std::string> names;
  for (const auto& [name, a] : arrays) names.push_back(name);
  std::vector<std::string> expected = {"batch",    "causal", "mask_heads", "row_ptr", "seqlen_kv",
                                       "seqlen_q", "tile_k", "tile_q",     "tiles"};
  if (!m.shape.seqlens_q.empty()) expected.push_back("seqlens_q");
  if (!m.shape.seqlens_kv.empty()) expected.push_back("seqlens_kv");
  std::sort(expected.begin(), expected.end());
  CHECK(names == expected);
  for (const char* scalar :
       {"batch", "causal", "mask_heads", "seqlen_kv", "seqlen_q", "tile_k", "tile_q"}) {
    CAPTURE(scalar);
    CHECK(arrays.at(scalar).descr == "<i8");
    CHECK(arrays.at(scalar).shape.empty());  // 0-d
  }
  CHECK(arrays.at("tile_q").to_int64_scalar() == m.shape.tile_q);
  CHECK(arrays.at("causal").to_int64_scalar() == (m.shape.causal ? 1 : 0));
  CHECK(arrays.at("row_ptr").descr == "<i8");
  CHECK(arrays.at("row_ptr").shape ==
        std::vector<std::int64_t>{static_cast<std::int64_t>(m.row_ptr.size())});
  CHECK(arrays.at("tiles").descr == "<i4");
  CHECK(arrays.at("tiles").to_vector<std::int32_t>() == m.tiles);

  const TileMask back = load_mask_npz(path);
  CHECK(back.shape == m.shape);
  CHECK(back.row_ptr == m.row_ptr);
  CHECK(back.tiles == m.tiles);
}

TEST_CASE("TileMask .npz round trip: causal, non-causal, variable-length") {
  const TempDir dir("spattn_test_mask_io_");
  const std::string path = dir.file("m.npz");
  // The hand-built geometry above at a tile_q the library accepts.
  MaskShape s = geometry(true, 16, 40, 52);
  check_round_trip(by_hand(s, {{0, 1, 2, 3, 4},
                               {1, 7},
                               {0, 12},  //
                               {},
                               {2, 3, 4, 5, 6, 7, 8},
                               {12}}),
                   path);
  for (bool causal : {true, false}) {
    CAPTURE(causal);
    s = geometry(causal, 16, 70, 90);
    s.batch = 2;
    check_round_trip(random_mask(s, 0.5), path);
    s.seqlens_q = {70, 33};
    s.seqlens_kv = {90, 50};
    check_round_trip(random_mask(s, 0.5), path);
    s.seqlens_q.clear();  // only the key lengths vary
    s.seqlens_kv = {90, 75};
    check_round_trip(random_mask(s, 0.5), path);
    s.seqlens_q = {70, 64};  // only the query lengths vary
    s.seqlens_kv.clear();
    check_round_trip(random_mask(s, 0.5), path);
  }
}

TEST_CASE("TileMask .npz: missing, mistyped or inconsistent arrays are rejected, naming them") {
  const TempDir dir("spattn_test_mask_io_");
  const std::string good = dir.file("good.npz"), bad = dir.file("bad.npz");
  MaskShape s = geometry(true, 16, 40, 52);
  s.batch = 2;
  save_mask_npz(random_mask(s, 0.7), good);
  const auto arrays = read_npz(good);

  for (const char* missing : {"tiles", "row_ptr", "tile_q", "tile_k", "batch", "mask_heads",
                              "seqlen_q", "seqlen_kv", "causal"}) {
    CAPTURE(missing);
    auto partial = arrays;
    partial.erase(missing);
    write_npz(bad, partial);
    CHECK_THROWS_WITH_AS(load_mask_npz(bad),
                         contains("missing array '" + std::string(missing) + "'"), Error);
  }
  auto edit = [&](const std::string& name, NpyArray value, const std::string& message) {
    CAPTURE(name);
    auto changed = arrays;
    changed[name] = std::move(value);
    write_npz(bad, changed);
    CHECK_THROWS_WITH_AS(load_mask_npz(bad), contains(message), Error);
  };
  const auto tiles = arrays.at("tiles").to_vector<std::int32_t>();
  const auto row_ptr = arrays.at("row_ptr").to_vector<std::int64_t>();
  edit("tiles",
       NpyArray::from_vector(std::vector<std::int64_t>(tiles.begin(), tiles.end()),
                             {static_cast<std::int64_t>(tiles.size())}),
       "'tiles'");  // int64 where int32 is stored
  edit("row_ptr", NpyArray::from_vector(row_ptr, {1, static_cast<std::int64_t>(row_ptr.size())}),
       "'row_ptr' must be 1-d");
  edit("tile_k", NpyArray::scalar<std::int64_t>(16), "tiles");  // ids beyond the coarser key grid
  edit("tile_q", NpyArray::scalar<std::int64_t>(4), "tile_q");
  edit("tile_q", NpyArray::scalar(16.0), "'tile_q'");
  edit("causal", NpyArray::scalar<std::int64_t>(2), "causal");
  edit("batch", NpyArray::scalar<std::int64_t>(std::int64_t{1} << 40), "row_ptr");
  edit("mask_heads", NpyArray::scalar<std::int64_t>(-1), "mask_heads");
  edit("seqlen_q", NpyArray::scalar<std::int64_t>(std::int64_t{1} << 62), "seqlen_q");
  edit("seqlens_q", NpyArray::from_vector(std::vector<std::int64_t>{40}, {1}), "seqlens_q");
  edit("seqlens_kv", NpyArray::from_vector(std::vector<std::int64_t>{52, 60}, {2}), "seqlens_kv");
  edit("batch", NpyArray::from_vector(std::vector<std::int64_t>{2, 2}, {2}), "'batch'");

  CHECK_THROWS_WITH_AS(load_mask_npz(dir.file("none.npz")), doctest::Contains("cannot open"),
                       Error);
  write_npy(bad, NpyArray::scalar<std::int64_t>(1));  // a .npy, not an archive
  CHECK_THROWS_AS(load_mask_npz(bad), Error);
}

}  // namespace
}  // namespace spattn::test
