// TileMask export (FlexAttention BlockMask lists, FlashInfer BSR) and .npz save/load.
#include <limits>
#include <map>

#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/npy.hpp"

namespace spattn {
namespace {

/// What the exports index by. Lighter than validate(): exports of hand-built masks with tiles
/// outside MaskShape's limits still work, but no inconsistent mask can make them write out of
/// bounds.
void check_csr(const TileMask& m, const char* what) {
  for (const auto* lens : {&m.shape.seqlens_q, &m.shape.seqlens_kv})
    require(lens->empty() || static_cast<std::int64_t>(lens->size()) == m.shape.batch, what,
            ": per-sequence lengths for ", lens->size(), " sequences, batch is ", m.shape.batch);
  const std::int64_t rows = m.shape.num_rows();
  require(rows >= 0 && static_cast<std::int64_t>(m.row_ptr.size()) == rows + 1, what,
          ": row_ptr has ", m.row_ptr.size(), " entries, the shape needs ", rows + 1);
  require(m.row_ptr[0] == 0 && m.row_ptr[rows] == static_cast<std::int64_t>(m.tiles.size()), what,
          ": row_ptr does not span the ", m.tiles.size(), " tiles");
  for (std::int64_t r = 0; r < rows; ++r)
    require(m.row_ptr[r] <= m.row_ptr[r + 1], what, ": row_ptr decreases at row ", r);
}

}  // namespace

TileMask::FlexBlockMask TileMask::to_flex_block_mask() const {
  check_csr(*this, "to_flex_block_mask");
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles();
  const auto rows = static_cast<std::size_t>(shape.num_rows());
  FlexBlockMask f;
  f.kv_num_blocks.assign(rows, 0);
  f.full_kv_num_blocks.assign(rows, 0);
  f.kv_indices.assign(rows * static_cast<std::size_t>(tk), 0);
  f.full_kv_indices.assign(f.kv_indices.size(), 0);
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::int64_t nq = shape.seqlen_q_of(b), nkv = shape.seqlen_kv_of(b), offset = nkv - nq;
    for (std::int64_t h = 0; h < shape.mask_heads; ++h) {
      for (std::int64_t t = 0; t < tq; ++t) {
        const auto r = static_cast<std::size_t>(row_index(b, h, t));
        const std::int64_t first_row = t * shape.tile_q, end_row = first_row + shape.tile_q;
        std::int32_t previous = -1;
        for (std::int32_t k : row(b, h, t)) {
          require(k > previous && k < tk, "to_flex_block_mask: row ", r, " lists key tile ", k,
                  " (ids must ascend within [0, ", tk, "))");
          previous = k;
          const std::int64_t end_key = (std::int64_t{k} + 1) * shape.tile_k;
          // Full blocks skip both mask_mod and FlexAttention's bounds handling, so a full tile must
          // be complete inside this sequence and, if causal, its last key must be visible to its
          // first row (then every row sees every key of it).
          const bool full = end_row <= nq && end_key <= nkv &&
                            (!shape.causal || end_key - 1 <= first_row + offset);
          std::int32_t& count = full ? f.full_kv_num_blocks[r] : f.kv_num_blocks[r];
          std::vector<std::int32_t>& indices = full ? f.full_kv_indices : f.kv_indices;
          indices[r * static_cast<std::size_t>(tk) + static_cast<std::size_t>(count)] = k;
          ++count;
        }
      }
    }
  }
  return f;
}

TileMask::Bsr TileMask::to_bsr() const {
  check_csr(*this, "to_bsr");
  require(tiles.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
          "to_bsr: ", tiles.size(), " tiles overflow FlashInfer's int32 indptr");
  Bsr bsr;
  bsr.indptr.reserve(row_ptr.size());
  // Fits: check_csr bounds every offset by tiles.size().
  for (std::int64_t p : row_ptr) bsr.indptr.push_back(static_cast<std::int32_t>(p));
  bsr.indices = tiles;
  return bsr;
}

