// What both executor kernels (executor.hpp's generic one, flash_tile.hpp's register-tiled one) take, and the row
// block a team works on: its query rows, its kept key list (mask_policy) and where its softmax states live.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "kernel_args.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::kokkos::detail {

/// The executor's inputs in the execution space (Backend::attend's tensors, options and mask).
struct AttendArgs {
  DeviceShape s;
  DeviceTensor q, k, v, o;
  float* lse = nullptr;                  ///< [B, Hq, max Nq] natural-log LSE, or null
  const SoftmaxState* resume = nullptr;  ///< AttendOptions::resume: rows start from (m, l) and l·O (same indexing)
  SoftmaxState* state_out = nullptr;     ///< AttendOptions::state_out: each row's final (m, l)
  const std::int64_t* row_ptr = nullptr;
  const std::int32_t* tiles = nullptr;
  std::int64_t mask_heads = 1, q_tiles = 0, blocks_per_tile = 1;
  std::int32_t tile_q = 128, tile_k = 128;
};

/// The rows [r0, r0 + rows) of query tile t of head h of sequence b that one team computes, and the keys they visit:
/// positions [0, positions) of the kept-tile list (mask_policy::key_at over kept[0 … count), below `limit`).
struct RowBlock {
  std::int64_t b = 0, h = 0, hkv = 0, t = 0, nq = 0, nkv = 0, r0 = 0;
  int rows = 0;  ///< 0: the block lies past the end of its sequence (nothing to do)
  const std::int32_t* kept = nullptr;
  std::int64_t count = 0, limit = 0, positions = 0;
  std::int64_t state_row0 = 0;  ///< index of row r0 in lse / resume / state_out

  /// League index -> (b, hq, query tile, row block of the tile), `rows_per_block` rows a team. longest_first: the
  /// query tiles of a head in descending order (the longest causal rows start first, the short ones fill the tail).
  KOKKOS_INLINE_FUNCTION RowBlock(const AttendArgs& a, std::int64_t league_rank, int rows_per_block, bool longest_first) {
    std::int64_t w = league_rank;
    const std::int64_t blk = w % a.blocks_per_tile;
    w /= a.blocks_per_tile;
    t = longest_first ? a.q_tiles - 1 - w % a.q_tiles : w % a.q_tiles;
    w /= a.q_tiles;
    h = w % a.s.heads_q;
    b = w / a.s.heads_q;
    hkv = h / a.s.group();
    nq = a.s.nq(b);
    nkv = a.s.nkv(b);
    const std::int64_t tile_end = (t + 1) * a.tile_q < nq ? (t + 1) * a.tile_q : nq;
    r0 = t * a.tile_q + blk * rows_per_block;
    if (r0 >= tile_end) return;
    const std::int64_t r1 = r0 + rows_per_block < tile_end ? r0 + rows_per_block : tile_end;
    rows = static_cast<int>(r1 - r0);
    const std::int64_t mh = a.mask_heads == a.s.heads_q ? h : h / (a.s.heads_q / a.mask_heads);
    const std::int64_t mrow = (b * a.mask_heads + mh) * a.q_tiles + t;
    kept = a.tiles + a.row_ptr[mrow];
    count = a.row_ptr[mrow + 1] - a.row_ptr[mrow];
    limit = mask_policy::block_key_end(r1 - 1, nq, nkv, a.s.causal);
    positions = mask_policy::visited_tiles<std::int64_t>(kept, count, a.tile_k, limit) * a.tile_k;
    state_row0 = (b * a.s.heads_q + h) * a.s.seqlen_q + r0;
  }

  /// Key at list position p (−1: none; mask_policy::key_at).
  KOKKOS_INLINE_FUNCTION std::int64_t key(const AttendArgs& a, std::int64_t p) const {
    return mask_policy::key_at<std::int64_t>(kept, count, a.tile_k, p, limit);
  }
  /// Which keys row r of the block sees (none for rows past the block).
  KOKKOS_INLINE_FUNCTION mask_policy::RowKeys<std::int64_t> row_keys(const AttendArgs& a, std::int64_t r) const {
    return r < rows ? mask_policy::RowKeys<std::int64_t>(r0 + r, nq, nkv, a.s.causal) : mask_policy::RowKeys<std::int64_t>();
  }
  /// Whether row r starts from AttendOptions::resume (a row whose l is 0 starts empty and its O is not read).
  KOKKOS_INLINE_FUNCTION bool resumed(const AttendArgs& a, std::int64_t r) const {
    return a.resume != nullptr && r < rows && a.resume[state_row0 + r].l != 0.0f;
  }
  /// Element offset of query row r in a query-shaped tensor (Q, O).
  KOKKOS_INLINE_FUNCTION std::int64_t q_row(const AttendArgs& a, const DeviceTensor& x, std::int64_t r) const {
    return a.s.row(x, true, b, h, r0 + r);
  }
  /// Element offset of key row j in a key-shaped tensor (K, V).
  KOKKOS_INLINE_FUNCTION std::int64_t kv_row(const AttendArgs& a, const DeviceTensor& x, std::int64_t j) const {
    return a.s.row(x, false, b, hkv, j);
  }
};

/// The end of a team's work: rows' final states to LSE / state_out, their empty rows counted (mask_policy::empty_row)
/// and added to the league's sum. state_of(r) gives row r's final state (in team scratch, written before a barrier).
template <class Member, class StateOf>
KOKKOS_INLINE_FUNCTION void finish_rows(const Member& team, const AttendArgs& a, const RowBlock& blk, StateOf state_of,
                                        std::int64_t pv_skipped_here, std::int64_t* pv_skipped, std::int64_t& empty_rows) {
  std::int64_t empty = 0;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, blk.rows),
      [&](int r, std::int64_t& e) {
        const SoftmaxState st = state_of(r);
        const float lse2 = OnlineSoftmax::finalize(st, nullptr, 0, nullptr);  // the row's base-2 LSE
        e += mask_policy::empty_row(st.l) ? 1 : 0;
        if (a.lse != nullptr) a.lse[blk.state_row0 + r] = lse2 * kLn2;
        if (a.state_out != nullptr) a.state_out[blk.state_row0 + r] = st;
      },
      empty);
  Kokkos::single(Kokkos::PerTeam(team), [&]() {
    empty_rows += empty;
    if (pv_skipped_here > 0) Kokkos::atomic_add(pv_skipped, pv_skipped_here);
  });
}

/// Launches a row-block kernel (flash_mma.hpp's FlashMma, flash_tile.hpp's FlashTile: an aggregate of AttendArgs with
/// a Policy): a team of `team_size` threads and `scratch` bytes of level-0 scratch per block of `rows` query rows of
/// every query tile; returns the empty rows its parallel_reduce counts.
template <class Kernel>
std::int64_t run_row_blocks(const char* label, AttendArgs a, int rows, int team_size, std::size_t scratch) {
  a.blocks_per_tile = (a.tile_q + rows - 1) / rows;
  const std::int64_t league = a.s.batch * a.s.heads_q * a.q_tiles * a.blocks_per_tile;
  typename Kernel::Policy policy(static_cast<int>(league), team_size);
  policy.set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(scratch)));
  std::int64_t empty = 0;
  Kokkos::parallel_reduce(label, policy, Kernel{a}, empty);
  return empty;
}

}  // namespace spattn::kokkos::detail
