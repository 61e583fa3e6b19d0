// The tile-sparse executor as one Kokkos kernel: a team per row block (on a host space the reference's row blocks of
// at most 128 rows of one query tile of one query head; 64 rows on a GPU), its Q rows, the running softmax state and
// the accumulator in team scratch; the row block's kept keys are visited in ascending order in chunks (64 keys on the
// host, 32 on a GPU), each chunk's K and V rows staged in team scratch. A thread computes a 4 × 4 register block of
// scores (dot_sequential_block) and of P·V, so that one scratch load serves four multiply-adds. Which keys a row sees,
// the key list of a row's kept tiles and the empty-row rule are mask_policy's; the per-row softmax arithmetic is
// OnlineSoftmax's (both in core/). fp32 accumulation for every input dtype; outputs rounded to O's dtype.
// The int8 QKᵀ mode (qk_int8) as the reference: codes of Q and of the smoothed K (int8_quant.hpp, spattn/quant.hpp).
// AttendOptions::resume / state_out as the reference: rows start from a given state and l·O, and leave their final one.
// SpargeAttn's PV-skip as the reference runs it: one chunk per visited tile, 128-row blocks, votes by
// mask_policy::pv_row_votes_skip over the scores of the tile against the running max.
//
// Not bit-identical to the reference (its QKᵀ and PV are Eigen GEMMs in chunks of 256 keys): outputs are compared
// within the dtype's tolerance (DESIGN.md §5.4). Scalar fp32 on every space (Kokkos has no portable tensor-core
// operation): on a GPU far from the hand-written WGMMA kernels (bench/e2e_bench.cpp measures both).
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "int8_quant.hpp"
#include "kernel_args.hpp"
#include "run.hpp"
#include "spattn/attend_options.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::kokkos {

