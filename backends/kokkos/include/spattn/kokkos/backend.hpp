// The portable Kokkos backend as a dispatchable backend: the tile-sparse executor and the estimators it implements,
// one source for every Kokkos execution space. No Kokkos header is included here: a consumer of spattn does not need
// Kokkos' compiler settings.
//
// Which memory it serves (the dispatcher tries it after the hand-written CUDA backend and before the reference):
// - tensors in CUDA memory when Kokkos was built with CUDA (its default execution space), automatically;
// - host tensors only when asked for by name (options.backend = "kokkos"): on the host the reference is the
//   default, since it is the definition and at least as fast on CPU threads.
#pragma once

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
};

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
