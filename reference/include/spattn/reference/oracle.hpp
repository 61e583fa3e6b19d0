// The oracle mask on the CPU (definition: core/include/spattn/oracle.hpp). Inputs must already be validated
// (spattn::oracle_tile_mass / spattn::oracle_mask in spattn.hpp do it).
#pragma once

#include "spattn/oracle.hpp"
#include "spattn/problem.hpp"

namespace spattn::reference {

/// The exact tile masses of every row of `shape` (Hq or Hkv mask heads). Cost: the Q·Kᵀ half of dense attention.
/// Deterministic: one task per (batch, mask head, query tile), every sum in a fixed order.
OracleMass oracle_tile_mass(const Problem& problem, const TensorView& q, const TensorView& k, const MaskShape& shape);

/// The oracle's mask for a budget: per row, the tiles in the TopCdf order up to oracle_keep_count.
TileMask oracle_select(const OracleMass& mass, const OracleBudget& budget);

}  // namespace spattn::reference
