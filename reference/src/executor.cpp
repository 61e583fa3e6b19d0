#include "spattn/reference/executor.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "spattn/mask_policy.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/quant.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::int64_t kRowBlock = 128;   // query rows per task
constexpr std::int64_t kKeyChunk = 256;  // keys per GEMM chunk

/// Per-block int8 scales and the key means of the quantized mode, computed before the row blocks run.
struct Quant {
  std::vector<float> q_scale;  ///< [(b·Hq + h)·QB + block]
  std::vector<float> k_scale;  ///< [(b·Hkv + h)·KB + block]
  std::vector<float> k_mean;   ///< [(b·Hkv + h)·D + d], rounded to the input dtype
  std::int64_t q_blocks = 0, k_blocks = 0;
};

/// K' row: K − mean, rounded to the input dtype (spattn/quant.hpp).
void smooth_key(float* row, const float* mean, std::int64_t d, DType dtype) {
  for (std::int64_t e = 0; e < d; ++e) row[e] = int8_smoothed_key(row[e], mean[e], dtype);
}

Quant make_quant(const Problem& p, const TensorView& q, const TensorView& k, const AttendOptions& opt) {
  Quant qt;
  const std::int64_t d = p.head_dim;
  qt.q_blocks = (p.seqlen_q + opt.quant_block_q - 1) / opt.quant_block_q;
  qt.k_blocks = (p.seqlen_kv + opt.quant_block_k - 1) / opt.quant_block_k;
  qt.q_scale.assign(static_cast<std::size_t>(p.batch * p.heads_q * qt.q_blocks), 0.0f);
  qt.k_scale.assign(static_cast<std::size_t>(p.batch * p.heads_kv * qt.k_blocks), 0.0f);
  qt.k_mean.assign(static_cast<std::size_t>(p.batch * p.heads_kv * d), 0.0f);
  std::vector<float> row(static_cast<std::size_t>(d)), keys;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads_kv; ++h) {
      float* mean = qt.k_mean.data() + (b * p.heads_kv + h) * d;
      const std::int64_t n = p.seqlen_kv_of(b);
      keys.resize(static_cast<std::size_t>(n * d));
      for (std::int64_t j = 0; j < n; ++j) load_row(k, row_offset(k, p, false, b, h, j), d, keys.data() + j * d);
      sequence_mean_rows(keys.data(), n, d, mean);  // spattn/quant.hpp: the blocked order, rounded to the dtype
      for (std::int64_t e = 0; e < d; ++e) mean[e] = round_to_dtype(mean[e], p.dtype);
      for (std::int64_t j = 0; j < n; ++j) {
        float* key = keys.data() + j * d;
        smooth_key(key, mean, d, p.dtype);
        float& amax = qt.k_scale[static_cast<std::size_t>((b * p.heads_kv + h) * qt.k_blocks + j / opt.quant_block_k)];
        for (std::int64_t e = 0; e < d; ++e) amax = std::max(amax, std::fabs(key[e]));
      }
    }
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q_of(b); ++i) {
        load_row(q, row_offset(q, p, true, b, h, i), d, row.data());
        float& amax = qt.q_scale[static_cast<std::size_t>((b * p.heads_q + h) * qt.q_blocks + i / opt.quant_block_q)];
        for (float x : row) amax = std::max(amax, std::fabs(x));
      }
  }
  for (float& s : qt.q_scale) s = int8_block_scale(s);
  for (float& s : qt.k_scale) s = int8_block_scale(s);
  return qt;
}

void quantize_row(float* row, std::int64_t d, float scale) {
  for (std::int64_t e = 0; e < d; ++e) row[e] = static_cast<float>(int8_code(row[e], scale));
}

struct RowBlock {
  std::int64_t b, hq, tile, row_begin, row_end;
};

/// Keys a row block visits, ascending: the kept tiles' keys below `limit`; tile_ends[t] is the end (in keys)
/// of the t-th tile that holds any of them.
void collect_keys(const TileMask& mask, std::int64_t mh, const RowBlock& blk, std::int64_t limit,
                  std::vector<std::int64_t>& keys, std::vector<std::int64_t>& tile_ends) {
  keys.clear();
  tile_ends.clear();
  const std::int64_t tk = mask.shape.tile_k;
  for (std::int32_t tile : mask.row(blk.b, mh, blk.tile)) {
    const std::int64_t lo = mask_policy::tile_begin<std::int64_t>(tile, tk);
    const std::int64_t hi = mask_policy::tile_end<std::int64_t>(tile, tk, limit);
    for (std::int64_t j = lo; j < hi; ++j) keys.push_back(j);
    if (hi > lo) tile_ends.push_back(static_cast<std::int64_t>(keys.size()));
  }
}

struct Scratch {
  RowMatrix q, k, v, s, acc;
  std::vector<SoftmaxState> state;
  std::vector<std::int64_t> keys, tile_ends, chunk_ends;
  std::vector<float> out;
  std::vector<std::uint8_t> skip_row;
  std::vector<float> dq, dk;  ///< int8 mode: per-row and per-key dequantization scales
};

