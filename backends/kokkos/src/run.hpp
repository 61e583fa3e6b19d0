// The Kokkos kernels' entry points as plain functions (no Kokkos header): each runs on the execution space that
// serves its tensors' memory (host memory: the default host space; CUDA memory: Kokkos::Cuda). Inputs validated and
// covered (backend.cpp). attend.cpp holds the executor, estimate.cpp the estimators (compiled without fused
// multiply-adds on a GPU: their fp32 rules must round as on the host).
#pragma once

#include <vector>

#include "spattn/attend_options.hpp"
#include "spattn/kokkos/backend.hpp"
#include "spattn/estimate.hpp"
#include "spattn/method_config.hpp"
#include "spattn/mask.hpp"
#include "spattn/anchor.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::kokkos {

inline constexpr int kRowBlock = 128;  ///< executor rows per team: the reference's row block

/// Whether this build has a Kokkos execution space for `memory`.
bool serves(Memory memory);

AttendStats run_attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TileMask& mask, const TensorView& o, const AttendOptions& options);
/// The executor over a mask whose CSR arrays lie in the tensors' memory.
AttendStats run_attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                       const MaskShape& mask, const std::int64_t* row_ptr, const std::int32_t* tiles,
                       const TensorView& o, const AttendOptions& options);

/// What a DeviceEstimate holds: the mask's CSR arrays in `memory` (pointers into `storage`'s Kokkos Views) and how to
/// bring the rest to the host.
struct DeviceEstimate::Data {
  MaskShape shape;
  Memory memory = Memory::host;
  std::string method;
  const std::int64_t* row_ptr = nullptr;
  const std::int32_t* tiles = nullptr;
  virtual ~Data() = default;
  virtual Estimate download() const = 0;
};

/// A host mask copied as it is into `memory` (kokkos::upload).
std::shared_ptr<const DeviceEstimate::Data> upload_mask(const TileMask& mask, Memory memory);
/// The method's estimate with its mask in the tensors' memory.
std::shared_ptr<const DeviceEstimate::Data> run_estimate_on_device(const MethodConfig& config, const Problem& problem,
                                                                  const TensorView& q, const TensorView& k);
/// The method's estimate, downloaded.
Estimate run_estimate(const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k);
/// estimate → attend with the mask kept in the tensors' memory between the stages; the estimate downloaded after the
/// executor.
SparseAttentionResult run_sparse_attention(const MethodConfig& config, const Problem& problem, const TensorView& q,
                                           const TensorView& k, const TensorView& v, const TensorView& o,
                                           const AttendOptions& options);
/// BFLA's estimate and its group scores (bfla_estimate_with_scores).
TileMask run_bfla_with_scores(const Problem& problem, const TensorView& q, const TensorView& k,
                              const bfla::Config& config, std::vector<std::vector<float>>& scores);

}  // namespace spattn::kokkos
