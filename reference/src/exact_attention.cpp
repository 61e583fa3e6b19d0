// Float64 attention over an element mask (definition: reference/include/spattn/reference/exact_attention.hpp).
#include "spattn/reference/exact_attention.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

/// A head's K or V rows as double, [N, dim] row-major.
std::vector<double> load_head(const Problem& p, const TensorView& t, std::int64_t b, std::int64_t h, std::int64_t n,
                              std::int64_t dim) {
  std::vector<float> row(static_cast<std::size_t>(dim));
  std::vector<double> out(static_cast<std::size_t>(n * dim));
  for (std::int64_t j = 0; j < n; ++j) {
    load_row(t, row_offset(t, p, false, b, h, j), dim, row.data());
    std::copy(row.begin(), row.end(), out.begin() + j * dim);
  }
  return out;
}

void head_rows(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
               const RowMask& allowed, std::int64_t b, std::int64_t h, double* out) {
  const std::int64_t nq = p.seqlen_q, nkv = p.seqlen_kv, d = p.head_dim, dv = p.dim_v();
  const std::int64_t hk = p.kv_head_of(h);
  const std::vector<double> keys = load_head(p, k, b, hk, nkv, d), values = load_head(p, v, b, hk, nkv, dv);
  const double scale = static_cast<double>(p.softmax_scale());
  std::vector<float> qf(static_cast<std::size_t>(d));
  std::vector<double> s(static_cast<std::size_t>(nkv)), acc(static_cast<std::size_t>(dv));
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(nkv));
  for (std::int64_t i = 0; i < nq; ++i) {
    load_row(q, row_offset(q, p, true, b, h, i), d, qf.data());
    std::fill(keep.begin(), keep.end(), std::uint8_t{0});
    allowed(b, h, i, keep.data());
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < nkv; ++j) {
      if (!keep[j]) continue;
      double dot = 0.0;
      for (std::int64_t c = 0; c < d; ++c) dot += static_cast<double>(qf[c]) * keys[j * d + c];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double* o = out + i * dv;
    if (mx == -std::numeric_limits<double>::infinity()) {
      std::fill(o, o + dv, 0.0);
      continue;
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    double l = 0.0;
    for (std::int64_t j = 0; j < nkv; ++j) {
      if (!keep[j]) continue;
      const double w = std::exp(s[j] - mx);
      l += w;
      for (std::int64_t c = 0; c < dv; ++c) acc[c] += w * values[j * dv + c];
    }
    for (std::int64_t c = 0; c < dv; ++c) o[c] = acc[c] / l;
  }
}

}  // namespace

std::vector<double> exact_attention(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                                    const RowMask& allowed) {
  const std::int64_t dv = p.dim_v(), rows_per_head = p.seqlen_q * dv;
  std::vector<double> out(static_cast<std::size_t>(p.batch * p.heads_q * rows_per_head));
  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_q, [&](std::int64_t bh) {
    head_rows(p, q, k, v, allowed, bh / p.heads_q, bh % p.heads_q, out.data() + bh * rows_per_head);
  });
  return out;
}

}  // namespace spattn::reference
