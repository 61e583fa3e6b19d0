// The executor's register-tiled kernel (the common case: no PV-skip, no int8 mode, Dv 64 or 128): a team of 256
// threads per block of 128 query rows, the kept keys visited in chunks of 32.
//   S = Q·Kᵀ   each thread a 4 rows × 4 keys register block; Q and K staged in team scratch in slices of 32 dims
//              (fp32 rows, read as 16-byte vectors), the 4 block scores summed over every slice in registers;
//   softmax    thread r (< 128) owns row r's running state (m, l) in registers and folds the chunk's 32 scores into
//              it with OnlineSoftmax::update (the core's rule), leaving the weights P and the rescale α in scratch;
//   O += P·V   each thread an 8 rows × 4J dims accumulator block in registers (dims 4·g + 64·j), V staged in scratch.
// Which keys a row sees and the empty-row rule are mask_policy's (attend_args.hpp: RowBlock), the final division and
// LSE OnlineSoftmax::finalize's. Team scratch: about 40 KB, under the 48 KB of static shared memory that Kokkos' CUDA
// teams may use (TeamPolicy<Cuda>::scratch_size_max(0) = 40,936 bytes in Kokkos 4.6, whatever the device offers).
//
// One source for every execution space: the kernel is written for 256 *virtual* threads; a GPU runs one per team
// thread (their registers hold the blocks), a host space runs the 256 in turn inside one team thread (kVirtual = 256:
// the blocks live in the thread's stack arrays). Phases are separated by team barriers, so both orders are the same
// computation. Scalar fp32 arithmetic (no portable tensor-core operation); the H100 timing is in
// bench/results/kokkos-h100.md.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>

#include "attend_args.hpp"
#include "kernel_args.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::kokkos::detail {

namespace tile {
inline constexpr int kThreads = 256;  ///< virtual threads of a team
inline constexpr int kRows = 128;     ///< query rows per team
inline constexpr int kKeys = 32;      ///< keys per chunk
inline constexpr int kSlice = 32;     ///< Q/K dims staged at a time
// Row strides in Float4s. Scores: 9 (36 floats): the softmax's 16-byte row reads by consecutive rows fall on distinct
// banks. Q slice: 8 (its reads are broadcasts). K slice: 9, so that 8 threads reading keys cg, cg + 8, … hit 8 banks.
inline constexpr int kS4 = kKeys / 4 + 1, kQ4 = kSlice / 4, kK4 = kSlice / 4 + 1;
/// Float4s of each scratch part: scores/weights, the staged slices (Q + K, or V: one buffer), α, two chunks' keys.
inline constexpr int kScores4 = kRows * kS4, kSliceQK4 = kRows * kQ4 + kKeys * kK4;
inline constexpr int kQPer = kRows * kQ4 / kThreads;  ///< Float4s of a Q slice each thread stages
KOKKOS_INLINE_FUNCTION constexpr int stage4(int J) { return kSliceQK4 > kKeys * 16 * J ? kSliceQK4 : kKeys * 16 * J; }
KOKKOS_INLINE_FUNCTION constexpr std::size_t scratch_bytes(int J) {
  return 16u * static_cast<std::size_t>(kScores4 + stage4(J) + kRows / 4) + 2u * kKeys * sizeof(std::int64_t) + 16u;
}
}  // namespace tile

/// Team threads that run the tiled kernel on Exec: all 256 on a GPU, one on a host space.
template <class Exec>
constexpr int tile_team_size() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible ? 1 : tile::kThreads;
}

/// J = Dv / 64 (1 or 2): the accumulator block of a thread is 8 rows × 4J dims.
template <class Exec, int J>
struct FlashTile {
  static constexpr int kVirtual = tile::kThreads / tile_team_size<Exec>();  ///< virtual threads per team thread
  static constexpr int kDv = 64 * J;
  using Policy = std::conditional_t<tile_team_size<Exec>() == 1, Kokkos::TeamPolicy<Exec>,
                                    Kokkos::TeamPolicy<Exec, Kokkos::LaunchBounds<tile::kThreads, 2>>>;
  using Member = typename Policy::member_type;

