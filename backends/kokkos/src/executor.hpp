// The tile-sparse executor on a Kokkos execution space, three kernels behind one entry point (attend_on):
// - flash_mma.hpp (FlashMma), on Kokkos::Cuda built for sm_80 or later: the common case below for fp16 / bf16 with
//   D = Dv = 64 or 128, on tensor cores (mma.sync); 64-row teams of 128 threads.
// - flash_tile.hpp (FlashTile), the common case: no PV-skip, no int8 mode, Dv 64 or 128. Register-tiled: 128-row
//   teams of 256 threads, accumulators and softmax states in registers, Q/K/V slices in team scratch.
// - FlashTeam below, everything else (PV-skip, the int8 QKᵀ mode, other Dv; and any call when
//   SPATTN_KOKKOS_EXECUTOR=generic, which the tests use to keep it covered): a team per row block (on a host space
//   the reference's row blocks of at most 128 rows of one query tile of one query head; 64 rows on a GPU), its Q rows,
//   the running softmax state and the accumulator in team scratch; the row block's kept keys visited in ascending
//   order in chunks (64 keys on the host, 32 on a GPU), each chunk's K and V rows staged in team scratch. A thread
//   computes a 4 × 4 register block of scores (dot_sequential_block) and of P·V.
// Which keys a row sees, the key list of a row's kept tiles and the empty-row rule are mask_policy's; the per-row
// softmax arithmetic is OnlineSoftmax's (both in core/). fp32 accumulation for every input dtype; outputs rounded to
// O's dtype. The int8 QKᵀ mode (qk_int8) as the reference: codes of Q and of the smoothed K (int8_quant.hpp,
// spattn/quant.hpp). AttendOptions::resume / state_out as the reference: rows start from a given state and l·O, and
// leave their final one. SpargeAttn's PV-skip as the reference runs it: one chunk per visited tile, 128-row blocks,
// votes by mask_policy::pv_row_votes_skip over the scores of the tile against the running max.
//
// Not bit-identical to the reference (its QKᵀ and PV are Eigen GEMMs in chunks of 256 keys): outputs are compared
// within the dtype's tolerance (DESIGN.md §5.4). FlashTile and FlashTeam are scalar fp32 on every space (Kokkos has no
// portable tensor-core operation); FlashMma is the NVIDIA specialization (bench/e2e_bench.cpp measures all against the
// hand-written kernels).
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "attend_args.hpp"
#include "flash_mma.hpp"
#include "flash_tile.hpp"
#include "int8_quant.hpp"
#include "kernel_args.hpp"
#include "run.hpp"
#include "spattn/attend_options.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::kokkos {

/// Runs the executor on execution space Exec; tensors, the LSE array and the returned counts as in Backend::attend.
/// Inputs already validated and covered.
template <class Exec>
AttendStats attend_on(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TileMask& mask, const TensorView& o, const AttendOptions& options);

namespace detail {

inline constexpr int kBlock = 4;  ///< register block: a thread computes 4 × 4 scores or 4 rows × 4 dims of P·V

/// Rows per team, keys per chunk, and where their scratch lives. Team scratch holds two parts: the chunk's (K and V
/// rows, scores: read many times per step) and the rows' (Q rows, accumulators, softmax states). Both on level 0
/// where they fit (a host space: always); on a GPU, whose level 0 Kokkos caps at the 48 KB of static shared memory,
/// the chunk part on level 0 with the largest chunk that fits and the rows' part on level 1 (global memory, cached).
struct TeamShape {
  int rows = kRowBlock, chunk = 64;
  int chunk_level = 0, row_level = 0;

