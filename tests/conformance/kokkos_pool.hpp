// Block pooling on the Kokkos backend (backends/kokkos/src/block_pool.hpp) staged in chunks of any length: SpargeAttn's
// pooled means and self-similarities and FG-Attn's tile means carry every sum from chunk to chunk in row order, so
// the masks stay bit-identical to the reference's whatever the chunk. SPATTN_KOKKOS_POOL_ROWS caps a chunk's rows
// (tests only): at 1 and 5 rows every block of the table is many chunks, with a ragged last one. Inputs in a
// MemoryAdapter's memory (host: tests/test_kokkos.cpp; CUDA: tests/gpu/test_kokkos_cuda.cpp).
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "conformance.hpp"
#include "for_each_case.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::test {

inline void check_pool_chunks(conformance::MemoryAdapter& memory) {
  for (const char* rows : {"1", "5"}) {
    setenv("SPATTN_KOKKOS_POOL_ROWS", rows, 1);
    const std::string chunk_rows(rows);
    CAPTURE(chunk_rows);
    const auto same_mask = [&](const conformance::EstimatorCase& c, const auto&) {
      const conformance::EstimatorOutcome r = conformance::check_estimator(c, "kokkos", memory);
      REQUIRE(r.not_supported.empty());
      CHECK(r.decisions > 0);
      CHECK(r.differing == 0);
    };
    CHECK(conformance::for_each_case<sparge::Config>(same_mask) > 0);
    CHECK(conformance::for_each_case<fg_attn::Config>(same_mask) > 0);
  }
  unsetenv("SPATTN_KOKKOS_POOL_ROWS");
}

}  // namespace spattn::test
