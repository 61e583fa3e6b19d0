// TileMask export and files: FlexAttention full/partial split and BSR against brute force; .npz round trip.
#include <doctest/doctest.h>

#include <filesystem>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/npy.hpp"

namespace spattn::test {
namespace {

MaskShape small_shape(bool causal) {
  MaskShape s;
  s.tile_q = 16;
  s.tile_k = 4;
  s.batch = 2;
  s.mask_heads = 2;
  s.seqlen_q = 37;
  s.seqlen_kv = 45;
  s.causal = causal;
  s.seqlens_q = {37, 20};
  s.seqlens_kv = {45, 30};
  return s;
}

TEST_CASE("FlexAttention lists: a tile is full exactly when every pair in it is visible") {
  for (bool causal : {true, false}) {
    const MaskShape s = small_shape(causal);
    const TileMask m = random_mask(s, 0.6);
    const auto f = m.to_flex_block_mask();
    const std::int64_t tk = s.num_k_tiles();
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.mask_heads; ++h)
        for (std::int64_t t = 0; t < s.num_q_tiles(); ++t) {
          const std::int64_t r = m.row_index(b, h, t);
          std::vector<std::int32_t> full, partial;
          for (std::int32_t k : m.row(b, h, t)) {
            bool all = true;  // brute force over the tile's nominal rows and keys
            for (std::int64_t i = t * s.tile_q; i < (t + 1) * s.tile_q; ++i)
              for (std::int64_t j = std::int64_t{k} * s.tile_k; j < (k + 1) * std::int64_t{s.tile_k}; ++j)
                all = all && i < s.seqlen_q_of(b) && j < s.seqlen_kv_of(b) &&
                      (!causal || j <= i + s.seqlen_kv_of(b) - s.seqlen_q_of(b));
            (all ? full : partial).push_back(k);
          }
          REQUIRE(f.full_kv_num_blocks[static_cast<std::size_t>(r)] == static_cast<std::int32_t>(full.size()));
          REQUIRE(f.kv_num_blocks[static_cast<std::size_t>(r)] == static_cast<std::int32_t>(partial.size()));
          for (std::size_t i = 0; i < full.size(); ++i)
            REQUIRE(f.full_kv_indices[static_cast<std::size_t>(r * tk) + i] == full[i]);
          for (std::size_t i = 0; i < partial.size(); ++i)
            REQUIRE(f.kv_indices[static_cast<std::size_t>(r * tk) + i] == partial[i]);
          for (std::size_t i = partial.size(); i < static_cast<std::size_t>(tk); ++i)
            REQUIRE(f.kv_indices[static_cast<std::size_t>(r * tk) + i] == 0);  // padding
        }
    const auto bsr = m.to_bsr();
    REQUIRE(bsr.indptr.size() == m.row_ptr.size());
    for (std::size_t i = 0; i < m.row_ptr.size(); ++i) CHECK(bsr.indptr[i] == m.row_ptr[i]);
    CHECK(bsr.indices == m.tiles);
  }
}

TEST_CASE("TileMask .npz round trip; incomplete or inconsistent files are rejected") {
  const auto dir = std::filesystem::temp_directory_path() / ("spattn_mask_" + std::to_string(test_seed()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.npz").string();
  for (bool causal : {true, false}) {
    const TileMask m = random_mask(small_shape(causal), 0.5);
    m.save_npz(path);
    const TileMask back = TileMask::load_npz(path);
    CHECK(back.shape == m.shape);
    CHECK(back.row_ptr == m.row_ptr);
    CHECK(back.tiles == m.tiles);
  }
  auto arrays = read_npz(path);
  const std::string name[] = {"tiles", "tile_q", "row_ptr", "causal"};
  for (const std::string& missing : name) {
    auto partial = arrays;
    partial.erase(missing);
    write_npz((dir / "partial.npz").string(), partial);
    CHECK_THROWS_WITH_AS(TileMask::load_npz((dir / "partial.npz").string()), doctest::Contains(missing.c_str()), Error);
  }
  auto wrong = arrays;
  wrong["tile_k"] = NpyArray::scalar<std::int64_t>(16);  // ids no longer fit the key-tile grid
  write_npz((dir / "wrong.npz").string(), wrong);
  CHECK_THROWS_AS(TileMask::load_npz((dir / "wrong.npz").string()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spattn::test