struct BlockResult {
  std::int64_t empty_rows = 0, pv_skipped = 0;
};

BlockResult run_block(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                      const TileMask& mask, const TensorView& o, const AttendOptions& opt, const Quant* quant,
                      const RowBlock& blk, Scratch& w) {
  const std::int64_t d = p.head_dim, dv = p.dim_v();
  const std::int64_t rows = blk.row_end - blk.row_begin;
  const std::int64_t hkv = p.kv_head_of(blk.hq);
  const std::int64_t mh = mask.mask_head_of(blk.hq, p.heads_q);
  const std::int64_t nq = p.seqlen_q_of(blk.b), nkv = p.seqlen_kv_of(blk.b);
  const float sl = scale_log2(p.softmax_scale());

  w.q.resize(rows, d);
  w.dq.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    load_row(q, row_offset(q, p, true, blk.b, blk.hq, blk.row_begin + r), d, w.q.row(r).data());
    if (quant != nullptr) {
      const float scale = quant->q_scale[static_cast<std::size_t>((blk.b * p.heads_q + blk.hq) * quant->q_blocks +
                                                                  (blk.row_begin + r) / opt.quant_block_q)];
      quantize_row(w.q.row(r).data(), d, scale);
      w.dq[static_cast<std::size_t>(r)] = scale;
    }
  }
  w.acc.setZero(rows, dv);
  w.state.assign(static_cast<std::size_t>(rows), SoftmaxState{});
  const std::int64_t state_row0 = (blk.b * p.heads_q + blk.hq) * p.seqlen_q + blk.row_begin;  // lse's indexing
  if (opt.resume != nullptr)  // AttendOptions::resume: start from (m, l) and l·O
    for (std::int64_t r = 0; r < rows; ++r) {
      const SoftmaxState st = opt.resume[state_row0 + r];
      if (st.l == 0.0f) continue;  // empty so far (a NaN state propagates)
      w.state[static_cast<std::size_t>(r)] = st;
      load_row(o, row_offset(o, p, true, blk.b, blk.hq, blk.row_begin + r), dv, w.acc.row(r).data());
      w.acc.row(r) *= st.l;
    }

  // Keys beyond the last row's diagonal (causal) or the sequence are never visited.
  const std::int64_t limit = mask_policy::block_key_end(blk.row_end - 1, nq, nkv, p.causal);
  collect_keys(mask, mh, blk, limit, w.keys, w.tile_ends);
  const auto total = static_cast<std::int64_t>(w.keys.size());
  // Chunks: 256 keys, or one key tile each when PV-skip decides per tile.
  const float pv_threshold =
      opt.pv_threshold_per_head.empty() ? opt.pv_threshold : opt.pv_threshold_per_head[static_cast<std::size_t>(blk.hq)];
  const bool pv_skip = pv_threshold < INFINITY;
  w.chunk_ends.clear();
  if (pv_skip) w.chunk_ends = w.tile_ends;
  else
    for (std::int64_t c0 = 0; c0 < total; c0 += kKeyChunk) w.chunk_ends.push_back(std::min(c0 + kKeyChunk, total));
  const std::int64_t vote = opt.pv_vote_rows > 0 ? opt.pv_vote_rows : rows;
  const auto chunks = static_cast<std::int64_t>(w.chunk_ends.size());
  BlockResult result;

  for (std::int64_t ci = 0; ci < chunks; ++ci) {
    const std::int64_t c0 = ci == 0 ? 0 : w.chunk_ends[static_cast<std::size_t>(ci - 1)];
    const std::int64_t n = w.chunk_ends[static_cast<std::size_t>(ci)] - c0;
    w.k.resize(n, d);
    w.v.resize(n, dv);
    w.dk.resize(static_cast<std::size_t>(n));
    for (std::int64_t c = 0; c < n; ++c) {
      const std::int64_t j = w.keys[static_cast<std::size_t>(c0 + c)];
      load_row(k, row_offset(k, p, false, blk.b, hkv, j), d, w.k.row(c).data());
      load_row(v, row_offset(v, p, false, blk.b, hkv, j), dv, w.v.row(c).data());
      if (quant != nullptr) {
        smooth_key(w.k.row(c).data(), quant->k_mean.data() + (blk.b * p.heads_kv + hkv) * d, d, p.dtype);
        const float scale = quant->k_scale[static_cast<std::size_t>((blk.b * p.heads_kv + hkv) * quant->k_blocks +
                                                                    j / opt.quant_block_k)];
        quantize_row(w.k.row(c).data(), d, scale);
        w.dk[static_cast<std::size_t>(c)] = scale;
      }
    }
    w.s.resize(rows, n);
    w.s.noalias() = w.q * w.k.transpose();  // int8 mode: integer-valued, |sum| < 2^24, so exact
    const std::int64_t last_key = w.keys[static_cast<std::size_t>(c0 + n - 1)];
    for (std::int64_t r = 0; r < rows; ++r) {
      float* x = w.s.row(r).data();
      if (quant != nullptr) {
        const float dq = w.dq[static_cast<std::size_t>(r)];
        for (std::int64_t c = 0; c < n; ++c) x[c] *= sl * (dq * w.dk[static_cast<std::size_t>(c)]);
      } else {
        for (std::int64_t c = 0; c < n; ++c) x[c] *= sl;
      }
      const mask_policy::RowKeys<std::int64_t> row(blk.row_begin + r, nq, nkv, p.causal);
      if (!row.sees(last_key))
        for (std::int64_t c = 0; c < n; ++c)
          if (!row.sees(w.keys[static_cast<std::size_t>(c0 + c)])) x[c] = -INFINITY;
    }
    w.skip_row.assign(static_cast<std::size_t>(rows), 0);
    if (pv_skip && ci < mask_policy::pv_skippable_tiles(static_cast<int>(chunks), opt.pv_exempt_last)) {
      // A group skips the tile when no row's tile max comes within pv_threshold of its running max.
      for (std::int64_t g0 = 0; g0 < rows; g0 += vote) {
        bool skip = true;
        for (std::int64_t r = g0; r < std::min(g0 + vote, rows) && skip; ++r) {
          const float* x = w.s.row(r).data();
          float tile_max = -INFINITY;
          for (std::int64_t c = 0; c < n; ++c) tile_max = x[c] > tile_max ? x[c] : tile_max;
          skip = mask_policy::pv_row_votes_skip(tile_max, w.state[static_cast<std::size_t>(r)].m, pv_threshold);
        }
        if (!skip) continue;
        ++result.pv_skipped;
        for (std::int64_t r = g0; r < std::min(g0 + vote, rows); ++r) w.skip_row[static_cast<std::size_t>(r)] = 1;
      }
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      float* x = w.s.row(r).data();
      if (w.skip_row[static_cast<std::size_t>(r)]) {  // skipped: state untouched, no weight in P·V
        std::fill(x, x + n, 0.0f);
        continue;
      }
      const float alpha = OnlineSoftmax::update(w.state[static_cast<std::size_t>(r)], x, static_cast<int>(n), x);
      if (alpha != 1.0f) w.acc.row(r) *= alpha;
      if (quant != nullptr)  // P·V over P in the input dtype; the denominator kept the fp32 weights
        for (std::int64_t c = 0; c < n; ++c) x[c] = round_to_dtype(x[c], p.dtype);
    }
    w.acc.noalias() += w.s * w.v;
  }

  w.out.resize(static_cast<std::size_t>(dv));
  for (std::int64_t r = 0; r < rows; ++r) {
    const SoftmaxState& st = w.state[static_cast<std::size_t>(r)];
    const float lse2 = OnlineSoftmax::finalize(st, w.acc.row(r).data(), static_cast<int>(dv), w.out.data());
    if (mask_policy::empty_row(st.l)) ++result.empty_rows;
    const std::int64_t n = blk.row_begin + r;
    store_row(o, row_offset(o, p, true, blk.b, blk.hq, n), dv, w.out.data());
    if (opt.lse != nullptr) opt.lse[state_row0 + r] = lse2 * kLn2;
    if (opt.state_out != nullptr) opt.state_out[state_row0 + r] = st;
  }
  return result;
}

}  // namespace

