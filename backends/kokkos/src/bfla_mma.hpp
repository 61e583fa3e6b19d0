// BFLA's group scores on tensor cores (Kokkos::Cuda, sm_80 and later; nvidia_mma.hpp): the NVIDIA specialization of
// bfla.hpp's BflaGroupScores for fp16 / bf16 Q and K whose rows lie on 16-byte boundaries, D a multiple of 32.
// S[u][v] = Σ_{t<g, e<D} q[u·g + t][e]·k[v·g + t][e] is the GEMM [gq × g·D]·[g·D × gk] of the flattened groups: a team
// of 256 threads (8 warps, 2 × 4, each 64 × 32 pairs) per block of 128 × 128 (query group, key group) pairs, k-steps of
// 32 elements of one token row double-buffered in team scratch (cp.async, rows of 64 bytes whose 16-byte pieces are
// XOR-swizzled by (row / 2) % 4 so that an ldmatrix's 8 rows hit 8 bank groups: 32 KB), mma.sync m16n8k16 with fp32
// accumulators (16-bit products are exact in fp32; the sums run in another order than the portable kernel's fma
// chains, so the scores agree within rounding and a decision at a threshold may differ, as with the hand-written
// estimator: DESIGN.md §5.3). Pairs past a query group's causal key groups score 0, blocks wholly past them are not
// multiplied: bfla.hpp's rules (BflaGroupScores::last_group), the same layout of the scores.
#pragma once

#include "nvidia_mma.hpp"

#if defined(SPATTN_KOKKOS_MMA)
#include <Kokkos_Core.hpp>
#include <cstdint>

#include "kernel_args.hpp"
#include "spattn/methods/bfla.hpp"

namespace spattn::kokkos::detail {

/// T: __half or __nv_bfloat16. Scores is bfla.hpp's BflaGroupScores<Kokkos::Cuda> (its geometry and causal limit).
template <class T, class Scores>
struct BflaScoresMma {
  static constexpr int kTile = 128, kStep = 32, kWarps = 8, kThreads = 32 * kWarps;
  static constexpr int kWarpM = 64, kWarpN = 32, kMT = kWarpM / 16, kNT = kWarpN / 8;
  static constexpr std::size_t kStageElems = 2u * kTile * kStep;  ///< A then B rows of one k-step
  KOKKOS_INLINE_FUNCTION static constexpr std::size_t scratch_bytes() { return 2u * kStageElems * sizeof(std::uint16_t) + 128u; }
  using Policy = Kokkos::TeamPolicy<Kokkos::Cuda, Kokkos::LaunchBounds<kThreads, 1>>;
  using Member = typename Policy::member_type;

  Scores base;  ///< shape, tensors, geometry, scores (its tiles_u / tiles_v are of kTile)

  /// Element offset of 16-byte piece `piece` (0 … 3) of row `row` in a [kTile][kStep] operand.
  KOKKOS_INLINE_FUNCTION static int at(int row, int piece) { return row * kStep + ((piece ^ ((row >> 1) & 3)) << 3); }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
#if defined(__CUDA_ARCH__)
    run(team);
#else
    (void)team;
    Kokkos::abort("spattn: the tensor-core BFLA scores run on a CUDA device only");
#endif
  }

#if defined(__CUDA_ARCH__)
  __device__ void run(const Member& team) const {
    using namespace ptx;
    const DeviceShape& s = base.s;
    const auto& geo = base.geo;
    const std::int64_t tv = team.league_rank() % base.tiles_v, tu = team.league_rank() / base.tiles_v % base.tiles_u;
    const std::int64_t bh = team.league_rank() / (base.tiles_v * base.tiles_u);
    const std::int64_t b = bh / s.heads_q, h = bh % s.heads_q, hkv = h / s.group();
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b), g = geo.g;
    const std::int64_t gq = (nq + g - 1) / g, gk = (nkv + g - 1) / g, u0 = tu * kTile, v0 = tv * kTile;
    if (u0 >= gq || v0 >= gk) return;
    const std::int64_t nu = gq - u0 < kTile ? gq - u0 : kTile;
    const int tid = team.team_rank(), lane = tid % 32, warp = tid / 32;
    const auto store = [&](std::int64_t u, std::int64_t v, float x) {
      if (u < gq && v < gk) base.scores[geo.pair(bh, u, v)] = v < base.last_group(u, nq, nkv, gk) ? x : 0.0f;
    };
    if (v0 >= base.last_group(u0 + nu - 1, nq, nkv, gk)) {  // no pair of the block is causal (the limit grows with u)
      for (int x = tid; x < kTile * kTile; x += kThreads) store(u0 + x / kTile, v0 + x % kTile, 0.0f);
      return;
    }