/// Runs the executor on execution space Exec; tensors, the LSE array and the returned counts as in Backend::attend.
/// Inputs already validated and covered (no PV-skip, no int8 mode).
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

  DeviceShape s;
  DeviceTensor q, k, v, o;
  float* lse = nullptr;  ///< [B, Hq, max Nq] natural-log LSE, or null
  const SoftmaxState* resume = nullptr;  ///< AttendOptions::resume: rows start from (m, l) and l·O (same indexing)
  SoftmaxState* state_out = nullptr;     ///< AttendOptions::state_out: each row's final (m, l)
  const std::int64_t* row_ptr = nullptr;
  const std::int32_t* tiles = nullptr;
  std::int64_t mask_heads = 1, q_tiles = 0, blocks_per_tile = 1;
  std::int32_t tile_q = 128, tile_k = 128;
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

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team, std::int64_t& empty_rows) const {
    const int R = shape.rows, C = shape.chunk;
    const bool pv_skip = thresholds != nullptr;
    const int per_chunk = pv_skip ? tile_k : C;  // list positions per chunk: one tile with PV-skip
    // League index -> (b, hq, query tile t, row block of the tile).
    std::int64_t w = team.league_rank();
    const std::int64_t blk = w % blocks_per_tile;
    w /= blocks_per_tile;
    const std::int64_t t = w % q_tiles;
    w /= q_tiles;
    const std::int64_t h = w % s.heads_q, b = w / s.heads_q;
    const std::int64_t nq = s.nq(b), nkv = s.nkv(b);
    const std::int64_t tile_end = (t + 1) * tile_q < nq ? (t + 1) * tile_q : nq;
    const std::int64_t r0 = t * tile_q + blk * R;
    if (r0 >= tile_end) return;
    const std::int64_t r1 = r0 + R < tile_end ? r0 + R : tile_end;
    const int rows = static_cast<int>(r1 - r0);
    const int row_groups = (rows + kBlock - 1) / kBlock;
    const std::int64_t hkv = h / s.group();
    const std::int64_t mh = mask_heads == s.heads_q ? h : h / (s.heads_q / mask_heads);
    const std::int64_t mrow = (b * mask_heads + mh) * q_tiles + t;
    const std::int32_t* kept = tiles + row_ptr[mrow];
    const std::int64_t count = row_ptr[mrow + 1] - row_ptr[mrow];
    const std::int64_t limit = mask_policy::block_key_end(r1 - 1, nq, nkv, s.causal);
    const std::int64_t positions =
        mask_policy::visited_tiles<std::int64_t>(kept, count, tile_k, limit) * static_cast<std::int64_t>(tile_k);
    const std::int64_t d = s.d, dv = s.dv, ld = d + 1;

    const auto floats = [&](int level, std::int64_t n) {
      return static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * static_cast<std::size_t>(n)));
    };
    const int cl = shape.chunk_level, rl = shape.row_level;
    float* ks = floats(cl, C * ld);
    float* vs = floats(cl, C * dv);
    float* ps = floats(cl, R * C);
    float* dk = floats(cl, C);  // int8 mode: each key's and each row's dequantization scale
    auto* keys = static_cast<std::int64_t*>(team.team_scratch(cl).get_shmem(sizeof(std::int64_t) * C));
    float* qs = floats(rl, R * ld);
    float* acc = floats(rl, R * dv);
    float* m = floats(rl, R);
    float* l = floats(rl, R);
    float* alpha = floats(rl, R);
    float* dq = floats(rl, R);
    int* skip = static_cast<int*>(team.team_scratch(rl).get_shmem(sizeof(int) * R));  // PV-skip: row votes, then groups
    const std::int64_t bh_kv = b * s.heads_kv + hkv;

    // Q rows (rows past the block's end, up to a whole register block, are 0: computed, never used).
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_groups * kBlock * d), [&](std::int64_t x) {
      const std::int64_t r = x / d, e = x % d;
      const float value = r < rows ? q.load(s.row(q, true, b, h, r0 + r) + e) : 0.0f;
      if (!int8) {
        qs[r * ld + e] = value;
        return;
      }
      const float scale = r < rows ? quant.q_scale[(b * s.heads_q + h) * quant.q_blocks + (r0 + r) / quant.block_q] : 0.0f;
      qs[r * ld + e] = static_cast<float>(int8_code(value, scale));
      if (e == 0) dq[r] = scale;
    });
    // The empty state, or the resumed one: (m, l) and the accumulator l·O (O in its dtype; a row whose l is 0 starts
    // empty and O is not read), as the reference.
    const std::int64_t state_row0 = (b * s.heads_q + h) * s.seqlen_q + r0;  // lse's indexing
    const auto resumed = [&](std::int64_t r) { return resume != nullptr && r < rows && resume[state_row0 + r].l != 0.0f; };
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_groups * kBlock * dv), [&](std::int64_t x) {
      const std::int64_t r = x / dv;
      acc[x] = resumed(r) ? o.load(s.row(o, true, b, h, r0 + r) + x % dv) * resume[state_row0 + r].l : 0.0f;
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
      const SoftmaxState init = resumed(r) ? resume[state_row0 + r] : SoftmaxState{};
      m[r] = init.m;
      l[r] = init.l;
    });

    // Chunks of C positions of the row block's key list; positions past the list or the block's key end hold key −1
    // (a zero K/V row whose score every row masks).
    const int visited = static_cast<int>(positions / tile_k);
    const int skippable = pv_skip ? mask_policy::pv_skippable_tiles(visited, exempt_last) : 0;
    const int vote = vote_rows > 0 ? vote_rows : rows;
    std::int64_t skipped = 0;
    for (std::int64_t c0 = 0; c0 < positions; c0 += per_chunk) {
      team.team_barrier();  // the previous chunk's P·V is done with ks, vs, ps
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {
        keys[c] = c < per_chunk ? mask_policy::key_at<std::int64_t>(kept, count, tile_k, c0 + c, limit) : -1;
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C * d), [&](std::int64_t x) {
        const std::int64_t c = x / d, e = x % d, j = keys[c];
        const float value = j < 0 ? 0.0f : k.load(s.row(k, false, b, hkv, j) + e);
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
        vs[x] = j < 0 ? 0.0f : v.load(s.row(v, false, b, hkv, j) + e);
      });
      team.team_barrier();
      // Base-2 scores of 4 rows × 4 keys per thread (keys cg, cg + C/4, …); a key the row does not see (causal, past
      // the sequence, past the list) is −∞.
      const int key_groups = C / kBlock;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, row_groups * key_groups), [&](int x) {
        const int rg = x / key_groups, cg = x % key_groups;
        float dot[kBlock][kBlock];
        dot_sequential_block<kBlock, kBlock>(qs + rg * kBlock * ld, ld, ks + cg * ld, key_groups * ld, d, dot);
        for (int i = 0; i < kBlock; ++i) {
          const int r = rg * kBlock + i;
          const mask_policy::RowKeys<std::int64_t> row(r0 + r, nq, nkv, s.causal);
          for (int j = 0; j < kBlock; ++j) {
            const int c = cg + j * key_groups;
            // int8: the integer product (exact in fp32) dequantized as the reference does.
            const float score = int8 ? dot[i][j] * (s.scale_log2 * (dq[r] * dk[c])) : dot[i][j] * s.scale_log2;
            ps[r * C + c] = row.sees(keys[c]) ? score : -INFINITY;
          }
        }
      });
      team.team_barrier();
      // PV-skip (the first `skippable` tiles): a vote group skips the tile when every row in it votes to skip.
      const bool may_skip = c0 / per_chunk < skippable;
      if (may_skip) {
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
        skipped += groups_skipped;
        team.team_barrier();
      }
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
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
      // acc = acc·α + P·V, 4 rows × 4 dims per thread (dims eg, eg + dv/4, …).
      const std::int64_t dim_groups = dv / kBlock;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows > 0 ? row_groups * dim_groups : 0), [&](std::int64_t x) {
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
            float& a = acc[r * dv + eg + j * dim_groups];
            a = a * alpha[r] + sum[i][j];
          }
        }
      });
    }
    team.team_barrier();

    std::int64_t empty = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, rows),
        [&](int r, std::int64_t& e) {
          const SoftmaxState st{m[r], l[r]};
          float* out = acc + r * dv;
          const float lse2 = OnlineSoftmax::finalize(st, out, static_cast<int>(dv), out);  // in place
          e += mask_policy::empty_row(st.l) ? 1 : 0;
          if (lse != nullptr) lse[state_row0 + r] = lse2 * kLn2;
          if (state_out != nullptr) state_out[state_row0 + r] = st;
        },
        empty);
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * dv), [&](std::int64_t x) {
      const std::int64_t r = x / dv, e = x % dv;
      o.store(s.row(o, true, b, h, r0 + r) + e, acc[x]);
    });
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      empty_rows += empty;
      if (pv_skip && skipped > 0) Kokkos::atomic_add(pv_skipped, skipped);
    });
  }
};

}  // namespace detail

