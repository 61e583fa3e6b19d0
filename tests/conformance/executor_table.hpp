// The executor table on one backend with the tensors in a MemoryAdapter's memory, in one call per case or resumed
// (AttendOptions::state_out, then resume over the rest of the mask): the one executor runner of the host table
// (test_conformance.cpp), the Kokkos host kernels (test_kokkos.cpp), the CUDA backend (gpu/test_cuda_executor.cpp) and
// Kokkos on CUDA (gpu/test_kokkos_cuda.cpp). Every backend's outputs are held to the same contract (check_executor):
// within the dtype's tolerance of the reference's, LSE and empty rows as the reference's, NaN (poison) never passes.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "conformance.hpp"
#include "contract.hpp"

namespace spattn::test {

struct ExecutorTableRun {
  int ran = 0, refused = 0;
};

/// No checks beyond the common ones.
struct NoExtraChecks {
  void operator()(const conformance::ExecutorCase&, const conformance::ExecutorOutcome&) const {}
};

/// Every case of the executor table on `backend` (`label`: the run's conditions, captured): a case the backend refuses
/// is counted, and fails where the backend coverage table (contract.hpp) says it runs every case in this memory; each
/// case it runs is checked, then `extra(case, outcome)` adds the runner's own checks (its kernel dispatch, its
/// visited-tile counts).
template <class Extra = NoExtraChecks>
ExecutorTableRun run_executor_table(const std::string& backend, conformance::MemoryAdapter& memory, bool resumed,
                                    std::string_view label = "", Extra extra = {}) {
  ExecutorTableRun run;
  const std::string conditions(label);
  const conformance::BackendCoverage* coverage = conformance::coverage_in(backend, memory.memory());
  for (const conformance::ExecutorCase& c : conformance::executor_cases()) {
    const std::string case_name(c.name);
    CAPTURE(backend);
    CAPTURE(conditions);
    CAPTURE(resumed);
    CAPTURE(case_name);
    const conformance::ExecutorOutcome r = conformance::check_executor(c, backend, memory, resumed);
    if (!r.not_supported.empty()) {
      ++run.refused;
      const std::string reason = r.not_supported.front();
      CAPTURE(reason);
      CHECK(!(coverage != nullptr && coverage->every_executor_case));
      continue;
    }
    ++run.ran;
    CAPTURE(r.worst);
    CHECK(r.backend == backend);
    CHECK(r.bad_outputs == 0);
    CHECK(r.bad_lse == 0);
    CHECK(r.empty_rows == r.reference_empty_rows);
    extra(c, r);
  }
  return run;
}

}  // namespace spattn::test
