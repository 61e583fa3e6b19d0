#include "spattn/reference/sparge.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/topcdf.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

struct Pooled {
  std::vector<float> mean;  ///< [blocks][d]
  std::vector<float> sim;   ///< [blocks]
};

/// Block means (valid rows, fp32, sequential) and self-similarities of rows [n][d].
Pooled pool(const std::vector<float>& rows, std::int64_t n, std::int64_t d, std::int64_t block) {
  const std::int64_t blocks = (n + block - 1) / block;
  Pooled p;
  p.mean.assign(static_cast<std::size_t>(blocks * d), 0.0f);
  p.sim.resize(static_cast<std::size_t>(blocks));
  std::vector<float> scratch;
  for (std::int64_t j = 0; j < blocks; ++j) {
    const std::int64_t first = j * block, count = std::min(block, n - first);
    mean_rows(rows.data() + first * d, count, d, p.mean.data() + j * d);
    p.sim[static_cast<std::size_t>(j)] = sparge::self_similarity(rows.data() + first * d, count, d, scratch);
  }
  return p;
}

std::vector<float> load_rows(const Problem& p, const TensorView& t, bool is_q, std::int64_t b, std::int64_t h,
                             std::int64_t n) {
  std::vector<float> rows(static_cast<std::size_t>(n * p.head_dim));
  for (std::int64_t i = 0; i < n; ++i) load_row(t, row_offset(t, p, is_q, b, h, i), p.head_dim, rows.data() + i * p.head_dim);
  return rows;
}

}  // namespace

SpargeEstimate sparge_estimate(const Problem& p, const TensorView& q, const TensorView& k, const sparge::Config& c) {
  p.validate();
  c.validate(p.heads_q);
  const MaskShape shape = MaskShape::of(p, c.block_q, c.block_k);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const float sl = scale_log2(p.softmax_scale());
  SpargeEstimate out;
  out.q_similarity.assign(static_cast<std::size_t>(p.batch * p.heads_q * tq), 0.0f);
  out.k_similarity.assign(static_cast<std::size_t>(p.batch * p.heads_kv * tk), 0.0f);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));

  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_kv, [&](std::int64_t bk) {
    const std::int64_t b = bk / p.heads_kv, hkv = bk % p.heads_kv;
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b), offset = p.causal_offset(b);
    // Mean-centred keys (softmax-invariant per row), pooled per key block.
    std::vector<float> keys = load_rows(p, k, false, b, hkv, nkv), mu(static_cast<std::size_t>(d));
    sequence_mean_rows(keys.data(), nkv, d, mu.data());
    subtract_mean(keys.data(), nkv, d, mu.data());
    const Pooled kp = pool(keys, nkv, d, c.block_k);
    std::copy(kp.sim.begin(), kp.sim.end(), out.k_similarity.begin() + bk * tk);
    const std::int64_t blocks_k = static_cast<std::int64_t>(kp.sim.size());

    std::vector<float> x(static_cast<std::size_t>(blocks_k)), prob(x.size());
    std::vector<std::uint8_t> valid(x.size()), sel(x.size());
    std::vector<int> order;
    for (std::int64_t h = hkv * p.group_size(); h < (hkv + 1) * p.group_size(); ++h) {
      const Pooled qp = pool(load_rows(p, q, true, b, h, nq), nq, d, c.block_q);
      std::copy(qp.sim.begin(), qp.sim.end(), out.q_similarity.begin() + (b * p.heads_q + h) * tq);
      const float theta = c.theta_of(h), tau = c.tau_of(h);
      for (std::int64_t i = 0; i * c.block_q < nq; ++i) {
        auto& row = rows[static_cast<std::size_t>((b * p.heads_q + h) * tq + i)];
        const std::int64_t reach = shape.reachable_k_tiles(b, i);
        std::vector<std::uint8_t> keep(static_cast<std::size_t>(reach), 0);
        if (sparge::row_forced(c.dense_head(h), sparge::self_similar(qp.sim[static_cast<std::size_t>(i)], theta)))
          std::fill(keep.begin(), keep.end(), 1);
        float m = -INFINITY;
        int n_valid = 0;
        for (std::int64_t j = 0; j < blocks_k; ++j) {
          const bool k_similar = sparge::self_similar(kp.sim[static_cast<std::size_t>(j)], theta);
          const auto u = static_cast<std::size_t>(j);
          valid[u] = sparge::candidate(j, reach, k_similar);
          if (j < reach && sparge::column_forced(k_similar)) keep[u] = 1;
          x[u] = valid[u] ? sparge::pooled_score(qp.mean.data() + i * d, kp.mean.data() + j * d, static_cast<int>(d), sl)
                          : -INFINITY;
          if (valid[u]) m = std::max(m, x[u]), ++n_valid;
        }
        if (sparge::scores_usable(n_valid, m)) {
          for (std::int64_t j = 0; j < blocks_k; ++j)
            prob[static_cast<std::size_t>(j)] = valid[static_cast<std::size_t>(j)] ? selection_weight(x[static_cast<std::size_t>(j)], m) : 0.0f;
          if (c.topk > 0.0f) {
            const std::int64_t kk = sparge::topk_count(c.topk, reach);
            std::vector<int> idx;
            for (std::int64_t j = 0; j < blocks_k; ++j)
              if (valid[static_cast<std::size_t>(j)]) idx.push_back(static_cast<int>(j));
            std::sort(idx.begin(), idx.end(), [&](int a, int bb) {
              return selection_before(prob[static_cast<std::size_t>(a)], a, prob[static_cast<std::size_t>(bb)], bb);
            });
            for (std::int64_t t = 0; t < std::min<std::int64_t>(kk, static_cast<std::int64_t>(idx.size())); ++t)
              keep[static_cast<std::size_t>(idx[static_cast<std::size_t>(t)])] = 1;
          } else {
            top_cdf(prob.data(), valid.data(), static_cast<int>(blocks_k), {tau, 1, false}, sel.data(), order);
            for (std::int64_t j = 0; j < reach; ++j) keep[static_cast<std::size_t>(j)] |= sel[static_cast<std::size_t>(j)];
          }
        } else if (n_valid > 0) {  // NaN/Inf pooled scores: dense row
          std::fill(keep.begin(), keep.end(), 1);
        }
        if (p.causal) {
          const std::int64_t first = i * c.block_q, last = std::min((i + 1) * c.block_q, nq) - 1;
          const sparge::BlockRange diag = sparge::diagonal_blocks(first, last, offset, c.block_k, reach);
          for (std::int64_t j = diag.first; j <= diag.last; ++j) keep[static_cast<std::size_t>(j)] = 1;
        }
        if (c.attention_sink && reach > 0) keep[0] = 1;
        for (std::int64_t j = 0; j < reach; ++j)
          if (keep[static_cast<std::size_t>(j)]) row.push_back(static_cast<std::int32_t>(j));
      }
    }
  });
  out.mask = TileMask::from_rows(shape, std::move(rows));
  return out;
}

}  // namespace spattn::reference
