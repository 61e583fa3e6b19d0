// BFLA on the Kokkos backend, decision by decision (DESIGN.md §5.3), over every BFLA case of the shared table, with
// the inputs in a MemoryAdapter's memory (host: tests/test_kokkos.cpp; CUDA: tests/gpu/test_kokkos_cuda.cpp):
//  (a) every group score the mask depends on (causal block pairs) is within the rounding bound of the reference's:
//      |S_kokkos − S_ref| ≤ c·n·2⁻²⁴·Σ|q·k| with n = g·D products. Both add the same exact products (fp16/bf16
//      products are exact in fp32) in fp32, each sum within about n·u·Σ|q·k| (u = 2⁻²⁴) when rounded to nearest: c = 2.5
//      for the portable kernel's fma chains leaves half an n·u for second-order terms; the tensor cores' sums (which
//      may truncate instead of rounding) get c = 4. A wrong or missing row errs by a sizeable fraction of Σ|q·k|.
//  (b) the mask is bit-identical to reference::bfla_mask_from_scores fed with the Kokkos scores: every rule after the
//      scores (block maxima, mass, threshold and top-k rules, union, sink, band, rescues, expansion) is exact.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "common.hpp"
#include "conformance/conformance.hpp"
#include "spattn/kokkos/backend.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::test {

inline void check_bfla_scores(conformance::MemoryAdapter& memory, double c_bound) {
  int ran = 0;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const auto* cfg = std::get_if<bfla::Config>(&c.config);
    if (cfg == nullptr) continue;
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const conformance::EstimatorInputs in = conformance::estimator_inputs(c);
    const Problem& p = in.problem;
    std::vector<std::vector<float>> scores;
    const TileMask got = kokkos::bfla_estimate_with_scores(p, memory.upload(in.q), memory.upload(in.k), *cfg, scores);
    REQUIRE(scores.size() == static_cast<std::size_t>(p.batch * p.heads_q));

    const std::int64_t g = cfg->group, d = p.head_dim, per_block = cfg->block / g;
    std::int64_t compared = 0, outside = 0;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b), gq = (nq + g - 1) / g, gk = (nkv + g - 1) / g;
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const std::vector<float>& s = scores[static_cast<std::size_t>(b * p.heads_q + h)];
        const std::vector<float> ref = reference::bfla_group_scores(p, in.q.view(), in.k.view(), *cfg, b, h);
        REQUIRE(s.size() == ref.size());
        std::vector<float> qr(static_cast<std::size_t>(nq * d)), kr(static_cast<std::size_t>(nkv * d));
        for (std::int64_t i = 0; i < nq; ++i)
          load_row(in.q.view(), row_offset(in.q.view(), p, true, b, h, i), d, qr.data() + i * d);
        for (std::int64_t i = 0; i < nkv; ++i)
          load_row(in.k.view(), row_offset(in.k.view(), p, false, b, p.kv_head_of(h), i), d, kr.data() + i * d);
        for (std::int64_t u = 0; u < gq; ++u)
          for (std::int64_t v = 0; v < gk; ++v) {
            if (v / per_block >= bfla::causal_blocks(u / per_block, nq, nkv, cfg->block, p.causal)) continue;
            double magnitude = 0.0;
            for (std::int64_t t = 0; t < g && u * g + t < nq && v * g + t < nkv; ++t)
              for (std::int64_t e = 0; e < d; ++e)
                magnitude += std::fabs(double(qr[static_cast<std::size_t>((u * g + t) * d + e)]) *
                                       double(kr[static_cast<std::size_t>((v * g + t) * d + e)]));
            const double bound = c_bound * double(g * d) * std::ldexp(1.0, -24) * magnitude;
            const auto at = static_cast<std::size_t>(u * gk + v);
            ++compared;
            if (!(std::fabs(double(s[at]) - double(ref[at])) <= bound)) ++outside;
          }
      }
    }
    CHECK(compared > 0);
    CHECK(outside == 0);

    const TileMask want = reference::bfla_mask_from_scores(p, *cfg, false, [&](std::int64_t b, std::int64_t h, float* out) {
      const std::vector<float>& s = scores[static_cast<std::size_t>(b * p.heads_q + h)];
      std::copy(s.begin(), s.end(), out);
    });
    CHECK(got.shape == want.shape);
    CHECK(got.row_ptr == want.row_ptr);
    CHECK(got.tiles == want.tiles);
    ++ran;
  }
  CHECK(ran >= 7);
}

}  // namespace spattn::test