  /// Scratch bytes of each part (Q and K rows padded by one float against shared-memory bank conflicts).
  std::size_t chunk_bytes(std::int64_t d, std::int64_t dv) const {
    const std::int64_t floats = chunk * (d + 1) + chunk * dv + rows * chunk + chunk;  // ks, vs, ps, dk
    return sizeof(float) * static_cast<std::size_t>(floats) + sizeof(std::int64_t) * static_cast<std::size_t>(chunk) +
           5 * 64;  // + keys; alignment of the 5 pieces
  }
  std::size_t row_bytes(std::int64_t d, std::int64_t dv) const {
    const std::int64_t floats = rows * (d + 1) + rows * dv + 5 * rows;  // qs, acc, m, l, alpha, dq, skip
    return sizeof(float) * static_cast<std::size_t>(floats) + 7 * 64;
  }
};

/// The team shape on Exec: the reference's 128-row blocks and 64-key chunks on a host space; 64-row blocks on a GPU
/// with the largest chunk (≤ 64 keys) whose part fits level 0. PV-skip: 128-row blocks (its vote groups) and a chunk
/// per key tile (`fixed_chunk`, tile_k rounded up to the register block); where that part does not fit level 0, both
/// parts go to level 1. SPATTN_KOKKOS_GPU_SHAPE=1 gives a host space the GPU's shape with a level-0 budget of 40 KB
/// (tests: the GPU's row blocks, chunks and scratch split, checked on the CPU).
template <class Exec>
TeamShape team_shape(std::int64_t d, std::int64_t dv, int fixed_chunk) {
  const char* env = std::getenv("SPATTN_KOKKOS_GPU_SHAPE");
  const bool gpu = team_size<Exec>() != 1 || (env != nullptr && env[0] == '1');
  const std::size_t max0 = team_size<Exec>() != 1 ? static_cast<std::size_t>(Kokkos::TeamPolicy<Exec>::scratch_size_max(0))
                                                  : gpu ? std::size_t{40} << 10 : ~std::size_t{0};
  TeamShape t;
  t.rows = gpu && fixed_chunk == 0 ? 64 : kRowBlock;
  t.chunk = fixed_chunk > 0 ? fixed_chunk : 64;
  while (fixed_chunk == 0 && t.chunk > kBlock && t.chunk_bytes(d, dv) > max0) t.chunk -= kBlock;
  const std::size_t c = t.chunk_bytes(d, dv), r = t.row_bytes(d, dv);
  t.chunk_level = c <= max0 ? 0 : 1;
  t.row_level = t.chunk_level == 0 && c + r <= max0 ? 0 : 1;
  return t;
}

template <class Exec>
struct FlashTeam {
  using Policy = Kokkos::TeamPolicy<Exec>;
  using Member = typename Policy::member_type;

  AttendArgs a;
  TeamShape shape{};
  // SpargeAttn's PV-skip (AttendOptions; off when thresholds is null): one chunk per visited tile (shape.chunk ≥
  // tile_k), row blocks of 128 rows (the vote groups of the reference's row blocks).
  const float* thresholds = nullptr;  ///< per query head, base 2
  int vote_rows = 0, exempt_last = 1;
  std::int64_t* pv_skipped = nullptr;  ///< (vote group, tile) pairs skipped, summed over the league
  // The quantized mode (AttendOptions::qk_int8): int8 codes of Q and of the smoothed K, scores = integer products ·
  // (scale·log2 e · (δ_q · δ_k)), P rounded to the input dtype before P·V.
  bool int8 = false;
  Int8Blocks quant;

  /// The team's scratch, in TeamShape's two parts. The chunk's: K rows (ks, padded to ld = d + 1 floats), V rows (vs),
  /// the block's scores, then weights (ps, [R][C]), the keys' dequantization scales (dk, int8 mode) and the keys. The
  /// rows': Q rows (qs, padded), the accumulators (acc), the softmax states (m, l), the rescale factors (alpha), the
  /// rows' dequantization scales (dq, int8 mode) and PV-skip's votes (skip: row votes, then groups).
  struct Scratch {
    float *ks, *vs, *ps, *dk;
    std::int64_t* keys;
    float *qs, *acc, *m, *l, *alpha, *dq;
    int* skip;

