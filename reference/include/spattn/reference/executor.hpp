// The reference backend: the executor — exact tile-sparse attention on the CPU (Eigen for the tile GEMMs, oneTBB
// over independent row blocks) — and every method's estimator. It defines the result every other backend is
// checked against.
//
// Semantics (DESIGN.md §3): query row i of mask tile t attends to the keys of the kept key tiles, clipped
// by the causal rule (j <= i + Nkv - Nq) and the sequence end; softmax over that set, fp32 accumulation
// whatever the input dtype; a row with no key outputs zeros.
//
// Determinism: work is split into row blocks (at most 128 rows of one query tile of one head) that share
// nothing; each block visits its keys in ascending order in chunks of at most 256 keys (one key tile per
// chunk when PV-skip is on), so the bits of the output do not depend on the number of threads or on
// scheduling.
#pragma once

#include "spattn/backend.hpp"

namespace spattn::reference {

/// Runs the executor. Inputs must already be validated (spattn::attend does it).
AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, const AttendOptions& options = {});

/// The reference as a dispatchable backend (covers every valid call on host memory).
class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  std::vector<std::string> not_supported_reasons(const Problem&, const TensorView& q, const TensorView& k,
                                                 const TensorView& v, const TileMask&, const TensorView& o,
                                                 const AttendOptions&) const override {
    for (const TensorView* t : {&q, &k, &v, &o})
      if (t->memory != Memory::host) return {"tensors must be in host memory"};
    return {};
  }
  AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TileMask& mask, const TensorView& o, const AttendOptions& options) const override {
    return reference::attend(problem, q, k, v, mask, o, options);
  }
  /// Every method, every shape the core describes, on host memory.
  std::vector<std::string> estimate_not_supported_reasons(const MethodConfig&, const Problem&, const TensorView& q,
                                                          const TensorView& k, const EstimateOptions&) const override {
    for (const TensorView* t : {&q, &k})
      if (t->memory != Memory::host) return {"tensors must be in host memory"};
    return {};
  }
  Estimate estimate(const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k,
                    const EstimateOptions& options) const override;
};

}  // namespace spattn::reference
