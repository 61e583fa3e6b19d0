// AnchorAttention of a backend against the reference, decision by decision (DESIGN.md §5.3), its two floating-point
// stages separately. Used by the hand-written CUDA estimator's test (tests/gpu/test_cuda_estimators.cpp) and the
// Kokkos one's on CUDA (tests/gpu/test_kokkos_cuda.cpp); each states its constants.
//  (a) anchors_within_bound: every row's (m, l) against the reference's. Scores are fp16/bf16 products (exact in fp32)
//      summed in another order: |Δx| ≤ c·D·2⁻²⁴·scale·log2e·Σ_e |q_e|·max_j |k_je| (the γ_D bound of both sums) +
//      4·2⁻²⁴·|m|, and m is a max of such scores; l sums 2^(x − m): relative error ≤ 2·ln2·|Δx| + 3e-5 (ex2.approx and
//      fp32 sums over ≤ 2304 keys). A missing or extra key moves l by ≳ 1/2304 = 4e-4.
//  (b) stripes_within_bound: the backend's mask against reference::anchor_attn_select over the BACKEND's anchors. Sink
//      and window keys must agree exactly; a candidate may differ only where the reference's margin is within the score
//      bound (4·D·2⁻²⁴ + 2⁻¹⁸)·scale·log2e·max_r Σ_e |q̄_re·k_je| (fp32 tensor-core sums, then the two-piece split of q̄,
//      within 2⁻¹⁸·|q̄| in bf16) + 2⁻²⁴·scale·log2e·Σ_e |k_je| (fp16's low piece may be subnormal) +
//      64·2⁻²⁴·(|margin| + 1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "spattn/anchor.hpp"
#include "spattn/mask.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/numerics.hpp"
#include "spattn/pooling.hpp"
#include "spattn/problem.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/tensor.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::test {

/// Rows of (b, h) as fp32: Q's nq rows, K's nkv rows (through the KV head), and K's column maxima of |k|.
struct HeadRows {
  std::vector<float> q, k, k_max;
  HeadRows(const Problem& p, const TensorView& qv, const TensorView& kv, std::int64_t b, std::int64_t h) {
    const std::int64_t d = p.head_dim, nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    q.assign(static_cast<std::size_t>(nq * d), 0.0f);
    k.assign(static_cast<std::size_t>(nkv * d), 0.0f);
    k_max.assign(static_cast<std::size_t>(d), 0.0f);
    for (std::int64_t i = 0; i < nq; ++i) load_row(qv, row_offset(qv, p, true, b, h, i), d, q.data() + i * d);
    for (std::int64_t j = 0; j < nkv; ++j) {
      load_row(kv, row_offset(kv, p, false, b, p.kv_head_of(h), j), d, k.data() + j * d);
      for (std::int64_t e = 0; e < d; ++e)
        k_max[static_cast<std::size_t>(e)] = std::max(k_max[static_cast<std::size_t>(e)], std::fabs(k[static_cast<std::size_t>(j * d + e)]));
    }
  }
};

/// HeadRows of every (b, h) of a problem, loaded once for both checks.
struct ProblemRows {
  std::int64_t heads_q;
  std::vector<HeadRows> heads;
  ProblemRows(const Problem& p, const TensorView& q, const TensorView& k) : heads_q(p.heads_q) {
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < p.heads_q; ++h) heads.emplace_back(p, q, k, b, h);
  }
  const HeadRows& at(std::int64_t b, std::int64_t h) const { return heads[static_cast<std::size_t>(b * heads_q + h)]; }
};

struct AnchorBound {
  std::int64_t rows = 0, bad_m = 0, bad_l = 0;
  double worst_m = 0.0;  ///< largest |Δm| / bound
};