void TileMask::save_npz(const std::string& path) const {
  try {
    validate();
  } catch (const Error& e) {
    fail("mask '", path, "': not saved: ", e.what());
  }
  const auto vector_of = [](const auto& v) {
    return NpyArray::from_vector(v, {static_cast<std::int64_t>(v.size())});
  };
  std::map<std::string, NpyArray> arrays = {
      {"row_ptr", vector_of(row_ptr)},
      {"tiles", vector_of(tiles)},
      {"tile_q", NpyArray::scalar<std::int64_t>(shape.tile_q)},
      {"tile_k", NpyArray::scalar<std::int64_t>(shape.tile_k)},
      {"batch", NpyArray::scalar<std::int64_t>(shape.batch)},
      {"mask_heads", NpyArray::scalar<std::int64_t>(shape.mask_heads)},
      {"seqlen_q", NpyArray::scalar<std::int64_t>(shape.seqlen_q)},
      {"seqlen_kv", NpyArray::scalar<std::int64_t>(shape.seqlen_kv)},
      {"causal", NpyArray::scalar<std::int64_t>(shape.causal ? 1 : 0)},
  };
  // Each is optional on its own: a batch may vary only its query or only its key lengths.
  if (!shape.seqlens_q.empty()) arrays.emplace("seqlens_q", vector_of(shape.seqlens_q));
  if (!shape.seqlens_kv.empty()) arrays.emplace("seqlens_kv", vector_of(shape.seqlens_kv));
  write_npz(path, arrays);
}

TileMask TileMask::load_npz(const std::string& path) {
  const std::map<std::string, NpyArray> arrays = read_npz(path);
  const std::string what = "mask '" + path + "'";
  const auto get = [&](const char* name) -> const NpyArray& {
    const auto it = arrays.find(name);
    require(it != arrays.end(), what, ": missing array '", name, "'");
    return it->second;
  };
  const auto scalar = [&](const char* name) {
    try {
      return get(name).to_int64_scalar();
    } catch (const Error& e) {
      fail(what, ": array '", name, "': ", e.what());
    }
  };
  const auto vector = [&]<class T>(const char* name, T) {
    const NpyArray& a = get(name);
    require(a.shape.size() == 1, what, ": array '", name, "' must be 1-d, got ", a.shape.size(),
            " dimensions");
    try {
      return a.to_vector<T>();
    } catch (const Error& e) {
      fail(what, ": array '", name, "': ", e.what());
    }
  };

  // Range checks before narrowing, and so that num_rows() below cannot overflow.
  const std::int64_t tile_q = scalar("tile_q"), tile_k = scalar("tile_k");
  require(tile_q >= MaskShape::kMinTileQ && tile_q <= MaskShape::kMaxTileQ, what, ": tile_q ",
          tile_q, " outside [", MaskShape::kMinTileQ, ", ", MaskShape::kMaxTileQ, "]");
  require(tile_k >= MaskShape::kMinTileK && tile_k <= MaskShape::kMaxTileK, what, ": tile_k ",
          tile_k, " outside [", MaskShape::kMinTileK, ", ", MaskShape::kMaxTileK, "]");
  const std::int64_t causal = scalar("causal");
  require(causal == 0 || causal == 1, what, ": causal must be 0 or 1, got ", causal);
  TileMask m;
  m.shape.tile_q = static_cast<std::int32_t>(tile_q);
  m.shape.tile_k = static_cast<std::int32_t>(tile_k);
  m.shape.causal = causal == 1;
  constexpr std::int64_t kLimit = std::int64_t{1} << 40;
  for (auto [name, field] :
       {std::pair{"batch", &m.shape.batch}, std::pair{"mask_heads", &m.shape.mask_heads},
        std::pair{"seqlen_q", &m.shape.seqlen_q}, std::pair{"seqlen_kv", &m.shape.seqlen_kv}}) {
    *field = scalar(name);
    require(*field >= 1 && *field <= kLimit, what, ": ", name, " ", *field, " outside [1, 2^40]");
  }
  if (arrays.count("seqlens_q") != 0) m.shape.seqlens_q = vector("seqlens_q", std::int64_t{});
  if (arrays.count("seqlens_kv") != 0) m.shape.seqlens_kv = vector("seqlens_kv", std::int64_t{});
  m.row_ptr = vector("row_ptr", std::int64_t{});
  m.tiles = vector("tiles", std::int32_t{});
  // batch x heads x query tiles must match the row_ptr actually present before anything indexes by
  // it.
  const std::int64_t per_sequence = m.shape.num_q_tiles();
  const std::int64_t rows_present = static_cast<std::int64_t>(m.row_ptr.size()) - 1;
  require(rows_present >= 0 && m.shape.batch <= rows_present / m.shape.mask_heads / per_sequence &&
              m.shape.batch * m.shape.mask_heads * per_sequence == rows_present,
          what, ": row_ptr has ", m.row_ptr.size(), " entries, batch ", m.shape.batch,
          " x mask_heads ", m.shape.mask_heads, " x query tiles ", per_sequence, " + 1 expected");
  try {
    m.validate();
  } catch (const Error& e) {
    fail(what, ": ", e.what());
  }
  return m;
}

}  // namespace spattn
