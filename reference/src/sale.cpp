#include "spattn/reference/sale.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "spattn/error.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Quantizes rows with a scale per group; group_of(row) gives a group id, rows of one group share amax.
template <class GroupOf>
SaleQuantized quantize(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range, GroupOf group_of) {
  SaleQuantized out;
  out.codes.resize(static_cast<std::size_t>(n * d));
  out.scale.assign(static_cast<std::size_t>(n), 0.0f);
  std::vector<float> amax(static_cast<std::size_t>(n), 0.0f);  // indexed by group id (< n)
  for (std::int64_t r = 0; r < n; ++r) {
    float& a = amax[static_cast<std::size_t>(group_of(r))];
    for (std::int64_t e = 0; e < d; ++e) a = std::max(a, std::fabs(rows[static_cast<std::size_t>(r * d + e)]));
  }
  for (std::int64_t r = 0; r < n; ++r) {
    const float a = amax[static_cast<std::size_t>(group_of(r))];
    const float inv = sale::group_inv_scale(a, range);
    out.scale[static_cast<std::size_t>(r)] = sale::group_scale(a, range);
    for (std::int64_t e = 0; e < d; ++e)
      out.codes[static_cast<std::size_t>(r * d + e)] =
          static_cast<std::int8_t>(sale::quant_code(rows[static_cast<std::size_t>(r * d + e)], inv, range));
  }
  return out;
}

std::vector<float> rows_of(const Problem& p, const TensorView& t, bool is_q, std::int64_t b, std::int64_t h, std::int64_t n) {
  std::vector<float> rows(static_cast<std::size_t>(n * p.head_dim));
  for (std::int64_t i = 0; i < n; ++i) load_row(t, row_offset(t, p, is_q, b, h, i), p.head_dim, rows.data() + i * p.head_dim);
  return rows;
}

std::vector<float> center(std::vector<float>& rows, std::int64_t n, std::int64_t d) {
  std::vector<float> mu(static_cast<std::size_t>(d));
  sequence_mean_rows(rows.data(), n, d, mu.data());
  subtract_mean(rows.data(), n, d, mu.data());
  return mu;
}

}  // namespace

SaleQuantized sale_quantize_q(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range,
                              sale::Groups groups) {
  return quantize(rows, n, d, range, [groups](std::int64_t r) { return sale::q_group(r, groups); });
}

SaleQuantized sale_quantize_k(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range,
                              sale::Groups groups) {
  return quantize(rows, n, d, range, [groups](std::int64_t j) { return sale::k_group(j, groups); });
}

