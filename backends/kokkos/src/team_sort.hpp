// The selection order inside a Kokkos team: an ascending bitonic sort of the core's 64-bit selection keys
// (spattn/topcdf.hpp: selection_key, signed_selection_key — selection_before as one integer order) in team scratch,
// every thread of the team taking part. selection_before is a total order, so the permutation is the one every
// correct sort gives: the reference's, and the hand-written CUDA estimators' (the same network, estimator_kernels.cuh).
// n log² n compare-exchanges per row instead of the n² comparisons of counting each entry's rank.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "spattn/topcdf.hpp"

namespace spattn::kokkos::detail {

/// The smallest power of two >= n (1 for n <= 1): the sort's length for n entries.
KOKKOS_INLINE_FUNCTION std::int64_t sort_length(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

/// Sorts keys[0, n) ascending, n a power of two, by the whole team; returns after a team barrier.
template <class Member>
KOKKOS_INLINE_FUNCTION void team_sort(const Member& team, std::uint64_t* keys, std::int64_t n) {
  const int half = static_cast<int>(n / 2);  // 32-bit index arithmetic (a row has far fewer than 2³¹ tiles)
  for (int size = 2; size <= 2 * half; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, half), [&](int i) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool up = (lo & size) == 0;
        const std::uint64_t a = keys[lo], b = keys[hi];
        if ((a > b) == up) {
          keys[lo] = b;
          keys[hi] = a;
        }
      });
    }
  team.team_barrier();
}

/// Sorts the keys of entries j < n, key(j) (a selection_key, signed_selection_key or kNoSelectionKey for an entry that
/// takes no part), into keys[0, sort_length(n)): the r-th entry of the order at keys[r], kNoSelectionKey after the last.
template <class Member, class Key>
KOKKOS_INLINE_FUNCTION void team_selection_order(const Member& team, std::uint64_t* keys, std::int64_t n, Key key) {
  const std::int64_t len = sort_length(n);
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, len), [&](std::int64_t j) { keys[j] = j < n ? key(j) : kNoSelectionKey; });
  team_sort(team, keys, len);
}

}  // namespace spattn::kokkos::detail
