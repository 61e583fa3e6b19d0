// AnchorAttention on tensor cores (Kokkos::Cuda, sm_80 and later), the NVIDIA specializations of anchor_attn.hpp's
// AnchorPass and AnchorStripes. The anchor pass: flash_mma.hpp's statistics pass over the anchor-region mask, built
// here on the device. The stripes, for groups of at most 16 pooled blocks (the default 16 blocks of 128 rows): a
// team of 128 threads (4 warps) per (mask row, range of kTeamKeys keys). The group's q̄ rows (fp32) are the m16 A
// operand in two 16-bit pieces each (ptx::split_pieces: their sum is q̄ within 2⁻¹⁸·|q̄| in bf16), held in registers;
// the candidate keys of the range are visited in chunks of 64 keys double-buffered in team scratch (cp.async, one team
// barrier a chunk), each warp scoring 16 of them (mma.sync, fp32 sums) against every pooled block. The decision is the
// core's (stripe_selected on score·scale·log2 e, θ, ā), OR-ed over the blocks by shuffles; the keys that are not
// candidates take GroupKeys::always_kept. Not bit-identical to the reference's fixed-order stripe_score (another
// summation order, q̄ split): decisions within the score bound of the hand-written stripes' test, which is the same
// algorithm.
#pragma once

#include <Kokkos_Core.hpp>

#include "nvidia_mma.hpp"

#if defined(SPATTN_KOKKOS_MMA)
#include <algorithm>
#include <cstdint>
#include <string>

#include "anchor_group.hpp"
#include "device_estimate.hpp"
#include "flash_mma.hpp"
#include "kernel_args.hpp"
#include "spattn/methods/anchor_attn.hpp"

namespace spattn::kokkos::detail {

/// The anchor region as a mask in CUDA memory, for the tensor-core anchor pass: tile_k = 1, one row per (sequence,
/// group) — the region does not depend on the head (mask_heads = 1) — holding GroupKeys::region_key(0 … region_size).
/// Each row's size, then scan_rows (the total stays on the device: the key array is allocated for a bound of it), then
/// a team per row fills its keys.
struct RegionSize {
  AnchorGeometry g;
  std::int64_t* row_ptr;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r) const {
    const AnchorGeometry::Group grp = g.at(r / g.groups, r % g.groups);
    row_ptr[r + 1] = grp.valid ? grp.keys.region_size() : 0;
  }
};
struct RegionFill {
  using Member = Kokkos::TeamPolicy<Kokkos::Cuda>::member_type;
  AnchorGeometry g;
  const std::int64_t* row_ptr;
  std::int32_t* keys;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t r = team.league_rank();
    const AnchorGeometry::Group grp = g.at(r / g.groups, r % g.groups);
    std::int32_t* out = keys + row_ptr[r];
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_ptr[r + 1] - row_ptr[r]),
                         [&](std::int64_t p) { out[p] = static_cast<std::int32_t>(grp.keys.region_key(p)); });
  }
};

/// AnchorAttention's anchor pass on tensor cores: flash_mma.hpp's statistics pass (kPV = false) over the anchor-region
/// mask; each row's (m, l) to anchors[2 · ((b·Hq + h)·Nq + i)]. The executor's per-row causal rule clips the region
/// exactly as anchor_attn::row_anchor_region does. tk: keys of the longest sequence.
inline void run_anchor_pass_mma(const AnchorGeometry& geo, const DeviceTensor& q, const DeviceTensor& k, DType dtype,
                                std::int64_t tk, float* anchors) {
  const std::int64_t rows = geo.s.batch * geo.groups;
  auto row_ptr = workspace<Kokkos::Cuda, std::int64_t>("spattn::region_row_ptr", static_cast<std::size_t>(rows + 1));
  Kokkos::parallel_for("spattn::kokkos::anchor_region_size", Kokkos::RangePolicy<Kokkos::Cuda>(0, rows),
                       RegionSize{geo, row_ptr.data()});
  scan_rows<Kokkos::Cuda>(row_ptr.data(), rows);
  // A row's region: at most the sink, the group and the lead before it, and at most the sequence.
  const std::int64_t per_row = std::min(tk, geo.n_sink + geo.group + geo.local_lead);
  auto keys = workspace<Kokkos::Cuda, std::int32_t>("spattn::region_keys", static_cast<std::size_t>(rows * per_row), false);
  Kokkos::parallel_for("spattn::kokkos::anchor_region_fill", Kokkos::TeamPolicy<Kokkos::Cuda>(static_cast<int>(rows), 128),
                       RegionFill{geo, row_ptr.data(), keys.data()});
  AttendArgs a;
  a.s = geo.s;
  a.q = q;
  a.k = a.v = k;
  a.state_out = reinterpret_cast<SoftmaxState*>(anchors);
  a.row_ptr = row_ptr.data();
  a.tiles = keys.data();
  a.mask_heads = 1;
  a.q_tiles = geo.groups;
  a.tile_q = static_cast<std::int32_t>(geo.group);
  a.tile_k = 1;
  run_mma_kernel<false>(a, dtype, geo.s.d);
}

