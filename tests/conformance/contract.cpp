// The conformance contract table (contract.hpp): one row per (backend, method).
#include "contract.hpp"

#include <sstream>
#include <stdexcept>

#include "spattn/method_config.hpp"

namespace spattn::conformance {
namespace {

Contract exact() { return Contract{}; }

/// At most one decision in `one_in` may differ from the reference's, for the reason `why`.
Contract bounded(std::int64_t one_in, const char* why, Coverage coverage = {"every case", every_case}) {
  Contract c;
  c.agreement = Agreement::bounded_fraction;
  c.one_in = one_in;
  c.coverage = coverage;
  c.why = why;
  return c;
}

// Why Kokkos' and the CUDA backend's masks of three methods may differ from the reference's in a few decisions at a
// threshold: the sums they decide on are computed in another order than the reference's Eigen products (the
// decomposition tests bound each sum by its rounding error and check every rule after it bit for bit:
// kokkos_bfla.hpp, kokkos_anchor.hpp, test_kokkos.cpp's SALE test, gpu/test_cuda_estimators.cpp).
constexpr const char* kKokkosBfla =
    "group scores are fma chains in a fixed order (tensor-core sums on Kokkos::Cuda), not the reference's Eigen products";
constexpr const char* kKokkosAnchor =
    "anchors are fma chains in a fixed order (tensor-core sums on Kokkos::Cuda), not the reference's Eigen products";
constexpr const char* kKokkosSale =
    "sink-local statistics are fma chains in a fixed order, not the reference's Eigen products";
constexpr const char* kCudaBfla = "group scores are tensor-core sums, not the reference's Eigen products";
constexpr const char* kCudaAnchor = "anchors and stripe scores are tensor-core sums, not the reference's Eigen products";
constexpr const char* kCudaSale = "sink-local statistics are tensor-core sums, not the reference's Eigen products";

}  // namespace

const std::vector<ContractRow>& contract_table() {
  static const std::vector<ContractRow> rows = {
      // backend      method    contract
      // The reference against itself on a copy of the inputs with one thread: deterministic, bit for bit (§5.1).
      {"reference", "dense", exact()},
      {"reference", "sparge", exact()},
      {"reference", "sale", exact()},
      {"reference", "anchor", exact()},
      {"reference", "fgattn", exact()},
      {"reference", "bfla", exact()},
      // Kokkos (host spaces and Kokkos::Cuda): the core's fixed-order rules, except three methods' sums.
      {"kokkos", "dense", exact()},
      {"kokkos", "sparge", exact()},
      {"kokkos", "sale", bounded(50, kKokkosSale)},
      {"kokkos", "anchor", bounded(50, kKokkosAnchor)},
      {"kokkos", "fgattn", exact()},
      {"kokkos", "bfla", bounded(50, kKokkosBfla)},
      // The hand-written CUDA estimators (compiled with --fmad=false): the same, with tensor-core sums.
      {"cuda", "dense", exact()},
      {"cuda", "sparge", exact()},
      {"cuda", "sale", bounded(50, kCudaSale)},
      {"cuda", "anchor", bounded(50, kCudaAnchor)},
      {"cuda", "fgattn", exact()},
      {"cuda", "bfla", bounded(50, kCudaBfla)},
  };
  return rows;
}

const std::vector<BackendCoverage>& backend_coverage_table() {
  static const std::vector<BackendCoverage> rows = {
      // backend    memory        every executor case   every pipeline case
      {"reference", Memory::host, true, false},  // no pipeline: sparse_attention runs estimate, then attend
      {"kokkos", Memory::host, true, true},
      {"kokkos", Memory::cuda, true, true},  // a CUDA Kokkos (gpu/test_kokkos_cuda.cpp)
      // The hand-written kernels refuse f32 inputs, head dims other than 64/96/128/256 (or Dv ≠ D) and tile_q other
      // than 16, 32 or a multiple of 64, in words; the GPU tests state how many cases they run at least.
      {"cuda", Memory::cuda, false, false},
  };
  return rows;
}

const BackendCoverage* coverage_in(std::string_view backend, Memory memory) {
  for (const BackendCoverage& row : backend_coverage_table())
    if (row.backend == backend && row.memory == memory) return &row;
  return nullptr;
}

const Contract& contract_of(std::string_view backend, std::string_view method) {
  for (const ContractRow& row : contract_table())
    if (row.backend == backend && row.method == method) return row.contract;
  throw std::logic_error("conformance contract: no row for backend '" + std::string(backend) + "', method '" +
                         std::string(method) + "' (add one to tests/conformance/contract.cpp)");
}

const Contract& contract_of(std::string_view backend, const MethodConfig& config) {
  return contract_of(backend, method_name(config));
}

std::string Contract::describe() const {
  std::ostringstream out;
  switch (agreement) {
    case Agreement::exact: out << "exact"; break;
    case Agreement::within_margin: out << "every differing decision within " << margin << " of its threshold"; break;
    case Agreement::bounded_fraction:
      out << "at most 1 in " << one_in << " decisions differ (" << 100.0 / static_cast<double>(one_in) << " %)";
      break;
  }
  out << "; runs " << coverage.what;
  if (why[0] != '\0') out << "; " << why;
  return out.str();
}

}  // namespace spattn::conformance