    KOKKOS_FORCEINLINE_FUNCTION Scratch(const Member& team, const TeamShape& shape, std::int64_t d, std::int64_t dv) {
      const int R = shape.rows, C = shape.chunk;
      const std::int64_t ld = d + 1;
      const auto floats = [&](int level, std::int64_t n) {
        return static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * static_cast<std::size_t>(n)));
      };
      const int cl = shape.chunk_level, rl = shape.row_level;
      ks = floats(cl, C * ld);
      vs = floats(cl, C * dv);
      ps = floats(cl, R * C);
      dk = floats(cl, C);
      keys = static_cast<std::int64_t*>(team.team_scratch(cl).get_shmem(sizeof(std::int64_t) * C));
      qs = floats(rl, R * ld);
      acc = floats(rl, R * dv);
      m = floats(rl, R);
      l = floats(rl, R);
      alpha = floats(rl, R);
      dq = floats(rl, R);
      skip = static_cast<int*>(team.team_scratch(rl).get_shmem(sizeof(int) * R));
    }
  };

  /// Register blocks of kBlock rows covering the block's rows.
  KOKKOS_FORCEINLINE_FUNCTION static int row_groups(const RowBlock& blk) { return (blk.rows + kBlock - 1) / kBlock; }

  /// Q rows (rows past the block's end, up to a whole register block, are 0: computed, never used); the int8 mode:
  /// their codes and each row's scale.
  KOKKOS_FORCEINLINE_FUNCTION void load_q(const Member& team, const RowBlock& blk, const Scratch& sc) const {
    const DeviceShape& s = a.s;
    const DeviceTensor& q = a.q;
    const std::int64_t b = blk.b, h = blk.h, r0 = blk.r0;
    const int rows = blk.rows;
    const std::int64_t d = s.d, ld = d + 1;
    float *qs = sc.qs, *dq = sc.dq;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_groups(blk) * kBlock * d), [&](std::int64_t x) {
      const std::int64_t r = x / d, e = x % d;
      const float value = r < rows ? q.load(blk.q_row(a, q, r) + e) : 0.0f;
      if (!int8) {
        qs[r * ld + e] = value;
        return;
      }
      const float scale = r < rows ? quant.q_scale[(b * s.heads_q + h) * quant.q_blocks + (r0 + r) / quant.block_q] : 0.0f;
      qs[r * ld + e] = static_cast<float>(int8_code(value, scale));
      if (e == 0) dq[r] = scale;
    });
  }

  /// The empty state, or the resumed one: (m, l) and the accumulator l·O (O in its dtype; a row whose l is 0 starts
  /// empty and O is not read), as the reference.
  KOKKOS_FORCEINLINE_FUNCTION void start_rows(const Member& team, const RowBlock& blk, const Scratch& sc) const {
    const std::int64_t dv = a.s.dv;
    float *acc = sc.acc, *m = sc.m, *l = sc.l;
    const std::int64_t state_row0 = blk.state_row0;
    const auto resumed = [&](std::int64_t r) { return blk.resumed(a, r); };
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_groups(blk) * kBlock * dv), [&](std::int64_t x) {
      const std::int64_t r = x / dv;
      acc[x] = resumed(r) ? a.o.load(blk.q_row(a, a.o, r) + x % dv) * a.resume[state_row0 + r].l : 0.0f;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blk.rows), [&](int r) {
      const SoftmaxState init = resumed(r) ? a.resume[state_row0 + r] : SoftmaxState{};
      m[r] = init.m;
      l[r] = init.l;
    });
  }

  /// The chunk of list positions c0 … c0 + per_chunk − 1 (positions past the list or the block's key end hold key −1: a
  /// zero K/V row whose score every row masks): its keys, then its K rows (int8 mode: codes of the smoothed K and each
  /// key's scale) and V rows, after a barrier each.
  KOKKOS_FORCEINLINE_FUNCTION void load_chunk(const Member& team, const RowBlock& blk, const Scratch& sc,
                                              std::int64_t c0, int per_chunk) const {
    const DeviceShape& s = a.s;
    const DeviceTensor &k = a.k, &v = a.v;
    const int C = shape.chunk;
    const std::int64_t d = s.d, dv = s.dv, ld = d + 1;
    const std::int64_t bh_kv = blk.b * s.heads_kv + blk.hkv;
    float *ks = sc.ks, *vs = sc.vs, *dk = sc.dk;
    std::int64_t* keys = sc.keys;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {
      keys[c] = c < per_chunk ? blk.key(a, c0 + c) : -1;
    });
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C * d), [&](std::int64_t x) {
      const std::int64_t c = x / d, e = x % d, j = keys[c];
      const float value = j < 0 ? 0.0f : k.load(blk.kv_row(a, k, j) + e);
      if (!int8) {
        ks[c * ld + e] = value;
        return;
      }
      const float scale = j < 0 ? 0.0f : quant.k_scale[bh_kv * quant.k_blocks + j / quant.block_k];
      ks[c * ld + e] = j < 0 ? 0.0f : static_cast<float>(int8_code(quant.smoothed(value, bh_kv, d, e), scale));
      if (e == 0) dk[c] = scale;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C * dv), [&](std::int64_t x) {
      const std::int64_t c = x / dv, e = x % dv, j = keys[c];
      vs[x] = j < 0 ? 0.0f : v.load(blk.kv_row(a, v, j) + e);
    });
    team.team_barrier();
  }

  /// Base-2 scores of 4 rows × 4 keys per thread (keys cg, cg + C/4, …); a key the row does not see (causal, past
  /// the sequence, past the list) is −∞. Ends with a barrier.
  KOKKOS_FORCEINLINE_FUNCTION void score_chunk(const Member& team, const RowBlock& blk, const Scratch& sc) const {
    const DeviceShape& s = a.s;
    const int C = shape.chunk;
    const std::int64_t d = s.d, ld = d + 1;
    const float *qs = sc.qs, *ks = sc.ks, *dq = sc.dq, *dk = sc.dk;
    const std::int64_t* keys = sc.keys;
    float* ps = sc.ps;
    const int key_groups = C / kBlock;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_groups(blk) * key_groups), [&](int x) {
      const int rg = x / key_groups, cg = x % key_groups;
      float dot[kBlock][kBlock];
      dot_sequential_block<kBlock, kBlock>(qs + rg * kBlock * ld, ld, ks + cg * ld, key_groups * ld, d, dot);
      for (int i = 0; i < kBlock; ++i) {
        const int r = rg * kBlock + i;
        const auto row = blk.row_keys(a, r);
        for (int j = 0; j < kBlock; ++j) {
          const int c = cg + j * key_groups;
          // int8: the integer product (exact in fp32) dequantized as the reference does.
          const float score = int8 ? dot[i][j] * (s.scale_log2 * (dq[r] * dk[c])) : dot[i][j] * s.scale_log2;
          ps[r * C + c] = row.sees(keys[c]) ? score : -INFINITY;
        }
      }
    });
    team.team_barrier();
  }

  /// PV-skip on the chunk's tile: a row votes to skip it (mask_policy::pv_row_votes_skip, its tile max against its
  /// running max), a vote group skips it when every row in it votes so (skip: the group's decision for each of its
  /// rows). Returns the groups that skipped it; ends with a barrier.
  KOKKOS_FORCEINLINE_FUNCTION std::int64_t vote_pv_skip(const Member& team, const RowBlock& blk,
                                                        const Scratch& sc) const {
    const int C = shape.chunk, rows = blk.rows;
    const int vote = vote_rows > 0 ? vote_rows : rows;
    const float *ps = sc.ps, *m = sc.m;
    int* skip = sc.skip;
    const std::int64_t h = blk.h;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
      float tile_max = -INFINITY;
      for (int c = 0; c < C; ++c) tile_max = ps[r * C + c] > tile_max ? ps[r * C + c] : tile_max;
      skip[r] = mask_policy::pv_row_votes_skip(tile_max, m[r], thresholds[h]) ? 1 : 0;
    });
    team.team_barrier();
    std::int64_t groups_skipped = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, (rows + vote - 1) / vote),
        [&](int g, std::int64_t& n) {
          const int g0 = g * vote, g1 = g0 + vote < rows ? g0 + vote : rows;
          int all = 1;
          for (int r = g0; r < g1; ++r) all &= skip[r];
          for (int r = g0; r < g1; ++r) skip[r] = all;  // the group's decision (its rows are this thread's alone)
          n += all;
        },
        groups_skipped);
    team.team_barrier();
    return groups_skipped;
  }

  /// The online softmax step of each row on its scores (OnlineSoftmax::update: ps becomes the weights P, (m, l) move,
  /// alpha is the accumulator's rescale factor); a row whose group skipped the tile keeps its state and gives P·V no
  /// weight. Ends with a barrier.
  KOKKOS_FORCEINLINE_FUNCTION void softmax_step(const Member& team, const RowBlock& blk, const Scratch& sc,
                                                bool may_skip) const {
    const int C = shape.chunk;
    float *ps = sc.ps, *m = sc.m, *l = sc.l, *alpha = sc.alpha;
    const int* skip = sc.skip;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blk.rows), [&](int r) {
      if (may_skip && skip[r] == 1) {  // skipped: state untouched, no weight in P·V
        for (int c = 0; c < C; ++c) ps[r * C + c] = 0.0f;
        alpha[r] = 1.0f;
        return;
      }
      SoftmaxState st{m[r], l[r]};
      alpha[r] = OnlineSoftmax::update(st, ps + r * C, C, ps + r * C);
      m[r] = st.m;
      l[r] = st.l;
      if (int8)  // P·V over P in the input dtype; the denominator kept the fp32 weights
        for (int c = 0; c < C; ++c) ps[r * C + c] = round_to_dtype(ps[r * C + c], quant.dtype);
    });
    team.team_barrier();
  }

  /// acc = acc·α + P·V, 4 rows × 4 dims per thread (dims eg, eg + dv/4, …).
  KOKKOS_FORCEINLINE_FUNCTION void accumulate_pv(const Member& team, const RowBlock& blk, const Scratch& sc) const {
    const int C = shape.chunk, rows = blk.rows;
    const std::int64_t dv = a.s.dv;
    const float *ps = sc.ps, *vs = sc.vs, *alpha = sc.alpha;
    float* acc = sc.acc;
    const std::int64_t dim_groups = dv / kBlock;
    const std::int64_t blocks = rows > 0 ? row_groups(blk) * dim_groups : 0;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blocks), [&](std::int64_t x) {
      const std::int64_t rg = x / dim_groups, eg = x % dim_groups;
      float sum[kBlock][kBlock] = {};
      for (int c = 0; c < C; ++c) {
        float pv[kBlock], vv[kBlock];
        for (int i = 0; i < kBlock; ++i) pv[i] = ps[(rg * kBlock + i) * C + c];
        for (int j = 0; j < kBlock; ++j) vv[j] = vs[c * dv + eg + j * dim_groups];
        for (int i = 0; i < kBlock; ++i)
          for (int j = 0; j < kBlock; ++j) sum[i][j] += pv[i] * vv[j];
      }
      for (int i = 0; i < kBlock; ++i) {
        const std::int64_t r = rg * kBlock + i;
        if (r >= rows) break;
        for (int j = 0; j < kBlock; ++j) {
          float& out = acc[r * dv + eg + j * dim_groups];
          out = out * alpha[r] + sum[i][j];
        }
      }
    });
  }

  /// O = acc / l (OnlineSoftmax::finalize, in place), then stored in O's dtype.
  KOKKOS_FORCEINLINE_FUNCTION void write_rows(const Member& team, const RowBlock& blk, const Scratch& sc) const {
    const std::int64_t dv = a.s.dv;
    float *acc = sc.acc, *m = sc.m, *l = sc.l;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blk.rows), [&](int r) {
      float* out = acc + r * dv;
      OnlineSoftmax::finalize(SoftmaxState{m[r], l[r]}, out, static_cast<int>(dv), out);  // in place
    });
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blk.rows * dv), [&](std::int64_t x) {
      const std::int64_t r = x / dv, e = x % dv;
      a.o.store(blk.q_row(a, a.o, r) + e, acc[x]);
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team, std::int64_t& empty_rows) const {
    const bool pv_skip = thresholds != nullptr;
    const int per_chunk = pv_skip ? a.tile_k : shape.chunk;  // list positions per chunk: one tile with PV-skip
    const RowBlock blk(a, team.league_rank(), shape.rows, false);
    if (blk.rows == 0) return;
    const Scratch sc(team, shape, a.s.d, a.s.dv);
    load_q(team, blk, sc);
    start_rows(team, blk, sc);

    // Chunks of per_chunk positions of the row block's key list; PV-skip may skip the first `skippable` tiles.
    const int visited = static_cast<int>(blk.positions / a.tile_k);
    const int skippable = pv_skip ? mask_policy::pv_skippable_tiles(visited, exempt_last) : 0;
    std::int64_t skipped = 0;
    for (std::int64_t c0 = 0; c0 < blk.positions; c0 += per_chunk) {
      team.team_barrier();  // the previous chunk's P·V is done with ks, vs, ps
      load_chunk(team, blk, sc, c0, per_chunk);
      score_chunk(team, blk, sc);
      const bool may_skip = c0 / per_chunk < skippable;
      if (may_skip) skipped += vote_pv_skip(team, blk, sc);
      softmax_step(team, blk, sc, may_skip);
      accumulate_pv(team, blk, sc);
    }
    team.team_barrier();
    write_rows(team, blk, sc);
    finish_rows(team, a, blk, [&](int r) { return SoftmaxState{sc.m[r], sc.l[r]}; }, skipped, pv_skipped, empty_rows);
  }
};