namespace stripes {
inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kRows = 16;         ///< pooled blocks a team scores (one m16 tile)
inline constexpr int kKeys = 16 * kWarps;  ///< keys per chunk, 16 a warp
inline constexpr std::int64_t kTeamKeys = 1024;  ///< keys per team (its A operand is loaded once for them)
inline constexpr int kPieces = 2;        ///< 16-bit pieces of q̄
/// Team scratch: two K buffers [kKeys][D] (16-bit; the second stages A's pieces first), 128 bytes of alignment slack.
template <int D>
KOKKOS_INLINE_FUNCTION constexpr std::size_t scratch_bytes() {
  return 2u * kKeys * D * 2u + 128u;
}
static_assert(kPieces * kRows <= kKeys, "A's pieces are staged in one K buffer");
}  // namespace stripes

struct StripesArgs {
  AnchorGeometry g;
  DeviceTensor k;
  std::int64_t tk;
  float theta2;
  const float* qbar;     ///< [(row · step + blk) · D + e]
  const float* abar;     ///< [row · step + blk]
  std::uint8_t* keep;    ///< bitmap [B·Hq·groups][tk]
  std::int64_t* counts;  ///< per mask row: candidates, selected (zeroed: teams add their selections)
  std::int64_t ranges = 1;  ///< key ranges of kTeamKeys per mask row
};

template <class T, int D>
struct StripesMma {
  using Policy = Kokkos::TeamPolicy<Kokkos::Cuda, Kokkos::LaunchBounds<stripes::kThreads, 4>>;
  using Member = typename Policy::member_type;
  StripesArgs a;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
#if defined(__CUDA_ARCH__)
    run(team);
#else
    (void)team;
    Kokkos::abort("spattn: the tensor-core stripes run on a CUDA device only");
#endif
  }

