// The estimator table on one backend with the inputs in a MemoryAdapter's memory, each case held to the contract
// table's row of (backend, method): the one estimator runner of the host table (test_conformance.cpp), the CUDA backend
// (gpu/test_cuda_estimators.cpp) and Kokkos on CUDA (gpu/test_kokkos_cuda.cpp).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "conformance.hpp"
#include "contract.hpp"

namespace spattn::test {

struct EstimatorTableRun {
  int ran = 0, refused = 0;
  int sparse = 0;              ///< cases whose reference mask has density < 1
  std::int64_t decisions = 0;  ///< decisions compared, every case
  /// Decisions compared and differing in the cases whose contract is not exact.
  std::int64_t approx_decisions = 0, approx_differing = 0;
  std::string reason;  ///< the last refusal's first reason
};

/// Every case of the estimator table on `backend`: a case the backend refuses must lie outside the coverage of its
/// contract (or in memory the backend does not read); a case it runs is compared with the reference decision by decision and held to the contract's agreement.
inline EstimatorTableRun run_estimator_table(const std::string& backend, conformance::MemoryAdapter& memory) {
  EstimatorTableRun run;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const std::string case_name(c.name);
    CAPTURE(backend);
    CAPTURE(case_name);
    const conformance::Contract& contract = conformance::contract_of(backend, c.config);
    const conformance::EstimatorOutcome r = conformance::check_estimator(c, backend, memory, contract.margin);
    if (!r.not_supported.empty()) {
      ++run.refused;
      run.reason = r.not_supported.front();
      const std::string coverage = contract.coverage.what;
      CAPTURE(coverage);
      CAPTURE(run.reason);
      CHECK(!(conformance::reads_memory(backend, memory.memory()) && contract.coverage.covers(c)));
      continue;
    }
    ++run.ran;
    run.decisions += r.decisions;
    CHECK(r.backend == backend);
    CHECK(r.decisions > 0);
    if (contract.agreement != conformance::Agreement::exact) {
      run.approx_decisions += r.decisions;
      run.approx_differing += r.differing;
      MESSAGE(case_name << ": " << r.differing << " of " << r.decisions << " decisions differ from the reference");
    }
    conformance::check_agreement(contract, r);
    run.sparse += r.density < 1.0 ? 1 : 0;
    if (!(r.density < 1.0)) MESSAGE("dense at this seed: " << case_name);
  }
  return run;
}

}  // namespace spattn::test
