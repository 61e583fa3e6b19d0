// The portable Kokkos backend as a dispatchable backend: the tile-sparse executor and the estimators it implements,
// one source for every Kokkos execution space. No Kokkos header is included here: a consumer of spattn does not need
// Kokkos' compiler settings.
//
// Which memory it serves (the dispatcher tries it after the hand-written CUDA backend and before the reference):
// - tensors in CUDA memory when Kokkos was built with CUDA (its default execution space), automatically;
// - host tensors only when asked for by name (options.backend = "kokkos"): on the host the reference is the
//   default, since it is the definition and at least as fast on CPU threads.
#pragma once

#include <memory>

#include "spattn/backend.hpp"

namespace spattn::kokkos {

class KokkosBackend final : public Backend {
 public:
  std::string_view name() const override { return "kokkos"; }
  std::vector<std::string> not_supported_reasons(const Problem& problem, const TensorView& q, const TensorView& k,
                                                 const TensorView& v, const TileMask& mask, const TensorView& o,
                                                 const AttendOptions& options) const override;
  AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TileMask& mask, const TensorView& o, const AttendOptions& options) const override;
  std::vector<std::string> estimate_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                          const TensorView& q, const TensorView& k,
                                                          const EstimateOptions& options) const override;
  Estimate estimate(const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k,
                    const EstimateOptions& options) const override;
  /// estimate → attend with the mask left where the estimator wrote it (the CSR arrays built in the tensors' memory:
  /// no host round trip between the stages); every method but FG-Attn's union semantics, whose planner runs on the
  /// host.
  std::vector<std::string> sparse_attention_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                                  const TensorView& q, const TensorView& k,
                                                                  const TensorView& v, const TensorView& o,
                                                                  const AttendOptions& options) const override;
  SparseAttentionResult sparse_attention(const MethodConfig& config, const Problem& problem, const TensorView& q,
                                         const TensorView& k, const TensorView& v, const TensorView& o,
                                         const AttendOptions& options) const override;
};

/// A Kokkos estimate whose mask stays in the memory of the tensors it was computed from (on a GPU: device memory): the
/// CSR arrays of a TileMask, built there from the estimator's decisions, and the per-row outputs the method exports.
/// attend() below reads the mask where it lies, so estimate → attend has no host round trip of the mask; download()
/// brings the whole Estimate to the host when the caller wants it. Kernels run on the Kokkos execution space's default
/// instance. sparse_attention() on the Kokkos backend is estimate_on_device() then attend(). It holds device memory
/// until the last copy is destroyed, which must happen before Kokkos is finalized (spattn finalizes it at exit when
/// it initialized it: do not keep one in a static).
class DeviceEstimate {
 public:
  struct Data;  ///< the arrays (backends/kokkos/src/run.hpp)
  explicit DeviceEstimate(std::shared_ptr<const Data> data);
  const MaskShape& shape() const;
  Memory memory() const;
  /// Waits for the estimator's kernels; the host Estimate (mask, margins, anchor states, counts, names).
  Estimate download() const;
  const Data& data() const { return *data_; }

 private:
  std::shared_ptr<const Data> data_;
};

/// The method's estimate on the Kokkos backend with its mask left in the tensors' memory. Validates like
/// spattn::estimate() (the input range scan aside) and throws spattn::Error with the backend's reasons when it does not
/// cover the call. FG-Attn's union semantics are refused: their planner runs on the host (use spattn::estimate).
DeviceEstimate estimate_on_device(const MethodConfig& config, const Problem& problem, const TensorView& q,
                                  const TensorView& k);
/// A mask made elsewhere (a host TileMask, checked: TileMask::validate), copied once into `memory` (CUDA memory on a
/// CUDA Kokkos; host memory on any) as a DeviceEstimate that attend() below reads as often as wanted, like
/// cuda::DeviceTileMask for the hand-written backend. download() gives the mask back (method "uploaded").
DeviceEstimate upload(const TileMask& mask, Memory memory);
/// The executor over a DeviceEstimate's mask (tensors in the memory it was estimated in; the method's executor
/// options are the caller's: attend_options_of(config, options)). Validates like spattn::attend().
AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                   const DeviceEstimate& estimate, const TensorView& o, const AttendOptions& options = {});

/// BFLA's Kokkos estimate (validated inputs) and the group scores it was built from, per (b, hq) as
/// reference::bfla_group_scores lays them out (pairs outside the causal blocks 0): the test feeds them to
/// reference::bfla_mask_from_scores, whose mask must be this one bit for bit.
TileMask bfla_estimate_with_scores(const Problem& problem, const TensorView& q, const TensorView& k,
                                   const bfla::Config& config, std::vector<std::vector<float>>& scores);

/// AnchorAttention's Kokkos estimate (validated inputs) and its anchor pass's states, per row as
/// reference::AnchorEstimate::anchors: the test feeds them to reference::anchor_attn_select, whose mask must be this
/// one bit for bit.
TileMask anchor_attn_estimate_with_anchors(const Problem& problem, const TensorView& q, const TensorView& k,
                                          const anchor_attn::Config& config, std::vector<AnchorStats>& anchors);

/// SALE's Kokkos estimate (validated inputs), its margins and its sink-local states, as reference::SaleEstimate's: the
/// test feeds the states to reference::sale_select, whose mask and margins must be these bit for bit.
TileMask sale_estimate_with_states(const Problem& problem, const TensorView& q, const TensorView& k,
                                   const sale::Config& config, std::vector<float>& margins,
                                   std::vector<SoftmaxState>& sink_local);

/// The Kokkos execution spaces this build runs on, e.g. "Serial" or "Cuda (device), Serial (host)".
std::string execution_spaces();

}  // namespace spattn::kokkos