template <class Exec>
AttendStats attend_on(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  using Team = detail::FlashTeam<Exec>;
  const auto row_ptr = to_space<Exec>("spattn::row_ptr", mask.row_ptr.data(), mask.row_ptr.size());
  const auto tiles = to_space<Exec>("spattn::tiles", mask.tiles.data(), mask.tiles.size());
  const ProblemOn<Exec> on(p);

  Team f;
  f.s = on.shape;
  f.q = DeviceTensor::of(q);
  f.k = DeviceTensor::of(k);
  f.v = DeviceTensor::of(v);
  f.o = DeviceTensor::of(o);
  f.lse = options.lse;
  f.resume = options.resume;
  f.state_out = options.state_out;
  f.row_ptr = row_ptr.data();
  f.tiles = tiles.data();
  f.mask_heads = mask.shape.mask_heads;
  f.q_tiles = mask.shape.num_q_tiles();
  f.tile_q = mask.shape.tile_q;
  f.tile_k = mask.shape.tile_k;
  // PV-skip: per-head thresholds; a chunk per tile (tile_k rounded up to the register block), the reference's
  // 128-row blocks so that every vote group lies in one team.
  std::vector<float> thresholds(static_cast<std::size_t>(p.heads_q), options.pv_threshold);
  if (!options.pv_threshold_per_head.empty()) thresholds = options.pv_threshold_per_head;
  const bool pv_skip = std::any_of(thresholds.begin(), thresholds.end(), [](float x) { return x < INFINITY; });
  const auto thresholds_view = to_space<Exec>("spattn::pv_thresholds", thresholds.data(), thresholds.size());
  Kokkos::View<std::int64_t, typename Exec::memory_space> pv_skipped(std::string("spattn::pv_skipped"));
  Int8Prepared<Exec> int8;
  if (options.qk_int8) {
    int8 = prepare_int8<Exec>(p, f.s, f.q, f.k, options);
    f.int8 = true;
    f.quant = int8.blocks;
  }
  const int pv_chunk = pv_skip ? (mask.shape.tile_k + detail::kBlock - 1) / detail::kBlock * detail::kBlock : 0;
  f.shape = detail::team_shape<Exec>(p.head_dim, p.dim_v(), pv_chunk);
  if (pv_skip) {
    f.thresholds = thresholds_view.data();
    f.vote_rows = options.pv_vote_rows;
    f.exempt_last = options.pv_exempt_last;
    f.pv_skipped = pv_skipped.data();
  }
  f.blocks_per_tile = (mask.shape.tile_q + f.shape.rows - 1) / f.shape.rows;

  const std::int64_t league = p.batch * p.heads_q * f.q_tiles * f.blocks_per_tile;
  typename Team::Policy policy(static_cast<int>(league), team_size<Exec>());
  std::size_t bytes[2] = {0, 0};
  bytes[f.shape.chunk_level] += f.shape.chunk_bytes(p.head_dim, p.dim_v());
  bytes[f.shape.row_level] += f.shape.row_bytes(p.head_dim, p.dim_v());
  policy.set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(bytes[0])));
  if (bytes[1] > 0) policy.set_scratch_size(1, Kokkos::PerTeam(static_cast<int>(bytes[1])));
  std::int64_t empty = 0;
  Kokkos::parallel_reduce("spattn::kokkos::attend", policy, f, empty);
  Exec().fence();

  AttendStats stats;
  stats.backend = "kokkos";
  stats.empty_rows = empty;
  Kokkos::deep_copy(stats.pv_skipped, pv_skipped);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t t = 0; t * mask.shape.tile_q < p.seqlen_q_of(b); ++t)
        stats.visited_tiles += static_cast<std::int64_t>(mask.row(b, mask.mask_head_of(h, p.heads_q), t).size());
  return stats;
}

}  // namespace spattn::kokkos
