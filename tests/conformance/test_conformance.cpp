// The shared conformance table on host memory: every linked backend that covers a case is compared with the
// reference (the reference itself too: executor and estimators re-run with a copy of the inputs and, for the
// estimators, with one thread against the default thread count — the bits must not change), each estimator case held to
// the contract table (contract.cpp). The CUDA runs of the same tables: tests/gpu (tests/README.md).
#include <doctest/doctest.h>

#include "../common.hpp"
#include "conformance.hpp"
#include "contract.hpp"
#include "estimator_table.hpp"
#include "executor_table.hpp"
#include "pipeline_table.hpp"

namespace spattn::test {
namespace {

/// The executor table on every host backend, in one call per case or resumed (AttendOptions::state_out, then resume
/// over the rest of the mask).
void run_executor_table_on_host(bool resumed) {
  auto memory = conformance::host_adapter();
  for (const auto& backend : backends()) {
    const std::string backend_name(backend->name());
    const ExecutorTableRun run =
        run_executor_table(backend_name, *memory, resumed, "host memory",
                           [](const conformance::ExecutorCase&, const conformance::ExecutorOutcome& r) {
                             CHECK(r.visited_tiles == r.reference_visited_tiles);
                           });
    // The reference and Kokkos (asked for by name on host memory) must run every case: the runner fails a refusal
    // where the coverage table (contract.cpp) says so.
    MESSAGE(backend_name << ": " << run.ran << std::string(resumed ? " resumed" : "") << " executor cases on host memory");
  }
}

TEST_CASE("conformance: executor table on every host backend") { run_executor_table_on_host(false); }

TEST_CASE("conformance: executor table resumed (state_out, then resume over the rest of the mask) on every host backend") {
  run_executor_table_on_host(true);
}

// Each case held to its (backend, method) row of the contract table (contract.cpp): host backends follow the core's
// fixed-order arithmetic, bit-identical masks, except where the table says which sums are not the reference's.
TEST_CASE("conformance: estimator table on every host backend, decision by decision") {
  auto memory = conformance::host_adapter();
  for (const auto& backend : backends()) {
    const std::string backend_name(backend->name());
    const EstimatorTableRun run = run_estimator_table(backend_name, *memory);
    if (backend_name == "reference") CHECK(2 * run.sparse >= run.ran);  // the table exercises selections, not only dense fallbacks
    MESSAGE(backend_name << ": " << run.ran << " estimator cases on host memory, " << run.sparse << " with density < 1");
  }
}

TEST_CASE("conformance: sparse_attention pipelines (mask kept in the backend's memory) on every host backend") {
  auto memory = conformance::host_adapter();
  for (const auto& backend : backends()) check_pipeline_table(std::string(backend->name()), *memory);
}

/// The contract table covers every linked backend and every method, once per pair; the coverage table names every
/// linked backend (at least one memory it reads).
TEST_CASE("conformance: the contract table has one row per (linked backend, method)") {
  for (const auto& backend : backends()) {
    const std::string backend_name(backend->name());
    CAPTURE(backend_name);
    int memories = 0;
    for (const conformance::BackendCoverage& row : conformance::backend_coverage_table())
      memories += row.backend == backend_name ? 1 : 0;
    CHECK(memories >= 1);
  }
  for (const auto& backend : backends())
    for (const MethodInfo& m : method_registry()) {
      const std::string backend_name(backend->name()), method(m.name);
      CAPTURE(backend_name);
      CAPTURE(method);
      int rows = 0;
      for (const conformance::ContractRow& row : conformance::contract_table())
        rows += row.backend == backend_name && row.method == method ? 1 : 0;
      CHECK(rows == 1);
      CHECK(conformance::contract_of(backend_name, m.defaults).describe().find("runs ") != std::string::npos);
    }
}

}  // namespace
}  // namespace spattn::test