/// SPATTN_KOKKOS_EXECUTOR: "generic" runs every call on FlashTeam, "tile" every call it covers on FlashTile; any
/// non-empty value keeps the tensor-core kernel out; unset or empty, the dispatch below. The tests use it to keep each
/// kernel covered.
inline std::string forced_kernel() {
  const char* env = std::getenv("SPATTN_KOKKOS_EXECUTOR");
  return env != nullptr ? std::string(env) : std::string();
}

/// Whether the tensor-core kernel (flash_mma.hpp) runs the call: Kokkos::Cuda built for sm_80 or later, no PV-skip,
/// no int8 mode, the tensors mma_tensors_fit, no other kernel forced, mma_allowed().
template <class Exec>
bool mma_kernel_covers(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v, bool pv_skip,
                       bool int8) {
#if defined(SPATTN_KOKKOS_MMA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda>)
    return !pv_skip && !int8 && forced_kernel().empty() && mma_allowed() && mma_tensors_fit(p, q, k, v) &&
           mma::scratch_bytes<128>() <= static_cast<std::size_t>(Kokkos::TeamPolicy<Exec>::scratch_size_max(0));
#endif
  (void)p, (void)q, (void)k, (void)v, (void)pv_skip, (void)int8;
  return false;
}

/// Whether the register-tiled kernel (flash_tile.hpp) runs the call: no PV-skip, no int8 mode, Dv 64 or 128, its scratch
/// within Exec's level 0, and SPATTN_KOKKOS_EXECUTOR not "generic".
template <class Exec>
bool tile_kernel_covers(const Problem& p, bool pv_skip, bool int8) {
  if (pv_skip || int8 || forced_kernel() == "generic") return false;
  if (p.dim_v() != 64 && p.dim_v() != 128) return false;
  return tile_team_size<Exec>() == 1 ||
         tile::scratch_bytes(2) <= static_cast<std::size_t>(Kokkos::TeamPolicy<Exec>::scratch_size_max(0));
}

