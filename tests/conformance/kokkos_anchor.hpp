// AnchorAttention on the Kokkos backend, decision by decision (DESIGN.md §5.3; the bounds: anchor_bound.hpp), over
// every AnchorAttention case of the shared table, with the inputs in a MemoryAdapter's memory (host:
// tests/test_kokkos.cpp; CUDA: tests/gpu/test_kokkos_cuda.cpp):
//  (a) every row's anchor (m, l) within the rounding bound of the reference's, with the constant c of the kernel's sums
//      (2.5 for the portable kernel's fma chains, 4 for the tensor cores' as for BFLA);
//  (b) the stripes against reference::anchor_attn_select over the Kokkos anchors: sink and window keys exact, every
//      candidate exact (`exact`: the portable kernel, the core's fixed-order stripe_score) or within the score bound
//      with at most 1 % of them differing (the tensor cores' sums).
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <variant>
#include <vector>

#include "../common.hpp"
#include "anchor_bound.hpp"
#include "conformance.hpp"
#include "for_each_case.hpp"
#include "spattn/kokkos/backend.hpp"
#include "spattn/reference/anchor_attn.hpp"

namespace spattn::test {

inline void check_anchor_attn(conformance::MemoryAdapter& memory, double c_bound, bool exact) {
  const int ran = conformance::for_each_case<anchor_attn::Config>([&](const conformance::EstimatorCase& c,
                                                                      const anchor_attn::Config& cfg) {
    const conformance::EstimatorInputs in = conformance::estimator_inputs(c);
    const Problem& p = in.problem;
    std::vector<AnchorStats> anchors;
    const TileMask got = kokkos::anchor_attn_estimate_with_anchors(p, memory.upload(in.q), memory.upload(in.k), cfg, anchors);
    const reference::AnchorEstimate ref = reference::anchor_attn_estimate(p, in.q.view(), in.k.view(), cfg);
    const ProblemRows rows(p, in.q.view(), in.k.view());
    const AnchorBound a = anchors_within_bound(p, rows, anchors, ref.anchors, c_bound);
    CHECK(a.rows > 0);
    CHECK(a.bad_m == 0);
    CHECK(a.bad_l == 0);
    const StripeBound st = stripes_within_bound(p, in.q.view(), in.k.view(), rows, cfg, anchors, got);
    CHECK(st.other_keys_wrong == 0);
    CHECK(st.candidates > 0);
    CHECK(st.outside == 0);
    if (exact) CHECK(st.differing == 0);
    else CHECK(st.differing * 100 <= st.candidates);
    MESSAGE(c.name << ": " << a.rows << " anchors within the bound (worst at " << a.worst_m << " of it); " << st.differing
                   << " of " << st.candidates << " stripe decisions differ from the rules over these anchors");
  });
  CHECK(ran >= 4);
}

}  // namespace spattn::test
