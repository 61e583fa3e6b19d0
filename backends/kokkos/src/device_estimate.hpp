// An estimate in the execution space's memory: the mask as the CSR arrays of a TileMask, built there from the
// estimator's bitmap (a team per mask row: its kept tiles counted, the rows' offsets by a scan, each row's tile ids
// stored in ascending order, each thread's part after its predecessors'), and the per-row outputs some methods
// export. The executor reads the arrays where they are (sparse_attention: no host round trip between the stages); download() gives the host
// Estimate. Same semantics as TileMask::from_bitmap: entries past a row's reachable tiles are dropped.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_args.hpp"
#include "workspace.hpp"
#include "spattn/estimate.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"

namespace spattn::kokkos {

/// Every View starts as an empty allocation, not default-constructed: with the Kokkos 4.6 snapshot on
/// Kokkos::OpenMP, assigning into a default-constructed View crashed (a null allocation record decremented).
template <class Exec>
struct EstimateViews {
  using Mem = typename Exec::memory_space;
  template <class T>
  static Kokkos::View<T*, Mem> none(const char* label) { return detail::workspace<Exec, T>(label, 0); }
  MaskShape shape;
  Kokkos::View<std::int64_t*, Mem> row_ptr = none<std::int64_t>("spattn::row_ptr");  ///< num_rows() + 1 offsets
  Kokkos::View<std::int32_t*, Mem> tiles = none<std::int32_t>("spattn::tiles");  ///< kept tiles, ascending per row
  Kokkos::View<float*, Mem> states = none<float>("spattn::states");  ///< (m, l) as Estimate::anchor_state, or empty
  Kokkos::View<float*, Mem> margins = none<float>("spattn::margins");  ///< as Estimate::margins, or empty
  Kokkos::View<std::int64_t*, Mem> counts = none<std::int64_t>("spattn::counts");  ///< (candidates, selected) per row
};

namespace detail {

/// Kept tiles of mask row r below its reachable count, at row_ptr[r + 1].
template <class Exec>
struct MaskRowCount {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  DeviceShape s;
  std::int32_t tile_q, tile_k;
  std::int64_t mask_heads, tq, tk;
  const std::uint8_t* keep;
  std::int64_t* row_ptr;
  KOKKOS_INLINE_FUNCTION std::int64_t reach(std::int64_t r) const {
    const std::int64_t b = r / (mask_heads * tq);
    return mask_policy::reachable_tiles<std::int64_t>(r % tq, tile_q, tile_k, s.nq(b), s.nkv(b), s.causal);
  }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t r = team.league_rank();
    const std::uint8_t* row = keep + r * tk;
    std::int64_t kept = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, reach(r)), [&](std::int64_t j, std::int64_t& n) { n += row[j] != 0 ? 1 : 0; }, kept);
    Kokkos::single(Kokkos::PerTeam(team), [&]() { row_ptr[r + 1] = kept; });
  }
};

/// row_ptr[1 … rows] from counts to inclusive sums, row_ptr[0] = 0, in one team: each thread sums a contiguous part of
/// the rows into team scratch, then adds the parts before its own and writes its part's sums (each entry read and
/// written by its own thread only). Kokkos' parallel_scan took 0.4–0.7 ms a call on Kokkos::Cuda for 16 to 32K rows
/// (H100, bench/kokkos_kernel_timer.cpp); this is one short kernel.
template <class Exec>
struct RowScan {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  std::int64_t rows;
  std::int64_t* row_ptr;
  static std::size_t scratch_bytes(int team_size) { return sizeof(std::int64_t) * static_cast<std::size_t>(team_size) + 64; }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const int n = team.team_size(), me = team.team_rank();
    const std::int64_t per = (rows + n - 1) / n;
    const std::int64_t begin = me * per < rows ? me * per : rows, end = begin + per < rows ? begin + per : rows;
    auto* part = static_cast<std::int64_t*>(team.team_scratch(0).get_shmem(sizeof(std::int64_t) * n));
    std::int64_t sum = 0;
    for (std::int64_t r = begin; r < end; ++r) sum += row_ptr[r + 1];
    part[me] = sum;
    team.team_barrier();
    std::int64_t at = 0;
    for (int t = 0; t < me; ++t) at += part[t];
    for (std::int64_t r = begin; r < end; ++r) {
      at += row_ptr[r + 1];
      row_ptr[r + 1] = at;
    }
    if (me == 0) row_ptr[0] = 0;
  }
};

/// RowScan over row_ptr[0 … rows] in Exec (row r's count at row_ptr[r + 1] before, its end after).
template <class Exec>
void scan_rows(std::int64_t* row_ptr, std::int64_t rows) {
  const int ts = team_size<Exec>();
  Kokkos::parallel_for("spattn::kokkos::row_scan",
                       Kokkos::TeamPolicy<Exec>(1, ts).set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(RowScan<Exec>::scratch_bytes(ts)))),
                       RowScan<Exec>{rows, row_ptr});
}

