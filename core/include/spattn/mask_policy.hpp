// The executor's mask semantics, one definition for every backend (CUTLASS's fusion-policy pattern: the
// reference executor and each GPU kernel call these same inline functions, so "which keys a row sees" and
// "when is a tile skipped" cannot drift apart between them).
//
// For query row i of a sequence with nq queries and nkv keys (causal alignment bottom-right, offset = nkv − nq):
//   row i sees key j  ⇔  0 <= j < nkv  and, if causal, j <= i + offset           (row_sees)
//   the keys row i may see before sparsity are [0, row_key_end(i))
// A block of query rows [first, last] visits the kept tiles' keys below block_key_end(last); inside it each
// row masks the keys it does not see. The p-th key of a row's kept list (tiles concatenated in ascending
// order, tile_k keys each) is key_at(p), −1 past the list or the block's key end. A row that sees no key of
// the mask outputs zeros (and an LSE of −∞): empty_row(l) on the softmax denominator.
//
// SpargeAttn's PV-skip (research/spargeattn.md §5): the tiles a block visits (those holding a key below its
// key end) are decided in ascending order; the first pv_skippable_tiles(visited, exempt) of them may be skipped.
// A vote group skips a tile when every row in it votes pv_row_votes_skip: (tile max − running max) < −threshold
// in base-2 units, with the running max over the tiles before it that were not skipped. A NaN or +∞ difference
// votes "compute". Rows past the end of a sequence take no part in the vote (they agree).
#pragma once

#include <cstdint>
#include <type_traits>

#include "spattn/config.hpp"

namespace spattn::mask_policy {

/// First key row i may NOT see (exclusive end of its visible prefix), clamped to [0, nkv].
template <class I>
SPATTN_INLINE I row_key_end(I i, I nq, I nkv, bool causal) {
  if (!causal) return nkv;
  const I end = i + (nkv - nq) + 1;
  return end < 0 ? I(0) : (end < nkv ? end : nkv);
}

/// The keys row i sees, [0, row_key_end(i)), computed once per row: sees(j) is one unsigned comparison (j < 0,
/// "no key", wraps to the largest value and is never seen). What every executor tests per key.
template <class I>
struct RowKeys {
  I end = 0;  ///< default: sees no key
  RowKeys() = default;
  SPATTN_HD RowKeys(I i, I nq, I nkv, bool causal) : end(row_key_end(i, nq, nkv, causal)) {}
  SPATTN_HD bool sees(I j) const {
    using U = std::make_unsigned_t<I>;
    return static_cast<U>(j) < static_cast<U>(end);
  }
};

/// Whether row i sees key j: 0 <= j < nkv and, if causal, j <= i + (nkv − nq).
template <class I>
SPATTN_INLINE bool row_sees(I i, I j, I nq, I nkv, bool causal) {
  return RowKeys<I>(i, nq, nkv, causal).sees(j);
}

/// Key end of a block of rows whose last row is `last`: no row of the block sees a key at or past it.
template <class I>
SPATTN_INLINE I block_key_end(I last, I nq, I nkv, bool causal) {
  return row_key_end(last, nq, nkv, causal);
}

/// Key tiles query tile t (rows [t·tile_q, min((t+1)·tile_q, nq))) may list: those holding a key before the block
/// key end of its last row. 0 for a tile past the end of the sequence.
template <class I>
SPATTN_INLINE I reachable_tiles(I t, I tile_q, I tile_k, I nq, I nkv, bool causal) {
  const I first = t * tile_q;
  if (first >= nq) return 0;
  const I last = (first + tile_q < nq ? first + tile_q : nq) - 1;
  return (block_key_end(last, nq, nkv, causal) + tile_k - 1) / tile_k;
}

/// The executors' work order inside one (batch, mask head): longest first — work item a (kept tiles ka) runs
/// before b when it keeps more tiles, ties by lower index. Its rank, #{b : runs_before(b, a)}, is its place.
template <class I>
SPATTN_INLINE bool runs_before(I ka, I a, I kb, I b) {
  return ka > kb || (ka == kb && a < b);
}

/// Keys [tile_begin, tile_end) of key tile t, clipped to `limit` (tile_end may be <= tile_begin: no key).
template <class I>
SPATTN_INLINE I tile_begin(I t, I tile_k) {
  return t * tile_k;
}
template <class I>
SPATTN_INLINE I tile_end(I t, I tile_k, I limit) {
  const I end = (t + 1) * tile_k;
  return end < limit ? end : limit;
}

/// Key at position p of a row's concatenated kept-tile list (count tiles of tile_k keys), or −1 when p is
/// past the list or the key is at or past `limit`.
template <class I>
SPATTN_INLINE I key_at(const std::int32_t* tiles, I count, I tile_k, I p, I limit) {
  const I slot = p / tile_k;
  if (slot >= count) return I(-1);
  const I j = static_cast<I>(tiles[slot]) * tile_k + (p - slot * tile_k);
  return j < limit ? j : I(-1);
}

/// Number of a row's kept tiles that hold at least one key below `limit` (tiles ascend): the tiles visited.
template <class I>
SPATTN_INLINE I visited_tiles(const std::int32_t* tiles, I count, I tile_k, I limit) {
  I lo = 0, hi = count;  // first tile whose first key is at or past limit
  while (lo < hi) {
    const I mid = (lo + hi) / 2;
    if (static_cast<I>(tiles[mid]) * tile_k < limit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/// A row with softmax denominator l saw no key: it outputs zeros and an LSE of −∞.
SPATTN_INLINE bool empty_row(float l) { return !(l > 0.0f); }

/// PV-skip: how many of the `visited` tiles (in order) may be skipped; the last `exempt` never are.
SPATTN_INLINE int pv_skippable_tiles(int visited, int exempt) { return visited - exempt; }

/// PV-skip: one row's vote to skip a tile, from the tile's max scaled score and the row's running max (both
/// base 2). NaN or +inf differences vote to compute.
SPATTN_INLINE bool pv_row_votes_skip(float tile_max, float running_max, float threshold) {
  return tile_max - running_max < -threshold;
}

}  // namespace spattn::mask_policy
