#include "spattn/reference/bfla.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/topcdf.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Rows of (b, h) as fp32, zero-padded to whole groups: [⌈n/g⌉·g][D].
RowMatrix padded_rows(const Problem& p, const TensorView& t, bool is_q, std::int64_t b, std::int64_t h,
                      std::int64_t n, std::int64_t g) {
  const std::int64_t groups = (n + g - 1) / g;
  RowMatrix m = RowMatrix::Zero(groups * g, p.head_dim);
  for (std::int64_t i = 0; i < n; ++i) load_row(t, row_offset(t, p, is_q, b, h, i), p.head_dim, m.row(i).data());
  return m;
}

/// Flattened-group products: one GEMM of [groups_q × g·D] by [g·D × groups_k] (row-major rows are the
/// flattened groups, token-major as in the paper).
RowMatrix group_products(const RowMatrix& q, const RowMatrix& k, std::int64_t g, std::int64_t d) {
  const Eigen::Map<const RowMatrix> qf(q.data(), q.rows() / g, g * d), kf(k.data(), k.rows() / g, g * d);
  return qf * kf.transpose();
}

}  // namespace

std::vector<float> bfla_group_scores(const Problem& p, const TensorView& q, const TensorView& k,
                                     const bfla::Config& c, std::int64_t b, std::int64_t hq) {
  const RowMatrix s = group_products(padded_rows(p, q, true, b, hq, p.seqlen_q_of(b), c.group),
                                     padded_rows(p, k, false, b, p.kv_head_of(hq), p.seqlen_kv_of(b), c.group),
                                     c.group, p.head_dim);
  return {s.data(), s.data() + s.size()};
}