    auto* raw = static_cast<unsigned char*>(team.team_scratch(0).get_shmem(scratch_bytes()));
    raw += (128u - reinterpret_cast<std::uintptr_t>(raw) % 128u) % 128u;
    T* stage = reinterpret_cast<T*>(raw);  // [2][A kTile × kStep, B kTile × kStep]
    const T* qg = static_cast<const T*>(base.q.data);
    const T* kg = static_cast<const T*>(base.k.data);
    const int d = static_cast<int>(s.d), steps = static_cast<int>(g) * d / kStep;
    // k-step `step` (token t = step·kStep / D of each group, columns (step·kStep) % D …) into buffer step % 2; rows past
    // a sequence's end are zeros. A thread copies piece tid % 4 of rows tid / 4 + 64·i of A and of B.
    const auto load = [&](int step) {
      const int kk = step * kStep, t = kk / d, col = kk % d + 8 * (tid % 4);
      T* dst = stage + (step % 2) * kStageElems;
      for (int i = 0; i < 2 * kTile * 4 / kThreads; ++i) {
        const int r = tid / 4 + 64 * i, row = r % kTile;
        const bool is_q = r < kTile;
        const std::int64_t token = ((is_q ? u0 : v0) + row) * g + t;
        const bool real = token < (is_q ? nq : nkv);
        const T* src = is_q ? qg + (real ? s.row(base.q, true, b, h, token) + col : 0)
                            : kg + (real ? s.row(base.k, false, b, hkv, token) + col : 0);
        cp_async16(smem_addr(dst + (is_q ? 0 : kTile * kStep) + at(row, tid % 4)), src, real ? 16 : 0);
      }
    };

    const int warp_m = (warp / 4) * kWarpM, warp_n = (warp % 4) * kWarpN;
    float acc[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
    load(0);
    cp_async_commit();
    for (int step = 0; step < steps; ++step) {
      if (step + 1 < steps) load(step + 1);  // the other buffer: its readers passed the barrier ending step − 1
      cp_async_commit();
      cp_async_wait<1>();
      team.team_barrier();
      const T* ta = stage + (step % 2) * kStageElems;
      const T* tb = ta + kTile * kStep;
#pragma unroll
      for (int ks = 0; ks < kStep / 16; ++ks) {
        std::uint32_t af[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
          ldmatrix_x4(af[mt], smem_addr(ta + at(warp_m + mt * 16 + lane % 16, 2 * ks + lane / 16)));
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          std::uint32_t bf[4];
          ldmatrix_x4(bf, smem_addr(tb + at(warp_n + np * 16 + (lane / 16) * 8 + lane % 8, 2 * ks + (lane / 8) % 2)));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            MmaType<T>::mma(acc[mt][2 * np], af[mt], bf[0], bf[1]);
            MmaType<T>::mma(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
          }
        }
      }
      team.team_barrier();  // every warp is done with this buffer: the next iteration loads into it
    }
    cp_async_wait<0>();
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const std::int64_t u = u0 + warp_m + mt * 16 + lane / 4 + 8 * half;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const std::int64_t v = v0 + warp_n + nt * 8 + (lane % 4) * 2;
          store(u, v, acc[mt][nt][2 * half]);
          store(u, v + 1, acc[mt][nt][2 * half + 1]);
        }
      }
  }
#endif
};

/// Whether the tensor-core scores serve the call: Q and K mma_rows_fit, D a multiple of kStep, mma_allowed().
inline bool bfla_mma_fits(const Problem& p, const TensorView& q, const TensorView& k) {
  return p.head_dim % 32 == 0 && mma_rows_fit({&q, &k}) && mma_allowed();
}

}  // namespace spattn::kokkos::detail
#endif  // SPATTN_KOKKOS_MMA
