// The CUDA estimators behind Plan (plan.cu) and CudaBackend::estimate: one object per method and problem shape
// that allocates its workspace once and then only enqueues kernels (graph-capturable); and the executor's coverage.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spattn/cuda/backend.hpp"
#include "spattn/method_config.hpp"

namespace spattn::cuda {

class DeviceEstimator {
 public:
  virtual ~DeviceEstimator() = default;
  /// The shape of the mask run() fills.
  virtual MaskShape shape() const = 0;
  /// Enqueues the estimate of q, k (device tensors of the planned problem) into `mask` (built with shape()).
  virtual void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) = 0;
  virtual std::size_t workspace_bytes() const = 0;
};

/// Why the CUDA estimators cannot take `config` for `problem` (empty: they can).
std::vector<std::string> estimator_not_supported_reasons(const MethodConfig& config, const Problem& problem);
/// cu_q / cu_kv: device copies of the problem's sequence offsets (null when not variable-length), kept by the caller.
std::unique_ptr<DeviceEstimator> make_estimator(const MethodConfig& config, const Problem& problem,
                                                const std::int64_t* cu_q, const std::int64_t* cu_kv);

/// What the executor cannot run for this problem and mask shape / these tensors (backend.cu; empty: it can).
std::vector<std::string> executor_not_supported_reasons(const Problem& problem, const MaskShape& shape,
                                                        const AttendOptions& options);
std::vector<std::string> tensor_not_supported_reasons(const TensorView& q, const TensorView& k, const TensorView& v,
                                                      const TensorView& o);

// One factory per method (its .cu file).
std::vector<std::string> sparge_not_supported_reasons(const sparge::Config& config, const Problem& problem);
std::unique_ptr<DeviceEstimator> make_sparge_estimator(const sparge::Config& config, const Problem& problem,
                                                       const std::int64_t* cu_q, const std::int64_t* cu_kv);

}  // namespace spattn::cuda
