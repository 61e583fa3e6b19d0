// TileMask files: .npz save/load (the format is in mask_file.hpp).
#include "spattn/mask_file.hpp"

#include <map>
#include <utility>

#include "spattn/error.hpp"
#include "spattn/npy.hpp"

namespace spattn {

void save_mask_npz(const TileMask& mask, const std::string& path) {
  try {
    mask.validate();
  } catch (const Error& e) {
    fail("mask '", path, "': not saved: ", e.what());
  }
  const auto vector_of = [](const auto& v) {
    return NpyArray::from_vector(v, {static_cast<std::int64_t>(v.size())});
  };
  std::map<std::string, NpyArray> arrays = {
      {"row_ptr", vector_of(mask.row_ptr)},
      {"tiles", vector_of(mask.tiles)},
      {"tile_q", NpyArray::scalar<std::int64_t>(mask.shape.tile_q)},
      {"tile_k", NpyArray::scalar<std::int64_t>(mask.shape.tile_k)},
      {"batch", NpyArray::scalar<std::int64_t>(mask.shape.batch)},
      {"mask_heads", NpyArray::scalar<std::int64_t>(mask.shape.mask_heads)},
      {"seqlen_q", NpyArray::scalar<std::int64_t>(mask.shape.seqlen_q)},
      {"seqlen_kv", NpyArray::scalar<std::int64_t>(mask.shape.seqlen_kv)},
      {"causal", NpyArray::scalar<std::int64_t>(mask.shape.causal ? 1 : 0)},
  };
  // Each is optional on its own: a batch may vary only its query or only its key lengths.
  if (!mask.shape.seqlens_q.empty()) arrays.emplace("seqlens_q", vector_of(mask.shape.seqlens_q));
  if (!mask.shape.seqlens_kv.empty()) arrays.emplace("seqlens_kv", vector_of(mask.shape.seqlens_kv));
  write_npz(path, arrays);
}

TileMask load_mask_npz(const std::string& path) {
  return parse_mask_npz(read_file(path), "mask '" + path + "'");
}

TileMask parse_mask_npz(const std::vector<std::uint8_t>& bytes, const std::string& what) {
  const std::map<std::string, NpyArray> arrays = parse_npz(bytes, what);
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
