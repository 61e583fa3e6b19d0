// The mean of every column over a whole sequence (SpargeAttn's key centring, SALE's smoothing, the int8 mode's key
// mean) as two Kokkos kernels in the core's sequence_mean order (spattn/pooling.hpp): the column_sum of every chunk of
// kMeanChunk rows, a team per (batch, head, chunk) and a thread per column; then, a thread per (batch, head, column),
// those chunk sums added in order and divided by n. The same bits as one thread walking the whole column, with
// ⌈n / kMeanChunk⌉ times the teams (one team per (batch, head) had a thread walk all n rows of its column).
#pragma once

#include <Kokkos_Core.hpp>
#include <string>

#include "kernel_args.hpp"
#include "spattn/pooling.hpp"

namespace spattn::kokkos::detail {

/// sums[((b·heads + h)·chunks + c)·d + col]: the column_sum of chunk c (rows [c·kMeanChunk, …) of sequence b) of head h.
template <class Exec>
struct ChunkSums {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  DeviceTensor t;
  bool is_q;
  std::int64_t heads, chunks;
  float* sums;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t bh = team.league_rank() / chunks, c = team.league_rank() % chunks, b = bh / heads, h = bh % heads;
    const std::int64_t n = is_q ? s.nq(b) : s.nkv(b), first = c * kMeanChunk;
    if (first >= n) return;  // a shorter sequence of a varlen batch: sequence_mean reads its own chunks only
    const std::int64_t end = first + kMeanChunk < n ? first + kMeanChunk : n;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, s.d), [&](std::int64_t col) {
      const auto value = [&](std::int64_t r) { return t.load(s.row(t, is_q, b, h, r) + col); };
      sums[(bh * chunks + c) * s.d + col] = column_sum(value, first, end);
    });
  }
};

/// mu[(b·heads + h)·d + col] = sequence_mean of the column from its chunk sums.
struct CombineChunks {
  DeviceShape s;
  bool is_q;
  std::int64_t heads, chunks;
  const float* sums;
  float* mu;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const std::int64_t bh = i / s.d, col = i % s.d, b = bh / heads;
    const float* column = sums + bh * chunks * s.d + col;
    mu[i] = sequence_mean([&](std::int64_t c) { return column[c * s.d]; }, is_q ? s.nq(b) : s.nkv(b));
  }
};

/// mu[(b·heads + h)·d + c]: the mean of column c over sequence b of head h, for every (b, h) of the tensor t (Q when
/// is_q, else K); `max_n` is the longest sequence (Problem's seqlen_q / seqlen_kv).
template <class Exec>
void sequence_mean(const DeviceShape& s, const DeviceTensor& t, bool is_q, std::int64_t heads, std::int64_t max_n,
                   float* mu) {
  const std::int64_t bh = s.batch * heads, chunks = max_n > 0 ? (max_n + kMeanChunk - 1) / kMeanChunk : 1;
  auto sums = workspace<Exec, float>("spattn::chunk_sums", static_cast<std::size_t>(bh * chunks * s.d));
  Kokkos::parallel_for("spattn::kokkos::chunk_sums",
                       Kokkos::TeamPolicy<Exec>(static_cast<int>(bh * chunks), team_size<Exec>()),
                       ChunkSums<Exec>{s, t, is_q, heads, chunks, sums.data()});
  Kokkos::parallel_for("spattn::kokkos::sequence_mean", Kokkos::RangePolicy<Exec>(0, bh * s.d),
                       CombineChunks{s, is_q, heads, chunks, sums.data(), mu});
}

}  // namespace spattn::kokkos::detail
