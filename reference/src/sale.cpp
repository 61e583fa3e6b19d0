#include "spattn/reference/sale.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "spattn/error.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/reference/executor.hpp"
#include "tensor_rows.hpp"

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
    const float inv = a > 0.0f ? static_cast<float>(range) / a : 0.0f;
    out.scale[static_cast<std::size_t>(r)] = a > 0.0f ? a / static_cast<float>(range) : 0.0f;
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
  std::vector<float> mu(static_cast<std::size_t>(d), 0.0f);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t e = 0; e < d; ++e) mu[static_cast<std::size_t>(e)] += rows[static_cast<std::size_t>(r * d + e)];
  for (auto& m : mu) m /= static_cast<float>(n);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t e = 0; e < d; ++e) rows[static_cast<std::size_t>(r * d + e)] -= mu[static_cast<std::size_t>(e)];
  return mu;
}

}  // namespace

SaleQuantized sale_quantize_q(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range) {
  return quantize(rows, n, d, range, [](std::int64_t r) { return (r / 16) * 16 + r % 8; });
}

SaleQuantized sale_quantize_k(const std::vector<float>& rows, std::int64_t n, std::int64_t d, int range) {
  return quantize(rows, n, d, range, [](std::int64_t r) { return (r / 32) * 32 + (r % 8) / 2; });
}