AttendStats attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  std::vector<RowBlock> blocks;
  const std::int64_t tq = mask.shape.tile_q;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t nq = p.seqlen_q_of(b);
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t t = 0; t * tq < nq; ++t) {
        const std::int64_t end = std::min((t + 1) * tq, nq);
        for (std::int64_t r0 = t * tq; r0 < end; r0 += kRowBlock)
          blocks.push_back({b, h, t, r0, std::min(r0 + kRowBlock, end)});
      }
  }
  std::atomic<std::int64_t> empty{0}, skipped{0};
  const Quant quant = options.qk_int8 ? make_quant(p, q, k, options) : Quant{};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, blocks.size(), 1),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      Scratch scratch;
                      BlockResult local;
                      for (std::size_t i = range.begin(); i != range.end(); ++i) {
                        const BlockResult r = run_block(p, q, k, v, mask, o, options,
                                                          options.qk_int8 ? &quant : nullptr, blocks[i], scratch);
                        local.empty_rows += r.empty_rows;
                        local.pv_skipped += r.pv_skipped;
                      }
                      empty += local.empty_rows;
                      skipped += local.pv_skipped;
                    });
  AttendStats stats;
  stats.backend = "reference";
  stats.empty_rows = empty.load();
  stats.pv_skipped = skipped.load();
  stats.visited_tiles = mask.visited_tiles(p.heads_q);
  return stats;
}

}  // namespace spattn::reference
