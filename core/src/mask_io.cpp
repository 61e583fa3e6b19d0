// TileMask export (FlexAttention BlockMask lists, FlashInfer BSR) and .npz save/load.
#include <algorithm>
#include <limits>

#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/npy.hpp"

namespace spattn {

TileMask::FlexBlockMask TileMask::to_flex_block_mask() const {
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles();
  FlexBlockMask f;
  f.kv_num_blocks.assign(static_cast<std::size_t>(shape.num_rows()), 0);
  f.full_kv_num_blocks.assign(f.kv_num_blocks.size(), 0);
  f.kv_indices.assign(static_cast<std::size_t>(shape.num_rows() * tk), 0);
  f.full_kv_indices.assign(f.kv_indices.size(), 0);
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::int64_t nq = shape.seqlen_q_of(b), nkv = shape.seqlen_kv_of(b), offset = nkv - nq;
    for (std::int64_t h = 0; h < shape.mask_heads; ++h)
      for (std::int64_t t = 0; t < tq; ++t) {
        const std::int64_t r = row_index(b, h, t);
        const std::int64_t first_row = t * shape.tile_q, end_row = first_row + shape.tile_q;
        for (std::int32_t k : row(b, h, t)) {
          const std::int64_t end_key = (std::int64_t{k} + 1) * shape.tile_k;
          // Full: a complete tile whose every pair is visible (its last key is visible to its first row).
          const bool full = end_row <= nq && end_key <= nkv && (!shape.causal || end_key - 1 <= first_row + offset);
          auto& count = full ? f.full_kv_num_blocks[static_cast<std::size_t>(r)] : f.kv_num_blocks[static_cast<std::size_t>(r)];
          auto& indices = full ? f.full_kv_indices : f.kv_indices;
          indices[static_cast<std::size_t>(r * tk + count)] = k;
          ++count;
        }
      }
  }
  return f;
}

TileMask::Bsr TileMask::to_bsr() const {
  require(tiles.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
          "to_bsr: ", tiles.size(), " tiles do not fit int32 indptr");
  Bsr bsr;
  bsr.indptr.reserve(row_ptr.size());
  for (std::int64_t p : row_ptr) bsr.indptr.push_back(static_cast<std::int32_t>(p));
  bsr.indices = tiles;
  return bsr;
}

void TileMask::save_npz(const std::string& path) const {
  validate();
  std::map<std::string, NpyArray> arrays = {
      {"row_ptr", NpyArray::from_vector(row_ptr, {static_cast<std::int64_t>(row_ptr.size())})},
      {"tiles", NpyArray::from_vector(tiles, {static_cast<std::int64_t>(tiles.size())})},
      {"tile_q", NpyArray::scalar<std::int64_t>(shape.tile_q)},
      {"tile_k", NpyArray::scalar<std::int64_t>(shape.tile_k)},
      {"batch", NpyArray::scalar<std::int64_t>(shape.batch)},
      {"mask_heads", NpyArray::scalar<std::int64_t>(shape.mask_heads)},
      {"seqlen_q", NpyArray::scalar<std::int64_t>(shape.seqlen_q)},
      {"seqlen_kv", NpyArray::scalar<std::int64_t>(shape.seqlen_kv)},
      {"causal", NpyArray::scalar<std::int64_t>(shape.causal ? 1 : 0)},
  };
  if (!shape.seqlens_q.empty()) {
    arrays["seqlens_q"] = NpyArray::from_vector(shape.seqlens_q, {shape.batch});
    arrays["seqlens_kv"] = NpyArray::from_vector(shape.seqlens_kv, {shape.batch});
  }
  write_npz(path, arrays);
}

TileMask TileMask::load_npz(const std::string& path) {
  const auto arrays = read_npz(path);
  auto get = [&](const char* name) -> const NpyArray& {
    const auto it = arrays.find(name);
    require(it != arrays.end(), "mask '", path, "': missing array '", name, "'");
    return it->second;
  };
  auto scalar = [&](const char* name) { return get(name).to_int64_scalar(); };
  TileMask m;
  const std::int64_t tile_q = scalar("tile_q"), tile_k = scalar("tile_k");
  require(tile_q > 0 && tile_q <= MaskShape::kMaxTileQ && tile_k > 0 && tile_k <= MaskShape::kMaxTileK, "mask '", path,
          "': tile sizes ", tile_q, "×", tile_k, " out of range");
  m.shape.tile_q = static_cast<std::int32_t>(tile_q);
  m.shape.tile_k = static_cast<std::int32_t>(tile_k);
  m.shape.batch = scalar("batch");
  m.shape.mask_heads = scalar("mask_heads");
  m.shape.seqlen_q = scalar("seqlen_q");
  m.shape.seqlen_kv = scalar("seqlen_kv");
  m.shape.causal = scalar("causal") != 0;
  const std::int64_t kLimit = std::int64_t{1} << 31;
  for (std::int64_t x : {m.shape.batch, m.shape.mask_heads, m.shape.seqlen_q, m.shape.seqlen_kv})
    require(x >= 1 && x < kLimit, "mask '", path, "': shape value ", x, " out of range");
  if (arrays.count("seqlens_q")) {
    m.shape.seqlens_q = get("seqlens_q").to_vector<std::int64_t>();
    m.shape.seqlens_kv = get("seqlens_kv").to_vector<std::int64_t>();
  }
  m.row_ptr = get("row_ptr").to_vector<std::int64_t>();
  m.tiles = get("tiles").to_vector<std::int32_t>();
  require(!m.row_ptr.empty(), "mask '", path, "': empty row_ptr");
  try {
    m.validate();
  } catch (const Error& e) {
    fail("mask '", path, "': ", e.what());
  }
  return m;
}

}  // namespace spattn
