// The shared conformance table on host memory: every linked backend that covers a case is compared with the
// reference (the reference itself too: executor and estimators re-run with a copy of the inputs and, for the
// estimators, with one thread against the default thread count — the bits must not change). The CUDA run of the
// same tables is tests/gpu/test_cuda_conformance.cpp.
#include <doctest/doctest.h>

#include "../common.hpp"
#include "conformance.hpp"
#include "pipeline_table.hpp"

namespace spattn::test {
namespace {

/// The executor table on every host backend, in one call per case or resumed (AttendOptions::state_out, then resume
/// over the rest of the mask).
void run_executor_table(bool resumed) {
  auto memory = conformance::host_adapter();
  for (const auto& backend : backends()) {
    int ran = 0;
    for (const conformance::ExecutorCase& c : conformance::executor_cases()) {
      const std::string backend_name(backend->name()), case_name(c.name);
      CAPTURE(backend_name);
      CAPTURE(case_name);
      const conformance::ExecutorOutcome r = conformance::check_executor(c, backend_name, *memory, resumed);
      if (!r.not_supported.empty()) continue;
      ++ran;
      CAPTURE(r.worst);
      CHECK(r.bad_outputs == 0);
      CHECK(r.bad_lse == 0);
      CHECK(r.empty_rows == r.reference_empty_rows);
      CHECK(r.visited_tiles == r.reference_visited_tiles);
      CHECK(r.backend == backend->name());
    }
    // The reference covers every case; so does Kokkos (asked for by name on host memory).
    if (backend->name() == "reference" || backend->name() == "kokkos")
      CHECK(ran == static_cast<int>(conformance::executor_cases().size()));
    MESSAGE(backend->name() << ": " << ran << std::string(resumed ? " resumed" : "") << " executor cases on host memory");
  }
}

TEST_CASE("conformance: executor table on every host backend") { run_executor_table(false); }

TEST_CASE("conformance: executor table resumed (state_out, then resume over the rest of the mask) on every host backend") {
  run_executor_table(true);
}

TEST_CASE("conformance: estimator table on every host backend, decision by decision") {
  auto memory = conformance::host_adapter();
  for (const auto& backend : backends()) {
    int ran = 0, sparse = 0;
    for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
      const std::string backend_name(backend->name()), case_name(c.name);
      CAPTURE(backend_name);
      CAPTURE(case_name);
      const conformance::EstimatorOutcome r = conformance::check_estimator(c, std::string(backend->name()), *memory);
      if (!r.not_supported.empty()) continue;
      ++ran;
      CHECK(r.decisions > 0);
      CHECK(r.backend == backend->name());
      // Host backends follow the core's fixed-order arithmetic: bit-identical masks. Except Kokkos' BFLA group scores,
      // AnchorAttention anchors and SALE sink-local states: fma chains in a fixed order where the reference has Eigen
      // products, so a decision
      // at a threshold may differ (at most 2 %, as the CUDA estimators'; test_kokkos.cpp checks those sums within their
      // rounding bound and every rule after them bit for bit).
      if (backend->name() == "kokkos" &&
          (std::holds_alternative<bfla::Config>(c.config) || std::holds_alternative<anchor_attn::Config>(c.config) ||
           std::holds_alternative<sale::Config>(c.config))) {
        MESSAGE(case_name << ": " << r.differing << " of " << r.decisions << " decisions differ from the reference");
        CHECK(r.differing * 50 <= r.decisions);
      } else {
        CHECK(r.differing == 0);
      }
      sparse += r.density < 1.0 ? 1 : 0;
      if (!(r.density < 1.0)) MESSAGE("dense at this seed: " << case_name);
    }
    if (backend->name() == "kokkos") CHECK(ran == static_cast<int>(conformance::estimator_cases().size()));
    if (backend->name() == "reference") {
      CHECK(ran == static_cast<int>(conformance::estimator_cases().size()));
      CHECK(2 * sparse >= ran);  // the table exercises selections, not only dense fallbacks
    }
    MESSAGE(backend->name() << ": " << ran << " estimator cases on host memory, " << sparse << " with density < 1");
  }
}

TEST_CASE("conformance: sparse_attention pipelines (mask kept in the backend's memory) on every host backend") {
  auto memory = conformance::host_adapter();
  for (const auto& backend : backends()) check_pipeline_table(std::string(backend->name()), *memory);
}

}  // namespace
}  // namespace spattn::test
