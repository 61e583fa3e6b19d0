// The oracle's tile masses and selection (definition: core/include/spattn/oracle.hpp).
#include "spattn/reference/oracle.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <numeric>
#include <vector>

#include "spattn/mask_policy.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::int64_t kRowBlock = 128;  // query rows per GEMM

struct Scratch {
  RowMatrix q, s;
};

/// Adds the masses of the rows [row_begin, row_end) of query head hq to acc[0, reach).
void add_rows(const Problem& p, const TensorView& q, const RowMatrix& keys, std::int64_t b, std::int64_t hq,
              std::int64_t row_begin, std::int64_t row_end, std::int64_t limit, std::int32_t tile_k,
              std::int64_t reach, float* acc, Scratch& w) {
  const std::int64_t d = p.head_dim, nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
  const float sl = scale_log2(p.softmax_scale());
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += kRowBlock) {
    const std::int64_t rows = std::min(r0 + kRowBlock, row_end) - r0;
    w.q.resize(rows, d);
    for (std::int64_t r = 0; r < rows; ++r) load_row(q, row_offset(q, p, true, b, hq, r0 + r), d, w.q.row(r).data());
    w.s.resize(rows, limit);
    w.s.noalias() = w.q * keys.topRows(limit).transpose();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t seen = mask_policy::row_key_end(r0 + r, nq, nkv, p.causal);  // keys [0, seen)
      if (seen <= 0) continue;  // a row that sees no key has no mass
      float* x = w.s.row(r).data();
      float m = -INFINITY;
      for (std::int64_t c = 0; c < seen; ++c) {
        x[c] *= sl;
        m = x[c] > m ? x[c] : m;
      }
      for (std::int64_t c = 0; c < seen; ++c) x[c] = exp2_det(x[c] - m);
      const float l = sum_lanes8(x, static_cast<int>(seen));
      for (std::int64_t kt = 0; kt < reach; ++kt) {
        const std::int64_t lo = mask_policy::tile_begin<std::int64_t>(kt, tile_k);
        const std::int64_t hi = mask_policy::tile_end<std::int64_t>(kt, tile_k, seen);
        if (hi <= lo) break;
        acc[kt] += sum_sequential(x + lo, hi - lo) / l;
      }
    }
  }
}

}  // namespace

OracleMass oracle_tile_mass(const Problem& p, const TensorView& q, const TensorView& k, const MaskShape& shape) {
  OracleMass out;
  out.shape = shape;
  const std::int64_t rows = shape.num_rows(), tq = shape.num_q_tiles(), hm = shape.mask_heads;
  out.offset.assign(static_cast<std::size_t>(rows + 1), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    out.offset[static_cast<std::size_t>(r + 1)] = out.offset[static_cast<std::size_t>(r)] +
                                                  shape.reachable_k_tiles(r / (hm * tq), r % tq);
  out.mass.assign(static_cast<std::size_t>(out.offset.back()), 0.0f);

  // Keys in fp32, once per (sequence, KV head): every task reads them.
  const std::int64_t d = p.head_dim;
  std::vector<RowMatrix> keys(static_cast<std::size_t>(p.batch * p.heads_kv));
  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_kv, [&](std::int64_t i) {
    const std::int64_t b = i / p.heads_kv, h = i % p.heads_kv, n = p.seqlen_kv_of(b);
    RowMatrix& m = keys[static_cast<std::size_t>(i)];
    m.resize(n, d);
    for (std::int64_t j = 0; j < n; ++j) load_row(k, row_offset(k, p, false, b, h, j), d, m.row(j).data());
  });

  const bool per_query_head = shape.mask_heads == p.heads_q;
  const std::int64_t group = per_query_head ? 1 : p.heads_q / p.heads_kv;
  out.heads_per_row = group;
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 1), [&](const tbb::blocked_range<std::int64_t>& range) {
    Scratch w;
    for (std::int64_t r = range.begin(); r != range.end(); ++r) {
      const std::int64_t reach = out.offset[static_cast<std::size_t>(r + 1)] - out.offset[static_cast<std::size_t>(r)];
      if (reach == 0) continue;
      const std::int64_t b = r / (hm * tq), h = (r / tq) % hm, t = r % tq;
      const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
      const std::int64_t first = t * shape.tile_q, end = std::min(first + shape.tile_q, nq);
      const std::int64_t limit = mask_policy::block_key_end(end - 1, nq, nkv, p.causal);
      float* acc = out.mass.data() + out.offset[static_cast<std::size_t>(r)];
      for (std::int64_t hq = h * group; hq < (h + 1) * group; ++hq)  // query heads ascending, then rows ascending
        add_rows(p, q, keys[static_cast<std::size_t>(b * p.heads_kv + p.kv_head_of(hq))], b, hq, first, end, limit,
                 shape.tile_k, reach, acc, w);
    }
  });
  return out;
}

TileMask oracle_select(const OracleMass& mass, const OracleBudget& budget) {
  const MaskShape& shape = mass.shape;
  const std::int64_t rows = shape.num_rows();
  std::vector<std::vector<std::int32_t>> kept(static_cast<std::size_t>(rows));
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 1), [&](const tbb::blocked_range<std::int64_t>& range) {
    std::vector<int> order;
    std::vector<float> sorted;
    for (std::int64_t r = range.begin(); r != range.end(); ++r) {
      const std::span<const float> m = mass.row(r);
      const int n = static_cast<int>(m.size());
      order.resize(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return selection_before(m[a], a, m[b], b); });
      sorted.resize(order.size());
      for (int i = 0; i < n; ++i) sorted[static_cast<std::size_t>(i)] = m[static_cast<std::size_t>(order[i])];
      const std::int64_t b = r / (shape.mask_heads * shape.num_q_tiles()), t = r % shape.num_q_tiles();
      const std::int64_t rows_in_tile = std::min<std::int64_t>(shape.tile_q, shape.seqlen_q_of(b) - t * shape.tile_q);
      const int keep = oracle_keep_count(sorted.data(), n, budget, rows_in_tile * mass.heads_per_row);
      auto& row = kept[static_cast<std::size_t>(r)];
      row.assign(order.begin(), order.begin() + keep);
      std::sort(row.begin(), row.end());
    }
  });
  TileMask out;
  out.shape = shape;
  out.row_ptr.reserve(static_cast<std::size_t>(rows + 1));
  out.row_ptr.push_back(0);
  for (const auto& row : kept) {
    out.tiles.insert(out.tiles.end(), row.begin(), row.end());
    out.row_ptr.push_back(static_cast<std::int64_t>(out.tiles.size()));
  }
  return out;
}

}  // namespace spattn::reference
