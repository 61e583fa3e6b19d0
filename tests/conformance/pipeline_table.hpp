// The estimator table through sparse_attention() on one backend that runs it as a pipeline (the mask kept in the
// backend's memory between the stages): host memory in test_conformance.cpp, CUDA memory in tests/gpu.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "conformance.hpp"
#include "contract.hpp"

namespace spattn::test {

/// Every estimator case on `backend` (SpargeAttn's with PV-skip on, base 2: a tile whose weights all lie below 2^-2
/// of the row's running max, so that the method's executor options must reach the pipeline's executor): the mask
/// is the backend's own estimate, the output and counts the reference executor's over it. A backend that the coverage
/// table (contract.hpp) says pipelines every case (Kokkos) must, FG-Attn's union semantics included (its merge plan is
/// built where the mask lies).
inline void check_pipeline_table(const std::string& backend, conformance::MemoryAdapter& memory) {
  int ran = 0, refused = 0, skipping = 0, union_cases = 0, union_ran = 0;
  for (conformance::EstimatorCase c : conformance::estimator_cases()) {
    const std::string case_name(c.name);
    CAPTURE(backend);
    CAPTURE(case_name);
    if (auto* sp = std::get_if<sparge::Config>(&c.config)) sp->pv_threshold = {2.0f};
    if (const auto* f = std::get_if<fg_attn::Config>(&c.config); f != nullptr && f->semantics == fg_attn::Semantics::union_keys)
      ++union_cases;
    const conformance::PipelineOutcome r = conformance::check_pipeline(c, backend, memory);
    if (!r.not_supported.empty()) {
      ++refused;
      continue;
    }
    ++ran;
    if (const auto* f = std::get_if<fg_attn::Config>(&c.config); f != nullptr && f->semantics == fg_attn::Semantics::union_keys)
      ++union_ran;
    CHECK(r.estimate_backend == backend);
    CHECK(r.attend_backend == backend);
    CHECK(r.same_mask);
    CHECK(r.same_counts);
    CHECK(r.same_stats);
    CHECK(r.bad_outputs == 0);
    skipping += r.pv_skipped > 0 ? 1 : 0;
  }
  if (const conformance::BackendCoverage* coverage = conformance::coverage_in(backend, memory.memory());
      coverage != nullptr && coverage->every_pipeline_case) {
    CHECK(refused == 0);
    CHECK(ran == static_cast<int>(conformance::estimator_cases().size()));
    CHECK(union_cases >= 4);
    CHECK(union_ran == union_cases);
    CHECK(skipping > 0);
  }
  MESSAGE(backend << ": " << ran << " pipeline cases, " << refused << " not pipelined, " << skipping
                  << " with PV-skipped pairs");
}

}  // namespace spattn::test
