// The shared conformance table on Kokkos' CUDA execution space: tensors in CUDA memory, backend "kokkos" (the
// hand-written CUDA backend is linked too but not asked). Needs a GPU: built with a CUDA Kokkos, not part of ctest.
// Contracts (DESIGN.md §5): executor outputs within the dtype's tolerance of the reference; SpargeAttn and FG-Attn
// masks bit-identical (the core's fixed-order fp32 rules, compiled without contraction); BFLA's group scores and
// AnchorAttention's anchors and SALE's sink-local states are fma chains in a fixed order, not the reference's Eigen
// products: at most 2 % of their decisions may differ (as on the host).
#include <doctest/doctest.h>

#include <cstdlib>
#include <variant>

#include "../common.hpp"
#include "../conformance/conformance.hpp"
#include "../conformance/pipeline_table.hpp"
#include "../executor_options.hpp"
#include "../kokkos_anchor.hpp"
#include "../kokkos_bfla.hpp"
#include "../kokkos_pool.hpp"
#include "cuda_memory.hpp"

namespace spattn::test {
namespace {

// Each case on the kernel the dispatch picks (the tensor-core one for fp16 / bf16 with D = Dv = 64 or 128, else the
// register-tiled one for Dv 64 / 128, else the generic one), then forced onto the register-tiled one
// (SPATTN_KOKKOS_EXECUTOR=tile) and the generic one (=generic).
TEST_CASE("Kokkos CUDA: executor table against the reference (plain, then resumed: state_out + resume)") {
  CudaMemory memory;
  int ran = 0, on_mma = 0;
  for (const char* forced : {"", "tile", "generic"})
  for (const bool resumed : {false, true})
  for (const conformance::ExecutorCase& c : conformance::executor_cases()) {
    const std::string case_name(c.name), kernel(forced);
    CAPTURE(case_name);
    CAPTURE(resumed);
    CAPTURE(kernel);
    if (kernel.empty()) unsetenv("SPATTN_KOKKOS_EXECUTOR");
    else setenv("SPATTN_KOKKOS_EXECUTOR", forced, 1);
    const conformance::ExecutorOutcome r = conformance::check_executor(c, "kokkos", memory, resumed);
    REQUIRE(r.not_supported.empty());
    ++ran;
    CAPTURE(r.worst);
    CHECK(r.backend == "kokkos");
    CHECK(r.bad_outputs == 0);
    CHECK(r.bad_lse == 0);
    CHECK(r.empty_rows == r.reference_empty_rows);
    // The dispatch (the conformance tensors are 16-byte aligned with strides of whole rows).
    const std::int64_t dv = c.dv == 0 ? c.d : c.dv;
    const bool mma = c.dtype != DType::f32 && c.d == dv && (c.d == 64 || c.d == 128);
    const bool tile = dv == 64 || dv == 128;
    const std::string expected = kernel == "generic" ? "generic"
                                 : kernel.empty() && mma ? "mma"
                                 : tile              ? "tile"
                                                     : "generic";
    CHECK(r.kernel == expected);
    on_mma += r.kernel == "mma" ? 1 : 0;
  }
  unsetenv("SPATTN_KOKKOS_EXECUTOR");
  MESSAGE("Kokkos CUDA executor table: " << ran << " runs, " << on_mma << " on the tensor-core kernel");
  CHECK(ran == 6 * static_cast<int>(conformance::executor_cases().size()));
  CHECK(on_mma > 0);
}

TEST_CASE("Kokkos CUDA: PV-skip decisions and outputs as the reference's") {
  CudaMemory memory;
  check_pv_skip(memory);
}

TEST_CASE("Kokkos CUDA: the int8 QKᵀ mode against the reference over the executor table") {
  CudaMemory memory;
  check_int8(memory);
}

TEST_CASE("Kokkos CUDA: estimator table against the reference, decision by decision") {
  CudaMemory memory;
  int ran = 0;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const conformance::EstimatorOutcome r = conformance::check_estimator(c, "kokkos", memory);
    const bool approx = std::holds_alternative<bfla::Config>(c.config) ||
                        std::holds_alternative<anchor_attn::Config>(c.config) || std::holds_alternative<sale::Config>(c.config);
    REQUIRE(r.not_supported.empty());  // every estimator
    ++ran;
    CHECK(r.backend == "kokkos");
    CHECK(r.decisions > 0);
    if (approx) {
      MESSAGE(case_name << ": " << r.differing << " of " << r.decisions << " decisions differ from the reference");
      CHECK(r.differing * 50 <= r.decisions);
    } else {
      CHECK(r.differing == 0);
    }
  }
  MESSAGE("Kokkos CUDA: " << ran << " estimator cases");
  CHECK(ran == static_cast<int>(conformance::estimator_cases().size()));
}

// SpargeAttn's and FG-Attn's block pooling with 128 threads a team, staged in chunks of 1 and 5 rows.
TEST_CASE("Kokkos CUDA: SpargeAttn and FG-Attn pooled in staged chunks of 1 and 5 rows, masks as the reference's") {
  CudaMemory memory;
  check_pool_chunks(memory);
}

// BFLA's group scores on the tensor cores (bfla_mma.hpp, every BFLA case of the table is fp16 / bf16), then on the
// portable kernel (SPATTN_KOKKOS_MMA=0): within the rounding bound of the reference's, the mask exact given them.
TEST_CASE("Kokkos CUDA: BFLA group scores (tensor cores, then portable) within their rounding bound, every rule after them exact") {
  CudaMemory memory;
  check_bfla_scores(memory, 4.0);
  setenv("SPATTN_KOKKOS_MMA", "0", 1);
  check_bfla_scores(memory, 2.5);
  unsetenv("SPATTN_KOKKOS_MMA");
}

// AnchorAttention on the tensor cores (flash_mma.hpp's statistics pass, anchor_mma.hpp's stripes: every AnchorAttention
// case of the table is fp16 / bf16 with D = 64 or 128 and at most 16 pooled blocks a group; c = 4 for their sums), then
// on the portable kernels (SPATTN_KOKKOS_MMA=0: c = 2.5, stripes exact given the anchors).
TEST_CASE("Kokkos CUDA: AnchorAttention anchors within their rounding bound, stripes within the score bound (exact: portable)") {
  CudaMemory memory;
  check_anchor_attn(memory, 4.0, false);
  setenv("SPATTN_KOKKOS_MMA", "0", 1);
  check_anchor_attn(memory, 2.5, true);
  unsetenv("SPATTN_KOKKOS_MMA");
}

TEST_CASE("Kokkos CUDA: sparse_attention as one pipeline (mask built and read in device memory) over the estimator table") {
  CudaMemory memory;
  check_pipeline_table("kokkos", memory);
}

}  // namespace
}  // namespace spattn::test
