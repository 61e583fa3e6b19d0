// The shared conformance table on Kokkos' CUDA execution space: tensors in CUDA memory, backend "kokkos" (the
// hand-written CUDA backend is linked too but not asked). Needs a GPU: built with a CUDA Kokkos, not part of ctest.
// Contracts (DESIGN.md §5): executor outputs within the dtype's tolerance of the reference; masks as the contract
// table's (kokkos, method) rows say (conformance/contract.cpp, the same rows as on the host): SpargeAttn and FG-Attn
// bit-identical (the core's fixed-order fp32 rules, compiled without contraction); BFLA's group scores, AnchorAttention's
// anchors and SALE's sink-local states are fma chains or tensor-core sums, not the reference's Eigen products: at most
// 1 decision in 50 may differ.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "../common.hpp"
#include "../conformance/conformance.hpp"
#include "../conformance/estimator_table.hpp"
#include "../conformance/executor_options.hpp"
#include "../conformance/executor_table.hpp"
#include "../conformance/kokkos_anchor.hpp"
#include "../conformance/kokkos_bfla.hpp"
#include "../conformance/kokkos_pool.hpp"
#include "../conformance/pipeline_table.hpp"
#include "cuda_memory.hpp"

namespace spattn::test {
namespace {

// Each case on the kernel the dispatch picks (the tensor-core one for fp16 / bf16 with D = Dv = 64 or 128, else the
// register-tiled one for Dv 64 / 128, else the generic one), then forced onto the register-tiled one
// (SPATTN_KOKKOS_EXECUTOR=tile) and the generic one (=generic).
TEST_CASE("Kokkos CUDA: executor table against the reference (plain, then resumed: state_out + resume)") {
  CudaMemory memory;
  int ran = 0, on_mma = 0;
  for (const char* forced : {"", "tile", "generic"}) {
    const std::string kernel(forced);
    if (kernel.empty()) unsetenv("SPATTN_KOKKOS_EXECUTOR");
    else setenv("SPATTN_KOKKOS_EXECUTOR", forced, 1);
    // The dispatch (the conformance tensors are 16-byte aligned with strides of whole rows).
    const auto dispatch = [&](const conformance::ExecutorCase& c, const conformance::ExecutorOutcome& r) {
      const std::int64_t dv = c.dv == 0 ? c.d : c.dv;
      const bool mma = c.dtype != DType::f32 && c.d == dv && (c.d == 64 || c.d == 128);
      const bool tile = dv == 64 || dv == 128;
      const std::string expected = kernel == "generic" ? "generic"
                                   : kernel.empty() && mma ? "mma"
                                   : tile              ? "tile"
                                                       : "generic";
      CHECK(r.kernel == expected);
      on_mma += r.kernel == "mma" ? 1 : 0;
    };
    for (const bool resumed : {false, true}) {
      const ExecutorTableRun run =
          run_executor_table("kokkos", memory, resumed, "SPATTN_KOKKOS_EXECUTOR=" + kernel, dispatch);
      CHECK(run.refused == 0);
      ran += run.ran;
    }
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

// Each case held to its (kokkos, method) row of the contract table (conformance/contract.cpp); every case runs.
TEST_CASE("Kokkos CUDA: estimator table against the reference, decision by decision") {
  CudaMemory memory;
  const EstimatorTableRun run = run_estimator_table("kokkos", memory);
  MESSAGE("Kokkos CUDA: " << run.ran << " estimator cases");
  CHECK(run.ran == static_cast<int>(conformance::estimator_cases().size()));
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