/// (a): got and ref indexed [(b·Hq + h)·Nq + i]; c: the constant of the sums' bound.
inline AnchorBound anchors_within_bound(const Problem& p, const ProblemRows& rows, const std::vector<AnchorStats>& got,
                                        const std::vector<AnchorStats>& ref, double c) {
  AnchorBound out;
  const double u = std::ldexp(1.0, -24), sl = scale_log2(p.softmax_scale());
  const std::int64_t d = p.head_dim;
  if (got.size() != ref.size()) {
    out.bad_m = 1;
    return out;
  }
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const HeadRows& x = rows.at(b, h);
      for (std::int64_t i = 0; i < p.seqlen_q_of(b); ++i) {
        const auto at = static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i);
        const AnchorStats a = got[at], r = ref[at];
        ++out.rows;
        if (!std::isfinite(r.m)) {  // an empty region: both (−∞, 0)
          out.bad_m += a.m == r.m && a.l == 0.0f ? 0 : 1;
          continue;
        }
        double mag = 0.0;
        for (std::int64_t e = 0; e < d; ++e)
          mag += std::fabs(double(x.q[static_cast<std::size_t>(i * d + e)])) * x.k_max[static_cast<std::size_t>(e)];
        const double bx = c * double(d) * u * sl * mag + 4.0 * u * std::fabs(double(r.m));
        const double em = std::fabs(double(a.m) - double(r.m));
        if (!(em <= bx)) ++out.bad_m;  // NaN (poison) fails
        if (bx > 0.0) out.worst_m = std::max(out.worst_m, em / bx);
        const double el = std::fabs(double(a.l) - double(r.l));
        if (!(el <= double(r.l) * (2.0 * std::log(2.0) * bx + 3e-5))) ++out.bad_l;
      }
    }
  return out;
}

struct StripeBound {
  std::int64_t candidates = 0, differing = 0;  ///< candidate decisions, and those that differ from the rules'
  std::int64_t outside = 0;                    ///< differing ones whose margin lies outside the score bound
  std::int64_t other_keys_wrong = 0;           ///< sink, window or unreachable keys that differ (must be 0)
};

/// (b): got, the backend's mask; anchors, the backend's anchors (as `got` was selected with); rows: q's and k's.
inline StripeBound stripes_within_bound(const Problem& p, const TensorView& q, const TensorView& k, const ProblemRows& rows,
                                        const anchor_attn::Config& cfg, const std::vector<AnchorStats>& anchors,
                                        const TileMask& got) {
  StripeBound out;
  const double u = std::ldexp(1.0, -24), sl = scale_log2(p.softmax_scale());
  std::vector<float> margins;
  const reference::AnchorEstimate want = reference::anchor_attn_select(p, q, k, cfg, anchors, &margins);
  if (!(got.shape == want.mask.shape)) {
    out.other_keys_wrong = 1;
    return out;
  }
  const std::vector<std::uint8_t> a = got.to_bitmap(), w = want.mask.to_bitmap();
  const MaskShape& s = got.shape;
  const std::int64_t d = p.head_dim, group = cfg.group_rows();
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const HeadRows& x = rows.at(b, h);
      for (std::int64_t t = 0; t * group < nq; ++t) {
        const std::int64_t first = t * group, n_rows = std::min(group, nq - first);
        const std::int64_t blocks = (n_rows + cfg.block - 1) / cfg.block;
        std::vector<float> qbar(static_cast<std::size_t>(blocks * d));
        for (std::int64_t r = 0; r < blocks; ++r)
          mean_rows(x.q.data() + (first + r * cfg.block) * d, std::min<std::int64_t>(cfg.block, n_rows - r * cfg.block), d,
                    qbar.data() + r * d);
        const std::int64_t row = got.row_index(b, h, t);
        for (std::int64_t j = 0; j < nkv; ++j) {
          const auto at = static_cast<std::size_t>(row * s.num_k_tiles() + j);
          const float m = margins[at];
          if (std::isnan(m)) {  // sink, window or unreachable: exact
            out.other_keys_wrong += a[at] != w[at] ? 1 : 0;
            continue;
          }
          ++out.candidates;
          if (a[at] == w[at]) continue;
          ++out.differing;
          double bound = 0.0, ksum = 0.0;
          for (std::int64_t e = 0; e < d; ++e) ksum += std::fabs(double(x.k[static_cast<std::size_t>(j * d + e)]));
          for (std::int64_t r = 0; r < blocks; ++r) {
            double mag = 0.0;
            for (std::int64_t e = 0; e < d; ++e)
              mag += std::fabs(double(qbar[static_cast<std::size_t>(r * d + e)]) * double(x.k[static_cast<std::size_t>(j * d + e)]));
            bound = std::max(bound, (4.0 * double(d) * u + std::ldexp(1.0, -18)) * sl * mag);
          }
          bound += u * sl * ksum + 64.0 * u * (std::fabs(double(m)) + 1.0);
          if (!(std::fabs(double(m)) <= bound)) ++out.outside;
        }
      }
    }
  }
  return out;
}

}  // namespace spattn::test