SaleEstimate sale_estimate(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c) {
  p.validate();
  c.validate(p.heads_q);
  const MaskShape shape = MaskShape::of(p, sale::kBlockQ, sale::kBlockK);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles(), d = p.head_dim;
  const std::int64_t nl = c.local_window / sale::kBlockK;
  const float sl = scale_log2(p.softmax_scale());
  SaleEstimate out;
  out.margins.assign(static_cast<std::size_t>(p.batch * p.heads_q * tq * tk), NAN);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  std::vector<std::int64_t> cand_count(static_cast<std::size_t>(p.batch * p.heads_q), 0), sel_count(cand_count.size(), 0);

  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_q, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.heads_q, h = bh % p.heads_q, hkv = p.kv_head_of(h);
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    const float tau = c.tau_of(h);
    std::vector<float> qr = rows_of(p, q, true, b, h, nq), kr = rows_of(p, k, false, b, hkv, nkv);
    const std::vector<float> q_raw = qr;
    const std::vector<float> mu_q = center(qr, nq, d);
    center(kr, nkv, d);
    std::vector<float> qmk(static_cast<std::size_t>(nkv));
    for (std::int64_t j = 0; j < nkv; ++j) qmk[static_cast<std::size_t>(j)] = dot_lanes8(mu_q.data(), kr.data() + j * d, static_cast<int>(d));
    const SaleQuantized qq = sale_quantize_q(qr, nq, d, c.range()), kq = sale_quantize_k(kr, nkv, d, c.range());
    RowMatrix kcodes(nkv, d);
    for (std::int64_t j = 0; j < nkv; ++j)
      for (std::int64_t e = 0; e < d; ++e) kcodes(j, e) = kq.codes[static_cast<std::size_t>(j * d + e)];
    const Eigen::Map<const RowMatrix> kexact(kr.data(), nkv, d);

    std::vector<float> x, w, thr(sale::kBlockQ);
    for (std::int64_t blk = 0; blk < tq; ++blk) {
      const std::int64_t first = blk * sale::kBlockQ;
      if (first >= nq) break;
      const std::int64_t last = std::min(first + sale::kBlockQ, nq) - 1, nrows = last - first + 1;
      const std::int64_t n_max = shape.reachable_k_tiles(b, blk);
      const std::int64_t segs = tau < 1e-5f ? 0 : std::max<std::int64_t>(0, (n_max - 1 - nl) / sale::kSegment);
      const std::int64_t cand_end = 1 + sale::kSegment * segs;  // candidates are key blocks [1, cand_end)
      auto& row = rows[static_cast<std::size_t>(bh * tq + blk)];
      row.push_back(0);
      for (std::int64_t j = cand_end; j < n_max; ++j) row.push_back(static_cast<std::int32_t>(j));
      if (segs == 0) {  // dense head or a short row: everything is sink/local
        for (std::int64_t j = 1; j < cand_end; ++j) row.push_back(static_cast<std::int32_t>(j));
        continue;
      }
      // Exact sink-local statistics and raw-logit thresholds per row.
      const std::int64_t local_begin = cand_end * sale::kBlockK;
      for (std::int64_t r = 0; r < nrows; ++r) {
        const std::int64_t visible = p.visible_keys(b, first + r);
        const Eigen::Map<const Eigen::RowVectorXf> qi(q_raw.data() + (first + r) * d, d);
        x.clear();
        for (std::int64_t j = 0; j < std::min<std::int64_t>(sale::kBlockK, visible); ++j) x.push_back(qi.dot(kexact.row(j)) * sl);
        for (std::int64_t j = local_begin; j < visible; ++j) x.push_back(qi.dot(kexact.row(j)) * sl);
        SoftmaxState st;
        w.resize(x.size());
        OnlineSoftmax::update(st, x.data(), static_cast<int>(x.size()), w.data());
        thr[static_cast<std::size_t>(r)] = (st.m + log2_det(tau * st.l)) / sl;
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
            std::int64_t best = std::numeric_limits<std::int64_t>::min();
            float best_exact = -INFINITY;
            float sk = 0.0f;
            for (std::int64_t a = 0; a < 4; ++a)
              for (std::int64_t cc = 0; cc < 2; ++cc) {
                const std::int64_t j = jb * sale::kBlockK + 8 * a + 2 * g + cc;
                if (j >= nkv || j >= visible) continue;
                sk = kq.scale[static_cast<std::size_t>(j)];
                const float unit = sq * sk;
                if (unit > 0.0f) {
                  const double bias = std::nearbyint(static_cast<double>(qmk[static_cast<std::size_t>(j)]) / unit);
                  const auto bi = static_cast<std::int64_t>(std::clamp(bias, -1073741824.0, 1073741824.0));
                  best = std::max(best, static_cast<std::int64_t>(acc(r, j - sale::kBlockK)) + bi);
                } else {
                  best_exact = std::max(best_exact, qmk[static_cast<std::size_t>(j)]);  // q' = 0 or k' = 0: bias only
                }
              }
            float est = best_exact;
            if (best != std::numeric_limits<std::int64_t>::min()) est = std::max(est, (sq * sk) * static_cast<float>(best));
            margin = std::max(margin, est - thr[static_cast<std::size_t>(r)]);
          }
        }
        out.margins[static_cast<std::size_t>((bh * tq + blk) * tk + jb)] = margin;
        ++cand_count[static_cast<std::size_t>(bh)];
        if (margin >= 0.0f) {
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

sale::Params sale_calibrate(const std::vector<Workload>& samples, const sale::Config& base, float theta,
                            const std::function<void(double, const std::string&)>& progress) {
  require(!samples.empty(), "calibrate: no calibration inputs");
  require(theta > 0.0f, "calibrate theta: must be > 0, got ", theta);
  const Problem& p0 = samples[0].problem;
  sale::Params params;
  params.bits = base.bits;
  params.local_window = base.local_window;
  params.theta = theta;
  for (std::int64_t h = 0; h < p0.heads_q; ++h) {
    float tau = 0.008f;
    while (tau > 0.0f) {
      if (progress) progress(static_cast<double>(h) / static_cast<double>(p0.heads_q), "head " + std::to_string(h + 1));
      bool ok = true;
      for (const Workload& w : samples) {
        Problem one = w.problem;
        one.heads_q = one.heads_kv = 1;
        const TensorView qv = head_view(w.q, h), kv = head_view(w.k, w.problem.kv_head_of(h)),
                         vv = head_view(w.v, w.problem.kv_head_of(h));
        sale::Config cfg = base;
        cfg.tau = {tau};
        const TileMask mask = sale_estimate(one, qv, kv, cfg).mask;
        HostTensor o(DType::f32, 1, 1, one.seqlen_q, one.dim_v()), d(DType::f32, 1, 1, one.seqlen_q, one.dim_v());
        attend(one, qv, kv, vv, mask, o.view());
        attend(one, qv, kv, vv, TileMask::dense(mask.shape), d.view());
        double err = 0;
        const auto a = o.to_float(), bb = d.to_float();
        for (std::size_t i = 0; i < a.size(); ++i) err += std::fabs(double(a[i]) - bb[i]);
        if (!(err / static_cast<double>(one.seqlen_q) < theta)) ok = false;
      }
      if (ok) break;
      tau *= 0.5f;
      if (tau <= 1e-4f) tau = 0.0f;
    }
    params.tau.push_back(tau);
  }
  if (progress) progress(1.0, "done");
  return params;
}

}  // namespace spattn::reference
