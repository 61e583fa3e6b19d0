// AnchorAttention's estimator on the CPU (definition in core/include/spattn/methods/anchor_attn.hpp).
#pragma once

#include <vector>

#include "spattn/anchor.hpp"
#include "spattn/mask.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

struct AnchorEstimate {
  TileMask mask;  ///< tile_q = block·step (one key list per group), tile_k = 1, one mask per query head
  std::vector<AnchorStats> anchors;  ///< per row [(b·Hq + h)·Nq + i]: base-2 (m, l) over its anchor region
  std::int64_t candidates = 0, selected = 0;  ///< candidate (group, key) pairs and those kept as stripes
};

AnchorEstimate anchor_attn_estimate(const Problem& problem, const TensorView& q, const TensorView& k,
                                    const anchor_attn::Config& config);

/// The stripe selection over GIVEN anchors — `anchors[(b·Hq + h)·Nq + i].m` is row i's anchor (another backend's
/// anchor pass) — with the rules anchor_attn_estimate applies to its own; the result holds those anchors. This
/// splits a backend's estimate into its two floating-point stages for the conformance tests (DESIGN.md §5.3).
/// margins (optional) receives each candidate decision's margin, max over the group's pooled blocks of
/// anchor_attn::stripe_margin (≥ 0 ⇔ kept), at [((b·Hq + h)·Tq + t)·Nkv + j] (Nkv: the problem's maximum), NaN
/// where j is not a candidate of group t.
AnchorEstimate anchor_attn_select(const Problem& problem, const TensorView& q, const TensorView& k,
                                  const anchor_attn::Config& config, const std::vector<AnchorStats>& anchors,
                                  std::vector<float>* margins = nullptr);

}  // namespace spattn::reference
