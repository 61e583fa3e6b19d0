// TileMask: which key tiles each query tile attends to — one format for block, stripe and fine-grained
// sparsity (DESIGN.md §3).
//
// For each (batch b, mask head h, query tile t) the CSR row row(b, h, t) lists kept key-tile ids, ascending
// and unique. Query tile t covers rows [t·tile_q, (t+1)·tile_q), key tile k covers keys
// [k·tile_k, (k+1)·tile_k), both clipped to the sequence. mask_heads is Hq (one mask per query head) or
// Hkv (one mask per KV head, shared by its query heads).
//
// Causality is not in the mask: the executor applies the causal rule inside every tile. Builders never
// list a tile that lies entirely in the future of its query tile, or beyond a sequence's end.
//
// Executor semantics: query row i of tile t attends to
//   { j : j / tile_k ∈ row(b, h, t) } ∩ { j <= i + Nkv_b - Nq_b if causal } ∩ [0, Nkv_b);
// a row whose set is empty outputs zeros.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spattn/checked.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// The geometry of a mask, without its contents.
struct MaskShape {
  std::int32_t tile_q = 128;
  std::int32_t tile_k = 128;
  std::int64_t batch = 1;
  std::int64_t mask_heads = 1;
  std::int64_t seqlen_q = 0;   ///< maximum over the batch
  std::int64_t seqlen_kv = 0;  ///< maximum over the batch
  bool causal = false;
  std::vector<std::int64_t> seqlens_q;   ///< per sequence (variable-length batch), or empty: all seqlen_q
  std::vector<std::int64_t> seqlens_kv;  ///< per sequence, or empty: all seqlen_kv

  static constexpr std::int32_t kMinTileQ = 16, kMaxTileQ = 2048;
  static constexpr std::int32_t kMinTileK = 1, kMaxTileK = 128;

  /// The shape of a mask for `problem`, one mask per query head (or per KV head).
  static MaskShape of(const Problem& problem, std::int32_t tile_q, std::int32_t tile_k,
                      bool per_kv_head = false);

  std::int64_t num_q_tiles() const { return ceil_div(seqlen_q, tile_q); }
  std::int64_t num_k_tiles() const { return ceil_div(seqlen_kv, tile_k); }
  std::int64_t num_rows() const { return batch * mask_heads * num_q_tiles(); }
  std::int64_t seqlen_q_of(std::int64_t b) const { return seqlens_q.empty() ? seqlen_q : seqlens_q[b]; }
  std::int64_t seqlen_kv_of(std::int64_t b) const { return seqlens_kv.empty() ? seqlen_kv : seqlens_kv[b]; }
  /// Number of key tiles that query tile t of sequence b may list: tiles that hold a key inside the
  /// sequence and, if causal, at or before the tile's last row's diagonal. 0 for a tile past the end.
  std::int64_t reachable_k_tiles(std::int64_t b, std::int64_t t) const;
  /// Throws spattn::Error on tile sizes out of range, inconsistent lengths, or a mask that could not be held:
  /// every rows × key tiles array (a dense mask, a bitmap) at most kMaxAllocationBytes in int32.
  void validate() const;
  bool operator==(const MaskShape&) const = default;
};

class TileMask {
 public:
  MaskShape shape;
  std::vector<std::int64_t> row_ptr;  ///< num_rows() + 1 offsets into tiles
  std::vector<std::int32_t> tiles;    ///< key-tile ids, ascending and unique within a row

  std::int64_t row_index(std::int64_t b, std::int64_t h, std::int64_t t) const {
    return (b * shape.mask_heads + h) * shape.num_q_tiles() + t;
  }
  std::span<const std::int32_t> row(std::int64_t b, std::int64_t h, std::int64_t t) const {
    const std::int64_t r = row_index(b, h, t);
    return {tiles.data() + row_ptr[r], static_cast<std::size_t>(row_ptr[r + 1] - row_ptr[r])};
  }
  /// The mask head that query head hq of a problem with heads_q query heads reads.
  std::int64_t mask_head_of(std::int64_t hq, std::int64_t heads_q) const {
    return shape.mask_heads == heads_q ? hq : hq / (heads_q / shape.mask_heads);
  }

  /// Throws spattn::Error unless the CSR arrays are consistent with the shape: sizes, ascending unique
  /// ids, no tile beyond the sequence or (causal) entirely in the future.
  void validate() const;
  /// validate() plus agreement with the problem: lengths, batch, causality, mask heads ∈ {Hq, Hkv}.
  void validate_for(const Problem& problem) const;

  // ---- builders ----
  /// Every reachable tile (all tiles; causal: up to the diagonal). As an executor mask this is dense attention.
  static TileMask dense(const MaskShape& shape);
  /// From a dense bitmap [B][Hm][Tq][Tk] (1 = kept); unreachable tiles are dropped.
  static TileMask from_bitmap(const MaskShape& shape, const std::vector<std::uint8_t>& bitmap);
  /// From per-row kept lists, in row_index order; each list is sorted, deduplicated and clipped to the
  /// reachable tiles.
  static TileMask from_rows(const MaskShape& shape, std::vector<std::vector<std::int32_t>> rows);

  // ---- conversions ----
  std::vector<std::uint8_t> to_bitmap() const;
  /// Coarser tiles: tile_q·fq, tile_k·fk; a coarse tile is kept when any of its fine tiles is.
  TileMask coarsen(std::int32_t fq, std::int32_t fk) const;
  /// Finer tiles: tile_q/fq, tile_k/fk (exact divisors); each fine tile inherits its coarse tile (BFLA's
  /// block -> tile expansion), clipped to what is reachable at the finer grid.
  TileMask expand(std::int32_t fq, std::int32_t fk) const;
  /// One mask per KV head: the union over the heads_q / heads_kv query heads that share it.
  TileMask union_over_group(std::int64_t heads_q, std::int64_t heads_kv) const;

  // ---- statistics ----
  struct Stats {
    double density = 0.0;       ///< kept tiles / reachable tiles (the FlexAttention "block density")
    double pair_density = 0.0;  ///< attended (query, key) pairs / causally visible pairs
    std::int64_t kept_tiles = 0;
    std::int64_t reachable_tiles = 0;
    std::int64_t min_per_row = 0, max_per_row = 0;  ///< kept tiles per mask row (non-empty query tiles)
    double mean_per_row = 0.0;
    std::int64_t empty_rows = 0;  ///< query tiles (inside their sequence) that keep no tile
    std::int64_t bytes = 0;       ///< storage of row_ptr + tiles
  };
  Stats stats() const;
  /// Kept tiles summed over the `heads_q` query heads that read the rows (each query tile inside its sequence):
  /// what an executor visits, AttendStats::visited_tiles.
  std::int64_t visited_tiles(std::int64_t heads_q) const;

  // ---- export (mask_export.cpp; mask files are in io/: spattn/mask_file.hpp) ----
  /// PyTorch FlexAttention BlockMask lists, [B, Hm, Tq] counts and [B, Hm, Tq, Tk] indices (padded with 0):
  /// "full" tiles need no mask_mod (every pair inside them is visible), "partial" tiles do.
  struct FlexBlockMask {
    std::vector<std::int32_t> kv_num_blocks, kv_indices;
    std::vector<std::int32_t> full_kv_num_blocks, full_kv_indices;
  };
  FlexBlockMask to_flex_block_mask() const;
  /// FlashInfer block-sparse row format over all (b, h, t) rows: indptr (num_rows + 1), indices.
  struct Bsr {
    std::vector<std::int32_t> indptr, indices;
  };
  Bsr to_bsr() const;
};

}  // namespace spattn
