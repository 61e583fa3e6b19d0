// TileMask files (host only; spattn::io). The format is NumPy .npz: arrays row_ptr (int64), tiles (int32)
// and int64 scalars tile_q, tile_k, batch, mask_heads, seqlen_q, seqlen_kv, causal (plus seqlens_q /
// seqlens_kv for variable-length masks). np.load() reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spattn/mask.hpp"

namespace spattn {

/// Validates the mask first: an invalid one is not written. Throws spattn::Error naming the file.
void save_mask_npz(const TileMask& mask, const std::string& path);
/// Every array is checked (presence, dtype, rank, ranges) and the result validated; throws spattn::Error
/// naming the file and the array.
TileMask load_mask_npz(const std::string& path);
/// load_mask_npz() of an .npz image in memory; `what` names it in messages.
TileMask parse_mask_npz(const std::vector<std::uint8_t>& bytes, const std::string& what);

}  // namespace spattn