/// Row r's kept tile ids, ascending, at tiles[row_ptr[r] …]: each thread takes a contiguous part of the row, counts
/// its kept tiles into team scratch, and stores its ids after those of the threads before it (a scan written out
/// rather than Kokkos' team scan, whose host buffer is not sized for it inside a parallel_for).
template <class Exec>
struct MaskRowFill {
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  MaskRowCount<Exec> rows;
  std::int32_t* tiles;
  static std::size_t scratch_bytes(int team_size) { return sizeof(std::int64_t) * static_cast<std::size_t>(team_size) + 64; }
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t r = team.league_rank(), reach = rows.reach(r);
    const int n = team.team_size(), me = team.team_rank();
    const std::int64_t per = (reach + n - 1) / n;
    const std::int64_t begin = me * per < reach ? me * per : reach, end = begin + per < reach ? begin + per : reach;
    auto* counts = static_cast<std::int64_t*>(team.team_scratch(0).get_shmem(sizeof(std::int64_t) * n));
    const std::uint8_t* row = rows.keep + r * rows.tk;
    std::int64_t kept = 0;
    for (std::int64_t j = begin; j < end; ++j) kept += row[j] != 0 ? 1 : 0;
    counts[me] = kept;
    team.team_barrier();
    std::int64_t at = rows.row_ptr[r];
    for (int t = 0; t < me; ++t) at += counts[t];
    for (std::int64_t j = begin; j < end; ++j)
      if (row[j] != 0) tiles[at++] = static_cast<std::int32_t>(j);
  }
};

}  // namespace detail

/// The number of reachable tiles of `shape` (the capacity of a mask's tile array).
inline std::int64_t reachable_tiles(const MaskShape& shape) {
  std::int64_t total = 0;
  for (std::int64_t b = 0; b < shape.batch; ++b)
    for (std::int64_t t = 0; t < shape.num_q_tiles(); ++t) total += shape.reachable_k_tiles(b, t);
  return total * shape.mask_heads;
}

/// e.shape's CSR arrays in Exec's memory from the bitmap keep[row · Tk + j] (1 … 255: kept); s: the problem's shape
/// there (sequence lengths).
template <class Exec>
void set_mask_from_bitmap(EstimateViews<Exec>& e, const DeviceShape& s,
                          const Kokkos::View<std::uint8_t*, typename Exec::memory_space>& keep) {
  using Policy = Kokkos::TeamPolicy<Exec>;
  const std::int64_t rows = e.shape.num_rows();
  e.row_ptr = detail::workspace<Exec, std::int64_t>("spattn::row_ptr", static_cast<std::size_t>(rows + 1));
  e.tiles = detail::workspace<Exec, std::int32_t>("spattn::tiles", static_cast<std::size_t>(reachable_tiles(e.shape)), false);
  const detail::MaskRowCount<Exec> count{s,
                                         e.shape.tile_q,
                                         e.shape.tile_k,
                                         e.shape.mask_heads,
                                         e.shape.num_q_tiles(),
                                         e.shape.num_k_tiles(),
                                         keep.data(),
                                         e.row_ptr.data()};
  const int league = static_cast<int>(rows), ts = team_size<Exec>();
  Kokkos::parallel_for("spattn::kokkos::mask_count", Policy(league, ts), count);
  detail::scan_rows<Exec>(e.row_ptr.data(), rows);
  Kokkos::parallel_for("spattn::kokkos::mask_fill",
                       Policy(league, ts).set_scratch_size(
                           0, Kokkos::PerTeam(static_cast<int>(detail::MaskRowFill<Exec>::scratch_bytes(ts)))),
                       detail::MaskRowFill<Exec>{count, e.tiles.data()});
}

/// The host TileMask of e (waits for the kernels that write it).
template <class Exec>
TileMask download_mask(const EstimateViews<Exec>& e) {
  TileMask m;
  m.shape = e.shape;
  m.row_ptr = to_host(e.row_ptr);
  m.tiles.resize(static_cast<std::size_t>(m.row_ptr.back()));
  if (!m.tiles.empty()) {
    Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(m.tiles.data(), m.tiles.size());
    Kokkos::deep_copy(host, Kokkos::subview(e.tiles, std::make_pair(std::size_t{0}, m.tiles.size())));
  }
  return m;
}

/// The host Estimate of e: mask, anchor states, margins and counts (method and backend names left to the caller).
template <class Exec>
Estimate download(const EstimateViews<Exec>& e) {
  Estimate out;
  out.mask = download_mask(e);
  if (e.states.size() > 0) {
    const std::vector<float> st = to_host(e.states);
    out.anchor_state.resize(st.size() / 2);
    for (std::size_t i = 0; i < out.anchor_state.size(); ++i) out.anchor_state[i] = SoftmaxState{st[2 * i], st[2 * i + 1]};
  }
  if (e.margins.size() > 0) out.margins = to_host(e.margins);
  if (e.counts.size() > 0) {
    const auto [candidates, selected] = count_totals(e.counts);
    out.candidates = candidates;
    out.selected = selected;
  }
  return out;
}

}  // namespace spattn::kokkos
