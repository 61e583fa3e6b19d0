#include "spattn/reference/executor.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "tensor_rows.hpp"

namespace spattn::reference {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::int64_t kRowBlock = 128;   // query rows per task
constexpr std::int64_t kKeyChunk = 256;  // keys per GEMM chunk

struct RowBlock {
  std::int64_t b, hq, tile, row_begin, row_end;
};

/// Keys a row block visits, ascending: the kept tiles' keys below `limit`.
void collect_keys(const TileMask& mask, std::int64_t mh, const RowBlock& blk, std::int64_t limit,
                  std::vector<std::int64_t>& keys) {
  keys.clear();
  const std::int64_t tk = mask.shape.tile_k;
  for (std::int32_t tile : mask.row(blk.b, mh, blk.tile)) {
    const std::int64_t lo = std::int64_t{tile} * tk;
    const std::int64_t hi = std::min(lo + tk, limit);
    for (std::int64_t j = lo; j < hi; ++j) keys.push_back(j);
  }
}

struct Scratch {
  RowMatrix q, k, v, s, acc;
  std::vector<SoftmaxState> state;
  std::vector<std::int64_t> keys;
  std::vector<float> out;
};

std::int64_t run_block(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TileMask& mask, const TensorView& o, float* lse, const RowBlock& blk,
                       Scratch& w) {
  const std::int64_t d = p.head_dim, dv = p.dim_v();
  const std::int64_t rows = blk.row_end - blk.row_begin;
  const std::int64_t hkv = p.kv_head_of(blk.hq);
  const std::int64_t mh = mask.mask_head_of(blk.hq, p.heads_q);
  const std::int64_t nkv = p.seqlen_kv_of(blk.b);
  const std::int64_t offset = p.causal_offset(blk.b);
  const float sl = scale_log2(p.softmax_scale());

  w.q.resize(rows, d);
  for (std::int64_t r = 0; r < rows; ++r)
    load_row(q, row_offset(q, p, true, blk.b, blk.hq, blk.row_begin + r), d, w.q.row(r).data());
  w.acc.setZero(rows, dv);
  w.state.assign(static_cast<std::size_t>(rows), SoftmaxState{});

  // Keys beyond the last row's diagonal (causal) or the sequence are never visited.
  const std::int64_t limit = p.causal ? std::min(blk.row_end - 1 + offset + 1, nkv) : nkv;
  collect_keys(mask, mh, blk, limit, w.keys);
  const auto total = static_cast<std::int64_t>(w.keys.size());

  for (std::int64_t c0 = 0; c0 < total; c0 += kKeyChunk) {
    const std::int64_t n = std::min(kKeyChunk, total - c0);
    w.k.resize(n, d);
    w.v.resize(n, dv);
    for (std::int64_t c = 0; c < n; ++c) {
      const std::int64_t j = w.keys[static_cast<std::size_t>(c0 + c)];
      load_row(k, row_offset(k, p, false, blk.b, hkv, j), d, w.k.row(c).data());
      load_row(v, row_offset(v, p, false, blk.b, hkv, j), dv, w.v.row(c).data());
    }
    w.s.resize(rows, n);
    w.s.noalias() = w.q * w.k.transpose();
    const std::int64_t last_key = w.keys[static_cast<std::size_t>(c0 + n - 1)];
    for (std::int64_t r = 0; r < rows; ++r) {
      float* x = w.s.row(r).data();
      for (std::int64_t c = 0; c < n; ++c) x[c] *= sl;
      const std::int64_t visible = blk.row_begin + r + offset + 1;  // keys j < visible (causal)
      if (p.causal && last_key >= visible)
        for (std::int64_t c = 0; c < n; ++c)
          if (w.keys[static_cast<std::size_t>(c0 + c)] >= visible) x[c] = -INFINITY;
      const float alpha = OnlineSoftmax::update(w.state[static_cast<std::size_t>(r)], x, static_cast<int>(n), x);
      if (alpha != 1.0f) w.acc.row(r) *= alpha;
    }
    w.acc.noalias() += w.s * w.v;
  }

  std::int64_t empty = 0;
  w.out.resize(static_cast<std::size_t>(dv));
  for (std::int64_t r = 0; r < rows; ++r) {
    const SoftmaxState& st = w.state[static_cast<std::size_t>(r)];
    const float lse2 = OnlineSoftmax::finalize(st, w.acc.row(r).data(), static_cast<int>(dv), w.out.data());
    if (st.l == 0.0f) ++empty;
    const std::int64_t n = blk.row_begin + r;
    store_row(o, row_offset(o, p, true, blk.b, blk.hq, n), dv, w.out.data());
    if (lse != nullptr) lse[(blk.b * p.heads_q + blk.hq) * p.seqlen_q + n] = lse2 * kLn2;
  }
  return empty;
}

}  // namespace

AttendStats attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, float* lse) {
  std::vector<RowBlock> blocks;
  const std::int64_t tq = mask.shape.tile_q;
  std::int64_t visited = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t nq = p.seqlen_q_of(b);
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t t = 0; t * tq < nq; ++t) {
        visited += static_cast<std::int64_t>(mask.row(b, mask.mask_head_of(h, p.heads_q), t).size());
        const std::int64_t end = std::min((t + 1) * tq, nq);
        for (std::int64_t r0 = t * tq; r0 < end; r0 += kRowBlock)
          blocks.push_back({b, h, t, r0, std::min(r0 + kRowBlock, end)});
      }
  }
  std::atomic<std::int64_t> empty{0};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, blocks.size(), 1),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      Scratch scratch;
                      std::int64_t local = 0;
                      for (std::size_t i = range.begin(); i != range.end(); ++i)
                        local += run_block(p, q, k, v, mask, o, lse, blocks[i], scratch);
                      empty += local;
                    });
  AttendStats stats;
  stats.backend = "reference";
  stats.empty_rows = empty.load();
  stats.visited_tiles = visited;
  return stats;
}

}  // namespace spattn::reference
