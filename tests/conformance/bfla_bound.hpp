// BFLA's group scores of a backend against the reference's, within their rounding bound (DESIGN.md §5.3):
// |S − S_ref| ≤ c·n·2⁻²⁴·Σ|q·k| with n = g·D products per score, over every causal block pair (the pairs the mask
// depends on). Used by the CUDA estimator's test (tests/gpu/test_cuda_estimators.cpp) and the Kokkos one's
// (tests/conformance/kokkos_bfla.hpp); each states its c.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "spattn/methods/bfla.hpp"
#include "spattn/problem.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/tensor.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::test {

struct ScoreBound {
  std::int64_t compared = 0, outside = 0;  ///< scores compared; of those, outside the bound (NaN: outside)
  double worst = 0.0;                      ///< largest |ΔS| / bound
};

/// scores(b, h): the backend's [gq][gk] scores of sequence b, query head h (as reference::bfla_group_scores).
template <class Scores>
ScoreBound bfla_scores_within_bound(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& cfg,
                                    double c, Scores scores) {
  ScoreBound out;
  const std::int64_t g = cfg.group, d = p.head_dim, per_block = cfg.block / g;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b), gq = (nq + g - 1) / g, gk = (nkv + g - 1) / g;
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::vector<float>& s = scores(b, h);
      const std::vector<float> ref = reference::bfla_group_scores(p, q, k, cfg, b, h);
      if (s.size() != ref.size() || static_cast<std::int64_t>(s.size()) != gq * gk) {
        ++out.outside;
        continue;
      }
      std::vector<float> qr(static_cast<std::size_t>(nq * d)), kr(static_cast<std::size_t>(nkv * d));
      for (std::int64_t i = 0; i < nq; ++i) load_row(q, row_offset(q, p, true, b, h, i), d, qr.data() + i * d);
      for (std::int64_t i = 0; i < nkv; ++i) load_row(k, row_offset(k, p, false, b, p.kv_head_of(h), i), d, kr.data() + i * d);
      for (std::int64_t u = 0; u < gq; ++u)
        for (std::int64_t v = 0; v < gk; ++v) {
          if (v / per_block >= bfla::causal_blocks(u / per_block, nq, nkv, cfg.block, p.causal)) continue;
          double magnitude = 0.0;
          for (std::int64_t t = 0; t < g && u * g + t < nq && v * g + t < nkv; ++t)
            for (std::int64_t e = 0; e < d; ++e)
              magnitude += std::fabs(double(qr[static_cast<std::size_t>((u * g + t) * d + e)]) *
                                     double(kr[static_cast<std::size_t>((v * g + t) * d + e)]));
          const double bound = c * double(g * d) * std::ldexp(1.0, -24) * magnitude;
          const auto at = static_cast<std::size_t>(u * gk + v);
          const double err = std::fabs(double(s[at]) - double(ref[at]));
          ++out.compared;
          if (!(err <= bound)) ++out.outside;  // NaN (poison) fails
          if (bound > 0.0 && std::isfinite(err)) out.worst = std::max(out.worst, err / bound);
        }
    }
  }
  return out;
}

/// The mask of the reference's rules over a backend's scores ([b·Hq + h] as reference::bfla_group_scores): the mask
/// that backend must produce, bit for bit, if every rule after the scores is exact.
inline TileMask bfla_mask_given(const Problem& p, const bfla::Config& cfg, const std::vector<std::vector<float>>& scores) {
  return reference::bfla_mask_from_scores(p, cfg, false, [&](std::int64_t b, std::int64_t h, float* out) {
    const std::vector<float>& s = scores[static_cast<std::size_t>(b * p.heads_q + h)];
    std::copy(s.begin(), s.end(), out);
  });
}

}  // namespace spattn::test
