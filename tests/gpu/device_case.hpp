// A case of the shared estimator table on the device (q, k and the sequence offsets uploaded) and a device estimator's
// run into a poisoned mask whose raw rows are checked before the mask comes back: the start of the CUDA estimator
// tests (test_cuda_estimators.cpp) and of the Plan tests (test_cuda_plan.cpp).
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "../conformance/conformance.hpp"
#include "cuda_memory.hpp"
#include "estimator_interface.cuh"
#include "spattn/cuda/backend.hpp"

namespace spattn::test {

/// The raw rows a device estimator wrote (before download()'s clean-up, which sorts and clips): every row_end within
/// its row's capacity, every row's tiles strictly ascending and reachable. Returns the number of bad rows.
inline std::int64_t bad_device_rows(const cuda::DeviceTileMask& m) {
  const MaskShape& s = m.shape();
  const std::int64_t rows = s.num_rows(), tq = s.num_q_tiles();
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rows)), end(begin.size());
  std::vector<std::int32_t> tiles(static_cast<std::size_t>(m.tile_slots()));
  cuda_check(cudaMemcpy(begin.data(), m.row_begin(), begin.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost));
  cuda_check(cudaMemcpy(end.data(), m.row_end(), end.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost));
  cuda_check(cudaMemcpy(tiles.data(), m.tiles(), tiles.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  std::int64_t bad = 0, slot = 0;  // row r's slots follow the earlier rows', as many as its reachable tiles
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = begin[static_cast<std::size_t>(r)], e = end[static_cast<std::size_t>(r)];
    const std::int64_t reach = s.reachable_k_tiles(r / (s.mask_heads * tq), r % tq);
    bool ok = b == slot && e >= b && e <= b + reach;
    slot += reach;
    for (std::int64_t i = b; ok && i < e; ++i) {
      const std::int32_t t = tiles[static_cast<std::size_t>(i)];
      ok = t >= 0 && t < reach && (i == b || tiles[static_cast<std::size_t>(i - 1)] < t);
    }
    bad += ok ? 0 : 1;
  }
  return bad + (slot == m.tile_slots() ? 0 : 1);
}

/// One case of the shared estimator table with its q, k and sequence offsets on the device: the start of every
/// estimator decomposition test (test_cuda_estimators.cpp) and of the Plan tests (test_cuda_plan.cpp).
struct DeviceCase {
  conformance::EstimatorInputs in;
  TensorView q, k;
  cuda::detail::DeviceArray<std::int64_t> cu_q, cu_kv;
  DeviceCase(const conformance::EstimatorCase& c, CudaMemory& memory)
      : in(conformance::estimator_inputs(c)), q(memory.upload(in.q)), k(memory.upload(in.k)),
        cu_q(in.problem.cu_seqlens_q), cu_kv(in.problem.cu_seqlens_kv) {}
};

/// Poisons `mask`'s row ends and slots (all bits set), runs `est` on q, k into it, waits, checks the raw rows
/// (bad_device_rows) and returns the mask on the host: the start of every estimator decomposition test.
inline TileMask run_poisoned(cuda::DeviceEstimator& est, const TensorView& q, const TensorView& k, cuda::DeviceTileMask& mask) {
  const auto rows = static_cast<std::size_t>(mask.shape().num_rows());
  cuda_check(cudaMemset(mask.row_end(), 0xff, rows * sizeof(std::int64_t)));
  cuda_check(cudaMemset(mask.tiles(), 0xff, static_cast<std::size_t>(mask.tile_slots()) * sizeof(std::int32_t)));
  est.run(q, k, mask, nullptr);
  cuda_check(cudaDeviceSynchronize());
  REQUIRE(bad_device_rows(mask) == 0);
  return mask.download(nullptr);
}

}  // namespace spattn::test