#if defined(__CUDA_ARCH__)
  __device__ void run(const Member& team) const {
    using namespace ptx;
    using namespace stripes;
    using M = MmaType<T>;
    const AnchorGeometry& geo = a.g;
    const DeviceShape& s = geo.s;
    const std::int64_t range = team.league_rank() % a.ranges, row = team.league_rank() / a.ranges;
    const std::int64_t t = row % geo.groups, bh = row / geo.groups, b = bh / s.heads_q, hkv = (bh % s.heads_q) / s.group();
    const AnchorGeometry::Group grp = geo.at(b, t);
    const std::int64_t lo = range * kTeamKeys, hi = lo + kTeamKeys < grp.nkv ? lo + kTeamKeys : grp.nkv;
    if (!grp.valid || lo >= hi) return;
    const anchor_attn::GroupKeys& keys = grp.keys;
    const int tid = team.team_rank(), warp = tid / 32, lane = tid % 32, gq = lane / 4, t4 = lane % 4;
    std::uint8_t* out = a.keep + row * a.tk;
    for (std::int64_t j = lo + tid; j < hi; j += kThreads)
      if (!keys.candidate(j)) out[j] = keys.always_kept(j) ? 1 : 0;
    if (range == 0 && tid == 0) a.counts[2 * row] = keys.candidate_count(grp.nkv);

    // The candidates of [lo, hi): [begin1, end1) before the window, [begin2, hi) after it (non-causal), in chunks.
    const std::int64_t begin1 = lo > keys.sink_end ? lo : keys.sink_end, end1 = hi < keys.candidates_end ? hi : keys.candidates_end;
    const std::int64_t begin2 = lo > keys.after_begin ? lo : keys.after_begin;
    const int n1 = end1 > begin1 ? static_cast<int>((end1 - begin1 + kKeys - 1) / kKeys) : 0;
    const int chunks = n1 + (hi > begin2 ? static_cast<int>((hi - begin2 + kKeys - 1) / kKeys) : 0);
    if (chunks == 0) return;
    const auto chunk_begin = [&](int i) { return i < n1 ? begin1 + std::int64_t{i} * kKeys : begin2 + std::int64_t{i - n1} * kKeys; };
    const auto chunk_end = [&](int i) { return i < n1 ? end1 : hi; };

    auto* base = static_cast<unsigned char*>(team.team_scratch(0).get_shmem(scratch_bytes<D>()));
    base += (128u - reinterpret_cast<std::uintptr_t>(base) % 128u) % 128u;
    T* sk = reinterpret_cast<T*>(base);  // [2][kKeys][D]
    constexpr int kPiecesPerRow = D / 8;
    const T* kg = static_cast<const T*>(a.k.data) + s.row(a.k, false, b, hkv, 0);
    const std::int64_t k_sn = a.k.stride_n;
    const auto load = [&](int i) {  // chunk i's K rows into buffer i % 2 (zeros past the interval)
      const std::int64_t c0 = chunk_begin(i), c1 = chunk_end(i);
      T* dst = sk + (i % 2) * kKeys * D;
      for (int p = tid; p < kKeys * kPiecesPerRow; p += kThreads) {
        const int r = p / kPiecesPerRow, col = (p % kPiecesPerRow) * 8;
        const bool ok = c0 + r < c1;
        cp_async16(smem_addr(dst + swz<D>(r, col)), kg + (ok ? (c0 + r) * k_sn + col : 0), ok ? 16 : 0);
      }
    };
    load(0);
    cp_async_commit();

    // A: the group's q̄ rows split into pieces, staged in buffer 1 (piece i at rows 16·i …; rows past the group's blocks
    // are zeros and never decide), then into registers.
    const int blocks = static_cast<int>(grp.blocks(geo.block));
    const float* qb = a.qbar + row * geo.step * D;
    T* sa = sk + kKeys * D;
    for (int e = tid; e < kRows * D; e += kThreads) {
      const int r = e / D, c = e % D;
      T piece[kPieces];
      split_pieces<T, kPieces>(r < blocks ? qb[r * D + c] : 0.0f, piece);
#pragma unroll
      for (int i = 0; i < kPieces; ++i) sa[i * kRows * D + swz<D>(r, c)] = piece[i];
    }
    team.team_barrier();
    std::uint32_t af[D / 16][kPieces][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
      for (int i = 0; i < kPieces; ++i)
        ldmatrix_x4(af[ks][i], smem_addr(sa + i * kRows * D + swz<D>(lane % 16, ks * 16 + (lane / 16) * 8)));
    const bool valid[2] = {gq < blocks, gq + 8 < blocks};
    const float abar[2] = {valid[0] ? a.abar[row * geo.step + gq] : 0.0f, valid[1] ? a.abar[row * geo.step + gq + 8] : 0.0f};

    unsigned selected = 0;
    for (int i = 0; i < chunks; ++i) {
      cp_async_wait<0>();
      team.team_barrier();  // chunk i loaded; every warp done with chunk i − 1 (and, at i = 0, with A's staging)
      if (i + 1 < chunks) load(i + 1);
      cp_async_commit();
      const T* kb = sk + (i % 2) * kKeys * D;
      float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        std::uint32_t bf[4];
        ldmatrix_x4(bf, smem_addr(kb + swz<D>(warp * 16 + (lane / 16) * 8 + lane % 8, ks * 16 + ((lane / 8) % 2) * 8)));
#pragma unroll
        for (int p = 0; p < kPieces; ++p) {
          M::mma(acc[0], af[ks][p], bf[0], bf[1]);
          M::mma(acc[1], af[ks][p], bf[2], bf[3]);
        }
      }
      // Lane (gq, t4) holds rows gq and gq + 8, keys 8·nt + 2·t4 + e of the warp's 16: its decisions as bits 2·nt + e,
      // OR-ed over its two rows, then over the 8 lanes of equal t4 (every pooled block).
      unsigned bits = 0;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (valid[half] && anchor_attn::stripe_selected(acc[nt][2 * half + e] * s.scale_log2, a.theta2, abar[half]))
              bits |= 1u << (2 * nt + e);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 4);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 8);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 16);
      if (lane < 4) {
        const std::int64_t c0 = chunk_begin(i) + warp * 16, c1 = chunk_end(i);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const std::int64_t j = c0 + 8 * nt + 2 * t4 + e;
            if (j >= c1) continue;
            const unsigned kept = (bits >> (2 * nt + e)) & 1u;
            out[j] = static_cast<std::uint8_t>(kept);
            selected += kept;
          }
      }
    }
    cp_async_wait<0>();
    selected = __reduce_add_sync(0xffffffffu, selected);
    if (lane == 0 && selected != 0)
      Kokkos::atomic_add(&a.counts[2 * row + 1], static_cast<std::int64_t>(selected));
  }
#endif
};

template <class T, int D>
void run_stripes_mma(StripesArgs a) {
  using Kernel = StripesMma<T, D>;
  const std::int64_t rows = a.g.s.batch * a.g.s.heads_q * a.g.groups;
  a.ranges = (a.tk + stripes::kTeamKeys - 1) / stripes::kTeamKeys;
  typename Kernel::Policy policy(static_cast<int>(rows * a.ranges), stripes::kThreads);
  policy.set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(stripes::scratch_bytes<D>())));
  Kokkos::parallel_for("spattn::kokkos::anchor_stripes_mma", policy, Kernel{a});
}

/// run_stripes_mma for the call's dtype and head dimension (mma_qk_fit holds; the group has ≤ kRows pooled blocks).
inline void run_stripes_mma(const StripesArgs& a, DType dtype, std::int64_t d) {
  if (dtype == DType::f16) return d == 64 ? run_stripes_mma<__half, 64>(a) : run_stripes_mma<__half, 128>(a);
  return d == 64 ? run_stripes_mma<__nv_bfloat16, 64>(a) : run_stripes_mma<__nv_bfloat16, 128>(a);
}

}  // namespace spattn::kokkos::detail
#endif  // SPATTN_KOKKOS_MMA
