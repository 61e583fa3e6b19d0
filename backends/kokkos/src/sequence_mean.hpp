// The mean of every column over a whole sequence (SpargeAttn's key centring, SALE's smoothing) as a Kokkos kernel:
// a team per (batch, head), a column per thread, the core's sequence_mean order (spattn/pooling.hpp).
#pragma once

#include <Kokkos_Core.hpp>

#include "kernel_args.hpp"
#include "spattn/pooling.hpp"

namespace spattn::kokkos::detail {

/// mu[(b·heads + h)·d + c]: the mean of column c over sequence b of head h (sequence_mean's order).
template <class Exec>
struct SequenceMean {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q;
  std::int64_t heads;
  float* mu;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t bh = team.league_rank(), b = bh / heads, h = bh % heads, n = is_q ? s.nq(b) : s.nkv(b);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, s.d), [&](std::int64_t col) {
      const auto value = [&](std::int64_t r) { return t.load(s.row(t, is_q, b, h, r) + col); };
      mu[bh * s.d + col] = sequence_mean(
          [&](std::int64_t c) {
            const std::int64_t first = c * kMeanChunk, end = first + kMeanChunk < n ? first + kMeanChunk : n;
            return column_sum(value, first, end);
          },
          n);
    });
  }
};

}  // namespace spattn::kokkos::detail