  AttendArgs a;

  /// The team's scratch: scores / weights [kRows][kS4]; the stage buffer (a Q slice [kRows][kQ4] and a K slice
  /// [kKeys][kK4], or V [kKeys][16·J]); α of each row; the keys of two chunks [2][kKeys] (this one's, the next one's).
  struct Scratch {
    Float4* ss;
    Float4* stage;
    Float4* ks;
    float* alpha;
    std::int64_t* keys;
  };
  // Per virtual thread u (vt = first + u): acc rows 8·(vt / 16) + i, dims 4·(vt % 16) + 64·j + e; the softmax state
  // of row vt (vt < 128); the scores of rows 4·(vt / 8) + i, keys vt % 8 + 8·j.
  using Acc = float[kVirtual][8][4 * J];
  using States = SoftmaxState[kVirtual];
  using Scores = float[kVirtual][4][4];

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team, std::int64_t& empty_rows) const {
    using namespace tile;
    const RowBlock blk(a, team.league_rank(), kRows, a.s.causal);
    if (blk.rows == 0) return;
    const int first = team.team_rank() * kVirtual;
    auto* base = static_cast<char*>(team.team_scratch(0).get_shmem(scratch_bytes(J)));
    Scratch sp;
    sp.ss = reinterpret_cast<Float4*>(base + ((16u - reinterpret_cast<std::uintptr_t>(base) % 16u) % 16u));
    sp.stage = sp.ss + kScores4;
    sp.ks = sp.stage + kRows * kQ4;
    sp.alpha = reinterpret_cast<float*>(sp.stage + stage4(J));
    sp.keys = reinterpret_cast<std::int64_t*>(sp.alpha + kRows);

    Acc acc;
    States st;
    Scores sc;
    start(blk, first, sp, acc, st);
    team.team_barrier();
    for (std::int64_t c0 = 0, chunk = 0; c0 < blk.positions; c0 += kKeys, ++chunk) {
      const std::int64_t* ck = sp.keys + (chunk % 2) * kKeys;
      score(team, blk, first, sp, ck, sc);
      team.team_barrier();
      softmax_step(blk, first, sp, ck, st);
      team.team_barrier();
      add_pv(first, sp, acc);
      for (int u = 0; u < kVirtual; ++u)  // the next chunk's keys
        if (first + u < kKeys) sp.keys[((chunk + 1) % 2) * kKeys + first + u] = blk.key(a, c0 + kKeys + first + u);
      team.team_barrier();
    }
    finish(team, blk, first, sp, acc, st, empty_rows);
  }

  /// acc and the row states from AttendOptions::resume (l·O and (m, l)), or zero; the first chunk's keys.
  KOKKOS_FORCEINLINE_FUNCTION void start(const RowBlock& blk, int first, const Scratch& sp, Acc& acc, States& st) const {
    for (int u = 0; u < kVirtual; ++u) {
      const int vt = first + u, rg = vt / 16, dg = vt % 16;
      for (int i = 0; i < 8; ++i) {
        const int r = 8 * rg + i;
        const float l0 = blk.resumed(a, r) ? a.resume[blk.state_row0 + r].l : 0.0f;
        for (int j = 0; j < J; ++j) {
          const Float4 x = l0 != 0.0f ? a.o.load4(blk.q_row(a, a.o, r) + 4 * dg + 64 * j, 4) : Float4{};
          for (int e = 0; e < 4; ++e) acc[u][i][4 * j + e] = x.v[e] * l0;
        }
      }
      st[u] = vt < tile::kRows && blk.resumed(a, vt) ? a.resume[blk.state_row0 + vt] : SoftmaxState{};
      if (vt < tile::kKeys) sp.keys[vt] = blk.key(a, vt);
    }
  }

  /// S = Q·Kᵀ of the chunk's keys ck into the score rows ss, base 2; a key the row does not see (causal, past the
  /// sequence or the list) is −∞. Dims [d0, d0 + 32) of the rows (rows past the block: 0) and of the keys (key −1: 0)
  /// are read into registers one slice ahead (the next slice's loads are in flight while this one is multiplied).
  KOKKOS_FORCEINLINE_FUNCTION void score(const Member& team, const RowBlock& blk, int first, const Scratch& sp,
                                    const std::int64_t* ck, Scores& sc) const {
    using namespace tile;
    const int d = static_cast<int>(a.s.d);
    Float4 next_q[kVirtual][kQPer], next_k[kVirtual];  // the next Q / K slice's Float4s of each virtual thread
    for (int u = 0; u < kVirtual; ++u)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) sc[u][i][j] = 0.0f;
    const auto fetch = [&](int u, int d0) {
      const int vt = first + u;
      for (int n = 0; n < kQPer; ++n) {
        const int f = vt + kThreads * n, r = f / kQ4, e = d0 + 4 * (f % kQ4);
        const int valid = d - e < 4 ? d - e : 4;
        next_q[u][n] = r < blk.rows && valid > 0 ? a.q.load4(blk.q_row(a, a.q, r) + e, valid) : Float4{};
      }
      const int c = vt / kQ4, e = d0 + 4 * (vt % kQ4);  // kKeys · kQ4 = kThreads: one Float4 each
      const int valid = d - e < 4 ? d - e : 4;
      next_k[u] = ck[c] >= 0 && valid > 0 ? a.k.load4(blk.kv_row(a, a.k, ck[c]) + e, valid) : Float4{};
    };
    for (int u = 0; u < kVirtual; ++u) fetch(u, 0);
    for (int d0 = 0; d0 < d; d0 += kSlice) {
      for (int u = 0; u < kVirtual; ++u) {
        const int vt = first + u;
        for (int n = 0; n < kQPer; ++n) sp.stage[vt + kThreads * n] = next_q[u][n];
        sp.ks[(vt / kQ4) * kK4 + vt % kQ4] = next_k[u];
      }
      team.team_barrier();
      if (d0 + kSlice < d)
        for (int u = 0; u < kVirtual; ++u) fetch(u, d0 + kSlice);
      for (int u = 0; u < kVirtual; ++u) {
        const int vt = first + u, rg = vt / 8, cg = vt % 8;
        for (int e4 = 0; e4 < kQ4; ++e4) {
          Float4 kv[4];
          for (int j = 0; j < 4; ++j) kv[j] = sp.ks[(cg + 8 * j) * kK4 + e4];
          for (int i = 0; i < 4; ++i) {
            const Float4 qv = sp.stage[(4 * rg + i) * kQ4 + e4];
            for (int j = 0; j < 4; ++j)
              for (int e = 0; e < 4; ++e) sc[u][i][j] += qv.v[e] * kv[j].v[e];
          }
        }
      }
      if (d0 + kSlice < d) team.team_barrier();  // the last slice's readers go on to write scores (another buffer)
    }
    for (int u = 0; u < kVirtual; ++u) {
      const int vt = first + u, rg = vt / 8, cg = vt % 8;
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * rg + i;
        const auto row = blk.row_keys(a, r);
        for (int j = 0; j < 4; ++j) {
          const int c = cg + 8 * j;
          sp.ss[r * kS4 + c / 4].v[c % 4] = row.sees(ck[c]) ? sc[u][i][j] * a.s.scale_log2 : -INFINITY;
        }
      }
    }
  }

  /// V rows of the chunk into the stage buffer; each row's softmax step over its 32 scores (in registers): the
  /// weights P back into ss, the rescale α into alpha.
  KOKKOS_FORCEINLINE_FUNCTION void softmax_step(const RowBlock& blk, int first, const Scratch& sp, const std::int64_t* ck,
                                           States& st) const {
    using namespace tile;
    for (int u = 0; u < kVirtual; ++u) {
      const int vt = first + u;
      for (int n = 0; n < kKeys * 16 * J / kThreads; ++n) {
        const int f = vt + kThreads * n, c = f / (16 * J), e = 4 * (f % (16 * J));
        sp.stage[f] = ck[c] >= 0 ? a.v.load4(blk.kv_row(a, a.v, ck[c]) + e, 4) : Float4{};
      }
      if (vt < kRows) {
        float x[kKeys];
        for (int q4 = 0; q4 < kKeys / 4; ++q4) {
          const Float4 s4 = sp.ss[vt * kS4 + q4];
          for (int e = 0; e < 4; ++e) x[4 * q4 + e] = s4.v[e];
        }
        sp.alpha[vt] = OnlineSoftmax::update(st[u], x, kKeys, x, Exp2Fast{});  // as the hand-written kernels
        for (int q4 = 0; q4 < kKeys / 4; ++q4) sp.ss[vt * kS4 + q4] = Float4{{x[4 * q4], x[4 * q4 + 1], x[4 * q4 + 2], x[4 * q4 + 3]}};
      }
    }
  }

  /// acc = acc·α + P·V.
  KOKKOS_FORCEINLINE_FUNCTION void add_pv(int first, const Scratch& sp, Acc& acc) const {
    using namespace tile;
    for (int u = 0; u < kVirtual; ++u) {
      const int vt = first + u, rg = vt / 16, dg = vt % 16;
      for (int i = 0; i < 8; ++i) {
        const float al = sp.alpha[8 * rg + i];
        if (al != 1.0f)
          for (int e = 0; e < 4 * J; ++e) acc[u][i][e] *= al;
      }
      for (int c4 = 0; c4 < kKeys / 4; ++c4) {
        Float4 vv[4][J];
        for (int c = 0; c < 4; ++c)
          for (int j = 0; j < J; ++j) vv[c][j] = sp.stage[(4 * c4 + c) * 16 * J + dg + 16 * j];
        for (int i = 0; i < 8; ++i) {
          const Float4 p = sp.ss[(8 * rg + i) * kS4 + c4];
          for (int c = 0; c < 4; ++c)
            for (int j = 0; j < J; ++j)
              for (int e = 0; e < 4; ++e) acc[u][i][4 * j + e] += p.v[c] * vv[c][j].v[e];
        }
      }
    }
  }

  /// Final states to scratch (score rows' first Float4: m, l), then O = acc / l and the rows' LSE / state_out.
  KOKKOS_FORCEINLINE_FUNCTION void finish(const Member& team, const RowBlock& blk, int first, const Scratch& sp,
                                     const Acc& acc, const States& st, std::int64_t& empty_rows) const {
    using namespace tile;
    for (int u = 0; u < kVirtual; ++u)
      if (first + u < kRows) sp.ss[(first + u) * kS4] = Float4{{st[u].m, st[u].l, 0.0f, 0.0f}};
    team.team_barrier();
    const auto state_of = [&](int r) { return SoftmaxState{sp.ss[r * kS4].v[0], sp.ss[r * kS4].v[1]}; };
    for (int u = 0; u < kVirtual; ++u) {
      const int vt = first + u, rg = vt / 16, dg = vt % 16;
      for (int i = 0; i < 8; ++i) {
        const int r = 8 * rg + i;
        if (r >= blk.rows) break;
        const SoftmaxState row = state_of(r);
        for (int j = 0; j < J; ++j) {
          Float4 out;
          OnlineSoftmax::finalize(row, &acc[u][i][4 * j], 4, out.v);
          a.o.store4(blk.q_row(a, a.o, r) + 4 * dg + 64 * j, out);
        }
      }
    }
    finish_rows(team, a, blk, state_of, 0, nullptr, empty_rows);
  }
};

}  // namespace spattn::kokkos::detail
