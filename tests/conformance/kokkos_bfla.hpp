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
#include <string>
#include <variant>
#include <vector>

#include "../common.hpp"
#include "bfla_bound.hpp"
#include "conformance.hpp"
#include "for_each_case.hpp"
#include "spattn/kokkos/backend.hpp"
#include "spattn/reference/bfla.hpp"

namespace spattn::test {

inline void check_bfla_scores(conformance::MemoryAdapter& memory, double c_bound) {
  const int ran = conformance::for_each_case<bfla::Config>([&](const conformance::EstimatorCase& c,
                                                               const bfla::Config& cfg) {
    const conformance::EstimatorInputs in = conformance::estimator_inputs(c);
    const Problem& p = in.problem;
    std::vector<std::vector<float>> scores;
    const TileMask got = kokkos::bfla_estimate_with_scores(p, memory.upload(in.q), memory.upload(in.k), cfg, scores);
    REQUIRE(scores.size() == static_cast<std::size_t>(p.batch * p.heads_q));

    const ScoreBound r = bfla_scores_within_bound(p, in.q.view(), in.k.view(), cfg, c_bound,
                                                  [&](std::int64_t b, std::int64_t h) -> const std::vector<float>& {
                                                    return scores[static_cast<std::size_t>(b * p.heads_q + h)];
                                                  });
    CHECK(r.compared > 0);
    CHECK(r.outside == 0);

    const TileMask want = bfla_mask_given(p, cfg, scores);
    CHECK(got.shape == want.shape);
    CHECK(got.row_ptr == want.row_ptr);
    CHECK(got.tiles == want.tiles);
  });
  CHECK(ran >= 7);
}

}  // namespace spattn::test