TileMask bfla_mask_from_scores(const Problem& p, const bfla::Config& c, bool per_query_head, const BflaScores& scores) {
  c.validate();
  p.validate();
  const std::int64_t bs = c.block, g = c.group, groups_per_block = bs / g;
  const MaskShape shape = MaskShape::of(p, c.tile_q(), c.tile, !per_query_head);
  const std::int64_t tq = shape.num_q_tiles();
  const std::int64_t lc = bfla::local_blocks(c.n_local, c.tile, c.block);
  const float sl = scale_log2(p.softmax_scale());
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));

  tbb::parallel_for(std::int64_t{0}, p.batch * shape.mask_heads, [&](std::int64_t bm) {
    const std::int64_t b = bm / shape.mask_heads, mh = bm % shape.mask_heads;
    const std::int64_t hkv = per_query_head ? p.kv_head_of(mh) : mh;
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    const std::int64_t lq = (nq + bs - 1) / bs, lkv = (nkv + bs - 1) / bs;
    if (lkv == 0) return;  // a sequence without keys (variable-length batch): its rows keep nothing (found by fuzz_api)
    auto jc = [&](std::int64_t i) { return bfla::causal_blocks(i, nq, nkv, bs, p.causal); };
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(lq * lkv), 0);
    const std::int64_t gq = (nq + g - 1) / g, gk = (nkv + g - 1) / g;
    std::vector<float> x(static_cast<std::size_t>(lkv)), prob(static_cast<std::size_t>(lkv));
    std::vector<std::uint8_t> valid(static_cast<std::size_t>(lkv)), sel(static_cast<std::size_t>(lkv));
    std::vector<int> order;
    std::vector<float> s(static_cast<std::size_t>(gq * gk));
    const std::int64_t h_first = per_query_head ? mh : hkv * p.group_size();
    const std::int64_t h_end = per_query_head ? mh + 1 : h_first + p.group_size();
    for (std::int64_t hq = h_first; hq < h_end; ++hq) {
      scores(b, hq, s.data());
      auto S = [&](std::int64_t u, std::int64_t v) { return s[static_cast<std::size_t>(u * gk + v)]; };
      for (std::int64_t i = 0; i < lq; ++i) {
        const std::int64_t reach = jc(i);
        float m = -INFINITY;
        bool finite = true;
        for (std::int64_t j = 0; j < lkv; ++j) {
          valid[static_cast<std::size_t>(j)] = j < reach;
          float best = -INFINITY;
          for (std::int64_t u = i * groups_per_block; u < bfla::groups_end(i, groups_per_block, gq); ++u)
            for (std::int64_t v = j * groups_per_block; v < bfla::groups_end(j, groups_per_block, gk); ++v)
              best = std::max(best, S(u, v));
          x[static_cast<std::size_t>(j)] = j < reach ? best * sl : -INFINITY;
          if (j < reach) {
            finite = finite && std::isfinite(x[static_cast<std::size_t>(j)]);
            m = std::max(m, x[static_cast<std::size_t>(j)]);
          }
        }
        std::uint8_t* row_keep = keep.data() + i * lkv;
        if (bfla::keep_all_blocks(finite, c.gamma)) {
          for (std::int64_t j = 0; j < reach; ++j) row_keep[j] = 1;
          continue;
        }
        for (std::int64_t j = 0; j < lkv; ++j)
          prob[static_cast<std::size_t>(j)] = j < reach ? selection_weight(x[static_cast<std::size_t>(j)], m) : 0.0f;
        if (c.gamma > 0.0f) {
          top_cdf(prob.data(), valid.data(), static_cast<int>(lkv), {c.gamma, 1, true}, sel.data(), order);
          for (std::int64_t j = 0; j < lkv; ++j) row_keep[j] |= sel[static_cast<std::size_t>(j)];
        }
        if (c.prob_threshold <= 1.0f) {
          const float z = sum_sequential(prob.data(), lkv);
          for (std::int64_t j = 0; j < reach; ++j)
            if (bfla::above_prob_threshold(prob[static_cast<std::size_t>(j)], z, c.prob_threshold)) row_keep[j] = 1;
        }
        if (c.keep_ratio > 0.0f || c.min_keep_blocks > 0) {
          const std::int64_t kk = bfla::topk_floor(c.min_keep_blocks, c.keep_ratio, lkv);
          std::vector<int> idx(static_cast<std::size_t>(reach));
          std::iota(idx.begin(), idx.end(), 0);
          std::sort(idx.begin(), idx.end(), [&](int a, int bb) {
            return selection_before(x[static_cast<std::size_t>(a)], a, x[static_cast<std::size_t>(bb)], bb);
          });
          for (std::int64_t t = 0; t < std::min(kk, reach); ++t) row_keep[idx[static_cast<std::size_t>(t)]] = 1;
        }
      }
    }
    // Sink and local band (anchored on every KV block the query block overlaps), causal AND.
    for (std::int64_t i = 0; i < lq; ++i) {
      std::uint8_t* row_keep = keep.data() + i * lkv;
      const std::int64_t reach = jc(i);
      const bfla::Band band = bfla::band(i, nq, nkv, bs, lc);
      row_keep[0] = 1;
      for (std::int64_t j = band.first; j <= band.last; ++j) row_keep[j] = 1;
      for (std::int64_t j = reach; j < lkv; ++j) row_keep[j] = 0;
    }
    auto rescue = [&](std::vector<std::uint8_t>& bits, std::int64_t rows_n, std::int64_t cols, auto reach_of) {
      if (c.eta > 0)
        for (std::int64_t i = 0; i < rows_n; ++i)
          for (std::int64_t j = 0; j < reach_of(i); ++j)
            if (!bits[static_cast<std::size_t>(i * cols + j)] && bfla::stride_rescued(i, j, c.seed, c.eta))
              bits[static_cast<std::size_t>(i * cols + j)] = 2;  // rescued (kept), not "dropped" for the next rule
      if (c.rho > 0.0f)
        for (std::int64_t i = 0; i < rows_n; ++i)
          for (std::int64_t j = 0; j < reach_of(i); ++j)
            if (!bits[static_cast<std::size_t>(i * cols + j)] && bfla::random_rescued(i, j, hkv, c.seed, c.rho))
              bits[static_cast<std::size_t>(i * cols + j)] = 2;
    };
    if (c.rescue_grid == bfla::RescueGrid::coarse) rescue(keep, lq, lkv, jc);
    // Expansion to the executor's tiles (tile rows/columns inside one coarse block share its decision).
    const std::int64_t tiles_q = (nq + c.tile_q() - 1) / c.tile_q(), tiles_k = (nkv + c.tile - 1) / c.tile;
    std::vector<std::uint8_t> fine(static_cast<std::size_t>(tiles_q * tiles_k));
    for (std::int64_t r = 0; r < tiles_q; ++r)
      for (std::int64_t t = 0; t < tiles_k; ++t)
        fine[static_cast<std::size_t>(r * tiles_k + t)] =
            keep[static_cast<std::size_t>(bfla::coarse_q(r, c.tile_q(), c.block) * lkv + bfla::coarse_k(t, c.tile, c.block))];
    if (c.rescue_grid == bfla::RescueGrid::tile)
      rescue(fine, tiles_q, tiles_k, [&](std::int64_t r) { return shape.reachable_k_tiles(b, r); });
    for (std::int64_t r = 0; r < tiles_q; ++r) {
      auto& row = rows[static_cast<std::size_t>((b * shape.mask_heads + mh) * tq + r)];
      for (std::int64_t t = 0; t < tiles_k; ++t)
        if (fine[static_cast<std::size_t>(r * tiles_k + t)]) row.push_back(static_cast<std::int32_t>(t));
    }
  });
  return TileMask::from_rows(shape, std::move(rows));
}

TileMask bfla_estimate(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                       bool per_query_head) {
  c.validate();
  p.validate();
  return bfla_mask_from_scores(p, c, per_query_head, [&](std::int64_t b, std::int64_t hq, float* out) {
    const std::int64_t g = c.group, nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    const RowMatrix s = group_products(padded_rows(p, q, true, b, hq, nq, g),
                                       padded_rows(p, k, false, b, p.kv_head_of(hq), nkv, g), g, p.head_dim);
    std::copy(s.data(), s.data() + s.size(), out);
  });
}

}  // namespace spattn::reference
