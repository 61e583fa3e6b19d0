// The conformance contract as data (DESIGN.md §5): for each (backend, method), how the backend's estimator masks must
// agree with the reference's, decision by decision, and which cases of the shared estimator table the backend must run
// (the others it may refuse, with its reasons); for each (backend, memory it reads), whether it must run every case of
// the executor table and every estimator case as one pipeline. ONE table (contract.cpp), read by every runner: the host table
// (test_conformance.cpp, every linked backend), the CUDA backend (gpu/test_cuda_estimators.cpp, gpu/test_cuda_plan.cpp)
// and Kokkos on CUDA (gpu/test_kokkos_cuda.cpp). A pair the table does not list fails the run: adding a backend or a
// method adds its rows here.
//
// The agreements (DESIGN.md §5.2–5.3):
//   exact            every decision is the reference's: masks bit-identical (integer-domain rules, and float-domain
//                    rules in the core's fixed-order fp32 arithmetic);
//   within_margin    every differing decision lies within `margin` (raw logits) of its threshold, measured on the
//                    reference's own margins (methods that export them: SALE);
//   bounded_fraction at most one decision in `one_in` differs (50: 2 %): sums that are not the reference's (tensor-core
//                    or fma-chain scores and statistics) may flip a decision at a threshold; the decomposition tests
//                    bound those sums and check every rule after them bit for bit.
// Executor outputs have one contract for every backend (within the dtype's tolerance, NaN never passes: check_executor).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conformance.hpp"

namespace spattn::conformance {

enum class Agreement { exact, within_margin, bounded_fraction };

/// The cases of the shared estimator table a backend must run for a method.
struct Coverage {
  const char* what;                        ///< in words, e.g. "every case", "head_dim 64 and 128"
  bool (*covers)(const EstimatorCase& c);  ///< whether the backend must run case c
};

inline bool every_case(const EstimatorCase&) { return true; }

struct Contract {
  Agreement agreement = Agreement::exact;
  std::int64_t one_in = 0;  ///< bounded_fraction: differing · one_in ≤ decisions
  double margin = 0.0;      ///< within_margin: a differing decision is explained when |reference margin| ≤ margin
  Coverage coverage = {"every case", every_case};
  const char* why = "";  ///< the reason for anything but exact (what sums differ from the reference's)

  /// "exact", "every differing decision within 0.5 of its threshold", "at most 1 in 50 decisions (2 %)".
  std::string describe() const;
};

struct ContractRow {
  const char* backend;  ///< Backend::name()
  const char* method;   ///< method_name(config)
  Contract contract;
};

/// The table: one row per (backend, method).
const std::vector<ContractRow>& contract_table();

/// The row of (backend, method_name(config)); throws std::logic_error (failing the test) for a pair the table lacks.
const Contract& contract_of(std::string_view backend, const MethodConfig& config);
const Contract& contract_of(std::string_view backend, std::string_view method);

/// What a backend runs of the other two tables in a memory it reads (in other memory it refuses every call, with its
/// reasons: e.g. the CUDA backend on the host tables of a CUDA build).
struct BackendCoverage {
  const char* backend;  ///< Backend::name()
  Memory memory;        ///< a memory the backend reads
  bool every_executor_case;  ///< runs every case of the executor table (else: what it covers, refusing the rest)
  bool every_pipeline_case;  ///< runs every estimator case as one pipeline (sparse_attention, the mask kept in memory)
};

/// The table: one row per (backend, memory it reads).
const std::vector<BackendCoverage>& backend_coverage_table();

/// The row of (backend, memory); null when the backend does not read that memory.
const BackendCoverage* coverage_in(std::string_view backend, Memory memory);

/// Whether `backend` reads tensors in `memory`: its rows' coverage applies there.
inline bool reads_memory(std::string_view backend, Memory memory) { return coverage_in(backend, memory) != nullptr; }

/// Checks a run of `decisions` compared decisions, `differing` of them unlike the reference's, `outside_margin` of
/// those not explained by the reference's margins (pass `differing` where no margins are known: none is explained).
inline void check_agreement(const Contract& contract, std::int64_t decisions, std::int64_t differing,
                            std::int64_t outside_margin) {
  const std::string agreement = contract.describe();
  CAPTURE(agreement);
  CAPTURE(decisions);
  switch (contract.agreement) {
    case Agreement::exact: CHECK(differing == 0); break;
    case Agreement::within_margin: CHECK(outside_margin == 0); break;
    case Agreement::bounded_fraction: CHECK(differing * contract.one_in <= decisions); break;
  }
}

inline void check_agreement(const Contract& contract, const EstimatorOutcome& r) {
  check_agreement(contract, r.decisions, r.differing, r.outside_margin);
}

}  // namespace spattn::conformance
