// The reference executor against the independent fp64 reference (exact_fp64, tests/common.hpp) over a table of
// shapes: odd lengths, GQA, Nq < Nkv, head dims 64…256, both layouts, every dtype, fine and coarse tiles,
// variable-length batches.
// Outputs are poisoned first, so an element the executor forgets to write fails.
#include <doctest/doctest.h>

#include <cmath>

#include "common.hpp"
#include "conformance/conformance.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

using Case = conformance::ExecutorCase;  // the output dtype is check_case's argument

double tolerance(DType out) { return out == DType::f32 ? 2e-5 : out == DType::f16 ? 2e-3 : 1.6e-2; }

void check_case(const Case& c, DType out_dtype = DType::f32) {
  CAPTURE(c.name);
  const conformance::ExecutorInputs in = conformance::make_inputs(c);
  const Problem& p = in.problem;
  const HostTensor &q = in.q, &k = in.k, &v = in.v;
  const TileMask& mask = in.mask;
  const bool varlen = p.varlen();
  HostTensor o(out_dtype, q.batch(), c.hq, q.seqlen(), p.dim_v(), q.layout());
  o.poison();

  std::vector<float> lse(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), 12345.0f);
  AttendOptions options;
  options.lse = lse.data();
  const AttendStats stats = attend(p, q.view(), k.view(), v.view(), mask, o.view(), options);
  CHECK(stats.backend == "reference");

  const MaskAllowed allowed{p, mask};
  const std::vector<double> want = exact_fp64(p, q, k, v, allowed);
  const double tol = tolerance(out_dtype);
  double worst = 0.0;
  std::int64_t empty = 0, bad = 0;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q_of(b); ++i) {
        bool any = false;
        for (std::int64_t j = 0; j < p.seqlen_kv_of(b) && !any; ++j) any = allowed(b, h, i, j);
        empty += any ? 0 : 1;
        const float row_lse = lse[static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i)];
        if (!any) CHECK(row_lse == -INFINITY);
        else CHECK(std::isfinite(row_lse));
        for (std::int64_t d = 0; d < p.dim_v(); ++d) {
          const double ref = want[static_cast<std::size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * p.dim_v() + d)];
          const float got = varlen ? o.get(0, h, p.row_offset_q(b) + i, d) : o.get(b, h, i, d);
          const double err = std::fabs(static_cast<double>(got) - ref);
          if (!(err <= tol * (1.0 + std::fabs(ref)))) ++bad;  // NaN (poison) fails here
          worst = std::max(worst, err);
        }
      }
  CAPTURE(worst);
  CHECK(bad == 0);
  CHECK(stats.empty_rows == empty);
}

TEST_CASE("reference executor matches the fp64 reference over the shape table") {
  // The shared conformance table (tests/conformance), less the cases too long for the O(N²) fp64 reference. Under
  // AddressSanitizer (CI's asan build, about 3x slower) also less those above 2M query-key pairs (N = 2049 and 4099):
  // they add no code path the smaller ones miss, and the default build runs them.
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::int64_t kMaxPairs = 2'000'000;
#else
  constexpr std::int64_t kMaxPairs = 30'000'000;
#endif
  int checked = 0;
  for (const conformance::ExecutorCase& e : conformance::executor_cases()) {
    if (e.nq * e.nkv > kMaxPairs) continue;
    check_case(e, e.out);
    ++checked;
  }
  CHECK(checked >= 38);
}

TEST_CASE("reference executor writes every output dtype within its rounding") {
  const Case c{"bf16 out", 1, 2, 2, 67, 67, 64, 0, true, DType::bf16, Layout::bhnd, 32, 32, 0.5};
  check_case(c, DType::bf16);
  const Case c16{"f16 out", 1, 2, 2, 67, 67, 64, 0, true, DType::f16, Layout::bhnd, 32, 32, 0.5};
  check_case(c16, DType::f16);
}

TEST_CASE("the dense mask is dense attention, with every tile size") {
  for (std::int32_t tq : {16, 48, 128, 2048})
    for (std::int32_t tk : {1, 3, 64, 128}) {
      const Case c{"dense tiles", 1, 1, 1, 70, 91, 32, 0, true, DType::f32, Layout::bhnd, tq, tk, 1.0};
      check_case(c);
    }
}

}  // namespace
}  // namespace spattn::test