/// Runs the tiled kernel for J = Dv / 64; returns the empty rows.
template <class Exec, int J>
std::int64_t run_tile_kernel(const AttendArgs& a) {
  return run_row_blocks<FlashTile<Exec, J>>("spattn::kokkos::attend_tiled", a, tile::kRows, tile_team_size<Exec>(),
                                            tile::scratch_bytes(J));
}

}  // namespace detail

namespace detail {

/// AttendStats::visited_tiles of a mask in Exec's memory: each row inside its sequence, once per query head that reads
/// it (TileMask::visited_tiles).
struct VisitedTiles {
  using value_type = std::int64_t;
  DeviceShape s;
  std::int64_t mask_heads, q_tiles, tile_q;
  const std::int64_t* row_ptr;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r, std::int64_t& n) const {
    const std::int64_t b = r / (mask_heads * q_tiles);
    if ((r % q_tiles) * tile_q < s.nq(b)) n += (row_ptr[r + 1] - row_ptr[r]) * (s.heads_q / mask_heads);
  }
};

}  // namespace detail

/// The executor over a mask whose CSR arrays (`row_ptr`, `tiles`, as TileMask's) lie in Exec's memory.
template <class Exec>
AttendStats attend_on(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                      const MaskShape& mask, const std::int64_t* row_ptr, const std::int32_t* tiles, const TensorView& o,
                      const AttendOptions& options) {
  using Team = detail::FlashTeam<Exec>;
  const ProblemOn<Exec> on(p);

  detail::AttendArgs a;
  a.s = on.shape;
  a.q = DeviceTensor::of(q);
  a.k = DeviceTensor::of(k);
  a.v = DeviceTensor::of(v);
  a.o = DeviceTensor::of(o);
  a.lse = options.lse;
  a.resume = options.resume;
  a.state_out = options.state_out;
  a.row_ptr = row_ptr;
  a.tiles = tiles;
  a.mask_heads = mask.mask_heads;
  a.q_tiles = mask.num_q_tiles();
  a.tile_q = mask.tile_q;
  a.tile_k = mask.tile_k;
  std::vector<float> thresholds(static_cast<std::size_t>(p.heads_q), options.pv_threshold);
  if (!options.pv_threshold_per_head.empty()) thresholds = options.pv_threshold_per_head;
  const bool pv_skip = std::any_of(thresholds.begin(), thresholds.end(), [](float x) { return x < INFINITY; });
  const auto pv_skipped = detail::workspace<Exec, std::int64_t>("spattn::pv_skipped", pv_skip ? 1 : 0);

  AttendStats stats;
  stats.backend = "kokkos";
  if (detail::mma_kernel_covers<Exec>(p, q, k, v, pv_skip, options.qk_int8)) {
#if defined(SPATTN_KOKKOS_MMA)
    stats.empty_rows = detail::run_mma_kernel(a, q.dtype, p.head_dim);
    stats.kernel = "mma";
#endif
  } else if (detail::tile_kernel_covers<Exec>(p, pv_skip, options.qk_int8)) {
    stats.empty_rows = p.dim_v() == 64 ? detail::run_tile_kernel<Exec, 1>(a) : detail::run_tile_kernel<Exec, 2>(a);
    stats.kernel = "tile";
  } else {
    Team f;
    f.a = a;
    stats.kernel = "generic";
    // PV-skip: per-head thresholds; a chunk per tile (tile_k rounded up to the register block), the reference's
    // 128-row blocks so that every vote group lies in one team.
    const auto thresholds_view = to_space<Exec>("spattn::pv_thresholds", thresholds.data(), thresholds.size());
    Int8Prepared<Exec> int8;
    if (options.qk_int8) {
      int8 = prepare_int8<Exec>(p, a.s, a.q, a.k, options);
      f.int8 = true;
      f.quant = int8.blocks;
    }
    const int pv_chunk = pv_skip ? (mask.tile_k + detail::kBlock - 1) / detail::kBlock * detail::kBlock : 0;
    f.shape = detail::team_shape<Exec>(p.head_dim, p.dim_v(), pv_chunk);
    if (pv_skip) {
      f.thresholds = thresholds_view.data();
      f.vote_rows = options.pv_vote_rows;
      f.exempt_last = options.pv_exempt_last;
      f.pv_skipped = pv_skipped.data();
    }
    f.a.blocks_per_tile = (mask.tile_q + f.shape.rows - 1) / f.shape.rows;

    const std::int64_t league = p.batch * p.heads_q * a.q_tiles * f.a.blocks_per_tile;
    typename Team::Policy policy(static_cast<int>(league), team_size<Exec>());
    std::size_t bytes[2] = {0, 0};
    bytes[f.shape.chunk_level] += f.shape.chunk_bytes(p.head_dim, p.dim_v());
    bytes[f.shape.row_level] += f.shape.row_bytes(p.head_dim, p.dim_v());
    policy.set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(bytes[0])));
    if (bytes[1] > 0) policy.set_scratch_size(1, Kokkos::PerTeam(static_cast<int>(bytes[1])));
    Kokkos::parallel_reduce("spattn::kokkos::attend", policy, f, stats.empty_rows);
  }
  Kokkos::parallel_reduce("spattn::kokkos::visited_tiles", Kokkos::RangePolicy<Exec>(0, mask.num_rows()),
                          detail::VisitedTiles{a.s, a.mask_heads, a.q_tiles, a.tile_q, row_ptr}, stats.visited_tiles);
  Exec().fence();
  if (pv_skip) stats.pv_skipped = to_host(pv_skipped)[0];
  return stats;
}

/// The executor over a host mask (uploaded to Exec's memory).
template <class Exec>
AttendStats attend_on(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  const auto row_ptr = to_space<Exec>("spattn::row_ptr", mask.row_ptr.data(), mask.row_ptr.size());
  const auto tiles = to_space<Exec>("spattn::tiles", mask.tiles.data(), mask.tiles.size());
  return attend_on<Exec>(p, q, k, v, mask.shape, row_ptr.data(), tiles.data(), o, options);
}

}  // namespace spattn::kokkos
