// TileMask export (FlexAttention BlockMask lists, FlashInfer BSR). Mask files: io/src/mask_file.cpp.
#include <limits>

#include "spattn/checked.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"

namespace spattn {
namespace {

/// What the exports index by. Lighter than validate(): exports of hand-built masks with tiles
/// outside MaskShape's limits still work, but no inconsistent mask can make them write out of
/// bounds.
void check_csr(const TileMask& m, const char* what) {
  const MaskShape& s = m.shape;
  require(s.tile_q >= 1 && s.tile_k >= 1 && s.batch >= 1 && s.mask_heads >= 1 && s.seqlen_q >= 0 && s.seqlen_kv >= 0,
          what, ": tiles, batch and mask_heads must be >= 1 and lengths >= 0");
  // The dense [rows, key tiles] lists of the FlexAttention export must be addressable and allocatable.
  checked_bytes(std::string(what) + " [batch, mask_heads, query tiles, key tiles]",
                {s.batch, s.mask_heads, s.num_q_tiles(), s.num_k_tiles()}, 4);
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

}  // namespace spattn