namespace {

/// One (b, h)'s Q rows, K', qmk and codes (sale_head_inputs; K' and its codes depend on the KV head only).
SaleHeadInputs head_inputs(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                           std::int64_t b, std::int64_t h) {
  const std::int64_t d = p.head_dim, nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
  SaleHeadInputs in;
  std::vector<float> qr = rows_of(p, q, true, b, h, nq);
  in.q_raw = qr;
  in.k_centred = rows_of(p, k, false, b, p.kv_head_of(h), nkv);
  const std::vector<float> mu_q = center(qr, nq, d);
  center(in.k_centred, nkv, d);
  in.qmk.resize(static_cast<std::size_t>(nkv));
  for (std::int64_t j = 0; j < nkv; ++j)
    in.qmk[static_cast<std::size_t>(j)] = dot_lanes8(mu_q.data(), in.k_centred.data() + j * d, static_cast<int>(d));
  in.q = sale_quantize_q(qr, nq, d, c.range(), c.groups);
  in.k = sale_quantize_k(in.k_centred, nkv, d, c.range(), c.groups);
  return in;
}

/// The estimator; `given`: sink-local states to threshold with instead of its own exact pass (sale_select).
SaleEstimate select(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                    const std::vector<SoftmaxState>* given) {
  p.validate();
  c.validate(p.heads_q);
  require(given == nullptr || given->size() == static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q),
          "sale_select: sink_local must hold batch·heads_q·seqlen_q states");
  const MaskShape shape = MaskShape::of(p, sale::kBlockQ, sale::kBlockK);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const std::int64_t nl = c.local_window / sale::kBlockK;
  const float sl = scale_log2(p.softmax_scale());
  SaleEstimate out;
  out.margins.assign(static_cast<std::size_t>(p.batch * p.heads_q * tq * tk), NAN);
  if (given) out.sink_local = *given;
  else out.sink_local.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), SoftmaxState{});
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  std::vector<std::int64_t> cand_count(static_cast<std::size_t>(p.batch * p.heads_q), 0), sel_count(cand_count.size(), 0);

  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_q, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.heads_q, h = bh % p.heads_q;
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    const float tau = c.tau_of(h);
    const SaleHeadInputs in = head_inputs(p, q, k, c, b, h);
    const std::vector<float>& q_raw = in.q_raw;
    const std::vector<float>& qmk = in.qmk;
    const SaleQuantized &qq = in.q, &kq = in.k;
    RowMatrix kcodes(nkv, d);
    for (std::int64_t j = 0; j < nkv; ++j)
      for (std::int64_t e = 0; e < d; ++e) kcodes(j, e) = kq.codes[static_cast<std::size_t>(j * d + e)];
    const Eigen::Map<const RowMatrix> kexact(in.k_centred.data(), nkv, d);

    std::vector<float> x, w, thr(sale::kBlockQ);
    for (std::int64_t blk = 0; blk < tq; ++blk) {
      const std::int64_t first = blk * sale::kBlockQ;
      if (first >= nq) break;
      const std::int64_t last = std::min(first + sale::kBlockQ, nq) - 1, nrows = last - first + 1;
      const std::int64_t n_max = shape.reachable_k_tiles(b, blk);
      const std::int64_t segs = sale::candidate_segments(n_max, nl, tau);
      const std::int64_t cand_end = sale::candidate_end(segs);  // candidates are key blocks [1, cand_end)
      auto& row = rows[static_cast<std::size_t>(bh * tq + blk)];
      row.push_back(0);
      for (std::int64_t j = cand_end; j < n_max; ++j) row.push_back(static_cast<std::int32_t>(j));
      if (segs == 0) {  // dense head or a short row: everything is sink/local
        for (std::int64_t j = 1; j < cand_end; ++j) row.push_back(static_cast<std::int32_t>(j));
        continue;
      }
      // Exact sink-local statistics (or the given ones) and raw-logit thresholds per row.
      for (std::int64_t r = 0; r < nrows; ++r) {
        const auto at = static_cast<std::size_t>(bh * p.seqlen_q + first + r);
        if (given) {
          thr[static_cast<std::size_t>(r)] = sale::threshold((*given)[at], tau, sl);
          continue;
        }
        const AnchorRegion region = sale::sink_local_region(p.visible_keys(b, first + r), cand_end);
        const Eigen::Map<const Eigen::RowVectorXf> qi(q_raw.data() + (first + r) * d, d);
        x.clear();
        for (std::int64_t j = 0; j < region.sink_end; ++j) x.push_back(qi.dot(kexact.row(j)) * sl);
        for (std::int64_t j = region.local_begin; j < region.local_end; ++j) x.push_back(qi.dot(kexact.row(j)) * sl);
        SoftmaxState st;
        w.resize(x.size());
        OnlineSoftmax::update(st, x.data(), static_cast<int>(x.size()), w.data());
        thr[static_cast<std::size_t>(r)] = sale::threshold(st, tau, sl);
        out.sink_local[at] = st;
      }
      // Candidate blocks: integer products of the codes (exact in fp32: |acc| ≤ 127²·256 < 2^24).
      RowMatrix qcodes(nrows, d);
      for (std::int64_t r = 0; r < nrows; ++r)
        for (std::int64_t e = 0; e < d; ++e) qcodes(r, e) = qq.codes[static_cast<std::size_t>((first + r) * d + e)];
      const std::int64_t ckeys = std::min(cand_end * sale::kBlockK, nkv) - sale::kBlockK;
      const RowMatrix acc = qcodes * kcodes.middleRows(sale::kBlockK, ckeys).transpose();
      for (std::int64_t jb = 1; jb < cand_end; ++jb) {
        float margin = -INFINITY;
        for (std::int64_t r = 0; r < nrows; ++r) {
          const std::int64_t visible = p.visible_keys(b, first + r);
          const float sq = qq.scale[static_cast<std::size_t>(first + r)];
          for (int g = 0; g < 4; ++g) {  // the four K scale groups of the block: one dequantization each
            sale::GroupMax group;
            for (int a = 0; a < 4; ++a)
              for (int cc = 0; cc < 2; ++cc) {
                const std::int64_t j = sale::group_key(jb, a, g, cc);
                if (j >= nkv || j >= visible) continue;
                group.add(static_cast<std::int64_t>(acc(r, j - sale::kBlockK)), qmk[static_cast<std::size_t>(j)], sq,
                          kq.scale[static_cast<std::size_t>(j)]);
              }
            margin = std::max(margin, group.estimate() - thr[static_cast<std::size_t>(r)]);
          }
        }
        out.margins[static_cast<std::size_t>((bh * tq + blk) * tk + jb)] = margin;
        ++cand_count[static_cast<std::size_t>(bh)];
        if (sale::selected(margin)) {
          row.push_back(static_cast<std::int32_t>(jb));
          ++sel_count[static_cast<std::size_t>(bh)];
        }
      }
    }
  });
  out.mask = TileMask::from_rows(shape, std::move(rows));
  for (std::size_t i = 0; i < cand_count.size(); ++i) out.candidates += cand_count[i], out.selected += sel_count[i];
  return out;
}

}  // namespace

SaleHeadInputs sale_head_inputs(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                                std::int64_t b, std::int64_t h) {
  p.validate();
  c.validate(p.heads_q);
  require(b >= 0 && b < p.batch && h >= 0 && h < p.heads_q, "sale_head_inputs: (b, h) outside the problem");
  return head_inputs(p, q, k, c, b, h);
}

SaleEstimate sale_estimate(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c) {
  return select(p, q, k, c, nullptr);
}

SaleEstimate sale_select(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                         const std::vector<SoftmaxState>& sink_local) {
  return select(p, q, k, c, &sink_local);
}

}  // namespace spattn::reference
